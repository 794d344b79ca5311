"""Curriculum and algorithm configs, validated at construction.

One dataclass per thing, a docstring under each field, derived values in one place. A bad
field raises `CurriculumConfigError` naming the field, the allowed range and the value.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from curriculum.errors import CurriculumConfigError
from curriculum.generators import TaskGenerator

__all__ = [
    "AlgorithmConfig",
    "UniformConfig",
    "LearningProgressConfig",
    "Stage",
    "StagedProgressionConfig",
    "CurriculumConfig",
    "MAX_ACTIVE_TASKS",
    "MAX_REFRESH_INTERVAL",
    "MAX_COUNT",
    "MAX_SCORE_MAGNITUDE",
    "MAX_Z",
]

MAX_ACTIVE_TASKS: Final = 10_000_000
"""Largest pool a curriculum accepts."""
MAX_REFRESH_INTERVAL: Final = MAX_ACTIVE_TASKS // 8
"""Largest `refresh_interval`: the derived value for the largest pool. Each refresh pre-draws
that many slots, so a larger value would only cost memory."""
MAX_COUNT: Final = 2**53
"""Largest completion count, sample count, stage counter or stage-change count a curriculum
accepts from a checkpoint or a stage broadcast: below it, counts and sums of scores stay exact
in float64 and every int64 increment is far from overflowing."""
MAX_SCORE_MAGNITUDE: Final = sys.float_info.max / MAX_COUNT
"""Largest |bound| of `score_range` (about 2e292): `MAX_COUNT` scores sum to a finite number."""
MAX_Z: Final = 1e6
"""Largest `noise_z` and `frontier_z`: a band a million standard deviations wide already takes
every gap for noise, and the squares the algorithm computes stay far from overflowing."""


def _require(ok: bool, name: str, expected: str, value: Any) -> None:
    if not ok:
        raise CurriculumConfigError(f"Expected `{name}` to be {expected}, received {value!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _fraction(name: str, value: Any, *, closed_low: bool = True, closed_high: bool = True) -> None:
    ok = _is_real(value) and (value >= 0 if closed_low else value > 0) and (value <= 1 if closed_high else value < 1)
    low = "[0" if closed_low else "(0"
    high = "1]" if closed_high else "1)"
    _require(ok, name, f"a number in {low}, {high}", value)


class AlgorithmConfig:
    """Base of the algorithm configs; `name` picks the algorithm."""

    name: str = ""

    def describe(self) -> dict[str, Any]:
        """JSON-able fields, used to tell whether a saved state fits this config."""
        out: dict[str, Any] = {"name": self.name}
        for key, value in vars(self).items():
            out[key] = value.describe() if hasattr(value, "describe") else repr(value)
        return out


@dataclass
class UniformConfig(AlgorithmConfig):
    """Discrete random: every active task equally likely. No eviction."""

    name = "uniform"


MIN_EMA_TIMESCALE = 1e-6
"""Slowest fast-EMA rate `LearningProgressConfig` accepts: retries and proofs last 1 / rate
completions, which must stay a countable number."""


@dataclass
class LearningProgressConfig(AlgorithmConfig):
    """Bidirectional learning progress over baseline-normalised scores, with a revisit budget
    for mastered tasks and a memory of configurations and labels that turned out stagnant
    (`curriculum.algorithms.learning_progress` explains each mechanism and why)."""

    name = "learning_progress"

    ema_timescale: float = 0.1
    """Fast EMA rate alpha_f in (0, 1); the slow EMA runs at alpha_f * `slow_timescale_factor`."""
    slow_timescale_factor: float = 0.2
    """alpha_s / alpha_f, in (0, 1)."""
    exploration: float = 0.05
    """Share of sampling mass spread uniformly over the pool, in [0, 1): the floor every task
    keeps, so a stagnant task that becomes learnable is still noticed."""
    cold_exploration: float = 0.2
    """Share of sampling mass split among tasks not yet warm (while any exist), in [0, 1); each
    cold task's part is scaled by its label's usefulness, so the share shrinks where new tasks
    keep turning out stagnant."""
    revisit: float = 0.1
    """Share of sampling mass split evenly among learned tasks without learning progress, in
    [0, 1): mastered tasks keep being practised, so forgetting shows up as LP."""
    retry: float = 0.1
    """Share of sampling mass for stagnant tasks never learned, in [0, 1), spent only after a
    task is mastered, until every such label had one fast-EMA timescale of samples: what the
    student needed for them may just have been learned."""
    min_samples_for_lp: int = 5
    """Completions before a task's LP is trusted (the warm-up that sets its baseline); colder
    tasks get the cold exploration weight."""
    noise_z: float = 2.0
    """LP counts only the |fast - slow| gap beyond this many standard deviations of the gap
    that pure noise would produce; tasks whose score only moves as noise get LP ~ 0. In
    [0, `MAX_Z`]."""
    frontier_z: float = 3.0
    """A never-learned task without LP is on the frontier (partly learned, improving too slowly
    for LP to show it) when its slow EMA lies this many standard errors, and at least half of
    `mastered_gain`, above its baseline; when no task has LP, the frontier gets the rest of the
    mass before learned tasks do, for two slow-EMA timescales of practice without progress
    (counted again from zero whenever a configuration is newly mastered). In [0, `MAX_Z`]."""
    max_baseline: float = 0.75
    """The baseline (warm-up mean score) is capped here so normalisation never divides by ~0;
    a task scoring at least this much counts as learned."""
    mastered_gain: float = 0.25
    """A warm task whose slow EMA rose this far above its baseline (in baseline-normalised
    units, in (0, 1]) counts as learned: mastered, not impossible."""
    config_memory: int = 4096
    """Entries of the memory of evicted task configurations (label + env config); a task whose
    configuration is remembered starts from its statistics instead of cold. 0 disables it."""
    admission_candidates: int = 8
    """Next task ids looked at when eviction frees a slot (>= 1); the first not known to be
    stagnant is admitted. 1 admits the next id, as without a memory."""
    admission_usefulness: float = 0.1
    """A candidate whose label's usefulness (EMA of its warm completions showing progress or
    mastery) is below this, in [0, 1], is passed over at admission while another qualifies."""

    def __post_init__(self) -> None:
        _fraction("ema_timescale", self.ema_timescale, closed_low=False, closed_high=False)
        _require(self.ema_timescale >= MIN_EMA_TIMESCALE, "ema_timescale",
                 f"at least {MIN_EMA_TIMESCALE} (an EMA over at most a million completions)", self.ema_timescale)
        _fraction("slow_timescale_factor", self.slow_timescale_factor, closed_low=False, closed_high=False)
        _fraction("exploration", self.exploration, closed_high=False)
        _fraction("cold_exploration", self.cold_exploration, closed_high=False)
        _fraction("revisit", self.revisit, closed_high=False)
        _fraction("retry", self.retry, closed_high=False)
        shares = self.exploration + self.cold_exploration + self.revisit + self.retry
        _require(shares < 1.0, "exploration + cold_exploration + revisit + retry", "< 1", shares)
        _require(_is_int(self.min_samples_for_lp) and self.min_samples_for_lp >= 1,
                 "min_samples_for_lp", "an integer >= 1", self.min_samples_for_lp)
        for name in ("noise_z", "frontier_z"):
            value = getattr(self, name)
            _require(_is_real(value) and 0 <= value <= MAX_Z, name, f"a number in [0, MAX_Z={MAX_Z:g}]", value)
        _fraction("max_baseline", self.max_baseline, closed_high=False)
        _fraction("mastered_gain", self.mastered_gain, closed_low=False)
        _require(_is_int(self.config_memory) and 0 <= self.config_memory <= 10_000_000, "config_memory",
                 "an integer in [0, 10000000]", self.config_memory)
        _require(_is_int(self.admission_candidates) and 1 <= self.admission_candidates <= 1024,
                 "admission_candidates", "an integer in [1, 1024]", self.admission_candidates)
        _fraction("admission_usefulness", self.admission_usefulness)


@dataclass
class Stage:
    """One stage of a staged curriculum: a name and the generator of its tasks."""

    name: str
    task_generator: TaskGenerator

    def __post_init__(self) -> None:
        _require(isinstance(self.name, str) and bool(self.name), "Stage.name", "a non-empty string", self.name)
        _require(isinstance(self.task_generator, TaskGenerator), "Stage.task_generator",
                 "a TaskGenerator", type(self.task_generator).__name__)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "task_generator": self.task_generator.describe()}


@dataclass
class StagedProgressionConfig(AlgorithmConfig):
    """Ordered stages; advance when the recent mean score of the stage passes a threshold."""

    name = "staged_progression"

    stages: Sequence[Stage] = ()
    """The stages, easiest first (at least one)."""
    advancement_threshold: float = 0.7
    """Mean score over the last `window` episodes of the stage needed to advance, in (0, 1]."""
    min_episodes: int = 50
    """Episodes a stage runs before it may advance or regress (>= 1)."""
    window: int = 50
    """Episodes in the rolling mean (>= 1)."""
    regression_threshold: float | None = None
    """Mean score below which the curriculum falls back one stage; None disables regression."""
    previous_stage_mix: float = 0.0
    """Share of the pool given to tasks of the previous stage, in [0, 1)."""

    def __post_init__(self) -> None:
        _require(isinstance(self.stages, Sequence) and not isinstance(self.stages, (str, bytes)),
                 "stages", "a non-empty sequence of Stage", self.stages)
        self.stages = tuple(self.stages)
        _require(len(self.stages) >= 1 and all(isinstance(s, Stage) for s in self.stages),
                 "stages", "a non-empty sequence of Stage", self.stages)
        names = [s.name for s in self.stages]
        _require(len(set(names)) == len(names), "stages", "stages with distinct names", names)
        _fraction("advancement_threshold", self.advancement_threshold, closed_low=False)
        _require(_is_int(self.min_episodes) and self.min_episodes >= 1, "min_episodes", "an integer >= 1",
                 self.min_episodes)
        _require(_is_int(self.window) and self.window >= 1, "window", "an integer >= 1", self.window)
        if self.regression_threshold is not None:
            _require(_is_real(self.regression_threshold) and 0 <= self.regression_threshold < self.advancement_threshold,
                     "regression_threshold", f"None or a number in [0, advancement_threshold={self.advancement_threshold})",
                     self.regression_threshold)
        _fraction("previous_stage_mix", self.previous_stage_mix, closed_high=False)

    def describe(self) -> dict[str, Any]:
        out = {k: v for k, v in super().describe().items() if k != "stages"}
        out["stages"] = [s.describe() for s in self.stages]
        return out


@dataclass
class CurriculumConfig:
    """A curriculum: which tasks, how many active at once, how they are chosen."""

    task_generator: TaskGenerator | None = None
    """Where tasks come from (None only for staged progression, whose stages carry generators)."""
    algorithm: AlgorithmConfig = field(default_factory=LearningProgressConfig)
    """How tasks are sampled and scored."""
    num_active_tasks: int = 64
    """Pool size (>= 1)."""
    seed: int = 0
    """Seed of the sampling random stream."""
    min_presentations: int = 10
    """Completions a task needs before it may be evicted (>= 1)."""
    eviction_percentile: float = 20.0
    """Each refresh marks at most this percent of the eligible tasks, the lowest-scoring, for
    eviction, in [0, 100]; 0 disables eviction."""
    score_range: tuple[float, float] = (0.0, 1.0)
    """Scores outside [low, high] are refused with `InvalidScoreError`. The tracker keeps the
    scores as given; the algorithm sees them normalised to [0, 1] by (s - low) / (high - low),
    so its thresholds (`advancement_threshold`, `regression_threshold`, `max_baseline`) are in
    that unit and its state stays finite whatever the range. Both bounds lie within
    [-MAX_SCORE_MAGNITUDE, MAX_SCORE_MAGNITUDE], so sums of scores stay finite."""
    refresh_interval: int | None = None
    """Completions between recomputations of the sampling distribution; None derives
    max(32, num_active_tasks // 8), which keeps the per-call cost flat in pool size."""

    def __post_init__(self) -> None:
        _require(isinstance(self.algorithm, AlgorithmConfig), "algorithm", "an AlgorithmConfig",
                 type(self.algorithm).__name__)
        if isinstance(self.algorithm, StagedProgressionConfig):
            _require(self.task_generator is None, "task_generator",
                     "None with staged progression (each Stage has its own generator)",
                     type(self.task_generator).__name__)
        else:
            _require(isinstance(self.task_generator, TaskGenerator), "task_generator", "a TaskGenerator",
                     type(self.task_generator).__name__)
        _require(_is_int(self.num_active_tasks) and 1 <= self.num_active_tasks <= MAX_ACTIVE_TASKS,
                 "num_active_tasks", f"an integer in [1, {MAX_ACTIVE_TASKS}]", self.num_active_tasks)
        _require(_is_int(self.seed) and self.seed >= 0, "seed", "an integer >= 0", self.seed)
        _require(_is_int(self.min_presentations) and self.min_presentations >= 1, "min_presentations",
                 "an integer >= 1", self.min_presentations)
        _require(_is_real(self.eviction_percentile) and 0 <= self.eviction_percentile <= 100,
                 "eviction_percentile", "a number in [0, 100]", self.eviction_percentile)
        low_high = tuple(self.score_range) if isinstance(self.score_range, (tuple, list)) else ()
        _require(len(low_high) == 2 and all(_is_real(v) for v in low_high) and low_high[0] < low_high[1],
                 "score_range", "a pair (low, high) of finite numbers with low < high", self.score_range)
        low, high = float(low_high[0]), float(low_high[1])
        _require(max(-low, high) <= MAX_SCORE_MAGNITUDE, "score_range",
                 f"within [-{MAX_SCORE_MAGNITUDE:.6g}, {MAX_SCORE_MAGNITUDE:.6g}] (sums of scores must stay finite)",
                 self.score_range)
        self.score_range = (low, high)
        if self.refresh_interval is None:
            self.refresh_interval = max(32, self.num_active_tasks // 8)
        _require(_is_int(self.refresh_interval) and 1 <= self.refresh_interval <= MAX_REFRESH_INTERVAL,
                 "refresh_interval", f"None or an integer in [1, {MAX_REFRESH_INTERVAL}]", self.refresh_interval)

    @property
    def generators(self) -> tuple[TaskGenerator, ...]:
        """Every generator the curriculum draws from."""
        if isinstance(self.algorithm, StagedProgressionConfig):
            return tuple(s.task_generator for s in self.algorithm.stages)
        assert self.task_generator is not None
        return (self.task_generator,)

    def describe(self) -> dict[str, Any]:
        """JSON-able description; a saved state only loads into a curriculum with the same one."""
        return {
            "task_generator": self.task_generator.describe() if self.task_generator else None,
            "algorithm": self.algorithm.describe(),
            "num_active_tasks": self.num_active_tasks,
            "seed": self.seed,
            "min_presentations": self.min_presentations,
            "eviction_percentile": self.eviction_percentile,
            "score_range": list(self.score_range),
            "refresh_interval": self.refresh_interval,
        }
