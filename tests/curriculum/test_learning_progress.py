"""Learning progress: rising (or falling) scores earn LP, flat and pure-noise scores do not;
mastered tasks are revisited and impossible ones are not, also once everything learnable is
mastered; configurations and labels proven stagnant are remembered across eviction.

The first students are score curves per pool slot, fed through the public API with eviction
off, so each slot keeps one task for the whole run. Then a corridor family with impossible
lengths runs through a whole curriculum with eviction, and the algorithm's own mechanisms
(memory, admission, label usefulness, retries, checkpointed state) are driven directly over a
tracker.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import exact

from curriculum import (
    BucketedTaskGenerator,
    Curriculum,
    CurriculumConfig,
    CurriculumStateError,
    LearningProgressConfig,
    SingleTaskGenerator,
    TaskGenerator,
    TaskTracker,
)
from curriculum.algorithms import LearningProgressAlgorithm
from curriculum.algorithms.learning_progress import STATE_FIELDS, id_fields

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # numpy overflow / NaN is a bug here

ROUNDS = 300
SEEDS = range(5)
Curve = Callable[[int, np.random.Generator], float]


def rising(k: int, rng: np.random.Generator) -> float:
    return float(np.clip(k / ROUNDS + rng.normal(0.0, 0.05), 0.0, 1.0))


def falling(k: int, rng: np.random.Generator) -> float:
    return float(np.clip(1.0 - k / ROUNDS + rng.normal(0.0, 0.05), 0.0, 1.0))


def constant_zero(k: int, rng: np.random.Generator) -> float:
    return 0.0


def noise(k: int, rng: np.random.Generator) -> float:
    return float(np.clip(0.5 + rng.normal(0.0, 0.15), 0.0, 1.0))


def _run(curves: list[Curve], seed: int, *, algorithm: LearningProgressConfig | None = None):
    """Every round, one completion per slot. Returns (curriculum, LP per round, probabilities per round)."""
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}),
                              algorithm=algorithm or LearningProgressConfig(), num_active_tasks=len(curves),
                              seed=seed, eviction_percentile=0.0, refresh_interval=len(curves))
    curriculum = Curriculum(config)
    rng = np.random.default_rng(seed)
    lp, probabilities = [], []
    for k in range(ROUNDS):
        for slot, curve in enumerate(curves):
            assert curriculum.update_task_performance(slot, curve(k, rng)) is True
        lp.append(curriculum.task_scores())
        probabilities.append(curriculum.sampling_probabilities())  # refreshed after each round
    return curriculum, np.array(lp), np.array(probabilities)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_learning_task_outranks_a_flat_and_a_noisy_one(seed: int) -> None:
    _, lp, probabilities = _run([rising, constant_zero, noise], seed)
    settled = lp[ROUNDS // 3:]  # once the slow average has had time to lag behind
    learning, flat, noisy = settled.mean(axis=0)
    assert flat == 0.0
    assert learning > 0.05
    assert learning > 5 * noisy
    assert (settled[:, 0] > settled[:, 2]).mean() > 0.9
    final = probabilities[-1]
    assert final[0] > 0.6 and final[0] > 3 * max(final[1], final[2])


@pytest.mark.parametrize("seed", SEEDS)
def test_forgetting_is_progress_too(seed: int) -> None:
    _, lp, probabilities = _run([falling, constant_zero, noise], seed)
    forgetting, flat, noisy = lp[ROUNDS // 3:].mean(axis=0)
    assert forgetting > 0.05 and flat == 0.0 and forgetting > 5 * noisy
    assert probabilities[-1][0] > 0.6


def test_progress_is_bidirectional_within_one_task() -> None:
    half = ROUNDS // 2

    def up_then_down(k: int, rng: np.random.Generator) -> float:
        return float(np.clip((k if k < half else ROUNDS - k) / half + rng.normal(0.0, 0.03), 0.0, 1.0))

    _, lp, _ = _run([up_then_down, constant_zero], seed=0)
    assert lp[half - 10, 0] > 0.05  # learning
    assert lp[-1, 0] > 0.05  # forgetting
    assert lp[:, 1].max() == 0.0


@pytest.mark.parametrize("seed", SEEDS)
def test_sampling_probabilities_are_a_distribution_with_an_exploration_floor(seed: int) -> None:
    algorithm = LearningProgressConfig(exploration=0.2)
    _, _, probabilities = _run([rising, noise, constant_zero, falling], seed, algorithm=algorithm)
    assert np.isfinite(probabilities).all()
    assert np.allclose(probabilities.sum(axis=1), 1.0)
    assert (probabilities >= 0.2 / 4 - 1e-12).all()


def test_tasks_below_min_samples_have_no_lp_and_are_not_starved() -> None:
    algorithm = LearningProgressConfig(min_samples_for_lp=5)
    config = CurriculumConfig(task_generator=SingleTaskGenerator({}), algorithm=algorithm, num_active_tasks=3,
                              eviction_percentile=0.0, refresh_interval=1)
    curriculum = Curriculum(config)
    assert np.allclose(curriculum.sampling_probabilities(), 1 / 3)  # nothing known yet: uniform
    for k in range(40):  # slot 0 learns; slots 1 and 2 have only 4 completions each
        curriculum.update_task_performance(0, k / 40)
    for slot in (1, 2):
        for score in (0.0, 0.3, 0.6, 0.9):
            curriculum.update_task_performance(slot, score)
    lp = curriculum.task_scores()
    assert lp[0] > 0 and lp[1] == lp[2] == 0.0  # a steep rise over 4 episodes is not trusted yet
    probabilities = curriculum.sampling_probabilities()
    assert probabilities[1] == probabilities[2] > 0.05


def test_tiny_scores_still_give_a_probability_distribution() -> None:
    """Subnormal scores give subnormal LP; normalising by it must not overflow to inf (inf * 0 = NaN)."""
    config = CurriculumConfig(task_generator=SingleTaskGenerator({}), algorithm=LearningProgressConfig(
        min_samples_for_lp=2), num_active_tasks=2, eviction_percentile=0.0, refresh_interval=1)
    curriculum = Curriculum(config)
    for score in (0.0, 5e-324, 1e-320, 0.0, 2e-321, 3e-322):
        curriculum.update_task_performance(0, score)
    for score in (0.5, 0.5):
        curriculum.update_task_performance(1, score)
    assert 0.0 < curriculum.task_scores()[0] < 1e-300
    probabilities = curriculum.sampling_probabilities()
    assert np.isfinite(probabilities).all() and probabilities.sum() == pytest.approx(1.0)
    assert probabilities[0] > probabilities[1]


def test_relearning_a_forgotten_task_keeps_its_lp_until_it_is_back_where_it_was() -> None:
    """Fast and slow EMAs cross on the way back up after a drop; the ground lost below the
    learned peak keeps the task's LP (and its sampling share) until it is regained."""
    def learn_forget_relearn(k: int, rng: np.random.Generator) -> float:
        if k < 100:
            level = 0.1 + 0.8 * k / 100
        elif k < 150:
            level = 0.9
        else:
            level = min(0.9, 0.2 + 0.004 * (k - 150))  # forgotten at 150, relearned slowly
        return float(np.clip(level + rng.normal(0.0, 0.03), 0.0, 1.0))

    _, lp, probabilities = _run([learn_forget_relearn, constant_zero], seed=0)
    relearning = slice(155, 150 + int(0.6 / 0.004) - 20)  # until the level is near 0.8
    assert (lp[relearning, 0] > 0).all()
    assert (probabilities[relearning, 0] > 0.6).all()


# ---- a whole curriculum: a corridor family with impossible lengths, after mastery ------------
CORRIDOR_LENGTHS = range(1, 9)
MASTERED_LENGTHS = range(1, 5)  # the student has mastered these; the longer ones are impossible


def _corridor_run(seed: int, episodes: int, *, forget: int | None = None) -> tuple[Curriculum, list[int], int]:
    """A pool of 16 corridors drawn from 8 lengths under one label. The student has mastered
    lengths 1-4 (score ~0.95) and can never finish 5-8 (score 0): everything learnable is
    mastered from the start, the phase in which every LP is 0. With `forget`, that length is
    forgotten halfway (score 0.2, relearned by 0.005 per episode on it). Returns the
    curriculum, the length of every episode and the evictions in the second half."""
    generator = BucketedTaskGenerator({}, {"length": list(CORRIDOR_LENGTHS)}, label="corridor", seed=seed)
    curriculum = Curriculum(CurriculumConfig(task_generator=generator, algorithm=LearningProgressConfig(),
                                             num_active_tasks=16, seed=seed))
    rng = np.random.default_rng(seed)
    relearned = 0.2
    lengths = []
    evictions = 0
    for episode in range(episodes):
        if episode == episodes // 2:
            evictions = curriculum.stats()["evictions"]
        task = curriculum.get_task()
        length = task.env_cfg["length"]
        score = 0.0 if length not in MASTERED_LENGTHS else 0.95
        if forget is not None and length == forget and episode >= episodes // 2:
            score, relearned = relearned, min(0.95, relearned + 0.005)
        if score:
            score = float(np.clip(score + rng.normal(0.0, 0.05), 0.0, 1.0))
        curriculum.update_task_performance(task.task_id, score)
        lengths.append(length)
    return curriculum, lengths, curriculum.stats()["evictions"] - evictions


@pytest.mark.parametrize("seed", range(3))
def test_after_mastery_impossible_settings_stay_out_and_mastered_ones_are_revisited(seed: int) -> None:
    """The failure seen in a real run: once every LP was 0, evicted impossible configurations
    came back as cold tasks and took a third of the samples again."""
    _, lengths, evictions = _corridor_run(seed, 12_000)
    after = lengths[6_000:]
    impossible = sum(1 for length in after if length not in MASTERED_LENGTHS) / len(after)
    assert impossible < 0.05
    assert evictions < 20  # no churn of zero-LP tasks
    for length in MASTERED_LENGTHS:  # every mastered length is practised often enough to notice forgetting
        seen = [i for i, played in enumerate(after) if played == length]
        assert max(np.diff([-1, *seen, len(after)])) <= 200, length


@pytest.mark.parametrize("seed", range(3))
def test_a_mastered_task_that_is_forgotten_after_mastery_is_caught(seed: int) -> None:
    _, lengths, _ = _corridor_run(seed, 8_000, forget=2)
    caught = lengths[4_000:4_300]
    assert caught.count(2) / len(caught) > 0.5


# ---- the algorithm's mechanisms, driven over a tracker ----------------------------------------
class TableGenerator(TaskGenerator):
    """Task id `i` is the `i % len(table)`-th (label, env config) of the table."""

    def __init__(self, table: list[tuple[str, dict[str, Any]]]) -> None:
        self.table = table

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        label, env_cfg = self.table[task_id % len(self.table)]
        return dict(env_cfg), label

    def describe(self) -> dict[str, Any]:
        return {"type": "table", "table": repr(self.table)}

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(label for label, _ in self.table))


def _algorithm(capacity: int, generator: TaskGenerator, **fields: Any) -> tuple[LearningProgressAlgorithm, TaskTracker]:
    """An algorithm over a fresh local tracker whose slot `s` holds task `s`."""
    algorithm = LearningProgressAlgorithm(LearningProgressConfig(**fields), capacity, generator)
    tracker = TaskTracker.create(capacity, algorithm.extra_layout())
    algorithm.bind(tracker)
    for slot in range(capacity):
        algorithm.reset_slot(slot)
        tracker.assign(slot, slot, evicted=False)
    return algorithm, tracker


def _complete(algorithm: LearningProgressAlgorithm, tracker: TaskTracker, slot: int, scores: list[float]) -> None:
    for score in scores:
        algorithm.record(slot, score, tracker.record(slot, score))


def _evict(algorithm: LearningProgressAlgorithm, tracker: TaskTracker, slot: int) -> int:
    """What `Curriculum` does on eviction; returns the admitted task id."""
    evicted = tracker.task_id_at(slot)
    algorithm.reset_slot(slot)
    task_id = algorithm.replacement_task_id(slot, evicted)
    tracker.assign(slot, task_id, evicted=True)
    return task_id


FLAT_ZERO = [0.0] * 30
MASTERED = [0.95, 0.9, 1.0, 0.95] * 8


def test_an_evicted_configuration_comes_back_with_its_statistics_not_cold() -> None:
    generator = TableGenerator([("corridor", {"length": 9}), ("corridor", {"length": 1})])
    algorithm, tracker = _algorithm(2, generator)  # slot 0: length 9, slot 1: length 1
    _complete(algorithm, tracker, 0, FLAT_ZERO)
    _complete(algorithm, tracker, 1, MASTERED)
    before = algorithm.learned().tolist(), algorithm.cold_weights().tolist()
    for slot in (0, 1):  # the candidates of a slot are ids slot + 2k: the same length again
        assert _evict(algorithm, tracker, slot) == slot + 2
    assert (algorithm.learned().tolist(), algorithm.cold_weights().tolist()) == before == ([False, True], [0.0, 0.0])
    assert algorithm.stats()["lp_memory_hits"] == 2


class TaggingGenerator(TableGenerator):
    """A table whose configs also carry the task id (as a tag or a seed drawn from it)."""

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        env_cfg, label = super().generate(task_id)
        return {**env_cfg, "tag": task_id}, label


def test_a_field_that_repeats_the_task_id_is_not_part_of_the_configuration() -> None:
    table = [("corridor", {"length": 9}), ("corridor", {"length": 1})]
    assert id_fields(TaggingGenerator(table), 2) == {"tag"}
    assert id_fields(TableGenerator([("corridor", {"length": 1})]), 2) == set()  # 1 is an id only by chance
    algorithm, tracker = _algorithm(2, TaggingGenerator(table))
    _complete(algorithm, tracker, 0, FLAT_ZERO)
    _complete(algorithm, tracker, 1, MASTERED)
    assert _evict(algorithm, tracker, 0) == 2  # another tag, the same corridor: remembered, not cold
    assert algorithm.stats()["lp_memory_hits"] == 1 and algorithm.cold_weights()[0] == 0.0


def test_without_a_configuration_memory_an_evicted_configuration_comes_back_cold() -> None:
    generator = TableGenerator([("corridor", {"length": 9}), ("corridor", {"length": 1})])
    algorithm, tracker = _algorithm(2, generator, config_memory=0)
    assert "lp_memory" not in algorithm.extra_layout()
    _complete(algorithm, tracker, 0, FLAT_ZERO)
    _complete(algorithm, tracker, 1, MASTERED)
    assert _evict(algorithm, tracker, 0) == 2
    assert algorithm.cold_weights()[0] == 1.0 and algorithm.stats()["lp_memory_hits"] == 0


def test_admission_passes_over_a_configuration_remembered_as_stagnant() -> None:
    # slot 0 of a pool of 2 sees ids 0, 2, 4, ...: length 9, 9, 1, 9, 9, 1, ...
    generator = TableGenerator([("corridor", {"length": 9}), ("corridor", {"length": 9}), ("corridor", {"length": 9}),
                                ("corridor", {"length": 9}), ("corridor", {"length": 1}), ("corridor", {"length": 9})])
    algorithm, tracker = _algorithm(2, generator, admission_candidates=3)
    _complete(algorithm, tracker, 0, FLAT_ZERO)
    _complete(algorithm, tracker, 1, MASTERED)  # the label stays useful: only the configuration is stagnant
    assert _evict(algorithm, tracker, 0) == 4  # ids 2 (length 9, remembered stagnant) passed over, 4 is length 1
    assert algorithm.stats()["lp_admissions_skipped"] == 1
    assert algorithm.cold_weights()[0] == 1.0  # a configuration not seen before starts cold


@pytest.mark.parametrize(("third_candidate", "admitted"), [(3, 6), (2, 3)])
def test_admission_prefers_a_configuration_the_pool_does_not_hold(third_candidate: int, admitted: int) -> None:
    # slot 0 of a pool of 3 sees ids 3, 6, 9: lengths 2 (held by slot 2), then `third_candidate`
    table = [("corridor", {"length": length}) for length in (1, 1, 2, 2, 9, 9, third_candidate, 9, 9)]
    algorithm, tracker = _algorithm(3, TableGenerator(table), admission_candidates=2)
    for slot in range(3):
        _complete(algorithm, tracker, slot, MASTERED)
    assert _evict(algorithm, tracker, 0) == admitted  # a length not in the pool, else the first useful one
    assert algorithm.stats()["lp_admissions_skipped"] == (admitted == 6)  # the held length 2 passed over


def test_admission_falls_back_to_the_first_candidate_when_all_are_stagnant() -> None:
    generator = TableGenerator([("corridor", {"length": 9})])
    algorithm, tracker = _algorithm(2, generator, admission_candidates=3)
    _complete(algorithm, tracker, 0, FLAT_ZERO)
    _complete(algorithm, tracker, 1, FLAT_ZERO)
    assert _evict(algorithm, tracker, 0) == 2
    assert not algorithm.learned()[0] and algorithm.cold_weights()[0] == 0.0  # known stagnant at once


def test_cold_exploration_shrinks_for_a_label_whose_tasks_keep_turning_out_stagnant() -> None:
    generator = TableGenerator([("wall", {"level": 0}), ("maze", {"level": 1}), ("wall", {"level": 2}),
                                ("maze", {"level": 3})])
    algorithm, tracker = _algorithm(4, generator)
    _complete(algorithm, tracker, 0, FLAT_ZERO)  # a wall never pays
    _complete(algorithm, tracker, 1, [min(1.0, k / 40) for k in range(30)])  # a maze is being learned
    _complete(algorithm, tracker, 2, [0.0])  # a new wall and a new maze, one completion each: still cold
    _complete(algorithm, tracker, 3, [0.1])
    weights = algorithm.cold_weights()
    assert weights[1] == weights[0] == 0.0  # warm tasks get no cold weight
    assert weights[3] == 1.0  # the new maze: full cold weight
    assert weights[2] < 0.1  # the new wall: almost none


def test_when_a_configuration_is_mastered_the_stagnant_labels_get_retried() -> None:
    """A task out of reach looks stagnant until what it needs is mastered."""
    generator = TableGenerator([("step_1", {"step": 1}), ("step_2", {"step": 2}), ("wall", {"step": 9})])
    algorithm, tracker = _algorithm(3, generator, exploration=0.0)
    _complete(algorithm, tracker, 1, FLAT_ZERO)  # step 2 needs step 1 first
    _complete(algorithm, tracker, 2, FLAT_ZERO)
    _complete(algorithm, tracker, 0, [min(0.95, 0.1 + k / 50) for k in range(5)])  # step 1 being learned
    assert algorithm.stats()["lp_mastery_events"] == 0
    learning = algorithm.probabilities(algorithm.scores())
    assert learning[1] == learning[2] == 0.0
    _complete(algorithm, tracker, 0, [min(0.95, 0.2 + k / 50) for k in range(5, 200)])  # ... and mastered
    assert algorithm.stats()["lp_mastery_events"] == 1
    retried = algorithm.probabilities(algorithm.scores())
    assert retried[1] == retried[2] == pytest.approx(0.05)  # `retry` shared by the two stagnant labels
    for slot in (1, 2):
        _complete(algorithm, tracker, slot, [0.0] * 10)  # one fast-EMA timescale each, still stagnant
    settled = algorithm.probabilities(algorithm.scores())
    assert settled[1] == settled[2] == 0.0


@pytest.mark.parametrize(("warmup", "later", "partly_learned"), [
    ([0.0] * 5, 0.2, True),  # nothing at first, now 0.2: the frontier
    ([0.0, 0.6, 0.1, 0.7, 0.1], 0.45, False),  # a warm-up this noisy cannot tell 0.45 from where it started
    ([0.02] * 5, 0.05, False),  # a gain smaller than half of `mastered_gain` is not learning
], ids=["quiet warm-up", "noisy warm-up", "small gain"])
def test_a_partly_learned_task_without_lp_gets_the_rest_before_mastered_ones(warmup: list[float], later: float,
                                                                               partly_learned: bool) -> None:
    """A task improving too slowly to show LP must not be left to the exploration floor while
    mastered tasks take the rest: unpractised, it stays where it is."""
    generator = TableGenerator([("chain", {"depth": 6}), ("chain", {"depth": 1}), ("wall", {"depth": 9})])
    algorithm, tracker = _algorithm(3, generator)
    _complete(algorithm, tracker, 1, MASTERED)
    _complete(algorithm, tracker, 2, FLAT_ZERO)
    _complete(algorithm, tracker, 0, warmup + [later - 0.02, later + 0.02] * 100)  # the EMAs have met: no LP
    assert algorithm.scores().tolist() == [0.0, 0.0, 0.0] and not algorithm.learned()[0]
    probabilities = algorithm.probabilities(algorithm.scores())
    floor = algorithm.config.exploration / 3
    assert probabilities[2] == pytest.approx(floor)  # the wall: the floor only
    assert algorithm.stats()["lp_frontier_tasks"] == int(partly_learned)
    if partly_learned:
        assert probabilities[0] == pytest.approx(1.0 - algorithm.config.revisit - 2 * floor)
        assert probabilities[1] == pytest.approx(algorithm.config.revisit + floor)
    else:  # the rest goes to the mastered task, as without a frontier
        assert probabilities[0] == pytest.approx(floor)


def test_a_frontier_task_that_practice_does_not_move_leaves_the_frontier_for_the_revisit_budget() -> None:
    """Two slow-EMA timescales of practice without progress: a noise task whose warm-up
    happened to come out low and quiet looks partly learned, and stays where it is. It is then
    revisited like a learned task: not the rest, and not only the floor (a slowly learned task
    stalls there too)."""
    generator = TableGenerator([("noise", {"level": 5}), ("chain", {"depth": 1})])
    algorithm, tracker = _algorithm(2, generator)
    _complete(algorithm, tracker, 1, MASTERED)
    _complete(algorithm, tracker, 0, [0.0] * 5 + [0.18, 0.22] * 100)
    assert algorithm.stats()["lp_frontier_tasks"] == 1
    _complete(algorithm, tracker, 0, [0.18, 0.22] * 50)
    assert algorithm.stats()["lp_frontier_tasks"] == 0
    probabilities = algorithm.probabilities(algorithm.scores())
    config = algorithm.config
    assert probabilities[0] == pytest.approx(config.exploration / 2 + config.revisit / 2)  # one of two revisited
    assert algorithm.stats()["lp_revisited_tasks"] == 2


def test_a_task_that_left_the_frontier_gets_practice_again_when_another_is_newly_mastered() -> None:
    """The student changed: what it could not move before (the next link of a chain) may move
    now, as for the retries of stagnant tasks."""
    generator = TableGenerator([("chain", {"depth": 6}), ("chain", {"depth": 1}), ("chain", {"depth": 5})])
    algorithm, tracker = _algorithm(3, generator)
    _complete(algorithm, tracker, 1, MASTERED)
    _complete(algorithm, tracker, 0, [0.0] * 5 + [0.18, 0.22] * 150)  # off the frontier again
    _complete(algorithm, tracker, 2, [0.0] * 5)
    stats = algorithm.stats()
    assert stats["lp_frontier_tasks"] == 0 and stats["lp_mastery_events"] == 0
    _complete(algorithm, tracker, 2, [min(0.95, 0.1 + k / 50) for k in range(200)])  # depth 5 mastered
    assert algorithm.stats()["lp_mastery_events"] == 1
    _complete(algorithm, tracker, 2, [0.95] * 400)  # and its learning progress is over
    assert algorithm.stats()["lp_frontier_tasks"] == 1
    probabilities = algorithm.probabilities(algorithm.scores())
    assert probabilities[0] > 0.5  # the rest, not the floor


def test_eviction_lets_go_of_stagnant_tasks_but_keeps_learned_ones_and_one_task_per_label() -> None:
    generator = TableGenerator([("wall", {"level": 0}), ("wall", {"level": 1}), ("maze", {"level": 2}),
                                ("maze", {"level": 3}), ("maze", {"level": 4}), ("maze", {"level": 5})])
    algorithm, tracker = _algorithm(6, generator)
    for slot in range(6):
        _complete(algorithm, tracker, slot, FLAT_ZERO if slot < 4 else MASTERED)
    candidates = algorithm.eviction_candidates(np.ones(6, dtype=bool), algorithm.scores())
    assert candidates.tolist() == [False, True, False, True, False, False]


def test_eviction_keeps_one_task_of_every_configuration_while_they_fit_in_half_the_pool() -> None:
    """A configuration learning too slowly to show progress yet must not leave the pool for good
    just because its label has other configurations."""
    generator = TableGenerator([("wall", {"level": 0}), ("wall", {"level": 0}), ("wall", {"level": 1}),
                                ("wall", {"level": 1}), ("maze", {"level": 2}), ("maze", {"level": 2}),
                                ("maze", {"level": 2}), ("maze", {"level": 2})])
    algorithm, tracker = _algorithm(8, generator)
    for slot in range(8):
        _complete(algorithm, tracker, slot, FLAT_ZERO if slot < 4 else MASTERED)
    candidates = algorithm.eviction_candidates(np.ones(8, dtype=bool), algorithm.scores())
    assert candidates.tolist() == [False, True, False, True, False, False, False, False]


def test_a_mastery_makes_configurations_remembered_as_stagnant_admissible_again() -> None:
    # slot 0 of a pool of 2 sees lengths 9, 5, 9, 5, ...; slot 1 lengths 1, 3, 1, 3, ...
    generator = TableGenerator([("corridor", {"length": 9}), ("corridor", {"length": 1}),
                                ("corridor", {"length": 5}), ("corridor", {"length": 3})])
    algorithm, tracker = _algorithm(2, generator, admission_candidates=1)
    _complete(algorithm, tracker, 0, FLAT_ZERO)
    assert _evict(algorithm, tracker, 0) == 2  # length 9 is remembered as stagnant
    _complete(algorithm, tracker, 1, [min(0.95, 0.1 + k / 50) for k in range(200)])  # length 1 mastered
    assert algorithm.stats()["lp_mastery_events"] == 1
    _complete(algorithm, tracker, 0, MASTERED)
    assert _evict(algorithm, tracker, 0) == 4  # length 9 again: a fresh start, not the old verdict
    assert algorithm.stats()["lp_memory_hits"] == 0 and algorithm.cold_weights()[0] > 0.0


def _shared_completions(name: str, config: CurriculumConfig, queue: Any) -> None:
    """In another process: attach and run the stagnant task of slot 2 (and its successors) for
    a while; report the evictions."""
    curriculum = Curriculum.attach(name, config, seed=1)
    for _ in range(200):
        curriculum.update_task_performance(curriculum.tracker.task_id_at(2), 0.0)
    queue.put(curriculum.stats()["evictions"])
    curriculum.close()


def test_the_memory_and_label_table_are_shared_with_other_processes(make_curriculum) -> None:
    generator = TableGenerator([("wall", {"level": 0}), ("maze", {"level": 1})])
    config = CurriculumConfig(task_generator=generator, algorithm=LearningProgressConfig(), num_active_tasks=4,
                              min_presentations=10, eviction_percentile=50.0, refresh_interval=1, seed=3)
    owner = make_curriculum(config, shared=True)  # slots 0 and 2 hold walls, 1 and 3 mazes
    for slot in (1, 3):
        for k in range(40):
            owner.update_task_performance(slot, min(1.0, k / 30))
    for _ in range(10):
        owner.update_task_performance(0, 0.0)  # the wall eviction keeps as its label's one task
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_shared_completions, args=(owner.shared_memory_name, config, queue))
    child.start()
    evictions = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and evictions >= 1
    stats = owner.stats()
    assert stats["evictions"] == evictions  # the child's evictions of the wall in slot 2 ...
    assert stats["lp_memory_hits"] == evictions  # ... brought the wall back known, also as the owner sees it
    owner.reseed(0)  # a refresh
    assert owner.sampling_probabilities()[2] < 0.05  # not cold: the exploration floor only


CORRUPT = [
    ("lp_label_usefulness", 0, 1.5, "label usefulness or admission failure rate outside [0, 1]"),
    ("lp_admission_failure", 0, -0.1, "label usefulness or admission failure rate outside [0, 1]"),
    ("lp_label_retries", 3, -1, "negative learning-progress counts"),
    ("lp_state", STATE_FIELDS.index("count"), -1.0, "negative learning-progress counts"),
    ("lp_label", 1, 257, "label indices outside [0, 256]"),
    ("lp_key", 1, -5, "negative configuration or label keys"),
]


@pytest.mark.parametrize(("array", "index", "value", "why"), CORRUPT, ids=[c[0] for c in CORRUPT])
def test_a_checkpoint_with_corrupt_learning_progress_tables_is_refused(array: str, index: int, value: Any,
                                                                      why: str) -> None:
    config = CurriculumConfig(task_generator=TableGenerator([("wall", {"level": 0}), ("maze", {"level": 1})]),
                              num_active_tasks=4, refresh_interval=4)
    curriculum = Curriculum(config)
    for k in range(60):
        task = curriculum.get_task()
        curriculum.update_task_performance(task.task_id, 0.0 if task.label == "wall" else min(1.0, k / 50))
    state = json.loads(json.dumps(curriculum.get_state()))
    Curriculum(config).load_state(copy.deepcopy(state))  # valid before it is spoiled
    state["arrays"][array][index] = value
    before = curriculum.get_state()
    with pytest.raises(CurriculumStateError, match=exact(f"Cannot load curriculum state: {why}")):
        curriculum.load_state(state)
    assert curriculum.get_state() == before
