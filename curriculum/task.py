"""`CurriculumTask`: one task of the pool, as handed to an environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from curriculum.tracker import TaskTracker

__all__ = ["CurriculumTask"]


class CurriculumTask:
    """A task: its id, env config and label, plus live statistics read from the tracker.

    The statistics are read lock-free from the tracker slot the task occupies, each property
    from one state of the slot (never a count from before a completion with a score sum from
    after it); once the task is evicted they read as zero (the slot belongs to another task).
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

    def _stats(self) -> tuple[int, float, float]:
        if self._tracker is None:
            return 0, 0.0, 0.0
        return self._tracker.task_stats(self.slot, self.task_id)

    @property
    def num_completions(self) -> int:
        """Completions recorded for this task while it is in the pool."""
        return self._stats()[0]

    @property
    def mean_score(self) -> float:
        """Mean recorded score (0.0 before the first completion)."""
        return self._stats()[1]

    @property
    def last_score(self) -> float:
        """Most recent recorded score (0.0 before the first completion)."""
        return self._stats()[2]

    def __repr__(self) -> str:
        return f"CurriculumTask(task_id={self.task_id}, label={self.label!r}, env_cfg={dict(self.env_cfg)!r})"
