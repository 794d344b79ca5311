"""The interface every sampling algorithm implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from curriculum.generators import TaskGenerator

if TYPE_CHECKING:
    from curriculum.tracker import TaskTracker

__all__ = ["CurriculumAlgorithm", "POOL_UNCHANGED", "POOL_REFILL"]

POOL_UNCHANGED = 0
POOL_REFILL = 1


class CurriculumAlgorithm(ABC):
    """Scores the pool's tasks and turns scores into sampling probabilities.

    Per-task state lives in tracker arrays the algorithm declares in `extra_layout`, so it is
    shared whenever the tracker is. `record` runs under the tracker lock and must be O(1);
    `scores`/`probabilities` are vectorised over the pool and run once per refresh.
    """

    #: Whether low-scoring tasks may be evicted and replaced.
    evicts: ClassVar[bool] = False
    #: Integer arrays of `extra_layout` holding keys (fingerprints), not counts: a restored
    #: state may hold any non-negative int64 in them.
    key_arrays: ClassVar[frozenset[str]] = frozenset()
    #: Arrays of `extra_layout` written rarely (a memory of many entries): a shared tracker
    #: journals them only when written, after `tracker.lock.touch_globals()`.
    cold_arrays: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.score_range: tuple[float, float] = (0.0, 1.0)
        """The curriculum's `score_range` (`make_algorithm` sets it); `record` gets scores
        already normalised by it."""

    def mean_scores(self) -> np.ndarray:
        """Per slot: the mean score of its completions, normalised to [0, 1] like the scores
        `record` gets (0 for a slot without completions)."""
        tracker = self.tracker
        completions = tracker.completions
        low, high = self.score_range
        mean = tracker.score_sum / np.maximum(completions, 1)
        if low != 0.0 or high != 1.0:
            mean = np.where(completions > 0, (mean - low) / (high - low), 0.0)
        return mean

    def extra_layout(self) -> dict[str, tuple[str, int]]:
        """Arrays this algorithm keeps in the tracker backend."""
        return {}

    def bind(self, tracker: TaskTracker) -> None:
        """Keep views of the tracker arrays (called once, and again after attaching)."""
        self.tracker = tracker

    @abstractmethod
    def generator_for_slot(self, slot: int) -> TaskGenerator:
        """The generator a new task in `slot` comes from."""

    def reset_slot(self, slot: int) -> None:
        """Zero the algorithm's state of `slot` for a new task (under the lock)."""

    def replacement_task_id(self, slot: int, evicted_task_id: int) -> int:
        """Id of the task that takes `slot` after `evicted_task_id` was evicted (under the lock,
        after `reset_slot`): a later id of the same slot, `evicted_task_id + k * capacity` with
        k >= 1. The default admits the next one."""
        return evicted_task_id + self.capacity

    def eviction_candidates(self, eligible: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """Of the slots `eligible` for eviction (enough presentations), those the algorithm lets
        go, given the `scores` the shortlist ranks by; the shortlist is the lowest-scoring of
        them, at most `eviction_percentile`% of the eligible slots."""
        return eligible

    def record(self, slot: int, score: float, completions: int) -> int:
        """Update per-task state after a completion (under the lock); POOL_REFILL asks the
        curriculum to refill every slot (a stage change)."""
        return POOL_UNCHANGED

    @abstractmethod
    def scores(self) -> np.ndarray:
        """Per-slot score used for sampling and eviction (lock-free read)."""

    def score_at(self, slot: int) -> float:
        """`scores()[slot]` in O(1); used to confirm an eviction against fresh numbers."""
        return float(self.scores()[slot])

    @abstractmethod
    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        """Sampling probabilities over slots; finite, non-negative, summing to 1."""

    def stats(self) -> dict[str, Any]:
        """Algorithm-specific numbers for `Curriculum.stats()`."""
        return {}

    def check_arrays(self, arrays: dict[str, np.ndarray]) -> str | None:
        """Why saved arrays (finite, right shapes) cannot be this algorithm's state, or None."""
        return None
