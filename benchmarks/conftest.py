"""Shared helpers of the speed benchmarks (run with `make bench`, never part of `make test`)."""

from __future__ import annotations

import pytest

from curriculum import Curriculum, CurriculumConfig, LearningProgressConfig, SingleTaskGenerator, UniformConfig

POOL_SIZES = (64, 1_000, 10_000, 100_000)
PAIRS_PER_ROUND = 20_000


def make_curriculum(pool: int, algorithm: str = "learning_progress") -> Curriculum:
    """A curriculum of `pool` single-config tasks with the named algorithm."""
    algo = LearningProgressConfig() if algorithm == "learning_progress" else UniformConfig()
    config = CurriculumConfig(
        task_generator=SingleTaskGenerator({"level": 1}, label="bench"), algorithm=algo, num_active_tasks=pool
    )
    return Curriculum(config)


class NoOpCurriculum:
    """Same call shape as a curriculum, no work: the benchmark loop's own cost (the baseline)."""

    class _Task:
        task_id = 0

    _task = _Task()

    def get_task(self) -> _Task:
        return self._task

    def update_task_performance(self, task_id: int, score: float) -> bool:
        return True

    def close(self) -> None:
        pass


def run_pairs(curriculum: object, scores: list[float]) -> None:
    """One get_task() + update_task_performance() pair per score."""
    get, update = curriculum.get_task, curriculum.update_task_performance
    for score in scores:
        update(get().task_id, score)


@pytest.fixture(scope="session")
def figures() -> dict[str, float]:
    """Figures collected across benchmarks, printed at the end of the session."""
    collected: dict[str, float] = {}
    yield collected
    if collected:
        print("\nbenchmark figures:")
        for key, value in collected.items():
            print(f"  {key}: {value:.4g}")
