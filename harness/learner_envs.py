"""Task families for real learners: small gymnasium envs whose difficulty a task config sets.

Each env has learnable variants (difficulty grows with one config value), impossible ones (the
full reward cannot be earned) and noisy ones (a random return no policy can change), so a
curriculum driving a real learner (stable-baselines3 PPO through `GymCurriculumEnv`,
`harness.learners`) faces the choices the simulated student of the scenarios poses:

- `DoorCorridorEnv`: a corridor of `length` doors. Each door opens only with its own action
  (one of `num_codes`, fixed by `layout_seed` and the same for every length, so what a short
  corridor teaches carries over to longer ones); a wrong code sends the agent back to the
  start. Each door passed for the first time in an episode pays `progress_share / (length -
  1)`, the goal pays the rest (return 1 at most). A random policy gets through one or two
  doors; length L needs the doors of the shorter corridors first.
  Impossible: `locked` (the last door never opens and the others are jammed: each opens by
  chance, one step in `num_codes`, whatever the action). Noisy: `noisy`.
- `CraftingChainEnv`: a production chain of `depth` machines (ore -> ... -> heart, as in
  `harness.envs.ResourceChainEnv`, but the agent runs the machines). Machine k turns the
  product of machine k-1 into its own; machine 0 needs nothing. Running a machine without its
  input jams the line and loses what was held. Intermediate products pay
  `INTERMEDIATE_SHARE` in all (each the first time it is made in an episode), the last one
  pays the rest. Impossible: `depleted` (the mine is empty: every machine jams, the return is
  always 0). Noisy: `noisy`.

In a noisy variant the dynamics are unchanged but the whole return is one uniform draw in
[0, 1] paid at the episode's end. The observation ends with the task's config (difficulty /
max, impossible flag, noisy flag), as a goal-conditioned agent sees its goal, so impossible
and noisy variants waste samples without corrupting what the policy learns elsewhere.

Both follow the contract of `harness.envs`: `set_env_config(env_cfg)` validates at once
(ValueError naming the key) and applies at the next `reset()`, keys a config leaves out take
the constructor default, the metadata keys (`harness.episodes.METADATA_KEYS`: `label`,
`task_tag`) are ignored and unknown keys are refused.
Episodes end with `terminated` at the goal and `truncated` at the time limit
(`time_limit_factor * difficulty + 2` steps); returns stay in [0, 1], the default
`score_range` of a curriculum. Randomness comes from the constructor `seed` or a
`reset(seed=...)` (noisy returns, gymnasium's `np_random`) and `layout_seed` (door codes)
only, so runs are deterministic for a seed.

`LearnerTaskFamily` bundles an env factory with its variants and the task generator a
curriculum draws them from (`VariantCycleGenerator`). This module imports no torch;
`harness.learners` holds the PPO driver.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import gymnasium
from gymnasium.utils import seeding
import numpy as np

from curriculum import TaskGenerator
from harness.episodes import METADATA_KEYS

__all__ = [
    "LEARNABLE",
    "IMPOSSIBLE",
    "NOISY",
    "VARIANT_KINDS",
    "DoorCorridorEnv",
    "CraftingChainEnv",
    "Variant",
    "VariantCycleGenerator",
    "LearnerTaskFamily",
    "corridor_family",
    "crafting_family",
    "TASK_FAMILIES",
]

LEARNABLE: Final = "learnable"
IMPOSSIBLE: Final = "impossible"
NOISY: Final = "noisy"
VARIANT_KINDS: Final = (LEARNABLE, IMPOSSIBLE, NOISY)
"""What a variant is: learnable, impossible (the full reward cannot be earned) or noisy
(pure-noise rewards). Impossible and noisy variants are the ones a curriculum should drop."""

INTERMEDIATE_SHARE: Final = 0.2
"""Of a crafting chain's return, the part paid for intermediate products."""


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _positive_int(name: str, value: Any) -> int:
    if not _is_int(value) or value < 1:
        raise ValueError(f"Expected `{name}` to be a positive integer, received {value!r}")
    return int(value)


class _ConfiguredEnv(gymnasium.Env):
    """Config-at-reset plumbing shared by the task-family envs.

    Subclasses name their difficulty key (`DIFFICULTY_KEY`, an int in [1, `max_difficulty`])
    and their impossible flag (`IMPOSSIBLE_KEY`); `"noisy"` is common to both.
    """

    DIFFICULTY_KEY: ClassVar[str] = ""
    IMPOSSIBLE_KEY: ClassVar[str] = ""
    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, *, max_difficulty: int, difficulty: int, time_limit_factor: int, seed: int | None) -> None:
        self.max_difficulty = _positive_int(f"max_{self.DIFFICULTY_KEY}", max_difficulty)
        self.time_limit_factor = _positive_int("time_limit_factor", time_limit_factor)
        if not _is_int(difficulty) or not 1 <= difficulty <= self.max_difficulty:
            raise ValueError(
                f"Expected `{self.DIFFICULTY_KEY}` to be an integer in [1, {self.max_difficulty}], received {difficulty!r}"
            )
        self._defaults = {self.DIFFICULTY_KEY: int(difficulty), self.IMPOSSIBLE_KEY: False, "noisy": False}
        self._config = dict(self._defaults)
        self._pending: dict[str, Any] | None = None
        self._np_random, _ = seeding.np_random(seed)  # the noisy returns' stream
        self._running = False
        self._steps = 0
        self._return = 0.0

    @property
    def config_keys(self) -> tuple[str, ...]:
        """The env config keys this env reads."""
        return (self.DIFFICULTY_KEY, self.IMPOSSIBLE_KEY, "noisy")

    @property
    def config(self) -> dict[str, Any]:
        """The settings of the running (or last) episode."""
        return dict(self._config)

    @property
    def time_limit(self) -> int:
        """Steps after which the running episode is truncated."""
        return self.time_limit_factor * self._config[self.DIFFICULTY_KEY] + 2

    def set_env_config(self, env_cfg: Mapping[str, Any]) -> None:
        """Validate `env_cfg` now and apply it at the next `reset()` (never mid-episode)."""
        if not isinstance(env_cfg, Mapping):
            raise ValueError(f"Expected `env_cfg` to be a mapping, received {type(env_cfg).__name__}")
        keys = self.config_keys
        unknown = [key for key in env_cfg if key not in keys and key not in METADATA_KEYS]
        if unknown:
            raise ValueError(
                f"Unknown env config key(s) {', '.join(repr(k) for k in unknown)} for {type(self).__name__}; "
                f"expected keys from {keys!r}"
            )
        config = dict(self._defaults)
        key = self.DIFFICULTY_KEY
        if key in env_cfg:
            value = env_cfg[key]
            if not _is_int(value) or not 1 <= value <= self.max_difficulty:
                raise ValueError(
                    f"Expected env config key {key!r} to be an integer in [1, {self.max_difficulty}], received {value!r}"
                )
            config[key] = int(value)
        for flag in (self.IMPOSSIBLE_KEY, "noisy"):
            if flag in env_cfg:
                value = env_cfg[flag]
                if not isinstance(value, (bool, np.bool_)):
                    raise ValueError(f"Expected env config key {flag!r} to be a bool, received {value!r}")
                config[flag] = bool(value)
        self._pending = config

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode with the pending config, if any; a `seed` reseeds the noisy returns
        (gymnasium's rule: vector envs pass one only on their first reset)."""
        super().reset(seed=seed)
        if self._pending is not None:
            self._config, self._pending = self._pending, None
        self._running = True
        self._steps = 0
        self._return = 0.0
        self._start_episode()
        return self._observation(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One step; the episode ends at the goal (`terminated`) or the time limit (`truncated`)."""
        if not self._running:
            raise RuntimeError(
                f"{type(self).__name__}.step() called with no running episode; call reset() first"
            )
        if not self.action_space.contains(action):
            raise ValueError(f"Expected an action in {self.action_space}, received {action!r}")
        self._steps += 1
        reward, terminated = self._act(int(action))
        truncated = not terminated and self._steps >= self.time_limit
        if self._config["noisy"]:
            # the agent changes nothing: the whole return is one uniform draw at the end
            reward = float(self.np_random.random()) if terminated or truncated else 0.0
        self._return += reward
        info: dict[str, Any] = {}
        if terminated or truncated:
            self._running = False
            info = {"learner_task": {"success": bool(terminated and not self._config["noisy"]),
                                     "episode_return": self._return, "episode_length": self._steps}}
        return self._observation(), reward, terminated, truncated, info

    def _write_config(self, obs: np.ndarray) -> None:
        """The last three observation entries: difficulty / max, impossible flag, noisy flag
        (the agent sees its task's config, as a goal-conditioned agent does)."""
        config = self._config
        obs[-3] = config[self.DIFFICULTY_KEY] / self.max_difficulty
        obs[-2] = float(config[self.IMPOSSIBLE_KEY])
        obs[-1] = float(config["noisy"])

    # subclass hooks
    def _start_episode(self) -> None:
        raise NotImplementedError

    def _act(self, action: int) -> tuple[float, bool]:
        """Apply `action`; (reward, reached the goal)."""
        raise NotImplementedError

    def _observation(self) -> np.ndarray:
        raise NotImplementedError


class DoorCorridorEnv(_ConfiguredEnv):
    """A corridor of `length` doors, each opened by its own action; doors and goal pay.

    Observation: one-hot position (0 .. `max_length`), then the config (length / max_length,
    locked, noisy).
    Actions: `Discrete(num_codes)`; the code of door i is drawn once from `layout_seed` and is
    the same for every length; a wrong code sends the agent back to the start. Config keys:
    `length` (1 .. `max_length`), `locked`, `noisy` (the return is uniform in [0, 1]).

    A locked corridor is impossible in the full sense: its last door never opens, and the doors
    before it are jammed, each opening by chance (probability 1 / `num_codes` per step, as a
    random code would) whatever the action, so no policy earns more there than chance does.
    (Doors that still opened with their codes made a locked corridor partly learnable: its
    first doors pay half the return, its score rose while the agent learned them, and learning
    progress rightly followed it. That is a capped task, not an impossible one.)
    """

    DIFFICULTY_KEY = "length"
    IMPOSSIBLE_KEY = "locked"

    def __init__(
        self,
        *,
        max_length: int = 10,
        num_codes: int = 4,
        length: int = 1,
        time_limit_factor: int = 2,
        progress_share: float = 0.5,
        layout_seed: int = 0,
        seed: int | None = 0,
    ) -> None:
        super().__init__(max_difficulty=max_length, difficulty=length, time_limit_factor=time_limit_factor,
                         seed=seed)
        if not (isinstance(progress_share, (int, float)) and 0.0 <= progress_share < 1.0):
            raise ValueError(f"Expected `progress_share` to be a number in [0, 1), received {progress_share!r}")
        self.progress_share = float(progress_share)
        self.num_codes = _positive_int("num_codes", num_codes)
        if self.num_codes < 2:
            raise ValueError(f"Expected `num_codes` to be at least 2, received {num_codes!r}")
        rng = np.random.default_rng(layout_seed)
        codes = [int(rng.integers(num_codes))]
        for _ in range(max_length - 1):  # never the previous door's code: repeating an action is no shortcut
            codes.append((codes[-1] + 1 + int(rng.integers(num_codes - 1))) % num_codes)
        self.codes = tuple(codes)
        """The action that opens door i (i from 0); no two neighbours share a code."""
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, shape=(max_length + 4,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(num_codes)
        self._position = 0
        self._furthest = 0

    @property
    def position(self) -> int:
        """Doors passed in the running episode."""
        return self._position

    def _start_episode(self) -> None:
        self._position = 0
        self._furthest = 0

    def _act(self, action: int) -> tuple[float, bool]:
        length = self._config["length"]
        door = self._position
        if self._config["locked"]:  # jammed doors open by chance; the last one never
            opens = door < length - 1 and self.np_random.random() < 1.0 / self.num_codes
        else:
            opens = action == self.codes[door]
        if not opens:
            self._position = 0  # a wrong code sends the agent back to the start
            return 0.0, False
        self._position = door + 1
        if self._position == length:
            return 1.0 - (self.progress_share if length > 1 else 0.0), True
        if self._position <= self._furthest:
            return 0.0, False
        self._furthest = self._position
        return self.progress_share / (length - 1), False

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self.max_difficulty + 4, dtype=np.float32)
        obs[self._position] = 1.0
        self._write_config(obs)
        return obs


class CraftingChainEnv(_ConfiguredEnv):
    """A production chain of `depth` machines run by the agent; the last product pays most.

    Observation: one-hot of the product held (nothing, or product 0 .. `max_depth - 1`), then
    the config (depth / max_depth, depleted, noisy). Actions: `Discrete(max_depth + 1)`: run
    machine k (k < `max_depth`) or wait. Machine k needs product k-1 (machine 0 needs
    nothing); run without it, it jams and the held product is lost. Product k < depth-1 pays
    `INTERMEDIATE_SHARE / (depth - 1)` the first time it is made in an episode; product
    depth-1 pays the rest and ends the episode. Config keys: `depth` (1 .. `max_depth`),
    `depleted` (every machine jams), `noisy` (the return is uniform in [0, 1]).
    """

    DIFFICULTY_KEY = "depth"
    IMPOSSIBLE_KEY = "depleted"

    def __init__(
        self,
        *,
        max_depth: int = 6,
        depth: int = 1,
        time_limit_factor: int = 2,
        seed: int | None = 0,
    ) -> None:
        super().__init__(max_difficulty=max_depth, difficulty=depth, time_limit_factor=time_limit_factor,
                         seed=seed)
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, shape=(max_depth + 4,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(max_depth + 1)
        self._held = -1
        self._made: set[int] = set()

    @property
    def held(self) -> int:
        """The product held (-1: nothing)."""
        return self._held

    def _start_episode(self) -> None:
        self._held = -1
        self._made = set()

    def _act(self, action: int) -> tuple[float, bool]:
        if action == self.max_difficulty:  # wait
            return 0.0, False
        depth = self._config["depth"]
        last = depth - 1
        if action != self._held + 1 or action > last or self._config["depleted"]:
            self._held = -1  # jammed: the held product is lost
            return 0.0, False
        self._held = action
        if action == last:
            return 1.0 - (INTERMEDIATE_SHARE if depth > 1 else 0.0), True
        if action in self._made:
            return 0.0, False
        self._made.add(action)
        return INTERMEDIATE_SHARE / last, False

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self.max_difficulty + 4, dtype=np.float32)
        obs[self._held + 1] = 1.0
        self._write_config(obs)
        return obs


@dataclass(frozen=True)
class Variant:
    """One setting of a task family: its label, env config, kind and difficulty."""

    label: str
    env_cfg: dict[str, Any]
    kind: str
    difficulty: int


@dataclass(frozen=True)
class LearnerTaskFamily:
    """An env, its variants and the generator a curriculum draws them from."""

    name: str
    make_env: Callable[..., gymnasium.Env]
    """`make_env(seed=...)` builds one env (picklable, for `SubprocVecEnv`); the seed drives its noise."""
    variants: tuple[Variant, ...]
    success_return: float = 1.0
    """An evaluation episode with at least this return solved its variant."""
    generator: TaskGenerator = field(init=False)

    def __post_init__(self) -> None:
        labels = [v.label for v in self.variants]
        if len(set(labels)) != len(labels):
            raise ValueError(f"Expected distinct variant labels, received {labels}")
        for variant in self.variants:
            if variant.kind not in VARIANT_KINDS:
                raise ValueError(f"Expected variant kind in {VARIANT_KINDS}, received {variant.kind!r}")
        object.__setattr__(self, "generator", VariantCycleGenerator(self.variants, cycle_ids=self.default_pool_size))

    def labels_of(self, *kinds: str) -> tuple[str, ...]:
        """Labels of the variants of these kinds, easiest first."""
        chosen = [v for v in self.variants if v.kind in kinds]
        return tuple(v.label for v in sorted(chosen, key=lambda v: v.difficulty))

    @property
    def learnable(self) -> tuple[Variant, ...]:
        """The learnable variants, easiest first."""
        return tuple(sorted((v for v in self.variants if v.kind == LEARNABLE), key=lambda v: v.difficulty))

    def uniform_share(self, *kinds: str) -> float:
        """Share of the variants of these kinds: what uniform sampling gives them."""
        return sum(1 for v in self.variants if v.kind in kinds) / len(self.variants)

    @property
    def default_pool_size(self) -> int:
        """Curriculum pool size of the tier: every variant twice."""
        return 2 * len(self.variants)


class VariantCycleGenerator(TaskGenerator):
    """Task ids below `cycle_ids` go round the variants (id `k` is variant `k % len(variants)`);
    later ids draw a variant uniformly, from a hash of the id.

    With `cycle_ids` the pool size (a multiple of the number of variants), the first pool holds
    every variant equally often, so uniform sampling (which never evicts) samples every
    variant exactly equally; a curriculum that evicts admits later ids, as random as a real
    task generator's, so which variants it lets in is part of what it is judged on."""

    def __init__(self, variants: Sequence[Variant], *, cycle_ids: int = 0) -> None:
        if not variants:
            raise ValueError("Expected at least one variant, received none")
        if not _is_int(cycle_ids) or cycle_ids < 0:
            raise ValueError(f"Expected `cycle_ids` to be a non-negative integer, received {cycle_ids!r}")
        self.variants = tuple(variants)
        self.cycle_ids = int(cycle_ids)

    def variant_of(self, task_id: int) -> Variant:
        """The variant task `task_id` runs."""
        count = len(self.variants)
        if task_id < self.cycle_ids:
            return self.variants[task_id % count]
        digest = hashlib.blake2b(task_id.to_bytes(8, "little", signed=True), digest_size=8).digest()
        return self.variants[int.from_bytes(digest, "little") % count]

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        variant = self.variant_of(task_id)
        return dict(variant.env_cfg), variant.label

    def describe(self) -> dict[str, Any]:
        return {"type": "variant_cycle", "cycle_ids": self.cycle_ids,
                "variants": [[v.label, sorted(v.env_cfg.items())] for v in self.variants]}

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(v.label for v in self.variants)


class _EnvFactory:
    """A picklable env constructor with fixed keyword arguments."""

    def __init__(self, env_class: type[gymnasium.Env], **kwargs: Any) -> None:
        self.env_class = env_class
        self.kwargs = kwargs

    def __call__(self, *, seed: int | None = 0) -> gymnasium.Env:
        return self.env_class(**self.kwargs, seed=seed)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.env_class.__name__}({args})"


def _family_variants(
    prefix: str, key: str, impossible_key: str, lengths: Sequence[int], impossible: Sequence[int], noisy: Sequence[int]
) -> tuple[Variant, ...]:
    variants = [Variant(f"{prefix}_{n}", {key: n}, LEARNABLE, n) for n in lengths]
    variants += [Variant(f"{prefix}_{n}_{impossible_key}", {key: n, impossible_key: True}, IMPOSSIBLE, n)
                 for n in impossible]
    variants += [Variant(f"{prefix}_{n}_noisy", {key: n, "noisy": True}, NOISY, n) for n in noisy]
    return tuple(variants)


def corridor_family(
    *,
    lengths: Sequence[int] = (1, 2, 3, 4, 5, 6),
    locked: Sequence[int] = (3, 6),
    noisy: Sequence[int] = (3, 6),
    num_codes: int = 6,
    progress_share: float = 0.5,
    layout_seed: int = 0,
) -> LearnerTaskFamily:
    """Door corridors: one learnable variant per length, plus locked and noisy ones."""
    max_length = max([*lengths, *locked, *noisy])
    variants = _family_variants("corridor", "length", "locked", lengths, locked, noisy)
    make_env = _EnvFactory(DoorCorridorEnv, max_length=max_length, num_codes=num_codes,
                           progress_share=progress_share, layout_seed=layout_seed)
    return LearnerTaskFamily("corridor", make_env, variants)


def crafting_family(
    *,
    depths: Sequence[int] = (1, 2, 3, 4, 5, 6),
    depleted: Sequence[int] = (3, 6),
    noisy: Sequence[int] = (3, 6),
) -> LearnerTaskFamily:
    """Crafting chains: one learnable variant per depth, plus depleted and noisy ones."""
    max_depth = max([*depths, *depleted, *noisy])
    variants = _family_variants("crafting", "depth", "depleted", depths, depleted, noisy)
    return LearnerTaskFamily("crafting", _EnvFactory(CraftingChainEnv, max_depth=max_depth), variants)


TASK_FAMILIES: Final[dict[str, Callable[[], LearnerTaskFamily]]] = {
    "corridor": corridor_family,
    "crafting": crafting_family,
}
"""The task families of the learner tier, by name."""

