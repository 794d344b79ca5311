"""Eviction health: the pool stays full, and only stagnant, well-presented tasks are evicted.

Bug class: eviction that removes the tasks the student is learning from (inverted or
unranked scores) or evicts before a task's learning progress means anything.
"""

from __future__ import annotations

import numpy as np
import pytest

from curriculum import CurriculumConfig, LearningProgressConfig
from harness.protocol import missing_capabilities
from harness.task_spaces import impossible_task_space
from harness.thresholds import EVICTION as LIMITS


def test_pool_stays_full_and_evicts_only_stagnant_tasks(curriculum_factory, require_capability, scenario_seed, golden,
                                                       check_limit) -> None:
    space = impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed)
    config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=LIMITS.pool, seed=scenario_seed)
    curriculum = curriculum_factory(config)
    lacking = missing_capabilities(curriculum, ("active_tasks", "task_scores"))
    require_capability(not lacking, f"eviction health inspects the pool; this curriculum lacks {lacking}")
    evictions = []
    for episode in range(LIMITS.episodes):
        task = curriculum.get_task()
        reward = space.simulator.sample_task(task.env_cfg["task_index"])
        before = {t.task_id: (t.num_completions, score) for t, score in
                  zip(curriculum.active_tasks(), curriculum.task_scores().tolist())}
        curriculum.update_task_performance(task.task_id, reward)
        pool = curriculum.active_tasks()
        assert len(pool) == LIMITS.pool, (
            f"pool holds {len(pool)} tasks after episode {episode}, expected {LIMITS.pool}, seed {scenario_seed}"
        )
        if before is None or task.task_id in {t.task_id for t in pool}:
            continue
        completions, score = before[task.task_id]
        completions += 1
        eligible = np.array([s for c, s in before.values() if c >= config.min_presentations - 1])
        rank = float((eligible < score).mean())
        evictions.append(rank)
        assert completions >= config.min_presentations, (
            f"task {task.task_id} was evicted after {completions} completions, minimum {config.min_presentations}, "
            f"episode {episode}, seed {scenario_seed}"
        )
        check_limit("eviction_rank", rank, LIMITS.max_rank, fmt=".0%",
                    what=f"task {task.task_id} was evicted at episode {episode} with score {score:.4f}; "
                    "share of eligible tasks scoring lower:")
    check_limit("evictions_observed", len(evictions), LIMITS.min_evictions, upper=False, fmt=".0f",
                what=f"evictions observed in {LIMITS.episodes} episodes:")
    mean_rank = float(np.mean(evictions))
    check_limit("eviction_mean_rank", mean_rank, LIMITS.max_mean_rank, fmt=".1%",
                what=f"mean rank of evicted tasks among eligible ones over {len(evictions)} evictions:")
    golden({"mean_rank": mean_rank, "observed_evictions": len(evictions), "stats": {k: v for k, v in curriculum.stats().items()
                                                            if k in ("evictions", "tasks_created")}})
