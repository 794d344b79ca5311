"""One curriculum served by a Ray actor to workers on many machines (`curriculum.ray_service`).

Real Ray: a local cluster (`ray.init(num_cpus=2)`) for the module, worker actors with their own
clients. Skipped when Ray is not installed (`make ray` installs the `[ray]` extra).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="needs the [ray] extra: pip install 'curriculum-harness[ray]' (or make ray)")

from curriculum import (  # noqa: E402
    Curriculum,
    CurriculumConfig,
    CurriculumConfigError,
    LearningProgressConfig,
    SingleTaskGenerator,
    WeightedTaskSetGenerator,
    WorkerProcessError,
    CurriculumServiceError,
    CurriculumStateError,
    InvalidScoreError,
    UnknownTaskError,
)
from curriculum.ray_service import CurriculumClient, start_curriculum_service, stop_curriculum_service  # noqa: E402
from curriculum.vector import make_curriculum_vecenv  # noqa: E402
from env_doubles import EASY, HARD, FixedEpisodeEnv  # noqa: E402
from harness.envs import ExactAccountingEnv  # noqa: E402
from harness.oracle import AccountingOracle  # noqa: E402
from helpers import CountingDraws, exact, lp_config, staged_config, student_score  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Iterator[None]:
    """A local two-CPU cluster whose workers import this folder's modules (helpers, this one)."""
    started = not ray.is_initialized()
    if started:
        path = os.pathsep.join([str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    if started:
        ray.shutdown()


@pytest.fixture
def services() -> Iterator[list[Any]]:
    """Services a test starts; every one still alive is killed at teardown."""
    started: list[Any] = []
    yield started
    for service in started:
        ray.kill(service, no_restart=True)


def start(services: list[Any], config: Any, **options: Any) -> Any:
    service = start_curriculum_service(config, **options)
    services.append(service)
    return service


def wait_until_dead(service: Any) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(service.ping.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("the killed service still answered after 30 s")


def stagnant_score(task_id: int, step: int) -> float:
    """Hashed noise in [0, 0.25) that never improves: learning progress lets such tasks go."""
    return ((task_id * 7919 + step * 104729) % 1000) / 4000.0


@ray.remote(num_cpus=0)
class EpisodeWorker:
    """A worker on some machine: draws a task, 'runs' it, reports its score `lag` episodes later."""

    def __init__(self, service: Any, *, prefetch: int, batch_size: int) -> None:
        self.client = CurriculumClient(service, prefetch=prefetch, batch_size=batch_size, timeout=20.0)

    def run(self, episodes: int, *, lag: int, offset: int) -> dict[str, int]:
        running: list[int] = []
        completed = 0
        for step in range(episodes + lag):
            if step < episodes:
                task = self.client.get_task()
                running.append(task.task_id)
            if len(running) > lag or (step >= episodes and running):
                task_id = running.pop(0)
                self.client.update_task_performance(task_id, stagnant_score(task_id, offset + step))
                completed += 1
        self.client.close()
        client = self.client
        return {"episodes": completed, "sent": client.sent, "recorded": client.recorded, "late": client.late,
                "refused": client.refused, "pending": client.pending_completions}


def test_four_workers_record_every_episode_exactly_once_under_eviction(services: list[Any]) -> None:
    service = start(services, lp_config(8))
    workers = [EpisodeWorker.remote(service, prefetch=8, batch_size=16) for _ in range(4)]
    reports = ray.get([worker.run.remote(300, lag=6, offset=100 * i) for i, worker in enumerate(workers)],
                      timeout=240)  # a hang detector: four actors on two busy cores took over 60 s
    observer = CurriculumClient(service, timeout=20.0)
    stats = observer.stats()
    observer.close()
    episodes = sum(r["episodes"] for r in reports)
    assert episodes == 4 * 300
    for report in reports:
        assert report["pending"] == 0, report
        assert report["refused"] == 0, report
        assert report["recorded"] + report["late"] == report["sent"] == report["episodes"], report
    recorded = sum(r["recorded"] for r in reports)
    late = sum(r["late"] for r in reports)
    assert (stats["total_completions"], stats["late_completions"]) == (recorded, late)
    assert recorded + late == episodes
    assert stats["evictions"] > 0, "no eviction: the run never exercised late completions"
    assert late > 0, f"{stats['evictions']} evictions but no late completion among {episodes} lagged episodes"


def test_a_resent_batch_is_applied_once(services: list[Any]) -> None:
    service = start(services, lp_config(8))
    tasks = ray.get(service.exchange.remote("c", 0, [], 3))["tasks"]
    epoch = ray.get(service.ping.remote())
    items = [(task_id, 0.5, epoch) for task_id, *_ in tasks]
    first = ray.get(service.exchange.remote("c", 1, items, 0))["results"]
    again = ray.get(service.exchange.remote("c", 1, items, 0))["results"]
    assert first == again == [True, True, True]
    assert ray.get(service.stats.remote())["total_completions"] == 3
    ray.get(service.exchange.remote("c", 2, items, 0))  # a new batch of the same tasks is new completions
    assert ray.get(service.stats.remote())["total_completions"] == 6


def test_a_batch_resent_to_a_restarted_actor_is_applied_once(services: list[Any], tmp_path: Path) -> None:
    """The service applied a batch and checkpointed it, then died before its answer arrived:
    the client resends it (same sequence number) to the restarted actor, which must answer
    from its restored record of applied batches instead of applying it again."""
    service = start(services, lp_config(8), checkpoint_path=tmp_path / "service.json", checkpoint_interval=1,
                    max_restarts=1)
    tasks = ray.get(service.exchange.remote("c", 0, [], 3))["tasks"]
    epoch = ray.get(service.ping.remote())
    items = [(task_id, 0.5, epoch) for task_id, *_ in tasks]
    first = ray.get(service.exchange.remote("c", 1, items, 0))["results"]  # applied and checkpointed
    ray.kill(service, no_restart=False)
    deadline = time.monotonic() + 30
    while True:
        try:
            if ray.get(service.ping.remote(), timeout=5) != epoch:
                break
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            pass
        assert time.monotonic() < deadline, "the service did not come back within 30 s"
        time.sleep(0.2)
    again = ray.get(service.exchange.remote("c", 1, items, 0))["results"]
    assert first == again == [True, True, True]
    assert ray.get(service.stats.remote())["total_completions"] == 3, "the resent batch was applied twice"


def test_timeout_names_the_service_and_the_unacknowledged_batch_is_sent_once(services: list[Any]) -> None:
    service = start(services, lp_config(8))
    client = CurriculumClient(service, prefetch=2, batch_size=2, timeout=20.0)  # the actor takes a while to start
    first, second = client.get_task(), client.get_task()
    client.timeout = 0.5
    busy = service.exchange.remote("someone-else", 0, [], 300_000)  # keeps the actor busy for seconds
    client.update_task_performance(first.task_id, 0.5)
    assert client.update_task_performance(second.task_id, 0.5) is None  # the full batch goes out, not awaited
    started = time.monotonic()
    with pytest.raises(CurriculumServiceError, match=r"did not answer exchange\(\) within the timeout of 0.5 s"):
        client.flush()
    assert time.monotonic() - started < 2.0
    assert client.pending_completions == 2
    ray.get(busy, timeout=30)
    client.timeout = 20.0
    # The batch that timed out may or may not have been applied by now (it was queued behind
    # the busy call): the resend under its own sequence number is applied once either way.
    assert client.flush() == [True, True]
    assert (client.sent, client.recorded, client.pending_completions) == (2, 2, 0)
    assert client.stats()["total_completions"] == 2
    client.close()


def test_prefetched_tasks_evicted_meanwhile_complete_late_never_credited_to_the_new_task(
        services: list[Any]) -> None:
    service = start(services, lp_config(8))
    holder = CurriculumClient(service, prefetch=16, batch_size=64, timeout=20.0)
    held = [holder.get_task() for _ in range(8)]  # drawn into the queue before the others ran
    driver = CurriculumClient(service, prefetch=8, batch_size=8, timeout=20.0)
    for step in range(600):
        task = driver.get_task()
        driver.update_task_performance(task.task_id, stagnant_score(task.task_id, step))
    state = driver.get_state()
    pool = state["arrays"]["task_ids"]
    gone = [task for task in held if pool[task.slot] != task.task_id]
    kept = [task for task in held if pool[task.slot] == task.task_id]
    assert gone, f"none of the held tasks {[t.task_id for t in held]} left the pool {pool} in 600 episodes"
    before = driver.stats()
    completions_before = list(state["arrays"]["completions"])
    for task in held:
        holder.update_task_performance(task.task_id, 1.0)
    verdicts = holder.flush()
    assert verdicts == [pool[task.slot] == task.task_id for task in held]
    assert (holder.late, holder.recorded) == (len(gone), len(kept))
    after = driver.stats()
    assert after["late_completions"] - before["late_completions"] == len(gone)
    assert after["total_completions"] - before["total_completions"] == len(kept)
    completions_after = driver.get_state()["arrays"]["completions"]
    for task in gone:  # the slot's new task got nothing from the old task's completion
        assert completions_after[task.slot] == completions_before[task.slot] + sum(
            1 for other in kept if other.slot == task.slot)
    holder.close()
    driver.close()


def test_a_task_handed_out_twice_across_a_restore_completes_late_never_refused(services: list[Any]) -> None:
    """A client that holds two handouts of one task id, drawn before a restore to a state that
    never issued that id, completes both late; each completion keeps its own handout's
    incarnation even after the client has heard of the restore."""
    service = start(services, lp_config(8))
    fresh = ray.get(service.get_state.remote())  # ids 0-7: every id from 8 on is issued later
    driver = CurriculumClient(service, prefetch=8, batch_size=8, timeout=20.0)
    holder = CurriculumClient(service, prefetch=1, batch_size=1, timeout=20.0)
    twice = None
    for step in range(3000):
        task = driver.get_task()
        driver.update_task_performance(task.task_id, stagnant_score(task.task_id, step))
        if step % 50 == 49:
            driver.flush()
            drawn = [holder.get_task().task_id for _ in range(8)]
            twice = next((task_id for task_id in drawn if task_id >= 8 and drawn.count(task_id) > 1), None)
            if twice is not None:
                break
            for task_id in drawn:
                holder.update_task_performance(task_id, 0.0)
    assert twice is not None, "no task admitted after an eviction was drawn twice in a row of 8 draws"
    late = holder.late
    driver.load_state(fresh)
    assert holder.update_task_performance(twice, 0.0) is False  # (its answer tells the client of the restore)
    assert holder.update_task_performance(twice, 0.0) is False
    assert (holder.late - late, holder.refused) == (2, 0)
    holder.close()
    driver.close()


def run_episodes(client: CurriculumClient, episodes: int, offset: int) -> list[int]:
    ids = []
    for step in range(episodes):
        task = client.get_task()
        ids.append(task.task_id)
        client.update_task_performance(task.task_id, student_score(task.task_id, dict(task.env_cfg), offset + step))
    client.flush()
    return ids


def test_checkpoint_through_the_actor_resumes_in_a_new_actor(services: list[Any], tmp_path: Path) -> None:
    config = lp_config(8)
    path = tmp_path / "curriculum.json"
    original = start(services, config, checkpoint_path=path)
    client = CurriculumClient(service := original, prefetch=4, batch_size=4, timeout=20.0)
    run_episodes(client, 200, 0)
    assert client.checkpoint() == str(path)
    state = client.get_state()
    client.close()
    continued = CurriculumClient(service, prefetch=4, batch_size=4, timeout=20.0)
    expected_ids = run_episodes(continued, 100, 200)
    expected_state = continued.get_state()
    continued.close()
    stop_curriculum_service(original)

    from_file = start(services, config, checkpoint_path=path)
    from_state = start(services, config, state=state)
    for service in (from_file, from_state):
        resumed = CurriculumClient(service, prefetch=4, batch_size=4, timeout=20.0)
        assert resumed.service_stats()["resumed_from_checkpoint"] is (service is from_file)
        assert run_episodes(resumed, 100, 200) == expected_ids
        assert resumed.get_state() == expected_state
        resumed.close()


def test_a_restarted_actor_resumes_from_its_checkpoint_file(services: list[Any], tmp_path: Path) -> None:
    path = tmp_path / "service.json"
    service = start(services, lp_config(8), checkpoint_path=path, checkpoint_interval=10, max_restarts=1)
    client = CurriculumClient(service, prefetch=4, batch_size=5, timeout=20.0)
    run_episodes(client, 50, 0)  # the checkpoint holds every one of them (interval 10, batches of 5)
    held = client.get_task()
    dead_epoch = client.service_stats()["epoch"]
    ray.kill(service, no_restart=False)  # asynchronous: the dead incarnation may still answer once
    deadline = time.monotonic() + 30
    while True:
        try:
            stats = client.service_stats()
            if stats["epoch"] != dead_epoch:
                break
        except CurriculumServiceError:
            pass
        assert time.monotonic() < deadline, "the service did not come back within 30 s"
        time.sleep(0.2)
    assert stats["resumed_from_checkpoint"] is True
    restored = client.stats()
    assert (restored["total_completions"], restored["late_completions"]) == (client.recorded, client.late)
    assert client.recorded + client.late == 50
    # a task issued by the dead incarnation: recorded if the restored pool holds it, else late, never refused
    client.update_task_performance(held.task_id, 0.5)
    client.flush()
    assert (client.refused, client.recorded + client.late) == (0, 51)
    client.close()


def test_a_killed_service_raises_the_named_error_within_the_timeout(services: list[Any]) -> None:
    service = start(services, lp_config(8))
    client = CurriculumClient(service, prefetch=2, batch_size=1, timeout=3.0)
    task = client.get_task()
    ray.kill(service, no_restart=True)
    wait_until_dead(service)  # ray.kill is asynchronous: a call right after it may still be answered
    for call in (lambda: client.update_task_performance(task.task_id, 0.5), client.stats, client.get_state,
                 lambda: [client.get_task() for _ in range(4)]):
        started = time.monotonic()
        with pytest.raises(CurriculumServiceError, match="dead or unreachable|did not answer"):
            call()
        assert time.monotonic() - started < 3.0 + 1.0
    assert client.pending_completions == 1  # kept for a service that comes back
    with pytest.raises(CurriculumServiceError, match="dead or unreachable"):
        client.close()
    with pytest.raises(CurriculumServiceError, match=exact(
            "Expected an open curriculum client, received one used after close()")):
        client.get_task()


def test_bad_input_comes_back_as_the_curriculums_named_errors(services: list[Any]) -> None:
    service = start(services, lp_config(8))
    client = CurriculumClient(service, prefetch=4, batch_size=1, timeout=20.0)
    task = client.get_task()
    with pytest.raises(InvalidScoreError, match=exact(f"Expected score in [0.0, 1.0] for task {task.task_id}, "
                                                      "received nan")):
        client.update_task_performance(task.task_id, math.nan)
    with pytest.raises(InvalidScoreError, match=r"as a real number, received '0.5' of type str"):
        client.update_task_performance(task.task_id, "0.5")
    with pytest.raises(UnknownTaskError, match=exact("Expected an integer task id from get_task(), received True")):
        client.update_task_performance(True, 0.5)
    unknown = 10**9 * 8 + task.slot
    with pytest.raises(UnknownTaskError, match=exact(
            f"Expected a task id issued by this curriculum's get_task(), received {unknown} "
            f"(slot {task.slot} holds task {task.task_id})")):
        client.update_task_performance(unknown, 0.5)
    assert (client.sent, client.refused, client.pending_completions) == (1, 1, 0)
    assert client.stats()["total_completions"] == 0

    batched = CurriculumClient(service, prefetch=4, batch_size=4, timeout=20.0)
    good = [batched.get_task() for _ in range(3)]
    batched.update_task_performance(good[0].task_id, 0.5)
    batched.update_task_performance(unknown, 0.5)
    batched.update_task_performance(good[1].task_id, 0.5)
    batched.update_task_performance(good[2].task_id, 0.5)  # sends the batch; the refusal comes with its answer
    with pytest.raises(UnknownTaskError, match=r"\(completion 2 of 4 sent together; 1 refused, the others recorded"):
        batched.flush()
    assert (batched.sent, batched.recorded, batched.refused) == (4, 3, 1)
    assert batched.stats()["total_completions"] == 3

    with pytest.raises(CurriculumStateError, match="expected a dict from get_state"):
        client.load_state([1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(CurriculumConfigError, match=exact("Expected `prefetch` to be an integer >= 1, received 0")):
        CurriculumClient(service, prefetch=0)
    with pytest.raises(CurriculumConfigError, match="Expected `service` to be the actor handle"):
        CurriculumClient(object())
    client.close()
    batched.close()


def test_staged_stage_follows_the_service_and_load_state_restarts_every_client(services: list[Any]) -> None:
    config = staged_config(6)
    service = start(services, config)
    client = CurriculumClient(service, prefetch=2, batch_size=1, timeout=20.0)
    start_state = client.get_state()
    assert client.stage == 0
    held = client.get_task()
    for _ in range(40):
        task = client.get_task()
        client.update_task_performance(task.task_id, 1.0)
    assert client.stage == 2, "forty perfect episodes (windows of ten over the 0.8 threshold) reach the last stage"
    assert client.get_task().label == "s2"
    client.load_state(start_state)
    assert client.stage == 0
    assert client.get_task().label == "s0"
    # held before the load: the restored pool holds its id again, so it is recorded as that task
    assert client.update_task_performance(held.task_id, 1.0) is True
    client.close()


class TaggedCurriculum(Curriculum):
    """A plug-in curriculum (module level: the actor imports it from this folder)."""

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "served_by": "TaggedCurriculum"}


def test_a_factory_builds_the_served_curriculum(services: list[Any]) -> None:
    service = start(services, lp_config(8), factory=TaggedCurriculum)
    client = CurriculumClient(service, prefetch=2, batch_size=1, timeout=20.0)
    run_episodes(client, 10, 0)
    stats = client.stats()
    assert stats["served_by"] == "TaggedCurriculum"
    assert (stats["total_completions"] + stats["late_completions"], client.recorded + client.late) == (10, 10)
    client.close()
    with pytest.raises(CurriculumConfigError, match=exact(
            "Expected `factory` to be callable (config -> curriculum), received 3")):
        start_curriculum_service(lp_config(8), factory=3)


def test_max_delay_sends_a_batch_before_it_is_full(services: list[Any]) -> None:
    service = start(services, lp_config(8))
    client = CurriculumClient(service, prefetch=8, batch_size=100, timeout=20.0, max_delay=0.0)
    for _ in range(3):
        task = client.get_task()
        client.update_task_performance(task.task_id, 0.5)
    # every completion went out at once, in its own batch; the last one's answer is collected by flush()
    assert (client.sent, client.pending_completions) == (2, 1)
    client.flush()
    assert (client.sent, client.recorded + client.late, client.pending_completions) == (3, 3, 0)
    slow = CurriculumClient(service, prefetch=8, batch_size=100, timeout=20.0, max_delay=60.0)
    task = slow.get_task()
    slow.update_task_performance(task.task_id, 0.5)
    assert (slow.sent, slow.pending_completions) == (0, 1)
    slow.close()
    client.close()
    assert slow.sent == 1


def test_close_sends_what_is_queued_and_stop_writes_the_checkpoint(services: list[Any], tmp_path: Path) -> None:
    service = start(services, lp_config(8), checkpoint_path=tmp_path / "final.json")
    client = CurriculumClient(service, prefetch=4, batch_size=16, timeout=20.0)
    for _ in range(5):
        task = client.get_task()
        assert client.update_task_performance(task.task_id, 0.25) is None  # queued, not sent
    assert client.pending_completions == 5
    client.close()
    client.close()  # idempotent
    assert (client.sent, client.recorded) == (5, 5)
    observer = CurriculumClient(service, timeout=20.0)
    assert observer.stats()["total_completions"] == 5
    observer.close()
    assert stop_curriculum_service(service, checkpoint=True) == str(tmp_path / "final.json")
    assert (tmp_path / "final.json").exists()
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(service.ping.remote(), timeout=10)
    resumed = start(services, lp_config(8), checkpoint_path=tmp_path / "final.json")
    observer = CurriculumClient(resumed, timeout=20.0)
    assert observer.stats()["total_completions"] == 5
    observer.close()


def fixed_env(buf: Any = None, seed: int = 0) -> FixedEpisodeEnv:
    return FixedEpisodeEnv(buf=buf, seed=seed)


def two_task_config(*extra: dict[str, Any]) -> CurriculumConfig:
    """Learning progress over EASY and HARD (plus `extra` task configs), eviction in short runs."""
    tasks = [(SingleTaskGenerator(EASY, label="easy"), 1.0), (SingleTaskGenerator(HARD, label="hard"), 1.0)]
    tasks += [(SingleTaskGenerator(cfg, label="extra"), 1.0) for cfg in extra]
    return CurriculumConfig(task_generator=WeightedTaskSetGenerator(tasks, seed=1),
                            algorithm=LearningProgressConfig(min_samples_for_lp=3), num_active_tasks=8, seed=1,
                            min_presentations=4, eviction_percentile=50.0, refresh_interval=5)


def test_ray_backend_vecenv_records_every_episode_once(services: list[Any]) -> None:
    service = start(services, two_task_config())
    client = CurriculumClient(service, prefetch=4, batch_size=8, timeout=20.0)
    vecenv = make_curriculum_vecenv(fixed_env, client, backend="Ray", tracking="ray", num_envs=4, num_workers=2,
                                    worker_options={"num_cpus": 0}, worker_timeout=30.0)
    assert vecenv.tracking == "ray"
    vecenv.reset(seed=0)
    episodes = completions = late = 0
    for _ in range(150):
        *_, infos = vecenv.step(np.zeros(4, dtype=np.int64))
        episodes += sum(info.get("curriculum_stats/episodes", 0) for info in infos)
        completions += sum(info.get("curriculum_stats/completions", 0) for info in infos)
        late += sum(info.get("curriculum_stats/late_completions", 0) for info in infos)
    vecenv.close()  # the workers' clients send what they still queue
    stats = client.stats()
    client.close()
    assert episodes == completions > 4 * 150 // 4  # episodes of 2 or 4 steps
    assert stats["total_completions"] + stats["late_completions"] == episodes
    assert stats["evictions"] > 0
    # batched verdicts reach the episodes' counters as they come back: all but those of the
    # batches still queued or in flight when the workers closed (two per worker at most)
    assert 0 < late <= stats["late_completions"] <= late + 2 * 2 * 8, (late, stats["late_completions"])


def exact_env(buf: Any = None, seed: int = 0) -> ExactAccountingEnv:
    return ExactAccountingEnv(buf=buf, seed=seed)


def test_ray_backend_run_passes_the_accounting_oracle(services: list[Any]) -> None:
    """Episodes reported by the env itself (`EpisodeRecord`), checked by the harness's oracle:
    one episode per record, its label and score, no completion for a desync cut, and the
    service's recorded and late totals equal to the episodes' (batch size 1: every episode's
    own late verdict is in its info)."""
    configs = [{"reward_per_step": 0.25, "episode_length": 2}, {"reward_per_step": 0.125, "episode_length": 4},
               {"reward_per_step": 0.25, "episode_length": 3, "end": "truncated"},
               {"reward_per_step": 0.25, "episode_length": 2, "end": "desync"}]
    tasks = [(SingleTaskGenerator(cfg, label=f"t{i}"), 1.0) for i, cfg in enumerate(configs)]
    config = CurriculumConfig(task_generator=WeightedTaskSetGenerator(tasks, seed=2),
                              algorithm=LearningProgressConfig(min_samples_for_lp=3), num_active_tasks=8, seed=2,
                              min_presentations=4, eviction_percentile=50.0, refresh_interval=5)
    service = start(services, config)
    client = CurriculumClient(service, prefetch=4, batch_size=1, timeout=20.0)
    oracle = AccountingOracle(seed=0, context="Ray/ray")
    vecenv = make_curriculum_vecenv(exact_env, client, backend="Ray", tracking="ray", num_envs=4, num_workers=2,
                                    worker_options={"num_cpus": 0}, worker_timeout=30.0)
    _, infos = vecenv.reset(seed=0)
    oracle.observe(infos)
    for _ in range(120):
        *_, infos = vecenv.step(np.zeros(4, dtype=np.int64))
        oracle.observe(infos)
    vecenv.close()
    oracle.verify(client)
    full = [episode for episode in oracle.episodes if not episode.desync]
    assert len(full) > 100 and len(full) < len(oracle.episodes), "the run had no desync cut or too few episodes"
    stats = client.stats()
    assert stats["late_completions"] > 0 and stats["evictions"] > 0
    client.close()


def test_ray_backend_reports_a_failing_worker_instead_of_stale_data(services: list[Any]) -> None:
    service = start(services, two_task_config({"no_such_key": 1}))  # FixedEpisodeEnv refuses that config
    client = CurriculumClient(service, prefetch=4, batch_size=1, timeout=20.0)
    vecenv = make_curriculum_vecenv(fixed_env, client, backend="Ray", tracking="ray", num_envs=2, num_workers=2,
                                    worker_options={"num_cpus": 0}, worker_timeout=30.0)
    with pytest.raises(WorkerProcessError, match=r"A Ray worker failed in its step or reset: .*unknown config keys"):
        vecenv.reset(seed=0)
        for _ in range(100):
            vecenv.step(np.zeros(2, dtype=np.int64))
    assert vecenv.closed
    with pytest.raises(WorkerProcessError, match="closed itself after a worker failure"):
        vecenv.step(np.zeros(2, dtype=np.int64))
    client.close()
    with pytest.raises(CurriculumConfigError, match=exact(
            "Expected backend='Ray' with tracking='ray' (workers on Ray actors, one curriculum service), "
            "received backend='Ray' with tracking='shared'")):
        make_curriculum_vecenv(fixed_env, client, backend="Ray", tracking="shared", num_envs=2)


@pytest.mark.parametrize("prefetch", [4, 7])
def test_a_client_never_holds_more_than_prefetch_tasks(services: list[Any], prefetch: int) -> None:
    """The staleness bound: a task handed out was drawn at most `prefetch` of this worker's
    draws earlier, so the tasks drawn for a client and not yet handed out never exceed
    `prefetch`, whether the queue is topped up in the background or by a flush."""
    service = start(services, lp_config(8), factory=CountingDraws)
    client = CurriculumClient(service, prefetch=prefetch, batch_size=3, timeout=20.0)
    held = []
    for step in range(60):
        task = client.get_task()
        if step % 5 == 4:  # now and then a flush, which tops the queue up in its round trip
            client.update_task_performance(task.task_id, 0.5)
            client.flush()
        else:
            client.update_task_performance(task.task_id, 0.5)
        time.sleep(0.002)  # let a background refill land
        held.append(client.stats()["draws"] - (step + 1))
    client.close()
    assert max(held) <= prefetch, (
        f"with prefetch={prefetch} the client held up to {max(held)} drawn tasks not yet handed out "
        f"(per hand-out: {held})")
    assert max(held) >= prefetch // 2, f"the queue never filled (held {held}): the check measured nothing"
