"""Wall time of the scenario gate, run once as a subprocess exactly as a developer would.

`python -m pytest scenarios/ -n auto --dist loadgroup -q -p no:cacheprovider` (as `make gate`), plus `-rfEs` so failures,
errors and skips are listed with their reasons. The seconds and the outcome counts go into
`benchmark.extra_info` and the printed figures (`gate_*`). A gate that does not pass still
records its time, then fails this benchmark with the gate's summary: a time of a red gate is
not the gate's time.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GATE_COMMAND = (sys.executable, "-m", "pytest", "scenarios/", "-n", "auto", "--dist", "loadgroup", "-q", "-p", "no:cacheprovider",
                "-rfEs")
GATE_TIMEOUT_S = 900
OUTCOMES = ("passed", "failed", "errors", "error", "skipped", "xfailed", "xpassed", "deselected", "warnings", "warning")


def _run_gate() -> tuple[float, subprocess.CompletedProcess[str]]:
    began = time.perf_counter()
    completed = subprocess.run(GATE_COMMAND, cwd=ROOT, capture_output=True, text=True, timeout=GATE_TIMEOUT_S)
    return time.perf_counter() - began, completed


def _outcome_counts(output: str) -> dict[str, int]:
    """Counts from pytest's last summary line, e.g. '41 passed, 2 skipped in 30.12s'."""
    lines = [line for line in output.splitlines() if re.search(r"\b(passed|failed|error|errors|skipped)\b", line)]
    counts: dict[str, int] = {}
    for number, outcome in re.findall(r"(\d+) (\w+)", lines[-1] if lines else ""):
        if outcome in OUTCOMES:
            counts[outcome.rstrip("s") if outcome in ("errors", "warnings") else outcome] = int(number)
    return counts


def test_scenario_gate_wall_time(benchmark: Any, figures: dict[str, float]) -> None:
    seconds, completed = benchmark.pedantic(_run_gate, rounds=1, iterations=1)
    counts = _outcome_counts(completed.stdout)
    figures["gate_wall_time_s"] = seconds
    for outcome, number in counts.items():
        figures[f"gate_{outcome}"] = number
    benchmark.extra_info.update(seconds=seconds, returncode=completed.returncode, command=" ".join(GATE_COMMAND[1:]),
                                **counts)
    summary = "\n".join(line for line in completed.stdout.splitlines()
                        if line.startswith(("SKIPPED", "FAILED", "ERROR", "XPASS", "XFAIL"))
                        or re.match(r"^=* ?(\d+ \w+|no tests ran).* in [\d.]+s", line))
    print(f"\nscenario gate: {seconds:.1f} s wall, exit code {completed.returncode}, {counts}\n{summary}")
    assert completed.returncode == 0, (
        f"Expected the scenario gate to pass (exit code 0), received exit code {completed.returncode}; "
        f"outcomes {counts}. Tail of its output:\n{completed.stdout[-3000:]}\n{completed.stderr[-2000:]}"
    )
