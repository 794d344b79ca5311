"""TaskTracker: per-slot completion statistics and global counters over either backend."""

from __future__ import annotations

import numpy as np
import pytest

from curriculum import CurriculumConfigError, CurriculumStateError, LocalMemoryBackend, SharedMemoryBackend, TaskTracker
from curriculum.tracker import COUNTERS, EMPTY, tracker_layout


@pytest.fixture(params=["local", "shared"])
def tracker(request):
    tracker = TaskTracker.create(4, {"extra": ("float64", 2)}, shared=request.param == "shared", lock_timeout=1.0)
    yield tracker
    tracker.close()


def test_layout_holds_slot_arrays_counters_and_the_algorithms_arrays() -> None:
    layout = tracker_layout(3, {"lp_fast": ("float64", 3), "stage_counters": ("int64", 7)})
    assert layout == {
        "task_ids": ("int64", 3), "completions": ("int64", 3), "score_sum": ("float64", 3),
        "last_score": ("float64", 3), "counters": ("int64", len(COUNTERS)),
        "lp_fast": ("float64", 3), "stage_counters": ("int64", 7),
    }


def test_new_tracker_is_empty(tracker: TaskTracker) -> None:
    assert isinstance(tracker.backend, SharedMemoryBackend if tracker.backend.is_shared else LocalMemoryBackend)
    assert tracker.task_ids.tolist() == [EMPTY] * 4
    assert tracker.completions.tolist() == [0] * 4
    assert tracker.backend["extra"].tolist() == [0.0, 0.0]
    assert [tracker.counter(name) for name in COUNTERS] == [0] * len(COUNTERS)


def test_record_accumulates_and_assign_starts_a_fresh_task(tracker: TaskTracker) -> None:
    with tracker.lock:
        tracker.assign(1, 1, evicted=False)
        assert tracker.record(1, 0.25) == 1
        assert tracker.record(1, 0.75) == 2
        tracker.record_late()
    assert (tracker.task_id_at(1), tracker.completions_at(1)) == (1, 2)
    assert tracker.mean_score_at(1) == pytest.approx(0.5)
    assert tracker.last_score_at(1) == 0.75
    assert (tracker.total_completions, tracker.late_completions, tracker.evictions) == (2, 1, 0)
    with tracker.lock:
        tracker.assign(1, 5, evicted=True)
    assert (tracker.task_id_at(1), tracker.completions_at(1), tracker.mean_score_at(1), tracker.last_score_at(1)) \
        == (5, 0, 0.0, 0.0)
    assert (tracker.total_completions, tracker.evictions, tracker.counter("tasks_created")) == (2, 1, 2)
    assert tracker.mean_score_at(0) == 0.0  # never completed: no division by zero


def test_snapshot_is_a_copy(tracker: TaskTracker) -> None:
    snapshot = tracker.snapshot()
    with tracker.lock:
        tracker.assign(0, 0, evicted=False)
        tracker.record(0, 1.0)
    assert snapshot["completions"].tolist() == [0, 0, 0, 0]
    assert tracker.snapshot()["completions"].tolist() == [1, 0, 0, 0]
    assert set(snapshot) >= set(tracker_layout(4, {"extra": ("float64", 2)}))


def test_views_are_the_backend_arrays(tracker: TaskTracker) -> None:
    tracker.backend["completions"][2] = 9
    assert tracker.completions_at(2) == 9
    assert np.shares_memory(tracker.completions, tracker.backend["completions"])


def test_unknown_counter_name_is_refused(tracker: TaskTracker) -> None:
    with pytest.raises(CurriculumConfigError, match="completions_total"):
        tracker.counter("completions_total")


def test_overwrite_writes_every_array_whole(tracker: TaskTracker) -> None:
    with tracker.lock:
        tracker.overwrite({"completions": [3, 0, 1, 2], "extra": np.array([0.5, 2])})
    assert tracker.completions.tolist() == [3, 0, 1, 2]
    assert tracker.backend["extra"].tolist() == [0.5, 2.0]


@pytest.mark.parametrize("arrays", [
    {"extra": [1.0]}, {"extra": [1.0, 2.0, 3.0]}, {"extra": 1.0}, {"extra": [[1.0, 2.0]]},
    {"completions": [1, 2, 3, 4], "extra": [1.0]}, {"completions": [1, 2, 3, 4], "unknown": [1.0, 2.0]},
    {"completions": [1.5, 2, 3, 4]}, {"completions": [np.nan, 2, 3, 4]}, {"extra": ["1", "2"]},
    {"extra": [True, False]}, {"completions": np.full(4, 2**63, dtype=np.uint64)},
], ids=["short", "long", "scalar", "2-d", "good-then-short", "good-then-unknown", "fraction", "nan-in-int",
        "text", "bools", "past-int64"])
def test_overwrite_refuses_a_wrong_array_and_writes_none(tracker: TaskTracker, arrays) -> None:
    before = tracker.snapshot()
    with tracker.lock, pytest.raises(CurriculumStateError):
        tracker.overwrite(arrays)
    after = tracker.snapshot()
    assert {name: values.tolist() for name, values in after.items()} == \
        {name: values.tolist() for name, values in before.items()}
