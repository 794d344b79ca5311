"""`harness.protocol`: what the checker accepts and refuses, and the scenario gate run against a
curriculum that is not ours (`external_curriculum.py`, Thompson sampling, no learning progress).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from external_curriculum import BanditTask, ExternalCurriculum, make_external_curriculum

from curriculum import (
    BucketedTaskGenerator,
    Curriculum,
    CurriculumConfig,
    LearningProgressConfig,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
)
from harness.protocol import (
    CheckpointableCurriculum,
    CurriculumProtocol,
    CurriculumProtocolError,
    TaskProtocol,
    check_curriculum,
    check_task,
    missing_capabilities,
)

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

GENERATOR = BucketedTaskGenerator({}, {"task_index": [0, 1, 2]}, label="easy")


def _config(algorithm: Any = None, **overrides: Any) -> CurriculumConfig:
    fields = {"task_generator": GENERATOR, "algorithm": algorithm or LearningProgressConfig(), "num_active_tasks": 4}
    fields.update(overrides)
    return CurriculumConfig(**fields)


class TaskDouble:
    """A task with exactly the protocol's attributes."""

    def __init__(self, task_id: Any = 0, env_cfg: Any = None, label: Any = "default") -> None:
        self.task_id = task_id
        self.env_cfg = {"level": 1} if env_cfg is None else env_cfg
        self.label = label


def curriculum_double(**methods: Callable[..., Any] | None) -> Any:
    """A curriculum whose class has the protocol's methods, each replaceable by keyword
    (None removes it): gymnasium's `GenericTestEnv`, for curricula."""
    namespace: dict[str, Any] = {
        "get_task": lambda self: TaskDouble(),
        "update_task_performance": lambda self, task_id, score: True,
        "stats": lambda self: {"per_label_lp_scores": {"default": 0.0}},
    }
    namespace.update(methods)
    return type("CurriculumDouble", (), {k: v for k, v in namespace.items() if v is not None})()


def _protocol_error(owner: str, *problems: str) -> str:
    """The whole message `check_curriculum` raises, as an anchored pattern."""
    message = f"{owner} does not satisfy CurriculumProtocol:" + "".join(f"\n- {problem}" for problem in problems)
    return f"^{re.escape(message)}$"


# ---- accepted ----------------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", [LearningProgressConfig(), UniformConfig()], ids=lambda a: a.name)
def test_builtin_curriculum_satisfies_the_protocol(algorithm: Any) -> None:
    curriculum = Curriculum(_config(algorithm))
    assert check_curriculum(curriculum) is None
    assert isinstance(curriculum, CheckpointableCurriculum)
    assert missing_capabilities(curriculum, ("get_state", "load_state", "sync_state", "apply_sync_state")) == []


def test_builtin_staged_curriculum_satisfies_the_protocol() -> None:
    stages = [Stage("first", GENERATOR), Stage("second", BucketedTaskGenerator({"level": 2}, {}, label="hard"))]
    curriculum = Curriculum(CurriculumConfig(task_generator=None, algorithm=StagedProgressionConfig(stages=stages),
                                             num_active_tasks=4))
    assert check_curriculum(curriculum) is None


def test_external_curriculum_satisfies_the_protocol() -> None:
    curriculum = make_external_curriculum(_config(num_active_tasks=3, seed=7))
    assert isinstance(curriculum, ExternalCurriculum)
    assert check_curriculum(curriculum) is None
    assert isinstance(curriculum, CheckpointableCurriculum)
    task = curriculum.get_task()
    assert isinstance(task, BanditTask) and isinstance(task, TaskProtocol)
    assert check_task(task) == []
    assert missing_capabilities(curriculum, ("get_state", "load_state", "sync_state", "apply_sync_state")) == [
        "sync_state", "apply_sync_state"]


def test_external_curriculum_reads_pool_size_seed_and_generator() -> None:
    first = make_external_curriculum(_config(num_active_tasks=5, seed=3))
    again = make_external_curriculum(_config(num_active_tasks=5, seed=3))
    other = make_external_curriculum(_config(num_active_tasks=5, seed=4))
    assert first.num_active_tasks == 5
    assert [t.env_cfg == GENERATOR.generate(t.task_id)[0] and t.label == "easy" for t in first.active_tasks()] == \
        [True] * 5
    draws = [[c.get_task().task_id for _ in range(50)] for c in (first, again, other)]
    assert draws[0] == draws[1]
    assert draws[0] != draws[2]


def test_protocol_double_is_accepted() -> None:
    double = curriculum_double()
    assert check_curriculum(double) is None
    assert isinstance(double, CurriculumProtocol)
    assert not isinstance(double, CheckpointableCurriculum)
    assert missing_capabilities(double, ("get_state", "load_state")) == ["get_state", "load_state"]


# ---- refused, with every gap listed ------------------------------------------------------------
def test_object_without_methods_lists_every_missing_method() -> None:
    with pytest.raises(CurriculumProtocolError, match=_protocol_error(
            "object", "missing method `get_task()`", "missing method `update_task_performance()`",
            "missing method `stats()`")):
        check_curriculum(object())


def test_wrong_arity_and_missing_method_are_both_listed() -> None:
    double = curriculum_double(update_task_performance=lambda self, task_id: True, stats=None)
    with pytest.raises(CurriculumProtocolError, match=_protocol_error(
            "CurriculumDouble", "`update_task_performance()` must accept 2 positional argument(s), it accepts 1",
            "missing method `stats()`")):
        check_curriculum(double)


def test_bad_task_and_bad_stats_list_every_gap_and_skip_the_update() -> None:
    updates: list[tuple[Any, Any]] = []
    double = curriculum_double(
        get_task=lambda self: TaskDouble(task_id="7", env_cfg=["level", 1], label=None),
        update_task_performance=lambda self, task_id, score: updates.append((task_id, score)),
        stats=lambda self: [("completions", 1)],
    )
    with pytest.raises(CurriculumProtocolError, match=_protocol_error(
            "CurriculumDouble", "task.task_id must be an int, received '7'",
            "task.env_cfg must be a mapping, received list", "task.label must be a str, received None",
            "stats() must return a mapping, received list")):
        check_curriculum(double)
    assert updates == [], "a task that fails the protocol must not be fed back to the curriculum"


def test_bool_task_id_and_missing_task_attributes() -> None:
    assert check_task(TaskDouble(task_id=True)) == ["task.task_id must be an int, received True"]
    assert check_task(object()) == [
        "task.task_id must be an int, received None",
        "task.env_cfg must be a mapping, received NoneType",
        "task.label must be a str, received None",
    ]


@pytest.mark.parametrize("scores", [{"easy": math.nan}, {"easy": math.inf}, {"easy": "high"}, [0.5]])
def test_non_finite_per_label_lp_scores_are_refused(scores: Any) -> None:
    double = curriculum_double(stats=lambda self: {"per_label_lp_scores": scores})
    with pytest.raises(CurriculumProtocolError, match=_protocol_error(
            "CurriculumDouble", "stats()['per_label_lp_scores'] must map labels to finite numbers")):
        check_curriculum(double)


def test_update_is_called_once_with_the_task_and_a_mid_range_score() -> None:
    updates: list[tuple[Any, Any]] = []
    double = curriculum_double(get_task=lambda self: TaskDouble(task_id=12),
                               update_task_performance=lambda self, task_id, score: updates.append((task_id, score)))
    check_curriculum(double)
    assert updates == [(12, 0.5)]


def test_exercise_false_checks_methods_only() -> None:
    def get_task(self: Any) -> Any:
        raise AssertionError("get_task() must not be called with exercise=False")

    assert check_curriculum(curriculum_double(get_task=get_task), exercise=False) is None
    missing = _protocol_error("CurriculumDouble", "missing method `get_task()`")
    with pytest.raises(CurriculumProtocolError, match=missing):
        check_curriculum(curriculum_double(get_task=None), exercise=False)


# ---- the real scenario gate on the external curriculum -----------------------------------------
GATE_MODULES = ("scenarios/test_impossible_tasks.py", "scenarios/test_checkpoint_resume.py",
                "scenarios/test_curriculum_state_machine.py")


def _outcomes(junit_xml: Path) -> dict[str, str]:
    """`{module::test: "passed" | "failed" | "error" | "skipped"}` from a JUnit report."""
    outcomes = {}
    for case in ET.parse(junit_xml).iter("testcase"):
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[kinds.pop()] if kinds else "passed"
        module = case.get("classname", "").split(".")[1] if "." in case.get("classname", "") else ""
        outcomes[f"{module}::{case.get('name')}"] = outcome
    return outcomes


def test_scenario_gate_runs_against_the_external_curriculum(tmp_path: Path) -> None:
    """The gate, run by a user on their own curriculum, exactly as documented.

    What the Thompson-sampling curriculum gets (base seed 0: each check's mean over 20 seeds):
    - checkpoint/resume PASSES: it is checkpointable and its resumed run matches the
      uninterrupted one (its `per_label_lp_scores` is `{}`, equal on both sides).
    - the state machine PASSES: its accounting (credited vs late completions, refused bad
      input leaving the state unchanged, checkpoint round trips) holds; the broken built-in
      curricula of that module are still caught.
    - the per-label LP gaps SKIP, with the reason: it has no learning progress to compare.
    - the noise impossible share FAILS, legitimately: a sampler that seeks 50% success rates
      spends ~98% of episodes on constant-plus-noise tasks.
    - the zero impossible share and the mostly-impossible space PASS: hopeless tasks are
      retired after `min_presentations` plays, so learnable tasks keep well over the limit.
    - the accounting oracle checks the first seed of every check, and finds nothing.
    """
    report = tmp_path / "gate.xml"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *GATE_MODULES, "--gate-curriculum=external_curriculum:make_external_curriculum",
         "-p", "no:xdist", "-p", "no:randomly", "-q", "--no-header", f"--junitxml={report}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert report.exists(), f"the gate did not run (exit {proc.returncode}):\n{output}"
    outcomes = _outcomes(report)
    assert outcomes, f"the gate collected nothing:\n{output}"
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, f"exit {proc.returncode}:\n{output}"

    impossible = "test_impossible_tasks::test_impossible_tasks_get_low_lp_and_few_samples"
    expected = {
        "test_checkpoint_resume::test_resumed_run_matches_uninterrupted_run[seed0]": "passed",
        "test_curriculum_state_machine::runTest": "passed",
        f"{impossible}[seed0-zero_impossible_share]": "passed",
        f"{impossible}[seed0-zero_lp_gap]": "skipped",
        f"{impossible}[seed0-noise_impossible_share]": "failed",
        f"{impossible}[seed0-noise_lp_gap]": "skipped",
        f"{impossible}[seed0-mostly_impossible_learnable_share]": "passed",
    }
    assert {name: outcomes.get(name, "not collected") for name in expected} == expected, output
    broken = {name: outcome for name, outcome in outcomes.items() if "test_machine_fails_on_broken_curriculum" in name}
    assert broken and set(broken.values()) == {"passed"}, broken
    assert set(outcomes) - set(expected) - set(broken) == set(), f"unexpected tests: {sorted(outcomes)}"
