"""`harness.protocol`: what the checker accepts and refuses, and the scenario gate run against a
curriculum that is not ours (`external_curriculum.py`, Thompson sampling, no learning progress).
"""

from __future__ import annotations

import io
import math
import os
import re
import subprocess
import sys
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
from harness.gate import compare_outcomes, load_expectations, read_outcome
from harness.protocol import (
    CAPABILITIES,
    SUITES,
    TASK_ID_RULE,
    CheckpointableCurriculum,
    CurriculumProtocol,
    CurriculumProtocolError,
    TaskProtocol,
    check_curriculum,
    check_task,
    missing_capabilities,
    render_markdown,
    skip_reason,
    suite_readiness,
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
    printed = io.StringIO()
    readiness = check_curriculum(curriculum, factory=Curriculum, file=printed)
    assert {r.suite: r.runs for r in readiness} == dict.fromkeys(SUITES, True)
    assert [r for r in readiness if r.skips_because or r.leaves_out or r.unknown] == []
    assert printed.getvalue().splitlines()[-1].startswith(f"{len(SUITES)} of {len(SUITES)} suites run")
    assert isinstance(curriculum, CheckpointableCurriculum)
    assert missing_capabilities(curriculum, ("get_state", "load_state", "sync_state", "apply_sync_state")) == []


def test_builtin_staged_curriculum_satisfies_the_protocol() -> None:
    stages = [Stage("first", GENERATOR), Stage("second", BucketedTaskGenerator({"level": 2}, {}, label="hard"))]
    curriculum = Curriculum(CurriculumConfig(task_generator=None, algorithm=StagedProgressionConfig(stages=stages),
                                             num_active_tasks=4))
    assert all(r.runs for r in check_curriculum(curriculum, factory=Curriculum, file=io.StringIO()))


def test_external_curriculum_satisfies_the_protocol() -> None:
    curriculum = make_external_curriculum(_config(num_active_tasks=3, seed=7))
    assert isinstance(curriculum, ExternalCurriculum)
    check_curriculum(curriculum, file=io.StringIO())
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
    check_curriculum(double, file=io.StringIO())
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
    check_curriculum(double, file=io.StringIO())
    assert updates[0] == (12, 0.5)  # then the named-error probes: a NaN score, a bool score, the id -1
    assert updates[1][0] == 12 and math.isnan(updates[1][1]) and updates[2:] == [(12, True), (-1, 0.5)]


def test_exercise_false_checks_methods_only() -> None:
    def get_task(self: Any) -> Any:
        raise AssertionError("get_task() must not be called with exercise=False")

    check_curriculum(curriculum_double(get_task=get_task), exercise=False, file=io.StringIO())
    missing = _protocol_error("CurriculumDouble", "missing method `get_task()`")
    with pytest.raises(CurriculumProtocolError, match=missing):
        check_curriculum(curriculum_double(get_task=None), exercise=False)


# ---- the per-suite registry and the readiness table ---------------------------------------------
def test_every_suite_module_is_in_the_registry_and_every_capability_exists() -> None:
    modules = {path.stem.removeprefix("test_") for path in (ROOT / "scenarios").glob("test_*.py")}
    assert set(SUITES) == modules
    named = {name for suite in SUITES.values() for name in (*suite.requires, *suite.uses)}
    assert named <= set(CAPABILITIES), sorted(named - set(CAPABILITIES))


def test_protocol_document_holds_the_registry_tables_and_the_task_id_rule() -> None:
    document = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    assert render_markdown() in document, "docs/protocol.md is stale: paste `python -m harness.protocol` into it"
    assert TASK_ID_RULE in document
    assert "docs/protocol.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_readiness_of_the_external_curriculum_names_what_each_skipped_suite_lacks() -> None:
    curriculum = make_external_curriculum(_config(num_active_tasks=3, seed=7))
    printed = io.StringIO()
    readiness = {r.suite: r for r in check_curriculum(curriculum, factory=make_external_curriculum, file=printed)}
    assert {name for name, r in readiness.items() if not r.runs} == {
        "eviction_health", "shared_tracker_locking", "stage_sync", "staged_progression", "worker_failures"}
    assert readiness["worker_failures"].skips_because == (
        "needs factory(config, shared_memory=True[, lock_timeout=s]) (the worker processes share one curriculum); "
        "the factory takes no `shared_memory` keyword",)
    assert readiness["eviction_health"].skips_because == (
        "needs active_tasks(), num_active_tasks (watches which tasks leave the pool); active_tasks() returns tasks "
        "without mean_score, num_completions",
        "needs task_scores() (ranks an evicted task's score among the eligible tasks'); lacks task_scores()")
    assert readiness["desync_truncation"].runs and readiness["desync_truncation"].leaves_out == (
        "without active_tasks(), num_active_tasks: the lowest mean score of a recorded task (a partial episode "
        "would lower it)",)
    assert readiness["shared_tracker_locking"].skips_because == (
        "needs factory(config, shared_memory=True[, lock_timeout=s]) (writers in forked processes share one "
        "tracker); the factory takes no `shared_memory` keyword",)
    refused = ("the factory refused a staged config: CurriculumConfigError: Expected `task_generator` for the "
               "Thompson-sampling curriculum, received None")
    assert readiness["stage_sync"].skips_because == (
        f"needs factory(CurriculumConfig(algorithm=StagedProgressionConfig(...))) (advances through stages while "
        f"workers run); {refused}",
        f"needs stage, stats()['stage'], stats()['advancements'], stats()['regressions'] (workers must agree with the "
        f"stage the curriculum reports); {refused}")
    assert readiness["impossible_tasks"].runs and readiness["impossible_tasks"].leaves_out[0].startswith(
        "without stats()['per_label_lp_scores']: the learnable-vs-impossible learning-progress gap checks")
    text = printed.getvalue()
    assert re.search(r"^  eviction_health +skips +needs active_tasks\(\), num_active_tasks", text, re.MULTILINE), text
    assert text.splitlines()[-1].startswith(f"{len(SUITES) - 5} of {len(SUITES)} suites run")


def test_factory_capabilities_are_unknown_without_the_factory() -> None:
    readiness = {r.suite: r for r in suite_readiness(curriculum_double(), exercise=True)}
    assert readiness["shared_tracker_locking"].runs is None
    assert readiness["shared_tracker_locking"].unknown == (
        "factory(CurriculumConfig(algorithm=UniformConfig())): pass factory= (and exercise=True) to tell",
        "factory(config, shared_memory=True[, lock_timeout=s]): pass factory= to tell")


def test_skip_reason_names_the_missing_capability_without_calling_the_curriculum() -> None:
    def refuse(self: Any, *args: Any) -> Any:
        raise AssertionError("skip_reason must not exercise the curriculum")

    double = curriculum_double(get_task=refuse, update_task_performance=refuse)
    assert skip_reason("checkpoint_resume", double) == (
        "needs get_state(), load_state(state) (replays a run from a checkpoint taken halfway and compares it with "
        "the uninterrupted run); lacks get_state(), load_state()")
    assert skip_reason("dependency_chain", double) is None
    with pytest.raises(KeyError, match="unknown suite 'nope'"):
        skip_reason("nope", double)


@pytest.mark.parametrize(("update", "found"), [
    (lambda self, task_id, score: True, "accepted what must raise InvalidScoreError; accepted what must raise "
                                        "InvalidScoreError; accepted what must raise UnknownTaskError"),
    (lambda self, task_id, score: [][task_id] if score == score else math.sqrt(-1.0),
     "raised ValueError instead of InvalidScoreError; raised IndexError instead of InvalidScoreError; raised "
     "IndexError instead of UnknownTaskError"),
])
def test_a_curriculum_without_the_named_errors_has_the_state_machine_skipped(update: Any, found: str) -> None:
    double = curriculum_double(update_task_performance=update,
                               stats=lambda self: {"total_completions": 0, "late_completions": 0})
    readiness = {r.suite: r for r in suite_readiness(double)}
    assert readiness["curriculum_state_machine"].skips_because == (
        "needs InvalidScoreError, UnknownTaskError (curriculum.errors) (bad scores and unknown ids must be refused "
        f"by name, state unchanged); {found}",)


# ---- the real scenario gate on the external curriculum -----------------------------------------
GATE_MODULES = ("scenarios/test_impossible_tasks.py", "scenarios/test_checkpoint_resume.py",
                "scenarios/test_curriculum_state_machine.py")
EXPECTED = ROOT / "examples" / "curricula" / "expected" / "external_curriculum.toml"


def test_scenario_gate_runs_against_the_external_curriculum(tmp_path: Path) -> None:
    """The gate, run by a user on their own curriculum, exactly as documented; the outcomes are
    those `examples/curricula/expected/external_curriculum.toml` holds (CI gates every suite
    through the installed wheel against that file).

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
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
               CI="true")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *GATE_MODULES,
         "--gate-curriculum=external_curriculum:make_external_curriculum",
         "-p", "no:xdist", "-p", "no:randomly", "-q", "--no-header", f"--junitxml={report}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert report.exists(), f"the gate did not run (exit {proc.returncode}):\n{output}"
    outcome = read_outcome(report, exit_code=proc.returncode)
    assert outcome.tests, f"the gate collected nothing:\n{output}"
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, f"exit {proc.returncode}:\n{output}"
    ran = {test.test.split("::", 1)[0] for test in outcome.tests}
    assert ran == {Path(module).stem for module in GATE_MODULES}
    mismatches = [m for m in compare_outcomes(outcome.tests, load_expectations(EXPECTED))
                  if m.actual != "(no test matched)"]  # expectations of the suites not run here
    assert mismatches == [], output
    counts = outcome.counts()
    assert counts["failed"] >= 1 and counts["passed"] >= 1 and counts["skipped"] >= 1, counts
