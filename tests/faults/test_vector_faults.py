"""Worker failures of `make_curriculum_vecenv` on pufferlib Multiprocessing, in every batching mode.

Each case kills a worker (SIGKILL, from a timer while the main process waits for the step, or
right after a reset) or makes its env raise (in a step, in the first reset, in an auto-reset),
then asserts: `WorkerProcessError` naming the worker within a bounded time (measured from the
fault and printed in the summary), every worker stopped and reaped, and `reset()`/`step()`
refused at once afterwards. Three cases run a separate interpreter: an uncaught error must let
it exit, an unclosed vecenv must not keep it alive, and a killed main process must take its
workers with it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "curriculum"))
from env_doubles import HARD, FaultyEnv, two_label_config  # noqa: E402

from curriculum import Curriculum, WorkerProcessError, make_curriculum_vecenv  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NUM_ENVS = 4
FAULT_SEED = NUM_ENVS - 1
"""The env with this seed misbehaves: the last env of the last worker, never the driver env."""
DEADLINE = 20.0
"""Seconds a case may take to see its `WorkerProcessError` before the test fails (never hangs)."""

#: name -> vector layout over 4 envs: which pufferlib `recv` path the main process waits in
MODES: dict[str, dict[str, Any]] = {
    "sync": {"num_workers": 2},  # every batch is every worker
    "async-one-worker": {"num_workers": 2, "batch_size": 2},  # each batch is one worker (2 envs)
    "async-block": {"num_workers": 4, "batch_size": 2, "overwork": True},  # contiguous 2-worker blocks
    "async-any": {"num_workers": 4, "batch_size": 2, "overwork": True, "zero_copy": False},  # any 2 workers
}
WORKER_ERROR = re.compile(
    r"^Vectorized worker (\d) \(pid (\d+)\) (exited with code 1|was killed by SIGKILL \(9\)) (during|after) its "
    r"(step|reset); its traceback, if any, is on stderr\. The vecenv closed itself and stopped every worker; build a "
    r"new one to continue$"
)


def make_faulty_env(fail_in: str | None = None, fail_at: int = 1, step_delay: float = 0.0) -> Callable[..., Any]:
    def make(buf: Any = None, seed: int = 0) -> FaultyEnv:
        faulty = seed == FAULT_SEED
        return FaultyEnv(buf=buf, seed=seed, fail_in=fail_in if faulty else None, fail_at=fail_at,
                         step_delay=step_delay if faulty else 0.0)
    return make


class Hung(Exception):
    """A case outlived its deadline: something waited forever."""


@pytest.fixture(autouse=True)
def hang_guard() -> Iterator[None]:
    """Interrupt a case that hangs (a busy wait in pufferlib, a blocking join) after 3 x DEADLINE."""
    def interrupt(signum: int, frame: Any) -> None:
        raise Hung(f"the case did not finish within {3 * DEADLINE} s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 3 * DEADLINE)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def curriculum() -> Iterator[Curriculum]:
    made = Curriculum(two_label_config(easy=HARD), shared_memory=True)
    yield made
    made.close()


def actions_for(vecenv: Any) -> np.ndarray:
    return np.zeros(vecenv.action_space.shape, dtype=np.int32)


def step_until_error(vecenv: Any, *, fault_time: Callable[[], float | None]) -> tuple[WorkerProcessError, float]:
    """Step until `WorkerProcessError`; the error and the seconds from the fault to it."""
    actions = actions_for(vecenv)
    started = time.monotonic()
    while time.monotonic() - started < DEADLINE:
        try:
            vecenv.step(actions)
        except WorkerProcessError as error:
            raised = time.monotonic()
            return error, raised - (fault_time() or raised)
    raise AssertionError(f"no WorkerProcessError within {DEADLINE} s")


def assert_closed_and_refusing(vecenv: Any, error: WorkerProcessError) -> None:
    processes = vecenv.vecenv.processes
    assert all(process.exitcode is not None for process in processes), [p.exitcode for p in processes]
    refusal = f"^{re.escape(f'The vecenv closed itself after a worker failure: {error}')}$"
    started = time.monotonic()
    with pytest.raises(WorkerProcessError, match=refusal):
        vecenv.reset()
    with pytest.raises(WorkerProcessError, match=refusal):
        vecenv.step(actions_for(vecenv))
    assert time.monotonic() - started < 1.0
    vecenv.close()  # idempotent


def worker_of_fault_seed(vecenv: Any) -> int:
    return len(vecenv.vecenv.processes) - 1


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_killed_inside_a_step_is_reported(curriculum: Curriculum, mode: str, fault_figure: Any) -> None:
    """SIGKILL while the main process waits for the step the worker is in (its env sleeps)."""
    vecenv = make_curriculum_vecenv(make_faulty_env(step_delay=0.3), curriculum, backend="Multiprocessing",
                                    num_envs=NUM_ENVS, **MODES[mode])
    with vecenv:
        vecenv.reset()
        victim = vecenv.vecenv.processes[worker_of_fault_seed(vecenv)]
        killed: list[float] = []

        def kill() -> None:
            killed.append(time.monotonic())
            os.kill(victim.pid, signal.SIGKILL)

        timer = threading.Timer(0.1, kill)
        timer.start()
        error, latency = step_until_error(vecenv, fault_time=lambda: killed[0] if killed else None)
        timer.join()
        match = WORKER_ERROR.match(str(error))
        assert match and match.group(2) == str(victim.pid) and match.group(3) == "was killed by SIGKILL (9)", error
        assert match.group(4, 5) == ("during", "step")
        assert_closed_and_refusing(vecenv, error)
    fault_figure(f"vector_sigkill_in_step_{mode}_s", latency, "s from the SIGKILL to WorkerProcessError")


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_killed_after_a_reset_is_reported(curriculum: Curriculum, mode: str, fault_figure: Any) -> None:
    vecenv = make_curriculum_vecenv(make_faulty_env(), curriculum, backend="Multiprocessing", num_envs=NUM_ENVS,
                                    **MODES[mode])
    with vecenv:
        vecenv.reset()
        for _ in range(3):
            vecenv.step(actions_for(vecenv))
        vecenv.reset()
        victim = vecenv.vecenv.processes[worker_of_fault_seed(vecenv)]
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.monotonic()
        error, latency = step_until_error(vecenv, fault_time=lambda: killed)
        match = WORKER_ERROR.match(str(error))
        assert match and match.group(1) == str(worker_of_fault_seed(vecenv)), error
        assert_closed_and_refusing(vecenv, error)
    fault_figure(f"vector_sigkill_after_reset_{mode}_s", latency, "s from the SIGKILL to WorkerProcessError")


@pytest.mark.parametrize(("fail_in", "fail_at"), [("step", 3), ("reset", 1), ("reset", 2), ("info", 2)],
                         ids=["in-a-step", "in-the-first-reset", "in-an-auto-reset", "sending-its-infos"])
@pytest.mark.parametrize("mode", MODES)
def test_an_env_that_raises_in_a_worker_is_reported(curriculum: Curriculum, mode: str, fail_in: str, fail_at: int,
                                                    fault_figure: Any, capfd: Any) -> None:
    """The worker's traceback goes to stderr and the process exits 1; the main process names it."""
    vecenv = make_curriculum_vecenv(make_faulty_env(fail_in, fail_at), curriculum, backend="Multiprocessing",
                                    num_envs=NUM_ENVS, **MODES[mode])
    with vecenv:
        started = time.monotonic()
        try:
            vecenv.reset()
        except WorkerProcessError as error:  # reported by the reset itself (synchronous batches)
            raised = error
        else:  # an asynchronous reset returns the first batch ready; a later step reports it
            raised, _ = step_until_error(vecenv, fault_time=lambda: None)
        latency = time.monotonic() - started
        match = WORKER_ERROR.match(str(raised))
        assert match and match.group(3) == "exited with code 1", raised
        assert match.group(1) == str(worker_of_fault_seed(vecenv))
        assert match.group(4) == ("after" if fail_in == "info" else "during")  # its step done, its infos not sent
        assert match.group(5) == ("reset" if (fail_in, fail_at) == ("reset", 1) else "step")  # an auto-reset is in a step
        assert_closed_and_refusing(vecenv, raised)
    expected = ("Can't pickle" if fail_in == "info" else f"EnvFailure: {fail_in} {fail_at} failed in pid {match.group(2)}")
    assert expected in capfd.readouterr().err
    if (fail_in, fail_at) == ("reset", 1):
        fault_figure(f"vector_raise_in_first_reset_{mode}_s", latency, "s from the reset() call to WorkerProcessError")


STUCK_TIMEOUT = 2.0
"""worker_timeout of the stuck-worker case: long enough that a loaded machine never takes it for
a worker's slow start-up (0.5 s did, once, in a run beside other test suites)."""


def test_a_stuck_worker_is_reported_after_worker_timeout(curriculum: Curriculum, fault_figure: Any) -> None:
    vecenv = make_curriculum_vecenv(make_faulty_env(), curriculum, backend="Multiprocessing", num_envs=NUM_ENVS,
                                    worker_timeout=STUCK_TIMEOUT, **MODES["async-block"])
    with vecenv:
        vecenv.reset()
        for _ in range(4):  # every worker has taken a step
            vecenv.step(actions_for(vecenv))
        victim = vecenv.vecenv.processes[worker_of_fault_seed(vecenv)]
        os.kill(victim.pid, signal.SIGSTOP)
        # worker_timeout runs from when the worker was asked, which in asynchronous batches can be
        # a step before the SIGSTOP: the latency is measured from that ask
        asked = vecenv._asked_at[worker_of_fault_seed(vecenv)]
        error, latency = step_until_error(vecenv, fault_time=lambda: asked)
        message = (f"Vectorized worker {worker_of_fault_seed(vecenv)} (pid {victim.pid}) is alive but did not finish its "
                   f"step within worker_timeout={STUCK_TIMEOUT} s. The vecenv closed itself and stopped every worker; build a new "
                   "one to continue")
        assert str(error) == message
        assert_closed_and_refusing(vecenv, error)  # a stopped worker is killed too
    assert STUCK_TIMEOUT <= latency < STUCK_TIMEOUT + 5.0
    fault_figure(f"vector_sigstop_worker_timeout_{STUCK_TIMEOUT}_s", latency,
                 "s from the stopped worker's last ask to WorkerProcessError")


@pytest.mark.parametrize("mode", ["sync", "async-block"])
def test_a_worker_frozen_while_sending_its_infos_is_the_one_named(curriculum: Curriculum, mode: str) -> None:
    """A worker stopped after flagging its infos and before they reach its pipe: the others
    arrived, so the one named is the one whose infos never came, not worker 0."""
    vecenv = make_curriculum_vecenv(make_faulty_env("freeze-in-info", fail_at=2), curriculum,
                                    backend="Multiprocessing", num_envs=NUM_ENVS, worker_timeout=STUCK_TIMEOUT,
                                    **MODES[mode])
    with vecenv:
        vecenv.reset()
        victim = vecenv.vecenv.processes[worker_of_fault_seed(vecenv)]
        error, _ = step_until_error(vecenv, fault_time=lambda: None)
        assert str(error) == (
            f"Vectorized worker {worker_of_fault_seed(vecenv)} (pid {victim.pid}) is alive but did not send the infos "
            f"of its step within worker_timeout={STUCK_TIMEOUT} s. The vecenv closed itself and stopped every worker; "
            "build a new one to continue")
        assert_closed_and_refusing(vecenv, error)


# ---- separate interpreters ----------------------------------------------------------------------
_PRELUDE = f"""
import os, sys, time
sys.path[:0] = [{str(REPO)!r}, {str(REPO / "tests" / "curriculum")!r}]
import numpy as np
from env_doubles import HARD, FaultyEnv, two_label_config
from curriculum import Curriculum, make_curriculum_vecenv

def make_env(buf=None, seed=0):
    return FaultyEnv(buf=buf, seed=seed, fail_in="step" if seed == {FAULT_SEED} else None, fail_at=3)

curriculum = Curriculum(two_label_config(easy=HARD), shared_memory=True)
vecenv = make_curriculum_vecenv(make_env, curriculum, backend="Multiprocessing", num_envs={NUM_ENVS}, num_workers=2)
print("workers", *[p.pid for p in vecenv.vecenv.processes], flush=True)
vecenv.reset()
"""


def run_script(body: str, *, timeout: float = 60.0) -> tuple[subprocess.CompletedProcess[str], float]:
    script = _PRELUDE + textwrap.dedent(body)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        raise AssertionError(f"the interpreter did not exit within {timeout} s: {expired.stderr!r}") from None
    return done, time.monotonic() - started


def worker_pids(stdout: str) -> list[int]:
    (line,) = [line for line in stdout.splitlines() if line.startswith("workers ")]
    return [int(pid) for pid in line.split()[1:]]


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting to be reaped has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_an_uncaught_worker_error_lets_the_interpreter_exit(fault_figure: Any) -> None:
    done, seconds = run_script("""
        while True:
            vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
    """)
    assert done.returncode == 1 and "curriculum.errors.WorkerProcessError: Vectorized worker 1" in done.stderr, done
    assert not any(pid_alive(pid) for pid in worker_pids(done.stdout))
    fault_figure("vector_uncaught_error_interpreter_exit_s", seconds, "s for the whole interpreter run, start-up included")


def test_an_unclosed_vecenv_does_not_keep_the_interpreter_alive() -> None:
    done, _ = run_script("""
        vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
        raise SystemExit("the training loop stopped without closing its vecenv")
    """)
    assert done.returncode == 1 and "without closing its vecenv" in done.stderr, done
    assert not any(pid_alive(pid) for pid in worker_pids(done.stdout))


def test_workers_end_when_the_main_process_is_killed(fault_figure: Any) -> None:
    script = _PRELUDE + "time.sleep(60)\n"
    main = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = worker_pids(main.stdout.readline())
        time.sleep(0.5)  # the reset has reached the workers
        main.kill()
        killed = time.monotonic()
        main.wait(timeout=10)
        while any(pid_alive(pid) for pid in pids) and time.monotonic() - killed < 10:
            time.sleep(0.02)
        seconds = time.monotonic() - killed
        assert not any(pid_alive(pid) for pid in pids), f"workers {pids} outlived their killed main process"
    finally:
        main.kill()
        main.wait()
        main.stdout.close()
        main.stderr.close()
    fault_figure("vector_workers_end_after_main_sigkill_s", seconds, "s from the main process's SIGKILL to no worker left")
