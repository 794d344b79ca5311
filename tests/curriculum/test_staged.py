"""Staged progression: advance once per threshold crossing after min_episodes, regress below
the regression threshold, mix in the previous stage, and never let stale episodes count."""

from __future__ import annotations

import math
from collections import Counter, deque

import pytest
from helpers import staged_config
from hypothesis import given, settings
from hypothesis import strategies as st

from curriculum import Curriculum


def _complete(curriculum: Curriculum, score: float, count: int) -> list[bool]:
    results = []
    for _ in range(count):
        results.append(curriculum.update_task_performance(curriculum.get_task().task_id, score))
    return results


def _labels(curriculum: Curriculum) -> Counter[str]:
    return Counter(task.label for task in curriculum.active_tasks())


def test_advances_exactly_at_min_episodes_and_once_per_crossing() -> None:
    curriculum = Curriculum(staged_config(min_episodes=10, window=5))
    assert curriculum.stage == 0 and _labels(curriculum) == {"s0": 6}
    _complete(curriculum, 1.0, 9)
    assert curriculum.stage == 0  # the window passed long ago, but only 9 episodes ran
    _complete(curriculum, 1.0, 1)
    stats = curriculum.stats()
    assert (curriculum.stage, stats["stage_name"], stats["advancements"], stats["stage_changes"]) == (1, "s1", 1, 1)
    assert stats["stage_episodes"] == 0 and stats["stage_window_mean"] == 0.0  # the new stage starts afresh
    _complete(curriculum, 1.0, 9)
    assert curriculum.stage == 1 and curriculum.stats()["advancements"] == 1  # no second advance in 9 episodes
    _complete(curriculum, 1.0, 1)
    assert curriculum.stage == 2
    _complete(curriculum, 1.0, 50)
    stats = curriculum.stats()
    assert (curriculum.stage, stats["advancements"], stats["regressions"]) == (2, 2, 0)  # the last stage stays


def test_the_window_mean_decides_and_a_mean_below_the_threshold_never_advances() -> None:
    curriculum = Curriculum(staged_config(min_episodes=10, window=10, advancement_threshold=0.8))
    _complete(curriculum, 0.79, 100)
    assert curriculum.stage == 0
    assert curriculum.stats()["stage_window_mean"] == pytest.approx(0.79)
    _complete(curriculum, 0.0, 10)  # the window now holds ten zeros
    for ones in range(1, 9):
        _complete(curriculum, 1.0, 1)
        assert curriculum.stage == (1 if ones == 8 else 0), ones  # 8 of the last 10 at 1.0: mean 0.8


def test_a_window_brought_to_the_threshold_by_scores_that_left_it_advances() -> None:
    # a running sum keeps the rounding of 0.739 after it left the window: 1 + 0 summed to
    # 0.99999999999999989, a mean just under 0.5
    curriculum = Curriculum(staged_config(min_episodes=4, window=2, advancement_threshold=0.5, stages=2))
    _complete(curriculum, 0.739, 1)
    _complete(curriculum, 1.0, 1)
    _complete(curriculum, 0.0, 1)
    assert curriculum.stage == 0  # three episodes, min_episodes is 4
    _complete(curriculum, 1.0, 1)
    assert curriculum.stage == 1, curriculum.stats()  # the window holds 0.0 and 1.0: mean 0.5


# exactly summable scores (0, 1, quarters) and ones that round (decimals): a running sum
# mixes their rounding into later windows
_SCORES = st.sampled_from([0.0, 1.0, 0.0, 1.0, 0.25, 0.5, 0.75, 0.1, 0.2, 0.3, 0.7, 0.739, 0.261])


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(scores=st.lists(_SCORES, min_size=1, max_size=40), window=st.integers(1, 4), min_episodes=st.integers(1, 6),
       thresholds=st.sampled_from([(0.5, 0.25), (0.3, 0.1), (0.6, None), (0.75, 0.5)]))
def test_the_stage_moves_on_the_window_scores_alone(scores: list[float], window: int, min_episodes: int,
                                                    thresholds: tuple[float, float | None]) -> None:
    """Replayed on the correctly rounded mean of each window (`math.fsum`): the stage after every
    completion is the rule's, whatever scores came and left before."""
    advance, regress = thresholds
    curriculum = Curriculum(staged_config(n=1, stages=3, min_episodes=min_episodes, window=window,
                                          advancement_threshold=advance, regression_threshold=regress))
    stage, episodes, recent = 0, 0, deque(maxlen=window)
    for i, score in enumerate(scores):
        _complete(curriculum, score, 1)
        episodes += 1
        recent.append(score)
        if episodes >= min_episodes:
            mean = math.fsum(recent) / len(recent)
            moved = +1 if stage < 2 and mean >= advance else -1 if regress is not None and stage > 0 and mean < regress \
                else 0
            if moved:
                stage, episodes = stage + moved, 0
                recent.clear()
        assert curriculum.stage == stage, f"after completion {i} of {scores[:i + 1]}"


def test_regresses_when_the_window_mean_falls_below_the_regression_threshold() -> None:
    curriculum = Curriculum(staged_config(min_episodes=10, window=10, regression_threshold=0.3))
    _complete(curriculum, 1.0, 10)
    assert curriculum.stage == 1
    _complete(curriculum, 0.5, 30)  # between the thresholds: stays
    assert curriculum.stage == 1
    _complete(curriculum, 0.0, 4)  # mean 0.3 is not below 0.3
    assert curriculum.stage == 1
    _complete(curriculum, 0.0, 1)
    stats = curriculum.stats()
    assert (curriculum.stage, stats["regressions"], stats["advancements"], stats["stage_changes"]) == (0, 1, 1, 2)
    assert _labels(curriculum) == {"s0": 6}
    _complete(curriculum, 0.0, 20)
    assert curriculum.stage == 0  # stage 0 has nowhere to fall back to


@pytest.mark.parametrize(("pool", "mix", "previous"), [(10, 0.3, 3), (10, 0.25, 2), (4, 0.5, 2), (2, 0.75, 1),
                                                       (1, 0.9, 0)])
def test_previous_stage_mix_gives_its_share_of_slots_to_the_previous_stage(pool: int, mix: float,
                                                                         previous: int) -> None:
    curriculum = Curriculum(staged_config(n=pool, min_episodes=5, window=5, previous_stage_mix=mix))
    assert _labels(curriculum) == {"s0": pool}  # stage 0 has no previous stage
    _complete(curriculum, 1.0, 5)
    assert curriculum.stage == 1
    assert _labels(curriculum) == {label: count for label, count in (("s0", previous), ("s1", pool - previous))
                                   if count}
    # only completions of current-stage tasks count towards the stage, so it can advance again
    results = [curriculum.update_task_performance(t.task_id, 1.0) for t in curriculum.active_tasks()
               if t.label == "s0"]
    assert all(results) and curriculum.stats()["stage_episodes"] == 0
    for _ in range(100):
        if curriculum.stage == 2:
            break
        _complete(curriculum, 1.0, 1)
    assert curriculum.stage == 2
    assert _labels(curriculum) == {label: count for label, count in (("s1", previous), ("s2", pool - previous))
                                   if count}


def test_tasks_handed_out_after_a_stage_change_belong_to_the_new_stage() -> None:
    curriculum = Curriculum(staged_config(min_episodes=5, window=5))
    labels = []
    for _ in range(40):
        task = curriculum.get_task()
        labels.append((curriculum.stage, task.label, task.env_cfg["stage"]))
        curriculum.update_task_performance(task.task_id, 1.0)
    assert all(label == f"s{stage}" and cfg_stage == stage for stage, label, cfg_stage in labels)
    assert {stage for stage, _, _ in labels} == {0, 1, 2}


def test_completions_of_tasks_from_before_a_stage_change_are_late_and_do_not_count() -> None:
    curriculum = Curriculum(staged_config(min_episodes=5, window=5))
    running = [curriculum.get_task() for _ in range(4)]  # episodes still going on at the change
    _complete(curriculum, 1.0, 5)
    assert curriculum.stage == 1
    before = curriculum.stats()
    assert [curriculum.update_task_performance(t.task_id, 0.0) for t in running] == [False] * 4
    after = curriculum.stats()
    assert after["late_completions"] == before["late_completions"] + 4
    assert after["total_completions"] == before["total_completions"]
    assert (after["stage_episodes"], after["stage_window_mean"]) == (0, 0.0)
    _complete(curriculum, 1.0, 5)
    assert curriculum.stage == 2  # the stale zeros did not hold the stage back


def test_a_stage_change_reaches_every_handle_of_a_shared_curriculum() -> None:
    config = staged_config(min_episodes=5, window=5)
    with Curriculum(config, shared_memory=True) as owner:
        worker = Curriculum.attach(owner.shared_memory_name, config, seed=1)
        _complete(worker, 1.0, 5)
        assert owner.stage == worker.stage == 1
        assert {owner.get_task().label for _ in range(20)} == {"s1"}
        worker.close()
