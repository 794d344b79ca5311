"""Bidirectional learning progress with a noise floor.

Per task, a completion's score s becomes a baseline-normalised signal
x = (s - b) / (1 - b), with b = min(first score, max_baseline). Two EMAs follow x, a fast
one (rate a_f) and a slow one (rate a_s = a_f * slow_timescale_factor). For the first
`min_samples_for_lp` completions both hold the running mean of x (and the noise variance the
running variance), so the EMAs start from an average rather than from one noisy score,
whose decaying offset would otherwise look like progress. Learning progress is
their gap in either direction (improving or forgetting), minus what noise alone would make:

    LP = max(0, |fast - slow| - noise_z * k * sigma),
    k^2 = a_f/(2-a_f) + a_s/(2-a_s) - 2 a_f a_s / (a_f + a_s - a_f a_s),

where k * sigma is the standard deviation of the gap for white noise of variance sigma^2
(estimated by an EMA of (x - fast)^2). A task whose score never moves has gap 0; one whose
score only moves as noise has a gap inside the noise band; both end with LP ~ 0. A trend of
slope g per episode opens a gap of about g (1/a_s - 1/a_f), which clears the band.

Sampling: an `exploration` share is spread uniformly over the pool; a `cold_exploration`
share is split among tasks with fewer than `min_samples_for_lp` completions (so new tasks get
tried, but pool churn cannot crowd out learning); the rest goes to warm tasks in proportion to
their LP. When no warm task has LP, everything but the uniform share goes to the cold ones.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from curriculum.algorithms.base import POOL_UNCHANGED, CurriculumAlgorithm
from curriculum.config import LearningProgressConfig
from curriculum.generators import TaskGenerator

__all__ = ["LearningProgressAlgorithm"]


class LearningProgressAlgorithm(CurriculumAlgorithm):
    """Samples tasks in proportion to their learning progress; evicts the stagnant."""

    evicts = True

    def __init__(self, config: LearningProgressConfig, capacity: int, generator: TaskGenerator) -> None:
        super().__init__(capacity)
        self.config = config
        self.generator = generator
        a_f = config.ema_timescale
        a_s = a_f * config.slow_timescale_factor
        self._a_fast = a_f
        self._a_slow = a_s
        k2 = a_f / (2 - a_f) + a_s / (2 - a_s) - 2 * a_f * a_s / (a_f + a_s - a_f * a_s)
        self._noise_scale = config.noise_z * math.sqrt(max(k2, 0.0))
        self._max_baseline = config.max_baseline
        self._warmup = config.min_samples_for_lp

    def extra_layout(self) -> dict[str, tuple[str, int]]:
        n = self.capacity
        return {"lp_fast": ("float64", n), "lp_slow": ("float64", n), "lp_var": ("float64", n),
                "lp_baseline": ("float64", n)}

    def bind(self, tracker: Any) -> None:
        super().bind(tracker)
        arrays = tracker.backend.arrays
        self._fast = arrays["lp_fast"]
        self._slow = arrays["lp_slow"]
        self._var = arrays["lp_var"]
        self._baseline = arrays["lp_baseline"]

    def generator_for_slot(self, slot: int) -> TaskGenerator:
        return self.generator

    def reset_slot(self, slot: int) -> None:
        self._fast[slot] = 0.0
        self._slow[slot] = 0.0
        self._var[slot] = 0.0
        self._baseline[slot] = 0.0

    def record(self, slot: int, score: float, completions: int) -> int:
        if completions == 1:
            b = score if score < self._max_baseline else self._max_baseline
            self._baseline[slot] = b
        else:
            b = self._baseline.item(slot)
        x = (score - b) / (1.0 - b)
        slow = self._slow.item(slot)
        var = self._var.item(slot)
        if completions <= self._warmup:
            # warm-up: both EMAs sit at the running mean, so one noisy early score cannot open
            # a gap that then decays like progress
            mean = slow + (x - slow) / completions
            var += ((x - mean) * (x - slow) - var) / completions
            self._fast[slot] = mean
            self._slow[slot] = mean
            self._var[slot] = var
            return POOL_UNCHANGED
        fast = self._fast.item(slot)
        fast += self._a_fast * (x - fast)
        slow += self._a_slow * (x - slow)
        d = x - fast
        var += self._a_slow * (d * d - var)
        self._fast[slot] = fast
        self._slow[slot] = slow
        self._var[slot] = var
        return POOL_UNCHANGED

    def scores(self) -> np.ndarray:
        gap = np.abs(self._fast - self._slow)
        band = self._noise_scale * np.sqrt(np.maximum(self._var, 0.0))
        lp = np.maximum(gap - band, 0.0)
        lp[self.tracker.completions < self.config.min_samples_for_lp] = 0.0
        return lp

    def score_at(self, slot: int) -> float:
        if self.tracker.completions.item(slot) < self.config.min_samples_for_lp:
            return 0.0
        gap = abs(self._fast.item(slot) - self._slow.item(slot))
        return max(gap - self._noise_scale * math.sqrt(max(self._var.item(slot), 0.0)), 0.0)

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        n = scores.shape[0]
        cold = self.tracker.completions < self.config.min_samples_for_lp
        num_cold = int(np.count_nonzero(cold))
        warm_weights = np.where(cold, 0.0, scores)
        warm_total = float(warm_weights.sum())
        eps = self.config.exploration
        cold_share = self.config.cold_exploration if num_cold else 0.0
        if not (warm_total > 0.0 and math.isfinite(warm_total)):
            if not num_cold:
                return np.full(n, 1.0 / n)
            cold_share = 1.0 - eps  # nothing is learning: look at what has not been tried
        probs = np.full(n, eps / n)
        if num_cold:
            probs[cold] += cold_share / num_cold
        if warm_total > 0.0 and math.isfinite(warm_total):
            # normalise first: share / warm_total overflows to inf when LP is subnormal (inf * 0 = NaN)
            probs += (warm_weights / warm_total) * (1.0 - eps - cold_share)
        return probs

    def check_arrays(self, arrays: dict[str, np.ndarray]) -> str | None:
        if (arrays["lp_var"] < 0).any():
            return "negative learning-progress variances"
        if (arrays["lp_baseline"] > self._max_baseline).any():  # b = 1 would divide by zero
            return f"learning-progress baselines above max_baseline={self._max_baseline}"
        return None

    def stats(self) -> dict[str, Any]:
        return {"lp_noise_band_scale": self._noise_scale}
