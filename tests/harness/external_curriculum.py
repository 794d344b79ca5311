"""A curriculum that is not ours, behind the harness protocol: the plug-in path of the gate.

`GoldilocksThompsonSampler` is written from scratch and knows nothing of `curriculum/`.
Tasks of intermediate difficulty teach most, so every active task keeps a Beta posterior
over its success rate and each draw takes the task whose sampled rate lands nearest
`target`. A task whose mean score, after `min_plays` plays, says it is mastered or hopeless
is retired and replaced by a fresh one. Task ids are a running counter (not slot-encoded),
and there is no learning progress anywhere.

`ExternalCurriculum` adapts it to `harness.protocol.CurriculumProtocol`, the way a user
would wrap their own curriculum for `pytest scenarios/
--curriculum=external_curriculum:make_external_curriculum` (with this folder on
PYTHONPATH): it validates input with the library's named errors, counts completions and
checkpoints to JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from curriculum import CurriculumConfig
from curriculum.errors import CurriculumConfigError, CurriculumStateError, InvalidScoreError, UnknownTaskError

__all__ = ["BanditTask", "GoldilocksThompsonSampler", "ExternalCurriculum", "make_external_curriculum",
           "STATE_FORMAT"]

STATE_FORMAT = "goldilocks-thompson/1"

TaskMaker = Callable[[int], tuple[Mapping[str, Any], str]]


# ---- the algorithm (not ours) -----------------------------------------------------------------
@dataclass
class BanditTask:
    """One arm: the task handed to the env, plus its score tallies."""

    task_id: int
    env_cfg: Mapping[str, Any]
    label: str
    successes: float = 0.0
    failures: float = 0.0
    plays: int = 0


class GoldilocksThompsonSampler:
    """Thompson sampling towards tasks whose success rate is near `target`."""

    def __init__(self, make_task: TaskMaker, *, pool_size: int, seed: int, target: float = 0.5,
                 min_plays: int = 10, keep_between: tuple[float, float] = (0.1, 0.9)) -> None:
        self.make_task = make_task
        self.target = target
        self.min_plays = min_plays
        self.keep_between = keep_between
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.next_id = 0
        self.retired = 0
        self.pool = [self.new_task() for _ in range(pool_size)]
        self.index = {task.task_id: i for i, task in enumerate(self.pool)}

    def new_task(self, task_id: int | None = None) -> BanditTask:
        if task_id is None:
            task_id, self.next_id = self.next_id, self.next_id + 1
        env_cfg, label = self.make_task(task_id)
        return BanditTask(task_id, env_cfg, label)

    def choose(self) -> BanditTask:
        successes = np.array([task.successes for task in self.pool])
        failures = np.array([task.failures for task in self.pool])
        rates = self.rng.beta(1.0 + successes, 1.0 + failures)
        return self.pool[int(np.argmin(np.abs(rates - self.target)))]

    def observe(self, task_id: int, score: float) -> bool:
        """Tally `score` (in [0, 1]); False if the task was retired meanwhile."""
        position = self.index.get(task_id)
        if position is None:
            return False
        task = self.pool[position]
        task.successes += score
        task.failures += 1.0 - score
        task.plays += 1
        low, high = self.keep_between
        if task.plays >= self.min_plays and not low <= task.successes / task.plays <= high:
            del self.index[task_id]
            self.pool[position] = fresh = self.new_task()
            self.index[fresh.task_id] = position
            self.retired += 1
        return True


# ---- the adapter ------------------------------------------------------------------------------
class ExternalCurriculum:
    """`GoldilocksThompsonSampler` as a `CurriculumProtocol` (checkpointable) curriculum."""

    def __init__(self, sampler: GoldilocksThompsonSampler, *, score_range: tuple[float, float] = (0.0, 1.0)) -> None:
        self._sampler = sampler
        self._low, self._high = score_range
        self._completions = 0
        self._late = 0

    def get_task(self) -> BanditTask:
        return self._sampler.choose()

    def update_task_performance(self, task_id: int, score: float) -> bool:
        if isinstance(score, bool) or not (isinstance(score, Real) and math.isfinite(score)
                                           and self._low <= score <= self._high):
            raise InvalidScoreError(f"Expected score in [{self._low}, {self._high}] for task {task_id}, "
                                    f"received {score!r}")
        if not (isinstance(task_id, Integral) and not isinstance(task_id, bool)
                and 0 <= task_id < self._sampler.next_id):
            raise UnknownTaskError(f"Expected a task id issued by get_task(), received {task_id!r}")
        credited = self._sampler.observe(int(task_id), (float(score) - self._low) / (self._high - self._low))
        self._completions += credited
        self._late += not credited
        return credited

    @property
    def num_active_tasks(self) -> int:
        return len(self._sampler.pool)

    def active_tasks(self) -> list[BanditTask]:
        return list(self._sampler.pool)

    def stats(self) -> dict[str, Any]:
        """Counts plus the posterior mean success rate per label; no learning progress, so
        `per_label_lp_scores` is empty."""
        rates: dict[str, list[float]] = {}
        for task in self._sampler.pool:
            rates.setdefault(task.label, []).append((1.0 + task.successes) / (2.0 + task.plays))
        return {
            "num_active_tasks": self.num_active_tasks,
            "total_completions": self._completions,
            "late_completions": self._late,
            "evictions": self._sampler.retired,
            "tasks_created": self._sampler.next_id,
            "per_label_lp_scores": {},
            "per_label_success_rate": {label: float(np.mean(v)) for label, v in sorted(rates.items())},
        }

    def get_state(self) -> dict[str, Any]:
        sampler = self._sampler
        return {
            "format": STATE_FORMAT,
            "rng": sampler.rng.bit_generator.state,
            "next_id": sampler.next_id,
            "retired": sampler.retired,
            "completions": self._completions,
            "late": self._late,
            "pool": [[t.task_id, t.successes, t.failures, t.plays] for t in sampler.pool],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore a `get_state()` snapshot; checks all of it before changing anything."""
        sampler = self._sampler
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise CurriculumStateError(f"Cannot load state: expected format {STATE_FORMAT!r}")
        next_id, pool = state["next_id"], state["pool"]
        counts = (next_id, state["retired"], state["completions"], state["late"])
        if not all(type(n) is int and n >= 0 for n in counts):
            raise CurriculumStateError(f"Cannot load state: counters must be non-negative ints, received {counts}")
        if not (isinstance(pool, list) and len(pool) == len(sampler.pool)
                and all(isinstance(row, list) and len(row) == 4 and type(row[0]) is int and 0 <= row[0] < next_id
                        and type(row[3]) is int for row in pool)
                and len({row[0] for row in pool}) == len(pool)):
            raise CurriculumStateError(f"Cannot load state: expected {len(sampler.pool)} distinct tasks below "
                                       f"next_id={next_id}")
        rng = np.random.Generator(np.random.PCG64())
        try:
            rng.bit_generator.state = state["rng"]
        except (TypeError, ValueError, KeyError):
            raise CurriculumStateError("Cannot load state: the random generator state is not a PCG64 state") from None
        tasks = []
        for task_id, successes, failures, plays in pool:
            task = sampler.new_task(task_id)
            task.successes, task.failures, task.plays = float(successes), float(failures), plays
            tasks.append(task)
        sampler.rng, sampler.next_id, sampler.retired = rng, next_id, state["retired"]
        sampler.pool = tasks
        sampler.index = {task.task_id: i for i, task in enumerate(tasks)}
        self._completions, self._late = state["completions"], state["late"]


def make_external_curriculum(config: CurriculumConfig) -> ExternalCurriculum:
    """`--curriculum` factory: reads the task generator, pool size, seed, minimum
    presentations and score range of `config` (its algorithm config is not for this one)."""
    generator = config.task_generator
    if generator is None:
        raise CurriculumConfigError("Expected `task_generator` for the Thompson-sampling curriculum, received None")
    sampler = GoldilocksThompsonSampler(generator.generate, pool_size=config.num_active_tasks, seed=config.seed,
                                        min_plays=config.min_presentations)
    return ExternalCurriculum(sampler, score_range=config.score_range)
