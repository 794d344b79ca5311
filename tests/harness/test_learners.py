"""The learner driver's bookkeeping (run settings, shares, the comparison) and one short run."""

from __future__ import annotations

import re

import numpy as np
import pytest

from curriculum import LearningProgressConfig, StagedProgressionConfig, UniformConfig
from harness.learner_envs import corridor_family
from harness.learners import LearnerRun, LearnerRunResult, compare_to_uniform, make_curriculum_config


def _result(labels: list[str], steps: list[int], *, mastered: int | None, total: int) -> LearnerRunResult:
    family = corridor_family()
    return LearnerRunResult(
        run=LearnerRun("corridor"), family=family, episode_steps=np.array(steps), episode_labels=labels,
        episode_scores=np.zeros(len(labels)), reached={}, mastered={}, all_mastered_step=mastered,
        total_steps=total, wall_time=0.0,
    )


def test_shares_count_episodes_ended_inside_the_window() -> None:
    labels = ["corridor_1", "corridor_3_locked", "corridor_2", "corridor_6_noisy", "corridor_1"]
    result = _result(labels, [10, 20, 30, 40, 50], mastered=30, total=50)
    assert result.unlearnable_share() == pytest.approx(2 / 5)
    assert result.unlearnable_share(end=30) == pytest.approx(1 / 3)  # episodes ended at steps <= 30
    assert result.unlearnable_share(start=30) == pytest.approx(1 / 2)  # episodes ended after step 30
    assert result.share(("noisy",), start=30) == pytest.approx(1 / 2)
    assert np.isnan(result.unlearnable_share(start=50))
    assert result.share_by_label(end=20)["corridor_3_locked"] == pytest.approx(1 / 2)


def test_comparison_with_uniform_uses_the_budget_for_a_run_that_never_mastered() -> None:
    run = _result(["corridor_1", "corridor_3_locked", "corridor_1", "corridor_1"], [10, 20, 30, 40],
                  mastered=20, total=40)
    uniform = _result(["corridor_1", "corridor_3_locked"], [50, 100], mastered=None, total=100)
    comparison = compare_to_uniform(run, uniform)
    assert comparison.steps_ratio == pytest.approx(20 / 100)
    assert comparison.unlearnable_share == pytest.approx(1 / 2)
    assert comparison.unlearnable_share_ratio == pytest.approx(1.0)
    assert comparison.after_mastery_share_ratio == 0.0
    never = compare_to_uniform(_result(["corridor_1"], [10], mastered=None, total=40), uniform)
    assert never.steps_ratio == pytest.approx(0.4) and np.isnan(never.after_mastery_share)


def test_curriculum_configs_by_name() -> None:
    family = corridor_family()
    configs = {name: make_curriculum_config(family, name, seed=3, num_active_tasks=20)
               for name in ("learning_progress", "uniform", "staged_progression")}
    assert isinstance(configs["learning_progress"].algorithm, LearningProgressConfig)
    assert isinstance(configs["uniform"].algorithm, UniformConfig)
    staged = configs["staged_progression"].algorithm
    assert isinstance(staged, StagedProgressionConfig)
    assert [s.name for s in staged.stages] == [v.label for v in family.learnable]
    assert all(c.seed == 3 and c.num_active_tasks == 20 for c in configs.values())
    message = ("Expected `curriculum` to be one of ('learning_progress', 'uniform', 'staged_progression'), "
               "received 'random'")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        make_curriculum_config(family, "random", seed=0, num_active_tasks=20)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"family": "maze"}, "Expected `family` to be one of ('corridor', 'crafting'), received 'maze'"),
        ({"vec_env": "ray"}, "Expected `vec_env` to be one of ('dummy', 'subproc'), received 'ray'"),
        ({"max_steps": 0}, "Expected `max_steps` to be a positive integer, received 0"),
        ({"num_active_tasks": 2.5}, "Expected `num_active_tasks` to be a positive integer, received 2.5"),
        ({"post_mastery_steps": -1}, "Expected `post_mastery_steps` to be a non-negative integer, received -1"),
    ],
)
def test_run_settings_are_checked(kwargs, message) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        LearnerRun(**{"family": "corridor", **kwargs})


def test_a_training_run_leaves_nothing_in_the_temp_dir(tmp_path, monkeypatch) -> None:
    """SB3's default logger makes a directory in the temp dir per model; runs must not."""
    pytest.importorskip("stable_baselines3", reason="needs the [learners] extra")
    import tempfile

    from harness.learners import run_learner

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    result = run_learner(LearnerRun("corridor", "uniform", max_steps=256, post_mastery_steps=0, eval_every=256))
    assert len(result.episode_labels) > 0
    assert sorted(p.name for p in tmp_path.glob("SB3-*")) == []
