"""Worker failures: a vector worker that dies or stops answering is named, never waited on.

Bug class: a trainer that hangs for good when one worker process dies (the OOM killer, a
segfault in the env) or stops answering, because the vector waits on that worker forever;
or that fails much later with an unrelated error, goes on stepping the survivors, or loses
the completions the workers had already recorded. Nothing crashes where the bug is: the run
just stops making progress.

pufferlib Multiprocessing, four envs on two worker processes sharing one curriculum, or on
four stepped in asynchronous batches of two (a batch is a block of two workers, one of which
may have answered while the other is dead; or any two workers that are done, so the survivors
keep every batch ready and nothing ever waits on the dead one): after some steps one worker is killed (SIGKILL;
also under a long `worker_timeout`, which must not delay seeing a dead worker),
exits cleanly (code 0), is killed by a signal that has no name, has its env raise (in workers a
fork server started, which also watch their trainer from a thread), or is frozen (SIGSTOP, with
`worker_timeout`), also at the worst moment: after it flagged a
step's infos and before they reached its pipe, the read that would wait for good. The
next steps (or, after a kill, a `reset()` and the steps after it) must raise `WorkerProcessError` naming that worker within `LIMITS.deadline`
seconds (the steps run in a thread, so a hang fails this check instead of stalling the gate),
every worker must be stopped (by SIGTERM, where it can end so: a frozen one is continued first),
the next `step()` refused at once (naming the worker again), and the curriculum must
still hold every completion the main process saw reported. And the other way round: a worker
that answers as soon as it is asked is never taken for a stuck one, however long the trainer
paused before asking.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time

from typing import Any, Final

import numpy as np
import pytest

from curriculum import Curriculum, CurriculumConfig, SingleTaskGenerator, UniformConfig, WorkerProcessError
from curriculum import vector as vector_module
from curriculum.vector import make_curriculum_vecenv
from harness.envs import ExactAccountingEnv
from harness.episodes import LabelledTaskGenerator
from harness.processes import held_resources, is_running, start_method
from harness.thresholds import WORKER_FAILURES as LIMITS


_STOP_WHILE_SENDING = mp.RawValue("i", 0)
"""The pid of the worker to stop while it sends its next step's infos (0: none); forked
workers share it."""

_EXIT_IN_STEP = mp.RawValue("i", 0)
"""The pid of the worker whose env ends its process cleanly (exit code 0) in its next step."""

_EXIT_IN_RESET = mp.RawValue("i", 0)
"""The pid of the worker whose env ends its process cleanly in its next reset."""

_RAISE_ON: Final = signal.SIGUSR1
"""Sent to a worker: its env raises in its next step (an error nothing in the worker catches).
A signal, not a shared value: it reaches workers a fork server started too."""
_raise_in_step = False


class EnvCrashed(RuntimeError):
    """An env's own error in a worker's step."""


class _StopsWhenPickled:
    """An info value whose pickling (in the worker, sending its infos) stops that worker."""

    def __reduce__(self):
        os.kill(os.getpid(), signal.SIGSTOP)
        return (str, ())


class _StopsWhileSendingInfos(ExactAccountingEnv):
    """Adds `_StopsWhenPickled` to a step's infos in the worker named by `_STOP_WHILE_SENDING`."""

    def step(self, actions):
        if _EXIT_IN_STEP.value == os.getpid():  # an env that calls sys.exit(), or a library's os._exit(0)
            os._exit(0)
        if _raise_in_step:
            raise EnvCrashed(f"the env of worker pid {os.getpid()} failed in its step")
        observations, rewards, terminals, truncations, infos = super().step(actions)
        if _STOP_WHILE_SENDING.value == os.getpid():
            _STOP_WHILE_SENDING.value = 0
            infos = [*infos, {"stops_when_pickled": _StopsWhenPickled()}]
        return observations, rewards, terminals, truncations, infos

    def reset(self, seed=None):
        if _EXIT_IN_RESET.value == os.getpid():
            os._exit(0)
        return super().reset(seed)

    def close(self) -> None:
        self.closed = True
        super().close()


_TRAINER_PID = os.getpid()
_MADE_BY_THE_TRAINER: list[_StopsWhileSendingInfos] = []
"""The envs a vector made in the trainer's own process (pufferlib's driver env), which its
`close()` must close too, after a worker failure as well."""


def _raise_from_now_on(signum: int, frame: Any) -> None:
    global _raise_in_step
    _raise_in_step = True


def _env(buf=None, seed=0):
    env = _StopsWhileSendingInfos(buf=buf, seed=seed, episode_length=LIMITS.episode_length)
    if os.getpid() == _TRAINER_PID:
        _MADE_BY_THE_TRAINER.append(env)
    if mp.parent_process() is not None:  # a worker (this module imported afresh in a fork server's)
        signal.signal(_RAISE_ON, _raise_from_now_on)
    return env


def _config(seed: int) -> CurriculumConfig:
    return CurriculumConfig(task_generator=LabelledTaskGenerator(SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25},
                                                                                     label="steady")),
                            algorithm=UniformConfig(), num_active_tasks=4, seed=seed)


def _steps_until_error(vecenv, steps: int, seen: list[int], *, reset_first: bool = False,
                       pause: float = 0.0) -> dict[str, object]:
    """Step up to `steps` times in a thread (after a `reset()`, with `reset_first`; `pause`
    seconds between steps, a trainer's own work); what it raised (or that it hung) and when."""
    outcome: dict[str, object] = {}
    actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)

    def run() -> None:
        try:
            if reset_first:
                vecenv.reset()
            for _ in range(steps):
                if pause:
                    time.sleep(pause)
                infos = vecenv.step(actions)[4]
                seen[0] += sum(1 for info in infos if isinstance(info, dict) and "curriculum_stats/completions" in info)
        except BaseException as error:  # the outcome under test
            outcome["error"] = error
        outcome["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(LIMITS.deadline)
    if thread.is_alive():
        outcome["hung"] = True
    return outcome


LAYOUTS = {
    "sync": {"num_workers": LIMITS.num_workers},
    # one env per worker, batches of two (pufferlib's zero-copy blocks: workers 0-1 and 2-3)
    "async": {"num_workers": LIMITS.num_envs, "batch_size": 2},
    # batches of any two workers that are done, in any order (pufferlib's `sync_traj=False`, set
    # below, as in a vecenv built by hand and wrapped in SharedCurriculumVecEnv): with the
    # trainer's own work between steps the three survivors always have a batch ready, and
    # nothing ever waits on the dead one
    "async-any": {"num_workers": LIMITS.num_envs, "batch_size": 2, "zero_copy": False},
    # batches of one worker (each batch is whichever worker's turn it is)
    "async-one": {"num_workers": LIMITS.num_envs, "batch_size": 1},
    # zero-copy blocks of three workers, two blocks (rows and columns of the blocks differ)
    "async-thirds": {"num_envs": LIMITS.block_envs, "num_workers": LIMITS.block_envs,
                     "batch_size": LIMITS.block_envs // 2},
    # every env in one worker: no other worker holds a pipe open, so writing to the dead one's
    # fails (a broken pipe) instead of waiting
    "one-worker": {"num_workers": 1},
}
PAUSES = {"async-any": LIMITS.trainer_pause}
#: the worker that fails: the last one, or in blocks of three the last of the first block (whose
#: first two workers are done and make a batch only with it)
VICTIMS = {"async-thirds": LIMITS.block_envs // 2 - 1}
STEPS_AFTER = {"async-any": LIMITS.async_any_steps_after}
#: what the error must say of how the worker ended, beside its pid: the signal that killed it by
#: name (a shell's 128 + N is not what multiprocessing reports; its number, for one without a
#: name), its exit code, or for one stopped while it sent its infos, that it did not send them
#: (one stopped at any other moment may be in its step or done with it)
_HOW_IT_ENDED = {"killed": ("SIGKILL",), "killed_gone": ("SIGKILL",), "killed_under_timeout": ("SIGKILL",),
                 "killed_unnamed": (f"({LIMITS.unnamed_signal})",), "exited": ("code 0",), "raised": ("code 1",),
                 "stopped_sending": ("did not send the infos of its step",)}


#: what the trainer calls next: a step, or (killed workers only: a frozen one is the same wait)
#: a reset, which must not wait for the steps still running on a dead worker either;
#: "stopped_sending": stopped in its next step, with its infos flagged and not sent; "exited": ended
#: cleanly (exit code 0) in its next step, which is no less dead; "killed_gone": killed and gone
#: before the trainer's next call (the trainer paused meanwhile); "killed_under_timeout": killed while the
#: vector has a `worker_timeout` far longer than the time a dead worker may go unseen
FAULTS = [("killed", "step"), ("stopped", "step"), ("stopped_sending", "step"), ("killed", "reset"),
          ("exited", "step"), ("killed_under_timeout", "step")]


#: (fault, then, layout): every fault in the main layouts; a worker killed in batches of one worker,
#: and in blocks of three; the only worker gone before a reset or a step; a worker whose env ends
#: its process in the reset the trainer asks for (no step in flight: the error must say "reset");
#: a worker killed by a signal that has no name (a real-time one); a worker whose env raises, in
#: workers a fork server started ("@forkserver": each also watches its trainer from a thread)
#: (fault, then, layout, tracking): every case under shared tracking; under centralized tracking
#: (worker copies, completions sent to the trainer's curriculum) a frozen worker and a killed one
CASES = [(*fault, layout, "shared") for layout in ("sync", "async", "async-any") for fault in FAULTS] + \
    [("killed", "step", "async-one", "shared"), ("killed", "step", "async-thirds", "shared"),
     ("killed_gone", "reset", "one-worker", "shared"), ("killed_gone", "step", "one-worker", "shared"),
     ("stopped", "step", "sync", "centralized"), ("killed", "step", "sync", "centralized"),
     ("exited", "reset", "sync", "shared"), ("killed_unnamed", "step", "sync", "shared"),
     ("raised", "step", "sync@forkserver", "shared")]


def _assert_every_worker_ended(processes: list[Any], seed: int) -> None:
    """Every worker process ends within the deadline once the vecenv failed."""
    for process in processes:
        process.join(timeout=LIMITS.deadline)
    alive = [p.pid for p in processes if p.exitcode is None]
    assert not alive, f"worker processes {alive} still run after the vecenv failed, seed {seed}"


@pytest.mark.parametrize(("fault", "then", "layout", "tracking"), CASES,
                         ids=["-".join(case[:3]) + ("" if case[3] == "shared" else f"-{case[3]}") for case in CASES])
def test_a_dead_or_frozen_worker_is_named_never_waited_on(curriculum_factory, require_capability, scenario_seed,
                                                          fault, then, layout, tracking) -> None:
    layout, _, method = layout.partition("@")
    with start_method(method or None):
        _check_named_never_waited_on(curriculum_factory, require_capability, scenario_seed, fault, then, layout,
                                     tracking)


def _check_named_never_waited_on(curriculum_factory, require_capability, scenario_seed: int, fault: str, then: str,
                                 layout: str, tracking: str) -> None:
    shared = tracking == "shared"
    require_capability(not shared or "shared_memory" in inspect.signature(curriculum_factory).parameters,
                       "this curriculum factory takes no `shared_memory` option: worker processes cannot share it")
    curriculum = curriculum_factory(_config(scenario_seed), shared_memory=True) if shared else \
        curriculum_factory(_config(scenario_seed))
    made_before = len(_MADE_BY_THE_TRAINER)
    options = {"worker_timeout": LIMITS.worker_timeout} if fault.startswith("stopped") else \
        {"worker_timeout": LIMITS.deadline} if fault == "killed_under_timeout" else {}
    vecenv = make_curriculum_vecenv(_env, curriculum, backend="Multiprocessing", tracking=tracking, overwork=True,
                                    seed=scenario_seed, **{"num_envs": LIMITS.num_envs, **LAYOUTS[layout], **options})
    if layout == "async-any":
        vecenv.vecenv.sync_traj = False
    processes = list(vecenv.vecenv.processes)
    victim = VICTIMS.get(layout, len(processes) - 1)
    try:
        vecenv.reset(seed=scenario_seed)
        seen = [0]
        before = _steps_until_error(vecenv, LIMITS.steps_before, seen)
        assert "error" not in before and "hung" not in before, (
            f"the vecenv failed before any fault: {before}, seed {scenario_seed}")
        if fault == "stopped_sending":
            _STOP_WHILE_SENDING.value = processes[victim].pid
        elif fault == "exited":
            (_EXIT_IN_RESET if then == "reset" else _EXIT_IN_STEP).value = processes[victim].pid
        elif fault == "raised":
            os.kill(processes[victim].pid, _RAISE_ON)
        else:
            os.kill(processes[victim].pid, signal.SIGSTOP if fault == "stopped" else
                    LIMITS.unnamed_signal if fault == "killed_unnamed" else signal.SIGKILL)
            if fault == "killed_gone":
                processes[victim].join(timeout=LIMITS.deadline)
        struck = time.monotonic()
        steps_after = STEPS_AFTER.get(layout, LIMITS.steps_after)
        after = _steps_until_error(vecenv, steps_after, seen, reset_first=then == "reset",
                                   pause=PAUSES.get(layout, 0.0))
        assert not after.get("hung"), (
            f"worker {victim} {fault}, then {then}(): the vecenv was still waiting (or stepping the other workers) "
            f"{LIMITS.deadline} s later instead of raising WorkerProcessError, seed {scenario_seed}")
        error = after.get("error")
        assert isinstance(error, WorkerProcessError) and f"worker {victim}" in str(error), (
            f"worker {victim} {fault}, then {then}(): expected WorkerProcessError naming worker {victim} within "
            f"{steps_after} steps, got {error!r}, seed {scenario_seed}")
        how = [str(processes[victim].pid), *_HOW_IT_ENDED.get(fault, ())]  # (the module's docs: pid, code or signal)
        if fault in ("exited", "raised"):  # it ended in the call it was asked, not after an earlier one
            how.append(f"during its {then}")
        assert all(part in str(error) for part in how), (
            f"worker {victim} {fault}, then {then}(): the error does not say how the worker ended, expected "
            f"{how} in {str(error)!r}, seed {scenario_seed}")
        waited = after["at"] - struck
        assert waited <= LIMITS.deadline, f"the error came {waited:.1f} s after the fault, seed {scenario_seed}"
        assert fault != "killed_under_timeout" or waited <= LIMITS.dead_worker_seen, (
            f"worker {victim} killed with worker_timeout={LIMITS.deadline}: the error came {waited:.1f} s after the "
            f"kill; a dead worker must be seen within {LIMITS.dead_worker_seen} s whatever the timeout for a "
            f"frozen one, seed {scenario_seed}")
        _assert_every_worker_ended(processes, scenario_seed)
        left_open = [env for env in _MADE_BY_THE_TRAINER[made_before:] if not getattr(env, "closed", False)]
        assert made_before < len(_MADE_BY_THE_TRAINER) and not left_open, (
            f"worker {victim} {fault}: the vecenv failed and closed itself, but {len(left_open)} of the "
            f"{len(_MADE_BY_THE_TRAINER) - made_before} env(s) it made in the trainer's process are still open, seed "
            f"{scenario_seed}")
        ends = {i: p.exitcode for i, p in enumerate(processes)
                if not (fault in ("killed", "killed_gone", "killed_under_timeout", "killed_unnamed", "exited", "raised")
                        and i == victim)}
        killed = {i: code for i, code in ends.items() if code != -signal.SIGTERM}
        assert not killed, (
            f"worker {victim} {fault}: workers {sorted(killed)} ended with exit codes {killed}, not by SIGTERM (a "
            f"worker that can end politely, a frozen one once continued, must not be killed: its env's own cleanup "
            f"would not run), seed {scenario_seed}")
        with pytest.raises(WorkerProcessError) as later:  # (every later call, naming the failure again)
            vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
        assert f"worker {victim}" in str(later.value), (
            f"worker {victim} {fault}, then {then}(): the step after the failure raised {later.value!r}, which no "
            f"longer names the worker that failed, seed {scenario_seed}")
        stats = curriculum.stats()
        recorded = stats.get("total_completions", 0) + stats.get("late_completions", 0)
        assert recorded >= seen[0] > 0, (
            f"worker {victim} {fault}: the main process saw {seen[0]} completions reported, the curriculum holds "
            f"{recorded}, seed {scenario_seed}")
    finally:
        _STOP_WHILE_SENDING.value = _EXIT_IN_STEP.value = _EXIT_IN_RESET.value = 0
        for process in processes:
            if process.exitcode is None:
                os.kill(process.pid, signal.SIGKILL)
        vecenv.close()
        getattr(curriculum, "close", lambda: None)()


class _SlowToReset(ExactAccountingEnv):
    """An env whose explicit `reset()` takes a while (it builds a level)."""

    def reset(self, seed=None):
        if seed is not None:  # (the vector's resets pass a seed; the wrapper's auto-resets do not)
            time.sleep(LIMITS.slow_reset)
        return super().reset(seed)


def _env_slow_to_reset(buf=None, seed=0):
    return _SlowToReset(buf=buf, seed=seed, episode_length=LIMITS.episode_length)


def test_a_worker_that_answers_is_never_taken_for_a_stuck_one(curriculum_factory, require_capability,
                                                               scenario_seed) -> None:
    """`worker_timeout` runs from when a worker is asked: the trainer's own pauses (an
    evaluation, a checkpoint) longer than the timeout, before a step or before a reset, must
    not fail workers that answer as soon as they are asked (their env's reset builds a level
    for a while, so the vecenv checks on them while they work)."""
    require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                       "this curriculum factory takes no `shared_memory` option: worker processes cannot share it")
    curriculum = curriculum_factory(_config(scenario_seed), shared_memory=True)
    vecenv = make_curriculum_vecenv(_env_slow_to_reset, curriculum, backend="Multiprocessing", tracking="shared",
                                    num_envs=LIMITS.num_envs, overwork=True, seed=scenario_seed,
                                    worker_timeout=LIMITS.worker_timeout, **LAYOUTS["sync"])
    actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
    done = []
    try:
        vecenv.reset(seed=scenario_seed)
        for call in ("step", "reset"):
            for _ in range(LIMITS.steps_before // 4):
                vecenv.step(actions)
            time.sleep(LIMITS.worker_timeout * LIMITS.pause_over_timeout)
            vecenv.reset(seed=scenario_seed) if call == "reset" else vecenv.step(actions)
            done.append(call)
        vecenv.step(actions)
    except WorkerProcessError as error:
        pytest.fail(f"after {len(done)} pause(s) of {LIMITS.pause_over_timeout}x worker_timeout "
                    f"({LIMITS.worker_timeout} s), the {'reset' if len(done) == 1 else 'step'} that followed failed a "
                    f"worker that answers at once: {error}, seed {scenario_seed}")
    finally:
        vecenv.close()
        getattr(curriculum, "close", lambda: None)()


class _CloseFails(ExactAccountingEnv):
    """An env whose `close()` raises (a renderer or a file handle that cannot be released)."""

    def close(self) -> None:
        raise RuntimeError("the env could not release its renderer")


def _env_close_fails(buf=None, seed=0):
    return _CloseFails(buf=buf, seed=seed, episode_length=LIMITS.episode_length)


_TEST_PROCESS = os.getpid()


def _env_dies_building(buf=None, seed=0):
    """An env whose constructor ends a worker process (a missing map, a library's `os._exit`);
    built in the trainer's process (pufferlib's driver env) it is an ordinary env."""
    if os.getpid() != _TEST_PROCESS:
        os._exit(LIMITS.start_up_exit_code)
    return _env(buf=buf, seed=seed)


def _env_ignoring_sigterm(buf=None, seed=0):
    """An env that ignores SIGTERM in a worker process (a simulator with handlers of its own)."""
    if os.getpid() != _TEST_PROCESS:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return _env(buf=buf, seed=seed)


def _env_cleaning_up_on_sigterm(buf=None, seed=0):
    """An env that cleans up when SIGTERM comes (a simulator flushing its logs), for a fifth of
    the grace period, then exits with 0."""
    if os.getpid() != _TEST_PROCESS:
        def clean_up(signum, frame):
            time.sleep(LIMITS.stop_grace / 5)
            os._exit(0)
        signal.signal(signal.SIGTERM, clean_up)
    return _env(buf=buf, seed=seed)


def _ignores_sigterm(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as status:
        mask = next(line for line in status if line.startswith("SigIgn:")).split()[1]
    return bool(int(mask, 16) >> (signal.SIGTERM - 1) & 1)


#: Envs that make closing hard: what `close()` must raise (None: nothing), and the env.
HARD_TO_CLOSE = {"close fails": ("could not release its renderer", _env_close_fails),
                 "ignores SIGTERM": (None, _env_ignoring_sigterm),
                 "cleans up on SIGTERM": (None, _env_cleaning_up_on_sigterm)}


@pytest.mark.parametrize("env", sorted(HARD_TO_CLOSE))
def test_an_env_hard_to_close_still_leaves_no_worker_running(curriculum_factory, require_capability,
                                                             scenario_seed, env, monkeypatch) -> None:
    """`close()` stops and reaps every worker even when pufferlib's own close fails half-way
    (it closes its driver env first and stops the workers after; the env's error reaches the
    caller), and when the workers' env ignores SIGTERM (they are killed once the grace period,
    shortened here, ran out: one period for all of them, `close()` returns within it plus
    `LIMITS.stop_slack`). An env that cleans up on SIGTERM within the grace period gets to
    finish (its workers exit with 0, never killed). No worker process is left running, and a
    vector whose `close()` raised is closed all the same."""
    require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                       "this curriculum factory takes no `shared_memory` option: worker processes cannot share it")
    raises, make_env = HARD_TO_CLOSE[env]
    monkeypatch.setattr(vector_module, "_STOP_GRACE", LIMITS.stop_grace)
    curriculum = curriculum_factory(_config(scenario_seed), shared_memory=True)
    workers = LIMITS.num_envs if raises is None else LIMITS.num_workers  # (a grace period per worker shows)
    vecenv = make_curriculum_vecenv(make_env, curriculum, backend="Multiprocessing", tracking="shared",
                                    num_envs=LIMITS.num_envs, num_workers=workers, overwork=True,
                                    seed=scenario_seed)
    processes = list(vecenv.vecenv.processes)
    try:
        vecenv.reset(seed=scenario_seed)
        assert "error" not in _steps_until_error(vecenv, LIMITS.steps_before, [0])
        if env == "cleans up on SIGTERM":
            vecenv.close()
            codes = [p.exitcode for p in processes]
            assert codes == [0] * len(processes), (
                f"close() ended workers whose env cleans up on SIGTERM in {LIMITS.stop_grace / 5:.2f} s with exit "
                f"codes {codes} (0 each expected: the grace period of {LIMITS.stop_grace} s lets them finish), "
                f"seed {scenario_seed}")
        elif raises is None:
            assert all(_ignores_sigterm(p.pid) for p in processes), "the workers' env did not take effect"
            began = time.monotonic()
            vecenv.close()
            took = time.monotonic() - began
            assert took <= LIMITS.stop_grace + LIMITS.stop_slack, (
                f"close() took {took:.2f} s to stop {workers} workers that ignore SIGTERM, limit "
                f"{LIMITS.stop_grace + LIMITS.stop_slack:.2f} s (a grace period of {LIMITS.stop_grace} s for all of "
                f"them, then SIGKILL), seed {scenario_seed}")
        else:
            with pytest.raises(RuntimeError, match=raises):
                vecenv.close()
            _assert_closed_for_good(vecenv, scenario_seed)
        running = [p.pid for p in processes if p.exitcode is None]
        assert not running, (
            f"worker processes {running} still run after close() (the env {env}), seed {scenario_seed}")
    finally:
        for process in processes:
            if process.exitcode is None:
                os.kill(process.pid, signal.SIGKILL)
        getattr(curriculum, "close", lambda: None)()


def _assert_closed_for_good(vecenv: Any, seed: int) -> None:
    """After a `close()` that raised (the env's error reaching the caller), the vector is closed
    all the same: it says so, refuses a step by name, and a second `close()` (a `with` block's
    exit, a cleanup handler) returns quietly instead of raising the env's error again."""
    assert getattr(vecenv, "closed", True), f"after a close() that raised, the vector reports closed=False, seed {seed}"
    with pytest.raises(WorkerProcessError):
        vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
    try:
        vecenv.close()
    except Exception as error:  # noqa: BLE001 - reported below
        pytest.fail(f"a second close() after one that raised raised {type(error).__name__}: {error}, seed {seed}")


class _SlowInTheLastWorkers(ExactAccountingEnv):
    """Envs of the last half of the workers (seeds base + 2 and + 3) take `LIMITS.slow_step`
    seconds for every step."""

    def __init__(self, *, slow: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._slow = slow

    def step(self, actions):
        if self._slow:
            time.sleep(LIMITS.slow_step)
        return super().step(actions)


def _env_slow_in_the_last_workers(buf=None, seed=0):
    return _SlowInTheLastWorkers(buf=buf, seed=seed, episode_length=LIMITS.episode_length,
                                 slow=seed % LIMITS.num_envs >= LIMITS.num_envs // 2)


@pytest.mark.parametrize("layout", ["async-any", "async"])
def test_batches_never_wait_on_workers_they_do_not_need(curriculum_factory, require_capability, scenario_seed,
                                                         layout: str) -> None:
    """Batches of any two workers that are done, or of the first zero-copy block of two whose
    workers are both done (pufferlib's `sync_traj=False`; with its default it takes workers
    strictly in turn), two fast workers (the first block) and two whose every step takes
    `LIMITS.slow_step`: a batch is returned as soon as pufferlib could return one, so the fast
    pair keeps being batched while the slow ones step (a vector that waits for a worker the
    batch does not need runs at the slow workers' pace, and asynchronous batching is lost)."""
    require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                       "this curriculum factory takes no `shared_memory` option: worker processes cannot share it")
    base = scenario_seed * LIMITS.num_envs  # (env i gets seed base + i: the slow ones are the last two)
    curriculum = curriculum_factory(_config(scenario_seed), shared_memory=True)
    vecenv = make_curriculum_vecenv(_env_slow_in_the_last_workers, curriculum, backend="Multiprocessing",
                                    tracking="shared", num_envs=LIMITS.num_envs, overwork=True, seed=base,
                                    worker_timeout=LIMITS.deadline, **LAYOUTS[layout])
    vecenv.vecenv.sync_traj = False
    try:
        vecenv.async_reset(base)
        stepped = np.zeros(LIMITS.num_envs, dtype=np.int64)
        for _ in range(LIMITS.slow_batches):
            env_ids = np.asarray(vecenv.recv()[5]).ravel()
            stepped[env_ids] += 1
            vecenv.send(np.zeros(vecenv.action_space.shape, dtype=np.int32))
        slow_share = stepped[LIMITS.num_envs // 2:].sum() / stepped.sum()
        assert slow_share <= LIMITS.max_slow_share, (
            f"{layout} batches of two: the two workers whose steps take {LIMITS.slow_step} s were in "
            f"{slow_share:.0%} of the env steps of {LIMITS.slow_batches} batches (per env {stepped.tolist()}), limit "
            f"{LIMITS.max_slow_share:.0%}: the vector waited on workers a batch did not need, seed {scenario_seed}")
    finally:
        vecenv.close()
        getattr(curriculum, "close", lambda: None)()


_cleanup_marks = ""
"""Where a worker's env marks that its SIGTERM cleanup ran (set in a trainer before it forks its workers)."""
_trainer_pid = 0


def _mark_cleanup(signum: int, frame: Any) -> None:
    with open(os.path.join(_cleanup_marks, str(os.getpid())), "w"):
        pass
    os._exit(0)


def _env_cleaning_up(buf=None, seed=0):
    """An env that shuts down what it started when its worker gets SIGTERM (its handler)."""
    signal.signal(signal.SIGTERM, _mark_cleanup)
    return _env(buf=buf, seed=seed)


def _env_building_for_good(buf=None, seed=0):
    """An env whose constructor never returns in a worker (it waits for a server that never
    answers), after writing the worker's pid where the test reads it."""
    if os.getpid() != _trainer_pid:
        with open(os.path.join(_cleanup_marks, f"building-{os.getpid()}"), "w"):
            pass
        time.sleep(600)
    return _env(buf=buf, seed=seed)


def _trainer(conn, marks: str, building: bool = False) -> None:
    """A trainer (forked, as a launcher starts one): a shared-curriculum vector, a few steps, its
    worker pids sent back, then it waits to be killed. Its workers' envs mark in `marks` that
    their SIGTERM cleanup ran; `building`: the envs never finish building (no pids are sent)."""
    global _cleanup_marks, _trainer_pid
    _cleanup_marks, _trainer_pid = marks, os.getpid()
    curriculum = Curriculum(_config(0), shared_memory=True)
    vecenv = make_curriculum_vecenv(_env_building_for_good if building else _env_cleaning_up, curriculum,
                                    backend="Multiprocessing", tracking="shared",
                                    num_envs=LIMITS.num_envs, num_workers=LIMITS.num_workers, overwork=True)
    vecenv.reset(seed=0)
    for _ in range(LIMITS.steps_before):
        vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
    conn.send([p.pid for p in vecenv.vecenv.processes])
    time.sleep(60)


#: The same trainer as a script of its own that returns without `close()`: an interpreter's
#: exit (a forked process exits another way, and does not show a vector that hangs it).
_RETURNING_TRAINER = """
import numpy as np
from curriculum import Curriculum, CurriculumConfig, SingleTaskGenerator, UniformConfig
from curriculum.vector import make_curriculum_vecenv
from harness.envs import ExactAccountingEnv

config = CurriculumConfig(task_generator=SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25}),
                          algorithm=UniformConfig(), num_active_tasks=4, seed=0)
curriculum = Curriculum(config, shared_memory=True)
vecenv = make_curriculum_vecenv(lambda buf=None, seed=0: ExactAccountingEnv(buf=buf, seed=seed), curriculum,
                                backend="Multiprocessing", tracking="shared", num_envs=4, num_workers=2, overwork=True)
vecenv.reset(seed=0)
for _ in range(20):
    vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
print(*[p.pid for p in vecenv.vecenv.processes], flush=True)
"""

#: A trainer whose workers a fork server starts (Python 3.14's default on Linux, and a common
#: choice beside torch): their parent is the server, not the trainer, which then dies by SIGKILL.
_FORK_SERVER_TRAINER = """
import multiprocessing, os, signal
multiprocessing.set_start_method("forkserver")
import numpy as np
from curriculum import Curriculum, CurriculumConfig, SingleTaskGenerator, UniformConfig
from curriculum.vector import make_curriculum_vecenv
from harness.envs import ExactAccountingEnv

config = CurriculumConfig(task_generator=SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25}),
                          algorithm=UniformConfig(), num_active_tasks=4, seed=0)
curriculum = Curriculum(config, shared_memory=True)
vecenv = make_curriculum_vecenv(ExactAccountingEnv, curriculum, backend="Multiprocessing", tracking="shared",
                                num_envs=4, num_workers=2, overwork=True)
vecenv.reset(seed=0)
for _ in range(20):
    vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
print(*[p.pid for p in vecenv.vecenv.processes], flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_vector_dropped_without_close_stops_its_workers(uses_builtin_curriculum, require_capability,
                                                          scenario_seed) -> None:
    """A vector the trainer drops without `close()` (rebuilt for a new run in one script, a
    notebook cell run again) is collected, and its worker processes stop with it: none is left
    holding a core for the rest of the trainer's life."""
    require_capability(uses_builtin_curriculum, "checks the library's vector, not the curriculum under test")
    curriculum = Curriculum(_config(scenario_seed), shared_memory=True)
    try:
        vecenv = make_curriculum_vecenv(_env, curriculum, backend="Multiprocessing", tracking="shared",
                                        num_envs=LIMITS.num_envs, overwork=True, seed=scenario_seed,
                                        **LAYOUTS["sync"])
        vecenv.reset(seed=scenario_seed)
        vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
        processes = list(vecenv.vecenv.processes)
        pids = [process.pid for process in processes]
        del vecenv
        gc.collect()
        deadline = time.monotonic() + LIMITS.deadline
        while any(is_running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [pid for pid in pids if is_running(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, (
            f"worker processes {left} of a vector dropped without close() still ran {LIMITS.deadline} s later "
            f"(the vector was never collected, or collecting it stopped nothing), seed {scenario_seed}")
        killed = {process.pid: process.exitcode for process in processes if process.exitcode != -signal.SIGTERM}
        assert not killed, (
            f"workers of a vector dropped without close() ended with exit codes {killed}, not by SIGTERM (a worker "
            f"that can end politely must not be killed: its env's own cleanup would not run), seed {scenario_seed}")
    finally:
        curriculum.close()


def _trainer_in_a_child(conn: Any, seed: int) -> None:
    """A trainer that is itself a multiprocessing child (a sweep launcher's trial, a supervisor
    restarting training): its vector's env ignores SIGTERM; it sends its workers' pids, then the
    exit codes `close()` left them with."""
    curriculum = Curriculum(_config(seed), shared_memory=True)
    try:
        vecenv = make_curriculum_vecenv(_env_ignoring_sigterm, curriculum, backend="Multiprocessing",
                                        tracking="shared", num_envs=LIMITS.num_envs, overwork=True, seed=seed,
                                        **LAYOUTS["sync"])
        processes = list(vecenv.vecenv.processes)
        conn.send([process.pid for process in processes])
        vecenv.reset(seed=seed)
        vecenv.close()
        conn.send([process.exitcode for process in processes])
    finally:
        curriculum.close()


def test_a_trainer_that_is_itself_a_child_process_stops_its_workers(uses_builtin_curriculum, require_capability,
                                                                    scenario_seed, monkeypatch) -> None:
    """A trainer run in a multiprocessing child closes its vector as one run in the main process
    does: when `close()` returns, every worker has ended (killed once the grace period ran out,
    since its env ignores SIGTERM). Whose workers they are is the vector's creator's to decide,
    not whether a process has a parent."""
    require_capability(uses_builtin_curriculum, "checks the library's vector, not the curriculum under test")
    monkeypatch.setattr(vector_module, "_STOP_GRACE", LIMITS.stop_grace)  # (the child forks with it)
    here, there = mp.get_context("fork").Pipe()
    trainer = mp.get_context("fork").Process(target=_trainer_in_a_child, args=(there, scenario_seed))
    trainer.start()
    pids: list[int] = []
    try:
        assert here.poll(LIMITS.deadline), "the child trainer sent no worker pids"
        pids = here.recv()
        assert here.poll(LIMITS.deadline), f"the child trainer's close() did not return within {LIMITS.deadline} s"
        codes = here.recv()
        assert None not in codes, (
            f"close() in a trainer that is itself a child process returned with workers still running (exit codes "
            f"{codes}; their env ignores SIGTERM, so they must be killed once the grace period of "
            f"{LIMITS.stop_grace} s ran out), seed {scenario_seed}")
    finally:
        trainer.join(timeout=LIMITS.deadline)
        if trainer.is_alive():
            trainer.kill()
        for pid in pids:
            if is_running(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("method", [None, "forkserver"])
def test_a_worker_holds_as_much_with_one_env_as_with_many(uses_builtin_curriculum, require_capability,
                                                          method: str | None) -> None:
    """A worker process watches its trainer once, however many envs it runs: the threads each
    worker runs after a few steps are the same with one env per worker as with four, whether
    its parent is the trainer (this platform's start method) or a fork server, and so are the
    file descriptors a fork server's worker holds (a watcher thread or a descriptor per env
    would grow with the vector and live as long as the worker)."""
    require_capability(uses_builtin_curriculum, "checks the library's vector, not the curriculum under test")
    held: dict[int, list[tuple[int, ...]]] = {}
    counted = 2 if method == "forkserver" else 1  # a forked worker also holds the trainer's descriptors
    with start_method(method):
        for per_worker in (1, 4):
            curriculum = Curriculum(_config(0), shared_memory=True)
            try:
                with make_curriculum_vecenv(ExactAccountingEnv, curriculum, backend="Multiprocessing",
                                            tracking="shared", num_envs=per_worker,
                                            num_workers=1, overwork=True) as vecenv:
                    vecenv.reset(seed=0)
                    for _ in range(LIMITS.steps_before):
                        vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
                    held[per_worker] = [held_resources(process.pid)[:counted] for process in vecenv.vecenv.processes]
            finally:
                curriculum.close()
    assert held[1] == held[4], (
        f"workers started by {method or mp.get_start_method()} hold ({'threads, file descriptors' if counted == 2 else 'threads,'}) "
        f"{held[4]} with 4 envs "
        f"each but {held[1]} with 1: what a worker opens once per process was opened once per env")


def _pids_building(marks: str, count: int) -> list[int]:
    """The pids of the `count` workers that began building their envs (waits up to the deadline)."""
    deadline = time.monotonic() + LIMITS.deadline
    while time.monotonic() < deadline:
        pids = [int(name.split("-")[1]) for name in os.listdir(marks) if name.startswith("building-")]
        if len(pids) == count:
            return sorted(pids)
        time.sleep(0.05)
    return []


def _a_worker_of(trainer_pid: int) -> None:
    """A process started as a worker of `trainer_pid` by another process (a fork server): it
    watches its trainer as the vector's workers do, then waits to be ended."""
    vector_module._end_with_parent(trainer_pid)
    time.sleep(LIMITS.deadline * 2)


@pytest.mark.parametrize("trainer", ["gone before the worker starts", "killed once the worker runs"])
def test_a_worker_ends_with_its_trainer_whenever_the_trainer_dies(uses_builtin_curriculum, require_capability,
                                                                   trainer: str) -> None:
    """A worker that a fork server started (its parent is not its trainer) watches its trainer
    and ends by SIGTERM once it is gone: killed while the worker runs, or gone already when the
    worker starts (a trainer killed while it asked for its workers), which the watch finds at
    once, not never."""
    require_capability(uses_builtin_curriculum, "checks the library's vector, not the curriculum under test")
    require_capability(sys.platform == "linux", "workers watch their trainer on Linux")
    trainer_process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    if trainer == "gone before the worker starts":
        trainer_process.kill()
        trainer_process.wait()
    worker = mp.get_context("fork").Process(target=_a_worker_of, args=(trainer_process.pid,), daemon=True)
    worker.start()
    try:
        if trainer == "killed once the worker runs":
            time.sleep(0.2)
            trainer_process.kill()
            trainer_process.wait()
        worker.join(timeout=LIMITS.deadline)
        assert worker.exitcode == -signal.SIGTERM, (
            f"a worker whose trainer was {trainer} ended with {worker.exitcode} (None: still running "
            f"{LIMITS.deadline} s later); expected SIGTERM ({-signal.SIGTERM})")
    finally:
        if worker.is_alive():
            worker.kill()
            worker.join()
        if trainer_process.poll() is None:
            trainer_process.kill()
            trainer_process.wait()


def test_no_worker_outlives_its_trainer(uses_builtin_curriculum, require_capability, tmp_path) -> None:
    """A trainer SIGKILLed mid-run (the OOM killer), one whose workers a fork server started
    SIGKILLed too, one SIGKILLed while its workers still build their envs, and one whose script
    returns without `close()`: each exits within `LIMITS.deadline` and no worker process is
    left running (orphans would hold their cores, and the shared memory, until the machine
    restarts); the workers of the one killed mid-run end by SIGTERM, so their envs' own
    SIGTERM handlers shut down what they started (a simulator, a server); the returning one
    exits with 0 and no warning or error on stderr (such as multiprocessing's resource tracker
    reporting leaked shared memory). The four trainers run side by side."""
    require_capability(uses_builtin_curriculum, "checks the library's vector, not the curriculum under test")
    returning = subprocess.Popen([sys.executable, "-c", _RETURNING_TRAINER], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    forkserved = subprocess.Popen([sys.executable, "-c", _FORK_SERVER_TRAINER], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
    marks, building_marks = tmp_path / "killed", tmp_path / "building"
    marks.mkdir()
    building_marks.mkdir()
    here, there = mp.get_context("fork").Pipe()
    killed = mp.get_context("fork").Process(target=_trainer, args=(there, str(marks)))
    killed.start()
    building = mp.get_context("fork").Process(target=_trainer, args=(None, str(building_marks), True))
    building.start()
    workers: dict[str, list[int]] = {}
    try:
        assert here.poll(LIMITS.deadline), "the trainer to be killed sent no worker pids"
        workers["killed"] = here.recv()
        os.kill(killed.pid, signal.SIGKILL)
        workers["killed while its workers build their envs"] = _pids_building(str(building_marks),
                                                                             LIMITS.num_workers)
        assert workers["killed while its workers build their envs"], (
            "the trainer whose workers build their envs for good started no worker")
        os.kill(building.pid, signal.SIGKILL)
        workers["returned without close"] = [int(pid) for pid in returning.stdout.readline().split()]
        assert workers["returned without close"], f"the returning trainer did not start: {returning.stderr.read()}"
        served = "killed, its workers started by a fork server"
        workers[served] = [int(pid) for pid in forkserved.stdout.readline().split()]
        assert workers[served], f"the trainer with a fork server did not start: {forkserved.stderr.read()}"
        deadline = time.monotonic() + LIMITS.deadline
        try:
            returning.wait(timeout=LIMITS.deadline)
        except subprocess.TimeoutExpired:
            pytest.fail(f"a trainer whose script returned without close() was still running {LIMITS.deadline} s "
                        "later (hung at exit)")
        complaints = [line for line in returning.stderr.read().splitlines()
                      if any(word in line for word in ("Warning", "Error", "Traceback", "leaked"))]
        assert returning.returncode == 0 and not complaints, (
            f"a trainer whose script returned without close() exited with {returning.returncode} and "
            f"{len(complaints)} complaint(s) on stderr (the library must release what it opened, its shared "
            f"memory unregistered from multiprocessing's resource tracker): {complaints[:4]}")
        while any(is_running(pid) for pids in workers.values() for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = {end: [pid for pid in pids if is_running(pid)] for end, pids in workers.items()}
        assert not any(left.values()), (
            f"worker processes still run {LIMITS.deadline} s after their trainer ended: "
            f"{ {end: pids for end, pids in left.items() if pids} }")
        cleaned = sorted(int(name) for name in os.listdir(marks))
        assert cleaned == sorted(workers["killed"]), (
            f"the workers {sorted(workers['killed'])} of a trainer killed mid-run ended, but only {cleaned} ran their "
            "envs' SIGTERM handler: the others were killed outright, and what their envs started is left running")
    finally:
        for trainer in (returning, forkserved):
            if trainer.poll() is None:
                trainer.kill()
            trainer.wait()
        for trainer in (killed, building):
            if trainer.is_alive():
                trainer.kill()
            trainer.join(timeout=10)
        for pid in (pid for pids in workers.values() for pid in pids):
            if is_running(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_worker_that_dies_building_its_envs_is_named_during_its_start_up(scenario_seed) -> None:
    """A worker whose env constructor ends its process fails the vector's first wait with
    `WorkerProcessError` naming the worker, its exit code and the phase it died in: during its
    start-up (which is what its traceback on stderr is about), not after it, as a worker that
    started and then died idle would be."""
    curriculum = Curriculum(_config(scenario_seed))
    vecenv = None
    try:
        vecenv = make_curriculum_vecenv(_env_dies_building, curriculum, backend="Multiprocessing",
                                        tracking="centralized", num_envs=LIMITS.num_workers,
                                        num_workers=LIMITS.num_workers, overwork=True, seed=scenario_seed)
        for process in vecenv.vecenv.processes:  # dead before the trainer's first call
            process.join(timeout=LIMITS.deadline)
        with pytest.raises(WorkerProcessError) as failure:
            vecenv.reset(seed=scenario_seed)
        expected = [f"code {LIMITS.start_up_exit_code}", "during its start-up"]
        assert all(part in str(failure.value) for part in expected), (
            f"every worker's env constructor ended its process: expected {expected} in {str(failure.value)!r}, "
            f"seed {scenario_seed}")
    finally:
        if vecenv is not None:
            vecenv.close()
        curriculum.close()


def test_a_dead_worker_is_named_even_when_the_env_fails_to_close(curriculum_factory, require_capability,
                                                                 scenario_seed) -> None:
    """A worker dies, and as the vector closes itself the env's own `close()` raises too: the
    trainer's step still raises `WorkerProcessError` naming the dead worker (what went wrong
    first), not the close's error, and every worker is stopped all the same."""
    require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                       "this curriculum factory takes no `shared_memory` option: worker processes cannot share it")
    curriculum = curriculum_factory(_config(scenario_seed), shared_memory=True)
    vecenv = make_curriculum_vecenv(_env_close_fails, curriculum, backend="Multiprocessing", tracking="shared",
                                    num_envs=LIMITS.num_workers, num_workers=LIMITS.num_workers, overwork=True,
                                    seed=scenario_seed)
    processes = list(vecenv.vecenv.processes)
    victim = len(processes) - 1
    try:
        vecenv.reset(seed=scenario_seed)
        assert "error" not in _steps_until_error(vecenv, LIMITS.steps_before, [0])
        os.kill(processes[victim].pid, signal.SIGKILL)
        error = _steps_until_error(vecenv, LIMITS.steps_after, [0]).get("error")
        assert isinstance(error, WorkerProcessError) and f"worker {victim}" in str(error), (
            f"worker {victim} killed, and the env's close() fails as the vector closes itself: the step raised "
            f"{error!r}; expected WorkerProcessError naming worker {victim}, seed {scenario_seed}")
        _assert_every_worker_ended(processes, scenario_seed)
    finally:
        for process in processes:
            if process.exitcode is None:
                os.kill(process.pid, signal.SIGKILL)
        with contextlib.suppress(RuntimeError):  # (the env's close fails again)
            vecenv.close()
        getattr(curriculum, "close", lambda: None)()


class _UnsendableInfos(ExactAccountingEnv):
    """An env whose every step's infos hold a callback, which no pickle takes: a worker flags
    its infos and dies sending them."""

    def step(self, actions):
        observations, rewards, terminals, truncations, infos = super().step(actions)
        return observations, rewards, terminals, truncations, [*infos, {"callback": lambda: None}]


def _env_unsendable_infos(buf=None, seed=0):
    return _UnsendableInfos(buf=buf, seed=seed)


def test_a_worker_that_dies_sending_its_infos_is_named() -> None:
    """Workers whose infos cannot be pickled die sending them, after flagging them: the trainer's
    step must raise `WorkerProcessError` naming a worker, and the vector close itself, never let
    pufferlib's read of a closed pipe (`EOFError`) out with the vector left open."""
    curriculum = Curriculum(_config(0), shared_memory=True)
    vecenv = make_curriculum_vecenv(_env_unsendable_infos, curriculum, backend="Multiprocessing", num_envs=2,
                                    num_workers=2, seed=0)
    try:
        vecenv.reset(seed=0)
        try:
            for _ in range(LIMITS.steps_after):
                vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
        except WorkerProcessError as error:
            assert "worker" in str(error) and vecenv.closed, (
                f"workers died sending their infos: {error!r}, the vector closed itself: {vecenv.closed}")
        except Exception as error:  # noqa: BLE001 - reported below
            pytest.fail(f"workers died sending their infos: the step raised {type(error).__name__}: {error}, not "
                        f"WorkerProcessError (the vector closed itself: {vecenv.closed})")
        else:
            pytest.fail(f"workers died sending their infos, and {LIMITS.steps_after} steps raised nothing")
    finally:
        vecenv.close()
        curriculum.close()
