"""The fault-injection suite: worker deaths and hostile inputs, each bounded in time.

Every test here is marked `faults` (`pytest -m faults` runs them alone). A test records what
it measured with the `fault_figure` fixture; the figures travel with the test reports (also
from xdist workers) and print in the terminal summary (hooks in the repository's root `conftest.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: user_properties key of a measured figure (read by the summary hook in the root conftest.py).
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
