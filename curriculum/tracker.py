"""`TaskTracker`: per-task completion statistics over a memory backend.

Slot `s` of the pool holds one task at a time. Task ids encode their slot,
`task_id = generation * capacity + slot`, so any process maps an id to its slot in O(1) and
can tell a current task from one that was evicted (a late completion) or never issued.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from curriculum.memory import LocalMemoryBackend, SharedMemoryBackend, TaskMemoryBackend

__all__ = ["TaskTracker", "COUNTERS", "tracker_layout"]

#: Global int64 counters kept by every tracker, in this order.
COUNTERS = (
    "total_completions",
    "late_completions",
    "evictions",
    "tasks_created",
)
_TOTAL, _LATE, _EVICTIONS, _CREATED = range(len(COUNTERS))

#: Per-slot arrays of the tracker itself.
_SLOT_ARRAYS = {"task_ids": "int64", "completions": "int64", "score_sum": "float64", "last_score": "float64"}

EMPTY = -1


def tracker_layout(capacity: int, extra: Mapping[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """The backend layout of a tracker with `capacity` slots plus an algorithm's own arrays."""
    layout = {name: (dtype, capacity) for name, dtype in _SLOT_ARRAYS.items()}
    layout["counters"] = ("int64", len(COUNTERS))
    layout.update(extra)
    return layout


class TaskTracker:
    """Completion counts and scores per slot, plus global counters.

    Writers call `record`/`record_late`/`assign` while holding `lock`; readers use the
    array views or the `*_at` accessors without it.
    """

    def __init__(self, backend: TaskMemoryBackend, capacity: int) -> None:
        self.backend = backend
        self.capacity = capacity
        self.lock = backend.lock
        self.task_ids = backend["task_ids"]
        self.completions = backend["completions"]
        self.score_sum = backend["score_sum"]
        self.last_score = backend["last_score"]
        self.counters = backend["counters"]

    @classmethod
    def create(cls, capacity: int, extra: Mapping[str, tuple[str, int]], *, shared: bool = False,
               lock_timeout: float | None = None) -> TaskTracker:
        """A tracker over a new local or shared backend."""
        layout = tracker_layout(capacity, extra)
        if shared:
            kwargs = {} if lock_timeout is None else {"lock_timeout": lock_timeout}
            backend: TaskMemoryBackend = SharedMemoryBackend(layout, **kwargs)
        else:
            backend = LocalMemoryBackend(layout)
        backend["task_ids"][:] = EMPTY
        return cls(backend, capacity)

    # ---- lock-free reads -------------------------------------------------------------------
    def task_id_at(self, slot: int) -> int:
        return self.task_ids.item(slot)

    def completions_at(self, slot: int) -> int:
        return self.completions.item(slot)

    def mean_score_at(self, slot: int) -> float:
        n = self.completions.item(slot)
        return self.score_sum.item(slot) / n if n else 0.0

    def last_score_at(self, slot: int) -> float:
        return self.last_score.item(slot)

    def counter(self, name: str) -> int:
        return self.counters.item(COUNTERS.index(name))

    @property
    def total_completions(self) -> int:
        return self.counters.item(_TOTAL)

    @property
    def late_completions(self) -> int:
        return self.counters.item(_LATE)

    @property
    def evictions(self) -> int:
        return self.counters.item(_EVICTIONS)

    # ---- writes (caller holds the lock) ----------------------------------------------------
    def assign(self, slot: int, task_id: int, *, evicted: bool) -> None:
        """Put a new task in `slot`, zeroing its statistics."""
        self.completions[slot] = 0
        self.score_sum[slot] = 0.0
        self.last_score[slot] = 0.0
        self.task_ids[slot] = task_id
        self.counters[_CREATED] += 1
        if evicted:
            self.counters[_EVICTIONS] += 1

    def record(self, slot: int, score: float) -> int:
        """Credit one completion with `score` to the task in `slot`; returns its completion count."""
        n = self.completions.item(slot) + 1
        self.completions[slot] = n
        self.score_sum[slot] += score
        self.last_score[slot] = score
        self.counters[_TOTAL] += 1
        return n

    def record_late(self) -> None:
        """Count a completion of a task that left the pool while its episode ran."""
        self.counters[_LATE] += 1

    # ---- snapshots -------------------------------------------------------------------------
    def snapshot(self) -> dict[str, np.ndarray]:
        """Copies of every array (lock-free: a consistent-enough view for stats)."""
        return {name: array.copy() for name, array in self.backend.arrays.items()}

    def close(self) -> None:
        """Drop the views, then release the backend."""
        for attr in ("task_ids", "completions", "score_sum", "last_score", "counters"):
            setattr(self, attr, None)
        self.backend.close()
