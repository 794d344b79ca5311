"""The statistical scenarios' setups: one seed of one setup in, the numbers it measures out.

A scenario judges a number over several seeds (`harness.checks`); the calibration and power
scripts (`benchmarks/calibrate_gate.py`) replay the same setups over many more seeds, with the
built-in curriculum and with the degraded ones of `harness.faults.DEGRADATIONS`. Keeping the
setups here, as plain functions of (curriculum factory, seed), makes the scenario, its
calibration and its power table measure exactly the same thing.

Every function takes `oracle=`: with an `harness.oracle.AccountingOracle`, the run is watched
and checked by it (the caller verifies). Scenarios pass one for the first seed of each check;
the other seeds run without it, because the oracle costs about 4x the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curriculum import CurriculumConfig, LearningProgressConfig
from harness.runners import RunResult, run_direct
from harness.task_spaces import TaskSpace, chain_task_space, forgetting_task_space, impossible_task_space
from harness.thresholds import AFTER_MASTERY, DEPENDENCY_CHAIN, EVICTION, FORGETTING, IMPOSSIBLE_TASKS

__all__ = [
    "CurriculumFactory",
    "Setup",
    "SETUPS",
    "StatisticalCheck",
    "CHECKS",
    "checks_of",
    "ImpossibleTasksRun",
    "impossible_tasks",
    "ChainRun",
    "dependency_chain",
    "uniform_chain_baseline",
    "ForgettingRun",
    "forgetting",
    "EvictionRun",
    "eviction_health",
    "AfterMasteryRun",
    "after_mastery",
]

CurriculumFactory = Callable[..., Any]
"""`factory(config) -> curriculum`, as `--gate-curriculum` names one."""


def _watch(curriculum: Any, oracle: Any) -> Any:
    return curriculum if oracle is None else oracle.watch(curriculum)


# ---------------------------------------------------------------------------------- impossible tasks
@dataclass
class ImpossibleTasksRun:
    """One run of a learnable + impossible task space."""

    impossible_share: float
    """Share of the counted samples (after the warm-up) that impossible tasks got."""
    label_lp: dict[str, float]
    """Per-label LP metric averaged over the epochs after the warm-up that report it (labels
    with no value are missing: a curriculum without learning progress reports none)."""
    samples_by_label: dict[str, int]
    space: TaskSpace

    @property
    def learnable_share(self) -> float:
        return 1.0 - self.impossible_share


def impossible_tasks(factory: CurriculumFactory, *, seed: int, mode: str, num_learnable: int = 5,
                     num_impossible: int = 5, oracle: Any = None) -> ImpossibleTasksRun:
    """`num_learnable` learnable + `num_impossible` impossible tasks (`mode` "zero" or "noise"),
    pool 32, `IMPOSSIBLE_TASKS.episodes` episodes through the direct runner (the student's
    facts in the infos only of the watched run: the checks read the curriculum's numbers)."""
    limits = IMPOSSIBLE_TASKS
    space = impossible_task_space(num_learnable=num_learnable, num_impossible=num_impossible, mode=mode, seed=seed)
    config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=limits.pool, seed=seed)
    result = run_direct(factory(config), space, episodes=limits.episodes, epoch_length=limits.epoch_length,
                        warmup_episodes=limits.warmup_episodes, oracle=oracle, student_info=oracle is not None)
    samples = dict(result.samples_by_label)
    total = sum(samples.values())
    impossible = sum(samples.get(label, 0) for label in space.impossible_labels)
    return ImpossibleTasksRun(impossible / total, _label_lp(result, space), samples, space)


def _label_lp(result: RunResult, space: TaskSpace) -> dict[str, float]:
    out = {}
    for label in space.learnable_labels + space.impossible_labels:
        key = f"env_curriculum_stats/per_label_lp_scores/{label}"
        values = [e[key] for e in result.recorder.epochs[IMPOSSIBLE_TASKS.lp_skip_epochs:] if key in e]
        if values:
            out[label] = float(np.mean(values))
    return out


# ---------------------------------------------------------------------------------- dependency chain
@dataclass
class ChainRun:
    """One run of the prerequisite chain."""

    episodes: int
    """Episodes until every chain task was mastered at once (capped at `max_episodes`)."""
    uniform_episodes: float
    """The same for uniform random practice: median over `baseline_runs` practice streams."""
    index_shift: float
    """Mean sampled chain index in the last third of the run minus in the first third."""

    @property
    def ratio(self) -> float:
        return self.episodes / self.uniform_episodes


def _episodes_to_master_all(simulator: Any, choose_task: Callable[[], tuple[int, Any]],
                            record: Callable[[Any, float], None]) -> tuple[int, list[int]]:
    limits = DEPENDENCY_CHAIN
    indices: list[int] = []
    for episode in range(limits.max_episodes):
        task_index, handle = choose_task()
        reward = simulator.sample_task(task_index)
        record(handle, reward)
        indices.append(task_index)
        if (episode + 1) % limits.check_every == 0 and simulator.num_mastered() == limits.num_tasks:
            return episode + 1, indices
    return limits.max_episodes, indices


def uniform_chain_baseline(seed: int) -> float:
    """Median episodes a student practising uniformly random tasks needs to master the chain
    (over `baseline_runs` practice streams, so the ratio's noise is the curriculum's)."""
    limits = DEPENDENCY_CHAIN
    runs = []
    for run in range(limits.baseline_runs):
        space = chain_task_space(num_tasks=limits.num_tasks, seed=seed)
        rng = np.random.default_rng([10_000 + seed, run])
        episodes, _ = _episodes_to_master_all(
            space.simulator, lambda: (int(rng.integers(limits.num_tasks)), None), lambda handle, reward: None
        )
        runs.append(episodes)
    return float(np.median(runs))


def dependency_chain(factory: CurriculumFactory, *, seed: int, oracle: Any = None) -> ChainRun:
    """Learning progress on a `DEPENDENCY_CHAIN.num_tasks`-task chain until all are mastered."""
    limits = DEPENDENCY_CHAIN
    space = chain_task_space(num_tasks=limits.num_tasks, seed=seed)
    curriculum = _watch(factory(CurriculumConfig(
        task_generator=space.generator, algorithm=LearningProgressConfig(), num_active_tasks=limits.pool, seed=seed,
    )), oracle)

    def choose() -> tuple[int, Any]:
        task = curriculum.get_task()
        return task.env_cfg["task_index"], task

    episodes, indices = _episodes_to_master_all(
        space.simulator, choose, lambda task, reward: curriculum.update_task_performance(task.task_id, reward)
    )
    first, _, last = np.array_split(np.asarray(indices), 3)
    return ChainRun(episodes, uniform_chain_baseline(seed), float(last.mean() - first.mean()))


# ---------------------------------------------------------------------------------- forgetting
FORGOTTEN_TASK = 0
"""The task the forgetting setup lets decay."""


@dataclass
class ForgettingRun:
    """One run of the forgetting student."""

    mastered: bool
    """Whether every task was mastered in the learning phase."""
    learning_episodes: int
    performance_before: float
    performance_decayed: float
    revisit_share: float
    """Share of the window after the decay spent on the forgotten task."""


def _play(curriculum: Any, simulator: Any, episodes: int, *, until_mastered: bool = False) -> list[int]:
    played = []
    for _ in range(episodes):
        if until_mastered and simulator.num_mastered() == simulator.num_tasks:
            break
        task = curriculum.get_task()
        index = task.env_cfg["task_index"]
        curriculum.update_task_performance(task.task_id, simulator.sample_task(index))
        played.append(index)
    return played


def forgetting(factory: CurriculumFactory, *, seed: int, oracle: Any = None) -> ForgettingRun:
    """Master every task, settle, let task `FORGOTTEN_TASK` decay outside the curriculum, then
    measure how much of the next `FORGETTING.window` episodes go back to it."""
    limits = FORGETTING
    space = forgetting_task_space(num_tasks=limits.num_tasks, forgetting_rate=limits.forgetting_rate, seed=seed)
    simulator = space.simulator
    curriculum = _watch(factory(CurriculumConfig(
        task_generator=space.generator, algorithm=LearningProgressConfig(), num_active_tasks=limits.pool,
        seed=seed, eviction_percentile=0.0,  # keep the mastered task's history in the pool
    )), oracle)
    learning = _play(curriculum, simulator, limits.max_learning_episodes, until_mastered=True)
    mastered = simulator.num_mastered() == limits.num_tasks
    _play(curriculum, simulator, limits.settle_episodes)
    before = simulator.task_performance(FORGOTTEN_TASK)
    rng = np.random.default_rng(seed)
    for _ in range(limits.decay_episodes):
        simulator.sample_task(int(rng.integers(1, limits.num_tasks)))
    decayed = simulator.task_performance(FORGOTTEN_TASK)
    after = _play(curriculum, simulator, limits.window)
    return ForgettingRun(mastered, len(learning), before, decayed, after.count(FORGOTTEN_TASK) / limits.window)


# ---------------------------------------------------------------------------------- after mastery
@dataclass
class AfterMasteryRun:
    """One run to mastery of every learnable task, then a window of practice."""

    mastered: bool
    """Whether every learnable task was mastered within `AFTER_MASTERY.max_learning_episodes`."""
    learning_episodes: int
    impossible_share: float
    """Share of the window's samples that went to impossible tasks."""


def after_mastery(factory: CurriculumFactory, *, seed: int, oracle: Any = None) -> AfterMasteryRun:
    """Learnable + constant-plus-noise impossible tasks: play until every learnable task is
    mastered (or the cap), then `AFTER_MASTERY.window` episodes, where nothing is left to learn."""
    limits = AFTER_MASTERY
    space = impossible_task_space(num_learnable=limits.num_learnable, num_impossible=limits.num_impossible,
                                  mode="noise", seed=seed)
    simulator = space.simulator
    curriculum = _watch(factory(CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                                                 num_active_tasks=limits.pool, seed=seed)), oracle)
    learnable = range(limits.num_learnable)
    episodes = 0
    while episodes < limits.max_learning_episodes:
        episodes += len(_play(curriculum, simulator, limits.check_every))
        if all(simulator.is_mastered(i) for i in learnable):
            break
    mastered = all(simulator.is_mastered(i) for i in learnable)
    window = _play(curriculum, simulator, limits.window)
    impossible = sum(1 for index in window if index >= limits.num_learnable)
    return AfterMasteryRun(mastered, episodes, impossible / len(window))


# ---------------------------------------------------------------------------------- eviction
@dataclass
class EvictionRun:
    """Every eviction of one run, seen from outside: pool membership before and after each call."""

    ranks: list[float] = field(default_factory=list)
    """Per eviction: share of the pool's eligible tasks that scored strictly lower than the
    evicted one just before it left."""
    completions: list[int] = field(default_factory=list)
    """Per eviction: completions of the evicted task when it left."""
    pool_sizes: set[int] = field(default_factory=set)
    """Every pool size seen."""

    @property
    def mean_rank(self) -> float:
        return float(np.mean(self.ranks)) if self.ranks else 0.0


def eviction_health(factory: CurriculumFactory, *, seed: int, oracle: Any = None) -> EvictionRun:
    """5 learnable + 5 impossible tasks, pool `EVICTION.pool`, `EVICTION.episodes` episodes; the
    pool is looked at before and after every call, so an eviction is seen whether it happens
    in `update_task_performance` or in `get_task`."""
    limits = EVICTION
    space = impossible_task_space(num_learnable=5, num_impossible=5, seed=seed)
    config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=limits.pool, seed=seed)
    curriculum = _watch(factory(config), oracle)
    run = EvictionRun()
    eligible_after = config.min_presentations - 1  # counted before the call that brings the last completion
    done: Counter = Counter()  # completions handed to each task in the pool (the harness's own count)

    def look() -> dict[Any, float]:
        pool = curriculum.active_tasks()
        run.pool_sizes.add(len(pool))
        return dict(zip([t.task_id for t in pool], curriculum.task_scores().tolist()))

    def record_departures(before: dict[Any, float], after: dict[Any, float], completed: Any) -> None:
        departed = set(before) - set(after)
        if not departed:
            return
        eligible = [s for task_id, s in before.items() if done[task_id] >= eligible_after]
        for task_id in departed:
            score = before[task_id]
            run.ranks.append(float(np.mean([s < score for s in eligible])) if eligible else 0.0)
            run.completions.append(done.pop(task_id) + (task_id == completed))  # its last completion landed in this call

    pool = look()
    for _ in range(limits.episodes):
        task = curriculum.get_task()
        drawn = look()
        record_departures(pool, drawn, None)
        reward = space.simulator.sample_task(task.env_cfg["task_index"])
        curriculum.update_task_performance(task.task_id, reward)
        pool = look()
        record_departures(drawn, pool, task.task_id)
        if task.task_id in pool:
            done[task.task_id] += 1
    return run


# ---------------------------------------------------------------------------------- the checks
@dataclass(frozen=True)
class StatisticalCheck:
    """A number measured on each seed of a setup, whose mean over the seeds is judged."""

    name: str
    """Name in messages, summaries and `thresholds.py`."""
    setup: str
    """Key of `SETUPS`: several checks can share the runs of one setup."""
    measure: Callable[[Any], float | None]
    """The number of one run (None: the curriculum lacks what the check reads; it skips)."""
    limit: Callable[[], float]
    """The limit, read from `harness.thresholds` when the check runs."""
    upper: bool
    """True: the mean must be at most the limit; False: at least."""
    what: str
    """What the number is, for failure messages."""
    fmt: str = ".4g"
    statistic: str = "mean"
    """What is judged over the seeds: "mean", or "median" for a number with a heavy tail
    (`harness.checks`)."""


def _lp_gap(run: ImpossibleTasksRun) -> float | None:
    """Smallest per-label LP gap, learnable minus impossible (None without per-label LP)."""
    space = run.space
    labels = space.learnable_labels + space.impossible_labels
    if any(label not in run.label_lp for label in labels):
        return None
    return min(run.label_lp[a] - run.label_lp[b] for a in space.learnable_labels for b in space.impossible_labels)


@dataclass(frozen=True)
class Setup:
    """A scenario setup: one run per seed, and how many seeds its checks judge."""

    run: Callable[..., Any]
    """`run(factory, seed=..., oracle=None)` -> one run."""
    seeds: Callable[[], int]
    """Seeds per check, read from `harness.thresholds` when the check runs."""


SETUPS: dict[str, Setup] = {
    "impossible_zero": Setup(lambda factory, *, seed, oracle=None: impossible_tasks(
        factory, seed=seed, mode="zero", oracle=oracle), lambda: IMPOSSIBLE_TASKS.seeds),
    "impossible_noise": Setup(lambda factory, *, seed, oracle=None: impossible_tasks(
        factory, seed=seed, mode="noise", oracle=oracle), lambda: IMPOSSIBLE_TASKS.seeds),
    "mostly_impossible": Setup(lambda factory, *, seed, oracle=None: impossible_tasks(
        factory, seed=seed, mode="zero", num_learnable=5, num_impossible=45, oracle=oracle),
        lambda: IMPOSSIBLE_TASKS.seeds),
    "dependency_chain": Setup(dependency_chain, lambda: DEPENDENCY_CHAIN.seeds),
    "forgetting": Setup(forgetting, lambda: FORGETTING.seeds),
    "eviction": Setup(eviction_health, lambda: EVICTION.seeds),
    "after_mastery": Setup(after_mastery, lambda: AFTER_MASTERY.seeds),
}
"""Setup name -> its runs and seed count."""

CHECKS: tuple[StatisticalCheck, ...] = (
    StatisticalCheck("zero_impossible_share", "impossible_zero", lambda r: r.impossible_share,
                     lambda: IMPOSSIBLE_TASKS.max_zero_share, True,
                     "share of samples always-zero impossible tasks got (5 learnable + 5 impossible; uniform: 50%)",
                     ".1%"),
    StatisticalCheck("zero_lp_gap", "impossible_zero", _lp_gap, lambda: IMPOSSIBLE_TASKS.min_lp_gap, False,
                     "per-label LP of the learnable label minus the always-zero impossible one"),
    StatisticalCheck("noise_impossible_share", "impossible_noise", lambda r: r.impossible_share,
                     lambda: IMPOSSIBLE_TASKS.max_noise_share, True,
                     "share of samples constant-plus-noise impossible tasks got (5 + 5; uniform: 50%)", ".1%"),
    StatisticalCheck("noise_lp_gap", "impossible_noise", _lp_gap, lambda: IMPOSSIBLE_TASKS.min_lp_gap, False,
                     "per-label LP of the learnable label minus the noise impossible one"),
    StatisticalCheck("mostly_impossible_learnable_share", "mostly_impossible", lambda r: r.learnable_share,
                     lambda: IMPOSSIBLE_TASKS.min_mostly_impossible_learnable_share, False,
                     "share of samples the learnable tasks got when 45 of 50 are impossible (uniform: 10%)", ".1%"),
    StatisticalCheck("chain_ratio_to_uniform", "dependency_chain", lambda r: r.ratio,
                     lambda: DEPENDENCY_CHAIN.max_ratio_to_uniform, True,
                     "episodes to master the whole chain, as a ratio to uniform practice", ".3f", "median"),
    StatisticalCheck("chain_index_shift", "dependency_chain", lambda r: r.index_shift,
                     lambda: DEPENDENCY_CHAIN.min_index_shift, False,
                     "shift of the mean sampled chain index from the first to the last third of the run", ".3f"),
    StatisticalCheck("forgotten_task_share", "forgetting", lambda r: r.revisit_share,
                     lambda: FORGETTING.min_revisit_share, False,
                     "share of the episodes after the decay spent on the forgotten task (uniform: 25%)", ".1%"),
    StatisticalCheck("eviction_mean_rank", "eviction", lambda r: r.mean_rank,
                     lambda: EVICTION.max_mean_rank, True,
                     "mean rank of evicted tasks among the eligible ones (0: always the lowest scoring)", ".3f"),
    StatisticalCheck("after_mastery_mastered_share", "after_mastery", lambda r: float(r.mastered),
                     lambda: AFTER_MASTERY.min_mastered_share, False,
                     "share of runs whose 5 learnable tasks were all mastered within "
                     f"{AFTER_MASTERY.max_learning_episodes:,} episodes (5 noise-impossible tasks beside them)", ".0%"),
    StatisticalCheck("after_mastery_impossible_share", "after_mastery", lambda r: r.impossible_share,
                     lambda: AFTER_MASTERY.max_impossible_share, True,
                     f"share of the {AFTER_MASTERY.window:,} episodes after mastery spent on impossible tasks "
                     "(uniform: 50%)", ".1%"),
)
"""Every statistical check of the gate."""


def checks_of(setup: str) -> tuple[StatisticalCheck, ...]:
    """The checks judged on the runs of `setup`."""
    return tuple(check for check in CHECKS if check.setup == setup)
