"""Configs: defaults, derived fields, and bad fields refused with field, range and value."""

from __future__ import annotations

import json

import pytest
from helpers import exact, grid_generator, staged_config

from curriculum import (
    Curriculum,
    CurriculumConfig,
    CurriculumConfigError,
    LearningProgressConfig,
    SingleTaskGenerator,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
)

STAGES = [Stage("easy", SingleTaskGenerator({}, label="easy")), Stage("hard", SingleTaskGenerator({}, label="hard"))]


@pytest.mark.parametrize(("pool", "interval"), [(1, 32), (64, 32), (256, 32), (1000, 125), (100_000, 12_500)])
def test_refresh_interval_is_derived_from_the_pool_size(pool: int, interval: int) -> None:
    assert CurriculumConfig(task_generator=grid_generator(), num_active_tasks=pool).refresh_interval == interval


def test_explicit_refresh_interval_and_score_range_are_kept_as_given() -> None:
    config = CurriculumConfig(task_generator=grid_generator(), refresh_interval=3, score_range=[-1, 2])
    assert config.refresh_interval == 3
    assert config.score_range == (-1.0, 2.0)
    assert all(type(v) is float for v in config.score_range)


def test_description_is_json_and_tells_configs_apart() -> None:
    base = CurriculumConfig(task_generator=grid_generator())
    description = base.describe()
    assert json.loads(json.dumps(description)) == description
    assert CurriculumConfig(task_generator=grid_generator()).describe() == description
    assert CurriculumConfig(task_generator=grid_generator(seed=1)).describe() != description
    assert CurriculumConfig(task_generator=grid_generator(), seed=1).describe() != description
    assert CurriculumConfig(task_generator=grid_generator(), algorithm=LearningProgressConfig(exploration=0.2)) \
        .describe() != description
    assert staged_config().describe() != staged_config(min_episodes=11).describe()


def test_staged_config_exposes_the_stage_generators() -> None:
    config = CurriculumConfig(algorithm=StagedProgressionConfig(stages=STAGES))
    assert config.generators == tuple(s.task_generator for s in STAGES)
    assert config.algorithm.stages == tuple(STAGES)


BAD_LP = [
    ({"ema_timescale": 0.0}, "Expected `ema_timescale` to be a number in (0, 1), received 0.0"),
    ({"ema_timescale": 1.0}, "Expected `ema_timescale` to be a number in (0, 1), received 1.0"),
    ({"ema_timescale": float("nan")}, "Expected `ema_timescale` to be a number in (0, 1), received nan"),
    ({"ema_timescale": 5e-324}, "Expected `ema_timescale` to be at least 1e-06 (an EMA over at most a million "
                                "completions), received 5e-324"),
    ({"slow_timescale_factor": 1}, "Expected `slow_timescale_factor` to be a number in (0, 1), received 1"),
    ({"exploration": 1.0}, "Expected `exploration` to be a number in [0, 1), received 1.0"),
    ({"exploration": -0.1}, "Expected `exploration` to be a number in [0, 1), received -0.1"),
    ({"min_samples_for_lp": 0}, "Expected `min_samples_for_lp` to be an integer >= 1, received 0"),
    ({"min_samples_for_lp": 2.0}, "Expected `min_samples_for_lp` to be an integer >= 1, received 2.0"),
    ({"noise_z": -1.0}, "Expected `noise_z` to be a number in [0, MAX_Z=1e+06], received -1.0"),
    ({"noise_z": float("inf")}, "Expected `noise_z` to be a number in [0, MAX_Z=1e+06], received inf"),
    ({"noise_z": 1.7e154}, "Expected `noise_z` to be a number in [0, MAX_Z=1e+06], received 1.7e+154"),
    ({"frontier_z": -1.0}, "Expected `frontier_z` to be a number in [0, MAX_Z=1e+06], received -1.0"),
    ({"frontier_z": float("nan")}, "Expected `frontier_z` to be a number in [0, MAX_Z=1e+06], received nan"),
    ({"max_baseline": 1.0}, "Expected `max_baseline` to be a number in [0, 1), received 1.0"),
    ({"max_baseline": True}, "Expected `max_baseline` to be a number in [0, 1), received True"),
    ({"revisit": 1.0}, "Expected `revisit` to be a number in [0, 1), received 1.0"),
    ({"retry": -0.1}, "Expected `retry` to be a number in [0, 1), received -0.1"),
    ({"exploration": 0.3, "cold_exploration": 0.3, "revisit": 0.2, "retry": 0.2},
     "Expected `exploration + cold_exploration + revisit + retry` to be < 1, received 1.0"),
    ({"mastered_gain": 0.0}, "Expected `mastered_gain` to be a number in (0, 1], received 0.0"),
    ({"config_memory": -1}, "Expected `config_memory` to be an integer in [0, 10000000], received -1"),
    ({"config_memory": 4096.0}, "Expected `config_memory` to be an integer in [0, 10000000], received 4096.0"),
    ({"admission_candidates": 0}, "Expected `admission_candidates` to be an integer in [1, 1024], received 0"),
    ({"admission_usefulness": 1.5}, "Expected `admission_usefulness` to be a number in [0, 1], received 1.5"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_LP, ids=[m for _, m in BAD_LP])
def test_bad_learning_progress_field(fields: dict, message: str) -> None:
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        LearningProgressConfig(**fields)


BAD_STAGED = [
    ({"stages": ()}, "Expected `stages` to be a non-empty sequence of Stage, received ()"),
    ({"stages": None}, "Expected `stages` to be a non-empty sequence of Stage, received None"),
    ({"stages": "easy"}, "Expected `stages` to be a non-empty sequence of Stage, received 'easy'"),
    ({"stages": [STAGES[0], STAGES[0]]}, "Expected `stages` to be stages with distinct names, received ['easy', 'easy']"),
    ({"advancement_threshold": 0.0}, "Expected `advancement_threshold` to be a number in (0, 1], received 0.0"),
    ({"advancement_threshold": 1.5}, "Expected `advancement_threshold` to be a number in (0, 1], received 1.5"),
    ({"min_episodes": 0}, "Expected `min_episodes` to be an integer >= 1, received 0"),
    ({"window": True}, "Expected `window` to be an integer >= 1, received True"),
    ({"regression_threshold": 0.7},
     "Expected `regression_threshold` to be None or a number in [0, advancement_threshold=0.7), received 0.7"),
    ({"regression_threshold": -0.1},
     "Expected `regression_threshold` to be None or a number in [0, advancement_threshold=0.7), received -0.1"),
    ({"previous_stage_mix": 1.0}, "Expected `previous_stage_mix` to be a number in [0, 1), received 1.0"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_STAGED, ids=[m for _, m in BAD_STAGED])
def test_bad_staged_progression_field(fields: dict, message: str) -> None:
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        StagedProgressionConfig(**{"stages": STAGES, **fields})


def test_stage_needs_a_name_and_a_generator() -> None:
    with pytest.raises(CurriculumConfigError, match=exact("Expected `Stage.name` to be a non-empty string, received ''")):
        Stage("", SingleTaskGenerator({}))
    with pytest.raises(CurriculumConfigError,
                       match=exact("Expected `Stage.task_generator` to be a TaskGenerator, received 'dict'")):
        Stage("a", {"x": 1})


BAD_CURRICULUM = [
    ({"task_generator": None}, "Expected `task_generator` to be a TaskGenerator, received 'NoneType'"),
    ({"algorithm": "uniform"}, "Expected `algorithm` to be an AlgorithmConfig, received 'str'"),
    ({"num_active_tasks": 0}, "Expected `num_active_tasks` to be an integer in [1, 10000000], received 0"),
    ({"num_active_tasks": 10_000_001},
     "Expected `num_active_tasks` to be an integer in [1, 10000000], received 10000001"),
    ({"num_active_tasks": 8.0}, "Expected `num_active_tasks` to be an integer in [1, 10000000], received 8.0"),
    ({"seed": -1}, "Expected `seed` to be an integer >= 0, received -1"),
    ({"min_presentations": 0}, "Expected `min_presentations` to be an integer >= 1, received 0"),
    ({"eviction_percentile": 100.5}, "Expected `eviction_percentile` to be a number in [0, 100], received 100.5"),
    ({"eviction_percentile": float("nan")}, "Expected `eviction_percentile` to be a number in [0, 100], received nan"),
    ({"score_range": (1.0, 1.0)},
     "Expected `score_range` to be a pair (low, high) of finite numbers with low < high, received (1.0, 1.0)"),
    ({"score_range": (0.0, float("inf"))},
     "Expected `score_range` to be a pair (low, high) of finite numbers with low < high, received (0.0, inf)"),
    ({"score_range": 1.0},
     "Expected `score_range` to be a pair (low, high) of finite numbers with low < high, received 1.0"),
    ({"refresh_interval": 0}, "Expected `refresh_interval` to be None or an integer in [1, 1250000], received 0"),
    ({"refresh_interval": 10**12},
     "Expected `refresh_interval` to be None or an integer in [1, 1250000], received 1000000000000"),
    ({"score_range": (0, 10**400)},
     f"Expected `score_range` to be a pair (low, high) of finite numbers with low < high, received (0, {10**400})"),
    ({"score_range": (-1e308, 1e308)},
     "Expected `score_range` to be within [-1.99584e+292, 1.99584e+292] (sums of scores must stay finite), "
     "received (-1e+308, 1e+308)"),
    ({"seed": True}, "Expected `seed` to be an integer >= 0, received True"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_CURRICULUM, ids=[m for _, m in BAD_CURRICULUM])
def test_bad_curriculum_field(fields: dict, message: str) -> None:
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        CurriculumConfig(**{"task_generator": grid_generator(), "algorithm": UniformConfig(), **fields})


def test_staged_progression_takes_its_generators_from_the_stages() -> None:
    message = ("Expected `task_generator` to be None with staged progression (each Stage has its own generator), "
               "received 'SingleTaskGenerator'")
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        CurriculumConfig(task_generator=SingleTaskGenerator({}), algorithm=StagedProgressionConfig(stages=STAGES))


def test_curriculum_refuses_a_config_of_the_wrong_type() -> None:
    with pytest.raises(CurriculumConfigError, match=exact("Expected `config` to be a CurriculumConfig, received dict")):
        Curriculum({"num_active_tasks": 4})
