"""`Curriculum`: a pool of active tasks, sampled by an algorithm, fed by completions.

Hot path: `get_task()` pops a slot from a pre-drawn batch and `update_task_performance()`
does O(1) work under the tracker lock. Everything that looks at the whole pool (scoring,
probabilities, the eviction shortlist, the next batch of draws) happens in `_refresh`, once
every `refresh_interval` calls, vectorised with numpy; so the amortised cost per call does not
grow with the pool.
"""

from __future__ import annotations

import json
import math
import os
import weakref
from collections import defaultdict
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any, Final

import numpy as np

from curriculum.algorithms import POOL_REFILL, StagedProgressionAlgorithm, make_algorithm
from curriculum.algorithms.learning_progress import STATE_FIELDS
from curriculum.algorithms.staged import STAGE_COUNTERS
from curriculum.config import MAX_COUNT, CurriculumConfig, LearningProgressConfig, StagedProgressionConfig
from curriculum.errors import (
    CurriculumClosedError,
    CurriculumConfigError,
    CurriculumStateError,
    InvalidScoreError,
    SharedTrackerError,
    UnknownTaskError,
    WorkerCopyError,
)
from curriculum.memory import SharedMemoryBackend
from curriculum.metrics import gini_coefficient, normalized_entropy
from curriculum.task import CurriculumTask
from curriculum.tracker import EMPTY, TaskTracker, slot_arrays, tracker_layout

__all__ = ["Curriculum", "STATE_FORMAT"]

STATE_FORMAT = "curriculum-state/1"

MAX_TASK_ID: Final = 2**62
"""Largest task id a checkpoint or a stage broadcast may hold: ids grow by the pool size with
every replacement, and this leaves them far from int64 overflow."""

#: Local (single-process) curricula of this process; a forked child marks its copies of them.
_LOCAL_CURRICULA: weakref.WeakSet[Curriculum] = weakref.WeakSet()


def _mark_local_curricula_as_copies() -> None:
    """In a forked child, a local curriculum is a private copy, exactly like a pickled one."""
    for curriculum in list(_LOCAL_CURRICULA):
        curriculum._owner_pid = -2


os.register_at_fork(after_in_child=_mark_local_curricula_as_copies)


class Curriculum:
    """A pool of `num_active_tasks` tasks; hands them out and learns from their scores.

    With `shared_memory=True` the pool and all statistics live in shared memory: pickle the
    curriculum into worker processes (or `Curriculum.attach(name, config)` from an unrelated
    one) and every worker reads and writes the same tracker.
    """

    def __init__(
        self,
        config: CurriculumConfig,
        *,
        shared_memory: bool = False,
        lock_timeout: float | None = None,
    ) -> None:
        if not isinstance(config, CurriculumConfig):
            raise CurriculumConfigError(f"Expected `config` to be a CurriculumConfig, received {type(config).__name__}")
        if not isinstance(shared_memory, bool):
            raise CurriculumConfigError(f"Expected `shared_memory` to be a bool, received {shared_memory!r}")
        self.config = config
        self._algorithm = make_algorithm(config)
        tracker = TaskTracker.create(
            config.num_active_tasks, self._algorithm.extra_layout(), shared=shared_memory, lock_timeout=lock_timeout,
            meta={"config": _normalise(config.describe())}, cold_arrays=self._algorithm.cold_arrays,
        )
        self._bind(tracker, owner_pid=os.getpid())
        if not shared_memory:
            _LOCAL_CURRICULA.add(self)
        with tracker.lock:
            self._fill_pool(evicted=False)
        self._refresh()

    @classmethod
    def attach(cls, name: str, config: CurriculumConfig, *, seed: int | None = None) -> Curriculum:
        """Join a shared curriculum another process created, by shared-memory name.

        `config` must equal the creator's (every field, generators included): a process that
        scored tasks against another score range or generator would corrupt the shared pool.
        """
        if not isinstance(config, CurriculumConfig):
            raise CurriculumConfigError(f"Expected `config` to be a CurriculumConfig, received {type(config).__name__}")
        backend = SharedMemoryBackend.attach(name)
        try:
            created = backend.meta.get("config")
            if created is None:
                raise SharedTrackerError(f"Expected the shared tracker {name!r} to belong to a Curriculum, but it "
                                         "holds no curriculum config")
            difference = _first_difference(created, _normalise(config.describe()))
            if difference is not None:
                field, theirs, ours = difference
                raise CurriculumConfigError(
                    f"Expected the config of the shared curriculum {name!r}, but `{field}` differs: "
                    f"{theirs} in the shared curriculum, {ours} in the config given to attach"
                )
            self = cls.__new__(cls)
            self.config = config
            self._algorithm = make_algorithm(config)
            extra = self._algorithm.extra_layout()
            expected = tracker_layout(config.num_active_tasks, extra)
            if backend.layout != expected:  # same config, other library version
                raise CurriculumConfigError(
                    f"Expected shared tracker {name!r} to hold arrays {expected} for this config, "
                    f"received {backend.layout}"
                )
            arranged = (tuple(backend.slot_arrays), sorted(backend.cold_arrays))
            expected_arranged = (slot_arrays(config.num_active_tasks, extra),
                                 sorted(cold for cold in self._algorithm.cold_arrays if cold in extra))
            if arranged != expected_arranged:
                raise CurriculumConfigError(
                    f"Expected shared tracker {name!r} to keep arrays {expected_arranged[0]} per slot and "
                    f"{expected_arranged[1]} as rarely written, received {arranged[0]} and {arranged[1]}"
                )
        except BaseException:
            backend.close()
            raise
        self._bind(TaskTracker(backend, config.num_active_tasks), owner_pid=-1)
        self.reseed(seed if seed is not None else os.getpid())
        return self

    def _bind(self, tracker: TaskTracker, *, owner_pid: int) -> None:
        cfg = self.config
        n = cfg.num_active_tasks
        self._tracker = tracker
        self._algorithm.bind(tracker)
        self._owner_pid = owner_pid
        self._capacity = n
        self._lock = tracker.lock
        self._task_ids = tracker.task_ids
        # the committed task of a slot (lock-free); a local tracker's is its array item
        self._task_id_at = tracker.task_ids.item if not tracker.backend.is_shared else tracker.task_id_at
        self._score_low, self._score_high = cfg.score_range
        self._score_span = self._score_high - self._score_low
        self._min_presentations = cfg.min_presentations
        self._refresh_interval = cfg.refresh_interval
        self._evicts = self._algorithm.evicts and cfg.eviction_percentile > 0
        self._rng = np.random.Generator(np.random.PCG64(cfg.seed))
        self._tasks: list[CurriculumTask | None] = [None] * n
        self._samples = [0] * n
        self._sampled_ids = [EMPTY] * n  # the task each `_samples` entry counts
        # per slot, the id of the task shortlisted for eviction at the last refresh, else EMPTY
        self._evictable = [EMPTY] * n
        self._eviction_threshold = -math.inf
        self._draws: list[int] = []
        self._draw_pos = 0
        self._since_refresh = 0
        self._cdf = np.linspace(1.0 / n, 1.0, n)
        self._probabilities = np.full(n, 1.0 / n)

    # ---- sampling ----------------------------------------------------------------------------
    def get_task(self) -> CurriculumTask:
        """The next task to run, drawn from the current sampling distribution."""
        pos = self._draw_pos
        if pos >= len(self._draws):
            self._refresh()
            pos = 0
        slot = self._draws[pos]
        self._draw_pos = pos + 1
        task_id = self._task_id_at(slot)
        task = self._tasks[slot]
        if task is None or task.task_id != task_id:
            task = self._make_task(slot, task_id)
        self._samples[slot] += 1
        return task

    def _make_task(self, slot: int, task_id: int) -> CurriculumTask:
        env_cfg, label = self._algorithm.generator_for_slot(slot).generate(task_id)
        task = CurriculumTask(task_id, env_cfg, label, slot=slot, tracker=self._tracker)
        self._tasks[slot] = task
        if self._sampled_ids[slot] != task_id:  # a new task in the slot: its count starts at 0
            self._sampled_ids[slot] = task_id
            self._samples[slot] = 0
        return task

    # ---- learning ----------------------------------------------------------------------------
    def update_task_performance(self, task_id: int, score: float) -> bool:
        """Record a completed episode of `task_id` with `score`.

        Returns False (and counts a late completion) when the task left the pool while its
        episode ran; raises before changing anything on a bad score or an unknown task id.
        The score must be a real number (int, float, numpy scalar) in `score_range`; the
        tracker records it as given and the algorithm sees it normalised to [0, 1].
        """
        value = score if type(score) is float else self._score_as_float(task_id, score)
        if not self._score_low <= value <= self._score_high:  # NaN fails too
            raise InvalidScoreError(
                f"Expected score in [{self._score_low}, {self._score_high}] for task {task_id}, received {score!r}"
            )
        if type(task_id) is not int:
            task_id = self._check_task_id(task_id)
        if self._owner_pid == -2:
            raise WorkerCopyError(
                f"This curriculum is a private copy made in process {os.getpid()} from a local (single-process) "
                "curriculum: completions recorded here would never reach the other workers. Create it with "
                "shared_memory=True, or use centralized tracking (workers with local tracking off)."
            )
        capacity = self._capacity
        slot = task_id % capacity if task_id >= 0 else 0
        lock = self._lock
        lock.acquire()
        try:
            current = self._task_ids.item(slot)
            if current != task_id:
                if task_id > current or task_id < 0:
                    raise UnknownTaskError(
                        f"Expected a task id issued by this curriculum's get_task(), received {task_id} "
                        f"(slot {slot} holds task {current})"
                    )
                self._tracker.record_late()
                return False
            completions = self._tracker.record(slot, value)
            if self._algorithm.record(slot, (value - self._score_low) / self._score_span, completions) == POOL_REFILL:
                self._fill_pool(evicted=False)
                self._since_refresh = self._refresh_interval
            elif (self._evictable[slot] == task_id and completions >= self._min_presentations
                  and self._algorithm.score_at(slot) <= self._eviction_threshold):
                self._evict(slot, task_id)
        except BaseException:  # a section that failed half-way (an error, Ctrl-C) leaves nothing behind
            lock.abort()
            raise
        finally:
            lock.release()  # a no-op after abort()
        self._since_refresh += 1
        if self._since_refresh >= self._refresh_interval:
            self._refresh()
        return True

    def _score_as_float(self, task_id: Any, score: Any) -> float:
        """`score` as a float if it is a real number (bools, strings, arrays and Decimals are not)."""
        if isinstance(score, Real) and not isinstance(score, bool):
            try:
                return float(score)
            except (OverflowError, TypeError, ValueError):
                pass
        raise InvalidScoreError(
            f"Expected score in [{self._score_low}, {self._score_high}] for task {task_id} as a real number, "
            f"received {score!r} of type {type(score).__name__}"
        )

    @staticmethod
    def _check_task_id(task_id: Any) -> int:
        if isinstance(task_id, Integral) and not isinstance(task_id, bool):
            return int(task_id)
        raise UnknownTaskError(f"Expected an integer task id from get_task(), received {task_id!r}")

    def _evict(self, slot: int, task_id: int) -> None:
        self._algorithm.reset_slot(slot)
        self._tracker.assign(slot, self._algorithm.replacement_task_id(slot, task_id), evicted=True)
        self._evictable[slot] = EMPTY

    def _fill_pool(self, *, evicted: bool) -> None:
        """Give every slot a new task (pool creation and stage changes); caller holds the lock."""
        capacity = self._capacity
        ids = self._task_ids
        algorithm = self._algorithm
        for slot in range(capacity):
            current = ids.item(slot)
            algorithm.reset_slot(slot)
            self._tracker.assign(slot, slot if current == EMPTY else current + capacity, evicted=evicted)
        self._evictable = [EMPTY] * capacity

    def _refresh(self) -> None:
        """Rescore the pool, redraw the next batch of slots, shortlist evictions. O(n), amortised."""
        self._check_open("get_task")  # (a closed curriculum's `get_task()` always comes here)
        # Ids are read before the statistics: a slot another process refills in between shows
        # the new task's (ineligible) statistics, so the new task is never shortlisted.
        task_ids = self._task_ids.copy() if self._evicts else None
        scores = self._algorithm.scores()
        probabilities = self._algorithm.probabilities(scores)
        cdf = np.cumsum(probabilities)
        self._probabilities = probabilities
        self._cdf = cdf
        draws = np.searchsorted(cdf, self._rng.random(self._refresh_interval) * cdf[-1], side="right")
        np.minimum(draws, self._capacity - 1, out=draws)
        self._draws = draws.tolist()
        self._draw_pos = 0
        self._since_refresh = 0
        if self._evicts:
            # Per slot the shortlisted task's id (else EMPTY), not a flag: a task that another
            # process puts into a shortlisted slot was never scored and must not inherit the mark.
            self._evictable = np.where(self._eviction_shortlist(scores), task_ids, EMPTY).tolist()

    def _eviction_shortlist(self, scores: np.ndarray) -> list[bool]:
        """The lowest-scoring `eviction_percentile`% of eligible tasks (presented often enough, and
        let go by the algorithm); a shortlisted task is evicted at its next completion only if its
        score then is still <= the cut-off."""
        presented = self._tracker.completions >= self._min_presentations
        eligible = np.flatnonzero(self._algorithm.eviction_candidates(presented, scores))  # the ones it lets go
        shortlist = np.zeros(self._capacity, dtype=bool)
        k = min(int(np.count_nonzero(presented) * self.config.eviction_percentile / 100.0), eligible.size)
        self._eviction_threshold = -math.inf
        if k > 0:
            order = np.argpartition(scores[eligible], k - 1)[:k]
            lowest = eligible[order]
            shortlist[lowest] = True
            self._eviction_threshold = float(scores[lowest].max())
        return shortlist.tolist()

    # ---- workers -----------------------------------------------------------------------------
    def reseed(self, seed: int) -> None:
        """Give this handle its own sampling stream (one per worker), derived from the config seed."""
        if not isinstance(seed, Integral) or isinstance(seed, bool) or seed < 0:
            raise CurriculumConfigError(f"Expected `seed` to be an integer >= 0, received {seed!r}")
        self._check_open("reseed")
        self._rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.config.seed, int(seed)])))
        self._refresh()

    @property
    def is_shared(self) -> bool:
        """Whether every process holding this curriculum sees the same tracker."""
        return self._tracker.backend.is_shared

    @property
    def shared_memory_name(self) -> str | None:
        """Name to `attach` to, for a shared curriculum."""
        backend = self._tracker.backend
        return backend.name if isinstance(backend, SharedMemoryBackend) else None

    @property
    def stage(self) -> int | None:
        """Current stage index for staged progression, else None."""
        self._check_open("stage")
        algo = self._algorithm
        return algo.stage if isinstance(algo, StagedProgressionAlgorithm) else None

    def sync_state(self) -> dict[str, int]:
        """What a worker copy needs to follow this curriculum's stage (centralized tracking)."""
        self._check_open("sync_state")
        algo = self._algorithm
        if not isinstance(algo, StagedProgressionAlgorithm):
            raise CurriculumConfigError(
                f"Expected a staged progression curriculum for stage sync, received {algo.config.name!r}"
            )
        return {"stage": algo.stage, "stage_changes": algo.stage_changes}

    def apply_sync_state(self, sync: Mapping[str, int]) -> bool:
        """Adopt a stage broadcast by the main process; returns True if the stage changed.

        Refuses (`CurriculumStateError`, nothing changed) anything `sync_state()` of a
        curriculum with this config could not have returned: other keys, non-integers, a stage
        outside the stages, or a change count that no sequence of one-stage steps from stage 0
        reaches (fewer changes than the stage, or the other parity).
        """
        self._check_open("apply_sync_state")
        algo = self._algorithm
        if not isinstance(algo, StagedProgressionAlgorithm):
            raise CurriculumConfigError(
                f"Expected a staged progression curriculum for stage sync, received {algo.config.name!r}"
            )
        stage, changes = self._check_sync_state(sync, len(algo.stages) - 1)
        if changes == algo.stage_changes:
            return False
        with self._lock:
            algo.apply_stage(stage, changes)
            base = changes * self._capacity
            for slot in range(self._capacity):
                algo.reset_slot(slot)
                self._tracker.assign(slot, base + slot, evicted=False)
        self._refresh()
        return True

    def _check_sync_state(self, sync: Any, last_stage: int) -> tuple[int, int]:
        def is_count(value: Any) -> bool:
            return isinstance(value, Integral) and not isinstance(value, bool)

        if not (isinstance(sync, Mapping) and set(sync) == {"stage", "stage_changes"}
                and is_count(sync["stage"]) and is_count(sync["stage_changes"])):
            raise CurriculumStateError(
                f"Expected a stage sync {{'stage': int, 'stage_changes': int}} from sync_state(), received {sync!r}"
            )
        stage, changes = int(sync["stage"]), int(sync["stage_changes"])
        if not 0 <= stage <= last_stage:
            raise CurriculumStateError(f"Expected stage in [0, {last_stage}], received {stage}")
        limit = min(MAX_COUNT, MAX_TASK_ID // self._capacity - 1)
        if not (stage <= changes <= limit and (changes - stage) % 2 == 0):
            raise CurriculumStateError(
                f"Expected stage_changes in [{stage}, {limit}] with the parity of stage {stage} (every change moves "
                f"one stage, from stage 0), received {changes}"
            )
        return stage, changes

    # ---- inspection --------------------------------------------------------------------------
    @property
    def num_active_tasks(self) -> int:
        return self._capacity

    @property
    def tracker(self) -> TaskTracker:
        return self._tracker

    def active_tasks(self) -> list[CurriculumTask]:
        """Every task in the pool now (builds the ones never handed out)."""
        self._check_open("active_tasks")
        if self._tracker.backend.is_shared:  # (each slot's committed id)
            task_ids = [self._task_id_at(slot) for slot in range(self._capacity)]
        else:
            task_ids = self._tracker.task_ids.tolist()
        tasks = []
        for slot, (task_id, task) in enumerate(zip(task_ids, self._tasks)):
            if task is None or task.task_id != task_id:
                task = self._make_task(slot, task_id)
            tasks.append(task)
        return tasks

    def sampling_probabilities(self) -> np.ndarray:
        """The distribution the current batch of draws came from (copy)."""
        self._check_open("sampling_probabilities")
        return self._probabilities.copy()

    def task_scores(self) -> np.ndarray:
        """The algorithm's per-slot score now (LP for learning progress)."""
        self._check_open("task_scores")
        return self._algorithm.scores()

    def stats(self) -> dict[str, Any]:
        """Pool-wide numbers for logging: counts, Gini coefficients, entropy, per-label LP."""
        self._check_open("stats")
        tracker = self._tracker
        scores = self._algorithm.scores()
        completions = tracker.completions.copy()
        per_label_scores: dict[str, list[float]] = defaultdict(list)
        for task, score in zip(self.active_tasks(), scores.tolist()):
            per_label_scores[task.label].append(score)
        out: dict[str, Any] = {
            "num_active_tasks": self._capacity,
            "total_completions": tracker.total_completions,
            "late_completions": tracker.late_completions,
            "evictions": tracker.evictions,
            "tasks_created": tracker.counter("tasks_created"),
            "mean_lp_score": float(scores.mean()),
            "pool_lp_gini": gini_coefficient(scores),
            "pool_occupancy_gini": gini_coefficient(completions),
            "sampling_gini": gini_coefficient(self._samples),
            "sampling_entropy": normalized_entropy(self._probabilities),
            "per_label_lp_scores": {label: float(np.mean(v)) for label, v in sorted(per_label_scores.items())},
            "per_label_active_tasks": {label: len(v) for label, v in sorted(per_label_scores.items())},
        }
        out.update(self._algorithm.stats())
        return out

    # ---- checkpointing -----------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """A JSON-able snapshot; `load_state` on a same-config curriculum continues identically."""
        self._check_open("get_state")
        arrays = self._tracker.snapshot()  # one moment of a shared tracker, even under writers
        return {
            "format": STATE_FORMAT,
            "config": _normalise(self.config.describe()),
            "arrays": {name: arrays[name].tolist() for name in sorted(arrays)},
            "rng": self._rng.bit_generator.state,
            "draws": list(self._draws),
            "draw_pos": self._draw_pos,
            "since_refresh": self._since_refresh,
            "probabilities": self._probabilities.tolist(),
            "evictable": list(self._evictable),
            "eviction_threshold": self._eviction_threshold if math.isfinite(self._eviction_threshold) else None,
            "samples": list(self._samples),
            "sampled_task_ids": list(self._sampled_ids),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state` snapshot; validates all of it before changing anything."""
        self._check_open("load_state")
        self._apply_state(self._check_state(state), write_arrays=True)

    def _apply_state(self, checked: dict[str, Any], *, write_arrays: bool) -> None:
        if write_arrays:
            with self._lock:
                self._tracker.overwrite(checked["arrays"])
        self._rng = checked["rng"]
        self._draws = checked["draws"]
        self._draw_pos = checked["draw_pos"]
        self._since_refresh = checked["since_refresh"]
        self._probabilities = checked["probabilities"]
        self._cdf = np.cumsum(self._probabilities)
        self._evictable = checked["evictable"]
        self._eviction_threshold = checked["eviction_threshold"]
        self._samples = checked["samples"]
        self._sampled_ids = checked["sampled_task_ids"]
        self._tasks = [None] * self._capacity

    def _check_state(self, state: Any) -> dict[str, Any]:
        def fail(why: str) -> CurriculumStateError:
            return CurriculumStateError(f"Cannot load curriculum state: {why}")

        if not isinstance(state, dict):
            raise fail(f"expected a dict from get_state(), received {type(state).__name__}")
        if state.get("format") != STATE_FORMAT:
            raise fail(f"expected format {STATE_FORMAT!r}, received {state.get('format')!r}")
        expected_keys = {"format", "config", "arrays", "rng", "draws", "draw_pos", "since_refresh",
                         "probabilities", "evictable", "eviction_threshold", "samples", "sampled_task_ids"}
        if set(state) != expected_keys:
            raise fail(f"expected keys {sorted(expected_keys)}, received {sorted(state)}")
        if state["config"] != _normalise(self.config.describe()):
            raise fail("it was saved by a curriculum with a different config")
        n = self._capacity
        backend_arrays = self._tracker.backend.arrays
        saved = state["arrays"]
        wanted = sorted(k for k in backend_arrays if not k.startswith("_"))
        if not isinstance(saved, dict) or sorted(saved) != wanted:
            raise fail(f"expected arrays {wanted}, received {sorted(saved) if isinstance(saved, dict) else saved!r}")
        arrays = {}
        for name in wanted:
            target = backend_arrays[name]
            kinds = {int} if target.dtype.kind == "i" else {int, float}
            if not (isinstance(saved[name], list) and set(map(type, saved[name])) <= kinds):  # C speed: 40k entries
                raise fail(f"array {name!r} does not hold {target.dtype} values")
            try:
                values = np.asarray(saved[name], dtype=target.dtype)
            except (TypeError, ValueError, OverflowError):
                raise fail(f"array {name!r} does not hold {target.dtype} values") from None
            if values.shape != target.shape:
                raise fail(f"array {name!r} expected shape {target.shape}, received {values.shape}")
            if values.dtype.kind == "f" and not np.isfinite(values).all():
                raise fail(f"array {name!r} holds NaN or infinite values")
            arrays[name] = values
        ids = arrays["task_ids"]
        if ((ids < 0) | (ids % n != np.arange(n))).any():
            raise fail("task ids do not match their slots")
        if (arrays["completions"] < 0).any() or (arrays["counters"] < 0).any():
            raise fail("negative completion counts or counters")
        why = self._algorithm.check_arrays(arrays) or self._check_array_values(arrays)
        if why is not None:
            raise fail(why)
        if not _is_pcg64_state(state["rng"]):  # numpy would take 1e37 for an int, and 0.5 for a flag
            raise fail("the random generator state is not a PCG64 state")
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = state["rng"]
        draws, draw_pos = state["draws"], state["draw_pos"]
        interval = self._refresh_interval
        if not (isinstance(draws, list) and len(draws) == interval
                and all(type(d) is int and 0 <= d < n for d in draws)):
            raise fail(f"draws must be {interval} slot indices in [0, {n})")
        if not (type(draw_pos) is int and 0 <= draw_pos <= len(draws)):
            raise fail(f"draw_pos must be in [0, {len(draws)}], received {draw_pos!r}")
        since = state["since_refresh"]
        if not (type(since) is int and 0 <= since <= self._refresh_interval):
            raise fail(f"since_refresh must be in [0, {self._refresh_interval}], received {since!r}")
        if not (isinstance(state["probabilities"], list)
                and all(type(p) in (int, float) for p in state["probabilities"])):  # ("0.5" would convert)
            raise fail("probabilities are not numbers")
        probabilities = np.asarray(state["probabilities"], dtype=np.float64)
        if probabilities.shape != (n,) or not np.isfinite(probabilities).all() or (probabilities < 0).any() \
                or not math.isclose(float(probabilities.sum()), 1.0, abs_tol=1e-6):
            raise fail(f"probabilities must be {n} finite non-negative numbers summing to 1")
        evictable, samples = state["evictable"], state["samples"]
        sampled_ids = state["sampled_task_ids"]
        for key, ids_or_empty in (("evictable", evictable), ("sampled_task_ids", sampled_ids)):
            if not (isinstance(ids_or_empty, list) and len(ids_or_empty) == n and all(
                    type(t) is int and (t == EMPTY or (0 <= t <= MAX_TASK_ID and t % n == slot))
                    for slot, t in enumerate(ids_or_empty))):
                raise fail(f"{key} must hold, per slot, a task id of that slot or {EMPTY}")
        if not (isinstance(samples, list) and len(samples) == n
                and all(type(s) is int and 0 <= s <= MAX_COUNT for s in samples)):
            raise fail(f"samples must be {n} integers in [0, {MAX_COUNT}]")
        threshold = state["eviction_threshold"]
        if type(threshold) is int and abs(threshold) <= 2**53:  # a JSON writer that writes 0.0 as 0
            threshold = float(threshold)
        if not (threshold is None or (isinstance(threshold, float) and math.isfinite(threshold))):
            raise fail(f"eviction_threshold must be None or a finite float, received {threshold!r}")
        return {"eviction_threshold": -math.inf if threshold is None else threshold, "arrays": arrays, "rng": rng, "draws": list(draws), "draw_pos": draw_pos, "since_refresh": since,
                "probabilities": probabilities, "evictable": list(evictable), "samples": list(samples),
                "sampled_task_ids": list(sampled_ids)}

    def _check_array_values(self, arrays: dict[str, np.ndarray]) -> str | None:
        """Why finite, well-shaped arrays still cannot be this curriculum's state, or None.

        Bounds every value could have reached by recording scores in `score_range`: counts up
        to `MAX_COUNT`, task ids up to `MAX_TASK_ID`, mean and last scores in the range, and
        the algorithm's state within what normalised scores in [0, 1] produce. A value outside
        would overflow or poison the sampling distribution later, far from its cause.
        """
        for name, values in arrays.items():
            if values.dtype.kind == "i" and name != "task_ids" and name not in self._algorithm.key_arrays \
                    and (values > MAX_COUNT).any():
                return f"array {name!r} holds counts above {MAX_COUNT}"
        if (arrays["task_ids"] > MAX_TASK_ID).any():
            return f"task ids above {MAX_TASK_ID}"
        completions, score_sum, last = arrays["completions"], arrays["score_sum"], arrays["last_score"]
        fresh = completions == 0
        if (score_sum[fresh] != 0).any() or (last[fresh] != 0).any():
            return "slots without completions hold scores"
        low, high = self._score_low, self._score_high
        counts = completions[~fresh]
        slack = max(abs(low), abs(high)) * (1e-9 + np.finfo(np.float64).eps * counts)
        means = score_sum[~fresh] / counts
        recent = last[~fresh]
        if ((means < low - slack) | (means > high + slack) | (recent < low) | (recent > high)).any():
            return f"mean or last scores outside score_range [{low}, {high}]"
        for name, (lowest, highest) in _algorithm_value_bounds(self.config).items():
            values = _array_values(arrays, name)
            if values is None:
                continue
            slack = 1e-9 * max(1.0, highest - lowest)
            if ((values < lowest - slack) | (values > highest + slack)).any():
                return f"array {name!r} holds values outside [{lowest:.6g}, {highest:.6g}]"
        if isinstance(self.config.algorithm, StagedProgressionConfig):
            counters = arrays["stage_counters"]
            stage = int(counters[STAGE_COUNTERS.index("stage")])
            changes = int(counters[STAGE_COUNTERS.index("stage_changes")])
            if changes < stage or (changes - stage) % 2:
                return (f"stage {stage} cannot be reached in {changes} stage changes (every change moves one stage, "
                        "from stage 0)")
        return None

    # ---- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """Release the tracker (the creator of a shared curriculum unlinks its memory); idempotent.

        Every later call but `close()` raises `CurriculumClosedError`.
        """
        self._tasks = [None] * self._capacity
        self._task_ids = None
        self._algorithm = None
        self._draws, self._draw_pos = [], 0  # the next `get_task()` refreshes, which refuses
        self._lock = _CLOSED_LOCK  # the next update takes the lock, which refuses
        self._tracker.close()

    def _check_open(self, call: str) -> None:
        if self._algorithm is None:
            raise CurriculumClosedError(f"{call} called on a closed curriculum; create or attach a new one")

    def __enter__(self) -> Curriculum:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.get_state()
        if self.is_shared:  # the receiver reads the live arrays: sending a copy of the pool is waste
            state["arrays"] = {}
        state["backend"] = self._tracker.backend
        state["owner_pid"] = self._owner_pid
        state["config_object"] = self.config
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config_object"]
        self._algorithm = make_algorithm(self.config)
        backend = state["backend"]
        foreign = state["owner_pid"] != os.getpid()
        self._bind(TaskTracker(backend, self.config.num_active_tasks),
                   owner_pid=-2 if foreign and not backend.is_shared else state["owner_pid"])
        if not backend.is_shared:
            _LOCAL_CURRICULA.add(self)
        local = {k: v for k, v in state.items() if k not in ("backend", "owner_pid", "config_object")}
        if backend.is_shared:
            # The shared arrays are live: check them but never write them back, or a worker that
            # starts up would overwrite completions other workers recorded meanwhile.
            local["arrays"] = {k: v.tolist() for k, v in self._tracker.snapshot().items()}
        self._apply_state(self._check_state(local), write_arrays=not backend.is_shared)


class _ClosedLock:
    """The lock of a closed curriculum: taking it refuses (its update would touch freed state)."""

    __slots__ = ()

    def acquire(self) -> None:
        raise CurriculumClosedError("update_task_performance called on a closed curriculum; create or attach a new one")

    __enter__ = acquire


_CLOSED_LOCK = _ClosedLock()


def _algorithm_value_bounds(config: CurriculumConfig) -> dict[str, tuple[float, float]]:
    """Per algorithm array, the values that normalised scores in [0, 1] can produce."""
    algorithm = config.algorithm
    if isinstance(algorithm, LearningProgressConfig):
        # signal x = (s - b) / (1 - b) with s in [0, 1], baseline b in [0, max_baseline]
        cap = algorithm.max_baseline
        lowest = -cap / (1.0 - cap)
        width = 1.0 - lowest
        signal = (lowest, 1.0)  # fast, slow, last and peak; raw warm-up scores in [0, 1] too
        fields = {"fast": signal, "slow": signal, "var": (0.0, width * width), "baseline": (0.0, cap),
                  "base_var": (0.0, width * width),
                  "last": signal, "peak": signal}
        return {f"{array}[{field}]": bounds for array in ("lp_state", "lp_memory") for field, bounds in fields.items()}
    if isinstance(algorithm, StagedProgressionConfig):
        return {"stage_window": (0.0, 1.0), "stage_window_sum": (0.0, float(algorithm.window))}
    return {}


def _array_values(arrays: Mapping[str, np.ndarray], name: str) -> np.ndarray | None:
    """The values `name` bounds: a whole array, or `array[field]`, one field of its rows of
    learning-progress statistics (None: the layout has no such array)."""
    array, _, field = name.partition("[")
    values = arrays.get(array)
    if values is None or not field:
        return values
    return values.reshape(-1, len(STATE_FIELDS))[:, STATE_FIELDS.index(field[:-1])]


def _normalise(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=repr))


def _first_difference(created: Any, attaching: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first field (dotted path) where two normalised config descriptions differ, with both values."""
    if isinstance(created, dict) and isinstance(attaching, dict):
        kinds = [k for k in ("name", "type") if k in created]  # another kind of thing: say that, not a field of it
        for key in [*kinds, *created, *(k for k in attaching if k not in created)]:
            inner = f"{path}.{key}" if path else key
            if key not in created or key not in attaching:
                return inner, created.get(key, "nothing"), attaching.get(key, "nothing")
            found = _first_difference(created[key], attaching[key], inner)
            if found is not None:
                return found
        return None
    if (isinstance(created, list) and isinstance(attaching, list) and len(created) == len(attaching)
            and any(isinstance(item, (dict, list)) for item in created)):
        for i, (a, b) in enumerate(zip(created, attaching)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if created == attaching else (path, created, attaching)


def _is_pcg64_state(state: Any) -> bool:
    """Whether `state` is a PCG64 `bit_generator.state` as `get_state()` saves it, every number
    an int of its width."""
    def is_int(value: Any, bits: int) -> bool:
        return type(value) is int and 0 <= value < 2**bits

    if not (isinstance(state, dict) and set(state) == {"bit_generator", "state", "has_uint32", "uinteger"}
            and state["bit_generator"] == "PCG64"):
        return False
    inner = state["state"]
    return (isinstance(inner, dict) and set(inner) == {"state", "inc"} and is_int(inner["state"], 128)
            and is_int(inner["inc"], 128) and is_int(state["has_uint32"], 1)
            and is_int(state["uinteger"], 32))
