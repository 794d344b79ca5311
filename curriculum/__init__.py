"""A fast, correct curriculum-learning library for RL.

`Curriculum` keeps a pool of tasks, hands one out per episode (`get_task`) and learns from
episode scores (`update_task_performance`); algorithms choose what to sample; the tracker
keeps statistics in local or shared memory.
"""

from __future__ import annotations

from curriculum.config import (
    CurriculumConfig,
    LearningProgressConfig,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
)
from curriculum.curriculum import Curriculum
from curriculum.errors import (
    CurriculumConfigError,
    CurriculumError,
    CurriculumStateError,
    InvalidScoreError,
    LockTimeoutError,
    UnknownTaskError,
    WorkerCopyError,
)
from curriculum.generators import (
    BucketedTaskGenerator,
    SingleTaskGenerator,
    TaskGenerator,
    ValueRange,
    WeightedTaskSetGenerator,
)
from curriculum.memory import LocalMemoryBackend, SharedMemoryBackend, TaskMemoryBackend
from curriculum.metrics import gini_coefficient, normalized_entropy
from curriculum.task import CurriculumTask
from curriculum.tracker import TaskTracker

__all__ = [
    "Curriculum",
    "CurriculumConfig",
    "CurriculumTask",
    "UniformConfig",
    "LearningProgressConfig",
    "StagedProgressionConfig",
    "Stage",
    "TaskGenerator",
    "SingleTaskGenerator",
    "WeightedTaskSetGenerator",
    "BucketedTaskGenerator",
    "ValueRange",
    "TaskTracker",
    "TaskMemoryBackend",
    "LocalMemoryBackend",
    "SharedMemoryBackend",
    "gini_coefficient",
    "normalized_entropy",
    "CurriculumError",
    "CurriculumConfigError",
    "InvalidScoreError",
    "UnknownTaskError",
    "CurriculumStateError",
    "LockTimeoutError",
    "WorkerCopyError",
]
