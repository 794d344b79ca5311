"""Worker processes of the scenario suites: how they are started and what they hold."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from collections.abc import Iterator


@contextlib.contextmanager
def start_method(method: str | None) -> Iterator[None]:
    """Worker processes started by `method` (None: this platform's default) within the block."""
    if method is None:
        yield
        return
    before = mp.get_start_method(allow_none=True)
    mp.set_start_method(method, force=True)
    try:
        yield
    finally:
        mp.set_start_method(before, force=True)


def held_resources(pid: int) -> tuple[int, int]:
    """The threads process `pid` runs and the file descriptors it holds (Linux `/proc`)."""
    return len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd"))


def is_running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie has: a worker orphaned in a
    container may never be reaped). Linux `/proc`."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False
