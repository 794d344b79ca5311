"""`harness.golden`: the same metrics always serialise to the same text."""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.golden import (
    GOLDEN_SIGNIFICANT_DIGITS,
    GoldenSnapshotExtension,
    GoldenWriteRefusedError,
    checkout_golden_root,
    golden_root,
    serialise_golden,
    to_plain,
)


def test_golden_text_is_sorted_rounded_plain_and_newline_terminated() -> None:
    metrics = {
        "zeta": 123456.7,
        "alpha": np.float32(0.1),
        10: -0.0,
        9: [np.int64(3), (np.bool_(True), None)],
        "grid": np.array([[1.234567, 2], [3, 4]]),
        "lost": math.nan,
        "floor": -math.inf,
        "small": 0.000123456789,
        "label": "é",
    }
    assert serialise_golden(metrics) == textwrap.dedent("""\
        {
          "10": 0.0,
          "9": [
            3,
            [
              true,
              null
            ]
          ],
          "alpha": 0.1,
          "floor": "-inf",
          "grid": [
            [
              1.2346,
              2.0
            ],
            [
              3.0,
              4.0
            ]
          ],
          "label": "é",
          "lost": "nan",
          "small": 0.00012346,
          "zeta": 123460.0
        }
        """)


def test_insertion_order_and_float_noise_do_not_change_the_text() -> None:
    a = {"b": {"y": 0.1 + 0.2, "x": 1}, "a": [1.0 / 3.0]}
    b = {"a": [0.333333333333], "b": {"x": np.int32(1), "y": np.float64(0.3)}}
    assert serialise_golden(a) == serialise_golden(b)


def test_five_significant_digits_are_kept() -> None:
    assert GOLDEN_SIGNIFICANT_DIGITS == 5
    assert to_plain([0.123456, 98765.4321, 1.00004, 1.00004e-7, 2.5]) == [0.12346, 98765.0, 1.0, 1.0e-7, 2.5]
    assert to_plain(0.123456, digits=2) == 0.12
    assert serialise_golden({"x": 0.123456}, digits=3) == '{\n  "x": 0.123\n}\n'


def test_numpy_values_become_plain_python_types() -> None:
    plain = to_plain({"i": np.int64(4), "f": np.float16(0.5), "b": np.bool_(False), "a": np.arange(3)})
    assert plain == {"a": [0, 1, 2], "b": False, "f": 0.5, "i": 4}
    assert [type(plain[k]) for k in ("a", "b", "f", "i")] == [list, bool, float, int]
    assert all(type(v) is int for v in plain["a"])


def test_non_finite_values_are_text_so_the_file_stays_strict_json() -> None:
    text = serialise_golden({"values": [math.nan, math.inf, -math.inf, np.float32("nan")]})

    def refuse(token: str) -> None:
        raise AssertionError(f"non-JSON token {token} in golden text")

    assert json.loads(text, parse_constant=refuse) == {"values": ["nan", "inf", "-inf", "nan"]}


@pytest.mark.parametrize(("value", "name"), [({1, 2}, "set"), (object, "type"), (b"x", "bytes")])
def test_values_that_are_not_json_like_are_refused_by_name(value: object, name: str) -> None:
    message = f"Expected JSON-like metric values, received {name}: {value!r}"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        serialise_golden({"metric": value})


def test_golden_files_live_under_golden_and_the_module_name() -> None:
    location = SimpleNamespace(filepath="/project/scenarios/test_eviction_health.py", basename="test_eviction_health")
    assert Path(GoldenSnapshotExtension.dirname(test_location=location)) == Path(
        "/project/golden/test_eviction_health")
    assert GoldenSnapshotExtension().serialize({"b": 1, "a": 2.000001}) == '{\n  "a": 2.0,\n  "b": 1\n}\n'


# ---- where golden files are read from and written to --------------------------------------------
def _project(root: Path, *, name: str | None = "curriculum-harness") -> Path:
    """A folder laid out like a checkout (a pyproject naming `name`, scenarios/, golden/test_x/)."""
    (root / "scenarios").mkdir(parents=True)
    (root / "golden" / "test_x").mkdir(parents=True)
    (root / "golden" / "test_x" / "test_a.json").write_text("{}\n")
    if name is not None:
        (root / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n')
    return root


def test_golden_files_are_found_in_a_checkout_and_in_an_installed_package(tmp_path: Path) -> None:
    checkout = _project(tmp_path / "checkout")
    assert golden_root(checkout / "scenarios") == checkout / "golden"
    installed = tmp_path / "site-packages" / "harness" / "scenarios"
    (installed / "golden" / "test_x").mkdir(parents=True)
    assert golden_root(installed) == installed / "golden"
    this = Path(__file__).resolve().parents[2]
    assert checkout_golden_root() == this / "golden"  # the tests run from a checkout


@pytest.mark.parametrize("where", ["installed", "other project", "no pyproject", "outside golden"])
def test_golden_files_are_never_written_or_deleted_outside_a_checkouts_golden(tmp_path: Path, where: str) -> None:
    if where == "installed":
        location = tmp_path / "site-packages" / "harness" / "scenarios" / "golden" / "test_x" / "test_a.json"
        location.parent.mkdir(parents=True)
        location.write_text("{}\n")
    else:
        name = {"other project": "someone-else", "no pyproject": None}.get(where, "curriculum-harness")
        root = _project(tmp_path / "p", name=name)
        location = root / "golden" / "test_x" / "test_a.json"
        if where == "outside golden":
            location = root / "scenarios" / "snapshots" / "test_a.json"
    message = (f"Refusing to write or delete the golden snapshot {location.resolve()}: golden files are written only "
               "into the golden/ folder of a checkout of curriculum-harness (a folder whose pyproject.toml names it, "
               "beside scenarios/), never into an installed package; update them with `pytest scenarios/ "
               "--snapshot-update` in a checkout")
    extension = GoldenSnapshotExtension()
    with pytest.raises(GoldenWriteRefusedError, match=f"^{re.escape(message)}$"):
        extension.delete_snapshots(snapshot_location=str(location), snapshot_names={"test_a"})
    fresh = location.with_name("test_new.json")
    with pytest.raises(GoldenWriteRefusedError, match=f"^{re.escape(message.replace('test_a', 'test_new'))}$"):
        GoldenSnapshotExtension.write_snapshot(snapshot_location=str(fresh), snapshots=[("{}", None, 0)])
    assert not fresh.exists() and (location.exists() or where == "outside golden")


def test_a_checkouts_own_golden_files_can_be_deleted(tmp_path: Path) -> None:
    root = _project(tmp_path / "checkout")
    location = root / "golden" / "test_x" / "test_a.json"
    GoldenSnapshotExtension().delete_snapshots(snapshot_location=str(location), snapshot_names={"test_a"})
    assert not location.exists()
