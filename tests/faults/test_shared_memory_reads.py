"""Lock-free reads and checkpoints of a shared curriculum under running writers.

Writers record `task_score(task)` for every episode (a constant k/16 per task), so any mean
read from one state of a slot is exactly its task's score; a mean made of a count from one
completion and a sum from another is not a multiple of 1/16. With random scores in [0, 1]
the only exact check left is the range, which a torn learning-progress run broke by far.
A checkpoint taken while writers run must satisfy every tracker invariant and load.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import numpy as np
from fault_budget import scaled, time_budget
from shm_faults import (
    invariant_violations,
    lp_config,
    random_writer,
    task_score,
    uniform_config,
    wait_for_updates,
    writer,
)

from curriculum import Curriculum, LearningProgressConfig

CTX = mp.get_context("fork")
WRITERS = 2
POOL = 4
"""A small pool: every slot is written often, so a read racing a write is common."""
SECONDS_PER_CASE = time_budget(60.0)


def _start_writers(curriculum: Curriculum, *, constant_scores: bool) -> tuple[list[Any], Any]:
    stop = CTX.RawValue("b", 0)
    acked = CTX.RawArray("q", WRITERS)
    processes = []
    for index in range(WRITERS):
        target = writer if constant_scores else random_writer
        process = CTX.Process(target=target, args=(curriculum, index, acked, stop))
        process.start()
        processes.append(process)
    for index in range(WRITERS):
        wait_for_updates(acked, index)
    return processes, stop


def _stop(processes: list[Any], stop: Any) -> None:
    stop.value = 1
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0, f"a writer exited with {process.exitcode}"


def test_lock_free_task_means_under_writers_are_never_torn(fault_figure) -> None:
    """`CurriculumTask.mean_score` and `TaskTracker.mean_score_at` while 2 processes record."""
    reads = scaled(1_000_000, minimum=100_000)
    with Curriculum(lp_config(n=POOL), shared_memory=True) as curriculum:
        processes, stop = _start_writers(curriculum, constant_scores=True)
        try:
            tracker = curriculum.tracker
            n = curriculum.num_active_tasks
            torn: list[str] = []
            done = 0
            deadline = time.monotonic() + SECONDS_PER_CASE
            while done < reads and time.monotonic() < deadline:
                tasks = curriculum.active_tasks()
                for task in tasks:  # a task's own mean: exactly its score (or 0.0 once evicted)
                    mean = task.mean_score
                    if mean != 0.0 and mean != task_score(task.task_id):
                        torn.append(f"task {task.task_id}: mean {mean!r}, its score {task_score(task.task_id)}")
                for _ in range(100):  # a slot's mean: some task's score, a multiple of 1/16
                    for slot in range(n):
                        mean = tracker.mean_score_at(slot)
                        if mean * 16 != int(mean * 16) or not 0.0 <= mean <= 1.0:
                            torn.append(f"slot {slot}: mean {mean!r} is no task's score")
                done += len(tasks) + 100 * n
            completions = tracker.total_completions
        finally:
            _stop(processes, stop)
    fault_figure("lock_free_reads.constant_scores.reads", done,
                 f"task means read lock-free while {WRITERS} processes recorded {completions:,} completions "
                 "(learning progress, eviction on)")
    fault_figure("lock_free_reads.constant_scores.torn", len(torn), "reads mixing two states of a slot")
    assert not torn, torn[:5]
    assert done >= reads, f"only {done} of {reads} reads within {SECONDS_PER_CASE} s"


def test_lock_free_means_under_random_scores_stay_in_the_score_range(fault_figure) -> None:
    reads = scaled(1_000_000, minimum=100_000)
    with Curriculum(lp_config(n=POOL), shared_memory=True) as curriculum:
        processes, stop = _start_writers(curriculum, constant_scores=False)
        try:
            tracker = curriculum.tracker
            n = curriculum.num_active_tasks
            worst_low, worst_high = float("inf"), float("-inf")
            done = 0
            deadline = time.monotonic() + SECONDS_PER_CASE
            while done < reads and time.monotonic() < deadline:
                for _ in range(100):
                    for slot in range(n):
                        mean = tracker.mean_score_at(slot)
                        worst_low, worst_high = min(worst_low, mean), max(worst_high, mean)
                    done += n
        finally:
            _stop(processes, stop)
    fault_figure("lock_free_reads.random_scores.reads", done,
                 f"slot means read lock-free while {WRITERS} processes recorded random scores in [0, 1]")
    fault_figure("lock_free_reads.random_scores.range", f"[{worst_low:.6g}, {worst_high:.6g}]",
                 "lowest and highest mean read (a torn read made 3.67 before)")
    assert 0.0 <= worst_low and worst_high <= 1.0, (worst_low, worst_high)
    assert done >= reads, f"only {done} of {reads} reads within {SECONDS_PER_CASE} s"


def test_checkpoints_taken_under_writers_are_consistent_and_load(fault_figure) -> None:
    checkpoints = scaled(1000, minimum=100)
    inconsistent: list[str] = []
    taken = 0
    configs = ((uniform_config(n=16), False, False), (lp_config(n=16), True, True),
               # with the configuration memory: its arrays are journaled only when written
               (lp_config(n=16, algorithm=LearningProgressConfig(min_samples_for_lp=2)), True, False))
    for config, evicts, with_lp in configs:
        with Curriculum(config, shared_memory=True) as curriculum:
            processes, stop = _start_writers(curriculum, constant_scores=True)
            restored = Curriculum(config)
            try:
                deadline = time.monotonic() + SECONDS_PER_CASE
                for i in range(checkpoints):
                    if time.monotonic() > deadline:
                        break
                    state = curriculum.get_state()
                    arrays = {name: np.asarray(values) for name, values in state["arrays"].items()}
                    inconsistent += [f"checkpoint {i}: {v}" for v in
                                     invariant_violations(arrays, evicts=evicts, with_lp=with_lp)]
                    if i % 10 == 0:
                        restored.load_state(state)  # raises if the checkpoint is refused
                    taken += 1
            finally:
                _stop(processes, stop)
                restored.close()
    fault_figure("checkpoints_under_writers.taken", taken,
                 f"get_state() of a shared curriculum while {WRITERS} processes recorded (uniform, then learning "
                 "progress with eviction, without and with its configuration memory); every 10th loaded into a "
                 "fresh curriculum")
    fault_figure("checkpoints_under_writers.inconsistent", len(inconsistent), "checkpoints breaking an invariant")
    assert not inconsistent, inconsistent[:5]
    assert taken == len(configs) * checkpoints, (
        f"only {taken} of {len(configs) * checkpoints} checkpoints within the time budget")
