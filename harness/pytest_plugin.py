"""pytest plugin of the curriculum harness, registered through the `pytest11` entry point.

Options (one group, `curriculum-harness`):
  --curriculum=package.module:factory   gate another curriculum implementation
  --curriculum-env=package.module:Class gate another CurriculumEnv-compatible wrapper
  --scenario-seeds=N                    run every seeded scenario over seeds 0..N-1
Fixtures: `curriculum_factory`, `curriculum_env_class`, `uses_builtin_curriculum`,
`scenario_seed` (parametrised), `golden` (syrupy snapshot stored under `golden/<module>/`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

from harness.golden import GoldenSnapshotExtension

__all__ = ["load_object", "DEFAULT_SCENARIO_SEEDS"]

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


def pytest_configure(config: pytest.Config) -> None:
    seeds = config.getoption("--scenario-seeds", default=None)
    if seeds is not None and seeds < 1:
        raise pytest.UsageError(f"--scenario-seeds expects a positive integer, received {seeds}")
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
    spec = request.config.getoption("--curriculum")
    if spec is None:
        from curriculum import Curriculum

        return Curriculum
    factory = load_object(spec, "--curriculum")
    if not callable(factory):
        raise pytest.UsageError(f"--curriculum: {spec!r} is not callable")
    return factory


@pytest.fixture(scope="session")
def curriculum_env_class(request: pytest.FixtureRequest) -> Any:
    """The env wrapper under test (default `curriculum.CurriculumEnv`)."""
    spec = request.config.getoption("--curriculum-env")
    if spec is None:
        from curriculum import CurriculumEnv

        return CurriculumEnv
    return load_object(spec, "--curriculum-env")


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
        if uses_builtin_curriculum and not sweeping:
            assert metrics == extension

    return check
