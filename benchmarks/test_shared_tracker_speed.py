"""One shared-memory curriculum under concurrent writers, and lock-free readers beside them.

Updates/s: 1, 2 and 4 forked writer processes each run `PAIRS_PER_WRITER` get/update pairs on
one `Curriculum(config, shared_memory=True)` (learning progress, pool 64); the figure is total
updates over the wall time of the parallel phase (earliest writer start to latest writer end,
timed inside the writers on the system-wide monotonic clock, so process start-up is not in it).
The baseline is the same pairs on a local curriculum in the main process, measured in the same
run. Best of `REPEATS`, because the machine is shared with other jobs.

Reads/s: the main process reads the tracker lock-free (two array copies; separately the
pool-wide `curriculum.stats()`) for `READ_SECONDS`, with no writers and with 2 writers running.

Nothing here asserts a speed. Run with `make bench`; figures print at the end as `shared_*`.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from curriculum import Curriculum, CurriculumConfig, LearningProgressConfig, SingleTaskGenerator

POOL = 64
PAIRS_PER_WRITER = 20_000
WRITER_COUNTS = (1, 2, 4)
REPEATS = 3
READ_SECONDS = 0.5
CTX = mp.get_context("fork")


def _config() -> CurriculumConfig:
    return CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}, label="bench"),
                            algorithm=LearningProgressConfig(), num_active_tasks=POOL, seed=0)


def _pairs(curriculum: Curriculum, scores: list[float]) -> None:
    get, update = curriculum.get_task, curriculum.update_task_performance
    for score in scores:
        update(get().task_id, score)


def _scores(seed: int, n: int = PAIRS_PER_WRITER) -> list[float]:
    return np.random.default_rng(seed).random(n).tolist()


def _writer(curriculum: Curriculum, index: int, pairs: int | None, start: Any, stop: Any, queue: Any) -> None:
    """Wait for `start`, then run `pairs` pairs (or batches of pairs until `stop`); report times."""
    curriculum.reseed(index)
    scores = _scores(index, pairs or 1_000)
    start.wait()
    began = time.perf_counter()
    done = 0
    if pairs is not None:
        _pairs(curriculum, scores)
        done = pairs
    else:
        while not stop.is_set():
            _pairs(curriculum, scores)
            done += len(scores)
    queue.put((began, time.perf_counter(), done))


def _run_writers(curriculum: Curriculum, writers: int, *, pairs: int | None = PAIRS_PER_WRITER,
                 during: Callable[[], Any] | None = None) -> tuple[float, int, Any]:
    """Run `writers` forked writers on `curriculum`; (parallel-phase seconds, updates, result of `during()`)."""
    start, stop, queue = CTX.Event(), CTX.Event(), CTX.Queue()
    processes = [CTX.Process(target=_writer, args=(curriculum, i + 1, pairs, start, stop, queue))
                 for i in range(writers)]
    for process in processes:
        process.start()
    start.set()
    during_result = during() if during is not None else None
    stop.set()
    reports = [queue.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
        if process.exitcode != 0:
            raise RuntimeError(f"writer {process.name} exited with code {process.exitcode}")
    began = min(r[0] for r in reports)
    ended = max(r[1] for r in reports)
    return ended - began, sum(r[2] for r in reports), during_result


@pytest.fixture(scope="module")
def local_baseline(figures: dict[str, float]) -> float:
    """Pairs/s of a local (non-shared) curriculum in the main process, best of `REPEATS`."""
    curriculum = Curriculum(_config())
    scores = _scores(0)
    _pairs(curriculum, scores)  # warm-up
    best = 0.0
    for _ in range(REPEATS):
        began = time.perf_counter()
        _pairs(curriculum, scores)
        best = max(best, PAIRS_PER_WRITER / (time.perf_counter() - began))
    curriculum.close()
    figures["shared_baseline_local_updates_per_s"] = best
    return best


def test_local_baseline(benchmark: Any, figures: dict[str, float], local_baseline: float) -> None:
    """The baseline again under pytest-benchmark, plus a shared curriculum driven from the main process."""
    curriculum = Curriculum(_config(), shared_memory=True)
    scores = _scores(0)
    try:
        benchmark.pedantic(_pairs, args=(curriculum, scores), rounds=REPEATS, iterations=1, warmup_rounds=1)
    finally:
        curriculum.close()
    in_main = PAIRS_PER_WRITER / benchmark.stats.stats.min
    figures["shared_in_main_process_updates_per_s"] = in_main
    benchmark.extra_info.update(local_updates_per_s=local_baseline, shared_in_main_updates_per_s=in_main)
    print(f"\nlocal curriculum: {local_baseline:,.0f} updates/s; shared curriculum, main process: "
          f"{in_main:,.0f} updates/s ({in_main / local_baseline:.2f}x local)")


@pytest.mark.parametrize("writers", WRITER_COUNTS)
def test_shared_writers(benchmark: Any, figures: dict[str, float], local_baseline: float, writers: int) -> None:
    """Aggregate updates/s of `writers` processes on one shared curriculum (best of `REPEATS`)."""
    curriculum = Curriculum(_config(), shared_memory=True)
    rates: list[float] = []

    def round_() -> None:
        seconds, updates, _ = _run_writers(curriculum, writers)
        rates.append(updates / seconds)

    try:
        benchmark.pedantic(round_, rounds=REPEATS, iterations=1)
        tracker = curriculum.tracker
        total, late = tracker.total_completions, tracker.late_completions
    finally:
        curriculum.close()
    # Not a speed check: a lost update would make every figure here meaningless. A completion of
    # a task another writer evicted meanwhile counts as late, so recorded + late == pairs run.
    expected = REPEATS * writers * PAIRS_PER_WRITER
    if total + late != expected:
        raise AssertionError(f"Expected {expected} completions (recorded + late) in the shared tracker, "
                             f"found {total} recorded + {late} late")
    best = max(rates)
    figures[f"shared_{writers}_writers_updates_per_s"] = best
    figures[f"shared_{writers}_writers_ratio_to_local"] = best / local_baseline
    benchmark.extra_info.update(updates_per_s=best, all_rounds_updates_per_s=rates,
                                ratio_to_local=best / local_baseline, local_updates_per_s=local_baseline)
    print(f"\n{writers} writer process(es): {best:,.0f} updates/s aggregate "
          f"({best / writers:,.0f} per process), {best / local_baseline:.2f}x the local curriculum "
          f"({local_baseline:,.0f}/s); rounds {', '.join(f'{r:,.0f}' for r in rates)}")


def _read_arrays(curriculum: Curriculum) -> Callable[[], None]:
    tracker = curriculum.tracker

    def read() -> None:
        tracker.completions.copy()
        tracker.score_sum.copy()

    return read


def _read_stats(curriculum: Curriculum) -> Callable[[], None]:
    return curriculum.stats


def _reads_per_second(read: Callable[[], None]) -> tuple[float, float]:
    """(reads per wall second, reads per CPU second of this process) over `READ_SECONDS`.

    The second tells contention from CPU share: with 2 writers and this reader on 2 cores,
    the reader gets less than a whole core even if reading cost nothing extra.
    """
    reads = 0
    began, cpu_began = time.perf_counter(), time.process_time()
    deadline = began + READ_SECONDS
    while True:
        for _ in range(64):
            read()
        reads += 64
        now = time.perf_counter()
        if now >= deadline:
            return reads / (now - began), reads / max(time.process_time() - cpu_began, 1e-9)


@pytest.mark.parametrize("read", [_read_arrays, _read_stats], ids=["array_copies", "stats"])
def test_lock_free_reads(benchmark: Any, figures: dict[str, float], read: Callable[[Curriculum], Callable]) -> None:
    """Reads/s in the main process with no writers, then with 2 writers running."""
    name = read.__name__.removeprefix("_read_")
    curriculum = Curriculum(_config(), shared_memory=True)
    results: dict[str, Any] = {}

    def round_() -> None:
        results["idle"] = _reads_per_second(read(curriculum))
        seconds, updates, busy = _run_writers(curriculum, 2, pairs=None,
                                              during=lambda: _reads_per_second(read(curriculum)))
        results["busy"] = busy
        results["writer_updates_per_s"] = updates / seconds

    try:
        benchmark.pedantic(round_, rounds=1, iterations=1)
    finally:
        curriculum.close()
    (idle, idle_cpu), (busy, busy_cpu) = results["idle"], results["busy"]
    figures[f"shared_reads_{name}_per_s_no_writers"] = idle
    figures[f"shared_reads_{name}_per_s_2_writers"] = busy
    figures[f"shared_reads_{name}_per_cpu_s_2_writers_ratio"] = busy_cpu / idle_cpu
    benchmark.extra_info.update(reads_per_s_no_writers=idle, reads_per_s_2_writers=busy, ratio=busy / idle,
                                reads_per_cpu_s_no_writers=idle_cpu, reads_per_cpu_s_2_writers=busy_cpu,
                                writer_updates_per_s=results["writer_updates_per_s"])
    print(f"\nlock-free {name} reads: {idle:,.0f}/s with no writers, {busy:,.0f}/s with 2 writers "
          f"({busy / idle:.2f}x); per CPU second of the reader {idle_cpu:,.0f} vs {busy_cpu:,.0f} "
          f"({busy_cpu / idle_cpu:.2f}x); the writers meanwhile made {results['writer_updates_per_s']:,.0f} updates/s")
