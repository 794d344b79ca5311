"""Inequality and spread of a distribution: Gini coefficient and normalised entropy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["gini_coefficient", "normalized_entropy"]


def gini_coefficient(values: Sequence[float] | np.ndarray) -> float:
    """Gini of non-negative values by the sorted formula; 0 for empty, all-zero or non-finite input.

    G = sum_i (2i - n - 1) x_(i) / (n * sum x), i = 1..n over ascending x. Negative values
    are clipped to 0 (a share cannot be negative).
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    n = x.size
    if n == 0 or not np.isfinite(x).all():
        return 0.0
    x = np.sort(np.maximum(x, 0.0))
    total = float(x.sum())
    if total <= 0.0:
        return 0.0
    ranks = np.arange(1, n + 1, dtype=np.float64)
    # The weights (2i - n - 1) sum to 0, so shifting x by its minimum changes nothing exactly,
    # but makes equal values give exactly 0 instead of a rounding residue of +-1e-17.
    gini = float(((2.0 * ranks - n - 1.0) * (x - x[0])).sum() / (n * total))
    return max(0.0, gini)


def normalized_entropy(probabilities: Sequence[float] | np.ndarray) -> float:
    """Shannon entropy divided by log(n): 1 for uniform, 0 for a point mass (or n <= 1).

    Input is renormalised; non-finite or all-zero input gives 0.
    """
    p = np.asarray(probabilities, dtype=np.float64).ravel()
    n = p.size
    if n <= 1 or not np.isfinite(p).all():
        return 0.0
    p = np.maximum(p, 0.0)
    total = float(p.sum())
    if total <= 0.0:
        return 0.0
    p = p[p > 0.0] / total
    entropy = float(-(p * np.log(p)).sum() / np.log(n))
    return min(1.0, max(0.0, entropy))  # uniform input may round to 1 + 2e-16
