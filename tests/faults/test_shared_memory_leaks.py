"""A creator killed in any way leaves nothing behind once the next creator starts.

The creator is a separate program in its own session (like a training job) with a forked
worker recording into its shared curricula. It is killed with SIGKILL, SIGTERM, or SIGKILL to
its whole process group (a container stop, `timeout -s KILL`: the resource tracker that would
unlink its blocks dies with it). The leak count is taken once every process of the session is
gone, then again after the next creator started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fault_budget import scaled
from shm_faults import lp_config

from curriculum import Curriculum
from curriculum.memory import SEGMENT_DIR

HERE = Path(__file__).resolve().parent

CREATOR = textwrap.dedent("""
    import json, multiprocessing, os
    from curriculum import Curriculum
    from shm_faults import lp_config

    def work(curriculum, parent, started):
        started.set()
        while os.getppid() == parent:  # an orphaned worker stops
            curriculum.update_task_performance(curriculum.get_task().task_id, 0.5)

    if __name__ == "__main__":
        curricula = [Curriculum(lp_config(n=1000), shared_memory=True) for _ in range(3)]
        context = multiprocessing.get_context("fork")
        started = context.Event()
        context.Process(target=work, args=(curricula[0], os.getpid(), started)).start()
        started.wait(30)
        print(json.dumps([c.shared_memory_name for c in curricula]), flush=True)
        while True:
            for c in curricula:
                c.update_task_performance(c.get_task().task_id, 0.5)
""")

KILLS = {
    "sigkill": lambda pid: os.kill(pid, signal.SIGKILL),
    "sigterm": lambda pid: os.kill(pid, signal.SIGTERM),
    "process_group_sigkill": lambda pid: os.killpg(pid, signal.SIGKILL),
}


def _leftovers(names: list[str]) -> list[str]:
    """Files of these segments still in /dev/shm that this user created (the attack test, run
    beside this one, plants files under the same names as another user: not a leak)."""
    found = []
    for f in (f for n in names for f in (n, f"{n}.lock")):
        try:
            owner = os.stat(os.path.join(SEGMENT_DIR, f), follow_symlinks=False).st_uid
        except FileNotFoundError:
            continue
        if owner == os.getuid():
            found.append(f)
    return found


def _wait_until_session_is_gone(session: int, timeout: float = 30.0) -> None:
    """Every process of the creator's session has exited (the orphaned worker stops when its
    parent is gone; a surviving resource tracker unlinks what the creator registered)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(session, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            os.killpg(session, signal.SIGKILL)
            raise AssertionError(f"processes of the killed creator's session were still running after {timeout} s")
        time.sleep(0.02)


@pytest.mark.parametrize("kill", list(KILLS))
def test_a_killed_creator_leaks_nothing_past_the_next_creator(kill: str, fault_figure) -> None:
    rounds = scaled(10, minimum=1)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    leaked_after_kill = 0
    leaked_after_next = []
    blocks = 0
    for _ in range(rounds):
        creator = subprocess.Popen([sys.executable, "-c", CREATOR], stdout=subprocess.PIPE, text=True, env=env,
                                   cwd=HERE, start_new_session=True)
        try:
            names = json.loads(creator.stdout.readline())
        except BaseException:
            os.killpg(creator.pid, signal.SIGKILL)
            raise
        blocks += len(names)
        time.sleep(0.05)
        KILLS[kill](creator.pid)
        creator.wait(timeout=30)
        creator.stdout.close()
        _wait_until_session_is_gone(creator.pid)
        leaked_after_kill += len(_leftovers(names))
        with Curriculum(lp_config(n=8), shared_memory=True):  # the next creator
            pass
        leaked_after_next += _leftovers(names)
    fault_figure(f"creator_kill.{kill}.blocks", blocks,
                 f"shared curricula of {rounds} creators (pool 1,000, a forked worker recording) killed by {kill}")
    fault_figure(f"creator_kill.{kill}.left_after_kill", leaked_after_kill,
                 "files (blocks, lock files) still in /dev/shm once every process of the creator was gone")
    fault_figure(f"creator_kill.{kill}.left_after_next_creator", len(leaked_after_next),
                 "files still there after the next creator started")
    assert not leaked_after_next, f"leaked: {leaked_after_next}"
