"""`harness.processes`: the start method set for a block only, and what a process holds."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys

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


#: Run in a fresh interpreter (a pytest worker runs threads of its own that come and go): the
#: counts before, with a thread and a pipe more, and after both are gone.
_COUNTS = """
import json, os, sys, threading, time
from harness.processes import held_resources
before = held_resources(os.getpid())
release = threading.Event()
thread = threading.Thread(target=release.wait)
thread.start()
read, write = os.pipe()
during = held_resources(os.getpid())
release.set()
thread.join()
os.close(read)
os.close(write)
for _ in range(200):  # (a joined thread leaves /proc/<pid>/task a moment after join() returns)
    if held_resources(os.getpid()) == before:
        break
    time.sleep(0.01)
print(json.dumps([before, during, held_resources(os.getpid())]))
"""


def test_held_resources_counts_a_new_thread_and_two_new_descriptors() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    output = subprocess.run([sys.executable, "-c", _COUNTS], capture_output=True, text=True, check=True, env=env,
                            timeout=60).stdout
    (threads, descriptors), during, after = json.loads(output)
    assert during == [threads + 1, descriptors + 2]
    assert after == [threads, descriptors]
