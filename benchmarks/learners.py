"""The real-learner table and plot: PPO on the learner task families under each curriculum.

For every task family of `harness.learner_envs.TASK_FAMILIES`, every curriculum in
`--curricula` and every seed in `0 .. --seeds-1`, trains PPO through `GymCurriculumEnv`
(`harness.learners.run_learner`, the limits' step budget) and records: steps until the greedy
policy masters every learnable variant, the share of episodes on impossible and noisy
variants before and after that point, evictions, wall time. Prints the README table, writes
`benchmarks/learners.json` (per-run figures and the sampling share per difficulty in windows
of `--window` steps) and `benchmarks/learners.png` (that share over training steps, learning
progress against uniform, averaged over seeds).

    .venv/bin/python -m benchmarks.learners                      # ~10-15 min on 2 cores
    .venv/bin/python -m benchmarks.learners --seeds 2 --families corridor
    .venv/bin/python -m benchmarks.learners --plot-only          # redraw from learners.json
    .venv/bin/python -m benchmarks.learners --seeds 20 --first-seed 20 --curricula learning_progress uniform \
        --json benchmarks/learners_seeds20_39.json --out /tmp/learners.png   # held-out seeds

Runs go to `--workers` processes (default 2, one torch thread each). Needs the `[learners]`
extra.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `harness` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from harness.learner_envs import IMPOSSIBLE, LEARNABLE, NOISY, TASK_FAMILIES
from harness.learners import CURRICULA, LEARNER_LIMITS, LearnerRun, compare_to_uniform, run_learner

__all__ = ["run_one", "summarise", "table", "mastery_table", "plot", "main"]

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "learners.json"
DEFAULT_PNG = HERE / "learners.png"


def run_one(family: str, curriculum: str, seed: int, window: int) -> dict[str, Any]:
    """One run's figures, and its episode shares per difficulty/kind in windows of `window` steps."""
    post = LEARNER_LIMITS.post_mastery_steps if curriculum != "uniform" else 0
    result = run_learner(LearnerRun(family, curriculum, seed=seed, post_mastery_steps=post))
    fam = result.family
    mastered = result.all_mastered_step
    groups = _share_groups(fam)
    group_of = {v.label: _group(v) for v in fam.variants}
    edges = np.arange(0, result.total_steps + window, window)
    counts = np.zeros((len(edges) - 1, len(groups)))
    index = {g: i for i, g in enumerate(groups)}
    bins = np.clip(np.searchsorted(edges, result.episode_steps, side="left") - 1, 0, len(edges) - 2)
    for b, label in zip(bins.tolist(), result.episode_labels):
        counts[b, index[group_of[label]]] += 1
    return {
        "family": family, "curriculum": curriculum, "seed": seed,
        "total_steps": result.total_steps, "wall_time": result.wall_time,
        "all_mastered_step": mastered, "mastered": result.mastered, "reached": result.reached,
        "unlearnable_share_until_mastery": result.unlearnable_share(end=mastered),
        "impossible_share_until_mastery": result.share((IMPOSSIBLE,), end=mastered),
        "noisy_share_until_mastery": result.share((NOISY,), end=mastered),
        "unlearnable_share_after_mastery": (result.unlearnable_share(start=mastered)
                                            if mastered is not None else None),
        "episodes": len(result.episode_labels),
        "evictions": result.curriculum_stats.get("evictions"),
        "window": window, "groups": groups, "window_counts": counts.tolist(),
    }


def _group(variant: Any) -> str:
    return f"difficulty {variant.difficulty}" if variant.kind == LEARNABLE else variant.kind


def _share_groups(family: Any) -> list[str]:
    return [f"difficulty {v.difficulty}" for v in family.learnable] + [IMPOSSIBLE, NOISY]


def _nan_to_none(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def summarise(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per family and curriculum: means and worst seeds of the tier's numbers, against uniform."""
    by = {(r["family"], r["curriculum"], r["seed"]): r for r in runs}
    out: dict[str, dict[str, Any]] = {}
    for (family, curriculum, seed), r in sorted(by.items()):
        uniform = by.get((family, "uniform", seed))
        entry = out.setdefault(f"{family}/{curriculum}", {"family": family, "curriculum": curriculum, "seeds": []})
        entry["seeds"].append(seed)
        steps = r["all_mastered_step"] if r["all_mastered_step"] is not None else r["total_steps"]
        entry.setdefault("steps_to_master_all", []).append(steps)
        entry.setdefault("never_mastered", []).append(r["all_mastered_step"] is None)
        entry.setdefault("unlearnable_share", []).append(r["unlearnable_share_until_mastery"])
        entry.setdefault("after_mastery_share", []).append(_nan_to_none(r["unlearnable_share_after_mastery"]))
        entry.setdefault("wall_time", []).append(r["wall_time"])
        entry.setdefault("evictions", []).append(r["evictions"])
        if uniform is not None:
            u_steps = uniform["all_mastered_step"] or uniform["total_steps"]
            entry.setdefault("steps_ratio", []).append(steps / u_steps)
            entry.setdefault("share_ratio", []).append(
                r["unlearnable_share_until_mastery"] / uniform["unlearnable_share_until_mastery"])
            after = _nan_to_none(r["unlearnable_share_after_mastery"])
            entry.setdefault("after_ratio", []).append(
                None if after is None else after / uniform["unlearnable_share_until_mastery"])
    return out


def _mean(values: list[Any]) -> float:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else float("nan")


def _worst(values: list[Any], *, upper: bool = True) -> float:
    kept = [v for v in values if v is not None]
    return (max(kept) if upper else min(kept)) if kept else float("nan")


def table(summary: dict[str, dict[str, Any]]) -> str:
    """The README table (markdown)."""
    limits = LEARNER_LIMITS
    lines = [
        "| family | curriculum | steps to master all, mean (worst) | vs uniform, mean (worst) "
        f"[limit {limits.max_steps_ratio}] | impossible + noisy share until mastery, mean (worst) | vs uniform "
        f"[limit {limits.max_unlearnable_share_ratio}] | share after mastery, mean (worst) | vs uniform "
        f"[limit {limits.max_after_mastery_share_ratio}] | wall s per run, mean (max) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in summary.values():
        steps = entry["steps_to_master_all"]
        never = sum(entry["never_mastered"])
        steps_text = f"{_mean(steps):,.0f} ({max(steps):,.0f})" + (f", {never} never" if never else "")
        ratio = entry.get("steps_ratio", [])
        share_ratio = entry.get("share_ratio", [])
        after = entry["after_mastery_share"]
        after_ratio = entry.get("after_ratio", [])
        is_uniform = entry["curriculum"] == "uniform"
        lines.append(
            f"| {entry['family']} | {entry['curriculum']} | {steps_text} | "
            f"{'' if is_uniform else f'{_mean(ratio):.2f} ({_worst(ratio):.2f})'} | "
            f"{_mean(entry['unlearnable_share']):.1%} ({_worst(entry['unlearnable_share']):.1%}) | "
            f"{'' if is_uniform else f'{_mean(share_ratio):.2f} ({_worst(share_ratio):.2f})'} | "
            f"{'' if is_uniform else f'{_mean(after):.1%} ({_worst(after):.1%})'} | "
            f"{'' if is_uniform else f'{_mean(after_ratio):.2f} ({_worst(after_ratio):.2f})'} | "
            f"{_mean(entry['wall_time']):.0f} ({max(entry['wall_time']):.0f}) |"
        )
    return "\n".join(lines)


def mastery_table(runs: list[dict[str, Any]]) -> str:
    """Per family and curriculum, the mean step (thousands) at which each learnable variant was
    first reached (a solved training episode) and first mastered (solved by the greedy policy);
    a seed that never got there counts its run's last step."""
    keys = sorted({(r["family"], r["curriculum"]) for r in runs}, key=lambda k: (k[0], CURRICULA.index(k[1])))
    lines = []
    for family in sorted({k[0] for k in keys}):
        labels = list(next(r for r in runs if r["family"] == family)["mastered"])
        lines += [f"| {family}: thousands of steps to reach / master | " + " | ".join(labels) + " |",
                  "|---|" + "---|" * len(labels)]
        for _, curriculum in (k for k in keys if k[0] == family):
            chosen = [r for r in runs if r["family"] == family and r["curriculum"] == curriculum]
            cells = []
            for label in labels:
                reached = np.mean([(r["reached"][label] or r["total_steps"]) / 1000 for r in chosen])
                mastered = np.mean([(r["mastered"][label] or r["total_steps"]) / 1000 for r in chosen])
                cells.append(f"{reached:.1f} / {mastered:.1f}")
            lines.append(f"| {curriculum} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(runs: list[dict[str, Any]], path: Path, *, curricula: tuple[str, ...] = ("learning_progress", "uniform")) -> None:
    """Sampling share per difficulty (stacked) over training steps, one panel per family and
    curriculum, averaged over seeds (each window's episode counts summed over the runs that
    reached it: runs stop at mastery, plus the after-mastery window for learning progress)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = sorted({r["family"] for r in runs})
    curricula = tuple(c for c in curricula if any(r["curriculum"] == c for r in runs))
    fig, axes = plt.subplots(len(families), len(curricula), figsize=(6 * len(curricula), 3.6 * len(families)),
                             squeeze=False, sharey=True)
    for row, family in enumerate(families):
        for col, curriculum in enumerate(curricula):
            ax = axes[row][col]
            chosen = [r for r in runs if r["family"] == family and r["curriculum"] == curriculum]
            if not chosen:
                ax.set_visible(False)
                continue
            groups = chosen[0]["groups"]
            window = chosen[0]["window"]
            # complete windows only (a run's last one is partial); later windows hold the runs still going
            complete = [np.array(r["window_counts"])[:-1] for r in chosen]
            length = max(1, max(len(c) for c in complete))
            counts = np.zeros((length, len(groups)))
            for c in complete:
                counts[: len(c)] += c
            totals = counts.sum(axis=1, keepdims=True)
            shares = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
            x = (np.arange(length) + 0.5) * window / 1000
            learnable = len(groups) - 2
            colours = [plt.cm.viridis(i / max(1, learnable - 1)) for i in range(learnable)] + ["#d62728", "#ff9896"]
            ax.stackplot(x, shares.T, labels=groups, colors=colours, alpha=0.9)
            mastered = [r["all_mastered_step"] for r in chosen if r["all_mastered_step"] is not None]
            if mastered:
                ax.axvline(np.mean(mastered) / 1000, color="black", linestyle="--", linewidth=1,
                           label=f"mean step all mastered ({len(mastered)}/{len(chosen)} seeds)")
            ax.set_title(f"{family}: {curriculum} ({len(chosen)} seeds)")
            ax.set_xlim(0, x[-1] + window / 2000)
            ax.set_ylim(0, 1)
            ax.set_xlabel("environment steps (thousands)")
            if col == 0:
                ax.set_ylabel("share of episodes")
            if col == len(curricula) - 1:
                ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    fig.suptitle("PPO through GymCurriculumEnv: sampling share by difficulty over training")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=LEARNER_LIMITS.seeds)
    parser.add_argument("--first-seed", type=int, default=0, help="run seeds first .. first + seeds - 1")
    parser.add_argument("--families", nargs="+", default=list(TASK_FAMILIES), choices=list(TASK_FAMILIES))
    parser.add_argument("--curricula", nargs="+", default=list(CURRICULA), choices=list(CURRICULA))
    parser.add_argument("--window", type=int, default=4096, help="steps per share window of the plot")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--out", type=Path, default=DEFAULT_PNG)
    parser.add_argument("--plot-only", action="store_true", help="redraw table and plot from --json")
    args = parser.parse_args(argv)
    if args.plot_only:
        runs = json.loads(args.json.read_text())["runs"]
    else:
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        jobs = [(f, c, s, args.window) for f in args.families for c in args.curricula for s in seeds]
        started = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            runs = list(pool.map(run_one, *zip(*jobs)))
        load = os.getloadavg()
        meta = {"wall_seconds": time.perf_counter() - started, "workers": args.workers,
                "loadavg_at_end": [round(v, 2) for v in load], "limits": asdict(LEARNER_LIMITS)}
        args.json.write_text(json.dumps({"meta": meta, "runs": runs}, indent=1, sort_keys=True) + "\n")
        print(f"{len(runs)} runs in {meta['wall_seconds']:.0f} s with {args.workers} workers, "
              f"load average at the end {meta['loadavg_at_end']}")
    print(table(summarise(runs)))
    over = [r for r in runs if r["wall_time"] > LEARNER_LIMITS.run_wall_budget]
    print(f"\nruns over the {LEARNER_LIMITS.run_wall_budget:.0f} s budget: {len(over)} of {len(runs)}"
          + (f" (longest {max(r['wall_time'] for r in over):.0f} s)" if over else ""))
    print()
    print(mastery_table(runs))
    plot(runs, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
