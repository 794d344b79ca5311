"""Fixtures and hooks of the scenario suites (imported by `scenarios/conftest.py` only).

They exist only where a suite's conftest imports them, so an unrelated test session never
sees them. Options come from `harness.pytest_plugin`.

- `curriculum_factory`, `curriculum_env_class`, `uses_builtin_curriculum`: the implementation
  under test (`--gate-curriculum`, `--gate-curriculum-env`) or the built-in one.
- `scenario_seed`: the base seed (parametrised: one, or a sweep with `--gate-seeds`).
- `check_limit(name, measured, limit, ...)`: one measured number against its limit.
- `check_statistic(name, values, limit, seeds=..., ...)`: the mean (or median) of a number measured over
  several seeds against its limit (how statistical checks are judged, see `harness.checks`).
- `golden(metrics)`: compare with `golden/<module>/<test>.json` (built-in, base seed 0 only).
- `require_capability(present, why)`: a plug-in without an optional capability skips.
- `oracle`: `oracle(...)` makes an `harness.oracle.AccountingOracle`; a test that made one and
  never called its `verify()` fails at teardown.
- `judge(check_name)`: runs a statistical check of `harness.experiments.CHECKS` the way the
  gate does: its setup on the check's seeds for the base seed (the first seed watched and
  verified by the accounting oracle; runs shared by the checks of one setup), the mean
  against the limit, the aggregate into the golden file.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.checks import format_statistic_failure, statistic_of
from harness.pytest_plugin import (
    MARGIN_PROPERTY,
    OPTION_CURRICULUM,
    OPTION_CURRICULUM_ENV,
    OPTION_LEARNERS,
    PLUGGED_IN,
    base_seeds,
    golden_compared,
)

__all__ = [
    "pytest_xdist_auto_num_workers",
    "pytest_generate_tests",
    "pytest_ignore_collect",
    "pytest_runtest_makereport",
    "uses_builtin_curriculum",
    "curriculum_factory",
    "curriculum_env_class",
    "golden",
    "check_limit",
    "check_statistic",
    "require_capability",
    "suite_capabilities",
    "oracle",
    "judge",
    "setup_runs",
]

#: Folder of the real-learner tier, collected only with `--gate-learners`.
LEARNER_TIER = "learners"
RAY_SUITE = "test_ray_service.py"  # collected only where Ray is installed (the [ray] extra)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "scenario_seed" in metafunc.fixturenames:
        seeds = base_seeds(metafunc.config)
        metafunc.parametrize("scenario_seed", seeds, ids=[f"seed{s}" for s in seeds])


@pytest.hookimpl(optionalhook=True)  # (a hook of pytest-xdist: unknown when it is not loaded)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` in a clone (`make gate`): `harness.gate.auto_workers()`, as the installed gate."""
    from harness.gate import auto_workers

    return auto_workers()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name == LEARNER_TIER and collection_path.is_dir() \
            and not config.getoption(OPTION_LEARNERS, default=False):
        return True
    if collection_path.name == RAY_SUITE and importlib.util.find_spec("ray") is None:
        return True  # the [ray] extra is not installed (collected, its skipped tests would leave golden files unused)
    return None


@pytest.fixture(scope="session")
def uses_builtin_curriculum(request: pytest.FixtureRequest) -> bool:
    """True unless --gate-curriculum or --gate-curriculum-env points elsewhere."""
    return not request.config.stash[PLUGGED_IN]


@pytest.fixture(scope="session")
def curriculum_factory(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """`factory(config) -> curriculum` for the implementation under test."""
    factory = request.config.stash[PLUGGED_IN].get(OPTION_CURRICULUM)
    if factory is None:
        from curriculum import Curriculum

        return Curriculum
    return factory


@pytest.fixture(scope="session")
def curriculum_env_class(request: pytest.FixtureRequest) -> Any:
    """The env wrapper under test (default `curriculum.CurriculumEnv`)."""
    env_class = request.config.stash[PLUGGED_IN].get(OPTION_CURRICULUM_ENV)
    if env_class is None:
        from curriculum import CurriculumEnv

        return CurriculumEnv
    return env_class


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[Any], None]:
    """`golden(metrics)` compares against `golden/<module>/<test>.json`.

    Golden files describe the built-in curriculum at base seed 0: with a plug-in, a sweep or
    another base seed the comparison is not made (the scenario's own checks still run), and
    syrupy is not even asked, so it neither reports the golden files as unused nor deletes them.
    """
    if not golden_compared(request.config):
        return lambda metrics: None

    from syrupy.terminal import disable_color

    from harness.golden import GoldenSnapshotExtension

    extension = request.getfixturevalue("snapshot").use_extension(GoldenSnapshotExtension)

    def check(metrics: Any) -> None:
        # Compared and explained here, not by a bare `assert`: pytest does not rewrite the
        # asserts of an installed module, which would hide syrupy's diff.
        if not extension == metrics:
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
    """`check_limit(name, measured, limit, *, upper=True, what="...", seed=None)`.

    Fails with "<what> <measured>, limit <limit>, seed <seed>" when `measured` is above an upper
    limit (or below a lower one), and records the margin for the end-of-run summary. `seed`
    names the run's own seed when it differs from the base seed.
    """

    def check(name: str, measured: float, limit: float, *, upper: bool = True, what: str, fmt: str = ".4g",
              seed: int | None = None) -> None:
        measured = float(measured)
        seed = scenario_seed if seed is None else seed
        request.node.user_properties.append((MARGIN_PROPERTY, (name, measured, float(limit), upper, seed)))
        ok = measured <= limit if upper else measured >= limit
        bound = "at most" if upper else "at least"
        assert ok, f"{what} {measured:{fmt}}, limit {bound} {limit:{fmt}}, seed {seed}"

    return check


@pytest.fixture
def check_statistic(request: pytest.FixtureRequest, scenario_seed: int) -> Callable[..., None]:
    """`check_statistic(name, values, limit, *, seeds, upper=True, what="...", statistic="mean")`.

    Judges the mean (or median) of `values` (one per seed in `seeds`) against `limit` and records it for
    the summary; a failure states the mean, the seeds, the limit and the worst seed's value.
    """

    def check(name: str, values: Sequence[float], limit: float, *, seeds: Sequence[int], upper: bool = True,
              what: str, fmt: str = ".4g", statistic: str = "mean") -> None:
        values = [float(v) for v in values]
        assert len(values) == len(seeds) and values, f"{name}: {len(values)} values for {len(seeds)} seeds"
        measured = statistic_of(values, statistic)
        where = f"{statistic} over seeds {seeds[0]}-{seeds[-1]}"
        request.node.user_properties.append(
            (MARGIN_PROPERTY, (name, measured, float(limit), upper, scenario_seed, where)))
        ok = measured <= limit if upper else measured >= limit
        assert ok, format_statistic_failure(what, values, seeds, limit, upper=upper, fmt=fmt, statistic=statistic)

    return check


#: (suite, factory, env class) -> why the suite skips on that curriculum (None: it runs).
_SUITE_SKIPS: dict[tuple[str, Any, Any], str | None] = {}


def _suite_skip(suite: str, factory: Any, env_class: Any) -> str | None:
    """Why `suite` cannot run on what `factory` builds, judged by `harness.protocol.SUITES` on
    a probe curriculum of the first config kind the suite hands its factory."""
    from curriculum.errors import CurriculumConfigError
    from harness.protocol import SUITES, _sample_config, suite_readiness

    if not SUITES[suite].configs:  # checks the library alone: runs on any curriculum
        return None
    key = (suite, factory, env_class)
    if key not in _SUITE_SKIPS:
        kind = SUITES[suite].configs[0]
        try:
            probe = factory(_sample_config(kind))
        except (CurriculumConfigError, NotImplementedError) as error:
            _SUITE_SKIPS[key] = f"the factory refuses a {kind} config: {type(error).__name__}: {error}"
        else:
            readiness = [r for r in suite_readiness(probe, factory=factory, env_class=env_class) if r.suite == suite]
            _SUITE_SKIPS[key] = "; ".join(readiness[0].skips_because) or None
            close = getattr(probe, "close", None)
            if callable(close):
                close()
    return _SUITE_SKIPS[key]


@pytest.fixture(autouse=True)
def suite_capabilities(request: pytest.FixtureRequest, uses_builtin_curriculum: bool) -> None:
    """A suite whose required capabilities (`harness.protocol.SUITES`) the curriculum under test
    lacks skips with the reason; the built-in curriculum must have them all (it fails)."""
    from harness.protocol import SUITES

    module = request.module.__name__.rsplit(".", 1)[-1]
    suite = module[len("test_"):] if module.startswith("test_") else None
    if suite not in SUITES:
        return
    factory = request.getfixturevalue("curriculum_factory")
    env_class = None if uses_builtin_curriculum else request.getfixturevalue("curriculum_env_class")
    reason = _suite_skip(suite, factory, env_class)
    if reason is not None:
        assert not uses_builtin_curriculum, f"the built-in curriculum cannot run suite {suite}: {reason}"
        pytest.skip(reason)


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


_CALL_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    if call.when == "call":
        item.stash[_CALL_PASSED] = outcome.get_result().passed


@pytest.fixture
def oracle(request: pytest.FixtureRequest, scenario_seed: int) -> Iterator[Callable[..., Any]]:
    """`oracle(**options)` makes an accounting oracle; a test that passes without verifying
    every oracle it made fails at teardown (an oracle that is never consulted proves nothing)."""
    from harness.oracle import AccountingOracle

    made: list[AccountingOracle] = []

    def make(**options: Any) -> AccountingOracle:
        options.setdefault("seed", scenario_seed)
        made.append(AccountingOracle(**options))
        return made[-1]

    yield make
    if request.node.stash.get(_CALL_PASSED, False):
        unverified = sum(not o.verified for o in made)
        assert not unverified, f"{unverified} accounting oracle(s) made by this scenario were never verified"


#: (setup, curriculum factory, base seed) -> the setup's runs (or the error its oracle raised),
#: shared by the checks of one setup within a session.
_SETUP_RUNS: dict[tuple[str, Any, int], tuple[list[int], list[Any]] | BaseException] = {}


def _setup_runs(setup: str, factory: Any, base_seed: int) -> tuple[list[int], list[Any]]:
    from harness.checks import run_seeds
    from harness.experiments import SETUPS
    from harness.oracle import AccountingOracle

    key = (setup, factory, base_seed)
    if key not in _SETUP_RUNS:
        spec = SETUPS[setup]
        seeds = run_seeds(base_seed, spec.seeds())
        try:
            watcher = AccountingOracle(seed=seeds[0], context=setup)
            runs = [spec.run(factory, seed=seeds[0], oracle=watcher)]
            watcher.verify()
            runs += [spec.run(factory, seed=seed) for seed in seeds[1:]]
            _SETUP_RUNS[key] = (seeds, runs)
        except Exception as error:  # kept, so every check of the setup reports it, then re-raised
            _SETUP_RUNS[key] = error
    result = _SETUP_RUNS[key]
    if isinstance(result, BaseException):
        raise result
    return result


@pytest.fixture
def setup_runs(curriculum_factory: Any, scenario_seed: int) -> Callable[[str], tuple[list[int], list[Any]]]:
    """`setup_runs(setup)` -> (seeds, runs) of a `harness.experiments.SETUPS` setup, as `judge` uses them."""
    return lambda setup: _setup_runs(setup, curriculum_factory, scenario_seed)


@pytest.fixture
def judge(curriculum_factory: Any, scenario_seed: int, check_statistic: Callable[..., None],
          require_capability: Callable[[bool, str], None], golden: Callable[[Any], None]) -> Callable[[str], None]:
    """`judge(check_name)`: one statistical check, as the gate runs it (see the module docstring)."""
    from harness.experiments import CHECKS

    def run(name: str) -> None:
        (check,) = [c for c in CHECKS if c.name == name]
        seeds, runs = _setup_runs(check.setup, curriculum_factory, scenario_seed)
        values = [check.measure(r) for r in runs]
        require_capability(all(v is not None for v in values),
                           f"{check.name} reads a number this curriculum does not report ({check.what})")
        check_statistic(check.name, values, check.limit(), seeds=seeds, upper=check.upper, what=check.what,
                        fmt=check.fmt, statistic=check.statistic)
        golden({"check": check.name, "seeds": [seeds[0], seeds[-1]], check.statistic: statistic_of(values, check.statistic),
                "values": values})

    return run
