"""Peak memory of a 100,000-task learning-progress pool, built in a fresh process.

Each measurement runs in its own spawned interpreter, so nothing the benchmark session
allocated counts: the child imports everything first, then takes a baseline, builds
`Curriculum(num_active_tasks=POOL)` and runs `PAIRS` get/update pairs. Two children, because
tracemalloc's own bookkeeping would inflate the RSS figures:

- RSS: peak resident set since the baseline, minus the resident set at the baseline; the
  whole process, numpy buffers and allocator slack included. The peak is the kernel's `VmHWM`,
  reset to the current RSS at the baseline (`echo 5 > /proc/self/clear_refs`). Not
  `getrusage().ru_maxrss`: Linux carries it across `exec`, so a spawned child starts with its
  parent's peak (the benchmark session's, hundreds of MB with torch loaded) and the delta
  reads 0.
- tracemalloc: peak of traced Python allocations (numpy reports its array buffers to
  tracemalloc too) since the baseline.

Both are reported after the build and after the pairs, in MB (10^6 bytes) and bytes per task.
Run with `make bench`; printed at the end as `memory_*` figures.
"""

from __future__ import annotations

import multiprocessing as mp
import tracemalloc
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

POOL = 100_000
PAIRS = 200_000
PHASES = ("built", "after_pairs")


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"Expected a {field} line in /proc/self/status")


def _rss_peak_bytes() -> int:
    return _status_kib("VmHWM") * 1024


def _current_rss_bytes() -> int:
    return _status_kib("VmRSS") * 1024


def _reset_rss_peak() -> None:
    """Set this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def measure_pool(pool: int, pairs: int, *, traced: bool) -> dict[str, int]:
    """Bytes above the baseline of a fresh process, after building the pool and after `pairs` pairs."""
    import numpy as np

    from benchmarks.conftest import make_curriculum

    scores = np.random.default_rng(0).random(pairs).tolist()
    make_curriculum(64).close()  # import and warm every code path the measured build uses
    out: dict[str, int] = {}
    if traced:
        tracemalloc.start()
        tracemalloc.reset_peak()
    if not traced:
        _reset_rss_peak()
    rss_before = _current_rss_bytes()
    curriculum = make_curriculum(pool, "learning_progress")

    def sample(phase: str) -> None:
        if traced:
            out[f"{phase}_traced_peak"] = tracemalloc.get_traced_memory()[1]
            out[f"{phase}_traced_current"] = tracemalloc.get_traced_memory()[0]
        else:
            out[f"{phase}_rss_peak"] = _rss_peak_bytes() - rss_before
            out[f"{phase}_rss_current"] = _current_rss_bytes() - rss_before

    sample("built")
    get, update = curriculum.get_task, curriculum.update_task_performance
    for score in scores:
        update(get().task_id, score)
    sample("after_pairs")
    out["tasks_created"] = curriculum.tracker.counter("tasks_created")
    curriculum.close()
    return out


def _in_fresh_process(traced: bool) -> dict[str, int]:
    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as executor:
        return executor.submit(measure_pool, POOL, PAIRS, traced=traced).result(timeout=300)


@pytest.mark.parametrize("traced", [False, True], ids=["rss", "tracemalloc"])
def test_peak_memory_100k_pool(benchmark: Any, figures: dict[str, float], traced: bool) -> None:
    """Timed: the whole child (start-up, build, pairs); the figures are its memory."""
    result = benchmark.pedantic(_in_fresh_process, args=(traced,), rounds=1, iterations=1)
    kind = "traced" if traced else "rss"
    lines = []
    for phase in PHASES:
        for which in ("peak", "current"):
            value = result[f"{phase}_{kind}_{which}"]
            if which == "peak":
                figures[f"memory_{kind}_peak_{phase}_mb"] = value / 1e6
                figures[f"memory_{kind}_peak_{phase}_bytes_per_task"] = value / POOL
            benchmark.extra_info[f"{phase}_{kind}_{which}_bytes"] = value
            lines.append(f"  {phase:<11} {which:<7} {value / 1e6:8.1f} MB  {value / POOL:7.0f} B/task")
    benchmark.extra_info["tasks_created"] = result["tasks_created"]
    print(f"\n{kind} memory of a {POOL:,}-task learning-progress pool ({PAIRS:,} pairs, "
          f"{result['tasks_created']:,} tasks created):\n" + "\n".join(lines))
