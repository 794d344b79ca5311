"""After mastery: nothing left to learn is no reason to drift back to impossible tasks.

Bug classes: once every learnable task is mastered all learning progress is ~0, and a
curriculum that then falls back to uniform sampling sends the student back to impossible
tasks (a PPO run went back to 23-40% of its samples on them); and, on the way there, a
learnable task that progresses too slowly to show learning progress yet is evicted as
stagnant and never admitted again, so it is never mastered. 5 learnable + 5
constant-plus-noise impossible tasks, pool 32: the student plays until every learnable task
is mastered (capped), then `AFTER_MASTERY.window` more episodes. Both checks judge the mean
over `AFTER_MASTERY.seeds` seeds (`harness.experiments`).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("after_mastery")  # the tests share the setup's runs (`--dist loadgroup`)


def test_every_learnable_task_is_mastered(judge) -> None:
    judge("after_mastery_mastered_share")


def test_impossible_tasks_stay_out_after_mastery(judge) -> None:
    judge("after_mastery_impossible_share")
