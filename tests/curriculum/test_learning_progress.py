"""Learning progress: rising (or falling) scores earn LP, flat and pure-noise scores do not.

Students here are score curves per pool slot, fed through the public API with eviction off,
so each slot keeps one task for the whole run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from curriculum import Curriculum, CurriculumConfig, LearningProgressConfig, SingleTaskGenerator

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # numpy overflow / NaN is a bug here

ROUNDS = 300
SEEDS = range(5)
Curve = Callable[[int, np.random.Generator], float]


def rising(k: int, rng: np.random.Generator) -> float:
    return float(np.clip(k / ROUNDS + rng.normal(0.0, 0.05), 0.0, 1.0))


def falling(k: int, rng: np.random.Generator) -> float:
    return float(np.clip(1.0 - k / ROUNDS + rng.normal(0.0, 0.05), 0.0, 1.0))


def constant_zero(k: int, rng: np.random.Generator) -> float:
    return 0.0


def noise(k: int, rng: np.random.Generator) -> float:
    return float(np.clip(0.5 + rng.normal(0.0, 0.15), 0.0, 1.0))


def _run(curves: list[Curve], seed: int, *, algorithm: LearningProgressConfig | None = None):
    """Every round, one completion per slot. Returns (curriculum, LP per round, probabilities per round)."""
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}),
                              algorithm=algorithm or LearningProgressConfig(), num_active_tasks=len(curves),
                              seed=seed, eviction_percentile=0.0, refresh_interval=len(curves))
    curriculum = Curriculum(config)
    rng = np.random.default_rng(seed)
    lp, probabilities = [], []
    for k in range(ROUNDS):
        for slot, curve in enumerate(curves):
            assert curriculum.update_task_performance(slot, curve(k, rng)) is True
        lp.append(curriculum.task_scores())
        probabilities.append(curriculum.sampling_probabilities())  # refreshed after each round
    return curriculum, np.array(lp), np.array(probabilities)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_learning_task_outranks_a_flat_and_a_noisy_one(seed: int) -> None:
    _, lp, probabilities = _run([rising, constant_zero, noise], seed)
    settled = lp[ROUNDS // 3:]  # once the slow average has had time to lag behind
    learning, flat, noisy = settled.mean(axis=0)
    assert flat == 0.0
    assert learning > 0.05
    assert learning > 5 * noisy
    assert (settled[:, 0] > settled[:, 2]).mean() > 0.9
    final = probabilities[-1]
    assert final[0] > 0.6 and final[0] > 3 * max(final[1], final[2])


@pytest.mark.parametrize("seed", SEEDS)
def test_forgetting_is_progress_too(seed: int) -> None:
    _, lp, probabilities = _run([falling, constant_zero, noise], seed)
    forgetting, flat, noisy = lp[ROUNDS // 3:].mean(axis=0)
    assert forgetting > 0.05 and flat == 0.0 and forgetting > 5 * noisy
    assert probabilities[-1][0] > 0.6


def test_progress_is_bidirectional_within_one_task() -> None:
    half = ROUNDS // 2

    def up_then_down(k: int, rng: np.random.Generator) -> float:
        return float(np.clip((k if k < half else ROUNDS - k) / half + rng.normal(0.0, 0.03), 0.0, 1.0))

    _, lp, _ = _run([up_then_down, constant_zero], seed=0)
    assert lp[half - 10, 0] > 0.05  # learning
    assert lp[-1, 0] > 0.05  # forgetting
    assert lp[:, 1].max() == 0.0


@pytest.mark.parametrize("seed", SEEDS)
def test_sampling_probabilities_are_a_distribution_with_an_exploration_floor(seed: int) -> None:
    algorithm = LearningProgressConfig(exploration=0.2)
    _, _, probabilities = _run([rising, noise, constant_zero, falling], seed, algorithm=algorithm)
    assert np.isfinite(probabilities).all()
    assert np.allclose(probabilities.sum(axis=1), 1.0)
    assert (probabilities >= 0.2 / 4 - 1e-12).all()


def test_tasks_below_min_samples_have_no_lp_and_are_not_starved() -> None:
    algorithm = LearningProgressConfig(min_samples_for_lp=5)
    config = CurriculumConfig(task_generator=SingleTaskGenerator({}), algorithm=algorithm, num_active_tasks=3,
                              eviction_percentile=0.0, refresh_interval=1)
    curriculum = Curriculum(config)
    assert np.allclose(curriculum.sampling_probabilities(), 1 / 3)  # nothing known yet: uniform
    for k in range(40):  # slot 0 learns; slots 1 and 2 have only 4 completions each
        curriculum.update_task_performance(0, k / 40)
    for slot in (1, 2):
        for score in (0.0, 0.3, 0.6, 0.9):
            curriculum.update_task_performance(slot, score)
    lp = curriculum.task_scores()
    assert lp[0] > 0 and lp[1] == lp[2] == 0.0  # a steep rise over 4 episodes is not trusted yet
    probabilities = curriculum.sampling_probabilities()
    assert probabilities[1] == probabilities[2] > 0.05


def test_tiny_scores_still_give_a_probability_distribution() -> None:
    """Subnormal scores give subnormal LP; normalising by it must not overflow to inf (inf * 0 = NaN)."""
    config = CurriculumConfig(task_generator=SingleTaskGenerator({}), algorithm=LearningProgressConfig(
        min_samples_for_lp=2), num_active_tasks=2, eviction_percentile=0.0, refresh_interval=1)
    curriculum = Curriculum(config)
    for score in (0.0, 5e-324, 1e-320, 0.0, 2e-321, 3e-322):
        curriculum.update_task_performance(0, score)
    for score in (0.5, 0.5):
        curriculum.update_task_performance(1, score)
    assert 0.0 < curriculum.task_scores()[0] < 1e-300
    probabilities = curriculum.sampling_probabilities()
    assert np.isfinite(probabilities).all() and probabilities.sum() == pytest.approx(1.0)
    assert probabilities[0] > probabilities[1]
