"""A fast, correct curriculum-learning library for RL.

`Curriculum` keeps a pool of tasks, hands one out per episode (`get_task`) and learns from
episode scores (`update_task_performance`); algorithms choose what to sample; the tracker
keeps statistics in local or shared memory. `CurriculumEnv` / `GymCurriculumEnv` run one task
per episode of a pufferlib or gymnasium env, `make_curriculum_vecenv` runs many workers over
one curriculum, and `curriculum.stats` turns the info dicts into epoch metrics.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from curriculum.config import (
    CurriculumConfig,
    LearningProgressConfig,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
)
from curriculum.curriculum import Curriculum
from curriculum.errors import (
    CurriculumClosedError,
    CurriculumConfigError,
    CurriculumError,
    CurriculumStateError,
    InvalidScoreError,
    LockTimeoutError,
    SharedTrackerError,
    AgentCountError,
    EnvContractError,
    EpisodeNotStartedError,
    UnknownTaskError,
    WorkerCopyError,
    WorkerProcessError,
    CurriculumServiceError,
    MissingExtraError,
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
from curriculum.stats import SUMMED_STATS, accumulate_rollout_stats, process_training_stats
from curriculum.task import CurriculumTask
from curriculum.tracker import TaskTracker

if TYPE_CHECKING:
    from curriculum.env import CompletionRecorder, CurriculumEnv
    from curriculum.gym_env import GymCurriculumEnv
    from curriculum.vector import (
        CentralizedCurriculumVecEnv,
        CurriculumVecEnv,
        SharedCurriculumVecEnv,
        StageBroadcast,
        make_curriculum_vecenv,
    )

# The env wrappers import pufferlib, which imports torch (over a second): they load on first
# use, so `import curriculum` stays cheap for code that only needs the curriculum itself.
_LAZY_EXPORTS = {
    "CurriculumEnv": "curriculum.env",
    "CompletionRecorder": "curriculum.env",
    "GymCurriculumEnv": "curriculum.gym_env",
    "CurriculumVecEnv": "curriculum.vector",
    "SharedCurriculumVecEnv": "curriculum.vector",
    "CentralizedCurriculumVecEnv": "curriculum.vector",
    "StageBroadcast": "curriculum.vector",
    "make_curriculum_vecenv": "curriculum.vector",
}


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'curriculum' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

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
    "SharedTrackerError",
    "WorkerCopyError",
    "CurriculumClosedError",
    "EnvContractError",
    "AgentCountError",
    "EpisodeNotStartedError",
    "WorkerProcessError",
    "CurriculumServiceError",
    "MissingExtraError",
    "SUMMED_STATS",
    "accumulate_rollout_stats",
    "process_training_stats",
    "CurriculumEnv",
    "CompletionRecorder",
    "GymCurriculumEnv",
    "CurriculumVecEnv",
    "SharedCurriculumVecEnv",
    "CentralizedCurriculumVecEnv",
    "StageBroadcast",
    "make_curriculum_vecenv",
]
