"""Sampling algorithms behind one interface, and the factory that picks one from a config."""

from __future__ import annotations

from curriculum.algorithms.base import POOL_REFILL, POOL_UNCHANGED, CurriculumAlgorithm
from curriculum.algorithms.learning_progress import LearningProgressAlgorithm
from curriculum.algorithms.staged import StagedProgressionAlgorithm
from curriculum.algorithms.uniform import UniformAlgorithm
from curriculum.config import (
    CurriculumConfig,
    LearningProgressConfig,
    StagedProgressionConfig,
    UniformConfig,
)
from curriculum.errors import CurriculumConfigError

__all__ = [
    "CurriculumAlgorithm",
    "UniformAlgorithm",
    "LearningProgressAlgorithm",
    "StagedProgressionAlgorithm",
    "make_algorithm",
    "POOL_REFILL",
    "POOL_UNCHANGED",
]


def make_algorithm(config: CurriculumConfig) -> CurriculumAlgorithm:
    """The algorithm a curriculum config asks for."""
    algo = config.algorithm
    n = config.num_active_tasks
    algorithm: CurriculumAlgorithm
    if isinstance(algo, LearningProgressConfig):
        algorithm = LearningProgressAlgorithm(algo, n, config.task_generator)
    elif isinstance(algo, StagedProgressionConfig):
        algorithm = StagedProgressionAlgorithm(algo, n)
    elif isinstance(algo, UniformConfig):
        algorithm = UniformAlgorithm(algo, n, config.task_generator)
    else:
        raise CurriculumConfigError(
            "Expected `algorithm` to be UniformConfig, LearningProgressConfig or StagedProgressionConfig, "
            f"received {type(algo).__name__}"
        )
    algorithm.score_range = tuple(config.score_range)
    return algorithm
