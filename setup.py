"""The wheel's package layout (all other metadata is in pyproject.toml).

The repository keeps `scenarios/` and `golden/` at the top; the wheel ships them inside the
harness package, as `harness.scenarios` (the suites, importable for `pytest --pyargs
harness.scenarios`) and `harness/scenarios/golden/` (their golden files), so nothing but
`curriculum` and `harness` lands at the top of site-packages. Packages are found, not listed:
a new subpackage (or golden folder) ships without an edit here.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent
SCENARIOS, GOLDEN = "harness.scenarios", "harness.scenarios.golden"


def golden_packages() -> list[str]:
    """One package per golden folder (`golden/<suite module>/`), data only."""
    return [f"{GOLDEN}.{folder.name}" for folder in sorted((ROOT / "golden").iterdir()) if folder.is_dir()]


setup(
    packages=[
        *find_packages(include=["curriculum", "curriculum.*", "harness", "harness.*"]),
        SCENARIOS,
        *(f"{SCENARIOS}.{name}" for name in find_packages("scenarios")),
        GOLDEN,
        *golden_packages(),
    ],
    package_dir={SCENARIOS: "scenarios", GOLDEN: "golden"},
    package_data={"harness": ["gate.ini"], **{name: ["*.json"] for name in golden_packages()}},
)
