"""harness.experiments: the statistical setups' runs, on seeds that once went wrong."""

from __future__ import annotations

import pytest

from curriculum import Curriculum
from harness.experiments import dependency_chain
from harness.thresholds import DEPENDENCY_CHAIN

#: Seeds of the dependency chain whose pool's first fill missed one chain task; the pool then
#: settled with every task kept, and the chain was never mastered within its episode budget.
POOL_MISSED_A_TASK = (667, 1198, 1546, 1900)


@pytest.mark.parametrize("seed", POOL_MISSED_A_TASK)
def test_the_chain_is_mastered_when_the_first_pool_misses_one_of_its_tasks(seed: int) -> None:
    run = dependency_chain(Curriculum, seed=seed)
    assert run.episodes < DEPENDENCY_CHAIN.max_episodes, (
        f"the chain was not mastered within {DEPENDENCY_CHAIN.max_episodes} episodes, seed {seed}")
    assert run.ratio < 1.0, f"the chain took {run.ratio:.2f}x uniform practice's episodes, seed {seed}"
