"""Scenario 1: impossible tasks get low learning progress and a bounded share of samples.

Bug class (seeds/002, task 5): tasks that never pay, or whose reward is pure noise, keep
soaking up samples because the curriculum mistakes noise for progress.
"""

from __future__ import annotations

import numpy as np
import pytest

from curriculum import CurriculumConfig, LearningProgressConfig
from harness.runners import RunResult, run_direct
from harness.task_spaces import TaskSpace, impossible_task_space
from harness.thresholds import IMPOSSIBLE_TASKS as LIMITS

POOL = 32


def _run(curriculum_factory, space: TaskSpace, seed: int) -> RunResult:
    config = CurriculumConfig(
        task_generator=space.generator, algorithm=LearningProgressConfig(), num_active_tasks=POOL, seed=seed
    )
    curriculum = curriculum_factory(config)
    return run_direct(
        curriculum, space, episodes=LIMITS.episodes, epoch_length=LIMITS.epoch_length,
        warmup_episodes=LIMITS.warmup_episodes,
    )


def _share(result: RunResult, labels: tuple[str, ...]) -> float:
    total = sum(result.samples_by_label.values())
    return sum(result.samples_by_label[label] for label in labels) / total


def _mean_label_lp(result: RunResult, label: str) -> float:
    """Mean of the per-label LP metric over the epochs after warm-up that report the label
    (an epoch in which no task of the label completed has no value, not a zero)."""
    key = f"env_curriculum_stats/per_label_lp_scores/{label}"
    values = [e[key] for e in result.recorder.epochs[LIMITS.lp_skip_epochs:] if key in e]
    assert values, f"no epoch after warm-up reported {key}"
    return float(np.mean(values))


@pytest.mark.parametrize("mode", ["zero", "noise"])
def test_impossible_tasks_get_low_lp_and_few_samples(curriculum_factory, scenario_seed, mode, golden,
                                                     check_limit) -> None:
    space = impossible_task_space(num_learnable=5, num_impossible=5, mode=mode, seed=scenario_seed)
    result = _run(curriculum_factory, space, scenario_seed)
    share = _share(result, space.impossible_labels)
    limit = LIMITS.max_zero_share if mode == "zero" else LIMITS.max_noise_share
    counted = LIMITS.episodes - LIMITS.warmup_episodes
    check_limit(f"{mode}_impossible_share", share, limit, fmt=".1%",
                what=f"share of samples {mode} impossible tasks got in {LIMITS.episodes} episodes (uniform: 50%):")
    lp = {label: _mean_label_lp(result, label) for label in space.learnable_labels + space.impossible_labels}
    for impossible in space.impossible_labels:
        for learnable in space.learnable_labels:
            check_limit(f"{mode}_lp_gap", lp[learnable] - lp[impossible], LIMITS.min_lp_gap, upper=False,
                        what=f"per-label LP of {learnable} ({lp[learnable]:.4f}) minus {impossible} "
                        f"({lp[impossible]:.4f}), mean over epochs {LIMITS.lp_skip_epochs}+, is")
    golden({"impossible_share": share, "counted_episodes": counted, "mean_per_label_lp": lp,
            "samples_by_label": dict(result.samples_by_label)})


def test_mostly_impossible_space_still_trains_learnable_tasks(curriculum_factory, scenario_seed, golden,
                                                             check_limit) -> None:
    space = impossible_task_space(num_learnable=5, num_impossible=45, mode="zero", seed=scenario_seed)
    result = _run(curriculum_factory, space, scenario_seed)
    share = _share(result, space.learnable_labels)
    check_limit("mostly_impossible_learnable_share", share, LIMITS.min_mostly_impossible_learnable_share,
                upper=False, fmt=".1%",
                what=f"share of samples learnable tasks (10% of the task space) got in {LIMITS.episodes} episodes:")
    golden({"learnable_share": share, "samples_by_label": dict(result.samples_by_label)})
