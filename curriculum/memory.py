"""Where the task tracker keeps its numbers: one process, or shared across processes.

A backend is a set of named numpy arrays with a fixed layout plus a lock. The lock is taken
only around read-modify-write sections; reads are lock-free. Every value is an aligned 8-byte
word written in one store, so a lock-free reader sees an old or a new value, never a torn word.

The shared backend is one file in /dev/shm, created exclusively (mode 0600) by its owner:

- The cross-process lock is an `flock` on that file itself (each process opens its own file
  description), so there is no separate lock file to plant or redirect, another user cannot
  open it, and the kernel drops the lock when its holder dies.
- Every locked section is a transaction with an undo journal in the same block: the lock
  holder saves the pre-image of the global arrays when it takes the lock (of the "cold" ones,
  large and rarely written, only before its first write to them: `touch_globals()`) and the
  pre-image of each slot row before its first write to it. A holder killed at any instruction leaves the
  journal open, and the next holder rolls the block back to the state before that section.
- Transactions are numbered (odd while open) and each slot row carries the number of the
  last transaction that wrote it (a seqlock), so a lock-free reader of several values of one
  slot gets them from one state, and `snapshot()` copies the whole block as of one moment
  between transactions; neither waits for a stuck or dead holder (the journal holds the state
  before its open transaction).
- The header names the creating process (pid and start time) and every process using the
  block holds a shared open-file-description lock on it, so `remove_orphaned_segments()` can
  tell a block whose users are all gone from one in use.

The lock-free protocols rely on the stores of one process becoming visible to the others in
program order, as on x86-64 (total store order).
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import mmap
import os
import secrets
import stat
import struct
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from multiprocessing import resource_tracker
from numbers import Real
from typing import Any

import numpy as np

from curriculum.errors import CurriculumClosedError, CurriculumConfigError, LockTimeoutError, SharedTrackerError

__all__ = [
    "Layout",
    "TaskMemoryBackend",
    "LocalMemoryBackend",
    "SharedMemoryBackend",
    "DEFAULT_LOCK_TIMEOUT",
    "SEGMENT_DIR",
    "SEGMENT_PREFIX",
    "TRACKER_FORMAT",
    "check_lock_timeout",
    "remove_orphaned_segments",
]

#: name -> (dtype string, length). Every dtype is 8 bytes wide ("int64" or "float64").
Layout = Mapping[str, tuple[str, int]]

DEFAULT_LOCK_TIMEOUT = 5.0
SEGMENT_DIR = "/dev/shm"
"""Where POSIX shared memory lives on Linux; the shared backend needs it."""
SEGMENT_PREFIX = "curriculum_"
"""Name prefix of the blocks this library creates (and the only ones it ever cleans up)."""
TRACKER_FORMAT = "curriculum-tracker/2"
"""Format of a shared block's header; attach refuses any other."""

_MAGIC = b"CURRTRK2"
_HEADER_AT = 16  # magic (8 bytes), header length (8 bytes), then the JSON header
_MAX_HEADER_BYTES = 1 << 24
_ALIGN = 64
_LOCK_YIELDS = 64
"""Tries that only yield the CPU before a contended lock starts sleeping between tries."""
_ALLOWED_DTYPES = ("int64", "float64")
_CREATE_TRIES = 16
_READ_TRIES = 1000
"""Lock-free attempts of a consistent read before it takes the lock (only under writes that
change the same data again and again faster than one read)."""
_SNAPSHOT_TRIES = 3

# Control words at the start of a shared block's data.
_SEQ = 0  # transaction number (word 0 is part of `control_words()`'s contract): odd while the lock holder's transaction is open, even between
_HOLDER = 1  # pid of the lock holder (0 when free), for error messages
_JOURNAL = 2  # slot rows journaled in the open transaction, or _ALL_ROWS
_REPAIRS = 3  # transactions of dead lock holders rolled back by the next holder
_COLD = 4  # 1 once the cold global arrays were journaled in the open transaction
_JOURNAL_ROWS = 8  # slot numbers of the journaled rows start here...
_MAX_JOURNAL_ROWS = 8  # ...and past this many rows the whole rows block is journaled at once
_CONTROL_WORDS = _JOURNAL_ROWS + _MAX_JOURNAL_ROWS
_ALL_ROWS = -1

_FLOCK = struct.Struct("hhqqi4x")  # struct flock on Linux (l_type, l_whence, l_start, l_len, l_pid)
_PID = os.getpid()


def check_lock_timeout(value: Any) -> float:
    """`value` as a lock timeout in seconds, or `CurriculumConfigError` saying what it is."""
    try:
        seconds = float(value) if isinstance(value, Real) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an int too large for a float
        seconds = math.inf
    if not (math.isfinite(seconds) and seconds > 0):
        raise CurriculumConfigError(f"Expected `lock_timeout` to be a finite number of seconds > 0, received {value!r}")
    return seconds


def _check_layout(layout: Layout) -> dict[str, tuple[str, int]]:
    checked: dict[str, tuple[str, int]] = {}
    for name, spec in layout.items():
        if not (isinstance(name, str) and name):
            raise CurriculumConfigError(f"Expected layout names to be non-empty strings, received {name!r}")
        if not (isinstance(spec, tuple) and len(spec) == 2):
            raise CurriculumConfigError(f"Expected layout entry {name!r} to be (dtype, length), received {spec!r}")
        dtype, length = spec
        if dtype not in _ALLOWED_DTYPES:
            raise CurriculumConfigError(
                f"Expected layout entry {name!r} to have dtype in {_ALLOWED_DTYPES}, received {dtype!r}"
            )
        if not (isinstance(length, int) and not isinstance(length, bool) and length >= 1):
            raise CurriculumConfigError(f"Expected layout entry {name!r} to have length >= 1, received {length!r}")
        checked[name] = (dtype, length)
    return checked


class _NullLock:
    """The lock of a single-process backend: nothing to exclude."""

    __slots__ = ()

    def acquire(self) -> None:
        pass

    def release(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def touch(self, slot: int) -> None:
        pass

    def touch_globals(self) -> None:
        pass

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        pass


class TaskMemoryBackend(ABC):
    """Named fixed-size arrays plus a lock for read-modify-write sections."""

    arrays: dict[str, np.ndarray]
    layout: dict[str, tuple[str, int]]

    @property
    @abstractmethod
    def lock(self) -> Any:
        """An object with `acquire()`, `release()`, `abort()`, `touch(slot)`, `touch_globals()`
        and context-manager use (a section left by an exception is aborted, not committed)."""

    @property
    def is_shared(self) -> bool:
        """Whether other processes see the same arrays."""
        return False

    @abstractmethod
    def close(self) -> None:
        """Release the memory (a shared creator also unlinks it)."""

    def snapshot(self) -> dict[str, np.ndarray]:
        """Copies of every array as of one moment."""
        return {name: array.copy() for name, array in self.arrays.items()}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]


class LocalMemoryBackend(TaskMemoryBackend):
    """Plain numpy arrays for one process."""

    def __init__(self, layout: Layout) -> None:
        self.layout = _check_layout(layout)
        self.arrays = {name: np.zeros(length, dtype=dtype) for name, (dtype, length) in self.layout.items()}
        self._lock = _NullLock()

    @property
    def lock(self) -> _NullLock:
        return self._lock

    def close(self) -> None:
        pass


# ---- the shared block ----------------------------------------------------------------------------
class _Plan:
    """Byte offsets of everything in a shared block, computed from its layout alone."""

    def __init__(self, layout: dict[str, tuple[str, int]], slot_arrays: tuple[str, ...], header_bytes: int,
                 cold_arrays: tuple[str, ...] = ()) -> None:
        self.slot_arrays = slot_arrays
        # hot global arrays first, then the cold ones (journaled only when written)
        hot = [name for name in layout if name not in slot_arrays and name not in cold_arrays]
        self.global_arrays = (*hot, *(name for name in layout if name in cold_arrays and name not in slot_arrays))
        self.slots = layout[slot_arrays[0]][1] if slot_arrays else 0
        self.row_words = 1 + len(slot_arrays)  # the row's version, then one word per slot array
        self.column = {name: 1 + i for i, name in enumerate(slot_arrays)}
        offset = _align(_HEADER_AT + header_bytes)
        self.control_at = offset
        offset = _align(offset + _CONTROL_WORDS * 8)
        self.global_at: dict[str, int] = {}
        self.globals_at = offset
        for i, name in enumerate(self.global_arrays):
            if i == len(hot):
                self.hot_bytes = offset - self.globals_at
            self.global_at[name] = offset
            offset += layout[name][1] * 8
        self.globals_bytes = offset - self.globals_at
        if len(self.global_arrays) == len(hot):
            self.hot_bytes = self.globals_bytes
        self.globals_shadow_at = _align(offset)
        self.rows_at = _align(self.globals_shadow_at + self.globals_bytes)
        self.rows_bytes = self.slots * self.row_words * 8
        self.rows_shadow_at = _align(self.rows_at + self.rows_bytes)
        self.size = _align(self.rows_shadow_at + self.rows_bytes)


def _align(offset: int) -> int:
    return offset + (-offset % _ALIGN)


def _segment_path(name: str) -> str:
    return os.path.join(SEGMENT_DIR, name)


def _check_name(name: Any) -> str:
    """A block name is a file name of /dev/shm (at most 255 bytes, not "." or "..") that
    multiprocessing's resource tracker can carry (printable ASCII, no ':' or whitespace: its
    messages are ASCII lines of ':'-separated fields, and a name it cannot carry is never unlinked
    for a creator that dies)."""
    if not (isinstance(name, str) and name and name.isascii() and name.isprintable() and len(name) <= 255
            and not any(c in name for c in "/: ") and name not in (".", "..")):
        raise CurriculumConfigError(
            "Expected a shared tracker name to be a file name of at most 255 printable ASCII characters without "
            f"'/', ':' or spaces, received {name!r}")
    return name


def _process_start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            fields = stat_file.read()
    except OSError:
        return None
    return int(fields[fields.rindex(b")") + 2:].split()[19])


def _ofd_lock(fd: int, lock_type: int) -> bool:
    """Take an open-file-description lock on byte 0 of `fd` (independent of the flock, and like
    it dropped by the kernel with the last descriptor); False if another holds a conflicting one."""
    request = _FLOCK.pack(lock_type, os.SEEK_SET, 0, 1, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, request)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _check_own_file(fd: int, path: str) -> os.stat_result:
    """Refuse anything but a regular file of this user that no one else may write."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise SharedTrackerError(f"Expected {path!r} to be a shared memory block (a regular file), "
                                 f"received file type {stat.filemode(info.st_mode)[0]!r}")
    if info.st_uid != os.geteuid():
        raise SharedTrackerError(f"Expected the shared memory block {path!r} to belong to uid {os.geteuid()} "
                                 f"(this process), received one owned by uid {info.st_uid}: refusing to use it")
    if info.st_mode & 0o022:
        raise SharedTrackerError(f"Expected the shared memory block {path!r} to be writable only by its owner, "
                                 f"received mode {stat.S_IMODE(info.st_mode):04o}: refusing to use it")
    return info


def _open_existing(name: str) -> tuple[int, os.stat_result]:
    """Open a block by name without following a symlink; refuse one another user could control."""
    path = _segment_path(name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise SharedTrackerError(
            f"Expected a shared tracker named {name!r} to exist, but no such shared memory block was found"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SharedTrackerError(f"Expected {path!r} to be a shared memory block, received a symbolic link: "
                                     "refusing to follow it") from None
        raise SharedTrackerError(f"Could not open the shared memory block {path!r}: {exc.strerror}") from None
    try:
        return fd, _check_own_file(fd, path)
    except BaseException:
        os.close(fd)
        raise


def _read_header(fd: int, path: str, size: int) -> tuple[dict[str, Any], int]:
    """The JSON header of a tracker block and its length, or `SharedTrackerError` if it is not one."""
    def not_a_tracker(why: str) -> SharedTrackerError:
        return SharedTrackerError(f"Expected {path!r} to be a curriculum shared tracker (format {TRACKER_FORMAT!r}), "
                                  f"received a shared memory block of {size} bytes that is not one ({why})")

    prefix = os.pread(fd, _HEADER_AT, 0)
    if len(prefix) < _HEADER_AT or prefix[:8] != _MAGIC:
        raise not_a_tracker("no tracker header")
    length = int.from_bytes(prefix[8:], "little")
    if not 0 < length <= min(_MAX_HEADER_BYTES, size - _HEADER_AT):
        raise not_a_tracker(f"header length {length}")
    try:
        header = json.loads(os.pread(fd, length, _HEADER_AT).decode())
    except (UnicodeDecodeError, ValueError):
        raise not_a_tracker("the header is not JSON") from None
    if not (isinstance(header, dict) and header.get("format") == TRACKER_FORMAT):
        raise not_a_tracker(f"format {header.get('format') if isinstance(header, dict) else None!r}")
    try:
        layout = _check_layout({k: tuple(v) for k, v in header["layout"].items()})
        slot_arrays = tuple(header["slot_arrays"])
        cold_arrays = tuple(header.get("cold_arrays", ()))
        if not all(name in layout for name in slot_arrays) or len({layout[n][1] for n in slot_arrays}) > 1:
            raise ValueError(slot_arrays)
        if not all(name in layout and name not in slot_arrays for name in cold_arrays):
            raise ValueError(cold_arrays)
        check_lock_timeout(header["lock_timeout"])
        if not isinstance(header["meta"], dict) or not isinstance(header["creator"], dict):
            raise ValueError(header)
    except (KeyError, TypeError, ValueError, AttributeError, CurriculumConfigError):
        raise not_a_tracker("its header lacks a valid layout") from None
    if _Plan(layout, slot_arrays, length, cold_arrays).size > size:
        raise not_a_tracker("the block is smaller than its layout")
    header["layout"], header["slot_arrays"], header["cold_arrays"] = layout, slot_arrays, cold_arrays
    return header, length


class _Segment:
    """The open file and mapping of one block in this process; released exactly once."""

    def __init__(self, name: str, fd: int, size: int, *, owner: bool) -> None:
        self.name = name
        self.path = _segment_path(name)
        self.fd = fd
        self.map = mmap.mmap(fd, size)
        self.owner_pid = _PID if owner else -1

    def release(self) -> None:
        """Unmap (when no view is left), close, and unlink if this process created the block."""
        if self.owner_pid == os.getpid():
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            resource_tracker.unregister("/" + self.name, "shared_memory")
        try:
            self.map.close()
        except BufferError:  # a caller still holds a view; the mapping goes when it does
            pass
        self.map = None
        os.close(self.fd)


class _SegmentLock:
    """The block's cross-process lock: an `flock` on the block's own file, with a timeout.

    Taking it opens a transaction (rolling back a dead holder's first); releasing it commits,
    and `abort()` (or leaving a `with` section by an exception) rolls it back and releases.
    Like an flock, taking it again while holding it, or releasing it while not holding it, does
    nothing. A live holder that never releases makes `acquire` raise `LockTimeoutError` after
    `timeout` seconds instead of hanging. The timeout counts from the last commit anyone made:
    an flock is not fair, and under contention (eight writers on two cores) a waiter can lose
    the race for longer than `timeout` while the others keep committing; that is progress, not
    a stuck holder.
    """

    def __init__(self, backend: SharedMemoryBackend, timeout: float) -> None:
        self._backend = backend
        self.path = backend._segment.path
        self.timeout = timeout
        self._fd = -1
        self._closed = False
        _LOCKS.add(self)

    @property
    def in_transaction(self) -> bool:
        """Whether this process holds the lock (its transaction is open)."""
        return self._backend._txn != 0

    def _open(self) -> int:
        # An flock belongs to an open file description: each process opens its own, and a
        # forked child drops the one it inherited (see `_after_fork`).
        if self._closed:  # the shared block is unmapped: touching it would segfault
            raise CurriculumClosedError(f"The shared tracker lock {self.path!r} was closed with its tracker")
        self._fd = os.open(f"/proc/self/fd/{self._backend._segment.fd}", os.O_RDWR | os.O_CLOEXEC)
        return self._fd

    def acquire(self) -> None:
        backend = self._backend
        if backend._txn:  # taken again by its holder: nothing to do (as with an flock)
            return
        fd = self._fd
        if fd < 0:
            fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._acquire_slow(fd)
        # open a transaction (inline: this runs once per recorded completion)
        control = backend._control
        control[_HOLDER] = _PID
        seq = control[_SEQ]
        if seq & 1:  # the previous holder died inside its transaction
            seq = backend._repair(seq)
        control[_JOURNAL] = 0
        control[_COLD] = 0
        backend._hot_shadow[:] = backend._hot
        seq += 1
        backend._txn = seq
        control[_SEQ] = seq

    def _acquire_slow(self, fd: int) -> None:
        # The critical section is ~1 us: first yield the CPU to the holder a few times (cheap
        # when it is about to release), then back off with sleeps so a stuck holder costs
        # little CPU until the timeout.
        deadline = time.monotonic() + self.timeout
        control = self._backend._control
        seen = control[_SEQ]
        pause = 2e-5
        yields = _LOCK_YIELDS
        while True:
            if yields:
                yields -= 1
                os.sched_yield()
            else:
                time.sleep(pause)
                pause = min(pause * 2, 1e-3)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            seq = control[_SEQ]
            if seq != seen:  # someone took or released the lock meanwhile: not stuck, wait on
                seen = seq
                deadline = time.monotonic() + self.timeout
            elif time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"Could not take the shared tracker lock {self.path!r} within {self.timeout} s; "
                    f"it is held by pid {self._backend.lock_holder}. Completions recorded before this are intact."
                )

    def release(self) -> None:
        backend = self._backend
        txn = backend._txn
        if not txn:  # not held (released twice): nothing to do (as with an flock)
            return
        backend._control[_SEQ] = txn + 1  # the commit point: one store
        backend._txn = 0
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def abort(self) -> None:
        """Undo everything written since `acquire`, then release the lock (for a section that
        failed half-way)."""
        backend = self._backend
        if not backend._txn:
            return
        backend._repair(backend._txn)
        backend._txn = 0
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def touch(self, slot: int) -> None:
        """Journal slot row `slot` before its first write in this transaction (no-op outside one)."""
        self._backend.touch(slot)

    def touch_globals(self) -> None:
        """Journal the cold global arrays before their first write in this transaction."""
        self._backend.touch_globals()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.release()
        else:  # the section failed half-way: undo its writes, so no reader ever sees them
            self.abort()

    def _after_fork(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # the parent's description: closing this copy keeps the parent's lock
        self._fd = -1
        self._backend._txn = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases the flock too: an open transaction is rolled back by the next holder
        self._fd = -1
        self._closed = True
        self._backend._txn = 0


_LOCKS: weakref.WeakSet[_SegmentLock] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    global _PID
    _PID = os.getpid()
    for lock in list(_LOCKS):
        lock._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class SharedMemoryBackend(TaskMemoryBackend):
    """Arrays in one shared memory block in /dev/shm, attachable by name.

    `slot_arrays` (all of one length, the number of slots) are laid out row by row, one row per
    slot, so one slot's values can be journaled and read together; the other arrays are global.
    `cold_arrays` are global arrays written rarely (a memory of many entries): a transaction
    journals them only when its holder calls `lock.touch_globals()` before writing them, so
    the common section does not copy them. `meta` is any JSON-able dict stored in the header (a curriculum keeps its config there).
    Creating one first removes the orphaned blocks of this user (`remove_orphaned_segments`).
    Only a process of the creating user attaches, never through a symlink. Pickling a backend
    sends only its name: the receiving process attaches.
    """

    def __init__(self, layout: Layout, *, name: str | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 slot_arrays: Collection[str] = (), cold_arrays: Collection[str] = (),
                 meta: Mapping[str, Any] | None = None) -> None:
        lock_timeout = check_lock_timeout(lock_timeout)
        checked = _check_layout(layout)
        slots = tuple(slot_arrays)
        unknown = [s for s in slots if s not in checked]
        if unknown or len({checked[s][1] for s in slots}) > 1:
            raise CurriculumConfigError(
                f"Expected `slot_arrays` to name layout arrays of one length, received {list(slots)!r}"
            )
        cold = tuple(cold_arrays)
        if any(c not in checked or c in slots for c in cold):
            raise CurriculumConfigError(
                f"Expected `cold_arrays` to name global arrays of the layout, received {list(cold)!r}"
            )
        if name is not None:
            _check_name(name)
        if not os.path.isdir(SEGMENT_DIR):
            raise SharedTrackerError(f"Expected POSIX shared memory at {SEGMENT_DIR!r} (Linux), but it does not exist")
        remove_orphaned_segments()
        creator = {"pid": _PID, "start_time": _process_start_time(_PID), "uid": os.geteuid()}
        header = json.dumps({"format": TRACKER_FORMAT, "layout": checked, "slot_arrays": slots,
                             "cold_arrays": cold, "lock_timeout": lock_timeout, "creator": creator,
                             "meta": dict(meta or {})}).encode()
        if len(header) > _MAX_HEADER_BYTES:  # (no other process could attach it)
            raise CurriculumConfigError(
                f"Expected a shared tracker header (its layout and `meta`, a curriculum's config description) of at "
                f"most {_MAX_HEADER_BYTES} bytes, received {len(header)} bytes"
            )
        plan = _Plan(checked, slots, len(header), cold)
        fd, name = self._create_file(name, plan.size)
        try:
            self._segment = _Segment(name, fd, plan.size, owner=True)
        except BaseException:
            os.unlink(_segment_path(name))
            os.close(fd)
            raise
        resource_tracker.register("/" + name, "shared_memory")  # unlinked for us if this process dies
        self._finalizer = weakref.finalize(self, self._segment.release)
        segment_map = self._segment.map
        segment_map[_HEADER_AT:_HEADER_AT + len(header)] = header
        segment_map[8:_HEADER_AT] = len(header).to_bytes(8, "little")
        self._setup(checked, slots, len(header), lock_timeout, dict(meta or {}), creator, cold)
        segment_map[:8] = _MAGIC  # last: a block is a tracker only once everything above is written

    @staticmethod
    def _create_file(name: str | None, size: int) -> tuple[int, str]:
        """Create the block's file exclusively (mode 0600), holding its "in use" lock before its
        header exists (a block without a header is never taken for an orphan)."""
        for _ in range(_CREATE_TRIES if name is None else 1):
            candidate = name or f"{SEGMENT_PREFIX}{secrets.token_hex(6)}"
            path = _segment_path(candidate)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                if name is not None:
                    raise SharedTrackerError(
                        f"Expected no shared memory block named {name!r}, but {path!r} already exists"
                    ) from None
                continue
            try:
                _ofd_lock(fd, fcntl.F_RDLCK)  # "in use" until every process using the block is gone
                os.posix_fallocate(fd, 0, size)  # no space shows up here, not as SIGBUS on first write
            except OSError as exc:
                os.unlink(path)
                os.close(fd)
                raise SharedTrackerError(f"Could not create a shared tracker of {size} bytes at {path!r}: "
                                         f"{exc.strerror}") from None
            return fd, candidate
        raise SharedTrackerError(f"Could not find a free shared memory name in {SEGMENT_DIR!r} after "
                                 f"{_CREATE_TRIES} tries")

    @classmethod
    def attach(cls, name: str) -> SharedMemoryBackend:
        """Attach to a block another process created (same user only; never through a symlink)."""
        _check_name(name)
        fd, info = _open_existing(name)
        try:
            header, header_bytes = _read_header(fd, _segment_path(name), info.st_size)
            if not _ofd_lock(fd, fcntl.F_RDLCK):
                raise SharedTrackerError(f"The shared tracker {name!r} is being removed as an orphan "
                                         "(its creator and every process using it are gone)")
            self = cls.__new__(cls)
            self._segment = _Segment(name, fd, info.st_size, owner=False)
        except BaseException:
            os.close(fd)
            raise
        self._finalizer = weakref.finalize(self, self._segment.release)
        self._setup(header["layout"], header["slot_arrays"], header_bytes, header["lock_timeout"], header["meta"],
                    header["creator"], header["cold_arrays"])
        return self

    def _setup(self, layout: dict[str, tuple[str, int]], slot_arrays: tuple[str, ...], header_bytes: int,
               lock_timeout: float, meta: dict[str, Any], creator: dict[str, Any],
               cold_arrays: tuple[str, ...] = ()) -> None:
        plan = _Plan(layout, slot_arrays, header_bytes, cold_arrays)
        self._plan = plan
        self.layout = layout
        self.slot_arrays = slot_arrays
        self.cold_arrays = cold_arrays
        self.meta = meta
        self.creator = creator
        self.name = self._segment.name
        buf = memoryview(self._segment.map)
        self._buf = buf
        self._control = buf[plan.control_at:plan.control_at + _CONTROL_WORDS * 8].cast("q")
        self._globals = buf[plan.globals_at:plan.globals_at + plan.globals_bytes]
        self._globals_shadow = buf[plan.globals_shadow_at:plan.globals_shadow_at + plan.globals_bytes]
        self._hot = self._globals[:plan.hot_bytes]
        self._hot_shadow = self._globals_shadow[:plan.hot_bytes]
        self._cold = self._globals[plan.hot_bytes:]
        self._cold_shadow = self._globals_shadow[plan.hot_bytes:]
        self._rows = buf[plan.rows_at:plan.rows_at + plan.rows_bytes]
        self._rows_shadow = buf[plan.rows_shadow_at:plan.rows_shadow_at + plan.rows_bytes]
        self._rows_q = self._rows.cast("q")
        self._rows_d = self._rows.cast("d")
        self._shadow_q = self._rows_shadow.cast("q")
        self._shadow_d = self._rows_shadow.cast("d")
        self._row_bytes = plan.row_words * 8
        # every array over the block rests on a memoryview (np.frombuffer), which exports the
        # mapping while the array or a view of it lives: a caller still holding one after close()
        # keeps the mapping (closing it fails, `_Segment.release`) instead of reading unmapped
        # memory. (An array built on the mmap itself, np.ndarray(buffer=), exports nothing: the
        # mapping went with close(), and a later read crashed the process.)
        mapping, words = self._segment.map, plan.slots * plan.row_words
        self._rows_2d = np.frombuffer(mapping, np.int64, words, plan.rows_at).reshape(plan.slots, plan.row_words)
        self._shadow_2d = np.frombuffer(mapping, np.int64, words, plan.rows_shadow_at).reshape(plan.slots,
                                                                                                plan.row_words)
        self._versions = self._rows_2d[:, 0]
        self.arrays = {}
        for array_name, (dtype, length) in layout.items():
            if array_name in plan.column:  # one word per slot: a column of the rows
                self.arrays[array_name] = np.frombuffer(mapping, np.int64, words, plan.rows_at).reshape(
                    plan.slots, plan.row_words)[:, plan.column[array_name]].view(dtype)
            else:
                self.arrays[array_name] = np.frombuffer(mapping, dtype, length, plan.global_at[array_name])
        self._row_words = plan.row_words
        self._txn = 0  # number of this process's open transaction (odd), 0 outside one
        self._lock = _SegmentLock(self, lock_timeout)

    # ---- identity ----------------------------------------------------------------------------
    @property
    def lock(self) -> _SegmentLock:
        return self._lock

    @property
    def is_shared(self) -> bool:
        return True

    @property
    def is_owner(self) -> bool:
        """Whether this process created the block (and unlinks it on close); a forked child is not."""
        return self._segment.owner_pid == os.getpid()

    @property
    def lock_holder(self) -> int:
        """Pid of the process holding the lock now (0 if none)."""
        return self._control[_HOLDER]

    @property
    def repairs(self) -> int:
        """Transactions of lock holders that died inside the lock, rolled back by the next holder."""
        return self._control[_REPAIRS]

    def column_of(self, name: str) -> int:
        """Word index of slot array `name` in a slot row (for `read_row` and `row_words`)."""
        return self._plan.column[name]

    def row_words(self) -> tuple[memoryview, memoryview, int]:
        """The slot rows as int64 and float64 words, and the words per row: slot `s`, column `c`
        is word `s * row_length + c`. Faster than numpy item access for a few words at a time."""
        return self._rows_q, self._rows_d, self._plan.row_words

    def control_words(self) -> memoryview:
        """The block's control words; word 0 is the transaction number (odd while one is open)."""
        return self._control

    def global_words(self, name: str) -> memoryview:
        """Global array `name` as int64 or float64 words (see `row_words`)."""
        plan = self._plan
        at = plan.global_at[name] - plan.globals_at
        view = self._globals[at:at + self.layout[name][1] * 8]
        return view.cast("q" if self.layout[name][0] == "int64" else "d")

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (SharedMemoryBackend.attach, (self.name,))

    # ---- transactions (the caller holds the flock) ---------------------------------------------
    def _repair(self, seq: int) -> int:
        """Roll back the open transaction `seq` (of a holder that died, or aborted); the new
        (even) transaction number."""
        self._roll_back()
        seq += 1
        self._control[_SEQ] = seq
        if not self._txn:
            self._control[_REPAIRS] += 1
        return seq

    def _roll_back(self) -> None:
        """Restore the pre-images of an open transaction whose holder died (or that aborted).

        A row's data goes back, but its version word keeps the rolled-back transaction's
        number: a lock-free reader that read the old version before the transaction wrote the
        row, and the transaction's data after, sees another version when it checks again and
        reads again. Restoring the old version (and moving the transaction number on only
        after it) left a window in which such a reader took a never-committed word as
        committed.

        The journal's count of rows stays: until the transaction number moves on, a lock-free
        `snapshot()` that copied the rows while the transaction's words were in them replaces
        those rows by their pre-images, which it finds through that count (cleared first, the
        copy was taken as committed). The next transaction clears it.
        """
        control = self._control
        self._hot[:] = self._hot_shadow
        if control[_COLD]:
            self._cold[:] = self._cold_shadow
            control[_COLD] = 0
        journal = control[_JOURNAL]
        if journal == _ALL_ROWS:
            self._rows_2d[:, 1:] = self._shadow_2d[:, 1:]
        else:
            rows_q, shadow_q, row_words = self._rows_q, self._shadow_q, self._row_words
            for i in range(journal):
                at = control[_JOURNAL_ROWS + i] * row_words
                rows_q[at + 1:at + row_words] = shadow_q[at + 1:at + row_words]

    def touch(self, slot: int) -> None:
        """Journal slot row `slot` before its first write in this transaction (no-op outside one)."""
        txn = self._txn
        if not txn:
            return
        rows_q = self._rows_q
        at = slot * self._row_words
        if rows_q[at] == txn:  # already journaled in this transaction
            return
        control = self._control
        n = control[_JOURNAL]
        if n == _ALL_ROWS:
            pass
        elif n < _MAX_JOURNAL_ROWS:
            self._shadow_q[at:at + self._row_words] = rows_q[at:at + self._row_words]
            control[_JOURNAL_ROWS + n] = slot
            control[_JOURNAL] = n + 1
        else:
            self._journal_all_rows()
        rows_q[at] = txn

    def touch_globals(self) -> None:
        """Journal the cold global arrays before their first write in this transaction (no-op
        outside one): their pre-image first, then the flag, so a holder killed in between left
        them unwritten."""
        if not self._txn or self._control[_COLD] or not self._cold.nbytes:
            return
        self._cold_shadow[:] = self._cold
        self._control[_COLD] = 1

    def _journal_all_rows(self) -> None:
        """Journal every slot row at once (pool refills, restoring a checkpoint)."""
        control = self._control
        n = control[_JOURNAL]
        if n == _ALL_ROWS:
            return
        keep = np.ones(self._plan.slots, dtype=bool)
        keep[[control[_JOURNAL_ROWS + i] for i in range(n)]] = False
        self._shadow_2d[keep] = self._rows_2d[keep]  # rows already journaled keep their pre-image
        control[_JOURNAL] = _ALL_ROWS

    def journal_everything(self) -> None:
        """Before writing every slot row in this transaction (no-op outside one)."""
        if self._txn:
            self._journal_all_rows()
            self.touch_globals()
            self._versions[:] = self._txn

    # ---- lock-free consistent reads ----------------------------------------------------------
    def read_row(self, slot: int, columns: tuple[int, ...], floats: tuple[bool, ...]) -> tuple[Any, ...]:
        """Words `columns` of slot row `slot` from one committed state, without the lock.

        Accepted when the row's version did not change during the read and no open transaction
        had written the row; a row that the open transaction (live, stuck or dead) has written
        is read from its pre-image in the journal instead.
        """
        at = slot * self._row_words
        rows_q, rows_d, control = self._rows_q, self._rows_d, self._control
        for attempt in range(_READ_TRIES):
            version = rows_q[at]  # before the transaction number: see `committed_word`
            seq = control[_SEQ]
            if version == seq and seq & 1:  # written by the open transaction: its pre-image
                shadow_q, shadow_d = self._shadow_q, self._shadow_d
                values = tuple(shadow_d[at + c] if f else shadow_q[at + c] for c, f in zip(columns, floats))
                if control[_SEQ] == seq:
                    return values
            else:
                values = tuple(rows_d[at + c] if f else rows_q[at + c] for c, f in zip(columns, floats))
                if rows_q[at] == version and control[_SEQ] == seq:
                    return values
            if attempt >= 8:
                os.sched_yield()
        with self._lock:
            return tuple(rows_d[at + c] if f else rows_q[at + c] for c, f in zip(columns, floats))

    def committed_word(self, slot: int, column: int) -> int:
        """Int64 word `column` of slot row `slot` as last committed, without the lock.

        Never a value a transaction still open has written: a reader that acts on it (hands out
        a task id, say) must not see what a holder killed before its commit would leave behind.
        """
        at = slot * self._row_words
        rows_q, control = self._rows_q, self._control
        for attempt in range(_READ_TRIES):
            # The version before the transaction number: a row written by a transaction that
            # started after this read of the number changes version before the value is read.
            # The version read again after the value: a transaction that wrote the row meanwhile
            # left its own number there, even if it was rolled back (see `_roll_back`).
            version = rows_q[at]
            seq = control[_SEQ]
            if version == seq and seq & 1:  # written by the open transaction: its pre-image
                value = self._shadow_q[at + column]
                if control[_SEQ] == seq:
                    return value
            else:
                value = rows_q[at + column]
                if rows_q[at] == version and control[_SEQ] == seq:
                    return value
            if attempt >= 8:
                os.sched_yield()
        with self._lock:
            return rows_q[at + column]

    def snapshot(self) -> dict[str, np.ndarray]:
        """Copies of every array as of one moment between transactions, without the lock.

        An open transaction (a writer inside the lock, or a dead one) is seen through its
        journal, as the state before it. Under writes too frequent to copy the block between two
        of them, falls back to taking the lock.
        """
        control = self._control
        for _ in range(_SNAPSHOT_TRIES):
            seq = control[_SEQ]
            cold_journaled = control[_COLD]
            rows = self._rows_2d.copy()
            global_bytes = bytearray(self._globals)
            if seq & 1:
                journal = control[_JOURNAL]
                hot = len(self._hot)
                global_bytes[:hot] = self._hot_shadow
                if cold_journaled:
                    global_bytes[hot:] = self._cold_shadow
                elif control[_COLD]:  # the holder began writing them while we copied
                    continue
                if journal == _ALL_ROWS:
                    journaled = None
                    rows_shadow = self._shadow_2d.copy()
                else:
                    journaled = [control[_JOURNAL_ROWS + i] for i in range(journal)]
                    rows_shadow = self._shadow_2d[journaled]
            if control[_SEQ] != seq:
                continue
            if seq & 1:
                if journaled is None:
                    rows = rows_shadow
                else:
                    rows[journaled] = rows_shadow
            return self._arrays_from(rows, global_bytes)
        with self._lock:
            return self._arrays_from(self._rows_2d.copy(), bytearray(self._globals))

    def _arrays_from(self, rows: np.ndarray, global_bytes: bytearray) -> dict[str, np.ndarray]:
        plan = self._plan
        out: dict[str, np.ndarray] = {}
        for name, (dtype, length) in self.layout.items():
            if name in plan.column:
                out[name] = np.ascontiguousarray(rows[:, plan.column[name]]).view(dtype)
            else:
                at = plan.global_at[name] - plan.globals_at
                out[name] = np.frombuffer(global_bytes, dtype=dtype, count=length, offset=at).copy()
        return out

    # ---- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        if self._finalizer.alive:
            self._lock.close()
            self.arrays = {}
            self._release_views()
            self._finalizer()

    def _release_views(self) -> None:
        for attr in ("_control", "_rows_q", "_rows_d", "_shadow_q", "_shadow_d", "_hot", "_hot_shadow", "_cold",
                     "_cold_shadow", "_globals", "_globals_shadow", "_rows", "_rows_shadow", "_buf"):
            view = getattr(self, attr, None)
            if view is not None:
                view.release()
        self._rows_2d = self._shadow_2d = self._versions = None


def remove_orphaned_segments(*, dry_run: bool = False) -> list[str]:
    """Remove the shared trackers of this user whose creator and users are all gone; their paths.

    A block is removed only if it carries a tracker header, belongs to this user, no process
    holds it open through this library (each holds a shared lock on it while it does), and its
    creator (pid and start time in the header) is no longer running. The empty lock files
    `<name>.lock` left by earlier versions beside a block that no longer exists are removed too
    (one holding bytes is another program's, and stays).
    `dry_run` lists what would be removed without removing it.
    """
    removed: list[str] = []
    try:
        entries = os.listdir(SEGMENT_DIR)
    except OSError:
        return removed
    uid = os.geteuid()
    names = set(entries)
    for entry in sorted(entries):
        if not entry.startswith(SEGMENT_PREFIX):
            continue
        path = _segment_path(entry)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
            continue
        if entry.endswith(".lock"):
            if entry.removesuffix(".lock") not in names and info.st_size == 0:
                if not dry_run:
                    _unlink_if_same(path, info)
                removed.append(path)
            continue
        if _is_orphan(path, info, dry_run=dry_run):
            removed.append(path)
    return removed


def _unlink_if_same(path: str, info: os.stat_result) -> None:
    try:
        now = os.lstat(path)
        if (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
            os.unlink(path)
    except FileNotFoundError:
        pass


def _is_orphan(path: str, info: os.stat_result, *, dry_run: bool) -> bool:
    """Whether the block at `path` is an orphan (and, unless `dry_run`, remove it)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino) or opened.st_uid != os.geteuid():
            return False
        try:
            header, _ = _read_header(fd, path, opened.st_size)
        except SharedTrackerError:
            return False  # not ours, or its creator is still writing the header
        creator = header["creator"]
        pid, start_time = creator.get("pid"), creator.get("start_time")
        if isinstance(pid, int) and start_time is not None and _process_start_time(pid) == start_time:
            return False  # the creator is running
        if not _ofd_lock(fd, fcntl.F_WRLCK):  # some process still uses it
            return False
        if not dry_run:
            _unlink_if_same(path, info)
        return True
    finally:
        os.close(fd)
