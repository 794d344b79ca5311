"""get_task() + update_task_performance() per pair, against pool size and algorithm.

Target: <= 5 us per pair at 64 tasks and <= 10 us at 10,000 (learning progress), growth flat
in pool size. The baseline is the same loop over a no-op object, run in the same process.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchmarks.conftest import PAIRS_PER_ROUND, POOL_SIZES, NoOpCurriculum, make_curriculum, run_pairs


def _scores(seed: int = 0) -> list[float]:
    return np.random.default_rng(seed).random(PAIRS_PER_ROUND).tolist()


def test_baseline_loop(benchmark, figures) -> None:
    scores = _scores()
    benchmark(run_pairs, NoOpCurriculum(), scores)
    figures["baseline_loop_us_per_pair"] = benchmark.stats.stats.mean / PAIRS_PER_ROUND * 1e6


@pytest.mark.parametrize("algorithm", ["learning_progress", "uniform"])
@pytest.mark.parametrize("pool", POOL_SIZES)
def test_get_update_pair(benchmark, figures, pool: int, algorithm: str) -> None:
    curriculum = make_curriculum(pool, algorithm)
    scores = itertools.cycle([_scores(1)])
    # warm up: every task completed at least once, so scoring runs on warm statistics
    for _ in range(max(1, (2 * pool) // PAIRS_PER_ROUND + 1)):
        run_pairs(curriculum, next(scores))
    benchmark.pedantic(lambda: run_pairs(curriculum, next(scores)), rounds=5, iterations=1, warmup_rounds=1)
    per_pair = benchmark.stats.stats.mean / PAIRS_PER_ROUND * 1e6
    figures[f"{algorithm}_pool{pool}_us_per_pair"] = per_pair
    benchmark.extra_info["us_per_pair"] = per_pair
    curriculum.close()
