"""The mutation audit's bugs (`benchmarks/mutations/`) against the tree they are measured on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # `benchmarks` is a directory of the repository, not an installed package
from benchmarks.mutation_audit import MUTATIONS, describe  # noqa: E402


def test_every_mutation_applies_to_the_tree_and_says_what_it_breaks() -> None:
    """A patch that no longer applies (its lines were changed since) is reported by the audit
    as not applying, and measures nothing: when library code changes, its patches are redone."""
    patches = sorted(MUTATIONS.glob("*.patch"))
    assert len(patches) >= 256
    stale = []
    for patch in patches:
        checked = subprocess.run(["git", "apply", "--check", str(patch)], cwd=REPO, capture_output=True, text=True)
        if checked.returncode:
            stale.append(f"{patch.name}: {checked.stderr.strip().splitlines()[-1]}")
    assert not stale, f"{len(stale)} of {len(patches)} mutations no longer apply: {stale}"
    unexplained = [p.name for p in patches if not re.match(r"^[\w/]+\.py[,:] ", describe(p))]
    assert not unexplained, f"mutations whose first paragraph does not name the code they break: {unexplained}"


def test_every_operator_mutant_of_the_sweep_applies_and_changes_one_token() -> None:
    """The operator sweep's mutants (`benchmarks/operator_sweep.py`) are patches that apply to
    the tree and change one line, by the one token they name."""
    import random

    from benchmarks.operator_sweep import candidates, library_files, mutant

    pool = [(path, candidate) for path in library_files() for candidate in candidates(path)]
    assert len(pool) > 1000
    for path, candidate in random.Random(0).sample(pool, 40):
        patch = mutant(path, candidate)
        removed = [line for line in patch.splitlines() if line.startswith("-") and not line.startswith("---")]
        added = [line for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
        assert len(removed) == len(added) == 1 and removed != added, patch
        checked = subprocess.run(["git", "apply", "--check", "-"], cwd=REPO, input=patch, capture_output=True, text=True)
        assert checked.returncode == 0, f"{patch}\n{checked.stderr}"
