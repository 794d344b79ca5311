"""Tests of the `curriculum-harness` command line: tiny smoke runs (in process and through the
installed console script), the outputs they write, and the exact usage errors."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.cli import ProgressBar, available_scenarios, build_parser, default_run_name, main
from harness.plots import PLOT_FILES, series_style

TINY = ["--tasks", "3", "--epochs", "3", "--episodes-per-epoch", "20", "--pool", "8", "--no-progress"]
CONSOLE_SCRIPT = Path(sys.executable).with_name("curriculum-harness")


def read_metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def assert_plots_written(out: Path) -> None:
    for name in PLOT_FILES:
        path = out / name
        assert path.is_file(), f"{name} was not written"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is not a PNG"
        assert path.stat().st_size > 5_000, f"{name} is suspiciously small ({path.stat().st_size} bytes)"


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run `argv`, assert exit code 2, return the last stderr line (argparse's `prog: error: ...`)."""
    assert main(argv) == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


# ---------------------------------------------------------------------------------- simulate
def test_simulate_writes_metrics_plots_and_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["simulate", *TINY, "--out", str(out)]) == 0
    epochs = read_metrics(out)
    assert [e["metric/epoch"] for e in epochs] == [0, 1, 2]
    assert [e["metric/agent_step"] for e in epochs] == [20, 40, 60]
    assert {"overview/reward", "env_curriculum_stats/sampling_gini", "env_task_dependency/performance/task_2"} <= \
        set(epochs[-1])
    assert_plots_written(out)
    summary = capsys.readouterr().out
    for row in ("episodes", "completions/s", "final mean performance", "tasks mastered", "sampling Gini",
                "Top labels by samples"):
        assert row in summary, f"summary lacks {row!r}:\n{summary}"
    assert "60 (3 epochs of 20)" in summary


@pytest.mark.parametrize(
    "extra",
    [
        ["--runner", "single", "--algorithm", "uniform"],
        ["--runner", "vectorized", "--envs", "2", "--no-plot"],
        ["--algorithm", "staged", "--no-plot"],
        ["--impossible", "2", "--impossible-mode", "noise", "--no-plot"],
    ],
    ids=["single-uniform", "vectorized-serial", "staged", "impossible"],
)
def test_simulate_runs_every_runner_and_algorithm(tmp_path: Path, extra: list[str]) -> None:
    assert main(["simulate", *TINY, "--out", str(tmp_path), *extra]) == 0
    assert sum(e["overview/episodes"] for e in read_metrics(tmp_path)) >= 60


def test_simulate_shows_progress_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", *[a for a in TINY if a != "--no-progress"], "--no-plot", "--out", str(tmp_path)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "100% 60/60 episodes" in err


def test_console_script_runs_a_simulation(tmp_path: Path) -> None:
    script = str(CONSOLE_SCRIPT) if CONSOLE_SCRIPT.exists() else shutil.which("curriculum-harness")
    assert script, "the curriculum-harness console script is not installed (pip install -e .)"
    proc = subprocess.run([script, "simulate", *TINY, "--out", str(tmp_path / "x")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Summary" in proc.stdout
    assert len(read_metrics(tmp_path / "x")) == 3
    assert_plots_written(tmp_path / "x")


# ---------------------------------------------------------------------------------- usage errors
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--algorithm", "greedy"],
         "argument --algorithm: unknown algorithm 'greedy'; expected one of: uniform, learning_progress, staged"),
        (["--tasks", "0"], "argument --tasks: expected a positive integer, received '0'"),
        (["--epochs", "-3"], "argument --epochs: expected a positive integer, received '-3'"),
        (["--envs", "0"], "argument --envs: expected a positive integer, received '0'"),
        (["--episodes-per-epoch", "ten"], "argument --episodes-per-epoch: expected a positive integer, received 'ten'"),
        (["--impossible", "-1"], "argument --impossible: expected an integer >= 0, received '-1'"),
        (["--runner", "gpu"], "argument --runner: unknown runner 'gpu'; expected one of: direct, single, vectorized"),
        (["--backend", "Ray"], "argument --backend: unknown backend 'Ray'; expected one of: Serial, Multiprocessing"),
        (["--algorithm", "staged", "--impossible", "2"],
         "argument --algorithm: 'staged' runs one stage per chain task and needs --impossible 0, "
         "received --impossible 2"),
        (["--runner", "vectorized", "--tracking", "centralized"],
         "argument --tracking: 'centralized' supports --algorithm staged or uniform (worker copies cannot follow a "
         "pool the main process changes by eviction), received --algorithm learning_progress; use --tracking shared"),
        (["--envs", "8", "--workers", "3"], "argument --workers: expected a divisor of --envs 8, received 3"),
    ],
)
def test_bad_simulate_arguments_exit_2_naming_value_and_expectation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert usage_error(capsys, ["simulate", "--out", str(tmp_path), *argv]) == \
        f"curriculum-harness simulate: error: {message}"


def test_unwritable_output_dir_is_refused_before_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    out = blocker / "run"
    assert usage_error(capsys, ["simulate", *TINY, "--out", str(out)]) == (
        f"curriculum-harness simulate: error: argument --out: cannot write to {str(out)!r} (Not a directory); "
        "expected a writable directory"
    )


def test_help_explains_every_simulate_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("--tasks", "--algorithm", "--envs", "--epochs", "--episodes-per-epoch", "--seed", "--out",
                   "--runner", "--backend", "--tracking", "--impossible", "--impossible-mode", "--pool", "--workers",
                   "--plot, --no-plot", "--progress, --no-progress"):
        assert option in text, f"--help does not mention {option}"
    assert "every worker process has its own copy of the student" in " ".join(text.split())


def test_missing_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- run / list
def test_list_prints_every_scenario_with_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    scenarios = available_scenarios()
    assert "impossible_tasks" in scenarios
    for name in scenarios:
        assert name in text


def test_run_help_lists_the_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    assert "available scenarios:" in text
    assert "impossible_tasks" in text


def test_unknown_scenario_names_the_available_ones(capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(capsys, ["run", "no_such_scenario"])
    assert line.startswith("curriculum-harness run: error: unknown scenario 'no_such_scenario'; expected one of: ")
    assert "impossible_tasks" in line


DUMMY_SCENARIO = '''
"""A dummy scenario: one seeded run through the direct runner."""

from curriculum import Curriculum, CurriculumConfig, LearningProgressConfig
from harness.runners import run_direct
from harness.task_spaces import chain_task_space


def test_dummy(scenario_seed):
    space = chain_task_space(num_tasks=3, seed=scenario_seed)
    config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=8, seed=scenario_seed)
    with Curriculum(config) as curriculum:
        result = run_direct(curriculum, space, episodes=60, epoch_length=20)
    assert result.episodes == 60
    print(f"ran seed {scenario_seed}")
'''


def test_run_executes_one_scenario_with_a_seed_and_plots_its_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "test_dummy.py").write_text(textwrap.dedent(DUMMY_SCENARIO))
    (tmp_path / "scenarios" / "conftest.py").write_text("from harness.fixtures import *  # noqa\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    code = main(["run", "dummy", "--seed", "2", "--out", str(out), "--plot", "--", "-q", "-s", "-p", "no:xdist"])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert (out / "junit.xml").is_file()
    junit = (out / "junit.xml").read_text()
    assert 'tests="1"' in junit and "seed2" in junit  # only the asked seed ran
    runs = sorted((out / "metrics").glob("*.jsonl"))
    assert [p.name for p in runs] == ["test_dummy_seed2.jsonl"]
    assert_plots_written(out / runs[0].stem)


def test_run_passes_on_pytests_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "scenarios").mkdir()
    broken = '"""Always fails."""\n\n\ndef test_fails():\n    assert False\n'
    (tmp_path / "scenarios" / "test_broken.py").write_text(broken)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "broken", "--", "-q", "-p", "no:xdist"]) == 1


# ---------------------------------------------------------------------------------- progress bar
def test_progress_bar_prints_every_tenth_when_not_a_terminal() -> None:
    stream = io.StringIO()
    bar = ProgressBar(100, stream=stream)
    for done in range(0, 101, 5):
        bar.update(done)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11
    assert lines[-1].startswith("[" + "#" * ProgressBar.WIDTH + "] 100% 100/100 episodes")


def test_progress_bar_can_be_switched_off() -> None:
    stream = io.StringIO()
    bar = ProgressBar(10, stream=stream, enabled=False)
    bar.update(10)
    bar.close()
    assert stream.getvalue() == ""


# ---------------------------------------------------------------------------------- --out
def test_out_refuses_a_non_empty_directory_without_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["simulate", *TINY, "--no-plot", "--out", str(out)]) == 0
    before = (out / "metrics.jsonl").read_text()
    assert usage_error(capsys, ["simulate", *TINY, "--seed", "1", "--no-plot", "--out", str(out)]) == (
        f"curriculum-harness simulate: error: argument --out: {str(out)!r} is not empty; expected a new or empty "
        "directory (pass --overwrite to replace an earlier run's metrics and plots there)"
    )
    assert (out / "metrics.jsonl").read_text() == before, "a refused run must leave the earlier one alone"


def test_overwrite_removes_the_earlier_runs_files_and_keeps_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["simulate", *TINY, "--out", str(out)]) == 0
    assert_plots_written(out)
    (out / "notes.txt").write_text("mine")
    assert main(["simulate", *TINY, "--seed", "1", "--no-plot", "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl", "notes.txt"]  # no stale PNG left
    assert len(read_metrics(out)) == 3


def test_a_directory_named_metrics_jsonl_is_a_named_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "metrics.jsonl").mkdir()
    assert usage_error(capsys, ["simulate", *TINY, "--out", str(tmp_path), "--overwrite"]) == (
        f"curriculum-harness simulate: error: argument --out: {str(tmp_path / 'metrics.jsonl')!r} is a directory; "
        "expected metrics.jsonl to be a file the run writes (remove or rename that directory)"
    )


@pytest.mark.parametrize("option", [["--pool", "16"], ["--runner", "single"], ["--epochs", "4"],
                                    ["--episodes-per-epoch", "30"], ["--impossible", "2"],
                                    ["--impossible", "2", "--impossible-mode", "noise"], ["--seed", "1"],
                                    ["--algorithm", "uniform"], ["--tasks", "4"],
                                    ["--runner", "vectorized", "--envs", "4"],
                                    ["--runner", "vectorized", "--tracking", "centralized"],
                                    ["--runner", "vectorized", "--backend", "Multiprocessing"],
                                    ["--runner", "vectorized", "--backend", "Multiprocessing", "--workers", "2"]],
                         ids=lambda option: " ".join(option))
def test_default_run_names_differ_for_runs_that_differ(option: list[str]) -> None:
    parser = build_parser()
    base = ["simulate", "--impossible-mode", "zero"]
    vectorized = ["--runner", "vectorized"] if "--runner" in option and option[1] == "vectorized" else []
    reference = default_run_name(parser.parse_args([*base, *vectorized]))
    changed = default_run_name(parser.parse_args([*base, *option]))
    assert changed != reference
    assert default_run_name(parser.parse_args(base)) == "learning_progress-10tasks-pool32-direct-500x100-seed0"


def test_options_that_do_not_change_the_run_do_not_change_its_name() -> None:
    parser = build_parser()
    assert default_run_name(parser.parse_args(["simulate", "--no-plot", "--no-progress", "--envs", "4"])) == \
        default_run_name(parser.parse_args(["simulate"]))


def test_summary_counts_mastered_tasks_out_of_the_learnable_ones(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--tasks", "2", "--impossible", "3", "--epochs", "2", "--episodes-per-epoch", "20",
            "--no-plot", "--no-progress", "--out", str(tmp_path)]
    assert main(argv) == 0
    summary = capsys.readouterr().out
    assert re.search(r"tasks mastered +\d of 2 learnable \(performance >= ", summary), summary
    assert "over the 2 learnable tasks, last epoch; 3 impossible tasks not counted" in summary


# ---------------------------------------------------------------------------------- plots
def test_overlapping_series_get_distinct_line_styles_and_markers() -> None:
    styles = [series_style(i, 8, 100) for i in range(8)]
    assert len({(s["linestyle"], s["marker"]) for s in styles}) == 8
    assert len({s["markevery"][0] for s in styles}) == 8  # markers sit at staggered points
    assert all(0 <= s["markevery"][0] < 100 for s in styles)


def test_plot_titles_name_the_runner_and_the_x_axis_counts_episodes(tmp_path: Path) -> None:
    from harness.plots import X_LABEL, plot_overview, write_plots

    epochs = [{"metric/agent_step": 20 * (i + 1), "env_task_dependency/num_mastered": i, "overview/reward": 0.5}
              for i in range(5)]
    assert X_LABEL == "episodes completed (metric/agent_step)"
    captured: dict[str, str] = {}

    def spy(source: Any, path: Path, *, title: str | None = None) -> Path:
        captured[Path(path).name] = title or ""
        return plot_overview(source, path, title=title)

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(PLOT_FILES, "overview.png", spy)
        write_plots(epochs, tmp_path, title="lp, seed 0", runner="direct runner")
    assert captured["overview.png"].endswith("(lp, seed 0; direct runner)")


# ---------------------------------------------------------------------------------- cleanup
def test_cleanup_removes_a_lock_file_left_without_its_block_and_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    from curriculum.memory import SEGMENT_DIR, SEGMENT_PREFIX

    path = os.path.join(SEGMENT_DIR, f"{SEGMENT_PREFIX}cli{os.getpid()}.lock")  # an earlier version's lock file
    open(path, "w").close()
    try:
        assert main(["cleanup"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("removed ") and path in out
        assert not os.path.exists(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)


@pytest.mark.parametrize(("argv", "module", "message"), [
    (["gate"], "pytest", "curriculum-harness gate: error: the gate needs pytest, which comes with the gate extra: "
                         "pip install 'curriculum-harness[gate]'"),
    (["simulate", "--epochs", "1"], "matplotlib",
     "curriculum-harness simulate: error: argument --plot needs matplotlib, which comes with the gate extra: "
     "pip install 'curriculum-harness[gate]'"),
])
def test_commands_name_the_gate_extra_when_its_dependencies_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], module: str,
    message: str,
) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else find_spec(name, *a))
    assert usage_error(capsys, [*argv, *(["--out", str(tmp_path / "run")] if argv[0] == "simulate" else [])]) == message
