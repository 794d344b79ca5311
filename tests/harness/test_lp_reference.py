"""The documented-rules check of learning progress fails on rules the library could get wrong.

`scenarios/test_per_label_metrics.py` holds every completion and refresh of the built-in
learning progress to `harness.lp_reference`; each case here breaks one rule of the library in
place and runs that scenario, which must name the broken completion or refresh.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from curriculum import Curriculum
from curriculum.algorithms import learning_progress
from curriculum.algorithms.learning_progress import LearningProgressAlgorithm
from scenarios.test_per_label_metrics import \
    test_every_completion_and_refresh_follows_the_documented_rules as rules_check

_EVENTS = learning_progress.LP_COUNTERS.index("mastery_events")


def _stalled_left_to_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    frontier = LearningProgressAlgorithm._frontier
    monkeypatch.setattr(LearningProgressAlgorithm, "_frontier",
                        lambda self, stagnant: (frontier(self, stagnant)[0], np.zeros_like(stagnant)))


def _frontier_practice_kept_at_mastery(monkeypatch: pytest.MonkeyPatch) -> None:
    record = LearningProgressAlgorithm.record

    def kept(self, slot: int, score: float, completions: int) -> int:
        before, events = self._front.copy(), self._counters.item(_EVENTS)
        out = record(self, slot, score, completions)
        if self._counters.item(_EVENTS) != events:
            np.maximum(self._front, before, out=self._front)
        return out

    monkeypatch.setattr(LearningProgressAlgorithm, "record", kept)


def _retries_never_paid(monkeypatch: pytest.MonkeyPatch) -> None:
    record = LearningProgressAlgorithm.record

    def unpaid(self, slot: int, score: float, completions: int) -> int:
        before, events = self._retries.copy(), self._counters.item(_EVENTS)
        out = record(self, slot, score, completions)
        if self._counters.item(_EVENTS) == events:
            self._retries[:] = before
        return out

    monkeypatch.setattr(LearningProgressAlgorithm, "record", unpaid)


@pytest.mark.parametrize("plant", [_stalled_left_to_the_floor, _frontier_practice_kept_at_mastery, _retries_never_paid],
                         ids=lambda plant: plant.__name__.strip("_"))
def test_the_rules_check_names_a_broken_rule(monkeypatch: pytest.MonkeyPatch,
                                             plant: Callable[[pytest.MonkeyPatch], None]) -> None:
    plant(monkeypatch)
    with pytest.raises(AssertionError, match=r"seed 0: (a completion with score .* left a state the documented rules "
                                             r"do not give|the refresh after it samples slots)"):
        rules_check(curriculum_factory=Curriculum, require_capability=lambda present, why: None, scenario_seed=0,
                    settings="defaults")


def test_the_rules_check_passes_the_library() -> None:
    rules_check(curriculum_factory=Curriculum, require_capability=lambda present, why: None, scenario_seed=1,
                settings="settings")
