"""Task spaces the scenarios run on: a simulated student plus the generator of its tasks.

A task's env config is `{"task_index": i}`: the student task it trains (or, with an
`index_path` such as `"student.task_index"`, the same setting nested in a sub-config), plus
its `label` (`harness.episodes.LabelledTaskGenerator`), so every episode record names the task it ran. Labels group the task indices for per-label metrics; impossible ones end in
`IMPOSSIBLE_SUFFIX`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curriculum import BucketedTaskGenerator, TaskGenerator, WeightedTaskSetGenerator
from curriculum.errors import CurriculumConfigError
from harness.episodes import LabelledTaskGenerator
from harness.simulator import TaskDependencySimulator

__all__ = ["IMPOSSIBLE_SUFFIX", "TaggedTasks", "TaskSpace", "impossible_task_space", "chain_task_space", "CyclicTaskGenerator",
           "forgetting_task_space"]

IMPOSSIBLE_SUFFIX = "_IMPOSSIBLE"


@dataclass
class TaskSpace:
    """A student and the generator whose tasks train it."""

    simulator: TaskDependencySimulator
    generator: TaskGenerator
    learnable_labels: tuple[str, ...]
    impossible_labels: tuple[str, ...]
    index_path: str = "task_index"
    """Where a task's env config holds its student task: a dotted path into nested configs."""

    def task_index(self, env_cfg: dict[str, Any]) -> int:
        value: Any = env_cfg
        for key in self.index_path.split("."):
            value = value[key]
        return value


def impossible_task_space(
    *,
    num_learnable: int,
    num_impossible: int,
    mode: str = "zero",
    learning_rate: float = 0.004,
    seed: int = 0,
    index_path: str = "task_index",
) -> TaskSpace:
    """Independent learnable tasks (label `learnable`) plus impossible ones (`<mode>_IMPOSSIBLE`).

    `mode` "zero": impossible rewards are always 0; "noise": a constant plus noise.
    Tasks are drawn in proportion to how many indices each group has. A dotted `index_path`
    nests the student task in a base sub-config (`{"student": {"task_index": -1, "mode": mode}}`) that
    every task's bucket draw writes into: the same tasks, drawn the same way.
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
    *outer, leaf = index_path.split(".")
    base: dict[str, Any] = {leaf: -1, "mode": mode} if outer else {}  # the sub-config, a sibling beside the index
    for key in reversed(outer):
        base = {key: base}
    generator = LabelledTaskGenerator(WeightedTaskSetGenerator(
        [
            (BucketedTaskGenerator(base, {index_path: list(range(num_learnable))}, label="learnable", seed=seed),
             num_learnable),
            (BucketedTaskGenerator(base, {index_path: list(range(num_learnable, total))}, label=impossible_label,
                                   seed=seed), num_impossible),
        ],
        seed=seed,
    ))
    return TaskSpace(simulator, generator, ("learnable",), (impossible_label,), index_path)


def chain_task_space(*, num_tasks: int = 10, seed: int = 0, **simulator_kwargs: Any) -> TaskSpace:
    """A prerequisite chain: task i needs task i-1; task i is labelled `task_<i>`."""
    simulator = TaskDependencySimulator(num_tasks, seed=seed, **simulator_kwargs)
    generator = LabelledTaskGenerator(WeightedTaskSetGenerator(
        [BucketedTaskGenerator({"task_index": i}, {}, label=f"task_{i}", seed=seed) for i in range(num_tasks)],
        seed=seed,
    ))
    labels = tuple(f"task_{i}" for i in range(num_tasks))
    return TaskSpace(simulator, generator, labels, ())


class CyclicTaskGenerator(TaskGenerator):
    """Task id `k` trains student task `k % num_tasks` (label `task_<i>`): a pool whose size is a
    multiple of `num_tasks` then holds every student task equally often, so no task can be
    missing from the pool by chance."""

    def __init__(self, num_tasks: int) -> None:
        if not (isinstance(num_tasks, int) and num_tasks >= 1):
            raise CurriculumConfigError(f"Expected `num_tasks` to be an integer >= 1, received {num_tasks!r}")
        self.num_tasks = num_tasks

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        index = task_id % self.num_tasks
        return {"task_index": index}, f"task_{index}"

    def describe(self) -> dict[str, Any]:
        return {"type": "cyclic", "num_tasks": self.num_tasks}

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(f"task_{i}" for i in range(self.num_tasks))


def forgetting_task_space(*, num_tasks: int = 4, forgetting_rate: float = 5e-4, seed: int = 0) -> TaskSpace:
    """Independent tasks that are forgotten without practice, one pool slot pattern per task."""
    simulator = TaskDependencySimulator(num_tasks, edges=[], forgetting_rate=forgetting_rate, seed=seed)
    generator = LabelledTaskGenerator(CyclicTaskGenerator(num_tasks))
    return TaskSpace(simulator, generator, generator.labels, ())


class TaggedTasks(TaskGenerator):
    """`generator` whose configs also carry the task id (`level_seed`), the tasks unchanged."""

    def __init__(self, generator: TaskGenerator) -> None:
        self.generator = generator

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        env_cfg, label = self.generator.generate(task_id)
        return {**env_cfg, "level_seed": task_id}, label

    def describe(self) -> dict[str, Any]:
        return {"type": "tagged_tasks", "generator": self.generator.describe()}

    @property
    def labels(self) -> tuple[str, ...]:
        return self.generator.labels
