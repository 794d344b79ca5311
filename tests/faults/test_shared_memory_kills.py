"""SIGKILL of writer processes anywhere, inside the lock included: the shared tracker is
always left as it was before the killed update or as it is after it, never in between.

Two kinds of kill: at every bytecode instruction of one update (forked children that SIGKILL
themselves at instruction k, so each instruction inside the lock is hit), and asynchronous
SIGKILLs at random moments of writers running flat out (what a container stop does). After
each kill the next lock holder repairs the tracker; every invariant is checked on it.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fault_budget import scaled, time_budget
from shm_faults import (
    count_instructions,
    die_at_instruction,
    invariant_violations,
    lp_config,
    same_arrays,
    staged_config,
    task_score,
    uniform_config,
    wait_for_updates,
    writer,
)

from curriculum import Curriculum, LearningProgressConfig

CTX = mp.get_context("fork")
MAX_LOCKED_KILLS = 600
"""Kill points under the lock per operation in a full run, spread evenly (a pool refill repeats
the same instructions for every slot)."""
SECONDS_PER_CASE = time_budget(60.0)
"""Every case stops once this budget is spent, and fails saying how far it got."""


def _arrays(curriculum: Curriculum) -> dict[str, np.ndarray]:
    return curriculum.tracker.snapshot()


def _recover(curriculum: Curriculum) -> None:
    """What the next writer does first: take the lock (rolling back a dead holder's section)."""
    with curriculum.tracker.lock:
        pass


# ---- one operation, killed at each of its instructions ------------------------------------------
def _lp_update_that_evicts(curriculum: Curriculum) -> Callable[[], Any]:
    """Drive until the next completion evicts its task; that completion is the operation."""
    running: list[int] = []
    for _ in range(5000):
        running.append(curriculum.get_task().task_id)
        if len(running) <= 2:
            continue
        task_id = running.pop(0)
        state = curriculum.get_state()
        evictions = curriculum.tracker.evictions
        curriculum.update_task_performance(task_id, task_score(task_id))
        if curriculum.tracker.evictions > evictions:
            curriculum.load_state(state)
            return lambda: curriculum.update_task_performance(task_id, task_score(task_id))
    raise AssertionError("no eviction in 5000 completions")


def _staged_update_that_advances(curriculum: Curriculum) -> Callable[[], Any]:
    """Drive until the next completion advances the stage (a refill of the whole pool)."""
    for _ in range(100):
        task_id = curriculum.get_task().task_id
        state = curriculum.get_state()
        curriculum.update_task_performance(task_id, 1.0)
        if curriculum.stage == 1:
            curriculum.load_state(state)
            return lambda: curriculum.update_task_performance(task_id, 1.0)
    raise AssertionError("no stage advancement in 100 completions")


def _late_completion(curriculum: Curriculum) -> Callable[[], Any]:
    old = _lp_update_that_evicts(curriculum)
    old()  # evicts a task: a completion of it now arrives late
    n = curriculum.num_active_tasks
    evicted = [curriculum.tracker.task_id_at(slot) - n for slot in range(n) if curriculum.tracker.task_id_at(slot) >= n]
    task_id = evicted[0]
    return lambda: curriculum.update_task_performance(task_id, task_score(task_id))


def _restore_checkpoint(curriculum: Curriculum) -> Callable[[], Any]:
    before = curriculum.get_state()
    for _ in range(40):
        task_id = curriculum.get_task().task_id
        curriculum.update_task_performance(task_id, task_score(task_id))
    after = curriculum.get_state()
    curriculum.load_state(before)
    return lambda: curriculum.load_state(after)


def _spread(points: list[int], count: int) -> list[int]:
    """`count` of `points` spread evenly (all of them if there are fewer)."""
    if count >= len(points):
        return list(points)
    return [points[i] for i in np.linspace(0, len(points) - 1, count).round().astype(int)]


OPERATIONS = {
    "lp_update_with_eviction": (lambda: lp_config(n=8), _lp_update_that_evicts),
    # the evicted task's statistics go into the configuration memory: a write to the global
    # arrays journaled only when written
    "lp_update_with_eviction_into_the_memory": (
        lambda: lp_config(n=8, algorithm=LearningProgressConfig(min_samples_for_lp=2)), _lp_update_that_evicts),
    "staged_update_refilling_the_pool": (staged_config, _staged_update_that_advances),
    "late_completion": (lambda: lp_config(n=8), _late_completion),
    "checkpoint_restore": (lambda: lp_config(n=8), _restore_checkpoint),
}


@pytest.mark.parametrize("operation_name", list(OPERATIONS))
def test_a_kill_at_any_instruction_leaves_the_state_before_or_after_the_operation(operation_name: str,
                                                                                   fault_figure) -> None:
    make_config, prepare = OPERATIONS[operation_name]
    with Curriculum(make_config(), shared_memory=True, lock_timeout=5.0) as curriculum:
        operation = prepare(curriculum)
        start = curriculum.get_state()
        before = _arrays(curriculum)
        instructions, locked = count_instructions(operation)
        after = _arrays(curriculum)
        assert not same_arrays(before, after), "the operation changed nothing: nothing to interrupt"
        locked_points = _spread(locked, scaled(min(len(locked), MAX_LOCKED_KILLS), minimum=30))
        kill_points = locked_points + _spread(sorted(set(range(instructions)) - set(locked)),
                               scaled(max(1, (instructions - len(locked)) // 10), minimum=10))
        outcomes = {"before": 0, "after": 0}
        repairs_before = curriculum.tracker.backend.repairs
        deadline = time.monotonic() + SECONDS_PER_CASE
        killed = 0
        for point in kill_points:
            if time.monotonic() > deadline:
                break
            curriculum.load_state(start)
            child = CTX.Process(target=die_at_instruction, args=(operation, point))
            child.start()
            child.join(timeout=30)
            assert child.exitcode == -9, f"the child killed at instruction {point} exited with {child.exitcode}"
            killed += 1
            _recover(curriculum)
            state = _arrays(curriculum)
            if same_arrays(state, before):
                outcomes["before"] += 1
            elif same_arrays(state, after):
                outcomes["after"] += 1
            else:
                changed = sorted(k for k in state if not np.array_equal(state[k], before[k]))
                raise AssertionError(f"{operation_name} killed at instruction {point} of {instructions} left a state "
                                     f"that is neither before nor after it; arrays changed: {changed}")
        repaired = curriculum.tracker.backend.repairs - repairs_before
    fault_figure(f"kill_at_instruction.{operation_name}.kills", killed,
                 f"SIGKILLs at {killed} of the {instructions} instructions of the operation ({len(locked)} of them "
                 f"under the lock, {len(locked_points)} of those killed); each left the state before "
                 f"({outcomes['before']}) or after ({outcomes['after']}) it, none in between")
    fault_figure(f"kill_at_instruction.{operation_name}.inside_lock", repaired,
                 "of those kills, inside the lock with the section's journal open: rolled back by the next holder")
    assert killed == len(kill_points), f"only {killed} of {len(kill_points)} kills ran within {SECONDS_PER_CASE} s"
    assert repaired > 0, "no kill landed inside the lock: the sweep did not test what it is for"


# ---- asynchronous kills of running writers ------------------------------------------------------
@pytest.mark.parametrize(("config_name", "make_config", "evicts", "with_lp"), [
    ("learning_progress_with_eviction", lambda: lp_config(n=16), True, True),
    ("uniform_no_eviction", lambda: uniform_config(n=16), False, False),
], ids=["learning_progress_with_eviction", "uniform_no_eviction"])
def test_random_sigkills_of_writers_keep_every_invariant(config_name: str, make_config, evicts: bool,
                                                         with_lp: bool, fault_figure) -> None:
    kills = scaled(150, minimum=15)
    writers = 2
    rng = np.random.default_rng(7)
    acked = CTX.RawArray("q", writers + kills)
    stop = CTX.RawValue("b", 0)
    violations: list[str] = []
    with Curriculum(make_config(), shared_memory=True, lock_timeout=5.0) as curriculum:
        backend = curriculum.tracker.backend
        repairs_before = backend.repairs

        def start(index: int) -> Any:
            process = CTX.Process(target=writer, args=(curriculum, index, acked, stop))
            process.start()
            wait_for_updates(acked, index)
            return process

        running = [start(i) for i in range(writers)]
        next_index = writers
        deadline = time.monotonic() + SECONDS_PER_CASE
        done = 0
        try:
            for _ in range(kills):
                if time.monotonic() > deadline:
                    break
                time.sleep(float(rng.uniform(0.0, 0.004)))
                victim = running.pop(int(rng.integers(len(running))))
                victim.kill()
                victim.join(timeout=30)
                assert victim.exitcode == -9
                done += 1
                state = curriculum.tracker.snapshot()  # lock-free, consistent: the writers go on
                violations += [f"after kill {done}: {v}" for v in
                               invariant_violations(state, evicts=evicts, with_lp=with_lp)]
                running.append(start(next_index))
                next_index += 1
        finally:
            stop.value = 1
            for process in running:
                process.join(timeout=30)
        for process in running:
            assert process.exitcode == 0, f"a writer exited with {process.exitcode}"
        _recover(curriculum)
        final = curriculum.tracker.snapshot()
        violations += [f"at the end: {v}" for v in invariant_violations(final, evicts=evicts, with_lp=with_lp)]
        repaired = backend.repairs - repairs_before
        total, late = int(final["counters"][0]), int(final["counters"][1])
    recorded, returned = total + late, int(sum(acked))
    fault_figure(f"random_sigkill.{config_name}.kills", done,
                 f"writers SIGKILLed at random moments while {writers} wrote flat out; invariants checked after each")
    fault_figure(f"random_sigkill.{config_name}.inside_lock", repaired,
                 "of those kills, inside the lock: rolled back by the next holder")
    fault_figure(f"random_sigkill.{config_name}.violations", len(violations), "invariant violations seen")
    fault_figure(f"random_sigkill.{config_name}.updates", recorded,
                 f"completions recorded ({returned} returned to their writer; the rest committed by a writer "
                 "killed before it could count them)")
    assert not violations, violations[:5]
    assert done == kills, f"only {done} of {kills} kills ran within {SECONDS_PER_CASE} s"
    assert returned <= recorded <= returned + (done - repaired), (
        f"{recorded} completions recorded, {returned} returned to writers, {done} kills of which {repaired} "
        "inside the lock: an update was lost or invented")
