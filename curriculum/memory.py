"""Where the task tracker keeps its numbers: one process, or shared across processes.

A backend is a set of named numpy arrays with a fixed layout plus a lock. The lock is taken
only around read-modify-write sections; reads are lock-free. Every value is an aligned 8-byte
word written in one store, so a lock-free reader sees an old or a new value, never a torn one.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

from curriculum.errors import CurriculumConfigError, CurriculumError, LockTimeoutError

__all__ = [
    "Layout",
    "TaskMemoryBackend",
    "LocalMemoryBackend",
    "SharedMemoryBackend",
    "DEFAULT_LOCK_TIMEOUT",
]

#: name -> (dtype string, length). Every dtype is 8 bytes wide ("int64" or "float64").
Layout = Mapping[str, tuple[str, int]]

DEFAULT_LOCK_TIMEOUT = 5.0
_LOCK_YIELDS = 64
"""Tries that only yield the CPU before a contended lock starts sleeping between tries."""
_ALLOWED_DTYPES = ("int64", "float64")
_HEADER_BYTES = 8


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
        """An object with `acquire()`, `release()` and context-manager use."""

    @property
    def is_shared(self) -> bool:
        """Whether other processes see the same arrays."""
        return False

    @abstractmethod
    def close(self) -> None:
        """Release the memory (a shared creator also unlinks it)."""

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


def _lock_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class _FileLock:
    """A cross-process lock on a file (`flock`), acquired with a timeout.

    The kernel drops an flock when its holder dies, so a worker killed while holding the lock
    cannot block the others; a live holder that never releases makes `acquire` raise
    `LockTimeoutError` after `timeout` seconds instead of hanging.
    """

    def __init__(self, path: str, *, timeout: float, holder: np.ndarray) -> None:
        self.path = path
        self.timeout = timeout
        self._holder: np.ndarray | None = holder  # shared int64[1]: pid of the holder, for error messages
        self._fd = -1
        self._pid = -1
        self._closed = False

    def _ensure_open(self) -> int:
        pid = os.getpid()
        if self._pid != pid:  # an flock is per open file: each process needs its own
            if self._closed:  # the shared block is unmapped: writing the holder pid would segfault
                raise CurriculumError(f"The shared tracker lock {self.path!r} was closed with its tracker")
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._pid = pid
        return self._fd

    def acquire(self) -> None:
        fd = self._ensure_open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._acquire_slow(fd)
        self._holder[0] = self._pid

    def _acquire_slow(self, fd: int) -> None:
        # The critical section is ~1 us: first yield the CPU to the holder a few times (cheap
        # when it is about to release), then back off with sleeps so a stuck holder costs
        # little CPU until the timeout.
        deadline = time.monotonic() + self.timeout
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
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"Could not take the shared tracker lock {self.path!r} within {self.timeout} s; "
                    f"it is held by pid {int(self._holder[0])}. Completions recorded before this are intact."
                )

    def release(self) -> None:
        self._holder[0] = 0
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def close(self) -> None:
        if self._pid == os.getpid() and self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
        self._pid = -1
        self._closed = True
        self._holder = None  # a view into the block that is about to be unmapped


class SharedMemoryBackend(TaskMemoryBackend):
    """Arrays in one `multiprocessing.shared_memory` block, attachable by name.

    The block starts with a JSON header holding the layout, so `attach(name)` needs nothing
    but the name. Pickling a backend sends only its name: the receiving process attaches.
    """

    def __init__(self, layout: Layout, *, name: str | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        if not lock_timeout > 0:
            raise CurriculumConfigError(f"Expected `lock_timeout` to be > 0 seconds, received {lock_timeout!r}")
        self.layout = _check_layout({**layout, "_lock_holder": ("int64", 1)})
        header = json.dumps({"layout": self.layout, "lock_timeout": lock_timeout}).encode()
        offset = _HEADER_BYTES + len(header)
        offset += -offset % 8
        size = offset + sum(length * 8 for _, length in self.layout.values())
        name = name or f"curriculum_{secrets.token_hex(6)}"
        self._shm = shared_memory.SharedMemory(name=name, create=True, size=size)
        self._shm.buf[:_HEADER_BYTES] = len(header).to_bytes(_HEADER_BYTES, "little")
        self._shm.buf[_HEADER_BYTES : _HEADER_BYTES + len(header)] = header
        self._owner_pid = os.getpid()
        self._setup(offset, lock_timeout)
        for array in self.arrays.values():
            array[:] = 0

    @classmethod
    def attach(cls, name: str) -> SharedMemoryBackend:
        """Attach to a block another process created."""
        self = cls.__new__(cls)
        register = resource_tracker.register
        resource_tracker.register = lambda *args, **kwargs: None  # only the creator may unlink
        try:
            self._shm = shared_memory.SharedMemory(name=name, create=False)
        except FileNotFoundError:
            raise CurriculumConfigError(
                f"Expected a shared tracker named {name!r} to exist, but no such shared memory block was found"
            ) from None
        finally:
            resource_tracker.register = register
        length = int.from_bytes(bytes(self._shm.buf[:_HEADER_BYTES]), "little")
        header = json.loads(bytes(self._shm.buf[_HEADER_BYTES : _HEADER_BYTES + length]))
        self.layout = {k: (v[0], v[1]) for k, v in header["layout"].items()}
        offset = _HEADER_BYTES + length
        offset += -offset % 8
        self._owner_pid = -1
        self._setup(offset, header["lock_timeout"])
        return self

    def _setup(self, offset: int, lock_timeout: float) -> None:
        self.arrays = {}
        for array_name, (dtype, length) in self.layout.items():
            self.arrays[array_name] = np.ndarray((length,), dtype=dtype, buffer=self._shm.buf, offset=offset)
            offset += length * 8
        self.name = self._shm.name
        self._lock = _FileLock(
            os.path.join(_lock_dir(), f"{self.name}.lock"), timeout=lock_timeout, holder=self.arrays["_lock_holder"]
        )

    @property
    def lock(self) -> _FileLock:
        return self._lock

    @property
    def is_shared(self) -> bool:
        return True

    @property
    def is_owner(self) -> bool:
        """Whether this process created the block (and unlinks it on close); a forked child is not."""
        return self._owner_pid == os.getpid()

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (SharedMemoryBackend.attach, (self.name,))

    def close(self) -> None:
        if self._shm is None:
            return
        self._lock.close()
        self.arrays = {}
        shm, self._shm = self._shm, None
        try:
            shm.close()
        except BufferError:  # a caller still holds a view; the mapping goes when it does
            pass
        if self.is_owner:
            shm.unlink()
            try:
                os.unlink(self._lock.path)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    raise

    def __del__(self) -> None:
        if getattr(self, "_shm", None) is not None and self.is_owner:
            self.close()
