"""`make_curriculum_vecenv(..., backend="Ray", tracking="ray")`: pufferlib's Ray backend over one
curriculum service (`curriculum.ray_service`).

Each worker is a Ray actor running pufferlib's `Serial` over its envs, each env a
`CurriculumEnv` whose curriculum is the worker's own `CurriculumClient` of the service (the
client given to `make_curriculum_vecenv`, pickled into the actor as a new client of the same
service, shared by that worker's envs). Every episode a worker ends goes to the service
through its client, exactly once (see `curriculum.ray_service`); `close()` sends what the
clients still queue.

What this adds to `pufferlib.vector.Ray` (pufferlib-core 3.0.7), whose own version on this
machine runs but:

- sends actions fire-and-forget and never looks at the result, so an exception in a worker's
  env (or a dead worker) is only logged and `recv()` hands back the previous step's data: here
  each step's send is checked, and a failure becomes `WorkerProcessError` (the vecenv closes
  itself) naming the worker; a curriculum error raised in a worker (a bad score) comes back
  as itself; with `worker_timeout=` a worker that does not answer in time fails the same way;
- calls `ray.shutdown()` in `close()`, which would end the curriculum service and every other
  actor of the cluster: here `close()` closes the workers' envs (their clients flush) and
  kills only the worker actors;
- starts every worker's envs from seed 0: here env i of the vector gets `seed + i`;
- creates its workers with Ray's default resources: here `worker_options` (default
  `{"num_cpus": 1}`) go to `ray.remote(...).options(...)`;
- supports only synchronous batches here (`batch_size == num_envs`).

Episode counters in the infos: with a client `batch_size` above 1 a completion's verdict comes
back with its batch, after its episode's info was written; each episode's
`curriculum_stats/late_completions` then counts the late verdicts that came back since the
worker's previous episode, so their sum trails the service's `total_late_completions` (pool
report, and `client.stats()`) by the verdicts of at most two batches per worker (the one
queued and the one in flight), which arrive at `close()`. With `batch_size=1` every episode
carries its own verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np
import pufferlib
import pufferlib.spaces
import pufferlib.vector

from curriculum.env import DEFAULT_STATS_INTERVAL, CurriculumEnv, ScoreFn, _check_interval
from curriculum.errors import CurriculumConfigError, CurriculumError, WorkerProcessError
from curriculum.ray_service import CurriculumClient, ray
from curriculum.vector import (
    MAX_NUM_ENVS,
    SharedCurriculumVecEnv,
    _CurriculumEnvCreator,
    _VectorCurriculumEnv,
    _check_worker_timeout,
    _is_count,
)

__all__ = ["RayCurriculumVecEnv", "make_ray_vecenv", "DEFAULT_WORKER_OPTIONS"]

DEFAULT_WORKER_OPTIONS: Final = {"num_cpus": 1}
"""Ray options of every worker actor unless `worker_options=` says otherwise."""


class _RayWorkerEnv(_VectorCurriculumEnv):
    """A Ray worker's curriculum env: closing it sends what its client still queues."""

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._accounting.curriculum.close()  # idempotent: the worker's envs share one client


class _RayEnvCreator(_CurriculumEnvCreator):
    def __call__(self, buf: Mapping[str, np.ndarray] | None = None, seed: int | None = 0) -> CurriculumEnv:
        env = self.env_creator(buf=buf, seed=seed)
        return _RayWorkerEnv(env, self.curriculum, seed=seed, score_fn=self.score_fn, local_tracking=True,
                             stats_interval=self.stats_interval, buf=buf)


class _CheckedRay(pufferlib.vector.Ray):
    """pufferlib's Ray backend with checked sends, per-worker seeds, worker options and a
    `close()` that leaves the cluster running (module docstring)."""

    def __init__(self, env_creators: list[Any], env_args: list[Any], env_kwargs: list[Any], num_envs: int,
                 num_workers: int | None = None, batch_size: int | None = None, seed: int = 0,
                 worker_options: Mapping[str, Any] | None = None, worker_timeout: float | None = None,
                 **kwargs: Any) -> None:
        num_workers = num_envs if num_workers is None else num_workers
        envs_per_worker = num_envs // num_workers
        self.env_pool = False
        self.workers_per_batch = num_workers
        self.num_workers = num_workers
        self.worker_timeout = worker_timeout
        driver_env = env_creators[0](*env_args[0], **env_kwargs[0])
        self.driver_env = driver_env
        self.emulated = driver_env.emulated
        self.num_agents = num_agents = driver_env.num_agents * num_envs
        self.agents_per_batch = num_agents
        agents_per_worker = driver_env.num_agents * envs_per_worker
        self.obs_batch_shape = (num_agents, *driver_env.single_observation_space.shape)
        self.atn_batch_shape = (num_workers, agents_per_worker, *driver_env.single_action_space.shape)
        self.single_observation_space = driver_env.single_observation_space
        self.single_action_space = driver_env.single_action_space
        self.action_space = pufferlib.spaces.joint_space(self.single_action_space, num_agents)
        self.observation_space = pufferlib.spaces.joint_space(self.single_observation_space, num_agents)
        self.agent_ids = np.arange(num_agents).reshape(num_workers, agents_per_worker)
        self.envs_per_worker = envs_per_worker
        self.seeds = [seed + i * envs_per_worker for i in range(num_workers)]
        worker_class = ray.remote(pufferlib.vector.Serial).options(**dict(worker_options or DEFAULT_WORKER_OPTIONS))
        self.envs = []
        for i in range(num_workers):
            start, end = i * envs_per_worker, (i + 1) * envs_per_worker
            self.envs.append(worker_class.remote(env_creators[start:end], env_args[start:end], env_kwargs[start:end],
                                                 envs_per_worker, seed=self.seeds[i]))
        self.async_handles: list[Any] | None = None
        self._sends: list[Any] = []
        self.initialized = False
        self.flag = pufferlib.vector.RESET
        self.ray = ray
        self.prev_env_id: list[int] = []

    def _checked(self, refs: list[Any], what: str) -> list[Any]:
        try:
            return ray.get(refs, timeout=self.worker_timeout)
        except ray.exceptions.GetTimeoutError:
            raise WorkerProcessError(f"A Ray worker did not finish its {what} within worker_timeout="
                                     f"{self.worker_timeout} s") from None
        except ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            if isinstance(cause, CurriculumError):
                raise cause from None
            raise WorkerProcessError(f"A Ray worker failed in its {what}: {cause!r}") from error
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as error:
            raise WorkerProcessError(f"A Ray worker died during its {what}: {type(error).__name__}") from error

    def recv(self) -> tuple[Any, ...]:
        pufferlib.vector.recv_precheck(self)
        sends, self._sends = self._sends, []
        self._checked(sends, "step or reset")
        recvs = self._checked(list(self.async_handles or ()), "step or reset")
        self.prev_env_id = list(range(self.num_workers))
        o, r, d, t, infos, ids, m = zip(*recvs)
        infos = [i for ii in infos for i in ii]
        return (np.stack(o, axis=0).reshape(self.obs_batch_shape), np.stack(r, axis=0).ravel(),
                np.stack(d, axis=0).ravel(), np.stack(t, axis=0).ravel(), infos, self.agent_ids.ravel(),
                np.stack(m, axis=0).ravel())

    def send(self, actions: Any) -> None:
        actions = pufferlib.vector.send_precheck(self, actions).reshape(self.atn_batch_shape)
        self._sends = [env.send.remote(actions[i]) for i, env in enumerate(self.envs)]
        self.async_handles = [env.recv.remote() for env in self.envs]

    def async_reset(self, seed: int | None = 0) -> None:
        self.flag = pufferlib.vector.RECV
        self._sends = [env.async_reset.remote(None if seed is None else seed + i * self.envs_per_worker)
                       for i, env in enumerate(self.envs)]
        self.async_handles = [env.recv.remote() for env in self.envs]

    def close(self) -> None:
        closes = [env.close.remote() for env in self.envs]
        try:
            # Every worker ends its close (which sends its client's queue) before any is
            # stopped, even when another's close has already failed.
            ray.wait(closes, num_returns=len(closes), timeout=self.worker_timeout)
            self._checked(closes, "close")
        finally:
            for env in self.envs:
                ray.kill(env, no_restart=True)


class RayCurriculumVecEnv(SharedCurriculumVecEnv):
    """Workers on Ray actors, one curriculum service (`tracking="ray"`). A worker failure
    raises `WorkerProcessError` and closes the vecenv; `close()` sends every worker's queued
    completions and stops the worker actors (the service and the cluster keep running)."""

    tracking = "ray"

    def recv(self) -> tuple[Any, ...]:
        try:
            return super().recv()
        except WorkerProcessError as error:
            self._fail(str(error))
            raise

    def _fail(self, what: str) -> None:
        if self._failure is None:
            super()._fail(what)


def make_ray_vecenv(
    env_creator: Callable[..., Any],
    client: CurriculumClient,
    *,
    num_envs: int,
    num_workers: int | None = None,
    seed: int = 0,
    score_fn: ScoreFn | None = None,
    stats_interval: int = DEFAULT_STATS_INTERVAL,
    worker_timeout: float | None = None,
    worker_options: Mapping[str, Any] | None = None,
    batch_size: int | None = None,
) -> RayCurriculumVecEnv:
    """The Ray form of `make_curriculum_vecenv` (which calls it for `backend="Ray"`)."""
    if not isinstance(client, CurriculumClient):
        raise CurriculumConfigError(
            f"Expected a CurriculumClient of a curriculum service for tracking='ray', received "
            f"{type(client).__name__}; start one with curriculum.ray_service.start_curriculum_service(config)")
    if not (_is_count(num_envs) and 1 <= num_envs <= MAX_NUM_ENVS):
        raise CurriculumConfigError(f"Expected `num_envs` to be an integer in [1, {MAX_NUM_ENVS}], received {num_envs!r}")
    if num_workers is None:
        num_workers = num_envs
    if not (_is_count(num_workers) and 1 <= num_workers <= num_envs and num_envs % num_workers == 0):
        raise CurriculumConfigError(f"Expected `num_workers` to be None or an integer in [1, num_envs={num_envs}] "
                                    f"that divides num_envs, received {num_workers!r}")
    if batch_size not in (None, num_envs):
        raise CurriculumConfigError(f"Expected `batch_size` None or num_envs={num_envs} on Ray (one synchronous "
                                    f"batch), received {batch_size!r}")
    if not callable(env_creator):
        raise CurriculumConfigError(f"Expected `env_creator` to be callable, received {env_creator!r}")
    if not (_is_count(seed) and seed >= 0):
        raise CurriculumConfigError(f"Expected `seed` to be an integer >= 0, received {seed!r}")
    if score_fn is not None and not callable(score_fn):
        raise CurriculumConfigError(f"Expected `score_fn` to be callable or None, received {score_fn!r}")
    if worker_options is not None and not isinstance(worker_options, Mapping):
        raise CurriculumConfigError(f"Expected `worker_options` to be None or a mapping of Ray actor options, "
                                    f"received {worker_options!r}")
    stats_interval = _check_interval(stats_interval)
    worker_timeout = _check_worker_timeout(worker_timeout)
    creator = _RayEnvCreator(env_creator, client, centralized=False, score_fn=score_fn,
                             stats_interval=stats_interval, stage_source=None)
    n = int(num_envs)  # pufferlib.vector.make refuses the extra options: build the backend directly
    vecenv = _CheckedRay([creator] * n, [()] * n, [{}] * n, n, num_workers=int(num_workers), seed=int(seed),
                         worker_options=worker_options, worker_timeout=worker_timeout)
    return RayCurriculumVecEnv(vecenv, client, worker_timeout=worker_timeout)
