"""A learning-progress bandit that evicts at draw time and names tasks with its own ids.

Written from scratch: every task in the pool keeps a fast and a slow moving average of its
scores; their gap is its learning progress (either direction: a decline is progress to win
back). Draws mix "proportional to learning progress" with a uniform share `explore`. Once
every `num_active_tasks` draws, before the draw, the bandit looks for one stale task: one
that has had `min_presentations` completions, whose progress is below `stale_progress` and
in the lowest `eviction_percentile` of the pool; it is replaced by a fresh task. Eviction
happens at draw time, not inside the update.

Task ids are a bijective scramble of a serial number (`scramble(serial)`, 40 bits), so they
are large and not in creation order; an id is known exactly when its serial is below the
next one. A completion of an evicted task is late (not credited, returns False).

Gate it with `curriculum-harness gate --curriculum progress_bandit:make_curriculum`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from curriculum import CurriculumConfig, StagedProgressionConfig, UniformConfig
from curriculum.errors import CurriculumConfigError, CurriculumStateError, InvalidScoreError, UnknownTaskError

__all__ = ["BanditTask", "ProgressBandit", "make_curriculum", "scramble", "unscramble", "STATE_FORMAT"]

STATE_FORMAT = "progress-bandit/1"
_BITS = 40
_MASK = (1 << _BITS) - 1
_MULTIPLIER = 0x9E3779B97F & _MASK | 1  # odd: invertible modulo 2**40
_INVERSE = pow(_MULTIPLIER, -1, 1 << _BITS)


def scramble(serial: int) -> int:
    """The task id of the `serial`-th task created (a bijection on [0, 2**40))."""
    x = (serial * _MULTIPLIER) & _MASK
    return x ^ (x >> 20)


def unscramble(task_id: int) -> int:
    """The serial of `task_id` (inverse of `scramble`)."""
    x = task_id ^ (task_id >> 20)
    return (x * _INVERSE) & _MASK


@dataclass
class BanditTask:
    """A task in the pool with its running averages."""

    task_id: int
    serial: int
    env_cfg: Mapping[str, Any]
    label: str
    num_completions: int = 0
    score_sum: float = 0.0
    fast: float = 0.0
    slow: float = 0.0

    @property
    def mean_score(self) -> float:
        return self.score_sum / self.num_completions if self.num_completions else 0.0

    @property
    def progress(self) -> float:
        return abs(self.fast - self.slow)


class ProgressBandit:
    """Learning-progress sampling over a pool, eviction at the next draw."""

    def __init__(self, config: CurriculumConfig, *, explore: float = 0.2, fast_rate: float = 0.1,
                 slow_rate: float = 0.02, stale_progress: float = 0.02) -> None:
        if config.task_generator is None:
            raise CurriculumConfigError("Expected `task_generator` for the progress bandit, received None")
        self.config = config
        self.generator = config.task_generator
        self.explore = explore
        self.fast_rate, self.slow_rate = fast_rate, slow_rate
        self.stale_progress = stale_progress
        self._draws = 0
        self.low, self.high = config.score_range
        self._rng = np.random.Generator(np.random.PCG64(config.seed))
        self._next_serial = 0
        self._pool = [self._new_task() for _ in range(config.num_active_tasks)]
        self._where = {task.task_id: i for i, task in enumerate(self._pool)}
        self.completions = 0
        self.late = 0
        self.evictions = 0

    def _new_task(self) -> BanditTask:
        serial, self._next_serial = self._next_serial, self._next_serial + 1
        env_cfg, label = self.generator.generate(serial)
        return BanditTask(scramble(serial), serial, env_cfg, label)

    # ---- the protocol ---------------------------------------------------------------------------
    def get_task(self) -> BanditTask:
        self._draws += 1
        if self._draws % len(self._pool) == 0:
            self._evict_one_stale_task()
        return self._pool[int(self._rng.choice(len(self._pool), p=self.sampling_probabilities()))]

    def update_task_performance(self, task_id: int, score: float) -> bool:
        if isinstance(task_id, bool) or not isinstance(task_id, Integral) or not 0 <= task_id <= _MASK \
                or unscramble(int(task_id)) >= self._next_serial:
            raise UnknownTaskError(f"Expected a task id this bandit created, received {task_id!r}")
        if isinstance(score, bool) or not isinstance(score, Real) or not math.isfinite(score) \
                or not self.low <= score <= self.high:
            raise InvalidScoreError(f"Expected a score in [{self.low}, {self.high}] for task {task_id}, "
                                    f"received {score!r}")
        position = self._where.get(int(task_id))
        if position is None:
            self.late += 1
            return False
        task = self._pool[position]
        value = (float(score) - self.low) / (self.high - self.low)
        if task.num_completions == 0:
            task.fast = task.slow = value
        else:
            task.fast += self.fast_rate * (value - task.fast)
            task.slow += self.slow_rate * (value - task.slow)
        task.num_completions += 1
        task.score_sum += float(score)
        self.completions += 1
        return True

    def stats(self) -> dict[str, Any]:
        per_label: dict[str, list[float]] = {}
        for task in self._pool:
            per_label.setdefault(task.label, []).append(task.progress)
        return {
            "num_active_tasks": self.num_active_tasks,
            "total_completions": self.completions,
            "late_completions": self.late,
            "evictions": self.evictions,
            "tasks_created": self._next_serial,
            "per_label_lp_scores": {label: float(np.mean(v)) for label, v in sorted(per_label.items())},
        }

    # ---- the pool -------------------------------------------------------------------------------
    @property
    def num_active_tasks(self) -> int:
        return len(self._pool)

    def active_tasks(self) -> list[BanditTask]:
        return list(self._pool)

    def task_scores(self) -> np.ndarray:
        """Learning progress of each pool task, in `active_tasks()` order."""
        return np.array([task.progress for task in self._pool])

    def sampling_probabilities(self) -> np.ndarray:
        n = len(self._pool)
        progress = self.task_scores()
        total = float(progress.sum())
        explore = 1.0 if isinstance(self.config.algorithm, UniformConfig) or total <= 0.0 else self.explore
        greedy = progress / total if total > 0.0 else np.zeros(n)
        return (1.0 - explore) * greedy + explore / n

    def _evict_one_stale_task(self) -> None:
        percentile = self.config.eviction_percentile
        if percentile <= 0.0 or isinstance(self.config.algorithm, UniformConfig):
            return
        eligible = [i for i, t in enumerate(self._pool) if t.num_completions >= self.config.min_presentations]
        if not eligible:
            return
        progress = np.array([self._pool[i].progress for i in eligible])
        cut = min(float(np.percentile(progress, percentile)), self.stale_progress)
        candidates = [i for i in eligible if self._pool[i].progress <= cut]
        if not candidates:
            return
        stale = min(candidates, key=lambda i: self._pool[i].progress)
        del self._where[self._pool[stale].task_id]
        self._pool[stale] = fresh = self._new_task()
        self._where[fresh.task_id] = stale
        self.evictions += 1

    # ---- checkpoints ----------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "rng": self._rng.bit_generator.state,
            "next_serial": self._next_serial,
            "draws": self._draws,
            "counters": [self.completions, self.late, self.evictions],
            "pool": [[t.serial, t.num_completions, t.score_sum, t.fast, t.slow] for t in self._pool],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore a `get_state()` snapshot; everything is checked before anything changes."""
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise CurriculumStateError(f"Cannot load state: expected format {STATE_FORMAT!r}")
        try:
            next_serial, draws = int(state["next_serial"]), int(state["draws"])
            counters = [int(v) for v in state["counters"]]
            rows = [(int(s), int(n), float(total), float(fast), float(slow))
                    for s, n, total, fast, slow in state["pool"]]
            rng = np.random.Generator(np.random.PCG64())
            rng.bit_generator.state = state["rng"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CurriculumStateError(f"Cannot load state: {type(exc).__name__}: {exc}") from None
        serials = [row[0] for row in rows]
        if len(rows) != len(self._pool) or len(set(serials)) != len(rows) or len(counters) != 3 \
                or not all(0 <= s < next_serial for s in serials):
            raise CurriculumStateError(f"Cannot load state: expected {len(self._pool)} distinct tasks created "
                                       f"before serial {next_serial}")
        pool = []
        for serial, count, total, fast, slow in rows:
            env_cfg, label = self.generator.generate(serial)
            pool.append(BanditTask(scramble(serial), serial, env_cfg, label, count, total, fast, slow))
        self._rng, self._next_serial, self._draws, self._pool = rng, next_serial, draws, pool
        self._where = {task.task_id: i for i, task in enumerate(pool)}
        self.completions, self.late, self.evictions = counters


def make_curriculum(config: CurriculumConfig) -> ProgressBandit:
    """`--curriculum` factory: learning-progress and uniform configs (uniform: no eviction,
    uniform draws); staged progression is not what this curriculum does."""
    if isinstance(config.algorithm, StagedProgressionConfig):
        raise CurriculumConfigError("Expected a learning-progress or uniform config for the progress bandit, "
                                    "received staged progression")
    return ProgressBandit(config)
