"""`CurriculumTask`: one task of the pool, as handed to an environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from curriculum.tracker import TaskTracker

__all__ = ["CurriculumTask"]


class CurriculumTask:
    """A task: its id, env config and label, plus live statistics read from the tracker.

    The statistics are read lock-free from the tracker slot the task occupies; once the task
    is evicted they freeze at zero completions (the slot belongs to another task).
    """

    __slots__ = ("task_id", "env_cfg", "label", "slot", "_tracker")

    def __init__(
        self,
        task_id: int,
        env_cfg: Mapping[str, Any],
        label: str,
        *,
        slot: int,
        tracker: TaskTracker | None = None,
    ) -> None:
        self.task_id = task_id
        self.env_cfg = env_cfg
        self.label = label
        self.slot = slot
        self._tracker = tracker

    def get_env_cfg(self) -> Mapping[str, Any]:
        """The env config this task runs with."""
        return self.env_cfg

    def get_label(self) -> str:
        """The label per-label metrics group this task under."""
        return self.label

    def _live(self) -> bool:
        return self._tracker is not None and self._tracker.task_id_at(self.slot) == self.task_id

    @property
    def num_completions(self) -> int:
        """Completions recorded for this task while it is in the pool."""
        return self._tracker.completions_at(self.slot) if self._live() else 0

    @property
    def mean_score(self) -> float:
        """Mean recorded score (0.0 before the first completion)."""
        return self._tracker.mean_score_at(self.slot) if self._live() else 0.0

    @property
    def last_score(self) -> float:
        """Most recent recorded score (0.0 before the first completion)."""
        return self._tracker.last_score_at(self.slot) if self._live() else 0.0

    def __repr__(self) -> str:
        return f"CurriculumTask(task_id={self.task_id}, label={self.label!r}, env_cfg={dict(self.env_cfg)!r})"
