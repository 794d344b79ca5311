"""Real-learner tier: PPO (stable-baselines3) trained through `GymCurriculumEnv` on the
learner task families, learning progress against uniform sampling on the same seeds.

What the simulated student says must hold for a real learner: learning progress masters every
learnable variant in at most `max_steps_ratio` of the steps uniform sampling needs, spends at
most `max_unlearnable_share_ratio` of uniform's share of episodes on impossible and noisy
variants, and keeps that share low after mastery. Judged on the mean over
`LEARNER_LIMITS.seeds` seeds (`harness.checks`), limits in `harness.learners.LEARNER_LIMITS`.

Not part of the default gate: collected only with `--gate-learners` (`make learners`), and
needs the `[learners]` extra. Each run takes 10-40 s of one core.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("stable_baselines3", reason="the learner tier needs the [learners] extra (make learners)")

from harness.checks import format_statistic_failure, mean_statistic, run_seeds  # noqa: E402
from harness.faults import make_noise_rewarding_lp  # noqa: E402
from harness.learner_envs import IMPOSSIBLE, NOISY, TASK_FAMILIES  # noqa: E402
from harness.learners import (  # noqa: E402
    LEARNER_LIMITS as LIMITS,
    LearnerComparison,
    LearnerRun,
    LearnerRunResult,
    compare_to_uniform,
    run_learner,
)

pytestmark = pytest.mark.learner

#: Runs by (family, curriculum factory or "uniform", seed), shared by the checks and the
#: canary of a family (one xdist group per family keeps them in one process).
_RUNS: dict[tuple[str, Any, int], LearnerRunResult] = {}


def _uniform(family: str, seed: int) -> LearnerRunResult:
    key = (family, "uniform", seed)
    if key not in _RUNS:
        _RUNS[key] = run_learner(LearnerRun(family, "uniform", seed=seed, post_mastery_steps=0))
    return _RUNS[key]


def _compare(family: str, seeds: list[int], factory: Callable[..., Any]) -> list[LearnerComparison]:
    comparisons = []
    for seed in seeds:
        key = (family, factory, seed)
        if key not in _RUNS:
            _RUNS[key] = run_learner(LearnerRun(family, "learning_progress", seed=seed), curriculum_factory=factory)
        comparisons.append(compare_to_uniform(_RUNS[key], _uniform(family, seed)))
    return comparisons


def _judge(family: str, comparisons: list[LearnerComparison], seeds: list[int],
           check_statistic: Callable[..., None]) -> list[str]:
    """Every check of the tier on one family; the failure message of each check that fails."""
    # after mastery exists only for the seeds that got there; the others count in the steps check
    mastered = [(c, seed) for c, seed in zip(comparisons, seeds) if math.isfinite(c.after_mastery_share)]
    checks = [
        ("steps_ratio", [c.steps_ratio for c in comparisons], seeds, LIMITS.max_steps_ratio,
         f"{family}: steps until PPO masters every learnable variant, learning progress / uniform"),
        ("unlearnable_share_ratio", [c.unlearnable_share_ratio for c in comparisons], seeds,
         LIMITS.max_unlearnable_share_ratio,
         f"{family}: share of episodes on impossible and noisy variants until mastery, learning progress / "
         f"uniform (uniform's: {mean_statistic([c.uniform_unlearnable_share for c in comparisons]):.1%})"),
        ("after_mastery_share_ratio", [c.after_mastery_share_ratio for c, _ in mastered], [s for _, s in mastered],
         LIMITS.max_after_mastery_share_ratio,
         f"{family}: share of episodes on impossible and noisy variants in the {LIMITS.post_mastery_steps} steps "
         f"after mastery, learning progress / uniform ({len(mastered)} of {len(seeds)} seeds mastered every "
         "variant)"),
    ]
    failures = []
    if not mastered:
        failures.append(f"{family}: learning progress never mastered every learnable variant (seeds {seeds}), "
                        "so its share after mastery cannot be judged")
    for name, values, judged, limit, what in checks:
        if not judged:
            continue
        try:
            check_statistic(f"learner_{name}/{family}", values, limit, seeds=judged, what=what, fmt=".3g")
        except AssertionError as failure:  # collected: every check of the family is reported
            failures.append(str(failure))
    return failures


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.xdist_group(f)) for f in TASK_FAMILIES])
def test_learning_progress_beats_uniform_on_a_real_learner(family, scenario_seed, curriculum_factory,
                                                          check_statistic) -> None:
    seeds = run_seeds(scenario_seed, LIMITS.seeds)
    failures = _judge(family, _compare(family, seeds, curriculum_factory), seeds, check_statistic)
    assert not failures, "\n".join(failures)


@pytest.mark.xdist_group("corridor")
def test_canary_noise_rewarding_lp_is_caught(scenario_seed, uses_builtin_curriculum) -> None:
    """The share check fails on `harness.faults.make_noise_rewarding_lp` (LP that rewards
    noise), and for the canary's reason: it samples impossible and noisy variants more than
    the built-in learning progress does on the same seeds."""
    if not uses_builtin_curriculum:
        pytest.skip("the canary is checked against the built-in curriculum only")
    from curriculum import Curriculum

    family = "corridor"
    seeds = run_seeds(scenario_seed, LIMITS.seeds)
    canary = _compare(family, seeds, make_noise_rewarding_lp)
    builtin = _compare(family, seeds, Curriculum)
    failures = _judge(family, canary, seeds, _strict)
    canary_share = mean_statistic([c.unlearnable_share_ratio for c in canary])
    builtin_share = mean_statistic([c.unlearnable_share_ratio for c in builtin])
    assert any("impossible and noisy variants until mastery" in f for f in failures), (
        f"the noise-rewarding canary passed the share check: mean share ratio {canary_share:.3g} over seeds "
        f"{seeds}, limit {LIMITS.max_unlearnable_share_ratio}")
    assert canary_share > builtin_share, (
        f"the share check does not separate the noise-rewarding canary from the built-in learning progress: "
        f"mean share ratio {canary_share:.3g} (canary) vs {builtin_share:.3g} (built-in) over seeds {seeds}")


def _strict(name: str, values: list[float], limit: float, *, seeds: list[int], what: str, fmt: str,
            upper: bool = True) -> None:
    """`check_statistic` without the margin record (a canary's numbers are not calibration data)."""
    statistic = mean_statistic(values)
    assert statistic <= limit if upper else statistic >= limit, format_statistic_failure(
        what, values, seeds, limit, upper=upper, fmt=fmt)


@pytest.mark.xdist_group("subproc")
def test_subproc_workers_share_one_curriculum(scenario_seed, curriculum_factory, require_capability,
                                              check_limit) -> None:
    """SB3 `SubprocVecEnv`, one process per env, on one shared-memory curriculum: every episode
    is recorded exactly once, and learning progress still masters every learnable variant while
    keeping impossible and noisy variants under the tier's share limit."""
    parameters = inspect.signature(curriculum_factory).parameters
    require_capability("shared_memory" in parameters,
                       "this curriculum factory takes no `shared_memory` option, so it cannot be shared by workers")
    family = "corridor"
    result = run_learner(LearnerRun(family, "learning_progress", seed=scenario_seed, vec_env="subproc"),
                         curriculum_factory=curriculum_factory)
    stats = result.curriculum_stats
    recorded = stats["total_completions"] + stats["late_completions"]
    episodes = len(result.episode_labels)
    assert recorded == episodes, (
        f"SubprocVecEnv/shared: the curriculum recorded {recorded} episodes but the workers reported {episodes}, "
        f"seed {scenario_seed}")
    check_limit("learner_subproc_steps_to_master_all", result.steps_to_master_all(), LIMITS.max_steps - 1,
                what=f"{family} under SubprocVecEnv: steps until every learnable variant is mastered (never: the "
                f"budget {LIMITS.max_steps}) were", fmt=",.0f")
    uniform_share = result.family.uniform_share(IMPOSSIBLE, NOISY)
    check_limit("learner_subproc_unlearnable_share_ratio",
                result.unlearnable_share(end=result.all_mastered_step) / uniform_share,
                LIMITS.max_unlearnable_share_ratio, fmt=".3g",
                what=f"{family} under SubprocVecEnv: share of episodes on impossible and noisy variants until "
                f"mastery / uniform's {uniform_share:.0%} was")
