"""How statistical checks are judged: a number measured on K seeds, its mean (or median) against a limit.

One seed judged against a worst-of-many-seeds limit has little power: a curriculum much worse
than the built-in one still passes. A check over K seeds judges their mean, whose spread is
about 1/sqrt(K) of one seed's, so the limit can sit much closer to the built-in's typical value
for the same false-alarm rate. Limits are calibrated by replaying the check under many base
seeds (`benchmarks/calibrate_gate.py`); `thresholds.py` states each figure.

A check whose number has a heavy tail (a rare seed where the curriculum never gets there, at
several times the typical value) judges the median instead: one such seed would move a
mean of K as far as a real regression does.

Seeds of a check with base seed B and K runs: B*K .. B*K+K-1, so different base seeds replay
the check on disjoint seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["STATISTICS", "run_seeds", "mean_statistic", "median_statistic", "statistic_of",
           "format_statistic_failure"]


def run_seeds(base_seed: int, count: int) -> list[int]:
    """The `count` run seeds of a statistical check at `base_seed`."""
    if count < 1:
        raise ValueError(f"Expected `count` to be a positive integer, received {count!r}")
    return list(range(base_seed * count, base_seed * count + count))


def mean_statistic(values: Sequence[float]) -> float:
    """The mean over a check's seeds."""
    return math.fsum(values) / len(values)


def median_statistic(values: Sequence[float]) -> float:
    """The median over a check's seeds."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


STATISTICS = {"mean": mean_statistic, "median": median_statistic}
"""Statistic name -> how it is computed from the per-seed values."""


def statistic_of(values: Sequence[float], statistic: str = "mean") -> float:
    """`statistic` ("mean" or "median") of `values`."""
    try:
        return STATISTICS[statistic](values)
    except KeyError:
        raise ValueError(f"Expected `statistic` to be one of {sorted(STATISTICS)}, received {statistic!r}") from None


def format_statistic_failure(what: str, values: Sequence[float], seeds: Sequence[int], limit: float, *,
                             upper: bool, fmt: str = ".4g", statistic: str = "mean") -> str:
    """'<what>: mean M over K seeds (a-b), limit at most L; worst seed s: v'."""
    worst = max(range(len(values)), key=lambda i: values[i] if upper else -values[i])
    bound = "at most" if upper else "at least"
    return (f"{what}: {statistic} {statistic_of(values, statistic):{fmt}} over {len(values)} seeds "
            f"({seeds[0]}-{seeds[-1]}), limit {bound} {limit:{fmt}}; worst seed {seeds[worst]}: {values[worst]:{fmt}}")
