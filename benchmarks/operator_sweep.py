"""Bugs nobody wrote: operators of the library changed at random, one at a time, against the gate.

Where `benchmarks/mutation_audit.py` applies bugs written by hand, this draws its mutants
mechanically. Every comparison, arithmetic and boolean operator, `min` and `max`, `True` and
`False`, `is` and `in`, `not` and whole number of `curriculum/` (the Ray modules and the error
classes left out) is a candidate: `<` becomes `<=`, `+` becomes `-`, `and` becomes `or`, `n`
becomes `n + 1`, a `not` is dropped, and so on (signs and starred arguments left alone). A
seeded sample of the candidates is applied, each to its own copy of the committed tree, and
the gate runs there until its first failure. A mutant the gate passes is a survivor: either
equivalent (no difference a user could see: a layout's padding, a tolerance of 1e-9, one
more spin before a nap) or a gap, to close with a general check. Survivors have to be read,
so the script lists them and passes no verdict.

    .venv/bin/python -m benchmarks.operator_sweep 40 --seed 1 --json /tmp/sweep.json
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import random
import tempfile
import tokenize
from pathlib import Path

from benchmarks.mutation_audit import ROOT, run_gate

LIBRARY = ROOT / "curriculum"
SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+", "+=": "-=",
         "-=": "+=", "//": "/", "*": "/", "and": "or", "or": "and", "True": "False", "False": "True", "min": "max",
         "max": "min", "is": "is not", "in": "not in", "not": ""}
_BEFORE_UNARY = {"(", ",", "[", "=", ":", "return"}  # a sign or a starred argument follows these, not an operator


def library_files() -> list[Path]:
    """The modules whose operators are mutated."""
    return [path for path in sorted(LIBRARY.rglob("*.py")) if not path.name.startswith("ray_")
            and path.name != "errors.py"]


def candidates(path: Path) -> list[tuple[int, int, int, str, str]]:
    """`(line, start, end, old, new)` for every token of `path` that `SWAPS` changes, and every
    whole number (one more)."""
    text = path.read_text()
    lines = text.splitlines()
    found, previous = [], None
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        (row, start), (end_row, end) = token.start, token.end
        new = None
        if token.type == tokenize.OP and token.string in SWAPS:
            if not (token.string in ("*", "-", "+") and previous is not None and previous.string in _BEFORE_UNARY):
                new = SWAPS[token.string]
        elif token.type == tokenize.NAME and token.string in SWAPS:
            line = lines[row - 1]
            negated = line[end:].lstrip().startswith("not ") or (previous is not None and previous.string == "not")
            looped = token.string == "in" and (line.lstrip().startswith("for ") or " for " in line[:start])
            if not (token.string in ("is", "in") and (negated or looped)):
                new = SWAPS[token.string]
        elif token.type == tokenize.NUMBER and token.string.isdigit():
            new = str(int(token.string) + 1)
        if new is not None and row == end_row:
            found.append((row, start, end, token.string, new))
        previous = token
    return found


def mutant(path: Path, candidate: tuple[int, int, int, str, str]) -> str:
    """The unified diff (paths relative to the repository) that applies `candidate` to `path`."""
    row, start, end, old, new = candidate
    lines = path.read_text().splitlines(keepends=True)
    line = lines[row - 1]
    changed = line[:start] + line[end + 1:] if old == "not" else line[:start] + new + line[end:]
    relative = path.relative_to(ROOT).as_posix()
    return "".join(difflib.unified_diff(lines, [*lines[:row - 1], changed, *lines[row:]],
                                        f"a/{relative}", f"b/{relative}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", type=int, help="mutants to draw")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    pool = [(path, candidate) for path in library_files() for candidate in candidates(path)]
    drawn = random.Random(args.seed).sample(pool, min(args.count, len(pool)))
    print(f"{len(pool)} candidates, {len(drawn)} drawn (seed {args.seed})")
    print("| mutant | outcome | s | first failure |\n|---|---|---:|---|")
    results = []
    with tempfile.TemporaryDirectory(prefix="operator-sweep-") as tmp:
        for index, (path, candidate) in enumerate(drawn):
            row, _, _, old, new = candidate
            name = f"{path.relative_to(ROOT).as_posix()}:{row} {old!r} -> {new!r}"
            patch = Path(tmp) / f"{index}.patch"
            patch.write_text(mutant(path, candidate))
            outcome = run_gate(patch, first_failure=True)
            verdict = "survived" if outcome.get("returncode") == 0 else "killed"
            failures = outcome.get("failures") or [outcome.get("summary", "")]
            results.append({"mutant": name, "outcome": verdict, **outcome})
            print(f"| {name} | {'**survived**' if verdict == 'survived' else verdict} | {outcome.get('seconds', '')} | "
                  f"{failures[0] if verdict == 'killed' else ''} |", flush=True)
    survivors = [r["mutant"] for r in results if r["outcome"] == "survived"]
    print(f"\nkilled {len(results) - len(survivors)} of {len(results)}; survivors to read: {len(survivors)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
