"""`curriculum-harness`: gate a curriculum, simulate one on a simulated student, run one scenario.

    curriculum-harness gate [--curriculum MODULE:FACTORY] [--seeds N] [--report gate.md] [-n auto]
    curriculum-harness simulate --tasks 10 --algorithm learning_progress --epochs 500 --out runs/x
    curriculum-harness run impossible_tasks [--seed N] [--out DIR] [--plot]
    curriculum-harness list
    curriculum-harness cleanup

`gate` runs the installed suites (`harness.gate`) and exits 0 when the gate passes, 1 when it
fails. `simulate` writes `metrics.jsonl` (one metric dict per epoch, the names real training
logs) and PNG plots into `--out`, shows progress on stderr and prints a summary table. `run`
runs one suite module through pytest and returns pytest's exit code. `cleanup` removes the
shared-memory segments and lock files of curricula whose creator died. Bad arguments exit with
code 2 and a message naming the option, the value received and what is expected.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

__all__ = [
    "ALGORITHMS",
    "RUNNERS",
    "BACKENDS",
    "TRACKINGS",
    "OWNED_OUTPUTS",
    "ProgressBar",
    "available_scenarios",
    "default_run_name",
    "build_parser",
    "main",
]

ALGORITHMS: Final = ("uniform", "learning_progress", "staged")
"""`--algorithm` choices: uniform random, learning progress, staged progression along the chain."""
RUNNERS: Final = ("direct", "single", "vectorized")
"""`--runner` choices, in the order of `harness.runners`' integration levels."""
BACKENDS: Final = ("Serial", "Multiprocessing")
TRACKINGS: Final = ("shared", "centralized")
IMPOSSIBLE_MODES: Final = ("zero", "noise")

METRICS_FILE: Final = "metrics.jsonl"

OWNED_OUTPUTS: Final = (METRICS_FILE, "junit.xml", "metrics")
"""What `simulate` and `run` write into `--out` besides the plots (`harness.plots.PLOT_FILES`);
`--overwrite` removes exactly these (and the plots) before a new run."""

_EXIT_GATE_FAILED: Final = 1
_EXIT_USAGE: Final = 2

_SCENARIO_PREFIX: Final = "test_"
_PROG: Final = "curriculum-harness"
_WIDTH: Final = 96


# ---------------------------------------------------------------------------------- arguments
def _int_type(name: str, *, minimum: int) -> Callable[[str], int]:
    kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind}, received {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {kind}, received {text!r}")
        return value

    parse.__name__ = name  # argparse names the type in some messages
    return parse


def _choice_type(what: str, choices: Sequence[str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}; expected one of: {', '.join(choices)}")
        return text

    parse.__name__ = what
    return parse


_positive = _int_type("positive integer", minimum=1)
_non_negative = _int_type("non-negative integer", minimum=0)


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows defaults (unless None: the help says what happens then) and keeps the hand-made
    line breaks of descriptions and epilogs."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def _wrap(text: str) -> str:
    return textwrap.fill(text, width=_WIDTH)


def _installed_scenarios_dir() -> Path:
    from harness.gate import suites_dir

    return suites_dir()


def scenarios_dir() -> Path:
    """`./scenarios` when the working directory has suites there (a checkout, or a project's own
    copy), else the suites installed with the harness (`harness.scenarios`)."""
    local = Path.cwd() / "scenarios"
    if any(local.glob(f"{_SCENARIO_PREFIX}*.py")):
        return local
    return _installed_scenarios_dir()


def available_scenarios(directory: Path | None = None) -> dict[str, str]:
    """Scenario name (`test_<name>.py` -> `<name>`) -> first paragraph of its module docstring (shortened)."""
    directory = directory if directory is not None else scenarios_dir()
    found = {}
    for path in sorted(directory.glob(f"{_SCENARIO_PREFIX}*.py")):
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        except (OSError, SyntaxError):
            doc = ""
        summary = " ".join(doc.strip().split("\n\n")[0].split())
        found[path.stem[len(_SCENARIO_PREFIX):]] = textwrap.shorten(summary, width=100, placeholder=" ...")
    return found


def _scenario_listing(scenarios: Mapping[str, str]) -> str:
    if not scenarios:
        return f"  (no {_SCENARIO_PREFIX}*.py modules found in {scenarios_dir()})"
    width = max(len(name) for name in scenarios)
    return "\n".join(f"  {name:<{width}}  {doc}" for name, doc in scenarios.items())


def _spec_type(option: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        module, sep, attribute = text.partition(":")
        if not sep or not module or not attribute:
            raise argparse.ArgumentTypeError(f"expected 'package.module:attribute', received {text!r}")
        return text

    parse.__name__ = option
    return parse


def _workers_type(text: str) -> str:
    if text == "auto":
        return text
    try:
        if int(text, 10) >= 1:
            return str(int(text, 10))
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected 'auto' or a positive integer, received {text!r}")


def build_parser() -> argparse.ArgumentParser:
    """The `curriculum-harness` argument parser (subcommands `gate`, `simulate`, `run`, `list`, `cleanup`)."""
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description=_wrap("Gate a curriculum with the scenario suites, or look at what one does on simulated "
            "students: run a simulation with metrics, plots and a summary, or run one suite."),
        epilog=f"`{_PROG} COMMAND --help` explains each command's options.",
        formatter_class=_Formatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    gate = commands.add_parser(
        "gate",
        usage=f"{_PROG} gate [-h] [--curriculum MODULE:FACTORY] [--curriculum-env MODULE:CLASS] [--seeds N] "
        "[--base-seed B] [--junitxml PATH] [--report PATH] [--margins PATH] [--expect PATH] [-n WORKERS] "
        "[--learners] [-- PYTEST_ARGS ...]",
        help="run the installed scenario suites on a curriculum; exit 0 if the gate passes, 1 if it fails",
        description=_wrap("Run every scenario suite installed with the harness (pytest --pyargs harness.scenarios, "
            "with the harness's own pytest settings) on the built-in curriculum or on yours, from any directory "
            "(the current directory is on the import path, as with `python -m pytest`). Exit code 0: the gate "
            "passed (with --expect: every test ended as expected); 1: it failed; 2: bad arguments. Arguments "
            "after `--` go to pytest (e.g. -- -x -k eviction)."),
        formatter_class=_Formatter,
        epilog="examples:\n"
        f"  {_PROG} gate                                          # the built-in curriculum\n"
        f"  {_PROG} gate --curriculum mypkg.curricula:make_curriculum --report gate.md\n"
        f"  {_PROG} gate --curriculum mypkg.curricula:make_curriculum --expect gate-expected.toml\n\n"
        "the same run through pytest (your project's pytest settings apply):\n"
        "  pytest --pyargs harness.scenarios --gate-curriculum=mypkg.curricula:make_curriculum",
    )
    gate.add_argument("--curriculum", type=_spec_type("--curriculum"), default=None, metavar="MODULE:FACTORY",
                      help="FACTORY(config: CurriculumConfig) builds the curriculum under test (default: the "
                      "built-in curriculum.Curriculum); what it must offer: docs/protocol.md")
    gate.add_argument("--curriculum-env", type=_spec_type("--curriculum-env"), default=None, metavar="MODULE:CLASS",
                      help="the env wrapper under test instead of curriculum.CurriculumEnv (same constructor)")
    gate.add_argument("--seeds", type=_positive, default=None, metavar="N",
                      help="sweep: run every seeded suite over base seeds 0..N-1 (default: base seed 0 only)")
    gate.add_argument("--base-seed", type=_non_negative, default=None, metavar="B",
                      help="run the seeded suites at base seed B instead of 0")
    gate.add_argument("--junitxml", type=Path, default=None, metavar="PATH", help="also write a JUnit XML report")
    gate.add_argument("--report", type=Path, default=None, metavar="PATH",
                      help="write a markdown report (per suite: passed, failed with its numbers, skipped with the "
                      "reason; the worst margin of every check), e.g. for $GITHUB_STEP_SUMMARY")
    gate.add_argument("--margins", type=Path, default=None, metavar="PATH",
                      help="also write every check's worst value and margin as JSON")
    gate.add_argument("--expect", type=Path, default=None, metavar="PATH",
                      help="a TOML file of expected outcomes ([[expect]] test = glob, outcome = passed|failed|skipped, "
                      "match = substring of the message); the gate then passes when every test ends as expected")
    gate.add_argument("-n", "--workers", type=_workers_type, default="auto", metavar="WORKERS",
                      help="pytest-xdist worker processes: 'auto' (one per CPU and one more: the suites often "
                           "wait) or a number (1: no worker processes)")
    gate.add_argument("--learners", action="store_true", default=False,
                      help="also run the real-learner tier (needs the [learners] extra)")

    simulate = commands.add_parser(
        "simulate",
        help="drive a curriculum with a simulated student; write metrics.jsonl, plots and a summary",
        description=_wrap("Drive a curriculum with a TaskDependencySimulator student on a prerequisite chain "
            "(task i needs task i-1), optionally with impossible tasks, through one of the runners. Writes "
            "OUT/metrics.jsonl (one metric dict per epoch, named like real training: metric/*, overview/*, "
            "env_curriculum_stats/*, env_task_dependency/*), PNG plots, and prints a summary table."),
        formatter_class=_Formatter,
        epilog="runners:\n"
        "  direct      get_task/update loop feeding the stats pipeline (fastest)\n"
        "  single      one CurriculumEnv-wrapped TaskDependencyEnv, as in real training\n"
        "  vectorized  --envs envs under pufferlib (--backend, --tracking); under Multiprocessing every\n"
        "              worker process has its own copy of the student\n\n"
        "example:\n"
        f"  {_PROG} simulate --tasks 10 --algorithm learning_progress --epochs 500 "
        "--episodes-per-epoch 100 --out runs/lp",
    )
    simulate.add_argument("--tasks", type=_positive, default=10, metavar="N",
                          help="learnable tasks in the prerequisite chain")
    simulate.add_argument("--impossible", type=_non_negative, default=0, metavar="N",
                          help="impossible tasks added beside the learnable ones (then the learnable tasks are "
                          "independent, labelled 'learnable', as in the impossible-tasks scenario)")
    simulate.add_argument("--impossible-mode", type=_choice_type("impossible mode", IMPOSSIBLE_MODES),
                          default="zero", metavar="{" + ",".join(IMPOSSIBLE_MODES) + "}",
                          help="reward of impossible tasks: always 0, or a constant plus noise")
    simulate.add_argument("--algorithm", type=_choice_type("algorithm", ALGORITHMS), default="learning_progress",
                          metavar="{" + ",".join(ALGORITHMS) + "}",
                          help="how tasks are sampled: uniform random, learning progress, or staged progression "
                          "(one stage per chain task, in order)")
    simulate.add_argument("--pool", type=_positive, default=32, metavar="N",
                          help="active tasks in the curriculum pool (num_active_tasks)")
    simulate.add_argument("--epochs", type=_positive, default=500, metavar="N", help="epochs to run")
    simulate.add_argument("--episodes-per-epoch", type=_positive, default=100, metavar="N",
                          help="episodes per epoch; one metrics line is written per epoch")
    simulate.add_argument("--seed", type=_non_negative, default=0, metavar="N",
                          help="seed of the student and the curriculum")
    simulate.add_argument("--runner", type=_choice_type("runner", RUNNERS), default="direct",
                          metavar="{" + ",".join(RUNNERS) + "}", help="integration level (see below)")
    simulate.add_argument("--envs", type=_positive, default=8, metavar="N",
                          help="environments of the vectorized runner (other runners ignore it)")
    simulate.add_argument("--workers", type=_positive, default=None, metavar="N",
                          help="worker processes of the Multiprocessing backend (default: as many as fit the "
                          "CPU cores and divide --envs)")
    simulate.add_argument("--backend", type=_choice_type("backend", BACKENDS), default="Serial",
                          metavar="{" + ",".join(BACKENDS) + "}", help="pufferlib backend of the vectorized runner")
    simulate.add_argument("--tracking", type=_choice_type("tracking", TRACKINGS), default="shared",
                          metavar="{" + ",".join(TRACKINGS) + "}",
                          help="vectorized runner: every worker writes a shared-memory tracker, or the main "
                          "process records every completion and broadcasts stage changes")
    simulate.add_argument("--out", type=Path, default=None, metavar="DIR",
                          help="output directory, empty or new (default: runs/<name made of every option that "
                          "changes the run>, e.g. runs/learning_progress-10tasks-pool32-direct-500x100-seed0)")
    simulate.add_argument("--overwrite", action="store_true", default=False,
                          help="reuse a non-empty --out: first remove the metrics and plots an earlier run wrote "
                          "there (other files are kept)")
    simulate.add_argument("--plot", action=argparse.BooleanOptionalAction, default=True,
                          help="write PNG plots into the output directory")
    simulate.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                          help="show a progress bar on stderr")

    scenarios = available_scenarios()
    run = commands.add_parser(
        "run",
        usage=f"{_PROG} run [-h] [--seed N] [--out DIR] [--plot | --no-plot] SCENARIO [-- PYTEST_ARGS ...]",
        help="run one scenario module of the gate through pytest",
        description=_wrap(f"Run scenarios/{_SCENARIO_PREFIX}<SCENARIO>.py through pytest and exit with pytest's "
            "exit code. Arguments after `--` go to pytest (e.g. -- --gate-curriculum=mypkg.mod:factory -x)."),
        formatter_class=_Formatter,
        epilog="available scenarios:\n" + _scenario_listing(scenarios),
    )
    run.add_argument("scenario", metavar="SCENARIO", help="scenario name (see the list below)")
    run.add_argument("--seed", type=_non_negative, default=None, metavar="N",
                     help="run the seeded tests with this seed only (golden snapshots are compared only "
                     "without --seed, at the pinned seed)")
    run.add_argument("--out", type=Path, default=None, metavar="DIR",
                     help="write junit.xml and the metrics of every runner-driven run (one JSONL each) here")
    run.add_argument("--plot", action=argparse.BooleanOptionalAction, default=False,
                     help="plot every recorded run into DIR/<run>/ (needs --out)")

    run.add_argument("--overwrite", action="store_true", default=False,
                     help="reuse a non-empty --out: first remove what an earlier run wrote there")

    listing = commands.add_parser("list", help="list the scenarios `run` accepts", formatter_class=_Formatter,
                                  description="List the scenario modules of the gate, with what each protects.")
    cleanup = commands.add_parser(
        "cleanup", help="remove shared-memory segments and lock files left by curricula whose creator died",
        formatter_class=_Formatter,
        description=_wrap("Remove the shared-memory segments (and their lock files) of shared curricula whose "
            "creating process no longer runs, e.g. after a SIGKILL or a container stop. Segments of running "
            "processes are left alone."),
    )
    for command in (gate, simulate, run, listing, cleanup):
        command.set_defaults(command_parser=command)  # usage errors after parsing name the subcommand
    return parser


def _check_output_dir(parser: argparse.ArgumentParser, option: str, path: Path) -> Path:
    """Create `path` and prove it writable now, so a long run cannot fail at its end."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".curriculum-harness-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        parser.error(f"argument {option}: cannot write to {str(path)!r} ({reason}); expected a writable directory")
    return path


def _owned_outputs(path: Path) -> list[Path]:
    """What an earlier `simulate` or `run` wrote into `path`: metrics, JUnit report, plots,
    and the per-run plot folders of `run --plot` (folders holding only plots)."""
    from harness.plots import PLOT_FILES

    owned = [path / name for name in (*OWNED_OUTPUTS, *PLOT_FILES) if (path / name).exists()]
    metrics = path / "metrics"
    if metrics.is_dir():
        for run in metrics.glob("*.jsonl"):
            folder = path / run.stem
            if folder.is_dir() and all(child.name in PLOT_FILES for child in folder.iterdir()):
                owned.append(folder)
    return owned


def _prepare_output_dir(parser: argparse.ArgumentParser, option: str, path: Path, *, overwrite: bool) -> Path:
    """A writable, empty output directory: a non-empty one is refused unless `overwrite`, which
    removes what an earlier run wrote there (and nothing else), so no stale plot survives."""
    metrics = path / METRICS_FILE
    if metrics.is_dir():
        parser.error(f"argument {option}: {str(metrics)!r} is a directory; expected {METRICS_FILE} to be a file "
                     "the run writes (remove or rename that directory)")
    if path.is_dir() and any(path.iterdir()):
        if not overwrite:
            parser.error(f"argument {option}: {str(path)!r} is not empty; expected a new or empty directory "
                         "(pass --overwrite to replace an earlier run's metrics and plots there)")
        for owned in _owned_outputs(path):
            try:
                shutil.rmtree(owned) if owned.is_dir() and not owned.is_symlink() else owned.unlink()
            except OSError as exc:
                parser.error(f"argument {option}: cannot remove the earlier run's {str(owned)!r} "
                             f"({exc.strerror or type(exc).__name__})")
    return _check_output_dir(parser, option, path)


def default_run_name(args: argparse.Namespace) -> str:
    """A run name made of every `simulate` option that changes the run, so runs that differ
    never share a folder: algorithm, task space, pool, runner (with its backend, envs,
    workers and tracking), epochs x episodes per epoch, seed."""
    parts = [args.algorithm, f"{args.tasks}tasks"]
    if args.impossible:
        parts.append(f"{args.impossible}impossible-{args.impossible_mode}")
    parts += [f"pool{args.pool}", args.runner]
    if args.runner == "vectorized":
        parts += [args.backend, f"{args.envs}envs", args.tracking]
        if args.backend == "Multiprocessing" and args.workers is not None:
            parts.append(f"{args.workers}workers")
    parts += [f"{args.epochs}x{args.episodes_per_epoch}", f"seed{args.seed}"]
    return "-".join(parts)


# ---------------------------------------------------------------------------------- progress
class ProgressBar:
    """A one-line progress bar on a stream (stderr): redrawn in place on a terminal, every 10% otherwise."""

    WIDTH: Final = 28

    def __init__(self, total: int, *, unit: str = "episodes", stream: TextIO | None = None,
                 enabled: bool = True, min_interval: float = 0.1) -> None:
        self.total = max(1, int(total))
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.min_interval = min_interval
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self._start = time.perf_counter()
        self._last_draw = -math.inf
        self._last_decile = -1
        self._done = 0

    def update(self, done: int) -> None:
        """Report `done` units finished so far."""
        self._done = min(int(done), self.total)
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.interactive:
            if now - self._last_draw >= self.min_interval or self._done >= self.total:
                self._last_draw = now
                self.stream.write("\r" + self._line(now))
                self.stream.flush()
        else:
            decile = self._done * 10 // self.total
            if decile > self._last_decile:
                self._last_decile = decile
                self.stream.write(self._line(now) + "\n")
                self.stream.flush()

    def _line(self, now: float) -> str:
        fraction = self._done / self.total
        filled = int(round(fraction * self.WIDTH))
        elapsed = max(now - self._start, 1e-9)
        rate = self._done / elapsed
        eta = (self.total - self._done) / rate if rate > 0 else math.inf
        eta_text = _duration(eta) if math.isfinite(eta) else "?"
        return (f"[{'#' * filled}{'-' * (self.WIDTH - filled)}] {fraction:4.0%} "
                f"{self._done:,}/{self.total:,} {self.unit}  {_rate(rate)}/s  ETA {eta_text} ")

    def close(self) -> None:
        """End the line (on a terminal) so later output starts on its own line."""
        if self.enabled and self.interactive:
            self.stream.write("\r" + self._line(time.perf_counter()) + "\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def _rate(value: float) -> str:
    for divisor, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= divisor:
            return f"{value / divisor:.1f}{suffix}"
    return f"{value:.0f}"


# ---------------------------------------------------------------------------------- simulate
def _build_space(args: argparse.Namespace) -> Any:
    from harness.task_spaces import chain_task_space, impossible_task_space

    if args.impossible:
        return impossible_task_space(num_learnable=args.tasks, num_impossible=args.impossible,
                                     mode=args.impossible_mode, seed=args.seed)
    return chain_task_space(num_tasks=args.tasks, seed=args.seed)


def _build_config(args: argparse.Namespace, space: Any) -> Any:
    from curriculum import (
        BucketedTaskGenerator,
        CurriculumConfig,
        LearningProgressConfig,
        Stage,
        StagedProgressionConfig,
        UniformConfig,
    )

    if args.algorithm == "staged":
        stages = [Stage(f"task_{i}", BucketedTaskGenerator({"task_index": i}, {}, label=f"task_{i}", seed=args.seed))
                  for i in range(args.tasks)]
        return CurriculumConfig(algorithm=StagedProgressionConfig(stages=stages), num_active_tasks=args.pool,
                                seed=args.seed)
    algorithm = UniformConfig() if args.algorithm == "uniform" else LearningProgressConfig()
    return CurriculumConfig(task_generator=space.generator, algorithm=algorithm, num_active_tasks=args.pool,
                            seed=args.seed)


def _simulate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.algorithm == "staged" and args.impossible:
        parser.error(f"argument --algorithm: 'staged' runs one stage per chain task and needs --impossible 0, "
                     f"received --impossible {args.impossible}")
    if args.runner == "vectorized" and args.tracking == "centralized" and args.algorithm == "learning_progress":
        parser.error("argument --tracking: 'centralized' supports --algorithm staged or uniform (worker copies cannot "
                     "follow a pool the main process changes by eviction), received --algorithm learning_progress; "
                     "use --tracking shared")
    if args.workers is not None and args.envs % args.workers:
        parser.error(f"argument --workers: expected a divisor of --envs {args.envs}, received {args.workers}")
    if args.plot:
        _require_gate_extra(parser, "matplotlib", "argument --plot")
    out = args.out if args.out is not None else Path("runs") / default_run_name(args)
    _prepare_output_dir(parser, "--out", out, overwrite=args.overwrite)

    from curriculum import Curriculum, gini_coefficient
    from harness import runners
    from harness.recorder import MetricsRecorder

    space = _build_space(args)
    config = _build_config(args, space)
    episodes = args.epochs * args.episodes_per_epoch
    progress = ProgressBar(episodes, enabled=args.progress)
    runner = _describe_runner(args)
    print(f"{args.algorithm} on {_describe_space(args)}, seed {args.seed}, {runner} runner: "
          f"{episodes:,} episodes", file=sys.stderr)

    def on_epoch(metrics: Mapping[str, Any]) -> None:
        progress.update(int(metrics.get("metric/agent_step", 0)))

    started = time.perf_counter()
    with MetricsRecorder(out / METRICS_FILE) as recorder:
        if args.runner == "vectorized":
            result = runners.run_vectorized(
                config, _SpaceFactory(args), backend=args.backend, tracking=args.tracking, num_envs=args.envs,
                num_workers=args.workers, episodes=episodes, epoch_length=args.episodes_per_epoch,
                recorder=recorder, on_epoch=on_epoch,
            )
        else:
            curriculum = Curriculum(config)
            try:
                run = runners.run_direct if args.runner == "direct" else runners.run_single_env
                result = run(curriculum, space, episodes=episodes, epoch_length=args.episodes_per_epoch,
                             recorder=recorder, on_epoch=on_epoch)
            finally:
                curriculum.close()
    elapsed = time.perf_counter() - started
    progress.close()

    plots: list[Path] = []
    if args.plot:
        from harness.plots import write_plots

        plots = write_plots(result.recorder, out, title=f"{args.algorithm}, {_describe_space(args)}, seed {args.seed}",
                            runner=f"{runner} runner")
    print(_summary(args, space, result, elapsed, out, plots, gini_coefficient))
    return 0


class _SpaceFactory:
    """Picklable `() -> TaskSpace` for the vectorized runner (workers build their own student)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.tasks, self.impossible, self.mode, self.seed = args.tasks, args.impossible, args.impossible_mode, args.seed

    def __call__(self) -> Any:
        return _build_space(argparse.Namespace(tasks=self.tasks, impossible=self.impossible,
                                               impossible_mode=self.mode, seed=self.seed))


def _describe_runner(args: argparse.Namespace) -> str:
    if args.runner == "vectorized":
        workers = f", {args.workers} workers" if args.backend == "Multiprocessing" and args.workers else ""
        return f"vectorized {args.backend}, {args.envs} envs{workers}, {args.tracking} tracking"
    return {"direct": "direct", "single": "single env"}[args.runner]


def _describe_space(args: argparse.Namespace) -> str:
    if args.impossible:
        return f"{args.tasks} learnable + {args.impossible} {args.impossible_mode}-impossible tasks"
    return f"a {args.tasks}-task chain"


def _summary(args: argparse.Namespace, space: Any, result: Any, elapsed: float, out: Path, plots: list[Path],
             gini: Callable[[Sequence[float]], float]) -> str:
    from harness.plots import PERFORMANCE_PREFIX

    last = result.recorder.last
    # the learnable tasks are the first --tasks ones; impossible tasks can never be mastered
    learnable = [last.get(f"{PERFORMANCE_PREFIX}task_{i}") for i in range(args.tasks)]
    performance = [v for v in learnable if isinstance(v, (int, float))]
    threshold = space.simulator.mastery_threshold
    mean_performance = sum(performance) / len(performance) if performance else math.nan
    mastered = sum(1 for v in performance if v >= threshold)
    impossible = f"; {args.impossible} impossible tasks not counted" if args.impossible else ""
    counts: Counter = result.samples_by_label
    total = sum(counts.values())
    rows = [
        ("episodes", f"{result.episodes:,} ({len(result.recorder.epochs):,} epochs of {args.episodes_per_epoch:,})"),
        ("completions/s", f"{result.episodes / elapsed:,.0f}" if elapsed > 0 else "n/a"),
        ("final mean performance", f"{mean_performance:.3f} (over the {len(performance)} learnable tasks, last "
                                   f"epoch{impossible})"),
        ("tasks mastered", f"{mastered} of {len(performance)} learnable (performance >= {threshold:g})"),
        ("sampling Gini", f"{gini(list(counts.values())):.3f} (episodes per label, whole run; 0 = even)"),
        ("metrics", str(out / METRICS_FILE)),
    ]
    if plots:
        rows.append(("plots", f"{len(plots)} PNGs in {plots[0].parent} ({', '.join(p.stem for p in plots)})"))
    width = max(len(name) for name, _ in rows)
    lines = ["", "Summary", *(f"  {name:<{width}}  {value}" for name, value in rows)]
    top = counts.most_common(5)
    if top:
        label_width = max(5, *(len(label) for label, _ in top))
        lines += ["", f"Top labels by samples (of {len(counts)})",
                  f"  {'label':<{label_width}}  {'samples':>10}  {'share':>6}"]
        lines += [f"  {label:<{label_width}}  {count:>10,}  {count / total:>6.1%}" for label, count in top]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- gate
def _require_gate_extra(parser: argparse.ArgumentParser, module: str, what: str) -> None:
    """A usage error naming the `[gate]` extra when `module` (one of its dependencies) is missing."""
    from harness.golden import PROJECT_NAME

    if importlib.util.find_spec(module) is None:
        parser.error(f"{what} needs {module}, which comes with the gate extra: pip install '{PROJECT_NAME}[gate]'")


def _gate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from harness import gate

    _require_gate_extra(parser, "pytest", "the gate")
    if args.seeds is not None and args.base_seed is not None:
        parser.error(f"argument --base-seed: a sweep (--seeds {args.seeds}) runs base seeds 0..{args.seeds - 1}; "
                     f"expected one of --seeds and --base-seed, received both")
    expectations = None
    if args.expect is not None:
        try:
            expectations = gate.load_expectations(args.expect)
        except gate.ExpectationError as exc:
            parser.error(f"argument --expect: {exc}")
    for option, path in (("--report", args.report), ("--junitxml", args.junitxml), ("--margins", args.margins)):
        if path is not None:
            _check_output_dir(parser, option, path.parent if str(path.parent) else Path("."))
            if path.is_dir():
                parser.error(f"argument {option}: {str(path)!r} is a directory; expected a file path")
    try:
        suites = gate.suites_dir()
    except FileNotFoundError as exc:
        print(f"{_PROG} gate: error: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    with tempfile.TemporaryDirectory(prefix="curriculum-gate-") as scratch:
        junitxml = args.junitxml.resolve() if args.junitxml is not None else Path(scratch) / "junit.xml"
        margins = args.margins.resolve() if args.margins is not None else Path(scratch) / "margins.json"
        command = gate.pytest_command(
            [gate.SUITES_PACKAGE], pyargs=True, rootdir=suites.parent, curriculum=args.curriculum,
            curriculum_env=args.curriculum_env, seeds=args.seeds, base_seed=args.base_seed, workers=args.workers,
            junitxml=junitxml, margins=margins, learners=args.learners, extra=args.pytest_args,
        )
        print("$ " + " ".join(command), file=sys.stderr, flush=True)
        # Hypothesis keeps its example database in the scratch folder, not in the caller's directory
        env = {**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(Path(scratch) / "hypothesis")}
        started = time.perf_counter()
        code = subprocess.run(command, env=env).returncode
        elapsed = time.perf_counter() - started
        if code == pytest_exit_codes()["USAGE_ERROR"]:
            print(f"{_PROG} gate: error: pytest refused the arguments (its message is above)", file=sys.stderr)
            return _EXIT_USAGE
        outcome = gate.read_outcome(junitxml, margins, exit_code=code)
    outcome.seconds = outcome.seconds or elapsed
    outcome.curriculum, outcome.curriculum_env = args.curriculum, args.curriculum_env
    outcome.seeds = (f"base seeds 0-{args.seeds - 1}" if args.seeds else f"base seed {args.base_seed or 0}")
    mismatches = gate.compare_outcomes(outcome.tests, expectations) if expectations is not None else None
    report = gate.render_report(outcome, mismatches=mismatches, expectations_path=args.expect)
    if args.report is not None:
        args.report.write_text(report + "\n", encoding="utf-8")
    passed = (not mismatches and code in (0, 1)) if mismatches is not None else outcome.passed
    headline = report.splitlines()[0].removeprefix("## ")
    print(f"\n{headline}" + (f" (report: {args.report})" if args.report is not None else ""), file=sys.stderr)
    if mismatches:
        for mismatch in mismatches:
            print(f"  {mismatch.test}: expected {mismatch.expected}, got {mismatch.actual}", file=sys.stderr)
    if not outcome.tests:
        print(f"{_PROG} gate: no test of the gate ran (pytest exit code {code})", file=sys.stderr)
        return _EXIT_GATE_FAILED
    return 0 if passed else _EXIT_GATE_FAILED


def pytest_exit_codes() -> dict[str, int]:
    """pytest's exit codes by name (imported lazily: the CLI must start without pytest)."""
    import pytest

    return {code.name: int(code) for code in pytest.ExitCode}


# ---------------------------------------------------------------------------------- run / list
def _run_scenario(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from harness.gate import pytest_command

    directory = scenarios_dir()
    scenarios = available_scenarios(directory)
    name = args.scenario[len(_SCENARIO_PREFIX):] if args.scenario.startswith(_SCENARIO_PREFIX) else args.scenario
    name = name[:-3] if name.endswith(".py") else name
    if name not in scenarios:
        parser.error(f"unknown scenario {args.scenario!r}; expected one of: {', '.join(scenarios) or '(none found)'}"
                     f" (from {directory})")
    if args.plot and args.out is None:
        parser.error("argument --plot: needs --out DIR to write the plots into")
    _require_gate_extra(parser, "pytest", "`run`")
    if args.plot:
        _require_gate_extra(parser, "matplotlib", "argument --plot")
    env = dict(os.environ)
    metrics_dir = junitxml = None
    if args.out is not None:
        from harness.runners import METRICS_DIR_ENV

        out = _prepare_output_dir(parser, "--out", args.out, overwrite=args.overwrite)
        metrics_dir = out / "metrics"
        env[METRICS_DIR_ENV] = str(metrics_dir.resolve())
        junitxml = (out / "junit.xml").resolve()
    command = pytest_command([str(directory / f"{_SCENARIO_PREFIX}{name}.py")], rootdir=directory.parent,
                             base_seed=args.seed, junitxml=junitxml, extra=args.pytest_args)
    print("$ " + " ".join(command), file=sys.stderr)
    code = subprocess.run(command, env=env).returncode
    if metrics_dir is not None:
        runs = sorted(metrics_dir.glob("*.jsonl")) if metrics_dir.is_dir() else []
        print(f"\n{len(runs)} recorded run(s) in {metrics_dir}", file=sys.stderr)
        if args.plot and runs:
            from harness.plots import write_plots

            for path in runs:
                write_plots(path, args.out / path.stem, title=path.stem, runner=f"suite {name}")
            print(f"plots in {args.out}/<run>/", file=sys.stderr)
    return code


def _list(_: argparse.ArgumentParser, __: argparse.Namespace) -> int:
    scenarios = available_scenarios()
    print(f"scenarios in {scenarios_dir()}:")
    print(_scenario_listing(scenarios))
    return 0


# ---------------------------------------------------------------------------------- cleanup
def _cleanup(_: argparse.ArgumentParser, __: argparse.Namespace) -> int:
    from curriculum.memory import remove_orphaned_segments

    removed = remove_orphaned_segments()
    print(f"removed {len(removed)} orphaned shared-memory segment(s) and lock file(s)"
          + (":\n" + "\n".join(f"  {name}" for name in removed) if removed else ""))
    return 0


_COMMANDS: Final = {"gate": _gate, "simulate": _simulate, "run": _run_scenario, "list": _list, "cleanup": _cleanup}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code (2 for bad arguments)."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` goes to pytest (`run`); split it off here, as argparse cannot put a
    # trailing positional list after options reliably.
    pytest_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, pytest_args = argv[:cut], argv[cut + 1:]
    try:
        args = parser.parse_args(argv)
        if pytest_args and args.command not in ("run", "gate"):
            args.command_parser.error(f"unrecognized arguments: -- {' '.join(pytest_args)} (only `run` and `gate` "
                                      "pass arguments after -- to pytest)")
        args.pytest_args = pytest_args
        return _COMMANDS[args.command](args.command_parser, args)
    except SystemExit as exc:  # argparse's usage errors (2) and --help (0)
        return exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        print(f"\n{_PROG}: interrupted (metrics.jsonl holds every epoch finished so far)", file=sys.stderr)
        return 130
    except Exception as exc:  # a curriculum or env refusing the run: say so without a traceback
        from curriculum import CurriculumError

        if not isinstance(exc, CurriculumError):
            raise
        print(f"{_PROG}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
