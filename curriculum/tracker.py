"""`TaskTracker`: per-task completion statistics over a memory backend.

Slot `s` of the pool holds one task at a time. Task ids encode their slot,
`task_id = generation * capacity + slot`, so any process maps an id to its slot in O(1) and
can tell a current task from one that was evicted (a late completion) or never issued.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from curriculum.errors import CurriculumConfigError, CurriculumStateError
from curriculum.memory import (
    DEFAULT_LOCK_TIMEOUT,
    LocalMemoryBackend,
    SharedMemoryBackend,
    TaskMemoryBackend,
    check_lock_timeout,
)

__all__ = ["TaskTracker", "COUNTERS", "EMPTY", "tracker_layout", "slot_arrays"]

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
_ROW_FLOATS = tuple(dtype == "float64" for dtype in _SLOT_ARRAYS.values())

EMPTY = -1


def tracker_layout(capacity: int, extra: Mapping[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """The backend layout of a tracker with `capacity` slots plus an algorithm's own arrays."""
    layout = {name: (dtype, capacity) for name, dtype in _SLOT_ARRAYS.items()}
    layout["counters"] = ("int64", len(COUNTERS))
    layout.update(extra)
    return layout


def slot_arrays(capacity: int, extra: Mapping[str, tuple[str, int]]) -> tuple[str, ...]:
    """The arrays holding one value per slot: the tracker's own, plus the algorithm's when all
    of them have one value per slot.

    A shared backend journals one slot's row before a write to it and every other array
    whole; an algorithm array of pool length that is not indexed by slot (a window of recent
    scores as long as the pool, say) must be journaled whole, so the algorithm's arrays count
    as per-slot only when none of them can be anything else.
    """
    names = tuple(_SLOT_ARRAYS)
    if extra and all(length == capacity for _, length in extra.values()):
        names += tuple(extra)
    return names


class TaskTracker:
    """Completion counts and scores per slot, plus global counters.

    Writers call `record`/`record_late`/`assign` while holding `lock`; readers use the
    array views or the `*_at` accessors without it. On a shared backend the accessors that
    combine several values of a slot (`mean_score_at`, `task_stats`) read them from one state,
    and `snapshot()` copies every array as of one moment between two locked sections.
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
        if isinstance(backend, SharedMemoryBackend):
            self._touch = backend.touch
            self._row_columns = tuple(backend.column_of(name) for name in _SLOT_ARRAYS)
            self._rows_q, self._rows_d, self._row_length = backend.row_words()
            self._counter_words = backend.global_words("counters")
            self._control_words = backend.control_words()
            self._task_id_column = backend.column_of("task_ids")
            self.task_id_at = self._task_id_at_shared  # type: ignore[method-assign]
            self.record = self._record_journaled  # type: ignore[method-assign]
            self.mean_score_at = self._mean_score_at_shared  # type: ignore[method-assign]
            self.task_stats = self._task_stats_shared  # type: ignore[method-assign]

    @classmethod
    def create(cls, capacity: int, extra: Mapping[str, tuple[str, int]], *, shared: bool = False,
               lock_timeout: float | None = None, meta: Mapping[str, Any] | None = None,
               cold_arrays: Collection[str] = ()) -> TaskTracker:
        """A tracker over a new local or shared backend (`meta` goes into a shared block's header;
        `cold_arrays`: arrays of `extra` written rarely, journaled only when written)."""
        layout = tracker_layout(capacity, extra)
        if lock_timeout is not None:
            lock_timeout = check_lock_timeout(lock_timeout)
        if shared:
            backend: TaskMemoryBackend = SharedMemoryBackend(
                layout, lock_timeout=DEFAULT_LOCK_TIMEOUT if lock_timeout is None else lock_timeout,
                slot_arrays=slot_arrays(capacity, extra), cold_arrays=tuple(c for c in cold_arrays if c in extra),
                meta=meta)
        else:
            backend = LocalMemoryBackend(layout)
        backend["task_ids"][:] = EMPTY
        return cls(backend, capacity)

    # ---- lock-free reads -------------------------------------------------------------------
    def task_id_at(self, slot: int) -> int:
        """The task in `slot`, as last committed (never one a writer inside the lock may still undo)."""
        return self.task_ids.item(slot)

    def _task_id_at_shared(self, slot: int) -> int:
        # the fast path of `SharedMemoryBackend.committed_word`, inline: get_task runs it every call
        at = slot * self._row_length
        rows_q = self._rows_q
        control = self._control_words
        version = rows_q[at]
        seq = control[0]
        if version != seq or not seq & 1:
            task_id = rows_q[at + self._task_id_column]
            if rows_q[at] == version and control[0] == seq:  # (a section that wrote the row meanwhile left its number)
                return task_id
        return self.backend.committed_word(slot, self._task_id_column)

    def completions_at(self, slot: int) -> int:
        return self.completions.item(slot)

    def mean_score_at(self, slot: int) -> float:
        n = self.completions.item(slot)
        return self.score_sum.item(slot) / n if n else 0.0

    def _mean_score_at_shared(self, slot: int) -> float:
        _, n, total, _ = self.backend.read_row(slot, self._row_columns, _ROW_FLOATS)
        return total / n if n else 0.0

    def task_stats(self, slot: int, task_id: int) -> tuple[int, float, float]:
        """(completions, mean score, last score) of `task_id` if it still holds `slot`, else zeros."""
        if self.task_ids.item(slot) != task_id:
            return 0, 0.0, 0.0
        n = self.completions.item(slot)
        return n, (self.score_sum.item(slot) / n if n else 0.0), self.last_score.item(slot)

    def _task_stats_shared(self, slot: int, task_id: int) -> tuple[int, float, float]:
        held, n, total, last = self.backend.read_row(slot, self._row_columns, _ROW_FLOATS)
        if held != task_id:
            return 0, 0.0, 0.0
        return n, (total / n if n else 0.0), last

    def last_score_at(self, slot: int) -> float:
        return self.last_score.item(slot)

    def counter(self, name: str) -> int:
        """Global counter `name`, one of `COUNTERS`."""
        try:
            return self.counters.item(COUNTERS.index(name))
        except ValueError:
            raise CurriculumConfigError(
                f"Expected a counter name, one of {COUNTERS}, received {name!r}") from None

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
        self.lock.touch(slot)
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

    def _record_journaled(self, slot: int, score: float) -> int:
        score = float(score)  # a score that is no number fails here, before any write
        self._touch(slot)
        _, completions, score_sum, last_score = self._row_columns
        at = slot * self._row_length
        rows_q, rows_d = self._rows_q, self._rows_d
        n = rows_q[at + completions] + 1
        rows_q[at + completions] = n
        rows_d[at + score_sum] += score
        rows_d[at + last_score] = score
        self._counter_words[_TOTAL] += 1
        return n

    def record_late(self) -> None:
        """Count a completion of a task that left the pool while its episode ran."""
        self.counters[_LATE] += 1

    def overwrite(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Replace the named arrays wholesale (restoring a checkpoint; caller holds the lock).

        All or nothing: every array is checked (a name of the layout, its length, numbers its
        dtype holds exactly) before any is written, so a refused restore, `CurriculumStateError`
        naming the array, leaves the tracker as it was."""
        checked = {name: self._checked_array(name, values) for name, values in arrays.items()}
        if isinstance(self.backend, SharedMemoryBackend):
            self.backend.journal_everything()
        for name, values in checked.items():
            self.backend[name][:] = values

    def _checked_array(self, name: str, values: Any) -> np.ndarray:
        layout = self.backend.layout
        if name not in layout:
            raise CurriculumStateError(f"Expected arrays named among {sorted(layout)}, received one named {name!r}")
        dtype, length = layout[name]
        array = np.asarray(values)
        if array.shape != (length,) or array.dtype.kind not in "iuf":
            raise CurriculumStateError(
                f"Expected array {name!r} as {length} numbers, received shape {array.shape} of dtype {array.dtype}")
        with np.errstate(invalid="ignore", over="ignore"):
            exact = array.astype(dtype)
            if dtype == "int64" and not np.array_equal(exact, array):
                raise CurriculumStateError(
                    f"Expected array {name!r} as {length} integers, received values that are not: "
                    f"{array[exact != array][:3].tolist()}")
        return exact

    # ---- snapshots -------------------------------------------------------------------------
    def snapshot(self) -> dict[str, np.ndarray]:
        """Copies of every array as of one moment (lock-free; see `SharedMemoryBackend.snapshot`)."""
        return self.backend.snapshot()

    def close(self) -> None:
        """Drop the views, then release the backend."""
        for attr in ("task_ids", "completions", "score_sum", "last_score", "counters", "_rows_q", "_rows_d",
                     "_counter_words", "_control_words"):
            setattr(self, attr, None)
        self.backend.close()
