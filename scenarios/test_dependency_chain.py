"""Dependency chain: sampling mass moves along the chain, and all tasks are mastered in
clearly fewer episodes than uniform random practice needs.

Bug class (seeds/000, 001): a curriculum whose sampling stops reacting to completions (lost
updates, a stale distribution) degrades silently to uniform, and the chain takes far longer.
"""

from __future__ import annotations

import numpy as np

from curriculum import CurriculumConfig, LearningProgressConfig
from harness.task_spaces import chain_task_space
from harness.thresholds import DEPENDENCY_CHAIN as LIMITS


def _episodes_to_master_all(simulator, choose_task, record) -> tuple[int, list[int]]:
    indices: list[int] = []
    for episode in range(LIMITS.max_episodes):
        task_index, handle = choose_task()
        reward = simulator.sample_task(task_index)
        record(handle, reward)
        indices.append(task_index)
        if (episode + 1) % LIMITS.check_every == 0 and simulator.num_mastered() == LIMITS.num_tasks:
            return episode + 1, indices
    return LIMITS.max_episodes, indices


def uniform_baseline(seed: int) -> float:
    """Median episodes a student practising uniformly random tasks needs to master the chain
    (over `LIMITS.baseline_runs` practice streams, so the ratio's noise is the curriculum's)."""
    runs = []
    for run in range(LIMITS.baseline_runs):
        space = chain_task_space(num_tasks=LIMITS.num_tasks, seed=seed)
        rng = np.random.default_rng([10_000 + seed, run])
        episodes, _ = _episodes_to_master_all(
            space.simulator, lambda: (int(rng.integers(LIMITS.num_tasks)), None), lambda handle, reward: None
        )
        runs.append(episodes)
    return float(np.median(runs))


def test_chain_is_mastered_in_order_and_faster_than_uniform(curriculum_factory, scenario_seed, golden, check_limit) -> None:
    space = chain_task_space(num_tasks=LIMITS.num_tasks, seed=scenario_seed)
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=space.generator, algorithm=LearningProgressConfig(), num_active_tasks=LIMITS.pool,
        seed=scenario_seed,
    ))

    def choose():
        task = curriculum.get_task()
        return task.env_cfg["task_index"], task

    episodes, indices = _episodes_to_master_all(
        space.simulator, choose, lambda task, reward: curriculum.update_task_performance(task.task_id, reward)
    )
    baseline = uniform_baseline(scenario_seed)
    ratio = episodes / baseline
    check_limit("chain_ratio_to_uniform", ratio, LIMITS.max_ratio_to_uniform, fmt=".2f",
                what=f"mastering all {LIMITS.num_tasks} chain tasks took {episodes} episodes vs {baseline:.0f} with "
                f"uniform practice, a ratio of")
    first, _, last = np.array_split(np.asarray(indices), 3)
    shift = float(last.mean() - first.mean())
    check_limit("chain_index_shift", shift, LIMITS.min_index_shift, upper=False, fmt=".2f",
                what="mean sampled chain index moved from the first to the last third of the run by")
    golden({"episodes_to_master_all": episodes, "uniform_episodes": baseline, "ratio": ratio, "index_shift": shift})
