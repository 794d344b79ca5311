"""One shared-memory Curriculum, many real worker processes: no completion is lost or invented,
lock-free readers never see garbage, and a local curriculum refuses to be a worker's copy."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from helpers import drive, exact, hammer, hold_lock, lp_config, uniform_config, update_from_copy

from curriculum import Curriculum, LockTimeoutError, WorkerCopyError

pytestmark = pytest.mark.multiprocessing

HERE = Path(__file__).resolve().parent
PAIRS = 1500


def _run_workers(curriculum: Curriculum, start_method: str, workers: int, *, lag: int) -> tuple[list[dict], int]:
    """Start `workers` hammering processes; read the shared arrays lock-free until they finish.
    Returns the workers' reports and how many lock-free snapshots were checked."""
    context = multiprocessing.get_context(start_method)
    queue = context.Queue()
    processes = [context.Process(target=hammer, args=(curriculum, PAIRS, seed, lag, queue))
                 for seed in range(1, workers + 1)]
    for process in processes:
        process.start()
    n = curriculum.num_active_tasks
    tracker = curriculum.tracker
    reports: list[dict] = []
    snapshots = 0
    last_counters = np.zeros_like(tracker.counters)
    deadline = time.monotonic() + 120
    while len(reports) < workers:
        assert time.monotonic() < deadline, "workers did not finish"
        arrays = tracker.snapshot()  # lock-free, while the workers write
        for name, values in arrays.items():
            assert np.isfinite(values).all(), name
        assert ((arrays["task_ids"] >= 0) & (arrays["task_ids"] % n == np.arange(n))).all()
        assert (arrays["completions"] >= 0).all()
        assert (arrays["counters"] >= last_counters).all()  # counters only grow
        last_counters = arrays["counters"]
        snapshots += 1
        while not queue.empty():
            reports.append(queue.get())
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return reports, snapshots


@pytest.mark.parametrize(("start_method", "workers"), [("spawn", 2), ("fork", 3), ("spawn", 4)])
def test_every_completion_is_recorded_exactly_once_across_worker_processes(start_method: str, workers: int) -> None:
    """Learning progress with aggressive eviction, so tasks are evicted under running episodes."""
    with Curriculum(lp_config(n=8, min_presentations=3, refresh_interval=3), shared_memory=True) as curriculum:
        reports, snapshots = _run_workers(curriculum, start_method, workers, lag=4)
        stats = curriculum.stats()
    assert snapshots > 5
    updates = workers * PAIRS
    accepted = sum(r["accepted"] for r in reports)
    rejected = sum(r["rejected"] for r in reports)
    assert accepted + rejected == updates
    assert stats["total_completions"] == accepted
    assert stats["late_completions"] == rejected
    assert stats["total_completions"] + stats["late_completions"] == updates
    assert stats["evictions"] > 0 and stats["late_completions"] > 0  # the run really raced evictions
    assert len({r["pid"] for r in reports}) == workers


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_per_task_counts_add_up_across_worker_processes(start_method: str) -> None:
    """Without eviction every task stays: its completion count is the sum over the workers."""
    with Curriculum(uniform_config(n=6), shared_memory=True) as curriculum:
        reports, _ = _run_workers(curriculum, start_method, 3, lag=2)
        per_task = Counter()
        for report in reports:
            per_task.update(report["per_task"])
        assert {t.task_id: t.num_completions for t in curriculum.active_tasks()} == {
            task_id: per_task[task_id] for task_id in range(6)}
        assert curriculum.stats()["total_completions"] == 3 * PAIRS
        assert curriculum.stats()["late_completions"] == 0


def test_a_worker_unpickling_the_curriculum_does_not_write_the_shared_arrays() -> None:
    """A worker that starts while others run must not write back the arrays it was pickled with
    (that would erase their completions): unpickling needs no lock at all."""
    config = lp_config()
    with Curriculum(config, shared_memory=True, lock_timeout=0.2) as curriculum:
        payload = pickle.dumps(curriculum)
        other = Curriculum.attach(curriculum.shared_memory_name, config, seed=1)
        other.tracker.lock.acquire()  # another handle (its own flock) is mid-update
        try:
            with pytest.raises(LockTimeoutError):  # the premise: nobody else can take the lock now
                curriculum.tracker.lock.acquire()
            worker = pickle.loads(payload)  # ...yet a worker starts up
        finally:
            other.tracker.lock.release()
        assert worker.is_shared and worker.shared_memory_name == curriculum.shared_memory_name
        assert worker.update_task_performance(worker.get_task().task_id, 0.5) is True
        assert curriculum.stats()["total_completions"] == 1
        worker.close()
        other.close()


def test_reads_never_take_the_lock_and_a_blocked_update_changes_nothing() -> None:
    """While another process holds the tracker lock, everything but recording still works:
    get_task (with refreshes), stats, task statistics, get_state. Any of them taking the lock
    would raise LockTimeoutError here."""
    with Curriculum(lp_config(refresh_interval=3), shared_memory=True, lock_timeout=0.2) as curriculum:
        drive(curriculum, 40)
        context = multiprocessing.get_context("spawn")
        held = context.Event()
        holder = context.Process(target=hold_lock, args=(curriculum.shared_memory_name, held), daemon=True)
        holder.start()
        try:
            assert held.wait(timeout=30)
            tasks = [curriculum.get_task() for _ in range(10)]  # crosses three refreshes
            stats = curriculum.stats()
            assert sum(t.num_completions for t in curriculum.active_tasks()) <= stats["total_completions"]
            assert all(0.0 <= t.mean_score <= 1.0 for t in tasks)
            before = curriculum.get_state()
            message = (f"Could not take the shared tracker lock {curriculum.tracker.lock.path!r} within 0.2 s; it is "
                       f"held by pid {holder.pid}. Completions recorded before this are intact.")
            with pytest.raises(LockTimeoutError, match=exact(message)):
                curriculum.update_task_performance(tasks[0].task_id, 0.5)
            assert curriculum.get_state() == before
        finally:
            holder.kill()
            holder.join(timeout=30)
        curriculum.update_task_performance(tasks[0].task_id, 0.5)  # the killed holder no longer blocks
        assert curriculum.stats()["total_completions"] + curriculum.stats()["late_completions"] == \
            stats["total_completions"] + stats["late_completions"] + 1


WORKER_COPY_MESSAGE = ("This curriculum is a private copy made in process {pid} from a local (single-process) "
                       "curriculum: completions recorded here would never reach the other workers. Create it with "
                       "shared_memory=True, or use centralized tracking (workers with local tracking off).")


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_a_local_curriculum_pickled_into_a_child_refuses_to_record(start_method: str) -> None:
    curriculum = Curriculum(lp_config())
    before = curriculum.get_state()
    context = multiprocessing.get_context(start_method)
    queue = context.Queue()
    child = context.Process(target=update_from_copy, args=(pickle.dumps(curriculum), queue))
    child.start()
    error, message, pid = queue.get(timeout=30)
    child.join(timeout=30)
    assert (error, message) == ("WorkerCopyError", WORKER_COPY_MESSAGE.format(pid=pid))
    assert curriculum.get_state() == before


def _record_in_forked_child(curriculum: Curriculum, queue) -> None:
    task = curriculum.get_task()
    try:
        curriculum.update_task_performance(task.task_id, 0.5)
    except WorkerCopyError as exc:  # reported; the parent asserts on it
        queue.put(("WorkerCopyError", str(exc), os.getpid()))
    else:
        queue.put(("no error", "", os.getpid()))


def test_a_local_curriculum_inherited_by_a_forked_child_refuses_to_record() -> None:
    """A forked child's copy of a local curriculum is as private as a pickled one."""
    curriculum = Curriculum(lp_config())
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_record_in_forked_child, args=(curriculum, queue))
    child.start()
    error, message, pid = queue.get(timeout=30)
    child.join(timeout=30)
    assert (error, message) == ("WorkerCopyError", WORKER_COPY_MESSAGE.format(pid=pid))
    assert curriculum.update_task_performance(curriculum.get_task().task_id, 0.5) is True  # the parent still can


def test_a_local_curriculum_copied_within_its_own_process_still_records() -> None:
    curriculum = Curriculum(lp_config())
    copy = pickle.loads(pickle.dumps(curriculum))
    assert copy.get_state() == curriculum.get_state()
    assert copy.update_task_performance(copy.get_task().task_id, 0.5) is True
    assert curriculum.stats()["total_completions"] == 0  # a copy, not a second handle


USE_AFTER_CLOSE = textwrap.dedent("""
    from curriculum import Curriculum, CurriculumClosedError
    from helpers import lp_config

    curriculum = Curriculum(lp_config(), shared_memory=True)
    task = curriculum.get_task()
    lock = curriculum.tracker.lock
    curriculum.close()
    for call in (lambda: curriculum.update_task_performance(task.task_id, 0.5), curriculum.get_task,
                 curriculum.stats, curriculum.get_state, lock.acquire):
        try:
            call()
        except CurriculumClosedError as exc:
            print(exc)
""")


def test_a_closed_shared_curriculum_refuses_by_name_instead_of_crashing() -> None:
    """The shared block is unmapped on close; touching it would kill the process (SIGSEGV).
    The curriculum's calls, and its tracker's lock taken directly, raise instead."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", USE_AFTER_CLOSE], capture_output=True, text=True, timeout=60,
                            env=env, cwd=HERE)
    assert result.returncode == 0, (result.returncode, result.stderr)
    lines = result.stdout.splitlines()
    assert [line.split(" called on")[0] for line in lines[:4]] == [
        "update_task_performance", "get_task", "stats", "get_state"], lines
    assert all(line.endswith("called on a closed curriculum; create or attach a new one") for line in lines[:4]), lines
    assert lines[4:5] and lines[4].startswith("The shared tracker lock ") and lines[4].endswith(
        "was closed with its tracker"), lines


# ---- a writer stopped or killed inside the lock ------------------------------------------------
def _stop_inside_an_update(curriculum: Curriculum, slot: int) -> None:
    """Take the lock, write half of one completion into `slot` (the tracker's part, not the
    algorithm's), then stop this process (SIGSTOP) as if descheduled forever."""
    curriculum.tracker.lock.acquire()
    curriculum.tracker.record(slot, 1.0)
    os.kill(os.getpid(), signal.SIGSTOP)


def _wait_until_stopped(pid: int) -> None:
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        assert time.monotonic() < deadline, "the writer never stopped"
        time.sleep(0.005)


def test_readers_and_checkpoints_see_the_state_before_an_unfinished_update() -> None:
    """A holder stopped mid-update has written part of a completion: lock-free reads of a task
    and checkpoints show the state before it; once it is killed, the next holder rolls it back."""
    with Curriculum(lp_config(), shared_memory=True, lock_timeout=0.3) as curriculum:
        drive(curriculum, 40)
        task = curriculum.active_tasks()[2]
        before = curriculum.get_state()
        seen_before = (task.num_completions, task.mean_score, task.last_score, curriculum.tracker.mean_score_at(2))
        writer = multiprocessing.get_context("fork").Process(target=_stop_inside_an_update, args=(curriculum, 2))
        writer.start()
        pid = writer.pid
        try:
            _wait_until_stopped(pid)
            assert curriculum.tracker.completions[2] == seen_before[0] + 1  # the live arrays are half-updated
            assert (task.num_completions, task.mean_score, task.last_score,
                    curriculum.tracker.mean_score_at(2)) == seen_before
            assert curriculum.get_state() == before
        finally:
            os.kill(pid, signal.SIGKILL)
            writer.join(timeout=30)
        repairs = curriculum.tracker.backend.repairs
        with curriculum.tracker.lock:
            pass
        assert curriculum.tracker.backend.repairs == repairs + 1
        assert curriculum.get_state() == before
        assert curriculum.tracker.completions[2] == seen_before[0]


# ---- cold global arrays ---------------------------------------------------------------------
def test_cold_arrays_are_journaled_when_touched_and_rolled_back_with_the_section() -> None:
    from curriculum.errors import CurriculumConfigError
    from curriculum.memory import SharedMemoryBackend

    layout = {"counters": ("int64", 2), "memory": ("float64", 4)}
    with pytest.raises(CurriculumConfigError, match=exact(
            "Expected `cold_arrays` to name global arrays of the layout, received ['missing']")):
        SharedMemoryBackend(layout, cold_arrays=("missing",))
    backend = SharedMemoryBackend(layout, cold_arrays=("memory",))
    attached = SharedMemoryBackend.attach(backend.name)  # the layout's split comes from the header
    try:
        backend["memory"][:] = [1.0, 2.0, 3.0, 4.0]
        for writer in (backend, attached):
            writer.lock.acquire()
            writer["counters"][0] += 1  # hot: journaled when the lock was taken
            writer.lock.touch_globals()
            writer["memory"][:] = -1.0
            writer.lock.abort()
            assert backend["counters"].tolist() == [0, 0] and backend["memory"].tolist() == [1.0, 2.0, 3.0, 4.0]
        backend.lock.acquire()
        backend.lock.touch_globals()
        backend["memory"][0] = 9.0
        backend.lock.release()
        assert attached["memory"].tolist() == [9.0, 2.0, 3.0, 4.0] and attached.snapshot()["memory"][0] == 9.0
    finally:
        attached.close()
        backend.close()
