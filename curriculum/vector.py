"""Many vectorized workers, one curriculum: the shared-memory and the centralized design.

Both run on pufferlib's `Serial` and `Multiprocessing` backends behind one interface
(`CurriculumVecEnv`), built by `make_curriculum_vecenv(...)`; both record every episode exactly
once, never let a worker sample from a stage the global state has not reached, and bound the
stage lag after an advancement by one vec step.

- Shared memory (`tracking="shared"`): the curriculum is `Curriculum(config,
  shared_memory=True)`. Forked (or unpickled) into each worker it attaches to the same shared
  tracker; every worker's `CurriculumEnv` records its own completions there, under the
  tracker's lock, and the stage lives in shared memory, so the other workers draw from the new
  stage from their next task on (lag below one vec step). Each worker process reseeds its
  handle once (`CurriculumEnv(seed=...)`) so workers draw different task sequences. Works with
  every algorithm. A local curriculum is accepted on `Serial` only (one process).
- Centralized (`tracking="centralized"`): the curriculum is local and lives in the main
  process. Each worker process gets a private copy (pickled, so recording into it raises
  `WorkerCopyError`) and runs `CurriculumEnv(local_tracking=False)`, which reports each
  completion in its episode-end info. `CentralizedCurriculumVecEnv` records every reported
  completion into the main curriculum as the vec step's infos arrive (each info once), so
  stage advancement and regression are decided there, then publishes `sync_state()` on a
  `StageBroadcast`. Workers adopt it before their next task draw, so a task drawn after the
  vec step that advanced the stage is of the new stage: lag at most one vec step. Tasks drawn
  before arrive as late completions (the stage change refilled the pool). Only staged
  progression and uniform curricula are supported: worker copies cannot follow a pool that
  the main process changes by evicting tasks (learning progress), and a broadcast of the pool
  would cost O(pool) per change; use shared memory for learning progress.

How the stage reaches Multiprocessing workers: pufferlib's `Multiprocessing` has no
`env_method`, and its pipes carry only actions and infos. `StageBroadcast` is a 3-word
`multiprocessing.RawArray` (sequence number, stage, stage changes) created in the main process
before `pufferlib.vector.make` and closed over by the env creator, so forked workers map the
same memory (spawned ones receive it through the process arguments). The main process writes
it between vec steps (sequence lock: odd while writing); a worker's `CurriculumEnv` reads the
sequence number at each episode end and applies the new state only when it changed.

"One vec step" is one step of the whole vector with pufferlib's default synchronous batches
(`batch_size == num_envs`); with smaller, asynchronous batches it is one step of the worker's
own batch.

Worker failures (Multiprocessing). pufferlib waits for its workers in a busy loop that never
looks at whether they are alive, so a dead worker used to hang the main process forever, and
its non-daemon workers kept the interpreter from exiting. The wrapper waits itself, before
handing control to pufferlib's `recv()` (or `async_reset()`), until pufferlib can return at
once, whatever the batching (`batch_size` of all workers, of one, of a contiguous block, or
fully asynchronous with `zero_copy=False`), and checks every `WORKER_CHECK_PERIOD` seconds that
every worker is alive. A worker that died (an exception in its env, a signal) becomes
`WorkerProcessError` within that period, naming the worker, its pid, its exit code or
signal, and what it was last asked to do (its start-up, a step or a reset) and whether it died
during it or after it; with `worker_timeout=` a worker that is alive but has not answered for
that long does too. On that error the vecenv closes itself: every worker is stopped (SIGTERM,
then SIGKILL) and reaped, so an uncaught error lets the interpreter exit, and any later `reset()`, `step()`,
`send()` or `recv()` raises `WorkerProcessError` instead of waiting. A vecenv that is never
closed stops its workers when it is garbage-collected or when the interpreter exits, and a
worker process ends itself when the main process dies, even by SIGKILL (Linux: through
`PR_SET_PDEATHSIG`, or, for a worker a fork server started, a thread watching the main
process through a pidfd). The default `num_workers` on Multiprocessing is the most workers
that fit the physical cores (pufferlib refuses more without `overwork=True`, and
pufferlib-core 3.0.7 then fails with an `AttributeError` instead of its own message).

Resets (Multiprocessing). A `reset()` (or `async_reset()`) between steps never waits on a
worker that already answered, and loses no episode: the infos of steps still running when it is
called, or received but not yet returned in a batch, are read first (a centralized curriculum
records their completions) and come at the head of the reset's infos. pufferlib-core 3.0.7's
own `async_reset()` blocks for ever after a batch whose workers sent infos (it reads their
pipes again) and drops the others' infos. On Serial, a `reset()` that an env's own reset made
raise hands that error on, and the `reset()` that follows hands over no infos a step already
did (pufferlib's reset stops at the env that raised, its infos still the last step's).

Built by hand instead of with the factory: create the `StageBroadcast` first, pass it as
`stage_source=` to every worker's `CurriculumEnv(local_tracking=False)`, and wrap the vecenv
in `CentralizedCurriculumVecEnv(vecenv, curriculum, stage_broadcast=broadcast)`.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import multiprocessing
import multiprocessing.connection
import multiprocessing.util
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from numbers import Integral, Real
from typing import Any, Final, Protocol

import numpy as np
import psutil
import pufferlib
import pufferlib.pufferlib
import pufferlib.vector

from curriculum.config import StagedProgressionConfig, UniformConfig
from curriculum.env import DEFAULT_STATS_INTERVAL, CompletionRecorder, CurriculumEnv, ScoreFn, _check_interval
from curriculum.errors import CurriculumConfigError, EnvContractError, EpisodeNotStartedError, WorkerProcessError
from curriculum.stats import COMPLETION_INFO_KEY, STAGE, stat_key

__all__ = [
    "BACKENDS",
    "TRACKING_MODES",
    "VEC_OPTIONS",
    "StageBroadcast",
    "CurriculumVecEnv",
    "SharedCurriculumVecEnv",
    "CentralizedCurriculumVecEnv",
    "make_curriculum_vecenv",
    "default_num_workers",
    "physical_cores",
    "MAX_NUM_ENVS",
    "WORKER_CHECK_PERIOD",
]

BACKENDS: Final = ("Serial", "Multiprocessing")
"""pufferlib backends the curriculum designs are held to."""

TRACKING_MODES: Final = ("shared", "centralized")
"""The two designs: shared-memory tracker, or main-process tracking with a stage broadcast."""

VEC_OPTIONS: Final = ("batch_size", "zero_copy", "overwork")
"""Extra keyword arguments passed through to `pufferlib.vector.make`."""

MAX_NUM_ENVS: Final = 65_536
"""Most envs one vector accepts: pufferlib builds every env up front, so a larger number is
a typo rather than a plan (and would exhaust memory before saying so)."""

WORKER_CHECK_PERIOD: Final = 0.05
"""Seconds between two checks that every worker is alive while the main process waits."""

_STOP_GRACE: Final = 2.0
"""Seconds a stopped worker gets to exit after SIGTERM before it is killed."""

_WAIT_SPINS: Final = 256
"""Checks the main process makes, yielding the core between them, before it naps between
further ones: a batch of fast envs is caught at once, a slow one leaves the cores to the
workers instead of spinning on one of them."""

_WAIT_NAP: Final = 1e-4
"""Seconds of each nap between checks once `_WAIT_SPINS` found nothing ready."""

if not hasattr(pufferlib, "APIUsageError"):
    # pufferlib-core 3.0.7 raises `pufferlib.APIUsageError` but never exports it, so each of its
    # own usage errors surfaces as "module 'pufferlib' has no attribute 'APIUsageError'".
    pufferlib.APIUsageError = pufferlib.pufferlib.APIUsageError


class StageBroadcast:
    """The main process's `sync_state()`, readable by every worker process.

    Three int64 words in a `multiprocessing.RawArray`: a sequence number (0 before the first
    publish, odd while a publish is in progress), the stage and the stage-change count. One
    writer (the main process); readers retry if the sequence number moved under them.
    """

    def __init__(self) -> None:
        self._raw = multiprocessing.RawArray(ctypes.c_int64, 3)
        self._words = np.frombuffer(self._raw, dtype=np.int64)

    def __getstate__(self) -> dict[str, Any]:
        return {"raw": self._raw}  # a RawArray pickles only while spawning a process

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._raw = state["raw"]
        self._words = np.frombuffer(self._raw, dtype=np.int64)

    @property
    def version(self) -> int:
        """Sequence number of the last publish (changes with every publish)."""
        return self._words.item(0)

    def publish(self, sync: Mapping[str, int]) -> None:
        """Make `sync` (`stage`, `stage_changes`) the state workers adopt at their next task draw."""
        words = self._words
        seq = words.item(0)
        words[0] = seq + 1
        words[1] = int(sync["stage"])
        words[2] = int(sync["stage_changes"])
        words[0] = seq + 2

    def read(self) -> dict[str, int] | None:
        """The last published state, or None before the first publish."""
        words = self._words
        while True:
            seq = words.item(0)
            if seq == 0:
                return None
            if seq & 1:
                continue
            stage, changes = words.item(1), words.item(2)
            if words.item(0) == seq:
                return {"stage": stage, "stage_changes": changes}


class CurriculumVecEnv(Protocol):
    """What both designs offer a training loop: pufferlib's vecenv interface plus the curriculum."""

    curriculum: Any
    tracking: str
    vecenv: Any

    @property
    def num_envs(self) -> int: ...

    @property
    def num_agents(self) -> int: ...

    def reset(self, seed: int | None = 0) -> tuple[np.ndarray, list[dict[str, Any]]]: ...

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]: ...

    def async_reset(self, seed: int | None = 0) -> None: ...

    def send(self, actions: Any) -> None: ...

    def recv(self) -> tuple[Any, ...]: ...

    def close(self) -> None: ...


class SharedCurriculumVecEnv:
    """A pufferlib vecenv whose workers record into one shared curriculum (`tracking="shared"`).

    Forwards pufferlib's vecenv interface explicitly. On `Multiprocessing` it turns a worker
    that died (or, with `worker_timeout`, hangs) into `WorkerProcessError` in every batching
    mode, then closes itself (module docstring, "Worker failures").
    """

    tracking = "shared"

    def __init__(self, vecenv: Any, curriculum: Any, *, worker_timeout: float | None = None) -> None:
        self.vecenv = vecenv
        self.curriculum = curriculum
        self.worker_timeout = _check_worker_timeout(worker_timeout)
        self._closed = False
        self._failure: str | None = None
        self._processes: list[Any] = list(getattr(vecenv, "processes", None) or ())
        self._sentinels = [process.sentinel for process in self._processes]
        self._next_check = 0.0
        self._running = ["start-up"] * len(self._processes)  # per worker, what it was last asked to do
        self._asked_at = [time.monotonic()] * len(self._processes)  # and when
        self._delivered: set[int] = set()  # workers whose last answer a batch returned, not asked since
        self._drained: list[Any] = []  # infos read before a reset, returned with its infos
        self._stopper = None
        if self._processes:  # stop the workers if this object is dropped unclosed, or at exit
            self._stopper = multiprocessing.util.Finalize(
                self, _stop_workers, args=(self._processes, os.getpid()), exitpriority=100
            )

    # ---- explicit delegation -----------------------------------------------------------------
    @property
    def num_envs(self) -> int:
        return self.vecenv.num_envs

    @property
    def num_agents(self) -> int:
        return self.vecenv.num_agents

    @property
    def agents_per_batch(self) -> int:
        return self.vecenv.agents_per_batch

    @property
    def single_observation_space(self) -> Any:
        return self.vecenv.single_observation_space

    @property
    def single_action_space(self) -> Any:
        return self.vecenv.single_action_space

    @property
    def observation_space(self) -> Any:
        return self.vecenv.observation_space

    @property
    def action_space(self) -> Any:
        return self.vecenv.action_space

    @property
    def driver_env(self) -> Any:
        return self.vecenv.driver_env

    @property
    def agent_ids(self) -> np.ndarray:
        return self.vecenv.agent_ids

    @property
    def emulated(self) -> bool:
        return self.vecenv.emulated

    @property
    def closed(self) -> bool:
        """Whether the vecenv was closed (by `close()` or by itself after a worker failure)."""
        return self._closed

    # ---- vecenv interface --------------------------------------------------------------------
    def async_reset(self, seed: int | None = 0) -> None:
        self._check_usable()
        if not self._processes:
            self._settle_in_process_before_reset()
            self.vecenv.async_reset(seed)
            return
        self._settle_before_reset()
        self._running = ["reset"] * len(self._processes)
        self._asked_at = [time.monotonic()] * len(self._processes)
        self._delivered.clear()
        with self._pipes_of_dead_workers():
            self.vecenv.async_reset(seed)

    def send(self, actions: Any) -> None:
        self._check_usable()
        vecenv = self.vecenv
        if vecenv.flag != pufferlib.vector.SEND:
            raise EpisodeNotStartedError(
                "The vecenv was stepped before its reset; call reset() (or async_reset() and recv()) first"
            )
        actions = np.asarray(actions)
        if not vecenv.initialized and not vecenv.action_space.contains(actions):
            raise EnvContractError(
                f"Expected actions in the vecenv's action space {vecenv.action_space}, received an array of shape "
                f"{actions.shape} and dtype {actions.dtype}"
            )
        if self._processes:
            now = time.monotonic()
            for worker in self._batch_workers():
                self._running[worker] = "step"
                self._asked_at[worker] = now
                self._delivered.discard(worker)
        vecenv.send(actions)

    def recv(self) -> tuple[Any, ...]:
        self._check_usable()
        if self.vecenv.flag != pufferlib.vector.RECV:
            raise EpisodeNotStartedError("recv() called with nothing to receive; call async_reset() or send() first")
        if self._processes:
            self._await(_batch_ready)
            with self._pipes_of_dead_workers():
                result = self.vecenv.recv()
            self._delivered.update(self._batch_workers())
        else:
            result = self.vecenv.recv()
        self._on_infos(result[4])
        if self._drained:  # the episode ends of steps a reset cut short come with the reset's infos
            result[4][:0] = self._drained
            self._drained = []
        return result

    def reset(self, seed: int | None = 0) -> tuple[np.ndarray, list[dict[str, Any]]]:
        self.async_reset(seed)
        obs, _, _, _, infos, _, _ = self.recv()
        return obs, infos

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        self.send(actions)
        obs, rewards, terminals, truncations, infos, _, _ = self.recv()
        return obs, rewards, terminals, truncations, infos

    def close(self) -> None:
        """Close the vecenv and stop and reap its workers (the curriculum stays open: the caller owns it)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.vecenv.close()
        finally:
            if self._stopper is not None:
                self._stopper()  # runs _stop_workers once and unregisters it

    def __enter__(self) -> SharedCurriculumVecEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- hooks -------------------------------------------------------------------------------
    def _on_infos(self, infos: list[Any]) -> None:
        """Called with every vec step's infos, before they are returned."""

    def _batch_workers(self) -> list[int]:
        """The workers of the batch the last `recv()` returned (the one `send()` answers)."""
        batch = self.vecenv.w_slice
        workers = range(len(self._processes))[batch] if isinstance(batch, slice) else np.atleast_1d(batch)
        return [int(worker) for worker in workers]

    def _settle_in_process_before_reset(self) -> None:
        """Keep the infos of a step sent and not received (an in-process vector steps its envs
        in `send()`): pufferlib's reset replaces them, and with them the episode ends they
        report. They are handled now (a centralized completion recorded) and returned at the
        head of the reset's infos."""
        vecenv = self.vecenv
        if vecenv.flag == pufferlib.vector.RECV:
            infos = list(getattr(vecenv, "infos", None) or ())
            self._on_infos(infos)
            self._drained += infos
        vecenv.infos = []  # handed on: a reset an env makes raise half-way leaves none to hand on again

    def _settle_before_reset(self) -> None:
        """Leave pufferlib's `async_reset()` nothing to wait for and no infos to drop.

        pufferlib drains every waiting worker first, reading the pipe of each whose semaphore
        says it sent infos. A worker whose answer a batch already returned keeps that flag with
        its pipe read (pufferlib-core 3.0.7 then blocks for ever on the empty pipe); steps still
        running, and answers received but not yet in a batch, end in infos pufferlib would drop,
        and with them the completions a centralized curriculum records from them. So: clear the
        flag of the delivered workers, wait for the running ones, read their infos here (their
        completions recorded now) and return them at the head of the reset's infos.
        """
        vecenv = self.vecenv
        semaphores = vecenv.buf["semaphores"]
        info = pufferlib.vector.INFO
        for worker in self._delivered:
            if semaphores[worker] == info:
                semaphores[worker] = pufferlib.vector.MAIN
        self._await(_workers_idle)
        infos: list[Any] = []
        for worker in vecenv.waiting_workers:
            if semaphores[worker] == info:
                with self._pipes_of_dead_workers():
                    infos.extend(vecenv.recv_pipes[worker].recv())
                semaphores[worker] = pufferlib.vector.MAIN
        for worker, pending in enumerate(getattr(vecenv, "infos", ())):  # (none before the first reset)
            infos.extend(pending)
            vecenv.infos[worker] = []
        self._on_infos(infos)
        self._drained += infos

    # ---- worker failures ---------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self._failure is not None:
            raise WorkerProcessError(f"The vecenv closed itself after a worker failure: {self._failure}")
        if self._closed:
            raise WorkerProcessError("The vecenv is closed and its workers are stopped; build a new one")

    def _await(self, ready: Callable[[Any], bool]) -> None:
        """Return once `ready(vecenv)`, i.e. once pufferlib will not wait; fail on a dead or stuck worker."""
        vecenv = self.vecenv
        now = time.monotonic()
        deadline = None if self.worker_timeout is None else now + self.worker_timeout
        checks = 0
        while True:
            if now >= self._next_check:
                self._next_check = now + WORKER_CHECK_PERIOD
                self._check_workers_alive()
                if self.worker_timeout is not None:  # (batches of other workers may keep coming)
                    self._check_workers_answer(now)
            if ready(vecenv):
                return
            if deadline is not None and now >= deadline:
                self._fail_stuck()
            checks += 1
            if checks < _WAIT_SPINS:
                os.sched_yield()  # leave the core to a worker on a crowded machine
            else:
                time.sleep(_WAIT_NAP)
            now = time.monotonic()

    @contextlib.contextmanager
    def _pipes_of_dead_workers(self) -> Iterator[None]:
        """A worker killed between flagging its infos and sending them leaves pufferlib's pipe
        read with EOF: report the worker, not the pipe."""
        try:
            yield
        except (EOFError, OSError):
            multiprocessing.connection.wait(self._sentinels, timeout=1.0)
            self._check_workers_alive()
            raise

    def _check_workers_alive(self) -> None:
        ended = multiprocessing.connection.wait(self._sentinels, timeout=0)
        if not ended:
            return
        index = self._sentinels.index(ended[0])
        process = self._processes[index]
        process.join(timeout=1.0)
        running = self._running[index]
        finished = running != "start-up" and self.vecenv.buf["semaphores"][index] >= pufferlib.vector.MAIN
        self._fail(f"Vectorized worker {index} (pid {process.pid}) {_describe_exit(process.exitcode)} "
                   f"{'after' if finished else 'during'} its {running}; its traceback, if any, is on stderr")

    def _check_workers_answer(self, now: float) -> None:
        """Fail on a worker that has not answered within `worker_timeout` of being asked, even
        while batches of the others keep coming (fully asynchronous batching never waits on it)."""
        vecenv = self.vecenv
        for worker in vecenv.waiting_workers:
            if now - self._asked_at[worker] > self.worker_timeout and not _arrived(vecenv, worker):
                self._fail_stuck(worker)

    def _fail_stuck(self, stuck: int | None = None) -> None:
        # the waiting worker asked longest ago that has not arrived: still in its step, or done
        # with it and flagged infos that never reached its pipe (stopped while sending them)
        vecenv = self.vecenv
        if stuck is None:
            late = [i for i in vecenv.waiting_workers if not _arrived(vecenv, i)]
            stuck = min(late, key=self._asked_at.__getitem__, default=None)
        if stuck is None:  # every waiting worker arrived while we looked: name them all
            self._fail(f"Vectorized workers {sorted(vecenv.waiting_workers)} did not deliver a batch within "
                       f"worker_timeout={self.worker_timeout} s")
        process = self._processes[stuck]
        done = vecenv.buf["semaphores"][stuck] >= pufferlib.vector.MAIN
        what = f"send the infos of its {self._running[stuck]}" if done else f"finish its {self._running[stuck]}"
        self._fail(f"Vectorized worker {stuck} (pid {process.pid}) is alive but did not {what} within "
                   f"worker_timeout={self.worker_timeout} s")

    def _fail(self, what: str) -> None:
        message = f"{what}. The vecenv closed itself and stopped every worker; build a new one to continue"
        self._failure = message
        try:
            self.close()
        except Exception:  # the workers are stopped regardless (close() stops them in a finally)
            pass
        raise WorkerProcessError(message)


def _arrived(vecenv: Any, worker: int) -> bool:
    """Whether `worker` finished its task and pufferlib can read its infos without waiting."""
    semaphore = vecenv.buf["semaphores"][worker]
    if semaphore < pufferlib.vector.MAIN:
        return False
    return semaphore != pufferlib.vector.INFO or vecenv.recv_pipes[worker].poll()


def _workers_idle(vecenv: Any) -> bool:
    """Whether pufferlib's `async_reset()` can drain every running step without waiting."""
    return all(_arrived(vecenv, worker) for worker in vecenv.waiting_workers)


def _batch_ready(vecenv: Any) -> bool:
    """Whether pufferlib's `Multiprocessing.recv()` would return a batch now, without blocking.

    Walks the waiting workers as its loop does: with `sync_traj` strictly in order, stopping at
    the first that is not done; otherwise round the list, passing over those not done. Each done
    worker joins the ready ones (its infos read from its pipe) and after each the batch is
    checked: every worker (`batch_size == num_envs`), any one worker, the first complete
    contiguous block (`zero_copy`) or any `workers_per_batch` workers. A done worker reached
    before the batch is complete whose infos are flagged but not in its pipe (stopped while
    sending them) would block that read for good, so the batch is not ready: the caller's
    `worker_timeout` names it instead.
    """
    semaphores = vecenv.buf["semaphores"]
    ready = list(vecenv.ready_workers)
    for worker in vecenv.waiting_workers:
        if semaphores[worker] >= pufferlib.vector.MAIN:
            if not _arrived(vecenv, worker):
                return False
            ready.append(worker)
        elif vecenv.sync_traj:  # (pufferlib looks at this worker again until it is done)
            return _batch_complete(vecenv, ready)
        if _batch_complete(vecenv, ready):
            return True
    return False


def _batch_complete(vecenv: Any, ready: list[int]) -> bool:
    per_batch, num_workers = vecenv.workers_per_batch, vecenv.num_workers
    if not ready:
        return False
    if per_batch == 1:
        return True
    if per_batch == num_workers:
        return len(ready) >= num_workers
    if vecenv.zero_copy:
        complete = np.zeros(num_workers, dtype=bool)
        complete[ready] = True
        return bool(complete.reshape(-1, per_batch).all(axis=1).any())
    return len(ready) >= per_batch


def _describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "signal"
        return f"was killed by {name} ({-exitcode})"
    return f"exited with code {exitcode}"


def _stop_workers(processes: Sequence[Any], creator_pid: int) -> None:
    """Stop and reap worker processes: SIGTERM (and SIGCONT, so a stopped one gets it), then
    SIGKILL for any still alive after `_STOP_GRACE` seconds."""
    if os.getpid() != creator_pid:  # a forked child inherited the finalizer: not its workers
        return
    alive = [process for process in processes if process.exitcode is None]
    for process in alive:
        try:
            process.terminate()
            os.kill(process.pid, signal.SIGCONT)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + _STOP_GRACE
    for process in alive:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
    for process in alive:
        if process.exitcode is None:
            process.kill()
            process.join(timeout=_STOP_GRACE)


def _check_worker_timeout(worker_timeout: Any) -> float | None:
    if worker_timeout is None:
        return None
    if isinstance(worker_timeout, Real) and not isinstance(worker_timeout, bool):
        try:
            seconds = float(worker_timeout)
        except (OverflowError, TypeError, ValueError):
            seconds = math.nan
        if math.isfinite(seconds) and seconds > 0:
            return seconds
    raise CurriculumConfigError(
        f"Expected `worker_timeout` to be None or a finite number of seconds > 0, received {worker_timeout!r}"
    )


def _check_centralized_curriculum(curriculum: Any) -> None:
    algorithm = getattr(getattr(curriculum, "config", None), "algorithm", None)
    if not isinstance(algorithm, (StagedProgressionConfig, UniformConfig)):
        name = getattr(algorithm, "name", type(algorithm).__name__ if algorithm is not None else None)
        raise CurriculumConfigError(
            f"Centralized tracking supports staged progression and uniform curricula, received {name!r}: worker "
            "copies cannot follow a pool the main process changes by evicting tasks; use tracking='shared' with "
            "Curriculum(config, shared_memory=True)"
        )
    if getattr(curriculum, "is_shared", False):
        raise CurriculumConfigError(
            "Centralized tracking records in the main process and expects a local curriculum, received a shared one; "
            "use tracking='shared' for a shared-memory curriculum"
        )


_STAGE_KEY: Final = stat_key(STAGE)


class CentralizedCurriculumVecEnv(SharedCurriculumVecEnv):
    """Main-process tracking (`tracking="centralized"`): records the completions workers report.

    Every `curriculum_completion` in a vec step's infos is popped and recorded into the main
    curriculum once, with the recorder's `curriculum_stats/...` entries merged into the same
    info dict (pool-wide stats every `stats_interval` completions). After the step, a stage
    change is published on `stage_broadcast` before the infos are returned, so the workers'
    next task draws see it; so is one made between steps (`load_state` of a checkpoint), at
    the next step or reset. Staged progression and uniform only (see the module docstring).
    """

    tracking = "centralized"

    def __init__(
        self,
        vecenv: Any,
        curriculum: Any,
        *,
        stage_broadcast: StageBroadcast | None = None,
        stats_interval: int = DEFAULT_STATS_INTERVAL,
        worker_timeout: float | None = None,
    ) -> None:
        _check_centralized_curriculum(curriculum)
        staged = isinstance(curriculum.config.algorithm, StagedProgressionConfig)
        if staged and stage_broadcast is None:
            raise CurriculumConfigError(
                "Expected a `stage_broadcast` for a staged curriculum under centralized tracking: without it the "
                "workers never learn of a stage change"
            )
        self.recorder = CompletionRecorder(curriculum, stats_interval=stats_interval)
        super().__init__(vecenv, curriculum, worker_timeout=worker_timeout)
        self.stage_broadcast = stage_broadcast if staged else None
        self._published_changes: int | None = None
        if self.stage_broadcast is not None:
            self._publish()

    @property
    def completions(self) -> int:
        """Completions recorded into the main curriculum."""
        return self.recorder.completions

    @property
    def late_completions(self) -> int:
        """Of those, the ones refused as late (e.g. drawn before a stage change)."""
        return self.recorder.late_completions

    def _publish(self) -> None:
        sync = self.curriculum.sync_state()
        if sync["stage_changes"] != self._published_changes:
            self.stage_broadcast.publish(sync)
            self._published_changes = sync["stage_changes"]

    def async_reset(self, seed: int | None = 0) -> None:
        self._check_usable()
        if self.stage_broadcast is not None:
            self._publish()  # a stage set between steps (a checkpoint restored) reaches the reset's draws
        super().async_reset(seed)

    def _on_infos(self, infos: list[Any]) -> None:
        record = self.recorder.record
        for info in infos:
            if not isinstance(info, dict):
                continue
            completion = info.pop(COMPLETION_INFO_KEY, None)
            if completion is None:
                continue
            drawn_at = info.get(_STAGE_KEY)
            info.update(record(completion["task_id"], completion["label"], completion["score"]))
            if drawn_at is not None:  # the episode's `stage` is the one its env drew the next task at, as
                info[_STAGE_KEY] = drawn_at  # under every tracking, not a pool report's stage of the main process
        if self.stage_broadcast is not None:  # also a stage set between steps, not by these completions
            self._publish()


class _VectorCurriculumEnv(CurriculumEnv):
    """The `CurriculumEnv` of a vector's worker: infos always a list, as pufferlib's vectors
    expect (Multiprocessing with one env per worker would flatten a dict into its keys and
    lose the curriculum entries, among them a centralized completion): those of the env's
    ordinary steps too, which the wrapper otherwise hands on as the env returned them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        env_step = self._env_step

        def listed_step(actions: np.ndarray) -> Any:
            result = env_step(actions)
            infos = result[4]
            if type(infos) is list:
                return result
            obs, rewards, terminals, truncations, _ = result
            return obs, rewards, terminals, truncations, [infos] if isinstance(infos, Mapping) else infos

        self._env_step = listed_step

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        obs, infos = super().reset(seed)
        return obs, [infos] if isinstance(infos, Mapping) else infos

    def _finish_episode(self, result: Any, *, desync: bool) -> Any:
        obs, rewards, terminals, truncations, infos = super()._finish_episode(result, desync=desync)
        return obs, rewards, terminals, truncations, [infos] if isinstance(infos, Mapping) else infos


class _CurriculumEnvCreator:
    """The env creator handed to `pufferlib.vector.make`: wraps each env in a `CurriculumEnv`.

    Under centralized tracking it gives each process one private copy of the curriculum
    (shared by that process's envs), made on first use in the process. In a worker process
    (a direct child of the main process) it first asks the kernel to end the worker when the
    main process dies.
    """

    def __init__(
        self,
        env_creator: Callable[..., Any],
        curriculum: Any,
        *,
        centralized: bool,
        score_fn: ScoreFn | None,
        stats_interval: int,
        stage_source: StageBroadcast | None,
        base_seed: int = 0,
    ) -> None:
        self.env_creator = env_creator
        self.base_seed = base_seed
        self.curriculum = curriculum
        self.centralized = centralized
        self.score_fn = score_fn
        self.stats_interval = stats_interval
        self.stage_source = stage_source
        self.main_pid = os.getpid()
        self._copy: Any = None
        self._copy_pid = -1

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_copy"], state["_copy_pid"] = None, -1
        return state

    def _curriculum_here(self) -> Any:
        if not self.centralized:
            return self.curriculum
        pid = os.getpid()
        if self._copy_pid != pid:
            self._copy = pickle.loads(pickle.dumps(self.curriculum))
            self._copy_pid = pid
        return self._copy

    def __call__(self, buf: Mapping[str, np.ndarray] | None = None, seed: int | None = 0) -> CurriculumEnv:
        if os.getpid() != self.main_pid:
            _end_with_parent(self.main_pid)
        curriculum = self._curriculum_here()
        # pufferlib numbers the envs 0, 1, ... itself (its `make` does not pass its `seed` on)
        seed = self.base_seed + (seed or 0)
        env = self.env_creator(buf=buf, seed=seed)
        return _VectorCurriculumEnv(
            env,
            curriculum,
            seed=seed,
            score_fn=self.score_fn,
            local_tracking=not self.centralized,
            stats_interval=self.stats_interval,
            stage_source=self.stage_source,
            buf=buf,
        )


_PR_SET_PDEATHSIG: Final = 1
_ENDS_WITH_PARENT: set[int] = set()  # pids of the processes that already asked


def _end_with_parent(parent_pid: int) -> None:
    """In a worker started for the trainer `parent_pid`: end it (SIGTERM) when the trainer dies,
    so a trainer killed by SIGKILL leaves no worker spinning forever (Linux). A worker the
    trainer forked (or spawned) asks the kernel (`PR_SET_PDEATHSIG`); one whose parent is
    another process (a fork server started it) watches the trainer through a pidfd."""
    pid = os.getpid()
    if pid in _ENDS_WITH_PARENT or sys.platform != "linux":
        return
    _ENDS_WITH_PARENT.add(pid)
    if os.getppid() != parent_pid:
        _watch_trainer(pid, parent_pid)
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os.kill(pid, signal.SIGTERM)


def _watch_trainer(pid: int, trainer_pid: int) -> None:
    """A daemon thread of worker `pid` that sends it SIGTERM once `trainer_pid` has exited."""
    try:
        trainer = os.pidfd_open(trainer_pid)
    except ProcessLookupError:  # the trainer is already gone
        os.kill(pid, signal.SIGTERM)
        return
    except (OSError, AttributeError):  # a kernel without pidfds (before Linux 5.3)
        return

    def wait() -> None:
        select.select([trainer], [], [])  # readable once the trainer exited
        os.kill(pid, signal.SIGTERM)

    threading.Thread(target=wait, name="curriculum-trainer-watch", daemon=True).start()


def _backend_class(backend: Any) -> Any:
    classes = {name: getattr(pufferlib.vector, name) for name in BACKENDS}
    if isinstance(backend, str) and backend in classes:
        return classes[backend]
    if any(backend is cls for cls in classes.values()):
        return backend
    raise CurriculumConfigError(f"Expected `backend` to be one of {BACKENDS!r}, received {backend!r}")


def physical_cores() -> int:
    """Physical CPU cores, as pufferlib's Multiprocessing counts them for its worker limit."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def default_num_workers(num_envs: int, *, batch_size: int | None = None, cores: int | None = None) -> int | None:
    """The most worker processes that fit `cores` (default: the physical cores), divide
    `num_envs` and, with `batch_size`, make every batch a whole number of workers; None if no
    count does."""
    cores = physical_cores() if cores is None else cores
    batch = num_envs if batch_size is None else batch_size
    fitting = [d for d in range(1, min(cores, num_envs) + 1)
               if num_envs % d == 0 and batch % (num_envs // d) == 0]
    return max(fitting) if fitting else None


def _is_count(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _check_vector_layout(multiprocess: bool, num_envs: int, num_workers: Any, vec_kwargs: Mapping[str, Any]) -> int | None:
    """Refuse by name every layout pufferlib would refuse (or hang on); the worker count to use."""
    for flag in ("zero_copy", "overwork"):
        if flag in vec_kwargs and not isinstance(vec_kwargs[flag], bool):
            raise CurriculumConfigError(f"Expected `{flag}` to be a bool, received {vec_kwargs[flag]!r}")
    batch_size = vec_kwargs.get("batch_size")
    if batch_size is not None and not (_is_count(batch_size) and 1 <= batch_size <= num_envs):
        raise CurriculumConfigError(
            f"Expected `batch_size` to be None or an integer in [1, num_envs={num_envs}], received {batch_size!r}"
        )
    if num_workers is not None and not (_is_count(num_workers) and 1 <= num_workers <= num_envs
                                        and num_envs % num_workers == 0):
        raise CurriculumConfigError(
            f"Expected `num_workers` to be None or an integer in [1, num_envs={num_envs}] that divides num_envs, "
            f"received {num_workers!r}"
        )
    if not multiprocess:
        if batch_size not in (None, num_envs):
            raise CurriculumConfigError(
                f"Expected `batch_size` None or num_envs={num_envs} on Serial (one synchronous batch), received "
                f"{batch_size!r}; smaller batches need backend='Multiprocessing'"
            )
        return None if num_workers is None else int(num_workers)
    cores = physical_cores()
    overwork = vec_kwargs.get("overwork", False)
    if num_workers is None:
        workers = default_num_workers(num_envs, batch_size=batch_size, cores=num_envs if overwork else cores)
        if workers is None:
            raise CurriculumConfigError(
                f"Expected a `batch_size` that whole workers can serve with at most {cores} workers (the physical "
                f"cores) over num_envs={num_envs}, received {batch_size}; pass num_workers= and overwork=True"
            )
    else:
        workers = int(num_workers)
    envs_per_worker = num_envs // workers
    if batch_size is not None and batch_size % envs_per_worker:
        raise CurriculumConfigError(
            f"Expected `batch_size` to be a multiple of num_envs / num_workers = {envs_per_worker} (whole workers "
            f"per batch), received {batch_size}"
        )
    if batch_size is not None and vec_kwargs.get("zero_copy", True) and num_envs % batch_size:
        raise CurriculumConfigError(
            f"Expected `batch_size` to divide num_envs={num_envs} with zero_copy=True (equal batches), received "
            f"{batch_size}; pass zero_copy=False for uneven batches"
        )
    if workers > cores and not overwork:
        raise CurriculumConfigError(
            f"Expected `num_workers` at most the {cores} physical cores, received {workers}; pass overwork=True to "
            "run more worker processes than cores"
        )
    return workers


def make_curriculum_vecenv(
    env_creator: Callable[..., Any],
    curriculum: Any,
    *,
    backend: str | type = "Serial",
    tracking: str = "shared",
    num_envs: int,
    num_workers: int | None = None,
    seed: int = 0,
    score_fn: ScoreFn | None = None,
    stats_interval: int = DEFAULT_STATS_INTERVAL,
    worker_timeout: float | None = None,
    **vec_kwargs: Any,
) -> CurriculumVecEnv:
    """`num_envs` copies of `env_creator(buf=..., seed=...)`, each in a `CurriculumEnv`, vectorized.

    Args:
        env_creator: builds one bare env (a PufferEnv with `set_env_config`) from `buf, seed`.
        curriculum: shared (`shared_memory=True`) for `tracking="shared"` on Multiprocessing
            (a local one is accepted on Serial); local, staged or uniform, for "centralized".
        backend: "Serial" or "Multiprocessing" (or the pufferlib class), or "Ray" with
            tracking="ray": workers on Ray actors, `curriculum` a `CurriculumClient` of a
            curriculum service (`curriculum.ray_vector`; needs the [ray] extra; its
            `vec_kwargs` are `worker_options` and `batch_size`).
        tracking: "shared" or "centralized" (see the module docstring), or "ray".
        num_envs: envs in the vector, in [1, `MAX_NUM_ENVS`].
        num_workers: worker processes (Multiprocessing); must divide `num_envs`. Default
            `default_num_workers(num_envs, batch_size=...)`: as many as fit the physical cores
            (with `overwork=True`, as many as fit `num_envs`: `cores=num_envs`).
        seed: integer >= 0; env i gets `seed + i` (and reseeds its process's curriculum handle).
        score_fn, stats_interval: passed to every `CurriculumEnv` (and the main recorder).
        worker_timeout: seconds a live worker may take for one step or reset before
            `WorkerProcessError` (Multiprocessing); None waits as long as it takes. A worker
            that dies is reported within `WORKER_CHECK_PERIOD` either way.
        **vec_kwargs: `batch_size`, `zero_copy`, `overwork`, passed to pufferlib; anything
            else is refused by name.

    Every argument is checked before any process starts; a layout pufferlib would refuse is
    refused with `CurriculumConfigError` naming the argument. The caller closes the returned
    vecenv, then the curriculum.
    """
    ray_backend = isinstance(backend, str) and backend == "Ray"
    ray_tracking = isinstance(tracking, str) and tracking == "ray"
    if ray_backend or ray_tracking:
        if not (ray_backend and ray_tracking):
            raise CurriculumConfigError(
                f"Expected backend='Ray' with tracking='ray' (workers on Ray actors, one curriculum service), "
                f"received backend={backend!r} with tracking={tracking!r}"
            )
        from curriculum.ray_vector import make_ray_vecenv  # needs the [ray] extra

        return make_ray_vecenv(env_creator, curriculum, num_envs=num_envs, num_workers=num_workers, seed=seed,
                               score_fn=score_fn, stats_interval=stats_interval, worker_timeout=worker_timeout,
                               **vec_kwargs)
    unknown = sorted(set(vec_kwargs) - set(VEC_OPTIONS))
    if unknown:
        raise CurriculumConfigError(
            f"Unknown option(s) {', '.join(repr(k) for k in unknown)} for make_curriculum_vecenv; "
            f"expected keyword arguments from {VEC_OPTIONS!r}"
        )
    backend_class = _backend_class(backend)
    if not (isinstance(tracking, str) and tracking in TRACKING_MODES):
        raise CurriculumConfigError(f"Expected `tracking` to be one of {TRACKING_MODES!r}, received {tracking!r}")
    if not (_is_count(num_envs) and 1 <= num_envs <= MAX_NUM_ENVS):
        raise CurriculumConfigError(
            f"Expected `num_envs` to be an integer in [1, {MAX_NUM_ENVS}], received {num_envs!r}"
        )
    num_envs = int(num_envs)
    if not callable(env_creator):
        raise CurriculumConfigError(f"Expected `env_creator` to be callable, received {env_creator!r}")
    if not (_is_count(seed) and seed >= 0):
        raise CurriculumConfigError(f"Expected `seed` to be an integer >= 0, received {seed!r}")
    if score_fn is not None and not callable(score_fn):
        raise CurriculumConfigError(f"Expected `score_fn` to be callable or None, received {score_fn!r}")
    stats_interval = _check_interval(stats_interval)
    worker_timeout = _check_worker_timeout(worker_timeout)
    multiprocess = backend_class is pufferlib.vector.Multiprocessing
    workers = _check_vector_layout(multiprocess, num_envs, num_workers, vec_kwargs)
    centralized = tracking == "centralized"
    broadcast: StageBroadcast | None = None
    if centralized:
        _check_centralized_curriculum(curriculum)
        if isinstance(curriculum.config.algorithm, StagedProgressionConfig):
            broadcast = StageBroadcast()  # before make(): forked workers must map it
    elif multiprocess and not getattr(curriculum, "is_shared", False):
        raise CurriculumConfigError(
            "Expected a shared curriculum (Curriculum(config, shared_memory=True)) for tracking='shared' on "
            "Multiprocessing, received a local one: each worker process would record into its own private copy"
        )
    creator = _CurriculumEnvCreator(
        env_creator,
        curriculum,
        centralized=centralized,
        score_fn=score_fn,
        stats_interval=stats_interval,
        stage_source=broadcast,
        base_seed=int(seed),
    )
    kwargs = dict(vec_kwargs)
    if not multiprocess:  # Serial would take batch_size as its number of envs (None included)
        kwargs.pop("batch_size", None)
    if workers is not None:
        kwargs["num_workers"] = workers
    vecenv = pufferlib.vector.make(creator, backend=backend_class, num_envs=num_envs, **kwargs)
    if centralized:
        return CentralizedCurriculumVecEnv(vecenv, curriculum, stage_broadcast=broadcast, stats_interval=stats_interval,
                                           worker_timeout=worker_timeout)
    return SharedCurriculumVecEnv(vecenv, curriculum, worker_timeout=worker_timeout)
