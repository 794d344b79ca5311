"""Completions/s through one curriculum service actor (`curriculum.ray_service`), against a
local `Curriculum` and a shared-memory one, in the same run.

For every client batch size (1, 16, 64, 256) and 1, 2 and 4 workers: a fresh service over
learning progress (pool 64, eviction on), W worker actors (`num_cpus=0`, one client each,
`prefetch = max(8, 2 x batch size)`: one refill of a batch size of tasks per batch of
completions), each running a tight loop of `get_task()` + `update_task_performance()` with a
hashed score, after a warm-up. Reported:

- completions/s through the actor: every worker's completions over the wall time from the
  first worker's start to the last worker's end (all clients flushed);
- µs per completion on the worker side: the CPU time of the worker process (its Ray threads
  included) over its completions, what a worker pays per episode end when its envs keep it
  busy between completions; and the wall time of its loop over its completions, which in this
  tight loop is mostly waiting for the actor (mean over workers).

Baselines: the same loop on a local `Curriculum(config)` in this process, and on
`Curriculum(config, shared_memory=True)` from 1, 2 and 4 forked processes (aggregate).

    .venv/bin/python -m benchmarks.ray_service                 # ~3 min on 2 busy cores
    .venv/bin/python -m benchmarks.ray_service --quick         # fewer completions per cell
    .venv/bin/python -m benchmarks.ray_service --json benchmarks/ray_service.json
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import platform
import time
from typing import Any

import ray

from curriculum import BucketedTaskGenerator, Curriculum, CurriculumConfig, LearningProgressConfig, ValueRange
from curriculum.ray_service import CurriculumClient, start_curriculum_service, stop_curriculum_service

BATCH_SIZES = (1, 16, 64, 256)
WORKERS = (1, 2, 4)


def bench_config() -> CurriculumConfig:
    generator = BucketedTaskGenerator({"game": {"name": "maze"}}, {"game.size": [5, 7, 9, 11],
                                                                   "game.level": ValueRange(1, 20)}, label="maze")
    return CurriculumConfig(task_generator=generator, algorithm=LearningProgressConfig(), num_active_tasks=64, seed=0,
                            min_presentations=4, eviction_percentile=20.0)


def score_of(task_id: int, step: int) -> float:
    return ((task_id * 7919 + step * 104729) % 1000) / 1000.0


def run_loop(curriculum: Any, completions: int, offset: int = 0) -> float:
    """Seconds for `completions` get/update pairs."""
    started = time.perf_counter()
    for step in range(offset, offset + completions):
        task = curriculum.get_task()
        curriculum.update_task_performance(task.task_id, score_of(task.task_id, step))
    return time.perf_counter() - started


@ray.remote(num_cpus=0)
class BenchWorker:
    def __init__(self, service: Any, batch_size: int) -> None:
        self.client = CurriculumClient(service, prefetch=max(8, 2 * batch_size), batch_size=batch_size, timeout=120.0)

    def warm_up(self, completions: int) -> None:
        run_loop(self.client, completions)
        self.client.flush()

    def run(self, completions: int) -> tuple[float, float, float, float]:
        """(start, end) wall clock, the loop's wall seconds and the process's CPU seconds, queue flushed."""
        start, cpu = time.time(), time.process_time()
        seconds = run_loop(self.client, completions, offset=10_000)
        self.client.flush()
        return start, time.time(), seconds, time.process_time() - cpu

    def counts(self) -> tuple[int, int, int]:
        return self.client.sent, self.client.recorded, self.client.late


def bench_service(batch_size: int, workers: int, completions: int) -> dict[str, Any]:
    service = start_curriculum_service(bench_config())
    try:
        actors = [BenchWorker.remote(service, batch_size) for _ in range(workers)]
        ray.get([actor.warm_up.remote(min(completions // 10, 500)) for actor in actors])
        results = ray.get([actor.run.remote(completions) for actor in actors])
        counts = ray.get([actor.counts.remote() for actor in actors])
        observer = CurriculumClient(service)
        stats = observer.stats()
        observer.close()
    finally:
        stop_curriculum_service(service)
    sent = sum(c[0] for c in counts)
    if (stats["total_completions"], stats["late_completions"]) != (sum(c[1] for c in counts), sum(c[2] for c in counts)):
        raise AssertionError(f"service counts {stats['total_completions']}/{stats['late_completions']} disagree "
                             f"with the clients' {counts}")
    wall = max(r[1] for r in results) - min(r[0] for r in results)
    return {"batch_size": batch_size, "workers": workers, "completions": workers * completions, "sent": sent,
            "per_second": workers * completions / wall,
            "worker_us": sum(r[2] for r in results) / len(results) / completions * 1e6,
            "worker_cpu_us": sum(r[3] for r in results) / len(results) / completions * 1e6}


def _shared_writer(curriculum: Curriculum, completions: int, seed: int, out: Any) -> None:
    curriculum.reseed(seed)
    out.put(run_loop(curriculum, completions, offset=seed * completions))


def bench_shared(processes: int, completions: int) -> dict[str, Any]:
    curriculum = Curriculum(bench_config(), shared_memory=True)
    try:
        context = multiprocessing.get_context("fork")
        out = context.Queue()
        children = [context.Process(target=_shared_writer, args=(curriculum, completions, i + 1, out))
                    for i in range(processes)]
        started = time.perf_counter()
        for child in children:
            child.start()
        seconds = [out.get(timeout=600) for _ in children]
        for child in children:
            child.join()
        wall = time.perf_counter() - started
    finally:
        curriculum.close()
    return {"processes": processes, "per_second": processes * completions / wall,
            "worker_us": sum(seconds) / len(seconds) / completions * 1e6}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer completions per cell")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    scale = 0.25 if args.quick else 1.0

    local = Curriculum(bench_config())
    run_loop(local, 2000)
    local_n = int(100_000 * scale)
    local_seconds = run_loop(local, local_n, offset=10_000)
    local.close()
    local_row = {"per_second": local_n / local_seconds, "worker_us": local_seconds / local_n * 1e6}
    shared_rows = [bench_shared(p, int(40_000 * scale)) for p in WORKERS]

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    rows = []
    try:
        for batch_size in BATCH_SIZES:
            completions = int((2_000 if batch_size == 1 else 20_000) * scale)
            for workers in WORKERS:
                row = bench_service(batch_size, workers, completions)
                rows.append(row)
                print(f"batch {batch_size:>3}, {workers} worker(s): {row['per_second']:>9,.0f} completions/s, "
                      f"{row['worker_cpu_us']:7.1f} µs CPU and {row['worker_us']:7.1f} µs wall per completion "
                      "on a worker", flush=True)
    finally:
        ray.shutdown()

    print()
    print("| completions/s | 1 worker | 2 workers | 4 workers | worker CPU µs per completion (1 / 2 / 4) "
          "| worker wall µs per completion (1 / 2 / 4) |")
    print("|---|---:|---:|---:|---|---|")
    for batch_size in BATCH_SIZES:
        cells = [r for r in rows if r["batch_size"] == batch_size]
        print(f"| service, client batch {batch_size} | " + " | ".join(f"{r['per_second']:,.0f}" for r in cells)
              + " | " + " / ".join(f"{r['worker_cpu_us']:.1f}" for r in cells) + " | "
              + " / ".join(f"{r['worker_us']:.1f}" for r in cells) + " |")
    print(f"| local `Curriculum` (one process) | {local_row['per_second']:,.0f} | | | | {local_row['worker_us']:.1f} |")
    print("| `Curriculum(shared_memory=True)` (1 / 2 / 4 processes) | "
          + " | ".join(f"{r['per_second']:,.0f}" for r in shared_rows) + " | | "
          + " / ".join(f"{r['worker_us']:.1f}" for r in shared_rows) + " |")
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}, ray {ray.__version__}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"service": rows, "local": local_row, "shared": shared_rows, "load_average": load,
                       "ray": ray.__version__, "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
                      handle, indent=1)


if __name__ == "__main__":
    main()
