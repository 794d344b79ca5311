"""harness.checks: the seeds of a check, its statistic, and what a failure says."""

from __future__ import annotations

import pytest

from harness.checks import format_statistic_failure, run_seeds, statistic_of


def test_base_seeds_replay_a_check_on_disjoint_seeds() -> None:
    assert run_seeds(0, 3) == [0, 1, 2]
    assert run_seeds(2, 3) == [6, 7, 8]
    with pytest.raises(ValueError, match="Expected `count` to be a positive integer, received 0"):
        run_seeds(1, 0)


def test_the_median_ignores_one_runaway_seed_the_mean_does_not() -> None:
    values = [0.4, 0.38, 0.42, 0.41, 3.2]
    assert statistic_of(values, "median") == 0.41
    assert statistic_of(values, "mean") == pytest.approx(0.962)
    assert statistic_of([0.4, 0.2, 0.3, 0.1], "median") == pytest.approx(0.25)
    with pytest.raises(ValueError, match=r"Expected `statistic` to be one of \['mean', 'median'\], received 'mode'"):
        statistic_of(values, "mode")


def test_a_failure_names_the_statistic_the_seeds_the_limit_and_the_worst_seed() -> None:
    message = format_statistic_failure("chain ratio", [0.4, 0.9, 0.5], [10, 11, 12], 0.45, upper=True, fmt=".2f",
                                       statistic="median")
    assert message == "chain ratio: median 0.50 over 3 seeds (10-12), limit at most 0.45; worst seed 11: 0.90"
