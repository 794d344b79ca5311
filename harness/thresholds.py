"""Every limit the scenario gate checks, in one place, with the calibration behind it.

Each limit was set from a sweep of the unmodified built-in curriculum over seeds
(`pytest scenarios/ --scenario-seeds=N`) with a margin to the worst seed, and checked to be
violated by the scenario's canary in `harness.faults`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["IMPOSSIBLE_TASKS", "ImpossibleTasksLimits"]


@dataclass(frozen=True)
class ImpossibleTasksLimits:
    """Scenario 1: impossible tasks get low learning progress."""

    episodes: int = 4000
    """Episodes per run (direct runner, pool of 32)."""
    warmup_episodes: int = 500
    """Samples before this are not counted in shares."""
    epoch_length: int = 250
    lp_skip_epochs: int = 2
    """Per-label LP is averaged over epochs after the first two (the warm-up)."""
    max_zero_share: float = 0.20
    """5 learnable + 5 always-zero tasks: impossible share of samples (uniform would be 0.50;
    30 seeds: mean 0.089, worst 0.111)."""
    max_noise_share: float = 0.40
    """5 learnable + 5 constant-plus-noise tasks (uniform 0.50; 30 seeds: mean 0.243, worst 0.336)."""
    min_mostly_impossible_learnable_share: float = 0.20
    """5 learnable + 45 impossible: learnable share, at least twice uniform (0.10; 30 seeds:
    mean 0.418, worst 0.261)."""


IMPOSSIBLE_TASKS = ImpossibleTasksLimits()
