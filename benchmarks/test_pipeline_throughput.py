"""Completions per second through the vectorized pipeline, for the layouts
`test_runner_throughput.py` does not cover: pufferlib Serial with 1 env, and Multiprocessing
with 2 worker processes (4 envs each).

Same workload as there: a 10-task prerequisite chain, learning progress on a 32-task shared
pool, one-step episodes, stats pipeline included. The baseline is Serial with 8 envs, measured
here in the same process, so the ratios are not skewed by load that changed between files.
Run with `make bench`; printed at the end as `pipeline_*` figures.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from curriculum import CurriculumConfig, LearningProgressConfig
from harness.runners import run_vectorized
from harness.task_spaces import chain_task_space

NUM_TASKS = 10
POOL = 32
EPOCH_LENGTH = 100
EPISODES = 8_000
ROUNDS = 3
MULTIPROCESSING_EPISODES = 2_000
"""Fewer: pufferlib's workers and main process spin-wait, so on an oversubscribed 2-core
machine a vec step takes a scheduler time slice and 8,000 episodes would take ~20 s a round."""

space_factory = functools.partial(chain_task_space, num_tasks=NUM_TASKS, seed=0)

#: name -> (run_vectorized options, episodes per round, rounds); "serial_8_envs" is the baseline.
LAYOUTS = {
    "serial_8_envs": ({"backend": "Serial", "num_envs": 8}, EPISODES, ROUNDS),
    "serial_1_env": ({"backend": "Serial", "num_envs": 1}, EPISODES, ROUNDS),
    "multiprocessing_2_workers_8_envs": ({"backend": "Multiprocessing", "num_envs": 8, "num_workers": 2},
                                         MULTIPROCESSING_EPISODES, 1),
}
BASELINE = "serial_8_envs"


def _config() -> CurriculumConfig:
    return CurriculumConfig(task_generator=space_factory().generator, algorithm=LearningProgressConfig(),
                            num_active_tasks=POOL, seed=0)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_vectorized_completions_per_second(benchmark: Any, figures: dict[str, float], layout: str) -> None:
    """Best of the rounds; each round builds the vecenv (worker start-up included) and closes it."""
    options, episodes, rounds = LAYOUTS[layout]

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (_config(), space_factory), {**options, "tracking": "shared", "episodes": episodes,
                                            "epoch_length": EPOCH_LENGTH * options["num_envs"]}

    result = benchmark.pedantic(run_vectorized, setup=setup, rounds=rounds)
    assert result.episodes >= episodes
    per_second = result.episodes / benchmark.stats.stats.min
    figures[f"pipeline_{layout}_completions_per_s"] = per_second
    benchmark.extra_info["completions_per_s"] = per_second
    baseline = figures.get(f"pipeline_{BASELINE}_completions_per_s")
    if baseline is not None and layout != BASELINE:
        figures[f"pipeline_{layout}_ratio_to_{BASELINE}"] = per_second / baseline
        benchmark.extra_info[f"ratio_to_{BASELINE}"] = per_second / baseline
    print(f"\n{layout}: {per_second:,.0f} completions/s ({episodes:,} episodes, best of {rounds})"
          + (f", {per_second / baseline:.2f}x {BASELINE}" if baseline and layout != BASELINE else ""))
