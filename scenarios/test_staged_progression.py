"""Staged progression advances and regresses exactly when its rule says, at every integration level.

Bug class: a stage machine that advances an episode late or early, counts the wrong
completions (late ones, previous-stage ones), or never falls back when performance drops. A
three-task prerequisite chain with fast forgetting: stage i trains task i; passing the
advancement threshold on task 0 is not mastery, so task 1 stays out of reach, its scores fall
below the regression threshold, and the curriculum falls back; practice brings it forward
again. Each run holds several advancements and regressions. The accounting oracle replays the
rule (`StagedProgressionConfig`: the mean of the last `window` scores of the stage's own tasks,
after `min_episodes`; previous-stage tasks mixed into the pool do not count) on the credited
completions and checks the stage after every one of
them, and every number the run reports. The rule is also replayed over every pairing of
`min_episodes` and `window` from 1 to `LIMITS.sweep_max` (a minimum below the window decides
on a partly filled window), with and without a previous-stage mix (one rounded to a whole
number of slots), on a seeded score stream.
"""

from __future__ import annotations

import functools
import itertools
import random

import pytest

from curriculum import BucketedTaskGenerator, CurriculumConfig, Stage, StagedProgressionConfig
from harness.episodes import LabelledTaskGenerator
from harness.runners import run_direct, run_single_env, run_vectorized
from harness.task_spaces import chain_task_space
from harness.thresholds import STAGED as LIMITS


def staged_space(seed: int):
    return chain_task_space(num_tasks=LIMITS.num_stages, seed=seed, forgetting_rate=LIMITS.forgetting_rate)


def staged_config(seed: int, mix: float = 0.0) -> CurriculumConfig:
    stages = [Stage(f"stage_{i}", LabelledTaskGenerator(BucketedTaskGenerator({"task_index": i}, {}, label=f"task_{i}",
                                                                           seed=seed)))
              for i in range(LIMITS.num_stages)]
    return CurriculumConfig(
        algorithm=StagedProgressionConfig(stages=stages, advancement_threshold=LIMITS.advancement_threshold,
                                          min_episodes=LIMITS.min_episodes, window=LIMITS.window,
                                          regression_threshold=LIMITS.regression_threshold,
                                          previous_stage_mix=mix),
        num_active_tasks=LIMITS.pool, seed=seed,
    )


@pytest.mark.parametrize(("runner", "mix"), [("direct", 0.0), ("direct", LIMITS.previous_stage_mix), ("single", 0.0),
                                           ("Serial", 0.0)])
def test_stage_advances_and_regresses_exactly_by_its_rule(curriculum_factory, require_capability, scenario_seed,
                                                        runner, mix, oracle, check_limit, golden) -> None:
    config = staged_config(scenario_seed, mix)
    watcher = oracle(context=f"{runner}, previous-stage mix {mix}")
    if runner == "Serial":
        curriculum = curriculum_factory(config)
        require_capability(getattr(curriculum, "stage", None) is not None, "this curriculum reports no `stage`")
        run_vectorized(curriculum, functools.partial(staged_space, scenario_seed), backend="Serial", tracking="shared",
                       num_envs=LIMITS.num_envs, episodes=LIMITS.episodes, epoch_length=LIMITS.epoch_length,
                       seed=scenario_seed, oracle=watcher)
    else:
        curriculum = curriculum_factory(config)
        require_capability(getattr(curriculum, "stage", None) is not None, "this curriculum reports no `stage`")
        run = run_direct if runner == "direct" else run_single_env
        run(curriculum, staged_space(scenario_seed), episodes=LIMITS.episodes, epoch_length=LIMITS.epoch_length,
            oracle=watcher)
    watcher.verify(curriculum)
    stats = curriculum.stats()
    check_limit("staged_advancements", stats["advancements"], LIMITS.min_advancements, upper=False, fmt=".0f",
                what=f"{runner}: advancements in {LIMITS.episodes} episodes (the scenario must exercise them):")
    check_limit("staged_regressions", stats["regressions"], LIMITS.min_regressions, upper=False, fmt=".0f",
                what=f"{runner}: regressions in {LIMITS.episodes} episodes (a drop in performance must bring one):")
    assert stats["advancements"] - stats["regressions"] == stats["stage"], (
        f"{runner}: {stats['advancements']} advancements and {stats['regressions']} regressions from stage 0 cannot "
        f"end at stage {stats['stage']}, seed {scenario_seed}"
    )
    golden({key: stats.get(key) for key in ("stage", "advancements", "regressions", "stage_episodes")})


def test_stage_rule_holds_for_every_minimum_and_window(curriculum_factory, require_capability, scenario_seed,
                                                      oracle) -> None:
    """Every (`min_episodes`, `window`) pairing up to `LIMITS.sweep_max`, with every mix of
    `LIMITS.sweep_mixes` (one of them a fractional number of slots): scores from a seeded
    stream that crosses both thresholds in runs of high and low scores, quarters whose window
    means often land exactly on a threshold (where the rule advances, and does not regress),
    the oracle replaying the rule, and now and then a stage adopted from a broadcast (entered
    afresh, as the main curriculum entered it). Then again on tenths, whose window means land on the
    thresholds as often but whose sums round: the built-in rule moves on the window's scores,
    not on the rounding a running sum kept of scores that left it. And on quarters mapped into a
    score range of span 49 (`LIMITS.sweep_score_range`), at the domain's top threshold too: a
    normalisation that rounds where dividing by the span is exact shows."""
    quarters = ((0.5, 0.75, 1.0), (0.0, 0.25, 0.5))
    tenths = (tuple(k / 10 for k in range(5, 11)), tuple(k / 10 for k in range(6)))
    unit = (0.0, 1.0)
    sweeps = [(quarters, LIMITS.sweep_thresholds, LIMITS.sweep_mixes, unit),
              *((tenths, thresholds, LIMITS.sweep_tenths_mixes, unit) for thresholds in LIMITS.sweep_tenths_thresholds),
              *((quarters, thresholds, (0.0,), LIMITS.sweep_score_range)
                for thresholds in LIMITS.sweep_score_range_thresholds)]
    for (high_scores, low_scores), (threshold, regression), mixes, score_range in sweeps:
        for minimum, window, mix in itertools.product(range(1, LIMITS.sweep_max + 1),
                                                      range(1, LIMITS.sweep_max + 1), mixes):
            _sweep_stage_rule(curriculum_factory, oracle, scenario_seed, minimum, window, mix, threshold, regression,
                              high_scores, low_scores, score_range)


def _sweep_stage_rule(curriculum_factory, oracle, scenario_seed: int, minimum: int, window: int, mix: float,
                      threshold: float, regression: float, high_scores: tuple[float, ...],
                      low_scores: tuple[float, ...], score_range: tuple[float, float]) -> None:
    """One config of `test_stage_rule_holds_for_every_minimum_and_window`, its scores mapped
    from [0, 1] into `score_range`."""
    bottom, top = score_range
    stages = [Stage(f"s{i}", LabelledTaskGenerator(BucketedTaskGenerator({"task_index": i}, {}, label=f"task_{i}",
                                                                        seed=scenario_seed)))
              for i in range(LIMITS.num_stages)]
    config = CurriculumConfig(algorithm=StagedProgressionConfig(
        stages=stages, advancement_threshold=threshold, min_episodes=minimum, window=window,
        regression_threshold=regression, previous_stage_mix=mix),
        num_active_tasks=LIMITS.pool, seed=scenario_seed, score_range=score_range)
    watcher = oracle(context=f"min_episodes={minimum}, window={window}, previous_stage_mix={mix}, "
                             f"thresholds {threshold}/{regression}, score_range {score_range}")
    curriculum = watcher.watch(curriculum_factory(config))
    rng = random.Random(f"{scenario_seed}-{minimum}-{window}-{mix}-{threshold}")
    broadcasts = random.Random(f"{scenario_seed}-{minimum}-{window}-{mix}-{threshold}-broadcasts")
    adopt = getattr(curriculum, "apply_sync_state", None)
    high = True
    for _ in range(LIMITS.sweep_episodes):
        if rng.random() < 1.0 / LIMITS.sweep_run_length:
            high = not high
        score = bottom + rng.choice(high_scores if high else low_scores) * (top - bottom)
        task = curriculum.get_task()
        curriculum.update_task_performance(task.task_id, score)
        if callable(adopt) and broadcasts.random() < 1.0 / LIMITS.sweep_broadcast_every:
            adopt(_broadcast(curriculum.sync_state(), broadcasts.randrange(LIMITS.num_stages)))
    watcher.verify()


@pytest.mark.parametrize(("threshold", "score_range"), [(0.7, (0.0, 1.0)), (1.0, (0.0, 1.0)), (1.0, (0.0, 3.0))])
def test_a_window_a_hair_below_the_threshold_never_advances(curriculum_factory, require_capability,
                                                            uses_builtin_curriculum, scenario_seed, oracle, threshold,
                                                            score_range) -> None:
    """Every score a hair (1e-10 of the range) below the advancement threshold, the top of the
    range included: the window's mean is below it, and the stage never advances (a stage moved
    by a tolerance band, not by the scores, promotes a student who never met the bar). The
    oracle replays the rule exactly."""
    bottom, top = score_range
    stages = [Stage(f"s{i}", LabelledTaskGenerator(BucketedTaskGenerator({"task_index": i}, {}, label=f"task_{i}",
                                                                        seed=scenario_seed)))
              for i in range(LIMITS.num_stages)]
    window = LIMITS.sweep_max
    config = CurriculumConfig(algorithm=StagedProgressionConfig(
        stages=stages, advancement_threshold=threshold, min_episodes=window, window=window),
        num_active_tasks=LIMITS.pool, seed=scenario_seed, score_range=score_range)
    built = curriculum_factory(config)
    require_capability(uses_builtin_curriculum or score_range == (0.0, 1.0),
                       "the oracle replays a plug-in's staged rule on its raw scores, in [0, 1] only")
    watcher = oracle(context=f"scores a hair below threshold {threshold}, score_range {score_range}")
    curriculum = watcher.watch(built)
    score = bottom + (threshold - 1e-10) * (top - bottom)
    for _ in range(LIMITS.sweep_episodes):
        curriculum.update_task_performance(curriculum.get_task().task_id, score)
    stage = curriculum.stage
    watcher.verify()
    assert stage == 0, (
        f"{LIMITS.sweep_episodes} scores of {score!r}, below advancement_threshold={threshold} (score_range "
        f"{score_range}), moved the stage to {stage}, seed {scenario_seed}")


def _broadcast(current: dict[str, int], stage: int) -> dict[str, int]:
    """A stage sync a main curriculum ahead of `current` could send for `stage` (every change
    moves one stage, from stage 0)."""
    changes = max(current["stage_changes"] + 1, stage)
    return {"stage": stage, "stage_changes": changes + (changes - stage) % 2}
