"""Test environments of the harness: real pufferlib `PufferEnv`s with known answers.

- `TaskDependencyEnv`: reward from a `TaskDependencySimulator` student; the task is picked by
  the env config, so a curriculum drives what the student practises.
- `ExactAccountingEnv`: fixed reward per step and fixed episode length, so every total
  (steps, episodes, return) is known exactly and any lost or double-counted episode shows.
- `ResourceChainEnv`: a delayed-reward production chain (ore -> battery -> heart, first heart
  at step 85 with the defaults) with the first-episode desync modes of the seeds' post-mortem.

Shared contract (what a curriculum wrapper can rely on):

- Constructors take `buf=None, seed=0`, so `pufferlib.vector.make(EnvClass, env_kwargs=...,
  backend=Serial | Multiprocessing, ...)` builds them. All randomness comes from the
  constructor `seed`; `reset(seed=...)` accepts a seed for API compatibility and ignores it,
  because pufferlib passes the same seed on every vector reset and re-seeding there would
  replay the same noise every episode.
- The envs never reset themselves: after a step that returns `terminals` or `truncations`
  True, the caller must call `reset()`. Stepping an ended (or never started) episode raises
  `RuntimeError`, so a wrapper that forgets the reset fails loudly instead of training on a
  frozen episode.
- `set_env_config(env_cfg)` validates the config at once (a ValueError names the missing or
  bad key) and stores it; it takes effect at the next `reset()`, never mid-episode. Each
  config is read against the constructor defaults (keys it leaves out take the constructor
  value, not the previous config's). The metadata key `label`
  (`harness.episodes.METADATA_KEYS`) does not change the env and is recorded with the episode;
  any other key the env does not read is refused by name, so a misspelled key cannot be
  silently dropped.
- `infos` is a list: empty on ordinary steps and resets, exactly one dict at the step that
  ends an episode (one per episode, whatever `num_agents`, so counting infos counts episodes).
  That dict holds the env's own numbers and, under `EPISODE_RECORD_KEY`, the
  `harness.episodes.EpisodeRecord` of the episode (config run, per-agent returns, how it
  ended, a copy of those numbers), the ground truth the accounting oracle checks every
  reported number against. An `ExactAccountingEnv` built with `infos="dict"` returns one dict
  instead (pufferlib's other convention): the step number on ordinary steps, the episode's
  info at its end, and at every reset the new episode's numbers under the same keys as the
  ended one's.
- Observations are float32 boxes that echo the episode's state (and, for the accounting env,
  the applied config); actions are `Discrete(1)` and ignored.
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections import OrderedDict, UserDict, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final

import gymnasium
import numpy as np
import pufferlib

from harness.episodes import (
    ENDED_DESYNC,
    ENDED_TERMINAL,
    ENDED_TRUNCATED,
    EPISODE_RECORD_KEY,
    METADATA_KEYS,
    EpisodeRecord,
    new_env_name,
)
from harness.simulator import TaskDependencySimulator

__all__ = [
    "DESYNC_MODES",
    "EPISODE_ENDS",
    "DESYNC_SIGNALS",
    "DONE_FLAG_MODES",
    "INFO_FORMATS",
    "PUFFER_BUFFERS",
    "TaskDependencyEnv",
    "ExactAccountingEnv",
    "SeedReportingEnv",
    "CloseFailingEnv",
    "GymExactAccountingEnv",
    "ResourceChainEnv",
]

DESYNC_MODES: Final = ("none", "legacy", "truncate")
EPISODE_ENDS: Final = (ENDED_TERMINAL, ENDED_TRUNCATED, ENDED_DESYNC)
"""How an `ExactAccountingEnv` episode ends: terminals, a time-limit truncation, a desync cut."""
DESYNC_SIGNALS: Final = ("info", "nested", "attribute", "loose", "split", "first", "mixed")
"""How an `ExactAccountingEnv` marks a desync cut: `truncated_by_desync` in the step's info
(`exact_accounting/truncated_by_desync`, or "nested" one level deeper:
`exact_accounting/cut/truncated_by_desync`, the `cut` mapping a defaultdict, beside a False
`exact_accounting/truncated_by_desync`), or its `desync_truncation` attribute set at that
step (all are part of the wrappers' contract: the flag counts at any nesting depth). "loose":
the flag is in every episode's last info, False at a time limit and True at a desync cut and
at a terminal end too (an env that flags a cut it scheduled for later than where the episode
reached its end): only a truncation with the flag is a desync cut. "split": as "info", in a
step's list of infos followed by another dict (an env that reports per agent or per ended
episode: the flag is in whichever dict belongs to the cut episode). "first": the flag is in
the info of the step at which the first agents are cut, and not at the episode's last step
(a multi-agent env whose cut reaches its agents at different steps; with one agent, or all
agents ending together, as "info"). "mixed": as "info", but at the cut's step only agent 0 is
truncated, and the other agents ending then terminate (they finished as the env cut the first):
a cut is an episode end with some agent truncated and the flag set, not one with all of them."""
INFO_FORMATS: Final = ("list", "dict", "log", "none", "dict-log", "tuple")
PUFFER_BUFFERS: Final = ("observations", "rewards", "terminals", "truncations", "masks", "actions")
"""The per-agent buffers a PufferEnv holds (what `pufferlib.set_buffers` gives it), written out
here: the contract is pufferlib's, so the gate does not take the list from the library under test."""
"""What an `ExactAccountingEnv` returns as infos: a list of dicts (its reset's too), one dict whose reset info
shares its keys with the episode-end info (a wrapper merging them must keep the ended episode's),
or a list holding the env's one log dict at every step (a wrapper must not write into it);
"none", a list, None on ordinary steps; "dict-log", the env's one log dict itself at every step;
"tuple", the list's dicts in a tuple (an env that returns `(info,)`), its reset's too."""
REWARD_WRITES: Final = ("every_step", "at_end")
"""How an `ExactAccountingEnv` writes rewards: `every_step`, each agent's reward at every step
of its episode; `at_end`, each agent's whole return at its done step and nothing at any other
step (a sparse env that leaves its reward buffer as its `reset()` zeroed it)."""
DONE_FLAG_MODES: Final = ("hold", "pulse")
"""`hold`: an agent's done flag stays set from its end until the episode ends; `pulse`: it is
set at that one step only (a multi-agent env that reports each agent's end once)."""

_ACTION_SPACE = gymnasium.spaces.Discrete(1)
_REWARD_GRID = 2.0**20
"""Per-step rewards of multi-step `TaskDependencyEnv` episodes are multiples of 1/_REWARD_GRID."""


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, (bool, np.bool_))
        and math.isfinite(value)
    )


def _positive_int(name: str, value: Any) -> int:
    if not _is_int(value) or value < 1:
        raise ValueError(f"Expected `{name}` to be a positive integer, received {value!r}")
    return int(value)


def _non_negative_int(name: str, value: Any) -> int:
    if not _is_int(value) or value < 0:
        raise ValueError(f"Expected `{name}` to be a non-negative integer, received {value!r}")
    return int(value)


def _finite(name: str, value: Any) -> float:
    if not _is_number(value):
        raise ValueError(f"Expected `{name}` to be a finite number, received {value!r}")
    return float(value)


class _HarnessEnv(pufferlib.PufferEnv):
    """Config-at-reset plumbing and the episode-ended guard shared by the harness envs."""

    CONFIG_KEYS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, num_obs: int, num_agents: int, buf: dict[str, np.ndarray] | None,
                 seed: int | None = None) -> None:
        self.single_observation_space = gymnasium.spaces.Box(
            low=-np.inf, high=np.inf, shape=(num_obs,), dtype=np.float32
        )
        self.single_action_space = _ACTION_SPACE
        self.num_agents = num_agents
        super().__init__(buf)
        self._pending_config: dict[str, Any] | None = None
        self._pending_meta: dict[str, Any] = {}
        self._meta: dict[str, Any] = {}
        self._episode_running = False
        self.name = new_env_name(seed)
        """This env instance in episode records (unique across the processes of a run)."""
        self.episodes_recorded = 0
        """Episodes that ended (each reported once with its `EpisodeRecord`)."""

    def set_env_config(self, env_cfg: Mapping[str, Any]) -> None:
        """Validate `env_cfg` now and apply it at the next `reset()` (never mid-episode)."""
        if not isinstance(env_cfg, Mapping):
            raise ValueError(f"Expected `env_cfg` to be a mapping, received {type(env_cfg).__name__}")
        unknown = [key for key in env_cfg if key not in self.CONFIG_KEYS and key not in METADATA_KEYS]
        if unknown:
            raise ValueError(
                f"Unknown env config key(s) {', '.join(repr(k) for k in unknown)} for {type(self).__name__}; "
                f"expected keys from {self.CONFIG_KEYS!r}"
            )
        self._pending_config = self._parse_config(env_cfg)
        self._pending_meta = {key: env_cfg[key] for key in METADATA_KEYS if key in env_cfg}

    def _parse_config(self, env_cfg: Mapping[str, Any]) -> dict[str, Any]:
        """The full settings of the next episodes, or a ValueError naming the bad key."""
        raise NotImplementedError

    def _take_pending_config(self) -> dict[str, Any] | None:
        config, self._pending_config = self._pending_config, None
        if config is not None:
            self._meta = self._pending_meta
        return config

    def _episode_info(self, numbers: dict[str, Any], settings: Mapping[str, Any], returns: tuple[float, ...],
                      ended: str, steps: int, **extra: Any) -> dict[str, Any]:
        """The info of the step that ended an episode: the env's own `numbers` plus the episode's
        record (settings run plus the task's metadata, and a copy of `numbers`)."""
        record = EpisodeRecord(env=self.name, index=self.episodes_recorded, config={**settings, **self._meta},
                               returns=returns, ended=ended, steps=steps, extra=extra,
                               reported=copy.deepcopy(numbers))
        self.episodes_recorded += 1
        return {**numbers, EPISODE_RECORD_KEY: record}

    def _episode_ended_error(self) -> RuntimeError:
        return RuntimeError(
            f"{type(self).__name__}.step() called with no running episode; call reset() first "
            f"(the harness envs never reset themselves)"
        )

    def close(self) -> None:
        """Nothing to release."""


class TaskDependencyEnv(_HarnessEnv):
    """One student practising the task named by `env_cfg["task_index"]`.

    Each episode is `episode_length` steps; every step is one `simulator.sample_task` practice
    episode and pays `reward / episode_length`, so the episode return is the mean simulator
    reward. Before any config the task is 0. When `simulator` is given, `num_tasks` is taken
    from it and the env never re-seeds it (several envs in one process may share a student).
    The episode-end info nests the student's best and worst performance over its tasks three
    levels deep (`task_dependency/student/best_performance`), its performance on every task as
    a numpy array (`task_dependency/student/performance`, which the stats pipeline averages),
    which tasks it has mastered as a numpy bool array (`student/mastered`, averaged too: the
    share mastered), and numpy scalars (`num_mastered` an int64, `mastered` a bool), as real
    envs report; `student` is an `OrderedDict` (a mapping, not a dict).
    """

    CONFIG_KEYS: ClassVar[tuple[str, ...]] = ("task_index",)

    def __init__(
        self,
        simulator: TaskDependencySimulator | None = None,
        *,
        num_tasks: int = 10,
        simulator_kwargs: Mapping[str, Any] | None = None,
        episode_length: int = 1,
        buf: dict[str, np.ndarray] | None = None,
        seed: int | None = 0,
    ) -> None:
        if simulator is None:
            simulator = TaskDependencySimulator(num_tasks, seed=seed, **dict(simulator_kwargs or {}))
        elif not isinstance(simulator, TaskDependencySimulator):
            raise ValueError(
                f"Expected `simulator` to be a TaskDependencySimulator or None, received {type(simulator).__name__}"
            )
        elif simulator_kwargs:
            raise ValueError(
                f"Expected `simulator_kwargs` only without a `simulator`, received {dict(simulator_kwargs)!r}"
            )
        self._episode_length = _positive_int("episode_length", episode_length)
        self._simulator = simulator
        self._task_index = 0
        self._step = 0
        self._return = 0.0
        self._paid = 0.0
        super().__init__(num_obs=2, num_agents=1, buf=buf, seed=seed)

    @property
    def simulator(self) -> TaskDependencySimulator:
        """The student this env's rewards come from."""
        return self._simulator

    @property
    def task_index(self) -> int:
        """The task of the current (or last) episode."""
        return self._task_index

    @property
    def episode_length(self) -> int:
        """Steps per episode."""
        return self._episode_length

    def _parse_config(self, env_cfg: Mapping[str, Any]) -> dict[str, Any]:
        if "task_index" not in env_cfg:
            raise ValueError("Expected env config key 'task_index' (an int task index), but it is missing")
        task_index = env_cfg["task_index"]
        num_tasks = self._simulator.num_tasks
        if not _is_int(task_index) or not 0 <= task_index < num_tasks:
            raise ValueError(
                f"Expected env config key 'task_index' to be an integer in [0, {num_tasks}), received {task_index!r}"
            )
        return {"task_index": int(task_index)}

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Start an episode on the configured task."""
        config = self._take_pending_config()
        if config is not None:
            self._task_index = config["task_index"]
        self._step = 0
        self._return = 0.0
        self._paid = 0.0
        self._episode_running = True
        obs = self.observations
        obs[0, 0] = self._task_index
        obs[0, 1] = 0.0
        self.rewards[0] = 0.0
        self.terminals[0] = False
        self.truncations[0] = False
        return obs, []

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """One practice episode of the student; the env episode ends after `episode_length`."""
        if not self._episode_running:
            raise self._episode_ended_error()
        reward = self._simulator.sample_task(self._task_index)
        if self._episode_length > 1:
            # a share of the practice reward that float32 holds exactly, so the episode's return
            # (the sum of what the buffer paid) never exceeds the student's reward in [0, 1]
            reward = math.floor(reward / self._episode_length * _REWARD_GRID) / _REWARD_GRID
        self._step += 1
        self._return += reward
        self.rewards[0] = reward
        self._paid += float(self.rewards[0])  # what the agent received through the float32 buffer
        self.observations[0, 1] = self._step
        if self._step < self._episode_length:
            return self.observations, self.rewards, self.terminals, self.truncations, []
        self._episode_running = False
        self.terminals[0] = True
        simulator = self._simulator
        performance = simulator.performance
        task = self._task_index
        mastered = performance >= simulator.mastery_threshold
        numbers = {"task_dependency": {
            "performance": float(performance[task]),
            "task_index": task,
            "mean_performance": float(performance.mean()),
            "num_mastered": np.int64(np.count_nonzero(mastered)),
            "mastered": np.bool_(performance[task] >= simulator.mastery_threshold),
            "episode_return": self._return,
            "student": OrderedDict(best_performance=float(performance.max()),
                                   worst_performance=float(performance.min()),
                                   performance=performance.copy(), mastered=mastered),
        }}
        info = self._episode_info(numbers, {"task_index": task}, (self._paid,), ENDED_TERMINAL, self._step,
                                  performance=float(performance[task]))
        return self.observations, self.rewards, self.terminals, self.truncations, [info]


class ExactAccountingEnv(_HarnessEnv):
    """Pays exactly known rewards and ends after exactly known lengths, so every total is exact.

    Settings (constructor defaults; `env_cfg` may set each for the episodes from the next reset):

    - `reward_per_step`: a number, or one per agent: agent i earns it at every step of its
      episode.
    - `episode_length`: an integer, or one per agent: agent i's episode ends after that many
      steps (its done flag is set then); the env's episode ends when the last agent's does.
      After its end an agent earns 0 (or `after_done_reward`, in no return). Agent i's return
      is exactly `reward_i * length_i`.
    - `end`: how agents end (`EPISODE_ENDS`): "terminal", "truncated" (a plain time limit: the
      episode is full and must be recorded) or "desync" (a truncation cut to stagger workers,
      flagged `truncated_by_desync` in the info (with `desync_signal="nested"` a numpy bool
      one level down), or with `desync_signal="attribute"` by the env's `desync_truncation`
      attribute: must never be recorded).

    `done_flags` (constructor, `DONE_FLAG_MODES`) says whether an agent's flag stays set until
    the episode ends ("hold") or is set at its end step only ("pulse"). `after_done_reward`
    (constructor) is written for agents already done while others play: a wrapper must ignore
    it (it is in no return). With `reports_returns` the env defines `get_episode_rewards()`,
    each agent's running total of every reward written for it, after-done ones included (so
    read at the agent's done step it is its return, read later it is not). `infos`
    (constructor, `INFO_FORMATS`): a list (its reset's holds one dict, the new episode's
    `exact_accounting` numbers, zero: a wrapper's auto-reset adds it to the ended step's list), or one dict at every step (an `OrderedDict` or a
    `UserDict` after some ended episodes, `_dict_info`; `exact_accounting/step` on ordinary steps) whose reset info carries the new episode's `exact_accounting` numbers
    (zero), the keys of the ended episode's info; or "log", one list `[log]` returned at every
    step, one dict for the env's life in which the env replaces the keys it wrote the step before by this step's
    (the step number, or the episode's info) and leaves any other key as it finds it, as an
    env that keeps a running log does; or "dict-log", that log dict itself at every step (its
    reset's: a new empty dict); or "none", a list whose ordinary steps return None (no
    infos at all) instead of an empty list; or "tuple", the list's dicts in a tuple. `rewards` (constructor, `REWARD_WRITES`):
    `at_end` writes each agent's return at its done step only and nothing else (no after-done
    reward either: the buffer keeps what it held, which a wrapper must not count again).
    `fail_every_reset` (constructor): every n-th
    `reset()` raises before starting anything (an env whose start fails now and then);
    `fail_every_config`: every n-th `set_env_config` raises, keeping the pending config it had.
    `episode_counter` (constructor): a `multiprocessing.Value` every ended episode adds one to,
    so the episodes envs in forked worker processes ended can be counted in the main process.

    The observation of agent i is `[length_i, reward_i, step_in_episode]`, so a test can see
    which config an episode really ran with. Counters (`episodes_completed`, `steps_taken`,
    `total_reward` over all agents) make totals checkable; rewards pass through pufferlib's
    float32 buffer, so pick float32-exact rewards (1.0, 0.25, ...).
    """

    CONFIG_KEYS: ClassVar[tuple[str, ...]] = ("reward_per_step", "episode_length", "end")

    def __init__(
        self,
        *,
        reward_per_step: float | Sequence[float] = 1.0,
        episode_length: int | Sequence[int] = 10,
        end: str = ENDED_TERMINAL,
        num_agents: int = 1,
        done_flags: str = "hold",
        after_done_reward: float = 0.0,
        reports_returns: bool = False,
        desync_signal: str = "info",
        infos: str = "list",
        rewards: str = "every_step",
        fail_every_reset: int = 0,
        episode_counter: Any = None,
        buf: dict[str, np.ndarray] | None = None,
        seed: int | None = 0,
        fail_every_config: int = 0,
    ) -> None:
        num_agents = _positive_int("num_agents", num_agents)
        self._episode_counter = episode_counter
        if rewards not in REWARD_WRITES:
            raise ValueError(f"Expected `rewards` to be one of {REWARD_WRITES!r}, received {rewards!r}")
        self._at_end = rewards == "at_end"
        self._fail_every = _non_negative_int("fail_every_reset", fail_every_reset)
        self._fail_every_config = _non_negative_int("fail_every_config", fail_every_config)
        self.configs_set = 0
        """`set_env_config` calls, failed ones included."""
        self.resets_called = 0
        """`reset()` calls, failed ones included."""
        self.reset_seeds: list[int | None] = []
        """The seed each `reset()` call was given, failed ones included."""
        if infos not in INFO_FORMATS:
            raise ValueError(f"Expected `infos` to be one of {INFO_FORMATS!r}, received {infos!r}")
        self._dict_infos = infos == "dict"
        self._none_infos = infos == "none"
        self._list_infos = infos in ("list", "tuple")
        self._sequence: Callable[[list[Any]], Any] = tuple if infos == "tuple" else list
        self._log: dict[str, Any] | None = {} if infos in ("log", "dict-log") else None
        self._log_returned: list[dict[str, Any]] | dict[str, Any] = \
            self._log if infos == "dict-log" else [self._log] if self._log is not None else []
        self._reset_info: Callable[[], Any] = dict if infos == "dict-log" else list
        self._log_keys: tuple[str, ...] = ()
        if done_flags not in DONE_FLAG_MODES:
            raise ValueError(f"Expected `done_flags` to be one of {DONE_FLAG_MODES!r}, received {done_flags!r}")
        if desync_signal not in DESYNC_SIGNALS:
            raise ValueError(f"Expected `desync_signal` to be one of {DESYNC_SIGNALS!r}, received {desync_signal!r}")
        self._signal_attribute = desync_signal == "attribute"
        self._desync_signal = desync_signal
        self._cut_flagged = False
        self.desync_truncation = False
        """With `desync_signal="attribute"`: True from a desync cut's step to the next reset."""
        self._num = num_agents
        self._defaults = self._settings(reward_per_step, episode_length, end, source="`{}`")
        self._pulse = done_flags == "pulse"
        self._after_done = self._check_reward("after_done_reward", after_done_reward, "`{}`")
        self._apply(self._defaults)
        self._step = 0
        self._returns = np.zeros(num_agents, dtype=np.float64)
        self._written = np.zeros(num_agents, dtype=np.float64)
        """Every reward written per agent this episode (after-done ones included)."""
        if reports_returns:
            self.get_episode_rewards = self._written.copy
        self.episodes_completed = 0
        self.steps_taken = 0
        self.total_reward = 0.0
        super().__init__(num_obs=3, num_agents=num_agents, buf=buf, seed=seed)
        self._obs_length = self.observations[:, 0]
        self._obs_reward = self.observations[:, 1]
        self._obs_step = self.observations[:, 2]

    def _per_agent(self, name: str, value: Any, check: Any, source: str) -> tuple[Any, ...]:
        if isinstance(value, (list, tuple, np.ndarray)):
            if len(value) != self._num:
                raise ValueError(f"Expected {source.format(name)} to hold one value per agent ({self._num}), "
                                 f"received {list(value)!r}")
            return tuple(check(name, v, source) for v in value)
        return (check(name, value, source),) * self._num

    @staticmethod
    def _check_reward(name: str, value: Any, source: str) -> float:
        if not _is_number(value):
            raise ValueError(f"Expected {source.format(name)} to be a finite number, received {value!r}")
        return float(value)

    @staticmethod
    def _check_length(name: str, value: Any, source: str) -> int:
        if not _is_int(value) or value < 1:
            raise ValueError(f"Expected {source.format(name)} to be a positive integer, received {value!r}")
        return int(value)

    def _settings(self, reward: Any, length: Any, end: Any, *, source: str) -> dict[str, Any]:
        if end not in EPISODE_ENDS:
            raise ValueError(f"Expected {source.format('end')} to be one of {EPISODE_ENDS!r}, received {end!r}")
        return {"reward_per_step": self._per_agent("reward_per_step", reward, self._check_reward, source),
                "episode_length": self._per_agent("episode_length", length, self._check_length, source),
                "end": end}

    def _apply(self, settings: dict[str, Any]) -> None:
        self._settings_now = settings
        self._rewards_now = np.array(settings["reward_per_step"], dtype=np.float64)
        self._lengths_now = np.array(settings["episode_length"], dtype=np.int64)
        self._length = int(self._lengths_now.max())
        self._uniform = not self._at_end and (self._num == 1 or (len(set(settings["episode_length"])) == 1
                                                                  and len(set(settings["reward_per_step"])) == 1))

    def _no_info(self) -> list[Any] | dict[str, Any] | None:
        """An ordinary step's infos: none in a list (or None); with dict or log infos, the step
        number (an env that reports something at every step)."""
        if self._log is not None:
            return self._logged({"exact_accounting": {"step": self._step}})
        if self._dict_infos:
            return self._dict_info({"exact_accounting": {"step": self._step}})
        return None if self._none_infos else self._sequence([])  # (a new list each step, as before)

    def _dict_info(self, info: dict[str, Any]) -> Mapping[str, Any]:
        """A dict info as returned, in turn by ended episodes: a plain dict, an `OrderedDict` (a
        dict subclass, as some envs return) and a `UserDict` (a mapping that is no dict); a
        wrapper takes each as one env's info."""
        kind = self.episodes_completed % 3
        return info if kind == 0 else OrderedDict(info) if kind == 1 else UserDict(info)

    def _step_info(self) -> list[Any] | dict[str, Any]:
        """A step before the episode's last: with the "first" desync signal, the flag at the
        step that cuts the first agents (with "attribute", `desync_truncation` set from that
        step); otherwise `_no_info()`."""
        cut = self._settings_now["end"] == ENDED_DESYNC and bool((self._lengths_now == self._step).any())
        if cut and self._signal_attribute:
            self.desync_truncation = True
        if cut and self._desync_signal == "first" and not self._cut_flagged:
            self._cut_flagged = True
            info = {"exact_accounting": {"truncated_by_desync": True}}
            if self._log is not None:
                return self._logged(info)
            return self._dict_info(info) if self._dict_infos else self._sequence([info])
        return self._no_info()

    def _logged(self, info: dict[str, Any]) -> list[dict[str, Any]] | dict[str, Any]:
        """`info` written into the env's one log dict (its keys of the step before removed),
        returned in the env's one list (or, "dict-log", itself): an env that keeps both for its life."""
        log = self._log
        for key in self._log_keys:
            log.pop(key, None)
        log.update(info)
        self._log_keys = tuple(info)
        return self._log_returned

    @property
    def reward_per_step(self) -> float:
        """Reward per step of agent 0 in the current (or last) episode."""
        return float(self._rewards_now[0])

    @property
    def episode_length(self) -> int:
        """Length of the current (or last) episode: its last agent's."""
        return self._length

    def _parse_config(self, env_cfg: Mapping[str, Any]) -> dict[str, Any]:
        defaults = self._defaults
        return self._settings(env_cfg.get("reward_per_step", defaults["reward_per_step"]),
                              env_cfg.get("episode_length", defaults["episode_length"]),
                              env_cfg.get("end", defaults["end"]), source="env config key {!r}")

    def set_env_config(self, env_cfg: Mapping[str, Any]) -> None:
        """As the base class (every `fail_every_config`-th call raises `RuntimeError` instead,
        changing nothing)."""
        self.configs_set += 1
        if self._fail_every_config and self.configs_set % self._fail_every_config == 0:
            raise RuntimeError(f"ExactAccountingEnv: set_env_config {self.configs_set} failed (fail_every_config="
                               f"{self._fail_every_config}): the config was not taken")
        super().set_env_config(env_cfg)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Start an episode with the pending config, if any (every `fail_every_reset`-th call
        raises `RuntimeError` instead, changing nothing)."""
        self.resets_called += 1
        self.reset_seeds.append(seed)
        if self._fail_every and self.resets_called % self._fail_every == 0:
            raise RuntimeError(f"ExactAccountingEnv: reset {self.resets_called} failed (fail_every_reset="
                               f"{self._fail_every}): the episode did not start")
        config = self._take_pending_config()
        if config is not None:
            self._apply(config)
        self._step = 0
        self._returns.fill(0.0)
        self._written.fill(0.0)
        self.desync_truncation = False
        self._cut_flagged = False
        self._episode_running = True
        self._obs_length[:] = self._lengths_now
        self._obs_reward[:] = self._rewards_now
        self._obs_step.fill(0.0)
        self.rewards.fill(0.0)
        self.terminals.fill(False)
        self.truncations.fill(False)
        if self._dict_infos:
            return self.observations, self._dict_info({"exact_accounting": {"episode_return": 0.0, "episode_length": 0}})
        if self._list_infos:  # a list of dicts, as pufferlib asks of a PufferEnv's reset
            return self.observations, self._sequence([{"exact_accounting": {"episode_return": 0.0,
                                                                            "episode_length": 0}}])
        return self.observations, self._reset_info()

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Pay every running agent its reward; set each agent's done flag at its own end."""
        if not self._episode_running:
            raise self._episode_ended_error()
        step = self._step = self._step + 1
        self.steps_taken += 1
        self._obs_step.fill(step)
        flags = self.truncations if self._settings_now["end"] != ENDED_TERMINAL else self.terminals
        if self._uniform:
            reward = float(self._rewards_now[0])
            self.rewards.fill(reward)
            self._returns += reward
            self._written += reward
            self.total_reward += reward * self._num
            if step < self._length:
                return self.observations, self.rewards, self.terminals, self.truncations, self._no_info()
            flags.fill(True)
        elif self._at_end:  # each agent's return at its done step; the buffer untouched otherwise
            ending = self._lengths_now == step
            # the return as the reward buffer holds it (a float32 buffer rounds 3 x 0.1): what the agent received
            paid = np.where(ending, self._rewards_now * self._lengths_now, 0.0).astype(self.rewards.dtype)
            np.copyto(self.rewards, paid, where=ending)
            paid = paid.astype(np.float64)
            self._written += paid
            self._returns += paid
            self.total_reward += float(paid.sum())
            flags[:] = ending if self._pulse else (self._lengths_now <= step)
            if step < self._length:
                return self.observations, self.rewards, self.terminals, self.truncations, self._step_info()
        else:
            running = self._lengths_now >= step
            paid = np.where(running, self._rewards_now, 0.0)
            self.rewards[:] = np.where(running, self._rewards_now, self._after_done)
            self._written += self.rewards
            self._returns += paid
            self.total_reward += float(paid.sum())
            flags[:] = (self._lengths_now == step) if self._pulse else (self._lengths_now <= step)
            if step < self._length:
                return self.observations, self.rewards, self.terminals, self.truncations, self._step_info()
        self._episode_running = False
        self.episodes_completed += 1
        if self._episode_counter is not None:
            with self._episode_counter.get_lock():
                self._episode_counter.value += 1
        end = self._settings_now["end"]
        if end == ENDED_DESYNC and self._desync_signal == "mixed" and self._num > 1:
            ending = self.truncations[1:] & (self._lengths_now[1:] == step)
            self.terminals[1:] |= ending
            self.truncations[1:] &= ~ending
        returns = tuple(float(r) for r in self._returns)
        settings = {"reward_per_step": list(self._settings_now["reward_per_step"]),
                    "episode_length": list(self._settings_now["episode_length"]), "end": end}
        numbers: dict[str, Any] = {"episode_return": sum(returns) / self._num, "episode_length": step}
        if end == ENDED_DESYNC and self._signal_attribute:
            self.desync_truncation = True
        elif end == ENDED_DESYNC and self._desync_signal == "nested":
            # a numpy bool, as envs often write, in a mapping that is no plain dict (a logger's
            # defaultdict): the flag counts inside any mapping, True at any depth even beside a
            # False one level up (a logger's default written at the top)
            numbers["cut"] = defaultdict(bool, truncated_by_desync=np.bool_(True))
            numbers["truncated_by_desync"] = False
        elif end == ENDED_DESYNC and not self._cut_flagged:
            numbers["truncated_by_desync"] = True
        if self._desync_signal == "loose":
            numbers["truncated_by_desync"] = end != ENDED_TRUNCATED
        info = self._episode_info({"exact_accounting": numbers}, settings, returns, end, step)
        if self._dict_infos:
            return self.observations, self.rewards, self.terminals, self.truncations, self._dict_info(info)
        if self._log is not None:
            return self.observations, self.rewards, self.terminals, self.truncations, self._logged(info)
        return self.observations, self.rewards, self.terminals, self.truncations, \
            self._sequence([info, {}] if self._desync_signal == "split" else [info])


class SeedReportingEnv(ExactAccountingEnv):
    """`ExactAccountingEnv` whose reset info says the seed that `reset()` was given, the one it
    was built with and the process it runs in (`{"seed_reporting": {"reset_seed": seed,
    "built_seed": seed, "pid": pid}}`), so the seeds envs in other processes were made and reset
    with can be checked where their infos arrive, and their processes found."""

    def __init__(self, *, seed: int | None = 0, **settings: Any) -> None:
        super().__init__(seed=seed, **settings)
        self.built_seed = seed

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        obs, infos = super().reset(seed)
        return obs, [*infos, {"seed_reporting": {"reset_seed": seed, "built_seed": self.built_seed,
                                                       "pid": os.getpid()}}]


class CloseFailingEnv(ExactAccountingEnv):
    """`ExactAccountingEnv` whose `close()` raises `RuntimeError` (an env that fails to release
    what it holds), so what its wrapper does around a failed close can be checked. With
    `close_delays={seed: seconds}`, the env created with that seed first waits that long (workers
    whose closes fail at different times); other seeds raise at once."""

    def __init__(self, *, close_delays: Mapping[int, float] | None = None, seed: int | None = 0,
                 **kwargs: Any) -> None:
        super().__init__(seed=seed, **kwargs)
        self._close_delay = float(dict(close_delays or {}).get(seed, 0.0))  # type: ignore[arg-type]

    def close(self) -> None:
        if self._close_delay:
            time.sleep(self._close_delay)
        raise RuntimeError("this env fails to close")


class GymExactAccountingEnv(gymnasium.Env):
    """`ExactAccountingEnv` (one agent) as a gymnasium env, for `GymCurriculumEnv`.

    Same settings, dynamics, observation (`[length, reward, step]`) and `EpisodeRecord`; the
    info of the last step is one dict (a desync cut carries `truncated_by_desync`, or sets the
    `desync_truncation` attribute with `desync_signal="attribute"`; with "mixed", a cut's step
    is both terminated and truncated, as an episode cut as it ended), the action is ignored.
    Reward, `terminated` and `truncated` are numpy scalars (float32, bool), as from envs that
    compute with numpy; `reset()` and `step()` return the same info dict every time, its own
    keys rewritten, as envs that keep one do (a wrapper must not write into it). An episode's end info also
    carries an empty list (`exact_accounting/events`), which the stats pipeline must skip.
    `set_env_config` applies at the next `reset()`, as for the PufferEnv. With
    `fail_every_reset=n`, every n-th `reset()` raises `RuntimeError` instead, changing nothing
    (an env whose start fails now and then).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, *, reward_per_step: float = 1.0, episode_length: int = 10, end: str = ENDED_TERMINAL,
                 desync_signal: str = "info", seed: int | None = 0, fail_every_reset: int = 0) -> None:
        self.inner = ExactAccountingEnv(reward_per_step=reward_per_step, episode_length=episode_length, end=end,
                                        desync_signal=desync_signal, seed=seed, fail_every_reset=fail_every_reset)
        self.observation_space = self.inner.single_observation_space
        self.action_space = _ACTION_SPACE
        self._mixed_cut = desync_signal == "mixed"
        self.resets: list[tuple[int | None, dict[str, Any] | None]] = []
        """The `seed` and `options` of every `reset()` that started an episode, in order (what a
        wrapper passed on)."""
        self.configured: list[bool] = []
        """Per `reset()` that started an episode, in order: whether `set_env_config` was called
        since the last one (an env that takes its config anew at every start needs it)."""
        self._configured = False
        self._info: dict[str, Any] = {}
        self._own_keys: set[str] = set()

    @property
    def desync_truncation(self) -> bool:
        """True from a desync cut's step to the next reset (with `desync_signal="attribute"`)."""
        return self.inner.desync_truncation

    def set_env_config(self, env_cfg: Mapping[str, Any]) -> None:
        """Validate `env_cfg` now and apply it at the next `reset()`."""
        self.inner.set_env_config(env_cfg)
        self._configured = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        observations, _ = self.inner.reset()
        self.resets.append((seed, options))
        self.configured.append(self._configured)
        self._configured = False
        # what a new episode starts from, under the key its end reports in (a wrapper merging
        # the two must keep the ended episode's), in the env's one info dict
        start = {"exact_accounting": {"episode_return": 0.0, "episode_length": 0}}
        return observations[0].copy(), self._own_info(start)

    def _own_info(self, own: dict[str, Any]) -> dict[str, Any]:
        """The env's one info dict (for its life), its own keys rewritten to `own` (a common
        pattern): what a wrapper writes into it stays there for every later reset and step."""
        info = self._info
        for key in self._own_keys.difference(own):
            del info[key]
        info.update(own)
        self._own_keys = set(own)
        return info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        observations, rewards, terminals, truncations, infos = self.inner.step(np.zeros(1, dtype=np.int32))
        own = infos[0] if infos else {}
        record = own.get(EPISODE_RECORD_KEY)
        if self._mixed_cut and record is not None and record.ended == ENDED_DESYNC:
            terminals = np.ones(1, dtype=bool)  # cut as it ended: terminated and truncated in one step
        if "exact_accounting" in own:  # the episode's end: what it logged, nothing (an empty list is no number)
            own = {**own, "exact_accounting": {**own["exact_accounting"], "events": []}}
        # numpy's own scalars, as envs computing with numpy return them
        return observations[0].copy(), rewards[0], terminals[0], truncations[0], self._own_info(own)


class ResourceChainEnv(_HarnessEnv):
    """A delayed-reward production chain: mine -> generator -> altar, as in the arena post-mortem.

    Timeline of an episode (steps counted from 1, one per `step()` call): the mine makes an ore
    every `ore_step` steps (steps 50, 100, ...; `ore_reward` each); each ore becomes a battery
    `battery_delay` steps later (75, 125, ...; `battery_reward`), each battery a heart
    `heart_delay` steps later (85, 135, ...; `heart_reward`). The mine's cooldown is thus the
    period of the whole chain, and an episode of length L holds `L // ore_step` ores,
    `(L - battery_delay) // ore_step` batteries and `(L - battery_delay - heart_delay) //
    ore_step` hearts (never below 0). With the defaults the first heart comes at step 85
    (`first_heart_step`), and a 1000-step episode earns 20 ore, 19 batteries, 19 hearts
    (return 36.2). Episodes end with `terminals=True` after `max_steps` steps.

    `desync` changes the first episode after construction only (its randomness is drawn from
    the constructor `seed`, so workers built with different seeds get different draws):

    - `"none"`: every episode is a full `max_steps` episode.
    - `"legacy"`: the first episode's length is uniform in [max(1, max_steps // 2), max_steps]
      and it ends as a normal terminal: a full, shorter episode (the pre-regression behaviour).
    - `"truncate"`: the first episode is cut at a uniform step in [1, max_steps] and ends with
      `truncations=True, terminals=False`: the regression that starved arena rewards, since a
      cut before step 85 earns no heart.

    `env_cfg` may set `max_steps`, `ore_reward`, `battery_reward` and `heart_reward`.
    """

    CONFIG_KEYS: ClassVar[tuple[str, ...]] = ("max_steps", "ore_reward", "battery_reward", "heart_reward")

    def __init__(
        self,
        *,
        max_steps: int = 1000,
        desync: str = "none",
        ore_step: int = 50,
        battery_delay: int = 25,
        heart_delay: int = 10,
        ore_reward: float = 0.1,
        battery_reward: float = 0.8,
        heart_reward: float = 1.0,
        num_agents: int = 1,
        buf: dict[str, np.ndarray] | None = None,
        seed: int | None = 0,
    ) -> None:
        if desync not in DESYNC_MODES:
            raise ValueError(f"Expected `desync` to be one of {DESYNC_MODES!r}, received {desync!r}")
        self._defaults = {
            "max_steps": _positive_int("max_steps", max_steps),
            "ore_reward": _finite("ore_reward", ore_reward),
            "battery_reward": _finite("battery_reward", battery_reward),
            "heart_reward": _finite("heart_reward", heart_reward),
        }
        self._ore_step = _positive_int("ore_step", ore_step)
        self._battery_delay = _non_negative_int("battery_delay", battery_delay)
        self._heart_delay = _non_negative_int("heart_delay", heart_delay)
        num_agents = _positive_int("num_agents", num_agents)
        self._desync = desync
        self._desync_pending = desync != "none"
        self._rng = np.random.default_rng(seed)
        self._config = dict(self._defaults)
        self._ore_reward = self._config["ore_reward"]
        self._battery_reward = self._config["battery_reward"]
        self._heart_reward = self._config["heart_reward"]
        self._episode_steps = self._config["max_steps"]
        self._truncate_episode = False
        self._step = 0
        self._ore = self._batteries = self._hearts = 0
        self._next_ore = self._next_battery = self._next_heart = 0
        self._return = 0.0
        self._paid = 0.0
        self.episodes_completed = 0
        super().__init__(num_obs=4, num_agents=num_agents, buf=buf, seed=seed)
        self._obs_step = self.observations[:, 0]
        self._obs_ore = self.observations[:, 1]
        self._obs_batteries = self.observations[:, 2]
        self._obs_hearts = self.observations[:, 3]

    @property
    def desync(self) -> str:
        """The desync mode of the first episode."""
        return self._desync

    @property
    def first_heart_step(self) -> int:
        """The step (1-based) of an episode at which the first heart is made."""
        return self._ore_step + self._battery_delay + self._heart_delay

    @property
    def episode_steps(self) -> int:
        """Length limit of the current (or last) episode, after any desync."""
        return self._episode_steps

    @property
    def max_steps(self) -> int:
        """`max_steps` of the applied config."""
        return self._config["max_steps"]

    def production_counts(self, episode_length: int) -> tuple[int, int, int]:
        """`(ore, batteries, hearts)` made in an episode of `episode_length` steps."""
        length = _non_negative_int("episode_length", episode_length)
        ore = length // self._ore_step
        batteries = max(0, (length - self._battery_delay) // self._ore_step)
        hearts = max(0, (length - self._battery_delay - self._heart_delay) // self._ore_step)
        return ore, batteries, hearts

    def _parse_config(self, env_cfg: Mapping[str, Any]) -> dict[str, Any]:
        config = dict(self._defaults)
        if "max_steps" in env_cfg:
            value = env_cfg["max_steps"]
            if not _is_int(value) or value < 1:
                raise ValueError(f"Expected env config key 'max_steps' to be a positive integer, received {value!r}")
            config["max_steps"] = int(value)
        for key in ("ore_reward", "battery_reward", "heart_reward"):
            if key in env_cfg:
                value = env_cfg[key]
                if not _is_number(value):
                    raise ValueError(f"Expected env config key {key!r} to be a finite number, received {value!r}")
                config[key] = float(value)
        return config

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Start an episode with the pending config, if any; the first one may be desynced."""
        config = self._take_pending_config()
        if config is not None:
            self._config = config
            self._ore_reward = config["ore_reward"]
            self._battery_reward = config["battery_reward"]
            self._heart_reward = config["heart_reward"]
        max_steps = self._config["max_steps"]
        self._episode_steps = max_steps
        self._truncate_episode = False
        if self._desync_pending:
            self._desync_pending = False
            if self._desync == "legacy":
                self._episode_steps = int(self._rng.integers(max(1, max_steps // 2), max_steps, endpoint=True))
            else:
                self._episode_steps = int(self._rng.integers(1, max_steps, endpoint=True))
                self._truncate_episode = True
        self._step = 0
        self._ore = self._batteries = self._hearts = 0
        self._next_ore = self._ore_step
        self._next_battery = self._ore_step + self._battery_delay
        self._next_heart = self._next_battery + self._heart_delay
        self._return = 0.0
        self._paid = 0.0
        self._episode_running = True
        self.observations.fill(0.0)
        self.rewards.fill(0.0)
        self.terminals.fill(False)
        self.truncations.fill(False)
        return self.observations, []

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Advance the chain one step; pays for whatever it produced this step."""
        if not self._episode_running:
            raise self._episode_ended_error()
        step = self._step + 1
        self._step = step
        reward = 0.0
        if step == self._next_ore:
            self._next_ore += self._ore_step
            self._ore += 1
            reward += self._ore_reward
            self._obs_ore.fill(self._ore)
        if step == self._next_battery:
            self._next_battery += self._ore_step
            self._batteries += 1
            reward += self._battery_reward
            self._obs_batteries.fill(self._batteries)
        if step == self._next_heart:
            self._next_heart += self._ore_step
            self._hearts += 1
            reward += self._heart_reward
            self._obs_hearts.fill(self._hearts)
        self._return += reward
        self.rewards.fill(reward)
        self._paid += float(self.rewards[0])  # what each agent received through the float32 buffer
        self._obs_step.fill(step)
        if step < self._episode_steps:
            return self.observations, self.rewards, self.terminals, self.truncations, []
        self._episode_running = False
        self.episodes_completed += 1
        if self._truncate_episode:
            self.truncations.fill(True)
        else:
            self.terminals.fill(True)
        numbers = {"resource_chain": {
            "hearts": self._hearts,
            "ore": self._ore,
            "batteries": self._batteries,
            "episode_length": step,
            "episode_return": self._return,
            "truncated_by_desync": self._truncate_episode,
        }}
        info = self._episode_info(numbers, self._config, (self._paid,) * self.num_agents,
                                  ENDED_DESYNC if self._truncate_episode else ENDED_TERMINAL, step,
                                  episode_steps=self._episode_steps)
        return self.observations, self.rewards, self.terminals, self.truncations, [info]
