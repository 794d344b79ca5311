"""Checkpoint/resume determinism: stop, save, restore, continue == the uninterrupted run.

Bug class: a checkpoint that drops the sampler's random state, pending draws or per-task
statistics, so a resumed run quietly diverges from what training would have done.
"""

from __future__ import annotations

import json
from typing import Any

from curriculum import CurriculumConfig, CurriculumConfigError, LearningProgressConfig
from harness.protocol import missing_capabilities
from harness.task_spaces import impossible_task_space
from harness.thresholds import CHECKPOINT as LIMITS
from harness.thresholds import STAGED

from .test_staged_progression import staged_config, staged_space


def _play(curriculum, simulator, episodes: int) -> list[tuple[int, float]]:
    trace = []
    for _ in range(episodes):
        task = curriculum.get_task()
        reward = simulator.sample_task(task.env_cfg["task_index"])
        curriculum.update_task_performance(task.task_id, reward)
        trace.append((task.task_id, reward))
    return trace


def _resume_check(curriculum_factory, require_capability, scenario_seed, oracle, make_space, config,
                  what: str) -> tuple[Any, Any, list[tuple[int, float]]]:
    """Run `make_space()` uninterrupted and again through a checkpoint (JSON) halfway; the
    first divergence is named. Returns the two final curricula and the resumed half's trace."""
    space_a = make_space()
    try:
        original = curriculum_factory(config(space_a))
    except (CurriculumConfigError, NotImplementedError) as error:
        require_capability(False, f"{what}: the factory refused the config: {type(error).__name__}: {error}")
    lacking = missing_capabilities(original, ("get_state", "load_state"))
    require_capability(not lacking, f"checkpoint/resume needs {lacking}")
    total = LIMITS.episodes_before + LIMITS.episodes_after
    watcher = oracle(context=f"{what}, uninterrupted run")
    uninterrupted = _play(watcher.watch(original), space_a.simulator, total)
    watcher.verify()

    space_b = make_space()
    first = curriculum_factory(config(space_b))
    before = _play(first, space_b.simulator, LIMITS.episodes_before)
    saved = json.loads(json.dumps(first.get_state()))  # a checkpoint goes through a file
    resumed = curriculum_factory(config(space_b))
    resumed.load_state(saved)
    after = _play(resumed, space_b.simulator, LIMITS.episodes_after)

    diverged = next((i for i, (a, b) in enumerate(zip(uninterrupted, before + after)) if a != b), None)
    assert diverged is None, (
        f"{what}: resumed run diverged from the uninterrupted one at episode {diverged} "
        f"({LIMITS.episodes_before} before the checkpoint): task {(before + after)[diverged][0]} instead of "
        f"{uninterrupted[diverged][0]}, seed {scenario_seed}"
    )
    return original, resumed, after


def test_resumed_run_matches_uninterrupted_run(curriculum_factory, require_capability, scenario_seed, golden,
                                               oracle) -> None:
    def config(space):
        return CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                                num_active_tasks=32, seed=scenario_seed)

    original, resumed, after = _resume_check(
        curriculum_factory, require_capability, scenario_seed, oracle,
        lambda: impossible_task_space(num_learnable=5, num_impossible=5, seed=scenario_seed), config,
        "learning progress")
    final_original, final_resumed = original.stats(), resumed.stats()
    lp_resumed, lp_original = final_resumed.get("per_label_lp_scores"), final_original.get("per_label_lp_scores")
    assert lp_resumed == lp_original, (
        f"per-label LP after resuming {lp_resumed} differs from the uninterrupted run {lp_original}, "
        f"seed {scenario_seed}"
    )
    golden({"episodes": LIMITS.episodes_before + LIMITS.episodes_after, "final_per_label_lp_scores": lp_resumed,
            "last_task_ids": [task_id for task_id, _ in after[-10:]]})


_STAGE_KEYS = ("stage", "stage_changes", "stage_episodes", "advancements", "regressions", "stage_window_mean")


def test_resumed_staged_run_matches_uninterrupted_run(curriculum_factory, require_capability,
                                                      scenario_seed, oracle) -> None:
    """Staged progression on a forgetting chain (advances and falls back): a checkpoint taken
    mid-stage must carry the stage, its episode count and its score window."""
    original, resumed, _ = _resume_check(
        curriculum_factory, require_capability, scenario_seed, oracle, lambda: staged_space(scenario_seed),
        lambda space: staged_config(scenario_seed, STAGED.previous_stage_mix), "staged progression")
    final_original, final_resumed = original.stats(), resumed.stats()
    differ = {key: (final_original.get(key), final_resumed.get(key)) for key in _STAGE_KEYS
              if final_original.get(key) != final_resumed.get(key)}
    assert not differ, (f"staged progression: stage numbers after resuming differ from the uninterrupted run "
                        f"(uninterrupted, resumed): {differ}, seed {scenario_seed}")
