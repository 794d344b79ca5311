"""Scenario 2: multi-env stage sync stays consistent (seeds/003).

A staged curriculum runs on N workers (pufferlib Serial and Multiprocessing) under both
supported designs: shared-memory tracking and centralized tracking. Every stage pays full
score, so the curriculum advances as soon as `min_episodes` of a stage are recorded; each
stage has its own episode length, so every episode tells which stage it ran. Checked:
episodes recorded == episodes run exactly; each threshold crossing advances exactly once;
no worker starts an episode of a stage the global state has not reached, nor, one vec step
after an advancement, of the old one; stale-stage episodes are bounded by the worker count.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from curriculum import CurriculumConfig, SingleTaskGenerator, Stage, StagedProgressionConfig
from curriculum.vector import make_curriculum_vecenv
from harness.envs import ExactAccountingEnv
from harness.thresholds import STAGE_SYNC as LIMITS

LENGTH_TO_STAGE = {length: stage for stage, length in enumerate(LIMITS.stage_episode_lengths)}


def _config(seed: int) -> CurriculumConfig:
    stages = [Stage(f"stage_{i}", SingleTaskGenerator({"episode_length": length, "reward_per_step": 1.0},
                                                       label=f"stage_{i}"))
              for i, length in enumerate(LIMITS.stage_episode_lengths)]
    return CurriculumConfig(
        algorithm=StagedProgressionConfig(stages=stages, advancement_threshold=LIMITS.advancement_threshold,
                                          min_episodes=LIMITS.min_episodes, window=LIMITS.window),
        num_active_tasks=4, seed=seed,
    )


def _make_env(buf=None, seed=0):
    return ExactAccountingEnv(buf=buf, seed=seed)


def _score(returns: np.ndarray) -> float:
    return 1.0  # every completed episode of every stage is a success


@pytest.mark.parametrize("tracking", ["shared", "centralized"])
@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
def test_workers_agree_on_the_stage_and_record_every_episode_once(
    curriculum_factory, require_capability, scenario_seed, backend, tracking, check_limit, golden
) -> None:
    options = {}
    if tracking == "shared":
        require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                           "this curriculum factory takes no `shared_memory` option: shared tracking cannot be tested")
        options["shared_memory"] = True
    curriculum = curriculum_factory(_config(scenario_seed), **options)
    vec_options = {"num_workers": LIMITS.num_workers, "overwork": True} if backend == "Multiprocessing" else {}
    vecenv = make_curriculum_vecenv(_make_env, curriculum, backend=backend, tracking=tracking,
                                    num_envs=LIMITS.num_envs, seed=scenario_seed, score_fn=_score, **vec_options)
    try:
        obs, _ = vecenv.reset(seed=scenario_seed)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        stage_history = [curriculum.stage]
        episodes_run = 0
        ahead, stale_starts, stale_ends = [], [], 0
        running_stage = [LENGTH_TO_STAGE[int(o[0])] for o in obs.reshape(LIMITS.num_envs, -1)]
        for step in range(1, LIMITS.vec_steps + 1):
            obs, rewards, terminals, truncations, infos = vecenv.step(actions)
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
        stats = curriculum.stats()
        recorded = stats["total_completions"] + stats["late_completions"]
        assert recorded == episodes_run, (
            f"{backend}/{tracking}: the curriculum recorded {recorded} episodes but {episodes_run} were run "
            f"({LIMITS.num_envs} envs, {LIMITS.vec_steps} vec steps), seed {scenario_seed}"
        )
        last = len(LIMITS.stage_episode_lengths) - 1
        assert stats["stage"] == last and stats["advancements"] == last and stats["regressions"] == 0, (
            f"{backend}/{tracking}: expected exactly {last} advancements to stage {last}, got stage {stats['stage']} "
            f"after {stats['advancements']} advancements and {stats['regressions']} regressions, seed {scenario_seed}"
        )
        assert not ahead, (
            f"{backend}/{tracking}: workers started episodes of stages the curriculum had not reached "
            f"(vec step, env, episode stage, global stage): {ahead[:5]}, seed {scenario_seed}"
        )
        assert not stale_starts, (
            f"{backend}/{tracking}: workers started old-stage episodes more than {LIMITS.max_stage_lag_vec_steps} vec "
            f"step(s) after an advancement (vec step, env, episode stage, stage then): {stale_starts[:5]}, "
            f"seed {scenario_seed}"
        )
        check_limit(f"{tracking}_stale_stage_episodes", stale_ends, LIMITS.num_envs * last, fmt=".0f",
                    what=f"{backend}/{tracking}: episodes that ended after an advancement but ran the old stage:")
        golden({"episodes": episodes_run, "recorded": recorded, "stage": stats["stage"],
                "advancements": stats["advancements"], "stale_stage_episodes": stale_ends})
    finally:
        vecenv.close()
        curriculum.close()
