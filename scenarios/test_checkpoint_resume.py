"""Checkpoint/resume determinism: stop, save, restore, continue == the uninterrupted run.

Bug class: a checkpoint that drops the sampler's random state, pending draws or per-task
statistics, so a resumed run quietly diverges from what training would have done. Training
checkpoints in the middle of rollouts, so one run checkpoints ten times with episodes running:
any state that a simple one-episode-at-a-time loop keeps equal to another (hand-outs and
completions since the last refresh, the eviction shortlist) must still be saved on its own.

And a checkpoint belongs to its config: restoring it into a curriculum whose config differs in
any one field (of the curriculum's config or its algorithm's, each changed to another valid
value), or whose task generator (or a stage's) makes other tasks (a seed changed, a list of
values or children rotated, buckets drawn in another order), must be refused, or a run
resumes under settings or tasks it was never saved with. A checkpoint holding a number of
another kind (a fraction for a count, a string for a score: a hand-edited or mis-serialised
file) must be refused without touching the curriculum, and so must a built-in checkpoint of
another shape (a key or array missing, an array a slot short) or with any number outside the
range its docs give it (learning-progress statistics of the pool and of the configuration
memory included). A pool of more labels than learning progress keeps a table for must still
checkpoint and resume.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import math
import random
from collections.abc import Callable
from typing import Any

import pytest

from curriculum import (BucketedTaskGenerator, CurriculumConfig, CurriculumConfigError, CurriculumStateError,
                        LearningProgressConfig, SingleTaskGenerator, Stage, StagedProgressionConfig,
                        UniformConfig, WeightedTaskSetGenerator)
from curriculum.algorithms.learning_progress import STATE_FIELDS
from curriculum.algorithms.staged import STAGE_COUNTERS
from curriculum.config import MAX_COUNT
from curriculum.curriculum import MAX_TASK_ID
from curriculum.tracker import COUNTERS
from harness.copies import plain_copy
from harness.episodes import LabelledTaskGenerator
from harness.protocol import missing_capabilities
from harness.task_spaces import impossible_task_space
from harness.thresholds import CHECKPOINT as LIMITS
from harness.thresholds import STAGED

from .test_staged_progression import staged_config, staged_space


def _play(curriculum, simulator, episodes: int) -> list[tuple[int, float]]:
    trace = []
    for _ in range(episodes):
        task = curriculum.get_task()
        reward = simulator.sample_task(task.env_cfg["task_index"])
        curriculum.update_task_performance(task.task_id, reward)
        trace.append((task.task_id, reward))
    return trace


class _InFlight:
    """Plays like `_play` in rollouts, as vectorized workers do: each starts a seeded number of
    episodes (up to `LIMITS.in_flight`) and finishes all of them in a seeded order, and an
    occasional finished episode is never reported (a desync cut). Completions come in another
    order than hand-outs, tasks leave the pool while their episodes run (late completions),
    hand-outs and completions since the last refresh differ, and a checkpoint falls inside a
    rollout. The episodes still running carry over from one call to the next."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.running: list[tuple[int, int]] = []

    def __call__(self, curriculum, simulator, episodes: int) -> list[tuple[Any, ...]]:
        trace: list[tuple[Any, ...]] = []
        rng, running = self.rng, self.running
        while len(trace) < episodes:
            if not running:
                for _ in range(rng.randint(1, LIMITS.in_flight)):
                    task = curriculum.get_task()
                    running.append((task.task_id, task.env_cfg["task_index"]))
            task_id, task_index = running.pop(rng.randrange(len(running)))
            reward = simulator.sample_task(task_index)
            if rng.random() < LIMITS.unreported_share:
                trace.append((task_id, "cut"))
                continue
            curriculum.update_task_performance(task_id, reward)
            trace.append((task_id, reward))
        return trace


def _checkpointable(curriculum_factory, require_capability, config, what: str) -> Any:
    """The curriculum `config` builds, if it can save and load its state (else skip with the reason)."""
    try:
        curriculum = curriculum_factory(config)
    except (CurriculumConfigError, NotImplementedError) as error:
        require_capability(False, f"{what}: the factory refused the config: {type(error).__name__}: {error}")
    lacking = missing_capabilities(curriculum, ("get_state", "load_state"))
    require_capability(not lacking, f"checkpoint/resume needs {lacking}")
    return curriculum


def _uninterrupted(curriculum_factory, require_capability, oracle, config, space, what: str,
                   play: Any) -> tuple[Any, list[tuple[Any, ...]]]:
    """The checkpointable curriculum `config` builds (`_checkpointable`) and its trace over the
    whole run, `play`ed uninterrupted under the accounting oracle."""
    curriculum = _checkpointable(curriculum_factory, require_capability, config, what)
    watcher = oracle(context=f"{what}, uninterrupted run")
    trace = play(watcher.watch(curriculum), space.simulator, LIMITS.episodes_before + LIMITS.episodes_after)
    watcher.verify()
    return curriculum, trace


def _reported(curriculum) -> dict[str, Any]:
    """What a curriculum tells its user about itself: `stats()` and, where it has one, its
    sampling distribution (as plain JSON values, so any two can be compared)."""
    reported = dict(curriculum.stats())
    if callable(getattr(curriculum, "sampling_probabilities", None)):
        reported["sampling_probabilities()"] = curriculum.sampling_probabilities()
    return json.loads(json.dumps(reported, default=lambda value: getattr(value, "tolist", lambda: repr(value))()))


def _resume_check(curriculum_factory, require_capability, scenario_seed, oracle, make_space, config,
                  what: str, play: Any = None, checkpoints: int = 1) -> tuple[Any, Any, list[tuple[int, float]]]:
    """Run `make_space()` uninterrupted and again through checkpoints (JSON, each restored into a
    fresh curriculum); the first divergence is named. One checkpoint falls after
    `LIMITS.episodes_before` episodes, more split the run evenly. Returns the two final curricula
    and the trace after the last checkpoint. `play()` gives a fresh player of the episodes
    (default: one episode at a time)."""
    play = play or (lambda: _play)
    space_a = make_space()
    original, uninterrupted = _uninterrupted(curriculum_factory, require_capability, oracle, config(space_a), space_a,
                                             what, play())
    total = len(uninterrupted)

    space_b = make_space()
    resumed = curriculum_factory(config(space_b))
    player = play()
    at = [LIMITS.episodes_before] if checkpoints == 1 else [total * (i + 1) // (checkpoints + 1)
                                                            for i in range(checkpoints)]
    trace = player(resumed, space_b.simulator, at[0])
    for start, end in zip(at, [*at[1:], total]):
        saved = json.loads(json.dumps(resumed.get_state()))  # a checkpoint goes through a file
        reported = _reported(resumed)
        resumed = curriculum_factory(config(space_b))
        resumed.load_state(saved)
        restored = _reported(resumed)
        differ = {key: (value, restored.get(key)) for key, value in reported.items() if restored.get(key) != value}
        assert not differ, (
            f"{what}: right after load_state, the restored curriculum reports other numbers than the one checkpointed "
            f"after {start} episodes (checkpointed, restored): {differ}, seed {scenario_seed}")
        after = player(resumed, space_b.simulator, end - start)
        trace += after

    diverged = next((i for i, (a, b) in enumerate(zip(uninterrupted, trace)) if a != b), None)
    assert diverged is None, (
        f"{what}: resumed run diverged from the uninterrupted one at episode {diverged} "
        f"(checkpoints after {', '.join(map(str, at))}): task {trace[diverged][0]} instead of "
        f"{uninterrupted[diverged][0]}, seed {scenario_seed}"
    )
    return original, resumed, after


def _loaded(curriculum_factory, config, state: dict[str, Any], refused: str, seed: int) -> Any:
    """A fresh curriculum of `config` that loaded `state`; the test fails (`refused`, the error)
    if it was refused."""
    resumed = curriculum_factory(config)
    try:
        resumed.load_state(state)
    except Exception as error:  # noqa: BLE001 - reported below
        pytest.fail(f"{refused}: {type(error).__name__}: {error}, seed {seed}")
    return resumed


def _restored(curriculum_factory, config, original, what: str, seed: int) -> Any:
    """A fresh curriculum of `config` that loaded a checkpoint of `original` (through JSON):
    the checkpoint must load, and the restored curriculum report what `original` does."""
    saved, reported = json.loads(json.dumps(original.get_state())), _reported(original)
    resumed = _loaded(curriculum_factory, config, saved,
                      f"{what}: the checkpoint was refused by the curriculum that saved it", seed)
    restored = _reported(resumed)
    differ = {key: (value, restored.get(key)) for key, value in reported.items() if restored.get(key) != value}
    assert not differ, f"{what}: restored, the curriculum reports other numbers: {differ}, seed {seed}"
    return resumed


def test_resumed_run_matches_uninterrupted_run(curriculum_factory, require_capability, scenario_seed, golden,
                                               oracle) -> None:
    def config(space):
        return CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                                num_active_tasks=32, seed=scenario_seed)

    original, resumed, after = _resume_check(
        curriculum_factory, require_capability, scenario_seed, oracle,
        lambda: impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed), config,
        "learning progress")
    final_original, final_resumed = original.stats(), resumed.stats()
    lp_resumed, lp_original = final_resumed.get("per_label_lp_scores"), final_original.get("per_label_lp_scores")
    assert lp_resumed == lp_original, (
        f"per-label LP after resuming {lp_resumed} differs from the uninterrupted run {lp_original}, "
        f"seed {scenario_seed}"
    )
    golden({"episodes": LIMITS.episodes_before + LIMITS.episodes_after, "final_per_label_lp_scores": lp_resumed,
            "last_task_ids": [task_id for task_id, _ in after[-10:]]})


def test_resumed_run_with_episodes_in_flight_matches_uninterrupted_run(curriculum_factory, require_capability,
                                                                       scenario_seed, oracle) -> None:
    """Training checkpoints while workers' episodes run: the checkpoint must carry what was
    handed out but not yet completed, so the resumed run draws, evicts and refreshes as the
    uninterrupted one, and reports the same numbers."""
    def config(space):
        return CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                                num_active_tasks=16, seed=scenario_seed, min_presentations=5)

    original, resumed, _ = _resume_check(
        curriculum_factory, require_capability, scenario_seed, oracle,
        lambda: impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed), config,
        "learning progress, episodes in flight", play=lambda: _InFlight(scenario_seed),
        checkpoints=LIMITS.in_flight_checkpoints)
    final_original, final_resumed = original.stats(), resumed.stats()
    differ = {key: (value, final_resumed.get(key)) for key, value in final_original.items()
              if final_resumed.get(key) != value}
    assert not differ, (f"learning progress, episodes in flight: numbers after resuming differ from the "
                        f"uninterrupted run (uninterrupted, resumed): {differ}, seed {scenario_seed}")


def test_a_pool_of_more_labels_than_are_tracked_resumes_as_the_uninterrupted_run(curriculum_factory, require_capability,
                                                                                  scenario_seed) -> None:
    """Every task its own label, more of them than learning progress keeps a table for
    (`LABEL_TABLE_SIZE`): the table fills to its last entry and some labels go untracked, and a
    checkpoint must still restore (every table index saved is one it can load) and resume."""
    labels = LIMITS.many_labels
    generator = BucketedTaskGenerator({}, {"variant": list(range(labels))},
                                      value_labels={"variant": {i: f"variant_{i}" for i in range(labels)}},
                                      seed=scenario_seed)
    config = CurriculumConfig(task_generator=generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=LIMITS.many_labels_pool, seed=scenario_seed)

    def play(curriculum, episodes: int) -> list[tuple[int, float]]:
        trace = []
        for _ in range(episodes):
            task = curriculum.get_task()
            score = random.Random(task.task_id * 7919 + len(trace)).random()  # the same in both runs
            curriculum.update_task_performance(task.task_id, score)
            trace.append((task.task_id, score))
        return trace

    original = _checkpointable(curriculum_factory, require_capability, config, "many labels")
    play(original, LIMITS.episodes_before)
    seen = len({task.label for task in original.active_tasks()}) if hasattr(original, "active_tasks") else labels
    assert seen > LIMITS.many_labels_pool // 2, (
        f"many labels: the pool holds {seen} distinct labels, expected over {LIMITS.many_labels_pool // 2}")
    resumed = _restored(curriculum_factory, config, original, f"many labels, a pool holding {seen} labels",
                        scenario_seed)
    after = play(original, LIMITS.episodes_after), play(resumed, LIMITS.episodes_after)
    diverged = next((i for i, (a, b) in enumerate(zip(*after)) if a != b), None)
    assert diverged is None, (
        f"many labels: the resumed run diverged from the uninterrupted one {diverged} episodes after the checkpoint: "
        f"{after[1][diverged]} instead of {after[0][diverged]}, seed {scenario_seed}")


def test_a_run_of_the_most_variable_scores_resumes_from_every_checkpoint(curriculum_factory, require_capability,
                                                                         scenario_seed) -> None:
    """Every task pays the top of the score range through its warm-up (a baseline as high as
    it goes), then a fair coin flip between the range's ends: the most variable scores there
    are, whose statistics reach the far ends of what a checkpoint may hold. Checkpointed every
    `LIMITS.extreme_every` episodes, each checkpoint must load into a fresh curriculum, report
    the same numbers and continue as the uninterrupted run."""
    generator = BucketedTaskGenerator({}, {"level": list(range(8))}, label="coin", seed=scenario_seed)
    config = CurriculumConfig(task_generator=generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=LIMITS.extreme_pool, seed=scenario_seed)
    warmup = LearningProgressConfig().min_samples_for_lp

    def play(curriculum, played: dict[int, int], episodes: int) -> list[tuple[int, float]]:
        trace = []
        for _ in range(episodes):
            task = curriculum.get_task()
            n = played[task.task_id] = played.get(task.task_id, 0) + 1
            score = 1.0 if n <= warmup else float(random.Random(task.task_id * 7919 + n).random() < 0.5)
            curriculum.update_task_performance(task.task_id, score)
            trace.append((task.task_id, score))
        return trace

    uninterrupted = play(_checkpointable(curriculum_factory, require_capability, config, "coin flips"), {},
                         LIMITS.extreme_episodes)
    resumed, played, trace = curriculum_factory(config), {}, []
    for episode in range(0, LIMITS.extreme_episodes, LIMITS.extreme_every):
        if episode:
            resumed = _restored(curriculum_factory, config, resumed,
                                f"coin flips after a perfect warm-up, checkpoint after {episode} episodes", scenario_seed)
        trace += play(resumed, played, LIMITS.extreme_every)
    diverged = next((i for i, (a, b) in enumerate(zip(uninterrupted, trace)) if a != b), None)
    assert diverged is None, (
        f"coin flips: the run checkpointed every {LIMITS.extreme_every} episodes diverged from the uninterrupted one "
        f"at episode {diverged}: {trace[diverged]} instead of {uninterrupted[diverged]}, seed {scenario_seed}")


def _own_checkpoints_refused(curriculum_factory, curriculum, config, play: Callable[[Any], None],
                             rounds: int) -> list[tuple[int, str]]:
    """`play(curriculum)` `rounds` times, each followed by a checkpoint (through JSON) loaded into
    a fresh curriculum of the same config: the rounds whose checkpoint was refused, and why."""
    refused = []
    for played in range(rounds):
        play(curriculum)
        fresh = curriculum_factory(config)
        try:
            fresh.load_state(json.loads(json.dumps(curriculum.get_state())))
        except (CurriculumStateError, CurriculumConfigError) as error:
            refused.append((played, str(error)[:160]))
        finally:
            getattr(fresh, "close", lambda: None)()
    return refused


@pytest.mark.parametrize("stages", ["held", "moving"])
def test_a_staged_window_whose_scores_cancel_resumes_from_every_checkpoint(curriculum_factory, require_capability,
                                                                         scenario_seed, stages) -> None:
    """A staged window of 3 takes scores such as 0.3, 0.6 and zeros, so its running sum lands a
    rounding error away from the exact one (-1.1e-16 once 0.3 and 0.6 left it): a checkpoint
    taken after any episode, through JSON, must load into a fresh curriculum of the same config
    (a curriculum restores every checkpoint it writes). "held": the stage never moves (its
    running sum is never re-summed at a threshold); "moving": runs of 1.0 advance it now and
    then, and a regression threshold of 0, the bottom of its domain, is never crossed (no
    window of scores of at least 0 has a mean below it)."""
    moving = stages == "moving"
    algorithm = StagedProgressionConfig(
        stages=[Stage(f"s{i}", SingleTaskGenerator({"level": i}, label=f"s{i}")) for i in range(2)],
        advancement_threshold=0.9, window=3, min_episodes=3 if moving else MAX_COUNT,
        regression_threshold=0.0 if moving else None)
    config = CurriculumConfig(algorithm=algorithm, num_active_tasks=2, seed=scenario_seed)
    curriculum = _checkpointable(curriculum_factory, require_capability, config, "cancelling scores")
    rng = random.Random(scenario_seed)

    def play(curriculum) -> None:
        curriculum.update_task_performance(curriculum.get_task().task_id,
                                           rng.choice((0.0, 0.0, 0.1, 0.3, 0.6, 0.7, *((1.0, 1.0) if moving else ()))))

    try:
        refused = _own_checkpoints_refused(curriculum_factory, curriculum, config, play, LIMITS.cancelling_episodes)
        stats = curriculum.stats()
    finally:
        getattr(curriculum, "close", lambda: None)()
    assert not refused and not stats.get("regressions") and (stats.get("advancements", 1) or not moving), (
        f"a staged curriculum refused {len(refused)} of its own {LIMITS.cancelling_episodes} checkpoints (episode, "
        f"error): {refused[:3]}; it regressed {stats.get('regressions')} times below a threshold of 0 (advanced "
        f"{stats.get('advancements')} times), seed {scenario_seed}")


@pytest.mark.parametrize("score_range, scored", [((1e6, 1e6 + 0.1), "top"), ((-1e6 - 0.1, -1e6), "bottom")],
                         ids=["far_above_zero", "far_below_zero"])
def test_a_narrow_score_range_far_from_zero_resumes_from_every_checkpoint(
        curriculum_factory, require_capability, scenario_seed, score_range, scored: str) -> None:
    """A score range narrow beside its distance from zero (rewards in the millions, a spread of
    0.1), every episode scored at one of its ends: a task's score sum carries float rounding
    of the size of the scores, so its mean lands a few ulps past that end. Every checkpoint
    (through JSON, after each episode) must load into a fresh curriculum of the same config."""
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 0}, label="far"), algorithm=UniformConfig(),
                              num_active_tasks=1, score_range=score_range, seed=scenario_seed)
    curriculum = _checkpointable(curriculum_factory, require_capability, config, f"score range {score_range}")
    score = score_range[1] if scored == "top" else score_range[0]
    try:
        refused = _own_checkpoints_refused(
            curriculum_factory, curriculum, config,
            lambda c: c.update_task_performance(c.get_task().task_id, score), LIMITS.far_range_episodes)
    finally:
        getattr(curriculum, "close", lambda: None)()
    assert not refused, (
        f"score range {score_range}, every episode scored {score!r}: the curriculum refused {len(refused)} of its own "
        f"{LIMITS.far_range_episodes} checkpoints (episode, error): {refused[:3]}, seed {scenario_seed}")


def test_learning_progress_without_exploration_resumes_from_every_checkpoint(curriculum_factory, require_capability,
                                                                           scenario_seed) -> None:
    """With `exploration=0` (in its documented domain) stagnant tasks may get no sampling mass
    at all, probabilities of exactly 0: every checkpoint such a curriculum writes must load
    into a fresh curriculum of the same config."""
    space = impossible_task_space(num_learnable=3, num_impossible=5, seed=scenario_seed)
    config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(exploration=0.0),
                              num_active_tasks=8, seed=scenario_seed)
    curriculum = _checkpointable(curriculum_factory, require_capability, config, "no exploration")
    try:
        refused = _own_checkpoints_refused(curriculum_factory, curriculum, config,
                                           lambda c: _play(c, space.simulator, LIMITS.extreme_every),
                                           LIMITS.extreme_episodes // LIMITS.extreme_every)
    finally:
        getattr(curriculum, "close", lambda: None)()
    assert not refused, (
        f"learning progress with exploration=0 refused {len(refused)} of its own checkpoints (round, error): "
        f"{refused[:3]}, seed {scenario_seed}")


_STAGE_KEYS = ("stage", "stage_changes", "stage_episodes", "advancements", "regressions", "stage_window_mean")


def test_resumed_staged_run_matches_uninterrupted_run(curriculum_factory, require_capability,
                                                      scenario_seed, oracle) -> None:
    """Staged progression on a forgetting chain (advances and falls back): a checkpoint taken
    mid-stage must carry the stage, its episode count and its score window."""
    original, resumed, _ = _resume_check(
        curriculum_factory, require_capability, scenario_seed, oracle, lambda: staged_space(scenario_seed),
        lambda space: staged_config(scenario_seed, STAGED.previous_stage_mix), "staged progression")
    final_original, final_resumed = original.stats(), resumed.stats()
    differ = {key: (final_original.get(key), final_resumed.get(key)) for key in _STAGE_KEYS
              if final_original.get(key) != final_resumed.get(key)}
    assert not differ, (f"staged progression: stage numbers after resuming differ from the uninterrupted run "
                        f"(uninterrupted, resumed): {differ}, seed {scenario_seed}")


@pytest.mark.parametrize("setup", ["learning_progress", "staged"])
def test_a_curriculum_rolled_back_to_a_checkpoint_continues_as_the_uninterrupted_run(
        curriculum_factory, require_capability, uses_builtin_curriculum, scenario_seed, oracle, setup) -> None:
    """Training rolls back in place: the same curriculum object, after running on, loads an
    earlier checkpoint (one taken before its first task, one mid-run, both kept in memory as
    `get_state()` returned them) and must continue exactly as the uninterrupted run did from
    there: the checkpoints must not change as the curriculum runs on, before or after it was
    restored from them, and nothing the object learned or cached after them (labels seen,
    statistics, random state, task objects) may outlive the restore: the built-in curriculum's
    whole state at the end is the uninterrupted run's."""
    if setup == "staged":
        def make_space():
            return staged_space(scenario_seed)

        def config(space):
            return staged_config(scenario_seed, STAGED.previous_stage_mix)
    else:
        def make_space():
            return impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed)

        def config(space):
            return CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                                    num_active_tasks=16, seed=scenario_seed, min_presentations=5)
    space = make_space()
    original, uninterrupted = _uninterrupted(curriculum_factory, require_capability, oracle, config(space), space,
                                             setup, _play)
    total = len(uninterrupted)

    space = make_space()
    curriculum = curriculum_factory(config(space))
    checkpoints = {0: (curriculum.get_state(), copy.deepcopy(space.simulator))}
    _play(curriculum, space.simulator, LIMITS.episodes_before)
    checkpoints[LIMITS.episodes_before] = (curriculum.get_state(), copy.deepcopy(space.simulator))
    as_saved = {at: json.dumps(state, sort_keys=True) for at, (state, _) in checkpoints.items()}
    _play(curriculum, space.simulator, LIMITS.episodes_after)
    for at, (saved, simulator) in sorted(checkpoints.items(), reverse=True):
        assert json.dumps(saved, sort_keys=True) == as_saved[at], (
            f"{setup}: the checkpoint kept in memory after {at} episodes changed while the curriculum ran on "
            f"(get_state() returned live state, not a copy), seed {scenario_seed}")
        curriculum.load_state(saved)  # in memory, as a training loop rolling back keeps it
        trace = _play(curriculum, copy.deepcopy(simulator), total - at)
        diverged = next((i for i, (a, b) in enumerate(zip(uninterrupted[at:], trace)) if a != b), None)
        assert diverged is None, (
            f"{setup}: rolled back in place to the checkpoint after {at} episodes (having run {total}), the "
            f"curriculum diverged from the uninterrupted run at episode {at + diverged}: task "
            f"{trace[diverged][0]} instead of {uninterrupted[at + diverged][0]}, seed {scenario_seed}"
        )
    for at, (saved, _) in checkpoints.items():  # (a checkpoint is restored from again, after a failed attempt)
        assert json.dumps(saved, sort_keys=True) == as_saved[at], (
            f"{setup}: the checkpoint after {at} episodes changed while the curriculum restored from it ran on "
            f"(load_state() adopted the caller's state, not a copy of it), seed {scenario_seed}")
    differ = {key: (value, curriculum.stats().get(key)) for key, value in original.stats().items()
              if curriculum.stats().get(key) != value}
    assert not differ, (f"{setup}: numbers after the last roll-back and replay differ from the uninterrupted run "
                        f"(uninterrupted, rolled back): {differ}, seed {scenario_seed}")
    if uses_builtin_curriculum:  # its whole state, which the next checkpoint carries, is the uninterrupted run's
        ours, theirs = curriculum.get_state(), original.get_state()
        keys = sorted(key for key in set(ours) | set(theirs) if ours.get(key) != theirs.get(key))
        arrays = sorted(name for name in ours["arrays"] if ours["arrays"][name] != theirs["arrays"].get(name))
        assert not keys, (f"{setup}: after the last roll-back and replay, get_state() differs from the uninterrupted "
                          f"run's in {keys} (arrays {arrays}), seed {scenario_seed}")


def _other_values(value: Any) -> list[Any]:
    """Valid-looking alternatives to a config field's value, by type (none for generators,
    stages and other objects)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value * 2, value - 1]
    if isinstance(value, float):
        return [value * 0.5, value * 0.9, value + 0.01, 0.5] if value else [0.5, 0.01]
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return [(value[0], value[1] + 1.0), (value[0] - 1.0, value[1])]
    return []


def _another_of_kind(value: Any) -> Any:
    """Another value of `value`'s kind (None for a kind without one here): a field's first
    alternative (`_other_values`), a string renamed, a list of two or more items rotated."""
    if isinstance(value, str):
        return f"{value}_renamed"
    if isinstance(value, list) and len(value) >= 2 and value[1:] + value[:1] != value:
        return value[1:] + value[:1]
    return next(iter(_other_values(value)), None)


def _generator_variants(generator: Any, path: str = "task_generator") -> dict[str, Any]:
    """Copies of `generator` with one change each, found by walking its public attributes (and
    those of the generators it holds): an int `seed` plus one, a list of two or more items
    rotated or without its last item, lists of one length side by side rotated together, a dict
    of two or more keys in reverse order, each entry of a dict given another value of its kind
    (`_another_of_kind`: a config's setting), a string (a label) renamed, bucket values given labels
    of their own where none were. Named by the attribute path changed."""
    variants: dict[str, Any] = {}
    for name, value in vars(generator).items():
        if name.startswith("_"):
            continue  # derived state (cumulative weights, caches): not a setting
        where = f"{path}.{name}"
        if name == "seed" and isinstance(value, int) and not isinstance(value, bool):
            changed: Any = value + 1
        elif isinstance(value, list) and len(value) >= 2:
            changed = value[1:] + value[:1]
        elif isinstance(value, dict) and len(value) >= 2:
            changed = dict(reversed(list(value.items())))
        elif isinstance(value, str):
            changed = f"{value}_renamed"
        elif name == "value_labels" and not value:  # an optional setting the saving config left unset
            buckets = {key: values for key, values in getattr(generator, "buckets", {}).items()
                       if isinstance(values, list) and len(values) >= 2}
            key = next(iter(buckets), None)
            changed = {key: {v: f"{key}_{i}" for i, v in enumerate(buckets[key])}} if key is not None else None
        else:
            changed = None
        if changed is not None:
            variant = copy.deepcopy(generator)
            setattr(variant, name, changed)
            variants[where] = variant
        if isinstance(value, list) and len(value) >= 2:  # and one item fewer (a list compared item by item)
            variant = copy.deepcopy(generator)
            setattr(variant, name, value[:-1])
            variants[f"{where}[:-1]"] = variant
        if isinstance(value, dict):  # each entry given another value of its kind (one setting of a config)
            for key, item in value.items():
                other = _another_of_kind(item)
                if other is not None:
                    variant = copy.deepcopy(generator)
                    setattr(variant, name, {**value, key: other})
                    variants[f"{where}[{key!r}]"] = variant
        held = [value] if hasattr(value, "generate") else [v for v in (value if isinstance(value, (list, tuple))
                                                                       else ()) for v in (v if isinstance(v, tuple)
                                                                                          else (v,))]
        for index, child in enumerate(c for c in held if hasattr(c, "generate")):
            for child_path, child_variant in _generator_variants(child, f"{where}[{index}]").items():
                variant = copy.deepcopy(generator)
                _replace_child(variant, name, index, child_variant)
                variants[child_path] = variant
    lists = {name: value for name, value in vars(generator).items()
             if not name.startswith("_") and isinstance(value, list) and len(value) >= 2}
    # lists side by side (children and their weights) rotated together: the same pairs in another order
    for length in sorted({len(value) for value in lists.values()}):
        side_by_side = sorted(name for name, value in lists.items() if len(value) == length)
        if len(side_by_side) >= 2:
            variant = copy.deepcopy(generator)
            for name in side_by_side:
                setattr(variant, name, lists[name][1:] + lists[name][:1])
            variants[f"{path}.{'+'.join(side_by_side)} rotated together"] = variant
    return variants


def _replace_child(generator: Any, name: str, index: int, child: Any) -> None:
    """Put `child` where the `index`-th generator held in attribute `name` was."""
    value = getattr(generator, name)
    if hasattr(value, "generate"):
        setattr(generator, name, child)
        return
    position = 0
    for i, item in enumerate(value):
        parts = list(item) if isinstance(item, tuple) else [item]
        for j, part in enumerate(parts):
            if hasattr(part, "generate"):
                if position == index:
                    parts[j] = child
                    value[i] = tuple(parts) if isinstance(item, tuple) else child
                    return
                position += 1


def _changed_configs(config: CurriculumConfig) -> tuple[dict[str, CurriculumConfig], list[str]]:
    """`config` with one field changed to another valid value, for every field that has one (by
    field name, `algorithm.` for the algorithm's); and the fields that could not be changed."""
    changed, unchanged = {}, []
    for owner, prefix in ((config, ""), (config.algorithm, "algorithm.")):
        for field in dataclasses.fields(owner):
            for value in _other_values(getattr(owner, field.name)):
                try:
                    replaced = dataclasses.replace(owner, **{field.name: value})
                    if prefix:
                        replaced = dataclasses.replace(config, algorithm=replaced)
                except CurriculumConfigError:
                    continue
                changed[prefix + field.name] = replaced
                break
            else:
                unchanged.append(prefix + field.name)
    if config.task_generator is not None:
        tasks = [config.task_generator.generate(i) for i in range(LIMITS.generator_probe_ids)]
        for name, generator in _generator_variants(config.task_generator).items():
            if [generator.generate(i) for i in range(LIMITS.generator_probe_ids)] != tasks:  # other tasks
                changed[name] = dataclasses.replace(config, task_generator=generator)
    stages = list(getattr(config.algorithm, "stages", ()))
    if len(stages) >= 2:  # one stage fewer, one more, the same in another order (a list compared item by item)
        extra = dataclasses.replace(stages[-1], name=f"{stages[-1].name}_again")
        for name, other in (("algorithm.stages[:-1]", stages[:-1]), ("algorithm.stages+1", [*stages, extra]),
                            ("algorithm.stages reversed", stages[::-1])):
            changed[name] = dataclasses.replace(config, algorithm=dataclasses.replace(config.algorithm, stages=other))
    if stages:  # a stage renamed (its tasks the same: the run would report names it never defined)
        renamed = [dataclasses.replace(stages[0], name=f"{stages[0].name}_renamed"), *stages[1:]]
        changed["algorithm.stages renamed"] = dataclasses.replace(
            config, algorithm=dataclasses.replace(config.algorithm, stages=renamed))
    for index, stage in enumerate(getattr(config.algorithm, "stages", ())):  # each stage's generator too
        tasks = [stage.task_generator.generate(i) for i in range(LIMITS.generator_probe_ids)]
        path = f"algorithm.stages[{index}].task_generator"
        for name, generator in _generator_variants(stage.task_generator, path).items():
            if [generator.generate(i) for i in range(LIMITS.generator_probe_ids)] != tasks:
                stages = list(config.algorithm.stages)
                stages[index] = dataclasses.replace(stage, task_generator=generator)
                changed[name] = dataclasses.replace(config, algorithm=dataclasses.replace(config.algorithm,
                                                                                          stages=stages))
    return changed, unchanged


def _two_kinds(seed: int) -> LabelledTaskGenerator:
    """Tasks drawing two settings each, and one single task beside them."""
    return LabelledTaskGenerator(WeightedTaskSetGenerator([
        (BucketedTaskGenerator({}, {"task_index": list(range(10)), "variant": ["a", "b", "c"]}, label="two_settings",
                               seed=seed), 0.9),
        (SingleTaskGenerator({"task_index": 0, "variant": "z"}, label="single"), 0.1)], seed=seed))


def _whole_floats_as_integers(value: Any) -> Any:
    """`value` (JSON values) as a JSON writer that writes 1.0 as 1 (JavaScript's) leaves it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_whole_floats_as_integers(item) for item in value]
    if isinstance(value, dict):
        return {key: _whole_floats_as_integers(item) for key, item in value.items()}
    return value


@pytest.mark.parametrize("setup", ["learning_progress", "staged"])
def test_a_checkpoint_written_with_whole_floats_as_integers_resumes_as_the_uninterrupted_run(
        curriculum_factory, require_capability, scenario_seed, setup) -> None:
    """A checkpoint is JSON, and JSON has one kind of number: a writer that writes a whole
    float as an integer (JavaScript's, many others') turns the 1.0 scores of a run into 1. The
    checkpoint so written must load into a fresh curriculum, give back the same state, and go
    on handing out the tasks the uninterrupted run does."""
    if setup == "staged":
        space, config = staged_space(scenario_seed), staged_config(scenario_seed, STAGED.previous_stage_mix)
    else:
        space = impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed)
        config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                                  num_active_tasks=LIMITS.pool, seed=scenario_seed)
    original = _checkpointable(curriculum_factory, require_capability, config, setup)
    resumed = None
    try:
        _play(original, space.simulator, LIMITS.episodes_before)
        saved = json.loads(json.dumps(original.get_state()))
        written = _whole_floats_as_integers(saved)
        require_capability(json.dumps(written) != json.dumps(saved),
                           f"{setup}: the checkpoint holds no whole float to write as an integer")
        resumed = _loaded(curriculum_factory, config, written,
                          f"{setup}: the checkpoint with its whole floats written as integers was refused",
                          scenario_seed)
        again = json.loads(json.dumps(resumed.get_state()))
        differ = sorted(key for key in saved if again.get(key) != saved[key])
        assert not differ, (f"{setup}: restored from the checkpoint with its whole floats written as integers, "
                            f"get_state() differs from the checkpoint in {differ}, seed {scenario_seed}")
        simulator = copy.deepcopy(space.simulator)
        ahead = _play(original, space.simulator, LIMITS.episodes_after)
        behind = _play(resumed, simulator, LIMITS.episodes_after)
        diverged = next((i for i, (a, b) in enumerate(zip(ahead, behind)) if a != b), None)
        assert diverged is None, (
            f"{setup}: resumed from the checkpoint with its whole floats written as integers, the run diverged at "
            f"episode {diverged}: {behind[diverged]} instead of {ahead[diverged]}, seed {scenario_seed}")
    finally:
        for curriculum in (original, resumed):
            getattr(curriculum, "close", lambda: None)()


@pytest.mark.parametrize("setup", ["learning_progress", "staged", "uniform"])
def test_a_checkpoint_refuses_a_config_that_differs_in_any_field(curriculum_factory, require_capability,
                                                                 scenario_seed, setup) -> None:
    """A checkpoint taken after some episodes is restored into curricula whose configs each
    differ from the saving one in one field: every restore must raise."""
    if setup == "staged":
        space, config = staged_space(scenario_seed), staged_config(scenario_seed, STAGED.previous_stage_mix)
    elif setup == "uniform":
        space = impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed)
        config = CurriculumConfig(task_generator=_two_kinds(scenario_seed), algorithm=UniformConfig(),
                                  num_active_tasks=LIMITS.pool, seed=scenario_seed)
    else:
        space = impossible_task_space(num_learnable=5, num_impossible=45, seed=scenario_seed)
        config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                                  num_active_tasks=LIMITS.pool, seed=scenario_seed)
    original = _checkpointable(curriculum_factory, require_capability, config, setup)
    _play(original, space.simulator, LIMITS.episodes_before)
    saved = json.loads(json.dumps(original.get_state()))
    changed, unchanged = _changed_configs(config)
    assert len(changed) >= LIMITS.min_changed_fields, (
        f"{setup}: only {sorted(changed)} could be changed to another valid value (fields left: {unchanged})")
    accepted = []
    for name, other in changed.items():
        try:
            resumed = curriculum_factory(other)
        except (CurriculumConfigError, NotImplementedError):
            continue  # a config this curriculum does not take cannot resume anything
        try:
            resumed.load_state(saved)
        except Exception:  # refused, as it must be (the error's name and message are the curriculum's own)
            continue
        accepted.append(f"{name}={_field(other, name)!r} (saved with {_field(config, name)!r})")
    assert not accepted, (
        f"{setup}: a checkpoint was restored into curricula whose config differs from the saving one in "
        f"{', '.join(accepted)}: a resumed run would use settings it was never saved with, seed {scenario_seed}")


def _altered_kinds(state: Any, rng: random.Random, path: str = "") -> list[tuple[str, Any]]:
    """`(where, state)` for every number of `state` (one element per list) turned into a number
    or value of another kind: an int into a fraction (a count, an id or an index cut to a whole
    number when loaded), a float into a string, NaN or an infinity (Python's json writes and
    reads all three; a NaN passes every comparison with a bound)."""
    def swapped(value: Any) -> list[Any]:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return []
        return [value + 0.5] if isinstance(value, int) else [str(value), math.nan, math.inf, -math.inf]

    altered = []
    if isinstance(state, dict):
        items = list(state.items())
    elif isinstance(state, list) and state:
        index = rng.randrange(len(state))
        items = [(index, state[index])]
    else:
        return altered
    for key, value in items:
        where = f"{path}[{key!r}]"
        for other in swapped(value):
            changed = copy.copy(state)
            changed[key] = other
            altered.append((f"{where}={other!r} (saved {value!r})", changed))
        for inner_where, inner in _altered_kinds(value, rng, where):
            changed = copy.copy(state)
            changed[key] = inner
            altered.append((inner_where, changed))
    return altered


def _loaded_anyway(curriculum: Any, altered: list[tuple[str, Any]], saved: str,
                   named: type[Exception] = Exception) -> list[str]:
    """Where each altered checkpoint that `curriculum.load_state` accepted was altered, or refused
    with another error than `named` (the saved state, JSON, is loaded back after each)."""
    accepted = []
    for where, state in altered:
        try:
            curriculum.load_state(state)
        except named:  # refused, as it must be
            continue
        except Exception as error:  # refused, but by whatever failed first instead of the state check
            accepted.append(f"{where} (refused with {type(error).__name__}: {error}, not {named.__name__})")
            curriculum.load_state(json.loads(saved))
            continue
        accepted.append(where)
        curriculum.load_state(json.loads(saved))
    return accepted


def _played_with_checkpoints(curriculum_factory, require_capability, scenario_seed: int,
                             setup: str) -> tuple[Any, CurriculumConfig, dict[str, Any], str]:
    """A curriculum of `setup` ("learning_progress", "staged" or "uniform") played on, its
    config, its checkpoint of `LIMITS.episodes_since_refused` episodes before (as JSON values: the altered
    ones start from it, so whatever a refused one leaves behind, its random state included,
    shows) and its state now (JSON text, what a refusal must leave)."""
    if setup == "staged":
        space, config = staged_space(scenario_seed), staged_config(scenario_seed, STAGED.previous_stage_mix)
    else:
        space = impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed)
        config = CurriculumConfig(task_generator=space.generator, num_active_tasks=LIMITS.pool, seed=scenario_seed,
                                  algorithm=UniformConfig() if setup == "uniform" else LearningProgressConfig())
    curriculum = _checkpointable(curriculum_factory, require_capability, config, setup)
    _play(curriculum, space.simulator, LIMITS.episodes_before)
    earlier = json.loads(json.dumps(curriculum.get_state()))
    _play(curriculum, space.simulator, LIMITS.episodes_since_refused)
    return curriculum, config, earlier, json.dumps(curriculum.get_state(), sort_keys=True)


@pytest.mark.parametrize("setup", ["learning_progress", "staged", "uniform"])
def test_a_checkpoint_holding_a_value_of_another_kind_is_refused_and_changes_nothing(
        curriculum_factory, require_capability, scenario_seed, setup) -> None:
    """A checkpoint whose numbers are altered one at a time (a count, id or index turned into a
    fraction, a score or statistic into a string: a hand-edited or mis-serialised file) must be
    refused, never cut to a whole number or read as something else, and the curriculum it was
    loaded into must keep its state."""
    curriculum, _, earlier, saved = _played_with_checkpoints(curriculum_factory, require_capability, scenario_seed,
                                                             setup)
    altered = _altered_kinds(earlier, random.Random(scenario_seed))
    require_capability(bool(altered), f"{setup}: the checkpoint holds no numbers to alter")
    accepted = _loaded_anyway(curriculum, altered, saved)
    assert not accepted, (
        f"{setup}: a checkpoint with one number of another kind was restored ({len(accepted)} of {len(altered)}): "
        f"{'; '.join(accepted[:5])}, seed {scenario_seed}")
    assert json.dumps(curriculum.get_state(), sort_keys=True) == saved, (
        f"{setup}: {len(altered)} refused checkpoints later, the curriculum they were loaded into holds another "
        f"state than before (a refused load_state wrote part of what it was given), seed {scenario_seed}")


def _out_of_range(state: dict[str, Any], config: CurriculumConfig,
                  key_arrays: frozenset[str]) -> list[tuple[str, Any]]:
    """`(where, state)` for numbers of a built-in checkpoint set just outside the range its
    docs give them, one at a time: indices and counts one past their bound or below 0, a task id
    twice in the pool or below 0, or kept for a slot it is not of, shares and rates above 1 or
    below 0, a sampling distribution with a negative chance, a last score outside the score
    range, a stage its stage changes cannot reach, a slot without completions that holds a score
    sum or a last score, a number of the random state wider than its bits, a count past
    MAX_COUNT in any array of counts (`key_arrays` hold hash keys), a number wider than its
    array's int64 or float64."""
    arrays = state["arrays"]
    pool = len(arrays["task_ids"])
    edits: list[tuple[str, Any, Any]] = [  # (array or entry, index or None, value): each range left on both sides
        ("completions", 0, -1), ("samples", 0, -1), ("draw_pos", None, len(state["draws"]) + 1), ("draw_pos", None, -1),
        ("since_refresh", None, -1), ("task_ids", 1, arrays["task_ids"][0]), ("probabilities", 0, 1.5),
        ("probabilities", 0, -0.5),
        # negative ids whose remainder names their own slot (-1 is the empty slot's mark)
        ("task_ids", 0, -pool), ("task_ids", pool - 1, -1)]
    # per slot, a task id of that slot (or the empty mark): slot 1's task named in slot 0's entries
    edits += [(key, 0, arrays["task_ids"][1]) for key in ("evictable", "sampled_task_ids") if key in state]
    if state["draws"]:  # a pre-drawn slot index past the pool or below it
        edits += [("draws", len(state["draws"]) - 1, pool), ("draws", 0, -1)]
    algorithm = config.algorithm
    if isinstance(algorithm, StagedProgressionConfig):
        counters = list(STAGE_COUNTERS)
        edits += [("stage_counters", counters.index("stage"), len(algorithm.stages)),
                  ("stage_counters", counters.index("stage"), -1),
                  ("stage_counters", counters.index("window_count"), algorithm.window + 1),
                  ("stage_counters", counters.index("window_count"), -1),
                  ("stage_counters", counters.index("window_pos"), algorithm.window),
                  ("stage_counters", counters.index("window_pos"), -1),
                  ("stage_counters", counters.index("stage_episodes"), -1)]
    if isinstance(algorithm, StagedProgressionConfig):  # window entries are scores in [0, 1]; the sum of a window
        edits += [("stage_window", 0, 1.5), ("stage_window", 0, -0.5),
                  ("stage_window_sum", 0, algorithm.window + 1.0), ("stage_window_sum", 0, -1.0)]
    # a count past MAX_COUNT; an id past MAX_TASK_ID whose remainder still names its slot
    edits += [("completions", 0, MAX_COUNT + 1), ("samples", pool - 1, MAX_COUNT + 1),
              ("task_ids", 0, (MAX_TASK_ID // pool + 1) * pool)]
    edits += [("counters", COUNTERS.index(name), -1) for name in COUNTERS]  # each pool-wide counter below 0
    if isinstance(algorithm, LearningProgressConfig):
        label = int(arrays["lp_label"][0]) - 1
        edits += [("lp_label_usefulness", label, 1.5), ("lp_label_usefulness", label, -0.5),
                  ("lp_admission_failure", 0, 1.5), ("lp_admission_failure", 0, -0.5),
                  ("lp_label", 0, len(arrays["lp_label_usefulness"]) + 1), ("lp_label", 0, -1),
                  ("lp_label_retries", 0, -1), ("lp_counters", 0, -1), ("lp_key", 0, -1), ("lp_label_keys", 0, -1)]
        edits += _statistics_out_of_range(arrays, algorithm)
    altered = []
    for name, index, value in edits:
        changed = plain_copy(state)
        if index is None:
            changed[name] = value
            where = f"{name}={value!r} (saved {state[name]!r})"
        else:
            holder = changed["arrays"] if name in arrays else changed
            holder[name][index] = value
            where = f"{name}[{index}]={value!r} (saved {(arrays if name in arrays else state)[name][index]!r})"
        altered.append((where, changed))
    for name, values in arrays.items():  # a count past MAX_COUNT in every array of counts (ids and keys aside)
        if values and type(values[0]) is int and name != "task_ids" and name not in key_arrays:
            changed = plain_copy(state)
            changed["arrays"][name][-1] = MAX_COUNT + 1
            altered.append((f"{name}[-1]={MAX_COUNT + 1!r} (saved {values[-1]!r})", changed))
    for name, values in arrays.items():  # a number no array of its kind holds (int64, float64): a corrupt file
        if values and type(values[0]) in (int, float):
            for value in (2**64, -2**63 - 1) if type(values[0]) is int else (10**400,):
                changed = plain_copy(state)
                changed["arrays"][name][0] = value
                altered.append((f"{name}[0]={value!r} (saved {values[0]!r})", changed))
    changed = plain_copy(state)  # a distribution that still sums to 1, with a negative chance in it
    chances = changed["probabilities"]
    chances[1] += chances[0] + 0.5
    chances[0] = -0.5
    altered.append((f"probabilities[:2]={chances[:2]!r}, summing to 1 (saved {state['probabilities'][:2]!r})",
                    changed))
    low, high = config.score_range
    played = next(slot for slot, count in enumerate(arrays["completions"]) if count > 0)
    for last in (high + (high - low), low - (high - low)):  # a last score outside the score range
        changed = plain_copy(state)
        changed["arrays"]["last_score"][played] = last
        altered.append((f"last_score[{played}]={last!r}, score range {config.score_range}", changed))
    changed = plain_copy(state)  # a count below 0 alone: its sum makes a mean (sum / count) in the score range
    changed["arrays"]["completions"][played] = -1
    changed["arrays"]["score_sum"][played] = -changed["arrays"]["last_score"][played]
    altered.append((f"completions[{played}]=-1 with score_sum[{played}]={-arrays['last_score'][played]!r} (saved "
                    f"{arrays['completions'][played]!r}, {arrays['score_sum'][played]!r})", changed))
    for kept, cleared in (("score_sum", "last_score"), ("last_score", "score_sum")):  # a score without a completion
        changed = plain_copy(state)
        changed["arrays"]["completions"][0] = 0
        changed["arrays"][kept][0], changed["arrays"][cleared][0] = (low + high) / 2 or high, 0.0
        altered.append((f"slot 0 never played (0 completions) holding only a {kept}", changed))
    for *keys, bits in (("state", "state", 128), ("state", "inc", 128), ("has_uint32", 1), ("uinteger", 32)):
        for value in (2 ** bits, -1):  # a number of the random state one past its width, or below 0
            changed = plain_copy(state)
            holder = changed["rng"]
            for key in keys[:-1]:
                holder = holder[key]
            holder[keys[-1]] = value
            altered.append((f"rng{keys}={value} (a {bits}-bit number)", changed))
    if isinstance(algorithm, StagedProgressionConfig) and len(algorithm.stages) >= 3:  # every change moves one stage
        changed = plain_copy(state)
        counters = changed["arrays"]["stage_counters"]
        counters[STAGE_COUNTERS.index("stage")], counters[STAGE_COUNTERS.index("stage_changes")] = 2, 0
        altered.append(("stage_counters: stage 2 after 0 stage changes", changed))
    return altered


def _statistics_out_of_range(arrays: dict[str, list], algorithm: LearningProgressConfig) -> list[tuple[str, int, float]]:
    """Learning-progress statistics of a pool task and of a remembered configuration just
    outside what scores in [0, 1] produce: with the baseline b in [0, max_baseline], the signal
    (s - b) / (1 - b) and its EMAs, last and peak lie in [-cap / (1 - cap), 1], the variances in
    [0, width^2], counts and frontier practice at least 0."""
    cap = algorithm.max_baseline
    lowest = -cap / (1.0 - cap)
    width = 1.0 - lowest
    signal = (lowest, 1.0)
    bounds = {"fast": signal, "slow": signal, "last": signal, "peak": signal, "var": (0.0, width * width),
              "base_var": (0.0, width * width), "baseline": (0.0, cap), "count": (0.0, None), "front": (0.0, None)}
    rows = [("lp_state", 0)]
    used = [i for i, key in enumerate(arrays.get("lp_memory_keys", [])) if key]
    if used:  # a remembered configuration
        rows.append(("lp_memory", used[0]))
    edits = []
    for name, row in rows:
        for field, (low, high) in bounds.items():
            at = row * len(STATE_FIELDS) + STATE_FIELDS.index(field)
            edits.append((name, at, low - 0.01 * width))
            if high is not None:
                edits.append((name, at, high + 0.01 * width))
    if used:
        edits.append(("lp_memory_keys", used[0], -1))
    return edits


def _with_a_remembered_configuration(state: dict[str, Any]) -> dict[str, Any]:
    """`state`, with the configuration memory holding pool task 0's statistics under its key if
    it held none (so that its entries, too, are altered); other states as they are."""
    arrays = state["arrays"]
    keys = arrays.get("lp_memory_keys")
    if keys is None or any(keys):
        return state
    changed = plain_copy(state)
    key, width = arrays["lp_key"][0], len(STATE_FIELDS)
    at = key % len(keys)
    changed["arrays"]["lp_memory_keys"][at] = key
    changed["arrays"]["lp_memory"][at * width:(at + 1) * width] = arrays["lp_state"][:width]
    return changed


def _reshaped(state: dict[str, Any]) -> list[tuple[str, Any]]:
    """`(where, state)` for a built-in checkpoint changed in its shape, one change at a time:
    not a dict, another format, a key missing or added, an array missing or added, an array
    (or a list beside them: the per-slot sample counts, the batch of draws, ...) one entry short
    or long (or empty), an entry nested in a list, a word of a nested dict another (the
    random state of another generator: PCG64DXSM, ...)."""
    altered: list[tuple[str, Any]] = [("the checkpoint as a list of its items", list(state.items()))]
    changed = plain_copy(state)
    changed["format"] = f"{state['format']}-older"
    altered.append((f"format {changed['format']!r}", changed))
    for key in state:
        altered.append((f"key {key!r} missing", {k: v for k, v in state.items() if k != key}))
    altered.append(("an unknown key", {**state, "comment": "edited by hand"}))
    arrays = state["arrays"]
    for name in arrays:
        changed = plain_copy(state)
        del changed["arrays"][name]
        altered.append((f"array {name!r} missing", changed))
        for where, values in ((f"array {name!r} one entry short", arrays[name][:-1]),
                              (f"array {name!r} one entry long", arrays[name] + arrays[name][-1:]),
                              (f"array {name!r} with its first entry in a list", [arrays[name][:1]] + arrays[name][1:])):
            changed = plain_copy(state)
            changed["arrays"][name] = values
            altered.append((where, changed))
    changed = plain_copy(state)
    changed["arrays"]["extra"] = [0]
    altered.append(("an unknown array", changed))
    for key, values in state.items():  # every list beside the arrays (per-slot sample counts, the batch of draws, ...)
        if isinstance(values, list) and values:
            for where, changed_values in ((f"{key!r} one entry short", values[:-1]),
                                          (f"{key!r} one entry long", values + values[-1:]),
                                          (f"{key!r} empty", [])):
                altered.append((where, {**plain_copy(state), key: changed_values}))
    for path in _nested_dicts(state):  # (the random state's, ...): each key missing, an unknown one added
        holder = _at(state, path)
        for key in [*holder, None]:
            changed = plain_copy(state)
            inner = _at(changed, path)
            if key is None:
                inner["comment"] = "edited by hand"
            else:
                del inner[key]
            altered.append((f"{'/'.join(path)}: " + ("an unknown key" if key is None else f"key {key!r} missing"),
                            changed))
        for key, value in holder.items():  # a word of the checkpoint (the random state's generator) another
            if isinstance(value, str):
                for other in sorted({f"{value}DXSM", value.lower(), value.upper(), ""} - {value}):
                    changed = plain_copy(state)
                    _at(changed, path)[key] = other
                    altered.append((f"{'/'.join(path)}/{key}={other!r} (saved {value!r})", changed))
    return altered


def _nested_dicts(state: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of the dicts nested in a checkpoint (its arrays left out: each is changed above)."""
    found = []
    for key, value in state.items():
        if isinstance(value, dict) and (path, key) != ((), "arrays"):
            found += [(*path, key), *_nested_dicts(value, (*path, key))]
    return found


def _at(state: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path:
        state = state[key]
    return state


@pytest.mark.parametrize("setup", ["learning_progress", "staged", "uniform"])
def test_a_checkpoint_of_another_shape_is_refused_and_changes_nothing(
        curriculum_factory, require_capability, uses_builtin_curriculum, scenario_seed, setup) -> None:
    """A built-in checkpoint changed in its shape (a key or array missing or added, also in the
    dicts it nests, such as its random state; an array a slot short or long, another format: a
    file of another version or cut short) must be refused, and the curriculum it was loaded
    into must keep its state."""
    require_capability(uses_builtin_curriculum, "the shape is that of the built-in curriculum's checkpoint")
    curriculum, _, earlier, saved = _played_with_checkpoints(curriculum_factory, require_capability, scenario_seed,
                                                             setup)
    accepted = _loaded_anyway(curriculum, _reshaped(earlier), saved, named=CurriculumStateError)
    assert not accepted, (
        f"{setup}: a checkpoint of another shape was restored (or refused by another error than CurriculumStateError): "
        f"{'; '.join(accepted[:5])}, seed {scenario_seed}")
    assert json.dumps(curriculum.get_state(), sort_keys=True) == saved, (
        f"{setup}: after the refused checkpoints the curriculum holds another state than before, seed {scenario_seed}")


@pytest.mark.parametrize("setup", ["learning_progress", "staged"])
def test_a_checkpoint_number_outside_its_documented_range_is_refused_and_changes_nothing(
        curriculum_factory, require_capability, uses_builtin_curriculum, scenario_seed, setup) -> None:
    """A built-in checkpoint whose numbers are set, one at a time, just outside the ranges the
    library documents for them (a stage past the last, a window fill count above the window, a
    draw position past the drawn batch, a task id twice in the pool, a usefulness above 1) must
    be refused, and the curriculum it was loaded into must keep its state: loaded, such a state
    stalls a stage for good or hands out one task for two."""
    require_capability(uses_builtin_curriculum, "the ranges are those of the built-in curriculum's checkpoint")
    curriculum, config, earlier, saved = _played_with_checkpoints(curriculum_factory, require_capability,
                                                                  scenario_seed, setup)
    earlier = _with_a_remembered_configuration(earlier)
    assert _loaded_anyway(curriculum, [("unaltered", earlier)], saved) == ["unaltered"], (
        f"{setup}: the checkpoint the altered ones start from was refused, seed {scenario_seed}")
    accepted = _loaded_anyway(curriculum, _out_of_range(earlier, config, curriculum._algorithm.key_arrays), saved, named=CurriculumStateError)
    assert not accepted, (
        f"{setup}: a checkpoint with a number outside its documented range was restored (or refused by another error "
        f"than CurriculumStateError): {'; '.join(accepted)}, "
        f"seed {scenario_seed}")
    assert json.dumps(curriculum.get_state(), sort_keys=True) == saved, (
        f"{setup}: after the refused checkpoints the curriculum holds another state than before, seed {scenario_seed}")


@pytest.mark.parametrize("setup", ["learning_progress", "uniform"])
def test_attaching_refuses_a_config_that_differs_in_any_field(curriculum_factory, require_capability,
                                                              scenario_seed, setup) -> None:
    """A process attaching to a shared curriculum with a config that differs from the creator's
    in one field (every field that takes another valid value, every generator change of the
    checkpoint check) must be refused: workers would otherwise draw, label and score the same
    shared tasks by different settings."""
    require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                       "this curriculum factory takes no `shared_memory` option: nothing to attach to")
    if setup == "uniform":
        config = CurriculumConfig(task_generator=_two_kinds(scenario_seed), algorithm=UniformConfig(),
                                  num_active_tasks=LIMITS.pool, seed=scenario_seed)
    else:
        config = CurriculumConfig(task_generator=impossible_task_space(num_learnable=5, num_impossible=45,
                                                                       seed=scenario_seed).generator,
                                  algorithm=LearningProgressConfig(), num_active_tasks=LIMITS.pool, seed=scenario_seed)
    try:
        shared = curriculum_factory(config, shared_memory=True)
    except (CurriculumConfigError, NotImplementedError) as error:
        require_capability(False, f"{setup}: the factory refused the config: {type(error).__name__}: {error}")
    try:
        attach = getattr(type(shared), "attach", None)
        name = getattr(shared, "shared_memory_name", None)
        require_capability(callable(attach) and bool(name), "this curriculum has no attach(name, config)")
        attach(name, config).close()  # the creator's own config attaches
        changed, _ = _changed_configs(config)
        accepted = []
        for field, other in changed.items():
            try:
                handle = attach(name, other)
            except Exception:  # refused, as it must be
                continue
            handle.close()
            accepted.append(f"{field}={_field(other, field)!r} (created with {_field(config, field)!r})")
        assert not accepted, (
            f"{setup}: a process attached to a shared curriculum with a config that differs from the creator's in "
            f"{', '.join(accepted)}, seed {scenario_seed}")
    finally:
        shared.close()


def _field(config: CurriculumConfig, name: str) -> Any:
    if name.startswith("task_generator"):
        return config.task_generator.describe()
    index = name.removeprefix("algorithm.stages[").split("]")[0]
    if name.startswith("algorithm.stages[") and index.isdigit():  # a stage's generator
        return config.algorithm.stages[int(index)].task_generator.describe()
    if name.startswith("algorithm.stages"):  # fewer, more, reordered or renamed stages: their names
        return [stage.name for stage in config.algorithm.stages]
    owner, _, attribute = name.rpartition(".")
    return getattr(config.algorithm if owner else config, attribute)
