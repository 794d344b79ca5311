"""Checkpoint/resume determinism: stop, save, restore, continue == the uninterrupted run.

Bug class: a checkpoint that drops the sampler's random state, pending draws or per-task
statistics, so a resumed run quietly diverges from what training would have done.
"""

from __future__ import annotations

import json

import pytest

from curriculum import CurriculumConfig, LearningProgressConfig
from harness.protocol import missing_capabilities
from harness.task_spaces import impossible_task_space
from harness.thresholds import CHECKPOINT as LIMITS


def _play(curriculum, simulator, episodes: int) -> list[tuple[int, float]]:
    trace = []
    for _ in range(episodes):
        task = curriculum.get_task()
        reward = simulator.sample_task(task.env_cfg["task_index"])
        curriculum.update_task_performance(task.task_id, reward)
        trace.append((task.task_id, reward))
    return trace


def test_resumed_run_matches_uninterrupted_run(curriculum_factory, require_capability, scenario_seed, golden,
                                               oracle) -> None:
    def config(space):
        return CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                                num_active_tasks=32, seed=scenario_seed)

    space_a = impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed)
    original = curriculum_factory(config(space_a))
    lacking = missing_capabilities(original, ("get_state", "load_state"))
    require_capability(not lacking, f"checkpoint/resume needs {lacking}")
    total = LIMITS.episodes_before + LIMITS.episodes_after
    watcher = oracle(context="uninterrupted run")
    uninterrupted = _play(watcher.watch(original), space_a.simulator, total)
    watcher.verify()

    space_b = impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed)
    first = curriculum_factory(config(space_b))
    before = _play(first, space_b.simulator, LIMITS.episodes_before)
    saved = json.loads(json.dumps(first.get_state()))  # a checkpoint goes through a file
    resumed = curriculum_factory(config(space_b))
    resumed.load_state(saved)
    after = _play(resumed, space_b.simulator, LIMITS.episodes_after)

    diverged = next((i for i, (a, b) in enumerate(zip(uninterrupted, before + after)) if a != b), None)
    assert diverged is None, (
        f"resumed run diverged from the uninterrupted one at episode {diverged} "
        f"({LIMITS.episodes_before} before the checkpoint): task {(before + after)[diverged][0]} instead of "
        f"{uninterrupted[diverged][0]}, seed {scenario_seed}"
    )
    final_original, final_resumed = original.stats(), resumed.stats()
    lp_resumed, lp_original = final_resumed.get("per_label_lp_scores"), final_original.get("per_label_lp_scores")
    assert lp_resumed == lp_original, (
        f"per-label LP after resuming {lp_resumed} differs from the uninterrupted run {lp_original}, "
        f"seed {scenario_seed}"
    )
    golden({"episodes": total, "final_per_label_lp_scores": lp_resumed,
            "last_task_ids": [task_id for task_id, _ in after[-10:]]})
