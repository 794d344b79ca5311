"""Scenario 3: lock removal must not corrupt stats (seeds/002, task 2).

Real processes update one shared-memory curriculum while another reads its statistics
lock-free: no update may be lost, no read may see NaN or an out-of-range value, and a worker
that dies or hangs while holding the lock must not hang the others forever. Every writer
reports its episodes like a wrapper does, so the accounting oracle checks the final totals and
per-task numbers against what the writers ran. And a writer that sends bad input must leave
the lock free: the other writers' next updates go through at once. The library's cleanup of
trackers left by dead creators (`remove_orphaned_segments`, `curriculum-harness cleanup`) must
remove those and nothing that is alive or still in use, and its dry run must list them and
remove nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import gc
import inspect
import itertools
import json
import multiprocessing as mp
import os
import pickle
import queue as queue_module
import random
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from curriculum import (
    Curriculum,
    CurriculumClosedError,
    CurriculumConfig,
    CurriculumConfigError,
    CurriculumError,
    CurriculumStateError,
    LearningProgressConfig,
    LockTimeoutError,
    SharedTrackerError,
    SingleTaskGenerator,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
)
from curriculum import memory
from curriculum.algorithms.learning_progress import LP_COUNTERS
from curriculum.env import CompletionRecorder
from curriculum.memory import SEGMENT_DIR, SEGMENT_PREFIX, remove_orphaned_segments
from curriculum.tracker import COUNTERS, TaskTracker
from harness.episodes import ENDED_TERMINAL, EPISODE_RECORD_KEY, EpisodeRecord, LabelledTaskGenerator
from harness.runners import completion_info
from harness.task_spaces import impossible_task_space
from harness.thresholds import SHARED_TRACKER as LIMITS

CTX = mp.get_context("fork")


class _Children:
    """Child processes of one test, stopped and reaped whatever the test's outcome (a reader
    left spinning after a failed test would outlive the whole run)."""

    def __init__(self) -> None:
        self.processes: list = []

    def start(self, target, *args) -> Any:
        process = CTX.Process(target=target, args=args, daemon=True)
        process.start()
        self.processes.append(process)
        return process

    def collect(self, queue, count: int, *, timeout: float, what: str, seed: int) -> list[dict]:
        """`count` reports from `queue`. A child's error, or a child dead without reporting,
        fails at once with its cause (not after `timeout`)."""
        results: list[dict] = []
        deadline = time.monotonic() + timeout
        while len(results) < count:
            try:
                result = queue.get(timeout=0.5)
            except queue_module.Empty:
                dead = [f"{p.name} (exit code {p.exitcode})" for p in self.processes if p.exitcode not in (None, 0)]
                assert not dead, f"{', '.join(dead)} died without reporting, seed {seed}"
                assert time.monotonic() < deadline, (
                    f"{count - len(results)} of {count} {what} sent nothing within {timeout} s, seed {seed}")
                continue
            assert "error" not in result, f"{result['error']}, seed {seed}"
            results.append(result)
        return results

    def reap(self) -> None:
        # 10 s for all of them: after a failure, writers whose reports nobody reads cannot exit
        # (their queue's pipe is full) and are killed
        deadline = time.monotonic() + 10
        for process in self.processes:
            process.join(timeout=max(deadline - time.monotonic(), 0.0))
        for process in self.processes:
            if process.is_alive():
                process.kill()
                process.join(timeout=10)


def _shared_curriculum(curriculum_factory, require_capability, seed: int, *, pool: int = LIMITS.pool,
                       evicting: bool = False, staged: bool = False, advancing: bool = False,
                       lock_timeout: float | None = None):
    """A shared curriculum; `evicting`: learning progress over learnable and impossible tasks,
    which evicts and remembers the configurations of evicted tasks (rarely written arrays), and
    goes on evicting (no admission is passed over for a label's usefulness);
    `staged`: staged progression whose window of recent scores is as long as the pool (an
    array of pool length not indexed by slot), never advancing (`advancing`: once the window
    holds `pool` scores whose mean reaches 0.5). `lock_timeout`: only for a
    check that waits on a stuck holder; the others keep the factory's default, since on two
    busy cores a holder descheduled amid eight contending writers kept the lock over a second."""
    parameters = inspect.signature(curriculum_factory).parameters
    require_capability("shared_memory" in parameters,
                       "this curriculum factory takes no `shared_memory` option, so it has no shared tracker to test")
    if staged:
        stages = [Stage(f"s{i}", LabelledTaskGenerator(SingleTaskGenerator({"level": i}, label=f"s{i}")))
                  for i in range(2)]
        algorithm = StagedProgressionConfig(stages=stages, advancement_threshold=0.5,
                                            min_episodes=pool if advancing else 10**9, window=pool)
        config = CurriculumConfig(algorithm=algorithm, num_active_tasks=pool, seed=seed)
    elif evicting:
        space = impossible_task_space(num_learnable=4, num_impossible=4 * pool, seed=seed)
        config = CurriculumConfig(task_generator=space.generator,
                                  algorithm=LearningProgressConfig(min_samples_for_lp=2, admission_usefulness=0.0),
                                  num_active_tasks=pool, seed=seed, refresh_interval=4, min_presentations=3,
                                  eviction_percentile=50.0)
    else:
        config = CurriculumConfig(task_generator=LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="shared")),
                                  algorithm=UniformConfig(), num_active_tasks=pool, seed=seed)
    options = {"lock_timeout": lock_timeout} if lock_timeout is not None and "lock_timeout" in parameters else {}
    try:
        return curriculum_factory(config, shared_memory=True, **options)
    except (CurriculumConfigError, NotImplementedError) as error:
        require_capability(False, f"the factory refused the config: {type(error).__name__}: {error}")


def _writer(curriculum, index: int, queue) -> None:
    """Episodes of one worker, each reported as a wrapper would (for the accounting oracle)."""
    infos: list[dict] = []
    try:
        curriculum.reseed(index)
        rng = np.random.default_rng(index)
        record = CompletionRecorder(curriculum, stats_interval=LIMITS.updates_per_writer).record
        credited: Counter = Counter()
        for episode, score in enumerate(rng.random(LIMITS.updates_per_writer).tolist()):
            task = curriculum.get_task()
            info = completion_info(task, score, record)
            info[EPISODE_RECORD_KEY] = EpisodeRecord(f"writer{index}", episode, dict(task.env_cfg), (score,),
                                                     ENDED_TERMINAL, 1)
            infos.append(info)
            if not info["curriculum_stats/late_completions"]:
                credited[task.task_id] += 1
    except Exception:  # named in the test's failure at once, not as a report that never came
        queue.put({"error": f"writer {index} failed after {len(infos)} episodes: {traceback.format_exc()}"})
        return
    curriculum.close()  # a worker done with its handle (the shared curriculum lives on in the others)
    queue.put({"credited": dict(credited), "infos": infos})


def _reader(curriculum, stop, queue) -> None:
    tracker = curriculum.tracker
    reads, bad = 0, []
    last_total = 0
    parent = os.getppid()
    while not stop.is_set() and (reads % 1024 or os.getppid() == parent):  # an orphaned reader stops
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
                                                                 golden, oracle) -> None:
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed)
    children = _Children()
    queue, stop = CTX.Queue(), CTX.Event()
    try:
        readers = [children.start(_reader, curriculum, stop, queue) for _ in range(LIMITS.readers)]
        writers = [children.start(_writer, curriculum, i + 1, queue) for i in range(LIMITS.writers)]
        results = children.collect(queue, len(writers), timeout=120, what="writers", seed=scenario_seed)
        stop.set()
        results += children.collect(queue, len(readers), timeout=60, what="readers", seed=scenario_seed)
        for process in readers + writers:
            process.join(timeout=30)
            assert process.exitcode == 0, f"worker {process.name} exited with {process.exitcode}, seed {scenario_seed}"
        credited: Counter = Counter()
        watcher = oracle(context=f"{LIMITS.writers} writer processes")
        for result in results:
            if "reads" not in result:
                credited.update(result["credited"])
                watcher.observe(result["infos"])
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
        watcher.verify(curriculum)
        try:  # a worker started now (as `spawn` sends the curriculum) attaches to what the closed ones left
            pickle.loads(pickle.dumps(curriculum)).close()
        except CurriculumError as error:
            raise AssertionError(f"{LIMITS.writers} forked writers closed their handles, and a new worker can no "
                                 f"longer attach to the shared curriculum: {error!r}, seed {scenario_seed}") from error
        golden({"writers": LIMITS.writers, "updates": expected, "recorded": recorded})
    finally:
        stop.set()
        children.reap()
        curriculum.close()


def _late_reporter(curriculum, stale: list[int], barrier, queue) -> None:
    """Reports completions of tasks that left the pool, as workers that ran them do."""
    barrier.wait(timeout=60)
    answers = Counter(curriculum.update_task_performance(task_id, 0.5) for task_id in
                      stale * (LIMITS.late_reports_per_writer // len(stale) + 1))
    queue.put(dict(answers))


def test_late_completions_from_every_process_are_counted_exactly(curriculum_factory, require_capability,
                                                                  scenario_seed) -> None:
    """Completions of tasks that already left the pool (evicted while workers ran them) are
    refused as late and counted, exactly, however many processes report them at once."""
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=LIMITS.journal_pool,
                                    evicting=True)
    children = _Children()
    queue, barrier = CTX.Queue(), CTX.Barrier(LIMITS.writers)
    try:
        tracker = curriculum.tracker
        first = [tracker.task_id_at(s) for s in range(tracker.capacity)]
        rng = np.random.default_rng(scenario_seed)
        for score in rng.random(LIMITS.journal_history * LIMITS.journal_pool).tolist():
            task = curriculum.get_task()
            curriculum.update_task_performance(task.task_id, score if task.label == "learnable" else 0.0)
        now = {tracker.task_id_at(s) for s in range(tracker.capacity)}
        stale = [task_id for task_id in first if task_id not in now]
        assert stale, f"no task of the first pool left it in {LIMITS.journal_history * LIMITS.journal_pool} " \
                      f"completions, seed {scenario_seed}"
        before = tracker.late_completions, tracker.total_completions
        writers = [children.start(_late_reporter, curriculum, stale, barrier, queue) for _ in range(LIMITS.writers)]
        answers: Counter = Counter()
        for _ in writers:
            answers.update(queue.get(timeout=120))
        for process in writers:
            process.join(timeout=30)
            assert process.exitcode == 0, f"writer {process.name} exited with {process.exitcode}, seed {scenario_seed}"
        reported = sum(answers.values())
        assert answers[False] == reported, (
            f"of {reported} completions of tasks {stale} that had left the pool, {reported - answers[False]} were "
            f"not refused as late, seed {scenario_seed}")
        counted = tracker.late_completions - before[0]
        assert (counted, tracker.total_completions) == (reported, before[1]), (
            f"{LIMITS.writers} processes reported {reported} late completions at once: the tracker counted {counted} "
            f"late, and its completions went from {before[1]} to {tracker.total_completions}, seed {scenario_seed}")
    finally:
        children.reap()
        curriculum.close()


def _unpickling_writer(blob: bytes, go, index: int, queue) -> None:
    """A writer that unpickles the curriculum only once `go` is set (as `spawn` and
    `forkserver` workers, and torch's multiprocessing, receive it)."""
    go.wait(timeout=60)
    curriculum = pickle.loads(blob)
    _writer(curriculum, index, queue)


def _record_in_parent(curriculum, episodes: int, name: str) -> tuple[Counter, list]:
    record = CompletionRecorder(curriculum, stats_interval=episodes).record
    credited: Counter = Counter()
    infos = []
    for episode in range(episodes):
        task = curriculum.get_task()
        info = completion_info(task, 0.5, record)
        info[EPISODE_RECORD_KEY] = EpisodeRecord(name, episode, dict(task.env_cfg), (0.5,), ENDED_TERMINAL, 1)
        infos.append(info)
        if not info["curriculum_stats/late_completions"]:
            credited[task.task_id] += 1
    return credited, infos


def test_a_curriculum_unpickled_in_another_process_keeps_what_was_recorded_meanwhile(
        curriculum_factory, require_capability, scenario_seed, oracle) -> None:
    """A shared curriculum pickled into other processes (as `spawn` sends it): the copies
    attach to the live tracker, so completions the parent recorded after pickling (before the
    copies unpickle) stay recorded, and every completion of the copies and of the parent
    meanwhile counts once."""
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=4)
    # spawned: a fresh interpreter holds nothing of this one (a child forked from a process
    # with threads, as a pytest-xdist worker is, can inherit a lock another thread held)
    context = mp.get_context("spawn")
    queue, go = context.Queue(), context.Event()
    writers = []
    try:
        credited, infos = _record_in_parent(curriculum, LIMITS.recorded_around_pickling, "before pickling")
        blob = pickle.dumps(curriculum)
        for index in range(LIMITS.unpickling_writers):
            writers.append(context.Process(target=_unpickling_writer, args=(blob, go, index + 1, queue), daemon=True))
            writers[-1].start()
        more, more_infos = _record_in_parent(curriculum, LIMITS.recorded_around_pickling, "after pickling")
        credited.update(more)
        infos += more_infos
        go.set()
        more, more_infos = _record_in_parent(curriculum, LIMITS.recorded_around_pickling, "alongside")
        credited.update(more)
        infos += more_infos
        results = [queue.get(timeout=120) for _ in writers]
        for process in writers:
            process.join(timeout=30)
            assert process.exitcode == 0, f"writer {process.name} exited with {process.exitcode}, seed {scenario_seed}"
        watcher = oracle(context=f"{LIMITS.unpickling_writers} unpickling writer processes")
        watcher.observe(infos)
        for result in results:
            credited.update(result["credited"])
            watcher.observe(result["infos"])
        expected = 3 * LIMITS.recorded_around_pickling + LIMITS.unpickling_writers * LIMITS.updates_per_writer
        tracker = curriculum.tracker
        recorded = tracker.total_completions + tracker.late_completions
        assert recorded == expected, (
            f"the parent recorded {LIMITS.recorded_around_pickling} episodes before pickling the curriculum, as "
            f"many after and as many while {LIMITS.unpickling_writers} process(es) that unpickled it recorded "
            f"{LIMITS.updates_per_writer} each: {expected} in all, the tracker holds {recorded}, seed {scenario_seed}")
        per_slot = {tracker.task_id_at(s): tracker.completions_at(s) for s in range(4)}
        assert per_slot == dict(credited), (
            f"per-task completion counts {per_slot} differ from the episodes recorded {dict(credited)}, "
            f"seed {scenario_seed}")
        watcher.verify(curriculum)
    finally:
        go.set()
        for process in writers:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
        curriculum.close()


def _record_nonstop(curriculum, stop) -> None:
    """A worker recording completions of the pool's tasks in turn, without pause, until `stop` is
    set (or its parent is gone)."""
    tracker = curriculum.tracker
    tasks = [tracker.task_id_at(slot) for slot in range(tracker.capacity)]
    parent, episodes = os.getppid(), 0
    while not stop.is_set() and (episodes % 1024 or os.getppid() == parent):
        curriculum.update_task_performance(tasks[episodes % len(tasks)], 0.5)
        episodes += 1


def test_a_checkpoint_taken_while_a_worker_records_is_of_one_moment(curriculum_factory, require_capability,
                                                                     scenario_seed) -> None:
    """`get_state()` of a shared curriculum while a worker records (a checkpoint taken during
    training), and the tracker's lock-free snapshot it is made from, are the state as of one
    moment: the total of completions is the sum of the tasks' completions, and the score sums
    add up to their scores. A lock-free copy that does not check, once made, that no update
    committed while it was made mixes rows copied before an update with counters copied after
    it, and such a checkpoint restores without complaint."""
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=LIMITS.checkpoint_pool)
    stop = CTX.Event()
    worker = CTX.Process(target=_record_nonstop, args=(curriculum, stop), daemon=True)
    try:
        worker.start()
        while curriculum.tracker.total_completions < LIMITS.checkpoint_pool // 10:
            time.sleep(0.01)
        torn, first = [], None
        for taken in range(LIMITS.checkpoints_taken):
            arrays = curriculum.get_state()["arrays"] if taken % 20 == 0 else curriculum.tracker.snapshot()
            total = arrays["counters"][COUNTERS.index("total_completions")]
            first = total if first is None else first
            per_task, score_sum = int(np.sum(arrays["completions"])), float(np.sum(arrays["score_sum"]))
            if (total, 0.5 * total) != (per_task, score_sum):
                torn.append(f"checkpoint {taken}: {total} completions in all, {per_task} by task, score sum "
                            f"{score_sum}")
        assert total > first, f"the worker recorded nothing while {LIMITS.checkpoints_taken} checkpoints were taken"
        assert not torn, (
            f"{len(torn)} of {LIMITS.checkpoints_taken} checkpoints taken while a worker recorded are not of one "
            f"moment (every score 0.5): {torn[:3]}, seed {scenario_seed}")
    finally:
        stop.set()
        worker.join(timeout=10)
        if worker.is_alive():
            worker.kill()
            worker.join(timeout=10)
        curriculum.close()


def _update_error(curriculum, task_id: int) -> BaseException | None:
    """The exception an update raised, or None if it went through."""
    return _call_error(curriculum.update_task_performance, task_id, 0.5)


def _call_error(call, *args) -> BaseException | None:
    """The exception `call(*args)` raised, or None if it went through."""
    try:
        call(*args)
    except Exception as error:  # returned to the caller, which asserts on its type and message
        return error
    return None


def _hold_lock(curriculum, ready, seconds: float, descendant=None) -> None:
    """Take the lock and keep it `seconds`; with `descendant` (a shared int), first fork a
    process that outlives this one (its own worker, a data loader) and put its pid there."""
    if descendant is not None:
        curriculum.tracker.lock.acquire()  # this process's own lock opened before the fork, as after a record
        curriculum.tracker.lock.release()
        pid = os.fork()
        if pid == 0:
            time.sleep(seconds)
            os._exit(0)
        descendant.value = pid
    curriculum.tracker.lock.acquire()
    ready.set()
    time.sleep(seconds)


def test_stuck_or_killed_lock_holder_does_not_hang_the_others(curriculum_factory, require_capability,
                                                              scenario_seed) -> None:
    """A lock holder stuck in its section times the others out by name (`LockTimeoutError`, a
    `TimeoutError`, within the timeout), and a checkpoint load that times out so leaves the
    curriculum as it was (the pool's arrays and this process's own draws alike); killed
    there, the next update rolls its section back at once (one repair), although a process it
    forked lives on (a child must not keep the dead holder's lock)."""
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed,
                                    lock_timeout=LIMITS.lock_timeout)
    holder = None
    descendant = CTX.Value("i", 0)
    try:
        checkpoint = curriculum.get_state()  # before any draw: another draw position, other counts
        task = curriculum.get_task()
        curriculum.update_task_performance(task.task_id, 0.5)
        recorded_before = curriculum.tracker.total_completions
        backend = curriculum.tracker.backend
        repairs_before = getattr(backend, "repairs", None)
        state_before = json.dumps(curriculum.get_state(), sort_keys=True)

        ready = CTX.Event()
        holder = CTX.Process(target=_hold_lock, args=(curriculum, ready, 60.0, descendant), daemon=True)
        holder.start()
        assert ready.wait(30), "the lock-holding process never took the lock"
        with pytest.raises(LockTimeoutError):
            curriculum.load_state(checkpoint)
        changed = _state_changes(json.loads(state_before), curriculum.get_state())
        assert not changed, (
            f"a checkpoint load that timed out on process {holder.pid}'s lock changed {changed}: a refused load "
            f"changes nothing, seed {scenario_seed}")
        task = curriculum.get_task()
        started = time.monotonic()
        error = _update_error(curriculum, task.task_id)
        waited = time.monotonic() - started
        assert isinstance(error, LockTimeoutError) and f"held by pid {holder.pid}" in str(error), (
            f"an update while process {holder.pid} held the lock {'went through' if error is None else f'raised {error!r}'}"
            f"; expected LockTimeoutError naming the holder within {LIMITS.lock_timeout} s, seed {scenario_seed}"
        )
        assert isinstance(error, TimeoutError), (
            f"a lock timeout raised {type(error).__mro__}: a worker's `except TimeoutError` (the builtin way to "
            f"retry or skip what timed out) does not catch it, seed {scenario_seed}")
        worker = pickle.loads(pickle.dumps(curriculum))  # attached, as a spawned worker gets it: the same timeout
        try:
            started = time.monotonic()
            error = _update_error(worker, task.task_id)
            waited = time.monotonic() - started
        finally:
            worker.close()
        assert isinstance(error, LockTimeoutError) and waited <= LIMITS.lock_timeout * 3, (
            f"a worker attached to the shared curriculum {'went through' if error is None else f'raised {error!r}'} "
            f"after {waited:.1f} s on the stuck holder; the curriculum was created with a lock timeout of "
            f"{LIMITS.lock_timeout} s, seed {scenario_seed}")
        assert waited <= LIMITS.lock_timeout * 3, (
            f"a writer waited {waited:.1f} s on a stuck lock holder, timeout {LIMITS.lock_timeout} s, seed {scenario_seed}"
        )
        assert curriculum.tracker.total_completions == recorded_before, "a failed update changed the tracker"

        os.kill(holder.pid, signal.SIGKILL)
        holder.join()  # (reaped by pid: the process it forked holds its sentinel)
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
        if repairs_before is not None:  # the shared block's count of dead holders' sections rolled back
            repaired = backend.repairs - repairs_before
            curriculum.tracker.lock.acquire()
            curriculum.tracker.lock.abort()  # a section this process aborts itself is no repair
            assert (repaired, backend.repairs - repairs_before) == (1, 1), (
                f"the tracker's `repairs` counted {repaired} after one lock holder died inside the lock and the next "
                f"update rolled its section back, and {backend.repairs - repairs_before} once this process aborted a "
                f"section of its own (1 and 1 expected: only dead holders' sections count), seed {scenario_seed}")
    finally:
        _stop(holder)
        if descendant.value:
            with contextlib.suppress(ProcessLookupError):
                os.kill(descendant.value, signal.SIGKILL)
        curriculum.close()


def _state_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The keys of a checkpoint (and of its arrays) whose values differ between two states."""
    after = json.loads(json.dumps(after, sort_keys=True))
    changed = [key for key in sorted(set(before) | set(after)) if key != "arrays" and before.get(key) != after.get(key)]
    arrays = (before.get("arrays", {}), after.get("arrays", {}))
    return changed + [f"arrays/{name}" for name in sorted(set(arrays[0]) | set(arrays[1]))
                      if arrays[0].get(name) != arrays[1].get(name)]


def _abort_sections(curriculum, ready, stop) -> None:
    """Open a section, put a task into every slot and abort it, again and again until `stop`."""
    tracker = curriculum.tracker
    lock = tracker.lock
    ready.set()
    while not stop.is_set():
        lock.acquire()
        for slot in range(tracker.capacity):
            tracker.assign(slot, UNCOMMITTED_TASK_ID, evicted=True)
        lock.abort()


def test_lock_free_reads_racing_writers_return_only_committed_ids(curriculum_factory, require_capability,
                                                                 scenario_seed) -> None:
    """A writer opens a section, puts a task into every slot and rolls the section back, without
    pause, while this process reads the pool's task ids lock-free (what every worker's task
    draw reads): a section may start between any two words a read takes, and no read may
    return the id that was never committed (a worker would run a task the pool never held,
    and its completion be refused as unknown)."""
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed)
    tracker = curriculum.tracker
    require_capability(callable(getattr(tracker, "assign", None)) and callable(getattr(tracker.lock, "abort", None)),
                       "the tracker puts no task into a slot (assign) or aborts no section (lock.abort)")
    committed = [tracker.task_id_at(slot) for slot in range(tracker.capacity)]
    ready, stop = CTX.Event(), CTX.Event()
    writer = CTX.Process(target=_abort_sections, args=(curriculum, ready, stop), daemon=True)
    writer.start()
    reads, wrong = 0, Counter()
    try:
        assert ready.wait(30), "the writing process never started"
        deadline = time.monotonic() + LIMITS.racing_read_seconds
        read = tracker.task_id_at
        while time.monotonic() < deadline:
            for slot in range(tracker.capacity):
                task_id = read(slot)
                if task_id != committed[slot]:
                    wrong[(slot, task_id)] += 1
            reads += tracker.capacity
    finally:
        stop.set()
        writer.join(timeout=10)
        _stop(writer)
        curriculum.close()
    assert not wrong, (
        f"{sum(wrong.values())} of {reads} lock-free reads of task ids returned an id never committed while a writer "
        f"opened and rolled back sections ((slot, id read): count {dict(wrong.most_common(4))}; committed "
        f"{committed}), seed {scenario_seed}")


def _update_and_report(curriculum, task_id: int, queue) -> None:
    """One update in this (forked) process; what it raised, if anything, and how long it took."""
    started = time.monotonic()
    error = _update_error(curriculum, task_id)
    queue.put({"raised": None if error is None else type(error).__name__, "message": str(error or ""),
               "took": round(time.monotonic() - started, 2)})


def test_a_process_forked_while_the_lock_is_held_waits_for_it(curriculum_factory, require_capability,
                                                              scenario_seed) -> None:
    """A worker forked while its parent holds the lock (a trainer thread recording while
    another forks): the lock is the parent's, not the child's. The child's update must wait
    and end in `LockTimeoutError` naming the parent, changing nothing; forked once the parent
    released the lock, a child's update goes through."""
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed,
                                    lock_timeout=LIMITS.lock_timeout)
    children = _Children()
    try:
        task = curriculum.get_task()
        recorded = curriculum.stats()["total_completions"]
        queue = CTX.Queue()
        lock = curriculum.tracker.lock
        lock.acquire()
        try:
            children.start(_update_and_report, curriculum, task.task_id, queue)
            [held] = children.collect(queue, 1, timeout=60, what="children forked under the lock", seed=scenario_seed)
        finally:
            lock.release()
        assert held["raised"] == "LockTimeoutError" and f"held by pid {os.getpid()}" in held["message"], (
            f"a child forked while its parent (pid {os.getpid()}) held the lock updated with outcome {held}; expected "
            f"LockTimeoutError naming the parent within {LIMITS.lock_timeout} s: the child took the lock as if it "
            f"were its own, seed {scenario_seed}")
        assert curriculum.stats()["total_completions"] == recorded, (
            f"a child's update refused for a held lock changed the completions: {recorded} before, "
            f"{curriculum.stats()['total_completions']} after, seed {scenario_seed}")
        children.start(_update_and_report, curriculum, task.task_id, queue)
        [free] = children.collect(queue, 1, timeout=60, what="children forked after the release", seed=scenario_seed)
        assert free["raised"] is None and curriculum.stats()["total_completions"] == recorded + 1, (
            f"a child forked after the lock was released updated with outcome {free}, completions "
            f"{recorded} -> {curriculum.stats()['total_completions']} (one more expected), seed {scenario_seed}")
    finally:
        children.reap()
        curriculum.close()


def _hold_then_release(curriculum, ready, seconds: float, queue) -> None:
    lock = curriculum.tracker.lock
    lock.acquire()
    ready.set()
    time.sleep(seconds)
    lock.release()
    queue.put(time.monotonic())  # CLOCK_MONOTONIC: one clock for every process of the machine


def test_a_waiter_takes_the_lock_as_soon_as_it_is_released(curriculum_factory, require_capability,
                                                            scenario_seed) -> None:
    """A writer that waited a while for a busy lock (a holder checkpointing a large pool) gets
    it as soon as it is released, not after a back-off grown as long as the wait: every writer
    of a busy run would otherwise idle for as long as it has already waited."""
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed)
    children = _Children()
    try:
        queue, ready = CTX.Queue(), CTX.Event()
        children.start(_hold_then_release, curriculum, ready, LIMITS.busy_hold, queue)
        assert ready.wait(30), "the lock-holding process never took the lock"
        task = curriculum.get_task()
        curriculum.update_task_performance(task.task_id, 0.5)
        done = time.monotonic()
        released = queue.get(timeout=30)
        assert done - released <= LIMITS.max_lag_after_release, (
            f"a writer waiting on a lock held {LIMITS.busy_hold} s got it {done - released:.3f} s after its release, "
            f"limit {LIMITS.max_lag_after_release} s, seed {scenario_seed}")
    finally:
        children.reap()
        curriculum.close()


def _relay_then_hold(curriculum, ready, relays: int, every: float, hold: float) -> None:
    """Take the lock, hand it on to itself `relays` times (released and taken again at once, as
    writers queueing for it do), then hold it for `hold` seconds (stuck)."""
    lock = curriculum.tracker.lock
    lock.acquire()
    ready.set()
    for _ in range(relays):
        time.sleep(every)
        lock.release()
        lock.acquire()
    time.sleep(hold)
    lock.release()


def test_a_lock_holder_stuck_after_handing_the_lock_on_still_times_out(curriculum_factory, require_capability,
                                                                       scenario_seed) -> None:
    """A writer waiting while the lock changes hands waits on (contention is not a stuck
    holder), but once a holder stops handing it on, the wait ends in `LockTimeoutError` within
    the timeout counted from the last handover: a waiter that has seen the lock move must still
    notice when it stops moving."""
    timeout = LIMITS.lock_timeout
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, lock_timeout=timeout)
    relays, every = LIMITS.handovers, LIMITS.handover_every * timeout
    holder = None
    try:
        ready = CTX.Event()
        holder = CTX.Process(target=_relay_then_hold, daemon=True,
                             args=(curriculum, ready, relays, every, LIMITS.stuck_after_handovers))
        holder.start()
        assert ready.wait(30), "the lock-holding process never took the lock"
        deadline = relays * every + LIMITS.max_wait_after_handovers * timeout
        outcomes = []
        started = time.monotonic()
        for _ in range(LIMITS.handover_attempts):  # (a waiter may win a handover: then it waits again)
            task = curriculum.get_task()
            error = _update_error(curriculum, task.task_id)
            outcomes.append((round(time.monotonic() - started, 2), type(error).__name__ if error else "went through"))
            if error is not None:
                break
            time.sleep(every / 10)  # (a win: the holder, slower to wake on a loaded machine, takes the lock back)
        waited = time.monotonic() - started
        assert isinstance(error, LockTimeoutError) and f"held by pid {holder.pid}" in str(error), (
            f"updates while process {holder.pid} handed the lock on {relays} times, {every:.2f} s apart, then held it: "
            f"(seconds, outcome) {outcomes}; expected LockTimeoutError naming the holder, timeout {timeout} s, "
            f"seed {scenario_seed}")
        assert waited >= (relays - 1) * every, (
            f"a writer waiting while process {holder.pid} handed the lock on {relays} times, {every:.2f} s apart, "
            f"timed out after {waited:.1f} s, while the lock still moved: (seconds, outcome) {outcomes}; the timeout "
            f"of {timeout} s counts from the last handover, seed {scenario_seed}")
        assert waited <= deadline, (
            f"a writer waited {waited:.1f} s for a lock handed on {relays} times {every:.2f} s apart and then held, "
            f"limit {deadline:.1f} s (the handovers, then {LIMITS.max_wait_after_handovers} timeouts of {timeout} s), "
            f"seed {scenario_seed}")
    finally:
        _stop(holder)
        curriculum.close()


def _differences(seen: np.ndarray, committed: np.ndarray) -> str:
    """Where `seen` differs from `committed`: how many entries, the first few (index: seen vs committed)."""
    where = np.flatnonzero(seen != committed)
    first = ", ".join(f"[{i}]: {seen[i].item()!r} vs {committed[i].item()!r}" for i in where[:4].tolist())
    return f"{where.size} of {committed.size} entries differ ({first})"


def _stop(holder: Any) -> None:
    """Kill and reap a lock-holding process the check left running (None: never started)."""
    if holder is not None and holder.is_alive():
        holder.kill()
        holder.join()  # SIGKILL: it ends (by pid, whoever else holds its sentinel)


UNCOMMITTED_TASK_ID = 10**9
"""The id a stuck writer puts into a slot without committing (no curriculum's pool reaches it)."""


def _other_rows(capacity: int, slot: int, rows: str) -> list[int]:
    return list(range(capacity)) if rows == "all" else [(slot + 1) % capacity]


def _write_then_hang(curriculum, slot: int, rows: str, ready, seconds: float, go=None, *,
                     through_curriculum: bool = False, checkpoint: dict | None = None, changed=None,
                     late_task: int | None = None, attached: bool = False) -> None:
    """A writer stuck inside an update: it wrote slot `slot` twice, then the next slot ("few"
    rows) or every slot of the pool ("all": more rows than one update usually touches), put a
    new task into the slot after the next, and never committed (with `go`: committed once
    `go` was set). `through_curriculum`: the completions go through `update_task_performance`,
    so the algorithm writes its own arrays too, all in the one open update. `checkpoint`
    ("restore"): the update is `load_state(checkpoint)`, which rewrites every array. `changed`
    ("evict", "advance", "master"): completions through the curriculum until two evict a task
    (their statistics go to the memory of configurations, new tasks come in), one advances the
    stage (a new pool) or masters a configuration (learning progress clears the memory's
    stagnant verdicts), then 1 in `changed`. `late_task` ("late"): the one completion of a task
    that left the pool (it writes only the late count). `attached`: the writer is a handle this
    process unpickled, which attaches to the block by name (as a spawned worker's does)."""
    if attached:
        curriculum = pickle.loads(pickle.dumps(curriculum))
    tracker = curriculum.tracker
    lock = tracker.lock
    lock.acquire()
    release = lock.release
    if through_curriculum or checkpoint is not None or changed is not None or late_task is not None:
        lock.release = lambda: None  # (this process only) each update joins the open one
    if checkpoint is not None or changed is not None or late_task is not None:
        if late_task is not None:
            curriculum.update_task_performance(late_task, 0.5)
        elif checkpoint is not None:
            curriculum.load_state(checkpoint)
        else:
            seen = [_changes(curriculum, rows)]
            for _ in range(LIMITS.change_attempts):
                if _changes(curriculum, rows) != seen[-1]:
                    seen.append(_changes(curriculum, rows))
                if len(seen) > CHANGES_PER_UPDATE.get(rows, 1):
                    changed.value = 1
                    break
                # (scored as in the evicting history; perfect scores advance and master)
                task = curriculum.get_task()
                learnable = float(task.label == "learnable")
                score = learnable * random.random() if rows == "evict" else learnable if rows == "master" else 1.0
                curriculum.update_task_performance(task.task_id, score)
        ready.set()
        if go is not None and go.wait(seconds):
            release()
            return
        time.sleep(seconds)
        return
        record = lambda s, score: curriculum.update_task_performance(tracker.task_id_at(s), score)  # noqa: E731
    else:
        record = tracker.record
    record(slot, 1.0)
    record(slot, 0.0)
    for other in _other_rows(tracker.capacity, slot, rows):
        record(other, 1.0)
    tracker.assign((slot + 2) % tracker.capacity, UNCOMMITTED_TASK_ID, evicted=True)  # a task put in, never committed
    ready.set()
    if go is not None and go.wait(seconds):
        release()
        return
    time.sleep(seconds)


class _Meanwhile:
    """What other processes do while a writer holds an open update, each in a thread of this
    one: a copy of the curriculum unpickled (a worker starting up: reading must not write) and,
    with `task_id`, a completion of that task (it waits for the lock)."""

    def __init__(self, curriculum, task_id: int | None) -> None:
        self.credited: Any = None
        self.copy: Any = None
        blob = pickle.dumps(curriculum)
        self._threads = [threading.Thread(target=self._unpickle, args=(blob,), daemon=True)]
        if task_id is not None:
            self._threads.append(threading.Thread(target=self._complete, args=(curriculum, task_id), daemon=True))
        for thread in self._threads:
            thread.start()
        time.sleep(LIMITS.meanwhile_start)  # (each reads, or waits for the lock, before the update commits)

    def _unpickle(self, blob: bytes) -> None:
        self.copy = pickle.loads(blob)

    def _complete(self, curriculum, task_id: int) -> None:
        self.credited = curriculum.update_task_performance(task_id, 0.25)

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=30)
        if self.copy is not None:
            self.copy.close()


def _changes(curriculum, rows: str) -> Any:
    """What an open update of `rows` changes, as the process that makes it sees it: learning
    progress's mastery events ("master"), else the evictions and the stage."""
    if rows == "master":
        return int(curriculum.tracker.backend.arrays["lp_counters"][LP_COUNTERS.index("mastery_events")])
    return curriculum.tracker.evictions, curriculum.stage


#: What each update that goes on until it changes something changes, for messages.
CHANGES = {"evict": "eviction", "advance": "stage advance", "master": "mastery of a configuration"}
#: How many such changes the open update makes: two evictions write the memory of
#: configurations twice in one transaction (its pre-image must stay the one from before both).
CHANGES_PER_UPDATE = {"evict": 2}

#: (committed history, what the stuck update writes): see the test
STUCK_UPDATES = [(history, rows) for history in ("uniform", "evicting", "staged") for rows in ("few", "all", "restore")]
STUCK_UPDATES += [("evicting", "evict"), ("evicting", "master"), ("staged", "advance"), ("evicting", "late")]


@pytest.mark.parametrize("end", ["killed", "commits"])
@pytest.mark.parametrize(("history", "rows"), STUCK_UPDATES)
def test_a_stuck_or_killed_writer_exposes_nothing_uncommitted(curriculum_factory, require_capability,
                                                              scenario_seed, history, rows, end) -> None:
    """Lock-free readers see a stuck writer's open update as not yet made; a writer killed
    mid-update leaves every statistic exactly as it was committed before, and one that commits
    after those reads commits all of its update (reading must not write). The update writes one
    row twice, then one more row ("few": each row journaled on its own) or every row of a
    `LIMITS.journal_pool`-task pool ("all": the rows journaled at once). `evicting`: the updates
    committed before it evicted tasks many times, each writing the memory of evicted
    configurations (arrays a transaction saves only when it writes them), which must survive
    the rollback as committed. `staged`: a window of recent scores as long as the pool, written
    at its own position, not by slot. "restore": the open update is a checkpoint restore
    (`load_state` of a checkpoint taken halfway through the history), which rewrites every
    array; "evict": completions through the curriculum until two evicted a task, whose
    statistics go to the memory of configurations (written twice in one transaction); "master": perfect scores on learnable tasks
    until a configuration is mastered, which clears the stagnant verdicts that history left in
    that memory; "advance": perfect scores until the stage advances (history scores stay below
    its threshold), which refills the whole pool; "late": one completion of a task an eviction
    took out of the pool, which writes the late count and no task's row. The writers of
    "evict", "master" and "advance" attached to the block by name (a handle unpickled in their
    process), the others are forked copies of the curriculum. Lock-free
    reads of every task's numbers (touched by the open update or not) return the committed
    ones. While an update that commits is open, another worker starts up (unpickles a copy of
    the curriculum, which must write nothing) and a completion of a task the update replaces
    waits for the lock: once the update commits, that task has left the pool and its
    completion is late."""
    evicting = history == "evicting"
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=LIMITS.journal_pool,
                                    evicting=evicting, staged=history == "staged", advancing=rows == "advance")
    tracker = curriculum.tracker
    holder = None
    try:
        rng = np.random.default_rng(scenario_seed)
        history_length = LIMITS.journal_history * LIMITS.journal_pool + LIMITS.journal_history_extra
        checkpoint = None
        handed_out = set()
        for step, score in enumerate(rng.random(history_length).tolist()):
            if rows == "restore" and step == history_length // 2:
                checkpoint = curriculum.get_state()
            task = curriculum.get_task()
            handed_out.add(task.task_id)
            stagnant = evicting and task.label != "learnable"  # an impossible task never pays
            low = rows == "advance"  # (below the stage's threshold)
            curriculum.update_task_performance(task.task_id, 0.0 if stagnant else score * (0.4 if low else 1.0))
        if evicting:
            evictions = curriculum.stats().get("evictions", 0)
            assert evictions >= LIMITS.min_history_evictions, (
                f"the committed history evicted {evictions} tasks, expected at least {LIMITS.min_history_evictions}, "
                f"seed {scenario_seed}"
            )
        slot = 0
        task_id = tracker.task_id_at(slot)
        committed_stats = tracker.task_stats(slot, task_id)
        committed, committed_total = tracker.snapshot(), tracker.total_completions
        committed_ids = [tracker.task_id_at(s) for s in range(tracker.capacity)]
        committed_tasks = [tracker.task_stats(s, committed_ids[s]) for s in range(tracker.capacity)]
        committed_late = tracker.late_completions
        late_task = min(handed_out - set(committed_ids)) if rows == "late" else None

        ready, go = CTX.Event(), CTX.Event()
        changed = CTX.Value("i", 0) if rows in CHANGES else None
        committed_changes = _changes(curriculum, rows)
        holder = CTX.Process(target=_write_then_hang, args=(curriculum, slot, rows, ready, 60.0,
                                                            go if end == "commits" else None),
                             kwargs={"through_curriculum": history == "staged", "checkpoint": checkpoint,
                                     "changed": changed, "late_task": late_task, "attached": rows in CHANGES},
                             daemon=True)
        holder.start()
        assert ready.wait(30), "the writing process never took the lock"
        assert changed is None or changed.value == 1, (
            f"the writer's open update made no {CHANGES[rows]} in "
            f"{LIMITS.change_attempts} completions, seed {scenario_seed}")
        seen_stats, seen = tracker.task_stats(slot, task_id), tracker.snapshot()
        seen_ids = [tracker.task_id_at(s) for s in range(tracker.capacity)]
        pool_ids = [task.task_id for task in curriculum.active_tasks()]
        assert pool_ids == committed_ids, (
            f"active_tasks() listed the pool as {pool_ids} while a writer held an open update; committed: "
            f"{committed_ids}, seed {scenario_seed}")
        seen_tasks = [tracker.task_stats(s, committed_ids[s]) for s in range(tracker.capacity)]
        seen_means = [tracker.mean_score_at(s) for s in range(tracker.capacity)]
        assert seen_ids == committed_ids, (
            f"lock-free reads of the pool's task ids returned {seen_ids} while a writer held an open update ("
            + ("a checkpoint restore" if rows == "restore" else f"a {CHANGES[rows]}" if rows in CHANGES else
               f"a late completion of task {late_task}" if rows == "late" else
               f"that put task {UNCOMMITTED_TASK_ID} in")
            + f"); committed: {committed_ids}, seed {scenario_seed}"
        )
        assert seen_stats == committed_stats, (
            f"a lock-free read of task {task_id} returned {seen_stats} while a writer held an open update; the "
            f"committed (completions, mean, last score) are {committed_stats}, seed {scenario_seed}"
        )
        stale = [f"slot {s}: {seen_tasks[s]} vs {committed_tasks[s]}" for s in range(tracker.capacity)
                 if seen_tasks[s] != committed_tasks[s]]
        assert not stale, (
            f"lock-free reads of {len(stale)} of {tracker.capacity} tasks' (completions, mean, last score) differed "
            f"from the committed ones while a writer held an open update: {stale[:4]}, seed {scenario_seed}"
        )
        torn = [f"slot {s}: {seen_means[s]} vs {seen_tasks[s][1]}" for s in range(tracker.capacity)
                if seen_means[s] != seen_tasks[s][1]]
        assert not torn, (
            f"mean_score_at() of {len(torn)} slots differed from the mean task_stats() read while a writer held an "
            f"open update (both combine a slot's values from one state, the committed one): {torn[:4]}, seed "
            f"{scenario_seed}"
        )
        for name, values in committed.items():
            assert np.array_equal(seen[name], values), (
                f"a lock-free snapshot showed `{name}` other than committed while a writer held an open update: "
                f"{_differences(seen[name], values)}, seed {scenario_seed}"
            )

        if end == "commits":  # while the update is open: a worker starting up, a completion of a task it replaces
            replaced = committed_ids[(slot + 2) % tracker.capacity] if rows in ("few", "all") else \
                committed_ids[0] if rows == "advance" else None
            late = tracker.late_completions
            meanwhile = _Meanwhile(curriculum, replaced)
            go.set()
            holder.join(timeout=10)
            meanwhile.join()
            assert replaced is None or (meanwhile.credited, tracker.late_completions) == (False, late + 1), (
                f"task {replaced} completed while a writer's open update replaced it, and waited for the lock: "
                f"credited {meanwhile.credited!r}, {tracker.late_completions - late} late completion(s) counted; it "
                f"left the pool before its completion was recorded, and is late (False, 1), seed {scenario_seed}")
        if end == "commits" and late_task is not None:
            assert tracker.late_completions == committed_late + 1, (
                f"a writer committed a late completion of task {late_task} after lock-free reads, and the tracker "
                f"counts {tracker.late_completions - committed_late} late completion(s) more than before it, seed "
                f"{scenario_seed}")
            return
        if end == "commits" and changed is not None:
            now = _changes(curriculum, rows)
            assert now != committed_changes, (
                f"a writer committed an update that made a {CHANGES[rows]} after lock-free reads, and the tracker "
                f"shows {now}, {committed_changes} before it, seed {scenario_seed}")
            if rows == "master":
                remembered = [int(np.count_nonzero(keys)) for keys in
                              (committed["lp_memory_keys"], tracker.snapshot()["lp_memory_keys"])]
                assert remembered[1] < remembered[0], (
                    f"the mastery left the memory of configurations at {remembered[1]} entries, {remembered[0]} "
                    f"before it: it cleared no stagnant verdict, and the check measured nothing, seed {scenario_seed}")
            return
        if end == "commits" and checkpoint is not None:
            now = tracker.snapshot()
            for name, values in checkpoint["arrays"].items():
                assert np.array_equal(now[name], np.asarray(values, dtype=now[name].dtype)), (
                    f"a writer committed a checkpoint restore after lock-free reads, and `{name}` is not the "
                    f"checkpoint's: {_differences(now[name], np.asarray(values, dtype=now[name].dtype))}, "
                    f"seed {scenario_seed}")
            return
        if end == "commits":
            others = _other_rows(tracker.capacity, slot, rows)
            expected = committed["completions"].copy()
            expected[slot] += 2
            expected[others] += 1
            expected[(slot + 2) % tracker.capacity] = 0
            expected_ids = list(committed_ids)
            expected_ids[(slot + 2) % tracker.capacity] = UNCOMMITTED_TASK_ID
            now = tracker.snapshot()
            assert (now["completions"].tolist(), now["task_ids"].tolist(), tracker.total_completions) == (
                expected.tolist(), expected_ids, committed_total + 2 + len(others)), (
                f"a writer committed its update after lock-free reads: per-slot completions "
                f"{now['completions'].tolist()}, task ids {now['task_ids'].tolist()}, {tracker.total_completions} "
                f"completions in all; its update makes them {expected.tolist()}, {expected_ids} and "
                f"{committed_total + 2 + len(others)}, seed {scenario_seed}")
            return
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(timeout=10)
        with tracker.lock:  # the next lock holder rolls the dead writer's update back
            restored = tracker.snapshot()
        for name, values in committed.items():
            assert np.array_equal(restored[name], values), (
                f"after a writer was killed mid-update, `{name}` is not as committed before the update: "
                f"{_differences(restored[name], values)}, seed {scenario_seed}"
            )
        assert curriculum.update_task_performance(task_id, 0.5) and tracker.total_completions == committed_total + 1, (
            f"after a writer was killed mid-update the tracker counts {tracker.total_completions} completions; "
            f"expected the {committed_total} committed before plus the one made after, seed {scenario_seed}"
        )
    finally:
        _stop(holder)
        curriculum.close()


@pytest.mark.parametrize("history", ["uniform", "evicting", "staged"])
def test_a_checkpoint_restored_right_after_a_writer_was_killed_is_what_the_curriculum_holds(
        curriculum_factory, require_capability, scenario_seed, history) -> None:
    """A writer killed mid-update leaves its open update for the next lock holder to roll back.
    When the next thing the trainer does is restore a checkpoint (resuming after a crash), the
    curriculum must hold exactly the checkpoint afterwards: a restore that writes without taking
    the lock first has the dead writer's rollback land on top of it."""
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=LIMITS.journal_pool,
                                    evicting=history == "evicting", staged=history == "staged")
    tracker = curriculum.tracker
    holder = None
    try:
        rng = np.random.default_rng(scenario_seed)
        history_length = LIMITS.journal_history * LIMITS.journal_pool + LIMITS.journal_history_extra
        checkpoint = None
        for step, score in enumerate(rng.random(history_length).tolist()):
            if step == history_length // 2:
                checkpoint = json.loads(json.dumps(curriculum.get_state()))
            task = curriculum.get_task()
            stagnant = history == "evicting" and task.label != "learnable"
            curriculum.update_task_performance(task.task_id, 0.0 if stagnant else score)
        ready = CTX.Event()
        holder = CTX.Process(target=_write_then_hang, args=(curriculum, 0, "all", ready, 60.0),
                             kwargs={"through_curriculum": history == "staged"}, daemon=True)
        holder.start()
        assert ready.wait(30), "the writing process never took the lock"
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(timeout=10)
        curriculum.load_state(checkpoint)
        now = tracker.snapshot()
        for name, values in checkpoint["arrays"].items():
            saved = np.asarray(values, dtype=now[name].dtype)
            assert np.array_equal(now[name], saved), (
                f"[{history}] a checkpoint restored right after a writer was killed mid-update, and `{name}` is not "
                f"the checkpoint's: {_differences(now[name], saved)}, seed {scenario_seed}")
    finally:
        _stop(holder)
        curriculum.close()


BAD_INPUTS = (  # (task id or None for a handed-out one, score): each must be refused by name
    (None, float("nan")), (None, -0.5), (None, 1.5), (None, "0.5"), (10**9, 0.5), (-3, 0.5), ("1", 0.5),
    (None, 10**400), (None, Fraction(-(10**400), 3)),  # real numbers no float holds
)


def _bad_then_good(curriculum, index: int, barrier, queue, leaked) -> None:
    """In round r, writer r sends every bad input while the others wait; then the others
    update, timed, while writer r waits (alive: an exiting process would drop a leaked lock).
    The rounds stop once an update found the lock held (`leaked`, set before a round's last
    barrier and read after it, so every writer stops at the same round): each further round
    would only wait out more lock timeouts."""
    curriculum.reseed(index)
    refused, waits = [], []
    for turn in range(LIMITS.writers):
        if leaked.is_set():
            break
        if turn == index:
            for task_id, score in BAD_INPUTS:
                task = curriculum.get_task()
                try:
                    curriculum.update_task_performance(task.task_id if task_id is None else task_id, score)
                    refused.append(f"accepted {task_id!r}, {score!r}")
                except CurriculumError as error:
                    refused.append(type(error).__name__)
                except Exception as error:  # an unnamed error is itself a finding, reported to the test
                    refused.append(f"unnamed {type(error).__name__}: {error}")
        barrier.wait(timeout=60)
        if turn != index:
            task = curriculum.get_task()
            began = time.monotonic()
            try:
                curriculum.update_task_performance(task.task_id, 0.5)
                waits.append(round(time.monotonic() - began, 3))
            except LockTimeoutError as error:
                waits.append(f"LockTimeoutError after writer {turn}'s bad input, {time.monotonic() - began:.1f} s: "
                             f"{error}")
                leaked.set()
        barrier.wait(timeout=60)
    queue.put({"index": index, "refused": refused, "waits": waits})


def test_bad_input_from_any_process_leaves_the_lock_free(curriculum_factory, require_capability,
                                                         scenario_seed) -> None:
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed,
                                    lock_timeout=LIMITS.lock_timeout)  # a leaked lock is a stuck holder
    children = _Children()
    try:
        queue, barrier, leaked = CTX.Queue(), CTX.Barrier(LIMITS.writers), CTX.Event()
        writers = [children.start(_bad_then_good, curriculum, i, barrier, queue, leaked) for i in range(LIMITS.writers)]
        results = sorted((queue.get(timeout=120) for _ in writers), key=lambda r: r["index"])
        for process in writers:
            process.join(timeout=30)
        for result in results:
            unnamed = [r for r in result["refused"] if r.startswith(("unnamed", "accepted"))]
            assert not unnamed, (
                f"writer {result['index']}: bad input was not refused with a named curriculum error: {unnamed}, "
                f"seed {scenario_seed}"
            )
            stuck = [w for w in result["waits"] if isinstance(w, str)]
            assert not stuck, (
                f"writer {result['index']}: an update right after bad input waited for the lock "
                f"(lock timeout {LIMITS.lock_timeout} s): {stuck[:3]}; an error path left the lock held, "
                f"seed {scenario_seed}"
            )
        for process in writers:
            assert process.exitcode == 0, f"writer {process.name} exited with {process.exitcode}, seed {scenario_seed}"
        stats = curriculum.stats()
        expected = LIMITS.writers * (LIMITS.writers - 1)
        assert stats["total_completions"] + stats["late_completions"] == expected, (
            f"{expected} good updates were made after the bad ones, the curriculum recorded "
            f"{stats['total_completions'] + stats['late_completions']}, seed {scenario_seed}"
        )
    finally:
        children.reap()
        curriculum.close()


def _changed(array: np.ndarray) -> np.ndarray:
    return array + (1 if array.dtype.kind in "iu" else 0.5)


@pytest.mark.parametrize("history", ["uniform", "evicting", "staged"])
def test_every_array_a_section_writes_is_rolled_back_and_never_seen_open(
        uses_builtin_curriculum, curriculum_factory, require_capability, scenario_seed, history: str) -> None:
    """Whatever array of the tracker's layout a section writes (each slot row after `touch`,
    each rarely written array after `touch_globals`, every other one as is): another handle's
    lock-free snapshot taken while the section is open shows none of it, and `abort()` undoes
    all of it. An array the block's plan files under the wrong region is neither journaled
    nor rolled back, which real updates reach only when they happen to write it."""
    require_capability(uses_builtin_curriculum, "writes the built-in curriculum's tracker arrays directly")
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=4,
                                    evicting=history == "evicting", staged=history == "staged")
    other = None
    try:
        for _ in range(40):
            curriculum.update_task_performance(curriculum.get_task().task_id, 0.5)
        backend = curriculum.tracker.backend
        cold = set(curriculum._algorithm.cold_arrays)
        before = curriculum.tracker.snapshot()
        other = Curriculum.attach(curriculum.shared_memory_name, curriculum.config)
        lock = backend.lock
        lock.acquire()
        try:
            for name in backend.layout:
                array = backend[name]
                if name in backend.slot_arrays:
                    for slot in (0, len(array) - 1):
                        backend.touch(slot)
                        array[slot] = _changed(array[slot])
                else:
                    if name in cold:
                        backend.touch_globals()
                    array[:] = _changed(array)
            seen = other.tracker.snapshot()
        finally:
            lock.abort()
        after = curriculum.tracker.snapshot()
        for what, arrays in (("another handle's snapshot while the section was open", seen),
                             ("the arrays after abort()", after)):
            wrong = {name: _differences(arrays[name], before[name]) for name in before
                     if not np.array_equal(arrays[name], before[name], equal_nan=True)}
            assert not wrong, (f"{history}: a section wrote every array of the layout; {what} differ from the "
                               f"committed state: {wrong}, seed {scenario_seed}")
    finally:
        if other is not None:
            other.close()
        curriculum.close()


class _Interrupted(KeyboardInterrupt):
    """Ctrl-C (or any error) landing inside a locked section, after it wrote."""


@pytest.mark.parametrize("writes", ["hot", "every"])
@pytest.mark.parametrize("cold", [0, 1, 2, 3], ids=lambda n: f"{n}_cold")
def test_a_section_is_rolled_back_whatever_the_split_of_hot_and_cold_arrays(scenario_seed, cold: int,
                                                                            writes: str) -> None:
    """A block lays out its hot global arrays (journaled when the lock is taken) before its cold
    ones (journaled on `touch_globals()`); the split is the layout's, so a boundary computed wrong
    for some count of cold arrays leaves an array out of a journal. For every split of four
    global arrays, a section that writes a slot row and the hot arrays only (no `touch_globals()`,
    as most updates do) or every array must be undone whole by `abort()`."""
    rng = np.random.default_rng(scenario_seed)
    names = [f"global_{i}" for i in range(4)]
    layout = {name: ("float64" if i % 2 else "int64", 3 + i) for i, name in enumerate(names)}
    layout["row_values"] = ("float64", 5)
    backend = memory.SharedMemoryBackend(layout, slot_arrays=("row_values",), cold_arrays=tuple(names[4 - cold:]))
    try:
        for name in layout:
            backend[name][:] = rng.integers(1, 100, size=len(backend[name]))
        before = backend.snapshot()
        backend.lock.acquire()
        try:
            backend.lock.touch(2)
            backend["row_values"][2] = -1.0
            if writes == "every":
                backend.lock.touch_globals()
            for name in names if writes == "every" else names[:4 - cold]:
                backend[name][:] = _changed(backend[name])
        finally:
            backend.lock.abort()
        after = backend.snapshot()
        wrong = {name: _differences(after[name], before[name]) for name in before
                 if not np.array_equal(after[name], before[name])}
        assert not wrong, (f"a section wrote {writes} global array(s) of a block with {cold} of its 4 global "
                           f"arrays cold; after abort() these differ from the committed state: {wrong}, "
                           f"seed {scenario_seed}")
    finally:
        backend.close()


def test_a_snapshot_overlapping_a_section_that_writes_cold_arrays_returns_a_committed_state(scenario_seed) -> None:
    """The cold global arrays are journaled only once their holder touches them, so a
    lock-free `snapshot()` of an open section may start before that and copy them after. A
    section writes a slot row, then its cold arrays (after `touch_globals()`), and is never
    committed; each state of the block during its writes is put in place at each line of the
    snapshot, which started with the section's lock taken: the snapshot must return the
    committed state every time."""
    rng = np.random.default_rng(scenario_seed)
    names = [f"global_{i}" for i in range(3)]
    layout = {name: ("float64" if i % 2 else "int64", 4 + i) for i, name in enumerate(names)}
    layout["row_values"] = ("float64", 5)
    cold = names[1:]
    backend = memory.SharedMemoryBackend(layout, slot_arrays=("row_values",), cold_arrays=tuple(cold))
    mapping = backend._segment.map
    try:
        for name in layout:
            backend[name][:] = rng.integers(1, 100, size=len(backend[name]))
        before = backend.snapshot()
        committed = bytes(mapping)
        backend.lock.acquire()
        try:
            taken = bytes(mapping)

            def write() -> None:
                backend.lock.touch(1)
                backend["row_values"][1] = -1.0
                backend.lock.touch_globals()
                for name in cold:
                    backend[name][:] = _changed(backend[name])

            writing = [taken]
            _traced(write, lambda line: writing.append(bytes(mapping)))
            writing.append(bytes(mapping))
        finally:
            backend.lock.abort()
        states = [image for i, image in enumerate(writing) if i == 0 or image != writing[i - 1]]
        mapping[:] = taken
        lines = _traced(backend.snapshot, lambda line: None)[1]
        wrong, runs = [], 0
        for (step, image), line in itertools.product(enumerate(states), range(1, lines + 1)):
            mapping[:] = taken
            got, _ = _traced(backend.snapshot, lambda now: now == line and mapping.__setitem__(slice(None), image))
            runs += 1
            differ = [name for name in before if not np.array_equal(got[name], before[name])]
            if differ:
                wrong.append((step, line, differ))
            mapping[:] = committed
        assert not wrong, (
            f"{len(wrong)} of {runs} lock-free snapshots overlapping an uncommitted section that wrote "
            f"its {len(cold)} cold arrays returned words it wrote: (state put in place (step of its writes), line of "
            f"the snapshot, arrays that differ) "
            f"{wrong[:6]}, seed {scenario_seed}")
    finally:
        backend.close()


def test_every_block_a_creator_accepts_attaches_as_it_was_created(scenario_seed) -> None:
    """Creation and attach check a block's layout separately; a block one accepts and the other
    refuses runs in its creator and fails in every worker. Over every choice of slot arrays
    and cold arrays among four arrays (two of one length, two global, names absent from the
    layout too): creation either refuses the choice as `CurriculumConfigError`, or another
    handle attaches and sees the same layout, slot arrays, global arrays (hot ones first) and
    values."""
    rng = np.random.default_rng(scenario_seed)
    layout = {"row_a": ("float64", 4), "row_b": ("int64", 4), "global_c": ("float64", 3), "global_d": ("int64", 5)}
    names = [*layout, "absent"]
    subsets = [tuple(c) for k in range(len(names) + 1) for c in itertools.combinations(names, k)]
    wrong, created = [], 0
    for slots, cold in itertools.product(subsets, subsets):
        try:
            backend = memory.SharedMemoryBackend(layout, slot_arrays=slots, cold_arrays=cold)
        except CurriculumConfigError:
            continue
        except Exception as error:  # noqa: BLE001 - a refusal of another kind is reported below
            wrong.append((slots, cold, f"creation raised {type(error).__name__}: {error}"))
            continue
        created += 1
        try:
            for name in layout:
                backend[name][:] = rng.integers(1, 100, size=len(backend[name]))
            try:
                other = memory.SharedMemoryBackend.attach(backend.name)
            except Exception as error:  # noqa: BLE001 - reported below
                wrong.append((slots, cold, f"attach raised {type(error).__name__}: {error}"))
                continue
            try:
                seen, made = ((handle.layout, tuple(handle.slot_arrays), handle._plan.global_arrays,
                               handle._plan.hot_bytes) for handle in (other, backend))
                differ = [name for name in layout if not np.array_equal(other[name], backend[name])]
                if seen != made or differ:
                    wrong.append((slots, cold, f"attached as {seen} with arrays {differ} differing, created as {made}"))
            finally:
                other.close()
        finally:
            backend.close()
    assert created and not wrong, (
        f"{len(wrong)} of {len(subsets) ** 2} choices of (slot arrays, cold arrays) were created but not attached "
        f"as created ({created} created in all): {wrong[:4]}, seed {scenario_seed}")


#: dtype spellings a layout entry must refuse: only the words "int64" and "float64" are layout dtypes
#: (the block's word views and its attach read those two names), not their aliases or other 8-byte types
NOT_LAYOUT_DTYPES = ("i8", "<f8", "f8", "uint64", "complex64", "int32", "float32", "int", "float", "bool", "", None)

#: Lengths of a layout entry outside its domain (an int >= 1): bools, zero, negatives, floats,
#: strings, None, a shape.
NOT_LAYOUT_LENGTHS = (True, False, 0, -1, 2.0, "2", None, (2,))
#: Numpy integers (a pool size computed with numpy): taken or refused, alike.
NUMPY_LAYOUT_LENGTHS = (np.int64(3), np.int32(2), np.uint64(2))


def _layout_taken(shared: bool, entry: tuple[Any, Any]) -> str:
    """What a backend does with a layout holding `entry` as its entry "entry": "accepted" (its
    array of that length, and for the shared one a block that attaches as created), "refused by
    name" (`CurriculumConfigError` naming the entry), or what went wrong."""
    layout = {"row_values": ("float64", 2), "entry": entry}
    try:
        backend = (memory.SharedMemoryBackend(layout, slot_arrays=("row_values",)) if shared
                   else memory.LocalMemoryBackend(layout))
    except CurriculumConfigError as error:
        return "refused by name" if "entry" in str(error) else f"refused without naming the entry: {error}"
    except Exception as error:  # noqa: BLE001 - a refusal of another kind is reported by the caller
        return f"raised {type(error).__name__}: {error}"
    try:
        if len(backend["entry"]) != entry[1]:
            return f"accepted with an array of {len(backend['entry'])} words"
        if shared:
            other = memory.SharedMemoryBackend.attach(backend.name)
            try:
                if dict(other.layout) != dict(backend.layout):
                    return f"accepted, and attached as {dict(other.layout)}"
            finally:
                other.close()
    finally:
        backend.close()
    return "accepted"


def _report_ownership(handles: tuple[Any, ...], sender: Any) -> None:
    """(In a forked child) each handle's `is_owner`, then close them all."""
    sender.send([handle.is_owner for handle in handles])
    for handle in handles:
        handle.close()


def test_only_the_creating_process_owns_a_block() -> None:
    """`is_owner` is true of the creator's handle in the creating process alone: false of a
    handle attached by name, and of both handles in a forked child (documented: "a forked
    child is not"), which closes its copies without removing the block its parent still uses."""
    creator = memory.SharedMemoryBackend({"level": ("int64", 2)}, slot_arrays=("level",))
    attached = memory.SharedMemoryBackend.attach(creator.name)
    try:
        here, there = mp.get_context("fork").Pipe()
        child = mp.get_context("fork").Process(target=_report_ownership, args=((creator, attached), there))
        child.start()
        in_child = here.recv() if here.poll(30) else None
        child.join(timeout=30)
        ownership = {"creator here": creator.is_owner, "attached here": attached.is_owner,
                     "creator and attached in a forked child": in_child}
        assert ownership == {"creator here": True, "attached here": False,
                             "creator and attached in a forked child": [False, False]}, (
            f"is_owner of the block's handles: {ownership}; only the creator's handle in the creating process owns it")
        assert os.path.exists(os.path.join(SEGMENT_DIR, creator.name)), (
            "a forked child that closed its copies of the handles removed the block its parent still uses")
    finally:
        attached.close()
        creator.close()


def _hold_the_lock_until_told(backend: Any, sender: Any) -> None:
    """(In a forked child) take `backend`'s lock, say so, and release it when told."""
    with backend.lock:
        sender.send("held")
        sender.recv()


def test_the_shared_backends_accessors_say_what_their_docs_say() -> None:
    """The shared backend's word accessors and identity, as documented: `global_words(name)` is
    global array `name` as int64 or float64 words (reads equal the array's values, a store
    lands in it), `row_words()` and `column_of()` address slot `s`, column `c` at word
    `s * row_length + c`; `meta` is the JSON dict of the header, the creator's a dict of its own
    that a caller changing the dict it gave leaves as an attacher reads it; `lock.in_transaction`
    is whether this process holds the lock: not while another process does."""
    layout = {"slot_i": ("int64", 3), "slot_f": ("float64", 3), "glob_i": ("int64", 2), "glob_f": ("float64", 4)}
    given = {"run": "exp-1", "sizes": [1, 2]}
    backend = memory.SharedMemoryBackend(layout, slot_arrays=("slot_i", "slot_f"), meta=given)
    attached = memory.SharedMemoryBackend.attach(backend.name)
    wrong = []
    try:
        values = {"slot_i": [3, -4, 5], "slot_f": [0.5, -1.25, 3.0], "glob_i": [7, 2**40], "glob_f": [0.5, 0.25, -1.5, 1e300]}
        with backend.lock:
            for name, array in values.items():
                backend[name][:] = array
        for name in ("glob_i", "glob_f"):
            words = backend.global_words(name)
            if list(words) != values[name]:
                wrong.append(f"global_words({name!r}) reads {list(words)}, the array holds {values[name]}")
            with backend.lock:
                words[1] = type(values[name][1])(9)
            if attached[name].tolist()[1] != 9:
                wrong.append(f"a store of 9 through global_words({name!r})[1] left the array at {attached[name].tolist()}")
        rows_q, rows_d, width = backend.row_words()
        for name, words in (("slot_i", rows_q), ("slot_f", rows_d)):
            column = backend.column_of(name)
            read = [words[slot * width + column] for slot in range(3)]
            if read != values[name]:
                wrong.append(f"row words of {name!r} (column {column}, {width} words a row) read {read}, the array "
                             f"holds {values[name]}")
        given["run"], given["note"] = "exp-2", "changed by the caller"
        if not (type(backend.meta) is dict and backend.meta == attached.meta == {"run": "exp-1", "sizes": [1, 2]}):
            wrong.append(f"meta is {backend.meta!r} ({type(backend.meta).__name__}) in the creator, "
                         f"{attached.meta!r} in an attacher, after the caller changed the dict it gave")
        here, there = mp.get_context("fork").Pipe()
        holder = mp.get_context("fork").Process(target=_hold_the_lock_until_told, args=(attached, there))
        holder.start()
        try:
            held = here.poll(30) and here.recv() == "held"
            seen = (backend.lock.in_transaction, attached.lock.in_transaction)
            if not held or seen != (False, False):
                wrong.append(f"while another process held the lock (held: {held}), in_transaction read {seen} here")
        finally:
            here.send("release")
            holder.join(timeout=30)
        with backend.lock:
            inside = backend.lock.in_transaction
        if (inside, backend.lock.in_transaction) != (True, False):
            wrong.append(f"in_transaction read {inside} inside this process's own section, "
                         f"{backend.lock.in_transaction} after it")
    finally:
        attached.close()
        backend.close()
    assert not wrong, f"the shared backend's accessors: {wrong}"


def test_a_layout_entry_is_taken_or_refused_alike_by_the_local_and_the_shared_backend() -> None:
    """A layout entry's dtype is "int64" or "float64"; any other spelling, an alias of the two
    included, is refused as `CurriculumConfigError` naming the entry, by the local backend and
    by the shared one alike (whose word views read the two names only); so is a length that is
    not an int >= 1 (a bool, zero, a float, ...). A numpy integer length is taken by both, as an
    array of that length and a block that attaches as created, or refused by both by name:
    never taken by one and refused, or raised on, by the other (a numpy length its JSON header
    cannot hold)."""
    wrong = []
    entries = [(dtype, 2) for dtype in NOT_LAYOUT_DTYPES] + [("int64", length) for length in NOT_LAYOUT_LENGTHS]
    for entry in entries + [("int64", length) for length in NUMPY_LAYOUT_LENGTHS]:
        local, shared = _layout_taken(False, entry), _layout_taken(True, entry)
        allowed = ("refused by name",) if entry in entries else ("refused by name", "accepted")
        if local != shared or local not in allowed:
            wrong.append(f"{entry!r}: local {local}, shared {shared}")
    assert not wrong, f"layout entries taken otherwise than by name alike (expected one of refused/accepted): {wrong}"


def test_a_block_of_the_same_config_and_another_layout_is_refused_by_attach(uses_builtin_curriculum,
                                                                            require_capability) -> None:
    """A block another library version made for the same config holds the same arrays under
    the same names, but one of them may be longer, or of the other dtype: `Curriculum.attach`
    compares the whole layout (names, dtypes and lengths) with the one this version lays out for
    the config, and refuses any other by name, never reading words laid out otherwise."""
    require_capability(uses_builtin_curriculum, "builds blocks of the built-in shared tracker's layout")
    config = CurriculumConfig(task_generator=LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="shared")),
                              algorithm=LearningProgressConfig(), num_active_tasks=4, seed=0)
    creator = Curriculum(config, shared_memory=True)
    backend = creator._tracker.backend
    layout, slots, meta = dict(backend.layout), tuple(backend.slot_arrays), backend.meta
    cold = tuple(name for name in backend._plan.global_arrays if name in creator._algorithm.cold_arrays)
    creator.close()
    name = next(n for n, (_, length) in layout.items() if n not in slots and length > 1)
    dtype, length = layout[name]
    others = {"longer": {**layout, name: (dtype, length + 1)},
              "of the other dtype": {**layout, name: ("float64" if dtype == "int64" else "int64", length)}}
    accepted = []
    for what, other in others.items():
        made = memory.SharedMemoryBackend(other, slot_arrays=slots, cold_arrays=cold, meta=meta)
        try:
            try:
                Curriculum.attach(made.name, config).close()
            except (CurriculumConfigError, SharedTrackerError):
                continue
            accepted.append(f"{name!r} {what} ({other[name]}, this version lays out {layout[name]})")
        finally:
            made.close()
    assert not accepted, f"attach took blocks of the same config laid out otherwise: {accepted}"


def test_a_header_at_the_size_limit_attaches_and_one_past_it_is_refused_at_creation(scenario_seed) -> None:
    """A block's header (its layout and `meta`, where a curriculum keeps its config) may be as
    large as `memory._MAX_HEADER_BYTES`: a header of exactly that size attaches; one byte more is
    refused by name when the block is created, not made into a block no other process can
    attach (nor the orphan sweep recognise)."""
    layout = {"row_values": ("float64", 2), "counters": ("int64", 2)}
    probe = memory.SharedMemoryBackend(layout, slot_arrays=("row_values",), meta={"pad": ""})
    try:
        base = int.from_bytes(probe._segment.map[8:16], "little")
    finally:
        probe.close()
    at_limit = memory.SharedMemoryBackend(layout, slot_arrays=("row_values",),
                                          meta={"pad": "x" * (memory._MAX_HEADER_BYTES - base)})
    try:
        length = int.from_bytes(at_limit._segment.map[8:16], "little")
        try:
            memory.SharedMemoryBackend.attach(at_limit.name).close()
        except CurriculumError as error:
            pytest.fail(f"a block whose header is {length} bytes (the limit {memory._MAX_HEADER_BYTES}) was created "
                        f"and refused to attach: {type(error).__name__}: {error}, seed {scenario_seed}")
    finally:
        at_limit.close()
    assert length == memory._MAX_HEADER_BYTES, f"the padded header is {length} bytes, not the limit"
    with pytest.raises(CurriculumConfigError, match=str(memory._MAX_HEADER_BYTES + 1)):
        memory.SharedMemoryBackend(layout, slot_arrays=("row_values",),
                                   meta={"pad": "x" * (memory._MAX_HEADER_BYTES - base + 1)}).close()


def test_a_shared_tracker_answers_every_call_as_a_local_one_does(scenario_seed) -> None:
    """A shared tracker swaps several of the local tracker's methods for journaled writes and
    lock-free reads of its block; what it answers must not change with it. The same seeded
    sequence of sections (tasks assigned, evicted or not, completions recorded, late ones
    counted, arrays overwritten, the cold ones after `touch_globals()`) goes to a local and a
    shared tracker: every call returns the same, and after each section every read (of each
    slot, for the task it holds and another, each counter, `snapshot()`) answers the same; inside
    a section, the shared tracker's lock-free reads (`task_id_at`, `mean_score_at`,
    `task_stats`, `snapshot()`) made by the lock holder itself return the committed state, as
    anyone's do (an abort would undo what the section wrote). A
    snapshot is a copy of one moment: a caller writing into it changes neither tracker, and later
    sections leave it as it was. A lock released or aborted once more after its section (not
    held) changes nothing."""
    rng = random.Random(scenario_seed)
    capacity = 5
    extra = {"visits": ("float64", capacity), "memory": ("float64", 7)}
    trackers = {"local": TaskTracker.create(capacity, extra),
                "shared": TaskTracker.create(capacity, extra, shared=True, cold_arrays=("memory",))}
    next_id = itertools.count(1)

    def section() -> list[tuple[str, Callable[[TaskTracker], Any]]]:
        calls = []
        for _ in range(rng.randint(1, 4)):
            slot, kind = rng.randrange(capacity), rng.random()
            if kind < 0.2:
                task_id, evicted = next(next_id), rng.random() < 0.5
                calls.append((f"assign({slot}, {task_id}, evicted={evicted})",
                              lambda t, s=slot, i=task_id, e=evicted: t.assign(s, i, evicted=e)))
            elif kind < 0.75:
                score = rng.choice((0.0, 1.0, round(rng.uniform(-2.0, 2.0), 3)))
                calls.append((f"record({slot}, {score})", lambda t, s=slot, v=score: t.record(s, v)))
            elif kind < 0.85:
                calls.append(("record_late()", lambda t: t.record_late()))
            elif kind < 0.93:
                values = np.array([rng.uniform(0.0, 5.0) for _ in range(7)])
                calls.append(("overwrite(memory)", lambda t, v=values: t.overwrite({"memory": v})))
            else:
                what, call, error = refusals[next(refusal_turns) % len(refusals)]  # each in turn
                calls.append((what, lambda t, w=what, c=call, e=error: refused(t, w, c, e)))
        return calls

    good_visits = np.arange(capacity, dtype=np.float64)
    refusal_turns = itertools.count()
    # (what, call, the named error): input each tracker refuses whole, changing nothing
    refusals: list[tuple[str, Callable[[TaskTracker], Any], type[Exception]]] = [
        ("overwrite(memory one entry short)", lambda t: t.overwrite({"memory": np.ones(6)}), CurriculumStateError),
        ("overwrite(memory one entry long)", lambda t: t.overwrite({"memory": np.ones(8)}), CurriculumStateError),
        ("overwrite(memory as a scalar)", lambda t: t.overwrite({"memory": np.float64(2.0)}), CurriculumStateError),
        ("overwrite(visits, then memory too short)",
         lambda t: t.overwrite({"visits": good_visits, "memory": np.ones(3)}), CurriculumStateError),
        ("overwrite(visits, then an array the tracker lacks)",
         lambda t: t.overwrite({"visits": good_visits, "visit": good_visits}), CurriculumStateError),
        ("overwrite(completions as fractions)", lambda t: t.overwrite({"completions": good_visits + 0.5}),
         CurriculumStateError),
        ("overwrite(completions past int64, unsigned)",
         lambda t: t.overwrite({"completions": np.full(capacity, 2**63, dtype=np.uint64)}), CurriculumStateError),
        ("overwrite(memory of text)", lambda t: t.overwrite({"memory": np.array(["1"] * 7)}), CurriculumStateError),
        ("counter('evicted'), a name it does not keep", lambda t: t.counter("evicted"), CurriculumConfigError),
    ]

    def refused(tracker: TaskTracker, what: str, call: Callable[[TaskTracker], Any], error: type[Exception]) -> str:
        """`call` raises `error` and leaves every array as it was (the holder's view, uncommitted
        writes included); the error's name, to compare."""
        before = {name: tracker.backend[name].copy() for name in tracker.backend.layout}
        try:
            call(tracker)
        except error:
            changed = [name for name, values in before.items() if not np.array_equal(values, tracker.backend[name])]
            if changed:
                pytest.fail(f"{what}: refused by {tracker.backend.__class__.__name__}'s tracker, yet arrays {changed} "
                            f"changed, seed {scenario_seed}")
            return error.__name__
        except Exception as failure:  # noqa: BLE001 - any other error is the failure reported
            pytest.fail(f"{what}: {tracker.backend.__class__.__name__}'s tracker raised {type(failure).__name__} "
                        f"({failure}), expected {error.__name__}, seed {scenario_seed}")
        pytest.fail(f"{what}: accepted by {tracker.backend.__class__.__name__}'s tracker, expected {error.__name__}, "
                    f"seed {scenario_seed}")

    def reads(tracker: TaskTracker) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for slot in range(capacity):
            held = tracker.task_id_at(slot)
            out[f"task_id_at({slot})"] = held
            out[f"completions_at({slot})"] = tracker.completions_at(slot)
            out[f"mean_score_at({slot})"] = tracker.mean_score_at(slot)
            out[f"last_score_at({slot})"] = tracker.last_score_at(slot)
            out[f"task_stats({slot}, held)"] = tracker.task_stats(slot, held)
            out[f"task_stats({slot}, other)"] = tracker.task_stats(slot, held + 10**6)
        for name in COUNTERS:
            out[f"counter({name!r})"] = tracker.counter(name)
        out["total, late, evictions"] = (tracker.total_completions, tracker.late_completions, tracker.evictions)
        out.update({f"snapshot()[{name!r}]": values.tolist() for name, values in tracker.snapshot().items()})
        return out

    wrong: list[str] = []
    done: list[str] = []
    kept: dict[str, tuple[dict[str, np.ndarray], dict[str, list]]] = {}  # a snapshot each, and what it held
    try:
        for _ in range(LIMITS.differential_sections):
            calls = section()
            answers = {}
            committed = reads(trackers["shared"])
            for kind, tracker in trackers.items():
                with tracker.lock:
                    answers[kind] = [call(tracker) for _, call in calls]
                    if kind == "shared":  # the holder's own lock-free reads: the committed state still
                        inside = reads(tracker)
            done.append("; ".join(name for name, _ in calls))
            uncommitted = {key: (value, committed[key]) for key, value in inside.items()
                           if _lock_free(key) and value != committed[key]}
            if uncommitted:
                wrong.append(f"inside section {len(done)} ({done[-1]}), the lock holder's own lock-free reads of the "
                             f"shared tracker returned what the section wrote (read, committed): "
                             f"{dict(list(uncommitted.items())[:4])}")
            for tracker in trackers.values():  # released or aborted again, not held: nothing to do (as an flock)
                tracker.lock.release()
                tracker.lock.abort()
            if answers["local"] != answers["shared"]:
                wrong.append(f"section {len(done)} ({done[-1]}) returned {answers['shared']} shared, "
                             f"{answers['local']} local")
            seen = {kind: reads(tracker) for kind, tracker in trackers.items()}
            differ = {key: (seen["shared"][key], value) for key, value in seen["local"].items()
                      if seen["shared"].get(key) != value}
            if differ:
                wrong.append(f"after section {len(done)} ({done[-1]}), reads differ (shared, local): "
                             f"{dict(list(differ.items())[:4])}")
            for kind, (snapshot, held) in kept.items():  # copies of one moment: later sections leave them be
                moved = [name for name, values in snapshot.items() if values.tolist() != held[name]]
                if moved:
                    wrong.append(f"a {kind} snapshot taken before section {len(done)} ({done[-1]}) changed with it: "
                                 f"arrays {moved}")
            if wrong:
                break
            for kind, tracker in trackers.items():  # and a caller writing into its copy changes no tracker
                snapshot = tracker.snapshot()
                for values in snapshot.values():
                    values[:] = -7
                kept[kind] = (snapshot, {name: values.tolist() for name, values in snapshot.items()})
    finally:
        for tracker in trackers.values():
            tracker.close()
    assert not wrong, (f"a shared tracker answered otherwise than a local one given the same calls: {wrong[0]} "
                       f"(sections before it: {done[-4:-1]}), seed {scenario_seed}")


def _lock_free(read: str) -> bool:
    """Whether a read of the tracker differential is one of the shared tracker's lock-free
    reads, which return the committed state whoever makes them, the lock holder included."""
    return read.startswith(("task_id_at(", "mean_score_at(", "task_stats(", "snapshot()"))


def test_what_every_section_journals_does_not_grow_with_the_configuration_memory(
        uses_builtin_curriculum, curriculum_factory, require_capability, scenario_seed) -> None:
    """Every section copies the block's hot global arrays when it takes the lock; learning
    progress's memory of configurations (up to millions of entries, written on evictions only)
    must be a cold array, journaled only by the sections that write it: otherwise every
    completion copies the whole memory, a cost that grows with `config_memory`."""
    require_capability(uses_builtin_curriculum, "reads the built-in shared block's plan")
    journaled = {}
    for memory_size in (0, LIMITS.large_config_memory):
        config = CurriculumConfig(task_generator=LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="one")),
                                  algorithm=LearningProgressConfig(config_memory=memory_size), num_active_tasks=4,
                                  seed=scenario_seed)
        curriculum = Curriculum(config, shared_memory=True)
        try:
            journaled[memory_size] = curriculum.tracker.backend._plan.hot_bytes
        finally:
            curriculum.close()
    assert len(set(journaled.values())) == 1, (
        f"bytes every section copies when it takes the lock, by config_memory: {journaled}: the configuration memory "
        f"is journaled by every completion, seed {scenario_seed}")


def _failing_after(call: Any) -> Any:
    def failing(*args: Any, **kwargs: Any) -> Any:
        call(*args, **kwargs)
        raise _Interrupted("injected after the section's writes")
    return failing


@pytest.mark.parametrize("section", ["update_task_performance", "load_state"])
def test_a_section_that_fails_half_way_leaves_nothing_behind(uses_builtin_curriculum, curriculum_factory,
                                                             require_capability, scenario_seed, monkeypatch,
                                                             section: str) -> None:
    """An update, or a checkpoint restore, interrupted inside the lock after it wrote (Ctrl-C,
    an error half-way): every shared array is what it was before the call (no reader ever sees
    half a section) and the lock is free at once for another handle, whose update counts."""
    require_capability(uses_builtin_curriculum, "interrupts the built-in curriculum's own locked sections")
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, evicting=True,
                                    lock_timeout=LIMITS.lock_timeout)  # a leaked lock is a stuck holder
    other = None
    try:
        for _ in range(LIMITS.pool * 4):
            curriculum.update_task_performance(curriculum.get_task().task_id, 0.5)
        checkpoint = curriculum.get_state()
        for _ in range(LIMITS.pool):
            curriculum.update_task_performance(curriculum.get_task().task_id, 1.0)
        before, completions = curriculum.tracker.snapshot(), curriculum.stats()["total_completions"]
        if section == "update_task_performance":
            monkeypatch.setattr(curriculum._algorithm, "record", _failing_after(curriculum._algorithm.record))
            task_id = curriculum.get_task().task_id
            with pytest.raises(_Interrupted):
                curriculum.update_task_performance(task_id, 1.0)
        else:
            monkeypatch.setattr(curriculum._tracker, "overwrite", _failing_after(curriculum._tracker.overwrite))
            with pytest.raises(_Interrupted):
                curriculum.load_state(checkpoint)
        monkeypatch.undo()
        after = curriculum.tracker.snapshot()
        changed = {name: _differences(after[name], before[name]) for name in before
                   if not np.array_equal(after[name], before[name], equal_nan=True)}
        assert not changed, (
            f"{section} was interrupted inside the lock after it wrote; the shared arrays kept its writes: "
            f"{changed}, seed {scenario_seed}")
        other = Curriculum.attach(curriculum.shared_memory_name, curriculum.config)
        began = time.monotonic()
        try:
            other.update_task_performance(other.get_task().task_id, 0.5)
        except LockTimeoutError as error:
            pytest.fail(f"after {section} was interrupted inside the lock, another handle's update waited "
                        f"{time.monotonic() - began:.1f} s and timed out: the lock was left held ({error}), "
                        f"seed {scenario_seed}")
        assert curriculum.stats()["total_completions"] == completions + 1, (
            f"{completions} completions before the interrupted {section}, one update after it; the curriculum "
            f"counts {curriculum.stats()['total_completions']}, seed {scenario_seed}")
    finally:
        if other is not None:
            other.close()
        curriculum.close()


def _open_descriptors() -> set[tuple[str, str]]:
    """This process's open descriptors, each with what it refers to."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # (the descriptor listdir itself used, closed since)
            out.add((fd, os.readlink(f"/proc/self/fd/{fd}")))
    return out


def _held_here(paths: set[str]) -> list[str]:
    """Descriptors and memory mappings of this process on any of `paths` (unlinked ones too)."""
    held = [f"fd {fd} -> {path}" for fd, link in sorted(_open_descriptors())
            if (path := link.removesuffix(" (deleted)")) in paths]
    with open("/proc/self/maps") as maps:
        held += [f"mapping {line.split()[-1]}" for line in maps
                 if line.split()[-1:] and line.split()[-1] in paths]
    return held


def _played_shared_curriculum(curriculum_factory, require_capability, seed: int) -> tuple[Any, set[str]]:
    """A shared curriculum of 4 tasks that recorded 10 episodes, and the paths of its block's
    files (skipped when its memory is no file under `SEGMENT_DIR` the process holds)."""
    before = set(os.listdir(SEGMENT_DIR))
    curriculum = _shared_curriculum(curriculum_factory, require_capability, seed, pool=4)
    try:
        paths = {os.path.join(SEGMENT_DIR, name) for name in set(os.listdir(SEGMENT_DIR)) - before}
        for _ in range(10):
            curriculum.update_task_performance(curriculum.get_task().task_id, 0.5)
        require_capability(bool(paths) and bool(_held_here(paths)),
                           f"this curriculum's shared memory is not a file under {SEGMENT_DIR} held by the process")
    except BaseException:
        curriculum.close()
        raise
    return curriculum, paths


def test_a_closed_curriculum_holds_nothing_of_its_memory(curriculum_factory, require_capability,
                                                         scenario_seed) -> None:
    """`close()` lets go of everything the shared tracker opened: no descriptor and no mapping
    of its files is left in the process (an unlinked segment still held keeps its memory
    allocated until the process exits: a trainer that makes one per run fills /dev/shm). An
    attach refused for another config holds nothing either, right after the refusal (no
    collection of garbage in between: a handle left to the garbage collector stays open for
    as long as anything keeps the error's traceback)."""
    curriculum, paths = _played_shared_curriculum(curriculum_factory, require_capability, scenario_seed)
    try:
        held = _held_here(paths)
        attach, name = getattr(type(curriculum), "attach", None), getattr(curriculum, "shared_memory_name", None)
        if callable(attach) and name:
            other = dataclasses.replace(curriculum.config, num_active_tasks=curriculum.config.num_active_tasks + 1)
            gc.disable()
            try:
                try:
                    attach(name, other)
                    refused: Any = None
                except Exception as error:  # noqa: BLE001 - its kind is asserted below
                    refused = type(error)
                after = _held_here(paths)
            finally:
                gc.enable()
            named = refused is not None and issubclass(refused, CurriculumConfigError)
            assert named and sorted(after) == sorted(held), (
                f"attaching with another config raised {refused!r} (CurriculumConfigError expected) and left the "
                f"process holding {sorted(set(after) - set(held))} more of the shared memory, seed {scenario_seed}")
    finally:
        curriculum.close()
    held = _held_here(paths)
    assert not held, f"after close() the process still holds {held}, seed {scenario_seed}"


def test_an_array_kept_from_a_closed_curriculum_stays_readable(curriculum_factory, require_capability,
                                                                scenario_seed) -> None:
    """A trainer that kept an array of the shared tracker (`tracker.completions`, a slice of
    it) and reads it after `close()` reads what was recorded: the process must not crash on
    memory unmapped under the array. Once the last such array is dropped, nothing of the
    block is held any more. (Run in a forked child: a crash ends the child, not the gate.)"""
    curriculum, paths = _played_shared_curriculum(curriculum_factory, require_capability, scenario_seed)
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports by its exit code
            code = 1
            try:
                kept = curriculum.tracker.completions
                part = kept[1:]
                recorded = kept.tolist()
                curriculum.close()
                code = 2 if kept.tolist() != recorded or part.tolist() != recorded[1:] else 0
                del kept, part
                gc.collect()
                code = code or (3 if _held_here(paths) else 0)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        curriculum.close()
    outcome = {0: None, 1: "raised", 2: "read other values than were recorded",
               3: "still held the block's memory once the arrays were dropped"}
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (
        f"a process that kept tracker.completions and read it after close() "
        f"{outcome.get(os.WEXITSTATUS(status)) if os.WIFEXITED(status) else f'was killed by signal {os.WTERMSIG(status)}'}"
        f", seed {scenario_seed}")


def test_a_block_that_cannot_be_allocated_is_refused_and_leaves_no_file(uses_builtin_curriculum,
                                                                         require_capability) -> None:
    """A shared curriculum whose block the kernel refuses to allocate (a full /dev/shm; here
    the process's file size limit, which refuses it the same way) raises `SharedTrackerError`
    and leaves no file in /dev/shm: nobody would ever remove one without a header (the cleanup
    never takes a headerless block for an orphan), and /dev/shm fills up run after run; nor a
    descriptor open (a trainer retrying would run out of them). (In a forked child, whose limit
    ends with it.)"""
    require_capability(uses_builtin_curriculum, "checks the built-in curriculum's shared memory files")
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}), algorithm=UniformConfig(),
                              num_active_tasks=64, seed=0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        outcome = "raised nothing"
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (past the limit: EFBIG, not the signal)
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
            # the names this child's blocks get carry its own mark, so a block that another test
            # creates meanwhile (and writes its header into a moment later) is never taken for one
            mark, tokens = f"fsize{os.getpid()}x", itertools.count()
            secrets.token_hex = lambda nbytes=None: f"{mark}{next(tokens)}"
            descriptors = set(os.listdir("/proc/self/fd"))
            try:
                Curriculum(config, shared_memory=True).close()
            except SharedTrackerError:
                outcome = ""
            except Exception as error:  # noqa: BLE001 - reported
                outcome = f"raised {type(error).__name__}: {error}"
            gc.collect()
            opened = set(os.listdir("/proc/self/fd")) - descriptors
            outcome += f"; kept {len(opened)} descriptor(s) open" if opened else ""
            left = [name for name in os.listdir(SEGMENT_DIR) if mark in name]
            outcome += f"; left {left}" if left else ""
        finally:
            os.write(write, outcome.encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        outcome = pipe.read().decode()
    os.waitpid(pid, 0)
    assert not outcome, (f"creating a shared curriculum whose block the kernel cannot allocate (file size limit "
                         f"4096 bytes): {outcome.lstrip('; ')} (expected SharedTrackerError, no file left and no "
                         "descriptor open)")


def _damaged_copy(live: str, path: str, damage: Any) -> None:
    """A copy of the live tracker's block at `path` (mode 0600) whose header `damage(header)`
    rewrote: its JSON dict changed in place, or the raw `(magic, length, text)` returned."""
    block = bytearray(Path(live).read_bytes())
    at = len(memory._MAGIC) + 8
    length = int.from_bytes(block[len(memory._MAGIC):at], "little")
    header = json.loads(block[at:at + length].decode())
    damaged = damage(header)
    magic, length, text = damaged if isinstance(damaged, tuple) else (memory._MAGIC, None, json.dumps(header).encode())
    length = len(text) if length is None else length
    block[:len(magic)] = magic
    block[len(memory._MAGIC):at] = length.to_bytes(8, "little")
    block[at:at + len(text)] = text
    Path(path).write_bytes(bytes(block))
    os.chmod(path, 0o600)


def _first_layout_entry_grown(header: dict[str, Any]) -> None:
    name = next(iter(header["layout"]))
    header["layout"][name][1] *= 1_000


#: Damaged headers of a copy of a live tracker (what a crash mid-write, another version of the
#: library or another program leaves): each must be refused as not a tracker.
_DAMAGED_HEADERS: dict[str, Any] = {
    "another magic": lambda h: (b"CURRTRK0", None, json.dumps(h).encode()),
    "a header length past the block": lambda h: (memory._MAGIC, 1 << 40, json.dumps(h).encode()),
    "a header length with its top bit set": lambda h: (memory._MAGIC, (1 << 63) + 512, json.dumps(h).encode()),
    "a header that is not JSON": lambda h: (memory._MAGIC, None, b"\xff" * len(json.dumps(h))),
    "another tracker format": lambda h: h.update(format=h["format"][:-1] + "0"),
    "no layout": lambda h: h.pop("layout"),
    "slot arrays the layout lacks": lambda h: h.update(slot_arrays=["no_such_array"]),
    "an invalid lock timeout": lambda h: h.update(lock_timeout=-1.0),
    "a layout larger than the block": _first_layout_entry_grown,
    "no curriculum config (a bare tracker)": lambda h: h["meta"].clear(),
    "a layout short of one array (another library version)": lambda h: h["layout"].pop(
        next(name for name in reversed(list(h["layout"])) if name not in h["slot_arrays"]
             and name not in h.get("cold_arrays", ()))),
}


#: Sizes a copy of a live tracker is cut to (a truncated copy, a block a full /dev/shm cut
#: short), from its size: the arrays its header lays out no longer fit.
_CUTS: dict[str, Any] = {
    "half its size": lambda size: size // 2,
    "nine tenths of its size": lambda size: size * 9 // 10,
    "one byte short": lambda size: size - 1,
}


#: The owner of a planted block that is not this user's (nobody's uid; only root can give a file
#: away, so that case needs root).
_OTHER_UID = 65534


#: What `attach` finds under a tracker's name that it must refuse (the shared tracker's documented
#: refusals: missing, not a tracker, writable by others, reached through a symbolic link), each
#: made from the live tracker's file at `live` into `path`.
_UNTRUSTED_BLOCKS: dict[str, Any] = {
    "no block of that name": lambda live, path: None,
    "a symbolic link to a live tracker": lambda live, path: os.symlink(live, path),
    "a copy of a live tracker that others can write": lambda live, path: (shutil.copyfile(live, path),
                                                                          os.chmod(path, 0o662)),
    "a copy of a live tracker another user owns": lambda live, path: (shutil.copyfile(live, path),
                                                                       os.chmod(path, 0o600),
                                                                       os.chown(path, _OTHER_UID, _OTHER_UID)),
    **{f"a copy of a live tracker cut to {what}": (lambda live, path, cut=cut: (
        shutil.copyfile(live, path), os.chmod(path, 0o600), os.truncate(path, cut(os.path.getsize(live)))))
       for what, cut in _CUTS.items()},
    "a file of the live tracker's size that is not a tracker": lambda live, path: (
        Path(path).write_bytes(bytes(range(256)) * (os.path.getsize(live) // 256 + 1)), os.chmod(path, 0o600)),
    "a named pipe": lambda live, path: os.mkfifo(path, 0o600),
    "a directory": lambda live, path: os.mkdir(path, 0o700),
    **{f"a copy of a live tracker with {what}": (lambda live, path, damage=damage: _damaged_copy(live, path, damage))
       for what, damage in _DAMAGED_HEADERS.items()},
}


#: Blocks the built-in refuses as a mismatch with the config given to `attach`, not as an
#: untrusted tracker: a tracker laid out for the same config by another library version.
_REFUSED_AS: dict[str, type] = {
    "a copy of a live tracker with a layout short of one array (another library version)": CurriculumConfigError,
}

#: Blocks whose refusal by the built-in names the value it found there (the word on disk, read
#: as the unsigned length it is).
_NAMED_IN_REFUSAL: dict[str, str] = {
    "a copy of a live tracker with a header length past the block": str(1 << 40),
    "a copy of a live tracker with a header length with its top bit set": str((1 << 63) + 512),
}


#: JSON values of every type (and edge of it) a damaged or foreign header may hold in any field.
_ANY_JSON = (None, True, False, 0, -1, 2.5, "", "x", [], [1, "x"], {}, {"x": 1})


def _headers_with_any_json_in_a_field(header: dict[str, Any]) -> dict[str, Any]:
    """Damages of a live tracker's `header` (for `_damaged_copy`), by what they change: every
    top-level field, every layout entry and every entry of the slot and cold array lists, each
    in turn holding each of `_ANY_JSON`; and each layout entry well-formed, one longer or shorter."""
    def put(path: tuple[Any, ...], value: Any) -> Any:
        def damage(h: dict[str, Any]) -> None:
            target = h
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = value
        return damage

    paths = [(field,) for field in header]
    paths += [("layout", name) for name in header["layout"]]
    paths += [(field, i) for field in ("slot_arrays", "cold_arrays") for i in range(len(header.get(field, ())))]
    damages = {f"{'.'.join(map(str, path))} = {value!r}": put(path, value) for path in paths for value in _ANY_JSON}
    for name, (dtype, length) in header["layout"].items():  # well-formed entries, one entry longer or shorter
        for other in (length - 1, length + 1):
            damages[f"layout.{name} = {[dtype, other]!r}"] = put(("layout", name), [dtype, other])
    return damages


def test_a_header_holding_any_json_value_in_any_field_is_refused_by_name(curriculum_factory, require_capability,
                                                                         scenario_seed, uses_builtin_curriculum) -> None:
    """A tracker block of this user whose header holds, in any one field (a top-level one, a
    layout entry, an entry of the slot or cold array lists), a JSON value of any type (what
    another library version, another program or a torn write leaves) is attached or refused
    as a named curriculum error (`SharedTrackerError`, `CurriculumConfigError`), never another
    exception, by a curriculum and by the block's backend alone (which, when it attaches, holds
    every array at the length the header declares); and the orphan sweep, which reads every block of the tracker prefix, passes over
    it without raising (a raise there would stop every new shared tracker, which sweeps first)."""
    require_capability(uses_builtin_curriculum, "damages the header of the built-in shared tracker's block")
    live = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=4)
    planted = os.path.join(SEGMENT_DIR, f"{SEGMENT_PREFIX}damaged-{os.getpid()}-{scenario_seed}")
    wrong = []
    try:
        live_path = os.path.join(SEGMENT_DIR, live.shared_memory_name)
        block = Path(live_path).read_bytes()
        at = len(memory._MAGIC) + 8
        header = json.loads(block[at:at + int.from_bytes(block[len(memory._MAGIC):at], "little")].decode())
        damages = _headers_with_any_json_in_a_field(header)
        staging = os.path.join(SEGMENT_DIR, f"staging-{os.getpid()}-{scenario_seed}")  # (no tracker prefix)
        for what, damage in damages.items():
            # held "in use" from before it bears the prefix: the sweep every new shared tracker
            # runs (another test's, in another process) never removes it under the check
            _damaged_copy(live_path, staging, damage)
            holder = os.open(staging, os.O_RDONLY)
            memory._ofd_lock(holder, fcntl.F_RDLCK)
            os.rename(staging, planted)
            try:
                type(live).attach(os.path.basename(planted), live.config).close()
            except (SharedTrackerError, CurriculumConfigError):
                pass
            except Exception as error:  # noqa: BLE001 - reported below
                wrong.append(f"{what}: attach raised {type(error).__name__}: {error}")
            try:  # the block alone: attached only as the header lays it out, every array of its length
                backend = memory.SharedMemoryBackend.attach(os.path.basename(planted))
            except (SharedTrackerError, CurriculumConfigError):
                pass
            except Exception as error:  # noqa: BLE001 - reported below
                wrong.append(f"{what}: SharedMemoryBackend.attach raised {type(error).__name__}: {error}")
            else:
                short = {name: (len(backend[name]), length) for name, (_, length) in backend.layout.items()
                         if len(backend[name]) != length}
                backend.close()
                if short:
                    wrong.append(f"{what}: attached, but arrays hold other lengths than its layout says "
                                 f"(held, declared): {short}")
            try:
                remove_orphaned_segments(dry_run=True)
            except Exception as error:  # noqa: BLE001 - reported below
                wrong.append(f"{what}: the orphan sweep raised {type(error).__name__}: {error}")
            os.unlink(planted)
            os.close(holder)
    finally:
        for path in (planted, staging):
            if os.path.lexists(path):
                os.unlink(path)
        live.close()
    assert not wrong, (f"{len(wrong)} of {len(damages)} damaged headers were not refused by name: {wrong[:4]}, seed "
                       f"{scenario_seed}")


def test_a_shared_block_is_reserved_whole_when_created(curriculum_factory, require_capability, scenario_seed) -> None:
    """A new shared tracker's block holds all its memory from the start, so that a full
    /dev/shm is refused by a named error at creation, not pages taken on first write, which a
    full /dev/shm turns into SIGBUS in whichever process writes first, mid-run."""
    live = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, evicting=True)
    try:
        name = getattr(live, "shared_memory_name", None)
        path = os.path.join(SEGMENT_DIR, name or "")
        require_capability(bool(name) and os.path.isfile(path), f"this curriculum has no block under {SEGMENT_DIR}")
        info = os.stat(path)
        assert info.st_blocks * 512 >= info.st_size, (
            f"the new block of {info.st_size} bytes has {info.st_blocks * 512} bytes allocated: the rest would "
            f"come on first write, and a full {SEGMENT_DIR} would show as SIGBUS then, seed {scenario_seed}")
    finally:
        live.close()


@pytest.mark.parametrize("block", list(_UNTRUSTED_BLOCKS))
def test_attach_refuses_a_block_it_cannot_trust_by_name(curriculum_factory, require_capability, scenario_seed,
                                                        block: str, uses_builtin_curriculum) -> None:
    """`attach` by the name of something that is not this user's live tracker refuses with a
    named curriculum error (the built-in: `SharedTrackerError`, the error its docs give a
    tracker that is missing, not a tracker or not to be trusted, which a caller falls back on),
    holds nothing of it (no descriptor, no mapping, right after the refusal), and leaves the
    live tracker it may point at as it was: its next update goes through and counts once."""
    live = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=4)
    attach, name = getattr(type(live), "attach", None), getattr(live, "shared_memory_name", None)
    planted = os.path.join(SEGMENT_DIR, f"untrusted-{os.getpid()}-{scenario_seed}")
    try:
        require_capability(callable(attach) and bool(name) and os.path.isfile(os.path.join(SEGMENT_DIR, name)),
                           f"this curriculum has no `attach` by a name under {SEGMENT_DIR}")
        live_path = os.path.join(SEGMENT_DIR, name)
        mode = stat.S_IMODE(os.stat(live_path).st_mode)
        assert mode == 0o600, (f"the live tracker's block was created with mode {mode:04o}: another user could read "
                               f"(or write) it; expected 0600, seed {scenario_seed}")
        if "another user" in block:
            require_capability(os.geteuid() == 0, "only root can plant a block another user owns")
        for _ in range(6):
            live.update_task_performance(live.get_task().task_id, 0.5)
        _UNTRUSTED_BLOCKS[block](live_path, planted)
        before, held = live.stats()["total_completions"], _held_here({live_path, planted})
        gc.disable()
        try:
            refused = _call_error(attach, os.path.basename(planted), live.config)
            after = _held_here({live_path, planted})
        finally:
            gc.enable()
        expected = CurriculumError if not uses_builtin_curriculum else _REFUSED_AS.get(block, SharedTrackerError)
        assert isinstance(refused, expected), (
            f"attach to {block} raised {refused!r} (None: it went through); expected a named {expected.__name__}, "
            f"seed {scenario_seed}")
        named = _NAMED_IN_REFUSAL.get(block) if uses_builtin_curriculum else None
        assert named is None or named in str(refused), (
            f"attach to {block} was refused with {str(refused)!r}, which does not name the value found there "
            f"({named}), seed {scenario_seed}")
        assert sorted(after) == sorted(held), (
            f"the refused attach to {block} left the process holding {sorted(set(after) - set(held))}, seed "
            f"{scenario_seed}")
        live.update_task_performance(live.get_task().task_id, 0.5)
        total = live.stats()["total_completions"]
        assert total == before + 1, (
            f"after a refused attach to {block}, the live tracker went from {before} to {total} completions with "
            f"one update, seed {scenario_seed}")
    finally:
        if os.path.isdir(planted) and not os.path.islink(planted):
            os.rmdir(planted)
        elif os.path.lexists(planted):
            os.unlink(planted)
        live.close()


def test_a_closed_curriculum_stays_closed_and_touches_no_other(curriculum_factory, require_capability,
                                                               scenario_seed) -> None:
    """`close()` is idempotent (documented): a second call, and a `with` block left after it,
    raise nothing. An update, a draw and the stats through the closed curriculum are refused
    with a named curriculum error, taking its tracker's lock with `CurriculumClosedError`, and
    they leave alone a curriculum created after it (which may have been given the closed one's
    descriptor numbers): that one's next update goes through at once."""
    closed = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=4)
    task = closed.get_task()
    closed.close()

    def leave_a_with_block() -> None:
        with closed:
            pass

    for again in (closed.close, leave_a_with_block):
        try:
            again()
        except Exception as error:  # noqa: BLE001 - reported below
            pytest.fail(f"close() is documented as idempotent, but after close(), {again.__name__} raised "
                        f"{type(error).__name__}: {error}, seed {scenario_seed}")
    later = _shared_curriculum(curriculum_factory, require_capability, scenario_seed + 1, pool=4,
                               lock_timeout=LIMITS.lock_timeout)
    try:
        for call, refused in (("an update", _update_error(closed, task.task_id)),
                              ("get_task()", _call_error(closed.get_task)), ("stats()", _call_error(closed.stats))):
            assert isinstance(refused, CurriculumError), (
                f"{call} through a closed curriculum raised {refused!r}; expected a named CurriculumError, seed "
                f"{scenario_seed}")
        lock = getattr(getattr(closed, "tracker", None), "lock", None)  # (a plug-in's tracker may have none)
        if lock is not None:  # its descriptor number may now be the later curriculum's block
            for call, refused in (("tracker.lock.acquire()", _call_error(lock.acquire)),
                                  ("`with tracker.lock`", _call_error(lock.__enter__))):
                assert isinstance(refused, CurriculumClosedError), (
                    f"{call} on a closed curriculum's lock raised {refused!r}; expected CurriculumClosedError "
                    f"(the lock was closed with its tracker), seed {scenario_seed}")
        started = time.monotonic()
        error = _update_error(later, later.get_task().task_id)
        assert error is None, (
            f"after an update through a closed curriculum, one created later could not update: {error!r} after "
            f"{time.monotonic() - started:.1f} s (the closed one took its lock), seed {scenario_seed}")
    finally:
        later.close()


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_every_reader_of_a_slot_agrees_with_the_tracker_arrays(uses_builtin_curriculum, curriculum_factory,
                                                               require_capability, scenario_seed, shared) -> None:
    """The tracker's per-slot readers (`task_id_at`, `completions_at`, `mean_score_at`,
    `last_score_at`, `task_stats`), which a shared tracker reads from its rows lock-free, give
    what its arrays hold, after a run that evicted and refilled slots."""
    require_capability(uses_builtin_curriculum, "reads the built-in curriculum's tracker")
    if shared:
        curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, evicting=True)
    else:
        space = impossible_task_space(num_learnable=4, num_impossible=4 * LIMITS.pool, seed=scenario_seed)
        curriculum = Curriculum(CurriculumConfig(
            task_generator=space.generator, algorithm=LearningProgressConfig(min_samples_for_lp=2),
            num_active_tasks=LIMITS.pool, seed=scenario_seed, refresh_interval=4, min_presentations=3,
            eviction_percentile=50.0))
    rng = random.Random(scenario_seed)
    try:
        for _ in range(LIMITS.pool * 20):
            curriculum.update_task_performance(curriculum.get_task().task_id, rng.choice((0.0, 0.25, 1.0)))
        tracker, arrays = curriculum.tracker, curriculum.tracker.snapshot()
        wrong = []
        for slot in range(len(arrays["task_ids"])):
            task_id, n = int(arrays["task_ids"][slot]), int(arrays["completions"][slot])
            mean = float(arrays["score_sum"][slot]) / n if n else 0.0
            last = float(arrays["last_score"][slot])
            read = (tracker.task_id_at(slot), tracker.completions_at(slot), tracker.mean_score_at(slot),
                    tracker.last_score_at(slot), tracker.task_stats(slot, task_id))
            if read != (task_id, n, mean, last, (n, mean, last)):
                wrong.append((slot, read, (task_id, n, mean, last)))
        assert not wrong, (
            f"{'shared' if shared else 'local'}: per-slot readers disagree with the tracker's arrays (slot, "
            f"(task_id_at, completions_at, mean_score_at, last_score_at, task_stats), arrays): {wrong[:3]}, "
            f"seed {scenario_seed}")
    finally:
        curriculum.close()


def test_a_checkpoint_restored_by_one_process_rolls_every_handle_back(uses_builtin_curriculum, curriculum_factory,
                                                                      require_capability, scenario_seed) -> None:
    """One process restores an older checkpoint into a shared pool that another handle (a
    worker's copy) has since evicted and refilled: slot ids go back to older ones. The tasks
    the worker still holds from the newer pool read no statistics of their own (their slots
    hold other tasks now), and the worker's own sample counts of a slot whose task the restore
    changed start again with the restored task: each task it draws afterwards is the one its
    counts name, counted from the restore."""
    require_capability(uses_builtin_curriculum, "reads the built-in curriculum's per-process sample counts")
    pool = LIMITS.rollback_pool
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=pool, evicting=True)
    worker = pickle.loads(pickle.dumps(curriculum))  # attached, as a spawned worker gets it
    rng = random.Random(scenario_seed)
    try:
        for _ in range(pool * 2):
            curriculum.update_task_performance(curriculum.get_task().task_id, rng.choice((0.0, 0.25, 1.0)))
        checkpoint = curriculum.get_state()
        for _ in range(pool * LIMITS.rollback_updates):  # the worker evicts: ids grow past the checkpoint's
            worker.update_task_performance(worker.get_task().task_id, rng.choice((0.0, 0.25, 1.0)))
        held = worker.active_tasks()
        before = worker.get_state()
        curriculum.load_state(checkpoint)
        slot_of = {int(task_id): slot for slot, task_id in enumerate(checkpoint["arrays"]["task_ids"])}
        gone = [task for task in held if task.task_id not in slot_of]
        assert gone, f"the worker held no task the restore took out of the pool: it measured nothing, seed {scenario_seed}"
        read = [(task.task_id, task.num_completions, task.mean_score, task.last_score) for task in gone]
        wrong = [numbers for numbers in read if numbers[1:] != (0, 0.0, 0.0)]
        assert not wrong, (
            f"after another process restored a checkpoint, tasks the worker holds from the newer pool read (id, "
            f"completions, mean, last) {wrong[:4]}: their slots hold other tasks, whose numbers they are not, seed "
            f"{scenario_seed}")
        drawn = Counter(worker.get_task().task_id for _ in range(pool * 3))
        after = worker.get_state()
        wrong = []
        for task_id, draws in sorted(drawn.items()):
            slot = slot_of[task_id]
            counted = draws + (before["samples"][slot] if before["sampled_task_ids"][slot] == task_id else 0)
            if (after["sampled_task_ids"][slot], after["samples"][slot]) != (task_id, counted):
                wrong.append((slot, task_id, counted, after["sampled_task_ids"][slot], after["samples"][slot]))
        assert not wrong, (
            f"after another process restored a checkpoint, the worker's sample counts (slot, task drawn, draws it "
            f"counts, sampled id, count) name other tasks or numbers: {wrong[:4]}, seed {scenario_seed}")
    finally:
        worker.close()
        curriculum.close()


class _Failed(Exception):
    """The error a training loop inside `with curriculum:` died of."""


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_a_with_block_left_by_an_error_closes_the_curriculum(curriculum_factory, require_capability, scenario_seed,
                                                             shared: bool) -> None:
    """`with curriculum:` closes it however the block ends: a training loop that dies of an
    error inside it leaves no shared block in `/dev/shm`, no handle that still records, and the
    error goes on to the caller unchanged."""
    if shared:
        curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=4)
    else:
        curriculum = curriculum_factory(CurriculumConfig(
            task_generator=LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="local")),
            algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed))
    require_capability(callable(getattr(curriculum, "__exit__", None)), "this curriculum is no context manager")
    name = getattr(curriculum, "shared_memory_name", None)
    try:
        with pytest.raises(_Failed):
            with curriculum:
                curriculum.update_task_performance(curriculum.get_task().task_id, 0.5)
                raise _Failed("the training loop failed")
        refused = _call_error(curriculum.get_task)
        assert isinstance(refused, CurriculumClosedError), (
            f"{'shared' if shared else 'local'}: after a `with` block left by an error, get_task() "
            f"{'went through' if refused is None else f'raised {refused!r}'}; the block must have closed the "
            f"curriculum, seed {scenario_seed}")
        assert name is None or not os.path.exists(os.path.join(SEGMENT_DIR, name)), (
            f"a `with` block left by an error left the shared tracker {name} in {SEGMENT_DIR}, seed {scenario_seed}")
    finally:
        curriculum.close()


#: What a closed curriculum still answers: what it was built as, not what it holds.
_READABLE_WHEN_CLOSED = frozenset({"close", "attach", "is_shared", "num_active_tasks", "shared_memory_name", "tracker"})


@pytest.mark.parametrize("algorithm", ["learning_progress", "uniform", "staged"])
def test_a_closed_local_curriculum_refuses_every_call_by_name(uses_builtin_curriculum, require_capability,
                                                               scenario_seed, algorithm) -> None:
    """A closed curriculum of one process (no shared tracker) refuses an update, a draw and
    every read of its state (each public method and property of `Curriculum` but what it was
    built as) with `CurriculumClosedError` naming the call, as a shared one does, whether or
    not its batch of pre-drawn tasks was used up."""
    require_capability(uses_builtin_curriculum, "`CurriculumClosedError` is the built-in curriculum's refusal")
    generator = LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="local"))
    if algorithm == "staged":
        config = CurriculumConfig(algorithm=StagedProgressionConfig(stages=[Stage("first", generator),
                                                                            Stage("second", generator)]),
                                  num_active_tasks=4, seed=scenario_seed)
    else:
        config = CurriculumConfig(task_generator=generator, num_active_tasks=4, seed=scenario_seed,
                                  algorithm=UniformConfig() if algorithm == "uniform" else LearningProgressConfig())
    closed = Curriculum(config)
    task = closed.get_task()
    closed.update_task_performance(task.task_id, 0.5)
    state = closed.get_state()
    closed.close()
    calls = {"update_task_performance": (task.task_id, 0.5), "get_task": (), "stats": (), "active_tasks": (),
             "sampling_probabilities": (), "task_scores": (), "get_state": (), "reseed": (1,), "load_state": (state,),
             "sync_state": (), "apply_sync_state": ({"stage": 0, "stage_changes": 0},), "stage": None}
    public = {name for name in dir(Curriculum) if not name.startswith("_")}
    unlisted = sorted(public - set(calls) - _READABLE_WHEN_CLOSED)
    assert not unlisted, f"public members of Curriculum this check does not call once closed: {unlisted}"
    wrong = {name: repr(error) for name, args in calls.items()
             if not isinstance(error := (_call_error(getattr, closed, name) if args is None else
                                         _call_error(getattr(closed, name), *args)), CurriculumClosedError)
             or name not in str(error)}
    assert not wrong, (f"{algorithm}: calls through a closed local curriculum that were not refused with "
                       f"CurriculumClosedError naming the call: {wrong}, seed {scenario_seed}")


_KILLED_CREATOR = """
import sys, time
from curriculum import Curriculum, CurriculumConfig, SingleTaskGenerator, UniformConfig
config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}), algorithm=UniformConfig(),
                          num_active_tasks=4, seed=int(sys.argv[1]))
curriculum = Curriculum(config, shared_memory=True)
print(curriculum.shared_memory_name, flush=True)
time.sleep(120)
"""


def test_a_creator_killed_outright_leaves_no_block_behind(uses_builtin_curriculum, require_capability,
                                                         scenario_seed) -> None:
    """A trainer SIGKILLed (the OOM killer) never runs its cleanup: its tracker must still be
    unlinked once it is gone (by the resource tracker of its interpreter), even while another
    process is attached to it, as a worker may be. A block left behind holds its memory until
    the machine restarts or someone runs the cleanup."""
    require_capability(uses_builtin_curriculum, "checks the built-in curriculum's shared memory")
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}), algorithm=UniformConfig(),
                              num_active_tasks=4, seed=scenario_seed)
    creator = subprocess.Popen([sys.executable, "-c", _KILLED_CREATOR, str(scenario_seed)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    attached = None
    path = None
    try:
        name = creator.stdout.readline().strip()
        assert name, f"the creator did not start: {creator.stderr.read() if creator.poll() is not None else ''}"
        path = os.path.join(SEGMENT_DIR, name)
        attached = Curriculum.attach(name, config)  # in use here: no cleanup of orphans may remove it
        creator.kill()
        creator.wait(timeout=30)
        deadline = time.monotonic() + LIMITS.killed_creator_unlinked
        while os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(path), (
            f"the tracker {name} of a creator killed with SIGKILL was still in {SEGMENT_DIR} "
            f"{LIMITS.killed_creator_unlinked} s later, seed {scenario_seed}")
        task = attached.get_task()  # unlinked, not unmapped: an attached worker goes on
        assert attached.update_task_performance(task.task_id, 0.5), (
            f"a worker attached to a killed creator's tracker could not record after the block was unlinked, "
            f"seed {scenario_seed}")
    finally:
        if creator.poll() is None:
            creator.kill()
            creator.wait(timeout=30)
        if attached is not None:
            attached.close()
        if path is not None and os.path.exists(path):
            os.unlink(path)


_LIBRARY = os.path.dirname(os.path.abspath(memory.__file__))


def _lines_in_a_fork(run: Callable[[], int]) -> int | None:
    """`run()` in a forked copy, which ends there (`os._exit`: no cleanup, no lock released);
    the lines it reports when it returns, None when it was killed before."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read)
            os.write(write, str(run()).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read()
    return int(out) if out else None


def _killed_at(kill_at: int | None, before_exit: Callable[[], None] = lambda: None) -> Callable[[int], None]:
    """A `_traced` step that ends the process just before line `kill_at`."""
    def kill(line: int) -> None:
        if line == kill_at:
            before_exit()
            os._exit(0)
    return kill


def _repair_in_a_fork(curriculum, kill_at: int | None) -> int | None:
    """In a forked copy: the lock taken, which repairs what a killed holder left open, the copy
    killed just before the `kill_at`-th line the library runs for it; the lines it ran when it
    was not killed (the lock then released)."""
    def run() -> int:
        _, lines = _traced(curriculum.tracker.lock.acquire, _killed_at(kill_at))
        curriculum.tracker.lock.release()
        return lines
    return _lines_in_a_fork(run)


def _complete_in_a_fork(curriculum, before: Any, task_id: int, kill_at: int | None, *,
                        close_first: bool = False, repair: bool = True) -> int | None:
    """In a forked copy: a completion of `before` (untraced), then one of `task_id`, the copy
    killed (`os._exit`: no cleanup, no lock released) just before the `kill_at`-th line the
    library runs for it (`close_first`: after closing its curriculum there, as a signal
    handler that closes it and exits does); returns the lines it ran when it was not killed
    (`repair`: then this process takes the lock, repairing what the copy left open)."""
    def close() -> None:
        if close_first:
            sys.settrace(None)
            curriculum.close()

    def run() -> int:
        curriculum.update_task_performance(before, 0.0)
        _, lines = _traced(lambda: curriculum.update_task_performance(task_id, 0.0), _killed_at(kill_at, close))
        return lines
    out = _lines_in_a_fork(run)
    if repair:
        curriculum.tracker.lock.acquire()  # the next holder: repairs what a killed one left open
        curriculum.tracker.lock.release()
    return out


def test_a_writer_killed_at_any_line_of_a_completion_leaves_a_committed_state(uses_builtin_curriculum,
                                                                             curriculum_factory, require_capability,
                                                                             scenario_seed) -> None:
    """A worker can die anywhere (SIGKILL, the OOM killer). A forked worker records a
    completion that evicts its task (its own transaction, which journals the rarely written
    arrays it writes and leaves that in the journal), then another that evicts, and is killed
    just before each line the library runs for the second in turn (the whole
    completion: the lock, the journal, the rows, the eviction, the refresh after it), one run
    per line from the same committed state. Once the next holder repaired the block, its
    arrays must be those of a state the runs left whenever the kill landed outside a
    transaction: an interrupted transaction rolled back exactly, every committed one kept. And
    the repairer dies too: after the writer killed last in its section, the next holder is
    killed at each line of its repair, and the holder after it must still leave such a state."""
    require_capability(uses_builtin_curriculum, "kills a writer inside the built-in shared tracker's sections")
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=LIMITS.kill_pool,
                                    evicting=True)
    tracker, backend = curriculum.tracker, curriculum.tracker.backend
    try:
        rng = np.random.default_rng(scenario_seed)
        target = lines = None
        played = 0
        while target is None and played < LIMITS.kill_history * 2:  # a state in which a completion evicts
            for score in rng.random(LIMITS.kill_history if not played else LIMITS.kill_pool).tolist():
                task = curriculum.get_task()
                curriculum.update_task_performance(task.task_id, score if task.label == "learnable" else 0.0)
                played += 1
            start = curriculum.get_state()
            ids = [tracker.task_id_at(slot) for slot in range(LIMITS.kill_pool)]
            for first, second in itertools.permutations(range(LIMITS.kill_pool), 2):  # two that evict in turn
                curriculum.load_state(start)
                curriculum.update_task_performance(ids[first], 0.0)
                curriculum.update_task_performance(ids[second], 0.0)
                if tracker.task_id_at(first) != ids[first] and tracker.task_id_at(second) != ids[second]:
                    before, target = ids[first], ids[second]
                    break
            curriculum.load_state(start)
        assert target is not None, f"no two completions evicted their tasks in turn in {played} episodes, seed " \
                                   f"{scenario_seed}: the check measured too little"
        lines = _complete_in_a_fork(curriculum, before, target, None)
        committed: list[dict[str, np.ndarray]] = []
        repaired: list[tuple[int, dict[str, np.ndarray]]] = []
        closed: list[tuple[int, dict[str, np.ndarray]]] = []
        for kill_at in range(1, lines + 1):
            curriculum.load_state(start)
            repairs = backend.repairs
            _complete_in_a_fork(curriculum, before, target, kill_at)
            state = tracker.snapshot()
            (repaired.append((kill_at, state)) if backend.repairs > repairs else committed.append(state))
        for kill_at in [kill_at for kill_at, _ in repaired][::LIMITS.kill_close_every]:  # closed there first
            curriculum.load_state(start)
            _complete_in_a_fork(curriculum, before, target, kill_at, close_first=True)
            closed.append((kill_at, tracker.snapshot()))
        assert len(repaired) >= LIMITS.kill_min_repaired, (
            f"only {len(repaired)} of {lines} kills left a transaction open, seed {scenario_seed}: the check measured "
            "too little")

        def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
            return all(np.array_equal(a[name], b[name]) for name in a)

        wrong = [(kill_at, sorted(name for name in state if not any(np.array_equal(state[name], c[name])
                                                                    for c in committed)))
                 for kill_at, state in repaired if not any(same(state, c) for c in committed)]
        assert not wrong, (
            f"{len(wrong)} of {len(repaired)} writers killed inside a transaction (one run per line of a completion "
            f"that evicts, {lines} lines) left, once repaired, a state no run of whole transactions leaves: "
            f"(line killed at, arrays unlike any committed state) {wrong[:5]}, seed {scenario_seed}")
        killed = dict(repaired)
        unlike = [(kill_at, sorted(name for name in state if not np.array_equal(state[name], killed[kill_at][name])))
                  for kill_at, state in closed if not same(state, killed[kill_at])]
        assert not unlike, (
            f"{len(unlike)} of {len(closed)} writers that closed their curriculum inside a transaction, then exited, "
            "left a state unlike that of a writer killed at the same line (closing must not commit half a "
            f"transaction): (line, arrays that differ) {unlike[:5]}, seed {scenario_seed}")
        # the repairer killed too: after the writer killed last in its section (its rows, the
        # memory and the rarely written arrays written), the next holder dies at each line of
        # its repair, and the holder after it must still roll the dead writer back exactly
        late = repaired[-1][0]
        curriculum.load_state(start)
        _complete_in_a_fork(curriculum, before, target, late, repair=False)
        repair_lines = _repair_in_a_fork(curriculum, None)
        assert repair_lines, f"the repair after a writer killed at line {late} ran no line, seed {scenario_seed}"
        twice = []
        for kill_repair_at in range(1, repair_lines + 1):
            curriculum.load_state(start)
            _complete_in_a_fork(curriculum, before, target, late, repair=False)
            _repair_in_a_fork(curriculum, kill_repair_at)
            curriculum.tracker.lock.acquire()  # the holder after both
            curriculum.tracker.lock.release()
            state = tracker.snapshot()
            if not any(same(state, c) for c in committed):
                twice.append((kill_repair_at, sorted(name for name in state
                                                     if not any(np.array_equal(state[name], c[name]) for c in committed))))
        assert not twice, (
            f"{len(twice)} of {repair_lines} repairers killed in their repair of a writer killed at line {late} left, "
            f"once the next holder repaired, a state no run of whole transactions leaves: (repair line killed at, "
            f"arrays unlike any committed state) {twice[:5]}, seed {scenario_seed}")
    finally:
        curriculum.close()


def _section_in_steps(curriculum, rows: str, end: str, conn) -> None:
    """A writer (forked) that goes through one section a step at a time, each step reported on
    `conn` and the next awaited: the lock taken; rows written (slot 0 twice, then slot 1 ("few",
    each row journaled on its own) or every slot ("all", the rows journaled at once), and a new
    task put into slot 2), with the block's bytes before each line the library ran for them;
    the section ended (`end`: "abort" or "commit")."""
    tracker = curriculum.tracker
    mapping = tracker.backend._segment.map
    tracker.lock.acquire()
    conn.send("taken")
    conn.recv()

    def write() -> None:
        tracker.record(0, 1.0)
        tracker.record(0, 0.0)
        for other in _other_rows(tracker.capacity, 0, rows):
            tracker.record(other, 1.0)
        tracker.assign(2, UNCOMMITTED_TASK_ID, evicted=True)

    during = [bytes(mapping)]
    _traced(write, lambda line: during.append(bytes(mapping)))
    conn.send(("written", [image for i, image in enumerate(during) if i == 0 or image != during[i - 1]]))
    conn.recv()
    (tracker.lock.abort if end == "abort" else tracker.lock.release)()
    conn.send("ended")
    conn.recv()


def _block_images(curriculum, rows: str, end: str) -> dict[str, Any]:
    """The shared block's bytes at each step of one `_section_in_steps` writer: "taken",
    "written" (also what a writer killed there leaves), "ended", and "writing": a list, the
    block before each line of its writes."""
    mapping = curriculum.tracker.backend._segment.map
    here, there = CTX.Pipe()
    writer = CTX.Process(target=_section_in_steps, args=(curriculum, rows, end, there), daemon=True)
    writer.start()
    images: dict[str, Any] = {}
    try:
        for step in ("taken", "written", "ended"):
            assert here.poll(30), f"the writer did not report the step {step!r}"
            report = here.recv()
            if step == "written":
                report, images["writing"] = report
            assert report == step, f"the writer reported {report!r}, not the step {step!r}"
            images[step] = bytes(mapping)
            here.send("go")
        writer.join(timeout=30)
    finally:
        _stop(writer)
    return images


_AFTER_THE_READ = 10**9
"""A line number no read reaches: a step planned there comes after the read."""


def _traced(call, step) -> tuple[Any, int]:
    """`call()` with `step(k)` run just before the k-th line the library runs for it; what it
    returned and how many lines it ran."""
    lines = 0

    def count(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
            step(lines)
        return count

    sys.settrace(lambda frame, event, arg: count if frame.f_code.co_filename.startswith(_LIBRARY) else None)
    try:
        result = call()
    finally:
        sys.settrace(None)
    return result, lines


@pytest.mark.parametrize("rows", ["few", "all"])
def test_a_lock_free_read_overlapping_a_section_at_any_lines_returns_a_committed_state(
        uses_builtin_curriculum, curriculum_factory, require_capability, scenario_seed, rows: str) -> None:
    """A lock-free read (`snapshot()`, `task_stats()`, `task_id_at()`) overlaps a writer's
    section in every way its lines allow: the section's lock taken before the read or with its
    rows written at any line of it, and the section ended at any line at or after the writes
    (or after the read): aborted, committed, or its holder killed and the section rolled back
    by the next holder, whole or stopped after any step of the repair (the repairer killed in
    turn); or the writer stuck or killed at any step of its writes, seen from any line of the
    read. Each state is the block exactly as real writers left it there (its bytes, recorded
    step by step). The read must return the state before the section (aborted, killed), or
    that or the state after it (committed): never a word the section wrote and did not
    commit, never a mix of two states."""
    require_capability(uses_builtin_curriculum, "replays the built-in shared tracker's block step by step")
    curriculum = _shared_curriculum(curriculum_factory, require_capability, scenario_seed, pool=LIMITS.journal_pool)
    tracker = curriculum.tracker
    mapping = tracker.backend._segment.map
    rng = np.random.default_rng(scenario_seed)
    for score in rng.random(LIMITS.journal_history).tolist():
        curriculum.update_task_performance(curriculum.get_task().task_id, score)
    committed = bytes(mapping)

    def put(image: bytes) -> None:
        mapping[:] = image

    try:
        ids = [tracker.task_id_at(slot) for slot in range(3)]
        reads = {"snapshot()": tracker.snapshot,
                 **{f"task_stats({slot}, {ids[slot]})": (lambda slot=slot: tracker.task_stats(slot, ids[slot]))
                    for slot in range(3)},
                 "task_id_at(2)": lambda: tracker.task_id_at(2)}
        images = {end: _block_images(curriculum, rows, end) for end in ("abort", "commit")}

        def states(image: bytes) -> dict[str, Any]:
            put(image)
            return {name: read() for name, read in reads.items()}

        before, after = states(committed), states(images["commit"]["ended"])
        put(committed)

        def same(a: Any, b: Any) -> bool:
            return all(np.array_equal(a[k], b[k]) for k in a) if isinstance(a, dict) else a == b

        def repair() -> None:
            with tracker.lock:  # the dead holder's section rolled back
                pass

        put(images["abort"]["written"])  # the writer killed there: the next holder's repair, line by line
        repairing = [bytes(mapping)]
        _traced(repair, lambda line: repairing.append(bytes(mapping)))
        repairing = [image for i, image in enumerate(repairing) if i == 0 or image != repairing[i - 1]]
        ends = {"abort": images["abort"]["ended"], "commit": images["commit"]["ended"],
                **{f"killed, repaired up to step {k}": image for k, image in enumerate(repairing[1:-1], 1)},
                "killed, repaired": bytes(mapping)}
        wrong, runs = [], 0
        for name, read in reads.items():
            lines = _traced(read, lambda line: None)[1]
            at = [*range(1, lines + 1), _AFTER_THE_READ]
            for end, image in ends.items():
                steps = images["commit" if end == "commit" else "abort"]
                for taken_before, (w, written) in itertools.product((True, False), enumerate(at)):
                    for ended in at[w:]:
                        put(steps["taken"] if taken_before else committed)
                        plan = {written: [steps["written"]]}
                        plan.setdefault(ended, []).append(image)
                        got, _ = _traced(read, lambda line: [put(step) for step in plan.get(line, ())])
                        runs += 1
                        if not (same(got, before[name]) or end == "commit" and same(got, after[name])):
                            wrong.append((name, end, "before the read" if taken_before else written, written,
                                          "after the read" if ended == _AFTER_THE_READ else ended))
                        put(committed)
            for line, (step, written) in itertools.product(at[:-1], enumerate(images["abort"]["writing"])):
                put(images["abort"]["taken"])  # the writer stuck or killed at any step of its writes
                got, _ = _traced(read, lambda now: now == line and put(written))
                runs += 1
                if not same(got, before[name]):
                    wrong.append((name, f"none (stopped at step {step} of its writes)", "before the read", line,
                                  "never"))
                put(committed)
        assert not wrong, (
            f"{len(wrong)} of {runs} lock-free reads overlapping a writer's section ({rows} rows) returned a state "
            f"the block never committed: (read, section end, line the lock was taken, line written, line ended) "
            f"{wrong[:6]}, seed {scenario_seed}")
    finally:
        put(committed)
        curriculum.close()


_JOINING_TRAINER = """
import sys
from curriculum import Curriculum, CurriculumConfig, SingleTaskGenerator, UniformConfig
config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}), algorithm=UniformConfig(),
                          num_active_tasks=4, seed=int(sys.argv[2]))
curriculum = Curriculum.attach(sys.argv[1], config)
task = curriculum.get_task()
curriculum.update_task_performance(task.task_id, 0.5)
curriculum.close()
"""


def test_processes_of_their_own_join_record_and_leave_without_taking_the_block(uses_builtin_curriculum,
                                                                                 require_capability,
                                                                                 scenario_seed) -> None:
    """Trainers started on their own (not children of the creator: each has a resource tracker
    of its own) attach by name, record, close and exit, one after another: the block stays in
    place for the creator and for whoever attaches next, and every completion is there. An
    attacher whose interpreter takes the block for its own would unlink it at exit."""
    require_capability(uses_builtin_curriculum, "checks the built-in curriculum's shared memory")
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}), algorithm=UniformConfig(),
                              num_active_tasks=4, seed=scenario_seed)
    creator = Curriculum(config, shared_memory=True)
    try:
        name = creator.shared_memory_name
        for joined in range(1, LIMITS.joining_trainers + 1):
            trainer = subprocess.run([sys.executable, "-c", _JOINING_TRAINER, name, str(scenario_seed)],
                                     capture_output=True, text=True, timeout=120)
            assert trainer.returncode == 0, (
                f"trainer {joined} of {LIMITS.joining_trainers}, started on its own, could not attach and record "
                f"after {joined - 1} before it had left: {trainer.stderr.strip()[-400:]}, seed {scenario_seed}")
            assert os.path.exists(os.path.join(SEGMENT_DIR, name)), (
                f"the block {name} was gone from {SEGMENT_DIR} once trainer {joined}, attached on its own, exited "
                f"(its creator still runs), seed {scenario_seed}")
        recorded = creator.stats()["total_completions"]
        assert recorded == LIMITS.joining_trainers, (
            f"{LIMITS.joining_trainers} trainers attached one after another and recorded one completion each; the "
            f"creator sees {recorded}, seed {scenario_seed}")
    finally:
        creator.close()


def _create_and_vanish(config: CurriculumConfig, conn, with_its_tracker: bool = False) -> None:
    """Create a shared curriculum, wait for the word, and die without closing it (a crashed
    creator). Creating a tracker removes orphans, so every creator is made before any dies.
    `with_its_tracker`: multiprocessing's resource tracker dies with it (a container whose
    processes all end), so nothing unlinks the block: it stays, an orphan."""
    curriculum = Curriculum(config, shared_memory=True)
    if with_its_tracker:
        resource_tracker.unregister("/" + curriculum.shared_memory_name, "shared_memory")
    conn.send(curriculum.shared_memory_name)
    conn.recv()
    os._exit(0)


def _create_without_start_times(config: CurriculumConfig, conn, close: bool) -> None:
    """`_create_and_vanish` (or, with `close`, close it first) on a system that hides
    `/proc/<pid>/stat`: the creator's start time cannot be read, so the block's header holds none."""
    import curriculum.memory

    curriculum.memory._process_start_time = lambda pid: None  # fault injection: what such a system reads
    curriculum = Curriculum(config, shared_memory=True)
    conn.send(curriculum.shared_memory_name)
    conn.recv()
    if close:
        curriculum.close()
    os._exit(0)


def test_cleanup_removes_a_dead_creators_tracker_whose_start_time_was_unknown(uses_builtin_curriculum,
                                                                              require_capability,
                                                                              scenario_seed) -> None:
    """Where a creator's start time could not be read (the header holds none), a creator that
    died is told from a running one by its block's lock alone: the cleanup removes the dead
    one's tracker, and keeps the one its running creator uses."""
    require_capability(uses_builtin_curriculum, "checks the library's cleanup of the built-in shared tracker")
    config = CurriculumConfig(task_generator=LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="shared")),
                              algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed)
    resource_tracker.ensure_running()  # (one for the creators too, which the cleanup's removals reach)
    context = mp.get_context("fork")
    creators, paths = [], []
    for close in (False, True):
        here, there = context.Pipe()
        creator = context.Process(target=_create_without_start_times, args=(config, there, close))
        creator.start()
        creators.append((creator, here))
        paths.append(os.path.join(SEGMENT_DIR, here.recv()))
    (dying, dying_conn), (running, running_conn) = creators
    dead, live = paths
    try:
        dying_conn.send("die")
        dying.join(timeout=30)
        removed = remove_orphaned_segments()
        assert _gone_or_removed(dead, removed) and os.path.exists(live), (
            f"the cleanup, with the creators' start times unknown: the dead creator's tracker {dead} "
            f"{'was removed' if _gone_or_removed(dead, removed) else 'is still there'} (it must go), the running "
            f"creator's {live} {'is there' if os.path.exists(live) else 'was removed'} (it must stay), seed "
            f"{scenario_seed}")
    finally:
        running_conn.send("close")
        running.join(timeout=30)


def _gone_or_removed(path: str, removed: list[str]) -> bool:
    """Removed by this cleanup, or already by another process's (creating a tracker cleans up)."""
    return path in removed or not os.path.exists(path)


def test_cleanup_removes_the_trackers_of_dead_creators_and_nothing_in_use(uses_builtin_curriculum,
                                                                          require_capability, scenario_seed) -> None:
    """Two creators die without closing; one of their trackers is still attached here. The
    cleanup (a dry run first, then the one that creating a shared curriculum runs) must remove
    the unused one only; a live creator's tracker and the attached one stay and keep working,
    and the attached one goes once released."""
    require_capability(uses_builtin_curriculum, "checks the library's cleanup of the built-in shared tracker")
    config = CurriculumConfig(task_generator=LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="shared")),
                              algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed)
    live = Curriculum(config, shared_memory=True)
    alive = os.path.join(SEGMENT_DIR, live.shared_memory_name)
    context = mp.get_context("fork")
    creators, names = [], []
    for _ in range(2):
        here, there = context.Pipe()
        creator = context.Process(target=_create_and_vanish, args=(config, there))
        creator.start()
        creators.append((creator, here))
        names.append(here.recv())
    held = Curriculum.attach(names[1], config)
    for creator, here in creators:
        here.send("die")
        creator.join(timeout=30)
    unused, attached = (os.path.join(SEGMENT_DIR, name) for name in names)
    # files of the tracker's prefix that carry no tracker header (another program's, an older
    # format), a lock file beside one of them, another program's empty lock file, and a lock
    # file of the prefix holding bytes (a pid file) with no block beside it: never the cleanup's
    # to remove (it removes only the empty `<tracker>.lock` of a gone block, as earlier versions left)
    foreign = [os.path.join(SEGMENT_DIR, name) for name in (
        f"{SEGMENT_PREFIX}foreign_{os.getpid()}_bytes", f"{SEGMENT_PREFIX}foreign_{os.getpid()}_pid.lock",
        f"{SEGMENT_PREFIX}foreign_{os.getpid()}_empty", f"{SEGMENT_PREFIX}foreign_{os.getpid()}_bytes.lock",
        f"another_program_{os.getpid()}.lock")]
    Path(foreign[0]).write_bytes(bytes(range(256)) * 64)
    Path(foreign[1]).write_bytes(f"{os.getpid()}\n".encode())
    for path in foreign[2:]:
        Path(path).write_bytes(b"")
    try:
        descriptors = _open_descriptors()
        listed = remove_orphaned_segments(dry_run=True)
        leaked = _open_descriptors() - descriptors
        assert not leaked, (
            f"a dry run of the cleanup left {len(leaked)} descriptor(s) open ({sorted(leaked)[:5]}): each keeps a "
            f"probed block's memory alive even once it is removed, seed {scenario_seed}")
        assert alive not in listed and attached not in listed, (
            f"a dry run of the cleanup listed a tracker in use: {sorted(set(listed) & {alive, attached})} (the live "
            f"creator's {alive}, or {attached}, attached here), seed {scenario_seed}")
        Curriculum(config, shared_memory=True).close()  # creating a shared curriculum removes orphans first
        assert not os.path.exists(unused), (
            f"a new shared curriculum was created and {unused}, whose creator died and which nobody uses, is still "
            f"there (creating one must first remove the orphaned blocks), seed {scenario_seed}")
        descriptors = _open_descriptors()
        removed = remove_orphaned_segments()
        leaked = _open_descriptors() - descriptors
        assert not leaked, (
            f"the cleanup left {len(leaked)} descriptor(s) open ({sorted(leaked)[:5]}), seed {scenario_seed}")
        assert os.path.exists(alive) and os.path.exists(attached), (
            f"the cleanup removed a tracker in use: the live creator's {alive} exists={os.path.exists(alive)}, "
            f"{attached}, attached here, exists={os.path.exists(attached)}, seed {scenario_seed}")
        gone = [path for path in foreign if not os.path.exists(path)]
        assert not gone and not set(foreign) & set(listed), (
            f"the cleanup removed (or its dry run listed) files that are neither trackers nor a lock file of a gone "
            f"tracker: "
            f"{gone or sorted(set(foreign) & set(listed))}, seed {scenario_seed}")
        joined = Curriculum.attach(live.shared_memory_name, config)
        try:
            for curriculum in (joined, held):
                task = curriculum.get_task()
                curriculum.update_task_performance(task.task_id, 1.0)
        finally:
            joined.close()
        assert live.stats()["total_completions"] == 1 and held.stats()["total_completions"] == 1, (
            f"after the cleanup the trackers in use lost completions: live {live.stats()['total_completions']}, "
            f"attached {held.stats()['total_completions']} (1 each expected), seed {scenario_seed}")
    finally:
        held.close()
        live.close()
        for path in foreign:
            if os.path.exists(path):
                os.unlink(path)
    removed = remove_orphaned_segments()
    assert _gone_or_removed(attached, removed), (
        f"once released, {attached} (its creator dead) must be removed; the cleanup removed {removed}, seed "
        f"{scenario_seed}")


def _assert_holds(name: str, meta: dict[str, Any], when: str) -> None:
    """The block under `name` is the one created with `meta`."""
    attached = memory.SharedMemoryBackend.attach(name)
    try:
        assert attached.meta == meta, (f"the name {name!r} ({when}) holds a block with meta {attached.meta!r}, not "
                                       f"the one created with {meta!r}")
    finally:
        attached.close()


def test_a_tracker_created_again_under_its_name_takes_the_place_of_its_dead_creators_block(
        uses_builtin_curriculum, require_capability, scenario_seed) -> None:
    """A tracker created under a fixed name (`SharedMemoryBackend(name=...)`: a service that
    restarts after a crash under the name its workers attach to) whose previous block a dead
    creator left behind: creating one removes the orphaned blocks first, so it succeeds, and
    the name holds the new block. A name whose creator lives is taken: creating another tracker
    under it is refused (`SharedTrackerError`), and the live block is left as it was."""
    require_capability(uses_builtin_curriculum, "checks the library's cleanup of the built-in shared tracker")
    config = CurriculumConfig(task_generator=LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="shared")),
                              algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed)
    here, there = CTX.Pipe()
    creator = CTX.Process(target=_create_and_vanish, args=(config, there, True))
    creator.start()
    name = here.recv()
    here.send("die")
    creator.join(timeout=30)
    path = os.path.join(SEGMENT_DIR, name)
    backend = None
    try:
        assert os.path.exists(path), f"the dead creator's block {path} was not left behind: the check measured nothing"
        try:
            backend = memory.SharedMemoryBackend({"level": ("int64", 4)}, name=name, slot_arrays=("level",),
                                                 meta={"restarted": scenario_seed})
        except SharedTrackerError as error:
            pytest.fail(f"creating a tracker under the name {name!r} of a dead creator's orphaned block raised "
                        f"{error!r}: the orphan must be removed first, seed {scenario_seed}")
        _assert_holds(name, {"restarted": scenario_seed}, f"re-created, seed {scenario_seed}")
        try:  # the name now holds a live creator's block: a second creation under it is refused, the block kept
            memory.SharedMemoryBackend({"level": ("int64", 4)}, name=name, slot_arrays=("level",),
                                       meta={"second": True}).close()
        except SharedTrackerError:
            pass
        else:
            pytest.fail(f"a second tracker was created under the name {name!r} of a live creator's block, seed "
                        f"{scenario_seed}")
        _assert_holds(name, {"restarted": scenario_seed}, f"after a refused second creation, seed {scenario_seed}")
    finally:
        if backend is not None:
            backend.close()
        if os.path.exists(path):
            os.unlink(path)


def _create_fork_and_wait(config: CurriculumConfig, creator_conn, worker_conn) -> None:
    """Create a shared curriculum and fork a worker that uses it through the inherited block
    (as forked env workers do, without attaching by name): on each word "record" it records an
    episode and answers the pool's total, on "stop" it closes and exits. The creator then
    waits to be killed."""
    curriculum = Curriculum(config, shared_memory=True)
    if os.fork() == 0:
        try:
            while worker_conn.recv() == "record":
                curriculum.update_task_performance(curriculum.get_task().task_id, 0.5)
                worker_conn.send(curriculum.stats()["total_completions"])
            curriculum.close()
            worker_conn.send("closed")
        finally:
            os._exit(0)
    creator_conn.send(curriculum.shared_memory_name)
    time.sleep(120)


def test_the_cleanup_leaves_a_block_forked_workers_still_use(uses_builtin_curriculum, require_capability,
                                                             scenario_seed) -> None:
    """A trainer killed outright while a worker it forked still records through the inherited
    block: the block is still in use, so the cleanup (its dry run and the real one, as any new
    shared curriculum runs it) must neither list nor remove it; the worker goes on recording,
    a process attaching by name sees every episode, and once the worker is gone the block is
    an orphan the cleanup removes."""
    require_capability(uses_builtin_curriculum, "checks the library's cleanup of the built-in shared tracker")
    config = CurriculumConfig(task_generator=LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="shared")),
                              algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed)
    resource_tracker.ensure_running()  # the forked creator registers its block with ours, which outlives it
    context = mp.get_context("fork")
    creator_here, creator_there = context.Pipe()
    worker, worker_there = context.Pipe()
    creator = context.Process(target=_create_fork_and_wait, args=(config, creator_there, worker_there))
    creator.start()
    name = creator_here.recv()
    path = os.path.join(SEGMENT_DIR, name)
    stopped = False
    try:
        worker.send("record")
        first = worker.recv()
        creator.kill()
        creator.join()  # reaped (a timeout would wait on its sentinel, which the worker inherited)
        listed = remove_orphaned_segments(dry_run=True)
        removed = remove_orphaned_segments()
        assert path not in listed and path not in removed and os.path.exists(path), (
            f"the block {name} of a killed creator, still used by the worker it forked, was listed by the dry run "
            f"({path in listed}) or removed by the cleanup ({path in removed or not os.path.exists(path)}), seed "
            f"{scenario_seed}")
        worker.send("record")
        second = worker.recv()
        joined = Curriculum.attach(name, config)
        try:
            seen = joined.stats()["total_completions"]
        finally:
            joined.close()
        assert (first, second, seen) == (1, 2, 2), (
            f"after its creator was killed, the forked worker's pool counted {first} then {second} episodes and a "
            f"process attaching by name saw {seen} (expected 1, 2 and 2), seed {scenario_seed}")
        worker.send("stop")
        stopped = worker.poll(30) and worker.recv() == "closed"
        deadline, removed = time.monotonic() + LIMITS.killed_creator_unlinked, []
        while os.path.exists(path) and time.monotonic() < deadline:  # until the worker has exited
            removed += remove_orphaned_segments()
            time.sleep(0.05)
        assert not os.path.exists(path), (
            f"the worker closed and exited, and the block {name} of its killed creator, now used by nobody, was still "
            f"there after {LIMITS.killed_creator_unlinked} s of cleanups, seed {scenario_seed}")
    finally:
        if not stopped:
            worker.send("stop")
        if creator.is_alive():
            creator.kill()
            creator.join(timeout=30)
        if os.path.exists(path):
            os.unlink(path)
        resource_tracker.unregister("/" + name, "shared_memory")  # removed here: nothing left for the tracker


def _with_creator_pid(block: bytes, dead: int) -> bytes:
    """A copy of a tracker block whose header names a running process (this one, else its
    parent or init, whichever pid is no longer than `dead`'s) as its creator in place of
    `dead`, padded with JSON whitespace so the layout stays: a dead creator whose pid the
    system has since given to another process, started at another time."""
    old = b'"pid": %d' % dead
    assert block.count(old) == 1, f"expected the creator's pid {dead} once in the tracker's header: {block[:300]!r}"
    live = next(pid for pid in (os.getpid(), os.getppid(), 1) if len(str(pid)) <= len(str(dead)))
    return block.replace(old, b'"pid": ' + b" " * (len(str(dead)) - len(str(live))) + str(live).encode())


def _orphan_copied_into(directory: Path, seed: int) -> tuple[Path, Any]:
    """A dead creator's tracker, copied into `directory` while the creator ran (other processes'
    cleanups scan only the real directory), and the creator's (joined) process."""
    config = CurriculumConfig(task_generator=LabelledTaskGenerator(SingleTaskGenerator({"level": 1}, label="shared")),
                              algorithm=UniformConfig(), num_active_tasks=4, seed=seed)
    resource_tracker.ensure_running()  # the forked creator registers its block with ours, not its own
    here, there = mp.get_context("fork").Pipe()
    creator = mp.get_context("fork").Process(target=_create_and_vanish, args=(config, there))
    creator.start()
    name = here.recv()
    copy = directory / name
    copy.write_bytes((Path(SEGMENT_DIR) / name).read_bytes())
    here.send("die")
    creator.join(timeout=30)
    remove_orphaned_segments()  # the real block, its creator gone
    resource_tracker.unregister("/" + name, "shared_memory")  # removed here: nothing left for the tracker
    return copy, creator


def test_the_cleanup_leaves_what_another_user_owns(uses_builtin_curriculum, require_capability, scenario_seed,
                                                   monkeypatch, tmp_path) -> None:
    """A dead creator's tracker and a lock file whose block is gone are orphans only when they
    are this user's: given to another user, the cleanup neither lists nor removes them (another
    user's files are not ours to judge, and removing them would fail in a sticky /dev/shm)."""
    require_capability(uses_builtin_curriculum, "checks the library's cleanup of the built-in shared tracker")
    require_capability(os.geteuid() == 0, "only root can plant files another user owns")
    copy, _ = _orphan_copied_into(tmp_path, scenario_seed)
    stale = tmp_path / f"{copy.name}_gone.lock"
    stale.touch()
    for path in (copy, stale):
        os.chown(path, _OTHER_UID, _OTHER_UID)
    monkeypatch.setattr(memory, "SEGMENT_DIR", str(tmp_path))
    listed = remove_orphaned_segments(dry_run=True)
    removed = remove_orphaned_segments()
    gone = [path.name for path in (copy, stale) if not path.exists()]
    assert not listed and not removed and not gone, (
        f"the cleanup over another user's dead tracker and stale lock file listed {listed} in its dry run, then "
        f"listed {removed} and removed {gone}: none of them is this user's, seed {scenario_seed}")


def test_a_dry_run_of_the_cleanup_lists_an_orphan_and_leaves_it(uses_builtin_curriculum, require_capability,
                                                                 scenario_seed, monkeypatch, tmp_path) -> None:
    """A dead creator's tracker, copied while it ran into a directory of its own (other
    processes' cleanups scan only the real one), is an orphan there, and so is a copy whose
    creator's pid now belongs to another running process (pids are reused): the dry run lists
    them and leaves them in place; the real cleanup then lists and removes them. Beside it, empty lock files
    `<name>.lock` as earlier versions left them: one whose block is gone is listed and removed
    likewise, one beside a block that is still there (not a tracker of ours) stays, as does
    that block, and as does the dead creator's tracker copied under a name the user chose (the
    cleanup removes only blocks named with `SEGMENT_PREFIX`: a named tracker may be waiting for
    its supervisor to attach it again)."""
    require_capability(uses_builtin_curriculum, "checks the library's cleanup of the built-in shared tracker")
    copy, creator = _orphan_copied_into(tmp_path, scenario_seed)
    name = copy.name
    monkeypatch.setattr(memory, "SEGMENT_DIR", str(tmp_path))
    reused = tmp_path / f"{name}_reused"
    reused.write_bytes(_with_creator_pid(copy.read_bytes(), creator.pid))
    block, beside, stale = (tmp_path / f"{name}_kept", tmp_path / f"{name}_kept.lock", tmp_path / f"{name}_gone.lock")
    block.write_bytes(b"not a tracker")
    beside.touch()
    stale.touch()
    named = tmp_path / f"trainer_{name.removeprefix(SEGMENT_PREFIX)}"
    named.write_bytes(copy.read_bytes())
    kept = [block, beside, named]
    orphans = sorted([str(copy), str(reused), str(stale)])
    listed = remove_orphaned_segments(dry_run=True)
    assert listed == orphans and all(Path(p).exists() for p in orphans), (
        f"a dry run of the cleanup over a dead creator's tracker, the same with the creator's pid now another "
        f"running process's, and a lock file whose block is gone listed {listed} (expected all three, left in "
        f"place) and removed {[Path(p).name for p in orphans if not Path(p).exists()]}, seed {scenario_seed}")
    removed = remove_orphaned_segments()
    assert removed == orphans and not any(Path(p).exists() for p in orphans), (
        f"after the dry run the cleanup removed {removed}, and left {[Path(p).name for p in orphans if Path(p).exists()]} "
        f"of the dead creators' trackers and the stale lock file {orphans}, seed {scenario_seed}")
    lost = [p.name for p in kept if not p.exists()]
    assert not lost, (f"the cleanup removed {lost}: a block that still exists, the lock file beside it, or a "
                      f"tracker named without the prefix {SEGMENT_PREFIX!r}, seed {scenario_seed}")
