"""Tests of the runners: one metric vocabulary from every integration level, exact episode
accounting, epochs, determinism and argument errors."""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from typing import Any

import pytest

from curriculum import Curriculum, CurriculumConfig, LearningProgressConfig, UniformConfig
from curriculum.stats import PER_LABEL_SAMPLES, stat_key
from harness.recorder import MetricsRecorder
from harness.runners import (
    METRICS_DIR_ENV,
    PER_TASK_PERFORMANCE,
    RunResult,
    run_direct,
    run_single_env,
    run_vectorized,
)
from harness.task_spaces import TaskSpace, chain_task_space

NUM_TASKS = 4
EPISODES = 600
EPOCH_LENGTH = 200
REQUIRED_KEYS = (
    "metric/epoch",
    "metric/agent_step",
    "overview/reward",
    "overview/episodes",
    "env_curriculum_stats/pool_occupancy_gini",
    "env_curriculum_stats/pool_lp_gini",
    "env_curriculum_stats/sampling_gini",
    "env_task_dependency/mean_performance",
    "env_task_dependency/num_mastered",
)

space_factory = functools.partial(chain_task_space, num_tasks=NUM_TASKS, seed=0)


def config_for(space: TaskSpace, algorithm: Any = None) -> CurriculumConfig:
    return CurriculumConfig(task_generator=space.generator, algorithm=algorithm or LearningProgressConfig(),
                            num_active_tasks=16, seed=0)


def run_with(runner: str, *, algorithm: Any = None, episodes: int = EPISODES, **kwargs: Any) -> RunResult:
    """One run of `runner` ("direct", "single", "serial", "serial-centralized", "multiprocessing")."""
    space = space_factory()
    config = config_for(space, algorithm)
    if runner in ("direct", "single"):
        run = run_direct if runner == "direct" else run_single_env
        with Curriculum(config) as curriculum:
            return run(curriculum, space, episodes=episodes, epoch_length=EPOCH_LENGTH, **kwargs)
    backend = "Multiprocessing" if runner == "multiprocessing" else "Serial"
    tracking = "centralized" if runner.endswith("centralized") else "shared"
    return run_vectorized(config, space_factory, backend=backend, tracking=tracking, num_envs=4,
                          episodes=episodes, epoch_length=EPOCH_LENGTH, **kwargs)


def metric_keys(result: RunResult) -> set[str]:
    return set(result.recorder.keys())


@pytest.fixture(scope="module")
def direct() -> RunResult:
    return run_with("direct")


@pytest.mark.parametrize("runner", ["single", "serial"])
def test_every_runner_emits_the_direct_runners_metric_keys(direct: RunResult, runner: str) -> None:
    result = run_with(runner)
    assert metric_keys(result) == metric_keys(direct), (
        f"only in {runner}: {sorted(metric_keys(result) - metric_keys(direct))}; "
        f"only in direct: {sorted(metric_keys(direct) - metric_keys(result))}"
    )


@pytest.mark.multiprocessing
def test_multiprocessing_runner_emits_the_same_metric_keys(direct: RunResult) -> None:
    result = run_with("multiprocessing")
    assert metric_keys(result) == metric_keys(direct)
    assert result.episodes >= EPISODES


def test_centralized_tracking_emits_the_same_keys_as_direct_with_the_same_algorithm() -> None:
    uniform = run_with("direct", algorithm=UniformConfig())
    centralized = run_with("serial-centralized", algorithm=UniformConfig())
    assert metric_keys(centralized) == metric_keys(uniform)


def test_metric_vocabulary_holds_the_seed_names(direct: RunResult) -> None:
    keys = metric_keys(direct)
    missing = [key for key in REQUIRED_KEYS if key not in keys]
    assert not missing, f"missing metrics: {missing}"
    for index in range(NUM_TASKS):
        assert PER_TASK_PERFORMANCE.format(index) in keys
    for label in space_factory().learnable_labels:
        assert f"env_curriculum_stats/per_label_samples/{label}" in keys
        assert f"env_curriculum_stats/per_label_lp_scores/{label}" in keys
    assert all(re.fullmatch(r"(metric|overview|env_curriculum_stats|env_task_dependency)/.+", k) for k in keys), (
        sorted(k for k in keys if not k.startswith(("metric/", "overview/", "env_")))
    )


@pytest.mark.parametrize("runner", ["direct", "single", "serial"])
def test_every_episode_is_counted_once_and_epochs_close_on_schedule(runner: str) -> None:
    result = run_with(runner)
    epochs = result.recorder.epochs
    assert [e["metric/epoch"] for e in epochs] == list(range(EPISODES // EPOCH_LENGTH))
    assert [e["metric/agent_step"] for e in epochs] == [EPOCH_LENGTH * (i + 1) for i in range(len(epochs))]
    assert result.episodes == EPISODES
    assert sum(e["overview/episodes"] for e in epochs) == EPISODES
    assert sum(result.samples_by_label.values()) == EPISODES
    prefix = f"env_{stat_key(PER_LABEL_SAMPLES)}/"
    from_metrics = Counter()
    for epoch in epochs:
        for key, value in epoch.items():
            if key.startswith(prefix):
                from_metrics[key[len(prefix):]] += value
    assert from_metrics == result.samples_by_label


def test_a_partial_last_epoch_is_recorded() -> None:
    result = run_with("direct", episodes=EPOCH_LENGTH + 50)
    assert [e["metric/agent_step"] for e in result.recorder.epochs] == [EPOCH_LENGTH, EPOCH_LENGTH + 50]
    assert result.recorder.epochs[-1]["overview/episodes"] == 50


def test_warmup_episodes_are_left_out_of_samples_by_label() -> None:
    result = run_with("direct", warmup_episodes=100)
    assert sum(result.samples_by_label.values()) == EPISODES - 100
    assert result.episodes == EPISODES


def test_direct_runner_is_deterministic() -> None:
    first, second = run_with("direct"), run_with("direct")
    assert first.recorder.epochs == second.recorder.epochs
    assert first.samples_by_label == second.samples_by_label


def test_per_task_performance_is_the_students_at_the_end_of_each_epoch() -> None:
    space = space_factory()
    with Curriculum(config_for(space)) as curriculum:
        result = run_direct(curriculum, space, episodes=EPISODES, epoch_length=EPOCH_LENGTH)
    last = result.recorder.last
    assert [last[PER_TASK_PERFORMANCE.format(i)] for i in range(NUM_TASKS)] == space.simulator.performance.tolist()


def test_on_epoch_sees_each_recorded_epoch_and_on_episode_each_episode() -> None:
    seen: list[int] = []
    episodes: list[int] = []
    result = run_with("direct", on_epoch=lambda metrics: seen.append(metrics["metric/epoch"]),
                      on_episode=lambda episode, task, reward: episodes.append(episode))
    assert seen == [e["metric/epoch"] for e in result.recorder.epochs]
    assert episodes == list(range(EPISODES))


def test_run_direct_keeps_its_scenario_signature() -> None:
    """Scenarios call `run_direct(curriculum, space, episodes=, epoch_length=, warmup_episodes=)`."""
    space = space_factory()
    recorder = MetricsRecorder()
    with Curriculum(config_for(space)) as curriculum:
        result = run_direct(curriculum, space, episodes=10, epoch_length=5, warmup_episodes=2, recorder=recorder)
    assert result.recorder is recorder
    assert len(recorder.epochs) == 2


def test_metrics_dir_env_streams_each_run_to_a_jsonl_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(METRICS_DIR_ENV, str(tmp_path))
    result = run_with("direct")
    files = list(tmp_path.glob("*.jsonl"))
    assert len(files) == 1
    assert files[0].name.startswith("test_metrics_dir_env_streams_each_run_to_a_jsonl_file")
    lines = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert lines == result.recorder.epochs


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"episodes": 0}, "Expected `episodes` to be a positive integer, received 0"),
        ({"epoch_length": -5}, "Expected `epoch_length` to be a positive integer, received -5"),
        ({"warmup_episodes": -1}, "Expected `warmup_episodes` to be a non-negative integer, received -1"),
    ],
)
def test_bad_budgets_are_refused_by_name(kwargs: dict[str, Any], message: str) -> None:
    space = space_factory()
    arguments = {"episodes": 10, "epoch_length": 5, **kwargs}
    with Curriculum(config_for(space)) as curriculum:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            run_direct(curriculum, space, **arguments)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "Ray"}, "Expected `backend` to be one of ('Serial', 'Multiprocessing'), received 'Ray'"),
        ({"tracking": "local"}, "Expected `tracking` to be one of ('shared', 'centralized'), received 'local'"),
        ({"num_envs": 0}, "Expected `num_envs` to be a positive integer, received 0"),
    ],
)
def test_bad_vectorized_options_are_refused_by_name(kwargs: dict[str, Any], message: str) -> None:
    arguments = {"episodes": 10, "epoch_length": 5, **kwargs}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        run_vectorized(config_for(space_factory()), space_factory, **arguments)


def test_space_factory_must_build_a_task_space() -> None:
    message = "Expected `space_factory()` to return a TaskSpace, received dict"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        run_vectorized(config_for(space_factory()), dict, episodes=10, epoch_length=5)


@pytest.mark.parametrize("runner", ["single", "serial"])
def test_multi_step_episodes_are_counted_once_each(runner: str) -> None:
    result = run_with(runner, episodes=EPOCH_LENGTH, episode_length=3)
    assert result.episodes == EPOCH_LENGTH
    assert result.recorder.last["overview/episodes"] == EPOCH_LENGTH
    # each env step pays reward / episode_length, so the episode score is the mean simulator reward
    assert 0.0 <= result.recorder.last["overview/reward"] <= 1.0
