"""Forgetting student: a mastered task that decays is revisited.

The student masters every task under the curriculum, then spends a while on the other tasks
outside it (as when training shifts elsewhere), so one mastered task decays. Learning
progress is bidirectional: the decline itself is progress to win back, and the curriculum must
send the student back to that task soon, not wait for exploration to stumble on it. The check
judges the revisit share's mean over `FORGETTING.seeds` seeds (`harness.experiments`).
"""

from __future__ import annotations

import pytest

from harness.thresholds import FORGETTING

pytestmark = pytest.mark.xdist_group("forgetting")  # the tests share the setup's runs (`--dist loadgroup`)


def test_every_task_is_mastered_before_the_decay(setup_runs) -> None:
    seeds, runs = setup_runs("forgetting")
    unmastered = [f"seed {seed} ({run.learning_episodes} episodes)" for seed, run in zip(seeds, runs)
                  if not run.mastered]
    assert not unmastered, (
        f"the {FORGETTING.num_tasks} independent tasks were not all mastered within "
        f"{FORGETTING.max_learning_episodes} episodes in {len(unmastered)} of {len(seeds)} runs: "
        + ", ".join(unmastered)
    )


def test_forgotten_task_is_revisited(judge) -> None:
    judge("forgotten_task_share")
