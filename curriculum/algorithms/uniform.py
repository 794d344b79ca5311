"""Discrete random: every active task equally likely."""

from __future__ import annotations

import numpy as np

from curriculum.algorithms.base import CurriculumAlgorithm
from curriculum.config import UniformConfig
from curriculum.generators import TaskGenerator

__all__ = ["UniformAlgorithm"]


class UniformAlgorithm(CurriculumAlgorithm):
    """Uniform over the pool; never evicts."""

    def __init__(self, config: UniformConfig, capacity: int, generator: TaskGenerator) -> None:
        super().__init__(capacity)
        self.config = config
        self.generator = generator
        self._uniform = np.full(capacity, 1.0 / capacity)

    def generator_for_slot(self, slot: int) -> TaskGenerator:
        return self.generator

    def scores(self) -> np.ndarray:
        return self.mean_scores()

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        return self._uniform
