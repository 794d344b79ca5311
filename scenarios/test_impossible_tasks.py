"""Scenario 1: impossible tasks get low learning progress and a bounded share of samples.

Bug class (seeds/002, task 5): tasks that never pay, or whose reward is pure noise, keep
soaking up samples because the curriculum mistakes noise for progress. Three task spaces
(`harness.experiments`): 5 learnable + 5 always-zero tasks, 5 learnable + 5 constant-plus-noise
tasks, and 5 learnable among 45 impossible ones. Each check judges its mean over
`IMPOSSIBLE_TASKS.seeds` seeds; the first seed's run is checked by the accounting oracle.
"""

from __future__ import annotations

import pytest

from harness.experiments import checks_of

# the checks of one setup share its runs: under xdist `--dist loadgroup` they run in one worker
CHECKS = [pytest.param(check.name, marks=pytest.mark.xdist_group(setup))
          for setup in ("impossible_zero", "impossible_noise", "mostly_impossible") for check in checks_of(setup)]


@pytest.mark.parametrize("check", CHECKS)
def test_impossible_tasks_get_low_lp_and_few_samples(judge, check: str) -> None:
    judge(check)
