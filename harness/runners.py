"""Runners: drive a curriculum with a simulated student and record per-epoch metrics.

Three integration levels (seeds/000): `run_direct` (curriculum + stats pipeline),
`run_single_env` (one CurriculumEnv-wrapped env) and `run_vectorized` (pufferlib Serial or
Multiprocessing, shared-memory or centralized tracking). All three emit the same metric names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.recorder import MetricsRecorder
from harness.task_spaces import TaskSpace

__all__ = ["RunResult", "run_direct", "flatten_metrics"]


@dataclass
class RunResult:
    """What a run produced: per-epoch metrics plus exact per-label sample counts."""

    recorder: MetricsRecorder
    samples_by_label: Counter = field(default_factory=Counter)
    """Episodes handed out per label, after `warmup_episodes`."""
    episodes: int = 0


def flatten_metrics(prefix: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"<prefix>/a/b": 1}`, keeping numbers and strings."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}/{key}"
        if isinstance(value, Mapping):
            out.update(flatten_metrics(name, value))
        elif isinstance(value, (int, float, str)):
            out[name] = value
    return out


def _epoch_metrics(
    curriculum: Any, space: TaskSpace, epoch: int, agent_step: int, rewards: list[float], labels: Counter
) -> dict[str, Any]:
    metrics: dict[str, Any] = {
        "metric/epoch": epoch,
        "metric/agent_step": agent_step,
        "overview/reward": sum(rewards) / len(rewards) if rewards else 0.0,
        "overview/episodes": len(rewards),
    }
    metrics.update(flatten_metrics("env_curriculum_stats", curriculum.stats()))
    for label, count in labels.items():
        metrics[f"env_curriculum_stats/per_label_samples/{label}"] = count
    performance = space.simulator.performance
    for index, value in enumerate(performance.tolist()):
        metrics[f"env_task_dependency/performance/task_{index}"] = value
    metrics["env_task_dependency/mean_performance"] = float(performance.mean())
    metrics["env_task_dependency/num_mastered"] = space.simulator.num_mastered()
    return metrics


def run_direct(
    curriculum: Any,
    space: TaskSpace,
    *,
    episodes: int,
    epoch_length: int = 500,
    warmup_episodes: int = 0,
    recorder: MetricsRecorder | None = None,
    on_episode: Callable[[int, Any, float], None] | None = None,
) -> RunResult:
    """`episodes` get/sample/update rounds; metrics every `epoch_length` episodes."""
    result = RunResult(recorder if recorder is not None else MetricsRecorder())
    simulator = space.simulator
    rewards: list[float] = []
    labels: Counter = Counter()
    epoch = 0
    for episode in range(episodes):
        task = curriculum.get_task()
        reward = simulator.sample_task(task.env_cfg["task_index"])
        curriculum.update_task_performance(task.task_id, reward)
        rewards.append(reward)
        labels[task.label] += 1
        if episode >= warmup_episodes:
            result.samples_by_label[task.label] += 1
        if on_episode is not None:
            on_episode(episode, task, reward)
        if (episode + 1) % epoch_length == 0 or episode + 1 == episodes:
            result.recorder.record(_epoch_metrics(curriculum, space, epoch, episode + 1, rewards, labels))
            rewards, labels = [], Counter()
            epoch += 1
    result.episodes = episodes
    return result
