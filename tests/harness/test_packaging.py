"""The wheel: what it holds, what the base install depends on, and that the pytest plugin it
registers costs an unrelated test session nothing. (Installing it into a fresh environment,
lean and with [gate], and gating curricula there is `.ci/check_wheel`.)"""

from __future__ import annotations

import email
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# one worker builds the wheel for every test here: two builds at once share build/ and race
pytestmark = pytest.mark.xdist_group("wheel")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(ROOT)], check=True, capture_output=True, timeout=300)
    (path,) = out.glob("curriculum_harness-*.whl")
    return zipfile.ZipFile(path)


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(wheel.read(name))


def test_wheel_holds_the_library_the_harness_and_the_suites_inside_it(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    tops = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert tops == {"curriculum", "harness"}, "nothing but curriculum/ and harness/ at the top of site-packages"
    suites = {f"harness/scenarios/{p.name}" for p in (ROOT / "scenarios").glob("*.py")}
    assert suites <= names
    golden = {f"harness/scenarios/golden/{p.relative_to(ROOT / 'golden').as_posix()}"
              for p in (ROOT / "golden").rglob("*.json")}
    assert golden and golden <= names
    packages = {f"{p.relative_to(ROOT).as_posix()}" for p in ROOT.glob("curriculum/**/*.py")} | \
        {f"{p.relative_to(ROOT).as_posix()}" for p in ROOT.glob("harness/**/*.py")}
    assert packages <= names, sorted(packages - names)
    assert "harness/gate.ini" in names


def test_base_install_is_the_library_only_and_the_gate_is_an_extra(wheel: zipfile.ZipFile) -> None:
    metadata = _metadata(wheel)
    requires = metadata.get_all("Requires-Dist")
    base = sorted(r.split(";")[0].split(">")[0].split("=")[0].strip() for r in requires if "extra ==" not in r)
    assert base == ["gymnasium", "numpy", "psutil", "pufferlib-core"]
    gate = sorted(r.split(";")[0].split(">")[0].strip() for r in requires if 'extra == "gate"' in r)
    assert gate == ["hypothesis", "matplotlib", "pytest", "pytest-xdist", "syrupy"]
    assert not [r for r in requires if r.startswith("torch")], "torch enters only through a feature that uses it"
    entry_points = wheel.read(next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))).decode()
    assert "curriculum_harness = harness.pytest_plugin" in entry_points
    assert "curriculum-harness = harness.cli:main" in entry_points


def test_the_pytest_plugin_imports_nothing_but_pytest() -> None:
    heavy = ("syrupy", "hypothesis", "numpy", "curriculum", "pufferlib", "gymnasium", "matplotlib", "torch")
    probe = (f"import sys, harness.pytest_plugin; "
             f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "[]"
