"""Golden metric snapshots: stable serialisation and the syrupy extension writing `golden/`.

Stable means: keys sorted, floats rounded to `GOLDEN_SIGNIFICANT_DIGITS` significant digits,
numpy scalars and arrays turned into plain Python types, indent 2, trailing newline. The same
run on any machine serialises to the same text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from syrupy.extensions.json import JSONSnapshotExtension

__all__ = ["GOLDEN_SIGNIFICANT_DIGITS", "to_plain", "serialise_golden", "GoldenSnapshotExtension"]

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


class GoldenSnapshotExtension(JSONSnapshotExtension):
    """syrupy JSON snapshots stored as `golden/<test module>/<test name>.json`."""

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        root = Path(test_location.filepath).parent.parent
        return str(root / "golden" / test_location.basename)

    def serialize(self, data: Any, *, exclude: Any = None, include: Any = None, matcher: Any = None) -> str:
        return serialise_golden(data)
