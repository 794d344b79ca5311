"""Stateful property test: any sequence of hand-outs, completions, checkpoints and bad input
keeps a curriculum's books straight.

Bug class: accounting that drifts under interleavings no scenario replays (a late completion
credited to the slot's new task, a checkpoint that drops the sampler's random state, a bad
score or task id that changes something before it is refused, probabilities that stop
summing to 1). Hypothesis drives the curriculum under test (`curriculum_factory`, so
`--curriculum=module:factory` gates another implementation too) next to a simple model: the
updates made, the ones credited, the task ids handed out and the ids that have left the pool.

The curriculum is watched by the accounting oracle (`harness.oracle`) all along, so every
hand-out, update and `stats()` call of every sequence is also checked against its reference
(per-task numbers, eviction rules, the staged rule replayed, each task against its generator);
configs are drawn across their ranges (a staged `min_episodes` below or above its `window`,
a previous-stage mix), so a rule that holds only for the gate's usual settings is exposed.

Small pools, short refresh intervals and few minimum presentations make evictions, and so
late completions, happen within a few steps. The built-in curriculum is driven with learning
progress, uniform and staged-progression configs; a plug-in factory gets learning-progress
configs only, which is what the other scenarios hand it. Deliberately wrong variants of the
built-in curriculum prove that the machine catches each one
(`tests/scenarios/test_state_machine_canaries.py`).
"""

from __future__ import annotations

import json
import math
import pickle
import random
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from numbers import Number
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from curriculum import (
    BucketedTaskGenerator,
    Curriculum,
    CurriculumConfig,
    InvalidScoreError,
    LearningProgressConfig,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
    UnknownTaskError,
    WeightedTaskSetGenerator,
)
from curriculum.generators import TaskGenerator
from curriculum.tracker import EMPTY
from harness.oracle import AccountingOracle
from harness.thresholds import TASK_GENERATORS as LIMITS

CurriculumFactory = Callable[[CurriculumConfig], Any]

#: Set by `_factory_under_test` for each test of this module (a state machine takes no fixtures).
_FACTORY: CurriculumFactory | None = None

# derandomized, without an example database: every run of the gate tries the same sequences,
# so a change passes or fails on its own merits, not on what an earlier run happened to find
MACHINE_SETTINGS = settings(
    max_examples=40, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow],
    derandomize=True, database=None,
)

#: The builtin each refusal also is (docs/protocol.md), so `except ValueError` code keeps working.
ERROR_BASES: dict[type[Exception], type[Exception]] = {InvalidScoreError: ValueError, UnknownTaskError: LookupError}

#: Counters the model checks in `stats()`; a curriculum that lacks them is skipped, not failed.
COUNTER_STATS = ("total_completions", "late_completions")

# ints and numpy floats are scores too; bools (a success flag passed for a score), strings,
# None and lists are not: they are refused like a NaN
GOOD_SCORES = st.one_of(st.sampled_from([0.0, 1.0, 0, 1, np.float64(0.25), np.float32(0.5)]),
                        st.floats(min_value=0.0, max_value=1.0))
BAD_SCORES = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.floats(max_value=0.0, exclude_max=True, allow_infinity=False),
    st.floats(min_value=1.0, exclude_min=True, allow_infinity=False),
)
NOT_SCORES = st.sampled_from([True, False, np.bool_(True), "0.5", None, [0.5]])
NOT_TASK_IDS = st.sampled_from([True, False, np.bool_(True), "1", None, [1]])
"""Besides these, an issued id turned into a float: a task id is an int (docs/protocol.md)."""


@pytest.fixture(autouse=True)
def _factory_under_test(curriculum_factory: CurriculumFactory) -> Iterator[None]:
    """Hand the plugin's `curriculum_factory` to the state machine through `_FACTORY`."""
    global _FACTORY
    previous, _FACTORY = _FACTORY, curriculum_factory
    yield
    _FACTORY = previous


def _generator(seed: int) -> WeightedTaskSetGenerator:
    return WeightedTaskSetGenerator(
        [BucketedTaskGenerator({}, {"task_index": [0, 1, 2]}, label="easy", seed=seed),
         BucketedTaskGenerator({}, {"task_index": [3, 4]}, label="hard", seed=seed)],
        seed=seed,
    )


@st.composite
def configs(draw: st.DrawFn, *, all_algorithms: bool) -> CurriculumConfig:
    """Small curricula that evict often: learning progress, plus uniform and staged
    progression when `all_algorithms` (a plug-in factory is handed what the LP scenarios
    hand it, learning-progress configs only)."""
    seed = draw(st.integers(0, 2**16))
    kinds = ["learning_progress"] + (["learning_progress", "uniform", "staged_progression"] if all_algorithms else [])
    kind = draw(st.sampled_from(kinds))
    generator: BucketedTaskGenerator | WeightedTaskSetGenerator | None = _generator(seed)
    if kind == "learning_progress":
        # the memory of configurations: the default, none, one entry (every configuration collides), a few
        algorithm: Any = LearningProgressConfig(min_samples_for_lp=draw(st.integers(1, 3)),
                                                config_memory=draw(st.sampled_from([4096, 0, 1, 7])))
    elif kind == "uniform":
        algorithm = UniformConfig()
    else:
        algorithm = StagedProgressionConfig(
            stages=[Stage("first", BucketedTaskGenerator({}, {"task_index": [0, 1]}, label="first", seed=seed)),
                    Stage("second", BucketedTaskGenerator({}, {"task_index": [2, 3]}, label="second", seed=seed))],
            advancement_threshold=0.5, min_episodes=draw(st.integers(1, 4)), window=draw(st.integers(1, 4)),
            regression_threshold=0.25, previous_stage_mix=draw(st.sampled_from([0.0, 0.3, 0.5, 0.7])),
        )
        generator = None
    return CurriculumConfig(
        task_generator=generator,
        algorithm=algorithm,
        num_active_tasks=draw(st.integers(1, 8)),
        seed=seed,
        min_presentations=draw(st.integers(1, 3)),
        eviction_percentile=draw(st.sampled_from([100.0, 50.0, 25.0, 0.0])),
        refresh_interval=draw(st.integers(1, 8)),
    )


def _error_of(call: Callable[[], Any]) -> BaseException | None:
    """The exception `call()` raised, or None (the caller asserts on it)."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - returned to the caller, which asserts its type
        return exc
    return None


def _changes(before: Any, after: Any, path: str = "state") -> str:
    """Where `after` differs from `before`, one line per changed entry (a checkpoint is large)."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        return "".join(_changes(before.get(key), after.get(key), f"{path}[{key!r}]")
                       for key in sorted(set(before) | set(after), key=str) if before.get(key) != after.get(key))
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        changed = [i for i, (old, new) in enumerate(zip(before, after)) if old != new]
        return "".join(_changes(before[i], after[i], f"{path}[{i}]") for i in changed[:10])
    return f"  {path}: {before!r} -> {after!r}\n"


def _numbers(value: Any, path: str = "stats()") -> Iterator[tuple[str, float]]:
    """Every number inside a (nested) stats mapping, with where it is."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _numbers(item, f"{path}[{key!r}]")
    elif isinstance(value, (list, tuple, np.ndarray)):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{path}[{index}]")
    elif isinstance(value, (Number, np.number)) and not isinstance(value, (bool, np.bool_)):
        yield path, float(value)


class CurriculumMachine(RuleBasedStateMachine):
    """The curriculum under test beside a model of what has been handed out and credited."""

    bad_score_error: type[Exception] = InvalidScoreError
    """The error a bad score must raise (and, per `ERROR_BASES`, the builtin it also is)."""

    def __init__(self, factory: CurriculumFactory | None = None) -> None:
        super().__init__()
        factory = factory if factory is not None else _FACTORY
        assert factory is not None, "run through pytest (the `curriculum_factory` fixture sets the factory)"
        self.factory = factory
        self.curriculum: Any = None
        self.config: CurriculumConfig | None = None
        self.updates = 0
        """`update_task_performance` calls that returned (bad input excluded)."""
        self.credited = 0
        """Of those, the ones the curriculum accepted (did not return False)."""
        self.issued: set[int] = set()
        """Every task id `get_task()` returned."""
        self.departed: set[int] = set()
        """Ids seen in the pool (or handed out) and later seen outside it: never to come back."""
        self.seen_pool: set[int] = set()
        """Every id seen in the pool."""
        self.pool: set[int] | None = None
        """The pool at the last look (None if the curriculum does not show it)."""
        self.last_task_id: int | None = None
        """The id the last `get_task()` returned."""
        self.oracle: AccountingOracle | None = None
        """Watches the curriculum (`self.curriculum` is its recording stand-in)."""

    # ---- capabilities ------------------------------------------------------------------------
    @property
    def checkpointable(self) -> bool:
        return callable(getattr(self.curriculum, "get_state", None)) and \
            callable(getattr(self.curriculum, "load_state", None))

    def active_ids(self) -> set[int] | None:
        """Ids in the pool now, if the curriculum shows its pool."""
        if not callable(getattr(self.curriculum, "active_tasks", None)):
            return None
        return {task.task_id for task in self.curriculum.active_tasks()}

    def snapshot(self) -> Any:
        """What must not change on refused input: the checkpoint, else the stats, copied (a
        pickle round trip: exact, and far faster than JSON on a checkpoint's arrays)."""
        state = self.curriculum.get_state() if self.checkpointable else self.curriculum.stats()
        return pickle.loads(pickle.dumps(state))

    def _known_ids(self) -> set[int]:
        return self.issued | self.seen_pool

    # ---- rules -------------------------------------------------------------------------------
    @initialize(data=st.data())
    def build(self, data: st.DataObject) -> None:
        builtin = isinstance(self.factory, type) and issubclass(self.factory, Curriculum)
        self.config = data.draw(configs(all_algorithms=builtin), label="config")
        self.oracle = AccountingOracle(seed=self.config.seed, context="state machine")
        self.curriculum = self.oracle.watch(self.factory(self.config))
        stats = self.curriculum.stats()
        lacking = [key for key in COUNTER_STATS if key not in stats]
        if lacking:
            assert not builtin, f"the built-in curriculum's stats() lost {lacking}"
            pytest.skip(f"the curriculum state machine needs stats() to report {lacking}")
        self._observe_pool()

    @rule()
    def get_task(self) -> None:
        """Hand a task out; its episode may end much later (or never)."""
        task = self.curriculum.get_task()
        assert isinstance(task.task_id, int) and not isinstance(task.task_id, bool), \
            f"get_task() returned task_id {task.task_id!r}, expected an int"
        assert task.task_id not in self.departed, \
            f"get_task() returned task {task.task_id}, which had already left the pool"
        active = self.active_ids()
        if active is not None:
            assert task.task_id in active, f"get_task() returned task {task.task_id}, not in the pool {sorted(active)}"
        self.issued.add(task.task_id)
        self.last_task_id = task.task_id

    @rule(scores=st.lists(GOOD_SCORES, min_size=1, max_size=10))
    def play_episodes(self, scores: list[float]) -> None:
        """Episodes run back to back, each completed before the next task is drawn (as one
        env does); this is what fills tasks' presentations and so drives eviction."""
        for score in scores:
            self.get_task()
            self._update(self.last_task_id, score)
            self._observe_pool()

    def handed_out_in_pool(self) -> set[int]:
        """Handed-out tasks still in the pool at the last look (all handed out, if it is hidden)."""
        return self.issued if self.pool is None else self.issued & self.pool

    @precondition(lambda self: bool(self.handed_out_in_pool()))
    @rule(data=st.data(), score=GOOD_SCORES)
    def update(self, data: st.DataObject, score: float) -> None:
        """A completion of a handed-out task that is still in the pool: must be credited."""
        task_id = data.draw(st.sampled_from(sorted(self.handed_out_in_pool())), label="task_id")
        self._update(task_id, score)

    @precondition(lambda self: bool(self.issued & self.departed))
    @rule(data=st.data(), score=GOOD_SCORES)
    def update_departed(self, data: st.DataObject, score: float) -> None:
        """A completion that arrives after its task was evicted: must be counted late."""
        task_id = data.draw(st.sampled_from(sorted(self.issued & self.departed)), label="departed task_id")
        self._update(task_id, score)

    def _update(self, task_id: int, score: float) -> None:
        active = self.active_ids()
        result = self.curriculum.update_task_performance(task_id, score)
        self.updates += 1
        self.credited += result is not False
        if active is not None:
            if task_id in active:
                assert result is not False, \
                    f"update_task_performance({task_id}, {score!r}) returned {result!r} for a task in the pool"
            else:
                assert result is False, (
                    f"update_task_performance({task_id}, {score!r}) returned {result!r} for a task that left the "
                    f"pool (pool now {sorted(active)}): a late completion must return False"
                )

    @precondition(lambda self: bool(self.issued))
    @rule(data=st.data(), score=BAD_SCORES)
    def bad_score(self, data: st.DataObject, score: float) -> None:
        task_id = data.draw(st.sampled_from(sorted(self.issued)), label="task_id")
        self._refused(task_id, score, self.bad_score_error)

    @precondition(lambda self: bool(self.issued))
    @rule(data=st.data(), score=NOT_SCORES)
    def not_a_score(self, data: st.DataObject, score: Any) -> None:
        task_id = data.draw(st.sampled_from(sorted(self.issued)), label="task_id")
        self._refused(task_id, score, self.bad_score_error)

    @rule(data=st.data())
    def unknown_task(self, data: st.DataObject) -> None:
        """An id never in the pool: negative, or (when the pool is visible) above every id seen;
        a hidden pool may hold any id >= 0 (a fixed task space), so only negative ones are sent."""
        beyond = max(self._known_ids(), default=-1) + 1
        negative = st.integers(-1000, -1)
        ids = negative if self.pool is None else st.one_of(st.integers(beyond, beyond + 1000), negative)
        task_id = data.draw(ids, label="task_id")
        self._refused(task_id, 0.5, UnknownTaskError)

    @rule(data=st.data(), task_id=NOT_TASK_IDS)
    def not_a_task_id(self, data: st.DataObject, task_id: Any) -> None:
        """Something other than an int as the task id: a bool (an int to Python, and True == 1),
        a string, None, or a float equal to an issued id."""
        if self.issued and data.draw(st.booleans(), label="an issued id as a float"):
            task_id = float(data.draw(st.sampled_from(sorted(self.issued)), label="task_id"))
        self._refused(task_id, 0.5, UnknownTaskError)

    def _refused(self, task_id: Any, score: float, error: type[Exception]) -> None:
        before = self.snapshot()
        raised = _error_of(lambda: self.curriculum.update_task_performance(task_id, score))
        assert isinstance(raised, error), (
            f"update_task_performance({task_id!r}, {score!r}) raised {raised!r}, expected {error.__name__}"
        )
        builtin = ERROR_BASES[error]
        assert isinstance(raised, builtin), (
            f"update_task_performance({task_id!r}, {score!r}) raised {type(raised).__name__}, which is not a "
            f"{builtin.__name__}: `except {builtin.__name__}` handlers (its documented base) miss it"
        )
        after = self.snapshot()
        assert after == before, (
            f"update_task_performance({task_id!r}, {score!r}) raised {error.__name__} but changed the state:\n"
            + _changes(before, after)
        )

    @precondition(lambda self: self.checkpointable)
    @rule(probe=st.integers(1, 3))
    def checkpoint_round_trip(self, probe: int) -> None:
        """Save, load into a fresh curriculum, carry on with the restored one."""
        saved = json.loads(json.dumps(self.curriculum.get_state()))  # a checkpoint goes through a file
        restored = self.factory(self.config)
        restored.load_state(saved)
        reloaded = json.loads(json.dumps(restored.get_state()))
        assert reloaded == saved, "get_state() after load_state(state) differs from state"
        original = [self.curriculum.get_task().task_id for _ in range(probe)]
        resumed = [restored.get_task().task_id for _ in range(probe)]
        assert resumed == original, f"after a checkpoint round trip get_task() gave {resumed}, expected {original}"
        self.issued.update(resumed)
        self.curriculum.resume(restored)  # the oracle watches on: the restored curriculum is the same one

    def follows_broadcasts(self) -> bool:
        return isinstance(self.config.algorithm, StagedProgressionConfig) and \
            callable(getattr(self.curriculum, "apply_sync_state", None))

    @precondition(lambda self: self.follows_broadcasts())
    @rule(data=st.data())
    def adopt_broadcast_stage(self, data: st.DataObject) -> None:
        """A stage decided by a main curriculum (a worker copy under centralized tracking, a
        checkpoint re-broadcast): the pool moves to that stage's tasks, and the stage starts
        afresh, as it did in the main curriculum; completions go on being recorded."""
        current = self.curriculum.sync_state()
        stage = data.draw(st.integers(0, len(self.config.algorithm.stages) - 1), label="stage")
        changes = max(current["stage_changes"] + 1, stage)
        changes += (changes - stage) % 2  # every change moves one stage, from stage 0
        sync = {"stage": stage, "stage_changes": changes}
        # (a read-only view: a stage source hands out any Mapping, not only the dict sync_state() returns)
        assert self.curriculum.apply_sync_state(MappingProxyType(sync)) is True, (
            f"apply_sync_state({sync}) from {current} changed nothing")
        assert self.curriculum.sync_state() == sync, \
            f"after apply_sync_state({sync}) from {current}, sync_state() is {self.curriculum.sync_state()}"
        self._observe_pool()

    # ---- invariants --------------------------------------------------------------------------
    @invariant()
    def the_stage_reads_are_plain_ints(self) -> None:
        """`stage` and `sync_state()` (what a main process broadcasts, as JSON or through a
        pipe) hold plain ints, never numpy scalars a JSON writer refuses."""
        if self.curriculum is None or not self.follows_broadcasts():
            return
        stage, sync = self.curriculum.stage, self.curriculum.sync_state()
        assert type(stage) is int and all(type(value) is int for value in sync.values()), (
            f"stage {stage!r} and sync_state() {sync!r}: expected plain ints")
        assert json.loads(json.dumps(sync)) == sync, f"sync_state() {sync!r} does not survive JSON"

    def _observe_pool(self) -> None:
        active = self.pool = self.active_ids()
        if active is None:
            return
        self.departed |= self._known_ids() - active
        self.seen_pool |= active

    @invariant()
    def stats_agree_with_the_model(self) -> None:
        """One `stats()` read per step, held to the model (and, through the oracle, to its reference)."""
        if self.curriculum is None:
            return
        stats = self.curriculum.stats()
        self._completions_are_counted_once(stats)
        self._stats_are_finite(stats)
        self._stats_are_json(stats)
        self._pool_is_full_and_ids_are_fresh(stats)

    def _completions_are_counted_once(self, stats: Mapping[str, Any]) -> None:
        total, late = stats["total_completions"], stats["late_completions"]
        assert total + late == self.updates, (
            f"stats() reports {total} completions + {late} late = {total + late}, but {self.updates} updates "
            "were made"
        )
        assert total == self.credited, (
            f"stats() reports {total} credited completions, but update_task_performance accepted {self.credited}"
        )

    @invariant()
    def oracle_agrees(self) -> None:
        if self.oracle is not None and self.oracle.mismatches:
            self.oracle.verify()  # raises, listing every disagreement

    def teardown(self) -> None:
        if self.oracle is not None:
            self.oracle.verify()

    def _stats_are_json(self, stats: Mapping[str, Any]) -> None:
        """The protocol's "JSON-like values": plain numbers, strings and containers of them, which
        a logger writes as they are (a numpy scalar makes `json.dumps` raise)."""
        try:
            json.dumps(stats, allow_nan=False)
        except (TypeError, ValueError) as error:
            pytest.fail(f"stats() is not JSON-like ({error}): {dict(stats)}")

    def _stats_are_finite(self, stats: Mapping[str, Any]) -> None:
        bad = [(where, value) for where, value in _numbers(stats) if not math.isfinite(value)]
        assert not bad, f"stats() holds non-finite numbers: {bad}"

    @invariant()
    def sampling_probabilities_are_a_distribution(self) -> None:
        if not callable(getattr(self.curriculum, "sampling_probabilities", None)):
            return
        p = np.asarray(self.curriculum.sampling_probabilities(), dtype=np.float64)
        assert p.shape == (self.config.num_active_tasks,), \
            f"sampling_probabilities() has shape {p.shape}, expected ({self.config.num_active_tasks},)"
        assert np.isfinite(p).all() and (p >= 0).all(), f"sampling_probabilities() = {p.tolist()}"
        assert math.isclose(float(p.sum()), 1.0, abs_tol=1e-9), \
            f"sampling_probabilities() sum to {float(p.sum())!r}, expected 1: {p.tolist()}"

    def _pool_is_full_and_ids_are_fresh(self, stats: Mapping[str, Any]) -> None:
        if self.active_ids() is None:
            return
        tasks = self.curriculum.active_tasks()
        ids = [task.task_id for task in tasks]
        capacity = self.config.num_active_tasks
        assert len(tasks) == capacity == self.curriculum.num_active_tasks, (
            f"pool holds {len(tasks)} tasks, num_active_tasks is {self.curriculum.num_active_tasks}, "
            f"config asks for {capacity}"
        )
        assert len(set(ids)) == len(ids), f"the pool holds a task twice: {ids}"
        returned = sorted(set(ids) & self.departed)
        assert not returned, f"tasks {returned} left the pool and came back (pool {ids})"
        self._observe_pool()
        created = stats.get("tasks_created")
        if created is not None:  # each new task has an id of its own, so the model saw every one
            assert created == len(self.seen_pool), (
                f"stats() reports {created} tasks created, but {len(self.seen_pool)} distinct task ids have been "
                "in the pool: a new task reused an old id"
            )
        if isinstance(self.curriculum.inner, Curriculum):  # the built-in id scheme: generation * capacity + slot
            misplaced = [(slot, task_id) for slot, task_id in enumerate(ids)
                         if task_id == EMPTY or task_id % capacity != slot]
            assert not misplaced, f"(slot, task id) pairs whose id does not map to the slot: {misplaced}"


TestCurriculumStateMachine = CurriculumMachine.TestCase
TestCurriculumStateMachine.settings = MACHINE_SETTINGS


class _Unbuildable(Exception):
    """The error of a generator that cannot build one task (a missing map file, say)."""


class _OneUnbuildable(TaskGenerator):
    """`inner`'s tasks, but the `nth` distinct task id asked for raises `_Unbuildable` every time."""

    def __init__(self, inner: TaskGenerator, nth: int) -> None:
        self.inner, self.nth, self.asked = inner, nth, []

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        if task_id not in self.asked:
            self.asked.append(task_id)
        if len(self.asked) >= self.nth and task_id == self.asked[self.nth - 1]:
            raise _Unbuildable(f"task {task_id} cannot be built")
        return self.inner.generate(task_id)

    def describe(self) -> dict[str, Any]:
        return {"type": "one unbuildable", "inner": self.inner.describe()}

    @property
    def labels(self) -> tuple[str, ...]:
        return self.inner.labels


def test_a_task_the_generator_cannot_build_costs_only_the_draws_that_pick_it(curriculum_factory, require_capability,
                                                                            scenario_seed) -> None:
    """A generator that cannot build one task of the pool raises its own error from the calls
    that need that task (each `get_task()` that draws it; a completion whose replacement it is),
    and only from those: the next call goes on, so a worker loses the episodes of one bad task,
    not its whole run. (A curriculum that builds its whole pool when created fails there.)"""
    generator = _OneUnbuildable(BucketedTaskGenerator({}, {"level": list(range(8))}, label="level",
                                                      seed=scenario_seed), nth=4)
    try:
        curriculum = curriculum_factory(CurriculumConfig(task_generator=generator, algorithm=LearningProgressConfig(),
                                                         num_active_tasks=8, seed=scenario_seed))
    except _Unbuildable:
        require_capability(False, "this curriculum builds its pool when it is created, and fails there")
    rng = random.Random(scenario_seed)
    raised, other = 0, []
    try:
        for _ in range(LIMITS.unbuildable_calls):
            try:
                task = curriculum.get_task()
                curriculum.update_task_performance(task.task_id, rng.random())
            except _Unbuildable:
                raised += 1
            except Exception as error:  # noqa: BLE001 - reported below
                other.append(f"{type(error).__name__}: {error}")
    finally:
        getattr(curriculum, "close", lambda: None)()
    assert not other and raised <= LIMITS.unbuildable_calls * LIMITS.unbuildable_max_share, (
        f"one task of a pool of 8 cannot be built: {raised} of {LIMITS.unbuildable_calls} draws raised the "
        f"generator's error (limit {LIMITS.unbuildable_max_share:.0%}), {len(other)} raised another one {other[:2]}, "
        f"seed {scenario_seed}")


#: scores of every kind a score function may hand back: real numbers are recorded, the rest refused
REAL_SCORES = (0.5, 1, np.float64(0.25), np.float32(0.5), np.int64(0), Fraction(3, 4))
NOT_REAL_SCORES = (True, np.bool_(False), "0.5", b"0.5", None, [0.5], (0.5,), np.array(0.5), np.array([0.5]),
                   Decimal("0.5"), complex(0.5, 0), object())


def test_a_score_is_recorded_if_and_only_if_it_is_a_real_number(curriculum_factory, scenario_seed) -> None:
    """`update_task_performance` takes a real number (an int, a float, a numpy number, a
    Fraction) and refuses anything else as `InvalidScoreError`, the curriculum unchanged: a
    bool, a string or bytes, a container, a 0-d or 1-d array (what a score function returning
    `returns.mean(keepdims=True)` hands back), a Decimal, a complex."""
    curriculum = curriculum_factory(CurriculumConfig(task_generator=_generator(scenario_seed),
                                                     algorithm=LearningProgressConfig(), num_active_tasks=4,
                                                     seed=scenario_seed))
    state = getattr(curriculum, "get_state", None)
    state = state if callable(state) else curriculum.stats
    wrong = []
    try:
        for score in NOT_REAL_SCORES:
            task = curriculum.get_task()
            before = json.dumps(state(), sort_keys=True, default=repr)
            raised = _error_of(lambda: curriculum.update_task_performance(task.task_id, score))
            after = json.dumps(state(), sort_keys=True, default=repr)
            if not isinstance(raised, InvalidScoreError) or after != before:
                wrong.append(f"{score!r}: raised {raised!r}, state {'unchanged' if after == before else 'changed'}")
            curriculum.update_task_performance(task.task_id, 0.5)
        for score in REAL_SCORES:
            task = curriculum.get_task()
            raised = _error_of(lambda: curriculum.update_task_performance(task.task_id, score))
            if raised is not None:
                wrong.append(f"{score!r} (a real number in the range): raised {raised!r}")
    finally:
        getattr(curriculum, "close", lambda: None)()
    assert not wrong, f"scores recorded or refused against their kind: {wrong}, seed {scenario_seed}"
