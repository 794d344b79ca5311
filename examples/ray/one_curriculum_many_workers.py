"""One curriculum for workers on many machines, through Ray (`pip install 'curriculum-harness[ray]'`).

Starts a curriculum service (learning progress, eviction on), then runs episodes two ways over
the same service and checks that every episode was recorded exactly once (recorded + late ==
episodes run):

1. pufferlib's Ray backend: `make_curriculum_vecenv(..., backend="Ray", tracking="ray")`;
2. your own Ray actors, each wrapping its env in a `CurriculumEnv` over its own client.

    python examples/ray/one_curriculum_many_workers.py                  # a local two-CPU cluster
    python examples/ray/one_curriculum_many_workers.py --address auto   # an existing cluster

On a cluster every machine runs `ray start` (`--head` on one, `--address=<head>:6379` on the
others) with this project installed; the checkpoint path must be on storage the service's
machine can write.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from typing import Any

import gymnasium
import numpy as np
import pufferlib
import ray

from curriculum import (
    CurriculumConfig,
    CurriculumEnv,
    LearningProgressConfig,
    SingleTaskGenerator,
    WeightedTaskSetGenerator,
)
from curriculum.ray_service import CurriculumClient, start_curriculum_service, stop_curriculum_service
from curriculum.vector import make_curriculum_vecenv


class CorridorEnv(pufferlib.PufferEnv):
    """Walk `length` steps; pays 1 at the end with probability `success` (the task's difficulty)."""

    def __init__(self, buf: Any = None, seed: int = 0) -> None:
        self.single_observation_space = gymnasium.spaces.Box(low=0, high=100, shape=(2,), dtype=np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.num_agents = 1
        super().__init__(buf)
        self.rng = np.random.default_rng(seed)
        self.config = {"length": 4, "success": 0.5}
        self.pending: dict[str, Any] | None = None
        self.position = 0

    def set_env_config(self, env_cfg: dict[str, Any]) -> None:
        self.pending = dict(env_cfg)  # applied at the next reset, never mid-episode

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        if self.pending is not None:
            self.config, self.pending = self.pending, None
        self.position = 0
        self.observations[:] = (0, self.config["length"])
        self.rewards[:] = 0
        self.terminals[:] = False
        self.truncations[:] = False
        return self.observations, []

    def step(self, actions: np.ndarray) -> tuple[Any, ...]:
        self.position += 1
        self.observations[:] = (self.position, self.config["length"])
        done = self.position >= self.config["length"]
        self.rewards[:] = float(done and self.rng.random() < self.config["success"])
        self.terminals[:] = done
        return self.observations, self.rewards, self.terminals, self.truncations, []

    def close(self) -> None:
        pass


def make_env(buf: Any = None, seed: int = 0) -> CorridorEnv:
    return CorridorEnv(buf=buf, seed=seed)


def make_config() -> CurriculumConfig:
    tasks = [(SingleTaskGenerator({"length": length, "success": success}, label=f"len{length}"), 1.0)
             for length in (2, 4, 8) for success in (0.0, 0.3, 0.9)]
    return CurriculumConfig(task_generator=WeightedTaskSetGenerator(tasks, seed=0),
                            algorithm=LearningProgressConfig(), num_active_tasks=16, seed=0,
                            min_presentations=4, eviction_percentile=25.0)


@ray.remote(num_cpus=0)
class EnvWorker:
    """Your own worker actor: one env, one client of the shared curriculum."""

    def __init__(self, service: Any, seed: int) -> None:
        self.client = CurriculumClient(service, prefetch=16, batch_size=32)
        self.env = CurriculumEnv(make_env(seed=seed), self.client, seed=seed)

    def run(self, steps: int) -> int:
        self.env.reset(seed=None)
        episodes = 0
        for _ in range(steps):
            *_, infos = self.env.step(np.zeros(1, dtype=np.int64))
            episodes += sum(info.get("curriculum_stats/episodes", 0) for info in infos)
        self.client.close()  # sends what is still queued
        return episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="an existing Ray cluster (default: start a local one)")
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    if args.address:
        ray.init(address=args.address, logging_level=logging.ERROR)
    else:
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
    checkpoint = os.path.join(tempfile.mkdtemp(), "curriculum.json")
    service = start_curriculum_service(make_config(), checkpoint_path=checkpoint, checkpoint_interval=500)
    client = CurriculumClient(service, prefetch=16, batch_size=32)

    vecenv = make_curriculum_vecenv(make_env, client, backend="Ray", tracking="ray", num_envs=4, num_workers=2,
                                    worker_options={"num_cpus": 0})
    vecenv.reset(seed=0)
    vec_episodes = 0
    for _ in range(args.steps):
        *_, infos = vecenv.step(np.zeros(4, dtype=np.int64))
        vec_episodes += sum(info.get("curriculum_stats/episodes", 0) for info in infos)
    vecenv.close()

    workers = [EnvWorker.remote(service, seed=100 + i) for i in range(2)]
    actor_episodes = sum(ray.get([worker.run.remote(args.steps) for worker in workers]))

    stats = client.stats()
    episodes = vec_episodes + actor_episodes
    print(f"episodes run: {episodes} ({vec_episodes} through the Ray vecenv, {actor_episodes} in worker actors)")
    print(f"service: {stats['total_completions']} recorded + {stats['late_completions']} late = "
          f"{stats['total_completions'] + stats['late_completions']}; {stats['evictions']} evictions")
    assert stats["total_completions"] + stats["late_completions"] == episodes, "an episode was lost or counted twice"
    client.close()
    print(f"checkpoint: {stop_curriculum_service(service, checkpoint=True)}")
    ray.shutdown()


if __name__ == "__main__":
    main()
