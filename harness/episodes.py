"""The env side of every episode, recorded independently of the curriculum under test.

Each harness env puts an `EpisodeRecord` into the info dict of the step that ends an episode
(key `EPISODE_RECORD_KEY`): the config it really ran, each agent's return, how the episode
ended and how many steps it took. The stats pipeline skips it (it is not a number), pufferlib
carries it across worker processes like any info value, and the accounting oracle
(`harness.oracle`) recomputes every number the curriculum and the pipeline report from it.

Which task an episode ran is read from the config itself: a task is its label and its env
config (`EpisodeRecord.identity`). `LabelledTaskGenerator` writes the label into every env
config, and the envs record it as metadata (it does not change the dynamics). Copies of one
configuration are one task to the student; the curriculum may give them different ids.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from curriculum.generators import TaskGenerator

__all__ = [
    "EPISODE_RECORD_KEY",
    "ENV_INFO_KEYS",
    "TASK_LABEL_KEY",
    "METADATA_KEYS",
    "ENDED_TERMINAL",
    "ENDED_TRUNCATED",
    "ENDED_DESYNC",
    "ENDINGS",
    "EpisodeRecord",
    "LabelledTaskGenerator",
    "task_identity",
    "new_env_name",
]

EPISODE_RECORD_KEY: Final = "harness_episode"
"""Info key of the `EpisodeRecord` a harness env reports at the end of each episode."""
ENV_INFO_KEYS: Final = frozenset({"exact_accounting", "task_dependency", "resource_chain", "seed_reporting"})
"""The top-level info keys the harness envs write their own numbers under (one per env)."""
TASK_LABEL_KEY: Final = "label"
"""Env config key holding the task's label (metadata, no effect on the env)."""
METADATA_KEYS: Final = frozenset({TASK_LABEL_KEY})
"""Env config keys every harness env accepts, records and otherwise ignores."""

ENDED_TERMINAL: Final = "terminal"
"""Every agent reached a terminal state (or its own episode end)."""
ENDED_TRUNCATED: Final = "truncated"
"""A plain time-limit truncation: a full episode, to be recorded like a terminal one."""
ENDED_DESYNC: Final = "desync"
"""A desync truncation (seeds/004): a partial episode that must never reach the curriculum."""
ENDINGS: Final = (ENDED_TERMINAL, ENDED_TRUNCATED, ENDED_DESYNC)

_ENV_NUMBERS = itertools.count()


def new_env_name(seed: int | None) -> str:
    """A name for one env instance, unique across the processes of a run: `<pid>:<seed>:<n>`."""
    return f"{os.getpid()}:{seed}:{next(_ENV_NUMBERS)}"


@dataclass(frozen=True)
class EpisodeRecord:
    """One finished episode as the env saw it."""

    env: str
    """The env instance (`new_env_name`)."""
    index: int
    """Episode number within that env, from 0."""
    config: Mapping[str, Any]
    """The settings the episode ran with, the metadata key `label` included."""
    returns: tuple[float, ...]
    """Each agent's return, counted up to that agent's own end."""
    ended: str
    """One of `ENDINGS`."""
    steps: int
    """Env steps the episode took (until its last agent ended)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Env-specific facts (e.g. the student's performance on the task after the episode)."""
    reported: Mapping[str, Any] = field(default_factory=dict)
    """A copy of the env's own numbers in the info that carries this record: a wrapper must
    pass them to the user unchanged (the oracle compares them)."""

    @property
    def label(self) -> str | None:
        """The task's label, if the config carried one."""
        return self.config.get(TASK_LABEL_KEY)

    @property
    def identity(self) -> str:
        """The task the episode ran: its label and config (`task_identity`)."""
        return task_identity(self.config, self.label)


def task_identity(env_cfg: Mapping[str, Any], label: str | None) -> str:
    """A task as the student sees it: label and env config (metadata keys left out), as text
    that is the same in every process."""
    settings = sorted((key, value) for key, value in env_cfg.items() if key not in METADATA_KEYS)
    return f"{label}:{settings!r}"


class LabelledTaskGenerator(TaskGenerator):
    """Wraps a generator so that every env config carries its task's label (recorded by the
    harness envs). Same tasks, same labels, same draws as the wrapped generator."""

    def __init__(self, inner: TaskGenerator) -> None:
        if not isinstance(inner, TaskGenerator):
            raise TypeError(f"Expected a TaskGenerator to label, received {type(inner).__name__}")
        self.inner = inner

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        env_cfg, label = self.inner.generate(task_id)
        return {**env_cfg, TASK_LABEL_KEY: label}, label

    def describe(self) -> dict[str, Any]:
        return {"type": "labelled", "inner": self.inner.describe()}

    @property
    def labels(self) -> tuple[str, ...]:
        return self.inner.labels
