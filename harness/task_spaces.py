"""Task spaces the scenarios run on: a simulated student plus the generator of its tasks.

A task's env config is `{"task_index": i}`: the student task it trains. Labels group the
task indices for per-label metrics; impossible ones end in `IMPOSSIBLE_SUFFIX`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curriculum import BucketedTaskGenerator, TaskGenerator, WeightedTaskSetGenerator
from harness.simulator import TaskDependencySimulator

__all__ = ["IMPOSSIBLE_SUFFIX", "TaskSpace", "impossible_task_space", "chain_task_space"]

IMPOSSIBLE_SUFFIX = "_IMPOSSIBLE"


@dataclass
class TaskSpace:
    """A student and the generator whose tasks train it."""

    simulator: TaskDependencySimulator
    generator: TaskGenerator
    learnable_labels: tuple[str, ...]
    impossible_labels: tuple[str, ...]

    @staticmethod
    def task_index(env_cfg: dict[str, Any]) -> int:
        return env_cfg["task_index"]


def impossible_task_space(
    *,
    num_learnable: int,
    num_impossible: int,
    mode: str = "zero",
    learning_rate: float = 0.004,
    seed: int = 0,
) -> TaskSpace:
    """Independent learnable tasks (label `learnable`) plus impossible ones (`<mode>_IMPOSSIBLE`).

    `mode` "zero": impossible rewards are always 0; "noise": a constant plus noise.
    Tasks are drawn in proportion to how many indices each group has.
    """
    total = num_learnable + num_impossible
    simulator = TaskDependencySimulator(
        total,
        edges=[],
        learning_rate=learning_rate,
        impossible_tasks=range(num_learnable, total),
        impossible_mode=mode,
        seed=seed,
    )
    impossible_label = f"{mode}{IMPOSSIBLE_SUFFIX}"
    generator = WeightedTaskSetGenerator(
        [
            (BucketedTaskGenerator({}, {"task_index": list(range(num_learnable))}, label="learnable", seed=seed),
             num_learnable),
            (BucketedTaskGenerator({}, {"task_index": list(range(num_learnable, total))}, label=impossible_label,
                                   seed=seed), num_impossible),
        ],
        seed=seed,
    )
    return TaskSpace(simulator, generator, ("learnable",), (impossible_label,))


def chain_task_space(*, num_tasks: int = 10, seed: int = 0, **simulator_kwargs: Any) -> TaskSpace:
    """A prerequisite chain: task i needs task i-1; task i is labelled `task_<i>`."""
    simulator = TaskDependencySimulator(num_tasks, seed=seed, **simulator_kwargs)
    generator = WeightedTaskSetGenerator(
        [BucketedTaskGenerator({"task_index": i}, {}, label=f"task_{i}", seed=seed) for i in range(num_tasks)],
        seed=seed,
    )
    labels = tuple(f"task_{i}" for i in range(num_tasks))
    return TaskSpace(simulator, generator, labels, ())
