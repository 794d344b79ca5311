"""A sequential-stage library over a fixed task space, without a pool.

Written from scratch, the way a team with a hand-made curriculum would: the task space is
built once and never changes. With a staged-progression config every stage is a fixed list
of tasks and the ladder climbs (or slips back) on the mean score of the last `window`
episodes of the stage; with any other config there is one stage and tasks are drawn
uniformly, as domain randomization does. There is no learning progress and no pool to evict
from, and no shared-memory mode.

Task ids are positions in the fixed space (stage after stage), so every id the ladder can
ever hand out is known from the start, by any copy. A completion of a task from a stage the
ladder has left is late (not credited, `update_task_performance` returns False).

Gate it with `curriculum-harness gate --curriculum stage_ladder:make_curriculum`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from curriculum import CurriculumConfig, StagedProgressionConfig
from curriculum.errors import CurriculumConfigError, CurriculumStateError, InvalidScoreError, UnknownTaskError

__all__ = ["LadderTask", "StageLadder", "make_curriculum", "STATE_FORMAT"]

STATE_FORMAT = "stage-ladder/1"


@dataclass
class LadderTask:
    """One task of the fixed space."""

    task_id: int
    env_cfg: Mapping[str, Any]
    label: str
    stage: int
    num_completions: int = 0
    score_sum: float = 0.0

    @property
    def mean_score(self) -> float:
        return self.score_sum / self.num_completions if self.num_completions else 0.0


class StageLadder:
    """Stages of fixed tasks, climbed on the recent mean score of the current stage."""

    def __init__(self, stages: list[Any], *, tasks_per_stage: int, config: CurriculumConfig,
                 threshold: float | None, min_episodes: int, window: int,
                 regression_threshold: float | None) -> None:
        self.config = config
        self.tasks: list[LadderTask] = []
        self.stage_tasks: list[list[int]] = []
        for stage, generator in enumerate(stages):  # task ids run on from stage to stage
            ids = list(range(len(self.tasks), len(self.tasks) + tasks_per_stage))
            self.tasks += [LadderTask(task_id, *generator.generate(task_id), stage) for task_id in ids]
            self.stage_tasks.append(ids)
        self.threshold = threshold
        self.min_episodes = min_episodes
        self.window = window
        self.regression_threshold = regression_threshold
        self.low, self.high = config.score_range
        self._rng = np.random.Generator(np.random.PCG64(config.seed))
        self._stage = 0
        self._recent: deque[float] = deque(maxlen=window)
        self._stage_episodes = 0
        self.advancements = 0
        self.regressions = 0
        self.completions = 0
        self.late = 0

    # ---- the protocol ---------------------------------------------------------------------------
    def get_task(self) -> LadderTask:
        ids = self.stage_tasks[self._stage]
        return self.tasks[ids[int(self._rng.integers(len(ids)))]]

    def update_task_performance(self, task_id: int, score: float) -> bool:
        if isinstance(task_id, bool) or not isinstance(task_id, Integral) or not 0 <= task_id < len(self.tasks):
            raise UnknownTaskError(f"Expected a task id in [0, {len(self.tasks)}) of the ladder's fixed space, "
                                   f"received {task_id!r}")
        if isinstance(score, bool) or not isinstance(score, Real) or not math.isfinite(score) \
                or not self.low <= score <= self.high:
            raise InvalidScoreError(f"Expected a score in [{self.low}, {self.high}] for task {task_id}, "
                                    f"received {score!r}")
        task = self.tasks[int(task_id)]
        if task.stage != self._stage:
            self.late += 1
            return False
        normalised = (float(score) - self.low) / (self.high - self.low)
        task.num_completions += 1
        task.score_sum += float(score)
        self.completions += 1
        self._recent.append(normalised)
        self._stage_episodes += 1
        self._climb()
        return True

    def stats(self) -> dict[str, Any]:
        labels: dict[str, list[float]] = {}
        for task in self.tasks:
            if task.num_completions:
                labels.setdefault(task.label, []).append(task.mean_score)
        return {
            "total_completions": self.completions,
            "late_completions": self.late,
            "stage": self._stage,
            "advancements": self.advancements,
            "regressions": self.regressions,
            "num_tasks": len(self.tasks),
            "per_label_mean_score": {label: float(np.mean(v)) for label, v in sorted(labels.items())},
        }

    # ---- stages ---------------------------------------------------------------------------------
    @property
    def stage(self) -> int | None:
        return self._stage if self.threshold is not None else None

    def _climb(self) -> None:
        if self.threshold is None or self._stage_episodes < self.min_episodes or len(self._recent) < self.window:
            return
        mean = sum(self._recent) / len(self._recent)
        if mean >= self.threshold and self._stage + 1 < len(self.stage_tasks):
            self._move(self._stage + 1)
            self.advancements += 1
        elif self.regression_threshold is not None and mean < self.regression_threshold and self._stage > 0:
            self._move(self._stage - 1)
            self.regressions += 1

    def _move(self, stage: int) -> None:
        self._stage = stage
        self._recent.clear()
        self._stage_episodes = 0

    def sync_state(self) -> dict[str, int]:
        """What a worker copy needs to follow this ladder."""
        return {"stage": self._stage, "stage_changes": self.advancements + self.regressions}

    def apply_sync_state(self, sync: Mapping[str, int]) -> bool:
        stage = sync.get("stage") if isinstance(sync, Mapping) else None
        if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage < len(self.stage_tasks):
            raise CurriculumStateError(f"Expected a sync state with a stage in [0, {len(self.stage_tasks)}), "
                                       f"received {sync!r}")
        changed = stage != self._stage
        if changed:
            self._move(stage)
        return changed

    # ---- checkpoints ----------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "rng": self._rng.bit_generator.state,
            "stage": self._stage,
            "recent": list(self._recent),
            "stage_episodes": self._stage_episodes,
            "counters": [self.advancements, self.regressions, self.completions, self.late],
            "tasks": [[t.num_completions, t.score_sum] for t in self.tasks],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore a `get_state()` snapshot; everything is checked before anything changes."""
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise CurriculumStateError(f"Cannot load state: expected format {STATE_FORMAT!r}")
        try:
            stage, recent, episodes = int(state["stage"]), [float(v) for v in state["recent"]], \
                int(state["stage_episodes"])
            counters = [int(v) for v in state["counters"]]
            tasks = [(int(n), float(s)) for n, s in state["tasks"]]
            rng = np.random.Generator(np.random.PCG64())
            rng.bit_generator.state = state["rng"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CurriculumStateError(f"Cannot load state: {type(exc).__name__}: {exc}") from None
        if len(tasks) != len(self.tasks) or not 0 <= stage < len(self.stage_tasks) or len(counters) != 4:
            raise CurriculumStateError(f"Cannot load state: expected {len(self.tasks)} tasks and a stage in "
                                       f"[0, {len(self.stage_tasks)})")
        self._rng, self._stage, self._stage_episodes = rng, stage, episodes
        self._recent = deque(recent, maxlen=self.window)
        self.advancements, self.regressions, self.completions, self.late = counters
        for task, (count, total) in zip(self.tasks, tasks):
            task.num_completions, task.score_sum = count, total


def make_curriculum(config: CurriculumConfig) -> StageLadder:
    """`--curriculum` factory: a staged-progression config gives one ladder rung per stage
    (`num_active_tasks` tasks from each stage's generator, ids running on from stage to
    stage); any other config one uniformly sampled stage of `num_active_tasks` tasks from
    `task_generator`."""
    size = config.num_active_tasks
    algorithm = config.algorithm
    if isinstance(algorithm, StagedProgressionConfig):
        return StageLadder([stage.task_generator for stage in algorithm.stages], tasks_per_stage=size,
                           config=config, threshold=algorithm.advancement_threshold,
                           min_episodes=algorithm.min_episodes, window=algorithm.window,
                           regression_threshold=algorithm.regression_threshold)
    if config.task_generator is None:
        raise CurriculumConfigError("Expected `task_generator` for a one-stage ladder, received None")
    return StageLadder([config.task_generator], tasks_per_stage=size, config=config, threshold=None,
                       min_episodes=0, window=1, regression_threshold=None)
