"""The fault-injection suite: kills, attacks and hostile inputs, each bounded in time.

Every test here is marked `faults` (`make faults` runs them alone). `make test` runs them at
`FAULTS_SCALE=0.1` of the full counts; `FAULTS_SCALE=1 make faults` runs the full counts the
README reports. A test records what it measured with the `fault_figure` fixture; the figures
travel with the test reports (also from xdist workers) and print in the terminal summary.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fault_budget import faults_scale

#: user_properties key of a measured figure: (name, value, what it counts).
FIGURE_PROPERTY = "fault_figure"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.faults)


@pytest.fixture
def fault_figure(request: pytest.FixtureRequest) -> Callable[[str, Any, str], None]:
    """`fault_figure(name, value, what)`: record a measured figure for the terminal summary."""

    def record(name: str, value: Any, what: str) -> None:
        request.node.user_properties.append((FIGURE_PROPERTY, (name, value, what)))

    return record


_FIGURES: list[tuple[str, Any, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for key, value in report.user_properties:
        if key == FIGURE_PROPERTY:
            _FIGURES.append(tuple(value))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    terminalreporter.section(f"fault-injection figures (FAULTS_SCALE={faults_scale():g})")
    for name, value, what in sorted(_FIGURES, key=lambda figure: figure[0]):
        shown = f"{value:,}" if isinstance(value, int) else f"{value:.4g}" if isinstance(value, float) else str(value)
        terminalreporter.write_line(f"{name}: {shown}  ({what})")
