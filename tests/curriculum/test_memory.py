"""Memory backends: layout checks, shared arrays across processes, the cross-process lock.

The lock is an flock: a live holder makes others time out with a clear error, a killed holder
releases it (the kernel drops it) and leaves the data written before intact.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import attach_and_write, exact, hold_lock, lp_config

from curriculum import Curriculum, CurriculumConfigError, LocalMemoryBackend, LockTimeoutError, SharedMemoryBackend

LAYOUT = {"values": ("int64", 4), "scores": ("float64", 3)}
HERE = Path(__file__).resolve().parent


@pytest.fixture
def shared():
    backend = SharedMemoryBackend(LAYOUT, lock_timeout=0.3)
    yield backend
    backend.close()


def _shm_path(name: str) -> Path:
    return Path("/dev/shm") / name


# ---- layout ----------------------------------------------------------------------------------
BAD_LAYOUTS = [
    ({"x": ("int32", 3)}, "Expected layout entry 'x' to have dtype in ('int64', 'float64'), received 'int32'"),
    ({"x": ("float64", 0)}, "Expected layout entry 'x' to have length >= 1, received 0"),
    ({"x": ("float64", 2.0)}, "Expected layout entry 'x' to have length >= 1, received 2.0"),
    ({"x": ("float64", True)}, "Expected layout entry 'x' to have length >= 1, received True"),
    ({"x": ["float64", 2]}, "Expected layout entry 'x' to be (dtype, length), received ['float64', 2]"),
    ({"x": ("float64",)}, "Expected layout entry 'x' to be (dtype, length), received ('float64',)"),
    ({"": ("float64", 1)}, "Expected layout names to be non-empty strings, received ''"),
    ({3: ("float64", 1)}, "Expected layout names to be non-empty strings, received 3"),
]


@pytest.mark.parametrize("backend_class", [LocalMemoryBackend, SharedMemoryBackend])
@pytest.mark.parametrize(("layout", "message"), BAD_LAYOUTS, ids=[m for _, m in BAD_LAYOUTS])
def test_bad_layout_is_refused(backend_class, layout, message: str) -> None:
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        backend_class(layout)


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan")])
def test_lock_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(CurriculumConfigError,
                       match=exact(f"Expected `lock_timeout` to be > 0 seconds, received {timeout!r}")):
        SharedMemoryBackend(LAYOUT, lock_timeout=timeout)


def test_local_backend_holds_zeroed_arrays_of_the_layout() -> None:
    backend = LocalMemoryBackend(LAYOUT)
    assert {name: (str(a.dtype), a.size) for name, a in backend.arrays.items()} == LAYOUT
    assert backend["values"].tolist() == [0, 0, 0, 0] and backend["scores"].tolist() == [0.0, 0.0, 0.0]
    assert not backend.is_shared
    with backend.lock:
        backend["values"][1] = 3
    assert backend["values"][1] == 3


# ---- shared arrays ---------------------------------------------------------------------------
def test_shared_backend_attaches_by_name_in_the_same_process(shared: SharedMemoryBackend) -> None:
    assert _shm_path(shared.name).exists()
    assert shared.is_shared and shared.is_owner
    assert shared["values"].tolist() == [0, 0, 0, 0]
    other = SharedMemoryBackend.attach(shared.name)
    assert not other.is_owner
    assert {k: v for k, v in other.layout.items() if not k.startswith("_")} == LAYOUT
    shared["values"][2] = 7
    other["scores"][1] = 0.5
    assert other["values"][2] == 7 and shared["scores"][1] == 0.5
    other.close()
    assert _shm_path(shared.name).exists()  # only the creator unlinks
    assert shared["values"][2] == 7


def test_attach_to_a_missing_block_is_a_config_error() -> None:
    name = "curriculum_no_such_block_0"
    message = f"Expected a shared tracker named {name!r} to exist, but no such shared memory block was found"
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        SharedMemoryBackend.attach(name)


def test_close_unlinks_the_block_and_the_lock_file() -> None:
    backend = SharedMemoryBackend(LAYOUT)
    name, lock_path = backend.name, Path(backend.lock.path)
    with backend.lock:
        pass
    assert _shm_path(name).exists() and lock_path.exists()
    backend.close()
    assert not _shm_path(name).exists()
    assert not lock_path.exists()
    backend.close()  # idempotent


@pytest.mark.multiprocessing
@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_another_process_attaches_by_name_and_sees_the_same_arrays(
    shared: SharedMemoryBackend, start_method: str
) -> None:
    shared["values"][:] = [1, 2, 3, 4]
    shared["scores"][:] = [0.5, 1.5, 2.5]
    context = multiprocessing.get_context(start_method)
    queue = context.Queue()
    child = context.Process(target=attach_and_write, args=(shared.name, queue))
    child.start()
    seen = queue.get(timeout=30)
    assert queue.get(timeout=30) == "written"
    child.join(timeout=30)
    assert child.exitcode == 0
    assert {k: tuple(v) for k, v in seen["layout"].items() if not k.startswith("_")} == LAYOUT
    assert seen["values"] == [1, 2, 3, 4] and seen["scores"] == [0.5, 1.5, 2.5]
    assert seen["owner"] is False
    assert shared["values"].tolist() == [101, 102, 103, 104]
    assert shared["scores"].tolist() == [0.25, 1.5, 2.5]
    assert _shm_path(shared.name).exists()  # the child's close did not unlink


# ---- the lock --------------------------------------------------------------------------------
def _start_holder(shared: SharedMemoryBackend, start_method: str, *, write: float | None = None):
    context = multiprocessing.get_context(start_method)
    held = context.Event()
    holder = context.Process(target=hold_lock, args=(shared.name, held), kwargs={"write": write}, daemon=True)
    holder.start()
    assert held.wait(timeout=30), "the child never took the lock"
    return holder


@pytest.mark.multiprocessing
@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_a_live_holder_makes_acquire_time_out_with_a_clear_error_while_reads_go_on(
    shared: SharedMemoryBackend, start_method: str
) -> None:
    holder = _start_holder(shared, start_method)
    try:
        assert shared["values"].tolist() == [0, 0, 0, 0]  # reads take no lock
        message = (f"Could not take the shared tracker lock {shared.lock.path!r} within 0.3 s; it is held by pid "
                   f"{holder.pid}. Completions recorded before this are intact.")
        started = time.monotonic()
        with pytest.raises(LockTimeoutError, match=exact(message)):
            shared.lock.acquire()
        assert 0.3 <= time.monotonic() - started < 5.0
    finally:
        holder.kill()
        holder.join(timeout=30)
    shared.lock.acquire()  # the dead holder's lock is gone
    shared.lock.release()


@pytest.mark.multiprocessing
@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_a_holder_killed_with_sigkill_releases_the_lock_and_keeps_its_writes(
    shared: SharedMemoryBackend, start_method: str
) -> None:
    holder = _start_holder(shared, start_method, write=0.75)
    holder.kill()  # SIGKILL: no cleanup runs in the child
    holder.join(timeout=30)
    assert holder.exitcode == -9
    with shared.lock:  # would raise LockTimeoutError after 0.3 s if the dead child still held it
        shared["values"][1] = 1
    assert shared["scores"].tolist() == [0.75, 0.75, 0.75]
    assert shared["values"].tolist() == [holder.pid, 1, 0, 0]


# ---- clean exit of a whole program -----------------------------------------------------------
PROGRAM = textwrap.dedent("""
    import multiprocessing, sys
    from curriculum import Curriculum, SharedMemoryBackend
    from helpers import hammer, lp_config

    if __name__ == "__main__":
        backend = SharedMemoryBackend({"values": ("int64", 4)})
        forgotten = SharedMemoryBackend({"values": ("int64", 4)})  # never closed: unlinked at exit
        curriculum = Curriculum(lp_config(), shared_memory=True)
        for method in ("spawn", "fork"):
            context = multiprocessing.get_context(method)
            queue = context.Queue()
            worker = context.Process(target=hammer, args=(curriculum, 200, 1, 2, queue))
            worker.start()
            queue.get(timeout=60)
            worker.join(timeout=60)
            assert worker.exitcode == 0, worker.exitcode
        print(backend.name, forgotten.name, curriculum.shared_memory_name, curriculum.tracker.backend.lock.path)
        assert curriculum.stats()["total_completions"] + curriculum.stats()["late_completions"] == 400
        backend.close()
        curriculum.close()
""")


@pytest.mark.multiprocessing
def test_a_program_using_shared_memory_exits_cleanly_and_leaves_nothing_behind() -> None:
    """No resource_tracker "leaked shared_memory" warning and nothing left in /dev/shm, with
    workers attached by pickling (spawn) and by inheritance (fork)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120, env=env,
                            cwd=HERE)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    *names, lock_path = result.stdout.split()
    assert len(names) == 3
    for name in names:
        assert not _shm_path(name).exists(), name
    assert not Path(lock_path).exists()


ATTACHER = textwrap.dedent("""
    import sys
    from curriculum import Curriculum
    from helpers import lp_config

    curriculum = Curriculum.attach(sys.argv[1], lp_config(), seed=7)
    for _ in range(100):
        curriculum.update_task_performance(curriculum.get_task().task_id, 0.5)
    curriculum.close()
""")


@pytest.mark.multiprocessing
def test_an_unrelated_process_attaching_by_name_neither_warns_nor_unlinks() -> None:
    """Only the creator may unlink: a process that merely attached must not register the block
    with its own resource tracker (which would warn of a leak and unlink it at exit)."""
    curriculum = Curriculum(lp_config(), shared_memory=True)
    name = curriculum.shared_memory_name
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", ATTACHER, name], capture_output=True, text=True, timeout=60,
                            env=env, cwd=HERE)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert _shm_path(name).exists()
    stats = curriculum.stats()
    assert stats["total_completions"] + stats["late_completions"] == 100
    curriculum.close()
    assert not _shm_path(name).exists()


def test_arrays_are_aligned_8_byte_words(shared: SharedMemoryBackend) -> None:
    """Lock-free readers rely on every value being one aligned 8-byte store."""
    for array in shared.arrays.values():
        assert array.dtype.itemsize == 8
        assert array.ctypes.data % 8 == 0
