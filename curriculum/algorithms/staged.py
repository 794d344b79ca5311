"""Staged progression: ordered stages, advance on a rolling mean, optional regression.

The pool holds tasks of the current stage (plus a `previous_stage_mix` share of slots from
the previous stage). A stage change refills the whole pool, so every task handed out after
it belongs to the new stage; completions of tasks from before the change arrive as late
completions and never count towards the new stage's window.

The window mean is a running sum, so a record is O(1). A running sum carries the rounding of
scores that have left the window: after a 0.739 came and went, a window of 1 and 0 summed to
0.99999999999999989 and did not advance at a threshold of 0.5. So the sum is recomputed
exactly (`math.fsum`) each time the window wraps, and before any decision whose mean lies
within `_NEAR_THRESHOLD` of a threshold: a stage moves on the window's scores, not on its
history.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from curriculum.algorithms.base import POOL_REFILL, POOL_UNCHANGED, CurriculumAlgorithm
from curriculum.config import StagedProgressionConfig
from curriculum.generators import TaskGenerator

__all__ = ["StagedProgressionAlgorithm", "STAGE_COUNTERS"]

#: int64 counters of the stage machine, in this order.
STAGE_COUNTERS = ("stage", "stage_changes", "stage_episodes", "window_count", "window_pos", "advancements",
                  "regressions")
_STAGE, _CHANGES, _EPISODES, _COUNT, _POS, _ADV, _REG = range(len(STAGE_COUNTERS))
_NEAR_THRESHOLD = 1e-9
"""A running window mean this close to a threshold is recomputed exactly before the decision
(the running sum's own error stays far below it: it is resynchronised every window)."""


class StagedProgressionAlgorithm(CurriculumAlgorithm):
    """Uniform within the pool; the pool follows the stage."""

    def __init__(self, config: StagedProgressionConfig, capacity: int) -> None:
        super().__init__(capacity)
        self.config = config
        self.stages = tuple(config.stages)
        self._last = len(self.stages) - 1
        # at least one slot always runs the current stage, or its window could never fill
        self._mixed_slots = min(int(round(config.previous_stage_mix * capacity)), capacity - 1)
        self._uniform = np.full(capacity, 1.0 / capacity)

    def extra_layout(self) -> dict[str, tuple[str, int]]:
        return {
            "stage_counters": ("int64", len(STAGE_COUNTERS)),
            "stage_window": ("float64", self.config.window),
            "stage_window_sum": ("float64", 1),
        }

    def bind(self, tracker: Any) -> None:
        super().bind(tracker)
        arrays = tracker.backend.arrays
        self._counters = arrays["stage_counters"]
        self._window = arrays["stage_window"]
        self._window_sum = arrays["stage_window_sum"]

    @property
    def stage(self) -> int:
        """Index of the current stage."""
        return self._counters.item(_STAGE)

    @property
    def stage_changes(self) -> int:
        """How many times the stage has changed (advancements plus regressions)."""
        return self._counters.item(_CHANGES)

    def stage_of_slot(self, slot: int, stage: int) -> int:
        """The stage whose tasks fill `slot` while the curriculum is at `stage`."""
        return stage - 1 if stage > 0 and slot < self._mixed_slots else stage

    def generator_for_slot(self, slot: int) -> TaskGenerator:
        return self.stages[self.stage_of_slot(slot, self.stage)].task_generator

    def record(self, slot: int, score: float, completions: int) -> int:
        c = self._counters
        stage = c.item(_STAGE)
        if self.stage_of_slot(slot, stage) != stage:
            return POOL_UNCHANGED
        episodes = c.item(_EPISODES) + 1
        c[_EPISODES] = episodes
        window = self.config.window
        pos = c.item(_POS)
        count = c.item(_COUNT)
        total = self._window_sum.item(0)
        if count == window:
            total -= self._window.item(pos)
        else:
            count += 1
        self._window[pos] = score
        total += score
        pos += 1
        if pos == window:  # a full window: start the next lap from its exact sum
            pos = 0
            total = math.fsum(self._window.tolist())
        self._window_sum[0] = total
        c[_POS] = pos
        c[_COUNT] = count
        if episodes < self.config.min_episodes:
            return POOL_UNCHANGED
        mean = total / count
        threshold = self.config.advancement_threshold
        regression = self.config.regression_threshold
        if abs(mean - threshold) <= _NEAR_THRESHOLD or (regression is not None
                                                        and abs(mean - regression) <= _NEAR_THRESHOLD):
            total = math.fsum(self._window[:count].tolist())
            self._window_sum[0] = total
            mean = total / count
        if stage < self._last and mean >= threshold:
            self._set_stage(stage + 1)
            c[_ADV] += 1
            return POOL_REFILL
        if regression is not None and stage > 0 and mean < regression:
            self._set_stage(stage - 1)
            c[_REG] += 1
            return POOL_REFILL
        return POOL_UNCHANGED

    def _set_stage(self, stage: int) -> None:
        c = self._counters
        c[_STAGE] = stage
        c[_CHANGES] += 1
        c[_EPISODES] = 0
        c[_COUNT] = 0
        c[_POS] = 0
        self._window_sum[0] = 0.0

    def apply_stage(self, stage: int, stage_changes: int) -> None:
        """Adopt a stage decided elsewhere (centralized tracking broadcasts it)."""
        self._set_stage(stage)
        self._counters[_CHANGES] = stage_changes

    def scores(self) -> np.ndarray:
        return self.mean_scores()

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        return self._uniform

    def check_arrays(self, arrays: dict[str, np.ndarray]) -> str | None:
        c = arrays["stage_counters"]
        window = self.config.window
        if not (0 <= c[_STAGE] <= self._last and (c >= 0).all() and c[_COUNT] <= window and c[_POS] < window):
            return (f"stage counters {dict(zip(STAGE_COUNTERS, c.tolist()))} are outside "
                    f"stage in [0, {self._last}], window_count in [0, {window}], window_pos in [0, {window})")
        return None

    def stats(self) -> dict[str, Any]:
        c = self._counters
        count = c.item(_COUNT)
        stage = c.item(_STAGE)
        return {
            "stage": stage,
            "stage_name": self.stages[stage].name,
            "stage_changes": c.item(_CHANGES),
            "stage_episodes": c.item(_EPISODES),
            "stage_window_mean": self._window_sum.item(0) / count if count else 0.0,
            "advancements": c.item(_ADV),
            "regressions": c.item(_REG),
        }
