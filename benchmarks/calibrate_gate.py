"""Calibrate the gate's statistical checks: false-alarm rates and power against degradations.

    python -m benchmarks.calibrate_gate measure --seeds 4000 --jobs 2      # built-in, per-seed values
    python -m benchmarks.calibrate_gate measure --seeds 100 --ladder       # every DEGRADATIONS rung
    python -m benchmarks.calibrate_gate report                              # tables from the cache

`measure` runs every setup of `harness.experiments.SETUPS` on seeds 0..N-1 with the built-in
curriculum (or, with `--ladder`, with each curriculum of `harness.faults.DEGRADATIONS`) and
caches each check's per-seed value in `benchmarks/calibration/<curriculum>.json` (existing
seeds are kept, so a run can be extended). `report` prints, per check:

- false alarms: the check replayed under base seeds 0..N/K-1 (K = the `seeds` of its setup in
  `harness.thresholds`, base seed B judging the mean over seeds B*K..B*K+K-1, exactly as the
  gate does), how many replays fail at the current limit, and where the replays' means lie;
- power: for each degradation rung, the probability that a K-seed mean violates the limit,
  estimated by resampling the rung's per-seed values (10,000 draws of K seeds); the smallest
  rung (in `DEGRADATIONS` order of its family) detected with at least 90% power.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from harness.checks import statistic_of
from harness.experiments import CHECKS, SETUPS, checks_of
from harness.faults import DEGRADATIONS

CACHE = Path(__file__).resolve().parent / "calibration"
BUILTIN = "builtin"
POWER_TARGET = 0.9
RESAMPLES = 10_000


def _factory(name: str) -> Any:
    if name == BUILTIN:
        from curriculum import Curriculum

        return Curriculum
    return DEGRADATIONS[name]


def _measure_seeds(job: tuple[str, str, list[int]]) -> dict[str, dict[int, float | None]]:
    curriculum, setup, seeds = job
    factory = _factory(curriculum)
    out: dict[str, dict[int, float | None]] = {check.name: {} for check in checks_of(setup)}
    for seed in seeds:
        run = SETUPS[setup].run(factory, seed=seed)
        for check in checks_of(setup):
            value = check.measure(run)
            out[check.name][seed] = None if value is None else float(value)
    return out


def _cache_path(curriculum: str) -> Path:
    return CACHE / f"{curriculum}.json"


def _load(curriculum: str) -> dict[str, dict[int, float | None]]:
    path = _cache_path(curriculum)
    if not path.exists():
        return {}
    raw = json.loads(path.read_text())
    return {check: {int(seed): value for seed, value in values.items()} for check, values in raw.items()}


def _save(curriculum: str, values: dict[str, dict[int, float | None]]) -> None:
    CACHE.mkdir(exist_ok=True)
    ordered = {check: {str(seed): values[check][seed] for seed in sorted(values[check])} for check in sorted(values)}
    _cache_path(curriculum).write_text(json.dumps(ordered, indent=1) + "\n")


def measure(curricula: Sequence[str], setups: Sequence[str], seeds: int, jobs: int) -> None:
    for curriculum in curricula:
        values = _load(curriculum)
        for setup in setups:
            names = [check.name for check in checks_of(setup)]
            missing = [s for s in range(seeds) if any(s not in values.get(name, {}) for name in names)]
            if not missing:
                continue
            chunks = [missing[i::jobs * 4] for i in range(jobs * 4)]
            began = time.monotonic()
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                for part in pool.map(_measure_seeds, [(curriculum, setup, c) for c in chunks if c]):
                    for name, per_seed in part.items():
                        values.setdefault(name, {}).update(per_seed)
            _save(curriculum, values)
            print(f"{curriculum} {setup}: {len(missing)} seeds in {time.monotonic() - began:.0f} s", flush=True)


def _replays(values: dict[int, float | None], k: int, statistic: str = "mean") -> list[float]:
    bases = []
    base = 0
    while all(s in values for s in range(base * k, base * k + k)):
        chunk = [values[s] for s in range(base * k, base * k + k)]
        if any(v is None for v in chunk):
            break
        bases.append(statistic_of(chunk, statistic))
        base += 1
    return bases


def _violates(mean: float, limit: float, upper: bool) -> bool:
    return mean > limit if upper else mean < limit


def _power(values: dict[int, float | None], limit: float, upper: bool, k: int, statistic: str = "mean") -> float | None:
    sample = np.array([v for v in values.values() if v is not None], dtype=np.float64)
    if sample.size < k:
        return None
    rng = np.random.default_rng(0)
    draws = sample[rng.integers(0, sample.size, size=(RESAMPLES, k))]
    means = np.median(draws, axis=1) if statistic == "median" else draws.mean(axis=1)
    return float(np.mean(means > limit if upper else means < limit))


def report() -> dict[str, Any]:
    builtin = _load(BUILTIN)
    rungs = {name: _load(name) for name in DEGRADATIONS if _cache_path(name).exists()}
    summary: dict[str, Any] = {}
    print("\n## False alarms (each check's mean over its K seeds, replayed under disjoint base seeds)\n")
    print("| check | K | limit | per-seed mean (sd) | replayed statistic min / median / max | replays | false alarms |")
    print("|---|---:|---|---|---|---:|---:|")
    for check in CHECKS:
        k = SETUPS[check.setup].seeds()
        values = builtin.get(check.name, {})
        per_seed = [v for v in values.values() if v is not None]
        replays = _replays(values, k, check.statistic)
        limit = check.limit()
        alarms = sum(_violates(m, limit, check.upper) for m in replays)
        bound = "<=" if check.upper else ">="
        if per_seed:
            print(f"| {check.name} | {k} | {bound} {limit:.4g} | {np.mean(per_seed):.4g} ({np.std(per_seed):.3g}) | "
                  f"{min(replays, default=float('nan')):.4g} / {np.median(replays) if replays else float('nan'):.4g} / "
                  f"{max(replays, default=float('nan')):.4g} | {len(replays)} | {alarms} |")
        summary[check.name] = {"limit": limit, "upper": check.upper, "replays": len(replays), "false_alarms": alarms,
                               "per_seed_mean": float(np.mean(per_seed)) if per_seed else None,
                               "per_seed_sd": float(np.std(per_seed)) if per_seed else None,
                               "replay_min": min(replays, default=None), "replay_max": max(replays, default=None)}
    if rungs:
        names = list(rungs)
        print("\n## Power: probability that a check's K-seed mean fails it, per degradation rung\n")
        print("| check | " + " | ".join(names) + " | smallest rung at 90% |")
        print("|---|" + "---:|" * len(names) + "---|")
        for check in CHECKS:
            k = SETUPS[check.setup].seeds()
            powers = {name: _power(rungs[name].get(check.name, {}), check.limit(), check.upper, k, check.statistic)
                      for name in names}
            detected = [name for name in names if (powers[name] or 0.0) >= POWER_TARGET]
            cells = ["n/a" if p is None else f"{p:.0%}" for p in powers.values()]
            print(f"| {check.name} | " + " | ".join(cells) + f" | {', '.join(detected) or 'none'} |")
            summary[check.name]["power"] = powers
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("measure")
    run.add_argument("--seeds", type=int, required=True)
    run.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    run.add_argument("--ladder", action="store_true", help="measure the DEGRADATIONS rungs instead of the built-in")
    run.add_argument("--setups", nargs="*", default=list(SETUPS))
    run.add_argument("--curricula", nargs="*", default=None, help="rungs to measure (with --ladder)")
    sub.add_parser("report")
    args = parser.parse_args()
    if args.command == "measure":
        curricula = (args.curricula or list(DEGRADATIONS)) if args.ladder else [BUILTIN]
        measure(curricula, args.setups, args.seeds, args.jobs)
    report()


if __name__ == "__main__":
    main()
