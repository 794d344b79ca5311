"""A reference implementation of the learning progress of one task, from its definition.

`curriculum.algorithms.learning_progress` documents a task's learning progress as a function
of the scores it received: a warm-up whose mean is the baseline, two EMAs of the normalised
score, a noise variance from successive differences, a peak that remembers learned ground,
and a noise band. This module computes it again, plainly and from scratch for every task, so
the gate can hold the library's vectorised, shared-memory version to it number by number.

Only what the scores alone determine: a task that inherited statistics from the memory of
configurations, or that is scored in another range than [0, 1], is not covered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from curriculum import LearningProgressConfig

__all__ = ["reference_learning_progress"]


def reference_learning_progress(scores: Sequence[float], config: LearningProgressConfig) -> float:
    """The learning progress of a task that started cold and received `scores` (in [0, 1])."""
    warmup = config.min_samples_for_lp
    if len(scores) < warmup:
        return 0.0
    a_f = config.ema_timescale
    a_s = a_f * config.slow_timescale_factor
    # the warm-up: its mean is the baseline (capped), its successive differences the variance
    first = list(scores[:warmup])
    mean = sum(first) / warmup
    differences = [b - a for a, b in zip(first, first[1:])]
    var = sum(0.5 * d * d for d in differences) / len(differences) if differences else 0.0
    baseline = min(mean, config.max_baseline)
    scale = 1.0 / (1.0 - baseline)
    fast = slow = peak = (mean - baseline) * scale
    var *= scale * scale
    last = (first[-1] - baseline) * scale
    mastered_at = (config.max_baseline - baseline) * scale
    for score in scores[warmup:]:
        x = (score - baseline) * scale
        fast += a_f * (x - fast)
        slow += a_s * (x - slow)
        var += a_s * (0.5 * (x - last) ** 2 - var)
        last = x
        learned_at = min(config.mastered_gain + config.noise_z / math.sqrt(warmup) * math.sqrt(var), mastered_at)
        if slow >= peak or peak < learned_at:  # lost ground counts only below a learned peak
            peak = slow
        else:
            peak -= a_s * config.slow_timescale_factor * (peak - slow)
    # the standard deviation of fast - slow for white noise of unit variance
    k2 = a_f / (2 - a_f) + a_s / (2 - a_s) - 2 * a_f * a_s / (a_f + a_s - a_f * a_s)
    gap = max(abs(fast - slow), peak - slow)
    return max(gap - config.noise_z * math.sqrt(max(k2, 0.0)) * math.sqrt(var), 0.0)
