"""Scenario 3: lock removal must not corrupt stats (seeds/002, task 2).

Real processes update one shared-memory curriculum while another reads its statistics
lock-free: no update may be lost, no read may see NaN or an out-of-range value, and a worker
that dies or hangs while holding the lock must not hang the others forever.
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import os
import signal
import time
from collections import Counter

import numpy as np
import pytest

from curriculum import CurriculumConfig, LockTimeoutError, SingleTaskGenerator, UniformConfig
from harness.thresholds import SHARED_TRACKER as LIMITS

CTX = mp.get_context("fork")


def _shared_curriculum(curriculum_factory, require_capability, seed: int):
    parameters = inspect.signature(curriculum_factory).parameters
    require_capability("shared_memory" in parameters,
                       "this curriculum factory takes no `shared_memory` option, so it has no shared tracker to test")
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}, label="shared"),
                              algorithm=UniformConfig(), num_active_tasks=LIMITS.pool, seed=seed)
    options = {"lock_timeout": LIMITS.lock_timeout} if "lock_timeout" in parameters else {}
    return curriculum_factory(config, shared_memory=True, **options)


def _writer(curriculum, index: int, queue) -> None:
    curriculum.reseed(index)
    rng = np.random.default_rng(index)
    credited: Counter = Counter()
    for score in rng.random(LIMITS.updates_per_writer).tolist():
        task = curriculum.get_task()
        if curriculum.update_task_performance(task.task_id, score):
            credited[task.task_id] += 1
    queue.put(dict(credited))


def _reader(curriculum, stop, queue) -> None:
    tracker = curriculum.tracker
    reads, bad = 0, []
    last_total = 0
    while not stop.is_set():
        # score sums first: a sum read before the counts can only cover fewer completions than
        # the counts read after it, so a correct tracker always yields means within [0, 1]
        score_sum = tracker.score_sum.copy()
        completions = tracker.completions.copy()
        total = tracker.total_completions
        reads += 1
        if not np.isfinite(score_sum).all():
            bad.append(f"NaN/inf in score_sum: {score_sum.tolist()}")
        means = score_sum / np.maximum(completions, 1)
        if ((means < 0) | (means > 1 + 1e-9)).any():
            bad.append(f"mean score out of [0, 1]: {means.tolist()}")
        if total < last_total:
            bad.append(f"total completions went backwards: {last_total} -> {total}")
        last_total = total
    queue.put({"reads": reads, "bad": bad[:5]})


def test_concurrent_writers_lose_no_update_and_readers_see_no_nan(curriculum_factory, require_capability, scenario_seed,
                                                                 golden) -> None:
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed)
    try:
        queue, stop = CTX.Queue(), CTX.Event()
        readers = [CTX.Process(target=_reader, args=(curriculum, stop, queue)) for _ in range(LIMITS.readers)]
        writers = [CTX.Process(target=_writer, args=(curriculum, i + 1, queue)) for i in range(LIMITS.writers)]
        for process in readers + writers:
            process.start()
        results = [queue.get(timeout=120) for _ in writers]
        stop.set()
        results += [queue.get(timeout=60) for _ in readers]
        for process in readers + writers:
            process.join(timeout=30)
            assert process.exitcode == 0, f"worker {process.name} exited with {process.exitcode}, seed {scenario_seed}"
        credited: Counter = Counter()
        for result in results:
            if "reads" not in result:
                credited.update(result)
        read_reports = [r for r in results if "reads" in r]
        expected = LIMITS.writers * LIMITS.updates_per_writer
        tracker = curriculum.tracker
        recorded = tracker.total_completions + tracker.late_completions
        assert recorded == expected, (
            f"{expected - recorded} of {expected} updates from {LIMITS.writers} processes were lost "
            f"(tracker recorded {recorded}), seed {scenario_seed}"
        )
        per_slot = {tracker.task_id_at(s): tracker.completions_at(s) for s in range(LIMITS.pool)}
        assert per_slot == dict(credited), (
            f"per-task completion counts {per_slot} differ from the updates the writers made {dict(credited)}, "
            f"seed {scenario_seed}"
        )
        for report in read_reports:
            assert not report["bad"], f"a lock-free reader saw corrupt stats: {report['bad']}, seed {scenario_seed}"
        golden({"writers": LIMITS.writers, "updates": expected, "recorded": recorded})
    finally:
        curriculum.close()


def _update_error(curriculum, task_id: int) -> BaseException | None:
    """The exception an update raised, or None if it went through."""
    try:
        curriculum.update_task_performance(task_id, 0.5)
    except Exception as error:  # returned to the caller, which asserts on its type and message
        return error
    return None


def _hold_lock(curriculum, ready, seconds: float) -> None:
    curriculum.tracker.lock.acquire()
    ready.set()
    time.sleep(seconds)


def test_stuck_or_killed_lock_holder_does_not_hang_the_others(curriculum_factory, require_capability,
                                                              scenario_seed) -> None:
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed)
    try:
        task = curriculum.get_task()
        curriculum.update_task_performance(task.task_id, 0.5)
        recorded_before = curriculum.tracker.total_completions

        ready = CTX.Event()
        holder = CTX.Process(target=_hold_lock, args=(curriculum, ready, 60.0))
        holder.start()
        assert ready.wait(30), "the lock-holding process never took the lock"
        task = curriculum.get_task()
        started = time.monotonic()
        error = _update_error(curriculum, task.task_id)
        waited = time.monotonic() - started
        assert isinstance(error, LockTimeoutError) and f"held by pid {holder.pid}" in str(error), (
            f"an update while process {holder.pid} held the lock {'went through' if error is None else f'raised {error!r}'}"
            f"; expected LockTimeoutError naming the holder within {LIMITS.lock_timeout} s, seed {scenario_seed}"
        )
        assert waited <= LIMITS.lock_timeout * 3, (
            f"a writer waited {waited:.1f} s on a stuck lock holder, timeout {LIMITS.lock_timeout} s, seed {scenario_seed}"
        )
        assert curriculum.tracker.total_completions == recorded_before, "a failed update changed the tracker"

        os.kill(holder.pid, signal.SIGKILL)
        holder.join(timeout=10)
        started = time.monotonic()
        assert curriculum.update_task_performance(task.task_id, 0.5)
        waited = time.monotonic() - started
        assert waited <= LIMITS.max_wait_after_kill, (
            f"after the lock holder was killed, an update waited {waited:.1f} s, limit {LIMITS.max_wait_after_kill} s, "
            f"seed {scenario_seed}"
        )
        assert curriculum.tracker.total_completions == recorded_before + 1, (
            f"completions recorded before the kill were not intact: {curriculum.tracker.total_completions} "
            f"!= {recorded_before} + 1, seed {scenario_seed}"
        )
    finally:
        curriculum.close()
