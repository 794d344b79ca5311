"""`curriculum-harness gate`: run the installed suites on a curriculum and report the outcome.

The gate is pytest over the suites the wheel ships (`pytest --pyargs harness.scenarios`), run
with the harness's own pytest settings (`harness/gate.ini`), never with those of the project it
is run from. This module builds that command, reads what the run left (a JUnit XML report and
the `--gate-margins` JSON) and turns it into:

- `GateOutcome`: per test its outcome and message, per check its worst margin;
- a markdown report (`render_report`): per suite passed / failed with its numbers / skipped with
  the reason, and the worst margin of every check; suitable for a CI job summary;
- a comparison with an expected-outcome file (`load_expectations`, `compare_outcomes`), for a
  curriculum whose known weaknesses are written down: the gate then passes when every test
  ends as expected.

Test ids are `<suite module>::<test name>` (`test_eviction_health::test_pool_stays_full...[seed0]`),
with the class in between for class-based tests.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import math
import os
import re
import sys
import tomllib
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "OUTCOMES",
    "GATE_INI",
    "SUITES_PACKAGE",
    "CaseOutcome",
    "CheckMargin",
    "GateOutcome",
    "Expectation",
    "ExpectationError",
    "Mismatch",
    "suites_dir",
    "pytest_command",
    "read_outcome",
    "group_suffix_at",
    "without_group",
    "load_expectations",
    "compare_outcomes",
    "render_report",
]

SUITES_PACKAGE: Final = "harness.scenarios"
"""Where the suites are installed (`scenarios/` of a checkout, mapped into the harness package)."""

GATE_INI: Final = Path(__file__).resolve().parent / "gate.ini"
"""The pytest settings the gate runs with."""

OUTCOMES: Final = ("passed", "failed", "skipped")
"""What a test of the gate can end as (an error in setup or teardown counts as failed)."""

_MESSAGE_LINES: Final = 6
"""Lines of a failure message shown in the report (the numbers come first)."""


@dataclass(frozen=True)
class CaseOutcome:
    """How one test of the gate ended."""

    test: str
    """`<suite module>::<test name>`."""
    outcome: str
    """One of `OUTCOMES`."""
    message: str = ""
    """The failure message (its numbers) or the skip reason; empty for a pass."""
    seconds: float = 0.0

    @property
    def suite(self) -> str:
        """The suite module without its `test_` prefix: `eviction_health`."""
        module = self.test.split("::", 1)[0]
        return module.removeprefix("test_")


@dataclass(frozen=True)
class CheckMargin:
    """One statistical check's worst measured value over the run, against its limit."""

    name: str
    worst: float
    limit: float
    direction: str
    """"at most" or "at least"."""
    margin: float
    """Distance from the worst value to the limit, positive inside it."""
    where: str
    """The seed (or seeds) of the worst value."""
    mean: float
    runs: int


@dataclass
class GateOutcome:
    """Everything a gate run produced, read back from its reports."""

    tests: list[CaseOutcome] = field(default_factory=list)
    checks: list[CheckMargin] = field(default_factory=list)
    exit_code: int = 0
    """pytest's exit code."""
    seconds: float = 0.0
    curriculum: str | None = None
    """The `--curriculum` spec, None for the built-in curriculum."""
    curriculum_env: str | None = None
    seeds: str = "base seed 0"

    def counts(self) -> Counter:
        return Counter(test.outcome for test in self.tests)

    @property
    def passed(self) -> bool:
        """The gate passed: pytest succeeded and no test failed."""
        return self.exit_code == 0 and not self.counts()["failed"]

    def by_suite(self) -> dict[str, list[CaseOutcome]]:
        suites: dict[str, list[CaseOutcome]] = {}
        for test in sorted(self.tests, key=lambda t: t.test):
            suites.setdefault(test.suite, []).append(test)
        return suites


# ---------------------------------------------------------------------------------- the run
def auto_workers() -> int:
    """What `-n auto` means for the suites: one xdist worker per CPU and one more. They spend
    about a fifth of their time waiting on worker processes, held locks and timeouts, which
    the extra worker fills."""
    return (os.cpu_count() or 1) + 1


def suites_dir() -> Path:
    """The folder of the installed suites (`harness/scenarios/`, or `scenarios/` in a checkout)."""
    spec = importlib.util.find_spec(SUITES_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"the gate's suites ({SUITES_PACKAGE}) are not installed with this harness")
    return Path(spec.origin).resolve().parent


def pytest_command(
    targets: Sequence[str],
    *,
    rootdir: Path,
    pyargs: bool = False,
    curriculum: str | None = None,
    curriculum_env: str | None = None,
    seeds: int | None = None,
    base_seed: int | None = None,
    workers: str | None = None,
    junitxml: Path | None = None,
    margins: Path | None = None,
    learners: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """The pytest command line of a gate run, with the harness's own pytest settings.

    `workers`: "auto", or a number of xdist workers ("1" runs in one process; None leaves
    pytest's default), distributed by xdist group as `make gate` does.
    """
    command = [sys.executable, "-m", "pytest", *(["--pyargs"] if pyargs else []), *targets,
               "-c", str(GATE_INI), f"--rootdir={rootdir}", "-rfEs"]
    options = {"--gate-curriculum": curriculum, "--gate-curriculum-env": curriculum_env, "--gate-seeds": seeds,
               "--gate-base-seed": base_seed, "--junitxml": junitxml, "--gate-margins": margins}
    command += [f"{option}={value}" for option, value in options.items() if value is not None]
    if learners:
        command.append("--gate-learners")
    if workers is not None:
        if importlib.util.find_spec("xdist") is None:
            if workers not in ("1", "0"):
                print(f"note: pytest-xdist is not installed; running in one process instead of -n {workers}",
                      file=sys.stderr)
        elif workers in ("1", "0"):
            command += ["-n", "0"]
        else:  # checks that share a setup's runs stay in one worker (the suites group them)
            command += ["-n", str(auto_workers()) if workers == "auto" else workers, "--dist", "loadgroup"]
    return [*command, *extra]


def _test_id(classname: str, name: str) -> str:
    parts = classname.split(".")
    modules = [i for i, part in enumerate(parts) if part.startswith("test_")]
    start = modules[0] if modules else max(len(parts) - 1, 0)
    return without_group("::".join([*parts[start:], name]))


def group_suffix_at(nodeid: str) -> int:
    """Where pytest-xdist's `@<group>` suffix (added to grouped tests under `--dist loadgroup`)
    starts in `nodeid`, or -1; xdist's own rule: an `@` after the parameters' closing bracket."""
    at = nodeid.rfind("@")
    return at if at > nodeid.rfind("]") and at > nodeid.rfind("::") else -1


_GROUP_SUFFIX: Final = re.compile(r"@[\w.-]+\]?$")


def without_group(name: str) -> str:
    """`name` (a node id, or a JUnit test name) without pytest-xdist's `@<group>` suffix: the
    test's name in reports and expected-outcome files. JUnit puts a suffixed node id's
    parameters back in brackets, suffix and all (`test[seed0]@ray]`)."""
    match = _GROUP_SUFFIX.search(name)
    if match is None:
        return name
    head = name[:match.start()]
    if match.group().endswith("]"):  # the JUnit form, or an `@` inside the parameters
        return head if head.endswith("]") else name
    return head if "[" not in head or head.endswith("]") else name


def _message(element: ET.Element) -> str:
    """A failure's or skip's message: pytest's `message` attribute (the assertion text), else
    the last `E ` lines of the traceback."""
    message = (element.get("message") or "").strip()
    if element.tag == "skipped":
        for prefix in ("Skipped: ", "collections skipped: "):
            message = message.removeprefix(prefix)
        return message
    # pytest appends its assert rewriting ("assert False", "+  where ...") after a blank-free
    # message; keep the assertion's own text
    lines = [line for line in message.splitlines() if line.strip()]
    kept: list[str] = []
    for line in lines:
        if kept and (line.startswith("assert ") or line.lstrip().startswith(("+", "-  where", "where"))):
            break
        kept.append(line)
    if not kept:
        kept = [line[2:] for line in (element.text or "").splitlines() if line.startswith("E ")]
    return "\n".join(kept[:_MESSAGE_LINES])


def read_outcome(junitxml: Path, margins: Path | None = None, *, exit_code: int = 0) -> GateOutcome:
    """The outcome of a gate run from its JUnit XML report and its `--gate-margins` JSON."""
    outcome = GateOutcome(exit_code=exit_code)
    if junitxml.is_file():
        root = ET.parse(junitxml).getroot()
        for case in root.iter("testcase"):
            test = _test_id(case.get("classname", ""), case.get("name", ""))
            seconds = float(case.get("time") or 0.0)
            found = {child.tag: child for child in case}
            bad = found.get("failure") if "failure" in found else found.get("error")
            if bad is not None:
                result = CaseOutcome(test, "failed", _message(bad), seconds)
            elif "skipped" in found:
                result = CaseOutcome(test, "skipped", _message(found["skipped"]), seconds)
            else:
                result = CaseOutcome(test, "passed", "", seconds)
            # a teardown error after a pass is reported as a second testcase element: failed wins
            outcome.tests = [t for t in outcome.tests if t.test != test or result.outcome != "failed"]
            if not any(t.test == test for t in outcome.tests):
                outcome.tests.append(result)
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        if suite is not None:
            outcome.seconds = float(suite.get("time") or 0.0)
    if margins is not None and margins.is_file():
        data = json.loads(margins.read_text(encoding="utf-8"))
        for name, check in sorted(data.get("checks", {}).items()):
            outcome.checks.append(CheckMargin(
                name=name, worst=float(check["worst"]), limit=float(check["limit"]), direction=check["direction"],
                margin=float(check["margin"]), where=check.get("where") or f"seed {check.get('seed')}",
                mean=float(check["mean"]), runs=int(check["runs"]),
            ))
    return outcome


# ---------------------------------------------------------------------------------- expectations
class ExpectationError(ValueError):
    """An expected-outcome file that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Expectation:
    """Tests matching `test` (a glob over test ids) end as `outcome`; a failure or skip message
    contains `match` (when given)."""

    test: str
    outcome: str
    match: str | None = None
    why: str | None = None
    """Why this outcome is expected (shown in the report)."""


@dataclass(frozen=True)
class Mismatch:
    """A test that did not end as expected (or an expectation no test matched)."""

    test: str
    expected: str
    actual: str


def load_expectations(path: Path) -> list[Expectation]:
    """Read an expected-outcome file (TOML): `[[expect]]` tables with `test`, `outcome`,
    optional `match` and `why`. The first expectation whose `test` glob matches a test applies."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ExpectationError(f"cannot read {path} ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExpectationError(f"{path} is not valid TOML ({exc})") from None
    entries = data.get("expect")
    if not isinstance(entries, list) or not entries:
        raise ExpectationError(f"{path}: expected at least one [[expect]] table, received {entries!r}")
    expectations = []
    for index, entry in enumerate(entries):
        where = f"{path}: [[expect]] #{index + 1}"
        unknown = sorted(set(entry) - {"test", "outcome", "match", "why"})
        if unknown:
            raise ExpectationError(f"{where}: unknown key(s) {', '.join(unknown)}; expected test, outcome, match, why")
        test, outcome = entry.get("test"), entry.get("outcome")
        if not isinstance(test, str) or not test:
            raise ExpectationError(f"{where}: expected `test` to be a glob over test ids, received {test!r}")
        if outcome not in OUTCOMES:
            raise ExpectationError(f"{where}: expected `outcome` to be one of {', '.join(OUTCOMES)}, "
                                   f"received {outcome!r}")
        match = entry.get("match")
        if match is not None and (not isinstance(match, str) or outcome == "passed"):
            raise ExpectationError(f"{where}: `match` is a substring of a failure or skip message, received "
                                   f"{match!r} for outcome {outcome!r}")
        expectations.append(Expectation(test, outcome, match, entry.get("why")))
    return expectations


def compare_outcomes(tests: Sequence[CaseOutcome], expectations: Sequence[Expectation]) -> list[Mismatch]:
    """Every test that ended otherwise than its first matching expectation, every test no
    expectation covers, and every expectation that matched no test."""
    mismatches = []
    used: set[int] = set()
    for test in sorted(tests, key=lambda t: t.test):
        index = next((i for i, e in enumerate(expectations) if fnmatch.fnmatchcase(test.test, e.test)), None)
        if index is None:
            mismatches.append(Mismatch(test.test, "(no expectation covers this test)", _describe(test)))
            continue
        used.add(index)
        expected = expectations[index]
        if test.outcome != expected.outcome or (expected.match is not None and expected.match not in test.message):
            wanted = expected.outcome + (f" with a message containing {expected.match!r}" if expected.match else "")
            mismatches.append(Mismatch(test.test, wanted, _describe(test)))
    for index, expected in enumerate(expectations):
        if index not in used:
            mismatches.append(Mismatch(expected.test, expected.outcome, "(no test matched)"))
    return mismatches


def _describe(test: CaseOutcome) -> str:
    first = test.message.splitlines()[0] if test.message else ""
    return f"{test.outcome}: {first}" if first else test.outcome


# ---------------------------------------------------------------------------------- the report
def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def _summary_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o]) or "no tests"


def render_report(outcome: GateOutcome, *, mismatches: Sequence[Mismatch] | None = None,
                  expectations_path: Path | None = None) -> str:
    """The markdown report of a gate run.

    With `mismatches` (from `compare_outcomes`), the verdict is whether every test ended as
    the expected-outcome file says.
    """
    counts = outcome.counts()
    if mismatches is not None:
        verdict = "passed" if not mismatches and outcome.exit_code in (0, 1) else "FAILED"
        basis = f"every test ended as `{expectations_path}` expects" if verdict == "passed" else \
            f"{len(mismatches)} outcome(s) differ from `{expectations_path}`"
    else:
        verdict = "passed" if outcome.passed else "FAILED"
        basis = "no test failed" if outcome.passed else (
            f"{counts['failed']} test(s) failed" if counts["failed"] else f"pytest exited with code {outcome.exit_code}")
    lines = [
        f"## Curriculum gate {verdict}: {basis}",
        "",
        f"- curriculum: `{outcome.curriculum}`" if outcome.curriculum else "- curriculum: built-in `curriculum.Curriculum`",
        f"- env wrapper: `{outcome.curriculum_env}`" if outcome.curriculum_env else
        "- env wrapper: built-in `curriculum.CurriculumEnv`",
        f"- seeds: {outcome.seeds}",
        f"- tests: {_summary_counts(counts)} in {outcome.seconds:.0f} s",
        "",
    ]
    if mismatches:
        lines += ["### Outcomes that differ from the expected ones", "", "| test | expected | actual |",
                  "|---|---|---|"]
        lines += [f"| `{_cell(m.test)}` | {_cell(m.expected)} | {_cell(m.actual)} |" for m in mismatches]
        lines.append("")
    lines += ["### Suites", "", "| suite | outcome | tests | what it said |", "|---|---|---|---|"]
    for suite, tests in outcome.by_suite().items():
        suite_counts = Counter(t.outcome for t in tests)
        state = "failed" if suite_counts["failed"] else "passed" if suite_counts["passed"] else "skipped"
        said = [t for t in tests if t.outcome == state and t.message]
        note = _cell(said[0].message.splitlines()[0]) if said else ""
        if len({t.message for t in said}) > 1:
            note += f" (and {len(said) - 1} more)"
        lines.append(f"| {suite} | {state} | {_summary_counts(suite_counts)} | {note} |")
    lines.append("")
    failed = [t for t in outcome.tests if t.outcome == "failed"]
    if failed:
        lines += ["### Failures", ""]
        for test in sorted(failed, key=lambda t: t.test):
            lines += [f"**`{test.test}`**", "", "```", test.message or "(no message)", "```", ""]
    skipped = [t for t in outcome.tests if t.outcome == "skipped"]
    if skipped:
        lines += ["### Skipped", "", "| test | reason |", "|---|---|"]
        lines += [f"| `{_cell(t.test)}` | {_cell(t.message)} |" for t in sorted(skipped, key=lambda t: t.test)]
        lines.append("")
    if outcome.checks:
        lines += ["### Worst margin per check", "",
                  "Margin: distance from the worst measured value to the limit (negative: over the limit).", "",
                  "| check | worst | limit | margin | where | mean | runs |", "|---|---|---|---|---|---|---|"]
        for check in sorted(outcome.checks, key=lambda c: (c.margin >= 0, c.name)):
            lines.append(f"| {check.name} | {_number(check.worst)} | {check.direction} {_number(check.limit)} | "
                         f"{_number(check.margin)} | {_cell(check.where)} | {_number(check.mean)} | {check.runs} |")
        lines.append("")
    return "\n".join(lines)
