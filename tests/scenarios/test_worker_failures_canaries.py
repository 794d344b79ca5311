"""The worker-failure suite fails on a vector that never notices a dead or frozen worker."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from curriculum import Curriculum
from curriculum import vector as vector_module
from curriculum.vector import SharedCurriculumVecEnv

# imported by its module name: workers a fork server starts import the suite's env creator by it
from scenarios import test_worker_failures as suite


def _factory(config: Any, *, shared_memory: bool = False) -> Curriculum:
    return Curriculum(config, shared_memory=shared_memory)


def _run(fault: str, then: str = "step", layout: str = "sync", tracking: str = "shared") -> None:
    suite.test_a_dead_or_frozen_worker_is_named_never_waited_on(_factory, lambda ok, why: None, 0, fault, then,
                                                                 layout, tracking)


@pytest.mark.parametrize(("fault", "then", "layout", "tracking"), suite.CASES)
def test_the_suite_passes_the_built_in_vector(fault: str, then: str, layout: str, tracking: str) -> None:
    _run(fault, then, layout, tracking)


@pytest.mark.parametrize(("fault", "then", "blind", "expected"), [
    ("killed", "step", "_check_workers_alive", "still waiting"),
    ("stopped", "step", "_fail_stuck", "still waiting"),
    ("killed", "reset", "_check_workers_alive", "then reset\\(\\): the vecenv was still waiting"),
])
def test_the_suite_fails_on_a_vector_blind_to_failures(fault: str, then: str, blind: str, expected: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the check disabled the steps hang; the suite reports it at its deadline. The check
    comes back afterwards, so the abandoned step thread ends instead of spinning on."""
    original = getattr(SharedCurriculumVecEnv, blind)
    blinded = threading.Event()
    blinded.set()

    def check(self: Any, *args: Any) -> None:
        if not blinded.is_set():
            original(self, *args)

    monkeypatch.setattr(SharedCurriculumVecEnv, blind, check)
    monkeypatch.setattr(suite, "LIMITS", dataclasses.replace(suite.LIMITS, deadline=3.0))
    try:
        with pytest.raises(AssertionError, match=expected):
            _run(fault, then)
    finally:
        blinded.clear()


def test_the_suite_fails_on_a_vector_that_counts_a_batch_it_cannot_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A vector that takes any two arrived workers as a ready batch, while pufferlib's loop reads
    the pipe of every done worker it passes first: a worker stopped with its infos flagged and
    not sent blocks that read, and the suite reports the hang at its deadline (the suite's
    clean-up kills the worker, which ends the read)."""

    def any_two_arrived(vecenv: Any) -> bool:
        arrived = [w for w in vecenv.waiting_workers if vector_module._arrived(vecenv, w)]
        return len(vecenv.ready_workers) + len(arrived) >= vecenv.workers_per_batch

    monkeypatch.setattr(vector_module, "_batch_ready", any_two_arrived)
    monkeypatch.setattr(suite, "LIMITS", dataclasses.replace(suite.LIMITS, deadline=3.0))
    with pytest.raises(AssertionError, match="stopped_sending, then step\\(\\): the vecenv was still waiting"):
        _run("stopped_sending", "step", "async-any")
