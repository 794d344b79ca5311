"""Tests of `TaskDependencySimulator`: dynamics, options, validation, determinism, calibration."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from harness.simulator import TaskDependencySimulator


def practise(simulator: TaskDependencySimulator, task_index: int, times: int) -> list[float]:
    """Practise one task `times` episodes; the rewards."""
    return [simulator.sample_task(task_index) for _ in range(times)]


def samples_to_master_all(
    simulator: TaskDependencySimulator, choose: Callable[[TaskDependencySimulator, int], int], *, limit: int
) -> int | None:
    """Samples until every task is mastered at once (checked every 10 samples), or None."""
    n = simulator.num_tasks
    for step in range(limit):
        simulator.sample_task(choose(simulator, step))
        if step % 10 == 0 and simulator.num_mastered() == n:
            return step + 1
    return None


def first_unmastered(simulator: TaskDependencySimulator, step: int) -> int:
    for i in range(simulator.num_tasks):
        if not simulator.is_mastered(i):
            return i
    return simulator.num_tasks - 1


# ---------------------------------------------------------------- structure and basics
def test_default_is_a_ten_task_chain() -> None:
    simulator = TaskDependencySimulator()
    assert simulator.num_tasks == 10
    assert simulator.edges == tuple((i - 1, i) for i in range(1, 10))
    assert simulator.prerequisites(0) == ()
    assert simulator.prerequisites(4) == (3,)
    assert np.array_equal(simulator.performance, np.zeros(10))


def test_performance_is_a_copy() -> None:
    simulator = TaskDependencySimulator(3)
    practise(simulator, 0, 20)
    performance = simulator.performance
    performance[:] = 1.0
    assert simulator.performance[0] < 1.0
    assert simulator.task_performance(0) == pytest.approx(simulator.performance[0], rel=1e-12)


def test_rewards_stay_in_unit_interval() -> None:
    simulator = TaskDependencySimulator(4, noise_std=0.5, bias_scale=0.3, edges=[], seed=3)
    rewards = [simulator.sample_task(i % 4) for i in range(4000)]
    assert min(rewards) == 0.0
    assert max(rewards) == 1.0
    assert all(0.0 <= r <= 1.0 for r in rewards)


def test_reward_is_performance_plus_bias_without_noise() -> None:
    simulator = TaskDependencySimulator(2, edges=[], noise_std=0.0, bias_scale=0.05, forgetting_rate=0.0, seed=1)
    practise(simulator, 0, 50)
    expected = min(1.0, max(0.0, simulator.task_performance(0) + simulator.bias[0]))
    assert simulator.sample_task(0) == pytest.approx(expected, abs=1e-12)
    assert np.all(np.abs(simulator.bias) <= 0.05)


def test_is_mastered_uses_mastery_threshold_by_default() -> None:
    simulator = TaskDependencySimulator(2, edges=[], forgetting_rate=0.0)
    practise(simulator, 0, 60)
    p = simulator.task_performance(0)
    assert 0.3 < p < simulator.mastery_threshold
    assert not simulator.is_mastered(0)
    assert simulator.is_mastered(0, threshold=0.3)
    assert simulator.num_mastered(threshold=0.3) == 1
    practise(simulator, 0, 200)
    assert simulator.is_mastered(0)
    assert simulator.num_mastered() == 1


# ---------------------------------------------------------------- dynamics
def test_mastered_prerequisite_speeds_learning_of_its_dependant() -> None:
    prepared = TaskDependencySimulator(2, forgetting_rate=0.0, transfer=0.0)
    practise(prepared, 0, 400)
    assert prepared.is_mastered(0, threshold=0.95)
    practise(prepared, 1, 100)

    unprepared = TaskDependencySimulator(2, forgetting_rate=0.0, transfer=0.0)
    practise(unprepared, 1, 100)

    assert prepared.task_performance(1) > 0.5
    assert unprepared.task_performance(1) < 1e-3


def test_partly_mastered_prerequisite_gives_partial_speed() -> None:
    """The smooth gate: learning speed grows with the prerequisite's performance."""
    gains = []
    for prereq_practice in (100, 150, 400):
        simulator = TaskDependencySimulator(2, forgetting_rate=0.0, transfer=0.0)
        practise(simulator, 0, prereq_practice)
        practise(simulator, 1, 20)
        gains.append(simulator.task_performance(1))
    assert 0.0 < gains[0] < gains[1] < gains[2]


def test_mastered_prerequisite_transfers_a_little_without_practice() -> None:
    simulator = TaskDependencySimulator(3, forgetting_rate=0.0, transfer=0.1)
    practise(simulator, 0, 600)
    assert simulator.practice_counts.tolist() == [600, 0, 0]
    assert 0.05 < simulator.task_performance(1) <= 0.1
    assert simulator.task_performance(2) == 0.0  # transfer reaches direct dependants only

    without = TaskDependencySimulator(3, forgetting_rate=0.0, transfer=0.0)
    practise(without, 0, 600)
    assert without.task_performance(1) == 0.0


def test_forgetting_lowers_performance_without_practice() -> None:
    simulator = TaskDependencySimulator(2, edges=[], forgetting_rate=1e-3)
    practise(simulator, 0, 200)
    before = simulator.task_performance(0)
    practise(simulator, 1, 500)
    after = simulator.task_performance(0)
    assert after == pytest.approx(before * (1 - 1e-3) ** 500, rel=1e-12)
    assert simulator.performance[0] == pytest.approx(after, rel=1e-12)


def test_forgetting_is_not_changed_by_reading() -> None:
    """Reads are pure: observing performance never changes the trajectory."""
    watched = TaskDependencySimulator(4, seed=5)
    unwatched = TaskDependencySimulator(4, seed=5)
    order = np.random.default_rng(0).integers(0, 4, 3000).tolist()
    for i in order:
        watched.performance
        watched.is_mastered(3)
        assert watched.sample_task(i) == unwatched.sample_task(i)
    assert np.array_equal(watched.performance, unwatched.performance)


def test_impossible_task_in_zero_mode_pays_exactly_zero_and_never_learns() -> None:
    simulator = TaskDependencySimulator(3, impossible_tasks=[0], impossible_mode="zero", bias_scale=0.2)
    rewards = practise(simulator, 0, 2000)
    assert set(rewards) == {0.0}
    assert simulator.task_performance(0) == 0.0
    practise(simulator, 1, 500)
    assert simulator.task_performance(1) < 1e-3  # its dependant is gated forever
    assert simulator.impossible_tasks == (0,)


def test_impossible_task_in_noise_mode_pays_noise_and_never_learns() -> None:
    simulator = TaskDependencySimulator(
        3, edges=[], impossible_tasks=[2], impossible_mode="noise", impossible_level=0.4, noise_std=0.1
    )
    rewards = np.array(practise(simulator, 2, 2000))
    assert simulator.task_performance(2) == 0.0
    assert rewards.mean() == pytest.approx(0.4, abs=0.02)
    assert rewards.std() == pytest.approx(0.1, abs=0.02)
    first, second = rewards[:1000].mean(), rewards[1000:].mean()
    assert abs(second - first) < 0.02  # no trend: nothing to learn


def test_reward_latency_delays_growth() -> None:
    simulator = TaskDependencySimulator(2, edges=[], reward_latency=[30, 0], forgetting_rate=0.0)
    practise(simulator, 0, 30)
    practise(simulator, 1, 30)
    assert simulator.task_performance(0) == 0.0
    assert simulator.task_performance(1) > 0.2
    practise(simulator, 0, 1)
    assert simulator.task_performance(0) > 0.0


def test_scalar_reward_latency_applies_to_every_task() -> None:
    simulator = TaskDependencySimulator(3, edges=[], reward_latency=5)
    for i in range(3):
        practise(simulator, i, 5)
    assert np.array_equal(simulator.performance, np.zeros(3))
    practise(simulator, 2, 1)
    assert simulator.task_performance(2) > 0.0


def test_diamond_dag_needs_every_prerequisite() -> None:
    edges = [(0, 2), (1, 2)]
    one = TaskDependencySimulator(3, edges=edges, forgetting_rate=0.0, transfer=0.0)
    practise(one, 0, 400)
    practise(one, 2, 100)
    both = TaskDependencySimulator(3, edges=edges, forgetting_rate=0.0, transfer=0.0)
    practise(both, 0, 400)
    practise(both, 1, 400)
    practise(both, 2, 100)
    assert one.task_performance(2) < 1e-3
    assert both.task_performance(2) > 0.5
    assert both.prerequisites(2) == (0, 1)


def test_min_gate_is_set_by_the_weakest_prerequisite() -> None:
    edges = [(0, 2), (1, 2)]
    simulator = TaskDependencySimulator(3, edges=edges, gate="min", forgetting_rate=0.0, transfer=0.0)
    practise(simulator, 0, 400)
    practise(simulator, 1, 400)
    practise(simulator, 2, 100)
    assert simulator.task_performance(2) > 0.5


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_tasks": 0}, "Expected `num_tasks` to be a positive integer, received 0"),
        ({"num_tasks": 2.0}, "Expected `num_tasks` to be a positive integer, received 2.0"),
        (
            {"num_tasks": 3, "edges": [(0, 3)]},
            "Expected edge task indices in [0, 3), received edge (0, 3)",
        ),
        (
            {"num_tasks": 3, "edges": [(-1, 2)]},
            "Expected edge task indices in [0, 3), received edge (-1, 2)",
        ),
        (
            {"num_tasks": 3, "edges": [(0, 1, 2)]},
            "Expected each edge to be a (prerequisite, dependant) pair of task indices, received (0, 1, 2)",
        ),
        (
            {"num_tasks": 3, "edges": [(0, 1), (0, 1)]},
            "Expected each edge once, received edge (0, 1) twice",
        ),
        (
            {"num_tasks": 4, "edges": [(0, 1), (1, 2), (2, 3), (3, 1)]},
            "Expected `edges` to form an acyclic graph, found the cycle 1 -> 2 -> 3 -> 1",
        ),
        (
            {"num_tasks": 3, "edges": [(2, 2)]},
            "Expected `edges` to form an acyclic graph, found the cycle 2 -> 2",
        ),
        ({"learning_rate": 0.0}, "Expected `learning_rate` to be a number in (0, 1], received 0.0"),
        ({"forgetting_rate": 1.0}, "Expected `forgetting_rate` to be a number in [0, 1), received 1.0"),
        ({"mastery_width": 0.0}, "Expected `mastery_width` to be a positive finite number, received 0.0"),
        ({"gate": "max"}, "Expected `gate` to be one of ('product', 'min'), received 'max'"),
        (
            {"impossible_mode": "nan"},
            "Expected `impossible_mode` to be one of ('zero', 'noise'), received 'nan'",
        ),
        (
            {"num_tasks": 3, "impossible_tasks": [3]},
            "Expected `impossible_tasks` to hold task indices in [0, 3), received 3",
        ),
        (
            {"num_tasks": 3, "reward_latency": [1, 2]},
            "Expected `reward_latency` to be an integer or one integer per task (3), received 2 values",
        ),
        (
            {"reward_latency": -1},
            "Expected `reward_latency` values to be non-negative integers, received -1",
        ),
    ],
)
def test_invalid_arguments_are_refused_by_name(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        TaskDependencySimulator(**kwargs)


@pytest.mark.parametrize("task_index", [-1, 3, 1.0, True])
def test_sample_task_refuses_bad_task_index(task_index: object) -> None:
    simulator = TaskDependencySimulator(3)
    message = f"Expected `task_index` to be an integer in [0, 3), received {task_index!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        simulator.sample_task(task_index)  # type: ignore[arg-type]
    assert simulator.global_step == 0


def test_numpy_integer_task_index_is_accepted() -> None:
    simulator = TaskDependencySimulator(3)
    simulator.sample_task(np.int64(2))
    assert simulator.practice_counts.tolist() == [0, 0, 1]


# ---------------------------------------------------------------- determinism and state
def _reward_sequence(seed: int) -> list[float]:
    simulator = TaskDependencySimulator(5, seed=seed, impossible_tasks=[4], impossible_mode="noise")
    order = np.random.default_rng(123).integers(0, 5, 5000).tolist()
    return [simulator.sample_task(i) for i in order]


def test_same_seed_gives_identical_rewards() -> None:
    assert _reward_sequence(7) == _reward_sequence(7)


def test_different_seeds_give_different_rewards() -> None:
    a, b = _reward_sequence(7), _reward_sequence(8)
    assert a != b
    assert sum(x != y for x, y in zip(a, b)) > 4000


def test_state_dict_round_trip_continues_identically() -> None:
    simulator = TaskDependencySimulator(4, seed=11)
    order = np.random.default_rng(0).integers(0, 4, 6000).tolist()
    for i in order[:3000]:
        simulator.sample_task(i)
    state = simulator.state_dict()
    expected = [simulator.sample_task(i) for i in order[3000:]]

    restored = TaskDependencySimulator(4, seed=999)
    restored.load_state_dict(state)
    assert [restored.sample_task(i) for i in order[3000:]] == expected
    assert np.array_equal(restored.performance, simulator.performance)


def test_load_state_dict_refuses_another_structure() -> None:
    state = TaskDependencySimulator(4).state_dict()
    with pytest.raises(ValueError, match=f"^{re.escape('Expected a state for 5 tasks, received one for 4')}$"):
        TaskDependencySimulator(5).load_state_dict(state)
    message = "Expected a state with the same prerequisite edges as this simulator"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        TaskDependencySimulator(4, edges=[]).load_state_dict(state)


# ---------------------------------------------------------------- calibration
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frontier_practice_masters_the_chain_much_faster_than_uniform(seed: int) -> None:
    """Defaults: uniform ~19k samples, frontier ~3.7k (module docstring); asserted with margin."""
    draws = np.random.default_rng(seed + 1000).integers(0, 10, 60_000).tolist()
    uniform = samples_to_master_all(
        TaskDependencySimulator(10, seed=seed), lambda sim, step: draws[step], limit=60_000
    )
    frontier = samples_to_master_all(TaskDependencySimulator(10, seed=seed), first_unmastered, limit=60_000)
    assert uniform is not None and frontier is not None
    assert 10_000 <= uniform <= 40_000
    assert frontier * 3 <= uniform


def test_performance_list_matches_performance_under_forgetting() -> None:
    simulator = TaskDependencySimulator(6, forgetting_rate=1e-3, seed=3)
    for step in range(400):
        simulator.sample_task(step % 2)
    np.testing.assert_allclose(simulator.performance_list(), simulator.performance, rtol=1e-12)
    assert simulator.performance_list()[5] < simulator.performance_list()[0]
