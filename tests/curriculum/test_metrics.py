"""Gini coefficient and normalised entropy: the edge cases dashboards rely on."""

from __future__ import annotations

import numpy as np
import pytest

from curriculum import gini_coefficient, normalized_entropy


@pytest.mark.parametrize("values", [[], [0.0], [0, 0, 0], [1.0, float("nan")], [float("inf"), 1.0], [-1.0, -2.0]],
                         ids=["empty", "one-zero", "zeros", "nan", "inf", "all-negative"])
def test_gini_of_degenerate_input_is_zero(values: list[float]) -> None:
    assert gini_coefficient(values) == 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 64, 1000])
def test_gini_of_a_point_mass_is_n_minus_1_over_n(n: int) -> None:
    values = np.zeros(n)
    values[n // 2] = 3.5
    assert gini_coefficient(values) == pytest.approx((n - 1) / n, abs=1e-12)


@pytest.mark.parametrize("value", [0.1, 0.3, 1 / 3, 0.7, 2.2, 1e-9, 123456.789])
@pytest.mark.parametrize("n", [2, 5, 7, 64, 999])
def test_gini_of_equal_values_is_exactly_zero(value: float, n: int) -> None:
    assert gini_coefficient([value] * n) == 0.0


def test_gini_matches_the_mean_absolute_difference_definition() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.exponential(size=int(rng.integers(2, 40)))
        expected = np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size**2 * x.mean())
        assert gini_coefficient(x) == pytest.approx(expected, rel=1e-12)
    assert gini_coefficient([1, 2, 3, 4]) == pytest.approx(0.25)


def test_gini_clips_negative_values_and_stays_in_unit_interval() -> None:
    assert gini_coefficient([-5.0, 0.0, 2.0]) == gini_coefficient([0.0, 0.0, 2.0])
    rng = np.random.default_rng(1)
    for _ in range(200):
        g = gini_coefficient(rng.normal(size=int(rng.integers(1, 30))))
        assert 0.0 <= g < 1.0


@pytest.mark.parametrize("n", [2, 3, 5, 7, 10, 64, 100, 1000])
def test_entropy_of_uniform_is_one_and_never_above(n: int) -> None:
    entropy = normalized_entropy(np.full(n, 1.0 / n))
    assert entropy == pytest.approx(1.0, abs=1e-12)
    assert entropy <= 1.0
    assert normalized_entropy(np.full(n, 7.0)) == pytest.approx(1.0, abs=1e-12)  # renormalised


@pytest.mark.parametrize("n", [1, 2, 5, 100])
def test_entropy_of_a_point_mass_is_zero(n: int) -> None:
    p = np.zeros(n)
    p[-1] = 1.0
    assert normalized_entropy(p) == 0.0


@pytest.mark.parametrize("values", [[], [1.0], [0.0, 0.0], [0.5, float("nan")], [float("inf"), 1.0]],
                         ids=["empty", "single", "zeros", "nan", "inf"])
def test_entropy_of_degenerate_input_is_zero(values: list[float]) -> None:
    assert normalized_entropy(values) == 0.0


def test_entropy_matches_shannon_over_log_n_and_stays_in_unit_interval() -> None:
    assert normalized_entropy([0.5, 0.5, 0.0, 0.0]) == pytest.approx(0.5)
    rng = np.random.default_rng(2)
    for _ in range(200):
        p = rng.dirichlet(np.full(int(rng.integers(2, 30)), 0.3))
        nonzero = p[p > 0]
        assert normalized_entropy(p) == pytest.approx(-(nonzero * np.log(nonzero)).sum() / np.log(p.size), abs=1e-12)
        assert 0.0 <= normalized_entropy(p) <= 1.0
