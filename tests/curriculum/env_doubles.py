"""Test doubles and curriculum configs shared by the env, gym env and vector tests.

`FixedEpisodeEnv` is a minimal native PufferEnv with known answers: a fixed reward per step
and a fixed episode length, both settable per task through `set_env_config` (applied at the
next reset only), and an observation that echoes the running episode's config, so a test can
see which task an episode really ran. Like the harness envs it never resets itself.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
import pufferlib

from curriculum import (
    CurriculumConfig,
    SingleTaskGenerator,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
    WeightedTaskSetGenerator,
)

#: Observation columns of FixedEpisodeEnv.
OBS_LENGTH, OBS_REWARD, OBS_TAG, OBS_STEP = range(4)

#: How an episode of FixedEpisodeEnv ends: its last step sets terminals, truncations (a
#: time-limit cut) or truncations flagged `truncated_by_desync` in the info.
END_MODES = ("terminal", "truncation", "desync")

EASY = {"reward_per_step": 0.25, "episode_length": 2, "tag": 1}
"""Episode return 0.5 in 2 steps (float32-exact)."""
HARD = {"reward_per_step": 0.125, "episode_length": 4, "tag": 2}
"""Episode return 0.5 in 4 steps (float32-exact)."""


class FixedEpisodeEnv(pufferlib.PufferEnv):
    """Pays `reward_per_step` to every agent each step; the episode ends after `episode_length`."""

    CONFIG_KEYS = ("reward_per_step", "episode_length", "tag", "end")

    def __init__(
        self,
        *,
        reward_per_step: float = 0.125,
        episode_length: int = 4,
        num_agents: int = 1,
        end: str = "terminal",
        buf: dict[str, np.ndarray] | None = None,
        seed: int | None = 0,
    ) -> None:
        self.single_observation_space = gymnasium.spaces.Box(low=-np.inf, high=np.inf, shape=(4,), dtype=np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.num_agents = num_agents
        super().__init__(buf)
        self._defaults = {"reward_per_step": reward_per_step, "episode_length": episode_length, "tag": 0, "end": end}
        self.config = dict(self._defaults)
        self._pending: dict[str, Any] | None = None
        self._step = 0
        self._running = False
        self.episode_configs: list[dict[str, Any]] = []
        """Config of every episode started, in order."""
        self.set_env_config_calls: list[tuple[int, dict[str, Any]]] = []
        """(step within the episode when called, config) of every set_env_config call."""

    def set_env_config(self, env_cfg: Mapping[str, Any]) -> None:
        unknown = set(env_cfg) - set(self.CONFIG_KEYS)
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}")
        self.set_env_config_calls.append((self._step if self._running else -1, dict(env_cfg)))
        self._pending = dict(env_cfg)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        if self._pending is not None:
            self.config = {**self._defaults, **self._pending}  # keys left out take the constructor value
            self._pending = None
        self.episode_configs.append(dict(self.config))
        self._step = 0
        self._running = True
        self.observations[:, OBS_LENGTH] = self.config["episode_length"]
        self.observations[:, OBS_REWARD] = self.config["reward_per_step"]
        self.observations[:, OBS_TAG] = self.config["tag"]
        self.observations[:, OBS_STEP] = 0
        self.rewards.fill(0.0)
        self.terminals.fill(False)
        self.truncations.fill(False)
        return self.observations, []

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if not self._running:
            raise RuntimeError("FixedEpisodeEnv stepped with no running episode")
        self._step += 1
        self.rewards.fill(self.config["reward_per_step"])
        self.observations[:, OBS_STEP] = self._step
        if self._step < self.config["episode_length"]:
            return self.observations, self.rewards, self.terminals, self.truncations, []
        self._running = False
        end = self.config["end"]
        if end == "terminal":
            self.terminals.fill(True)
        else:
            self.truncations.fill(True)
        info: dict[str, Any] = {"fixed_episode": {"length": self._step, "tag": self.config["tag"]}}
        if end == "desync":
            info["fixed_episode"]["truncated_by_desync"] = True
        return self.observations, self.rewards, self.terminals, self.truncations, [info]

    def close(self) -> None:
        pass


class ReportingEnv(FixedEpisodeEnv):
    """FixedEpisodeEnv that reports its own episode returns (`get_episode_rewards`)."""

    def get_episode_rewards(self) -> np.ndarray:
        return np.full(self.num_agents, self.config["reward_per_step"] * self._step)


class StaggeredAgentsEnv(FixedEpisodeEnv):
    """Agents that finish at different steps: agent i is done at step `agent_lengths[i]` (in
    the env config), its flag set for that one step only (`sticky_flags=False`) or left set
    until the reset (`sticky_flags=True`). Every agent is paid `reward_per_step` every step,
    done or not, so a wrapper that keeps counting a done agent's rewards shows. `ends` picks
    per agent how it ends ("terminal", "truncation", "desync")."""

    CONFIG_KEYS = (*FixedEpisodeEnv.CONFIG_KEYS, "agent_lengths", "ends")

    def __init__(self, *, agent_lengths: tuple[int, ...] = (2, 5, 3), sticky_flags: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(num_agents=len(agent_lengths), **kwargs)
        self._defaults.update(agent_lengths=tuple(agent_lengths), ends=("terminal",) * len(agent_lengths))
        self.config = dict(self._defaults)
        self.sticky_flags = sticky_flags

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if not self._running:
            raise RuntimeError("StaggeredAgentsEnv stepped with no running episode")
        self._step += 1
        self.rewards.fill(self.config["reward_per_step"])
        self.observations[:, OBS_STEP] = self._step
        if not self.sticky_flags:
            self.terminals.fill(False)
            self.truncations.fill(False)
        info: dict[str, Any] = {}
        for agent, (length, end) in enumerate(zip(self.config["agent_lengths"], self.config["ends"])):
            if self._step != length:
                continue
            if end == "terminal":
                self.terminals[agent] = True
            else:
                self.truncations[agent] = True
            if end == "desync":
                info["truncated_by_desync"] = True
        if self._step >= max(self.config["agent_lengths"]):
            self._running = False
        return self.observations, self.rewards, self.terminals, self.truncations, [info] if info else []


class StickyFlagsEnv(FixedEpisodeEnv):
    """Never clears its done flags: neither its reset nor its steps write False into them."""

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        terminals, truncations = self.terminals.copy(), self.truncations.copy()
        result = super().reset(seed)
        self.terminals[...] = terminals
        self.truncations[...] = truncations
        return result


class ScriptedFailuresEnv(FixedEpisodeEnv):
    """FixedEpisodeEnv whose `reset` (from its `fail_from_reset`-th call, counting from 1) or
    `set_env_config` (once `fail_config` is set) raises `EnvFailure`; `dict_infos=True` returns
    step infos as one dict instead of a list."""

    def __init__(self, *, fail_from_reset: int | None = None, dict_infos: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail_from_reset = fail_from_reset
        self.fail_config = False
        self.dict_infos = dict_infos
        self.resets = 0

    def set_env_config(self, env_cfg: Mapping[str, Any]) -> None:
        if self.fail_config:
            raise EnvFailure("set_env_config failed")
        super().set_env_config(env_cfg)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        self.resets += 1
        if self.fail_from_reset is not None and self.resets >= self.fail_from_reset:
            raise EnvFailure(f"reset {self.resets} failed")
        obs, infos = super().reset(seed)
        return obs, ({"reset_count": self.resets} if self.dict_infos else infos)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]:
        obs, rewards, terminals, truncations, infos = super().step(actions)
        if self.dict_infos:
            infos = {"step_count": self._step, **(infos[0] if infos else {})}
        return obs, rewards, terminals, truncations, infos


class EnvFailure(RuntimeError):
    """What `ScriptedFailuresEnv` and `FaultyEnv` raise."""


class StopsWhenSent:
    """An info value that stops its own process (SIGSTOP) when it is pickled: a vector worker
    frozen after flagging its infos and before they reach its pipe."""

    def __reduce__(self) -> tuple[Any, ...]:
        os.kill(os.getpid(), signal.SIGSTOP)
        return int, (0,)


class FaultyEnv(FixedEpisodeEnv):
    """FixedEpisodeEnv that raises `EnvFailure` at its `fail_at`-th call of `fail_in` ("step"
    or "reset"; None never fails), or with `fail_in="info"` returns an info a vector worker
    cannot send (it holds a lambda) from that step, or with `fail_in="freeze-in-info"` one that
    stops the worker while it sends it (`StopsWhenSent`); sleeps `step_delay` seconds in every
    step (so a test can act while a worker is inside one)."""

    def __init__(self, *, fail_in: str | None = None, fail_at: int = 1, step_delay: float = 0.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail_in = fail_in
        self.fail_at = fail_at
        self.step_delay = step_delay
        self.calls = {"step": 0, "reset": 0}

    def _count(self, call: str) -> None:
        self.calls[call] += 1
        if self.fail_in == call and self.calls[call] == self.fail_at:
            raise EnvFailure(f"{call} {self.fail_at} failed in pid {os.getpid()}")

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        self._count("reset")
        return super().reset(seed)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        self._count("step")
        if self.step_delay:
            time.sleep(self.step_delay)
        obs, rewards, terminals, truncations, infos = super().step(actions)
        if self.fail_in == "info" and self.calls["step"] == self.fail_at:
            infos = [*infos, {"unsendable": lambda: None}]
        elif self.fail_in == "freeze-in-info" and self.calls["step"] == self.fail_at:
            infos = [*infos, {"freezes_its_sender": StopsWhenSent()}]
        return obs, rewards, terminals, truncations, infos


class FixedGymEnv(gymnasium.Env):
    """Single-agent gymnasium env: `reward_per_step` for `episode_length` steps; the config
    (set through `set_env_config`, applied at reset) is echoed in the observation."""

    observation_space = gymnasium.spaces.Box(low=-np.inf, high=np.inf, shape=(3,), dtype=np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self) -> None:
        self.config: dict[str, Any] = {"reward_per_step": 0.125, "episode_length": 4, "tag": 0, "end": "terminal"}
        self._pending: dict[str, Any] | None = None
        self._step = 0
        self.configs_at_reset: list[dict[str, Any]] = []

    def set_env_config(self, env_cfg: Mapping[str, Any]) -> None:
        self._pending = dict(env_cfg)

    def _obs(self) -> np.ndarray:
        return np.array([self.config["episode_length"], self.config["tag"], self._step], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if self._pending is not None:
            self.config = {"end": "terminal", **self._pending}
            self._pending = None
        self.configs_at_reset.append(dict(self.config))
        self._step = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._step += 1
        done = self._step >= self.config["episode_length"]
        end = self.config["end"]
        info: dict[str, Any] = {"truncated_by_desync": True} if done and end == "desync" else {}
        terminated = done and end == "terminal"
        return self._obs(), self.config["reward_per_step"], terminated, done and not terminated, info


class NoConfigEnv(pufferlib.PufferEnv):
    """A PufferEnv without `set_env_config`."""

    def __init__(self, buf: dict[str, np.ndarray] | None = None, seed: int | None = 0) -> None:
        self.single_observation_space = gymnasium.spaces.Box(low=0, high=1, shape=(1,), dtype=np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.num_agents = 1
        super().__init__(buf)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        return self.observations, []

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        return self.observations, self.rewards, self.terminals, self.truncations, []

    def close(self) -> None:
        pass


def two_label_config(*, num_active_tasks: int = 8, seed: int = 0, easy: Mapping[str, Any] = EASY,
                     hard: Mapping[str, Any] = HARD) -> CurriculumConfig:
    """Uniform over tasks labelled "easy" and "hard" (configs `EASY` and `HARD` by default)."""
    generator = WeightedTaskSetGenerator(
        [SingleTaskGenerator(dict(easy), label="easy"), SingleTaskGenerator(dict(hard), label="hard")]
    )
    return CurriculumConfig(task_generator=generator, algorithm=UniformConfig(), num_active_tasks=num_active_tasks,
                            seed=seed)


def staged_config(*, num_stages: int = 3, min_episodes: int = 4, num_active_tasks: int = 4,
                  episode: Mapping[str, Any] = HARD) -> CurriculumConfig:
    """`num_stages` stages (labels stage0, stage1, ...; config tag = stage index) whose fixed
    score 0.5 clears the 0.5 advancement threshold after `min_episodes` episodes of the stage."""
    stages = [
        Stage(f"stage{i}", SingleTaskGenerator({**episode, "tag": i}, label=f"stage{i}")) for i in range(num_stages)
    ]
    algorithm = StagedProgressionConfig(
        stages=stages, advancement_threshold=0.5, min_episodes=min_episodes, window=min_episodes
    )
    return CurriculumConfig(algorithm=algorithm, num_active_tasks=num_active_tasks)


class FlakyDrawCurriculum:
    """A protocol curriculum over a real one whose get_task() raises while `failing` is set."""

    def __init__(self, curriculum: Any) -> None:
        self.curriculum = curriculum
        self.config = curriculum.config
        self.failing = False

    def get_task(self) -> Any:
        if self.failing:
            raise LookupError("no task")
        return self.curriculum.get_task()

    def update_task_performance(self, task_id: int, score: float) -> bool:
        return self.curriculum.update_task_performance(task_id, score)

    def stats(self) -> dict[str, Any]:
        return self.curriculum.stats()
