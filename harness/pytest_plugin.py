"""pytest plugin of the curriculum harness, registered through the `pytest11` entry point.

It only registers the gate's options (one group, one prefix, so they cannot clash with a
project's own options) and collects the margins the scenario checks record. It imports
nothing but pytest at load, so an unrelated test session pays nothing for it; the fixtures
live with the suites (`scenarios/conftest.py`, from `harness.fixtures`).

Options (group `curriculum-harness`):
  --gate-curriculum=MODULE:FACTORY      gate another curriculum implementation
  --gate-curriculum-env=MODULE:CLASS    gate another CurriculumEnv-compatible wrapper
  --gate-seeds=N                        sweep: run every seeded scenario over base seeds 0..N-1
  --gate-base-seed=B                    base seed of the seeded scenarios (default 0)
  --gate-margins=PATH                   write every check's worst value and margin as JSON
  --gate-learners                       also collect the real-learner tier (scenarios/learners/)
"""

from __future__ import annotations

import importlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from harness.gate import group_suffix_at, without_group

__all__ = [
    "load_object",
    "MARGIN_PROPERTY",
    "PLUGGED_IN",
    "OPTION_CURRICULUM",
    "OPTION_CURRICULUM_ENV",
    "OPTION_SEEDS",
    "OPTION_BASE_SEED",
    "OPTION_MARGINS",
    "OPTION_LEARNERS",
    "base_seeds",
    "golden_compared",
]

OPTION_CURRICULUM = "--gate-curriculum"
OPTION_CURRICULUM_ENV = "--gate-curriculum-env"
OPTION_SEEDS = "--gate-seeds"
OPTION_BASE_SEED = "--gate-base-seed"
OPTION_MARGINS = "--gate-margins"
OPTION_LEARNERS = "--gate-learners"

#: user_properties key under which scenario checks record measured values (travels with xdist).
MARGIN_PROPERTY = "scenario_limit"

#: The objects --gate-curriculum and --gate-curriculum-env name, loaded once at configure time.
PLUGGED_IN = pytest.StashKey[dict[str, Any]]()


class _State:
    """Margins and outcomes of this session (the controller's, under xdist)."""

    def __init__(self) -> None:
        self.margins: dict[str, list[tuple[float, float, bool, int, str]]] = defaultdict(list)
        self.outcomes: dict[str, str] = {}


_STATE = _State()


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
        OPTION_CURRICULUM, default=None, metavar="MODULE:FACTORY",
        help="gate this curriculum: FACTORY(config: CurriculumConfig) returns an object satisfying "
        "harness.protocol.CurriculumProtocol (default: the built-in curriculum.Curriculum)",
    )
    group.addoption(
        OPTION_CURRICULUM_ENV, default=None, metavar="MODULE:CLASS",
        help="gate this env wrapper instead of curriculum.CurriculumEnv (same constructor signature)",
    )
    group.addoption(
        OPTION_SEEDS, type=int, default=None, metavar="N",
        help="sweep: run every seeded scenario over base seeds 0..N-1 (default: the base seed only)",
    )
    group.addoption(
        OPTION_BASE_SEED, type=int, default=0, metavar="B",
        help="base seed of the seeded scenarios; a statistical check over K seeds runs seeds B*K..B*K+K-1",
    )
    group.addoption(
        OPTION_MARGINS, default=None, metavar="PATH",
        help="write a JSON file with every check's worst measured value, limit and margin",
    )
    group.addoption(
        OPTION_LEARNERS, action="store_true", default=False,
        help="also collect the real-learner tier in scenarios/learners/ (needs the [learners] extra)",
    )


def base_seeds(config: pytest.Config) -> list[int]:
    """The base seeds seeded scenarios run with: the sweep's, else the one base seed."""
    sweep = config.getoption(OPTION_SEEDS, default=None)
    if sweep:
        return list(range(sweep))
    return [config.getoption(OPTION_BASE_SEED, default=0)]


def golden_compared(config: pytest.Config) -> bool:
    """Golden files describe the built-in curriculum at the default base seed: they are
    compared only then (never with a plug-in, a sweep or another base seed)."""
    return (not config.stash.get(PLUGGED_IN, {}) and config.getoption(OPTION_SEEDS, default=None) is None
            and config.getoption(OPTION_BASE_SEED, default=0) == 0)


def pytest_configure(config: pytest.Config) -> None:
    seeds = config.getoption(OPTION_SEEDS, default=None)
    if seeds is not None and seeds < 1:
        raise pytest.UsageError(f"{OPTION_SEEDS} expects a positive integer, received {seeds}")
    base = config.getoption(OPTION_BASE_SEED, default=0)
    if base is not None and base < 0:
        raise pytest.UsageError(f"{OPTION_BASE_SEED} expects an integer >= 0, received {base}")
    # A bad spec is a usage error of the whole run (exit code 4), not an error in every test.
    plugged_in: dict[str, Any] = {}
    for option in (OPTION_CURRICULUM, OPTION_CURRICULUM_ENV):
        spec = config.getoption(option, default=None)
        if spec is not None:
            plugged_in[option] = load_object(spec, option)
            if not callable(plugged_in[option]):
                raise pytest.UsageError(f"{option}: {spec!r} is not callable")
    config.stash[PLUGGED_IN] = plugged_in
    if not golden_compared(config) and getattr(config.option, "update_snapshots", False):
        raise pytest.UsageError(
            "--snapshot-update rewrites the golden files of the built-in curriculum at base seed 0; it cannot be "
            f"combined with {OPTION_CURRICULUM}, {OPTION_CURRICULUM_ENV}, {OPTION_SEEDS} or {OPTION_BASE_SEED}"
        )
    config.addinivalue_line("markers", "scenario: a scenario of the curriculum gate")
    # the statistical checks of one setup share its runs; with pytest-xdist's `--dist loadgroup`
    # they run in one worker (the mark is pytest-xdist's; declared here for runs without it)
    config.addinivalue_line("markers", "xdist_group(name): run in the same xdist worker as the group")
    _STATE.__init__()  # a new session (pytester runs several in one process)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep `--dist loadgroup` grouping under pytest >= 9.2.

    pytest-xdist's workers append `@<group>` to the node id of each test marked `xdist_group`,
    and its scheduler sends the tests of one group to one worker. Since pytest 9.2 keeps node
    ids structured, xdist 3.8's write to the old attribute is lost and every group is split
    across workers without a word (pytest-dev/pytest-xdist#1386): two Ray suites then start
    two local clusters at once, and the checks of one statistical setup each rerun its seeds.
    Where the suffix is missing, it is put into the structured id here.
    """
    if not getattr(config.option, "loadgroup", False):  # set by xdist in its workers under --dist loadgroup
        return
    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        nodeid = item.nodeid
        if not names or group_suffix_at(nodeid) >= 0:
            continue
        from _pytest.nodeid import NodeId  # only pytest >= 9.2 has structured ids, and only there is it needed

        item._id = NodeId.parse(f"{nodeid}@{'_'.join(names)}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _record_report(report, _STATE)




def _record_report(report: pytest.TestReport, state: _State) -> None:
    name = without_group(report.nodeid)
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        state.outcomes[name] = "skipped" if report.skipped else report.outcome
    elif report.when == "teardown" and report.outcome == "failed":
        state.outcomes[name] = "failed"
    if report.when != "call":
        return
    for key, value in report.user_properties:
        if key == MARGIN_PROPERTY:
            name, measured, limit, upper, seed, *detail = value
            state.margins[name].append((measured, limit, upper, seed, detail[0] if detail else ""))


def _worst(runs: list[tuple[float, float, bool, int, str]]) -> tuple[float, float, bool, int, str]:
    return max(runs, key=lambda r: r[0] - r[1] if r[2] else r[1] - r[0])


def pytest_terminal_summary(terminalreporter: Any) -> None:
    margins = _STATE.margins
    if not margins:
        return
    terminalreporter.section("scenario limits: worst measured value per check")
    for name in sorted(margins):
        runs = margins[name]
        measured, limit, upper, seed, detail = _worst(runs)
        margin = (limit - measured) if upper else (measured - limit)
        mean = sum(r[0] for r in runs) / len(runs)
        where = detail or f"seed {seed}"
        terminalreporter.write_line(
            f"{name}: worst {measured:.4g} ({where}) vs limit {'<=' if upper else '>='} {limit:.4g}, "
            f"margin {margin:.4g}, mean {mean:.4g} over {len(runs)} run(s)"
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    path = config.getoption(OPTION_MARGINS, default=None)
    if path is None or hasattr(config, "workerinput"):  # xdist workers report to the controller
        return
    checks = {}
    for name, runs in sorted(_STATE.margins.items()):
        measured, limit, upper, seed, detail = _worst(runs)
        checks[name] = {
            "worst": measured, "limit": limit, "direction": "at most" if upper else "at least",
            "margin": (limit - measured) if upper else (measured - limit), "seed": seed, "where": detail,
            "mean": sum(r[0] for r in runs) / len(runs), "runs": len(runs),
        }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"checks": checks, "tests": dict(sorted(_STATE.outcomes.items()))},
                                     indent=2, sort_keys=True) + "\n", encoding="utf-8")
