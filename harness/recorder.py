"""Per-epoch metric dicts: kept in memory, streamed to JSONL, reduced to golden form."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.golden import to_plain

__all__ = ["MetricsRecorder"]


class MetricsRecorder:
    """Collects one metrics dict per epoch; optionally appends each to `metrics.jsonl`."""

    def __init__(self, jsonl_path: str | Path | None = None) -> None:
        self.epochs: list[dict[str, Any]] = []
        self.jsonl_path = Path(jsonl_path) if jsonl_path is not None else None
        self._file = None
        if self.jsonl_path is not None:
            self.jsonl_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.jsonl_path.open("w", encoding="utf-8")

    def record(self, metrics: Mapping[str, Any]) -> None:
        """Keep one epoch's metrics (plain types) and stream them if a JSONL path was given."""
        plain = to_plain(metrics, digits=17)
        self.epochs.append(plain)
        if self._file is not None:
            self._file.write(json.dumps(plain, sort_keys=True) + "\n")
            self._file.flush()

    def series(self, key: str) -> list[float]:
        """One metric over epochs (NaN where an epoch lacks it)."""
        return [e.get(key, math.nan) for e in self.epochs]

    def keys(self) -> list[str]:
        """Every metric name seen, sorted."""
        return sorted({k for e in self.epochs for k in e})

    @property
    def last(self) -> dict[str, Any]:
        return self.epochs[-1] if self.epochs else {}

    def golden(self, keys: Iterable[str] | None = None, *, every: int = 1) -> dict[str, Any]:
        """A compact view for a golden snapshot: chosen keys, every `every`-th epoch plus the last."""
        chosen = sorted(keys) if keys is not None else self.keys()
        picks = list(range(0, len(self.epochs), every))
        if self.epochs and picks[-1] != len(self.epochs) - 1:
            picks.append(len(self.epochs) - 1)
        return {key: [self.epochs[i].get(key) for i in picks] for key in chosen}

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> MetricsRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
