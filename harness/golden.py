"""Golden metric snapshots: stable serialisation and the syrupy extension reading `golden/`.

Stable means: keys sorted, floats rounded to `GOLDEN_SIGNIFICANT_DIGITS` significant digits,
numpy scalars and arrays turned into plain Python types, indent 2, trailing newline. The same
run on any machine serialises to the same text.

Where the golden files are: in a checkout of this project, `golden/<module>/` beside
`scenarios/`; in an installed wheel, `harness/scenarios/golden/<module>/` (the wheel maps both
folders into the harness package). They are read from either, and written (`--snapshot-update`)
only into the checkout's own `golden/`: never into site-packages, never into another project.

syrupy is imported only when `GoldenSnapshotExtension` is first used, so the serialisation
helpers (used by `harness.recorder`) need nothing beyond numpy.
"""

from __future__ import annotations

import functools
import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "GOLDEN_SIGNIFICANT_DIGITS",
    "PROJECT_NAME",
    "GoldenWriteRefusedError",
    "to_plain",
    "serialise_golden",
    "golden_root",
    "checkout_golden_root",
    "GoldenSnapshotExtension",
]

PROJECT_NAME = "curriculum-harness"
"""The distribution name a checkout's `pyproject.toml` declares (how a checkout is recognised)."""

_GOLDEN = "golden"
_HARNESS_DIR = Path(__file__).resolve().parent

#: Significant digits kept in golden files: enough to catch a behaviour change, few enough
#: that last-bit float differences between platforms do not show.
GOLDEN_SIGNIFICANT_DIGITS = 5


def _round(value: float, digits: int) -> float | str:
    if not math.isfinite(value):
        return repr(value)  # JSON has no NaN/inf; show them as text so a diff points at them
    if value == 0.0:
        return 0.0
    return float(f"{value:.{digits}g}")


def to_plain(value: Any, *, digits: int = GOLDEN_SIGNIFICANT_DIGITS) -> Any:
    """Plain JSON types with sorted keys and rounded floats."""
    if isinstance(value, Mapping):
        return {str(k): to_plain(value[k], digits=digits) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [to_plain(v, digits=digits) for v in (value.tolist() if isinstance(value, np.ndarray) else value)]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _round(float(value), digits)
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"Expected JSON-like metric values, received {type(value).__name__}: {value!r}")


def serialise_golden(data: Any, *, digits: int = GOLDEN_SIGNIFICANT_DIGITS) -> str:
    """The text stored in a golden file."""
    return json.dumps(to_plain(data, digits=digits), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class GoldenWriteRefusedError(RuntimeError):
    """A golden snapshot would be written or deleted outside this project's own `golden/`."""


def checkout_golden_root() -> Path | None:
    """`<checkout>/golden` when the harness package runs from a checkout of this project, else None."""
    project = _HARNESS_DIR.parent
    return project / _GOLDEN if _is_checkout(project) else None


@functools.cache
def _is_checkout(project: Path) -> bool:
    """A checkout: a folder whose `pyproject.toml` names this project and that holds `scenarios/`
    (an installed wheel has neither)."""
    try:
        with (project / "pyproject.toml").open("rb") as handle:
            name = tomllib.load(handle).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return name == PROJECT_NAME and (project / "scenarios").is_dir()


def golden_root(scenarios_dir: str | Path) -> Path:
    """The golden folder of the suites in `scenarios_dir`: `golden/` inside it (installed
    wheel), else `golden/` beside it (checkout layout)."""
    scenarios_dir = Path(scenarios_dir)
    inside = scenarios_dir / _GOLDEN
    return inside if inside.is_dir() else scenarios_dir.parent / _GOLDEN


def _check_writable(location: str | Path) -> None:
    """Refuse to touch a golden file that is not `<checkout>/golden/<module>/<file>`."""
    target = Path(location).resolve()
    project = target.parents[2] if len(target.parents) > 2 else target.parent
    if target.parents[1] != project / _GOLDEN or not _is_checkout(project):
        raise GoldenWriteRefusedError(
            f"Refusing to write or delete the golden snapshot {target}: golden files are written only into the "
            f"golden/ folder of a checkout of {PROJECT_NAME} (a folder whose pyproject.toml names it, beside "
            "scenarios/), never into an installed package; update them with `pytest scenarios/ --snapshot-update` "
            "in a checkout"
        )


def _make_extension_class() -> type:
    from syrupy.extensions.json import JSONSnapshotExtension

    class GoldenSnapshotExtension(JSONSnapshotExtension):
        """syrupy JSON snapshots stored as `golden/<test module>/<test name>.json`; read from a
        checkout or an installed wheel, written only into the checkout's own `golden/`."""

        @classmethod
        def dirname(cls, *, test_location: Any) -> str:
            return str(golden_root(Path(test_location.filepath).parent) / test_location.basename)

        def serialize(self, data: Any, *, exclude: Any = None, include: Any = None, matcher: Any = None) -> str:
            return serialise_golden(data)

        @classmethod
        def write_snapshot(cls, *, snapshot_location: str, snapshots: Any, **kwargs: Any) -> None:
            if snapshots:
                _check_writable(snapshot_location)  # before syrupy creates the folder
            super().write_snapshot(snapshot_location=snapshot_location, snapshots=snapshots, **kwargs)

        def delete_snapshots(self, *, snapshot_location: str, snapshot_names: set[str]) -> None:
            _check_writable(snapshot_location)
            super().delete_snapshots(snapshot_location=snapshot_location, snapshot_names=snapshot_names)

    GoldenSnapshotExtension.__module__ = __name__
    GoldenSnapshotExtension.__qualname__ = "GoldenSnapshotExtension"
    return GoldenSnapshotExtension


def __getattr__(name: str) -> Any:
    """`GoldenSnapshotExtension`, built on first use (it subclasses syrupy's JSON extension)."""
    if name == "GoldenSnapshotExtension":
        extension = globals()["GoldenSnapshotExtension"] = _make_extension_class()
        return extension
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
