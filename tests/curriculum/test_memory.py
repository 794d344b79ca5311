"""Memory backends: layout checks, shared arrays across processes, the cross-process lock.

The lock is an flock on the shared block itself: a live holder makes others time out with a
clear error, a killed holder releases it (the kernel drops it) and the next holder rolls back
what it wrote inside the lock. Only blocks of this user, never through a symlink, are used;
blocks whose creator and users are all gone are removed by the next creator.
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
from helpers import attach_and_write, exact, hold_lock, lp_config, relay_lock

from curriculum import (
    Curriculum,
    CurriculumConfigError,
    LocalMemoryBackend,
    LockTimeoutError,
    SharedMemoryBackend,
    SharedTrackerError,
)
from curriculum.memory import SEGMENT_DIR, SEGMENT_PREFIX, TRACKER_FORMAT, remove_orphaned_segments

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


BAD_TIMEOUTS = [0, -1.0, float("nan"), float("inf"), 10**400, "5", True, None, b"5", [5]]


def _blocks_of_this_process() -> list[str]:
    """Names of the tracker blocks in /dev/shm whose header names this process as creator."""
    names = []
    for name in os.listdir(SEGMENT_DIR):
        if name.startswith(SEGMENT_PREFIX) and not name.endswith(".lock"):
            try:
                head = (Path(SEGMENT_DIR) / name).read_bytes()[:4096]
            except OSError:
                continue
            if head[:8] == b"CURRTRK2" and f'"pid": {os.getpid()},'.encode() in head:
                names.append(name)
    return names


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=[repr(t)[:12] for t in BAD_TIMEOUTS])
def test_lock_timeout_must_be_a_finite_positive_number(timeout) -> None:
    message = f"Expected `lock_timeout` to be a finite number of seconds > 0, received {timeout!r}"
    before = _blocks_of_this_process()
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        SharedMemoryBackend(LAYOUT, lock_timeout=timeout)
    if timeout is not None:  # None is the curriculum's "use the default"
        for shared in (True, False):
            with pytest.raises(CurriculumConfigError, match=exact(message)):
                Curriculum(lp_config(), shared_memory=shared, lock_timeout=timeout)
    assert _blocks_of_this_process() == before  # refused before anything was created


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


def test_attach_to_a_missing_block_is_a_shared_tracker_error() -> None:
    name = "curriculum_no_such_block_0"
    message = f"Expected a shared tracker named {name!r} to exist, but no such shared memory block was found"
    with pytest.raises(SharedTrackerError, match=exact(message)):
        SharedMemoryBackend.attach(name)


def test_the_lock_is_the_block_itself_and_close_unlinks_it() -> None:
    """No lock file beside the block: nothing another user could plant or redirect."""
    backend = SharedMemoryBackend(LAYOUT)
    name = backend.name
    assert backend.lock.path == str(_shm_path(name))
    with backend.lock:
        assert not Path(f"{_shm_path(name)}.lock").exists()
    assert _shm_path(name).stat().st_mode & 0o777 == 0o600
    backend.close()
    assert not _shm_path(name).exists()
    backend.close()  # idempotent


@pytest.mark.parametrize("name", ["a/b", "", ".", "..", 5, None, "x" * 256, "\u00e9t\u00e9", "run:1", "run 1", "run\n1"],
                         ids=["slash", "empty", "dot", "dotdot", "int", "none", "too_long", "not_ascii", "colon",
                              "space", "newline"])
def test_a_block_name_must_be_a_plain_file_name(name) -> None:
    message = ("Expected a shared tracker name to be a file name of at most 255 printable ASCII characters without "
               f"'/', ':' or spaces, received {name!r}")
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        SharedMemoryBackend.attach(name)
    if name is not None:
        with pytest.raises(CurriculumConfigError, match=exact(message)):
            SharedMemoryBackend(LAYOUT, name=name)


def test_a_header_past_its_limit_is_refused_at_creation() -> None:
    with pytest.raises(CurriculumConfigError, match="^Expected a shared tracker header .* of at most 16777216 bytes, "
                                                    "received 1677[0-9]{4} bytes$"):
        SharedMemoryBackend(LAYOUT, meta={"pad": "x" * (1 << 24)})


def test_creating_a_block_under_a_name_that_exists_is_refused(shared: SharedMemoryBackend) -> None:
    message = f"Expected no shared memory block named {shared.name!r}, but {str(_shm_path(shared.name))!r} already exists"
    with pytest.raises(SharedTrackerError, match=exact(message)):
        SharedMemoryBackend(LAYOUT, name=shared.name)
    assert shared["values"].tolist() == [0, 0, 0, 0]


def _foreign_block(tmp_name: str, content: bytes, *, mode: int = 0o600) -> Path:
    path = _shm_path(tmp_name)
    path.write_bytes(content)
    path.chmod(mode)
    return path


NOT_TRACKERS = [
    ("empty", b"", "no tracker header"),
    ("zeros", bytes(4096), "no tracker header"),
    ("random", bytes(range(256)) * 16, "no tracker header"),
    ("bad_length", b"CURRTRK2" + (10**9).to_bytes(8, "little") + bytes(64), "header length 1000000000"),
    ("not_utf8", b"CURRTRK2" + (4).to_bytes(8, "little") + b"\xff\xfe\xfd\xfc" + bytes(64), "the header is not JSON"),
    ("not_json", b"CURRTRK2" + (5).to_bytes(8, "little") + b"{oops" + bytes(64), "the header is not JSON"),
    ("other_format", b"CURRTRK2" + (21).to_bytes(8, "little") + b'{"format": "other/1"}' + bytes(64),
     "format 'other/1'"),
    ("no_layout", b"CURRTRK2" + (36).to_bytes(8, "little") + b'{"format": "curriculum-tracker/2"}  ' + bytes(64),
     "its header lacks a valid layout"),
]


@pytest.mark.parametrize(("kind", "content", "why"), NOT_TRACKERS, ids=[k for k, _, _ in NOT_TRACKERS])
def test_attaching_to_a_block_that_is_not_a_tracker_is_a_named_error(kind: str, content: bytes, why: str) -> None:
    """Named error, nothing left mapped, and no error ignored in a destructor (the unraisable
    warning is an error in this suite)."""
    name = f"{SEGMENT_PREFIX}not_a_tracker_{kind}_{os.getpid()}"
    path = _foreign_block(name, content)
    try:
        message = (f"Expected {str(path)!r} to be a curriculum shared tracker (format {TRACKER_FORMAT!r}), received a "
                   f"shared memory block of {len(content)} bytes that is not one ({why})")
        with pytest.raises(SharedTrackerError, match=exact(message)):
            SharedMemoryBackend.attach(name)
        with pytest.raises(SharedTrackerError, match=exact(message)):
            Curriculum.attach(name, lp_config())
        assert path.read_bytes() == content  # untouched
    finally:
        path.unlink()


def test_a_tracker_that_is_smaller_than_its_layout_is_refused(shared: SharedMemoryBackend) -> None:
    name = f"{SEGMENT_PREFIX}truncated_{os.getpid()}"
    content = _shm_path(shared.name).read_bytes()[:256]
    path = _foreign_block(name, content)
    try:
        with pytest.raises(SharedTrackerError, match=r"\(the block is smaller than its layout\)$"):
            SharedMemoryBackend.attach(name)
    finally:
        path.unlink()


def test_a_symlink_is_never_followed(shared: SharedMemoryBackend) -> None:
    link = _shm_path(f"{SEGMENT_PREFIX}link_{os.getpid()}")
    link.symlink_to(_shm_path(shared.name))
    try:
        message = f"Expected {str(link)!r} to be a shared memory block, received a symbolic link: refusing to follow it"
        with pytest.raises(SharedTrackerError, match=exact(message)):
            SharedMemoryBackend.attach(link.name)
    finally:
        link.unlink()


def test_a_block_others_may_write_is_refused(shared: SharedMemoryBackend) -> None:
    name = f"{SEGMENT_PREFIX}group_writable_{os.getpid()}"
    path = _foreign_block(name, _shm_path(shared.name).read_bytes(), mode=0o620)
    try:
        message = (f"Expected the shared memory block {str(path)!r} to be writable only by its owner, received mode "
                   "0620: refusing to use it")
        with pytest.raises(SharedTrackerError, match=exact(message)):
            SharedMemoryBackend.attach(name)
    finally:
        path.unlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a block to another user (chown)")
def test_a_block_of_another_user_is_refused(shared: SharedMemoryBackend) -> None:
    name = f"{SEGMENT_PREFIX}foreign_{os.getpid()}"
    path = _foreign_block(name, _shm_path(shared.name).read_bytes())
    os.chown(path, 65534, 65534)
    try:
        message = (f"Expected the shared memory block {str(path)!r} to belong to uid 0 (this process), received one "
                   "owned by uid 65534: refusing to use it")
        with pytest.raises(SharedTrackerError, match=exact(message)):
            SharedMemoryBackend.attach(name)
        assert str(path) not in remove_orphaned_segments()
        assert path.exists()
    finally:
        path.unlink()


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
def test_a_waiter_outrun_by_committing_writers_waits_on_past_the_timeout(shared: SharedMemoryBackend) -> None:
    """The timeout is for a stuck holder: a writer that keeps taking the lock back the moment
    it releases it (an flock is not fair) commits all along, and a waiter that loses the race
    for three timeouts gets the lock when it stops, instead of a `LockTimeoutError`."""
    context = multiprocessing.get_context("fork")
    started = context.Event()
    relay = context.Process(target=relay_lock, args=(shared.name, started), kwargs={"seconds": 1.0, "hold": 0.01},
                            daemon=True)
    relay.start()
    try:
        assert started.wait(timeout=30), "the child never took the lock"
        began = time.monotonic()
        shared.lock.acquire()  # LockTimeoutError after 0.3 s if the deadline ignored the commits
        waited = time.monotonic() - began
        shared.lock.release()
    finally:
        relay.join(timeout=30)
    assert relay.exitcode == 0
    assert waited < 5.0


@pytest.mark.multiprocessing
@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_a_holder_killed_with_sigkill_releases_the_lock_and_its_unfinished_writes_are_rolled_back(
    shared: SharedMemoryBackend, start_method: str
) -> None:
    """What a holder wrote inside the lock and never committed is undone by the next holder."""
    with shared.lock:
        shared["scores"][:] = [0.25, 0.5, 0.75]
    holder = _start_holder(shared, start_method, write=0.75)
    assert shared["scores"].tolist() == [0.75, 0.75, 0.75]  # written, not committed
    holder.kill()  # SIGKILL: no cleanup runs in the child
    holder.join(timeout=30)
    assert holder.exitcode == -9
    repairs = shared.repairs
    with shared.lock:  # would raise LockTimeoutError after 0.3 s if the dead child still held it
        shared["values"][1] = 1
    assert shared.repairs == repairs + 1
    assert shared["scores"].tolist() == [0.25, 0.5, 0.75]
    assert shared["values"].tolist() == [0, 1, 0, 0]


def _hold_with_a_forked_child(name: str, held) -> None:
    """Attach, fork a child that only sleeps, then take the lock and wait to be killed."""
    backend = SharedMemoryBackend.attach(name)
    with backend.lock:
        pass  # the lock's file is open in this process before the fork
    sleeper = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
    sleeper.start()
    backend.lock.acquire()
    held.put(sleeper.pid)
    time.sleep(60)


@pytest.mark.multiprocessing
def test_a_killed_holder_does_not_keep_the_lock_through_a_forked_child(shared: SharedMemoryBackend) -> None:
    """An flock lives as long as any copy of its file description: a child forked by the holder
    must not keep the holder's copy, or the lock outlives a killed holder."""
    context = multiprocessing.get_context("fork")
    held = context.Queue()
    holder = context.Process(target=_hold_with_a_forked_child, args=(shared.name, held))
    holder.start()
    sleeper = held.get(timeout=30)
    try:
        holder.kill()
        deadline = time.monotonic() + 30
        while holder.exitcode is None:  # not join(): the sleeper holds the holder's exit sentinel open
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with shared.lock:  # LockTimeoutError after 0.3 s if the sleeping child kept the lock
            shared["values"][0] = 5
    finally:
        os.kill(sleeper, 9)
    assert shared["values"][0] == 5


# ---- orphans -----------------------------------------------------------------------------------
CREATOR = textwrap.dedent("""
    import sys, time
    from curriculum import SharedMemoryBackend

    backend = SharedMemoryBackend({"values": ("int64", 4)})
    print(backend.name, flush=True)
    time.sleep(60)
""")


def _leak_a_block(*, keep_using: bool = False) -> tuple[str, SharedMemoryBackend | None]:
    """A block whose creator died with its whole process group (its resource tracker too);
    with `keep_using`, this process attached to it before the creator died.

    Other tests creating trackers in parallel may remove the orphan at any moment after."""
    creator = subprocess.Popen([sys.executable, "-c", CREATOR], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    name = creator.stdout.readline().strip()
    user = SharedMemoryBackend.attach(name) if keep_using else None
    os.killpg(creator.pid, 9)
    creator.wait(timeout=30)
    creator.stdout.close()
    deadline = time.monotonic() + 30
    while True:  # the session is gone once its resource tracker is
        try:
            os.killpg(creator.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return name, user


@pytest.mark.multiprocessing
def test_an_orphaned_block_is_removed_and_a_used_one_is_kept() -> None:
    """Creators running in parallel (other tests) may remove an orphan first: the test checks
    what is gone and what is kept, and that nothing kept is ever listed."""
    still_used, user = _leak_a_block(keep_using=True)  # its creator is gone, but this process uses it
    live = SharedMemoryBackend(LAYOUT)  # its creator (this process) runs
    orphan, _ = _leak_a_block()
    not_ours = _foreign_block(f"{SEGMENT_PREFIX}not_a_tracker_{os.getpid()}", bytes(64))
    stale_lock = _foreign_block(f"{SEGMENT_PREFIX}gone_{os.getpid()}.lock", b"")
    live_lock = _foreign_block(f"{live.name}.lock", b"")
    kept = {str(_shm_path(still_used)), str(_shm_path(live.name)), str(not_ours), str(live_lock)}
    try:
        listed = remove_orphaned_segments(dry_run=True)
        assert not kept & set(listed)
        assert all(p.startswith(f"{SEGMENT_DIR}/{SEGMENT_PREFIX}") for p in listed)
        removed = remove_orphaned_segments()
        assert not kept & set(removed)
        assert not _shm_path(orphan).exists() and not stale_lock.exists()
        assert all(Path(p).exists() for p in kept)
        user.close()
        remove_orphaned_segments()
        assert not _shm_path(still_used).exists()  # its last user is gone
    finally:
        user.close()
        live.close()
        not_ours.unlink()
        live_lock.unlink()


@pytest.mark.multiprocessing
def test_the_next_creator_removes_orphans() -> None:
    orphan, _ = _leak_a_block()
    with Curriculum(lp_config(), shared_memory=True):
        assert not _shm_path(orphan).exists()


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


SHUTDOWN_PROGRAM = textwrap.dedent("""
    import os, sys
    from curriculum import Curriculum, SharedMemoryBackend, SharedTrackerError
    from helpers import lp_config

    kept = Curriculum(lp_config(), shared_memory=True)  # never closed: released at exit
    attached = SharedMemoryBackend.attach(kept.shared_memory_name)  # never closed either
    path = f"/dev/shm/curriculum_not_a_tracker_{os.getpid()}"
    with open(path, "wb") as block:
        block.write(bytes(64))
    os.chmod(path, 0o600)
    try:
        SharedMemoryBackend.attach(os.path.basename(path))
    except SharedTrackerError as exc:
        print(type(exc).__name__, kept.shared_memory_name, flush=True)
    os.unlink(path)
""")


@pytest.mark.multiprocessing
def test_a_program_exiting_with_open_or_refused_blocks_prints_nothing_and_leaves_nothing() -> None:
    """Finalizers run before interpreter shutdown: no error ignored in a destructor, no block left."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", SHUTDOWN_PROGRAM], capture_output=True, text=True, timeout=120,
                            env=env, cwd=HERE)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    error, name = result.stdout.split()
    assert error == "SharedTrackerError"
    assert not _shm_path(name).exists()


def test_abort_undoes_a_section_and_release_keeps_one() -> None:
    """`abort()` is how a locked section that failed half-way leaves nothing behind."""
    backend = SharedMemoryBackend({"rows": ("float64", 3), "totals": ("int64", 2)}, slot_arrays=("rows",))
    try:
        with backend.lock:
            backend.touch(1)
            backend["rows"][1] = 0.5
            backend["totals"][0] = 7
        backend.lock.acquire()
        backend.touch(1)
        backend["rows"][1] = 9.0
        backend.touch(2)
        backend["rows"][2] = 9.0
        backend["totals"][:] = [9, 9]
        backend.lock.abort()
        assert backend["rows"].tolist() == [0.0, 0.5, 0.0] and backend["totals"].tolist() == [7, 0]
        assert backend.repairs == 0  # an abort is not a repair of a dead holder's section
        with backend.lock:
            backend["totals"][1] = 1
        assert backend.snapshot()["totals"].tolist() == [7, 1]
    finally:
        backend.close()


def test_a_with_section_left_by_an_exception_is_aborted_and_frees_the_lock() -> None:
    backend = SharedMemoryBackend({"rows": ("float64", 3), "totals": ("int64", 2)}, slot_arrays=("rows",),
                                  lock_timeout=0.3)
    other = SharedMemoryBackend.attach(backend.name)
    try:
        with pytest.raises(KeyboardInterrupt):
            with backend.lock:
                backend.touch(0)
                backend["rows"][0] = 0.5
                backend["totals"][0] = 3
                raise KeyboardInterrupt
        assert backend["rows"].tolist() == [0.0, 0.0, 0.0] and backend["totals"].tolist() == [0, 0]
        with other.lock:  # free at once (a held one would raise LockTimeoutError)
            other["totals"][1] = 1
        assert backend.snapshot()["totals"].tolist() == [0, 1]
    finally:
        other.close()
        backend.close()


def test_taking_the_lock_again_or_releasing_it_twice_does_nothing_as_with_an_flock(shared: SharedMemoryBackend) -> None:
    shared.lock.acquire()
    shared.lock.acquire()
    shared["values"][0] = 3
    shared.lock.release()  # the section ends here
    assert not shared.lock.in_transaction
    shared.lock.release()
    with shared.lock:
        assert shared["values"][0] == 3
    assert shared.repairs == 0
