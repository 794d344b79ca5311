"""Runners: drive a curriculum with a simulated student and record per-epoch metrics.

Three integration levels (seeds/000, 001), all feeding episode info dicts through the real
stats pipeline (`curriculum.stats.accumulate_rollout_stats` after every step,
`process_training_stats` once per epoch), so they emit the same metric names as real training
and as each other:

- `run_direct`: `get_task` / `sample_task` / `update_task_performance` in a plain loop; the
  info dict of each episode is built with the same `CompletionRecorder` and keys that
  `CurriculumEnv` uses. Fastest; no env in the loop.
- `run_single_env`: one `CurriculumEnv(TaskDependencyEnv(simulator=space.simulator), curriculum)`
  stepped as a trainer would (auto-reset, stats from the env's infos).
- `run_vectorized`: `num_envs` such envs under pufferlib `Serial` or `Multiprocessing`, with
  shared-memory or centralized tracking (`curriculum.vector`).

Metrics of every epoch: `metric/epoch`, `metric/agent_step` (episodes completed so far),
`overview/*`, `env_curriculum_stats/*`, `env_task_dependency/*` from the pipeline, plus
`env_task_dependency/performance/task_<i>` (`PER_TASK_PERFORMANCE`), the student's
performance on every task at the end of the epoch (`env_task_dependency/mean_performance`
and `num_mastered` are the pipeline's: averaged over the epoch's episodes).

Setting the environment variable `METRICS_DIR_ENV` makes every run that was not given a
recorder stream its metrics to a JSONL file in that directory (`curriculum-harness run --out`
uses it to collect the runs of a scenario).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any, Final

import numpy as np

from curriculum.env import DEFAULT_STATS_INTERVAL, CompletionRecorder
from curriculum.stats import (
    DESYNC_TRUNCATIONS,
    EPISODES,
    PER_LABEL_SAMPLES,
    SCORE,
    STAGE,
    TASK_ID,
    accumulate_rollout_stats,
    process_training_stats,
    stat_key,
)
from harness.episodes import ENDED_TERMINAL, EPISODE_RECORD_KEY, EpisodeRecord
from harness.plots import PERFORMANCE_PREFIX
from harness.recorder import MetricsRecorder
from harness.simulator import TaskDependencySimulator
from harness.task_spaces import TaskSpace

__all__ = [
    "RunResult",
    "METRICS_DIR_ENV",
    "PER_TASK_PERFORMANCE",
    "run_direct",
    "run_single_env",
    "run_vectorized",
    "task_dependency_info",
    "completion_info",
]

METRICS_DIR_ENV: Final = "CURRICULUM_HARNESS_METRICS_DIR"
"""When set, runs without an explicit recorder write `<dir>/<test or run name>.jsonl`."""

PER_TASK_PERFORMANCE: Final = PERFORMANCE_PREFIX + "task_{}"
"""Student performance on task i at the end of the epoch (format with the task index)."""

EpochCallback = Callable[[Mapping[str, Any]], None]
"""Called with each epoch's metrics right after they are recorded (progress bars, early stops)."""


@dataclass
class RunResult:
    """What a run produced: per-epoch metrics plus exact per-label sample counts."""

    recorder: MetricsRecorder
    samples_by_label: Counter = field(default_factory=Counter)
    """Episodes handed out per label, after `warmup_episodes`."""
    episodes: int = 0
    """Episodes completed (the vectorized runner may overshoot `episodes` by < `num_envs`)."""


def task_dependency_info(simulator: TaskDependencySimulator, task_index: int, episode_return: float) -> dict[str, Any]:
    """The episode-end info `harness.envs.TaskDependencyEnv` reports, for loops without the env."""
    performance = simulator.performance_list()  # plain floats: Python sums beat numpy calls at this size
    threshold = simulator.mastery_threshold
    return {
        "task_dependency": {
            "performance": performance[task_index],
            "task_index": task_index,
            "mean_performance": sum(performance) / len(performance),
            "num_mastered": sum(1 for value in performance if value >= threshold),
            "mastered": performance[task_index] >= threshold,
            "episode_return": episode_return,
            "student": {"best_performance": max(performance), "worst_performance": min(performance),
                        "performance": performance, "mastered": [value >= threshold for value in performance]},
        }
    }


_EPISODE_KEY: Final = stat_key(EPISODES)
_TASK_ID_KEY: Final = stat_key(TASK_ID)
_DESYNC_KEY: Final = stat_key(DESYNC_TRUNCATIONS)
_SCORE_KEY: Final = stat_key(SCORE)
_STAGE_KEY: Final = stat_key(STAGE)
_SAMPLES_PREFIX: Final = stat_key(PER_LABEL_SAMPLES) + "/"


def completion_info(task: Any, score: float, record: Callable[[int, str, float], dict[str, Any]], *,
                    stage: int | None = None) -> dict[str, Any]:
    """What a `CurriculumEnv` reports for one full episode of `task`, for loops with no env:
    the episode entries, then `record(task_id, label, score)` (a `CompletionRecorder.record`)."""
    label = task.label
    info = {_EPISODE_KEY: 1, _SAMPLES_PREFIX + label: 1, _TASK_ID_KEY: task.task_id, _DESYNC_KEY: 0, _SCORE_KEY: score}
    info.update(record(task.task_id, label, score))
    if stage is not None:
        info[_STAGE_KEY] = stage
    return info


def _default_recorder() -> tuple[MetricsRecorder, bool]:
    """A recorder, streaming to `$METRICS_DIR_ENV/<name>.jsonl` when that is set; (recorder, owned)."""
    directory = os.environ.get(METRICS_DIR_ENV)
    if not directory:
        return MetricsRecorder(), True
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0].rsplit("::", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", test or f"run-{os.getpid()}").strip("_")
    path = Path(directory) / f"{name}.jsonl"
    for number in count(1):  # a second run in the same test gets `<name>-1.jsonl`, and so on
        if not path.exists():
            break
        path = path.with_name(f"{name}-{number}.jsonl")
    return MetricsRecorder(path), True


class _EpochLog:
    """Accumulates a run's infos and closes an epoch every `epoch_length` episodes."""

    def __init__(
        self,
        *,
        episodes: int,
        epoch_length: int,
        warmup_episodes: int,
        recorder: MetricsRecorder | None,
        on_epoch: EpochCallback | None,
        performance: Callable[[], Sequence[float]],
        oracle: Any = None,
    ) -> None:
        _check_positive("episodes", episodes)
        _check_positive("epoch_length", epoch_length)
        if isinstance(warmup_episodes, bool) or not isinstance(warmup_episodes, int) or warmup_episodes < 0:
            raise ValueError(f"Expected `warmup_episodes` to be a non-negative integer, received {warmup_episodes!r}")
        owned = False
        if recorder is None:
            recorder, owned = _default_recorder()
        self.result = RunResult(recorder)
        self._owned = owned
        self.episodes = episodes
        self.epoch_length = epoch_length
        self.warmup_episodes = warmup_episodes
        self.on_epoch = on_epoch
        self.performance = performance
        self.oracle = oracle
        self.stats: dict[str, list[float]] = {}
        self.done = 0
        self.epoch = 0
        self.next_epoch_end = min(epoch_length, episodes)

    def count(self, label: str) -> None:
        """One episode of `label` ended."""
        if self.done >= self.warmup_episodes:
            self.result.samples_by_label[label] += 1
        self.done += 1

    def close_epoch_if_due(self) -> bool:
        """Record the epoch if it is complete; True once the run has all its episodes."""
        if self.done < self.next_epoch_end:
            return False
        metrics = process_training_stats(self.stats, agent_step=self.done, epoch=self.epoch)
        if self.oracle is not None:
            self.oracle.epoch(metrics)
        for index, value in enumerate(self.performance()):
            metrics[PER_TASK_PERFORMANCE.format(index)] = float(value)
        self.result.recorder.record(metrics)
        if self.on_epoch is not None:
            self.on_epoch(self.result.recorder.last)
        self.stats.clear()
        self.epoch += 1
        self.next_epoch_end = min(self.done + self.epoch_length, self.episodes)
        return self.done >= self.episodes

    def finish(self) -> RunResult:
        if self.stats:  # a partial epoch (only when the loop stopped early)
            self.next_epoch_end = self.done
            self.close_epoch_if_due()
        self.result.episodes = self.done
        if self._owned and self.result.recorder.jsonl_path is not None:
            self.result.recorder.close()
        return self.result


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Expected `{name}` to be a positive integer, received {value!r}")


def _stats_interval(stats_interval: int | None, epoch_length: int, num_envs: int = 1) -> int:
    """Pool stats at least once per epoch per env, at most every `DEFAULT_STATS_INTERVAL` completions."""
    if stats_interval is not None:
        return stats_interval
    return max(1, min(DEFAULT_STATS_INTERVAL, epoch_length // num_envs))


def run_direct(
    curriculum: Any,
    space: TaskSpace,
    *,
    episodes: int,
    epoch_length: int = 500,
    warmup_episodes: int = 0,
    recorder: MetricsRecorder | None = None,
    on_episode: Callable[[int, Any, float], None] | None = None,
    on_epoch: EpochCallback | None = None,
    stats_interval: int | None = None,
    oracle: Any = None,
    student_info: bool = True,
) -> RunResult:
    """`episodes` get/sample/update rounds; metrics every `epoch_length` episodes.

    Each episode's info dict is what a `CurriculumEnv` over a `TaskDependencyEnv` reports
    (same `CompletionRecorder`, same keys), fed to the stats pipeline; without `student_info`
    only the wrapper's entries (no `env_task_dependency/*` metrics: a third less work per
    episode, for runs judged on the curriculum's own numbers). `on_episode(episode,
    task, reward)` runs after each update. `stats_interval` (completions between pool-wide
    `curriculum.stats()` reports) defaults to once per epoch, at most every
    `DEFAULT_STATS_INTERVAL`. With an `oracle` (`harness.oracle.AccountingOracle`), the runner
    plays the env's part too: each episode's info carries its `EpisodeRecord`, the curriculum is
    watched, and every epoch's metrics are checked; the caller calls `oracle.verify()`.
    """
    simulator = space.simulator
    if oracle is not None:
        curriculum = _watched(oracle, curriculum)
    log = _EpochLog(episodes=episodes, epoch_length=epoch_length, warmup_episodes=warmup_episodes,
                    recorder=recorder, on_epoch=on_epoch, performance=lambda: simulator.performance.tolist(),
                    oracle=oracle)
    completions = CompletionRecorder(curriculum, stats_interval=_stats_interval(stats_interval, epoch_length))
    get_task = curriculum.get_task
    record = completions.record
    sample = simulator.sample_task
    stats = log.stats
    staged = getattr(curriculum, "stage", None) is not None
    for episode in range(episodes):
        task = get_task()
        label = task.label
        task_index = task.env_cfg["task_index"]
        reward = sample(task_index)
        info = completion_info(task, reward, record, stage=curriculum.stage if staged else None)
        if student_info:
            info = {**task_dependency_info(simulator, task_index, reward), **info}
        if oracle is not None:
            info[EPISODE_RECORD_KEY] = EpisodeRecord("direct", episode, dict(task.env_cfg), (reward,), ENDED_TERMINAL, 1)
            oracle.observe((info,))
        accumulate_rollout_stats((info,), stats)
        log.count(label)
        if on_episode is not None:
            on_episode(episode, task, reward)
        log.close_epoch_if_due()
    return log.finish()


def run_single_env(
    curriculum: Any,
    space: TaskSpace,
    *,
    episodes: int,
    epoch_length: int = 500,
    warmup_episodes: int = 0,
    recorder: MetricsRecorder | None = None,
    on_epoch: EpochCallback | None = None,
    episode_length: int = 1,
    stats_interval: int | None = None,
    env_class: Any = None,
    oracle: Any = None,
) -> RunResult:
    """One `CurriculumEnv(TaskDependencyEnv(simulator=space.simulator), curriculum)`, stepped
    until `episodes` episodes ended; metrics from the env's info dicts through the pipeline.

    The wrapper auto-resets (its policy), so the loop is `reset()` once, then `step()` only.
    `episode_length` is the env's steps per episode (each step is one practice of the task).
    `env_class` replaces `curriculum.env.CurriculumEnv` (same constructor), for gating
    another wrapper. With an `oracle`, the curriculum is watched and every step's infos and
    every epoch are checked, and at the end the env's own `completions` and `late_completions`;
    the caller calls `oracle.verify()`.
    """
    from curriculum.env import CurriculumEnv
    from harness.envs import TaskDependencyEnv

    simulator = space.simulator
    if oracle is not None:
        curriculum = _watched(oracle, curriculum)
    log = _EpochLog(episodes=episodes, epoch_length=epoch_length, warmup_episodes=warmup_episodes,
                    recorder=recorder, on_epoch=on_epoch, performance=lambda: simulator.performance.tolist(),
                    oracle=oracle)
    wrapper = env_class if env_class is not None else CurriculumEnv
    env = wrapper(TaskDependencyEnv(simulator=simulator, episode_length=episode_length), curriculum,
                  stats_interval=_stats_interval(stats_interval, epoch_length))
    try:
        env.reset()
        actions = np.zeros_like(env.actions)
        stats = log.stats
        step = env.step
        while True:
            infos = step(actions)[4]  # the episode-end step auto-resets onto the next task
            if infos:
                if oracle is not None:
                    oracle.observe(infos)
                accumulate_rollout_stats(infos, stats)
                _count_episodes(infos, log)
                if log.close_epoch_if_due():
                    break
        if oracle is not None and hasattr(env, "late_completions"):  # (a wrapper under test may not count)
            oracle.wrapper_counts("the env", env.completions, env.late_completions)
    finally:
        env.close()
    return log.finish()


class _TaskDependencyEnvCreator:
    """Env creator for `curriculum.vector.make_curriculum_vecenv`: one `TaskDependencyEnv` per call.

    Every process that hosts envs gets one student, built by `space_factory()` on first use
    and shared by that process's envs: under `Serial` that is the main process's student
    (the runner's), under `Multiprocessing` each worker process builds its own copy from the
    same factory (same seed, so identical at the start; they diverge by what they practise).
    """

    def __init__(self, space_factory: Callable[[], TaskSpace], episode_length: int) -> None:
        self.space_factory = space_factory
        self.episode_length = episode_length
        self._space: TaskSpace | None = None
        self._pid = -1

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_space": None, "_pid": -1}

    def space_here(self) -> TaskSpace:
        """This process's task space (and student), built on first use."""
        pid = os.getpid()
        if self._pid != pid:
            space = self.space_factory()
            if not isinstance(space, TaskSpace):
                raise ValueError(
                    f"Expected `space_factory()` to return a TaskSpace, received {type(space).__name__}"
                )
            self._space, self._pid = space, pid
        assert self._space is not None
        return self._space

    def __call__(self, buf: Mapping[str, np.ndarray] | None = None, seed: int | None = 0) -> Any:
        from harness.envs import TaskDependencyEnv

        return TaskDependencyEnv(simulator=self.space_here().simulator, episode_length=self.episode_length,
                                 buf=buf, seed=seed)


class _ReportedPerformance:
    """Per-task performance as last reported in episode infos (any worker), for students that
    live in other processes; tasks never reported keep their initial performance."""

    def __init__(self, initial: Sequence[float]) -> None:
        self.values = [float(v) for v in initial]

    def update(self, info: Mapping[str, Any]) -> None:
        report = info.get("task_dependency")
        if isinstance(report, Mapping) and "task_index" in report and "performance" in report:
            self.values[int(report["task_index"])] = float(report["performance"])

    def __call__(self) -> list[float]:
        return list(self.values)


def run_vectorized(
    curriculum_or_config: Any,
    space_factory: Callable[[], TaskSpace],
    *,
    backend: str = "Serial",
    tracking: str = "shared",
    num_envs: int = 8,
    num_workers: int | None = None,
    episodes: int,
    epoch_length: int = 500,
    warmup_episodes: int = 0,
    recorder: MetricsRecorder | None = None,
    on_epoch: EpochCallback | None = None,
    episode_length: int = 1,
    stats_interval: int | None = None,
    seed: int = 0,
    overwork: bool = False,
    oracle: Any = None,
) -> RunResult:
    """`num_envs` CurriculumEnv-wrapped `TaskDependencyEnv`s under pufferlib, stepped until
    `episodes` episodes ended; metrics from the vec step infos through the stats pipeline.

    `curriculum_or_config`: a `CurriculumConfig` (the runner builds the curriculum, shared
    memory for `tracking="shared"`, local for "centralized", and closes it) or a curriculum
    the caller built and owns (see `curriculum.vector.make_curriculum_vecenv` for what each
    design accepts). `space_factory()` builds the task space; it must be picklable for
    `Multiprocessing`.

    The student: under `Serial` all envs share one student (the main process's); under
    `Multiprocessing` every worker process has its own copy of it (its envs share that one),
    so N workers train N students. `env_task_dependency/performance/task_<i>` is then the
    performance last reported for task i by any worker (exact under Serial: read from the
    student at the end of the epoch). Epochs close at vec-step boundaries, so an epoch (and
    the run) may hold up to `num_envs - 1` episodes more than asked.

    `num_workers` defaults to the most processes that fit the physical cores and divide
    `num_envs` (Multiprocessing only); `overwork=True` lifts pufferlib's cores limit. With an
    `oracle`, every step's infos and every epoch are checked (and, under `Serial`, the
    curriculum is watched and the wrappers' own counters checked against it); the runner
    calls `oracle.verify(curriculum)` before closing a curriculum it built.
    """
    from curriculum import Curriculum, CurriculumConfig
    from curriculum.vector import BACKENDS, TRACKING_MODES, default_num_workers, make_curriculum_vecenv

    if backend not in BACKENDS:
        raise ValueError(f"Expected `backend` to be one of {BACKENDS!r}, received {backend!r}")
    if tracking not in TRACKING_MODES:
        raise ValueError(f"Expected `tracking` to be one of {TRACKING_MODES!r}, received {tracking!r}")
    _check_positive("num_envs", num_envs)
    _check_positive("episodes", episodes)
    _check_positive("epoch_length", epoch_length)
    multiprocess = backend == "Multiprocessing"
    if multiprocess and num_workers is None:
        num_workers = default_num_workers(num_envs)
    creator = _TaskDependencyEnvCreator(space_factory, episode_length)
    space = creator.space_here()
    owned = isinstance(curriculum_or_config, CurriculumConfig)
    curriculum = (Curriculum(curriculum_or_config, shared_memory=tracking == "shared") if owned
                  else curriculum_or_config)
    target = curriculum
    if oracle is not None and not multiprocess:
        target = _watched(oracle, curriculum)
    reported = _ReportedPerformance(space.simulator.performance.tolist())
    performance = reported if multiprocess else (lambda: space.simulator.performance.tolist())
    vec_kwargs: dict[str, Any] = {"overwork": True} if overwork else {}
    try:
        vecenv = make_curriculum_vecenv(
            creator, target, backend=backend, tracking=tracking, num_envs=num_envs,
            num_workers=num_workers, seed=seed,
            stats_interval=_stats_interval(stats_interval, epoch_length, num_envs), **vec_kwargs,
        )
        try:
            log = _EpochLog(episodes=episodes, epoch_length=epoch_length, warmup_episodes=warmup_episodes,
                            recorder=recorder, on_epoch=on_epoch, performance=performance, oracle=oracle)
            _step_until_done(vecenv, log, reported if multiprocess else None, seed)
            if oracle is not None and not multiprocess:
                _check_wrapper_counts(oracle, vecenv, tracking)
        finally:
            vecenv.close()
        if oracle is not None and owned:
            oracle.verify(curriculum)
    finally:
        if owned:
            curriculum.close()
    return log.finish()


def _check_wrapper_counts(oracle: Any, vecenv: Any, tracking: str) -> None:
    """In one process: what the wrappers counted against what the watched curriculum was told
    (the envs' own counters under local tracking, the vector's under centralized)."""
    if tracking == "centralized":
        oracle.wrapper_counts("the vector", vecenv.completions, vecenv.late_completions)
        return
    envs = vecenv.vecenv.envs
    oracle.wrapper_counts(f"the {len(envs)} envs", sum(env.completions for env in envs),
                          sum(env.late_completions for env in envs))


def _step_until_done(vecenv: Any, log: _EpochLog, reported: _ReportedPerformance | None, seed: int) -> None:
    stats = log.stats
    actions = np.zeros(vecenv.action_space.shape, dtype=vecenv.action_space.dtype)
    vecenv.reset(seed)
    step = vecenv.step
    while True:
        infos = step(actions)[4]
        if not infos:
            continue
        if log.oracle is not None:
            log.oracle.observe(infos)
        accumulate_rollout_stats(infos, stats)
        _count_episodes(infos, log, reported)
        if log.close_epoch_if_due():
            return


def _watched(oracle: Any, curriculum: Any) -> Any:
    """The oracle's stand-in for `curriculum` (the curriculum itself if it is one already)."""
    from harness.oracle import WatchedCurriculum

    return curriculum if isinstance(curriculum, WatchedCurriculum) else oracle.watch(curriculum)




def _count_episodes(infos: Sequence[Any], log: _EpochLog, reported: _ReportedPerformance | None = None) -> None:
    """Count the episodes a step's infos report (one info per ended episode, labelled by its
    `per_label_samples/<label>` key, as `CurriculumEnv` emits)."""
    for info in infos:
        if not isinstance(info, Mapping) or _EPISODE_KEY not in info:
            continue
        if reported is not None:
            reported.update(info)
        label = next((key[len(_SAMPLES_PREFIX):] for key in info if key.startswith(_SAMPLES_PREFIX)), None)
        if label is None:
            raise ValueError(
                f"Expected an episode-end info with a '{_SAMPLES_PREFIX}<label>' key beside '{_EPISODE_KEY}', "
                f"received keys {sorted(info)}"
            )
        log.count(label)
