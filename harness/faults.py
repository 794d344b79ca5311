"""Canaries: deliberately broken curricula and wrappers, one per bug class the gate guards.

Each is plugged into its scenario suite the way a user's own implementation would be
(`--gate-curriculum=harness.faults:<factory>` or `--gate-curriculum-env=harness.faults:<Class>`), and a
meta-test asserts that the suite fails on it. A suite that passes on its canary proves nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from curriculum import Curriculum, CurriculumConfig, CurriculumEnv, LearningProgressConfig, UniformConfig
from curriculum.algorithms import LearningProgressAlgorithm, StagedProgressionAlgorithm
from curriculum.algorithms.staged import STAGE_COUNTERS

__all__ = [
    "CANARIES",
    "DEGRADATIONS",
    "make_noise_rewarding_lp",
    "make_dropped_updates_curriculum",
    "make_inverted_eviction_curriculum",
    "make_lossy_checkpoint_curriculum",
    "make_config_blind_checkpoint_curriculum",
    "make_unlocked_shared_curriculum",
    "make_lock_leaking_curriculum",
    "make_unversioned_shared_curriculum",
    "make_per_worker_copy_curriculum",
    "make_late_crediting_curriculum",
    "make_span_as_high_curriculum",
    "make_label_order_mixup_curriculum",
    "make_shared_stream_curriculum",
    "make_summed_seed_curriculum",
    "make_decline_blind_lp",
    "make_late_advancing_staged",
    "make_regression_blind_staged",
    "DesyncBlindCurriculumEnv",
    "TimeLimitAsDesyncCurriculumEnv",
    "FirstAgentScoreCurriculumEnv",
    "LateConfigCurriculumEnv",
    "RunningTotalCurriculumEnv",
]


class _NoiseRewardingLP(LearningProgressAlgorithm):
    """Bug: learning progress is the spread of recent scores, so noise looks like progress."""

    def scores(self) -> np.ndarray:
        lp = np.abs(self._fast - self._slow) + np.sqrt(np.maximum(self._var, 0.0))
        lp[self.tracker.completions < self.config.min_samples_for_lp] = 0.0
        return lp


def _with_algorithm(curriculum: Curriculum, algorithm_class: type) -> Curriculum:
    """`curriculum` with its learning-progress algorithm replaced (other algorithms kept)."""
    old = curriculum._algorithm
    if not isinstance(old, LearningProgressAlgorithm):
        return curriculum
    new = algorithm_class(old.config, old.capacity, old.generator)
    new.score_range = old.score_range
    new.bind(curriculum.tracker)
    curriculum._algorithm = new
    curriculum._refresh()
    return curriculum


def make_noise_rewarding_lp(config: CurriculumConfig) -> Curriculum:
    """Canary of scenario 1 (impossible tasks): LP that rewards noise."""
    return _with_algorithm(Curriculum(config), _NoiseRewardingLP)


class _DroppedUpdatesCurriculum(Curriculum):
    """Bug (seeds/003): completions land in a private copy the sampler never reads, as when
    each worker process records into its own pickled curriculum."""

    def update_task_performance(self, task_id: int, score: float) -> bool:
        return True


def make_dropped_updates_curriculum(config: CurriculumConfig) -> Curriculum:
    """Canary of the dependency-chain scenario: sampling never learns from completions."""
    return _DroppedUpdatesCurriculum(config)


class _InvertedEvictionCurriculum(Curriculum):
    """Bug: the eviction shortlist is taken from the top of the ranking, not the bottom."""

    def _eviction_shortlist(self, scores: np.ndarray) -> list[bool]:
        return super()._eviction_shortlist(-scores)


def make_inverted_eviction_curriculum(config: CurriculumConfig) -> Curriculum:
    """Canary of the eviction-health scenario: evicts the tasks with the most learning progress."""
    curriculum = _InvertedEvictionCurriculum(config)
    algorithm = curriculum._algorithm
    score_at = algorithm.score_at
    algorithm.score_at = lambda slot: -score_at(slot)  # the confirmation check inverted to match
    return curriculum


class _LossyCheckpointCurriculum(Curriculum):
    """Bug: the checkpoint leaves out the sampler's random state and pending draws."""

    def load_state(self, state: dict[str, Any]) -> None:
        rng, draws, draw_pos = self._rng, self._draws, self._draw_pos
        super().load_state(state)
        self._rng, self._draws, self._draw_pos = rng, draws, draw_pos


def make_lossy_checkpoint_curriculum(config: CurriculumConfig) -> Curriculum:
    """Canary of the checkpoint/resume scenario."""
    return _LossyCheckpointCurriculum(config)


class _ConfigBlindCheckpointCurriculum(Curriculum):
    """Bug: a checkpoint is matched to its config by the task generator alone, so one saved
    under other settings (eviction, refresh, the algorithm's rates) loads."""

    def load_state(self, state: dict[str, Any]) -> None:
        if isinstance(state, dict) and isinstance(state.get("config"), dict):
            own = json.loads(json.dumps(self.config.describe(), default=str))
            state = {**state, "config": {**own, "task_generator": state["config"].get("task_generator")}}
        super().load_state(state)


def make_config_blind_checkpoint_curriculum(config: CurriculumConfig) -> Curriculum:
    """Canary of the checkpoint/resume scenario: restores a checkpoint under any settings."""
    return _ConfigBlindCheckpointCurriculum(config)


def make_unlocked_shared_curriculum(config: CurriculumConfig, *, shared_memory: bool = False,
                                    lock_timeout: float | None = None) -> Curriculum:
    """Canary of the shared-tracker scenario: the lock around read-modify-write was removed
    along with the defensive read locks (seeds/002, task 2, gone one step too far)."""
    from curriculum.memory import _NullLock

    curriculum = Curriculum(config, shared_memory=shared_memory, lock_timeout=lock_timeout)
    curriculum._lock = _NullLock()
    return curriculum


class _SnapshotRestoringCurriculum(Curriculum):
    """Bug: a pickled copy of a shared curriculum writes back the arrays it was pickled with, as
    a local copy must, so what was recorded between pickling and unpickling is lost."""

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["pickled_arrays"] = self.get_state()["arrays"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        arrays = state.pop("pickled_arrays")
        super().__setstate__(state)
        checked = self._check_state({**self.get_state(), "arrays": arrays})
        with self._lock:
            self._tracker.overwrite(checked["arrays"])


def make_snapshot_restoring_curriculum(config: CurriculumConfig, *, shared_memory: bool = False,
                                       lock_timeout: float | None = None) -> Curriculum:
    """Canary of the unpickled-copy check: an unpickled shared curriculum restores its pickle-time arrays."""
    return _SnapshotRestoringCurriculum(config, shared_memory=shared_memory, lock_timeout=lock_timeout)


class _LiveProbabilitiesCurriculum(Curriculum):
    """Bug: `sampling_probabilities()` returns the array the draws come from, not a copy, so a
    caller that normalises or masks it in place changes what is drawn next."""

    def sampling_probabilities(self) -> np.ndarray:
        return self._probabilities


def make_live_probabilities_curriculum(config: CurriculumConfig) -> Curriculum:
    """Canary of the reading relation: a read hands out the curriculum's live state."""
    return _LiveProbabilitiesCurriculum(config)


class _LockLeakingCurriculum(Curriculum):
    """Bug: the lock is taken before the input is checked and released only on success, so an
    error path leaves it held (as when validation moves inside a locked section with no
    try/finally)."""

    def update_task_performance(self, task_id: int, score: float) -> bool:
        self._lock.acquire()
        result = super().update_task_performance(task_id, score)
        self._lock.release()
        return result


def make_lock_leaking_curriculum(config: CurriculumConfig, *, shared_memory: bool = False,
                                 lock_timeout: float | None = None) -> Curriculum:
    """Canary of the lock-hygiene check: bad input leaves the shared tracker's lock held."""
    return _LockLeakingCurriculum(config, shared_memory=shared_memory, lock_timeout=lock_timeout)


def make_unversioned_shared_curriculum(config: CurriculumConfig, *, shared_memory: bool = False,
                                       lock_timeout: float | None = None) -> Curriculum:
    """Canary of the uncommitted-write check: a row's pre-image is journaled but the row is not
    marked as written by the open transaction, so lock-free readers see a writer's half-done
    update, and a second write to the row in one transaction journals the half-done state."""
    curriculum = Curriculum(config, shared_memory=shared_memory, lock_timeout=lock_timeout)
    tracker = curriculum.tracker
    if shared_memory:
        rows_q, _, row_words = tracker.backend.row_words()
        journal = tracker.backend.touch

        def touch(slot: int) -> None:
            at = slot * row_words
            version = rows_q[at]
            journal(slot)
            rows_q[at] = version

        tracker.backend.touch = tracker._touch = touch
    return curriculum


class DesyncBlindCurriculumEnv(CurriculumEnv):
    """Canary of the desync scenario: a wrapper that cannot tell a desync truncation from a
    finished episode, so truncated partial episodes reach the curriculum as completions."""

    def __init__(self, env: Any, curriculum: Any, **kwargs: Any) -> None:
        super().__init__(env, curriculum, **kwargs)
        step = self._env_step

        def blind_step(actions: Any) -> Any:
            obs, rewards, terminals, truncations, infos = step(actions)
            return obs, rewards, terminals, truncations, [_without_desync_flag(i) for i in infos or ()]

        self._env_step = blind_step


class TimeLimitAsDesyncCurriculumEnv(CurriculumEnv):
    """Canary of the time-limit check: a wrapper that takes every truncation for a desync cut,
    so full episodes that hit a time limit never reach the curriculum."""

    def __init__(self, env: Any, curriculum: Any, **kwargs: Any) -> None:
        super().__init__(env, curriculum, **kwargs)
        step = self._env_step

        def every_cut_is_desync(actions: Any) -> Any:
            obs, rewards, terminals, truncations, infos = step(actions)
            if truncations.any():
                infos = [*(infos or ()), {"truncated_by_desync": True}]
            return obs, rewards, terminals, truncations, infos

        self._env_step = every_cut_is_desync


def _without_desync_flag(info: Any) -> Any:
    if not isinstance(info, dict):
        return info
    return {k: _without_desync_flag(v) for k, v in info.items() if k != "truncated_by_desync"}


class _LateCreditingCurriculum(Curriculum):
    """Bug: the late branch counts the completion late and falls through (a missing `return`),
    so it is also credited to the task now in the slot: one episode recorded twice, the new
    task scored by an episode it never ran."""

    def update_task_performance(self, task_id: int, score: float) -> bool:
        result = super().update_task_performance(task_id, score)
        if result is False:
            super().update_task_performance(self._task_ids.item(task_id % self._capacity), score)
        return result


def make_late_crediting_curriculum(config: CurriculumConfig) -> Curriculum:
    """Canary of the Ray-service scenario: a late completion is also credited to the slot's
    current task (served from the actor, importable there as `harness.faults`)."""
    return _LateCreditingCurriculum(config)


class _SpanAsHighCurriculum(Curriculum):
    """Bug: scores are normalised by the top of the range, (s - low) / high, instead of by its
    span: right for the default (0, 1), wrong for any range that does not start at 0."""

    def __init__(self, config: CurriculumConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._score_span = self._score_high


def make_span_as_high_curriculum(config: CurriculumConfig) -> Curriculum:
    """Canary of the invariance scenario (score range): normalises scores by `high`."""
    return _SpanAsHighCurriculum(config)


class _LabelOrderMixupCurriculum(Curriculum):
    """Bug: per-label tables are filled in first-seen order and reported against the labels
    sorted by name (`zip(sorted(labels), values)`): right while the two orders agree."""

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        first_seen = list(dict.fromkeys(task.label for task in self.active_tasks()))
        for key, table in stats.items():
            if key.startswith("per_label_") and isinstance(table, dict):
                order = first_seen + [label for label in table if label not in first_seen]
                stats[key] = dict(zip(sorted(table), (table[label] for label in order if label in table)))
        return stats


def make_label_order_mixup_curriculum(config: CurriculumConfig) -> Curriculum:
    """Canary of the invariance scenario (label names): per-label numbers under the wrong names."""
    return _LabelOrderMixupCurriculum(config)


class _PerWorkerCopyCurriculum(Curriculum):
    """Bug (seeds/003): each worker process trains its own pickled copy of a local curriculum;
    copies never sync, so the main process never sees the workers' episodes or stages."""

    claims_shared = False

    @property
    def is_shared(self) -> bool:
        return self.claims_shared  # claims to be shared, so the vector factory accepts it

    def update_task_performance(self, task_id: int, score: float) -> bool:
        self._owner_pid = os.getpid()  # the copy records silently instead of raising WorkerCopyError
        return super().update_task_performance(task_id, score)


def make_per_worker_copy_curriculum(config: CurriculumConfig, *, shared_memory: bool = False,
                                    lock_timeout: float | None = None) -> Curriculum:
    """Canary of the stage-sync scenario: per-worker curriculum copies with no sync."""
    curriculum = _PerWorkerCopyCurriculum(config)
    curriculum.claims_shared = shared_memory
    return curriculum


class _StageComparingSyncCurriculum(Curriculum):
    """Bug: a worker copy takes a broadcast as new only when its stage differs, so after an
    advancement and a regression between two reads it keeps drawing from a pool the main
    process refilled twice (every episode of it arrives late)."""

    def apply_sync_state(self, sync: Mapping[str, int]) -> bool:
        if sync.get("stage") == self.stage:
            return False
        return super().apply_sync_state(sync)


def make_stage_comparing_sync_curriculum(config: CurriculumConfig) -> Curriculum:
    """Canary of the stage-sync scenario: worker copies compare stages, not stage changes."""
    return _StageComparingSyncCurriculum(config)


class _SharedStreamCurriculum(Curriculum):
    """Bug (seeds/003): `reseed` keeps the stream the process inherited, so every forked worker
    draws the same task sequence."""

    def reseed(self, seed: int) -> None:
        self._refresh()


def make_shared_stream_curriculum(config: CurriculumConfig, *, shared_memory: bool = False,
                                  lock_timeout: float | None = None) -> Curriculum:
    """Canary of the worker-streams scenario: worker processes share one sampling stream."""
    return _SharedStreamCurriculum(config, shared_memory=shared_memory, lock_timeout=lock_timeout)


class _SummedSeedCurriculum(Curriculum):
    """Bug: `reseed` seeds the stream with config seed + worker seed ("base seed + offset"), so
    config seed 1 on worker 0 draws what config seed 0 draws on worker 1."""

    def reseed(self, seed: int) -> None:
        self._rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.config.seed + int(seed))))
        self._refresh()


def make_summed_seed_curriculum(config: CurriculumConfig, *, shared_memory: bool = False,
                                lock_timeout: float | None = None) -> Curriculum:
    """Canary of the worker-streams scenario: the config seed and the worker seed are added."""
    return _SummedSeedCurriculum(config, shared_memory=shared_memory, lock_timeout=lock_timeout)


class FirstAgentScoreCurriculumEnv(CurriculumEnv):
    """Canary of the multi-agent scenario: the episode is scored by agent 0's return alone."""

    def __init__(self, env: Any, curriculum: Any, **kwargs: Any) -> None:
        kwargs["score_fn"] = lambda returns: float(returns[0])
        super().__init__(env, curriculum, **kwargs)


class LateConfigCurriculumEnv(CurriculumEnv):
    """Canary of the config-at-reset scenario: the task's config is handed to the env after
    its reset instead of before, so every episode runs the previous task's config and the
    first episode runs the env's default."""

    def __init__(self, env: Any, curriculum: Any, **kwargs: Any) -> None:
        super().__init__(env, curriculum, **kwargs)
        apply_config, env_reset = self._set_env_config, self._env_reset
        pending: list[Any] = []

        def reset_then_apply(*args: Any, **kw: Any) -> Any:
            result = env_reset(*args, **kw)
            while pending:
                apply_config(pending.pop(0))
            return result

        self._set_env_config = pending.append
        self._env_reset = reset_then_apply


class RunningTotalCurriculumEnv(CurriculumEnv):
    """Canary of the per-label scenario: per-label counters reported as running totals, so the
    pipeline's per-epoch sum counts every earlier episode again."""

    def __init__(self, env: Any, curriculum: Any, **kwargs: Any) -> None:
        super().__init__(env, curriculum, **kwargs)
        totals: dict[str, int] = {}
        end_step = self._end_step

        def running_totals(result: Any) -> Any:
            obs, rewards, terminals, truncations, infos = end_step(result)
            for info in infos:
                if not isinstance(info, dict):
                    continue
                for key in [k for k in info if "per_label_samples/" in k]:
                    totals[key] = totals.get(key, 0) + info[key]
                    info[key] = totals[key]
            return obs, rewards, terminals, truncations, infos

        self._end_step = running_totals


class _DeclineBlindLP(LearningProgressAlgorithm):
    """Bug: only improvement counts as learning progress, so a task being forgotten scores 0."""

    def scores(self) -> np.ndarray:
        lp = super().scores()
        lp[self._fast < self._slow] = 0.0
        return lp

    def score_at(self, slot: int) -> float:
        return 0.0 if self._fast.item(slot) < self._slow.item(slot) else super().score_at(slot)


def make_decline_blind_lp(config: CurriculumConfig) -> Curriculum:
    """Canary of the forgetting scenario: unidirectional learning progress."""
    return _with_algorithm(Curriculum(config), _DeclineBlindLP)


class _WarmupBandLP(LearningProgressAlgorithm):
    """Bug: the noise band is sized by the warm-up's variance (`base_var`, the variance the
    baseline rests on) instead of the running noise variance."""

    def scores(self) -> np.ndarray:
        slow = self._slow
        gap = np.maximum(np.abs(self._fast - slow), self._peak - slow) - self._noise_scale * np.sqrt(self._base_var)
        lp = np.maximum(gap, 0.0)
        lp[self._count < self._warmup] = 0.0
        return lp

    def score_at(self, slot: int) -> float:
        return float(self.scores()[slot])


def make_warmup_band_lp(config: CurriculumConfig) -> Curriculum:
    """Canary of the learning-progress definition check: the noise band from the warm-up's variance."""
    return _with_algorithm(Curriculum(config), _WarmupBandLP)


class _UniformWhenFlatLP(LearningProgressAlgorithm):
    """Bug: once no task shows learning progress, sampling falls back to uniform over the pool
    (the PPO run where impossible tasks climbed back to 23-40% of samples after mastery)."""

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        if (scores > 0.0).any():
            return super().probabilities(scores)
        return np.full(scores.shape[0], 1.0 / scores.shape[0])


def make_uniform_when_flat_lp(config: CurriculumConfig) -> Curriculum:
    """Canary of the after-mastery scenario: nothing left to learn means uniform sampling."""
    return _with_algorithm(Curriculum(config), _UniformWhenFlatLP)


class _AbandoningLP(LearningProgressAlgorithm):
    """Bug: eviction keeps one task per label only, and admission trusts every stagnant verdict
    for good, so a configuration that learns slowly can leave the pool and never come back."""

    def _groups(self):
        share, configs, _ = super()._groups()
        label = self._label
        kept = np.zeros(self.capacity, dtype=bool)
        first = {}
        for slot, value in enumerate(label.tolist()):
            first.setdefault(value, slot)
        kept[list(first.values())] = True
        return share, configs, kept

    def _forget_stagnant(self) -> None:
        return None


def make_abandoning_lp(config: CurriculumConfig) -> Curriculum:
    """Canary of the after-mastery scenario: slow learners are dropped for good."""
    return _with_algorithm(Curriculum(config), _AbandoningLP)


class _LateAdvancingStaged(StagedProgressionAlgorithm):
    """Bug: the stage may change only after more than `min_episodes` episodes (off by one)."""

    def record(self, slot: int, score: float, completions: int) -> int:
        episodes = self._counters.item(STAGE_COUNTERS.index("stage_episodes"))  # before this completion
        if episodes + 1 == self.config.min_episodes:
            self.config.min_episodes += 1
            try:
                return super().record(slot, score, completions)
            finally:
                self.config.min_episodes -= 1
        return super().record(slot, score, completions)


class _RegressionBlindStaged(StagedProgressionAlgorithm):
    """Bug: the regression check reads the threshold of the advancement (a copy-paste slip),
    so a stage whose mean falls stays where it is unless it also passes advancement."""

    def record(self, slot: int, score: float, completions: int) -> int:
        regression = self.config.regression_threshold
        self.config.regression_threshold = None
        try:
            return super().record(slot, score, completions)
        finally:
            self.config.regression_threshold = regression


def _with_staged(config: CurriculumConfig, algorithm_class: type, **kwargs: Any) -> Curriculum:
    curriculum = Curriculum(config, **kwargs)
    old = curriculum._algorithm
    if isinstance(old, StagedProgressionAlgorithm):
        new = algorithm_class(old.config, old.capacity)
        new.bind(curriculum.tracker)
        curriculum._algorithm = new
    return curriculum


def make_late_advancing_staged(config: CurriculumConfig, **kwargs: Any) -> Curriculum:
    """Canary of the staged-progression scenario: stage changes one completion late."""
    return _with_staged(config, _LateAdvancingStaged, **kwargs)


def make_regression_blind_staged(config: CurriculumConfig, **kwargs: Any) -> Curriculum:
    """Canary of the staged-progression scenario: it never falls back a stage."""
    return _with_staged(config, _RegressionBlindStaged, **kwargs)


#: scenario module -> the canaries it must fail on: (plug-in option, canary spec)
CANARIES: dict[str, tuple[tuple[str, str], ...]] = {
    "test_impossible_tasks": (("--gate-curriculum", "harness.faults:make_noise_rewarding_lp"),),
    "test_dependency_chain": (("--gate-curriculum", "harness.faults:make_dropped_updates_curriculum"),),
    "test_eviction_health": (("--gate-curriculum", "harness.faults:make_inverted_eviction_curriculum"),),
    "test_checkpoint_resume": (("--gate-curriculum", "harness.faults:make_lossy_checkpoint_curriculum"),
                               ("--gate-curriculum", "harness.faults:make_config_blind_checkpoint_curriculum")),
    "test_shared_tracker_locking": (("--gate-curriculum", "harness.faults:make_unlocked_shared_curriculum"),
                                    ("--gate-curriculum", "harness.faults:make_lock_leaking_curriculum"),
                                    ("--gate-curriculum", "harness.faults:make_unversioned_shared_curriculum"),
                                    ("--gate-curriculum", "harness.faults:make_snapshot_restoring_curriculum")),
    "test_desync_truncation": (("--gate-curriculum-env", "harness.faults:DesyncBlindCurriculumEnv"),
                               ("--gate-curriculum-env", "harness.faults:TimeLimitAsDesyncCurriculumEnv")),
    "test_stage_sync": (("--gate-curriculum", "harness.faults:make_per_worker_copy_curriculum"),
                        ("--gate-curriculum", "harness.faults:make_stage_comparing_sync_curriculum")),
    "test_config_at_reset": (("--gate-curriculum-env", "harness.faults:LateConfigCurriculumEnv"),),
    "test_per_label_metrics": (("--gate-curriculum-env", "harness.faults:RunningTotalCurriculumEnv"),
                               ("--gate-curriculum", "harness.faults:make_warmup_band_lp")),
    "test_forgetting": (("--gate-curriculum", "harness.faults:make_decline_blind_lp"),),
    "test_after_mastery": (("--gate-curriculum", "harness.faults:make_uniform_when_flat_lp"),
                           ("--gate-curriculum", "harness.faults:make_abandoning_lp")),
    "test_worker_streams": (("--gate-curriculum", "harness.faults:make_shared_stream_curriculum"),
                            ("--gate-curriculum", "harness.faults:make_summed_seed_curriculum")),
    "test_multi_agent": (("--gate-curriculum-env", "harness.faults:FirstAgentScoreCurriculumEnv"),),
    "test_ray_service": (("--gate-curriculum", "harness.faults:make_late_crediting_curriculum"),),
    "test_invariances": (("--gate-curriculum", "harness.faults:make_span_as_high_curriculum"),
                         ("--gate-curriculum", "harness.faults:make_label_order_mixup_curriculum"),
                         ("--gate-curriculum", "harness.faults:make_late_crediting_curriculum"),
                         ("--gate-curriculum", "harness.faults:make_live_probabilities_curriculum")),
    "test_staged_progression": (("--gate-curriculum", "harness.faults:make_late_advancing_staged"),
                                ("--gate-curriculum", "harness.faults:make_regression_blind_staged")),
}



# ---------------------------------------------------------------------------------- degradation ladder
def _with_lp(config: CurriculumConfig, **changes: Any) -> CurriculumConfig:
    """`config` with its learning-progress settings changed (other algorithms unchanged)."""
    algorithm = config.algorithm
    if not isinstance(algorithm, LearningProgressConfig):
        return config
    return dataclasses.replace(config, algorithm=dataclasses.replace(algorithm, **changes))


def _scaled(config: CurriculumConfig, field: str, factor: float, cap: float) -> CurriculumConfig:
    algorithm = config.algorithm
    if not isinstance(algorithm, LearningProgressConfig):
        return config
    return _with_lp(config, **{field: min(getattr(algorithm, field) * factor, cap)})


class _DroppingCurriculum(Curriculum):
    """Forgets a fixed fraction of its completions (seeded, so runs reproduce), as lost updates do."""

    drop_fraction = 0.0

    def __init__(self, config: CurriculumConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._drop_rng = np.random.default_rng([config.seed, 77])

    def update_task_performance(self, task_id: int, score: float) -> bool:
        if self._drop_rng.random() < self.drop_fraction:
            return True
        return super().update_task_performance(task_id, score)


def _dropping(fraction: float) -> Any:
    def make(config: CurriculumConfig, **kwargs: Any) -> Curriculum:
        curriculum = _DroppingCurriculum(config, **kwargs)
        curriculum.drop_fraction = fraction
        return curriculum

    make.__name__ = f"make_dropping_{int(fraction * 100)}"
    return make


def _configured(change: Any, name: str) -> Any:
    def make(config: CurriculumConfig, **kwargs: Any) -> Curriculum:
        return Curriculum(change(config), **kwargs)

    make.__name__ = name
    return make


#: The degradation ladder: realistic ways a curriculum gets worse, each in rungs of growing
#: size, as `factory(config)` of a degraded built-in curriculum. `benchmarks/calibrate_gate.py`
#: measures, per statistical check, the smallest rung it detects with 90% power.
DEGRADATIONS: dict[str, Any] = {
    "ema_rate_x2": _configured(lambda c: _scaled(c, "ema_timescale", 2.0, 0.9), "make_ema_rate_x2"),
    "ema_rate_x4": _configured(lambda c: _scaled(c, "ema_timescale", 4.0, 0.9), "make_ema_rate_x4"),
    "exploration_x2": _configured(lambda c: _scaled(c, "exploration", 2.0, 0.45), "make_exploration_x2"),
    "exploration_x4": _configured(lambda c: _scaled(c, "exploration", 4.0, 0.6), "make_exploration_x4"),
    "no_noise_band": _configured(lambda c: _with_lp(c, noise_z=0.0), "make_no_noise_band"),
    "no_revisit": _configured(lambda c: _with_lp(c, revisit=0.0), "make_no_revisit"),
    "dropped_completions_10": _dropping(0.10),
    "dropped_completions_30": _dropping(0.30),
    "dropped_completions_60": _dropping(0.60),
    "uniform_sampling": _configured(lambda c: dataclasses.replace(c, algorithm=UniformConfig()), "make_uniform"),
}
