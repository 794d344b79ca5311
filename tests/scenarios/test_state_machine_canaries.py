"""The curriculum state machine fails on deliberately broken curricula (proof that it can fail).

Each broken curriculum is a subclass of the built-in one with one realistic bug; the machine
(`scenarios/test_curriculum_state_machine.py`, the oracle watching every step) must find it
within `BROKEN_RUN_SETTINGS`' examples.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from curriculum import Curriculum, InvalidScoreError

_PATH = Path(__file__).resolve().parents[2] / "scenarios" / "test_curriculum_state_machine.py"
_SPEC = importlib.util.spec_from_file_location("curriculum_state_machine_suite", _PATH)
suite = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = suite  # (as an import does: a dataclass of the suite looks its module up)
_SPEC.loader.exec_module(suite)
CurriculumMachine, CurriculumFactory, ERROR_BASES = suite.CurriculumMachine, suite.CurriculumFactory, suite.ERROR_BASES
MACHINE_SETTINGS = suite.MACHINE_SETTINGS


class _LateCreditedToNewTask(Curriculum):
    """Bug: a completion of an evicted task is credited to the task now in its slot."""

    def update_task_performance(self, task_id: int, score: float) -> bool:
        current = self._task_ids.item(task_id % self._capacity) if isinstance(task_id, int) and task_id >= 0 else None
        if current is not None and current > task_id:
            task_id = current
        return super().update_task_performance(task_id, score)


class _LoadStateIgnoresRng(Curriculum):
    """Bug: `load_state` restores everything but the sampler's random stream."""

    def load_state(self, state: dict[str, Any]) -> None:
        rng = self._rng
        super().load_state(state)
        self._rng = rng


class _UnknownIdCountedLate(Curriculum):
    """Bug: an id from the future is counted as a late completion before it is refused."""

    def update_task_performance(self, task_id: int, score: float) -> bool:
        if isinstance(task_id, int) and task_id > max(self._task_ids.tolist()):
            self._tracker.record_late()
        return super().update_task_performance(task_id, score)


class _NanScoreAccepted(Curriculum):
    """Bug: a NaN score is recorded as 0 instead of being refused."""

    def update_task_performance(self, task_id: int, score: float) -> bool:
        return super().update_task_performance(task_id, 0.0 if score != score else score)


class _BoolScoreAccepted(Curriculum):
    """Bug: a success flag passed for a score is recorded as 1.0 or 0.0 (bool is an int)."""

    def update_task_performance(self, task_id: int, score: float) -> bool:
        return super().update_task_performance(task_id, float(score) if isinstance(score, (bool, np.bool_)) else score)


class _UnnormalisedProbabilities(Curriculum):
    """Bug: the sampling distribution is reported (and drawn from) before normalisation."""

    def _refresh(self) -> None:
        super()._refresh()
        self._probabilities = self._probabilities * self._capacity


class _EvictionReusesIds(Curriculum):
    """Bug: a new task takes the evicted task's id, so the two can no longer be told apart."""

    def _evict(self, slot: int, task_id: int) -> None:
        super()._evict(slot, task_id)
        self._tracker.task_ids[slot] = task_id


class _BroadcastStageKeepsWindow(Curriculum):
    """Bug: a stage adopted from a broadcast keeps the previous stage's episodes and window."""

    def apply_sync_state(self, sync: Any) -> bool:
        algorithm = self._algorithm
        counters, window, window_sum = algorithm._counters, algorithm._window, algorithm._window_sum
        kept = counters.copy(), window.copy(), window_sum.copy()
        changed = super().apply_sync_state(sync)
        adopted = counters[:2].copy()  # (stage, stage_changes): the broadcast's
        counters[:], window[:], window_sum[:] = kept
        counters[:2] = adopted
        return changed


BROKEN_CURRICULA: dict[str, CurriculumFactory] = {
    "late completion credited to the slot's new task": _LateCreditedToNewTask,
    "load_state ignores the random stream": _LoadStateIgnoresRng,
    "unknown task id changes the counters": _UnknownIdCountedLate,
    "NaN score accepted": _NanScoreAccepted,
    "bool score accepted": _BoolScoreAccepted,
    "sampling probabilities not normalised": _UnnormalisedProbabilities,
    "evicted task id reused": _EvictionReusesIds,
    "broadcast stage keeps the previous stage's window": _BroadcastStageKeepsWindow,
}

# derandomized: each canary is caught after the same examples every run (a random search took
# from a fraction of a second to 20 s to reach the bug, and the gate has a time budget)
BROKEN_RUN_SETTINGS = settings(
    MACHINE_SETTINGS, max_examples=200, database=None, phases=[Phase.explicit, Phase.generate],
    report_multiple_bugs=False, derandomize=True,
)


@pytest.mark.parametrize("bug", sorted(BROKEN_CURRICULA))
def test_machine_fails_on_broken_curriculum(bug: str) -> None:
    broken = BROKEN_CURRICULA[bug]
    with pytest.raises(AssertionError):
        run_state_machine_as_test(lambda: CurriculumMachine(broken), settings=BROKEN_RUN_SETTINGS)


class _ScoreRefusal(InvalidScoreError.__mro__[1], TypeError):  # a CurriculumError, not a ValueError
    """An InvalidScoreError declared on the wrong builtin base (`TypeError`)."""


class _ScoreRefusedAsTypeError(Curriculum):
    def update_task_performance(self, task_id: int, score: float) -> bool:
        try:
            return super().update_task_performance(task_id, score)
        except InvalidScoreError as error:
            raise _ScoreRefusal(str(error)) from None


def test_machine_fails_when_a_refusal_is_not_its_documented_builtin(monkeypatch) -> None:
    """Bug: the library's InvalidScoreError derives from TypeError, so `except ValueError` misses it."""
    monkeypatch.setitem(ERROR_BASES, _ScoreRefusal, ValueError)
    monkeypatch.setattr(CurriculumMachine, "bad_score_error", _ScoreRefusal)
    with pytest.raises(AssertionError, match="which is not a ValueError"):
        run_state_machine_as_test(lambda: CurriculumMachine(_ScoreRefusedAsTypeError), settings=BROKEN_RUN_SETTINGS)
