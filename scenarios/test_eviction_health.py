"""Eviction health: the pool stays full, and only stagnant, well-presented tasks are evicted.

Bug class: eviction that removes the tasks the student is learning from (inverted or
unranked scores) or evicts before a task's learning progress means anything. The pool is
looked at before and after every call (`harness.experiments.eviction_health`), so an eviction
is seen whether a curriculum evicts when it records a completion or when it draws a task. The
bookkeeping of the slot a new task takes (its counts, scores and history start from nothing)
is checked by the accounting oracle on the first seed's run.
"""

from __future__ import annotations

import pytest

from curriculum import CurriculumConfig, LearningProgressConfig
from harness.task_spaces import impossible_task_space
from harness.thresholds import EVICTION

MIN_PRESENTATIONS = CurriculumConfig.__dataclass_fields__["min_presentations"].default

pytestmark = pytest.mark.xdist_group("eviction")  # the tests share the setup's runs (`--dist loadgroup`)


@pytest.fixture
def eviction_runs(setup_runs, curriculum_factory, require_capability):
    probe = curriculum_factory(CurriculumConfig(task_generator=impossible_task_space(
        num_learnable=1, num_impossible=1).generator, algorithm=LearningProgressConfig(), num_active_tasks=2))
    lacking = [name for name in ("active_tasks", "task_scores") if not callable(getattr(probe, name, None))]
    require_capability(not lacking, f"eviction health inspects the pool; this curriculum lacks {lacking}")
    return setup_runs("eviction")


def test_pool_stays_full_and_evicts_only_well_presented_tasks(eviction_runs, check_limit) -> None:
    seeds, runs = eviction_runs
    for seed, run in zip(seeds, runs):
        assert run.pool_sizes == {EVICTION.pool}, (
            f"the pool held {sorted(run.pool_sizes)} tasks at some point, expected always {EVICTION.pool}, seed {seed}"
        )
        early = [c for c in run.completions if c < MIN_PRESENTATIONS]
        assert not early, (
            f"{len(early)} tasks were evicted with fewer than min_presentations={MIN_PRESENTATIONS} completions "
            f"(completions {early[:10]}), seed {seed}"
        )
    high = sum(rank > EVICTION.high_rank for run in runs for rank in run.ranks)
    check_limit("evictions_ranked_high", high, EVICTION.max_high_ranked, fmt=".0f",
                what=f"evictions of a task scoring above {EVICTION.high_rank:.0%} of the eligible ones, in "
                     f"{len(runs)} runs (seeds {seeds[0]}-{seeds[-1]}):")
    check_limit("evictions_observed", sum(len(run.ranks) for run in runs), EVICTION.min_evictions, upper=False,
                fmt=".0f", what=f"evictions observed in {len(runs)} runs of {EVICTION.episodes} episodes "
                                f"(seeds {seeds[0]}-{seeds[-1]}):")


def test_evicts_the_lowest_scoring_tasks(eviction_runs, judge) -> None:
    judge("eviction_mean_rank")
