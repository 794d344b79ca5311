"""Completions per second of the runners, stats pipeline included (`make bench`).

Targets: the direct runner with the learning-progress curriculum on a 10-task chain at
>= 50,000 completions/s (a 500-epoch x 100-episode simulation then takes about a second);
the single-env and vectorized (pufferlib Serial, 8 envs) runners are measured to show what
the env wrapper and the vector layer cost on top. Figures are printed at the end of the session.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from curriculum import Curriculum, CurriculumConfig, LearningProgressConfig, UniformConfig
from harness.runners import run_direct, run_single_env, run_vectorized
from harness.task_spaces import chain_task_space

NUM_TASKS = 10
POOL = 32
EPOCH_LENGTH = 100
DIRECT_EPISODES = 20_000
ENV_EPISODES = 8_000
ROUNDS = 3

space_factory = functools.partial(chain_task_space, num_tasks=NUM_TASKS, seed=0)


def _config(space: Any, algorithm: str) -> CurriculumConfig:
    algo = LearningProgressConfig() if algorithm == "learning_progress" else UniformConfig()
    return CurriculumConfig(task_generator=space.generator, algorithm=algo, num_active_tasks=POOL, seed=0)


def _per_second(benchmark: Any, episodes: int) -> float:
    return episodes / benchmark.stats.stats.mean


@pytest.mark.parametrize("algorithm", ["learning_progress", "uniform"])
def test_direct_runner(benchmark, figures, algorithm: str) -> None:
    """get_task / sample / update plus the stats pipeline, no env."""

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        space = space_factory()
        return (Curriculum(_config(space, algorithm)), space), {"episodes": DIRECT_EPISODES,
                                                                 "epoch_length": EPOCH_LENGTH}

    result = benchmark.pedantic(run_direct, setup=setup, rounds=ROUNDS)
    assert result.episodes == DIRECT_EPISODES
    figures[f"direct_{algorithm}_{NUM_TASKS}_tasks_completions_per_s"] = _per_second(benchmark, DIRECT_EPISODES)


def test_single_env_runner(benchmark, figures) -> None:
    """One CurriculumEnv over a TaskDependencyEnv, learning progress."""

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        space = space_factory()
        return (Curriculum(_config(space, "learning_progress")), space), {"episodes": ENV_EPISODES,
                                                                          "epoch_length": EPOCH_LENGTH}

    result = benchmark.pedantic(run_single_env, setup=setup, rounds=ROUNDS)
    assert result.episodes == ENV_EPISODES
    figures["single_env_learning_progress_completions_per_s"] = _per_second(benchmark, ENV_EPISODES)


@pytest.mark.parametrize("tracking", ["shared", "centralized"])
def test_vectorized_serial_8_envs(benchmark, figures, tracking: str) -> None:
    """pufferlib Serial, 8 CurriculumEnvs; shared memory (learning progress) or centralized (uniform)."""
    algorithm = "learning_progress" if tracking == "shared" else "uniform"

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (_config(space_factory(), algorithm), space_factory), {
            "backend": "Serial", "tracking": tracking, "num_envs": 8, "episodes": ENV_EPISODES,
            "epoch_length": EPOCH_LENGTH * 8,
        }

    result = benchmark.pedantic(run_vectorized, setup=setup, rounds=ROUNDS)
    assert result.episodes >= ENV_EPISODES
    figures[f"vectorized_serial_8_envs_{tracking}_{algorithm}_completions_per_s"] = _per_second(
        benchmark, result.episodes)
