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

Built by hand instead of with the factory: create the `StageBroadcast` first, pass it as
`stage_source=` to every worker's `CurriculumEnv(local_tracking=False)`, and wrap the vecenv
in `CentralizedCurriculumVecEnv(vecenv, curriculum, stage_broadcast=broadcast)`.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable, Mapping
from numbers import Integral
from typing import Any, Final, Protocol

import numpy as np
import pufferlib
import pufferlib.vector

from curriculum.config import StagedProgressionConfig, UniformConfig
from curriculum.env import DEFAULT_STATS_INTERVAL, CompletionRecorder, CurriculumEnv, ScoreFn
from curriculum.errors import CurriculumConfigError, WorkerProcessError
from curriculum.stats import COMPLETION_INFO_KEY

__all__ = [
    "BACKENDS",
    "TRACKING_MODES",
    "VEC_OPTIONS",
    "StageBroadcast",
    "CurriculumVecEnv",
    "SharedCurriculumVecEnv",
    "CentralizedCurriculumVecEnv",
    "make_curriculum_vecenv",
]

BACKENDS: Final = ("Serial", "Multiprocessing")
"""pufferlib backends the curriculum designs are held to."""

TRACKING_MODES: Final = ("shared", "centralized")
"""The two designs: shared-memory tracker, or main-process tracking with a stage broadcast."""

VEC_OPTIONS: Final = ("batch_size", "zero_copy", "overwork")
"""Extra keyword arguments passed through to `pufferlib.vector.make`."""

_WORKER_CHECK_PERIOD = 0.05  # seconds between liveness checks while waiting for workers


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

    Forwards pufferlib's vecenv interface explicitly; on `Multiprocessing` it also turns a
    worker that died mid-step into `WorkerProcessError` instead of an endless wait.
    """

    tracking = "shared"

    def __init__(self, vecenv: Any, curriculum: Any) -> None:
        self.vecenv = vecenv
        self.curriculum = curriculum
        self._closed = False

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

    # ---- vecenv interface --------------------------------------------------------------------
    def async_reset(self, seed: int | None = 0) -> None:
        self.vecenv.async_reset(seed)

    def send(self, actions: Any) -> None:
        self.vecenv.send(np.asarray(actions))

    def recv(self) -> tuple[Any, ...]:
        self._wait_for_workers()
        result = self.vecenv.recv()
        self._on_infos(result[4])
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
        """Close the vecenv and reap worker processes (the curriculum stays open: the caller owns it)."""
        if self._closed:
            return
        self._closed = True
        self.vecenv.close()
        for process in getattr(self.vecenv, "processes", ()):
            process.join(timeout=5)

    def __enter__(self) -> SharedCurriculumVecEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- hooks -------------------------------------------------------------------------------
    def _on_infos(self, infos: list[Any]) -> None:
        """Called with every vec step's infos, before they are returned."""

    def _wait_for_workers(self) -> None:
        """On synchronous Multiprocessing, wait for every worker, failing if one died."""
        vecenv = self.vecenv
        processes = getattr(vecenv, "processes", None)
        if not processes or getattr(vecenv, "workers_per_batch", None) != getattr(vecenv, "num_workers", None):
            return
        semaphores = vecenv.buf["semaphores"]
        next_check = 0.0
        while not (semaphores >= pufferlib.vector.MAIN).all():
            now = time.monotonic()
            if now < next_check:
                continue
            next_check = now + _WORKER_CHECK_PERIOD
            for index, process in enumerate(processes):
                if not process.is_alive() and semaphores[index] < pufferlib.vector.MAIN:
                    raise WorkerProcessError(
                        f"Vectorized worker {index} (pid {process.pid}) exited with code {process.exitcode} while "
                        "the main process waited for its step; its traceback is on stderr"
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


class CentralizedCurriculumVecEnv(SharedCurriculumVecEnv):
    """Main-process tracking (`tracking="centralized"`): records the completions workers report.

    Every `curriculum_completion` in a vec step's infos is popped and recorded into the main
    curriculum once, with the recorder's `curriculum_stats/...` entries merged into the same
    info dict (pool-wide stats every `stats_interval` completions). After the step, a stage
    change is published on `stage_broadcast` before the infos are returned, so the workers'
    next task draws see it. Staged progression and uniform only (see the module docstring).
    """

    tracking = "centralized"

    def __init__(
        self,
        vecenv: Any,
        curriculum: Any,
        *,
        stage_broadcast: StageBroadcast | None = None,
        stats_interval: int = DEFAULT_STATS_INTERVAL,
    ) -> None:
        _check_centralized_curriculum(curriculum)
        staged = isinstance(curriculum.config.algorithm, StagedProgressionConfig)
        if staged and stage_broadcast is None:
            raise CurriculumConfigError(
                "Expected a `stage_broadcast` for a staged curriculum under centralized tracking: without it the "
                "workers never learn of a stage change"
            )
        super().__init__(vecenv, curriculum)
        self.recorder = CompletionRecorder(curriculum, stats_interval=stats_interval)
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

    def _on_infos(self, infos: list[Any]) -> None:
        recorded = False
        record = self.recorder.record
        for info in infos:
            if not isinstance(info, dict):
                continue
            completion = info.pop(COMPLETION_INFO_KEY, None)
            if completion is None:
                continue
            info.update(record(completion["task_id"], completion["label"], completion["score"]))
            recorded = True
        if recorded and self.stage_broadcast is not None:
            self._publish()


class _CurriculumEnvCreator:
    """The env creator handed to `pufferlib.vector.make`: wraps each env in a `CurriculumEnv`.

    Under centralized tracking it gives each process one private copy of the curriculum
    (shared by that process's envs), made on first use in the process.
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
    ) -> None:
        self.env_creator = env_creator
        self.curriculum = curriculum
        self.centralized = centralized
        self.score_fn = score_fn
        self.stats_interval = stats_interval
        self.stage_source = stage_source
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
        curriculum = self._curriculum_here()
        env = self.env_creator(buf=buf, seed=seed)
        return CurriculumEnv(
            env,
            curriculum,
            seed=seed,
            score_fn=self.score_fn,
            local_tracking=not self.centralized,
            stats_interval=self.stats_interval,
            stage_source=self.stage_source,
            buf=buf,
        )


def _backend_class(backend: Any) -> Any:
    classes = {name: getattr(pufferlib.vector, name) for name in BACKENDS}
    if isinstance(backend, str) and backend in classes:
        return classes[backend]
    if any(backend is cls for cls in classes.values()):
        return backend
    raise CurriculumConfigError(f"Expected `backend` to be one of {BACKENDS!r}, received {backend!r}")


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
    **vec_kwargs: Any,
) -> CurriculumVecEnv:
    """`num_envs` copies of `env_creator(buf=..., seed=...)`, each in a `CurriculumEnv`, vectorized.

    Args:
        env_creator: builds one bare env (a PufferEnv with `set_env_config`) from `buf, seed`.
        curriculum: shared (`shared_memory=True`) for `tracking="shared"` on Multiprocessing
            (a local one is accepted on Serial); local, staged or uniform, for "centralized".
        backend: "Serial" or "Multiprocessing" (or the pufferlib class).
        tracking: "shared" or "centralized" (see the module docstring).
        num_envs, num_workers, seed: as for `pufferlib.vector.make`; `num_workers` defaults
            to `num_envs` on Multiprocessing.
        score_fn, stats_interval: passed to every `CurriculumEnv` (and the main recorder).
        **vec_kwargs: `batch_size`, `zero_copy`, `overwork`, passed to pufferlib; anything
            else is refused by name.

    The caller closes the returned vecenv, then the curriculum.
    """
    unknown = sorted(set(vec_kwargs) - set(VEC_OPTIONS))
    if unknown:
        raise CurriculumConfigError(
            f"Unknown option(s) {', '.join(repr(k) for k in unknown)} for make_curriculum_vecenv; "
            f"expected keyword arguments from {VEC_OPTIONS!r}"
        )
    backend_class = _backend_class(backend)
    if tracking not in TRACKING_MODES:
        raise CurriculumConfigError(f"Expected `tracking` to be one of {TRACKING_MODES!r}, received {tracking!r}")
    if isinstance(num_envs, bool) or not isinstance(num_envs, Integral) or num_envs < 1:
        raise CurriculumConfigError(f"Expected `num_envs` to be an integer >= 1, received {num_envs!r}")
    if not callable(env_creator):
        raise CurriculumConfigError(f"Expected `env_creator` to be callable, received {env_creator!r}")
    multiprocess = backend_class is pufferlib.vector.Multiprocessing
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
    )
    kwargs = dict(vec_kwargs)
    if multiprocess:
        kwargs["num_workers"] = num_envs if num_workers is None else num_workers
    elif num_workers is not None:
        kwargs["num_workers"] = num_workers
    vecenv = pufferlib.vector.make(creator, backend=backend_class, num_envs=num_envs, seed=seed, **kwargs)
    if centralized:
        return CentralizedCurriculumVecEnv(vecenv, curriculum, stage_broadcast=broadcast, stats_interval=stats_interval)
    return SharedCurriculumVecEnv(vecenv, curriculum)
