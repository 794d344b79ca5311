"""Stats pipeline: accumulate_rollout_stats -> process_training_stats, sums vs means, names."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
import pufferlib.vector
import pytest

from env_doubles import FixedEpisodeEnv, two_label_config
from curriculum import (
    CurriculumConfigError,
    CurriculumEnv,
    accumulate_rollout_stats,
    gini_coefficient,
    normalized_entropy,
    process_training_stats,
)
from curriculum.stats import SUMMED_STATS, is_summed_stat


def test_accumulate_flattens_nested_dicts_and_keeps_numbers() -> None:
    stats: dict[str, list[float]] = {}
    infos = [
        {"task_dependency": {"performance": 0.5, "task": {"index": 3}}, "name": "skip me", "flag": True},
        {"task_dependency": {"performance": 0.25}, "per_agent": np.array([1.0, 3.0]), "listed": [2, 4]},
        {},
    ]
    assert accumulate_rollout_stats(infos, stats) is stats
    assert stats == {
        "task_dependency/performance": [0.5, 0.25],
        "task_dependency/task/index": [3],
        "flag": [1],
        "per_agent": [2.0],
        "listed": [3.0],
    }
    accumulate_rollout_stats({"task_dependency/performance": 1.0}, stats)  # one dict, flat keys
    assert stats["task_dependency/performance"] == [0.5, 0.25, 1.0]


@pytest.mark.parametrize(("value", "expected"), [
    ([0.25, 0.5, 1.0], 0.5833333333333334),
    ([True, False, True, True], 0.75),
    ([2**70, 0], 2.0**69),  # beyond int64: entry by entry
    ([1.0, np.array([1.0, 2.0])], 1.25),  # an entry that is an array counts as its mean
    ([1.0, [2.0, 3.0, 4.0]], 2.0),  # ragged: likewise
    ((0.5, 1.5), 1.0),
])
def test_a_list_counts_as_the_mean_of_its_entries(value: Any, expected: float) -> None:
    stats = accumulate_rollout_stats({"listed": value}, {})
    assert stats == {"listed": [pytest.approx(expected, rel=1e-12)]}


@pytest.mark.parametrize("value", [[1.0, "a"], [0.5, None], [], [{"a": 1.0}]])
def test_a_list_with_an_entry_that_is_no_number_is_skipped(value: Any) -> None:
    assert accumulate_rollout_stats({"listed": value, "kept": 1.0}, {}) == {"kept": [1.0]}


@pytest.mark.parametrize(
    ("key", "summed"),
    [
        ("curriculum_stats/per_label_samples/easy", True),
        ("curriculum_stats/per_label_completions/hard", True),
        ("curriculum_stats/completions", True),
        ("curriculum_stats/late_completions", True),
        ("curriculum_stats/episodes", True),
        ("curriculum_stats/desync_truncations", True),
        ("curriculum_stats/total_completions", False),  # a cumulative gauge every env repeats
        ("curriculum_stats/per_label_lp_scores/easy", False),
        ("exact_accounting/episode_length", False),
        ("curriculum_stats/pool_occupancy_gini", False),
    ],
)
def test_counters_are_summed_by_whole_key_parts(key: str, summed: bool) -> None:
    assert is_summed_stat(key) is summed
    metrics = process_training_stats({key: [1, 2, 3]}, agent_step=0, epoch=0)
    assert metrics[f"env_{key}"] == (6 if summed else 2.0)


def test_metric_names_follow_the_seeds() -> None:
    raw = {
        "curriculum_stats/score": [0.25, 0.75],
        "curriculum_stats/episodes": [1, 1],
        "curriculum_stats/completions": [1, 1],
        "curriculum_stats/sampling_entropy": [0.5],
        "curriculum_stats/pool_lp_gini": [0.2, 0.4],
        "curriculum_stats/task_id": [3, 9],
        "task_dependency/performance": [0.5],
        "resource_chain/hearts": [2, 4],
        "episode_return": [1.0, 3.0],
    }
    metrics = process_training_stats(raw, agent_step=1024, epoch=3, losses={"policy_loss": 0.5})
    assert metrics == {
        "env_curriculum_stats/completions": 2,
        "env_curriculum_stats/episodes": 2,
        "env_curriculum_stats/pool_lp_gini": pytest.approx(0.3),
        "env_curriculum_stats/sampling_entropy": 0.5,
        "env_curriculum_stats/score": 0.5,
        "env_episode_return": 2.0,
        "env_resource_chain/hearts": 3.0,
        "env_task_dependency/performance": 0.5,
        "losses/policy_loss": 0.5,
        "metric/agent_step": 1024,
        "metric/epoch": 3,
        "overview/completions": 2,
        "overview/episodes": 2,
        "overview/reward": 0.5,
        "overview/sampling_entropy_normalized": 0.5,
    }
    assert list(metrics) == sorted(metrics)
    assert all(type(v) in (int, float) for v in metrics.values())


def test_label_sampling_gini_and_entropy_from_per_label_samples() -> None:
    raw = {"curriculum_stats/per_label_samples/a": [1, 1, 1], "curriculum_stats/per_label_samples/b": [1]}
    metrics = process_training_stats(raw, agent_step=0, epoch=0)
    assert metrics["overview/label_sampling_gini"] == gini_coefficient([3, 1])
    assert metrics["overview/label_sampling_entropy"] == normalized_entropy([3, 1])


def test_per_label_counts_are_exact_through_wrapper_and_pipeline(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config())

    def creator(buf: Any = None, seed: int = 0) -> CurriculumEnv:
        return CurriculumEnv(FixedEpisodeEnv(buf=buf, seed=seed), curriculum, seed=seed, stats_interval=5)

    vecenv = pufferlib.vector.make(creator, backend=pufferlib.vector.Serial, num_envs=3)
    stats: dict[str, list[float]] = {}
    vecenv.reset()
    tags: Counter[int] = Counter()
    for _ in range(50):
        infos = vecenv.step(np.zeros(3, dtype=np.int32))[4]
        tags.update(info["fixed_episode"]["tag"] for info in infos)
        accumulate_rollout_stats(infos, stats)
    vecenv.close()
    metrics = process_training_stats(stats, agent_step=150, epoch=1)
    episodes = sum(tags.values())
    assert metrics["overview/episodes"] == metrics["overview/completions"] == episodes
    assert metrics["env_curriculum_stats/per_label_samples/easy"] == tags[1]
    assert metrics["env_curriculum_stats/per_label_samples/hard"] == tags[2]
    assert metrics["env_curriculum_stats/per_label_completions/easy"] == tags[1]
    assert metrics["overview/reward"] == 0.5
    assert curriculum.tracker.total_completions == episodes
    for key in ("pool_occupancy_gini", "pool_lp_gini", "sampling_gini", "mean_lp_score",
                "per_label_lp_scores/easy", "per_label_lp_scores/hard"):
        assert f"env_curriculum_stats/{key}" in metrics


def test_summed_stats_are_one_tuple() -> None:
    assert SUMMED_STATS == ("per_label_samples", "per_label_completions", "episodes", "completions",
                            "late_completions", "desync_truncations")


def test_bad_axis_values_are_refused() -> None:
    message = "Expected `agent_step` to be a non-negative integer, received -1"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        process_training_stats({}, agent_step=-1, epoch=0)


@pytest.mark.parametrize(("raw_stats", "losses", "message"), [
    (None, None, "Expected `raw_stats` to be a mapping of stat keys to lists of numbers (accumulate_rollout_stats), "
                 "received NoneType"),
    ({"score": "0.5"}, None, "Expected `raw_stats` to map stat keys to lists of numbers, received 'score': '0.5'"),
    ({"score": [0.5, None]}, None, "Expected `raw_stats` to hold real numbers, received None under 'score'"),
    ({}, [("policy", 0.5)], "Expected `losses` to be None or a mapping of names to numbers, received list"),
    ({}, {"policy": "0.5"}, "Expected `losses` to map names to real numbers, received 'policy': '0.5'"),
])
def test_raw_stats_and_losses_that_are_no_numbers_are_refused_by_name(raw_stats: Any, losses: Any,
                                                                      message: str) -> None:
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        process_training_stats(raw_stats, agent_step=0, epoch=0, losses=losses)


def test_raw_stats_of_numpy_numbers_are_reduced_to_plain_numbers() -> None:
    metrics = process_training_stats({"score": np.array([0.25, 0.75], dtype=np.float32), "episodes": [np.int64(2)]},
                                     agent_step=0, epoch=0, losses={"policy": np.float32(0.5)})
    assert metrics["env_score"] == 0.5 and metrics["env_episodes"] == 2 and metrics["losses/policy"] == 0.5
    assert all(type(value) in (int, float) for value in metrics.values()), metrics
