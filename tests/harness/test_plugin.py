"""The pytest plugin, driven the way users drive it: options on a real pytest run (pytester)."""

from __future__ import annotations

import json
import textwrap

import pytest

import harness.faults  # noqa: F401  (see below)

pytest_plugins = ["pytester"]

# pytester's in-process runs forget the modules each run imported; native extensions (torch,
# under pufferlib, which `harness.faults` pulls in) cannot be imported a second time in one
# process, so everything the inner runs import is imported here first and kept.

#: Inner runs leave hypothesis's plugin out: it imports (and assert-rewrites) all of
#: hypothesis at the end of every run, which would cost seconds per run and tests nothing here.
INNER = ("-p", "no:hypothesispytest")

SCENARIO = """
def test_seeded(scenario_seed):
    assert isinstance(scenario_seed, int)
"""

#: What a suite's conftest holds: the fixtures exist only where it is imported.
SUITE_CONFTEST = "from harness.fixtures import *  # noqa\n"

GOLDEN_TEST = """
import json
from pathlib import Path

import numpy as np


def test_metrics(golden):
    data = json.loads(Path(__file__).with_name("metrics.json").read_text())
    golden({**data, "steps": np.int64(7), "ratio": np.float32(0.25)})
"""


@pytest.fixture(autouse=True)
def suite_conftest(pytester: pytest.Pytester) -> None:
    """Every inner run is a suite: its conftest imports the fixtures (as `scenarios/conftest.py` does)."""
    pytester.makeconftest(SUITE_CONFTEST)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nocolon", "ERROR: --gate-curriculum expects 'package.module:attribute', received 'nocolon'"),
        (":factory", "ERROR: --gate-curriculum expects 'package.module:attribute', received ':factory'"),
        ("missing.module:f", "ERROR: --gate-curriculum: cannot import module 'missing.module' (No module named 'missing')"),
        ("harness.faults:nope", "ERROR: --gate-curriculum: module 'harness.faults' has no attribute 'nope'"),
        ("harness.faults:CANARIES", "ERROR: --gate-curriculum: 'harness.faults:CANARIES' is not callable"),
    ],
)
def test_bad_curriculum_spec_is_a_usage_error(pytester: pytest.Pytester, spec: str, message: str) -> None:
    pytester.makepyfile(test_s=SCENARIO)
    result = pytester.runpytest(*INNER, f"--gate-curriculum={spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.lines, result.stderr.str()
    assert "test_seeded" not in result.stdout.str()  # refused before any test ran


def test_bad_curriculum_env_spec_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s=SCENARIO)
    result = pytester.runpytest(*INNER, "--gate-curriculum-env=harness.envs:NoSuchEnv")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --gate-curriculum-env: module 'harness.envs' has no attribute 'NoSuchEnv'" in result.stderr.lines


def test_curriculum_spec_reaches_the_factory_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_factory="""
        from harness.faults import make_lossy_checkpoint_curriculum

        def test_factory(curriculum_factory, uses_builtin_curriculum):
            assert curriculum_factory is make_lossy_checkpoint_curriculum
            assert uses_builtin_curriculum is False
    """)
    result = pytester.runpytest(*INNER, "--gate-curriculum=harness.faults:make_lossy_checkpoint_curriculum")
    result.assert_outcomes(passed=1)


def test_default_factory_is_the_builtin_curriculum(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_factory="""
        from curriculum import Curriculum

        def test_factory(curriculum_factory, uses_builtin_curriculum):
            assert curriculum_factory is Curriculum
            assert uses_builtin_curriculum is True
    """)
    pytester.runpytest(*INNER).assert_outcomes(passed=1)


def test_scenario_seeds_parametrises_over_every_seed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s=SCENARIO)
    result = pytester.runpytest(*INNER, "--gate-seeds=3", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_seeded[[]seed0[]] PASSED*", "*test_seeded[[]seed1[]] PASSED*",
                                 "*test_seeded[[]seed2[]] PASSED*"])


def test_pinned_seed_without_a_sweep(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s=SCENARIO)
    result = pytester.runpytest(*INNER, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_seeded[[]seed0[]] PASSED*"])


@pytest.mark.parametrize("seeds", ["0", "-2"])
def test_scenario_seeds_below_one_are_refused(pytester: pytest.Pytester, seeds: str) -> None:
    pytester.makepyfile(test_s=SCENARIO)
    result = pytester.runpytest(*INNER, f"--gate-seeds={seeds}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: --gate-seeds expects a positive integer, received {seeds}" in result.stderr.lines


def _golden_project(pytester: pytest.Pytester, data: dict) -> None:
    scenarios = pytester.mkdir("scenarios")
    (scenarios / "test_x.py").write_text(textwrap.dedent(GOLDEN_TEST))
    (scenarios / "metrics.json").write_text(json.dumps(data))
    # golden files are written only into a checkout of this project (harness.golden)
    (pytester.path / "pyproject.toml").write_text('[project]\nname = "curriculum-harness"\n')


def test_golden_snapshot_is_written_stable_and_compared(pytester: pytest.Pytester) -> None:
    _golden_project(pytester, {"zeta": 1.23456789, "alpha": {"b": 2, "a": [0.1 + 0.2, None]}})
    written = pytester.runpytest(*INNER, "scenarios", "--snapshot-update")
    written.assert_outcomes(passed=1)
    golden_file = pytester.path / "golden" / "test_x" / "test_metrics.json"
    assert golden_file.read_text() == textwrap.dedent("""\
        {
          "alpha": {
            "a": [
              0.3,
              null
            ],
            "b": 2
          },
          "ratio": 0.25,
          "steps": 7,
          "zeta": 1.2346
        }
        """)

    pytester.runpytest(*INNER, "scenarios").assert_outcomes(passed=1)

    (pytester.path / "scenarios" / "metrics.json").write_text(
        json.dumps({"zeta": 1.5, "alpha": {"b": 2, "a": [0.3, None]}}))
    changed = pytester.runpytest(*INNER, "scenarios")
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines([
        "golden snapshot golden/test_x/test_metrics.json differs (- golden, + this run); "
        "run with --snapshot-update if the change is intended:",
        '-   "zeta": 1.2346',
        '+   "zeta": 1.5',
    ])
    assert "1.2346" in golden_file.read_text(), "a failing comparison must not rewrite the golden file"


def test_golden_is_not_compared_for_a_plugged_in_curriculum(pytester: pytest.Pytester) -> None:
    _golden_project(pytester, {"zeta": 1.0})
    pytester.runpytest(*INNER, "scenarios", "--snapshot-update").assert_outcomes(passed=1)
    (pytester.path / "scenarios" / "metrics.json").write_text(json.dumps({"zeta": 2.0}))
    pytester.runpytest(*INNER, "scenarios", "--gate-curriculum=harness.faults:make_lossy_checkpoint_curriculum") \
        .assert_outcomes(passed=1)
    pytester.runpytest(*INNER, "scenarios", "--gate-seeds=2").assert_outcomes(passed=1)
    pytester.runpytest(*INNER, "scenarios").assert_outcomes(failed=1)


def test_fixtures_are_invisible_outside_the_suites(pytester: pytest.Pytester) -> None:
    (pytester.path / "conftest.py").unlink()
    pytester.makepyfile(test_own="""
        def test_uses_golden(golden):
            pass
    """)
    result = pytester.runpytest(*INNER)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'golden' not found*"])


def test_a_project_option_named_curriculum_does_not_clash(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SUITE_CONFTEST + textwrap.dedent("""
        def pytest_addoption(parser):
            parser.addoption("--curriculum", default="mine")
    """))
    pytester.makepyfile(test_own="""
        def test_option(request):
            assert request.config.getoption("--curriculum") == "theirs"
    """)
    pytester.runpytest(*INNER, "--curriculum=theirs").assert_outcomes(passed=1)


def test_base_seed_option_moves_the_seeded_scenarios(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s=SCENARIO)
    result = pytester.runpytest(*INNER, "--gate-base-seed=7", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_seeded[[]seed7[]] PASSED*"])


@pytest.mark.parametrize("option", ["--gate-curriculum=harness.faults:make_lossy_checkpoint_curriculum",
                                    "--gate-seeds=2", "--gate-base-seed=3"])
def test_snapshot_update_is_refused_outside_the_builtin_pinned_run(pytester: pytest.Pytester, option: str) -> None:
    _golden_project(pytester, {"zeta": 1.0})
    pytester.runpytest(*INNER, "scenarios", "--snapshot-update").assert_outcomes(passed=1)
    result = pytester.runpytest(*INNER, "scenarios", "--snapshot-update", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any(line.startswith("ERROR: --snapshot-update rewrites the golden files") for line in result.stderr.lines)
    assert (pytester.path / "golden" / "test_x" / "test_metrics.json").exists()


def test_plugged_in_runs_report_no_unused_snapshots(pytester: pytest.Pytester) -> None:
    _golden_project(pytester, {"zeta": 1.0})
    pytester.runpytest(*INNER, "scenarios", "--snapshot-update").assert_outcomes(passed=1)
    result = pytester.runpytest(*INNER, "scenarios", "--gate-curriculum=harness.faults:make_lossy_checkpoint_curriculum")
    result.assert_outcomes(passed=1)
    assert "snapshot report summary" not in result.stdout.str(), result.stdout.str()


STATISTIC_TEST = """
def test_check(check_statistic, check_limit):
    check_limit("one_run", 0.5, 1.0, what="one run's number was")
    check_statistic("mean_share", [0.1, 0.3, 0.2], 0.15, seeds=[0, 1, 2], what="impossible share")
"""


def test_check_statistic_states_mean_seeds_limit_and_worst_seed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stat=STATISTIC_TEST)
    margins = pytester.path / "margins.json"
    result = pytester.runpytest(*INNER, f"--gate-margins={margins}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E * impossible share: mean 0.2 over 3 seeds (0-2), limit at most 0.15; "
                                 "worst seed 1: 0.3"])
    report = json.loads(margins.read_text())
    assert report["checks"]["mean_share"] == {
        "worst": pytest.approx(0.2), "limit": 0.15, "direction": "at most", "margin": pytest.approx(-0.05),
        "seed": 0, "where": "mean over seeds 0-2", "mean": pytest.approx(0.2), "runs": 1,
    }
    assert report["checks"]["one_run"]["margin"] == 0.5
    assert report["tests"] == {"test_stat.py::test_check[seed0]": "failed"}


GROUPED = """
import os

import pytest


@pytest.mark.parametrize("group", [pytest.param(g, marks=pytest.mark.xdist_group(g)) for g in "ab" * 3])
def test_grouped(group, tmp_path_factory):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(os.environ["GROUPS_LOG"], f"{group}-{worker}-{os.getpid()}"), "w"):
        pass
"""


def test_tests_of_one_xdist_group_run_in_one_worker(pytester: pytest.Pytester, tmp_path, monkeypatch) -> None:
    """`--dist loadgroup` keeps each group on one worker (pytest >= 9.2 lost the node id
    suffix pytest-xdist groups by; the plugin puts it back), and reports name the tests
    without it."""
    pytester.makepyfile(test_g=GROUPED)
    monkeypatch.setenv("GROUPS_LOG", str(tmp_path))
    margins = tmp_path / "margins.json"
    result = pytester.runpytest_subprocess(*INNER, "-n", "2", "--dist", "loadgroup", f"--gate-margins={margins}")
    result.assert_outcomes(passed=6)
    workers = {}
    for entry in tmp_path.iterdir():
        if entry.name != "margins.json":
            group, worker, _ = entry.name.split("-")
            workers.setdefault(group, set()).add(worker)
    assert workers.keys() == {"a", "b"} and all(len(w) == 1 for w in workers.values()), workers
    tests = json.loads(margins.read_text())["tests"]
    assert sorted(tests) == [f"test_g.py::test_grouped[{g}{i}]" for g, i in
                             (("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2))], sorted(tests)
