"""Session-wide hooks of the test suite: the figures of the fault-injection suite.

They live here, not in `tests/faults/conftest.py`: under xdist the controller process never
collects, so it loads only the conftest files on the way to the paths it was given (`tests/`
for `make test`); a hook in a subfolder's conftest would see no report there. (Not in
`tests/conftest.py` either: that would put `tests/` first on `sys.path`, where
`tests/curriculum/` would shadow the `curriculum` package.)
"""

from __future__ import annotations

from typing import Any

import pytest

#: user_properties key of a measured figure: (name, value, what it counts).
FIGURE_PROPERTY = "fault_figure"

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
    terminalreporter.section("fault-injection figures")
    for name, value, what in sorted(_FIGURES, key=lambda figure: figure[0]):
        shown = f"{value:,}" if isinstance(value, int) else f"{value:.4g}" if isinstance(value, float) else str(value)
        terminalreporter.write_line(f"{name}: {shown}  ({what})")
