"""`harness.processes`: the start method set for a block only, and what a process holds."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading

import pytest

from harness.processes import held_resources, start_method


def test_start_method_holds_within_the_block_and_is_restored_after_it_even_on_an_error() -> None:
    before = mp.get_start_method(allow_none=True)
    other = "forkserver" if before != "forkserver" else "spawn"
    with pytest.raises(RuntimeError), start_method(other):
        assert mp.get_start_method() == other
        raise RuntimeError("the block failed")
    assert mp.get_start_method(allow_none=True) == before
    with start_method(None):  # the platform's default: nothing set
        assert mp.get_start_method(allow_none=True) == before


def test_held_resources_counts_a_new_thread_and_two_new_descriptors() -> None:
    threads, descriptors = held_resources(os.getpid())
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    read, write = os.pipe()
    try:
        assert held_resources(os.getpid()) == (threads + 1, descriptors + 2)
    finally:
        release.set()
        thread.join()
        os.close(read)
        os.close(write)
    assert held_resources(os.getpid()) == (threads, descriptors)
