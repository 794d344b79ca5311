"""How many repetitions a fault test runs: a share (`FAULTS_SCALE`) of the full counts.

`make test` runs the default share; `FAULTS_SCALE=1 make faults` runs the full counts the
README reports. Imported as `fault_budget` (pytest puts this folder on `sys.path`).
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT_SCALE", "faults_scale", "scaled", "time_budget"]

DEFAULT_SCALE = 0.1


def faults_scale() -> float:
    """Share of the full counts to run (`FAULTS_SCALE`, default 0.1; 1 is the full run)."""
    raw = os.environ.get("FAULTS_SCALE", str(DEFAULT_SCALE))
    try:
        scale = float(raw)
    except ValueError:
        scale = float("nan")
    if not scale > 0:
        raise ValueError(f"Expected FAULTS_SCALE to be a number > 0, received {raw!r}")
    return scale


def scaled(full: int, *, minimum: int) -> int:
    """`full` repetitions at FAULTS_SCALE=1; at least `minimum` at any scale."""
    return max(minimum, round(full * faults_scale()))


def time_budget(seconds: float) -> float:
    """A case's time limit: `seconds` at the default share, proportionally more for a larger one
    (a guard against a hang, not a speed check)."""
    return seconds * max(1.0, faults_scale() / DEFAULT_SCALE)
