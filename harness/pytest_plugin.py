"""pytest plugin of the curriculum harness, registered through the `pytest11` entry point.

Options (one group, `curriculum-harness`):
  --curriculum=package.module:factory   gate another curriculum implementation
  --curriculum-env=package.module:Class gate another CurriculumEnv-compatible wrapper
  --scenario-seeds=N                    run every seeded scenario over seeds 0..N-1
Fixtures: `curriculum_factory`, `curriculum_env_class`, `uses_builtin_curriculum`,
`scenario_seed` (parametrised), `golden` (syrupy snapshot stored under `golden/<module>/`),
`check_limit` (asserts a measured number against its limit and records the margin; the
terminal summary lists the worst margin of every check, which is how limits are calibrated).
"""

from __future__ import annotations

import contextlib
import importlib
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from syrupy.terminal import disable_color

from harness.golden import GoldenSnapshotExtension

__all__ = ["load_object", "DEFAULT_SCENARIO_SEEDS", "MARGIN_PROPERTY"]

#: user_properties key under which `check_limit` records measured values (travels with xdist).
MARGIN_PROPERTY = "scenario_limit"

#: Seeds a scenario runs with when no sweep is asked for.
DEFAULT_SCENARIO_SEEDS = (0,)


def load_object(spec: str, option: str) -> Any:
    """Import `package.module:attribute`; a clear usage error otherwise."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise pytest.UsageError(f"{option} expects 'package.module:attribute', received {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise pytest.UsageError(f"{option}: cannot import module {module_name!r} ({exc})") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise pytest.UsageError(f"{option}: module {module_name!r} has no attribute {attribute!r}") from None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("curriculum-harness", "curriculum scenario gate")
    group.addoption(
        "--curriculum",
        default=None,
        metavar="MODULE:FACTORY",
        help="gate this curriculum: FACTORY(config: CurriculumConfig) returns an object satisfying "
        "harness.protocol.CurriculumProtocol (default: the built-in curriculum.Curriculum)",
    )
    group.addoption(
        "--curriculum-env",
        default=None,
        metavar="MODULE:CLASS",
        help="gate this env wrapper instead of curriculum.CurriculumEnv (same constructor signature)",
    )
    group.addoption(
        "--scenario-seeds",
        type=int,
        default=None,
        metavar="N",
        help="run seeded scenarios over seeds 0..N-1 (calibration sweep; default: the pinned seed only)",
    )


#: The objects --curriculum and --curriculum-env name, loaded once at configure time.
_PLUGGED_IN = pytest.StashKey[dict[str, Any]]()


def pytest_configure(config: pytest.Config) -> None:
    seeds = config.getoption("--scenario-seeds", default=None)
    if seeds is not None and seeds < 1:
        raise pytest.UsageError(f"--scenario-seeds expects a positive integer, received {seeds}")
    # A bad spec is a usage error of the whole run (exit code 4), not an error in every test.
    plugged_in: dict[str, Any] = {}
    for option in ("--curriculum", "--curriculum-env"):
        spec = config.getoption(option, default=None)
        if spec is not None:
            plugged_in[option] = load_object(spec, option)
            if not callable(plugged_in[option]):
                raise pytest.UsageError(f"{option}: {spec!r} is not callable")
    config.stash[_PLUGGED_IN] = plugged_in
    if (plugged_in or seeds is not None) and hasattr(config.option, "warn_unused_snapshots"):
        # golden files are not compared in these runs, so they would all count as unused and
        # fail the session; a failure must come from a scenario's own checks
        config.option.warn_unused_snapshots = True
    config.addinivalue_line("markers", "scenario: a scenario of the curriculum gate")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "scenario_seed" in metafunc.fixturenames:
        sweep = metafunc.config.getoption("--scenario-seeds", default=None)
        seeds = list(range(sweep)) if sweep else list(DEFAULT_SCENARIO_SEEDS)
        metafunc.parametrize("scenario_seed", seeds, ids=[f"seed{s}" for s in seeds])


@pytest.fixture(scope="session")
def uses_builtin_curriculum(request: pytest.FixtureRequest) -> bool:
    """True unless --curriculum or --curriculum-env points elsewhere."""
    return request.config.getoption("--curriculum") is None and request.config.getoption("--curriculum-env") is None


@pytest.fixture(scope="session")
def curriculum_factory(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """`factory(config) -> curriculum` for the implementation under test."""
    factory = request.config.stash[_PLUGGED_IN].get("--curriculum")
    if factory is None:
        from curriculum import Curriculum

        return Curriculum
    return factory


@pytest.fixture(scope="session")
def curriculum_env_class(request: pytest.FixtureRequest) -> Any:
    """The env wrapper under test (default `curriculum.CurriculumEnv`)."""
    env_class = request.config.stash[_PLUGGED_IN].get("--curriculum-env")
    if env_class is None:
        from curriculum import CurriculumEnv

        return CurriculumEnv
    return env_class


@pytest.fixture
def golden(snapshot: Any, request: pytest.FixtureRequest, uses_builtin_curriculum: bool) -> Callable[[Any], None]:
    """`golden(metrics)` compares against `golden/<module>/<test>.json`.

    Golden files describe the built-in curriculum at the pinned seed: with a plug-in
    curriculum or during a seed sweep, the comparison is not made (the scenario's own
    statistical checks still run).
    """
    sweeping = request.config.getoption("--scenario-seeds") is not None
    extension = snapshot.use_extension(GoldenSnapshotExtension)

    def check(metrics: Any) -> None:
        # Compared and explained here, not by a bare `assert`: pytest does not rewrite the
        # asserts of a plugin installed in editable mode, which would hide syrupy's diff.
        if uses_builtin_curriculum and not sweeping and not extension == metrics:
            reporter = request.config.pluginmanager.get_plugin("terminalreporter")
            plain = request.config.option.no_colors or not getattr(reporter, "hasmarkup", False)
            with disable_color() if plain else contextlib.nullcontext():
                diff = extension.get_assert_diff(diff_mode=request.config.option.diff_mode)
            where = Path(extension.executions[extension.num_executions - 1].snapshot_location)
            if where.is_relative_to(request.config.rootpath):
                where = where.relative_to(request.config.rootpath)
            pytest.fail(
                f"golden snapshot {where} differs (- golden, + this run); run with --snapshot-update if the "
                "change is intended:\n" + "\n".join(diff),
                pytrace=False,
            )

    return check


@pytest.fixture
def check_limit(request: pytest.FixtureRequest, scenario_seed: int) -> Callable[..., None]:
    """`check_limit(name, measured, limit, *, upper=True, what="...")`.

    Fails with "<what> <measured>, limit <limit>, seed <seed>" when `measured` is above an upper
    limit (or below a lower one), and records the margin for the end-of-run summary.
    """

    def check(name: str, measured: float, limit: float, *, upper: bool = True, what: str, fmt: str = ".4g") -> None:
        measured = float(measured)
        request.node.user_properties.append((MARGIN_PROPERTY, (name, measured, float(limit), upper, scenario_seed)))
        ok = measured <= limit if upper else measured >= limit
        bound = "at most" if upper else "at least"
        assert ok, f"{what} {measured:{fmt}}, limit {bound} {limit:{fmt}}, seed {scenario_seed}"

    return check


_margins: dict[str, list[tuple[float, float, bool, int]]] = defaultdict(list)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for key, value in report.user_properties:
        if key == MARGIN_PROPERTY:
            name, measured, limit, upper, seed = value
            _margins[name].append((measured, limit, upper, seed))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _margins:
        return
    terminalreporter.section("scenario limits: worst measured value per check")
    for name in sorted(_margins):
        runs = _margins[name]
        measured, limit, upper, seed = max(runs, key=lambda r: r[0] - r[1] if r[2] else r[1] - r[0])
        margin = (limit - measured) if upper else (measured - limit)
        mean = sum(r[0] for r in runs) / len(runs)
        terminalreporter.write_line(
            f"{name}: worst {measured:.4g} (seed {seed}) vs limit {'<=' if upper else '>='} {limit:.4g}, "
            f"margin {margin:.4g}, mean {mean:.4g} over {len(runs)} run(s)"
        )


@pytest.fixture
def require_capability(uses_builtin_curriculum: bool) -> Callable[[bool, str], None]:
    """`require_capability(present, why)`: a plug-in without an optional capability skips the
    scenario with the reason; the built-in curriculum must have every capability (it fails)."""

    def require(present: bool, why: str) -> None:
        if present:
            return
        assert not uses_builtin_curriculum, f"the built-in curriculum lost a capability the gate relies on: {why}"
        pytest.skip(why)

    return require
