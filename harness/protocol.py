"""The protocol a curriculum must satisfy to be gated by the scenario suites.

The harness talks to a curriculum only through these methods, so any implementation can be
plugged in with `pytest scenarios/ --gate-curriculum=package.module:factory`, where
`factory(config: CurriculumConfig) -> CurriculumProtocol`. `check_curriculum(obj)` says what
a given object lacks, in the manner of gymnasium's env checker.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "TaskProtocol",
    "CurriculumProtocol",
    "CheckpointableCurriculum",
    "CurriculumProtocolError",
    "check_task",
    "check_curriculum",
    "OPTIONAL_CAPABILITIES",
]


@runtime_checkable
class TaskProtocol(Protocol):
    """What `get_task()` returns."""

    task_id: int
    """Identifies the task in `update_task_performance`."""
    env_cfg: Mapping[str, Any]
    """Applied to the env at the next reset."""
    label: str
    """Groups tasks in per-label metrics."""


@runtime_checkable
class CurriculumProtocol(Protocol):
    """The methods every scenario uses."""

    def get_task(self) -> TaskProtocol:
        """The task for the next episode."""
        ...

    def update_task_performance(self, task_id: int, score: float) -> Any:
        """Record a finished episode of `task_id` with `score` in [0, 1]."""
        ...

    def stats(self) -> Mapping[str, Any]:
        """Numbers for logging; `per_label_lp_scores` ({label: float}) if the algorithm has LP."""
        ...


@runtime_checkable
class CheckpointableCurriculum(CurriculumProtocol, Protocol):
    """Needed by the checkpoint/resume scenario."""

    def get_state(self) -> Any: ...

    def load_state(self, state: Any) -> None: ...


#: Methods some scenarios need beyond the protocol, and which scenarios need them.
OPTIONAL_CAPABILITIES = {
    "get_state": "checkpoint/resume determinism",
    "load_state": "checkpoint/resume determinism",
    "sync_state": "centralized stage sync",
    "apply_sync_state": "centralized stage sync",
}


class CurriculumProtocolError(TypeError):
    """An object does not satisfy `CurriculumProtocol`; the message lists every gap."""


def _check_method(obj: Any, name: str, min_args: int, problems: list[str]) -> None:
    method = getattr(type(obj), name, None)
    if method is None or not callable(getattr(obj, name, None)):
        problems.append(f"missing method `{name}()`")
        return
    try:
        params = [
            p for p in inspect.signature(getattr(obj, name)).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
    except (TypeError, ValueError):
        return  # builtins without signatures: trust the call checks below
    if not any(p.kind == p.VAR_POSITIONAL for p in params) and len(params) < min_args:
        problems.append(f"`{name}()` must accept {min_args} positional argument(s), it accepts {len(params)}")


def check_task(task: Any) -> list[str]:
    """What a `get_task()` result lacks (empty list if it is fine)."""
    problems = []
    task_id = getattr(task, "task_id", None)
    if not isinstance(task_id, int) or isinstance(task_id, bool):
        problems.append(f"task.task_id must be an int, received {task_id!r}")
    env_cfg = getattr(task, "env_cfg", None)
    if not isinstance(env_cfg, Mapping):
        problems.append(f"task.env_cfg must be a mapping, received {type(env_cfg).__name__}")
    label = getattr(task, "label", None)
    if not isinstance(label, str):
        problems.append(f"task.label must be a str, received {label!r}")
    return problems


def check_curriculum(obj: Any, *, exercise: bool = True) -> None:
    """Raise `CurriculumProtocolError` listing what `obj` lacks; return None if it fits.

    With `exercise=True` it also calls `get_task()`, `update_task_performance()` once with a
    mid-range score, and `stats()`, and checks what they return.
    """
    problems: list[str] = []
    _check_method(obj, "get_task", 0, problems)
    _check_method(obj, "update_task_performance", 2, problems)
    _check_method(obj, "stats", 0, problems)
    if exercise and not problems:
        task = obj.get_task()
        task_problems = check_task(task)
        problems.extend(task_problems)
        if not task_problems:
            obj.update_task_performance(task.task_id, 0.5)
        stats = obj.stats()
        if not isinstance(stats, Mapping):
            problems.append(f"stats() must return a mapping, received {type(stats).__name__}")
        else:
            lp = stats.get("per_label_lp_scores", {})
            if not isinstance(lp, Mapping) or not all(
                isinstance(v, (int, float)) and math.isfinite(v) for v in lp.values()
            ):
                problems.append("stats()['per_label_lp_scores'] must map labels to finite numbers")
    if problems:
        raise CurriculumProtocolError(
            f"{type(obj).__name__} does not satisfy CurriculumProtocol:\n- " + "\n- ".join(problems)
        )


def missing_capabilities(obj: Any, names: tuple[str, ...]) -> list[str]:
    """The optional methods in `names` that `obj` lacks."""
    return [n for n in names if not callable(getattr(obj, n, None))]
