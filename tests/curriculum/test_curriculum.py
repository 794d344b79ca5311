"""Curriculum: the pool, eviction, stats, bad input, and checkpoint/resume.

Every refused call must leave the curriculum exactly as it was: the tests compare get_state()
before and after, and the next draws against an untouched twin.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from helpers import drive, exact, lp_config, mixed_generator, staged_config, student_score, uniform_config

from curriculum import (
    Curriculum,
    CurriculumClosedError,
    CurriculumConfigError,
    CurriculumStateError,
    InvalidScoreError,
    LearningProgressConfig,
    SharedMemoryBackend,
    SharedTrackerError,
    SingleTaskGenerator,
    UniformConfig,
    UnknownTaskError,
)
from curriculum.tracker import EMPTY
from curriculum.algorithms.learning_progress import STATE_FIELDS

LP_FIELD = {name: index for index, name in enumerate(STATE_FIELDS)}  # row 0 of lp_state

CONFIGS: dict[str, Callable[..., Any]] = {"learning_progress": lp_config, "uniform": uniform_config,
                                          "staged": staged_config}


def noise_score(task_id: int, env_cfg: dict[str, Any], step: int) -> float:
    """A student that never improves: each score is hashed noise in [0, 1). Learning progress
    evicts only stagnant tasks, so the eviction tests run this student."""
    return ((task_id * 7919 + step * 104729) % 1000) / 1000.0


@pytest.fixture
def closing():
    """Curricula made through this factory are closed after the test (shared memory is unlinked)."""
    made: list[Curriculum] = []

    def make(config, **kwargs) -> Curriculum:
        made.append(Curriculum(config, **kwargs))
        return made[-1]

    yield make
    for curriculum in made:
        curriculum.close()


# ---- the pool --------------------------------------------------------------------------------
def test_pool_holds_num_active_tasks_built_by_the_generator() -> None:
    config = lp_config(n=6)
    curriculum = Curriculum(config)
    tasks = curriculum.active_tasks()
    assert [t.task_id for t in tasks] == list(range(6))
    assert [t.slot for t in tasks] == list(range(6))
    for task in tasks:
        assert (dict(task.env_cfg), task.label) == config.task_generator.generate(task.task_id)
        assert (task.num_completions, task.mean_score, task.last_score) == (0, 0.0, 0.0)
    assert curriculum.num_active_tasks == 6 and not curriculum.is_shared and curriculum.shared_memory_name is None


def test_handed_out_tasks_come_from_the_pool_and_completions_are_credited_to_them() -> None:
    curriculum = Curriculum(uniform_config(n=5))
    per_task: Counter[int] = Counter()
    for step in range(60):
        task = curriculum.get_task()
        assert task.task_id in {t.task_id for t in curriculum.active_tasks()}
        assert task.get_env_cfg() == task.env_cfg and task.get_label() == task.label
        assert curriculum.update_task_performance(task.task_id, (step % 5) / 4) is True
        per_task[task.task_id] += 1
    for task in curriculum.active_tasks():
        assert task.num_completions == per_task[task.task_id]
    assert sum(per_task.values()) == curriculum.stats()["total_completions"] == 60
    assert len(per_task) == 5  # uniform over 60 draws reaches every one of 5 tasks


def test_numpy_integer_ids_and_scores_are_accepted() -> None:
    curriculum = Curriculum(uniform_config(n=3))
    task = curriculum.get_task()
    assert curriculum.update_task_performance(np.int64(task.task_id), np.float32(0.5)) is True
    assert task.num_completions == 1 and task.mean_score == 0.5


# ---- stats -----------------------------------------------------------------------------------
BASE_STATS = {"num_active_tasks", "total_completions", "late_completions", "evictions", "tasks_created",
              "mean_lp_score", "pool_lp_gini", "pool_occupancy_gini", "sampling_gini", "sampling_entropy",
              "per_label_lp_scores", "per_label_active_tasks"}
ALGORITHM_STATS = {
    "learning_progress": {"lp_noise_band_scale", "lp_learned_tasks", "lp_revisited_tasks", "lp_cold_tasks",
                          "lp_frontier_tasks", "lp_memory_hits", "lp_admissions_skipped", "lp_mastery_events"},
    "uniform": set(),
    "staged": {"stage", "stage_name", "stage_changes", "stage_episodes", "stage_window_mean", "advancements",
               "regressions"},
}


@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
def test_stats_keys_and_values(algorithm: str) -> None:
    curriculum = Curriculum(CONFIGS[algorithm]())
    records = drive(curriculum, 200)
    stats = curriculum.stats()
    assert set(stats) == BASE_STATS | ALGORITHM_STATS[algorithm]
    accepted = [r[4] for r in records if r[4] is not None]
    assert stats["total_completions"] == accepted.count(True)
    assert stats["late_completions"] == accepted.count(False)
    assert stats["num_active_tasks"] == curriculum.num_active_tasks
    assert stats["tasks_created"] == curriculum.num_active_tasks + stats["evictions"] + (
        curriculum.num_active_tasks * stats.get("stage_changes", 0))
    for key in ("pool_lp_gini", "pool_occupancy_gini", "sampling_gini", "sampling_entropy"):
        assert 0.0 <= stats[key] <= 1.0, key
    assert stats["mean_lp_score"] == pytest.approx(float(curriculum.task_scores().mean()))
    labels = [t.label for t in curriculum.active_tasks()]
    assert stats["per_label_active_tasks"] == dict(sorted(Counter(labels).items()))
    assert all(math.isfinite(v) for v in stats["per_label_lp_scores"].values())
    assert json.loads(json.dumps(stats)) == stats


def test_uniform_sampling_entropy_is_one_and_occupancy_gini_tracks_completions() -> None:
    curriculum = Curriculum(uniform_config(n=4))
    assert curriculum.stats()["sampling_entropy"] == pytest.approx(1.0)
    assert curriculum.stats()["pool_occupancy_gini"] == 0.0
    only = curriculum.active_tasks()[2]
    for _ in range(10):
        curriculum.update_task_performance(only.task_id, 1.0)
    assert curriculum.stats()["pool_occupancy_gini"] == pytest.approx(3 / 4)


# ---- eviction --------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_evictions_take_only_presented_tasks_from_the_low_score_shortlist(seed: int) -> None:
    """Model check: at every refresh compute the shortlist from public numbers (eligible =
    >= min_presentations completions; the lowest eviction_percentile% of them by score) and
    check each eviction until the next refresh against it."""
    config = lp_config(n=10, seed=seed, min_presentations=3, eviction_percentile=30.0, refresh_interval=4)
    curriculum = Curriculum(config)
    tracker = curriculum.tracker
    completions: Counter[int] = Counter()

    def shortlist() -> tuple[dict[int, int], int]:
        ids, counts, scores = tracker.task_ids.copy(), tracker.completions.copy(), curriculum.task_scores()
        eligible = np.flatnonzero(counts >= config.min_presentations)
        k = int(eligible.size * config.eviction_percentile / 100)
        if k == 0:
            return {}, 0
        cutoff = np.sort(scores[eligible])[k - 1]
        return {int(s): int(ids[s]) for s in eligible if scores[s] <= cutoff}, k

    candidates, k = shortlist()
    evicted_since_refresh = 0
    evicted_total = 0
    for step in range(600):
        task = curriculum.get_task()
        before = tracker.task_ids.copy()
        evictions = tracker.evictions
        assert curriculum.update_task_performance(task.task_id, noise_score(task.task_id, {}, step)) is True
        completions[task.task_id] += 1
        if tracker.evictions != evictions:
            changed = np.flatnonzero(tracker.task_ids != before).tolist()
            assert changed == [task.slot]  # only the completed task's slot is refilled
            assert candidates.get(task.slot) == task.task_id, "evicted a task that was not shortlisted"
            assert completions[task.task_id] >= config.min_presentations
            # the algorithm admits one of the next `admission_candidates` ids of the slot
            generations = (tracker.task_id_at(task.slot) - task.task_id) / config.num_active_tasks
            assert generations in range(1, config.algorithm.admission_candidates + 1)
            evicted_since_refresh += 1
            evicted_total += 1
            assert evicted_since_refresh <= k
        if (step + 1) % config.refresh_interval == 0:  # get/update pairs: a refresh ends every 4th update
            candidates, k = shortlist()
            evicted_since_refresh = 0
    assert evicted_total >= 3  # the run really exercised eviction
    assert tracker.evictions == evicted_total


def test_no_eviction_without_percentile_or_for_uniform() -> None:
    for config in (lp_config(eviction_percentile=0.0, min_presentations=1), uniform_config(min_presentations=1,
                                                                                            eviction_percentile=100.0)):
        curriculum = Curriculum(config)
        drive(curriculum, 300)
        assert curriculum.stats()["evictions"] == 0
        assert [t.task_id for t in curriculum.active_tasks()] == list(range(config.num_active_tasks))


def test_a_shortlist_mark_does_not_pass_to_the_next_task_in_the_slot(closing) -> None:
    """Handle A shortlists slot 2; handle B (another worker) evicts its task; the new task in
    slot 2 was never scored, so A must not evict it when it reaches min_presentations."""
    config = lp_config(n=4, algorithm=LearningProgressConfig(min_samples_for_lp=2), min_presentations=2,
                       eviction_percentile=50.0, refresh_interval=1000,
                       task_generator=SingleTaskGenerator({"level": 1}))
    a = closing(config, shared_memory=True)
    for step in range(30):  # slots 0 and 1 learn steadily; slots 2 and 3 never change
        for slot in range(4):
            a.update_task_performance(slot, step / 30 if slot < 2 else 0.5)
    lp = a.task_scores()
    assert lp[0] > 0 and lp[1] > 0 and lp[2] == lp[3] == 0.0  # so 2 and 3 are the lowest half
    a.reseed(1)  # a refresh: A shortlists tasks 2 and 3
    b = Curriculum.attach(a.shared_memory_name, config, seed=2)
    assert b.update_task_performance(2, 0.5) is True
    assert a.tracker.task_id_at(2) == 6 and a.tracker.evictions == 1  # B evicted task 2
    for _ in range(config.min_presentations):
        assert a.update_task_performance(6, 0.5) is True
    assert a.tracker.task_id_at(2) == 6, "A evicted task 6 on a mark that task 2 earned"
    assert a.tracker.evictions == 1
    assert a.update_task_performance(3, 0.5) is True  # A's own mark on task 3 still holds
    assert a.tracker.task_id_at(3) == 7 and a.tracker.evictions == 2
    b.close()


def test_completion_of_a_task_evicted_mid_episode_is_late_and_never_credited_to_the_new_task() -> None:
    config = lp_config(n=1, algorithm=LearningProgressConfig(min_samples_for_lp=1), min_presentations=1,
                       eviction_percentile=100.0, refresh_interval=1)
    curriculum = Curriculum(config)
    assert curriculum.update_task_performance(curriculum.get_task().task_id, 0.5) is True  # now shortlisted
    first, second = curriculum.get_task(), curriculum.get_task()  # two episodes of task 0 running
    assert first.task_id == second.task_id == 0
    assert curriculum.update_task_performance(first.task_id, 0.5) is True  # evicts task 0
    replacement = curriculum.active_tasks()[0]
    assert replacement.task_id == 1
    assert curriculum.update_task_performance(second.task_id, 1.0) is False
    stats = curriculum.stats()
    assert (stats["total_completions"], stats["late_completions"], stats["evictions"]) == (2, 1, 1)
    assert (replacement.num_completions, replacement.last_score) == (0, 0.0)
    assert (second.num_completions, second.mean_score) == (0, 0.0)  # a stale handle reads nothing


# ---- bad input leaves everything untouched ---------------------------------------------------
@pytest.fixture
def twins():
    """Two curricula with the same config and history; the test spoils calls on the first."""
    pair = []
    for _ in range(2):
        curriculum = Curriculum(lp_config())
        drive(curriculum, 40)
        pair.append(curriculum)
    assert pair[0].get_state() == pair[1].get_state()
    return pair


def _assert_untouched(curriculum: Curriculum, twin: Curriculum, before: dict[str, Any]) -> None:
    assert curriculum.get_state() == before
    assert curriculum.stats() == twin.stats()
    assert drive(curriculum, 30, start=40) == drive(twin, 30, start=40)


@pytest.mark.parametrize("score", [float("nan"), float("inf"), float("-inf"), -0.01, 1.0001, 7, np.float64("nan"),
                                   np.float32(1.5), 10**400], ids=lambda v: repr(v)[:24])
def test_bad_score_is_refused_and_changes_nothing(twins, score) -> None:
    curriculum, twin = twins
    task_id = curriculum.active_tasks()[3].task_id
    twin.active_tasks()
    before = curriculum.get_state()
    message = f"Expected score in [0.0, 1.0] for task {task_id}, received {score!r}"
    if type(score) is int and score > 10**300:  # a real number, but no float can hold it
        message = (f"Expected score in [0.0, 1.0] for task {task_id} as a real number, received {score!r} of type "
                   "int")
    with pytest.raises(InvalidScoreError, match=exact(message)):
        curriculum.update_task_performance(task_id, score)
    _assert_untouched(curriculum, twin, before)


NOT_REAL_SCORES = [np.array([0.5]), np.array([0.5, 0.5]), np.array(0.5), Decimal("0.5"), "0.5", None, True,
                   np.bool_(True), [0.5], 0.5j]


@pytest.mark.parametrize("score", NOT_REAL_SCORES, ids=repr)
def test_a_score_that_is_not_a_real_number_is_refused_before_any_write(twins, score) -> None:
    """One-element arrays and Decimals used to increment the completion count, then fail."""
    curriculum, twin = twins
    task_id = curriculum.active_tasks()[3].task_id
    twin.active_tasks()
    before = curriculum.get_state()
    message = (f"Expected score in [0.0, 1.0] for task {task_id} as a real number, received {score!r} of type "
               f"{type(score).__name__}")
    with pytest.raises(InvalidScoreError, match=exact(message)):
        curriculum.update_task_performance(task_id, score)
    _assert_untouched(curriculum, twin, before)


@pytest.mark.parametrize("score", [np.array([0.5]), Decimal("0.5")], ids=repr)
def test_a_shared_curriculum_refuses_a_bad_score_type_before_any_write(closing, score) -> None:
    curriculum = closing(lp_config(), shared_memory=True)
    drive(curriculum, 20)
    task_id = curriculum.active_tasks()[3].task_id
    before = curriculum.get_state()
    with pytest.raises(InvalidScoreError):
        curriculum.update_task_performance(task_id, score)
    assert curriculum.get_state() == before


@pytest.mark.parametrize("score", [Fraction(1, 2), np.float32(0.5), np.float16(0.5), np.int64(1), np.uint8(0)],
                         ids=repr)
def test_real_numbers_of_any_type_are_accepted_as_their_float_value(score) -> None:
    curriculum, twin = Curriculum(lp_config()), Curriculum(lp_config())
    for c in (curriculum, twin):
        drive(c, 20)
    task_id = curriculum.active_tasks()[3].task_id
    twin.active_tasks()
    assert curriculum.update_task_performance(task_id, score) is True
    assert twin.update_task_performance(task_id, float(score)) is True
    assert curriculum.get_state() == twin.get_state()


def test_score_range_is_configurable() -> None:
    curriculum = Curriculum(uniform_config(score_range=(-10.0, 10.0)))
    assert curriculum.update_task_performance(0, -9.5) is True
    with pytest.raises(InvalidScoreError, match=exact("Expected score in [-10.0, 10.0] for task 0, received 10.5")):
        curriculum.update_task_performance(0, 10.5)


def _future(curriculum: Curriculum) -> int:
    return curriculum.tracker.task_id_at(3) + curriculum.num_active_tasks


@pytest.mark.parametrize(("task_id", "message"), [
    (-1, "Expected a task id issued by this curriculum's get_task(), received -1 (slot 0 holds task {slot0})"),
    (-9, "Expected a task id issued by this curriculum's get_task(), received -9 (slot 0 holds task {slot0})"),
    ("future", "Expected a task id issued by this curriculum's get_task(), received {future} (slot 3 holds task "
               "{slot3})"),
    (2**70 + 3, "Expected a task id issued by this curriculum's get_task(), received 1180591620717411303427 "
                "(slot 3 holds task {slot3})"),
    (3.0, "Expected an integer task id from get_task(), received 3.0"),
    (True, "Expected an integer task id from get_task(), received True"),
    ("3", "Expected an integer task id from get_task(), received '3'"),
    (None, "Expected an integer task id from get_task(), received None"),
    (np.float64(3), "Expected an integer task id from get_task(), received np.float64(3.0)"),
], ids=["minus-1", "minus-9", "future-generation", "huge", "float", "bool", "str", "none", "numpy-float"])
def test_never_issued_task_id_is_refused_and_changes_nothing(twins, task_id, message: str) -> None:
    curriculum, twin = twins
    ids = curriculum.tracker.task_ids
    if task_id == "future":
        task_id = _future(curriculum)
    message = message.format(slot0=ids[0], slot3=ids[3], future=_future(curriculum))
    before = curriculum.get_state()
    with pytest.raises(UnknownTaskError, match=exact(message)):
        curriculum.update_task_performance(task_id, 0.5)
    _assert_untouched(curriculum, twin, before)


# ---- checkpoint / resume ---------------------------------------------------------------------
RESUME_PLAN = {"learning_progress": (150, 200), "uniform": (100, 100), "staged": (90, 150)}


@pytest.mark.parametrize("target", ["local", "shared"])
@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
def test_a_restored_curriculum_continues_exactly_like_the_original(closing, algorithm: str, target: str) -> None:
    """Run A for k steps, save; run A m more steps; load the saved state (through JSON) into a
    fresh B and run the same m steps: same tasks, same configs, same completions, same stats."""
    make = CONFIGS[algorithm]
    k, m = RESUME_PLAN[algorithm]
    overrides = {"advancement_threshold": 0.35, "regression_threshold": 0.2} if algorithm == "staged" else {}
    score = noise_score if algorithm == "learning_progress" else student_score
    original = closing(make(**overrides))
    in_flight: list[int] = []
    drive(original, k, in_flight=in_flight, lag=8, score=score)
    saved = json.dumps(original.get_state())
    at_save = original.stats()
    resumed_in_flight = list(in_flight)
    expected = drive(original, m, start=k, in_flight=in_flight, lag=8, stats=True, score=score)

    restored = closing(make(**overrides), shared_memory=target == "shared")
    restored.load_state(json.loads(saved))
    assert restored.get_state() == json.loads(saved)
    actual = drive(restored, m, start=k, in_flight=resumed_in_flight, lag=8, stats=True, score=score)
    assert actual == expected
    assert restored.get_state() == original.get_state()
    final = expected[-1][-1]
    if algorithm == "learning_progress":  # the resumed part evicted tasks and saw late completions
        assert final["evictions"] > at_save["evictions"]
        assert final["late_completions"] > at_save["late_completions"]
    if algorithm == "staged":  # ... and changed stage
        assert final["stage_changes"] > at_save["stage_changes"]


@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
def test_state_survives_json_and_round_trips_exactly(algorithm: str) -> None:
    original = Curriculum(CONFIGS[algorithm]())
    drive(original, 77)
    state = original.get_state()
    assert json.loads(json.dumps(state)) == state
    fresh = Curriculum(CONFIGS[algorithm]())
    fresh.load_state(json.loads(json.dumps(state)))
    assert fresh.get_state() == state
    assert fresh.stats() == original.stats()


def _set(path: tuple, value: Any) -> Callable[[dict], Any]:
    """A corruption: the state with the entry at `path` replaced (or transformed by `value`)."""
    def mutate(state: dict) -> Any:
        node = state
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value(node[path[-1]]) if callable(value) else value
        return state
    return mutate


def _drop(*path: str) -> Callable[[dict], Any]:
    """A corruption: the state without the entry at `path`."""
    def mutate(state: dict) -> Any:
        node = state
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
        return state
    return mutate


def _fresh_slot_with_score(state: dict) -> dict:
    arrays = state["arrays"]
    arrays["completions"][0] = 0
    arrays["score_sum"][0] = 0.0
    arrays["last_score"][0] = 0.25
    return state


def _other_config_state() -> dict[str, Any]:
    return Curriculum(lp_config(seed=12)).get_state()


PREFIX = "Cannot load curriculum state: "
#: (id, state -> corrupted state, why it is refused)
CORRUPTIONS: list[tuple[str, Callable[[dict], Any], str]] = [
    ("not-a-dict", lambda s: "state", "expected a dict from get_state(), received str"),
    ("format", _set(("format",), "curriculum-state/0"),
     "expected format 'curriculum-state/1', received 'curriculum-state/0'"),
    ("missing-key", _drop("draws"), "expected keys {keys}, received {keys_without_draws}"),
    ("other-config", lambda s: _other_config_state(), "it was saved by a curriculum with a different config"),
    ("missing-array", _drop("arrays", "lp_state"), "expected arrays {arrays}, received {arrays_without_state}"),
    ("short-array", _set(("arrays", "task_ids"), lambda v: v[:-1]),
     "array 'task_ids' expected shape (8,), received (7,)"),
    ("nan", _set(("arrays", "lp_state", 2), float("nan")), "array 'lp_state' holds NaN or infinite values"),
    ("inf", _set(("arrays", "score_sum", 0), float("inf")), "array 'score_sum' holds NaN or infinite values"),
    ("float-in-ints", _set(("arrays", "completions", 0), 1.5), "array 'completions' does not hold int64 values"),
    ("str-task-id", _set(("arrays", "task_ids", 1), "9"), "array 'task_ids' does not hold int64 values"),
    ("huge-task-id", _set(("arrays", "task_ids", 1), 2**64 + 1), "array 'task_ids' does not hold int64 values"),
    ("task-id-of-other-slot", _set(("arrays", "task_ids", 1), lambda v: v + 1), "task ids do not match their slots"),
    ("negative-task-id", _set(("arrays", "task_ids", 0), -8), "task ids do not match their slots"),
    ("negative-count", _set(("arrays", "completions", 0), -1), "negative completion counts or counters"),
    ("negative-counter", _set(("arrays", "counters", 0), -1), "negative completion counts or counters"),
    # lp_state holds per slot (fast, slow, var, baseline, last, peak, count): 2 is slot 0's variance
    ("negative-variance", _set(("arrays", "lp_state", 2), -0.5), "negative learning-progress variances"),
    ("baseline-one", _set(("arrays", "lp_state", 3), 1.0), "learning-progress baselines above max_baseline=0.75"),
    ("rng-not-dict", _set(("rng",), [1, 2]), "the random generator state is not a PCG64 state"),
    ("rng-other-generator", _set(("rng", "bit_generator"), "MT19937"), "the random generator state is not a PCG64 state"),
    ("rng-negative", _set(("rng", "state", "state"), -1), "the random generator state is not a PCG64 state"),
    ("rng-too-big", _set(("rng", "state", "inc"), 2**200), "the random generator state is not a PCG64 state"),
    ("rng-missing", _drop("rng", "state"), "the random generator state is not a PCG64 state"),
    ("rng-float", _set(("rng", "state", "state"), float), "the random generator state is not a PCG64 state"),
    ("rng-half-flag", _set(("rng", "has_uint32"), 0.5), "the random generator state is not a PCG64 state"),
    ("draw-out-of-range", _set(("draws", 0), 8), "draws must be 5 slot indices in [0, 8)"),
    ("draw-float", _set(("draws", 0), 1.0), "draws must be 5 slot indices in [0, 8)"),
    ("draws-short", _set(("draws",), lambda v: v[:-1]), "draws must be 5 slot indices in [0, 8)"),
    ("draw-pos", _set(("draw_pos",), 6), "draw_pos must be in [0, 5], received 6"),
    ("since-refresh", _set(("since_refresh",), -1), "since_refresh must be in [0, 5], received -1"),
    ("probabilities-sum", _set(("probabilities", 0), lambda v: v + 0.5),
     "probabilities must be 8 finite non-negative numbers summing to 1"),
    ("probabilities-nan", _set(("probabilities", 0), float("nan")),
     "probabilities must be 8 finite non-negative numbers summing to 1"),
    ("probabilities-short", _set(("probabilities",), [0.5, 0.5]),
     "probabilities must be 8 finite non-negative numbers summing to 1"),
    ("probabilities-string", _set(("probabilities", 0), str), "probabilities are not numbers"),
    ("evictable-bool", _set(("evictable", 0), True), "evictable must hold, per slot, a task id of that slot or -1"),
    ("evictable-other-slot", _set(("evictable", 0), 1), "evictable must hold, per slot, a task id of that slot or -1"),
    ("sampled-ids-short", _set(("sampled_task_ids",), [-1]),
     "sampled_task_ids must hold, per slot, a task id of that slot or -1"),
    ("samples-negative", _set(("samples", 0), -3), "samples must be 8 integers in [0, 9007199254740992]"),
    ("samples-huge", _set(("samples", 0), 10**400), "samples must be 8 integers in [0, 9007199254740992]"),
    ("completions-at-int64-max", _set(("arrays", "completions", 0), 2**63 - 1),
     "array 'completions' holds counts above 9007199254740992"),
    ("counter-at-int64-max", _set(("arrays", "counters", 0), 2**63 - 1),
     "array 'counters' holds counts above 9007199254740992"),
    ("task-id-near-int64-max", _set(("arrays", "task_ids", 0), 2**63 - 8), "task ids above 4611686018427387904"),
    ("evictable-huge", _set(("evictable", 0), 2**63 - 8),
     "evictable must hold, per slot, a task id of that slot or -1"),
    ("lp-fast-huge", _set(("arrays", "lp_state", LP_FIELD["fast"]), 1e308),
     "array 'lp_state[fast]' holds values outside [-3, 1]"),
    ("lp-slow-low", _set(("arrays", "lp_state", LP_FIELD["slow"]), -3.5),
     "array 'lp_state[slow]' holds values outside [-3, 1]"),
    ("lp-var-huge", _set(("arrays", "lp_state", LP_FIELD["var"]), 1e300),
     "array 'lp_state[var]' holds values outside [0, 16]"),
    ("lp-peak-huge", _set(("arrays", "lp_state", LP_FIELD["peak"]), 2.0),
     "array 'lp_state[peak]' holds values outside [-3, 1]"),
    ("score-sum-huge", _set(("arrays", "score_sum", 0), 1e308), "mean or last scores outside score_range [0.0, 1.0]"),
    ("last-score-out-of-range", _set(("arrays", "last_score", 0), 1.5),
     "mean or last scores outside score_range [0.0, 1.0]"),
    ("score-without-completions", lambda s: _fresh_slot_with_score(s), "slots without completions hold scores"),
    ("threshold", _set(("eviction_threshold",), "low"), "eviction_threshold must be None or a finite float, received 'low'"),
]


@pytest.mark.parametrize(("mutate", "why"), [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS])
def test_corrupted_or_foreign_state_is_refused_and_changes_nothing(twins, mutate, why: str) -> None:
    curriculum, twin = twins
    before = curriculum.get_state()
    keys = sorted(before)
    drive(twin, 5)
    state = json.loads(json.dumps(twin.get_state()))
    assert state != before  # so a half-applied load would show
    Curriculum(lp_config()).load_state(copy.deepcopy(state))  # and it is valid before it is spoiled
    state = mutate(state)
    why = why.format(keys=keys, keys_without_draws=[k for k in keys if k != "draws"],
                     arrays=sorted(before["arrays"]), arrays_without_state=[k for k in sorted(before["arrays"])
                                                                             if k != "lp_state"])
    with pytest.raises(CurriculumStateError, match=exact(PREFIX + why)):
        curriculum.load_state(state)
    twin.load_state(before)
    _assert_untouched(curriculum, twin, before)


@pytest.mark.parametrize(("mutate", "why"), [
    (_set(("arrays", "stage_counters", 1), 2**63 - 1), "array 'stage_counters' holds counts above 9007199254740992"),
    (_set(("arrays", "stage_window", 0), 1e308), "array 'stage_window' holds values outside [0, 1]"),
    (_set(("arrays", "stage_window_sum", 0), 11.0), "array 'stage_window_sum' holds values outside [0, 10]"),
    (_set(("arrays", "stage_counters", 1), 2), "stage 1 cannot be reached in 2 stage changes (every change moves one "
                                               "stage, from stage 0)"),
], ids=["stage-changes-int64-max", "window-score-huge", "window-sum", "stage-parity"])
def test_staged_state_with_values_no_run_can_reach_is_refused(mutate, why: str) -> None:
    curriculum = Curriculum(staged_config())
    drive(curriculum, 16, score=lambda *_: 0.9)
    before = curriculum.get_state()
    assert curriculum.stage == 1 and before["arrays"]["stage_counters"][1] == 1
    Curriculum(staged_config()).load_state(copy.deepcopy(before))  # valid before it is spoiled
    with pytest.raises(CurriculumStateError, match=exact(PREFIX + why)):
        curriculum.load_state(mutate(copy.deepcopy(before)))
    assert curriculum.get_state() == before


def test_staged_state_with_an_impossible_stage_is_refused() -> None:
    curriculum = Curriculum(staged_config())
    drive(curriculum, 20)
    before = curriculum.get_state()
    state = copy.deepcopy(before)
    state["arrays"]["stage_counters"][0] = 3
    with pytest.raises(CurriculumStateError, match=r"^Cannot load curriculum state: stage counters .* are outside "
                                                   r"stage in \[0, 2\], window_count in \[0, 10\], window_pos in "
                                                   r"\[0, 10\)$"):
        curriculum.load_state(state)
    assert curriculum.get_state() == before


# ---- attaching ----------------------------------------------------------------------------------
def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


ATTACH_MISMATCHES = [
    ("generator", lambda: lp_config(task_generator=mixed_generator(seed=4)), "task_generator.children[0].seed", "3",
     "4"),
    ("algorithm_parameter", lambda: lp_config(algorithm=LearningProgressConfig(min_samples_for_lp=3, ema_timescale=0.2)),
     "algorithm.ema_timescale", "0.1", "0.2"),
    ("algorithm", lambda: lp_config(algorithm=UniformConfig()), "algorithm.name", "learning_progress", "uniform"),
    ("score_range", lambda: lp_config(score_range=(0.0, 2.0)), "score_range", "[0.0, 1.0]", "[0.0, 2.0]"),
    ("pool_size", lambda: lp_config(n=6), "num_active_tasks", "8", "6"),
    ("seed", lambda: lp_config(seed=12), "seed", "11", "12"),
    ("eviction", lambda: lp_config(eviction_percentile=40.0), "eviction_percentile", "50.0", "40.0"),
    ("refresh_interval", lambda: lp_config(refresh_interval=6), "refresh_interval", "5", "6"),
]


@pytest.mark.parametrize(("make_config", "field", "theirs", "ours"), [m[1:] for m in ATTACH_MISMATCHES],
                         ids=[m[0] for m in ATTACH_MISMATCHES])
def test_attach_refuses_a_different_config_and_names_the_field(closing, make_config, field: str, theirs: str,
                                                               ours: str) -> None:
    curriculum = closing(lp_config(n=8), shared_memory=True)
    drive(curriculum, 30)
    name = curriculum.shared_memory_name
    before, fds = curriculum.get_state(), _open_fds()
    message = (f"Expected the config of the shared curriculum {name!r}, but `{field}` differs: {theirs} in the shared "
               f"curriculum, {ours} in the config given to attach")
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        Curriculum.attach(name, make_config())
    assert curriculum.get_state() == before
    assert _open_fds() == fds  # the refused handle let go of the block


def test_attach_refuses_what_is_not_a_curriculum(closing) -> None:
    curriculum = closing(lp_config(n=8), shared_memory=True)
    with pytest.raises(CurriculumConfigError, match=exact("Expected `config` to be a CurriculumConfig, received dict")):
        Curriculum.attach(curriculum.shared_memory_name, {"num_active_tasks": 8})
    backend = SharedMemoryBackend({"values": ("int64", 4)})
    try:
        message = f"Expected the shared tracker {backend.name!r} to belong to a Curriculum, but it holds no curriculum config"
        with pytest.raises(SharedTrackerError, match=exact(message)):
            Curriculum.attach(backend.name, lp_config(n=8))
    finally:
        backend.close()


def test_attach_with_the_same_config_shares_the_pool(closing) -> None:
    curriculum = closing(lp_config(n=8), shared_memory=True)
    attached = Curriculum.attach(curriculum.shared_memory_name, lp_config(n=8), seed=1)
    assert attached.get_task().task_id in range(8)
    attached.close()


def test_attached_handles_share_the_pool_and_its_statistics(closing) -> None:
    owner = closing(lp_config(), shared_memory=True)
    other = Curriculum.attach(owner.shared_memory_name, lp_config(), seed=3)
    drive(owner, 50)
    drive(other, 50, start=50)
    assert owner.get_state()["arrays"] == other.get_state()["arrays"]
    assert owner.stats()["total_completions"] + owner.stats()["late_completions"] == 2 * (50 - 3)
    assert [t.task_id for t in owner.active_tasks()] == [t.task_id for t in other.active_tasks()]
    assert all(t.task_id % 8 == t.slot for t in other.active_tasks())
    assert EMPTY not in owner.tracker.task_ids.tolist()
    other.close()


# ---- constructor arguments and reseeding -----------------------------------------------------
@pytest.mark.parametrize("shared_memory", ["yes", 1, None])
def test_shared_memory_must_be_a_bool(shared_memory) -> None:
    """(`lock_timeout` is checked with the tracker: tests/curriculum/test_memory.py.)"""
    with pytest.raises(CurriculumConfigError,
                       match=exact(f"Expected `shared_memory` to be a bool, received {shared_memory!r}")):
        Curriculum(lp_config(), shared_memory=shared_memory)


@pytest.mark.parametrize("seed", ["abc", -1, 1.5, True, None, np.float64(2)], ids=repr)
def test_bad_reseed_is_refused_and_changes_nothing(twins, seed) -> None:
    curriculum, twin = twins
    before = curriculum.get_state()
    with pytest.raises(CurriculumConfigError, match=exact(f"Expected `seed` to be an integer >= 0, received {seed!r}")):
        curriculum.reseed(seed)
    _assert_untouched(curriculum, twin, before)


def test_reseed_takes_numpy_and_huge_integers() -> None:
    curriculum, twin = Curriculum(lp_config()), Curriculum(lp_config())
    curriculum.reseed(np.int64(7))
    twin.reseed(7)
    assert curriculum.get_state() == twin.get_state()
    curriculum.reseed(2**100)
    assert curriculum.get_state()["rng"] != twin.get_state()["rng"]


# ---- stage sync (centralized tracking) -------------------------------------------------------
SYNC_SHAPE = "Expected a stage sync {'stage': int, 'stage_changes': int} from sync_state(), received "
BAD_SYNCS = [
    ({"stage": 1, "stage_changes": -5},
     "Expected stage_changes in [1, 9007199254740992] with the parity of stage 1 (every change moves one stage, "
     "from stage 0), received -5"),
    ({"stage": 2, "stage_changes": 1},
     "Expected stage_changes in [2, 9007199254740992] with the parity of stage 2 (every change moves one stage, "
     "from stage 0), received 1"),
    ({"stage": 1, "stage_changes": 2},
     "Expected stage_changes in [1, 9007199254740992] with the parity of stage 1 (every change moves one stage, "
     "from stage 0), received 2"),
    ({"stage": 0, "stage_changes": 2**62},
     "Expected stage_changes in [0, 9007199254740992] with the parity of stage 0 (every change moves one stage, "
     "from stage 0), received 4611686018427387904"),
    ({"stage": 3, "stage_changes": 3}, "Expected stage in [0, 2], received 3"),
    ({"stage": -1, "stage_changes": 1}, "Expected stage in [0, 2], received -1"),
    ({}, SYNC_SHAPE + "{}"),
    (None, SYNC_SHAPE + "None"),
    ({"stage": None, "stage_changes": 0}, SYNC_SHAPE + "{'stage': None, 'stage_changes': 0}"),
    ({"stage": 1.0, "stage_changes": 1}, SYNC_SHAPE + "{'stage': 1.0, 'stage_changes': 1}"),
    ({"stage": True, "stage_changes": 1}, SYNC_SHAPE + "{'stage': True, 'stage_changes': 1}"),
    ({"stage": 1, "stage_changes": 1, "extra": 0}, SYNC_SHAPE + "{'stage': 1, 'stage_changes': 1, 'extra': 0}"),
    ([1, 1], SYNC_SHAPE + "[1, 1]"),
]


@pytest.mark.parametrize(("sync", "message"), BAD_SYNCS, ids=[repr(s) for s, _ in BAD_SYNCS])
def test_a_stage_sync_no_curriculum_could_send_is_refused_and_changes_nothing(sync, message: str) -> None:
    """A negative change count used to give negative task ids, after which the curriculum
    refused its own tasks and its own checkpoint."""
    curriculum, twin = Curriculum(staged_config()), Curriculum(staged_config())
    for c in (curriculum, twin):
        drive(c, 5)
    before = curriculum.get_state()
    with pytest.raises(CurriculumStateError, match=exact(message)):
        curriculum.apply_sync_state(sync)
    _assert_untouched(curriculum, twin, before)
    curriculum.load_state(curriculum.get_state())  # and it still takes its own checkpoint


def test_a_valid_stage_sync_moves_the_pool_to_the_stage() -> None:
    curriculum = Curriculum(staged_config())
    assert curriculum.apply_sync_state({"stage": 1, "stage_changes": np.int64(3)}) is True
    assert curriculum.sync_state() == {"stage": 1, "stage_changes": 3}
    assert {t.label for t in curriculum.active_tasks()} == {"s1"}
    assert all(t.task_id == 3 * 6 + t.slot for t in curriculum.active_tasks())
    assert curriculum.apply_sync_state({"stage": 1, "stage_changes": 3}) is False
    curriculum.load_state(json.loads(json.dumps(curriculum.get_state())))


# ---- score range -----------------------------------------------------------------------------
def _scaled_run(score_range: tuple[float, float], scale: float) -> Curriculum:
    curriculum = Curriculum(lp_config(score_range=score_range))
    drive(curriculum, 400, score=lambda task_id, cfg, step: student_score(task_id, cfg, step) * scale)
    return curriculum


def test_a_huge_score_range_keeps_learning_progress_finite_and_checkpoints_round_trip() -> None:
    """With score_range (0, 1e200) the LP variances used to overflow to inf, after which the
    curriculum refused its own checkpoint."""
    huge = _scaled_run((0.0, 1e200), 1e200)
    state = huge.get_state()
    assert all(math.isfinite(v) for v in state["arrays"]["lp_state"])
    restored = Curriculum(lp_config(score_range=(0.0, 1e200)))
    restored.load_state(json.loads(json.dumps(state)))
    assert restored.get_state() == state


def test_the_algorithm_sees_scores_normalised_into_the_unit_range() -> None:
    """Scaling the range and the scores alike changes the tracker's scores and nothing else
    (the same tasks, draws and evictions; learning progress equal up to rounding)."""
    unit, scaled = _scaled_run((0.0, 1.0), 1.0), _scaled_run((0.0, 1e200), 1e200)
    unit_state, scaled_state = unit.get_state(), scaled.get_state()
    for name in ("task_ids", "completions", "counters"):
        assert scaled_state["arrays"][name] == unit_state["arrays"][name], name
    # equal up to the rounding of s * 1e200 / 1e200
    assert np.allclose(scaled_state["arrays"]["lp_state"], unit_state["arrays"]["lp_state"], rtol=1e-12, atol=1e-15)
    assert scaled_state["draws"] == unit_state["draws"] and scaled_state["samples"] == unit_state["samples"]
    assert np.allclose(np.array(scaled_state["arrays"]["score_sum"]) / 1e200, unit_state["arrays"]["score_sum"])


# ---- after close() ---------------------------------------------------------------------------
AFTER_CLOSE: dict[str, Callable[[Curriculum, int], Any]] = {
    "get_task": lambda c, task_id: c.get_task(),
    "update_task_performance": lambda c, task_id: c.update_task_performance(task_id, 0.5),
    "stats": lambda c, task_id: c.stats(),
    "active_tasks": lambda c, task_id: c.active_tasks(),
    "sampling_probabilities": lambda c, task_id: c.sampling_probabilities(),
    "task_scores": lambda c, task_id: c.task_scores(),
    "get_state": lambda c, task_id: c.get_state(),
    "load_state": lambda c, task_id: c.load_state({}),
    "reseed": lambda c, task_id: c.reseed(1),
    "stage": lambda c, task_id: c.stage,
    "sync_state": lambda c, task_id: c.sync_state(),
    "apply_sync_state": lambda c, task_id: c.apply_sync_state({"stage": 0, "stage_changes": 0}),
}


@pytest.mark.parametrize("kind", list(CONFIGS))
@pytest.mark.parametrize("call", list(AFTER_CLOSE))
def test_every_call_but_close_on_a_closed_curriculum_is_refused_by_name(kind: str, call: str) -> None:
    """Mid-draws and with a completion recorded, then closed (twice, and by a `with` block):
    every call names itself in a `CurriculumClosedError`, never an unrelated error."""
    curriculum = Curriculum(CONFIGS[kind]())
    drive(curriculum, 5)
    task_id = curriculum.get_task().task_id
    with curriculum:
        curriculum.close()
    with pytest.raises(CurriculumClosedError, match=f"^{call} called on a closed curriculum"):
        AFTER_CLOSE[call](curriculum, task_id)
