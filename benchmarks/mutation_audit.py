"""How many realistic bugs the scenario gate catches: apply each mutation, run the gate.

`benchmarks/mutations/` holds bugs in the library (`curriculum/`) written from its code and
docs alone, without reading the gate (`harness/`, `scenarios/`, `tests/`): each is a patch
whose first lines say what it breaks. For each one this script copies the committed tree
(`git archive HEAD`) to a temporary directory, applies the patch, and runs the default gate
there (`pytest scenarios/`, the Ray suite left out: it needs a Ray cluster and adds no library
code). A mutation is caught when the gate fails; the unmodified tree must pass.

    .venv/bin/python -m benchmarks.mutation_audit                     # every mutation
    .venv/bin/python -m benchmarks.mutation_audit 08 13               # some of them
    .venv/bin/python -m benchmarks.mutation_audit --json /tmp/audit.json

Prints one row per mutation (caught or not, tests failed, seconds); the JSON also names the
failed tests of each run (a false alarm on the unmodified tree names its test). Exits 1 if any
mutation passes the gate, no longer applies, or the unmodified tree fails the gate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTATIONS = ROOT / "benchmarks" / "mutations"
GATE = ("-m", "pytest", "scenarios/", "--ignore=scenarios/test_ray_service.py", "-n", "2", "--dist", "loadgroup",
        "-q", "-p", "no:cacheprovider")
GATE_TIMEOUT = 600
"""Seconds a gate run may take (about 50 unmodified) before it counts as hung."""
_SUMMARY = re.compile(r"(\d+) (failed|passed|errors?)")
_FAILURE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def mutations(selected: list[str]) -> list[Path]:
    """The patches whose names start with one of `selected` (all when empty)."""
    patches = sorted(MUTATIONS.glob("*.patch"))
    if selected:
        patches = [p for p in patches if p.name.startswith(tuple(selected))]
    return patches


def describe(patch: Path) -> str:
    """The patch's first paragraph, on one line."""
    return " ".join(patch.read_text().split("\n\n", 1)[0].split())


def run_gate(patch: Path | None, *, first_failure: bool = False) -> dict[str, object]:
    """The gate's outcome on the committed tree with `patch` applied (None: unmodified);
    `first_failure`: the gate stops at its first failing test."""
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        tree = Path(tmp)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        if patch is not None:
            applied = subprocess.run(["git", "apply", str(patch)], cwd=tree, capture_output=True, text=True)
            if applied.returncode:  # the library moved on under the patch: rewrite it
                return {"stale": True, "summary": applied.stderr.strip()}
        started = time.monotonic()
        try:
            gate = subprocess.run([sys.executable, *GATE, *(("-x",) if first_failure else ())], cwd=tree, capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": str(tree)}, timeout=GATE_TIMEOUT)
        except subprocess.TimeoutExpired:  # a gate that hangs fails CI too, but names nothing: fix the check
            return {"failed": 1, "passed": 0, "returncode": None, "seconds": GATE_TIMEOUT,
                    "summary": f"the gate did not finish within {GATE_TIMEOUT} s", "failures": []}
        seconds = time.monotonic() - started
    last = gate.stdout.strip().splitlines()[-1] if gate.stdout.strip() else gate.stderr.strip()[-200:]
    counts = {kind.rstrip("s"): int(n) for n, kind in _SUMMARY.findall(last)}
    return {"failed": counts.get("failed", 0) + counts.get("error", 0), "passed": counts.get("passed", 0),
            "returncode": gate.returncode, "seconds": round(seconds, 1), "summary": last,
            "failures": _FAILURE.findall(gate.stdout)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("selected", nargs="*", help="mutation number prefixes (default: all)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    baseline = run_gate(None)
    print(f"unmodified tree: {baseline['summary']}" + "".join(f"\n  {name}" for name in baseline["failures"]))
    results = {"unmodified": baseline, "mutations": {}}
    print("| mutation | caught | tests failed | s | what it breaks |\n|---|---|---:|---:|---|")
    for patch in mutations(args.selected):
        outcome = run_gate(patch)
        outcome["description"] = describe(patch)
        results["mutations"][patch.stem] = outcome
        if outcome.get("stale"):
            print(f"| {patch.stem} | does not apply | | | {outcome['summary']} |", flush=True)
            continue
        caught = outcome["returncode"] != 0
        print(f"| {patch.stem} | {'yes' if caught else '**no**'} | {outcome['failed']} | {outcome['seconds']} | "
              f"{outcome['description']} |", flush=True)
    ran = {name: r for name, r in results["mutations"].items() if not r.get("stale")}
    missed = [name for name, r in ran.items() if r["returncode"] == 0]
    stale = len(results["mutations"]) - len(ran)
    print(f"\ncaught {len(ran) - len(missed)} of {len(ran)}" + (f"; missed: {', '.join(missed)}" if missed else "")
          + (f"; {stale} no longer apply" if stale else ""))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 1 if missed or stale or baseline["returncode"] != 0 else 0


if __name__ == "__main__":
    raise SystemExit(main())
