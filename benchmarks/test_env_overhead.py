"""CurriculumEnv step overhead over the bare env, measured in the same run.

Target: <= 0.3 us per non-terminal step over the bare env (seeds/004: a wrapper's attribute
interception cost 20% of throughput). The bare env does nothing but hand back its buffers, so
the difference is the wrapper's whole hot path: the call, one phase check, one reward read,
two flag reads. Also measured: the cost of a step that ends an episode (record, draw, reset).
Run with `make bench`; printed at the end as `env_step_*` figures.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pufferlib
import pytest

from curriculum import Curriculum, CurriculumConfig, CurriculumEnv, SingleTaskGenerator, UniformConfig

STEPS_PER_ROUND = 100_000


class _StepEnv(pufferlib.PufferEnv):
    """A native env whose step only hands back its buffers; episodes end after `episode_length`
    steps (never, by default)."""

    def __init__(self, *, num_agents: int = 1, episode_length: int = 0, buf: Any = None, seed: int = 0) -> None:
        self.single_observation_space = gymnasium.spaces.Box(low=0, high=1, shape=(4,), dtype=np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.num_agents = num_agents
        super().__init__(buf)
        self._length = episode_length
        self._t = 0
        self.rewards.fill(0.001)

    def set_env_config(self, env_cfg: Any) -> None:
        pass

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[Any]]:
        self._t = 0
        self.terminals.fill(False)
        return self.observations, []

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[Any]]:
        if self._length:
            self._t += 1
            if self._t >= self._length:
                self.terminals.fill(True)
        return self.observations, self.rewards, self.terminals, self.truncations, []


class _ReturnsEnv(_StepEnv):
    """Reports its own episode returns, so the wrapper does not sum rewards."""

    def get_episode_rewards(self) -> np.ndarray:
        return np.zeros(self.num_agents)


def _curriculum() -> Curriculum:
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}, label="bench"),
                              algorithm=UniformConfig(), num_active_tasks=64)
    return Curriculum(config)


def _steps(env: Any, actions: np.ndarray) -> None:
    step = env.step
    for _ in range(STEPS_PER_ROUND):
        step(actions)


VARIANTS = {
    "bare": lambda: _StepEnv(),
    "wrapped": lambda: CurriculumEnv(_StepEnv(), _curriculum()),
    "wrapped_env_returns": lambda: CurriculumEnv(_ReturnsEnv(), _curriculum()),
    "bare_4_agents": lambda: _StepEnv(num_agents=4),
    "wrapped_4_agents": lambda: CurriculumEnv(_StepEnv(num_agents=4), _curriculum()),
}
BASELINES = {"wrapped": "bare", "wrapped_env_returns": "bare", "wrapped_4_agents": "bare_4_agents"}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_non_terminal_step(benchmark: Any, figures: dict[str, float], variant: str) -> None:
    env = VARIANTS[variant]()
    env.reset()
    actions = np.zeros(env.num_agents, dtype=np.int32)
    benchmark.pedantic(_steps, args=(env, actions), rounds=7, iterations=1, warmup_rounds=1)
    per_step_us = benchmark.stats.stats.min / STEPS_PER_ROUND * 1e6
    figures[f"env_step_{variant}_us"] = per_step_us
    benchmark.extra_info["us_per_step"] = per_step_us
    baseline = figures.get(f"env_step_{BASELINES.get(variant, '')}_us")
    if baseline is not None:
        figures[f"env_step_{variant}_overhead_us"] = per_step_us - baseline
        figures[f"env_step_{variant}_ratio"] = per_step_us / baseline
        benchmark.extra_info["overhead_us"] = per_step_us - baseline
        print(f"\n{variant}: {per_step_us:.3f} us/step, bare {baseline:.3f} us/step, "
              f"overhead {per_step_us - baseline:.3f} us ({per_step_us / baseline:.2f}x)")


def test_episode_end_step(benchmark: Any, figures: dict[str, float]) -> None:
    """Every step ends a one-step episode: record, draw, apply config, reset, stats entries."""
    env = CurriculumEnv(_StepEnv(episode_length=1), _curriculum())
    env.reset()
    actions = np.zeros(1, dtype=np.int32)
    benchmark.pedantic(_steps, args=(env, actions), rounds=3, iterations=1, warmup_rounds=1)
    figures["env_step_episode_end_us"] = benchmark.stats.stats.min / STEPS_PER_ROUND * 1e6
