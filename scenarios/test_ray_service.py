"""One curriculum served by a Ray actor to workers on Ray actors (`curriculum.ray_service`).

Bug class: a service between the workers and the curriculum that loses, repeats or
misattributes completions (a batch applied twice, a late completion credited to the task now
in its slot), or workers that run tasks of a stage the service never reached, or lag behind
an advancement for longer than their client's queue allows. The curriculum under test
(`curriculum_factory`) is served by `start_curriculum_service(config, factory=...)` on a local
two-CPU Ray cluster; the envs run in Ray worker actors (`make_curriculum_vecenv(...,
backend="Ray", tracking="ray")`, 4 envs on 2 workers, one client per worker, batch size 1 so
every episode's own late verdict is in its info).

1. Exact accounting: learning progress with eviction over `ExactAccountingEnv` tasks; every
   episode the envs ended (their own `EpisodeRecord`s) is recorded exactly once by the
   service (total completions + late completions), and the accounting oracle agrees with
   every per-episode report and with the service's totals.
2. Stage sync: `test_stage_sync`'s staged curriculum served by the actor; no worker starts an
   episode of a stage the service has not reached, and after each advancement a worker starts
   at most `prefetch` episodes of an older stage (the client's documented staleness bound).
3. Late verdicts that come back later: two envs in the driver share a client that batches;
   their own counters add up their infos, and with what the client still holds, the service's.
4. The service's accounts under any schedule: its body (`CurriculumService`, in the driver)
   driven by a seeded random schedule of what clients do (batches, refills, resends of a
   batch whose reply was lost, a completion right after its task was handed out, release,
   declared lost, a restore) against a model of the documented protocol, after every call.
5. A frozen worker: a Ray worker whose process stops answering fails the trainer's step by
   name within `worker_timeout`, and the vector that closes itself ends every worker's
   process, although the frozen one never answers its close.

Runs whenever Ray is importable (the `[ray]` extra); the module skips otherwise. The factory
must be importable in the actor's process (Ray pickles it by reference); the driver's import
roots are passed to the workers. The Ray backend uses its own env wrapper, so
`--gate-curriculum-env` does not apply here.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import math
import os
import pickle
import signal
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from curriculum import (  # noqa: E402
    CurriculumConfig,
    CurriculumConfigError,
    CurriculumEnv,
    LearningProgressConfig,
    SingleTaskGenerator,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
    WeightedTaskSetGenerator,
)
from curriculum.errors import (CurriculumError, CurriculumServiceError, CurriculumStateError,  # noqa: E402
                               InvalidScoreError, UnknownTaskError, WorkerProcessError)

try:
    import ray

    from curriculum.ray_service import (CurriculumClient, CurriculumService, start_curriculum_service,
                                        stop_curriculum_service)
except ImportError:  # the tests skip one by one (a skipped module would escape `--expect` files' test globs)
    ray = None
from curriculum.stats import COMPLETIONS, LATE_COMPLETIONS, accumulate_rollout_stats, stat_key  # noqa: E402
from curriculum.vector import make_curriculum_vecenv  # noqa: E402
from harness.envs import CloseFailingEnv, ExactAccountingEnv, SeedReportingEnv  # noqa: E402
from harness.processes import is_running  # noqa: E402
from harness.thresholds import RAY_SERVICE as LIMITS  # noqa: E402
from harness.thresholds import STAGE_SYNC  # noqa: E402

from .test_stage_sync import LENGTH_TO_STAGE, full_score, staged_config  # noqa: E402

pytestmark = pytest.mark.xdist_group("ray")  # one Ray cluster at a time (`--dist loadgroup`)

#: Accounting tasks: one length (so the episodes a run ends are the same whatever is drawn),
#: different pay (so learning progress ranks and evicts them), terminal and time-limit ends.
ACCOUNTING_TASKS = (
    {"reward_per_step": 0.25, "episode_length": 2},
    {"reward_per_step": 0.125, "episode_length": 2},
    {"reward_per_step": 0.5, "episode_length": 2, "end": "truncated"},
    {"reward_per_step": 0.0625, "episode_length": 2, "end": "truncated"},
)
WORKER_OPTIONS = {"num_cpus": 0}  # the cluster's two CPUs are the machine's: workers do not reserve them
TIMEOUT = 120.0  # a hang detector, not a measure: Ray workers starting on two busy cores took over 30 s


def _import_root(module_name: str, module_file: str | None) -> str | None:
    """The folder `module_name` is imported from (the parent of its top-level package)."""
    if not module_file:
        return None
    return str(Path(module_file).resolve().parents[module_name.count(".")])


@pytest.fixture(scope="module", autouse=True)
def needs_ray() -> None:
    if ray is None:
        pytest.skip("the Ray service suite needs the [ray] extra: pip install 'curriculum-harness[ray]' (or make ray)")


@pytest.fixture(scope="module")
def ray_cluster(curriculum_factory: Callable[..., Any]) -> Iterator[None]:
    """A local two-CPU cluster whose workers import what the driver does: the suites' package
    and the module of the curriculum factory under test."""
    started = not ray.is_initialized()
    if started:
        factory_module = sys.modules.get(getattr(curriculum_factory, "__module__", ""), None)
        roots = [_import_root(__name__, __file__),
                 _import_root(factory_module.__name__, getattr(factory_module, "__file__", None))
                 if factory_module is not None else None,
                 os.environ.get("PYTHONPATH")]
        path = os.pathsep.join(dict.fromkeys(root for root in roots if root))
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    if started:
        ray.shutdown()


@pytest.fixture
def serve(ray_cluster: None, curriculum_factory: Callable[..., Any]) -> Iterator[Callable[[CurriculumConfig], Any]]:
    """`serve(config)`: the curriculum under test in a service actor, stopped at teardown."""
    services: list[Any] = []

    def start(config: CurriculumConfig) -> Any:
        services.append(start_curriculum_service(config, factory=curriculum_factory))
        return services[-1]

    yield start
    for service in services:
        stop_curriculum_service(service, timeout=TIMEOUT)


def _client(service: Any) -> CurriculumClient:
    return CurriculumClient(service, prefetch=LIMITS.prefetch, batch_size=LIMITS.batch_size, timeout=TIMEOUT)


def _vecenv(client: CurriculumClient, seed: int, env: Callable[..., Any] = ExactAccountingEnv, **options: Any) -> Any:
    return make_curriculum_vecenv(env, client, backend="Ray", tracking="ray", num_envs=LIMITS.num_envs,
                                  num_workers=LIMITS.num_workers, seed=seed, worker_options=WORKER_OPTIONS,
                                  worker_timeout=TIMEOUT, **options)


def accounting_config(seed: int) -> CurriculumConfig:
    """Learning progress with eviction in short runs: tasks leave the pool while they run."""
    tasks = [(SingleTaskGenerator(cfg, label=f"t{i}"), 1.0) for i, cfg in enumerate(ACCOUNTING_TASKS)]
    return CurriculumConfig(task_generator=WeightedTaskSetGenerator(tasks, seed=seed),
                            algorithm=LearningProgressConfig(min_samples_for_lp=3), num_active_tasks=8, seed=seed,
                            min_presentations=4, eviction_percentile=50.0, refresh_interval=5)


def test_every_episode_is_recorded_exactly_once_through_the_service(serve, uses_builtin_curriculum, scenario_seed,
                                                                     oracle, golden) -> None:
    service = serve(accounting_config(scenario_seed))
    client = _client(service)
    context = "Ray/ray, learning progress with eviction"
    watcher = oracle(context=context)
    vecenv = _vecenv(client, scenario_seed, env=SeedReportingEnv)
    try:
        _, infos = vecenv.reset(seed=scenario_seed)
        watcher.observe(infos)
        reported = [info["seed_reporting"] for info in infos if "seed_reporting" in info]
        expected = list(range(scenario_seed, scenario_seed + LIMITS.num_envs))
        for what, key in (("reset(seed={}) reset the envs", "reset_seed"), ("seed={} built the envs", "built_seed")):
            seeds = sorted(seeds[key] for seeds in reported)
            assert seeds == expected, (
                f"{context}: {what.format(scenario_seed)} ({LIMITS.num_envs} on {LIMITS.num_workers} Ray workers) with "
                f"seeds {seeds}; env i gets seed + i: {expected}")
        processes = len({seeds["pid"] for seeds in reported})
        assert processes == LIMITS.num_workers, (
            f"{context}: {LIMITS.num_envs} envs asked for on num_workers={LIMITS.num_workers} Ray workers ran in "
            f"{processes} processes, seed {scenario_seed}")
        ended = 0
        for _ in range(LIMITS.accounting_vec_steps):
            _, _, terminals, truncations, infos = vecenv.step(np.zeros(LIMITS.num_envs, dtype=np.int64))
            watcher.observe(infos)
            ended += int((np.asarray(terminals).reshape(-1) | np.asarray(truncations).reshape(-1)).sum())
    finally:
        vecenv.close()  # the workers' clients send what they still queue
    try:
        records = len(watcher.episodes)
        assert records == ended, (
            f"{context}: {ended} episodes ended (done flags) but the envs reported {records}, seed {scenario_seed}")
        stats = client.stats()
        recorded, late = stats["total_completions"], stats["late_completions"]
        ends = Counter(e.record.ended for e in watcher.episodes)
        assert recorded + late == records, (
            f"{context}: the service recorded {recorded} completions and {late} late ones, {recorded + late} in all, "
            f"for the {records} episodes the envs ended ({dict(ends)}; {LIMITS.num_envs} envs on "
            f"{LIMITS.num_workers} Ray workers, {LIMITS.accounting_vec_steps} vec steps), seed {scenario_seed}")
        claimed_late = sum(e.late for e in watcher.episodes)
        assert late == claimed_late, (
            f"{context}: the service counted {late} late completions, the workers' verdicts {claimed_late} "
            f"(batch size {LIMITS.batch_size}: each verdict is its episode's own), seed {scenario_seed}")
        if uses_builtin_curriculum:  # a plug-in that never evicts has no late completions to account for
            evictions = stats.get("evictions", 0)
            assert late > 0 and evictions > 0, (
                f"{context}: the run never exercised late completions ({late} late, {evictions} evictions in "
                f"{records} episodes), seed {scenario_seed}")
        watcher.verify(client)
        accounts, open_clients = client.service_stats(), ray.get(service.client_accounts.remote(), timeout=TIMEOUT)
        assert list(open_clients) == [client.client_id] and accounts["issued_tasks"] == sum(
            accounts[name] for name in ("acknowledged_completions", "lost_tasks", "abandoned_tasks",
                                        "outstanding_tasks")), (
            f"{context}: once the vector closed, the service holds clients {open_clients} (only the driver's "
            f"{client.client_id} is open: the workers' clients sent what they queued, then left) and accounts "
            f"{accounts}, where issued_tasks == acknowledged + lost + abandoned + outstanding, seed {scenario_seed}")
        golden({"vec_steps": LIMITS.accounting_vec_steps, "episodes": records, "recorded_plus_late": recorded + late})
    finally:
        client.close()


def test_wrappers_on_a_batching_client_count_every_verdict_it_hands_over(serve, uses_builtin_curriculum,
                                                                         scenario_seed) -> None:
    """Two `CurriculumEnv`s in one process share a client that batches (`batch_size` above 1:
    a completion's verdict comes back with a later call). The envs' own counters
    (`completions`, `late_completions`) must add up what their episodes' infos report; the
    completions must be the service's, and the late verdicts the infos report plus those the
    client still holds after the last episode must be the service's late completions. Closed
    with completions queued, the client sends them, then leaves: the service keeps no record of
    it, and every task it issued was acknowledged or abandoned."""
    actor = serve(accounting_config(scenario_seed))
    client = CurriculumClient(actor, prefetch=LIMITS.prefetch, batch_size=LIMITS.deferred_batch_size,
                              timeout=TIMEOUT)
    envs = [CurriculumEnv(ExactAccountingEnv(seed=scenario_seed + i), client, seed=scenario_seed + i)
            for i in range(2)]
    reported: dict[str, list[float]] = defaultdict(list)
    try:
        for env in envs:
            env.reset(seed=scenario_seed)
        for _ in range(LIMITS.deferred_steps):
            for env in envs:
                accumulate_rollout_stats(env.step(np.zeros_like(env.actions))[4], reported)
        counted = (sum(env.completions for env in envs), sum(env.late_completions for env in envs))
        infos = (int(sum(reported[stat_key(COMPLETIONS)])), int(sum(reported[stat_key(LATE_COMPLETIONS)])))
        stats = client.stats()  # sends the queue: the last verdicts come back
        held = client.take_late_verdicts()
        service = (stats["total_completions"] + stats["late_completions"], stats["late_completions"])
        assert counted == infos and (infos[0], infos[1] + held) == service, (
            f"batching client (batch size {LIMITS.deferred_batch_size}): the envs count (completions, late) "
            f"{counted}, their infos report {infos}, the client holds {held} late verdict(s) more, the service "
            f"recorded {service}, seed {scenario_seed}")
        if uses_builtin_curriculum:  # a plug-in that never evicts has no late completions to account for
            assert service[1] > 0, (
                f"the batching run never exercised late completions ({service[0]} episodes), seed {scenario_seed}")
        while not client.pending_completions:  # the client closes with completions queued
            for env in envs:
                env.step(np.zeros_like(env.actions))
        queued = client.pending_completions
        client.close()
        stats, accounts, open_clients = ray.get([actor.stats.remote(), actor.service_stats.remote(),
                                                 actor.client_accounts.remote()], timeout=TIMEOUT)
        assert not open_clients and accounts["outstanding_tasks"] == 0 and accounts["acknowledged_completions"] == (
            stats["total_completions"] + stats["late_completions"]) and accounts["issued_tasks"] == (
            accounts["acknowledged_completions"] + accounts["abandoned_tasks"]), (
            f"a batching client closed with {queued} completion(s) queued left the service with open clients "
            f"{open_clients}, accounts {accounts} and {stats['total_completions']} + {stats['late_completions']} "
            "completions recorded: closing sends the queue, then leaves (every task acknowledged or abandoned), "
            f"seed {scenario_seed}")
    finally:
        for env in envs:
            env.close()
        client.close()


def test_an_error_in_a_ray_workers_step_fails_the_trainers_step_by_name(serve, scenario_seed) -> None:
    """An env whose episode ends with a score out of the curriculum's range fails in its Ray
    worker's step (its wrapper refuses the score): the trainer's step that receives that step
    raises the wrapper's named error, `InvalidScoreError`; the trainer never goes on with data
    of a worker whose step failed."""
    task = {"reward_per_step": LIMITS.out_of_range_reward, "episode_length": LIMITS.out_of_range_length}
    config = CurriculumConfig(task_generator=SingleTaskGenerator(task), algorithm=UniformConfig(), num_active_tasks=2,
                              seed=scenario_seed)
    client = _client(serve(config))
    vecenv = _vecenv(client, scenario_seed)
    steps = 0
    try:
        vecenv.reset(seed=scenario_seed)
        with pytest.raises(InvalidScoreError):
            for steps in range(1, LIMITS.out_of_range_steps + 1):
                vecenv.step(np.zeros(LIMITS.num_envs, dtype=np.int64))
        assert steps == LIMITS.out_of_range_length, (
            f"every episode ends at step {LIMITS.out_of_range_length} with a score out of range, which its env's "
            f"wrapper refuses; the trainer's step {steps} raised it, seed {scenario_seed}")
    finally:
        vecenv.close()
        client.close()


@pytest.mark.parametrize("late_worker", [False, True], ids=["together", "one_late"])
def test_a_worker_whose_env_fails_to_close_still_sends_its_completions(serve, scenario_seed, late_worker) -> None:
    """Envs whose `close()` raises: the vector's `close()` fails by name (`WorkerProcessError`),
    and each worker still closes its client, which sends the completions it queued (batches
    larger than the run), so the service counts every episode the envs ended and holds no
    client of theirs. With `one_late`, the second worker's close fails seconds after the
    first's: the vector must not stop it before it has left the service."""
    service = serve(accounting_config(scenario_seed))
    client = CurriculumClient(service, prefetch=LIMITS.prefetch, batch_size=LIMITS.queued_batch_size, timeout=TIMEOUT)
    envs_per_worker = LIMITS.num_envs // LIMITS.num_workers
    delays = {scenario_seed + envs_per_worker: LIMITS.late_close_delay} if late_worker else {}
    vecenv = _vecenv(client, scenario_seed, env=functools.partial(CloseFailingEnv, close_delays=delays))
    ended = 0
    try:
        try:
            vecenv.reset(seed=scenario_seed)
            for _ in range(LIMITS.close_failing_vec_steps):
                _, _, terminals, truncations, _ = vecenv.step(np.zeros(LIMITS.num_envs, dtype=np.int64))
                ended += int((np.asarray(terminals).reshape(-1) | np.asarray(truncations).reshape(-1)).sum())
        finally:
            with pytest.raises(WorkerProcessError):
                vecenv.close()
        stats = client.stats()
        counted = stats["total_completions"] + stats["late_completions"]
        open_clients = list(ray.get(service.client_accounts.remote(), timeout=TIMEOUT))
        assert ended and counted == ended and open_clients == [client.client_id], (
            f"envs whose close() raises ended {ended} episodes; after the vector's close the service counted "
            f"{counted} and holds clients {open_clients} (only the driver's {client.client_id} expected), seed "
            f"{scenario_seed}")
    finally:
        client.close()


def _wait_for_clients(service: Any, count: int, context: str) -> None:
    """Until `count` clients registered with the service (a worker's client registers as its
    actor starts), so the timed part of a check does not include the workers' start-up."""
    deadline = time.monotonic() + TIMEOUT
    while len(ray.get(service.client_accounts.remote(), timeout=TIMEOUT)) < count:
        assert time.monotonic() < deadline, f"{context}: fewer than {count} clients registered within {TIMEOUT} s"
        time.sleep(0.05)


def test_a_frozen_ray_worker_fails_the_step_by_name_and_every_worker_is_stopped(serve, scenario_seed) -> None:
    """A Ray worker whose process stops (SIGSTOP: alive, never answering) fails the trainer's
    next step with `WorkerProcessError` once `worker_timeout` runs out, by that name, not when
    the worker dies; and the vector, which closes itself on that failure, ends every worker's
    process, the healthy one's too, although the frozen worker never answers its close: no
    actor of a failed run keeps running (and holding its resources) on the cluster."""
    timeout = LIMITS.frozen_worker_timeout
    context = f"Ray/ray, worker_timeout={timeout} s"
    service = serve(accounting_config(scenario_seed))
    client = _client(service)
    vecenv = make_curriculum_vecenv(SeedReportingEnv, client, backend="Ray", tracking="ray",
                                    num_envs=LIMITS.num_envs, num_workers=LIMITS.num_workers, seed=scenario_seed,
                                    worker_options=WORKER_OPTIONS, worker_timeout=timeout)
    pids: list[int] = []
    try:
        _wait_for_clients(service, 1 + LIMITS.num_workers, context)  # the driver's client and each worker's
        _, infos = vecenv.reset(seed=scenario_seed)
        pids = sorted({info["seed_reporting"]["pid"] for info in infos if "seed_reporting" in info})
        assert len(pids) == LIMITS.num_workers and os.getpid() not in pids, (
            f"{context}: the envs reported processes {pids}; {LIMITS.num_workers} Ray workers run them, each in "
            f"its own process (the driver is {os.getpid()})")
        frozen = pids[-1]
        os.kill(frozen, signal.SIGSTOP)
        watchdog = threading.Timer(4 * timeout, os.kill, (frozen, signal.SIGKILL))  # a step that never fails
        watchdog.start()
        started = time.monotonic()
        try:
            with pytest.raises(WorkerProcessError) as failure:
                vecenv.step(np.zeros(LIMITS.num_envs, dtype=np.int64))
        finally:
            watchdog.cancel()
        waited = time.monotonic() - started
        assert "within worker_timeout" in str(failure.value), (
            f"{context}: with worker process {frozen} stopped, the trainer's step raised after {waited:.1f} s: "
            f"{failure.value}; a worker that does not answer within worker_timeout fails the step by that name "
            f"(the process was killed only after {4 * timeout:.0f} s), seed {scenario_seed}")
        assert vecenv.closed, f"{context}: the vector did not close itself after {failure.value!r}"
        deadline = time.monotonic() + LIMITS.stopped_workers_within
        while (alive := [pid for pid in pids if is_running(pid)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive, (
            f"{context}: the vector closed itself after the frozen worker's timeout, but worker processes {alive} "
            f"of {pids} (frozen: {frozen}) still ran {LIMITS.stopped_workers_within:.0f} s later; closing stops "
            f"every worker, whether or not it answers its close, seed {scenario_seed}")
    finally:
        for pid in pids:  # a failed check leaves no stopped process behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        vecenv.close()
        client.close()


def test_the_oldest_queued_completion_waits_at_most_max_delay(serve, scenario_seed) -> None:
    """The staleness bound in time: with `max_delay`, a batch goes out at the first call after
    the oldest queued completion has waited that long, however many completions came since.
    Completions `max_delay_interval` seconds apart (slower under load: never faster) then never
    queue more than those that fit in `max_delay`, plus the one that finds it overdue."""
    client = CurriculumClient(serve(accounting_config(scenario_seed)), prefetch=LIMITS.prefetch,
                              batch_size=LIMITS.max_delay_batch_size, timeout=TIMEOUT, max_delay=LIMITS.max_delay)
    bound = math.floor(LIMITS.max_delay / LIMITS.max_delay_interval) + 1
    queued = []
    try:
        for _ in range(LIMITS.max_delay_completions):
            task = client.get_task()
            time.sleep(LIMITS.max_delay_interval)
            client.update_task_performance(task.task_id, 0.5)
            queued.append(client.unsent_completions)
        assert max(queued) <= bound, (
            f"completions {LIMITS.max_delay_interval} s apart, max_delay={LIMITS.max_delay} s, batch size "
            f"{LIMITS.max_delay_batch_size}: up to {max(queued)} queued (after each completion: {queued}); the oldest "
            f"may wait max_delay, so at most {bound}, seed {scenario_seed}")
    finally:
        client.close()


def test_workers_never_run_ahead_of_the_service_and_lag_at_most_their_queue(
    serve, curriculum_factory, require_capability, scenario_seed, check_limit, oracle, golden
) -> None:
    config = staged_config(scenario_seed)
    try:
        probe = curriculum_factory(config)
    except (CurriculumConfigError, NotImplementedError) as error:
        probe = None
        require_capability(False, f"stage sync over Ray needs a staged curriculum; the factory refused a staged "
                                  f"config: {type(error).__name__}: {error}")
    require_capability(getattr(probe, "stage", None) is not None,
                       "stage sync over Ray needs a staged curriculum that reports its `stage`")
    if callable(getattr(probe, "close", None)):
        probe.close()
    service = serve(config)
    client = _client(service)
    context = "Ray/ray, staged progression"
    watcher = oracle(score_fn=full_score, context=context)
    envs_per_worker = LIMITS.num_envs // LIMITS.num_workers
    last = len(STAGE_SYNC.stage_episode_lengths) - 1

    def service_stage() -> int:
        return ray.get(service.describe.remote(), timeout=TIMEOUT)["stage"]

    vecenv = _vecenv(client, scenario_seed, score_fn=full_score)
    try:
        obs, infos = vecenv.reset(seed=scenario_seed)
        watcher.observe(infos)
        stage_history = [service_stage()]
        ahead, stale = [], []
        # stale[(worker, s)]: the worker's starts of a stage below s once the service had reached s
        stale_starts: Counter = Counter()
        ended = 0
        last_reached = None  # the vec step at which the service reached its last stage
        for step in range(1, LIMITS.stage_vec_steps + 1):
            if last_reached is not None and step - last_reached > LIMITS.vec_steps_after_last_stage:
                break
            obs, _, terminals, truncations, infos = vecenv.step(np.zeros(LIMITS.num_envs, dtype=np.int64))
            watcher.observe(infos)
            stage_now = service_stage()
            stage_history.append(stage_now)
            if stage_now == last and last_reached is None:
                last_reached = step
            done = np.asarray(terminals).reshape(-1) | np.asarray(truncations).reshape(-1)
            ended += int(done.sum())
            for env_index, (finished, o) in enumerate(zip(done, obs.reshape(LIMITS.num_envs, -1))):
                if not finished:
                    continue
                new_stage = LENGTH_TO_STAGE[int(o[0])]
                if new_stage > stage_now:
                    ahead.append((step, env_index, new_stage, stage_now))
                reached = stage_history[step - 1]  # before this step's draws
                if new_stage < reached:
                    stale.append((step, env_index, new_stage, reached))
                    for s in range(new_stage + 1, reached + 1):
                        stale_starts[(env_index // envs_per_worker, s)] += 1
    finally:
        vecenv.close()
    try:
        stats = client.stats()
        recorded = stats["total_completions"] + stats["late_completions"]
        assert recorded == ended == len(watcher.episodes), (
            f"{context}: the service recorded {recorded} episodes, the envs ended {ended} and reported "
            f"{len(watcher.episodes)}, seed {scenario_seed}")
        assert stats["stage"] == last and stats["advancements"] == last and stats["regressions"] == 0, (
            f"{context}: expected exactly {last} advancements to stage {last}, got stage {stats['stage']} after "
            f"{stats['advancements']} advancements and {stats['regressions']} regressions, seed {scenario_seed}")
        assert not ahead, (
            f"{context}: workers started episodes of stages the service had not reached (vec step, env, episode "
            f"stage, service stage): {ahead[:5]}, seed {scenario_seed}")
        worst = max(stale_starts.values(), default=0)
        check_limit("ray_stale_starts_per_advancement", worst, LIMITS.max_stale_starts_per_advancement, fmt=".0f",
                    what=f"{context}: most older-stage episodes one worker started after an advancement "
                         f"(prefetch {LIMITS.prefetch}; vec step, env, episode stage, service stage: {stale[:5]}):")
        watcher.verify(client)
        golden({"vec_steps": LIMITS.stage_vec_steps, "stage": stats["stage"], "advancements": stats["advancements"],
                "regressions": stats["regressions"]})
    finally:
        client.close()


class _ModelClient:
    """What one client of the service's accounts check holds, by the protocol: the tasks handed
    to it (id, epoch), its last batch and verdicts, and its accounts."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tasks: list[tuple[int, str]] = []
        self.seq = 0
        self.last: tuple[int, list[tuple[int, float, str]], list[Any]] | None = None
        self.issued = self.acknowledged = 0
        self.lost = False
        self.known = True
        """Whether the service's incarnation has heard from it (a restarted one only once it calls)."""


_SCHEDULE = {"batch": 24, "refill": 12, "resend": 3, "complete now": 3, "new client": 1, "release": 1, "lost": 1,
             "checkpoint": 1, "restore": 1, "refused restore": 1, "restart": 1}
"""The relative weights of a client's calls in the schedule (`LIMITS.schedule_calls` calls)."""


def test_the_service_accounts_for_every_task_whatever_its_clients_do(ray_cluster, curriculum_factory,
                                                                      uses_builtin_curriculum, require_capability,
                                                                      scenario_seed, tmp_path) -> None:
    """After every call of a seeded schedule of client calls, the service's body answers as the
    protocol says: a batch gets one verdict per completion, recorded or late, never refused for
    a task it issued (of this incarnation or an earlier one); a resent batch is answered from
    its record and changes nothing, whatever came between; a client declared lost is refused;
    a task handed out with a batch's verdicts is in the pool the batch left (completed at once,
    it is recorded) and of the stage the answer reports; the curriculum counted every
    completion once; and `service_stats()` and `client_accounts()` equal the model's accounts
    (`issued == acknowledged + lost + abandoned + outstanding`). A refused restore changes
    nothing, not even the incarnation. A service restarted with its first arguments (a `state`
    and its checkpoint file) resumes from the file, which holds exactly what the service had
    counted at the batch that took it `checkpoint_interval` completions past the one before
    (or at a checkpoint written on request, from which the interval is counted again):
    each client's last batch the file recorded, resent, is answered from that record; a client
    that has not called the restarted service yet is not among its clients, and declared lost
    (its worker died meanwhile) it is refused like any other. One schedule serves learning progress with eviction, one a staged curriculum (each when the
    factory takes its config)."""
    served = []
    for setup, config in (("evicting", accounting_config(scenario_seed)), ("staged", staged_config(scenario_seed))):
        path = tmp_path / f"{setup}.json"

        def start(state: Any = None, config: CurriculumConfig = config, path: Path = path) -> Any:
            return CurriculumService(config, factory=curriculum_factory, state=state, checkpoint_path=str(path),
                                     checkpoint_interval=LIMITS.schedule_checkpoint_interval)

        try:
            service = start()
        except (CurriculumConfigError, NotImplementedError):
            continue  # a curriculum that takes no such config has no such schedule to follow
        if setup == "staged" and service.describe()["stage"] is None:
            continue  # (nor one without stages a staged one)
        _follow_schedule(service, start, setup, uses_builtin_curriculum, scenario_seed)
        served.append(setup)
    require_capability(bool(served), "the factory took neither the learning-progress nor the staged config")
    assert served == ["evicting", "staged"] or not uses_builtin_curriculum, (
        f"the built-in curriculum served only the {served} schedule(s), seed {scenario_seed}")


def _follow_schedule(service: Any, start: Callable[..., Any], setup: str, uses_builtin_curriculum: bool,
                     scenario_seed: int) -> None:
    """The seeded schedule of client calls on `service`'s body, held to the protocol after each;
    `start(state)` starts it again (its checkpoint file is written every
    `LIMITS.schedule_checkpoint_interval` completions)."""
    power = 1.0 if setup == "evicting" else 0.05  # scores: uniform (evictions), or mostly above the stage threshold
    try:
        snapshot = service.get_state()
    except (AttributeError, NotImplementedError):  # a plug-in without checkpoints: no restores in the schedule
        snapshot = None
    first_state = snapshot
    rng = np.random.default_rng(scenario_seed)
    clients: list[_ModelClient] = []
    totals = Counter()  # this incarnation's accounts (a restart starts them again)
    earlier = Counter()  # the accounts of the incarnations a restart ended
    since_file = 0  # completions applied since the checkpoint file was last written
    in_file: tuple[int, dict[str, Any]] | None = None  # what the file holds: the count, the batch records
    epoch = service.describe()["epoch"]
    stats = service.stats()
    counted = first_count = stats["total_completions"] + stats["late_completions"]
    stale_before = 0
    names = itertools.count()

    def open_client() -> _ModelClient:
        client = _ModelClient(f"client-{next(names)}")
        service.describe(client.name)
        clients.append(client)
        return client

    def send(client: _ModelClient, seq: int, items: list[tuple[int, float, str]], want: int) -> dict[str, Any]:
        answer = service.exchange(client.name, seq, items, want)
        client.known = True
        if setup == "staged":
            stages = [LENGTH_TO_STAGE[env_cfg["episode_length"]] for _, env_cfg, _, _ in answer["tasks"]]
            assert all(stage == answer["stage"] for stage in stages), (
                f"{client.name}'s batch {seq}: handed tasks of stages {stages} in an answer at stage {answer['stage']}, "
                f"seed {scenario_seed}")
        for task_id, _, _, _ in answer["tasks"]:
            client.tasks.append((task_id, answer["epoch"]))
        client.issued += len(answer["tasks"])
        totals["issued"] += len(answer["tasks"])
        return answer

    def batch(client: _ModelClient, picked: list[int], want: int, where: str) -> list[Any] | None:
        """Complete `client`'s tasks at `picked` in one new batch that asks for `want` tasks; its
        verdicts (None for a client declared lost, which is refused)."""
        nonlocal counted, since_file, in_file
        items = [(task_id, float(rng.random() ** power), issued_by) for task_id, issued_by in
                 (client.tasks.pop(i) for i in sorted(picked, reverse=True))]
        client.seq += 1
        answer = send(client, client.seq, items, want)
        results = answer["results"]
        assert len(results) == len(items), f"{where}: {len(items)} completions sent, {len(results)} verdicts"
        if client.lost:
            assert all(isinstance(r, list) for r in results) and not answer["tasks"], (
                f"{where}: a client declared lost got verdicts {results} and {len(answer['tasks'])} tasks; "
                "whatever it sends is refused and it is handed nothing")
            return None
        refused = [(item, r) for item, r in zip(items, results) if not isinstance(r, bool)]
        assert not refused, f"{where}: completions of tasks the service issued were refused: {refused[:3]}"
        client.last = (client.seq, items, results)
        totals["late"] += results.count(False)
        current = sum(1 for item in items if item[2] == epoch)
        client.acknowledged += current
        totals["acknowledged"] += current
        totals["carried_over"] += len(items) - current
        counted += len(items)
        since_file += len(items)
        if since_file >= LIMITS.schedule_checkpoint_interval:  # the batch that takes the file that far writes it
            now = service.stats()
            in_file = (now["total_completions"] + now["late_completions"],
                       {c.name: c.last for c in clients if c.last is not None and not c.lost})
            since_file = 0
        return results

    def declare_lost(client: _ModelClient, where: str) -> None:
        """The client's worker died (also before it called a restarted service)."""
        lost = service.declare_lost(client.name)
        totals["lost before calling"] += not client.known
        assert lost == client.issued - client.acknowledged, (
            f"{where}: declare_lost counted {lost} tasks lost, the client had "
            f"{client.issued - client.acknowledged} outstanding")
        client.lost = True
        totals["lost"] += lost
        totals["lost_clients"] += 1

    for _ in range(3):
        open_client()
    requests = np.random.default_rng([scenario_seed, 1])  # (its own stream: the schedule's draws stay as they were)
    for call in range(1, LIMITS.schedule_calls + 1):
        if snapshot is not None and requests.random() < LIMITS.schedule_checkpoint_requests:
            service.checkpoint()  # written on request: the interval is counted from it
            now = service.stats()
            in_file = (now["total_completions"] + now["late_completions"],
                       {c.name: c.last for c in clients if c.last is not None and not c.lost})
            since_file = 0
        kind = rng.choice(list(_SCHEDULE), p=np.array(list(_SCHEDULE.values())) / sum(_SCHEDULE.values()))
        if kind in ("checkpoint", "restore", "refused restore", "restart") and snapshot is None:
            continue
        client = clients[rng.integers(len(clients))] if clients else open_client()
        where = f"[{setup}] call {call} ({kind}, {client.name}), seed {scenario_seed}"
        if kind == "batch":
            picked = rng.choice(len(client.tasks), size=min(len(client.tasks), rng.integers(0, 7)), replace=False)
            batch(client, picked.tolist(), int(rng.integers(0, 7)), where)
        elif kind == "complete now":  # a batch that asks for one task, then that task completed at once
            if client.lost or not client.tasks:
                continue
            if batch(client, [int(rng.integers(len(client.tasks)))], 1, where):
                results = batch(client, [len(client.tasks) - 1], 0, where)
                assert results == [True], (
                    f"{where}: the task the batch before was answered with, completed with nothing in between, got "
                    f"verdict {results} (late: it was not in the pool when it was handed out)")
        elif kind == "refill":
            send(client, 0, [], int(rng.integers(1, 7)))
        elif kind == "resend":
            if client.last is None:
                continue
            seq, items, results = client.last
            answer = send(client, seq, items, 0)
            totals["resent"] += 1
            if not client.lost:
                assert answer["results"] == results, (
                    f"{where}: batch {seq} resent got verdicts {answer['results']}, first {results} (a resend is "
                    "answered from the record of the batch)")
        elif kind == "new client":
            open_client()
        elif kind == "release":
            service.release(client.name)
            clients.remove(client)
            if not client.lost:
                totals["abandoned"] += client.issued - client.acknowledged
        elif kind == "lost":
            if client.lost:
                continue
            declare_lost(client, where)
        elif kind == "checkpoint":
            snapshot = service.get_state()
        elif kind == "restore":
            error = service.load_state(snapshot)
            assert error is None, f"{where}: the service refused its own snapshot: {error}"
            epoch = service.describe()["epoch"]
            stats = service.stats()
            counted = stats["total_completions"] + stats["late_completions"]
            stale_before = service.service_stats()["stale_after_restore"]
        elif kind == "refused restore":  # a snapshot of another version: refused, and nothing changes
            before = (service.describe()["epoch"], service.stats(), service.service_stats())
            error = service.load_state({**snapshot, "format": "curriculum-state/0"})
            if error is None:  # (a plug-in may not check the format: then it was a restore)
                assert not uses_builtin_curriculum, f"{where}: the service took a snapshot of another format"
                epoch = service.describe()["epoch"]
                stats = service.stats()
                counted = stats["total_completions"] + stats["late_completions"]
                stale_before = service.service_stats()["stale_after_restore"]
            else:
                totals["refused_restores"] += 1
                after = (service.describe()["epoch"], service.stats(), service.service_stats())
                changed = {what: (was, now) for what, was, now in
                           [("epoch", before[0], after[0])]
                           + [(f"stats()[{k!r}]", before[1].get(k), after[1].get(k)) for k in before[1] | after[1]]
                           + [(f"service_stats()[{k!r}]", before[2].get(k), after[2].get(k))
                              for k in before[2] | after[2]] if was != now}
                assert not changed, f"{where}: a refused restore ({error}) changed (before, after): {changed}"
        elif kind == "restart":  # the actor restarted with its first arguments: it resumes from its file
            service = start(first_state)
            epoch = service.describe()["epoch"]
            stats = service.stats()
            counted = stats["total_completions"] + stats["late_completions"]
            resumed = service.describe()["resumed_from_checkpoint"]
            expected_count = first_count if in_file is None else in_file[0]
            assert (resumed, counted) == (in_file is not None, expected_count), (
                f"{where}: restarted, the service resumed from its file: {resumed}, with {counted} completions "
                f"counted; the file was {'written' if in_file else 'never written'} and holds {expected_count} "
                f"(written at the batch that took it {LIMITS.schedule_checkpoint_interval} completions past the "
                "one before)")
            earlier.update(totals)
            totals = Counter(resumed=int(resumed))
            clients = [c for c in clients if not c.lost]  # (the workers of a lost client are gone)
            records = {} if in_file is None else in_file[1]
            calls_again = np.random.default_rng([scenario_seed, call])  # (the schedule's own draws unchanged)
            for c in clients:  # what a restarted service knows of each client: the file's batch record
                c.last, c.issued, c.acknowledged = records.get(c.name), 0, 0
                c.known = bool(calls_again.random() < 0.5)  # the others have not called the new incarnation yet
                if c.known:
                    service.describe(c.name)
            since_file, stale_before = 0, 0
            for c in clients:  # each calling client's last batch the file recorded, resent: answered from that record
                if c.known and c.last is not None:
                    seq, items, results = c.last
                    answer = send(c, seq, items, 0)
                    totals["resent after restart"] += 1
                    assert answer["results"] == results, (
                        f"{where}: batch {seq} of {c.name}, recorded in the checkpoint file, resent to the restarted "
                        f"service got verdicts {answer['results']}, first {results} (answered from its record)")
            silent = [c for c in clients if not c.known]
            if silent and calls_again.random() < 0.5:  # a worker that died while the service restarted
                declare_lost(silent[int(calls_again.integers(len(silent)))], where)
        stats, accounts = service.stats(), service.service_stats()
        recorded = stats["total_completions"] + stats["late_completions"]
        stale = accounts["stale_after_restore"] - stale_before
        assert recorded == counted if uses_builtin_curriculum else counted - stale <= recorded <= counted, (
            f"{where}: the curriculum counts {stats['total_completions']} completions and "
            f"{stats['late_completions']} late ones, {recorded} in all; every completion sent once since the last "
            f"restore makes {counted} (of which the service counted {stale} of tasks an earlier incarnation issued, "
            "which a curriculum without a tracker does not count)")
        expected = {"issued_tasks": totals["issued"], "acknowledged_completions": totals["acknowledged"],
                    "carried_over_completions": totals["carried_over"], "lost_tasks": totals["lost"],
                    "lost_clients": totals["lost_clients"], "abandoned_tasks": totals["abandoned"],
                    "outstanding_tasks": sum(c.issued - c.acknowledged for c in clients if not c.lost),
                    "clients": sum(1 for c in clients if not c.lost and c.known)}
        reported = {name: accounts[name] for name in expected}
        assert reported == expected, f"{where}: service_stats() {reported}, by the protocol {expected}"
        per_client = {name: (account["issued"], account["acknowledged"])
                      for name, account in service.client_accounts().items()}
        assert per_client == {c.name: (c.issued, c.acknowledged) for c in clients if not c.lost and c.known}, (
            f"{where}: client_accounts() {per_client}, by the protocol "
            f"{ {c.name: (c.issued, c.acknowledged) for c in clients if not c.lost and c.known} }")
    # (a plug-in that never evicts has no late completions, and may take a snapshot of another format)
    needed = ("resent", "lost", "abandoned") + (("carried_over", "resumed", "resent after restart",
                                                 "lost before calling") if snapshot is not None else ()) \
        + (("late", "refused_restores") if uses_builtin_curriculum else ())
    earlier.update(totals)
    thin = [name for name in needed if not earlier[name]]
    assert not thin, f"[{setup}] the schedule never made {thin}: {dict(earlier)}, seed {scenario_seed}"


class _Stalling:
    """A curriculum factory whose curricula stall the next completion for `LIMITS.client_stall`
    seconds once the file `flag` exists, and remove it (a service that stops answering for a
    while)."""

    def __init__(self, factory: Callable[..., Any], flag: str) -> None:
        self.factory, self.flag = factory, flag

    def __call__(self, config: CurriculumConfig) -> Any:
        return _StallingCurriculum(self.factory(config), self.flag)


class _StallingCurriculum:
    def __init__(self, inner: Any, flag: str) -> None:
        self._inner, self._flag = inner, flag

    def update_task_performance(self, task_id: Any, score: float) -> Any:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._flag)
            time.sleep(LIMITS.client_stall)
        return self._inner.update_task_performance(task_id, score)

    def __getattr__(self, name: str) -> Any:  # test double: everything else is the curriculum's
        return getattr(self._inner, name)


def _close_and_stop(client: CurriculumClient, service: Any) -> None:
    """Close `client` (an error of its last flush is not the check's), then stop `service`."""
    with contextlib.suppress(CurriculumError):
        client.close()
    stop_curriculum_service(service, timeout=TIMEOUT)


def test_completions_of_a_task_handed_out_before_and_after_a_restore_follow_its_handouts_in_order(
        ray_cluster, curriculum_factory, require_capability, scenario_seed) -> None:
    """A pool of one task: the client hands it out, restores the service to a snapshot (a new
    incarnation), and hands out the same task id again. The episode that started first ends
    first: its completion is of the task the earlier incarnation issued (carried over), the
    next one of the task the restored service issued (acknowledged); completions of one id are
    matched to its handouts oldest first."""
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"episode_length": 1}, label="only"),
                              algorithm=UniformConfig(), num_active_tasks=1, seed=scenario_seed)
    service = start_curriculum_service(config, factory=curriculum_factory)
    client = CurriculumClient(service, prefetch=LIMITS.prefetch, batch_size=1, timeout=TIMEOUT)
    try:
        try:
            snapshot = client.get_state()
        except (AttributeError, NotImplementedError, CurriculumError):
            require_capability(False, "the curriculum has no state to restore")
        first = client.get_task().task_id
        client.load_state(snapshot)
        again = client.get_task().task_id
        require_capability(again == first, "the restored pool hands out another task id")
        counts = []
        for _ in range(2):
            client.update_task_performance(first, 0.5)
            accounts = client.service_stats()
            counts.append((accounts["carried_over_completions"], accounts["acknowledged_completions"]))
        assert counts == [(1, 0), (1, 1)], (
            f"task {first} handed out, the service restored, the same id handed out again, then completed twice: "
            f"(carried over, acknowledged) after each completion {counts}, expected [(1, 0), (1, 1)] (the first "
            f"completion is of the first handout), seed {scenario_seed}")
    finally:
        _close_and_stop(client, service)


def test_a_client_never_reports_a_stage_the_service_has_left(ray_cluster, curriculum_factory, require_capability,
                                                             scenario_seed) -> None:
    """A staged curriculum that only advances (every score 1.0): the client collects answers
    out of the order the service gave them (a background refill asked for before the advance,
    taken after the batch that reported it), and must go on reporting the newest stage, the
    service's own, after every call."""
    stages = [Stage(f"s{i}", SingleTaskGenerator({"episode_length": 1, "level": i}, label=f"s{i}")) for i in range(3)]
    config = CurriculumConfig(algorithm=StagedProgressionConfig(stages=stages, advancement_threshold=0.5,
                                                                min_episodes=2, window=2),
                              num_active_tasks=4, seed=scenario_seed)
    try:
        service = start_curriculum_service(config, factory=curriculum_factory)
    except (CurriculumConfigError, NotImplementedError):
        require_capability(False, "the factory takes no staged config")
    client = CurriculumClient(service, prefetch=LIMITS.stage_order_prefetch, batch_size=64, timeout=TIMEOUT)
    seen, wrong = [], []
    try:
        for call in range(LIMITS.stage_order_calls):
            task = client.get_task()
            if call % 4 == 3:  # a batch of four sent and answered: the service may advance
                for _ in range(4):
                    client.update_task_performance(task.task_id, 1.0)
                client.flush()
            service_stage = ray.get(service.describe.remote(), timeout=TIMEOUT)["stage"]
            seen.append((client.stage, service_stage))
            if client.stage is not None and client.stage < max(stage for stage, _ in seen):
                wrong.append((call, client.stage, service_stage))
        require_capability(seen[-1][1] is not None, "the curriculum reports no stage")
        assert not wrong and seen[-1][1] > 0, (
            f"a client whose service only advances reported a stage it had left: (call, client's stage, service's "
            f"stage) {wrong[:4]}; the service reached stage {seen[-1][1]}, seed {scenario_seed}")
    finally:
        _close_and_stop(client, service)


def test_a_client_follows_the_stage_of_a_service_ray_restarted_from_its_checkpoint(
        ray_cluster, curriculum_factory, require_capability, scenario_seed, tmp_path) -> None:
    """A staged service that Ray restarts from its checkpoint file (`max_restarts`) comes back
    at the stage the file holds, numbering its answers from the start again: its clients must
    follow it there at once (its stage, by its first answers), not keep the stage the dead
    incarnation had reached until the new one has answered as many times."""
    stages = [Stage(f"s{i}", SingleTaskGenerator({"episode_length": 1, "level": i}, label=f"s{i}")) for i in range(3)]
    config = CurriculumConfig(algorithm=StagedProgressionConfig(stages=stages, advancement_threshold=0.5,
                                                                min_episodes=4, window=4),
                              num_active_tasks=4, seed=scenario_seed)
    try:
        service = start_curriculum_service(config, factory=curriculum_factory, checkpoint_path=str(tmp_path / "s.json"),
                                           max_restarts=1)
    except (CurriculumConfigError, NotImplementedError):
        require_capability(False, "the factory takes no staged config")
    client = CurriculumClient(service, prefetch=LIMITS.prefetch, batch_size=1, timeout=TIMEOUT)
    try:
        client.get_task()
        require_capability(client.stage is not None, "the curriculum reports no stage")
        client.checkpoint()  # the file holds stage 0
        for _ in range(LIMITS.restart_stage_calls):  # the service advances, answering many times
            client.update_task_performance(client.get_task().task_id, 1.0)
        advanced, dead_epoch = client.stage, client.service_stats()["epoch"]
        ray.kill(service, no_restart=False)
        deadline = time.monotonic() + TIMEOUT
        while True:  # until the restarted incarnation answers
            try:
                if client.service_stats()["epoch"] != dead_epoch:
                    break
            except CurriculumServiceError:
                pass
            assert time.monotonic() < deadline, f"the service did not come back within {TIMEOUT} s"
            time.sleep(0.2)
        seen = []
        for _ in range(LIMITS.prefetch + 2):  # (the queue of the dead incarnation's tasks runs out)
            client.update_task_performance(client.get_task().task_id, 0.0)
            seen.append((client.stage, ray.get(service.describe.remote(), timeout=TIMEOUT)["stage"]))
        assert advanced > 0 and seen[-1][0] == seen[-1][1], (
            f"a client whose service reached stage {advanced}, then was restarted by Ray from its checkpoint at stage "
            f"0: (client's stage, service's stage) after each call {seen}, seed {scenario_seed}")
    finally:
        _close_and_stop(client, service)


class _UnwritableState:
    """A curriculum factory whose curricula's state holds something no JSON writer takes, once
    `spoiled` is set (a plug-in's state with a numpy number or a set in it)."""

    def __init__(self, factory: Callable[..., Any]) -> None:
        self.factory, self.spoiled = factory, False

    def __call__(self, config: CurriculumConfig) -> Any:
        return _UnwritableStateCurriculum(self.factory(config), self)


class _UnwritableStateCurriculum:
    def __init__(self, inner: Any, owner: _UnwritableState) -> None:
        self._inner, self._owner = inner, owner

    def get_state(self) -> Any:
        state = self._inner.get_state()
        return {**state, "unwritable": object()} if self._owner.spoiled else state

    def __getattr__(self, name: str) -> Any:  # test double: everything else is the curriculum's
        return getattr(self._inner, name)


def test_a_checkpoint_that_cannot_be_written_leaves_the_last_one_and_no_other_file(curriculum_factory,
                                                                                    require_capability,
                                                                                    scenario_seed, tmp_path) -> None:
    """The service writes its checkpoint file atomically: a write that fails (here a state no
    JSON writer takes; a full disk alike) raises, and leaves the file written before as it was
    and nothing else in its folder, however the write failed."""
    factory = _UnwritableState(curriculum_factory)
    path = tmp_path / "service.json"
    service = CurriculumService(accounting_config(scenario_seed), factory=factory, checkpoint_path=str(path))
    try:
        service.get_state()
    except (AttributeError, NotImplementedError):
        require_capability(False, "the curriculum has no state to write")
    service.checkpoint()
    written = path.read_bytes()
    factory.spoiled = True
    with pytest.raises(TypeError) as raised:  # (what the JSON writer raises)
        service.checkpoint()
    left = sorted(os.listdir(tmp_path))
    assert left == [path.name] and path.read_bytes() == written, (
        f"a checkpoint write that failed ({raised.type.__name__}: {raised.value}) left {left} in the folder (expected "
        f"only {path.name!r}), the file written before {'intact' if path.read_bytes() == written else 'changed'}, "
        f"seed {scenario_seed}")


class _ClientModel:
    """What one `CurriculumClient` holds and counts, by its documentation: completions queued
    (`unsent_completions`), a batch sent and not yet answered (with them,
    `pending_completions`), its counters, and the tasks it handed out."""

    def __init__(self, client: CurriculumClient, name: str, batch_size: int, max_delay: float | None) -> None:
        self.client, self.name = client, name
        self.batch_size, self.max_delay = batch_size, max_delay  # (as asked for, not as the client holds them)
        self.held: list[int] = []
        self.pending: list[bool] = []  # per completion queued: whether the service refuses it (an id never issued)
        self.outbox: list[bool] | None = None
        self.sent = self.refused = 0
        self.handed = 0  # tasks `get_task()` handed out, and those a restore dropped from the queue (at most prefetch)

    def collect(self) -> bool:
        """The outbox answered (a refusal in it raises): its counts; whether it raises."""
        batch, self.outbox = self.outbox, None
        self.sent += len(batch)
        self.refused += sum(batch)
        return any(batch)

    def flush(self) -> bool:
        """`flush()`: the outbox answered first, then the queue sent and answered; whether it raises."""
        if self.outbox is not None and self.collect():
            return True
        if self.pending:
            self.outbox, self.pending = self.pending, []
            return self.collect()
        return False

    def complete(self, refused: bool) -> bool:
        """`update_task_performance()`: queued, and the queue sent when full (or at once with
        `max_delay=0`); whether the call raises (a refusal in the batch it collects)."""
        self.pending.append(refused)
        if len(self.pending) < self.batch_size and self.max_delay is None:
            return False
        if self.batch_size == 1:
            return self.flush()
        if self.outbox is not None and self.collect():
            return True  # (the queue stays queued)
        self.outbox, self.pending = self.pending, []
        return False

    def refusing(self) -> bool:
        """Whether a completion sent or queued will be refused."""
        return any(self.outbox or ()) or any(self.pending)

    def differences(self) -> dict[str, tuple[Any, Any]]:
        client = self.client
        got = {"sent": client.sent, "refused": client.refused, "recorded + late": client.recorded + client.late,
               "unsent_completions": client.unsent_completions, "pending_completions": client.pending_completions}
        expected = {"sent": self.sent, "refused": self.refused, "recorded + late": self.sent - self.refused,
                    "unsent_completions": len(self.pending),
                    "pending_completions": len(self.pending) + len(self.outbox or ())}
        return {name: (got[name], expected[name]) for name in got if got[name] != expected[name]}


def _issued(service: Any, client: CurriculumClient) -> int:
    """The tasks the service issued to `client` (`client_accounts()`)."""
    return ray.get(service.client_accounts.remote(), timeout=TIMEOUT)[client.client_id]["issued"]


#: The clients of the check: (batch_size, max_delay); the last one also restores the service.
_CLIENT_SETTINGS = ((1, None), (3, None), (4, 0.0))
_CLIENT_SCHEDULE = {"get": 10, "complete": 10, "unknown id": 1, "flush": 2, "restore": 3, "stall": 3,
                    "refused restore": 1}
"""The relative weights of the calls in the clients' schedule (`LIMITS.client_calls` calls)."""


def test_a_client_accounts_for_every_completion_whatever_its_worker_does(ray_cluster, curriculum_factory,
                                                                         uses_builtin_curriculum, scenario_seed,
                                                                         tmp_path) -> None:
    """Workers' clients (batches of 1, of 3, and of 4 sent at once by `max_delay=0`; each the
    copy a worker gets, pickled and unpickled) under a seeded schedule of what a worker does:
    draw tasks, complete them, complete an id the service never issued, flush, restore a
    snapshot (or one of another version, refused: the client keeps its queued tasks), and
    flush while the service stalls past the client's timeout; at the end, one
    client is closed with a batch in flight, and one completes a task after its worker was
    declared lost (refused, and counted so). After every call
    each client's numbers are those its documentation gives: `unsent_completions` and
    `pending_completions` (a batch that was not answered stays, to be resent), `sent`, `refused`
    and `recorded + late == sent - refused` (every verdict of a batch counted, those after a
    refusal too); a call raises the service's refusal exactly when it collects a batch that
    holds one; reading `stats()` or the state, or a flush with nothing to send, draws no task.
    The tasks the restoring client handed out before its restore and completes after it are
    never refused (those the restored pool does not hold are late: at the end, tasks drawn after
    evictions complete after a restore to the state before them); a task it hands out right
    after its restore is one the restored service issued (`client_accounts()`: its completion is
    acknowledged), never one drawn from the replaced pool. (Restores come in the second half of
    the schedule, where only the restoring client completes ids never issued: a client that has
    not heard from the service since a restore takes such an id for one an earlier incarnation
    issued, and its completion is late.)"""
    flag = tmp_path / "stall"
    service = start_curriculum_service(accounting_config(scenario_seed), factory=_Stalling(curriculum_factory,
                                                                                             str(flag)))
    models = [_ClientModel(pickle.loads(pickle.dumps(  # the copy a worker gets (Ray pickles what it is sent)
        CurriculumClient(service, prefetch=LIMITS.prefetch, batch_size=batch_size, timeout=TIMEOUT,
                         max_delay=max_delay))), f"client {i} (batch {batch_size}, max_delay {max_delay})",
                           batch_size, max_delay)
              for i, (batch_size, max_delay) in enumerate(_CLIENT_SETTINGS)]
    restorer = models[-1]
    rng = np.random.default_rng(scenario_seed)
    done = Counter()
    try:
        for model in models:  # reads, before any task is drawn: nothing to send, no task to draw
            model.client.stats()
            model.client.flush()
        with pytest.raises(CurriculumConfigError):  # raised in the service, by its own name
            models[0].client.checkpoint()  # (a service started without a checkpoint path)
        try:
            snapshot = restorer.client.get_state()
        except (AttributeError, NotImplementedError, CurriculumError):  # a plug-in without checkpoints
            snapshot = None
        drawn = {model.name: (model.client.queued_tasks, _issued(service, model.client)) for model in models}
        assert drawn == {model.name: (0, 0) for model in models}, (
            f"clients that only read stats() and the state, and flushed nothing, drew tasks from the service (queued "
            f"tasks, tasks the service issued to the client): {drawn}, seed {scenario_seed}")
        unknown_ids = itertools.count(10**12)
        kinds, weights = list(_CLIENT_SCHEDULE), np.array(list(_CLIENT_SCHEDULE.values()), dtype=float)
        for call in range(1, LIMITS.client_calls + 1):
            second_half = call > LIMITS.client_calls // 2
            model = models[rng.integers(len(models))]
            kind = rng.choice(kinds, p=weights / weights.sum())
            client = model.client
            where = f"call {call} ({kind}), {model.name}, seed {scenario_seed}"
            if kind == "get":
                model.held.append(client.get_task().task_id)
                model.handed += 1
            elif kind in ("complete", "unknown id"):
                if kind == "complete" and not model.held or kind == "unknown id" and second_half and model is not restorer:
                    continue
                task_id = model.held.pop(int(rng.integers(len(model.held)))) if kind == "complete" else next(unknown_ids)
                raises = model.complete(kind == "unknown id")
                try:
                    client.update_task_performance(task_id, float(rng.random()))
                except UnknownTaskError:
                    assert raises, f"{where}: refused a completion, though the batch it collected held no refusal"
                else:
                    assert not raises, f"{where}: collected a batch that held a refusal, and raised nothing"
            elif kind == "flush":
                idle = model.outbox is None and not model.pending
                drawn = (client.queued_tasks, _issued(service, client))
                raises = model.flush()
                try:
                    client.flush()
                except UnknownTaskError:
                    assert raises, f"{where}: flush() raised a refusal, though no batch it sent held one"
                else:
                    assert not raises, f"{where}: flush() sent a batch that held a refusal, and raised nothing"
                now = (client.queued_tasks, _issued(service, client))
                assert not idle or now == drawn, (
                    f"{where}: flush() with nothing queued or in flight drew tasks from the service (queued tasks, "
                    f"tasks the service issued to the client) {drawn} -> {now}: a round trip that sends nothing")
            elif kind == "restore":
                if model is not restorer or snapshot is None or not second_half or model.refusing():
                    continue  # (load_state flushes first: only with nothing to refuse)
                model.flush()
                client.load_state(snapshot)
                model.handed += LIMITS.prefetch  # (the queue and a refill in flight, drawn from the replaced pool)
                try:  # tasks handed out before the restore, completed after it: late, never refused
                    while model.held:  # (before the one below: a task held under its id would take its completion)
                        model.complete(False)
                        client.update_task_performance(model.held.pop(), 0.5)
                    model.flush()
                    client.flush()
                except UnknownTaskError as error:
                    pytest.fail(f"{where}: a task handed out before the restore and completed after it was refused "
                                f"({error}); its completion is late")
                before = ray.get(service.client_accounts.remote(), timeout=TIMEOUT)[client.client_id]["acknowledged"]
                model.complete(False)
                client.update_task_performance(client.get_task().task_id, 0.5)
                model.handed += 1
                model.flush()
                client.flush()
                after = ray.get(service.client_accounts.remote(), timeout=TIMEOUT)[client.client_id]["acknowledged"]
                assert after - before == 1, (
                    f"{where}: the task handed out right after the restore, completed at once, counted "
                    f"{after - before} acknowledged completions of the restored service's tasks, expected 1 (a task "
                    "drawn from the replaced pool was handed out after the restore)")
            elif kind == "refused restore":  # a snapshot of another version: refused, and the client keeps its tasks
                if snapshot is None or model.refusing():
                    continue  # (load_state flushes first: only with nothing to refuse)
                model.flush()
                client.flush()
                held = (client.queued_tasks, _issued(service, client))
                with pytest.raises(CurriculumStateError):
                    client.load_state({**snapshot, "format": "curriculum-state/0"})
                now = (client.queued_tasks, _issued(service, client))
                assert now == held, (
                    f"{where}: a restore the service refused changed the client's queued tasks and the tasks the "
                    f"service issued to it {held} -> {now}")
            elif kind == "stall":  # the service stops answering past the client's timeout, then comes back
                if not model.pending or model.refusing():
                    continue  # (a flush that sends a batch, with nothing to refuse)
                ray.get(service.ping.remote(), timeout=TIMEOUT)  # every batch sent so far is applied: the next stalls
                flag.touch()
                client.timeout = LIMITS.client_short_timeout
                try:
                    with pytest.raises(CurriculumServiceError):
                        client.flush()
                finally:
                    client.timeout = TIMEOUT
                if model.outbox is not None:  # the batch sent before was answered
                    model.collect()
                model.outbox, model.pending = model.pending, []  # sent; its answer did not come: it stays
            done[kind] += 1
            wrong = model.differences()
            assert not wrong, f"{where}: (the client's, by its documentation): {wrong}"
            issued = _issued(service, client)
            assert issued <= model.handed + LIMITS.prefetch, (
                f"{where}: the service issued {issued} tasks to a client that handed out {model.handed} (a restore's "
                f"dropped queue counted as handed out; prefetch {LIMITS.prefetch}): it drew more than its queue holds")
        closer = models[1]  # (batches of 3, sent without waiting for the answer)
        if not closer.refusing():  # a batch in flight and nothing queued: close() must collect its verdicts
            while closer.outbox is None or closer.pending:
                closer.complete(False)
                closer.client.update_task_performance(closer.client.get_task().task_id, 0.5)
            closer.flush()
            closer.client.close()
            wrong = closer.differences()
            assert not wrong, f"after close() with a batch in flight, {closer.name}, seed {scenario_seed}: {wrong}"
        for model in models:
            if model is closer and not closer.refusing():
                continue
            while model.outbox is not None or model.pending:  # (a refusal ends a flush early)
                raises = model.flush()
                try:
                    model.client.flush()
                except UnknownTaskError:
                    assert raises, f"the last flush of {model.name} raised a refusal, though no batch held one"
                else:
                    assert not raises, f"the last flush of {model.name} sent a refusal and raised nothing"
            wrong = model.differences()
            assert not wrong, f"after a last flush, {model.name}, seed {scenario_seed}: {wrong}"
        lost = models[0]  # (batches of 1) its worker's node died: what it sends now is refused, and counted so
        while not lost.held:
            lost.held.append(lost.client.get_task().task_id)
        ray.get(service.declare_lost.remote(lost.client.client_id), timeout=TIMEOUT)
        assert lost.complete(True), f"{lost.name}'s model: a completion of a client declared lost is not refused"
        with pytest.raises(CurriculumServiceError):
            lost.client.update_task_performance(lost.held.pop(), 0.5)
        wrong = lost.differences()
        assert not wrong, (f"after a completion refused as the client was declared lost, {lost.name}, seed "
                           f"{scenario_seed}: {wrong}")
        needed = ("stall", "unknown id") + (("restore",) if snapshot is not None else ())
        thin = [kind for kind in needed if not done[kind]]
        assert not thin, f"the schedule never made {thin}: {dict(done)}, seed {scenario_seed}"
        if snapshot is not None and uses_builtin_curriculum:  # tasks the restored pool never held, running
            client = restorer.client
            state, evictions = client.get_state(), client.stats()["evictions"]
            for _ in range(LIMITS.client_calls):  # (until the pool holds tasks the state does not)
                if client.stats()["evictions"] >= evictions + LIMITS.client_evictions:
                    break
                client.update_task_performance(client.get_task().task_id, float(rng.random()))
            pool = set(state["arrays"]["task_ids"])
            running = [client.get_task().task_id]
            while running[-1] in pool and len(running) < LIMITS.client_calls:  # until one the state lacks
                running.append(client.get_task().task_id)
            client.flush()
            late = client.late
            client.load_state(state)
            try:
                for task_id in running:
                    client.update_task_performance(task_id, 0.5)
                client.flush()
            except UnknownTaskError as error:
                pytest.fail(f"a task handed out before a restore and completed after it was refused ({error}); its "
                            f"completion is late where the restored pool does not hold it, seed {scenario_seed}")
            assert client.late > late, (
                f"none of {len(running)} tasks handed out after {LIMITS.client_evictions} evictions, completed after a "
                f"restore to the state before them (whose pool held {sorted(pool)}), was late, seed {scenario_seed}")
    finally:
        for model in models:
            with contextlib.suppress(CurriculumError):
                model.client.close()
        stop_curriculum_service(service, timeout=TIMEOUT)
