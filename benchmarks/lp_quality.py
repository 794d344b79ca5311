"""Learning-progress quality over many seeds: the scenario setups, ours against uniform practice.

Re-measures the comparison table of the learning-progress curriculum on the harness's
simulated students, with the setups of the scenario gate (`harness.thresholds`), per seed:

- chain: 10-task prerequisite chain, pool 32; episodes until every task is mastered at the same
  time (checked every 50), and their ratio to the median of 5 uniform random practice runs on
  the same seed (the practice streams of the `test_dependency_chain` baseline);
- zero / noise impossible share: 5 learnable + 5 impossible tasks, pool 32, 4000 episodes;
  share of the samples after the first 500 that went to impossible tasks;
- mostly impossible: 5 learnable + 45 always-zero tasks; share that went to learnable tasks;
- forgotten-task revisit: the `test_forgetting` run (4 tasks, pool 8, no eviction); share of
  the 300 episodes after task 0 decayed that went back to it;
- after mastery (`AFTER_MASTERY`): the 5+5 and 5+45 spaces run until every learnable task is
  mastered, then `window` more episodes, in which we measure the impossible share, evictions,
  the share of samples on tasks not yet warm, and the longest gap between two samples of a
  mastered task; then one mastered task is forgotten (its performance set back to
  `forgotten_performance`, as if training elsewhere had overwritten it) and we measure its share of
  the next `catch_window` episodes and the episodes until it is mastered again. The chain runs
  the same phase after its mastery (no impossible tasks there).

Uniform practice is the same runs with `UniformConfig` (the chain: uniformly random practice,
the scenario's baseline). All loops are the direct `get_task` / `sample_task` /
`update_task_performance` loop: the same samples as `harness.runners.run_direct`, without the
stats pipeline.

    .venv/bin/python -m benchmarks.lp_quality                    # 20 seeds, print the table
    .venv/bin/python -m benchmarks.lp_quality --record after     # also store per-seed results
    .venv/bin/python -m benchmarks.lp_quality --seeds 3 --lp exploration=0.05   # try a setting

`--record NAME` stores the run under NAME in `benchmarks/lp_quality.json` (with the commit and
the load average); the table then shows every recorded run next to this one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from curriculum import Curriculum, CurriculumConfig, LearningProgressConfig, UniformConfig
from harness.simulator import TaskDependencySimulator
from harness.task_spaces import TaskSpace, chain_task_space, forgetting_task_space, impossible_task_space
from harness.thresholds import DEPENDENCY_CHAIN, FORGETTING, IMPOSSIBLE_TASKS

__all__ = ["AFTER_MASTERY", "AfterMasteryPhase", "COLUMNS", "measure_seed", "summarise", "main"]

RESULTS_PATH = Path(__file__).with_name("lp_quality.json")


@dataclass(frozen=True)
class AfterMasteryPhase:
    """The phase after every learnable task is mastered."""

    max_learning_episodes: int = 60_000
    """Cap on the run to mastery of every learnable task (checked every `check_every`)."""
    check_every: int = 50
    window: int = 20_000
    """Episodes measured once every learnable task is mastered."""
    forgotten_task: int = 0
    """Student task that is forgotten at the end of the window (a learnable one)."""
    forgotten_performance: float = 0.2
    """Its performance right after it is forgotten."""
    catch_window: int = 300
    """Episodes after the forgetting in which its share of samples is measured."""
    max_remaster_episodes: int = 20_000


AFTER_MASTERY = AfterMasteryPhase()

CHAIN_BASELINE_RUNS = 5
"""Uniform practice runs whose median is a seed's chain baseline, as in the issue's table (the
gate's chain check averages over seeds and uses fewer)."""

#: (key, heading, lower is better, format)
COLUMNS: tuple[tuple[str, str, bool, str], ...] = (
    ("chain_episodes", "chain: episodes to master 10 tasks", True, ",.0f"),
    ("chain_ratio", "chain: ratio to uniform practice", True, ".3f"),
    ("zero_impossible_share", "zero-reward impossible share", True, ".1%"),
    ("noise_impossible_share", "noise impossible share", True, ".1%"),
    ("mostly_impossible_learnable_share", "learnable share, 45 of 50 impossible", False, ".1%"),
    ("forgotten_revisit_share", "forgotten task revisit share", False, ".1%"),
    ("after_zero_impossible_share", "after mastery: zero impossible share", True, ".1%"),
    ("after_noise_impossible_share", "after mastery: noise impossible share", True, ".1%"),
    ("after_mostly_impossible_share", "after mastery: 45-of-50 impossible share", True, ".1%"),
    ("after_max_revisit_gap", "after mastery: longest gap between samples of a mastered task", True, ",.0f"),
    ("after_cold_share", "after mastery: share on tasks not yet warm", True, ".1%"),
    ("after_evictions_per_1k", "after mastery: evictions per 1000 episodes", True, ".1f"),
    ("after_forgotten_share", "after mastery: forgotten task's share of the next 300", False, ".1%"),
    ("after_remaster_episodes", "after mastery: episodes to master the forgotten task again", True, ",.0f"),
    ("chain_after_all_mastered_share", "chain after mastery: share of checks with all 10 mastered", False, ".1%"),
    ("chain_after_max_revisit_gap", "chain after mastery: longest gap between samples of a task", True, ",.0f"),
)


# ---- runs ---------------------------------------------------------------------------------------
def _curriculum(space: TaskSpace, pool: int, seed: int, algorithm: Any, **kwargs: Any) -> Curriculum:
    return Curriculum(CurriculumConfig(task_generator=space.generator, algorithm=algorithm, num_active_tasks=pool,
                                       seed=seed, **kwargs))


def _play(curriculum: Curriculum, simulator: TaskDependencySimulator, episodes: int,
          on_episode: Callable[[int, int], bool] | None = None) -> list[int]:
    """`episodes` direct-loop episodes; the student task of each. `on_episode(episode, task_index)`
    returning True stops the loop after that episode."""
    get, update, sample = curriculum.get_task, curriculum.update_task_performance, simulator.sample_task
    played = []
    for episode in range(episodes):
        task = get()
        index = task.env_cfg["task_index"]
        update(task.task_id, sample(index))
        played.append(index)
        if on_episode is not None and on_episode(episode, index):
            break
    return played


def _max_gap(played: list[int], tasks: range) -> int:
    """Longest run of episodes in which some task of `tasks` was not sampled (window edges count)."""
    last = {task: -1 for task in tasks}
    worst = 0
    for episode, index in enumerate(played):
        if index in last:
            worst = max(worst, episode - last[index] - 1)
            last[index] = episode
    return max([worst] + [len(played) - 1 - seen for seen in last.values()])


def _chain_until_mastered(simulator: TaskDependencySimulator, choose: Callable[[], tuple[int, Any]],
                          record: Callable[[Any, float], None]) -> int:
    """Episodes until every chain task is mastered at once (the scenario's loop)."""
    limits = DEPENDENCY_CHAIN
    for episode in range(limits.max_episodes):
        index, handle = choose()
        record(handle, simulator.sample_task(index))
        if (episode + 1) % limits.check_every == 0 and simulator.num_mastered() == limits.num_tasks:
            return episode + 1
    return limits.max_episodes


def uniform_chain_baseline(seed: int) -> float:
    """Median episodes uniformly random practice needs over `CHAIN_BASELINE_RUNS` practice
    streams (the scenario's streams)."""
    limits = DEPENDENCY_CHAIN
    runs = []
    for run in range(CHAIN_BASELINE_RUNS):
        space = chain_task_space(num_tasks=limits.num_tasks, seed=seed)
        rng = np.random.default_rng([10_000 + seed, run])
        runs.append(_chain_until_mastered(space.simulator, lambda: (int(rng.integers(limits.num_tasks)), None),
                                          lambda handle, reward: None))
    return float(np.median(runs))


def _forget(simulator: TaskDependencySimulator, task: int, performance: float) -> None:
    state = simulator.state_dict()
    state["performance"][task] = performance
    state["last_update_step"][task] = state["global_step"]
    simulator.load_state_dict(state)


def _after_mastery(curriculum: Curriculum, simulator: TaskDependencySimulator, learnable: range,
                   impossible: set[int]) -> dict[str, float]:
    """The after-mastery phase on a run whose learnable tasks were just mastered."""
    phase = AFTER_MASTERY
    evictions = curriculum.tracker.evictions
    cold = 0
    warm_after = getattr(curriculum.config.algorithm, "min_samples_for_lp", 0)
    # the algorithm's own completion counts where it keeps them (they include the statistics a
    # task inherits from a remembered configuration), else the tracker's
    completions = curriculum.tracker.backend.arrays.get("lp_count", curriculum.tracker.completions)
    get, update, sample = curriculum.get_task, curriculum.update_task_performance, simulator.sample_task
    played = []
    for _ in range(phase.window):
        task = get()
        cold += completions[task.slot] < warm_after
        index = task.env_cfg["task_index"]
        update(task.task_id, sample(index))
        played.append(index)
    out = {
        "impossible_share": sum(1 for i in played if i in impossible) / len(played),
        "max_revisit_gap": _max_gap(played, learnable),
        "cold_share": cold / len(played),
        "evictions_per_1k": (curriculum.tracker.evictions - evictions) * 1000 / len(played),
    }
    forgotten = phase.forgotten_task
    _forget(simulator, forgotten, phase.forgotten_performance)
    caught = _play(curriculum, simulator, phase.catch_window)
    out["forgotten_share"] = caught.count(forgotten) / len(caught)
    remaster = _play(curriculum, simulator, phase.max_remaster_episodes,
                     lambda episode, index: simulator.is_mastered(forgotten))
    out["remaster_episodes"] = len(caught) + len(remaster) if simulator.is_mastered(forgotten) else float("nan")
    return out


def _impossible_space_run(seed: int, algorithm: Any, num_impossible: int, mode: str) -> dict[str, float]:
    """4000 scenario episodes, then (same run) the after-mastery phase."""
    limits = IMPOSSIBLE_TASKS
    space = impossible_task_space(num_learnable=5, num_impossible=num_impossible, mode=mode, seed=seed)
    simulator = space.simulator
    curriculum = _curriculum(space, 32, seed, algorithm)
    played = _play(curriculum, simulator, limits.episodes)
    counted = played[limits.warmup_episodes:]
    learnable = range(5)
    out = {"learnable_share": sum(1 for i in counted if i in learnable) / len(counted)}
    phase = AFTER_MASTERY
    extra = _play(curriculum, simulator, phase.max_learning_episodes,
                  lambda episode, index: episode % phase.check_every == phase.check_every - 1
                  and all(simulator.is_mastered(i) for i in learnable))
    if all(simulator.is_mastered(i) for i in learnable):
        out["mastered_after"] = limits.episodes + len(extra)
        after = _after_mastery(curriculum, simulator, learnable, set(range(5, 5 + num_impossible)))
        out.update({f"after_{k}": v for k, v in after.items()})
    else:
        out["mastered_after"] = float("nan")
    curriculum.close()
    return out


def _chain_run(seed: int, algorithm: Any, baseline: float) -> dict[str, float]:
    limits = DEPENDENCY_CHAIN
    space = chain_task_space(num_tasks=limits.num_tasks, seed=seed)
    simulator = space.simulator
    curriculum = _curriculum(space, limits.pool, seed, algorithm)

    def choose() -> tuple[int, Any]:
        task = curriculum.get_task()
        return task.env_cfg["task_index"], task

    episodes = _chain_until_mastered(simulator, choose,
                                     lambda task, reward: curriculum.update_task_performance(task.task_id, reward))
    out = {"episodes": episodes, "ratio": episodes / baseline}
    if simulator.num_mastered() == limits.num_tasks:
        checks = []
        played = _play(curriculum, simulator, AFTER_MASTERY.window,
                       lambda episode, index: checks.append(simulator.num_mastered() == limits.num_tasks)
                       if episode % limits.check_every == limits.check_every - 1 else False)
        out["after_all_mastered_share"] = float(np.mean(checks))
        out["after_max_revisit_gap"] = _max_gap(played, range(limits.num_tasks))
    curriculum.close()
    return out


def _forgetting_run(seed: int, algorithm: Any) -> dict[str, float]:
    """The `test_forgetting` scenario run."""
    limits = FORGETTING
    space = forgetting_task_space(num_tasks=limits.num_tasks, forgetting_rate=limits.forgetting_rate, seed=seed)
    simulator = space.simulator
    curriculum = _curriculum(space, limits.pool, seed, algorithm, eviction_percentile=0.0)
    _play(curriculum, simulator, limits.max_learning_episodes,
          lambda episode, index: simulator.num_mastered() == limits.num_tasks)
    if simulator.num_mastered() != limits.num_tasks:
        return {"revisit_share": float("nan")}
    _play(curriculum, simulator, limits.settle_episodes)
    rng = np.random.default_rng(seed)
    for _ in range(limits.decay_episodes):
        simulator.sample_task(int(rng.integers(1, limits.num_tasks)))
    after = _play(curriculum, simulator, limits.window)
    curriculum.close()
    return {"revisit_share": after.count(0) / limits.window}


def measure_seed(seed: int, algorithm: Any, *, baseline: float | None = None) -> dict[str, float]:
    """Every column for one seed and one algorithm config (the chain needs the uniform baseline)."""
    out: dict[str, float] = {}
    if baseline is None:
        baseline = uniform_chain_baseline(seed)
    if isinstance(algorithm, UniformConfig):
        out["chain_episodes"] = baseline
        out["chain_ratio"] = 1.0
    else:
        chain = _chain_run(seed, algorithm, baseline)
        out["chain_episodes"] = chain["episodes"]
        out["chain_ratio"] = chain["ratio"]
        out["chain_after_all_mastered_share"] = chain.get("after_all_mastered_share", float("nan"))
        out["chain_after_max_revisit_gap"] = chain.get("after_max_revisit_gap", float("nan"))
    zero = _impossible_space_run(seed, algorithm, 5, "zero")
    noise = _impossible_space_run(seed, algorithm, 5, "noise")
    mostly = _impossible_space_run(seed, algorithm, 45, "zero")
    out["zero_impossible_share"] = 1.0 - zero["learnable_share"]
    out["noise_impossible_share"] = 1.0 - noise["learnable_share"]
    out["mostly_impossible_learnable_share"] = mostly["learnable_share"]
    out["forgotten_revisit_share"] = _forgetting_run(seed, algorithm)["revisit_share"]
    runs = (("zero", zero), ("noise", noise), ("mostly", mostly))
    for name, run in runs:
        out[f"{name}_mastered_after"] = run["mastered_after"]
        out[f"after_{name}_impossible_share" if name != "mostly" else "after_mostly_impossible_share"] = run.get(
            "after_impossible_share", float("nan"))
    for key in ("max_revisit_gap", "cold_share", "evictions_per_1k", "forgotten_share", "remaster_episodes"):
        values = [run.get(f"after_{key}", float("nan")) for _, run in runs]
        # the worst of the three spaces for this seed
        worse_is_low = key == "forgotten_share"
        out[f"after_{key}"] = float(np.nanmin(values) if worse_is_low else np.nanmax(values)) \
            if not all(np.isnan(values)) else float("nan")
    return out


def _measure(args: tuple[int, str, dict[str, Any]]) -> tuple[int, str, dict[str, float]]:
    seed, name, overrides = args
    algorithm = UniformConfig() if name == "uniform" else LearningProgressConfig(**overrides)
    baseline = uniform_chain_baseline(seed)
    return seed, name, measure_seed(seed, algorithm, baseline=baseline)


# ---- summary ------------------------------------------------------------------------------------
def summarise(per_seed: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Mean and worst of every column over the seeds (worst: the max where lower is better)."""
    summary = {}
    for key, _, lower_better, _ in COLUMNS:
        values = np.array([row.get(key, float("nan")) for row in per_seed.values()], dtype=float)
        values = values[~np.isnan(values)]
        if values.size == 0:
            continue
        summary[key] = {"mean": float(values.mean()), "worst": float(values.max() if lower_better else values.min()),
                        "seeds": int(values.size)}
    return summary


def _table(runs: dict[str, dict[str, Any]]) -> str:
    names = list(runs)
    lines = ["| column | " + " | ".join(f"{name}, mean / worst" for name in names) + " |",
             "|---|" + "---|" * len(names)]
    for key, heading, _, fmt in COLUMNS:
        cells = []
        for name in names:
            entry = runs[name]["summary"].get(key)
            cells.append("—" if entry is None else f"{entry['mean']:{fmt}} / {entry['worst']:{fmt}}")
        lines.append(f"| {heading} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _parse_overrides(pairs: list[str]) -> dict[str, Any]:
    fields = {f.name: f for f in dataclasses.fields(LearningProgressConfig)}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in fields:
            raise SystemExit(f"--lp expects FIELD=VALUE with a LearningProgressConfig field, received {pair!r}")
        out[key] = json.loads(value)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (default 20)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--lp", action="append", default=[], metavar="FIELD=VALUE",
                        help="a LearningProgressConfig field for this run (JSON value)")
    parser.add_argument("--record", metavar="NAME", help=f"store this run under NAME in {RESULTS_PATH.name}")
    parser.add_argument("--no-uniform", action="store_true", help="skip uniform practice (reuse the stored one)")
    args = parser.parse_args(argv)
    overrides = _parse_overrides(args.lp)
    names = ["ours"] + ([] if args.no_uniform else ["uniform"])
    jobs = [(seed, name, overrides) for seed in range(args.seeds) for name in names]
    started = time.perf_counter()
    results: dict[str, dict[str, dict[str, float]]] = {name: {} for name in names}
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for seed, name, row in pool.map(_measure, jobs):
                results[name][str(seed)] = row
    else:
        for job in jobs:
            seed, name, row = _measure(job)
            results[name][str(seed)] = row
    elapsed = time.perf_counter() - started
    meta = {"commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_average": [round(x, 2) for x in os.getloadavg()], "seconds": round(elapsed, 1),
            "seeds": args.seeds, "overrides": overrides}
    stored: dict[str, Any] = json.loads(RESULTS_PATH.read_text()) if RESULTS_PATH.exists() else {}
    runs: dict[str, dict[str, Any]] = {}
    for name in stored:
        if name not in ("uniform",) and name != args.record:
            runs[name] = stored[name]
    ours = {"meta": meta, "summary": summarise(results["ours"]), "per_seed": results["ours"]}
    runs[args.record or "ours (this run)"] = ours
    if "uniform" in results:
        uniform = {"meta": meta, "summary": summarise(results["uniform"]), "per_seed": results["uniform"]}
    else:
        uniform = stored.get("uniform")
    if uniform is not None:
        runs["uniform"] = uniform
    print(_table(runs))
    print(f"\n{args.seeds} seeds in {elapsed:.0f} s, load average {meta['load_average']}, commit {meta['commit']}",
          file=sys.stderr)
    if args.record:
        stored[args.record] = ours
        if uniform is not None:
            stored["uniform"] = uniform
        RESULTS_PATH.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
