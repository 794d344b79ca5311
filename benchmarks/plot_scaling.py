"""Cost of one get_task() + update_task_performance() pair against pool size, per algorithm.

Measures the pair the way `benchmarks/test_curriculum_speed.py` does (warm statistics: every
task completed about twice first; then `--rounds` rounds of `PAIRS_PER_ROUND` pairs, mean per
pair), for every pool size in `POOL_SIZES` and for uniform, learning progress and staged
progression, prints a table and writes `benchmarks/scaling.png`. The no-op loop of the same
shape is measured too, as the floor.

    .venv/bin/python -m benchmarks.plot_scaling            # or: .venv/bin/python benchmarks/plot_scaling.py
    .venv/bin/python -m benchmarks.plot_scaling --rounds 3 --out /tmp/scaling.png

Staged progression here has two stages and random scores (mean 0.5 < the 0.7 advancement
threshold), so it never changes stage: the figure is its steady-state cost.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `curriculum` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks.conftest import PAIRS_PER_ROUND, POOL_SIZES, NoOpCurriculum, make_curriculum, run_pairs
from curriculum import Curriculum, CurriculumConfig, SingleTaskGenerator, Stage, StagedProgressionConfig

__all__ = ["ALGORITHMS", "TARGETS_US", "measure_pair_us", "measure_all", "table", "plot", "main"]

ALGORITHMS = ("uniform", "learning_progress", "staged_progression")
TARGETS_US = {64: 5.0, 10_000: 10.0}
"""Learning-progress targets: <= 5 us per pair at 64 tasks, <= 10 us at 10,000."""
DEFAULT_OUT = Path(__file__).resolve().parent / "scaling.png"


def _staged(pool: int) -> Curriculum:
    stages = [Stage(f"stage_{i}", SingleTaskGenerator({"level": i}, label=f"stage_{i}")) for i in range(2)]
    config = CurriculumConfig(task_generator=None, algorithm=StagedProgressionConfig(stages=stages),
                              num_active_tasks=pool)
    return Curriculum(config)


def _build(algorithm: str, pool: int) -> Curriculum | NoOpCurriculum:
    if algorithm == "no-op loop":
        return NoOpCurriculum()
    if algorithm == "staged_progression":
        return _staged(pool)
    return make_curriculum(pool, algorithm)


def measure_pair_us(algorithm: str, pool: int, *, rounds: int = 5) -> tuple[float, float]:
    """(mean, min) microseconds per get/update pair over `rounds` warm rounds."""
    curriculum = _build(algorithm, pool)
    scores = np.random.default_rng(1).random(PAIRS_PER_ROUND).tolist()
    try:
        for _ in range(max(1, (2 * pool) // PAIRS_PER_ROUND + 1) + 1):  # warm statistics + one warm-up round
            run_pairs(curriculum, scores)
        times = []
        for _ in range(rounds):
            began = time.perf_counter()
            run_pairs(curriculum, scores)
            times.append(time.perf_counter() - began)
    finally:
        curriculum.close()
    return float(np.mean(times)) / PAIRS_PER_ROUND * 1e6, min(times) / PAIRS_PER_ROUND * 1e6


def measure_all(*, rounds: int = 5) -> dict[str, dict[int, tuple[float, float]]]:
    """algorithm -> pool size -> (mean, min) us per pair; the no-op loop under "no-op loop"."""
    results: dict[str, dict[int, tuple[float, float]]] = {}
    for algorithm in (*ALGORITHMS, "no-op loop"):
        results[algorithm] = {pool: measure_pair_us(algorithm, pool, rounds=rounds) for pool in POOL_SIZES}
    return results


def table(results: dict[str, dict[int, tuple[float, float]]]) -> str:
    """Fixed-width text table: one row per algorithm, `mean / min` us per pool size."""
    header = f"{'algorithm':<20}" + "".join(f"{pool:>18,}" for pool in POOL_SIZES)
    lines = [header, " " * 20 + "".join(f"{'mean / min us':>18}" for _ in POOL_SIZES)]
    for algorithm, by_pool in results.items():
        cells = (f"{by_pool[p][0]:>11.2f} / {by_pool[p][1]:<4.2f}" for p in POOL_SIZES)
        lines.append(f"{algorithm:<20}" + "".join(cells))
    return "\n".join(lines)


def plot(results: dict[str, dict[int, tuple[float, float]]], out: Path, *, note: str = "") -> None:
    """Log-x line plot of mean us per pair, one line per algorithm, dashed target lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10.5, 5), dpi=120)
    markers = {"uniform": "o", "learning_progress": "s", "staged_progression": "^"}
    for algorithm in ALGORITHMS:
        by_pool = results[algorithm]
        ax.plot(POOL_SIZES, [by_pool[p][0] for p in POOL_SIZES], marker=markers[algorithm], linewidth=2,
                label=algorithm.replace("_", " "))
    floor = results.get("no-op loop")
    if floor:
        ax.plot(POOL_SIZES, [floor[p][0] for p in POOL_SIZES], color="grey", linestyle=":",
                label="no-op loop (floor)")
    for (pool, target), color in zip(TARGETS_US.items(), ("tab:red", "tab:purple")):
        ax.axhline(target, color=color, linestyle="--", linewidth=1.2,
                   label=f"target {target:g} µs (learning progress, {pool:,} tasks)")
    ax.set_xscale("log")
    ax.set_xticks(POOL_SIZES, [f"{p:,}" for p in POOL_SIZES])
    ax.set_ylim(bottom=0, top=max(12.0, 1.15 * max(v[0] for r in results.values() for v in r.values())))
    ax.set_xlabel("pool size (active tasks, log scale)")
    ax.set_ylabel("µs per get_task + update pair")
    ax.set_title("Curriculum hot path: cost per pair vs pool size" + (f"\n{note}" if note else ""), fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9, frameon=False)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per point (default 5)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"PNG to write (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"Expected --rounds >= 1, received {args.rounds}")
    load = os.getloadavg()[0]
    results = measure_all(rounds=args.rounds)
    print(f"us per get/update pair ({PAIRS_PER_ROUND:,} pairs x {args.rounds} rounds; 1-min load average {load:.1f})")
    print(table(results))
    plot(results, args.out, note=f"mean of {args.rounds} rounds of {PAIRS_PER_ROUND:,} pairs; "
                                 f"{os.cpu_count()} CPUs, load average {load:.1f} at start")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
