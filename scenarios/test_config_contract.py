"""Config contract: every config field and constructor option accepts its documented domain and
refuses the rest by name.

Bug class: a range check off by its boundary (`<` for `<=`), a check dropped or applied to
another field, a sum of shares not checked, an int field taking floats or bools, NaN slipping
through a comparison. Nothing crashes: a typo'd `exploration=1.0` or an inverted
`score_range` is accepted and the run quietly samples or scores nonsense, or a valid setting
(`eviction_percentile=100`, `mastered_gain=1`) is refused.

`DOMAINS` restates each field's domain as its docstring gives it, with the values at and
just past each boundary, and what no number field may take (NaN, infinities, bools,
strings). Every accepted value must build the config (the field then holds it); every
refused one must raise `CurriculumConfigError` naming the field, and build nothing.

`OPTIONS` does the same for the keyword options of what runs a config (`Curriculum`, local and
shared, its `reseed()` and `attach()`; `CurriculumEnv`, `GymCurriculumEnv`,
`make_curriculum_vecenv` on Serial; an integer option takes numpy integers too): an option
checked only on one path (a shared curriculum's `lock_timeout` but not a local one's) makes a
call that passed in a one-process test fail, or quietly misbehave, once the run is scaled out.
Whatever an accepted value builds is closed again.

The env a vector wraps has a contract too: it writes into the buffers the vector handed it. An
env that keeps its own copy of any of them (observations the trainer never sees change,
rewards or ends the wrapper never reads) must be refused by name, when built or, for a buffer
rebound mid-run, by the episode's end. The default worker count of a Multiprocessing vector is
held to its docstring over a grid of layouts and core counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import inspect
import json
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pufferlib.vector
import pytest

from curriculum import (
    AgentCountError,
    BucketedTaskGenerator,
    Curriculum,
    CurriculumConfig,
    CurriculumConfigError,
    CurriculumEnv,
    CurriculumStateError,
    CurriculumTask,
    EnvContractError,
    EpisodeNotStartedError,
    GymCurriculumEnv,
    InvalidScoreError,
    LearningProgressConfig,
    SingleTaskGenerator,
    Stage,
    StagedProgressionConfig,
    TaskTracker,
    UniformConfig,
    ValueRange,
    WeightedTaskSetGenerator,
    WorkerProcessError,
    make_curriculum_vecenv,
    process_training_stats,
)
from curriculum.config import MAX_ACTIVE_TASKS, MAX_REFRESH_INTERVAL, MAX_SCORE_MAGNITUDE, MAX_Z, AlgorithmConfig
from curriculum.env import DEFAULT_STATS_INTERVAL
from curriculum.errors import CurriculumError
from curriculum.memory import SharedMemoryBackend
from curriculum.vector import (
    MAX_NUM_ENVS,
    CentralizedCurriculumVecEnv,
    SharedCurriculumVecEnv,
    StageBroadcast,
    default_num_workers,
)
from harness.envs import PUFFER_BUFFERS as BUFFER_NAMES
from harness.envs import ExactAccountingEnv, GymExactAccountingEnv
from harness.episodes import EPISODE_RECORD_KEY
from harness.oracle import AccountingOracle
from harness.protocol import ProtocolView

NAN, INF = math.nan, math.inf
# wrong kinds, truthy and falsy: a check that asks whether a value was given by its truth
# (`if label:`) lets the falsy ones through unchecked; ints no float holds (`math.isfinite`
# raises OverflowError on them)
NOT_NUMBERS = (NAN, INF, -INF, 10**400, -10**400, True, False, np.bool_(True), "0.5", "", None)
NOT_INTS = (1.0, True, False, "1", "", None, NAN)
NOT_STRINGS = (3, 0, 0.0, b"x", b"", True, False, ["x"], [])


def _generator() -> SingleTaskGenerator:
    return SingleTaskGenerator({"level": 1}, label="only")


def _stages() -> tuple[Stage, ...]:
    return Stage("easy", _generator()), Stage("hard", SingleTaskGenerator({"level": 2}, label="hard"))


def _lp(**fields: Any) -> LearningProgressConfig:
    return LearningProgressConfig(**fields)


def _staged(**fields: Any) -> StagedProgressionConfig:
    fields.setdefault("stages", _stages())
    return StagedProgressionConfig(**fields)


def _curriculum(**fields: Any) -> CurriculumConfig:
    fields.setdefault("task_generator", _generator())
    return CurriculumConfig(**fields)


def _value_range(low: Any, high: Any) -> ValueRange:
    return ValueRange(low, high)


def _weights(*weights: Any) -> WeightedTaskSetGenerator:
    return WeightedTaskSetGenerator([(_generator(), w) for w in weights])


# (what, builder of one value, field read back or None, accepted values, refused values)
DOMAINS: list[tuple[str, Callable[[Any], Any], str | None, tuple[Any, ...], tuple[Any, ...]]] = [
    # learning progress (shares: exploration 0.05, cold_exploration 0.2, revisit 0.1 and retry 0.1
    # by default; the last refused value of each makes the four sum to exactly 1)
    ("ema_timescale in [1e-6, 1)", lambda v: _lp(ema_timescale=v), "ema_timescale",
     (1e-6, 0.5, 0.999), (0, 0.0, 1, 1.0, -0.1, 9e-7, *NOT_NUMBERS)),
    ("slow_timescale_factor in (0, 1)", lambda v: _lp(slow_timescale_factor=v), "slow_timescale_factor",
     (1e-9, 0.5, 0.999), (0.0, 1.0, -0.5, *NOT_NUMBERS)),
    ("exploration in [0, 1), shares < 1", lambda v: _lp(exploration=v), "exploration",
     (0, 0.0, 0.59), (-0.01, 1.0, 0.65, *NOT_NUMBERS, 0.6)),
    ("cold_exploration in [0, 1), shares < 1", lambda v: _lp(cold_exploration=v), "cold_exploration",
     (0.0, 0.5, 0.74), (-0.01, 1.0, 0.8, *NOT_NUMBERS, 0.75)),
    ("revisit in [0, 1), shares < 1", lambda v: _lp(revisit=v), "revisit", (0.0, 0.5, 0.64), (-0.01, 1.0, 0.7, 0.65)),
    ("retry in [0, 1), shares < 1", lambda v: _lp(retry=v), "retry", (0.0, 0.5, 0.64), (-0.01, 1.0, 0.7, 0.65)),
    ("min_samples_for_lp >= 1", lambda v: _lp(min_samples_for_lp=v), "min_samples_for_lp",
     (1, 5, 1000), (0, -1, *NOT_INTS)),
    ("noise_z in [0, MAX_Z]", lambda v: _lp(noise_z=v), "noise_z", (0, 0.0, 3.5, MAX_Z),
     (-0.1, MAX_Z * 1.5, 1.7e154, *NOT_NUMBERS)),
    ("frontier_z in [0, MAX_Z]", lambda v: _lp(frontier_z=v), "frontier_z", (0, 0.0, 5, MAX_Z),
     (-0.1, MAX_Z * 1.5, 1.7e154, *NOT_NUMBERS)),
    ("max_baseline in [0, 1)", lambda v: _lp(max_baseline=v), "max_baseline", (0.0, 0.99), (1.0, -0.1, NAN)),
    ("mastered_gain in (0, 1]", lambda v: _lp(mastered_gain=v), "mastered_gain", (1.0, 1, 0.01),
     (0.0, 1.01, -0.1, NAN)),
    ("config_memory in [0, 10^7]", lambda v: _lp(config_memory=v), "config_memory", (0, 10_000_000),
     (-1, 10_000_001, *NOT_INTS)),
    ("admission_candidates in [1, 1024]", lambda v: _lp(admission_candidates=v), "admission_candidates",
     (1, 1024), (0, 1025, *NOT_INTS)),
    ("admission_usefulness in [0, 1]", lambda v: _lp(admission_usefulness=v), "admission_usefulness",
     (0.0, 1.0, 1), (-0.01, 1.01, *NOT_NUMBERS)),
    # staged progression (advancement_threshold defaults to 0.7)
    ("advancement_threshold in (0, 1]", lambda v: _staged(advancement_threshold=v), "advancement_threshold",
     (1.0, 0.01), (0.0, 1.5, -0.2, *NOT_NUMBERS)),
    ("min_episodes >= 1", lambda v: _staged(min_episodes=v), "min_episodes", (1, 200), (0, -3, *NOT_INTS)),
    ("window >= 1", lambda v: _staged(window=v), "window", (1, 200), (0, *NOT_INTS)),
    ("regression_threshold None or in [0, advancement_threshold)", lambda v: _staged(regression_threshold=v),
     "regression_threshold", (None, 0.0, 0.69), (0.7, 0.9, -0.1, NAN, INF, True)),
    ("previous_stage_mix in [0, 1)", lambda v: _staged(previous_stage_mix=v), "previous_stage_mix",
     (0.0, 0.99), (1.0, -0.1, *NOT_NUMBERS)),
    ("stages at least one Stage, distinct names", lambda v: _staged(stages=v), None,
     (_stages()[:1],), ((), [Stage("a", _generator()), Stage("a", _generator())], "easy",
                        [_generator(), _generator()], [("a", _generator()), ("b", _generator())], [None],
                        [Stage("a", _generator()), {"name": "b", "task_generator": _generator()}])),
    ("Stage.name non-empty", lambda v: Stage(v, _generator()), "name", ("x",), ("", None, *NOT_STRINGS)),
    ("Stage.task_generator a TaskGenerator", lambda v: Stage("x", v), "task_generator", (_generator(),),
     (None, {"level": 1}, "only", [_generator()])),
    # the curriculum
    ("algorithm an AlgorithmConfig", lambda v: _curriculum(algorithm=v), "algorithm",
     (_lp(), UniformConfig()), (None, "learning_progress", {"ema_timescale": 0.1}, LearningProgressConfig)),
    # (a level layout held in the config: a description of 300 KB in the shared block's header)
    ("task_generator a TaskGenerator, learning progress", lambda v: CurriculumConfig(task_generator=v), "task_generator",
     (_generator(), _weights(1.0), SingleTaskGenerator({"level": 1, "layout": "#." * 150_000})), (None, {"level": 1}, "only", [_generator()], Stage("x", _generator()))),
    ("task_generator a TaskGenerator, uniform", lambda v: CurriculumConfig(task_generator=v, algorithm=UniformConfig()),
     "task_generator", (_generator(),), (None, {"level": 1})),
    ("task_generator None with staged progression (its stages carry the generators)",
     lambda v: CurriculumConfig(task_generator=v, algorithm=_staged()), "task_generator", (None,),
     (_generator(), {"level": 1}, "only")),
    ("num_active_tasks in [1, MAX_ACTIVE_TASKS]", lambda v: _curriculum(num_active_tasks=v), "num_active_tasks",
     (1, MAX_ACTIVE_TASKS), (0, MAX_ACTIVE_TASKS + 1, *NOT_INTS)),
    ("seed >= 0", lambda v: _curriculum(seed=v), "seed", (0, 2**40), (-1, *NOT_INTS)),
    ("min_presentations >= 1", lambda v: _curriculum(min_presentations=v), "min_presentations", (1,),
     (0, *NOT_INTS)),
    ("eviction_percentile in [0, 100]", lambda v: _curriculum(eviction_percentile=v), "eviction_percentile",
     (0, 100, 100.0, 0.5), (-0.1, 100.1, *NOT_NUMBERS)),
    ("score_range (low, high), low < high, within +-MAX_SCORE_MAGNITUDE", lambda v: _curriculum(score_range=v), None,
     ((-1.0, 1.0), (0, 100), [0, 1], (-MAX_SCORE_MAGNITUDE, MAX_SCORE_MAGNITUDE)),
     ((1, 1), (1.0, 0.0), (0.0, INF), (NAN, 1.0), (0.0,), (0, 1, 2), "01", (-2 * MAX_SCORE_MAGNITUDE, 0.0),
      (0.0, 2 * MAX_SCORE_MAGNITUDE), (-2 * MAX_SCORE_MAGNITUDE, -MAX_SCORE_MAGNITUDE))),
    ("refresh_interval None or in [1, MAX_REFRESH_INTERVAL]", lambda v: _curriculum(refresh_interval=v), None,
     (None, 1, MAX_REFRESH_INTERVAL), (0, MAX_REFRESH_INTERVAL + 1, 1.0, True)),
    # generators
    ("ValueRange.low/high low <= high, finite", lambda v: _value_range(*v), None,
     ((1, 1), (0.5, 2.0), (-3, 4)), ((2, 1), (1.0, 0.5), (NAN, 1), (0, INF))),
    ("WeightedTaskSetGenerator.children weights >= 0, some > 0", lambda v: _weights(*v), None,
     ((1.0, 0.0), (2, 1)), ((1.0, -1.0), (2.0, -0.5), (0.0, 0.0), (NAN, 1.0), (INF, 1.0), (1.0, True), (1.0, "1"))),
    ("BucketedTaskGenerator.buckets/bucket keys dotted, values non-empty lists or ranges", lambda v: BucketedTaskGenerator({}, v),
     None,
     ({"a.b": [1]}, {"a": ValueRange(0, 1)}), ({"a": []}, {"": [1]}, {"a..b": [1]}, {"a": "xy"})),
    ("BucketedTaskGenerator.value_labels label every value of a listed bucket with a non-empty string",
     lambda v: BucketedTaskGenerator({}, {"a": [1, 2], "r": ValueRange(0, 1)}, value_labels=v), None,
     (None, {}, {"a": {1: "x", 2: "y"}}, {"a": {1: "x", 2: "x", 3: "z"}}),
     ({"a": {1: "x", 2: ""}}, {"a": {1: "x"}}, {"a": {1: "x", 2: 3}}, {"a": {1: "x", 2: None}}, {"b": {1: "x"}},
      {"r": {0: "x"}}, {"a": ["x", "y"]}, [("a", {1: "x", 2: "y"})])),
    ("BucketedTaskGenerator.value_labels of a bucket of unhashable values (spawn points as lists): none can be keyed",
     lambda v: BucketedTaskGenerator({}, {"spawn": [[0, 0], [5, 5]]}, value_labels=v), None, (None, {}),
     ({"spawn": {(0, 0): "corner", (5, 5): "middle"}}, {"spawn": {(0, 0): "corner"}}, {"spawn": {}})),
    ("SingleTaskGenerator.label a string", lambda v: SingleTaskGenerator({"level": 1}, label=v), "label",
     ("x", "maze_small"), NOT_STRINGS),
    ("BucketedTaskGenerator.label a string", lambda v: BucketedTaskGenerator({}, {"a": [1]}, label=v), "label",
     ("x",), NOT_STRINGS),
    ("SingleTaskGenerator.env_cfg a mapping", lambda v: SingleTaskGenerator(v), None, ({}, {"level": 1}),
     ([("level", 1)], "level", None)),
    ("WeightedTaskSetGenerator.children a non-empty sequence of generators or (generator, weight) pairs",
     WeightedTaskSetGenerator, None, ([_generator()], (_generator(), (_generator(), 2.0)), [(_generator(), 1)]),
     ([], (), None, "ab", _generator(), {_generator(): 1.0}, [(_generator(), 1.0, 2.0)], [(_generator(),)],
      [{"level": 1}], [(1.0, _generator())], [None])),
    ("BucketedTaskGenerator.base_cfg a mapping", lambda v: BucketedTaskGenerator(v, {"a": [1]}), None,
     ({}, {"level": 1}), ([("level", 1)], "level", None, [])),
    ("BucketedTaskGenerator.seed an integer", lambda v: BucketedTaskGenerator({}, {"a": [1]}, seed=v), "seed",
     (0, 2**40, np.int64(3), np.uint32(3)), NOT_INTS),
    ("WeightedTaskSetGenerator.seed an integer", lambda v: WeightedTaskSetGenerator([_generator()], seed=v), "seed",
     (0, 2**40, np.int64(3)), NOT_INTS),
]


def _closed_curriculum(**options: Any) -> Curriculum:
    curriculum = Curriculum(_curriculum(), **options)
    curriculum.close()
    return curriculum


def _reseeded(seed: Any) -> Curriculum:
    curriculum = Curriculum(_curriculum())
    try:
        curriculum.reseed(seed)
    finally:
        curriculum.close()
    return curriculum


def _attached(seed: Any) -> Curriculum:
    creator = Curriculum(_curriculum(), shared_memory=True)
    try:
        Curriculum.attach(creator.shared_memory_name, creator.config, seed=seed).close()
    finally:
        creator.close()
    return creator


def _wrapped(wrapper: type, make_env: Callable[[], Any], **options: Any) -> Any:
    curriculum = Curriculum(_curriculum())
    try:
        env = wrapper(make_env(), curriculum, **options)
        env.close()
    finally:
        curriculum.close()
    return env


def _puffer_env(**options: Any) -> CurriculumEnv:
    return _wrapped(CurriculumEnv, ExactAccountingEnv, **options)


def _gym_env(**options: Any) -> GymCurriculumEnv:
    return _wrapped(GymCurriculumEnv, GymExactAccountingEnv, **options)


def _exact_env(buf: Any = None, seed: int = 0) -> ExactAccountingEnv:
    return ExactAccountingEnv(buf=buf, seed=seed)


def _serial_vector(*, env: Callable[..., Any] | None = None, **options: Any) -> Any:
    options.setdefault("num_envs", 2)
    curriculum = Curriculum(_curriculum(algorithm=UniformConfig()))  # centralized tracking takes uniform
    try:
        vecenv = make_curriculum_vecenv(env or _exact_env, curriculum, backend=options.pop("backend", "Serial"),
                                        **options)
        vecenv.close()
    finally:
        curriculum.close()
    return vecenv


def _hand_built_vector(wrapper: type, **options: Any) -> None:
    """`wrapper` built by hand (the module docstring of `curriculum.vector`, "Built by hand") over
    a Serial vector of two `CurriculumEnv`s, with `options`: it checks them as the factory does."""
    curriculum = Curriculum(_curriculum(algorithm=UniformConfig()))
    local = wrapper is SharedCurriculumVecEnv  # (centralized workers leave the recording to the wrapper)

    def make_env(buf: Any = None, seed: int = 0) -> CurriculumEnv:
        return CurriculumEnv(ExactAccountingEnv(buf=buf, seed=seed), curriculum, seed=seed, buf=buf,
                             local_tracking=local)

    vecenv = pufferlib.vector.make(make_env, backend=pufferlib.vector.Serial, num_envs=2)
    try:
        wrapped = wrapper(vecenv, curriculum, **options)
    except BaseException:
        vecenv.close()
        raise
    finally:
        curriculum.close()
    wrapped.close()


class _ChecksPassed(Exception):
    """Raised by the first env a vector builds: every check of its arguments came before."""


def _refuse_to_build(buf: Any = None, seed: int = 0) -> Any:
    raise _ChecksPassed


def _vector_checks(backend: str = "Serial", **options: Any) -> None:
    """A vector's argument checks alone, up to building its first env (a bound such as
    `MAX_NUM_ENVS` is accepted without building that many envs; Multiprocessing builds its
    first env in the trainer's process, before it starts any worker)."""
    curriculum = Curriculum(_curriculum(algorithm=UniformConfig()))
    try:
        make_curriculum_vecenv(_refuse_to_build, curriculum, backend=backend, **options).close()
    except _ChecksPassed:
        pass
    finally:
        curriculum.close()


NOT_TIMEOUTS = (0, 0.0, -1.0, NAN, INF, 10**400, True, "5")
"""Outside every timeout's domain (None or a finite number > 0): 10**400 is a finite int no float holds."""
LIMITS_LAYOUT_ENVS = 12
"""The layout check runs every `num_envs` up to this and every batch size of each."""

# the same columns as DOMAINS, for keyword options (nothing is read back)
OPTIONS: list[tuple[str, Callable[[Any], Any], str | None, tuple[Any, ...], tuple[Any, ...]]] = [
    ("shared_memory a bool, local curriculum", lambda v: _closed_curriculum(shared_memory=v), None, (False,),
     (0, "yes", None, np.bool_(False))),
    ("shared_memory a bool, shared curriculum", lambda v: _closed_curriculum(shared_memory=v), None, (True,),
     (1, "True", np.bool_(True))),
    ("lock_timeout None or finite > 0, local curriculum", lambda v: _closed_curriculum(lock_timeout=v), None,
     (None, 1e-3, 30), NOT_TIMEOUTS),
    ("lock_timeout None or finite > 0, shared curriculum",
     lambda v: _closed_curriculum(shared_memory=True, lock_timeout=v), None, (None, 1e-3, 30), NOT_TIMEOUTS),
    ("seed >= 0, Curriculum.reseed", _reseeded, None, (0, 2**40, np.int64(3), np.uint32(3)), (-1, None, *NOT_INTS[:3])),
    ("seed None or >= 0, Curriculum.attach", _attached, None, (None, 0, 2**40, np.int64(7)), (-1, *NOT_INTS[:3])),
    ("seed None or >= 0, CurriculumEnv", lambda v: _puffer_env(seed=v), None, (None, 0, 2**40, np.int64(5)),
     (-1, *NOT_INTS[:3])),
    ("seed None or >= 0, GymCurriculumEnv", lambda v: _gym_env(seed=v), None, (None, 0, 2**40, np.int64(5)),
     (-1, *NOT_INTS[:3])),
    ("stats_interval >= 1, CurriculumEnv", lambda v: _puffer_env(stats_interval=v), None, (1, 1000, np.int64(5)),
     (0, -1, *NOT_INTS)),
    ("stats_interval >= 1, GymCurriculumEnv", lambda v: _gym_env(stats_interval=v), None, (1, 1000, np.int64(5)),
     (0, -1, *NOT_INTS)),
    ("score_fn None or callable, CurriculumEnv", lambda v: _puffer_env(score_fn=v), None, (None, max), (1, "mean")),
    ("score_fn None or callable, GymCurriculumEnv", lambda v: _gym_env(score_fn=v), None, (None, max), (1, "mean")),
    ("local_tracking a bool, CurriculumEnv", lambda v: _puffer_env(local_tracking=v), None, (True,), (1, "yes", None)),
    ("local_tracking a bool, GymCurriculumEnv", lambda v: _gym_env(local_tracking=v), None, (True,), (1, None)),
    ("num_envs in [1, MAX_NUM_ENVS], vector", lambda v: _serial_vector(num_envs=v), None, (1, 3, np.int64(2)),
     (0, MAX_NUM_ENVS + 1, *NOT_INTS)),
    ("num_envs in [1, MAX_NUM_ENVS], vector checks", lambda v: _vector_checks(num_envs=v), None,
     (1, MAX_NUM_ENVS, np.int64(MAX_NUM_ENVS)), (0, MAX_NUM_ENVS + 1)),
    ("seed >= 0, vector", lambda v: _serial_vector(seed=v), None, (0, 2**40, np.uint32(3)), (-1, *NOT_INTS)),
    ("stats_interval >= 1, vector", lambda v: _serial_vector(stats_interval=v), None, (1, 1000, np.int32(5)),
     (0, -1, *NOT_INTS)),
    ("worker_timeout None or finite > 0, vector", lambda v: _serial_vector(worker_timeout=v), None,
     (None, 1e-3, 30), NOT_TIMEOUTS),
    *[(f"worker_timeout None or finite > 0, {wrapper.__name__} built by hand",
       lambda v, wrapper=wrapper: _hand_built_vector(wrapper, worker_timeout=v), None, (None, 1e-3, 30), NOT_TIMEOUTS)
      for wrapper in (SharedCurriculumVecEnv, CentralizedCurriculumVecEnv)],
    ("stats_interval >= 1, CentralizedCurriculumVecEnv built by hand",
     lambda v: _hand_built_vector(CentralizedCurriculumVecEnv, stats_interval=v), None, (1, 1000, np.int32(5)),
     (0, -1, *NOT_INTS)),
    ("score_fn None or callable, vector", lambda v: _serial_vector(score_fn=v), None, (None, max), (1, "mean")),
    ("backend 'Serial' or 'Multiprocessing' (or the pufferlib class), vector",
     lambda v: _serial_vector(backend=v, tracking="centralized"), None,
     ("Serial", "Multiprocessing", pufferlib.vector.Serial, pufferlib.vector.Multiprocessing),
     ("serial", "Ray", "Native", None, 1, object, pufferlib.vector.PufferEnv)),
    ("zero_copy a bool, vector", lambda v: _serial_vector(zero_copy=v), None, (True, False), (0, 1, "False", None)),
    ("overwork a bool, vector", lambda v: _serial_vector(overwork=v), None, (True, False), (0, 1, "False", None)),
    ("tracking 'shared' or 'centralized', vector", lambda v: _serial_vector(tracking=v), None,
     ("shared", "centralized"), ("Shared", "", None, 1, "ray")),
    ("num_workers None or dividing num_envs, vector", lambda v: _serial_vector(num_envs=4, num_workers=v), None,
     (None, 1, 2, 4, np.int64(2)), (0, 3, 5, -1, *NOT_INTS[:3])),
    ("batch_size None or num_envs on Serial, vector", lambda v: _serial_vector(num_envs=4, batch_size=v), None,
     (None, 4), (0, 2, 5, 4.0, True)),
    ("batch_size dividing num_envs under zero_copy (pufferlib's default), Multiprocessing",
     lambda v: _serial_vector(backend="Multiprocessing", tracking="centralized", num_envs=4, num_workers=4,
                              overwork=True, batch_size=v), None, (None, 2), (3, 0, 5, 2.0)),
    ("batch_size a whole number of workers' envs, Multiprocessing",
     lambda v: _serial_vector(backend="Multiprocessing", tracking="centralized", num_envs=4, num_workers=2,
                              batch_size=v), None, (None, 2, 4), (1, 3)),
    ("batch_size at most num_envs also without zero_copy, Multiprocessing",  # (whole workers: 4 is two batches' worth)
     lambda v: _serial_vector(backend="Multiprocessing", tracking="centralized", num_envs=2, num_workers=2,
                              overwork=True, zero_copy=False, batch_size=v), None, (2,), (3, 4)),
    ("batch_size one that whole workers within the cores can serve, Multiprocessing",  # 64 workers of 1 env for 1
     lambda v: _serial_vector(backend="Multiprocessing", tracking="centralized", num_envs=64, batch_size=v,
                              zero_copy=False), None, (None,), (1,)),
    ("num_workers at most the physical cores without overwork, Multiprocessing",
     lambda v: _serial_vector(backend="Multiprocessing", tracking="centralized", num_envs=256, num_workers=v), None,
     (1,), (256,)),
    ("agent_step >= 0, process_training_stats", lambda v: process_training_stats({}, agent_step=v, epoch=0), None,
     (0, 2**40, np.int64(256), np.uint32(3)), (-1, np.int64(-1), *NOT_INTS)),
    ("epoch >= 0, process_training_stats", lambda v: process_training_stats({}, agent_step=0, epoch=v), None,
     (0, 7, np.int64(1), np.int8(3)), (-1, *NOT_INTS)),
]


def _field_name(what: str) -> str:
    return what.split(" ", 1)[0].split(".")[-1]


@pytest.mark.parametrize(("what", "build", "attribute", "accepted", "refused"), DOMAINS + OPTIONS,
                         ids=[_field_name(d[0]) for d in DOMAINS] + [d[0].split(",")[-1].strip().split(" ")[0] + "-"
                                                                     + _field_name(d[0]) for d in OPTIONS])
def test_a_field_accepts_its_domain_and_refuses_the_rest_by_name(what, build, attribute, accepted, refused) -> None:
    """Every accepted value is held as given; every refused one raises `CurriculumConfigError`
    naming the field (and a refused text as received, quoted). A numpy integer in place of an accepted int (a seed from `np.arange`) is
    refused by name too, or taken as that int: a config that describes itself otherwise has
    checkpoints and shared trackers the same config written with ints refuses."""
    for value in accepted:
        try:
            built = build(value)
        except CurriculumConfigError as error:
            pytest.fail(f"{what}: {value!r} is in the documented domain but was refused: {error}")
        if attribute is not None:
            held = getattr(built, attribute)
            assert held == value or (held is None and value is None), (
                f"{what}: built with {value!r}, the config holds {held!r}")
        if type(value) is int and -2**63 <= value < 2**63 and callable(getattr(built, "describe", None)):
            try:
                twin = build(np.int64(value))
            except CurriculumConfigError:
                continue
            described = [json.dumps(b.describe(), sort_keys=True, default=repr) for b in (twin, built)]
            assert described[0] == described[1], (
                f"{what}: np.int64({value}) was accepted, and the config describes itself as {_short(described[0])}, "
                f"as {_short(described[1])} with the int {value}")
    name = _field_name(what)
    for value in [*refused, *_falsy_twins(refused, accepted), *_entries_not_numbers(accepted)]:
        try:
            build(value)
        except CurriculumConfigError as error:
            assert any(part in str(error) or part.lower() in str(error).lower() for part in name.split("/")), (
                f"{what}: {value!r} was refused, but the error does not name `{name}`: {error}")
            assert not isinstance(value, str) or not value or f"received {value}" not in str(error), (
                f"{what}: the text {value!r} was refused, but the error shows it received unquoted (as {value!r}, "
                f"so '64' is not read as the number 64): {error}")
            continue
        except Exception as error:  # noqa: BLE001 - any other error is the failure reported below
            pytest.fail(f"{what}: {value!r} raised {type(error).__name__} ({error}), expected CurriculumConfigError "
                        f"naming `{name}`")
        pytest.fail(f"{what}: {value!r} is outside the documented domain but was accepted")


def _falsy_twins(refused: Sequence[Any], accepted: Sequence[Any]) -> list[Any]:
    """The falsy value (`type(value)()`: 0, 0.0, "", False, an empty list) of each refused
    value's type that no accepted value has: a check written by truth (`if score_fn and not
    callable(score_fn)`) lets exactly these through unchecked."""
    def domain(kind: type) -> type:  # an int where a float is taken is the same number
        return float if kind is int else kind

    kinds = {domain(type(value)) for value in accepted}
    seen = {(type(value), repr(value)) for value in refused}
    twins = []
    for value in refused:
        kind = type(value)
        if domain(kind) in kinds or kind not in (int, float, str, bool, list, tuple, dict, bytes):
            continue
        twin = kind()
        if (kind, repr(twin)) not in seen:
            seen.add((kind, repr(twin)))
            twins.append(twin)
    return twins


def _entries_not_numbers(accepted: Sequence[Any]) -> list[Any]:
    """Of each accepted tuple or list of numbers (a range, a pair of bounds, weights), a copy
    with one entry in turn made each of `NOT_NUMBERS` (an int no float holds among them): every
    such copy is outside the domain, whichever entry it is."""
    numbers = [value for value in accepted if isinstance(value, (tuple, list)) and value
               and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)]
    return [type(value)((*value[:i], bad, *value[i + 1:])) for value in numbers[:1]
            for i in range(len(value)) for bad in NOT_NUMBERS]


def _numpy_twins(value: Any) -> list[Any]:
    """The numpy scalars holding the same number as the int or float `value` (none for others)."""
    if type(value) is int and -2**31 <= value < 2**31:
        return [np.int64(value), np.int32(value), *([np.uint32(value)] if value >= 0 else [])]
    if type(value) is int and -2**63 <= value < 2**63:
        return [np.int64(value)]
    if type(value) is float:
        return [np.float64(value), np.float32(value)]
    return []


@pytest.mark.parametrize(("what", "build", "attribute", "accepted", "refused"), OPTIONS,
                         ids=[d[0].split(",")[-1].strip().split(" ")[0] + "-" + _field_name(d[0]) for d in OPTIONS])
def test_an_option_takes_numpy_numbers_as_the_numbers_they_hold(what, build, attribute, accepted, refused) -> None:
    """A constructor option or call argument (not a config field, which must describe itself in
    JSON) takes a numpy integer or float wherever it takes the int or float it holds: a timeout
    or seed computed with numpy (`np.float64(10.0) / 4`, a seed from `np.arange`) is a number of
    the documented domain."""
    for value in accepted:
        for twin in _numpy_twins(value):
            try:
                build(twin)
            except CurriculumConfigError as error:
                pytest.fail(f"{what}: {twin!r} holds {value!r}, which is in the documented domain, but was refused: "
                            f"{error}")


def test_every_config_field_has_its_domain_checked() -> None:
    """Each field of each config class is in `DOMAINS` (one of its rows builds that class and
    names it): a field added or left out here has a check nobody proved can fail."""
    covered = set()
    for what, build, _, accepted, _ in DOMAINS:
        built = build(accepted[0])
        covered.add((type(built).__name__, _field_name(what)))
    missing = [f"{cls.__name__}.{field.name}" for cls in (LearningProgressConfig, StagedProgressionConfig, UniformConfig,
                                                          CurriculumConfig, Stage)
               for field in dataclasses.fields(cls) if (cls.__name__, field.name) not in covered]
    assert not missing, f"config fields whose documented domain no row of DOMAINS checks: {missing}"


#: the task generators' and ValueRange's constructors: every parameter a row of DOMAINS checks
GENERATORS = (SingleTaskGenerator, WeightedTaskSetGenerator, BucketedTaskGenerator, ValueRange)


def test_every_generator_argument_has_its_domain_checked() -> None:
    """Each parameter of each task generator's constructor (and of `ValueRange`) is named by
    a row of `DOMAINS` that builds that class (`Class.a/b` for a row checking two at once)."""
    covered = set()
    for what, build, _, accepted, _ in DOMAINS:
        built = build(accepted[0])
        covered.update((type(built).__name__, name) for name in _field_name(what).split("/"))
    missing = [f"{cls.__name__}({parameter.name})" for cls in GENERATORS
               for parameter in inspect.signature(cls).parameters.values()
               if (cls.__name__, parameter.name) not in covered]
    assert not missing, f"generator arguments whose documented domain no row of DOMAINS checks: {missing}"


def _as_curriculum_config(built: Any) -> CurriculumConfig | None:
    """The curriculum config a DOMAINS value builds, or is part of (None for generators)."""
    if isinstance(built, CurriculumConfig):
        return built
    if isinstance(built, StagedProgressionConfig):
        return CurriculumConfig(algorithm=built, num_active_tasks=4)
    if isinstance(built, (LearningProgressConfig, UniformConfig)):
        return CurriculumConfig(task_generator=_generator(), algorithm=built, num_active_tasks=4)
    if isinstance(built, Stage):
        return CurriculumConfig(algorithm=_staged(stages=(built,)), num_active_tasks=4)
    return None


def _wrapping(wrapper: type, make_env: Callable[[], Any], curriculum: Any) -> Any:
    """`wrapper(make_env(), curriculum)`, closed again (the curriculum is the caller's)."""
    wrapper(make_env(), curriculum).close()
    return curriculum


def _following(wrapper: type, make_env: Callable[[], Any], curriculum: Any) -> Any:
    """`wrapper(make_env(), curriculum)` following a stage broadcast (`local_tracking=False`),
    closed again."""
    wrapper(make_env(), curriculum, local_tracking=False, stage_source=_staged_broadcast()).close()
    return curriculum


class _NoStats(ProtocolView):
    """A curriculum that draws and records but reports nothing (no callable `stats()`, which a
    wrapper reads at its first completion)."""

    stats = None  # type: ignore[assignment]

    def close(self) -> None:
        self._inner.close()


class _NoStageSync(ProtocolView):
    """A curriculum seen through `CurriculumProtocol` alone (a proxy, a client): it cannot adopt a
    broadcast stage."""

    def close(self) -> None:
        self._inner.close()


def _wrapping_env(wrapper: type, env: Any) -> Any:
    """`wrapper(env, curriculum)` for the `env` argument: a zero-argument callable builds it."""
    return _wrapped(wrapper, env if callable(env) else (lambda: env))


def _vector_of(curriculum: Any) -> Any:
    make_curriculum_vecenv(_exact_env, curriculum, backend="Serial", num_envs=2).close()
    return curriculum


def _vector_from(env_creator: Any) -> Any:
    curriculum = Curriculum(_curriculum(algorithm=UniformConfig()))
    try:
        make_curriculum_vecenv(env_creator, curriculum, backend="Serial", num_envs=2).close()
    finally:
        curriculum.close()
    return curriculum


def _tracked_vector(curriculum: Any, tracking: str, backend: str) -> Any:
    make_curriculum_vecenv(_exact_env, curriculum, backend=backend, tracking=tracking, num_envs=2).close()
    return curriculum


class _Lacking:
    """`inner` seen without its `member`: a protocol object one member short, which must be
    refused as surely as an object with none of them (a check of one member in place of all
    takes it in)."""

    def __init__(self, inner: Any, member: str) -> None:
        self._inner, self._member = inner, member

    def __getattr__(self, name: str) -> Any:
        if name == self._member:
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"{type(self._inner).__name__} without `{self._member}`"


def _curricula_one_member_short() -> list[_Live]:
    """A curriculum without each member of `CurriculumProtocol` in turn."""
    return [_Live(f"Curriculum(uniform config) without {member}()",
                  lambda member=member: _Lacking(Curriculum(_curriculum(algorithm=UniformConfig())), member))
            for member in ("get_task", "update_task_performance", "stats")]


class _StageSourceShort:
    """Builds a `StageBroadcast` without `member` (the rows build a stage source by calling it)."""

    def __init__(self, member: str) -> None:
        self.member = member

    def __call__(self) -> _Lacking:
        return _Lacking(_staged_broadcast(), self.member)

    def __repr__(self) -> str:
        return f"a StageBroadcast without `{self.member}`"


def _stage_sources_one_member_short() -> list[_StageSourceShort]:
    """A stage source without each member of `StageSource` in turn (`version`, `read()`)."""
    return [_StageSourceShort("version"), _StageSourceShort("read")]


def _staged_broadcast() -> Any:
    from curriculum.vector import StageBroadcast

    return StageBroadcast()


def _attached_to(*, name: Any = None, config: Any = None) -> Curriculum:
    creator = Curriculum(_curriculum(), shared_memory=True)
    try:
        Curriculum.attach(creator.shared_memory_name if name is None else name,
                          creator.config if config is None else config).close()
    finally:
        creator.close()
    return creator


#: File names multiprocessing's resource tracker cannot carry (its messages are ASCII lines of
#: ':'-separated fields): a block created under one would never be unlinked for a dead creator.
_NAMES_NO_TRACKER_CARRIES = ("curriculum_\u00e9t\u00e9", "run:1", "run\n1", "run 1", " run", "run\t")


class _Live:
    """A value built when the row runs (a curriculum is a resource the row must close)."""

    def __init__(self, what: str, build: Callable[[], Any]) -> None:
        self.what, self.build = what, build

    def __repr__(self) -> str:
        return self.what


def _altered_env(rebuilt: bool = False, **attributes: Any) -> _Live:
    """A one-agent `ExactAccountingEnv` with `attributes` set after it was built (or, `rebuilt`,
    an `ExactAccountingEnv` built with them)."""
    def build() -> ExactAccountingEnv:
        if rebuilt:
            return ExactAccountingEnv(**attributes)
        env = ExactAccountingEnv()
        for name, value in attributes.items():
            setattr(env, name, value)
        return env

    settings = ", ".join(f"{name}={value!r}" for name, value in attributes.items())
    return _Live(f"ExactAccountingEnv({settings})" if rebuilt else f"ExactAccountingEnv with {settings}", build)


def _altered_gym_env(**attributes: Any) -> _Live:
    """A `GymExactAccountingEnv` with `attributes` set after it was built."""
    def build() -> GymExactAccountingEnv:
        env = GymExactAccountingEnv()
        for name, value in attributes.items():
            setattr(env, name, value)
        return env

    settings = ", ".join(f"{name}={value!r}" for name, value in attributes.items())
    return _Live(f"GymExactAccountingEnv with {settings}", build)


def _env_given_buffers(kind: str) -> Any:
    """`CurriculumEnv(env, curriculum, buf=...)` where `buf` is what the env was built on
    ("shared"), a copy of it ("copied": the env does not write into the vector's buffers), or
    the buffers of a two-agent vector for a one-agent env ("two agents")."""
    donor = ExactAccountingEnv(num_agents=2 if kind == "two agents" else 1)
    buffers = {name: getattr(donor, name) for name in BUFFER_NAMES}
    env = ExactAccountingEnv(buf=buffers) if kind == "shared" else ExactAccountingEnv()
    if kind == "copied":
        buffers = {name: array.copy() for name, array in buffers.items()}
    curriculum = Curriculum(_curriculum())
    try:
        CurriculumEnv(env, curriculum, buf=buffers).close()
    finally:
        curriculum.close()
    return curriculum


@dataclasses.dataclass
class _UnimplementedAlgorithm(AlgorithmConfig):
    """An `AlgorithmConfig` of the user's own (or a misspelt one): a config no algorithm implements."""

    name = "my_algorithm"
    temperature: float = 1.0


def _built(config: CurriculumConfig, **options: Any) -> None:
    Curriculum(config, **options).close()


# (what, build, accepted, refused, error): positional arguments and options whose refusal is
# not a config error, or that take objects rather than numbers. A `_Live` value is built for
# the row and closed after it.
ARGUMENTS: list[tuple[str, Callable[[Any], Any], tuple[Any, ...], tuple[Any, ...], type[Exception]]] = [
    ("algorithm one the library implements, Curriculum", _built, (_curriculum(algorithm=UniformConfig()),),
     (_curriculum(algorithm=_UnimplementedAlgorithm()),), CurriculumConfigError),
    ("algorithm one the library implements, shared Curriculum", lambda v: _built(v, shared_memory=True),
     (_curriculum(algorithm=UniformConfig()),), (_curriculum(algorithm=_UnimplementedAlgorithm()),),
     CurriculumConfigError),
    ("curriculum a CurriculumProtocol, CurriculumEnv",
     lambda v: _wrapping(CurriculumEnv, ExactAccountingEnv, v),
     (_Live("Curriculum(config)", lambda: Curriculum(_curriculum())),),
     (object(), None, _curriculum(), "curriculum", _Live("a curriculum without stats()", lambda: _NoStats(Curriculum(_curriculum()))),
      *_curricula_one_member_short()), CurriculumConfigError),
    ("curriculum a CurriculumProtocol, GymCurriculumEnv",
     lambda v: _wrapping(GymCurriculumEnv, GymExactAccountingEnv, v),
     (_Live("Curriculum(config)", lambda: Curriculum(_curriculum())),),
     (object(), None, _curriculum(), _Live("a curriculum without stats()", lambda: _NoStats(Curriculum(_curriculum()))),
      *_curricula_one_member_short()), CurriculumConfigError),
    *[(f"curriculum one with apply_sync_state() to follow a stage_source, {wrapper.__name__}",
       lambda v, wrapper=wrapper, env=env: _following(wrapper, env, v),
       (_Live("Curriculum(uniform config)", lambda: Curriculum(_curriculum(algorithm=UniformConfig()))),),
       (_Live("a CurriculumProtocol without apply_sync_state()",
              lambda: _NoStageSync(Curriculum(_curriculum(algorithm=UniformConfig())))),), CurriculumConfigError)
      for wrapper, env in ((CurriculumEnv, ExactAccountingEnv), (GymCurriculumEnv, GymExactAccountingEnv))],
    ("curriculum a CurriculumProtocol, vector", _vector_of,
     (_Live("Curriculum(uniform config)", lambda: Curriculum(_curriculum(algorithm=UniformConfig()))),),
     (object(), None, _curriculum(algorithm=UniformConfig()), *_curricula_one_member_short()), CurriculumConfigError),
    ("curriculum a local one under tracking='centralized', vector",
     lambda v: _tracked_vector(v, "centralized", "Serial"),
     (_Live("Curriculum(uniform config)", lambda: Curriculum(_curriculum(algorithm=UniformConfig()))),),
     (_Live("Curriculum(uniform config, shared_memory=True)",
            lambda: Curriculum(_curriculum(algorithm=UniformConfig()), shared_memory=True)),
      _Live("Curriculum(learning progress config)", lambda: Curriculum(_curriculum(algorithm=_lp())))),
     CurriculumConfigError),
    ("curriculum a shared one under tracking='shared' on Multiprocessing, vector",
     lambda v: _tracked_vector(v, "shared", "Multiprocessing"),
     (_Live("Curriculum(config, shared_memory=True)", lambda: Curriculum(_curriculum(), shared_memory=True)),),
     (_Live("Curriculum(config)", lambda: Curriculum(_curriculum())),), CurriculumConfigError),
    ("env a PufferEnv, CurriculumEnv", lambda v: _wrapping_env(CurriculumEnv, v), (ExactAccountingEnv,),
     (object(), None, GymExactAccountingEnv()), EnvContractError),
    ("env a PufferEnv with a callable set_env_config and numeric per-agent buffers, CurriculumEnv",
     lambda v: _wrapping_env(CurriculumEnv, v), (ExactAccountingEnv,),
     (_altered_env(set_env_config=None), _altered_env(rewards=np.array([None])),
      _altered_env(terminals=np.zeros((1, 2), dtype=bool))), EnvContractError),
    ("env a PufferEnv whose num_agents, an integer >= 1, matches its buffers, CurriculumEnv",
     lambda v: _wrapping_env(CurriculumEnv, v), (ExactAccountingEnv, _altered_env(num_agents=3, rebuilt=True)),
     (_altered_env(num_agents=True), _altered_env(num_agents=0), _altered_env(num_agents=2),
      _altered_env(num_agents=1.0)), AgentCountError),
    ("buf the buffers the env writes into, CurriculumEnv", _env_given_buffers, ("shared",), ("copied",),
     EnvContractError),
    ("buf slices of the env's agent count, CurriculumEnv", _env_given_buffers, ("shared",), ("two agents",),
     AgentCountError),
    ("env a gymnasium.Env, GymCurriculumEnv", lambda v: _wrapping_env(GymCurriculumEnv, v), (GymExactAccountingEnv,),
     (object(), None, ExactAccountingEnv()), CurriculumConfigError),
    # (a breach of the env contract, as the pufferlib wrapper names it)
    ("env a gymnasium.Env with a callable set_env_config, GymCurriculumEnv",
     lambda v: _wrapping_env(GymCurriculumEnv, v), (GymExactAccountingEnv,),
     (_altered_gym_env(set_env_config=None), _altered_gym_env(set_env_config="set")), EnvContractError),
    ("buf None or the vector's buffers, CurriculumEnv", lambda v: _puffer_env(buf=v), (None,),
     (object(), [], "buf"), EnvContractError),
    ("env_creator a callable, vector", _vector_from, (_exact_env,), (5, None, "env"), CurriculumConfigError),
    ("make_curriculum_vecenv options only batch_size, zero_copy and overwork, vector", lambda v: _serial_vector(**v),
     ({}, {"zero_copy": True}, {"overwork": False}), ({"zerocopy": True}, {"num_env": 2}, {"backend_kwargs": {}}),
     CurriculumConfigError),
    ("stage_source None or a StageSource, CurriculumEnv",
     lambda v: _puffer_env(local_tracking=False, stage_source=v() if callable(v) else v),
     (None, _staged_broadcast), (object(), 1, "stage", *_stage_sources_one_member_short()), CurriculumConfigError),
    ("stage_source None or a StageSource, GymCurriculumEnv",
     lambda v: _gym_env(local_tracking=False, stage_source=v() if callable(v) else v),
     (None, _staged_broadcast), (object(), 1, *_stage_sources_one_member_short()), CurriculumConfigError),
    ("stage_source only with local_tracking=False, CurriculumEnv",
     lambda v: _puffer_env(stage_source=v() if callable(v) else v), (None,), (_staged_broadcast,),
     CurriculumConfigError),
    ("stage_source only with local_tracking=False, GymCurriculumEnv",
     lambda v: _gym_env(stage_source=v() if callable(v) else v), (None,), (_staged_broadcast,),
     CurriculumConfigError),
    ("config a CurriculumConfig, local curriculum", lambda v: Curriculum(v).close(), (_curriculum(),),
     (None, _lp(), {"algorithm": "uniform"}, 1), CurriculumConfigError),
    ("config a CurriculumConfig, shared curriculum", lambda v: Curriculum(v, shared_memory=True).close(),
     (_curriculum(),), (None, _lp(), {"algorithm": "uniform"}), CurriculumConfigError),
    ("config a CurriculumConfig, Curriculum.attach", lambda v: _attached_to(config=v), (None,),
     (_lp(), {"algorithm": "uniform"}, 1), CurriculumConfigError),
    ("name a shared tracker's file name, Curriculum.attach", lambda v: _attached_to(name=v), (None,),
     # (a file name's limit is 255 bytes: 128 two-byte characters are past it; "." and ".." name
     # directories, /dev/shm and its parent)
     (5, "a/b", b"name", "x" * 256, "\u00e9" * 128, "", ".", "..", "a\0b", *_NAMES_NO_TRACKER_CARRIES),
     CurriculumConfigError),
    ("name None or a file name, SharedMemoryBackend",
     lambda v: SharedMemoryBackend({"level": ("int64", 2)}, name=v, slot_arrays=("level",)).close(),
     # (a file name's limit, 255 bytes, reached)
     (None, f"curriculum_named_{os.getpid()}", f"curriculum_named_{os.getpid()}_".ljust(255, "x")),
     (5, "a/b", b"name", "x" * 256, "\u00e9" * 128, "", ".", "..", "a\0b", *_NAMES_NO_TRACKER_CARRIES),
     CurriculumConfigError),
    ("raw_stats a mapping of stat keys to lists of numbers, process_training_stats",
     lambda v: process_training_stats(v, agent_step=0, epoch=0),
     ({}, {"score": [0.5, np.float32(1)]}, {"episodes": np.ones(3)}),
     # (a list is checked whole: a bad value after good ones as well as first)
     (None, [("score", [1.0])], {"score": "0.5"}, {"score": [None]}, {"score": ["1"]}, {3: [1.0]},
      {"score": [0.5, None]}, {"episodes": [1, True, 1]}, {"score": [0.5, np.float32(1), "1"]},
      {"score": [0.5, np.array([0.1, 0.9])]},
      # (a task id is dropped from the reduced stats, but checked like every other value)
      {"curriculum_stats/task_id": ["3"]}, {"task_id": [None]}, {"curriculum_stats/task_id": [[1, 2]]}),
     CurriculumConfigError),
    ("losses None or a mapping of names to numbers, process_training_stats",
     lambda v: process_training_stats({}, agent_step=0, epoch=0, losses=v),
     (None, {}, {"policy": 0.5, "value": np.float32(2), "entropy": np.array(0.25)}),
     ([("policy", 0.5)], {"policy": "0.5"}, {"policy": None}, {"policy": True}, {1: 0.5}), CurriculumConfigError),
]


def _value(value: Any) -> Any:
    return value.build() if isinstance(value, _Live) else value


def _numpy_bools(value: Any) -> Any:
    """`value` with every bool in it (in dicts and lists too) made a numpy bool, what `x > 0.5`
    gives on numpy data: refused wherever the bool is."""
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, dict):
        return {key: _numpy_bools(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_numpy_bools(item) for item in value]
    return value


def _with_numpy_bool_twins(refused: Sequence[Any]) -> list[Any]:
    """`refused`, and the numpy-bool twin of each value that holds a bool."""
    return [*refused, *(twin for value in refused if not isinstance(value, _Live)
                        for twin in [_numpy_bools(value)] if repr(twin) != repr(value))]


@pytest.mark.parametrize(("what", "build", "accepted", "refused", "error"), ARGUMENTS,
                         ids=[d[0].split(",")[-1].strip().split(" ")[0] + "-" + _field_name(d[0]) for d in ARGUMENTS])
def test_an_argument_accepts_its_domain_and_refuses_the_rest_by_name(what, build, accepted, refused, error) -> None:
    """What the entry points take besides numbers (the env, the curriculum, a stage broadcast,
    raw stats): a wrong kind of object is refused at once with the named error that says so,
    never taken in to fail later with an AttributeError deep inside a run. A numpy bool is
    refused wherever a bool is, and the falsy value of each refused kind no accepted value has."""
    name = _field_name(what)
    refused = _with_numpy_bool_twins(refused)
    refused += _falsy_twins([value for value in refused if not isinstance(value, _Live)],
                            [value for value in accepted if not isinstance(value, _Live)])
    for value in accepted:
        built = _value(value)
        try:
            build(built)
        except CurriculumConfigError as failure:
            pytest.fail(f"{what}: {value!r} is in the documented domain but was refused: {failure}")
        finally:
            if isinstance(value, _Live):
                built.close()
    for value in refused:
        built = _value(value)
        try:
            build(built)
        except error as failure:
            assert name in str(failure) or name.lower() in str(failure).lower(), (
                f"{what}: {value!r} was refused, but the error does not name `{name}`: {failure}")
            continue
        except Exception as failure:  # noqa: BLE001 - any other error is the failure reported below
            pytest.fail(f"{what}: {value!r} raised {type(failure).__name__} ({failure}), expected {error.__name__} "
                        f"naming `{name}`")
        finally:
            if isinstance(value, _Live):
                built.close()
        pytest.fail(f"{what}: {value!r} is outside the documented domain but was accepted")


def _copied_buffers() -> dict[str, Any]:
    """Copies of a one-agent env's buffers: buffers the env built on them does not write into."""
    donor = ExactAccountingEnv()
    return {name: getattr(donor, name).copy() for name in BUFFER_NAMES}


#: (what, wrapper, the refused env, options): wrapper constructions every one of which is refused.
_REFUSED_WRAPPINGS: list[tuple[str, type, Callable[[], Any], dict[str, Any]]] = [
    ("an env without set_env_config", CurriculumEnv, _altered_env(set_env_config=None).build, {}),
    ("an env whose num_agents does not match its buffers", CurriculumEnv, _altered_env(num_agents=2).build, {}),
    ("a gymnasium env", CurriculumEnv, GymExactAccountingEnv, {}),
    ("an env off the buffers it is handed", CurriculumEnv, ExactAccountingEnv, {"buf": _copied_buffers}),
    ("a stage source that is none", CurriculumEnv, ExactAccountingEnv,
     {"local_tracking": False, "stage_source": object}),
    ("a PufferEnv", GymCurriculumEnv, ExactAccountingEnv, {}),
    ("a stage source that is none", GymCurriculumEnv, GymExactAccountingEnv,
     {"local_tracking": False, "stage_source": object}),
]


@pytest.mark.parametrize(("what", "wrapper", "make_env", "options"), _REFUSED_WRAPPINGS,
                         ids=[f"{w.__name__}-{what}" for what, w, _, _ in _REFUSED_WRAPPINGS])
def test_a_refused_wrapper_leaves_its_curriculum_as_it_was(what: str, wrapper: type, make_env: Callable[[], Any],
                                                           options: dict[str, Any]) -> None:
    """A wrapper refused at construction changes nothing in the curriculum it was handed: not
    its state (its sampling stream not reseeded with the refused wrapper's seed), and not what
    the next wrapper of this process does with it (its own seed still reseeds it), so the
    run built after a fixed mistake is the run a first correct try gives."""
    valid_env = GymExactAccountingEnv if wrapper is GymCurriculumEnv else ExactAccountingEnv
    lengths = BucketedTaskGenerator({}, {"episode_length": [1, 2, 3]})
    states = []
    for refused_first in (True, False):
        curriculum = Curriculum(_curriculum(task_generator=lengths))
        try:
            if refused_first:
                before = curriculum.get_state()
                with pytest.raises(CurriculumError):
                    wrapper(make_env(), curriculum, seed=7,
                            **{name: value() if callable(value) else value for name, value in options.items()})
                assert curriculum.get_state() == before, (
                    f"{wrapper.__name__} refused {what}, but the curriculum handed to it changed: "
                    f"{sorted(key for key in before if curriculum.get_state()[key] != before[key])}")
            env = wrapper(valid_env(), curriculum, seed=3)
            for _ in range(3):
                env.reset()
            env.close()
            states.append(curriculum.get_state())
        finally:
            curriculum.close()
    refused_then_valid, valid = states
    assert refused_then_valid == valid, (
        f"a {wrapper.__name__} built with seed 3 after one refused {what} (seed 7) left the curriculum in another "
        f"state than the same wrapper built first: {sorted(k for k in valid if refused_then_valid[k] != valid[k])}")


#: What the vector reads from the pufferlib vector it wraps (its documented delegation): the
#: wrapped vector's own objects (`_same`).
_DELEGATED = ("num_envs", "num_agents", "agents_per_batch", "single_observation_space", "single_action_space",
              "observation_space", "action_space", "driver_env", "agent_ids", "emulated")



#: What a curriculum's checkpoint says of its sampling: its random stream and the draws it made.
_SAMPLING_STATE = ("rng", "draws", "draw_pos", "samples")


@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
def test_a_centralized_vector_only_records_into_the_trainers_curriculum(backend: str) -> None:
    """Under centralized tracking the envs draw their tasks from private copies of the
    trainer's curriculum (also envs built in the trainer's process: every env of a Serial
    vector, Multiprocessing's driver env), and the trainer's curriculum only records their
    completions: its sampling stream and draws are those of a curriculum handed the same
    completions directly, and nothing else."""
    config = _curriculum(task_generator=BucketedTaskGenerator({}, {"episode_length": [1, 2, 3], "reward_per_step": [0.25]}),
                         algorithm=UniformConfig(), num_active_tasks=8)
    watcher = AccountingOracle(seed=0, context=f"centralized {backend}")
    trainer = watcher.watch(Curriculum(config))
    vecenv = make_curriculum_vecenv(_exact_env, trainer, backend=backend, tracking="centralized", num_envs=4, seed=3)
    try:
        inner = vecenv.vecenv  # (what the vector wraps answers for the whole vector: so must the vector)
        differ = [name for name in _DELEGATED if not _same(getattr(vecenv, name), getattr(inner, name))]
        assert not differ, (f"a centralized {backend} vector reads {differ} otherwise than the pufferlib vector it wraps: "
                            f"{[(getattr(vecenv, name), getattr(inner, name)) for name in differ][:2]}")
        vecenv.reset(seed=3)
        for _ in range(20):
            vecenv.step(np.zeros(vecenv.num_agents, dtype=np.int32))
    finally:
        vecenv.close()
    replayed = Curriculum(config)
    try:
        for task_id, score, _ in trainer.updates:
            replayed.update_task_performance(task_id, score)
        assert trainer.updates, f"a centralized {backend} vector recorded no completion in 20 steps"
        got, expected = trainer.inner.get_state(), replayed.get_state()
        drawn = [key for key in _SAMPLING_STATE if got[key] != expected[key]]
        assert not drawn, (
            f"a centralized {backend} vector left the trainer's curriculum with other {drawn} than a curriculum handed "
            f"its {len(trainer.updates)} completions directly: an env drew its tasks from it, not from a private copy")
    finally:
        replayed.close()
        trainer.inner.close()


def _child_processes() -> set[int]:
    """The pids of this process's children (zombies included)."""
    children = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat_file:
                    fields = stat_file.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                children.add(int(entry))
    return children


#: A value outside each keyword option's domain, for a Multiprocessing vector of 2 workers.
_REFUSED_VECTOR_OPTIONS: dict[str, tuple[Any, ...]] = {
    "num_envs": (0,), "seed": (-1,), "stats_interval": (0,), "worker_timeout": NOT_TIMEOUTS, "score_fn": ("mean",),
    "zero_copy": (1,), "overwork": (1,), "tracking": ("Shared",), "num_workers": (3,), "batch_size": (3,),
}


@pytest.mark.parametrize("option", list(_REFUSED_VECTOR_OPTIONS))
def test_a_vector_refused_by_an_argument_starts_no_worker(option: str) -> None:
    """`make_curriculum_vecenv` checks every argument before any worker process starts: a
    refused one leaves no process behind (a worker started before the refusal outlives it
    and, not a daemon, keeps the trainer's interpreter from exiting)."""
    options = {"num_envs": 2, "num_workers": 2, "overwork": True, "tracking": "centralized"}
    left = []
    for value in _REFUSED_VECTOR_OPTIONS[option]:
        before = _child_processes()
        curriculum = Curriculum(_curriculum(algorithm=UniformConfig()))
        try:
            with pytest.raises(CurriculumConfigError):
                make_curriculum_vecenv(_exact_env, curriculum, backend="Multiprocessing", **{**options, option: value})
        finally:
            curriculum.close()
        started = _child_processes() - before
        if started:
            left.append((value, sorted(started)))
            for pid in started:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.waitpid(pid, 0)
    assert not left, (f"make_curriculum_vecenv(backend='Multiprocessing', {option}=...) refused the value, but "
                      f"left worker processes running (value, pids): {left}")


# each entry point and the suffix its rows of OPTIONS and ARGUMENTS carry
ENTRY_POINTS: list[tuple[Callable[..., Any], tuple[str, ...]]] = [
    (Curriculum, ("local curriculum", "shared curriculum")),
    (Curriculum.reseed, ("Curriculum.reseed",)),
    (Curriculum.attach, ("Curriculum.attach",)),
    (CurriculumEnv, ("CurriculumEnv",)),
    (GymCurriculumEnv, ("GymCurriculumEnv",)),
    (make_curriculum_vecenv, ("vector",)),
    (process_training_stats, ("process_training_stats",)),
]


def test_every_argument_of_every_entry_point_has_its_domain_checked() -> None:
    """Each parameter of each public entry point (a `**options` under the entry point's name)
    has a row in `OPTIONS` or `ARGUMENTS` for every way it is called: an argument added, or a
    refusal (a stage broadcast under local tracking) nobody listed, is a check no test can fail."""
    rows = {(_field_name(what), what.rsplit(",", 1)[-1].strip()) for what, *_ in OPTIONS + ARGUMENTS}
    missing = [f"{getattr(entry, '__qualname__', entry)}({parameter.name}) [{where}]"
               for entry, places in ENTRY_POINTS
               for parameter in inspect.signature(entry).parameters.values() if parameter.name != "self"
               for where in places
               if ((entry.__name__ if parameter.kind is parameter.VAR_KEYWORD else parameter.name), where) not in rows]
    assert not missing, f"arguments whose documented domain no row of OPTIONS or ARGUMENTS checks: {missing}"


def _defaults() -> dict[str, Any]:
    """Every default a user gets without naming it: each config class's fields (as `describe()`
    gives them), the refresh interval derived from pools of sizes around each multiple of 8
    it rounds (and the largest), and each entry point's keyword defaults."""
    stage = Stage("only", SingleTaskGenerator({}))
    configs = {"CurriculumConfig": CurriculumConfig(task_generator=SingleTaskGenerator({})),
               "LearningProgressConfig": LearningProgressConfig(), "UniformConfig": UniformConfig(),
               "StagedProgressionConfig": StagedProgressionConfig(stages=[stage])}
    described = {name: json.loads(json.dumps(config.describe(), sort_keys=True, default=repr))
                 for name, config in configs.items()}
    pools = (1, 255, 256, 257, 263, 264, 300, 1001, 4100, 99_999, MAX_ACTIVE_TASKS)
    derived = {str(n): CurriculumConfig(task_generator=SingleTaskGenerator({}), num_active_tasks=n).refresh_interval
               for n in pools}
    keywords = {getattr(entry, "__qualname__", str(entry)): {
        parameter.name: repr(parameter.default) for parameter in inspect.signature(entry).parameters.values()
        if parameter.default is not parameter.empty} for entry, _ in ENTRY_POINTS}
    return {"configs": described, "refresh_interval by num_active_tasks": derived, "entry points": keywords,
            "every public signature": _public_defaults(), "reads before any completion": _empty_reads()}


def _empty_reads() -> dict[str, str]:
    """What a task and a tracker slot read before any completion (documented: no completions,
    scores 0.0), built each way a user gets one: a task without a tracker (by hand, as the Ray
    client hands them out), a new curriculum's first task, local and shared, and a new tracker's slot."""
    def task_reads(task: Any) -> str:
        return repr((task.num_completions, task.mean_score, task.last_score))

    reads = {"CurriculumTask without a tracker": task_reads(CurriculumTask(7, {"level": 1}, "one", slot=3))}
    for shared in (False, True):
        curriculum = Curriculum(_curriculum(), shared_memory=shared)
        try:
            reads[f"a new {'shared' if shared else 'local'} curriculum's first task"] = task_reads(curriculum.get_task())
        finally:
            curriculum.close()
    tracker = TaskTracker.create(2, {})
    try:
        reads["a new tracker's slot"] = repr((tracker.completions_at(0), tracker.mean_score_at(0),
                                              tracker.last_score_at(0), tracker.task_stats(0, tracker.task_id_at(0))))
    finally:
        tracker.close()
    return reads


#: The library's modules whose public classes and functions a user calls (the Ray ones have their
#: own suite, and need Ray to import).
PUBLIC_MODULES = ("curriculum.curriculum", "curriculum.env", "curriculum.gym_env", "curriculum.vector",
                  "curriculum.memory", "curriculum.tracker", "curriculum.stats", "curriculum.metrics",
                  "curriculum.generators", "curriculum.config", "curriculum.task", "curriculum.errors",
                  "curriculum.algorithms.base", "curriculum.algorithms.learning_progress",
                  "curriculum.algorithms.staged", "curriculum.algorithms.uniform")


def _public_defaults() -> dict[str, dict[str, str]]:
    """The keyword defaults of every public class, method and function the library's modules
    define (a hand-built vector's stats interval as well as the factory's), by qualified name."""
    def defaults(function: Any) -> dict[str, str]:
        try:
            parameters = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):  # (a builtin without a signature)
            return {}
        return {p.name: repr(p.default) for p in parameters if p.default is not p.empty}

    found: dict[str, dict[str, str]] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module_name or not callable(obj):
                continue
            found[f"{module_name}.{name}"] = defaults(obj)
            for method_name, method in vars(obj).items() if inspect.isclass(obj) else ():
                method = method.__func__ if isinstance(method, (classmethod, staticmethod)) else method
                if not method_name.startswith("_") and inspect.isfunction(method):
                    found[f"{module_name}.{name}.{method_name}"] = defaults(method)
    return {name: values for name, values in found.items() if values}


def test_every_default_is_the_golden_one(golden) -> None:
    """The defaults a run gets without naming them (a staged window, a learning-progress rate, a
    wrapper's seed or stats interval): a changed default changes every run that relied on it, a
    behaviour change to review through the golden diff (`--snapshot-update`), never a silent one."""
    golden(_defaults())


@pytest.mark.parametrize("given", ["to the attaching config", "to the shared curriculum"])
def test_an_attach_refusal_puts_each_value_on_its_own_side(given: str) -> None:
    """`Curriculum.attach` with a config that differs from the shared curriculum's names the
    field and both values, each on its own side of the message ("... in the shared curriculum,
    ... in the config given to attach"), also for a field only one side has (value labels given
    to one generator only): read the wrong way round, the user changes the wrong config."""
    sizes = {8: "small", 16: "large"}
    plain = CurriculumConfig(task_generator=BucketedTaskGenerator({}, {"size": [8, 16]}, label="maze"),
                             algorithm=UniformConfig(), num_active_tasks=2)
    labelled = CurriculumConfig(task_generator=BucketedTaskGenerator({}, {"size": [8, 16]}, label="maze",
                                                                     value_labels={"size": sizes}),
                                algorithm=UniformConfig(), num_active_tasks=2)
    shared, attaching = (plain, labelled) if given == "to the attaching config" else (labelled, plain)
    creator = Curriculum(shared, shared_memory=True)
    try:
        with pytest.raises(CurriculumConfigError) as refused:
            Curriculum.attach(creator.shared_memory_name, attaching).close()
    finally:
        creator.close()
    message = str(refused.value)
    sides = ("nothing in the shared curriculum", "in the config given to attach") if given == "to the attaching config" \
        else ("in the shared curriculum, nothing in the config given to attach",)
    assert "value_labels" in message and all(side in message for side in sides), (
        f"value labels given {given} only: attach was refused with {message!r}, which does not name the field with "
        f"each side's value on its side ({sides})")


@pytest.mark.parametrize("attaching", [(0.0, 2.0), (-1.0, 1.0)], ids=["high", "low"])
def test_an_attach_refusal_names_a_differing_score_range_whole(attaching: tuple[float, float]) -> None:
    """`score_range` is one field: `Curriculum.attach` with a config whose range differs at
    either end names it and both whole ranges, as the README's example reads ("`score_range`
    differs: [0.0, 1.0] in the shared curriculum, [0.0, 2.0] in the config given to attach"),
    not the one bound that differs."""
    shared = CurriculumConfig(task_generator=SingleTaskGenerator({"size": 8}, label="maze"), algorithm=UniformConfig(),
                              num_active_tasks=2, score_range=(0.0, 1.0))
    creator = Curriculum(shared, shared_memory=True)
    try:
        with pytest.raises(CurriculumConfigError) as refused:
            Curriculum.attach(creator.shared_memory_name, dataclasses.replace(shared, score_range=attaching)).close()
    finally:
        creator.close()
    expected = f"`score_range` differs: [0.0, 1.0] in the shared curriculum, {list(attaching)} in the config given to attach"
    assert expected in str(refused.value), f"attach was refused with {str(refused.value)!r}, expected it to say {expected!r}"


#: (what the attaching config changes, the field the refusal must name, both sides' kinds)
_OTHER_KINDS = [
    ("another algorithm", lambda c: dataclasses.replace(c, algorithm=UniformConfig()), "algorithm.name",
     ("learning_progress", "uniform")),
    ("another generator",
     lambda c: dataclasses.replace(c, task_generator=SingleTaskGenerator({"size": 8}, label="maze")),
     "task_generator.type", ("bucketed", "single")),
]


@pytest.mark.parametrize(("what", "change", "field", "kinds"), _OTHER_KINDS, ids=[k[0] for k in _OTHER_KINDS])
def test_an_attach_refused_for_another_kind_of_config_names_the_kind(what, change, field, kinds) -> None:
    """Attaching with an algorithm or a generator of another kind than the shared curriculum's
    is refused naming the kind (`algorithm.name`, `task_generator.type`) and both kinds, not
    a parameter one kind has and the other lacks."""
    config = CurriculumConfig(task_generator=BucketedTaskGenerator({}, {"size": [8, 16]}, label="maze"),
                              algorithm=LearningProgressConfig(), num_active_tasks=8)
    creator = Curriculum(config, shared_memory=True)
    try:
        with pytest.raises(CurriculumConfigError) as refused:
            Curriculum.attach(creator.shared_memory_name, change(config)).close()
    finally:
        creator.close()
    message = str(refused.value)
    assert field in message and all(kind in message for kind in kinds), (
        f"attaching with {what} was refused with {message!r}, which does not name `{field}` and both kinds {kinds}")


#: each named error and the builtin kind its documentation (`curriculum.errors`, `docs/protocol.md`)
#: says it is: what a caller's `except ValueError` or `except TimeoutError` relies on
ERROR_KINDS = {"CurriculumConfigError": ValueError, "InvalidScoreError": ValueError, "UnknownTaskError": LookupError,
               "CurriculumStateError": ValueError, "LockTimeoutError": TimeoutError,
               "SharedTrackerError": RuntimeError, "WorkerCopyError": RuntimeError,
               "CurriculumClosedError": RuntimeError, "EnvContractError": TypeError, "AgentCountError": ValueError,
               "EpisodeNotStartedError": RuntimeError, "WorkerProcessError": RuntimeError,
               "CurriculumServiceError": RuntimeError, "MissingExtraError": ImportError}


def test_every_named_error_is_the_builtin_kind_its_documentation_names() -> None:
    """A named error is a `CurriculumError` and the builtin kind the docs give it, no narrower
    one, and no other named error; every error the library exports is listed here: code written
    against the docs (`except ValueError` around a checkpoint restore) must keep catching it, and
    a caller's handler for a narrower builtin (`except KeyError` around a dict lookup) or for
    another named error (`except CurriculumClosedError` as a quiet shutdown) must not."""
    import curriculum.errors as errors

    def builtin_kinds(kind: type) -> set[type]:
        return {base for base in kind.__mro__ if base.__module__ == "builtins"} - {object, BaseException, Exception}

    def named_kinds(kind: type) -> set[type]:
        return {base for base in kind.__mro__[1:] if base.__module__ != "builtins"}

    exported = [name for name in errors.__all__ if name != "CurriculumError"]
    wrong = {name: [base.__name__ for base in getattr(errors, name).__mro__[1:]] for name in exported
             if name in ERROR_KINDS and not (named_kinds(getattr(errors, name)) == {errors.CurriculumError}
                                             and builtin_kinds(getattr(errors, name)) == builtin_kinds(ERROR_KINDS[name]))}
    unlisted = sorted(set(exported) - set(ERROR_KINDS))
    assert not wrong and not unlisted, (
        f"errors that are not a CurriculumError of the builtin kind their documentation names, and of no other "
        f"named error (their bases): {wrong} "
        f"(expected {({name: ERROR_KINDS[name].__name__ for name in wrong})}); exported errors no row checks: "
        f"{unlisted}")


_LARGEST_RUN_POOL, _LARGEST_RUN_MEMORY = 1024, 100_000
"""Pools and configuration memories above these sizes are only built by the domain check, not
run local and shared (the largest pool takes minutes to fill)."""
_CONFIG_DOMAINS = [row for row in DOMAINS if _as_curriculum_config(row[1](row[3][0])) is not None]


def _attach_in_child(name: str, config: CurriculumConfig, task_id: int, conn: Any) -> None:
    try:
        with Curriculum.attach(name, config) as attached:
            attached.update_task_performance(task_id, config.score_range[1])
    except Exception as error:  # noqa: BLE001 - sent to the test, which reports it
        conn.send(f"{type(error).__name__}: {error}")
    else:
        conn.send(None)


def _attach_elsewhere(name: str, config: CurriculumConfig, task_id: int) -> str | None:
    """Attach to the shared curriculum `name` in a forked process and record a completion of
    `task_id` there (the block's header read as a worker reads it); the error, if any."""
    context = multiprocessing.get_context("fork")
    here, there = context.Pipe(duplex=False)
    child = context.Process(target=_attach_in_child, args=(name, config, task_id, there), daemon=True)
    child.start()
    there.close()
    try:
        return here.recv() if here.poll(60) else "the worker sent nothing in 60 s"
    except EOFError:
        return f"the worker ended (exit code {child.exitcode}) without an answer"
    finally:
        child.join(10)


def _short(value: Any) -> str:
    """`repr(value)`, cut to a length a failure message can show."""
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


@pytest.mark.parametrize(("what", "build", "attribute", "accepted", "refused"), _CONFIG_DOMAINS,
                         ids=[_field_name(d[0]) for d in _CONFIG_DOMAINS])
def test_every_accepted_config_runs_local_and_shared(what, build, attribute, accepted, refused) -> None:
    """A config the constructor accepts runs, in one process and on a shared tracker alike, where
    a second handle attaches by name and records too: a field checked again (or sized
    differently) only when the tracker is shared or attached makes a setting that passed a
    one-process test fail once the run is scaled out. Its checkpoint loads into a new curriculum
    of the same config."""
    for value in accepted:
        config = _as_curriculum_config(build(value))
        memory = getattr(config.algorithm, "config_memory", 0)
        if config.num_active_tasks > _LARGEST_RUN_POOL or memory > _LARGEST_RUN_MEMORY:
            continue
        for shared in (False, True):
            try:
                curriculum = Curriculum(config, shared_memory=shared)
            except Exception as error:  # noqa: BLE001 - any error is the failure reported below
                pytest.fail(f"{what}: {_short(value)} was accepted by the config, but a {'shared' if shared else 'local'} "
                            f"curriculum refused it: {type(error).__name__}: {error}")
            try:
                task = curriculum.get_task()
                curriculum.update_task_performance(task.task_id, config.score_range[1])
                if shared:
                    failure = _attach_elsewhere(curriculum.shared_memory_name, config, task.task_id)
                    assert failure is None, (
                        f"{what}: {_short(value)} was accepted by the config and runs shared, but a worker process "
                        f"could not attach and record: {failure}")
                stats = curriculum.stats()
                recorded = stats["total_completions"] + stats["late_completions"]
                assert recorded == 1 + shared, (
                    f"{what}: {_short(value)}, {'shared' if shared else 'local'}: {1 + shared} completion(s) recorded "
                    f"(one through an attached handle, shared), stats() counts {recorded} (late ones included)")
                saved = json.loads(json.dumps(curriculum.get_state()))
                restored = Curriculum(config)
                try:
                    restored.load_state(saved)
                except Exception as error:  # noqa: BLE001 - any error is the failure reported below
                    pytest.fail(f"{what}: {_short(value)} was accepted by the config, but a checkpoint of a "
                                f"{'shared' if shared else 'local'} curriculum under it failed to load: "
                                f"{type(error).__name__}: {error}")
                finally:
                    restored.close()
            finally:
                curriculum.close()


#: Score ranges whose span dwarfs an ulp of their ends: a score one ulp outside rounds into the
#: range once normalised.
_SCORE_RANGES = ((0.0, 1.0), (-100.0, 1.0), (-1.0, 1e6), (0.1, 0.3), (-MAX_SCORE_MAGNITUDE, MAX_SCORE_MAGNITUDE))


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_a_score_one_ulp_outside_the_range_is_refused(shared) -> None:
    """`update_task_performance` takes the ends of `score_range` and refuses, with
    `InvalidScoreError` and nothing recorded, a score one ulp beyond either end, whatever the
    range: a check made after normalising lets those through (and a checkpoint then holds a
    score outside the range it states)."""
    wrong = []
    for low, high in _SCORE_RANGES:
        curriculum = Curriculum(_curriculum(score_range=(low, high)), shared_memory=shared)
        try:
            for score in (low, high):
                curriculum.update_task_performance(curriculum.get_task().task_id, score)
            for score in (math.nextafter(low, -math.inf), math.nextafter(high, math.inf)):
                try:
                    curriculum.update_task_performance(curriculum.get_task().task_id, score)
                    wrong.append(((low, high), score, "accepted"))
                except InvalidScoreError:
                    pass
            recorded = curriculum.stats()["total_completions"]
            if recorded != 2:
                wrong.append(((low, high), "completions recorded", recorded))
        finally:
            curriculum.close()
    assert not wrong, f"scores one ulp outside score_range (range, score, what happened): {wrong}"


def _documented_num_workers(num_envs: int, batch_size: int | None, cores: int) -> int | None:
    """`default_num_workers` as its docstring states it: the most workers that fit `cores`,
    divide `num_envs` and, with a batch size, make every batch a whole number of workers."""
    best = None
    for workers in range(1, num_envs + 1):
        envs_per_worker = num_envs // workers
        whole_batches = batch_size is None or batch_size % envs_per_worker == 0
        if workers <= cores and num_envs % workers == 0 and whole_batches:
            best = workers
    return best


def test_the_default_worker_count_is_the_documented_one() -> None:
    """The worker count a Multiprocessing vector gets when none is given: on a machine with
    more cores than this one, a count off its definition runs every env in one process."""
    wrong = [(num_envs, batch_size, cores, got, expected)
             for num_envs in range(1, 25) for batch_size in (None, *range(1, num_envs + 1)) for cores in range(1, 17)
             if (got := default_num_workers(num_envs, batch_size=batch_size, cores=cores))
             != (expected := _documented_num_workers(num_envs, batch_size, cores))]
    assert not wrong, (
        f"default_num_workers(num_envs, batch_size=, cores=) differs from its definition in {len(wrong)} cases, "
        f"first (num_envs, batch_size, cores, got, expected): {wrong[:5]}")


@pytest.mark.parametrize("cores", [1, 3, 4, 6, 8])
def test_a_vector_without_a_worker_count_takes_every_batch_some_count_serves(cores: int, monkeypatch) -> None:
    """On a machine of `cores` physical cores (as psutil counts them, for the library and for
    pufferlib), a Multiprocessing vector built without `num_workers` takes every `num_envs` and
    `batch_size` that some worker count fitting the cores serves (`default_num_workers` finds
    one) and refuses the rest with `CurriculumConfigError`: a batch size is part of the choice
    (batches that do not divide `num_envs` with `zero_copy=False`, which they need)."""
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: cores)
    wrong = []
    for num_envs in range(1, LIMITS_LAYOUT_ENVS + 1):
        for batch_size in (None, *range(1, num_envs + 1)):
            served = default_num_workers(num_envs, batch_size=batch_size, cores=cores) is not None
            try:
                uneven = {"zero_copy": False} if batch_size and num_envs % batch_size else {}
                _vector_checks("Multiprocessing", tracking="centralized", num_envs=num_envs,
                               **({"batch_size": batch_size} if batch_size else {}), **uneven)
            except CurriculumConfigError:
                if served:
                    wrong.append((num_envs, batch_size, "refused"))
            else:
                if not served:
                    wrong.append((num_envs, batch_size, "taken"))
    assert not wrong, (
        f"on {cores} cores, (num_envs, batch_size, what the vector did) against whether a worker count serves them: "
        f"{wrong[:6]} ({len(wrong)} layouts)")


@pytest.mark.parametrize(("num_envs", "batch_size", "overwork", "threads"),
                         [(4, None, True, False), (4, 2, True, False), (4, None, False, False), (4, None, False, True)])
def test_a_vector_built_without_a_worker_count_gets_the_documented_one(num_envs: int, batch_size: int | None,
                                                                        overwork: bool, threads: bool,
                                                                        monkeypatch) -> None:
    """A Multiprocessing vector built without `num_workers` runs `default_num_workers` of them,
    over the physical cores (those pufferlib counts for its limit; on a machine whose hardware
    threads outnumber them too), or over `num_envs` with `overwork=True` (as its docstring says)."""
    physical = psutil.cpu_count(logical=False)
    if threads:  # two hardware threads per core, as on most desktops and cloud machines
        monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: physical * (2 if logical else 1))
    cores = num_envs if overwork else physical
    expected = default_num_workers(num_envs, batch_size=batch_size, cores=cores)
    curriculum = Curriculum(_curriculum(), shared_memory=True)
    vecenv = make_curriculum_vecenv(_exact_env, curriculum, backend="Multiprocessing", num_envs=num_envs,
                                    overwork=overwork, **({"batch_size": batch_size} if batch_size else {}))
    try:
        workers = len(vecenv.vecenv.processes)
    finally:
        vecenv.close()
        curriculum.close()
    assert workers == expected, (
        f"make_curriculum_vecenv(num_envs={num_envs}, batch_size={batch_size}, overwork={overwork}) started "
        f"{workers} worker processes, expected default_num_workers(..., cores={cores}) = {expected}")


def _pool_reports_by_default(wrapper: str, completions: int) -> list[int]:
    """The completions (1-based) whose info carries a pool report, for `wrapper` built without
    `stats_interval` around one-step episodes."""
    curriculum = Curriculum(_curriculum(task_generator=SingleTaskGenerator({"episode_length": 1}), seed=1))
    infos: list[dict[str, Any]] = []
    try:
        if wrapper == "GymCurriculumEnv":
            env = GymCurriculumEnv(GymExactAccountingEnv(), curriculum, seed=1)
            for _ in range(completions):
                env.reset()
                infos.append(env.step(0)[4])
        elif wrapper == "CurriculumEnv":
            env = CurriculumEnv(ExactAccountingEnv(episode_length=1), curriculum, seed=1)
            env.reset()
            infos += [env.step(np.zeros(1, dtype=np.int32))[4][0] for _ in range(completions)]
        else:
            env = make_curriculum_vecenv(lambda **kw: ExactAccountingEnv(episode_length=1, **kw), curriculum,
                                         backend="Serial", num_envs=1, seed=1)
            env.reset()
            for _ in range(completions):
                infos += env.step(np.zeros(env.action_space.shape, dtype=np.int32))[4]
        env.close()
    finally:
        curriculum.close()
    ends = [info for info in infos if "curriculum_stats/episodes" in info]  # (not the auto-resets' infos)
    return [i + 1 for i, info in enumerate(ends) if "curriculum_stats/total_completions" in info]


@pytest.mark.parametrize("wrapper", ["CurriculumEnv", "GymCurriculumEnv", "vector"])
def test_a_wrapper_built_without_stats_interval_reports_the_pool_every_documented_interval(wrapper: str) -> None:
    """Every wrapper's `stats_interval` defaults to `DEFAULT_STATS_INTERVAL`: a wrapper that
    reports more often costs a pool-wide `stats()` call per report and logs other per-label
    learning progress than the others do for the same run."""
    completions = 2 * DEFAULT_STATS_INTERVAL + 1
    reports = _pool_reports_by_default(wrapper, completions)
    expected = list(range(1, completions + 1, DEFAULT_STATS_INTERVAL))
    assert reports == expected, (
        f"{wrapper} built without stats_interval reported the pool at completions {reports[:10]} of "
        f"{completions} ({len(reports)} reports), expected {expected} (every DEFAULT_STATS_INTERVAL = "
        f"{DEFAULT_STATS_INTERVAL})")


class _OwnBuffer(ExactAccountingEnv):
    """Keeps its own copy of one of the vector's buffers (`own`): at once, or (`later`) from its
    first "step", its first "reset" or its second one (the "auto-reset" after its first
    episode) on: the trainer then reads numbers the env never writes."""

    own = "observations"
    later: str | None = None

    def __init__(self, buf: Any = None, seed: int = 0) -> None:
        super().__init__(buf=buf, seed=seed)
        if self.later is None:
            self._rebind()

    def _rebind(self) -> None:
        setattr(self, self.own, np.array(getattr(self, self.own), copy=True))

    def step(self, actions: Any) -> Any:
        if self.later == "step":
            self._rebind()
        return super().step(actions)

    def reset(self, seed: int | None = None) -> Any:
        self.resets = getattr(self, "resets", 0) + 1
        if self.later == "reset" or (self.later == "auto-reset" and self.resets == 2):
            self._rebind()
        return super().reset(seed)


@pytest.mark.parametrize("name", BUFFER_NAMES)
def test_an_env_off_the_vectors_buffers_is_refused_by_name(name: str) -> None:
    """An env that does not write into one of the vector's buffers (it replaced the slice it was
    given) is refused when the vector is built, naming the buffer."""
    env = type(f"Own{name.title()}", (_OwnBuffer,), {"own": name})
    with pytest.raises(EnvContractError, match=f"`{name}` buffer"):
        _serial_vector(env=env)


class _ViewedBuffer(ExactAccountingEnv):
    """Keeps a view of one of the vector's buffer slices (`viewed`), the same memory under
    another array object, as an env that re-views or reshapes what set_buffers gave it does."""

    viewed = "observations"

    def __init__(self, buf: Any = None, seed: int = 0) -> None:
        super().__init__(buf=buf, seed=seed)
        array = getattr(self, self.viewed)
        setattr(self, self.viewed, array.reshape(array.shape).view())


@pytest.mark.parametrize("name", BUFFER_NAMES)
def test_an_env_on_a_view_of_the_vectors_buffers_runs(name: str) -> None:
    """An env that writes into the vector's buffer through a view of its slice (another array
    object on the same memory) writes where the trainer reads: the vector takes it, and every
    episode its envs end is recorded once."""
    env = type(f"Viewed{name.title()}", (_ViewedBuffer,), {"viewed": name})
    lengths = BucketedTaskGenerator({"reward_per_step": 0.25}, {"episode_length": [1, 2, 3]})
    curriculum = Curriculum(CurriculumConfig(task_generator=lengths,
                                             algorithm=UniformConfig()))
    try:
        with make_curriculum_vecenv(env, curriculum, backend="Serial", num_envs=2) as vecenv:
            vecenv.reset(seed=0)
            ended = 0
            for _ in range(20):
                _, _, terminals, truncations, _ = vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
                ended += int((np.asarray(terminals) | np.asarray(truncations)).sum())
        recorded = curriculum.stats()["total_completions"]
        assert ended > 0 and recorded == ended, (
            f"an env on a view of its `{name}` slice: {ended} episodes ended in 20 vec steps, the curriculum recorded "
            f"{recorded}")
    finally:
        curriculum.close()


@pytest.mark.parametrize("agents", [0, -1, True, 1.5, "2", None, np.int64(0)])
def test_an_env_whose_agent_count_is_outside_its_domain_is_refused_by_name(agents: Any) -> None:
    """`num_agents` is an integer >= 1 (an env of no agents never ends an episode): another value
    is refused with `AgentCountError` naming it, even when the env's buffers were cut to match."""
    env = ExactAccountingEnv()
    env.num_agents = agents
    if isinstance(agents, int) and not isinstance(agents, bool) and agents >= 0:
        for name in BUFFER_NAMES:  # buffers of as many rows as it claims agents
            setattr(env, name, getattr(env, name)[:agents])
        env.masks = env.masks[:agents]
    curriculum = Curriculum(CurriculumConfig(task_generator=SingleTaskGenerator({"episode_length": 2}),
                                             algorithm=UniformConfig()))
    try:
        with pytest.raises(AgentCountError, match="num_agents"):
            CurriculumEnv(env, curriculum).close()
    finally:
        curriculum.close()


@pytest.mark.parametrize("extra", [-1, 1])
def test_episode_returns_for_another_agent_count_are_refused_by_name(extra: int) -> None:
    """`get_episode_rewards()` gives one return per agent: fewer or more (a padded array) are
    refused with `AgentCountError` naming the agent count at the episode's end, and that
    episode is not recorded (not scored over the padding, or over what is there)."""
    env = ExactAccountingEnv(num_agents=3, episode_length=2, reports_returns=True)
    env.get_episode_rewards = lambda: np.full(3 + extra, 0.5)
    curriculum = Curriculum(CurriculumConfig(task_generator=SingleTaskGenerator({"episode_length": 2}),
                                             algorithm=UniformConfig()))
    wrapped = CurriculumEnv(env, curriculum, seed=1)
    try:
        wrapped.reset()
        with pytest.raises(AgentCountError, match="num_agents"):
            for _ in range(4):
                wrapped.step(np.zeros(wrapped.action_space.shape, dtype=np.int32))
        recorded = int(curriculum.tracker.completions.sum())
    finally:
        wrapped.close()
        curriculum.close()
    assert recorded == 0, f"{3 + extra} returns for 3 agents: the episode was recorded ({recorded} completions)"


@pytest.mark.parametrize("algorithm", [UniformConfig(), LearningProgressConfig()], ids=["uniform", "learning_progress"])
def test_a_curriculum_without_stages_refuses_stage_sync_by_name(algorithm: Any) -> None:
    """A curriculum without stages has no stage to send or follow: `sync_state()` and
    `apply_sync_state()` (given the broadcast a staged curriculum of its pool would send) both
    raise `CurriculumConfigError`, and the refused broadcast changes nothing."""
    curriculum = Curriculum(_curriculum(algorithm=algorithm, num_active_tasks=4, seed=0))
    try:
        task = curriculum.get_task()
        curriculum.update_task_performance(task.task_id, 0.5)
        before = json.dumps(curriculum.get_state(), sort_keys=True)
        outcomes = {}
        for call, run in (("sync_state()", curriculum.sync_state),
                          ("apply_sync_state()", lambda: curriculum.apply_sync_state({"stage": 1, "stage_changes": 1}))):
            try:
                outcomes[call] = f"returned {run()!r}"
            except CurriculumConfigError:
                continue
        assert not outcomes, f"{algorithm.name}: stage sync on a curriculum without stages {outcomes}, not refused"
        assert json.dumps(curriculum.get_state(), sort_keys=True) == before, (
            f"{algorithm.name}: a refused stage broadcast changed the curriculum's state")
    finally:
        curriculum.close()


@pytest.mark.parametrize("pool", [4, 1024])
def test_the_furthest_stage_broadcast_adopted_leaves_a_state_checkpoints_restore(pool: int) -> None:
    """`apply_sync_state` refuses what `sync_state()` of a curriculum of this config could not
    return: so the largest change count it adopts (found by bisection; for pools above 512
    the task ids a refill hands out bound it before `MAX_COUNT` does) must leave a curriculum
    whose own checkpoint restores, and the next count of that parity must be refused."""
    config = CurriculumConfig(algorithm=_staged(), num_active_tasks=pool, seed=1)
    low, high = 0, 2**64  # adopted at low (stage 0, even counts); refused at high
    while high - low > 2:
        middle = low + (high - low) // 4 * 2
        copy = Curriculum(config)
        try:
            copy.apply_sync_state({"stage": 0, "stage_changes": middle})
            low = middle
        except CurriculumStateError:
            high = middle
        finally:
            copy.close()
    adopted = Curriculum(config)
    try:
        adopted.apply_sync_state({"stage": 0, "stage_changes": low})
        state = adopted.get_state()
    finally:
        adopted.close()
    fresh = Curriculum(config)
    try:
        fresh.load_state(state)
    except CurriculumStateError as error:
        pytest.fail(f"pool of {pool}: a broadcast of {low} stage changes was adopted, but the checkpoint of the "
                    f"curriculum that adopted it is refused: {error}")
    finally:
        fresh.close()


# (`terminals` rebound by a step ends no episode the wrapper can see; this env, ending by
# terminals, then refuses its next step itself)
@pytest.mark.parametrize("tracking", ["centralized", "shared"])
@pytest.mark.parametrize(("name", "later"), [("rewards", "step"), ("truncations", "step"), ("rewards", "reset"),
                                             ("terminals", "reset"), ("truncations", "reset"),
                                             ("rewards", "auto-reset"), ("terminals", "auto-reset")])
def test_an_env_that_replaces_a_buffer_mid_run_is_refused_by_name(name: str, later: str, tracking: str) -> None:
    """The buffers the wrapper reads every step must stay the vector's for the whole run: one
    rebound by a step is refused by that episode's end (its second step), one rebound by a
    reset by that reset (the vector's, or the wrapper's auto-reset in the step that ends an
    episode), naming it: the wrapper must not read a dead buffer for a step. An episode ended
    on a dead buffer is refused whole: nothing of it reaches the curriculum (the env's wrapper
    records it itself under "shared" tracking)."""
    env = type(f"Later{name.title()}", (_OwnBuffer,), {"own": name, "later": later})
    episodes = SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25})
    curriculum = Curriculum(CurriculumConfig(task_generator=episodes, algorithm=UniformConfig()))
    vecenv = make_curriculum_vecenv(env, curriculum, backend="Serial", num_envs=2, tracking=tracking)
    calls: list[str] = []
    try:
        with pytest.raises(EnvContractError, match=name):
            calls.append("reset")
            vecenv.reset(seed=0)
            for _ in range(3):
                calls.append("step")
                vecenv.step(np.zeros(vecenv.action_space.shape, dtype=np.int32))
            calls.append("reset")
            vecenv.reset(seed=1)
        expected = ["reset"] if later == "reset" else ["reset", "step", "step"]  # episodes of two steps
        assert calls == expected, (
            f"an env that rebinds `{name}` at its {later}s was refused by its call {len(calls)} of {calls}, not by "
            f"call {len(expected)} of {expected}")
        stats = curriculum.stats()
        recorded = stats["total_completions"] + stats["late_completions"]
        assert later == "auto-reset" or recorded == 0, (
            f"an env that rebinds `{name}` at its {later}s ({tracking} tracking) was refused, but the curriculum "
            f"recorded {recorded} episode(s) of it: the episode that ended on a dead buffer was scored from it")
    finally:
        vecenv.close()
        curriculum.close()


def test_a_config_keeps_nothing_the_caller_changes_later() -> None:
    """A config built from the caller's lists (stages, score range) keeps its own copy: the
    caller appending a stage or editing the range afterwards changes neither the config nor
    what a curriculum built from it describes (a checkpoint of it would be refused later)."""
    stages, score_range = list(_stages()), [0.0, 10.0]
    config = CurriculumConfig(algorithm=_staged(stages=stages), score_range=score_range)
    before = config.describe()
    stages.append(Stage("added", _generator()))
    score_range[1] = 20.0
    assert config.describe() == before, (
        f"the caller changed its lists after building the config, and the config changed: {config.describe()} "
        f"(built as {before})")


def _env_with_reset_infos(buf: Any = None, seed: int = 0) -> ExactAccountingEnv:
    """An env whose resets return infos (a worker's reset answer the vector must read)."""
    return ExactAccountingEnv(buf=buf, seed=seed, infos="dict")


#: Seconds a worker of the out-of-order vector may take to answer (a refused call that left the
#: vector waiting on workers it never asked fails by name, not by hanging the gate).
_REFUSED_CALL_TIMEOUT = 10.0


@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing", "Serial-centralized"])
def test_a_vector_used_out_of_order_names_the_call_and_keeps_its_episodes(backend) -> None:
    """A curriculum vector stepped before its reset, asked to receive with nothing sent, handed
    actions outside its action space, or used after `close()` must raise the named error (and
    keep raising it after close, also once the curriculum is closed too, where a second `close()`
    is a no-op; centralized tracking of a staged curriculum included); a refused call must leave
    nothing behind: the reset and the run that follow it record exactly the episodes
    its envs ended."""
    episodes = SingleTaskGenerator({"episode_length": 3, "reward_per_step": 0.25}, label="three steps")
    case = backend
    backend, _, tracking = backend.partition("-")
    algorithm = StagedProgressionConfig(stages=[Stage("only", episodes)]) if tracking else UniformConfig()
    curriculum = Curriculum(_curriculum(task_generator=None if tracking else episodes, algorithm=algorithm),
                            shared_memory=backend == "Multiprocessing")
    vecenv = make_curriculum_vecenv(_env_with_reset_infos, curriculum, backend=backend, num_envs=2,
                                    tracking=tracking or "shared",
                                    **({"num_workers": 2, "worker_timeout": _REFUSED_CALL_TIMEOUT}
                                       if backend == "Multiprocessing" else {}))
    wrong: list[str] = []

    def refused(what: str, call: Callable[[], Any], error: type[Exception]) -> None:
        try:
            call()
        except error:
            return
        except Exception as other:  # another error than the named one
            wrong.append(f"{what}: {type(other).__name__}: {other} (expected {error.__name__})")
            return
        wrong.append(f"{what}: accepted (expected {error.__name__})")

    try:
        actions = np.zeros(vecenv.action_space.shape, dtype=vecenv.action_space.dtype)
        refused("step() before reset()", lambda: vecenv.step(actions), EpisodeNotStartedError)
        refused("send() before reset()", lambda: vecenv.send(actions), EpisodeNotStartedError)
        refused("recv() before reset()", vecenv.recv, EpisodeNotStartedError)
        vecenv.reset(seed=0)
        refused("actions of another shape", lambda: vecenv.step(np.zeros((*actions.shape, 3), actions.dtype)),
                EnvContractError)
        refused("actions outside the action space", lambda: vecenv.step(actions + 1_000), EnvContractError)
        vecenv.reset(seed=1)  # (as a trainer that caught the refusal starts over)
        refused("actions outside the action space after a reset", lambda: vecenv.step(actions + 1_000),
                EnvContractError)
        ended = 0
        for _ in range(40):
            _, _, terminals, truncations, _ = vecenv.step(actions)
            ended += int(np.logical_or(terminals, truncations).sum())
        recorded = int(curriculum.tracker.completions.sum())
        assert wrong == [] and recorded == ended and ended > 0, (
            f"{case}: out-of-order calls: {wrong}; after them the curriculum recorded {recorded} episodes, the "
            f"envs ended {ended}")
        vecenv.send(actions)  # closed with a step in flight: its recv() must not hand out the stale batch
    finally:
        vecenv.close()
        curriculum.close()
    vecenv.close()  # twice: a no-op
    refused("recv() of a step sent before close()", vecenv.recv, WorkerProcessError)
    refused("step() after close()", lambda: vecenv.step(actions), WorkerProcessError)
    refused("send() after close()", lambda: vecenv.send(actions), WorkerProcessError)
    refused("recv() after close()", vecenv.recv, WorkerProcessError)
    refused("reset() after close()", lambda: vecenv.reset(seed=0), WorkerProcessError)
    refused("async_reset() after close()", lambda: vecenv.async_reset(seed=0), WorkerProcessError)
    assert wrong == [], f"{case}: calls after close(): {wrong}"


class _ResetFailsOnce(ExactAccountingEnv):
    """An env whose next `reset()` raises once `fail_next_reset` is set (a level that failed to
    load), and works again after."""

    fail_next_reset = False

    def reset(self, seed: int | None = None) -> Any:
        if self.fail_next_reset:
            self.fail_next_reset = False
            raise _LevelNotLoaded("the level failed to load")
        return super().reset(seed)


class _LevelNotLoaded(RuntimeError):
    """What `_ResetFailsOnce` raised."""


def test_a_serial_vector_whose_reset_failed_hands_no_infos_twice() -> None:
    """A Serial vector's `reset()` fails in its last env (the error reaches the trainer); the
    `reset()` the trainer calls again goes through, and its infos hold no episode end a step
    already handed over: every episode the envs ended reaches the trainer exactly once."""
    episodes = SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.5}, label="two steps")
    curriculum = Curriculum(_curriculum(task_generator=episodes, algorithm=UniformConfig()))
    envs: list[_ResetFailsOnce] = []

    def make_env(buf: Any = None, seed: int = 0) -> _ResetFailsOnce:
        envs.append(_ResetFailsOnce(buf=buf, seed=seed))
        return envs[-1]

    vecenv = make_curriculum_vecenv(make_env, curriculum, backend="Serial", num_envs=2)
    seen: Counter[str] = Counter()

    def handed(infos: Any) -> None:
        for info in infos if isinstance(infos, list) else [infos]:
            if isinstance(info, Mapping) and EPISODE_RECORD_KEY in info:
                record = info[EPISODE_RECORD_KEY]
                seen[f"{record.env} episode {record.index}"] += 1

    try:
        handed(vecenv.reset(seed=0)[1])
        actions = np.zeros(vecenv.action_space.shape, dtype=vecenv.action_space.dtype)
        for _ in range(3):
            handed(vecenv.step(actions)[4])
        for _ in range(3):  # on until a step ends episodes: their infos are the last the trainer was handed
            _, _, terminals, truncations, infos = vecenv.step(actions)
            handed(infos)
            if np.logical_or(terminals, truncations).any():
                break
        assert np.logical_or(terminals, truncations).any(), "no step ended an episode: the check measured nothing"
        envs[-1].fail_next_reset = True
        with pytest.raises(_LevelNotLoaded):
            vecenv.reset(seed=1)
        handed(vecenv.reset(seed=1)[1])
        ended = sum(env.episodes_completed for env in envs)
        twice = sorted(episode for episode, count in seen.items() if count > 1)
        assert not twice and sum(seen.values()) == ended, (
            f"Serial vector, a reset that failed in its last env and then went through: episodes handed to the "
            f"trainer more than once: {twice}; {sum(seen.values())} episode ends handed over for the {ended} the envs "
            "ended")
    finally:
        vecenv.close()
        curriculum.close()


class _StoreUnavailable(RuntimeError):
    """What a curriculum's update raised once (a store it writes to was unavailable)."""


@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
def test_a_vector_whose_recording_failed_resets_and_runs_on(backend) -> None:
    """Centralized tracking records completions in the trainer's process, as `recv()` hands a
    batch on; when the curriculum's update raises there, the step raises that error, and the
    `reset()` a trainer then calls must go through (the batch's workers answered; nothing is
    left to wait for) and the run after it record every episode its envs end."""
    episodes = SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.5}, label="two steps")
    curriculum = Curriculum(_curriculum(task_generator=episodes, algorithm=UniformConfig()))
    update, calls = curriculum.update_task_performance, []

    def update_failing_once(task_id: int, score: float) -> Any:
        calls.append(task_id)
        if len(calls) == 3:
            raise _StoreUnavailable("the curriculum's store was unavailable")
        return update(task_id, score)

    curriculum.update_task_performance = update_failing_once
    vecenv = make_curriculum_vecenv(_exact_env, curriculum, backend=backend, num_envs=2, tracking="centralized",
                                    **({"num_workers": 2, "overwork": True, "worker_timeout": _REFUSED_CALL_TIMEOUT}
                                       if backend == "Multiprocessing" else {}))
    try:
        actions = np.zeros(vecenv.action_space.shape, dtype=vecenv.action_space.dtype)
        vecenv.reset(seed=0)
        with pytest.raises(_StoreUnavailable):
            for _ in range(4):
                vecenv.step(actions)
        vecenv.reset(seed=1)
        before, ended = int(curriculum.tracker.completions.sum()), 0
        for _ in range(20):
            _, _, terminals, truncations, _ = vecenv.step(actions)
            ended += int(np.logical_or(terminals, truncations).sum())
        recorded = int(curriculum.tracker.completions.sum()) - before
    finally:
        vecenv.close()
        curriculum.close()
    assert recorded == ended > 0, (
        f"{backend}/centralized: after a step whose recording raised and a reset, the curriculum recorded "
        f"{recorded} episodes of the {ended} the envs ended in 20 steps")


#: what a PufferEnv offers a vector or trainer, which the wrapper hands through unchanged
_PUFFER_ATTRIBUTES = ("single_observation_space", "single_action_space", "observation_space", "action_space",
                      "num_agents", *BUFFER_NAMES, "agent_ids")


def _same(reported: Any, own: Any) -> bool:
    """The env's own object (a buffer, a space), or an equal number."""
    return reported is own or (isinstance(own, int) and type(reported) is int and reported == own)


def test_the_wrappers_hand_the_env_through_unchanged() -> None:
    """A `CurriculumEnv` is its env to a vector: every space, buffer and id it reports is the
    wrapped env's own object (a buffer another env's, a space swapped, would train the policy
    on what the env never saw), `unwrapped` is the innermost env, and `render()` and `close()`
    reach the env. A `GymCurriculumEnv` hands its env's spaces through the same way."""
    curriculum = Curriculum(_curriculum())
    inner = ExactAccountingEnv(num_agents=3)
    calls: list[str] = []
    inner.render = lambda: calls.append("render") or "frame"  # type: ignore[method-assign]
    closes = inner.close
    inner.close = lambda: calls.append("close") or closes()  # type: ignore[method-assign]
    try:
        wrapped = CurriculumEnv(inner, curriculum)
        gym_inner = GymExactAccountingEnv()
        gym_wrapped = GymCurriculumEnv(gym_inner, curriculum)
        differ = [name for name in _PUFFER_ATTRIBUTES if not _same(getattr(wrapped, name), getattr(inner, name))]
        differ += [f"GymCurriculumEnv.{name}" for name in ("observation_space", "action_space")
                   if getattr(gym_wrapped, name) is not getattr(gym_inner, name)]
        if wrapped.unwrapped is not inner:
            differ.append("unwrapped")
        frame = wrapped.render()
        wrapped.close()
        gym_wrapped.close()
    finally:
        curriculum.close()
    assert not differ and frame == "frame" and calls == ["render", "close"], (
        f"the wrapper reports other objects than its env for {differ}; render() returned {frame!r}; the env saw "
        f"{calls} (expected ['render', 'close'])")


#: (curriculum, options) a vector is built with, by backend name and by the pufferlib class
_BACKEND_CASES = [
    ("shared", {"num_envs": 2}),
    ("local", {"num_envs": 2}),
    ("shared", {"num_envs": 4, "batch_size": 2}),
    ("shared", {"num_envs": 4, "num_workers": 3}),
    ("local", {"num_envs": 2, "tracking": "centralized"}),
]


def _vector_outcome(backend: Any, shared: bool, options: dict[str, Any]) -> tuple[Any, ...]:
    """What building the vector gave: the refusal's error type, or the vector's design, backend,
    worker count and batch size."""
    curriculum = Curriculum(_curriculum(algorithm=UniformConfig()), shared_memory=shared)
    try:
        try:
            vecenv = make_curriculum_vecenv(_exact_env, curriculum, backend=backend, **options)
        except Exception as error:  # the refusal is the outcome compared
            return ("refused", type(error).__name__)
        inner = vecenv.vecenv
        outcome = ("built", type(vecenv).__name__, type(inner).__name__, getattr(inner, "num_workers", None),
                   getattr(inner, "agents_per_batch", None))
        vecenv.close()
        return outcome
    finally:
        curriculum.close()


def test_a_backend_given_as_the_pufferlib_class_is_taken_as_its_name() -> None:
    """`backend` takes "Serial" and "Multiprocessing" or the pufferlib classes (documented): a
    class must get exactly what its name gets, the same checks (a local curriculum refused
    under shared tracking across processes, batches refused on Serial), the same default worker
    count and the same batches."""
    differ = []
    for name, cls in (("Serial", pufferlib.vector.Serial), ("Multiprocessing", pufferlib.vector.Multiprocessing)):
        for kind, options in _BACKEND_CASES:
            by_name = _vector_outcome(name, kind == "shared", options)
            by_class = _vector_outcome(cls, kind == "shared", options)
            if by_name != by_class:
                differ.append(f"{name} with a {kind} curriculum and {options}: by name {by_name}, by class {by_class}")
    assert not differ, "a backend class got other than its name:\n  " + "\n  ".join(differ)


#: what pufferlib's vector offers a trainer, which a curriculum vector hands through unchanged
_VECTOR_ATTRIBUTES = ("num_envs", "num_agents", "agents_per_batch", "single_observation_space", "single_action_space",
                      "observation_space", "action_space", "driver_env", "agent_ids", "emulated")


@pytest.mark.parametrize("tracking", ["shared", "centralized"])
def test_a_vector_hands_pufferlibs_vector_through_unchanged(tracking) -> None:
    """A curriculum vector is pufferlib's vector to a trainer: every space, count and id it
    reports is the pufferlib vector's own (a trainer builds its policy from
    `single_observation_space`; the batch's space in its place gives it the wrong input size),
    and its single spaces are its envs' spaces."""
    curriculum = Curriculum(_curriculum(algorithm=UniformConfig()), shared_memory=tracking == "shared")
    differ = []
    try:
        for backend, options in (("Serial", {}), ("Multiprocessing", {"num_workers": 2})):
            with make_curriculum_vecenv(_exact_env, curriculum, backend=backend, num_envs=2, tracking=tracking,
                                        **options) as vecenv:
                inner = vecenv.vecenv
                differ += [f"{backend} {name}" for name in _VECTOR_ATTRIBUTES
                           if not _same(getattr(vecenv, name), getattr(inner, name))]
                env = _exact_env()
                for name in ("single_observation_space", "single_action_space"):
                    if getattr(vecenv, name) != getattr(env, name):
                        differ.append(f"{backend} {name} {getattr(vecenv, name)} (its envs' {getattr(env, name)})")
                env.close()
    finally:
        curriculum.close()
    assert not differ, f"{tracking} tracking: the vector reports other than pufferlib's vector for {differ}"


@pytest.mark.parametrize("tracking", ["shared", "centralized"])
def test_a_vector_takes_every_action_pufferlibs_vector_takes(tracking) -> None:
    """pufferlib's vector checks actions against its action space at the first step only, then
    hands them to the envs as they come (a continuous policy's unclipped samples, which the
    envs clip): a curriculum vector must take what pufferlib's vector takes, right shape and
    dtype but outside the space, not end a run that pufferlib's would go on with."""
    task = SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25})
    curriculum = Curriculum(_curriculum(task_generator=task, algorithm=UniformConfig()),
                            shared_memory=tracking == "shared")
    refused = []
    try:
        for backend, options in (("Serial", {}), ("Multiprocessing", {"num_workers": 2})):
            plain = pufferlib.vector.make(_exact_env, backend=getattr(pufferlib.vector, backend), num_envs=2,
                                          **options)
            with make_curriculum_vecenv(_exact_env, curriculum, backend=backend, num_envs=2, tracking=tracking,
                                        **options) as vecenv:
                space = vecenv.action_space
                outside = np.full(space.shape, np.iinfo(space.dtype).max, dtype=space.dtype)
                assert not space.contains(outside), f"{outside} is in {space}: the check measured nothing"
                for taker in (plain, vecenv):
                    taker.reset(seed=0)
                    taker.step(np.zeros(space.shape, dtype=space.dtype))
                plain.step(outside)  # (pufferlib's vector takes it)
                try:
                    vecenv.step(outside)
                except CurriculumError as error:
                    refused.append(f"{backend}: {error!r}")
            plain.close()
    finally:
        curriculum.close()
    assert not refused, (f"{tracking} tracking: after the first step the vector refused actions pufferlib's vector "
                         f"takes (right shape and dtype, outside the action space): {refused}")


def test_pufferlibs_own_usage_errors_keep_their_name_once_the_library_is_imported() -> None:
    """pufferlib-core 3.0.7 raises `pufferlib.APIUsageError` without exporting the name, so its
    usage errors surface as "module 'pufferlib' has no attribute 'APIUsageError'"; the library's
    vector module exports it. A trainer's own pufferlib vector (an evaluation vector beside the
    curriculum's), built with a layout pufferlib refuses or stepped before its reset, then
    raises pufferlib's error, which names the mistake."""
    usage_error = pufferlib.pufferlib.APIUsageError
    plain = pufferlib.vector.make(_exact_env, backend=pufferlib.vector.Serial, num_envs=2)
    mistakes = {"num_envs=3 over num_workers=2": lambda: pufferlib.vector.make(
                    _exact_env, backend=pufferlib.vector.Multiprocessing, num_envs=3, num_workers=2),
                "a step before its reset": lambda: plain.step(np.zeros(plain.action_space.shape, dtype=np.int64))}
    wrong = {}
    try:
        for mistake, call in mistakes.items():
            try:
                call()
                wrong[mistake] = "nothing raised"
            except usage_error:
                pass
            except Exception as error:  # (what the check reports: any other error is the gap)
                wrong[mistake] = repr(error)
    finally:
        plain.close()
    assert getattr(pufferlib, "APIUsageError", None) is usage_error and not wrong, (
        f"with the library imported, pufferlib exports APIUsageError: {hasattr(pufferlib, 'APIUsageError')}; its "
        f"usage errors raised other than APIUsageError: {wrong}")


#: Run in a fresh interpreter: nothing of the package loaded beforehand.
_PACKAGE_NAMES = """
problems = []
import curriculum
if hasattr(curriculum, "no_such_name"):
    problems.append("hasattr(curriculum, 'no_such_name') is True")
try:
    if getattr(curriculum, "no_such_name", None) is not None:
        problems.append("getattr(curriculum, 'no_such_name', None) is not None")
except Exception as error:
    problems.append(f"getattr(curriculum, 'no_such_name', None) raised {error!r}")
for name in ("gym_env", "env", "vector", "memory", "stats"):
    try:
        exec(f"from curriculum import {name}")
    except Exception as error:
        problems.append(f"from curriculum import {name}: {error!r}")
for name in curriculum.__all__:
    try:
        getattr(curriculum, name)
    except Exception as error:
        problems.append(f"curriculum.{name}: {error!r}")
print(problems)
"""


def test_the_package_loads_its_names_on_use_and_refuses_unknown_ones_as_python_does() -> None:
    """`import curriculum` loads the env wrappers on first use: in a fresh interpreter every
    name of `__all__` resolves, `from curriculum import <submodule>` imports a submodule
    nothing loaded yet, and an unknown name raises `AttributeError`, which `hasattr()` and
    `getattr(curriculum, name, default)` (a plug-in probing for a feature) rely on."""
    run = subprocess.run([sys.executable, "-c", _PACKAGE_NAMES], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "[]", (
        f"the curriculum package in a fresh interpreter: {run.stdout.strip() or run.stderr.strip()[-600:]}")


class _TrainingLoopFailed(RuntimeError):
    """What a training loop raised inside a vector's `with` block."""


#: What a `with` block around a vector may raise: the training loop's own error, the library's
#: (a worker died mid-block), an interrupt.
_RAISED_IN_WITH_BLOCK = (_TrainingLoopFailed("the loss is NaN"),
                         WorkerProcessError("worker 1 was killed by SIGKILL during its step"), KeyboardInterrupt())


@pytest.mark.parametrize("tracking", ["shared", "centralized"])
def test_a_with_block_left_by_an_error_closes_the_vector(tracking) -> None:
    """`with make_curriculum_vecenv(...) as vecenv:` closes the vector however the block ends,
    and hands on whatever the block raised: a training loop that raises inside it (a NaN loss,
    a worker that died, an interrupt) must neither leave the vector open with its worker
    processes running nor end the block as if nothing happened."""
    curriculum = Curriculum(_curriculum(task_generator=SingleTaskGenerator({"episode_length": 2}),
                                        algorithm=UniformConfig()), shared_memory=tracking == "shared")
    left = []
    try:
        for backend, options in (("Serial", {}), ("Multiprocessing", {"num_workers": 2})):
            for error in _RAISED_IN_WITH_BLOCK:
                handed_on = False
                try:
                    with make_curriculum_vecenv(_exact_env, curriculum, backend=backend, num_envs=2,
                                                tracking=tracking, **options) as vecenv:
                        processes = list(getattr(vecenv.vecenv, "processes", ()))
                        vecenv.reset(seed=0)
                        vecenv.step(np.zeros(vecenv.action_space.shape, dtype=vecenv.action_space.dtype))
                        raise error
                except type(error) as raised:
                    handed_on = raised is error
                running = [p.pid for p in processes if p.exitcode is None]
                if not vecenv.closed or running or not handed_on:
                    left.append(f"{backend}, {type(error).__name__} raised in the block: closed={vecenv.closed}, "
                                f"workers still running {running}, the error handed on: {handed_on}")
                    vecenv.close()
    finally:
        curriculum.close()
    assert not left, f"{tracking} tracking: with blocks left by an error: {left}"


def test_a_shared_curriculum_dropped_without_close_is_collected_with_its_memory() -> None:
    """A shared curriculum, and a handle attached to it, that the caller drops without
    `close()` (a notebook cell run again, a run of a sweep) are collected: nothing of the library
    may keep them alive, and the creator's block leaves `/dev/shm` with it (else every run of a
    sweep in one process keeps a block mapped until the interpreter exits)."""
    config = _curriculum(task_generator=SingleTaskGenerator({"episode_length": 2}, label="two steps"),
                         algorithm=UniformConfig())
    curriculum = Curriculum(config, shared_memory=True)
    attached = Curriculum.attach(curriculum.shared_memory_name, config)
    for handle in (curriculum, attached):
        handle.update_task_performance(handle.get_task().task_id, 0.5)
    block = Path("/dev/shm") / curriculum.shared_memory_name
    handles = [weakref.ref(attached), weakref.ref(curriculum)]
    del curriculum, attached, handle
    gc.collect()
    alive = [ref() for ref in handles if ref() is not None]
    assert not alive and not block.exists(), (
        f"a shared curriculum and a handle attached to it, dropped without close(): {len(alive)} still referenced "
        f"(by {[type(r).__name__ for held in alive for r in gc.get_referrers(held)][:5]}), the block "
        f"{'still' if block.exists() else 'no longer'} in /dev/shm")


@pytest.mark.parametrize("wrapper", ["CurriculumEnv", "GymCurriculumEnv", "vector"])
def test_nothing_keeps_a_curriculum_alive_once_its_caller_lets_go(wrapper) -> None:
    """A curriculum handed to a seeded wrapper, or to a vector, is the caller's: once the
    caller dropped it and the wrapper (closed), nothing of the library may still hold it, or
    every run of a sweep in one process keeps its pools (and a shared one its block) alive."""
    curriculum = Curriculum(_curriculum(task_generator=SingleTaskGenerator({"episode_length": 2}, label="two steps"),
                                        algorithm=UniformConfig()))
    if wrapper == "vector":
        env = make_curriculum_vecenv(_exact_env, curriculum, backend="Serial", num_envs=2, seed=3)
        env.reset(seed=3)
    elif wrapper == "CurriculumEnv":
        env = CurriculumEnv(ExactAccountingEnv(), curriculum, seed=3)
        env.reset()
    else:
        env = GymCurriculumEnv(GymExactAccountingEnv(), curriculum, seed=3)
        env.reset(seed=3)
    alive = weakref.ref(curriculum)
    env.close()
    curriculum.close()
    del env, curriculum
    gc.collect()
    assert alive() is None, (
        f"a curriculum given to a seeded {wrapper}, closed and dropped with it, is still referenced by "
        f"{[type(r).__name__ for r in gc.get_referrers(alive())][:5]}")


@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
def test_a_staged_curriculum_wrapped_by_hand_needs_its_stage_broadcast(backend: str) -> None:
    """A vector built by hand under centralized tracking (`curriculum.vector`'s docstring) of a
    staged curriculum without a `StageBroadcast` is refused by name on every backend: each env
    holds its own copy of the curriculum, in this process or not, and only the broadcast tells
    it a stage changed. With the broadcast the same vector is accepted."""
    curriculum = Curriculum(CurriculumConfig(algorithm=_staged(), num_active_tasks=2))
    broadcast = StageBroadcast()

    def make_env(buf: Any = None, seed: int = 0) -> CurriculumEnv:
        return CurriculumEnv(ExactAccountingEnv(buf=buf, seed=seed), curriculum, seed=seed, buf=buf,
                             local_tracking=False, stage_source=broadcast)

    backends = {"Serial": pufferlib.vector.Serial, "Multiprocessing": pufferlib.vector.Multiprocessing}
    try:
        for given in (None, broadcast):
            vecenv = pufferlib.vector.make(make_env, backend=backends[backend], num_envs=2, num_workers=2)
            try:
                if given is None:
                    with pytest.raises(CurriculumConfigError, match="stage_broadcast"):
                        CentralizedCurriculumVecEnv(vecenv, curriculum)
                else:
                    CentralizedCurriculumVecEnv(vecenv, curriculum, stage_broadcast=given).close()
            finally:
                vecenv.close()
    finally:
        curriculum.close()


@pytest.mark.parametrize("given", [None, "a stage broadcast"], ids=["no broadcast", "broadcast"])
def test_a_uniform_vector_wrapped_by_hand_runs_with_or_without_a_stage_broadcast(given: str | None) -> None:
    """The recipe for building centralized tracking by hand (`curriculum.vector`'s docstring:
    the broadcast first, passed to every worker and to the vector) runs a uniform curriculum
    too, whose stage never changes: given a broadcast or not, the vector is built, steps and
    records every episode into the main curriculum."""
    curriculum = Curriculum(CurriculumConfig(task_generator=SingleTaskGenerator({"episode_length": 1}),
                                             algorithm=UniformConfig(), num_active_tasks=2))
    broadcast = StageBroadcast() if given else None

    def make_env(buf: Any = None, seed: int = 0) -> CurriculumEnv:
        return CurriculumEnv(ExactAccountingEnv(buf=buf, seed=seed), curriculum, seed=seed,
                             buf=buf, local_tracking=False, stage_source=broadcast)

    vecenv = pufferlib.vector.make(make_env, backend=pufferlib.vector.Serial, num_envs=2)
    try:
        try:
            wrapped = CentralizedCurriculumVecEnv(vecenv, curriculum, stage_broadcast=broadcast)
        except Exception as error:  # noqa: BLE001 - reported below
            pytest.fail(f"a uniform curriculum's centralized vector built by hand with {given or 'no broadcast'} was "
                        f"refused: {type(error).__name__}: {error}")
        wrapped.reset(seed=0)
        for _ in range(3):
            wrapped.step(np.zeros(wrapped.action_space.shape, dtype=np.int32))
        recorded = curriculum.stats()["total_completions"]
        assert recorded == wrapped.completions == 6, (
            f"a uniform curriculum's centralized vector built by hand with {given or 'no broadcast'}: 2 envs ran 3 "
            f"one-step episodes each, the main curriculum recorded {recorded} ({wrapped.completions} by the vector)")
        wrapped.close()
    finally:
        vecenv.close()
        curriculum.close()


@pytest.mark.parametrize("refused", ["learning progress", "shared"])
def test_a_vector_wrapped_by_hand_refuses_the_curricula_the_factory_refuses(refused: str) -> None:
    """Centralized tracking records in the main process into a local curriculum whose pool the
    worker copies can follow: `make_curriculum_vecenv(tracking="centralized")` refuses a
    learning-progress curriculum (its evictions change the pool) and a shared one, by name. A
    vector built by hand (`CentralizedCurriculumVecEnv` over the workers' `CurriculumEnv`s,
    as `curriculum.vector`'s docstring shows) refuses them by name too."""
    config = _curriculum(algorithm=LearningProgressConfig() if refused == "learning progress" else UniformConfig())
    curriculum = Curriculum(config, shared_memory=refused == "shared")

    def make_env(buf: Any = None, seed: int = 0) -> CurriculumEnv:
        return CurriculumEnv(ExactAccountingEnv(buf=buf, seed=seed), curriculum, seed=seed, buf=buf,
                             local_tracking=False)

    try:
        with pytest.raises(CurriculumConfigError):
            make_curriculum_vecenv(_exact_env, curriculum, backend="Serial", num_envs=2, tracking="centralized")
        vecenv = pufferlib.vector.make(make_env, backend=pufferlib.vector.Serial, num_envs=2)
        try:
            try:
                wrapped = CentralizedCurriculumVecEnv(vecenv, curriculum)
            except CurriculumConfigError:
                return
            wrapped.close()
            pytest.fail(f"a vector built by hand under centralized tracking accepted a {refused} curriculum, which "
                        f"make_curriculum_vecenv(tracking='centralized') refuses")
        finally:
            vecenv.close()
    finally:
        curriculum.close()


#: keyword options the factory does not take: pufferlib's own that it leaves out, and misspellings
_NOT_VEC_OPTIONS = {"sync_traj": True, "batchsize": 2, "zero_copies": False, "num_threads": 2}


@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
def test_a_keyword_option_the_factory_does_not_take_is_refused_by_name(backend: str) -> None:
    """`make_curriculum_vecenv` takes `batch_size`, `zero_copy` and `overwork` beside its named
    arguments; any other keyword (a pufferlib option it leaves out, a misspelling) is refused
    as `CurriculumConfigError` naming it, before a worker starts, never handed on to fail in
    pufferlib with an error of its own."""
    curriculum = Curriculum(_curriculum(algorithm=UniformConfig()), shared_memory=backend == "Multiprocessing")
    wrong = []
    try:
        for name, value in _NOT_VEC_OPTIONS.items():
            try:
                make_curriculum_vecenv(_exact_env, curriculum, backend=backend, num_envs=2, **{name: value}).close()
            except CurriculumConfigError as error:
                if name not in str(error):
                    wrong.append(f"{name}={value!r}: refused without naming it: {error}")
                continue
            except Exception as error:  # noqa: BLE001 - reported below
                wrong.append(f"{name}={value!r}: {type(error).__name__}: {error}")
                continue
            wrong.append(f"{name}={value!r}: accepted")
    finally:
        curriculum.close()
    assert not wrong, f"{backend}: keyword options make_curriculum_vecenv does not take: {wrong}"
