"""The learner task families: exact dynamics, config at reset, the variant generator (no torch)."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from curriculum import Curriculum, CurriculumConfig, GymCurriculumEnv, UniformConfig
from harness.learner_envs import (
    IMPOSSIBLE,
    INTERMEDIATE_SHARE,
    LEARNABLE,
    NOISY,
    TASK_FAMILIES,
    CraftingChainEnv,
    DoorCorridorEnv,
    LearnerTaskFamily,
    Variant,
    VariantCycleGenerator,
    corridor_family,
    crafting_family,
)


def _play(env: gymnasium.Env, actions: list[int]) -> tuple[list[float], bool, bool, dict]:
    """Rewards of `actions` from a reset, and how the episode stood after the last one."""
    env.reset()
    rewards, terminated, truncated, info = [], False, False, {}
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        if terminated or truncated:
            break
    return rewards, terminated, truncated, info


# ---- corridor -----------------------------------------------------------------------------
def test_corridor_codes_open_the_doors_and_pay_progress_then_the_goal() -> None:
    env = DoorCorridorEnv(max_length=6, progress_share=0.5)
    env.set_env_config({"length": 5})
    rewards, terminated, truncated, info = _play(env, list(env.codes[:5]))
    assert rewards == [0.125, 0.125, 0.125, 0.125, 0.5]
    assert terminated and not truncated
    assert info == {"learner_task": {"success": True, "episode_return": 1.0, "episode_length": 5}}


def test_corridor_neighbouring_doors_never_share_a_code() -> None:
    for layout_seed in range(20):
        codes = DoorCorridorEnv(max_length=12, num_codes=3, layout_seed=layout_seed).codes
        assert all(a != b for a, b in zip(codes, codes[1:])), codes


def test_corridor_wrong_code_sends_back_to_start_and_doors_pay_once() -> None:
    env = DoorCorridorEnv(max_length=6, progress_share=0.5)
    env.set_env_config({"length": 3})
    first, second = env.codes[:2]
    wrong = (second + 1) % env.num_codes
    rewards, terminated, truncated, _ = _play(env, [first, wrong, first, second])
    assert rewards == [0.25, 0.0, 0.0, 0.25]  # door 0 pays only the first time it is passed
    assert env.position == 2 and not terminated and not truncated


def test_corridor_is_truncated_at_its_time_limit() -> None:
    env = DoorCorridorEnv(max_length=6, time_limit_factor=2)
    env.set_env_config({"length": 3})
    wrong = (env.codes[0] + 1) % env.num_codes
    rewards, terminated, truncated, info = _play(env, [wrong] * 20)
    assert len(rewards) == 8 == env.time_limit
    assert truncated and not terminated
    assert info["learner_task"] == {"success": False, "episode_return": 0.0, "episode_length": 8}


def test_locked_corridor_never_opens_its_last_door() -> None:
    env = DoorCorridorEnv(max_length=6, progress_share=0.5, time_limit_factor=50)
    env.set_env_config({"length": 3, "locked": True})
    rewards, terminated, truncated, info = _play(env, list(env.codes[:3]) * 100)
    assert not terminated and truncated
    assert info["learner_task"]["success"] is False
    assert sum(rewards) <= 0.5 + 1e-12  # at most the doors before the locked one


def _locked_returns(actions_of: Any, episodes: int = 3000) -> np.ndarray:
    env = DoorCorridorEnv(max_length=6, num_codes=4, progress_share=0.5, seed=7)
    env.set_env_config({"length": 6, "locked": True})
    returns = []
    for _ in range(episodes):
        env.reset()
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(actions_of(env))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return np.array(returns)


def test_locked_corridor_pays_the_same_whatever_the_policy() -> None:
    """Jammed doors open by chance: the codes, one fixed action or random actions all earn the
    same return distribution, so nothing is learnable there."""
    rng = np.random.default_rng(0)
    by_code = _locked_returns(lambda env: env.codes[env.position])
    fixed = _locked_returns(lambda env: 0)
    random = _locked_returns(lambda env: int(rng.integers(env.num_codes)))
    assert by_code.mean() > 0.0  # chance pays a little
    for other in (fixed, random):
        assert abs(by_code.mean() - other.mean()) < 4 * np.sqrt(by_code.var() / 3000 + other.var() / 3000)


def test_observation_shows_position_and_config() -> None:
    env = DoorCorridorEnv(max_length=4)
    env.set_env_config({"length": 2, "noisy": True})
    obs, _ = env.reset()
    np.testing.assert_array_equal(obs, [1, 0, 0, 0, 0, 0.5, 0, 1])
    obs = env.step(env.codes[0])[0]
    np.testing.assert_array_equal(obs, [0, 1, 0, 0, 0, 0.5, 0, 1])
    assert env.observation_space.contains(obs)


# ---- crafting chain -----------------------------------------------------------------------
def test_crafting_chain_in_order_pays_intermediates_then_the_last_product() -> None:
    env = CraftingChainEnv(max_depth=6)
    env.set_env_config({"depth": 3})
    rewards, terminated, truncated, info = _play(env, [0, 1, 2])
    assert rewards == [INTERMEDIATE_SHARE / 2, INTERMEDIATE_SHARE / 2, 1.0 - INTERMEDIATE_SHARE]
    assert terminated and not truncated and info["learner_task"]["success"] is True
    assert sum(rewards) == pytest.approx(1.0)


def test_crafting_jam_loses_the_held_product_and_intermediates_pay_once() -> None:
    env = CraftingChainEnv(max_depth=6)
    env.set_env_config({"depth": 3})
    wait = env.max_difficulty
    rewards, terminated, _, _ = _play(env, [0, wait, 2, 0, 1])
    assert env.held == 1 and not terminated
    assert rewards == [0.1, 0.0, 0.0, 0.0, 0.1]  # wait is harmless; machine 2 jams; product 0 pays once


def test_depleted_crafting_chain_never_pays() -> None:
    env = CraftingChainEnv(max_depth=6)
    env.set_env_config({"depth": 2, "depleted": True})
    rewards, terminated, truncated, _ = _play(env, [0, 1] * 10)
    assert rewards == [0.0] * env.time_limit and truncated and not terminated


def test_crafting_depth_one_pays_one_at_once() -> None:
    env = CraftingChainEnv(max_depth=3)
    env.set_env_config({"depth": 1})
    assert _play(env, [0])[:2] == ([1.0], True)


# ---- shared contract ------------------------------------------------------------------------
@pytest.mark.parametrize("env_class", [DoorCorridorEnv, CraftingChainEnv])
def test_noisy_variant_pays_a_seeded_uniform_draw_whatever_the_agent_does(env_class) -> None:
    def noisy_returns(seed: int) -> list[float]:
        env = env_class(seed=seed)
        env.set_env_config({env_class.DIFFICULTY_KEY: 2, "noisy": True})
        out = []
        for _ in range(50):
            rewards, _, _, info = _play(env, [0] * 10)
            assert info["learner_task"]["success"] is False and rewards[:-1] == [0.0] * (len(rewards) - 1)
            out.append(sum(rewards))
        return out

    returns = noisy_returns(3)
    assert returns == noisy_returns(3) and returns != noisy_returns(4)
    assert all(0.0 <= r <= 1.0 for r in returns) and 0.3 < np.mean(returns) < 0.7 and len(set(returns)) == 50


@pytest.mark.parametrize("env_class", [DoorCorridorEnv, CraftingChainEnv])
def test_config_applies_at_the_next_reset_never_mid_episode(env_class) -> None:
    key, flag = env_class.DIFFICULTY_KEY, env_class.IMPOSSIBLE_KEY
    env = env_class(seed=0)
    env.reset()
    env.set_env_config({key: 3, flag: True, "label": "ignored"})
    assert env.config == {key: 1, flag: False, "noisy": False}
    env.step(0)
    env.reset()
    assert env.config == {key: 3, flag: True, "noisy": False}
    env.set_env_config({"noisy": True})  # keys left out take the constructor defaults
    env.reset()
    assert env.config == {key: 1, flag: False, "noisy": True}


@pytest.mark.parametrize(
    ("env_cfg", "message"),
    [
        ({"width": 3}, "Unknown env config key(s) 'width' for DoorCorridorEnv; expected keys from "
                       "('length', 'locked', 'noisy')"),
        ({"length": 7}, "Expected env config key 'length' to be an integer in [1, 6], received 7"),
        ({"length": 2.0}, "Expected env config key 'length' to be an integer in [1, 6], received 2.0"),
        ({"locked": 1}, "Expected env config key 'locked' to be a bool, received 1"),
        ([("length", 2)], "Expected `env_cfg` to be a mapping, received list"),
    ],
)
def test_bad_config_is_refused_by_name_and_changes_nothing(env_cfg, message) -> None:
    env = DoorCorridorEnv(max_length=6)
    env.set_env_config({"length": 2})
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.set_env_config(env_cfg)
    env.reset()
    assert env.config["length"] == 2  # the config pending before the bad one still applies


def test_bad_constructor_arguments_and_steps_are_refused() -> None:
    with pytest.raises(ValueError, match=f"^{re.escape('Expected `num_codes` to be at least 2, received 1')}$"):
        DoorCorridorEnv(num_codes=1)
    with pytest.raises(ValueError, match=f"^{re.escape('Expected `depth` to be an integer in [1, 3], received 4')}$"):
        CraftingChainEnv(max_depth=3, depth=4)
    message = "Expected `progress_share` to be a number in [0, 1), received 1.0"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        DoorCorridorEnv(progress_share=1.0)
    env = CraftingChainEnv(max_depth=3)
    message = "CraftingChainEnv.step() called with no running episode; call reset() first"
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        env.step(0)
    env.reset()
    with pytest.raises(ValueError, match=f"^{re.escape('Expected an action in Discrete(4), received 4')}$"):
        env.step(4)


@pytest.mark.parametrize("env_class", [DoorCorridorEnv, CraftingChainEnv])
def test_envs_pass_gymnasiums_checker(env_class) -> None:
    check_env(env_class(), skip_render_check=True)


# ---- families and the variant generator ------------------------------------------------------
def test_variant_cycle_generator_cycles_over_the_first_pool_then_draws_at_random() -> None:
    family = corridor_family()
    generator = family.generator
    assert isinstance(generator, VariantCycleGenerator)
    count = len(family.variants)
    assert generator.cycle_ids == family.default_pool_size == 2 * count
    for task_id in range(generator.cycle_ids):  # the first pool: every variant twice
        env_cfg, label = generator.generate(task_id)
        variant = family.variants[task_id % count]
        assert (env_cfg, label) == (variant.env_cfg, variant.label)
    later = [generator.generate(task_id)[1] for task_id in range(generator.cycle_ids, generator.cycle_ids + 5000)]
    assert later == [generator.generate(task_id)[1] for task_id in range(generator.cycle_ids, generator.cycle_ids + 5000)]
    shares = [later.count(v.label) / len(later) for v in family.variants]
    assert min(shares) > 0.08 and max(shares) < 0.12  # uniform over the variants (0.1 each)
    assert later[:count] != [v.label for v in family.variants]  # not the cycle
    generator.generate(0)[0]["length"] = 99  # a caller's edit never reaches the variant
    assert family.variants[0].env_cfg == {"length": 1}
    assert generator.labels == tuple(v.label for v in family.variants)
    message = "Expected `cycle_ids` to be a non-negative integer, received -1"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        VariantCycleGenerator(family.variants, cycle_ids=-1)


@pytest.mark.parametrize("name", list(TASK_FAMILIES))
def test_families_have_learnable_impossible_and_noisy_variants(name) -> None:
    family = TASK_FAMILIES[name]()
    kinds = {v.kind for v in family.variants}
    assert kinds == {LEARNABLE, IMPOSSIBLE, NOISY}
    difficulties = [v.difficulty for v in family.learnable]
    assert difficulties == sorted(difficulties) and len(difficulties) >= 5
    assert family.uniform_share(IMPOSSIBLE, NOISY) == pytest.approx(0.4)
    assert family.default_pool_size == 2 * len(family.variants)
    env = family.make_env(seed=1)
    for variant in family.variants:  # every variant's config is one the env accepts
        env.set_env_config(variant.env_cfg)
        env.reset()
        assert env.config[env.DIFFICULTY_KEY] == variant.difficulty


def test_family_refuses_duplicate_labels_and_unknown_kinds() -> None:
    variant = Variant("a", {"length": 1}, LEARNABLE, 1)
    message = "Expected distinct variant labels, received ['a', 'a']"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        LearnerTaskFamily("x", DoorCorridorEnv, (variant, variant))
    message = "Expected variant kind in ('learnable', 'impossible', 'noisy'), received 'easy'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        LearnerTaskFamily("x", DoorCorridorEnv, (Variant("b", {}, "easy", 1),))


def test_greedy_solution_solves_every_learnable_variant_and_no_other() -> None:
    """The families are solvable exactly where they should be: the known solution earns the
    success return on every learnable variant and on no impossible one."""
    for family in (corridor_family(), crafting_family()):
        env = family.make_env(seed=0)
        for variant in family.variants:
            if variant.kind == NOISY:
                continue
            env.set_env_config(variant.env_cfg)
            n = variant.difficulty
            solution = list(env.codes[:n]) if isinstance(env, DoorCorridorEnv) else list(range(n))
            rewards, terminated, _, _ = _play(env, solution * 3)
            solved = terminated and sum(rewards) >= family.success_return - 1e-9
            assert solved == (variant.kind == LEARNABLE), variant


def test_curriculum_wrapper_credits_each_episode_return_to_its_variant() -> None:
    family = crafting_family()
    config = CurriculumConfig(task_generator=family.generator, algorithm=UniformConfig(),
                              num_active_tasks=family.default_pool_size, seed=0)
    with Curriculum(config) as curriculum:
        env = GymCurriculumEnv(family.make_env(seed=0), curriculum, seed=0)
        for _ in range(30):
            env.reset()
            variant = next(v for v in family.variants if v.label == env.task.label)
            assert env.unwrapped.config == {"depth": 1, "depleted": False, "noisy": False, **variant.env_cfg}
            done, total, info = False, 0.0, {}
            while not done:
                _, reward, terminated, truncated, info = env.step(0)
                total += reward
                done = terminated or truncated
            assert info["curriculum_stats/score"] == pytest.approx(total)
            assert info[f"curriculum_stats/per_label_samples/{variant.label}"] == 1


def test_task_families_and_driver_import_without_torch() -> None:
    code = ("import sys; sys.modules['torch'] = None; import harness.learner_envs, harness.learners; "
            "assert sys.modules['torch'] is None; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
