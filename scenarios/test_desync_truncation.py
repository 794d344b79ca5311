"""Scenario 4: desync truncation must not starve rewards (seeds/004).

Workers stagger their episodes by desyncing the first one. The legacy mode varies the first
episode's length (a full, shorter episode); the buggy mode cuts the first episode at a random
step, so on a delayed-reward env (first heart after 85 steps) many first episodes end with no
reward, and if the curriculum records them as completions it learns that the task pays
nothing. The gate checks that episodes are really staggered, that the reward rate of the
desync mode in use is close to the undesynced one, and that the curriculum is never fed a
truncated partial episode. And since a plain time-limit truncation ends a full episode, it
must be recorded like a terminal one, while a desync cut never is: every episode's ending is
known from the env's own record, and the accounting oracle checks each one.
"""

from __future__ import annotations

import numpy as np
import pufferlib.vector

import pytest

from curriculum import CurriculumConfig, SingleTaskGenerator, UniformConfig
from harness.envs import ExactAccountingEnv, ResourceChainEnv
from harness.episodes import ENDED_DESYNC, ENDED_TERMINAL, ENDED_TRUNCATED, LabelledTaskGenerator
from harness.learner_envs import Variant, VariantCycleGenerator
from harness.thresholds import DESYNC as LIMITS


def _full_return() -> float:
    env = ResourceChainEnv(max_steps=LIMITS.max_steps)
    ore, batteries, hearts = env.production_counts(LIMITS.max_steps)
    return ore * 0.1 + batteries * 0.8 + hearts * 1.0


def _run(curriculum_factory, env_class, desync: str, scenario_seed: int, oracle) -> dict:
    full = _full_return()

    def score(returns) -> float:
        return min(float(sum(returns) / len(returns)) / full, 1.0)

    config = CurriculumConfig(task_generator=LabelledTaskGenerator(
        SingleTaskGenerator({"max_steps": LIMITS.max_steps}, label="arena")),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed)
    watcher = oracle(score_fn=score, context=f"desync {desync}")
    curriculum = watcher.watch(curriculum_factory(config))

    def make_env(buf=None, seed=0):
        # pufferlib numbers its envs 0..n-1 whatever seed make() gets: mix in the scenario seed
        seed = seed + 1000 * scenario_seed
        env = ResourceChainEnv(max_steps=LIMITS.max_steps, desync=desync, seed=seed, buf=buf)
        return env_class(env, curriculum, seed=seed, buf=buf, score_fn=score)

    vecenv = pufferlib.vector.make(make_env, backend=pufferlib.vector.Serial, num_envs=LIMITS.workers)
    vecenv.reset(seed=scenario_seed)
    actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
    first_end = np.full(LIMITS.workers, -1)
    early_reward = 0.0
    for step in range(LIMITS.rollout_steps):
        _, rewards, terminals, truncations, infos = vecenv.step(actions)
        watcher.observe(infos)
        if step < 2 * LIMITS.max_steps:
            early_reward += float(rewards.sum())
        done = terminals | truncations
        first_end[(first_end < 0) & done] = step + 1
    envs = vecenv.envs
    episodes = sum(e.episodes for e in envs)
    desync_cut = sum(e.desync_truncations for e in envs)
    stats = curriculum.stats()
    recorded = stats["total_completions"] + stats["late_completions"]
    pool = curriculum.active_tasks() if callable(getattr(curriculum, "active_tasks", None)) else []
    scores = [t.mean_score for t in pool if getattr(t, "num_completions", 0) and hasattr(t, "mean_score")]
    vecenv.close()
    watcher.verify()
    return {
        "first_end": first_end,
        "reward_rate": early_reward / (2 * LIMITS.max_steps * LIMITS.workers),
        "episodes": episodes,
        "desync_truncations": desync_cut,
        "recorded": recorded,
        "min_mean_score": min(scores) if scores else None,
    }


def test_desynced_workers_are_staggered_and_not_starved(curriculum_factory, curriculum_env_class, scenario_seed,
                                                        check_limit, golden, oracle) -> None:
    none = _run(curriculum_factory, curriculum_env_class, "none", scenario_seed, oracle)
    legacy = _run(curriculum_factory, curriculum_env_class, "legacy", scenario_seed, oracle)
    truncate = _run(curriculum_factory, curriculum_env_class, "truncate", scenario_seed, oracle)
    for name, run in (("legacy", legacy), ("truncate", truncate)):
        spread = (run["first_end"].max() - run["first_end"].min()) / LIMITS.max_steps
        limit = LIMITS.min_legacy_spread if name == "legacy" else LIMITS.min_truncate_spread
        check_limit(f"{name}_boundary_spread", spread, limit, upper=False, fmt=".2f",
                    what=f"{name} desync: first-episode ends {sorted(run['first_end'].tolist())} spread over a "
                    f"fraction of max_steps={LIMITS.max_steps} of")
    ratio = legacy["reward_rate"] / none["reward_rate"]
    check_limit("legacy_reward_rate_ratio", ratio, LIMITS.min_reward_rate_ratio, upper=False, fmt=".2f",
                what=f"reward per step over the first {2 * LIMITS.max_steps} steps with legacy desync "
                f"({legacy['reward_rate']:.4f}) relative to no desync ({none['reward_rate']:.4f}) is")
    expected = truncate["episodes"] - truncate["desync_truncations"]
    assert truncate["desync_truncations"] == LIMITS.workers, (
        f"{truncate['desync_truncations']} desync truncations counted, expected one per worker "
        f"({LIMITS.workers}), seed {scenario_seed}"
    )
    assert truncate["recorded"] == expected, (
        f"the curriculum recorded {truncate['recorded']} completions but only {expected} of "
        f"{truncate['episodes']} episodes were full ({truncate['desync_truncations']} desync-truncated partial "
        f"episodes must not be fed to it), seed {scenario_seed}"
    )
    if truncate["min_mean_score"] is not None:
        check_limit("truncate_min_recorded_score", truncate["min_mean_score"], 0.999, upper=False, fmt=".3f",
                    what="lowest mean recorded score of a task (every full episode scores 1.0; a truncated "
                    "partial episode scores less) is")
    golden({name: {"first_episode_ends": run["first_end"], "reward_rate": run["reward_rate"],
                   "episodes": run["episodes"], "desync_truncations": run["desync_truncations"],
                   "recorded": run["recorded"]}
            for name, run in (("none", none), ("legacy", legacy), ("truncate", truncate))})


ENDINGS = [ENDED_TERMINAL, ENDED_TRUNCATED, ENDED_DESYNC]


@pytest.mark.parametrize(("num_envs", "desync_signal", "num_agents", "infos"),
                         [(1, "info", 1, "list"), (4, "nested", 1, "list"), (1, "loose", 1, "list"),
                          (1, "split", 1, "tuple"), (1, "first", 3, "list"), (1, "mixed", 3, "list"),
                          (1, "attribute", 1, "list"), (1, "attribute", 3, "list"), (1, "info", 1, "dict")],
                         ids=["1", "4", "1-loose", "1-split", "1-first-3agents", "1-mixed-3agents", "1-attribute",
                              "1-attribute-3agents", "1-dict"])
def test_time_limit_truncations_are_recorded_and_desync_cuts_are_not(curriculum_factory, curriculum_env_class,
                                                                     scenario_seed, num_envs, desync_signal,
                                                                     num_agents, infos, oracle, golden) -> None:
    """Tasks end their episodes by terminals, by a plain time limit or by a desync cut (flagged
    in the info one level deep, or with 4 envs two levels deep; or "loose": the flag in every
    episode's last info, False at a time limit, True at a terminal end too, where it means
    nothing without a truncation; or "split": the flagged info followed by another dict in the
    step's infos, a tuple (an env that returns `(info, {})`); or "first": three agents ending at different steps, the flag in the info of
    the step that cuts the first of them, the others playing on; or "mixed": three agents ending
    together, a cut truncating the first and terminating the others; or "attribute": no flag in
    any info, the env's `desync_truncation` attribute set from the cut to the next reset (with three
    agents ending at different steps, from the step that cuts the first of them); or
    "dict": one info per step, not in a list, a dict, an `OrderedDict` or a `UserDict` in turn)."""
    # the pool's ids go round the endings (id k ends as ENDINGS[k % 3]), so every seed's run holds all three
    def lengths(length: int) -> int | list[int]:  # agents ending at different steps
        if num_agents == 1 or desync_signal == "mixed":
            return length if num_agents == 1 else [length] * num_agents
        return [length + agent * (agent + 1) // 2 for agent in range(num_agents)]

    variants = [Variant(f"cut_{end}", {"episode_length": lengths(length), "end": end, "reward_per_step": reward},
                        "learnable", 0)
                for length in (2, 3, 5) for reward in (0.25, 0.5) for end in ENDINGS]
    pool = 12
    generator = LabelledTaskGenerator(VariantCycleGenerator(variants, cycle_ids=pool))
    config = CurriculumConfig(task_generator=generator, algorithm=UniformConfig(), num_active_tasks=pool,
                              seed=scenario_seed, score_range=(0.0, 5.0))
    watcher = oracle(context=f"time limits, {num_envs} env(s)")
    curriculum = watcher.watch(curriculum_factory(config))

    def make_env(buf=None, seed=0):
        seed = seed + 1000 * scenario_seed
        env = ExactAccountingEnv(buf=buf, seed=seed, desync_signal=desync_signal, num_agents=num_agents, infos=infos)
        return curriculum_env_class(env, curriculum, seed=seed, buf=buf)

    vecenv = pufferlib.vector.make(make_env, backend=pufferlib.vector.Serial, num_envs=num_envs)
    try:
        vecenv.reset(seed=scenario_seed)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        for _ in range(LIMITS.time_limit_steps):
            watcher.observe(vecenv.step(actions)[4])
    finally:
        vecenv.close()
    endings = {end: sum(e.record.ended == end for e in watcher.episodes) for end in ENDINGS}
    assert all(endings.values()), f"the run must hold every kind of ending, got {endings}, seed {scenario_seed}"
    stats = curriculum.stats()
    recorded = stats["total_completions"] + stats["late_completions"]
    full = endings[ENDED_TERMINAL] + endings[ENDED_TRUNCATED]
    assert recorded == full, (
        f"the curriculum recorded {recorded} completions for {endings[ENDED_TERMINAL]} terminal and "
        f"{endings[ENDED_TRUNCATED]} time-limit-truncated episodes ({endings[ENDED_DESYNC]} desync cuts must not be "
        f"recorded), {num_envs} env(s), seed {scenario_seed}"
    )
    watcher.verify()
    golden({"endings": endings, "recorded": recorded})
