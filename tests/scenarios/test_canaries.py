"""Every scenario suite fails on its canary (proof that the gate can fail).

Each suite runs in a child pytest, exactly as a user would gate their own implementation,
with the canary plugged in through the suite's option.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.faults import CANARIES

ROOT = Path(__file__).resolve().parents[2]


#: scenario module -> the optional dependency without which the whole module skips (so it cannot fail)
NEEDS = {"test_ray_service": "ray"}
#: scenario module -> the xdist group its canary run joins: a Ray suite starts a local cluster,
#: and `ray.init()` joins any local cluster it finds running, so one cluster at a time
GROUPS = {"test_ray_service": "ray"}


def _case(module: str, option: str, spec: str) -> object:
    needed = NEEDS.get(module)
    missing = needed is not None and importlib.util.find_spec(needed) is None
    marks = [pytest.mark.skipif(missing, reason=f"{module} skips without {needed} (make ray installs the [ray] extra)")]
    if module in GROUPS:
        marks.append(pytest.mark.xdist_group(GROUPS[module]))
    return pytest.param(module, option, spec, marks=marks)


@pytest.mark.parametrize(("module", "option", "spec"),
                         [_case(module, option, spec) for module in sorted(CANARIES) for option, spec in CANARIES[module]])
def test_suite_fails_on_its_canary(module: str, option: str, spec: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", f"scenarios/{module}.py", f"{option}={spec}", "-p", "no:xdist",
         "-p", "no:randomly", "-q", "-x", "--no-header"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, f"suite {module} did not fail on canary {spec} (exit {proc.returncode}):\n{output}"
    failed = re.search(r"\b(\d+) failed", output)
    assert failed and int(failed.group(1)) >= 1, f"no scenario of {module} failed on canary {spec}:\n{output}"
    assert re.search(r"^E .*seed \d+", output, re.MULTILINE), f"failure of {module} does not state its seed:\n{output}"


def test_every_scenario_module_has_a_canary() -> None:
    # these prove their checks on broken inputs of their own instead of a plugged-in curriculum:
    # broken curricula (test_state_machine_canaries.py), broken generators
    # (tests/harness/test_generator_checks.py), broken config builders (test_config_contract_canaries.py),
    # a vector blind to worker failures (test_worker_failures_canaries.py)
    own = {"test_curriculum_state_machine", "test_task_generators", "test_config_contract", "test_worker_failures"}
    modules = {p.stem for p in (ROOT / "scenarios").glob("test_*.py")} - own
    missing = modules - set(CANARIES)
    assert not missing, f"scenario modules without a canary: {sorted(missing)}"
