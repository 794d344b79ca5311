"""How statistical checks are judged: a number measured on K seeds, its mean against a limit.

One seed judged against a worst-of-many-seeds limit has little power: a curriculum much worse
than the built-in one still passes. A check over K seeds judges their mean, whose spread is
about 1/sqrt(K) of one seed's, so the limit can sit much closer to the built-in's typical value
for the same false-alarm rate. Limits are calibrated by replaying the check under many base
seeds (`benchmarks/calibrate_gate.py`); `thresholds.py` states each figure.

Seeds of a check with base seed B and K runs: B*K .. B*K+K-1, so different base seeds replay
the check on disjoint seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["run_seeds", "mean_statistic", "format_statistic_failure"]


def run_seeds(base_seed: int, count: int) -> list[int]:
    """The `count` run seeds of a statistical check at `base_seed`."""
    if count < 1:
        raise ValueError(f"Expected `count` to be a positive integer, received {count!r}")
    return list(range(base_seed * count, base_seed * count + count))


def mean_statistic(values: Sequence[float]) -> float:
    """The statistic a check judges: the mean over its seeds."""
    return math.fsum(values) / len(values)


def format_statistic_failure(what: str, values: Sequence[float], seeds: Sequence[int], limit: float, *,
                             upper: bool, fmt: str = ".4g") -> str:
    """'<what>: mean M over K seeds (a-b), limit at most L; worst seed s: v'."""
    worst = max(range(len(values)), key=lambda i: values[i] if upper else -values[i])
    bound = "at most" if upper else "at least"
    return (f"{what}: mean {mean_statistic(values):{fmt}} over {len(values)} seeds ({seeds[0]}-{seeds[-1]}), "
            f"limit {bound} {limit:{fmt}}; worst seed {seeds[worst]}: {values[worst]:{fmt}}")
