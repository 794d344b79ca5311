"""Hostile inputs to every public entry point: a named error and an untouched state, or a sound result.

Hypothesis draws the types and values of each argument from valid values mixed with anything
(None, bools, huge and negative ints, NaN and infinities, strings, Decimals, Fractions, complex
numbers, numpy scalars and arrays, lists, dicts). For every input the entry point either
raises a `CurriculumError` subclass, with `get_state()` (JSON round-tripped) bit-identical
before and after, or accepts it, and then the curriculum keeps working: more get/update pairs
run without any error and its own checkpoint loads into a fresh curriculum. Any other
exception fails the test. The number of examples per entry point is printed in the summary.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "curriculum"))
from env_doubles import HARD, FixedEpisodeEnv, FixedGymEnv, two_label_config  # noqa: E402
from helpers import drive, lp_config, staged_config, student_score, uniform_config  # noqa: E402

from curriculum import (  # noqa: E402
    Curriculum,
    CurriculumConfig,
    CurriculumEnv,
    CurriculumError,
    GymCurriculumEnv,
    LearningProgressConfig,
    SingleTaskGenerator,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
    make_curriculum_vecenv,
)
from curriculum.vector import MAX_NUM_ENVS  # noqa: E402

EDGE_NUMBERS = [0, -1, 1, 2**31, 2**53, 2**53 + 1, 2**62, 2**63 - 1, 2**63, -(2**63), 2**64, 10**400, -(10**400),
                0.0, -0.0, 0.5, 1.0, 1.0000001, 1e-300, 5e-324, 1e200, 1e308, -1e308, float("nan"), float("inf"),
                float("-inf")]
ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(EDGE_NUMBERS),
    st.floats(),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.decimals(),
    st.fractions(),
    st.complex_numbers(),
    st.builds(np.float64, st.floats()),
    st.builds(np.float32, st.floats(width=32)),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)),
    st.builds(np.uint64, st.integers(0, 2**64 - 1)),
    st.builds(np.bool_, st.booleans()),
    hnp.arrays(np.float64, st.integers(0, 3), elements=st.floats(-2, 2)),
    st.lists(st.floats(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
)
_QUIET = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]  # `examples` counts across inputs on purpose
FAST = settings(max_examples=300, deadline=None, suppress_health_check=_QUIET)
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=_QUIET)


def snapshot(curriculum: Curriculum) -> str:
    """The curriculum's whole state as canonical JSON (compared byte for byte)."""
    return json.dumps(curriculum.get_state(), sort_keys=True)


def assert_sound(curriculum: Curriculum, make_config: Callable[[], CurriculumConfig]) -> None:
    """An accepted input left a working curriculum: more pairs run, and its checkpoint loads."""
    low, high = curriculum.config.score_range
    drive(curriculum, 30, start=1000, score=lambda *args: min(high, low + (high - low) * student_score(*args)))
    state = json.loads(snapshot(curriculum))
    fresh = Curriculum(make_config())
    fresh.load_state(state)
    assert snapshot(fresh) == snapshot(curriculum)


class Examples:
    """Counts the examples Hypothesis ran in one test; the count goes to the summary as a
    fault figure, updated after every example (the figure is read when the test returns)."""

    def __init__(self, record: Callable[[str, Any, str], None], node: pytest.Item) -> None:
        self.count = 0
        self.refused = 0
        self._record = record
        self._properties = node.user_properties
        self._name = f"hypothesis_{node.name.removeprefix('test_')}_examples"

    def ran(self, *, refused: bool) -> None:
        self.count += 1
        self.refused += refused
        self._properties[:] = [p for p in self._properties if not (isinstance(p[1], tuple) and p[1][0] == self._name)]
        self._record(self._name, self.count, f"examples, {self.refused} refused by name")


@pytest.fixture
def examples(fault_figure: Any, request: pytest.FixtureRequest) -> Examples:
    return Examples(fault_figure, request.node)


def refused_untouched(curriculum: Curriculum, call: Callable[[], Any]) -> bool:
    """Run `call`; True if it raised a CurriculumError (and the state is bit-identical)."""
    before = snapshot(curriculum)
    try:
        call()
    except CurriculumError:
        assert snapshot(curriculum) == before
        return True
    return False


# ---- configs and the constructor ----------------------------------------------------------------
def maybe(valid: st.SearchStrategy[Any], *, hostile: int = 8) -> st.SearchStrategy[Any]:
    """`valid`, or in about `hostile` percent of draws anything at all (so that inputs with
    one or two bad arguments among good ones are common, not only all-bad ones)."""
    return st.integers(0, 99).flatmap(lambda k: ANYTHING if k < hostile else valid)


CURRICULUM_FIELDS = {
    "num_active_tasks": maybe(st.integers(1, 16)),
    "seed": maybe(st.integers(0, 2**70)),
    "min_presentations": maybe(st.integers(1, 20)),
    "eviction_percentile": maybe(st.floats(0, 100)),
    "score_range": maybe(st.tuples(st.floats(-1e6, 0), st.floats(0.5, 1e6))),
    "refresh_interval": maybe(st.one_of(st.none(), st.integers(1, 64))),
}
LP_FIELDS = {
    "ema_timescale": maybe(st.floats(0.01, 0.99)),
    "slow_timescale_factor": maybe(st.floats(0.01, 0.99)),
    "exploration": maybe(st.floats(0, 0.4)),
    "cold_exploration": maybe(st.floats(0, 0.4)),
    "min_samples_for_lp": maybe(st.integers(1, 10)),
    "noise_z": maybe(st.floats(0, 5)),
    "max_baseline": maybe(st.floats(0, 0.99)),
}
STAGED_FIELDS = {
    "advancement_threshold": maybe(st.floats(0.01, 1)),
    "min_episodes": maybe(st.integers(1, 10)),
    "window": maybe(st.integers(1, 10)),
    "regression_threshold": maybe(st.one_of(st.none(), st.floats(0, 0.01))),
    "previous_stage_mix": maybe(st.floats(0, 0.9)),
}


def drawn_fields(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


@FAST
@given(fields=drawn_fields(CURRICULUM_FIELDS), lp=drawn_fields(LP_FIELDS), staged=drawn_fields(STAGED_FIELDS),
       algorithm=st.sampled_from(["learning_progress", "uniform", "staged"]),
       shared_memory=maybe(st.just(False), hostile=5), lock_timeout=maybe(st.one_of(st.none(), st.floats(0.1, 10)),
                                                                         hostile=5))
@example(fields={"score_range": (0.0, 1e200)}, lp={}, staged={}, algorithm="learning_progress", shared_memory=False,
         lock_timeout=None)  # learning-progress variances used to overflow, and the checkpoint was refused
@example(fields={"refresh_interval": 10**12}, lp={}, staged={}, algorithm="uniform", shared_memory=False,
         lock_timeout=None)  # used to pass validation, then MemoryError at the first refresh
def test_curriculum_construction(examples: Examples, fields: dict, lp: dict, staged: dict, algorithm: str,
                                 shared_memory: Any, lock_timeout: Any) -> None:
    def build() -> Curriculum:
        if algorithm == "staged":
            stages = [Stage(f"s{i}", SingleTaskGenerator({"stage": i}, label=f"s{i}")) for i in range(2)]
            config = CurriculumConfig(algorithm=StagedProgressionConfig(stages=stages, **staged), **fields)
        else:
            spec = LearningProgressConfig(**lp) if algorithm == "learning_progress" else UniformConfig()
            config = CurriculumConfig(task_generator=SingleTaskGenerator({"x": 1}), algorithm=spec, **fields)
        return Curriculum(config, shared_memory=shared_memory, lock_timeout=lock_timeout)

    try:
        curriculum = build()
    except CurriculumError:
        examples.ran(refused=True)
        return
    examples.ran(refused=False)
    assert_sound(curriculum, lambda: copy.deepcopy(curriculum.config))


# ---- get/update, reseed, stage sync ---------------------------------------------------------------
def small_memory_lp_config() -> CurriculumConfig:
    """`lp_config` with a memory of 16 configurations: a hostile checkpoint entry lands on any
    part of the state, not mostly on the default memory's 40,000 numbers."""
    return lp_config(algorithm=LearningProgressConfig(min_samples_for_lp=3, config_memory=16))


CONFIGS = {"learning_progress": small_memory_lp_config, "uniform": uniform_config, "staged": staged_config}


def driven(algorithm: str, steps: int = 40) -> Curriculum:
    curriculum = Curriculum(CONFIGS[algorithm]())
    drive(curriculum, steps)
    return curriculum


@FAST
@given(algorithm=st.sampled_from(sorted(CONFIGS)), slot=st.integers(0, 7), task_id=maybe(st.none(), hostile=30),
       score=maybe(st.floats(0, 1), hostile=50))
def test_update_task_performance(examples: Examples, algorithm: str, slot: int, task_id: Any, score: Any) -> None:
    curriculum = driven(algorithm)
    if task_id is None:  # a task id the curriculum issued
        task_id = curriculum.active_tasks()[slot % curriculum.num_active_tasks].task_id
    refused = refused_untouched(curriculum, lambda: curriculum.update_task_performance(task_id, score))
    examples.ran(refused=refused)
    if not refused:
        assert_sound(curriculum, CONFIGS[algorithm])


@FAST
@given(algorithm=st.sampled_from(sorted(CONFIGS)), seed=maybe(st.integers(0, 2**80), hostile=60))
def test_reseed(examples: Examples, algorithm: str, seed: Any) -> None:
    curriculum = driven(algorithm)
    refused = refused_untouched(curriculum, lambda: curriculum.reseed(seed))
    examples.ran(refused=refused)
    if not refused:
        assert_sound(curriculum, CONFIGS[algorithm])


SYNC_VALUE = maybe(st.integers(-3, 8))
VALID_SYNC = st.builds(lambda stage, back_and_forth: {"stage": stage, "stage_changes": stage + 2 * back_and_forth},
                       st.integers(0, 2), st.integers(0, 5))


@FAST
@given(sync=st.integers(0, 99).flatmap(lambda k: VALID_SYNC if k < 40 else st.one_of(
    ANYTHING, st.fixed_dictionaries({"stage": SYNC_VALUE, "stage_changes": SYNC_VALUE}),
    st.dictionaries(st.sampled_from(["stage", "stage_changes", "other"]), SYNC_VALUE, max_size=3))))
def test_apply_sync_state(examples: Examples, sync: Any) -> None:
    curriculum = driven("staged", 5)
    refused = refused_untouched(curriculum, lambda: curriculum.apply_sync_state(sync))
    examples.ran(refused=refused)
    if not refused:
        assert_sound(curriculum, CONFIGS["staged"])


# ---- checkpoints ----------------------------------------------------------------------------------
def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


SAVED = {algorithm: json.loads(snapshot(driven(algorithm, 120))) for algorithm in CONFIGS}
PATHS = {algorithm: _paths(state) for algorithm, state in SAVED.items()}


def _spoiled(state: dict, path: tuple, value: Any) -> dict:
    state = copy.deepcopy(state)
    node = state
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return state


def _targets(*, in_config: bool) -> list[tuple[str, tuple]]:
    return [(algorithm, path) for algorithm in sorted(PATHS) for path in PATHS[algorithm]
            if (path[0] == "config") == in_config]


#: (algorithm, path) of every entry of a saved state; entries of its config are drawn less
#: often, since any change there only earns "saved by a curriculum with a different config".
TARGETS = st.integers(0, 9).flatmap(lambda k: st.sampled_from(_targets(in_config=k == 0)))


@FAST
@given(target=TARGETS, value=maybe(st.one_of(st.integers(0, 40), st.floats(-1, 2)), hostile=50),
       drop=st.integers(0, 9).map(lambda k: k == 0))
@example(target=("learning_progress", ("arrays", "completions", 0)), value=2**63 - 1, drop=False)
@example(target=("learning_progress", ("samples", 0)), value=10**400, drop=False)
@example(target=("learning_progress", ("arrays", "lp_state", 0)), value=1e308, drop=False)
@example(target=("staged", ("arrays", "stage_counters", 1)), value=2**63 - 1, drop=False)
def test_load_state(examples: Examples, target: tuple[str, tuple], value: Any, drop: bool) -> None:
    """A hand-crafted checkpoint: one entry replaced (or removed) at any depth. The examples
    are the checkpoints of the audit that used to be accepted and then overflow."""
    algorithm, path = target
    state = _spoiled(SAVED[algorithm], path, value)
    if drop and isinstance(path[-1], str):
        node = state
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    curriculum = driven(algorithm, 7)
    refused = refused_untouched(curriculum, lambda: curriculum.load_state(json.loads(json.dumps(state,
                                                                                                default=repr))))
    examples.ran(refused=refused)
    if not refused:
        assert_sound(curriculum, CONFIGS[algorithm])


# ---- env wrappers ---------------------------------------------------------------------------------
CALLABLE_OR_ANYTHING = maybe(st.one_of(st.none(), st.just(lambda returns: 0.5)))


@SLOW
@given(seed=maybe(st.one_of(st.none(), st.integers(0, 2**40)), hostile=10), score_fn=maybe(
       st.one_of(st.none(), st.just(lambda returns: 0.5)), hostile=10), local_tracking=maybe(st.just(True), hostile=10),
       stats_interval=maybe(st.integers(1, 100), hostile=10), stage_source=maybe(st.none(), hostile=10),
       buf=maybe(st.none(), hostile=10), gym=st.booleans())
def test_env_wrapper_construction(examples: Examples, seed: Any, score_fn: Any, local_tracking: Any,
                                  stats_interval: Any, stage_source: Any, buf: Any, gym: bool) -> None:
    curriculum = Curriculum(two_label_config(easy=HARD))
    kwargs = {"seed": seed, "score_fn": score_fn, "local_tracking": local_tracking, "stats_interval": stats_interval,
              "stage_source": stage_source}

    def build() -> Any:
        if gym:
            return GymCurriculumEnv(FixedGymEnv(), curriculum, **kwargs)
        return CurriculumEnv(FixedEpisodeEnv(), curriculum, buf=buf, **kwargs)

    refused = refused_untouched(curriculum, build)
    examples.ran(refused=refused)


@SLOW
@given(result=maybe(st.floats(0, 1), hostile=60), gym=st.booleans())
def test_score_fn_results(examples: Examples, result: Any, gym: bool) -> None:
    """Whatever a score_fn returns: recorded if a real number in range, else refused by name,
    the episode neither recorded nor counted, and the wrapper refusing steps until reset()."""
    curriculum = Curriculum(two_label_config(easy=HARD))
    if gym:
        env: Any = GymCurriculumEnv(FixedGymEnv(), curriculum, score_fn=lambda returns: result)
    else:
        env = CurriculumEnv(FixedEpisodeEnv(), curriculum, score_fn=lambda returns: result)
    env.reset()
    for _ in range(3):
        env.step(0 if gym else np.zeros(1, dtype=np.int32))
    refused = refused_untouched(curriculum, lambda: env.step(0 if gym else np.zeros(1, dtype=np.int32)))
    examples.ran(refused=refused)
    assert env.episodes == curriculum.tracker.total_completions == int(not refused)
    if not refused:
        assert float(curriculum.tracker.score_sum.sum()) == float(result)
    assert_sound(curriculum, lambda: two_label_config(easy=HARD))


# ---- the vector factory ---------------------------------------------------------------------------
MAX_WORKERS_BUILT = 8
"""Most worker processes a drawn vector layout may start."""
VECTOR_ARGUMENTS = {  # valid values; the test mixes in hostile ones
    "backend": st.sampled_from(["Serial", "Multiprocessing"]),
    "tracking": st.sampled_from(["shared", "centralized"]),
    "num_workers": st.one_of(st.none(), st.integers(1, 4)),
    "seed": st.integers(0, 100),
    "score_fn": st.one_of(st.none(), st.just(lambda returns: 0.5)),
    "stats_interval": st.integers(1, 100),
    "worker_timeout": st.one_of(st.none(), st.floats(0.1, 10)),
    "batch_size": st.one_of(st.none(), st.integers(1, 4)),
    "zero_copy": st.booleans(),
    "overwork": st.booleans(),
}


@settings(SLOW, max_examples=150)
@given(arguments=st.fixed_dictionaries({"num_envs": maybe(st.integers(1, 4), hostile=10)},
                                      optional={name: maybe(valid, hostile=10) for name, valid in VECTOR_ARGUMENTS.items()}
                                      | {"unknown_option": ANYTHING}),
       shared=st.booleans())
def test_make_curriculum_vecenv_arguments(examples: Examples, arguments: dict, shared: bool) -> None:
    """Valid layouts build, take a reset and a step, and close; anything else is refused by name
    before any worker process starts."""
    # a hostile worker count that is valid (say 970 for 970 envs) would start that many
    # spinning processes on the test machine: only counts the vector refuses go that high
    workers = arguments.get("num_workers")
    assume(not (type(workers) is int and MAX_WORKERS_BUILT < workers <= MAX_NUM_ENVS))
    curriculum = Curriculum(two_label_config(easy=HARD), shared_memory=shared)
    try:
        def make() -> Any:
            return make_curriculum_vecenv(
                lambda buf=None, seed=0: FixedEpisodeEnv(buf=buf, seed=seed), curriculum, **arguments)

        before = snapshot(curriculum)
        try:
            vecenv = make()
        except CurriculumError:
            assert snapshot(curriculum) == before
            examples.ran(refused=True)
            return
        examples.ran(refused=False)
        with vecenv:
            vecenv.reset()
            vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
        assert all(process.exitcode is not None for process in getattr(vecenv.vecenv, "processes", ()))
    finally:
        curriculum.close()
