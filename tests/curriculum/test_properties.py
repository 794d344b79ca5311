"""Hypothesis stateful tests: any sequence of get/update calls keeps the curriculum consistent.

A simple model runs beside the curriculum (which episodes are running, how many updates were
made and which of them should count) and invariants are checked after every step. Broken
curricula (canaries) at the end prove the machine can fail.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, \
    run_state_machine_as_test
from helpers import mixed_generator

from curriculum import (
    Curriculum,
    CurriculumConfig,
    LearningProgressConfig,
    SingleTaskGenerator,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
)

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # numpy overflow / NaN is a bug here

SETTINGS = settings(max_examples=60, stateful_step_count=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
SCORES = st.floats(0.0, 1.0, allow_nan=False)


def _config(algorithm: str, n: int, refresh: int, min_presentations: int, percentile: float, seed: int,
            min_episodes: int, memory: int = 4096) -> CurriculumConfig:
    common = {"num_active_tasks": n, "refresh_interval": refresh, "min_presentations": min_presentations,
              "eviction_percentile": percentile, "seed": seed}
    if algorithm == "staged":
        stages = [Stage(f"s{i}", SingleTaskGenerator({"stage": i}, label=f"s{i}")) for i in range(3)]
        staged = StagedProgressionConfig(stages=stages, advancement_threshold=0.5, min_episodes=min_episodes,
                                         window=min_episodes, regression_threshold=0.2, previous_stage_mix=0.3)
        return CurriculumConfig(algorithm=staged, **common)
    algo = LearningProgressConfig(min_samples_for_lp=2, config_memory=memory) if algorithm == "learning_progress" \
        else UniformConfig()
    return CurriculumConfig(task_generator=mixed_generator(), algorithm=algo, **common)


def _assert_distribution(p: np.ndarray, n: int) -> None:
    assert p.shape == (n,)
    assert np.isfinite(p).all() and (p >= 0).all(), p
    assert abs(p.sum() - 1.0) < 1e-9, p


class CurriculumMachine(RuleBasedStateMachine):
    """Drives one curriculum with interleaved episodes; `curriculum_class` is swapped by canaries."""

    curriculum_class: type[Curriculum] = Curriculum

    @initialize(
        algorithm=st.sampled_from(["learning_progress", "uniform", "staged"]),
        n=st.integers(1, 16),
        refresh=st.integers(1, 8),
        min_presentations=st.integers(1, 5),
        percentile=st.sampled_from([0.0, 25.0, 50.0, 100.0]),
        seed=st.integers(0, 2**32),
        min_episodes=st.integers(1, 5),
        # no memory, one entry (every configuration collides), a few, and the default (its arrays
        # dominate a checkpoint: the round trips of small memories are fast)
        memory=st.sampled_from([0, 1, 7, 64, 4096]),
    )
    def build(self, algorithm, n, refresh, min_presentations, percentile, seed, min_episodes, memory) -> None:
        self.config = _config(algorithm, n, refresh, min_presentations, percentile, seed, min_episodes, memory)
        self.curriculum = self.curriculum_class(self.config)
        self.running: list[int] = []  # task ids of episodes handed out and not yet completed
        self.updates = self.accepted = self.rejected = 0

    def teardown(self) -> None:
        if hasattr(self, "curriculum"):
            self.curriculum.close()

    def _live(self, task_id: int) -> bool:
        return self.curriculum.tracker.task_id_at(task_id % self.config.num_active_tasks) == task_id

    def _complete(self, task_id: int, score: float) -> None:
        expected = self._live(task_id)  # counts only if its task is still in the pool
        result = self.curriculum.update_task_performance(task_id, score)
        assert result is expected, (task_id, result)
        self.updates += 1
        self.accepted += result
        self.rejected += not result

    @rule()
    def start_episode(self) -> None:
        task = self.curriculum.get_task()
        assert self._live(task.task_id), "handed out a task that is not in the pool"
        self.running.append(task.task_id)

    @precondition(lambda self: self.running)
    @rule(pick=st.integers(0, 1000), score=SCORES)
    def finish_episode(self, pick: int, score: float) -> None:
        """Finish any running episode, possibly one whose task was evicted meanwhile (late)."""
        self._complete(self.running.pop(pick % len(self.running)), score)

    @rule(score=SCORES, repeat=st.integers(1, 20))
    def run_short_episodes(self, score: float, repeat: int) -> None:
        for _ in range(repeat):
            self._complete(self.curriculum.get_task().task_id, score)

    @rule()
    def checkpoint_round_trips_exactly(self) -> None:
        state = self.curriculum.get_state()
        fresh = self.curriculum_class(self.config)
        fresh.load_state(json.loads(json.dumps(state)))
        assert fresh.get_state() == state
        assert fresh.get_task().task_id == self._peek_next_task_id()
        _assert_distribution(fresh.sampling_probabilities(), self.config.num_active_tasks)  # it may have refreshed
        fresh.close()

    def _peek_next_task_id(self) -> int:
        """The next task the curriculum would hand out, without disturbing it."""
        twin = self.curriculum_class(self.config)
        twin.load_state(self.curriculum.get_state())
        task_id = twin.get_task().task_id
        twin.close()
        return task_id

    @invariant()
    def probabilities_are_a_distribution(self) -> None:
        _assert_distribution(self.curriculum.sampling_probabilities(), self.config.num_active_tasks)

    @invariant()
    def every_update_is_counted_once(self) -> None:
        stats = self.curriculum.stats()
        assert stats["total_completions"] + stats["late_completions"] == self.updates
        assert (stats["total_completions"], stats["late_completions"]) == (self.accepted, self.rejected)
        assert int(self.curriculum.tracker.completions.sum()) <= stats["total_completions"]

    @invariant()
    def pool_is_full_and_ids_map_to_their_slots(self) -> None:
        n = self.config.num_active_tasks
        tasks = self.curriculum.active_tasks()
        assert len(tasks) == n
        ids = self.curriculum.tracker.task_ids
        assert ids.shape == (n,) and (ids >= 0).all() and (ids % n == np.arange(n)).all()
        assert [t.slot for t in tasks] == list(range(n)) and [t.task_id for t in tasks] == ids.tolist()
        stats = self.curriculum.stats()
        assert 0.0 <= stats["sampling_entropy"] <= 1.0 and 0.0 <= stats["pool_occupancy_gini"] <= 1.0


TestCurriculumMachine = CurriculumMachine.TestCase
TestCurriculumMachine.settings = SETTINGS


# ---- canaries: the machine must fail on each of these --------------------------------------
class _CreditsLateCompletionsToTheOccupant(Curriculum):
    """Bug: a completion is credited to whatever task now holds the slot."""

    def update_task_performance(self, task_id: int, score: float) -> bool:
        return super().update_task_performance(self.tracker.task_id_at(task_id % self.num_active_tasks), score)


class _ForgetsPendingDraws(Curriculum):
    """Bug: a restored curriculum redraws instead of continuing the saved batch."""

    def load_state(self, state) -> None:
        super().load_state(state)
        self._refresh()


class _DropsLateCompletionsUncounted(Curriculum):
    """Bug: late completions are dropped silently instead of counted."""

    def update_task_performance(self, task_id: int, score: float) -> bool:
        if self.tracker.task_id_at(task_id % self.num_active_tasks) != task_id:
            return False
        return super().update_task_performance(task_id, score)


@pytest.mark.parametrize("broken", [_CreditsLateCompletionsToTheOccupant, _ForgetsPendingDraws, _DropsLateCompletionsUncounted],
                         ids=lambda c: c.__name__.strip("_"))
def test_the_machine_catches_a_broken_curriculum(broken: type[Curriculum]) -> None:
    machine = type(f"{broken.__name__}Machine", (CurriculumMachine,), {"curriculum_class": broken})
    # generous: a late completion needs an eviction first, which the learning-progress pool makes only
    # when a task is stagnant and another configuration is worth admitting
    canary_settings = settings(SETTINGS, max_examples=1000, phases=[Phase.generate], report_multiple_bugs=False,
                               database=None, derandomize=True)
    with pytest.raises(AssertionError):
        run_state_machine_as_test(machine, settings=canary_settings)
