"""Shared builders and worker-process entry points of the curriculum core tests.

Imported as `helpers` (pytest puts this folder on `sys.path`; spawned children inherit it).
Process entry points live here, not in test modules, so every start method can import them.
"""

from __future__ import annotations

import os
import pickle
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from curriculum import (
    BucketedTaskGenerator,
    Curriculum,
    CurriculumConfig,
    LearningProgressConfig,
    SingleTaskGenerator,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
    ValueRange,
    WeightedTaskSetGenerator,
)
from curriculum.memory import SharedMemoryBackend

__all__ = [
    "exact",
    "grid_generator",
    "mixed_generator",
    "lp_config",
    "uniform_config",
    "staged_config",
    "student_score",
    "drive",
    "generate_in_child",
    "attach_and_write",
    "hold_lock",
    "hammer",
    "update_from_copy",
]


def exact(message: str) -> str:
    """A `pytest.raises(match=...)` pattern that pins the whole message."""
    return f"^{re.escape(message)}$"


# ---- generators and configs ------------------------------------------------------------------
def grid_generator(*, seed: int = 0, label: str = "grid") -> BucketedTaskGenerator:
    """Tasks that differ per id: a value list, an int range and a float range."""
    return BucketedTaskGenerator(
        {"game": {"name": "maze"}, "level": 0},
        {"game.size": [5, 7, 9, 11], "level": ValueRange(1, 20), "game.noise": ValueRange(0.0, 0.5)},
        label=label,
        seed=seed,
    )


def mixed_generator(*, seed: int = 3) -> WeightedTaskSetGenerator:
    """A weighted set of a bucketed child and two single tasks, three labels."""
    return WeightedTaskSetGenerator(
        [
            (grid_generator(seed=seed), 2.0),
            (SingleTaskGenerator({"game": {"name": "easy"}}, label="easy"), 1.0),
            (SingleTaskGenerator({"game": {"name": "hard"}}, label="hard"), 1.0),
        ],
        seed=seed,
    )


def lp_config(n: int = 8, **overrides: Any) -> CurriculumConfig:
    """Learning progress over `mixed_generator`, with eviction that triggers in short runs."""
    fields: dict[str, Any] = {
        "task_generator": mixed_generator(),
        "algorithm": LearningProgressConfig(min_samples_for_lp=3),
        "num_active_tasks": n,
        "seed": 11,
        "min_presentations": 4,
        "eviction_percentile": 50.0,
        "refresh_interval": 5,
    }
    fields.update(overrides)
    return CurriculumConfig(**fields)


def uniform_config(n: int = 8, **overrides: Any) -> CurriculumConfig:
    fields: dict[str, Any] = {"task_generator": grid_generator(), "algorithm": UniformConfig(), "num_active_tasks": n,
                              "seed": 5, "refresh_interval": 7}
    fields.update(overrides)
    return CurriculumConfig(**fields)


def staged_config(n: int = 6, *, stages: int = 3, **algorithm: Any) -> CurriculumConfig:
    """Stages named s0, s1, ... whose tasks carry their stage name as label and `stage` key."""
    fields: dict[str, Any] = {"advancement_threshold": 0.8, "min_episodes": 10, "window": 10}
    fields.update(algorithm)
    stage_list = [Stage(f"s{i}", SingleTaskGenerator({"stage": i}, label=f"s{i}")) for i in range(stages)]
    return CurriculumConfig(algorithm=StagedProgressionConfig(stages=stage_list, **fields), num_active_tasks=n,
                            seed=2, refresh_interval=4)


# ---- driving a curriculum --------------------------------------------------------------------
def student_score(task_id: int, env_cfg: dict[str, Any], step: int) -> float:
    """A deterministic stand-in student: per-task skill that grows with time, plus hashed noise."""
    base = (task_id * 0.6180339887) % 1.0
    noise = ((task_id * 7919 + step * 104729) % 1000) / 1000.0 - 0.5
    return float(np.clip(0.2 * base + step / 400.0 + 0.2 * noise, 0.0, 1.0))


def drive(
    curriculum: Curriculum,
    steps: int,
    *,
    start: int = 0,
    in_flight: list[int] | None = None,
    lag: int = 3,
    stats: bool = False,
    score: Callable[[int, dict[str, Any], int], float] = student_score,
) -> list[Any]:
    """Run `steps` episodes; each completes `lag` episodes after it started (so tasks get
    evicted while running, and completions arrive late). Returns one record per step:
    (task_id, env_cfg, completed_id, accepted[, stats]). `in_flight` carries the running
    episodes across calls (and into a restored curriculum)."""
    running = in_flight if in_flight is not None else []
    cfgs: dict[int, dict[str, Any]] = {}
    records: list[Any] = []
    for step in range(start, start + steps):
        task = curriculum.get_task()
        cfgs[task.task_id] = dict(task.env_cfg)
        running.append(task.task_id)
        done_id = running.pop(0) if len(running) > lag else None
        accepted = None
        if done_id is not None:
            accepted = curriculum.update_task_performance(done_id, score(done_id, cfgs.get(done_id, {}), step))
        record = (task.task_id, dict(task.env_cfg), task.label, done_id, accepted)
        records.append(record + (curriculum.stats(),) if stats else record)
    return records


# ---- process entry points --------------------------------------------------------------------
def generate_in_child(factory_name: str, ids: Sequence[int], queue: Any) -> None:
    """Build a generator from scratch in this process and report the tasks of `ids`."""
    factory = {"grid": grid_generator, "mixed": mixed_generator}[factory_name]
    generator = factory()
    queue.put([generator.generate(i) for i in ids])


def attach_and_write(name: str, queue: Any) -> None:
    """Attach to a shared backend by name, report what it holds, then write to it."""
    backend = SharedMemoryBackend.attach(name)
    queue.put({"layout": dict(backend.layout), "values": backend["values"].tolist(),
               "scores": backend["scores"].tolist(), "owner": backend.is_owner})
    with backend.lock:
        backend["values"][:] += 100
        backend["scores"][0] = 0.25
    queue.put("written")
    backend.close()


def hold_lock(name: str, held: Any, *, write: float | None = None) -> None:
    """Take the lock of a shared backend (optionally write first), say so, and keep it until killed."""
    backend = SharedMemoryBackend.attach(name)
    backend.lock.acquire()
    if write is not None:
        backend["scores"][:] = write
        backend["values"][0] = os.getpid()
    held.set()
    time.sleep(60)


def relay_lock(name: str, started: Any, *, seconds: float, hold: float) -> None:
    """Take the lock of a shared backend again and again for `seconds`, each time for `hold`
    seconds and again at once after releasing it (a writer that keeps winning the race)."""
    backend = SharedMemoryBackend.attach(name)
    end = time.monotonic() + seconds
    backend.lock.acquire()
    started.set()
    while time.monotonic() < end:
        time.sleep(hold)
        backend.lock.release()
        backend.lock.acquire()
    backend.lock.release()
    backend.close()


def hammer(curriculum: Curriculum, pairs: int, seed: int, lag: int, queue: Any) -> None:
    """`pairs` get/update pairs on a (shared) curriculum; reports what the worker saw.

    A worker keeps `lag` episodes running, so some complete after their task was evicted.
    """
    curriculum.reseed(seed)
    rng = np.random.default_rng(seed)
    accepted = rejected = 0
    per_task: Counter[int] = Counter()
    running: list[int] = []
    for _ in range(pairs):
        running.append(curriculum.get_task().task_id)
        if len(running) > lag:
            task_id = running.pop(int(rng.integers(len(running))))
            if curriculum.update_task_performance(task_id, float(rng.random())):
                accepted += 1
                per_task[task_id] += 1
            else:
                rejected += 1
    for task_id in running:
        if curriculum.update_task_performance(task_id, float(rng.random())):
            accepted += 1
            per_task[task_id] += 1
        else:
            rejected += 1
    queue.put({"accepted": accepted, "rejected": rejected, "per_task": dict(per_task), "pid": os.getpid()})


def update_from_copy(payload: bytes, queue: Any) -> None:
    """Unpickle a curriculum in this process and try to record one completion with it."""
    curriculum = pickle.loads(payload)
    task = curriculum.get_task()
    try:
        curriculum.update_task_performance(task.task_id, 0.5)
    except Exception as exc:  # reported to the parent, which asserts on the type and message
        queue.put((type(exc).__name__, str(exc), os.getpid()))
    else:
        queue.put(("no error", "", os.getpid()))


class CountingDraws(Curriculum):
    """A curriculum that reports, in `stats()['draws']`, how many tasks it has handed out."""

    def __init__(self, config: CurriculumConfig) -> None:
        super().__init__(config)
        self.draws = 0

    def get_task(self) -> Any:
        self.draws += 1
        return super().get_task()

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "draws": self.draws}
