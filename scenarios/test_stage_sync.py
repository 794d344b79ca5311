"""Scenario 2: multi-env stage sync stays consistent (seeds/003).

A staged curriculum runs on N workers (pufferlib Serial and Multiprocessing, whose workers
the trainer forks or, once, a fork server starts) under both supported designs: shared-memory
tracking and centralized tracking. Every stage pays full
score, so the curriculum advances as soon as `min_episodes` of a stage are recorded; each
stage has its own episode lengths (two, so workers drift apart and some worker draws a task at
almost every step), so every episode tells which stage it ran, and a pool of distinct tasks
per stage, so every episode tells which task it ran. Checked: episodes
recorded == episodes run exactly; each threshold crossing advances exactly once, at the
completion the staged rule says (the accounting oracle replays it in one process); no worker
starts an episode of a stage the global state has not reached, nor, one vec step after an
advancement, of the old one; stale-stage episodes are bounded by the worker count; the stage
an episode's info reports is the stage of the task its env drew as it ended (where no other
process moves the stage meanwhile); every reported number matches the episodes (the
accounting oracle). And the guard behind all of it: a forked copy of a local curriculum
refuses to record, whether the parent built it, unpickled it or restored it from a checkpoint.
Beneath it: a worker reading the `StageBroadcast` while the main process publishes without
pause sees only whole states, and reads a published state at once; a worker copy adopts
exactly the stage states a main curriculum can send; envs sharing one worker's copy each
report the stage generation their task was drawn from. Around it: a checkpoint restored into a
running vector reaches every worker (the resume flow); a reset that cuts steps short records
their episodes before the workers draw; centralized tracking takes only curricula whose
worker copies follow the main one, and refuses the rest by name.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import multiprocessing as mp
import pickle
import time
from typing import Any

import numpy as np
import pufferlib.vector
import pytest

from curriculum import (BucketedTaskGenerator, CurriculumConfig, CurriculumConfigError, CurriculumEnv,
                        GymCurriculumEnv, LearningProgressConfig, Stage, StagedProgressionConfig, UniformConfig,
                        UnknownTaskError)
from curriculum.stats import COMPLETION_INFO_KEY
from curriculum.vector import CentralizedCurriculumVecEnv, StageBroadcast, make_curriculum_vecenv
from harness.envs import INFO_FORMATS, ExactAccountingEnv, GymExactAccountingEnv
from harness.episodes import LabelledTaskGenerator
from harness.processes import start_method
from harness.protocol import missing_capabilities
from harness.thresholds import STAGE_SYNC as LIMITS

LENGTH_TO_STAGE = {length + spread: stage for stage, length in enumerate(LIMITS.stage_episode_lengths)
                   for spread in range(LIMITS.stage_length_spread + 1)}


def staged_config(seed: int, *, staggered: bool = False) -> CurriculumConfig:
    """One stage per episode length, each with several distinct paying tasks; `staggered`: each
    task's episodes last one of `LIMITS.stage_length_spread + 1` lengths from the stage's, so
    workers soon end episodes at different steps (at any step after an advancement, some
    worker draws a task)."""
    spread = LIMITS.stage_length_spread if staggered else 0
    stages = [Stage(f"stage_{i}", LabelledTaskGenerator(BucketedTaskGenerator(
        {}, {"episode_length": [length + k for k in range(spread + 1)], "reward_per_step": [0.25, 0.5, 1.0]},
        label=f"stage_{i}", seed=seed)))
        for i, length in enumerate(LIMITS.stage_episode_lengths)]
    return CurriculumConfig(
        algorithm=StagedProgressionConfig(stages=stages, advancement_threshold=LIMITS.advancement_threshold,
                                          min_episodes=LIMITS.min_episodes, window=LIMITS.window),
        num_active_tasks=LIMITS.pool, seed=seed,
    )


def _make_env(buf=None, seed=0):
    """Env i (seed base + i) writes its infos in the i-th of `INFO_FORMATS`, in turn: a list, a
    dict at every step (its reset's dict following an episode's), one running log, or None on
    ordinary steps; the wrappers must find each episode's end in every shape, wherever it sits
    in a step's infos, and hand the trainer info dicts only."""
    return ExactAccountingEnv(buf=buf, seed=seed, infos=INFO_FORMATS[seed % len(INFO_FORMATS)])


def full_score(returns) -> float:
    """Every completed episode of every stage is a success."""
    return 1.0


def _stages_misreported(episodes) -> list[tuple[str, int, object, int]]:
    """Episodes whose reported `curriculum_stats/stage` is not the stage of the task their env
    ran next (the task drawn as they ended): per env, in order."""
    by_env: dict[str, list] = {}
    for episode in episodes:
        by_env.setdefault(episode.record.env, []).append(episode)
    return [(env, index, ended.claims.get("curriculum_stats/stage"), int(following.record.label.rsplit("_", 1)[1]))
            for env, runs in by_env.items() for index, (ended, following) in enumerate(zip(runs, runs[1:]))
            if ended.claims.get("curriculum_stats/stage") != int(following.record.label.rsplit("_", 1)[1])]


# (backend, tracking); "Multiprocessing-forkserver": workers started by a fork server (Python
# 3.14's default on Linux, and what trainers that use torch often choose), whose parent is the
# server, not the trainer, and which receive the curriculum and the stage broadcast pickled
_VECTORS = [("Serial", "shared"), ("Serial", "centralized"), ("Multiprocessing", "shared"),
            ("Multiprocessing", "centralized"), ("Multiprocessing-forkserver", "centralized")]


@pytest.mark.parametrize(("backend", "tracking"), _VECTORS)
def test_workers_agree_on_the_stage_and_record_every_episode_once(
    curriculum_factory, require_capability, scenario_seed, backend, tracking, check_limit, golden, oracle
) -> None:
    with start_method(backend.partition("-")[2] or None):
        _check_workers_agree(curriculum_factory, require_capability, scenario_seed, backend, tracking, check_limit,
                             golden, oracle)


def _check_workers_agree(curriculum_factory, require_capability, scenario_seed: int, backend: str, tracking: str,
                         check_limit, golden, oracle) -> None:
    context = f"{backend}/{tracking}"
    backend = backend.partition("-")[0]
    options = {}
    if tracking == "shared":
        require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                           "this curriculum factory takes no `shared_memory` option: shared tracking cannot be tested")
        options["shared_memory"] = True
    curriculum = curriculum_factory(staged_config(scenario_seed, staggered=True), **options)
    needed = ("stage",) + (("sync_state", "apply_sync_state") if tracking == "centralized" else ())
    lacking = [name for name in needed if getattr(curriculum, name, None) is None] + \
        missing_capabilities(curriculum, needed[1:])
    require_capability(not lacking, f"{tracking} stage sync needs a staged curriculum with {lacking}")
    watcher = oracle(score_fn=full_score, context=context)
    in_process = backend == "Serial"
    target = watcher.watch(curriculum) if in_process else curriculum
    vec_options = {"num_workers": LIMITS.num_workers, "overwork": True} if backend == "Multiprocessing" else {}
    try:
        # (a pool report with every completion: an episode's stage stays the one drawn at beside it)
        with make_curriculum_vecenv(_make_env, target, backend=backend, tracking=tracking, num_envs=LIMITS.num_envs,
                                    seed=scenario_seed, score_fn=full_score, stats_interval=1,
                                    **vec_options) as vecenv:  # as trainers do
            obs, _ = vecenv.reset(seed=scenario_seed)
            actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
            stage_history = [curriculum.stage]
            episodes_run = 0
            ahead, stale_starts, stale_ends = [], [], 0
            running_stage = [LENGTH_TO_STAGE[int(o[0])] for o in obs.reshape(LIMITS.num_envs, -1)]
            # (actions as a trainer may hand them over: an array, else any array-like of the action space)
            forms = (actions, actions.tolist(), tuple(actions.tolist()), actions.astype(np.int64))
            for step in range(1, LIMITS.agree_vec_steps + 1):
                obs, rewards, terminals, truncations, infos = vecenv.step(forms[step % len(forms)])
                watcher.observe(infos)
                stage_now = curriculum.stage
                stage_history.append(stage_now)
                done = np.asarray(terminals).reshape(-1) | np.asarray(truncations).reshape(-1)
                episodes_run += int(done.sum())
                for env_index, (ended, o) in enumerate(zip(done, obs.reshape(LIMITS.num_envs, -1))):
                    if not ended:
                        continue
                    if running_stage[env_index] < stage_history[step - 1]:
                        stale_ends += 1
                    new_stage = LENGTH_TO_STAGE[int(o[0])]
                    running_stage[env_index] = new_stage
                    if new_stage > stage_now:
                        ahead.append((step, env_index, new_stage, stage_now))
                    lagged_from = stage_history[max(step - LIMITS.max_stage_lag_vec_steps, 0)]
                    if new_stage < lagged_from:
                        stale_starts.append((step, env_index, new_stage, lagged_from))
            records = len(watcher.episodes)
            assert records == episodes_run, (
                f"{context}: {episodes_run} episodes ended (done flags) but the envs reported {records}, "
                f"seed {scenario_seed}"
            )
            stats = curriculum.stats()
            recorded = stats["total_completions"] + stats["late_completions"]
            assert recorded == episodes_run, (
                f"{context}: the curriculum recorded {recorded} episodes but {episodes_run} were run "
                f"({LIMITS.num_envs} envs, {LIMITS.agree_vec_steps} vec steps), seed {scenario_seed}"
            )
            if tracking == "centralized":  # the main process's own counts of what it recorded
                counted = (vecenv.completions, vecenv.late_completions)
                assert counted == (recorded, stats["late_completions"]), (
                    f"{context}: the vector reports (completions, late_completions) {counted}; the curriculum recorded "
                    f"{recorded}, {stats['late_completions']} of them late, seed {scenario_seed}")
            last = len(LIMITS.stage_episode_lengths) - 1
            assert stats["stage"] == last and stats["advancements"] == last and stats["regressions"] == 0, (
                f"{context}: expected exactly {last} advancements to stage {last}, got stage {stats['stage']} after "
                f"{stats['advancements']} advancements and {stats['regressions']} regressions, seed {scenario_seed}"
            )
            assert not ahead, (
                f"{context}: workers started episodes of stages the curriculum had not reached "
                f"(vec step, env, episode stage, global stage): {ahead[:5]}, seed {scenario_seed}"
            )
            assert not stale_starts, (
                f"{context}: workers started old-stage episodes more than {LIMITS.max_stage_lag_vec_steps} vec "
                f"step(s) after an advancement (vec step, env, episode stage, stage then): {stale_starts[:5]}, "
                f"seed {scenario_seed}"
            )
            check_limit(f"{tracking}_stale_stage_episodes", stale_ends, LIMITS.num_envs * last, fmt=".0f",
                        what=f"{context}: episodes that ended after an advancement but ran the old stage:")
            if backend == "Serial" or tracking == "centralized":  # else another process may move the stage meanwhile
                misreported = _stages_misreported(watcher.episodes)
                assert not misreported, (
                    f"{context}: an episode's info reports the stage its env drew the next task at, but (env, episode, "
                    f"stage reported, stage of the next task) {misreported[:5]} ({len(misreported)} episodes), seed "
                    f"{scenario_seed}")
            labels = [e.record.label for e in watcher.episodes]
            watcher.verify(curriculum)
            golden({"episodes": episodes_run, "recorded": recorded, "stage": stats["stage"],
                    "advancements": stats["advancements"], "stale_stage_episodes": stale_ends,
                    "episodes_per_stage": {label: labels.count(label) for label in sorted(set(labels))}})
    finally:
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


def _stages_started(obs: Any) -> list[int]:
    """The stage of the task each env runs, from its observation (stages differ in length)."""
    return [LENGTH_TO_STAGE[int(o[0])] for o in np.asarray(obs).reshape(LIMITS.num_envs, -1)]


def _staged_vecenv(curriculum_factory, require_capability, seed: int, backend: str, tracking: str,
                   config: CurriculumConfig) -> tuple[Any, Any]:
    """A staged curriculum of `config` and its vector of `LIMITS.num_envs` envs (`backend`,
    `tracking`), or the test skipped for a curriculum that cannot take part."""
    options = {}
    if tracking == "shared":
        require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                           "this curriculum factory takes no `shared_memory` option: shared tracking cannot be tested")
        options["shared_memory"] = True
    curriculum = curriculum_factory(config, **options)
    needed = ("stage", "get_state", "load_state") + (("sync_state", "apply_sync_state") if tracking == "centralized"
                                                     else ())
    lacking = [name for name in needed if getattr(curriculum, name, None) is None] + \
        missing_capabilities(curriculum, needed[1:])
    if lacking and callable(getattr(curriculum, "close", None)):
        curriculum.close()
    require_capability(not lacking, f"{tracking} stage sync needs a staged curriculum with {lacking}")
    vec_options = {"num_workers": LIMITS.num_workers, "overwork": True} if backend == "Multiprocessing" else {}
    vecenv = make_curriculum_vecenv(_make_env, curriculum, backend=backend, tracking=tracking, num_envs=LIMITS.num_envs,
                                    seed=seed, score_fn=full_score, **vec_options)
    return curriculum, vecenv


def _staged_checkpoints(curriculum_factory, require_capability, config: CurriculumConfig,
                        restored: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Two checkpoints at stage `restored` from one run in one process: the first time it is
    reached (on full scores), and again after the run went on to the last stage and fell back
    (on zero scores): the same stage, another history (another stage-change count; None for
    a curriculum that does not fall back)."""
    source = curriculum_factory(config)
    try:
        checkpoints = []
        for score, stop in ((1.0, restored), (1.0, len(LIMITS.stage_episode_lengths) - 1), (0.0, restored)):
            for _ in range(LIMITS.min_episodes * len(LIMITS.stage_episode_lengths)):
                if source.stage == stop:
                    break
                source.update_task_performance(source.get_task().task_id, score)
            if score == 0.0 and source.stage != stop:
                return checkpoints[0], None
            require_capability(getattr(source, "stage", None) == stop,
                               f"the curriculum did not reach stage {stop} on scores of {score} in one process")
            checkpoints.append(source.get_state())
        return checkpoints[0], checkpoints[2]
    finally:
        if callable(getattr(source, "close", None)):
            source.close()


@pytest.mark.parametrize("tracking", ["shared", "centralized"])
@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
def test_a_stage_restored_into_a_running_vector_reaches_every_worker(curriculum_factory, require_capability,
                                                                     uses_builtin_curriculum, scenario_seed, backend,
                                                                     tracking) -> None:
    """The resume flow: the vector is built on a fresh curriculum and the checkpoint restored into
    it (`load_state`, here of a run at the middle stage) before the reset; later, at the last
    stage, the same checkpoint is restored again between two vec steps (a roll-back, under
    centralized tracking, whose workers only follow the main curriculum), and once more a
    checkpoint of the same stage but another history (taken after the run fell back to it)
    while the vector runs that stage. Each time every env must start the restored stage (at
    the reset, or within the lag once the episode it began before the restore ends), and the
    run must go on to the last stage: workers left on the stage they were forked at, or on the
    history they last heard of, run tasks the restored pool does not hold, every episode late,
    for ever."""
    config = staged_config(scenario_seed)
    config = dataclasses.replace(config, algorithm=dataclasses.replace(
        config.algorithm, regression_threshold=LIMITS.advancement_threshold / 2))
    restored = len(LIMITS.stage_episode_lengths) // 2
    checkpoint, fallen_back = _staged_checkpoints(curriculum_factory, require_capability, config, restored)
    assert fallen_back is not None or not uses_builtin_curriculum, (
        f"the built-in staged curriculum did not fall back to stage {restored} on zero scores (regression threshold "
        f"{config.algorithm.regression_threshold}), seed {scenario_seed}")
    curriculum, vecenv = _staged_vecenv(curriculum_factory, require_capability, scenario_seed, backend, tracking, config)
    context = f"{backend}/{tracking}"
    last = len(LIMITS.stage_episode_lengths) - 1
    try:
        curriculum.load_state(checkpoint)
        obs, _ = vecenv.reset(seed=scenario_seed)
        started = _stages_started(obs)
        assert started == [restored] * LIMITS.num_envs, (
            f"{context}: a checkpoint at stage {restored} was restored before the reset, and the reset started the "
            f"envs on stages {started}, seed {scenario_seed}")
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        # (the envs end their episodes together, so at a roll-back none runs a task of the last
        # stage: an episode of a task issued after the checkpoint is unknown to the restored pool,
        # and under shared tracking the workers record it themselves)
        whens = ("before the reset",) + (("between two vec steps",) if tracking == "centralized" else ()) + \
            (("at the same stage, with another history",) if tracking == "centralized" and fallen_back else ())
        for when in whens:
            if when == "between two vec steps":
                curriculum.load_state(checkpoint)  # rolled back from the last stage, the vector running
            elif when == "at the same stage, with another history":
                curriculum.load_state(checkpoint)  # the vector runs the restored stage a step ...
                vecenv.step(actions)
                curriculum.load_state(fallen_back)  # ... then takes the same stage of another history
            stale, history = [], [curriculum.stage]
            for step in range(1, LIMITS.vec_steps + 1):
                obs, _, terminals, truncations, _ = vecenv.step(actions)
                history.append(curriculum.stage)
                done = np.asarray(terminals).reshape(-1) | np.asarray(truncations).reshape(-1)
                stale += [(step, env, stage) for env, (ended, stage) in enumerate(zip(done, _stages_started(obs)))
                          if ended and stage < min(restored, history[max(step - LIMITS.max_stage_lag_vec_steps, 0)])]
                if curriculum.stage == last:
                    break
            stats = curriculum.stats()
            assert not stale and stats["stage"] == last, (
                f"{context}: after a checkpoint at stage {restored} was restored {when}, envs started episodes of "
                f"earlier stages (vec step, env, stage): {stale[:5]} ({len(stale)} in all), and {step} vec steps later "
                f"the run was at stage {stats['stage']} of {last}, {stats.get('late_completions')} late completions, "
                f"seed {scenario_seed}")
    finally:
        vecenv.close()
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


def test_a_roll_back_while_envs_run_tasks_issued_after_the_checkpoint_is_refused_by_name(
        curriculum_factory, require_capability, scenario_seed) -> None:
    """Centralized tracking, the main curriculum rolled back (`load_state`) to its first
    checkpoint while every env runs a task of a later stage, issued after it: those tasks are
    unknown to the restored pool, and the step that hands their completions over must raise
    `UnknownTaskError` (documented: roll back mid-episode only by building a new vector), not
    pass them over, recorded nowhere."""
    config = staged_config(scenario_seed)
    curriculum, vecenv = _staged_vecenv(curriculum_factory, require_capability, scenario_seed, "Serial",
                                        "centralized", config)
    try:
        checkpoint = curriculum.get_state()
        obs, _ = vecenv.reset(seed=scenario_seed)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        for _ in range(LIMITS.vec_steps):  # until every env has started an episode of a later stage
            if min(_stages_started(obs)) > 0:
                break
            obs = vecenv.step(actions)[0]
        require_capability(min(_stages_started(obs)) > 0, "the run never had every env on a later stage")
        curriculum.load_state(checkpoint)
        with pytest.raises(UnknownTaskError):
            for _ in range(max(LIMITS.stage_episode_lengths) + 1):
                vecenv.step(actions)
    finally:
        vecenv.close()
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


def test_a_stage_restored_before_a_vector_built_by_hand_is_wrapped_reaches_every_worker(
        curriculum_factory, require_capability, scenario_seed) -> None:
    """A vector built by hand under centralized tracking (`curriculum.vector`'s docstring: the
    broadcast first, each worker env given it as its stage source, the vector wrapped last), on
    a curriculum whose checkpoint at the middle stage is restored after the workers' copies were
    made and before the wrapping: the reset must start every env on the restored stage, and the
    run must go on to the last stage. The workers' copies hold the stage they were made at;
    only a publish of the restored one moves them."""
    config = staged_config(scenario_seed)
    restored = len(LIMITS.stage_episode_lengths) // 2
    checkpoint, _ = _staged_checkpoints(curriculum_factory, require_capability, config, restored)
    curriculum = curriculum_factory(config)
    lacking = missing_capabilities(curriculum, ("sync_state", "apply_sync_state", "load_state"))
    require_capability(not lacking, f"this curriculum has no {', '.join(lacking)}: no stage to broadcast")
    broadcast = StageBroadcast()

    def make_env(buf: Any = None, seed: int = 0) -> CurriculumEnv:
        return CurriculumEnv(ExactAccountingEnv(buf=buf, seed=seed), curriculum, seed=seed, buf=buf,
                             local_tracking=False, stage_source=broadcast, score_fn=full_score)

    vecenv = pufferlib.vector.make(make_env, backend=pufferlib.vector.Multiprocessing, num_envs=LIMITS.num_envs,
                                   num_workers=2)  # (each worker process holds its own copy)
    last = len(LIMITS.stage_episode_lengths) - 1
    try:
        curriculum.load_state(checkpoint)
        wrapped = CentralizedCurriculumVecEnv(vecenv, curriculum, stage_broadcast=broadcast)
        obs, _ = wrapped.reset(seed=scenario_seed)
        started = _stages_started(obs)
        actions = np.zeros(wrapped.action_space.shape, dtype=np.int32)
        for _ in range(LIMITS.vec_steps):
            if curriculum.stage == last:
                break
            wrapped.step(actions)
        assert started == [restored] * LIMITS.num_envs and curriculum.stage == last, (
            f"a checkpoint at stage {restored} restored before a vector built by hand was wrapped: the reset started "
            f"the envs on stages {started}, and the run reached stage {curriculum.stage} of {last} "
            f"({curriculum.stats().get('late_completions')} late completions), seed {scenario_seed}")
    finally:
        vecenv.close()
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
def test_a_reset_records_the_episodes_it_cuts_short_before_the_workers_draw(curriculum_factory, require_capability,
                                                                            scenario_seed, backend) -> None:
    """Centralized tracking in an asynchronous loop that resets with a step in flight (an epoch or
    evaluation reset after `send()`): the episodes that step ends come back with the reset's
    infos, and must be recorded before the workers draw their next tasks. Here every such step
    ends one episode per env, enough for the stage to advance, so every env must start the new
    stage at the reset, cycle after cycle, with no episode late."""
    base = staged_config(scenario_seed)
    config = dataclasses.replace(base, algorithm=dataclasses.replace(
        base.algorithm, min_episodes=LIMITS.num_envs, window=LIMITS.num_envs))
    curriculum, vecenv = _staged_vecenv(curriculum_factory, require_capability, scenario_seed, backend, "centralized",
                                        config)
    context = f"{backend}/centralized"
    try:
        obs, _ = vecenv.reset(seed=scenario_seed)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        cycles = []
        for cycle in range(1, len(LIMITS.stage_episode_lengths)):
            for _ in range(LIMITS.stage_episode_lengths[cycle - 1] - 1):
                obs, *_ = vecenv.step(actions)
            vecenv.send(actions)  # the step that ends every episode, cut short by the reset
            obs, _ = vecenv.reset(seed=scenario_seed + cycle)
            cycles.append((cycle, curriculum.stage, _stages_started(obs)))
        wrong = [(cycle, stage, started) for cycle, stage, started in cycles
                 if stage != cycle or started != [cycle] * LIMITS.num_envs]
        late = curriculum.stats().get("late_completions")
        assert not wrong and not late, (
            f"{context}: resets with a step in flight that ends one episode per env; (cycle, curriculum stage after the "
            f"reset, stage each env started) {wrong} (expected the cycle's number for all), {late} late completions, "
            f"seed {scenario_seed}")
    finally:
        vecenv.close()
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


def _paying_and_failing(seed: int) -> LabelledTaskGenerator:
    """Tasks of one length that pay 1 at every step, or 0."""
    return LabelledTaskGenerator(BucketedTaskGenerator({}, {"episode_length": [LIMITS.stage_episode_lengths[0]],
                                                            "reward_per_step": [0.0, 1.0]}, label="tasks", seed=seed))


#: Curricula centralized tracking may be asked to take: each is either refused by name when the
#: vector is built, or followed by the workers' private copies.
_CENTRALIZED_CANDIDATES: dict[str, Any] = {
    "uniform": lambda seed: CurriculumConfig(task_generator=_paying_and_failing(seed), algorithm=UniformConfig(),
                                             num_active_tasks=LIMITS.pool, seed=seed),
    "staged": lambda seed: CurriculumConfig(algorithm=StagedProgressionConfig(
        stages=[Stage(f"stage_{i}", _paying_and_failing(seed + i)) for i in range(2)],
        advancement_threshold=LIMITS.advancement_threshold, min_episodes=LIMITS.min_episodes, window=LIMITS.window),
        num_active_tasks=LIMITS.pool, seed=seed),
    "learning progress": lambda seed: CurriculumConfig(task_generator=_paying_and_failing(seed),
                                                       algorithm=LearningProgressConfig(), num_active_tasks=LIMITS.pool,
                                                       seed=seed),
    "learning progress, never evicting": lambda seed: CurriculumConfig(
        task_generator=_paying_and_failing(seed), algorithm=LearningProgressConfig(), num_active_tasks=LIMITS.pool,
        seed=seed, eviction_percentile=0.0),
}


@pytest.mark.parametrize("candidate", list(_CENTRALIZED_CANDIDATES))
def test_centralized_tracking_takes_only_curricula_its_workers_follow(curriculum_factory, require_capability,
                                                                      scenario_seed, candidate) -> None:
    """Under centralized tracking the workers draw from private copies that learn nothing but the
    stage broadcast. A curriculum the vector takes must be one those copies follow: over a run
    where half the tasks pay and half do not, the share of episodes the workers gave paying
    tasks must match the main curriculum's sampling mass on them (`sampling_probabilities()`
    over `active_tasks()`). Any other must be refused by name (`CurriculumConfigError`) when
    the vector is built."""
    curriculum = curriculum_factory(_CENTRALIZED_CANDIDATES[candidate](scenario_seed))
    vecenv = None
    try:
        lacking = [name for name in ("sampling_probabilities", "active_tasks") if getattr(curriculum, name, None) is None]
        require_capability(not lacking, f"the main curriculum's sampling mass is read through {lacking}")
        try:
            vecenv = make_curriculum_vecenv(_make_env, curriculum, backend="Serial", tracking="centralized",
                                            num_envs=LIMITS.num_envs, seed=scenario_seed, score_fn=paid)
        except CurriculumConfigError:
            return  # refused by name
        vecenv.reset(seed=scenario_seed)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        played, mass = [], []
        for step in range(1, LIMITS.vec_steps + 1):
            _, rewards, terminals, truncations, _ = vecenv.step(actions)
            if step <= LIMITS.vec_steps // 2:
                continue
            done = np.asarray(terminals).reshape(-1) | np.asarray(truncations).reshape(-1)
            played += [float(r > 0.5) for r, ended in zip(np.asarray(rewards).reshape(-1), done) if ended]
            paying = [task.env_cfg["reward_per_step"] == 1.0 for task in curriculum.active_tasks()]
            mass.append(float(np.sum(np.asarray(curriculum.sampling_probabilities())[paying])))
        share, expected = float(np.mean(played)), float(np.mean(mass))
        assert abs(share - expected) <= LIMITS.followed_share_gap, (
            f"{candidate}: centralized tracking took the curriculum, and its workers gave paying tasks {share:.1%} of "
            f"the last {len(played)} episodes while the main curriculum's sampling put {expected:.1%} on them (gap "
            f"limit {LIMITS.followed_share_gap:.0%}): copies that cannot follow must be refused, seed {scenario_seed}")
    finally:
        if vecenv is not None:
            vecenv.close()
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


def regressing_config(seed: int) -> CurriculumConfig:
    """Three stages whose tasks pay 1 or 0 per step (stage 0 always pays), judged on two
    episodes: the stage advances on two successes and regresses on two failures."""
    stages = [Stage(f"stage_{i}", LabelledTaskGenerator(BucketedTaskGenerator(
        {}, {"episode_length": list(LIMITS.regressing_lengths), "reward_per_step": [1.0] if i == 0 else [0.0, 1.0]},
        label=f"stage_{i}", seed=seed)))
        for i in range(3)]
    window = LIMITS.regressing_window
    return CurriculumConfig(
        algorithm=StagedProgressionConfig(stages=stages, advancement_threshold=0.75, regression_threshold=0.25,
                                          min_episodes=window, window=window),
        num_active_tasks=LIMITS.pool, seed=seed,
    )


def paid(returns) -> float:
    """1 for an episode that paid, 0 for one that did not."""
    return float(min(1.0, max(0.0, float(np.mean(returns)))))


def test_an_episode_run_within_one_stage_generation_is_credited(
    curriculum_factory, require_capability, scenario_seed, oracle
) -> None:
    """Centralized tracking with a stage that goes back and forth: an episode whose task was
    drawn after the worker read the main process's latest broadcast, and that ended before the
    stage changed again, ran a task of the main's current pool and must be credited (not late).
    One env per worker process, some episodes eight times longer than others: a worker often
    reads a broadcast two stage changes ahead, at the stage it already has (a copy comparing
    stages instead of stage changes would keep drawing from a pool the main refilled twice)."""
    curriculum = curriculum_factory(regressing_config(scenario_seed))
    lacking = [name for name in ("stage", "sync_state", "apply_sync_state") if getattr(curriculum, name, None) is None]
    lacking += missing_capabilities(curriculum, ("sync_state", "apply_sync_state"))
    require_capability(not lacking, f"centralized stage sync needs a staged curriculum with {lacking}")
    context = "Multiprocessing/centralized, regressing stages, one env per worker"
    watcher = oracle(score_fn=paid, context=context)
    vecenv = make_curriculum_vecenv(_make_env, curriculum, backend="Multiprocessing", tracking="centralized",
                                    num_envs=LIMITS.num_envs, num_workers=LIMITS.num_envs, overwork=True,
                                    seed=scenario_seed, score_fn=paid)
    try:
        vecenv.reset(seed=scenario_seed)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        initial = curriculum.sync_state()["stage_changes"]
        drawn_at: dict[str, int] = {}
        """Stage changes the main had published when each env drew its running episode's task."""
        wrongly_late, within_generation = [], 0
        for step in range(1, LIMITS.regressing_vec_steps + 1):
            published = curriculum.sync_state()["stage_changes"]
            seen = len(watcher.episodes)
            watcher.observe(vecenv.step(actions)[4])
            now = curriculum.sync_state()["stage_changes"]
            for episode in watcher.episodes[seen:]:
                env = episode.record.env
                if drawn_at.get(env, initial) == now and not episode.desync:
                    within_generation += 1
                    if episode.claims.get("curriculum_stats/late_completions", 0):
                        wrongly_late.append((step, env, episode.record.identity, now))
                drawn_at[env] = published
        stats = curriculum.stats()
        assert stats["regressions"] >= LIMITS.min_regressions, (
            f"{context}: the stage regressed {stats['regressions']} times in {LIMITS.regressing_vec_steps} vec steps, "
            f"expected at least {LIMITS.min_regressions}, seed {scenario_seed}"
        )
        assert not wrongly_late, (
            f"{context}: {len(wrongly_late)} of {within_generation} episodes that ran within one stage generation "
            f"were refused as late (vec step, env, task, stage changes): {wrongly_late[:3]}, seed {scenario_seed}"
        )
        watcher.verify(curriculum)
    finally:
        vecenv.close()
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


#: How the worker goes on holding its forked copy: as forked, deep-copied, or pickled and unpickled
#: again (an env wrapper or a worker pool that copies what it was handed).
_IN_WORKER = {"as forked": lambda c: c, "deep-copied": copy.deepcopy, "pickled again": lambda c: pickle.loads(pickle.dumps(c))}


def _record_in_child(curriculum, conn, held: str, task_id: int | None) -> None:
    """Record one completion in this (forked) process, through its copy held as `held`, of
    `task_id` (None: a task it draws); send back what that raised, if anything."""
    try:
        curriculum = _IN_WORKER[held](curriculum)
        curriculum.update_task_performance(curriculum.get_task().task_id if task_id is None else task_id, 1.0)
    except Exception as error:  # sent to the parent, which asserts on its type
        conn.send(type(error).__name__)
    else:
        conn.send(None)


def _answer_of_forked(parents, held: str, task_id: int | None = None) -> str | None:
    """What a forked child answered to one completion through its copy of `parents`, held as
    `held` (`_record_in_child`)."""
    here, there = mp.get_context("fork").Pipe()
    child = mp.get_context("fork").Process(target=_record_in_child, args=(parents, there, held, task_id))
    child.start()
    answer = here.recv() if here.poll(30) else "no answer"
    child.join(timeout=30)
    return answer


def _copies(curriculum, config: CurriculumConfig) -> dict[str, Any]:
    """The same local curriculum as a process holds it: built, unpickled, restored from a checkpoint."""
    restored = type(curriculum)(config)
    restored.load_state(curriculum.get_state())
    return {"built": curriculum, "unpickled": pickle.loads(pickle.dumps(curriculum)), "restored": restored}


def test_a_forked_copy_of_a_local_curriculum_refuses_to_record(uses_builtin_curriculum, curriculum_factory,
                                                                require_capability, scenario_seed) -> None:
    """A local (single-process) curriculum forked into a worker is a private copy there: what it
    records never reaches the others (seeds/003), so it must refuse with `WorkerCopyError`,
    however the parent came to hold it (built, unpickled, restored from a checkpoint) and however
    the worker goes on holding it (as forked, deep-copied, pickled again), a completion of a
    task that left the pool too (a refusal, not a late verdict the copy counts privately), and
    the parent's curriculum must hold nothing of it. The same copies made in the owning process
    record."""
    require_capability(uses_builtin_curriculum, "WorkerCopyError is the built-in curriculum's guard")
    config = staged_config(scenario_seed)
    curriculum = curriculum_factory(config)
    first = [task.task_id for task in curriculum.active_tasks()]
    for _ in range(LIMITS.min_episodes * 10):  # until the first stage's tasks are late (a bound: no hang)
        if curriculum.sync_state()["stage"] > 0:
            break
        curriculum.update_task_performance(curriculum.get_task().task_id, 1.0)
    assert curriculum.sync_state()["stage"] > 0, f"the staged curriculum never advanced, seed {scenario_seed}"
    answers = {}
    for how, parents in _copies(curriculum, config).items():
        recorded = parents.stats()["total_completions"], parents.stats()["late_completions"]
        for held in _IN_WORKER:
            for task_id, what in ((None, "a task it drew"), (first[0], "a task that left the pool")):
                answers[f"{how}, {held} in the worker, {what}"] = _answer_of_forked(parents, held, task_id)
            assert (parents.stats()["total_completions"], parents.stats()["late_completions"]) == recorded, (
                f"a {how} curriculum's forked copy ({held} in the worker) recorded into the parent's, seed "
                f"{scenario_seed}")
    assert answers == dict.fromkeys(answers, "WorkerCopyError"), (
        f"a forked copy of a local curriculum answered a completion with {answers} (how the parent held it: "
        f"what the copy raised; None: it recorded privately, lost to every other process), seed {scenario_seed}")
    # in the process that owns it, every copy is its own curriculum (a snapshot to branch a run from)
    refused = {}
    for how, parents in _copies(curriculum, config).items():
        for held, copied in _IN_WORKER.items():
            try:
                copied(parents).update_task_performance(parents.get_task().task_id, 1.0)
            except Exception as error:  # noqa: BLE001 - named in the assertion below
                refused[how if held == "as forked" else f"{how}, {held}"] = type(error).__name__
    assert not refused, (
        f"copies of a local curriculum made in the process that owns it refused to record: {refused}, seed "
        f"{scenario_seed}")


def test_a_forked_copy_of_a_shared_curriculum_records(curriculum_factory, require_capability,
                                                     scenario_seed) -> None:
    """The mirror image: a shared-memory curriculum forked into a worker is the same curriculum
    there, however the parent came to hold it (built, unpickled, deep-copied: a copy kept to
    branch a run, a curriculum loaded from a pickle) and however the worker goes on holding it.
    Every worker's completion is recorded, and the parent sees each."""
    require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                       "this curriculum factory takes no `shared_memory` option: worker processes cannot share it")
    curriculum = curriculum_factory(staged_config(scenario_seed), shared_memory=True)
    held_here = {"built": curriculum, "unpickled": pickle.loads(pickle.dumps(curriculum)),
                 "deep-copied": copy.deepcopy(curriculum)}
    try:
        answers = {f"{how}, {held} in the worker": _answer_of_forked(parents, held)
                   for how, parents in held_here.items() for held in _IN_WORKER}
        recorded = curriculum.stats()["total_completions"]
        assert answers == dict.fromkeys(answers, None) and recorded == len(answers), (
            f"forked copies of a shared curriculum answered a completion with {answers} (how the parent held it: "
            f"what the copy raised; None: recorded), and the parent saw {recorded} of {len(answers)} completions, "
            f"seed {scenario_seed}")
    finally:
        for copied in held_here.values():
            getattr(copied, "close", lambda: None)()


class _PublishedWhileRead(StageBroadcast):
    """A broadcast whose main process publishes the next state just as a worker finished reading
    the current one (the window between a worker's read and its next draw)."""

    def __init__(self, states: list[dict[str, int]]) -> None:
        super().__init__()
        self.pending = list(states[1:])
        self.publish(states[0])

    def read(self) -> dict[str, int] | None:
        state = super().read()
        if self.pending:
            self.publish(self.pending.pop(0))
        return state


def _main_and_worker_copy(curriculum_factory, require_capability, seed: int) -> tuple[Any, Any]:
    """A main staged curriculum and a worker's copy of it (pickled, as a worker process gets
    it, before the main process moves on); skipped for a curriculum with no stage to broadcast."""
    main = curriculum_factory(staged_config(seed))
    missing = missing_capabilities(main, ("sync_state", "apply_sync_state"))
    require_capability(not missing, f"this curriculum has no {', '.join(missing)}: no stage to broadcast")
    return main, pickle.loads(pickle.dumps(main))


def test_a_stage_published_while_a_worker_reads_reaches_it_at_its_next_draw(curriculum_factory, require_capability,
                                                                           scenario_seed) -> None:
    """Centralized tracking: the main process publishes stage changes while workers run. One
    that lands while a worker is reading the broadcast must still reach the worker by its next
    task draw; taken as seen, the worker keeps the previous stage's pool until the next publish,
    which its late completions can no longer bring."""
    main, worker = _main_and_worker_copy(curriculum_factory, require_capability, scenario_seed)
    states = [main.sync_state()]
    budget = LIMITS.published_while_read * LIMITS.min_episodes * 10  # completions of score 1.0 (a bound: no hang)
    for _ in range(budget):
        main.update_task_performance(main.get_task().task_id, 1.0)
        if main.sync_state() != states[-1]:
            states.append(main.sync_state())
        if len(states) == LIMITS.published_while_read:
            break
    assert len(states) == LIMITS.published_while_read, (
        f"the staged curriculum changed its broadcast state {len(states) - 1} times in {budget} completions of score "
        f"1.0 (min_episodes {LIMITS.min_episodes}); expected {LIMITS.published_while_read - 1}, seed {scenario_seed}")
    env = CurriculumEnv(ExactAccountingEnv(), worker, local_tracking=False, stage_source=_PublishedWhileRead(states),
                        score_fn=full_score)
    env.reset(seed=scenario_seed)
    for _ in range(LIMITS.published_while_read * max(LIMITS.stage_episode_lengths) * 2):
        env.step(np.zeros(1, dtype=np.int32))
    env.close()
    assert worker.sync_state()["stage"] == states[-1]["stage"], (
        f"the main process published {states} (the next state each time a worker had just read one); the worker "
        f"follows {worker.sync_state()}, seed {scenario_seed}")


class _InterruptedOnce(StageBroadcast):
    """A broadcast whose first read after each publish is interrupted (Ctrl-C, a signal
    handler's exception) before it returns."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupt = False
        self.interrupted = 0

    def publish(self, sync) -> None:
        super().publish(sync)
        self.interrupt = True

    def read(self) -> dict[str, int] | None:
        if self.interrupt:
            self.interrupt = False
            self.interrupted += 1
            raise KeyboardInterrupt("a read of the stage broadcast interrupted")
        return super().read()


def test_a_stage_whose_adoption_was_interrupted_is_adopted_at_the_next_draw(curriculum_factory, require_capability,
                                                                           scenario_seed) -> None:
    """Centralized tracking: a worker whose adoption of a broadcast stage is interrupted (the
    read raises, the reset that drew fails) adopts it at its next draw: the broadcast it did
    not finish reading is not taken as seen, else the worker keeps the old stage's pool until
    the next publish."""
    main, worker = _main_and_worker_copy(curriculum_factory, require_capability, scenario_seed)
    broadcast = _InterruptedOnce()
    broadcast.publish(main.sync_state())
    env = CurriculumEnv(ExactAccountingEnv(), worker, local_tracking=False, stage_source=broadcast, score_fn=full_score)
    try:
        with pytest.raises(KeyboardInterrupt):
            env.reset(seed=scenario_seed)
        env.reset(seed=scenario_seed)
        for _ in range(LIMITS.min_episodes * 10):  # completions of score 1.0 until the main advances (a bound)
            main.update_task_performance(main.get_task().task_id, 1.0)
            if main.sync_state()["stage"] > 0:
                break
        assert main.sync_state()["stage"] > 0, f"the main curriculum never advanced, seed {scenario_seed}"
        broadcast.publish(main.sync_state())
        with pytest.raises(KeyboardInterrupt):
            env.reset(seed=scenario_seed)
        env.reset(seed=scenario_seed)
        assert worker.sync_state()["stage"] == main.sync_state()["stage"], (
            f"the worker's read of the broadcast {main.sync_state()} was interrupted ({broadcast.interrupted} "
            f"interruptions); at its next draw it follows {worker.sync_state()}, seed {scenario_seed}")
    finally:
        env.close()


def _completions(infos: Any) -> list[dict[str, Any]]:
    """The completions a worker's env sends the main process in one step's infos."""
    dicts = [infos] if isinstance(infos, dict) else [i for i in infos or () if isinstance(i, dict)]
    return [d[COMPLETION_INFO_KEY] for d in dicts if COMPLETION_INFO_KEY in d]


def test_envs_sharing_a_worker_copy_each_report_the_stage_generation_they_drew_at(
        curriculum_factory, require_capability, scenario_seed) -> None:
    """Centralized tracking, two envs of one worker process on its one copy of the curriculum
    (as pufferlib's workers hold them): the first env to draw after a broadcast adopts it, the
    other finds it adopted already. Each completion sent to the main process must carry the
    stage changes of the generation its task was drawn from, whichever env adopted it: a main
    recorder judges lateness by it."""
    main, worker = _main_and_worker_copy(curriculum_factory, require_capability, scenario_seed)
    broadcast = StageBroadcast()
    broadcast.publish(main.sync_state())
    envs = [CurriculumEnv(ExactAccountingEnv(seed=i), worker, local_tracking=False, stage_source=broadcast,
                          score_fn=full_score) for i in range(2)]
    try:
        drawn_at = []  # the stage changes published when each env drew its running episode's task
        for env in envs:
            env.reset(seed=scenario_seed)
            drawn_at.append(broadcast.read()["stage_changes"])
        wrong, sent = [], 0
        for step in range(LIMITS.min_episodes * max(LIMITS.stage_episode_lengths) * 2):
            for index, env in enumerate(envs):
                published = broadcast.read()["stage_changes"]
                completions = _completions(env.step(np.zeros(1, dtype=np.int32))[4])
                for completion in completions:
                    sent += 1
                    if completion["stage_changes"] != drawn_at[index]:
                        wrong.append((step, index, completion["stage_changes"], drawn_at[index]))
                    main.update_task_performance(completion["task_id"], completion["score"])
                    broadcast.publish(main.sync_state())
                if completions:
                    drawn_at[index] = published
        assert main.sync_state()["stage_changes"] >= 2, (
            f"the main curriculum changed stage {main.sync_state()['stage_changes']} times in {sent} completions of "
            f"score 1.0, expected at least 2, seed {scenario_seed}")
        assert not wrong, (
            f"{len(wrong)} of {sent} completions of two envs sharing one worker copy carried other stage changes than "
            f"the generation their task was drawn from (step, env, reported, drawn at): {wrong[:4]}, seed "
            f"{scenario_seed}")
    finally:
        for env in envs:
            env.close()


def test_a_worker_copy_hands_out_only_tasks_its_main_holds_through_advances_and_roll_backs(
        curriculum_factory, require_capability, scenario_seed) -> None:
    """Centralized tracking: a worker copy follows its main curriculum's stage (`sync_state()`
    adopted by `apply_sync_state()`) while the main advances on scores of 1.0 and is rolled back
    (`load_state`) to a checkpoint of each earlier stage. After every state it adopts, each task
    the worker hands out (many draws: every slot's task) is one the main's pool holds, with its
    config: a worker that keeps the tasks it drew before a roll-back hands out ids the restored
    pool gave other tasks, or none."""
    main, worker = _main_and_worker_copy(curriculum_factory, require_capability, scenario_seed)
    missing = missing_capabilities(main, ("get_state", "load_state", "active_tasks"))
    require_capability(not missing, f"this curriculum has no {', '.join(missing)}: no roll-back to follow")
    last = len(LIMITS.stage_episode_lengths) - 1
    checkpoints = {main.sync_state()["stage"]: main.get_state()}
    wrong: list[str] = []

    def follow(what: str) -> None:
        worker.apply_sync_state(main.sync_state())
        held = {task.task_id: dict(task.env_cfg) for task in main.active_tasks()}
        for _ in range(LIMITS.pool * 4):
            task = worker.get_task()
            if held.get(task.task_id) != dict(task.env_cfg):
                wrong.append(f"{what}: handed out task {task.task_id} ({dict(task.env_cfg)}), the main holds "
                             f"{held.get(task.task_id, 'no such task')}")
                return

    follow("at the start")
    for _ in range(LIMITS.min_episodes * (last + 1) * 4):  # (a bound: no hang)
        if main.sync_state()["stage"] == last:
            break
        main.update_task_performance(main.get_task().task_id, 1.0)
        stage = main.sync_state()["stage"]
        if stage not in checkpoints:
            checkpoints[stage] = main.get_state()
            follow(f"advanced to stage {stage}")
    assert main.sync_state()["stage"] == last, (
        f"the main curriculum reached stage {main.sync_state()['stage']} of {last} on scores of 1.0, seed "
        f"{scenario_seed}")
    for stage in sorted(checkpoints, reverse=True)[1:]:
        main.load_state(checkpoints[stage])
        follow(f"rolled back to stage {stage}")
    assert not wrong, f"a worker copy following its main: {'; '.join(wrong[:3])}, seed {scenario_seed}"


def test_a_gymnasium_worker_copy_starts_every_episode_at_the_published_stage(curriculum_factory, require_capability,
                                                                            scenario_seed) -> None:
    """Centralized tracking through the gymnasium wrapper (`local_tracking=False`, a
    `stage_source`): whatever draws an episode's task (the first `reset()`, a `reset(seed=)` that
    reseeds, a `reset()` that abandons a running episode), the worker copy adopts the stage
    published since, so the episode starts a task the main's pool holds."""
    main, worker = _main_and_worker_copy(curriculum_factory, require_capability, scenario_seed)
    missing = missing_capabilities(main, ("get_state", "load_state", "active_tasks"))
    require_capability(not missing, f"this curriculum has no {', '.join(missing)}")
    broadcast = StageBroadcast()
    env = GymCurriculumEnv(GymExactAccountingEnv(), worker, seed=scenario_seed, local_tracking=False,
                           stage_source=broadcast)
    start = main.get_state()
    wrong: list[str] = []

    def advance() -> None:
        stage = main.sync_state()["stage"]
        for _ in range(LIMITS.min_episodes * 4):  # (a bound: no hang)
            main.update_task_performance(main.get_task().task_id, 1.0)
            if main.sync_state()["stage"] != stage:
                break
        broadcast.publish(main.sync_state())

    def check(what: str) -> None:
        held = {task.task_id for task in main.active_tasks()}
        if env.task.task_id not in held:
            wrong.append(f"{what}: started task {env.task.task_id} of a pool the main left (main at "
                         f"{main.sync_state()}, holding {sorted(held)[:6]}...)")

    advance()
    env.reset()
    check("the first reset()")
    advance()
    env.reset(seed=scenario_seed + 1)
    check("reset(seed=)")
    main.load_state(start)  # rolled back to stage 0 while an episode runs
    broadcast.publish(main.sync_state())
    env.step(0)
    env.reset()
    check("a reset() abandoning a running episode")
    env.close()
    assert not wrong, f"a gymnasium worker copy: {'; '.join(wrong)}, seed {scenario_seed}"


def test_a_worker_copy_adopts_every_stage_state_the_main_can_send_and_refuses_the_rest(
        uses_builtin_curriculum, require_capability, scenario_seed) -> None:
    """`apply_sync_state()` as its docstring states it, over every stage and change count near
    the stages: a state `sync_state()` could have returned (a stage reached from stage 0 by
    that many one-stage steps: at least as many changes as the stage, of its parity), its counts
    ints or numpy integers, is adopted;
    any other is refused and changes nothing. A worker that adopts an unreachable state hands
    out task ids the main curriculum gave other tasks."""
    require_capability(uses_builtin_curriculum, "restates the built-in's apply_sync_state() docstring")
    from curriculum import Curriculum, CurriculumStateError

    stages = len(LIMITS.stage_episode_lengths)
    worker = pickle.loads(pickle.dumps(Curriculum(staged_config(scenario_seed))))
    # (and each as numpy integers, counts read back from an array or a shared buffer)
    states: list[Any] = [{"stage": kind(stage), "stage_changes": kind(changes)} for kind in (int, np.int64, np.int32)
                         for stage in range(-1, stages + 1) for changes in range(-1, stages + 5)]
    states += [{"stage": 1.0, "stage_changes": 1}, {"stage": True, "stage_changes": 1}, {"stage": 1},
               {"stage": 0, "stage_changes": 2, "extra": 0}, {"stage": np.bool_(True), "stage_changes": 1},
               {"stage": np.float64(1.0), "stage_changes": 1}]
    wrong = []
    for sync in states:
        stage, changes = sync.get("stage"), sync.get("stage_changes")
        reachable = (set(sync) == {"stage", "stage_changes"}
                     and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in sync.values())
                     and 0 <= stage < stages and changes >= stage and (changes - stage) % 2 == 0)
        before = (worker.sync_state(), [task.task_id for task in worker.active_tasks()])
        try:
            worker.apply_sync_state(sync)
        except CurriculumStateError:
            now = (worker.sync_state(), [task.task_id for task in worker.active_tasks()])
            if reachable or now != before:
                wrong.append(f"{sync}: refused{'' if now == before else ', and the worker changed'}")
            continue
        if not reachable or worker.sync_state() != sync:
            wrong.append(f"{sync}: adopted as {worker.sync_state()}"
                         + ("" if reachable else " (no run of one-stage steps from stage 0 reaches it)"))
    assert not wrong, f"apply_sync_state() over {len(states)} states: {'; '.join(wrong)}, seed {scenario_seed}"


def _publish_until_stopped(broadcast: StageBroadcast, stop: Any) -> None:
    changes = 0
    while not stop.is_set():
        changes += 1
        broadcast.publish({"stage": changes % LIMITS.broadcast_stages, "stage_changes": changes})


def _read_into(broadcast: StageBroadcast, conn: Any) -> None:
    conn.send(broadcast.read())


def _read_elsewhere(broadcast: StageBroadcast) -> dict[str, int] | None:
    """What a read of `broadcast` in another process returns (None: no answer within
    `LIMITS.broadcast_read_timeout`, the reader killed)."""
    context = mp.get_context("fork")
    here, there = context.Pipe()
    reader = context.Process(target=_read_into, args=(broadcast, there), daemon=True)
    reader.start()
    answered = here.poll(LIMITS.broadcast_read_timeout)
    state = here.recv() if answered else None
    if not answered:
        reader.kill()
    reader.join(timeout=10)
    return state


def test_a_worker_reads_each_published_state_at_once(scenario_seed) -> None:
    """After each of a few publishes, a worker's read (in another process, as a worker reads)
    returns that state at once: a read that waits for a publish in progress must not wait for
    one that is over (a reader spinning for ever hangs every worker at its next task draw)."""
    broadcast = StageBroadcast()
    seen = []
    for changes in range(1, LIMITS.broadcast_stages + 1):
        published = {"stage": changes % LIMITS.broadcast_stages, "stage_changes": changes}
        broadcast.publish(published)
        seen.append((published, _read_elsewhere(broadcast)))
    wrong = [(published, state) for published, state in seen if state != published]
    assert not wrong, (
        f"reads of the stage broadcast after a publish (published, read; None: no answer within "
        f"{LIMITS.broadcast_read_timeout} s): {wrong}, seed {scenario_seed}")


def test_a_worker_reading_the_broadcast_never_sees_half_a_publish(scenario_seed) -> None:
    """The main process publishes without pause (each state's stage is its change count modulo
    the stages) while a worker reads the `StageBroadcast` in another process: every read must
    be one published state, whole, never the stage of one publish with the count of another
    (the worker would adopt a state no curriculum sent), never None (nothing published) once a
    state was, and counts never go back. Before the first publish every read is None (a worker
    following it keeps its own stage), not a stage 0 nobody sent."""
    broadcast = StageBroadcast()
    unpublished = (broadcast.read(), _read_elsewhere(broadcast))
    assert unpublished == (None, None), (
        f"a broadcast nobody published read {unpublished[0]} here and {unpublished[1]} in another process; None "
        f"until the first publish (a worker copy ahead of stage 0 would go back to it), seed {scenario_seed}")
    broadcast.publish({"stage": 0, "stage_changes": 0})
    first = _read_elsewhere(broadcast)  # (else the reads below could spin for ever)
    assert first == {"stage": 0, "stage_changes": 0}, (
        f"a read right after a publish returned {first} (None: no answer within {LIMITS.broadcast_read_timeout} s), "
        f"seed {scenario_seed}")
    stop = mp.get_context("fork").Event()
    writer = mp.get_context("fork").Process(target=_publish_until_stopped, args=(broadcast, stop), daemon=True)
    writer.start()
    reads, torn, last, nothing = 0, [], 0, 0
    try:
        deadline = time.monotonic() + LIMITS.broadcast_read_seconds
        while time.monotonic() < deadline or reads < LIMITS.broadcast_min_reads:
            state = broadcast.read()
            reads += 1
            if state is None:  # "nothing published yet", after a publish: the worker draws from its old stage
                nothing += 1
                continue
            changes = state["stage_changes"]
            if state["stage"] != changes % LIMITS.broadcast_stages or changes < last:
                torn.append(state)
            last = max(last, changes)
    finally:
        stop.set()
        writer.join(timeout=10)
    assert last > LIMITS.broadcast_min_reads // 100, f"the writer published only {last} states, seed {scenario_seed}"
    assert not torn and not nothing, (
        f"{len(torn)} of {reads} reads of the stage broadcast were no published state (stage = changes modulo "
        f"{LIMITS.broadcast_stages}, counts never going back), e.g. {torn[:3]}, and {nothing} returned None (nothing "
        f"published) although a state was, seed {scenario_seed}")
