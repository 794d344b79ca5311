"""Forgetting student: a mastered task that decays is revisited.

The student masters every task under the curriculum, then spends a while on the other tasks
outside it (as when training shifts elsewhere), so one mastered task decays. Learning
progress is bidirectional: the decline itself is progress to win back, and the curriculum must
send the student back to that task soon, not wait for exploration to stumble on it.
"""

from __future__ import annotations

import numpy as np

from curriculum import CurriculumConfig, LearningProgressConfig
from harness.task_spaces import forgetting_task_space
from harness.thresholds import FORGETTING as LIMITS

FORGOTTEN = 0


def _play(curriculum, simulator, episodes: int, *, until_mastered: bool = False) -> list[int]:
    played = []
    for _ in range(episodes):
        if until_mastered and simulator.num_mastered() == LIMITS.num_tasks:
            break
        task = curriculum.get_task()
        index = task.env_cfg["task_index"]
        curriculum.update_task_performance(task.task_id, simulator.sample_task(index))
        played.append(index)
    return played


def test_forgotten_task_is_revisited(curriculum_factory, scenario_seed, check_limit, golden) -> None:
    space = forgetting_task_space(num_tasks=LIMITS.num_tasks, forgetting_rate=LIMITS.forgetting_rate,
                                  seed=scenario_seed)
    simulator = space.simulator
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=space.generator, algorithm=LearningProgressConfig(), num_active_tasks=LIMITS.pool,
        seed=scenario_seed, eviction_percentile=0.0,  # keep the mastered task's history in the pool
    ))
    learning = _play(curriculum, simulator, LIMITS.max_learning_episodes, until_mastered=True)
    assert simulator.num_mastered() == LIMITS.num_tasks, (
        f"only {simulator.num_mastered()} of {LIMITS.num_tasks} independent tasks were mastered in "
        f"{len(learning)} episodes, seed {scenario_seed}"
    )
    _play(curriculum, simulator, LIMITS.settle_episodes)
    before = simulator.task_performance(FORGOTTEN)
    rng = np.random.default_rng(scenario_seed)
    for _ in range(LIMITS.decay_episodes):
        simulator.sample_task(int(rng.integers(1, LIMITS.num_tasks)))
    decayed = simulator.task_performance(FORGOTTEN)
    after = _play(curriculum, simulator, LIMITS.window)
    share = after.count(FORGOTTEN) / LIMITS.window
    check_limit("forgotten_task_share", share, LIMITS.min_revisit_share, upper=False, fmt=".1%",
                what=f"after task {FORGOTTEN} decayed from {before:.2f} to {decayed:.2f}, the share of the next "
                f"{LIMITS.window} episodes spent on it (uniform: {1 / LIMITS.num_tasks:.0%}) was")
    golden({"learning_episodes": len(learning), "performance_before_decay": before,
            "performance_after_decay": decayed, "revisit_share": share})
