"""Tests of the harness envs, stepped directly and through real `pufferlib.vector` backends."""

from __future__ import annotations

import functools
import math
import multiprocessing
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pufferlib
import pufferlib.vector
import pytest

from harness.envs import ExactAccountingEnv, GymExactAccountingEnv, ResourceChainEnv, TaskDependencyEnv
from harness.episodes import EPISODE_RECORD_KEY
from harness.simulator import TaskDependencySimulator

NOOP = np.zeros(1, dtype=np.int32)


def run_episode(env: Any) -> tuple[list[float], list[dict[str, Any]], bool, bool]:
    """Reset and step `env` to the end of one episode: per-step rewards, infos, terminal, truncated."""
    env.reset()
    rewards: list[float] = []
    while True:
        _, reward, terminal, truncated, infos = env.step(NOOP)
        rewards.append(float(reward[0]))
        if terminal[0] or truncated[0]:
            return rewards, infos, bool(terminal[0]), bool(truncated[0])
        assert infos == []


class ResetOnDone(pufferlib.PufferEnv):
    """A minimal stand-in for a curriculum wrapper: resets the env on the step after an episode
    ends, applying the next config of a fixed schedule at each reset."""

    def __init__(
        self,
        make_env: Callable[..., Any],
        schedule: Sequence[Mapping[str, Any]],
        *,
        buf: dict[str, np.ndarray] | None = None,
        seed: int = 0,
    ) -> None:
        self.env = make_env(buf=buf, seed=seed)
        self.single_observation_space = self.env.single_observation_space
        self.single_action_space = self.env.single_action_space
        self.num_agents = self.env.num_agents
        super().__init__(buf)
        self.observations, self.rewards = self.env.observations, self.env.rewards
        self.terminals, self.truncations = self.env.terminals, self.env.truncations
        self.schedule = list(schedule)
        self.resets = 0
        self.needs_reset = False

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        self.env.set_env_config(self.schedule[self.resets % len(self.schedule)])
        self.resets += 1
        self.needs_reset = False
        return self.env.reset()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        if self.needs_reset:
            self.reset()
        result = self.env.step(actions)
        self.needs_reset = bool(result[2][0] or result[3][0])
        return result

    def close(self) -> None:
        self.env.close()


# ---------------------------------------------------------------- shared contract
@pytest.mark.parametrize("make_env", [TaskDependencyEnv, ExactAccountingEnv, ResourceChainEnv])
def test_step_without_a_running_episode_raises(make_env: Callable[[], Any]) -> None:
    env = make_env()
    name = type(env).__name__
    message = (
        f"{name}.step() called with no running episode; call reset() first "
        "(the harness envs never reset themselves)"
    )
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        env.step(NOOP)
    run_episode(env)
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        env.step(NOOP)
    env.close()


@pytest.mark.parametrize(
    ("make_env", "keys"),
    [
        (TaskDependencyEnv, "('task_index',)"),
        (ExactAccountingEnv, "('reward_per_step', 'episode_length', 'end')"),
        (ResourceChainEnv, "('max_steps', 'ore_reward', 'battery_reward', 'heart_reward')"),
    ],
)
def test_unknown_config_keys_are_refused_by_name(make_env: Callable[[], Any], keys: str) -> None:
    env = make_env()
    message = f"Unknown env config key(s) 'max_step' for {type(env).__name__}; expected keys from {keys}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.set_env_config({"max_step": 3, "label": "x"})
    with pytest.raises(ValueError, match=f"^{re.escape('Expected `env_cfg` to be a mapping, received list')}$"):
        env.set_env_config([("task_index", 1)])  # type: ignore[arg-type]


# ---------------------------------------------------------------- TaskDependencyEnv
def test_task_dependency_env_rewards_come_from_its_simulator() -> None:
    env = TaskDependencyEnv(num_tasks=4, episode_length=5, seed=3, simulator_kwargs={"edges": []})
    twin = TaskDependencySimulator(4, seed=3, edges=[])
    env.set_env_config({"task_index": 2, "label": "task_2"})
    rewards, infos, terminal, truncated = run_episode(env)
    grid = 2.0**20  # multi-step episodes pay multiples of 2**-20: exact in the float32 reward buffer
    expected = [math.floor(twin.sample_task(2) / 5 * grid) / grid for _ in range(5)]
    assert rewards == expected
    assert (terminal, truncated) == (True, False)
    info = infos[0]["task_dependency"]
    assert info["task_index"] == 2
    assert info["performance"] == env.simulator.performance[2] == twin.performance[2]
    assert info["mean_performance"] == pytest.approx(float(twin.performance.mean()))
    assert info["num_mastered"] == 0
    assert info["episode_return"] == pytest.approx(sum(expected))
    assert env.simulator.practice_counts.tolist() == [0, 0, 5, 0]


def test_task_dependency_env_applies_task_only_at_reset() -> None:
    env = TaskDependencyEnv(episode_length=3)
    obs, infos = env.reset()
    assert infos == []
    assert obs[0].tolist() == [0.0, 0.0]  # task 0 before any config
    env.step(NOOP)
    env.set_env_config({"task_index": 7})
    obs, *_ = env.step(NOOP)
    assert obs[0].tolist() == [0.0, 2.0]
    *_, infos = env.step(NOOP)
    assert infos[0]["task_dependency"]["task_index"] == 0
    obs, _ = env.reset()
    assert obs[0, 0] == 7.0
    run_episode(env)  # the config persists across resets
    assert env.task_index == 7
    assert env.simulator.practice_counts[[0, 7]].tolist() == [3, 3]


def test_task_dependency_env_reports_mastery() -> None:
    env = TaskDependencyEnv(num_tasks=3, episode_length=100, simulator_kwargs={"forgetting_rate": 0.0})
    env.set_env_config({"task_index": 0})
    for _ in range(4):
        _, infos, _, _ = run_episode(env)
    info = infos[0]["task_dependency"]
    assert info["performance"] > env.simulator.mastery_threshold
    assert info["num_mastered"] == 1


@pytest.mark.parametrize(
    ("env_cfg", "message"),
    [
        ({"label": "x"}, "Expected env config key 'task_index' (an int task index), but it is missing"),
        ({"task_index": 10}, "Expected env config key 'task_index' to be an integer in [0, 10), received 10"),
        ({"task_index": "1"}, "Expected env config key 'task_index' to be an integer in [0, 10), received '1'"),
    ],
)
def test_task_dependency_env_refuses_bad_config(env_cfg: dict, message: str) -> None:
    env = TaskDependencyEnv()
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.set_env_config(env_cfg)


def test_task_dependency_env_refuses_conflicting_arguments() -> None:
    message = "Expected `simulator_kwargs` only without a `simulator`, received {'seed': 1}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        TaskDependencyEnv(TaskDependencySimulator(), simulator_kwargs={"seed": 1})
    message = "Expected `episode_length` to be a positive integer, received 0"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        TaskDependencyEnv(episode_length=0)


def test_task_dependency_env_under_serial_shares_one_student() -> None:
    student = TaskDependencySimulator(10, seed=0)
    vecenv = pufferlib.vector.make(
        functools.partial(TaskDependencyEnv, student, episode_length=4),
        backend=pufferlib.vector.Serial,
        num_envs=4,
    )
    try:
        for i, env in enumerate(vecenv.envs):
            assert env.simulator is student
            env.set_env_config({"task_index": i})
        vecenv.reset()
        actions = np.zeros(4, dtype=np.int32)
        for step in range(4):
            _, rewards, terminals, truncations, infos = vecenv.step(actions)
            assert terminals.tolist() == [step == 3] * 4
            assert not truncations.any()
        assert [info["task_dependency"]["task_index"] for info in infos] == [0, 1, 2, 3]
        assert student.practice_counts.tolist() == [4, 4, 4, 4, 0, 0, 0, 0, 0, 0]
        assert student.global_step == 16
    finally:
        vecenv.close()


# ---------------------------------------------------------------- ExactAccountingEnv
def test_exact_accounting_env_totals() -> None:
    env = ExactAccountingEnv(reward_per_step=0.25, episode_length=4)
    for episode in range(3):
        rewards, infos, terminal, truncated = run_episode(env)
        assert rewards == [0.25] * 4
        (info,) = infos
        record = info.pop(EPISODE_RECORD_KEY)
        assert info == {"exact_accounting": {"episode_return": 1.0, "episode_length": 4}}
        assert (terminal, truncated) == (True, False)
        assert (record.env, record.index, record.returns, record.ended, record.steps) == (
            env.name, episode, (1.0,), "terminal", 4)
        assert record.config == {"reward_per_step": [0.25], "episode_length": [4], "end": "terminal"}
    assert (env.episodes_completed, env.steps_taken, env.total_reward) == (3, 12, 3.0)


def test_episode_records_carry_the_task_metadata_of_the_config_that_ran() -> None:
    env = ExactAccountingEnv(episode_length=2)
    env.set_env_config({"episode_length": 3, "label": "long"})
    _, infos, _, _ = run_episode(env)
    record = infos[0][EPISODE_RECORD_KEY]
    assert (record.label, record.steps, record.config["episode_length"]) == ("long", 3, [3])
    assert record.identity == "long:[('end', 'terminal'), ('episode_length', [3]), ('reward_per_step', [1.0])]"
    _, infos, _, _ = run_episode(env)  # no new config: the same task again
    assert (infos[0][EPISODE_RECORD_KEY].identity, infos[0][EPISODE_RECORD_KEY].index) == (record.identity, 1)


@pytest.mark.parametrize("done_flags", ["hold", "pulse"])
def test_exact_accounting_agents_end_at_their_own_steps(done_flags: str) -> None:
    env = ExactAccountingEnv(num_agents=3, reward_per_step=[1.0, 0.5, 0.25], episode_length=[2, 4, 3],
                             done_flags=done_flags)
    env.reset()
    flags, paid = [], []
    for _ in range(4):
        _, rewards, terminals, truncations, infos = env.step(np.zeros(3, dtype=np.int32))
        flags.append(terminals.tolist())
        paid.append(rewards.tolist())
        assert not truncations.any()
    assert paid == [[1.0, 0.5, 0.25], [1.0, 0.5, 0.25], [0.0, 0.5, 0.25], [0.0, 0.5, 0.0]]
    if done_flags == "hold":
        assert flags == [[False] * 3, [True, False, False], [True, False, True], [True, True, True]]
    else:
        assert flags == [[False] * 3, [True, False, False], [False, False, True], [False, True, False]]
    record = infos[0][EPISODE_RECORD_KEY]
    assert (record.returns, record.steps, record.ended) == ((2.0, 2.0, 0.75), 4, "terminal")
    assert env.total_reward == 4.75


def test_exact_accounting_at_end_writes_each_return_once_and_leaves_the_buffer_alone() -> None:
    env = ExactAccountingEnv(num_agents=3, reward_per_step=[1.0, 0.5, 0.25], episode_length=[2, 4, 3],
                             after_done_reward=0.5, rewards="at_end")
    env.reset()
    paid = []
    for _ in range(4):
        _, rewards, _, _, infos = env.step(np.zeros(3, dtype=np.int32))
        paid.append(rewards.tolist())
    # each return at its agent's done step; a done agent's stays in the buffer, unwritten
    assert paid == [[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [2.0, 0.0, 0.75], [2.0, 2.0, 0.75]]
    assert infos[0][EPISODE_RECORD_KEY].returns == (2.0, 2.0, 0.75) and env.total_reward == 4.75
    env.reset()
    assert env.rewards.tolist() == [0.0] * 3
    with pytest.raises(ValueError, match=re.escape("Expected `rewards` to be one of ('every_step', 'at_end'), "
                                                   "received 'sparse'")):
        ExactAccountingEnv(rewards="sparse")


def test_exact_accounting_after_done_rewards_are_in_no_return_but_in_the_reported_totals() -> None:
    env = ExactAccountingEnv(num_agents=3, reward_per_step=[1.0, 0.5, 0.25], episode_length=[2, 4, 3],
                             after_done_reward=0.5, reports_returns=True)
    env.reset()
    paid, reported = [], []
    for _ in range(4):
        _, rewards, _, _, infos = env.step(np.zeros(3, dtype=np.int32))
        paid.append(rewards.tolist())
        reported.append(env.get_episode_rewards().tolist())
    assert paid == [[1.0, 0.5, 0.25], [1.0, 0.5, 0.25], [0.5, 0.5, 0.25], [0.5, 0.5, 0.5]]
    assert reported[1][0] == 2.0 and reported[2][2] == 0.75  # each agent's return, read at its done step
    assert reported[-1] == [3.0, 2.0, 1.25]  # read later, it has grown
    assert infos[0][EPISODE_RECORD_KEY].returns == (2.0, 2.0, 0.75)
    env.reset()
    assert env.get_episode_rewards().tolist() == [0.0] * 3
    assert not hasattr(ExactAccountingEnv(), "get_episode_rewards")  # wrappers then sum the rewards


@pytest.mark.parametrize(("end", "desync"), [("truncated", False), ("desync", True)])
def test_exact_accounting_truncated_ends(end: str, desync: bool) -> None:
    env = ExactAccountingEnv(episode_length=2, end=end)
    _, infos, terminal, truncated = run_episode(env)
    assert (terminal, truncated) == (False, True)
    assert infos[0][EPISODE_RECORD_KEY].ended == end
    assert infos[0]["exact_accounting"].get("truncated_by_desync", False) is desync
    assert env.desync_truncation is False  # the info flag is the signal


@pytest.mark.parametrize(("end", "flag", "truncated"), [("terminal", True, False), ("truncated", False, True),
                                                       ("desync", True, True)])
def test_exact_accounting_loose_desync_flag_is_in_every_last_info(end: str, flag: bool, truncated: bool) -> None:
    env = ExactAccountingEnv(episode_length=2, end=end, desync_signal="loose")
    _, infos, _, was_truncated = run_episode(env)
    assert was_truncated is truncated and infos[0]["exact_accounting"]["truncated_by_desync"] is flag
    assert infos[0][EPISODE_RECORD_KEY].ended == end


def test_exact_accounting_desync_signalled_by_attribute() -> None:
    env = ExactAccountingEnv(episode_length=2, end="desync", desync_signal="attribute")
    _, infos, _, truncated = run_episode(env)
    assert truncated and env.desync_truncation is True
    assert "truncated_by_desync" not in infos[0]["exact_accounting"]
    env.reset()
    assert env.desync_truncation is False
    with pytest.raises(ValueError, match="^Expected `desync_signal` to be one of \\('info', 'nested', 'attribute', "
                                         "'loose', 'split', 'first', 'mixed'\\), received 'x'$"):
        ExactAccountingEnv(desync_signal="x")
    nested = ExactAccountingEnv(episode_length=2, end="desync", desync_signal="nested")
    _, infos, _, truncated = run_episode(nested)
    assert truncated and infos[0]["exact_accounting"]["cut"] == {"truncated_by_desync": True}
    assert nested.desync_truncation is False
    split = ExactAccountingEnv(episode_length=2, end="desync", desync_signal="split")
    _, infos, _, truncated = run_episode(split)
    assert truncated and infos[0]["exact_accounting"]["truncated_by_desync"] is True and infos[1:] == [{}]


def test_exact_accounting_desync_attribute_set_from_the_first_agents_cut() -> None:
    env = ExactAccountingEnv(num_agents=3, episode_length=[1, 2, 3], end="desync", desync_signal="attribute")
    env.reset()
    seen = []
    for _ in range(3):
        env.step(np.zeros(3, dtype=np.int32))
        seen.append((env.truncations.tolist(), env.desync_truncation))
    assert seen == [([True, False, False], True), ([True, True, False], True), ([True, True, True], True)]
    env.reset()
    assert env.desync_truncation is False


def test_exact_accounting_mixed_desync_signal_truncates_one_agent_and_terminates_the_others() -> None:
    env = ExactAccountingEnv(num_agents=3, episode_length=2, end="desync", desync_signal="mixed")
    env.reset()
    env.step(np.zeros(3, dtype=np.int32))
    _, _, terminals, truncations, infos = env.step(np.zeros(3, dtype=np.int32))
    assert truncations.tolist() == [True, False, False] and terminals.tolist() == [False, True, True]
    assert infos[0]["exact_accounting"]["truncated_by_desync"] is True
    assert infos[0][EPISODE_RECORD_KEY].ended == "desync"
    env.reset()
    assert not env.terminals.any() and not env.truncations.any()
    plain = ExactAccountingEnv(num_agents=3, episode_length=2, end="truncated", desync_signal="mixed")
    plain.reset()
    plain.step(np.zeros(3, dtype=np.int32))
    _, _, terminals, truncations, _ = plain.step(np.zeros(3, dtype=np.int32))
    assert truncations.all() and not terminals.any()  # a time limit truncates every agent


def test_gym_exact_accounting_mixed_cut_terminates_and_truncates_and_starts_fail_now_and_then() -> None:
    env = GymExactAccountingEnv(episode_length=2, end="desync", desync_signal="mixed", fail_every_reset=2)
    env.reset()
    env.step(0)
    _, _, terminated, truncated, info = env.step(0)
    assert bool(terminated) and bool(truncated) and info["exact_accounting"]["truncated_by_desync"] is True
    with pytest.raises(RuntimeError, match="failed"):
        env.reset(seed=3)
    assert env.resets == [(None, None)]  # the failed start is not counted as one
    env.reset(seed=3)
    assert env.resets == [(None, None), (3, None)]
    plain = GymExactAccountingEnv(episode_length=2, end="truncated", desync_signal="mixed")
    plain.reset()
    plain.step(0)
    _, _, terminated, truncated, _ = plain.step(0)
    assert not terminated and truncated


def test_exact_accounting_first_desync_signal_flags_the_step_that_cuts_the_first_agents() -> None:
    env = ExactAccountingEnv(num_agents=3, episode_length=[2, 4, 3], end="desync", desync_signal="first")
    for _ in range(2):  # the flag is raised once per episode, again after a reset
        env.reset()
        step_infos = [env.step(np.zeros(3, dtype=np.int32))[4] for _ in range(4)]
        assert step_infos[0] == [] and step_infos[2] == []
        assert step_infos[1] == [{"exact_accounting": {"truncated_by_desync": True}}]
        assert "truncated_by_desync" not in step_infos[3][0]["exact_accounting"]
        assert step_infos[3][0][EPISODE_RECORD_KEY].ended == "desync"
    one_agent = ExactAccountingEnv(episode_length=2, end="desync", desync_signal="first")
    _, infos, _, truncated = run_episode(one_agent)  # the cut and the end are one step: as "info"
    assert truncated and infos[0]["exact_accounting"]["truncated_by_desync"] is True


def test_exact_accounting_dict_infos_share_keys_between_reset_and_episode_end() -> None:
    env = ExactAccountingEnv(reward_per_step=0.5, episode_length=3, infos="dict")
    _, reset_info = env.reset()
    assert reset_info == {"exact_accounting": {"episode_return": 0.0, "episode_length": 0}}
    actions = np.zeros(1, dtype=np.int32)
    assert [env.step(actions)[4] for _ in range(2)] == [{"exact_accounting": {"step": 1}},
                                                        {"exact_accounting": {"step": 2}}]
    info = env.step(actions)[4]
    assert info["exact_accounting"] == {"episode_return": 1.5, "episode_length": 3}
    record = info[EPISODE_RECORD_KEY]
    assert record.reported == {"exact_accounting": {"episode_return": 1.5, "episode_length": 3}}
    info["exact_accounting"]["episode_return"] = 0.0  # the record keeps its own copy
    assert record.reported["exact_accounting"]["episode_return"] == 1.5
    assert type(reset_info) is dict and type(info) is OrderedDict  # (a dict subclass once an odd number ended)
    with pytest.raises(ValueError, match="^Expected `infos` to be one of \\('list', 'dict', 'log', 'none', 'dict-log', "
                                         "'tuple'\\), received 'set'$"):
        ExactAccountingEnv(infos="set")


def test_exact_accounting_tuple_infos_hold_the_list_dicts_in_a_tuple() -> None:
    env = ExactAccountingEnv(reward_per_step=0.5, episode_length=2, infos="tuple", desync_signal="split")
    assert env.reset()[1] == ({"exact_accounting": {"episode_return": 0.0, "episode_length": 0}},)
    actions = np.zeros(1, dtype=np.int32)
    assert env.step(actions)[4] == ()
    infos = env.step(actions)[4]
    assert type(infos) is tuple and len(infos) == 2 and infos[1] == {}
    assert infos[0]["exact_accounting"] == {"episode_return": 1.0, "episode_length": 2}


def test_exact_accounting_none_infos_return_none_on_ordinary_steps() -> None:
    env = ExactAccountingEnv(reward_per_step=0.5, episode_length=2, infos="none")
    assert env.reset()[1] == []
    actions = np.zeros(1, dtype=np.int32)
    assert env.step(actions)[4] is None
    assert env.step(actions)[4][0]["exact_accounting"] == {"episode_return": 1.0, "episode_length": 2}


def test_exact_accounting_log_infos_are_one_dict_whose_own_keys_the_env_rewrites() -> None:
    env = ExactAccountingEnv(reward_per_step=0.5, episode_length=2, infos="log")
    env.reset()
    actions = np.zeros(1, dtype=np.int32)
    (log,) = env.step(actions)[4]
    assert log == {"exact_accounting": {"step": 1}}
    log["written_by_a_wrapper"] = 1  # a key the env did not write stays, as in a real running log
    (end,) = env.step(actions)[4]
    assert end is log and end["exact_accounting"] == {"episode_return": 1.0, "episode_length": 2}
    assert EPISODE_RECORD_KEY in end and end["written_by_a_wrapper"] == 1
    env.reset()
    (after,) = env.step(actions)[4]
    assert after is log and after == {"exact_accounting": {"step": 1}, "written_by_a_wrapper": 1}


def test_exact_accounting_dict_log_infos_are_the_log_dict_itself() -> None:
    env = ExactAccountingEnv(reward_per_step=0.5, episode_length=2, infos="dict-log")
    assert env.reset()[1] == {}
    actions = np.zeros(1, dtype=np.int32)
    log = env.step(actions)[4]
    assert log == {"exact_accounting": {"step": 1}}
    log["written_by_a_wrapper"] = 1
    end = env.step(actions)[4]
    assert end is log and end["exact_accounting"] == {"episode_return": 1.0, "episode_length": 2}
    assert end["written_by_a_wrapper"] == 1


def test_exact_accounting_list_infos_reset_with_one_dict_of_the_new_episode() -> None:
    env = ExactAccountingEnv(episode_length=2)
    assert env.reset()[1] == [{"exact_accounting": {"episode_return": 0.0, "episode_length": 0}}]


def test_exact_accounting_episode_counter_counts_every_ended_episode() -> None:
    ended = multiprocessing.Value("q", 0)
    env = ExactAccountingEnv(episode_length=3, episode_counter=ended)
    env.reset()
    for _ in range(10):
        if env.step(np.zeros(1, dtype=np.int32))[2].all():
            env.reset()
    assert ended.value == env.episodes_completed == 3


def test_exact_accounting_refuses_per_agent_settings_of_the_wrong_size() -> None:
    env = ExactAccountingEnv(num_agents=2)
    message = "Expected env config key 'episode_length' to hold one value per agent (2), received [1, 2, 3]"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.set_env_config({"episode_length": [1, 2, 3]})
    message = "Expected env config key 'end' to be one of ('terminal', 'truncated', 'desync'), received 'late'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.set_env_config({"end": "late"})


def test_exact_accounting_env_applies_config_only_at_reset() -> None:
    env = ExactAccountingEnv(reward_per_step=1.0, episode_length=3)
    obs, _ = env.reset()
    assert obs[0].tolist() == [3.0, 1.0, 0.0]
    env.step(NOOP)
    env.set_env_config({"episode_length": 5, "reward_per_step": 0.5})
    obs, rewards, terminals, _, _ = env.step(NOOP)
    assert obs[0].tolist() == [3.0, 1.0, 2.0]
    assert rewards[0] == 1.0
    *_, terminals, _, infos = env.step(NOOP)
    assert terminals[0] and infos[0]["exact_accounting"] == {"episode_return": 3.0, "episode_length": 3}

    rewards, infos, _, _ = run_episode(env)
    assert rewards == [0.5] * 5
    assert env.observations[0].tolist() == [5.0, 0.5, 5.0]
    env.set_env_config({"reward_per_step": 2.0})  # keys left out take the constructor default
    rewards, _, _, _ = run_episode(env)
    assert rewards == [2.0] * 3
    assert (env.episodes_completed, env.steps_taken, env.total_reward) == (3, 11, 11.5)


@pytest.mark.parametrize(
    ("env_cfg", "message"),
    [
        ({"episode_length": 0}, "Expected env config key 'episode_length' to be a positive integer, received 0"),
        ({"episode_length": 2.5}, "Expected env config key 'episode_length' to be a positive integer, received 2.5"),
        (
            {"reward_per_step": float("nan")},
            "Expected env config key 'reward_per_step' to be a finite number, received nan",
        ),
    ],
)
def test_exact_accounting_env_refuses_bad_config(env_cfg: dict, message: str) -> None:
    env = ExactAccountingEnv()
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.set_env_config(env_cfg)


def test_exact_accounting_env_with_two_agents_reports_one_info_per_episode() -> None:
    env = ExactAccountingEnv(episode_length=2, num_agents=2)
    env.reset()
    _, rewards, _, _, infos = env.step(np.zeros(2, dtype=np.int32))
    assert rewards.tolist() == [1.0, 1.0] and infos == []
    _, _, terminals, _, infos = env.step(np.zeros(2, dtype=np.int32))
    assert terminals.tolist() == [True, True]
    assert len(infos) == 1


def test_exact_accounting_env_under_serial_has_exact_totals() -> None:
    vecenv = pufferlib.vector.make(
        ExactAccountingEnv,
        env_kwargs={"reward_per_step": 0.5, "episode_length": 5},
        backend=pufferlib.vector.Serial,
        num_envs=4,
    )
    try:
        actions = np.zeros(4, dtype=np.int32)
        reward_sum, episodes = 0.0, 0
        for _ in range(3):
            vecenv.reset()
            for _ in range(5):
                _, rewards, terminals, _, infos = vecenv.step(actions)
                reward_sum += float(rewards.sum())
                episodes += len(infos)
            assert terminals.all()
        assert (reward_sum, episodes) == (30.0, 12)
        assert [(e.episodes_completed, e.steps_taken, e.total_reward) for e in vecenv.envs] == [(3, 15, 7.5)] * 4
    finally:
        vecenv.close()


SCHEDULE = ({"episode_length": 3, "reward_per_step": 1.0}, {"episode_length": 5, "reward_per_step": 0.25})


def expected_accounting(num_steps: int) -> tuple[list[float], list[float], int]:
    """Per-step rewards and observed episode lengths of one `ResetOnDone` env under SCHEDULE."""
    rewards, obs_lengths, episodes, k = [], [], 0, 0
    while len(rewards) < num_steps:
        cfg = SCHEDULE[k % 2]
        k += 1
        for _ in range(cfg["episode_length"]):
            rewards.append(cfg["reward_per_step"])
            obs_lengths.append(float(cfg["episode_length"]))
        episodes += 1
    return rewards[:num_steps], obs_lengths[:num_steps], episodes


@pytest.mark.multiprocessing
def test_exact_accounting_env_under_multiprocessing_has_exact_totals() -> None:
    """Two worker processes, a config change at every reset, 8 episodes each: nothing lost."""
    num_steps = 32  # 4 x (3 + 5): every env ends its 8th episode on the last step
    vecenv = pufferlib.vector.make(
        ResetOnDone,
        env_args=[ExactAccountingEnv, SCHEDULE],
        backend=pufferlib.vector.Multiprocessing,
        num_envs=2,
        num_workers=2,
        overwork=True,
    )
    try:
        vecenv.reset()
        actions = np.zeros(2, dtype=np.int32)
        reward_sum, infos_seen, obs_lengths = 0.0, [], []
        for _ in range(num_steps):
            obs, rewards, terminals, truncations, infos = vecenv.step(actions)
            reward_sum += float(rewards.sum())
            infos_seen.extend(infos)
            obs_lengths.append(obs[:, 0].tolist())
            assert not truncations.any()
        expected_rewards, expected_lengths, episodes = expected_accounting(num_steps)
        assert terminals.tolist() == [True, True]
        assert reward_sum == 2 * sum(expected_rewards) == 2 * 4 * (3 * 1.0 + 5 * 0.25)
        assert len(infos_seen) == 2 * episodes == 16
        assert sorted(info["exact_accounting"]["episode_return"] for info in infos_seen) == [1.25] * 8 + [3.0] * 8
        assert obs_lengths == [[length, length] for length in expected_lengths]  # config changed only at resets
    finally:
        vecenv.close()


# ---------------------------------------------------------------- ResourceChainEnv
def test_resource_chain_first_heart_and_full_episode() -> None:
    env = ResourceChainEnv()
    assert env.first_heart_step == 85
    rewards, infos, terminal, truncated = run_episode(env)
    paying = [(step + 1, round(r, 6)) for step, r in enumerate(rewards) if r]
    assert paying[:6] == [(50, 0.1), (75, 0.8), (85, 1.0), (100, 0.1), (125, 0.8), (135, 1.0)]
    assert len(rewards) == 1000 and (terminal, truncated) == (True, False)
    info = infos[0]["resource_chain"]
    assert {k: info[k] for k in ("hearts", "ore", "batteries", "episode_length", "truncated_by_desync")} == {
        "hearts": 19,
        "ore": 20,
        "batteries": 19,
        "episode_length": 1000,
        "truncated_by_desync": False,
    }
    assert info["episode_return"] == pytest.approx(36.2)
    assert env.production_counts(1000) == (20, 19, 19)
    assert env.production_counts(84) == (1, 1, 0)
    assert env.production_counts(85) == (1, 1, 1)
    assert env.observations[0].tolist() == [1000.0, 20.0, 19.0, 19.0]
    assert run_episode(env)[0] == rewards  # no desync: every episode is the same


def test_resource_chain_config_applies_at_reset() -> None:
    env = ResourceChainEnv(max_steps=100)
    env.reset()
    env.set_env_config({"max_steps": 90, "heart_reward": 5.0})
    for _ in range(99):
        env.step(NOOP)
    *_, terminals, _, infos = env.step(NOOP)
    assert terminals[0] and infos[0]["resource_chain"]["episode_length"] == 100
    rewards, infos, _, _ = run_episode(env)
    assert len(rewards) == 90 and rewards[84] == 5.0
    assert env.max_steps == 90
    message = "Expected env config key 'max_steps' to be a positive integer, received -5"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.set_env_config({"max_steps": -5})


def test_resource_chain_truncate_desync_cuts_only_the_first_episode() -> None:
    cuts = []
    for seed in range(8):
        env = ResourceChainEnv(max_steps=200, desync="truncate", seed=seed)
        rewards, infos, terminal, truncated = run_episode(env)
        info = infos[0]["resource_chain"]
        assert (terminal, truncated, info["truncated_by_desync"]) == (False, True, True)
        assert 1 <= len(rewards) <= 200 and info["episode_length"] == len(rewards)
        assert (info["ore"], info["batteries"], info["hearts"]) == env.production_counts(len(rewards))
        cuts.append(len(rewards))
        rewards, infos, terminal, truncated = run_episode(env)
        assert (len(rewards), terminal, truncated) == (200, True, False)
        assert not infos[0]["resource_chain"]["truncated_by_desync"]
    assert len(set(cuts)) >= 4
    again = ResourceChainEnv(max_steps=200, desync="truncate", seed=3)
    assert len(run_episode(again)[0]) == cuts[3]  # the cut is a function of the seed


def test_resource_chain_legacy_desync_gives_a_shorter_full_first_episode() -> None:
    lengths = []
    for seed in range(8):
        env = ResourceChainEnv(max_steps=200, desync="legacy", seed=seed)
        rewards, infos, terminal, truncated = run_episode(env)
        assert (terminal, truncated) == (True, False)
        assert not infos[0]["resource_chain"]["truncated_by_desync"]
        assert 100 <= len(rewards) <= 200
        lengths.append(len(rewards))
        assert len(run_episode(env)[0]) == 200
    assert len(set(lengths)) >= 4


def test_resource_chain_refuses_unknown_desync_mode() -> None:
    message = "Expected `desync` to be one of ('none', 'legacy', 'truncate'), received 'random'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ResourceChainEnv(desync="random")


def test_resource_chain_truncate_desync_under_serial_staggers_workers() -> None:
    """Envs built by the vector backend get seeds 0..3, hence different first-episode cuts."""
    vecenv = pufferlib.vector.make(
        ResetOnDone,
        env_args=[functools.partial(ResourceChainEnv, max_steps=120, desync="truncate"), ({},)],
        backend=pufferlib.vector.Serial,
        num_envs=4,
    )
    try:
        vecenv.reset()
        actions = np.zeros(4, dtype=np.int32)
        cut_at: dict[int, int] = {}
        cut_infos = []
        for step in range(1, 121):
            _, _, terminals, truncations, infos = vecenv.step(actions)
            assert not terminals.any()
            for i in np.flatnonzero(truncations):
                cut_at[int(i)] = step
            cut_infos.extend(info["resource_chain"] for info in infos)
            if len(cut_at) == 4:
                break
        assert sorted(cut_at) == [0, 1, 2, 3]
        assert len(set(cut_at.values())) > 1
        assert sorted(info["episode_length"] for info in cut_infos) == sorted(cut_at.values())
        assert all(info["truncated_by_desync"] for info in cut_infos)
    finally:
        vecenv.close()


@pytest.mark.multiprocessing
def test_resource_chain_under_multiprocessing_pays_the_chain() -> None:
    vecenv = pufferlib.vector.make(
        ResourceChainEnv,
        env_kwargs={"max_steps": 100},
        backend=pufferlib.vector.Multiprocessing,
        num_envs=2,
        num_workers=2,
        overwork=True,
    )
    try:
        vecenv.reset()
        actions = np.zeros(2, dtype=np.int32)
        paying: list[tuple[int, float]] = []
        for step in range(1, 101):
            _, rewards, terminals, _, infos = vecenv.step(actions)
            if rewards.any():
                assert rewards[0] == rewards[1]
                paying.append((step, round(float(rewards[0]), 6)))
        assert paying == [(50, 0.1), (75, 0.8), (85, 1.0), (100, 0.1)]
        assert terminals.tolist() == [True, True]
        assert [info["resource_chain"]["hearts"] for info in infos] == [1, 1]
    finally:
        vecenv.close()
