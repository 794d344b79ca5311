"""`curriculum-harness gate`: the outcome read back from a run's reports, the markdown report,
expected-outcome files, and the command itself run from outside the checkout."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest

from harness.cli import main
from harness.gate import (
    CaseOutcome,
    Expectation,
    ExpectationError,
    Mismatch,
    compare_outcomes,
    load_expectations,
    read_outcome,
    render_report,
    without_group,
)

JUNIT = """\
<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="12.5">
<testcase classname="scenarios.test_dependency_chain" name="test_chain[seed0]" time="3.0">
  <failure message="AssertionError: mastering all 10 chain tasks took 19250 episodes, a ratio of 1.00, limit at most 0.95, seed 0&#10;assert False">traceback</failure>
</testcase>
<testcase classname="scenarios.test_eviction_health" name="test_pool[seed0]@pool]" time="0.1">
  <skipped type="pytest.skip" message="eviction health inspects the pool; this curriculum lacks ['task_scores']">skip</skipped>
</testcase>
<testcase classname="scenarios.test_curriculum_state_machine.TestCurriculumStateMachine" name="runTest" time="5.0"/>
<testcase classname="scenarios.test_forgetting" name="test_revisit[seed0]" time="1.0"/>
<testcase classname="scenarios.test_forgetting" name="test_revisit[seed0]" time="0.0">
  <error message="failed on teardown with &quot;AssertionError: 1 accounting oracle(s) made by this scenario were never verified&quot;">tb</error>
</testcase>
</testsuite></testsuites>
"""

MARGINS = {
    "checks": {
        "chain_ratio_to_uniform": {"worst": 1.0026, "limit": 0.95, "direction": "at most", "margin": -0.0526,
                                   "seed": 0, "where": "", "mean": 1.0026, "runs": 1},
        "forgotten_task_share": {"worst": 0.42, "limit": 0.28, "direction": "at least", "margin": 0.14, "seed": 0,
                                 "where": "mean over seeds 0-3", "mean": 0.42, "runs": 1},
    },
    "tests": {},
}


@pytest.fixture
def reports(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "junit.xml").write_text(JUNIT)
    (tmp_path / "margins.json").write_text(json.dumps(MARGINS))
    return tmp_path / "junit.xml", tmp_path / "margins.json"


def test_outcome_is_read_per_test_with_its_message(reports: tuple[Path, Path]) -> None:
    outcome = read_outcome(*reports, exit_code=1)
    assert [(t.test, t.outcome, t.message) for t in outcome.tests] == [
        ("test_dependency_chain::test_chain[seed0]", "failed",
         "AssertionError: mastering all 10 chain tasks took 19250 episodes, a ratio of 1.00, limit at most 0.95, "
         "seed 0"),
        ("test_eviction_health::test_pool[seed0]", "skipped",  # named without xdist's `@<group>` suffix
         "eviction health inspects the pool; this curriculum lacks ['task_scores']"),
        ("test_curriculum_state_machine::TestCurriculumStateMachine::runTest", "passed", ""),
        ("test_forgetting::test_revisit[seed0]", "failed",  # a pass, then a teardown error: failed
         'failed on teardown with "AssertionError: 1 accounting oracle(s) made by this scenario were never '
         'verified"'),
    ]
    assert outcome.seconds == 12.5
    assert [(c.name, c.margin, c.where) for c in outcome.checks] == [
        ("chain_ratio_to_uniform", -0.0526, "seed 0"), ("forgotten_task_share", 0.14, "mean over seeds 0-3")]
    assert not outcome.passed


@pytest.mark.parametrize(("name", "test"), [
    ("test_x[seed0]@ray", "test_x[seed0]"), ("test_x[seed0]@ray]", "test_x[seed0]"), ("test_x@ray", "test_x"),
    ("test_x[a@b]", "test_x[a@b]"), ("test_x[seed0]", "test_x[seed0]"), ("m.py::test_x[a@b]@g", "m.py::test_x[a@b]"),
])
def test_tests_are_named_without_the_xdist_group(name: str, test: str) -> None:
    assert without_group(name) == test


def test_report_lists_suites_failures_with_numbers_skips_with_reasons_and_margins(reports: tuple[Path, Path]) -> None:
    outcome = read_outcome(*reports, exit_code=1)
    outcome.curriculum = "mypkg.curricula:make_curriculum"
    report = render_report(outcome)
    assert report.splitlines()[:7] == [
        "## Curriculum gate FAILED: 2 test(s) failed",
        "",
        "- curriculum: `mypkg.curricula:make_curriculum`",
        "- env wrapper: built-in `curriculum.CurriculumEnv`",
        "- seeds: base seed 0",
        "- tests: 1 passed, 2 failed, 1 skipped in 12 s",
        "",
    ]
    assert "| dependency_chain | failed | 1 failed | AssertionError: mastering all 10 chain tasks took 19250 " \
           "episodes, a ratio of 1.00, limit at most 0.95, seed 0 |" in report
    assert "| eviction_health | skipped | 1 skipped | eviction health inspects the pool; this curriculum lacks " \
           "['task_scores'] |" in report
    assert "| curriculum_state_machine | passed | 1 passed |  |" in report
    assert "| `test_eviction_health::test_pool[seed0]` | eviction health inspects the pool; this curriculum lacks " \
           "['task_scores'] |" in report
    checks = report[report.index("### Worst margin per check"):].splitlines()
    assert checks[-2:] == [  # over the limit first
        "| chain_ratio_to_uniform | 1.003 | at most 0.95 | -0.0526 | seed 0 | 1.003 | 1 |",
        "| forgotten_task_share | 0.42 | at least 0.28 | 0.14 | mean over seeds 0-3 | 0.42 | 1 |",
    ]


EXPECTED = """\
[[expect]]
test = "test_dependency_chain::*"
outcome = "failed"
match = "ratio of"
why = "uniform by design"

[[expect]]
test = "test_forgetting::*"
outcome = "passed"

[[expect]]
test = "test_shared_tracker_locking::*"
outcome = "skipped"

[[expect]]
test = "*"
outcome = "passed"
"""


def test_expected_outcomes_are_compared_test_by_test(tmp_path: Path, reports: tuple[Path, Path]) -> None:
    (tmp_path / "expected.toml").write_text(EXPECTED)
    expectations = load_expectations(tmp_path / "expected.toml")
    assert expectations[0] == Expectation("test_dependency_chain::*", "failed", "ratio of", "uniform by design")
    mismatches = compare_outcomes(read_outcome(*reports).tests, expectations)
    assert mismatches == [
        Mismatch("test_eviction_health::test_pool[seed0]", "passed",
                 "skipped: eviction health inspects the pool; this curriculum lacks ['task_scores']"),
        Mismatch("test_forgetting::test_revisit[seed0]", "passed",
                 'failed: failed on teardown with "AssertionError: 1 accounting oracle(s) made by this scenario were '
                 'never verified"'),
        Mismatch("test_shared_tracker_locking::*", "skipped", "(no test matched)"),
    ]
    report = render_report(read_outcome(*reports, exit_code=1), mismatches=mismatches,
                           expectations_path=Path("expected.toml"))
    assert report.splitlines()[0] == "## Curriculum gate FAILED: 3 outcome(s) differ from `expected.toml`"


def test_a_message_that_no_longer_matches_is_a_mismatch() -> None:
    tests = [CaseOutcome("test_x::t", "failed", "AssertionError: something else entirely")]
    assert compare_outcomes(tests, [Expectation("test_x::*", "failed", "ratio of")]) == [
        Mismatch("test_x::t", "failed with a message containing 'ratio of'",
                 "failed: AssertionError: something else entirely")]
    assert compare_outcomes(tests, [Expectation("test_y::*", "failed")]) == [
        Mismatch("test_x::t", "(no expectation covers this test)", "failed: AssertionError: something else entirely"),
        Mismatch("test_y::*", "failed", "(no test matched)")]


@pytest.mark.parametrize(("text", "message"), [
    ("expect = 3", "expected at least one [[expect]] table, received 3"),
    ('[[expect]]\ntest = "*"\noutcome = "broken"', "[[expect]] #1: expected `outcome` to be one of passed, failed, "
                                                   "skipped, received 'broken'"),
    ('[[expect]]\ntest = ""\noutcome = "passed"', "[[expect]] #1: expected `test` to be a glob over test ids, "
                                                  "received ''"),
    ('[[expect]]\ntest = "*"\noutcome = "passed"\nmatch = "x"', "[[expect]] #1: `match` is a substring of a failure "
                                                                "or skip message, received 'x' for outcome 'passed'"),
    ('[[expect]]\ntest = "*"\noutcome = "passed"\nreason = "x"', "[[expect]] #1: unknown key(s) reason; expected "
                                                                 "test, outcome, match, why"),
])
def test_bad_expected_outcome_files_are_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "expected.toml"
    path.write_text(text)
    with pytest.raises(ExpectationError, match=f"^{re.escape(f'{path}: {message}')}$"):
        load_expectations(path)


# ---------------------------------------------------------------------------------- the command
def _gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str]:
    """Run `curriculum-harness gate` from a directory outside the checkout; (exit code, report)."""
    monkeypatch.chdir(tmp_path)
    code = main(["gate", "--report", str(tmp_path / "gate.md"), "--junitxml", str(tmp_path / "junit.xml"),
                 "-n", "1", *argv])
    report = (tmp_path / "gate.md").read_text() if (tmp_path / "gate.md").exists() else ""
    return code, report


def test_gate_passes_on_the_builtin_curriculum_from_any_directory(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    code, report = _gate(tmp_path, monkeypatch, "--", "-k", "checkpoint_resume or config_at_reset", "-q")
    assert code == 0, report
    assert report.startswith("## Curriculum gate passed: no test failed\n")
    assert "| checkpoint_resume | passed | 27 passed |  |" in report
    assert "| config_at_reset | passed | 42 passed |  |" in report
    assert (tmp_path / "junit.xml").is_file()
    assert not (tmp_path / ".hypothesis").exists() and not (tmp_path / ".pytest_cache").exists()


def test_gate_fails_on_a_broken_curriculum_with_its_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, report = _gate(tmp_path, monkeypatch, "--curriculum", "harness.faults:make_lossy_checkpoint_curriculum",
                         "--", "-k", "checkpoint_resume", "-q")
    assert code == 1
    # resumed: learning progress four times (one of them over many labels, one from checkpoints of coin flips),
    # staged once; rolled back in place, and from checkpoints with whole floats written as integers: learning
    # progress, staged
    assert report.startswith("## Curriculum gate FAILED: 9 test(s) failed\n")
    for what in ("learning progress", "staged progression"):
        assert re.search(rf"^AssertionError: {what}: resumed run diverged from the uninterrupted one at episode \d+ "
                         r".*seed 0$", report, re.MULTILINE), report


def test_gate_passes_when_every_outcome_is_as_expected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "expected.toml").write_text(textwrap.dedent("""\
        [[expect]]
        test = "test_checkpoint_resume::test_resumed*"
        outcome = "failed"
        match = "resumed run diverged"

        [[expect]]
        test = "test_checkpoint_resume::test_a_pool_of_more_labels*"
        outcome = "failed"
        match = "resumed run diverged"

        [[expect]]
        test = "test_checkpoint_resume::test_a_run_of_the_most_variable_scores*"
        outcome = "failed"
        match = "coin flips"

        [[expect]]
        test = "test_checkpoint_resume::test_a_curriculum_rolled_back*"
        outcome = "failed"
        match = "rolled back in place"

        [[expect]]
        test = "test_checkpoint_resume::test_a_checkpoint_written_with_whole_floats*"
        outcome = "failed"
        match = "whole floats written as integers"

        [[expect]]
        test = "test_checkpoint_resume::test_attaching*"
        outcome = "skipped"

        [[expect]]
        test = "test_checkpoint_resume::test_a_checkpoint_number_outside_its_documented_range*"
        outcome = "skipped"

        [[expect]]
        test = "test_checkpoint_resume::test_a_checkpoint_of_another_shape*"
        outcome = "skipped"

        [[expect]]
        test = "test_checkpoint_resume::*"
        outcome = "passed"
        """))
    code, report = _gate(tmp_path, monkeypatch, "--curriculum", "harness.faults:make_lossy_checkpoint_curriculum",
                         "--expect", str(tmp_path / "expected.toml"), "--", "-k", "checkpoint_resume", "-q")
    assert code == 0, report
    assert report.startswith(f"## Curriculum gate passed: every test ended as `{tmp_path / 'expected.toml'}` expects")


@pytest.mark.parametrize(("argv", "message"), [
    (["--curriculum", "nocolon"], "argument --curriculum: expected 'package.module:attribute', received 'nocolon'"),
    (["--seeds", "3", "--base-seed", "2"], "argument --base-seed: a sweep (--seeds 3) runs base seeds 0..2; expected "
                                           "one of --seeds and --base-seed, received both"),
    (["-n", "two"], "argument -n/--workers: expected 'auto' or a positive integer, received 'two'"),
])
def test_gate_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(["gate", *argv]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"curriculum-harness gate: error: {message}"


def test_gate_with_a_curriculum_that_cannot_be_imported_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["gate", "--curriculum", "no_such_module:factory", "-n", "1"]) == 2
    err = capfd.readouterr().err
    assert "ERROR: --gate-curriculum: cannot import module 'no_such_module' (No module named 'no_such_module')" in err
    assert err.strip().splitlines()[-1] == \
        "curriculum-harness gate: error: pytest refused the arguments (its message is above)"


def test_gate_with_a_bad_expected_outcome_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "expected.toml").write_text("not = [toml")
    assert main(["gate", "--expect", str(tmp_path / "expected.toml")]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"curriculum-harness gate: error: argument --expect: {tmp_path / 'expected.toml'} is not "
                           "valid TOML (")


@pytest.mark.parametrize(("workers", "expected"), [("auto", ["-n", str(os.cpu_count() + 1), "--dist", "loadgroup"]),
                                                   ("3", ["-n", "3", "--dist", "loadgroup"]), ("1", ["-n", "0"])])
def test_gate_command_runs_the_installed_suites_with_the_harness_settings(workers: str, expected: list[str]) -> None:
    from harness.gate import GATE_INI, pytest_command

    command = pytest_command(["harness.scenarios"], pyargs=True, rootdir=Path("/x"), curriculum="m:f", seeds=3,
                             workers=workers, extra=["-k", "chain"])
    assert command[1:] == ["-m", "pytest", "--pyargs", "harness.scenarios", "-c", str(GATE_INI), "--rootdir=/x", "-rfEs",
                           "--gate-curriculum=m:f", "--gate-seeds=3", *expected, "-k", "chain"]
