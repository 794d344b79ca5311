"""`harness.recorder.MetricsRecorder`: per-epoch metrics in memory, in JSONL, and in golden form."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from harness.recorder import MetricsRecorder

EPOCHS = [
    {"metric/epoch": np.int64(0), "overview/reward": np.float32(0.25), "env/a": 0.1 + 0.2},
    {"metric/epoch": 1, "overview/reward": 0.5, "env/b": {"nested": np.float64(1.0 / 3.0)}},
    {"metric/epoch": 2, "overview/reward": math.nan},
]


def _strict(line: str) -> dict:
    def refuse(token: str) -> None:
        raise AssertionError(f"non-JSON token {token} in {line!r}")

    return json.loads(line, parse_constant=refuse)


def test_jsonl_round_trip_keeps_every_epoch_exactly(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "metrics.jsonl"  # the folder is created
    with MetricsRecorder(path) as recorder:
        for epoch in EPOCHS:
            recorder.record(epoch)
        streamed = path.read_text().splitlines()  # flushed after every epoch, readable mid-run
        assert [_strict(line) for line in streamed] == recorder.epochs
    assert recorder.epochs == [
        {"env/a": 0.30000000000000004, "metric/epoch": 0, "overview/reward": 0.25},
        {"env/b": {"nested": 1.0 / 3.0}, "metric/epoch": 1, "overview/reward": 0.5},
        {"metric/epoch": 2, "overview/reward": "nan"},
    ]
    assert path.read_text() == "".join(json.dumps(e, sort_keys=True) + "\n" for e in recorder.epochs)


def test_a_new_recorder_starts_its_file_afresh(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with MetricsRecorder(path) as first:
        first.record({"x": 1})
        first.record({"x": 2})
    with MetricsRecorder(path) as second:
        second.record({"x": 3})
    assert path.read_text() == '{"x": 3}\n'


def test_recorded_epochs_do_not_alias_the_caller_dict() -> None:
    recorder = MetricsRecorder()
    metrics = {"a": [1.0], "b": {"c": 2}}
    recorder.record(metrics)
    metrics["a"].append(5.0)
    metrics["b"]["c"] = 9
    assert recorder.epochs == [{"a": [1.0], "b": {"c": 2}}]
    assert recorder.jsonl_path is None


def test_series_has_nan_where_an_epoch_lacks_the_metric() -> None:
    recorder = MetricsRecorder()
    for epoch in EPOCHS:
        recorder.record(epoch)
    assert recorder.series("metric/epoch") == [0, 1, 2]
    env_a = recorder.series("env/a")
    assert env_a[0] == 0.30000000000000004 and math.isnan(env_a[1]) and math.isnan(env_a[2])
    assert all(math.isnan(v) for v in recorder.series("never/recorded"))
    assert len(recorder.series("never/recorded")) == 3


def test_keys_and_last() -> None:
    recorder = MetricsRecorder()
    assert recorder.keys() == [] and recorder.last == {}
    for epoch in EPOCHS:
        recorder.record(epoch)
    assert recorder.keys() == ["env/a", "env/b", "metric/epoch", "overview/reward"]
    assert recorder.last == {"metric/epoch": 2, "overview/reward": "nan"}


def _counting(epochs: int) -> MetricsRecorder:
    recorder = MetricsRecorder()
    for epoch in range(epochs):
        recorder.record({"epoch": epoch, "half": epoch / 2})
    return recorder


def test_golden_takes_every_nth_epoch_plus_the_last() -> None:
    assert _counting(5).golden(every=2) == {"epoch": [0, 2, 4], "half": [0.0, 1.0, 2.0]}
    assert _counting(6).golden(every=2) == {"epoch": [0, 2, 4, 5], "half": [0.0, 1.0, 2.0, 2.5]}
    assert _counting(3).golden(every=10) == {"epoch": [0, 2], "half": [0.0, 1.0]}
    assert _counting(3).golden() == {"epoch": [0, 1, 2], "half": [0.0, 0.5, 1.0]}


def test_golden_with_chosen_keys_shows_missing_values_as_none() -> None:
    recorder = MetricsRecorder()
    for epoch in EPOCHS:
        recorder.record(epoch)
    assert recorder.golden(["overview/reward", "env/a"], every=2) == {
        "env/a": [0.30000000000000004, None],
        "overview/reward": [0.25, "nan"],
    }
    assert list(recorder.golden(["z", "a"])) == ["a", "z"]


def test_golden_of_an_empty_recorder() -> None:
    assert MetricsRecorder().golden() == {}
    assert MetricsRecorder().golden(["a"], every=3) == {"a": []}
