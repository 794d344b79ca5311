"""Canaries: deliberately broken curricula and wrappers, one per bug class the gate guards.

Each is plugged into its scenario suite the way a user's own implementation would be
(`--curriculum=harness.faults:<factory>` or `--curriculum-env=harness.faults:<Class>`), and a
meta-test asserts that the suite fails on it. A suite that passes on its canary proves nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from curriculum import Curriculum, CurriculumConfig
from curriculum.algorithms import LearningProgressAlgorithm

__all__ = ["CANARIES", "make_noise_rewarding_lp"]


class _NoiseRewardingLP(LearningProgressAlgorithm):
    """Bug: learning progress is the spread of recent scores, so noise looks like progress."""

    def scores(self) -> np.ndarray:
        lp = np.abs(self._fast - self._slow) + np.sqrt(np.maximum(self._var, 0.0))
        lp[self.tracker.completions < self.config.min_samples_for_lp] = 0.0
        return lp


def _with_algorithm(curriculum: Curriculum, algorithm_class: type) -> Curriculum:
    old = curriculum._algorithm
    new = algorithm_class(old.config, old.capacity, old.generator)
    new.bind(curriculum.tracker)
    curriculum._algorithm = new
    curriculum._refresh()
    return curriculum


def make_noise_rewarding_lp(config: CurriculumConfig) -> Curriculum:
    """Canary of scenario 1 (impossible tasks): LP that rewards noise."""
    return _with_algorithm(Curriculum(config), _NoiseRewardingLP)


#: scenario module -> (plug-in option, canary spec)
CANARIES: dict[str, tuple[str, str]] = {
    "test_impossible_tasks": ("--curriculum", "harness.faults:make_noise_rewarding_lp"),
}


def describe() -> dict[str, Any]:
    """The canary table, for docs and the CLI."""
    return {module: {"option": option, "canary": spec} for module, (option, spec) in CANARIES.items()}
