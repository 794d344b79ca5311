"""Workloads, process entry points and invariant checks of the shared-memory fault tests.

Imported as `shm_faults` (pytest puts this folder on `sys.path`; forked children inherit it).
Scores are dyadic and depend only on the task (`task_score`), so every sum of them is exact in
floating point: the tracker's state after any set of completions is known to the last bit,
and a torn read or a half-applied update shows up as a value that cannot occur.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import curriculum as curriculum_package
from curriculum.algorithms.learning_progress import STATE_FIELDS
from curriculum import (
    Curriculum,
    CurriculumConfig,
    LearningProgressConfig,
    SingleTaskGenerator,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
)

__all__ = [
    "task_score",
    "lp_config",
    "uniform_config",
    "staged_config",
    "invariant_violations",
    "same_arrays",
    "die_at_instruction",
    "count_instructions",
    "writer",
    "random_writer",
    "wait_for_updates",
]

_CURRICULUM_DIR = os.path.dirname(curriculum_package.__file__)


def task_score(task_id: int) -> float:
    """The score every episode of `task_id` gets: k/16, exact in any sum."""
    return ((task_id * 37 + 5) % 16) / 16


LP_WARMUP = 2


def lp_config(n: int = 16, **overrides: Any) -> CurriculumConfig:
    """Learning progress with aggressive eviction: evictions race running episodes."""
    fields: dict[str, Any] = {
        "task_generator": SingleTaskGenerator({"level": 1}, label="faults"),
        # one statistics row per task (no configuration memory, the next id admitted): the
        # invariants check each slot against its own task
        "algorithm": LearningProgressConfig(min_samples_for_lp=LP_WARMUP, config_memory=0, admission_candidates=1),
        "num_active_tasks": n,
        "seed": 3,
        "min_presentations": 3,
        "eviction_percentile": 50.0,
        "refresh_interval": 4,
    }
    fields.update(overrides)
    return CurriculumConfig(**fields)


def uniform_config(n: int = 16) -> CurriculumConfig:
    """No eviction: every completion stays in its slot, so sum(completions) == total_completions."""
    return CurriculumConfig(task_generator=SingleTaskGenerator({"level": 1}, label="faults"),
                            algorithm=UniformConfig(), num_active_tasks=n, seed=4, refresh_interval=8)


def staged_config(n: int = 8) -> CurriculumConfig:
    """Three stages that advance after 4 episodes at a mean >= 0.5: pool refills come often."""
    stages = [Stage(f"s{i}", SingleTaskGenerator({"stage": i}, label=f"s{i}")) for i in range(3)]
    return CurriculumConfig(algorithm=StagedProgressionConfig(stages=stages, advancement_threshold=0.5,
                                                              min_episodes=4, window=4),
                            num_active_tasks=n, seed=5, refresh_interval=4)


def invariant_violations(arrays: Mapping[str, np.ndarray], *, evicts: bool, with_lp: bool) -> list[str]:
    """What is wrong with tracker arrays filled by `task_score` completions (empty if nothing).

    Per slot: its task belongs to it; score sum == completions * the task's score, exactly;
    the last score is the task's; learning progress of a constant score is a flat signal.
    Globally: every task created is the initial pool or one eviction (sum of slot generations
    == evictions); without eviction, the slots' completions add up to the total.
    """
    bad: list[str] = []
    ids, completions = arrays["task_ids"], arrays["completions"]
    score_sum, last = arrays["score_sum"], arrays["last_score"]
    total, late, evictions, created = (int(v) for v in arrays["counters"])
    n = ids.size
    if ((ids < 0) | (ids % n != np.arange(n))).any():
        bad.append(f"task ids not in their slots: {ids.tolist()}")
        return bad
    expected = np.array([task_score(t) for t in ids.tolist()])
    if (completions < 0).any():
        bad.append(f"negative completions {completions.tolist()}")
    if not np.array_equal(score_sum, completions * expected):
        bad.append(f"score sums {score_sum.tolist()} != completions {completions.tolist()} x task scores")
    if not np.array_equal(last, np.where(completions > 0, expected, 0.0)):
        bad.append(f"last scores {last.tolist()} are not the tasks' scores")
    generations = int((ids // n).sum())
    if evicts:
        if generations != evictions or created != n + evictions:
            bad.append(f"{created} tasks created, {evictions} evictions, slot generations add up to {generations} "
                       f"(pool {n})")
        if int(completions.sum()) > total:
            bad.append(f"slots hold {int(completions.sum())} completions, more than the total {total}")
    elif int(completions.sum()) != total or generations or evictions:
        bad.append(f"slots hold {int(completions.sum())} completions, total {total}, evictions {evictions}")
    if late < 0:
        bad.append(f"negative late completions {late}")
    if with_lp:
        # a constant score: the raw mean while warming up, then a flat signal over the baseline
        state = arrays["lp_state"].reshape(n, len(STATE_FIELDS))
        fields = dict(zip(STATE_FIELDS, state.T))
        count = fields["count"]
        warm = count >= LP_WARMUP
        baseline = np.where(warm, np.minimum(expected, 0.75), 0.0)
        signal_ = np.where(warm, (expected - baseline) / (1.0 - baseline), np.where(count > 0, expected, 0.0))
        for name, want in (("baseline", baseline), ("fast", signal_), ("slow", signal_), ("peak", signal_),
                           ("var", np.zeros(n))):
            if not np.array_equal(fields[name], want):
                bad.append(f"lp_state[{name}] {fields[name].tolist()} != {want.tolist()} for a constant score per "
                           "task")
    return bad


def same_arrays(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> bool:
    """Bit-identical arrays under the same names."""
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


# ---- instruction-level kills -----------------------------------------------------------------
def _trace_curriculum_code(on_instruction: Callable[[], None],
                           on_call: Callable[[str, str], None] | None = None) -> Callable[..., Any]:
    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            on_instruction()
        elif event == "return" and on_call is not None:
            on_call(frame.f_code.co_name, "return")
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename.startswith(_CURRICULUM_DIR):
            frame.f_trace_opcodes = True
            if on_call is not None:
                on_call(frame.f_code.co_name, "call")
            return local
        return None

    return calls


def count_instructions(operation: Callable[[], Any]) -> tuple[int, list[int]]:
    """How many bytecode instructions of the curriculum package `operation()` runs, and which
    of them run while it holds the shared tracker lock (from `acquire` to `release`)."""
    count = 0
    holding = False
    inside: list[int] = []

    def tick() -> None:
        nonlocal count
        if holding:
            inside.append(count)
        count += 1

    def call(name: str, event: str) -> None:
        nonlocal holding
        if name == "acquire" and event == "call":
            holding = True
        elif name == "release" and event == "return":
            holding = False

    sys.settrace(_trace_curriculum_code(tick, call))
    try:
        operation()
    finally:
        sys.settrace(None)
    return count, inside


def die_at_instruction(operation: Callable[[], Any], instruction: int) -> None:
    """Run `operation()` and SIGKILL this process at its `instruction`-th bytecode instruction
    in the curriculum package (process entry point: a forked child)."""
    count = 0

    def tick() -> None:
        nonlocal count
        count += 1
        if count > instruction:
            os.kill(os.getpid(), signal.SIGKILL)

    sys.settrace(_trace_curriculum_code(tick))
    operation()
    sys.settrace(None)
    os._exit(0)  # the operation finished before the chosen instruction


# ---- writers (forked process entry points) -------------------------------------------------------
# A writer is SIGKILLed at any moment, so it shares nothing with its parent that takes a lock:
# a multiprocessing Event or Queue whose lock a killed writer held would block every other
# process that touches it. Flags and counters are lock-free shared words instead.

def writer(curriculum: Curriculum, index: int, acked: Any, stop: Any, lag: int = 2) -> None:
    """Record `task_score` completions until `stop.value` is set (or killed), `lag` episodes in flight.

    `acked[index]` counts the updates that returned; a kill between an update's commit and
    its count leaves at most one update recorded but not counted.
    """
    curriculum.reseed(1000 + index)
    running: list[int] = []
    rng = np.random.default_rng(index)
    while not stop.value:
        running.append(curriculum.get_task().task_id)
        if len(running) > lag:
            task_id = running.pop(int(rng.integers(len(running))))
            curriculum.update_task_performance(task_id, task_score(task_id))
            acked[index] += 1
    os._exit(0)


def random_writer(curriculum: Curriculum, index: int, acked: Any, stop: Any) -> None:
    """Record uniformly random scores in [0, 1] until `stop.value` is set (no exact totals to check)."""
    curriculum.reseed(2000 + index)
    rng = np.random.default_rng(index)
    scores = rng.random(4096).tolist()
    i = 0
    while not stop.value:
        curriculum.update_task_performance(curriculum.get_task().task_id, scores[i & 4095])
        acked[index] += 1
        i += 1
    os._exit(0)


def wait_for_updates(acked: Any, index: int, timeout: float = 30.0) -> None:
    """Until writer `index` has recorded at least one update (it is running)."""
    deadline = time.monotonic() + timeout
    while acked[index] == 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"writer {index} recorded nothing within {timeout} s")
        time.sleep(0.0005)
