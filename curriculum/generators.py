"""Task generators: turn a task id into an env config and a label, deterministically.

A generator is a pure function of (its own config, task id): any process that knows a task id
can rebuild the task, which is what lets many workers share one pool by id alone.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

from curriculum.errors import CurriculumConfigError

__all__ = [
    "TaskGenerator",
    "SingleTaskGenerator",
    "WeightedTaskSetGenerator",
    "BucketedTaskGenerator",
    "ValueRange",
]

_SEED_MIX = 0x9E3779B97F4A7C15
_IMMUTABLE = (int, float, str, bool, type(None))
_PLAIN_SCALARS = frozenset({int, float, str, bool, type(None)})


def _fresh_copy(value: Any) -> Any:
    """A deep copy of a config value: plain dicts, lists and scalars copied directly (what a
    config is made of, several times faster than `copy.deepcopy`), anything else deep-copied."""
    kind = type(value)
    if kind in _PLAIN_SCALARS:
        return value
    if kind is dict:
        return {key: _fresh_copy(item) for key, item in value.items()}
    if kind is list:
        return [_fresh_copy(item) for item in value]
    return copy.deepcopy(value)


def _task_rng(seed: int, task_id: int) -> random.Random:
    """A generator for one task id; cheap to build and independent across ids."""
    return random.Random((seed * _SEED_MIX) ^ task_id)


def _stream_salt(description: Mapping[str, Any]) -> int:
    """A 256-bit salt from a generator's description (stable across processes, as `describe` must be).

    A weighted set salts its per-task stream with it, so its choice of child is independent of
    the child's own draws for the same task id (an unsalted stream with the same seed would
    hand the child only the task ids whose first draw fell in the child's weight interval).
    """
    text = json.dumps(description, sort_keys=True, default=repr)
    return int.from_bytes(hashlib.sha256(text.encode()).digest(), "little")


def _check_label(label: Any) -> None:
    if not isinstance(label, str):
        raise CurriculumConfigError(f"Expected `label` to be a string, received {label!r}")


def _check_seed(seed: Any) -> int:
    """`seed` as a plain int: numpy integers are seeds here as everywhere else in the library."""
    if not isinstance(seed, Integral) or isinstance(seed, bool):
        raise CurriculumConfigError(f"Expected `seed` to be an integer, received {seed!r}")
    return int(seed)


class TaskGenerator(ABC):
    """Maps a task id to `(env_cfg, label)`; the same id always gives the same task."""

    @abstractmethod
    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        """The env config and label of task `task_id`."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """A JSON-able description; two generators with equal descriptions make equal tasks."""

    @property
    @abstractmethod
    def labels(self) -> tuple[str, ...]:
        """Every label this generator can produce."""


class SingleTaskGenerator(TaskGenerator):
    """Always the same env config."""

    def __init__(self, env_cfg: Mapping[str, Any], *, label: str | None = None) -> None:
        if not isinstance(env_cfg, Mapping):
            raise CurriculumConfigError(f"Expected `env_cfg` to be a mapping, received {type(env_cfg).__name__}")
        if label is not None:
            _check_label(label)
        self.env_cfg = copy.deepcopy(dict(env_cfg))  # the caller may change its own dicts later
        self.label = label if label is not None else str(env_cfg.get("label", "default"))

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        return _fresh_copy(self.env_cfg), self.label

    def describe(self) -> dict[str, Any]:
        return {"type": "single", "env_cfg": repr(sorted(self.env_cfg.items())), "label": self.label}

    @property
    def labels(self) -> tuple[str, ...]:
        return (self.label,)


class WeightedTaskSetGenerator(TaskGenerator):
    """Picks one child generator per task id, with the given weights (a child given without a
    weight weighs 1.0)."""

    def __init__(
        self, children: Sequence[tuple[TaskGenerator, float]] | Sequence[TaskGenerator], *, seed: int = 0
    ) -> None:
        if isinstance(children, (str, bytes)) or not isinstance(children, Sequence):
            raise CurriculumConfigError(
                "Expected `children` to be a sequence of generators or (generator, weight) pairs, "
                f"received {type(children).__name__}"
            )
        pairs = [c if isinstance(c, tuple) else (c, 1.0) for c in children]
        if not pairs:
            raise CurriculumConfigError("Expected `children` to hold at least one generator, received none")
        for pair in pairs:
            if len(pair) != 2:
                raise CurriculumConfigError(
                    "Expected each of `children` to be a TaskGenerator or a (TaskGenerator, weight) pair, "
                    f"received a tuple of length {len(pair)}"
                )
            generator, weight = pair
            if not isinstance(generator, TaskGenerator):
                raise CurriculumConfigError(
                    f"Expected each of `children` to be a TaskGenerator, received {type(generator).__name__}"
                )
            if not (_is_finite_number(weight) and weight >= 0.0):
                raise CurriculumConfigError(f"Expected the weights in `children` to be finite and >= 0, received {weight!r}")
        seed = _check_seed(seed)
        total = sum(w for _, w in pairs)
        if total <= 0.0:
            raise CurriculumConfigError(f"Expected the weights in `children` to sum to > 0, received {total!r}")
        self.children = [g for g, _ in pairs]
        self.weights = [w / total for _, w in pairs]
        self._cum = []
        acc = 0.0
        for w in self.weights:
            acc += w
            self._cum.append(acc)
        self.seed = seed
        self._salt = _stream_salt(self.describe())

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        u = random.Random(self._salt ^ task_id).random()
        for child, edge in zip(self.children, self._cum):
            if u < edge:
                return child.generate(task_id)
        return self.children[-1].generate(task_id)

    def describe(self) -> dict[str, Any]:
        return {
            "type": "weighted_set",
            "seed": self.seed,
            "children": [c.describe() for c in self.children],
            "weights": [round(w, 12) for w in self.weights],
        }

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(label for c in self.children for label in c.labels))


@dataclass(frozen=True)
class ValueRange:
    """A continuous bucket: a uniform draw in `[low, high]` (integers if both ends are ints)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (_is_finite_number(self.low) and _is_finite_number(self.high)):
            raise CurriculumConfigError(
                f"Expected ValueRange low and high to be finite numbers, received low={self.low!r}, high={self.high!r}"
            )
        if not self.low <= self.high:
            raise CurriculumConfigError(
                f"Expected ValueRange low <= high, received low={self.low!r}, high={self.high!r}"
            )

    def draw(self, rng: random.Random) -> float | int:
        if isinstance(self.low, int) and isinstance(self.high, int):
            return rng.randint(self.low, self.high)
        return rng.uniform(self.low, self.high)


class BucketedTaskGenerator(TaskGenerator):
    """A base env config with some keys drawn per task from value lists or ranges.

    Keys are dotted paths into the (nested) config: `{"game.map.width": [10, 20, 40]}`.

    `value_labels` gives bucket values their own labels, so per-label metrics split by
    difficulty: `{"game.map.width": {10: "small", 20: "medium", 40: "large"}}` labels a task
    by the width it drew. A task's label is `label` (when given) followed by the label of each
    listed bucket's value, in bucket order, joined with "_" (`maze_small`). Every value of a
    listed bucket needs a label; ranges (`ValueRange`) cannot be listed.
    """

    def __init__(
        self,
        base_cfg: Mapping[str, Any],
        buckets: Mapping[str, Sequence[Any] | ValueRange],
        *,
        label: str | None = None,
        value_labels: Mapping[str, Mapping[Any, str]] | None = None,
        seed: int = 0,
    ) -> None:
        if not isinstance(base_cfg, Mapping):
            raise CurriculumConfigError(f"Expected `base_cfg` to be a mapping, received {type(base_cfg).__name__}")
        if not isinstance(buckets, Mapping):
            raise CurriculumConfigError(
                "Expected `buckets` to be a mapping of dotted config keys to value lists or ValueRanges, "
                f"received {type(buckets).__name__}"
            )
        if label is not None:
            _check_label(label)
        seed = _check_seed(seed)
        for key, values in buckets.items():
            if not (isinstance(key, str) and key and all(key.split("."))):
                raise CurriculumConfigError(f"Expected bucket keys to be dotted paths like 'a.b', received {key!r}")
            if isinstance(values, ValueRange):
                continue
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
                raise CurriculumConfigError(
                    f"Expected bucket {key!r} to be a non-empty list of values or a ValueRange, received {values!r}"
                )
        # the caller may change its own lists later, the values' inner lists included
        self.buckets = {k: (v if isinstance(v, ValueRange) else copy.deepcopy(list(v))) for k, v in buckets.items()}
        self.value_labels = _check_value_labels(value_labels, self.buckets)
        self.base_cfg = copy.deepcopy(dict(base_cfg))  # the caller may change its own dicts later
        if label is None and self.value_labels:
            self.label = ""
        else:
            self.label = label if label is not None else str(base_cfg.get("label", "default"))
        self.seed = seed

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        rng = _task_rng(self.seed, task_id)
        cfg = _fresh_copy(self.base_cfg)
        parts = [self.label] if self.label else []
        for key, values in self.buckets.items():
            value = values.draw(rng) if isinstance(values, ValueRange) else values[rng.randrange(len(values))]
            if not isinstance(value, _IMMUTABLE):  # a list value: the task's own, as the base config is
                value = _fresh_copy(value)
            _set_path(cfg, key, value)
            names = self.value_labels.get(key)
            if names is not None:
                parts.append(names[value])
        return cfg, "_".join(parts)

    def describe(self) -> dict[str, Any]:
        description = {
            "type": "bucketed",
            "seed": self.seed,
            "label": self.label,
            "base_cfg": repr(sorted(self.base_cfg.items())),
            # insertion order, not sorted: `generate` draws the buckets in this order
            "buckets": repr(list(self.buckets.items())),
        }
        if self.value_labels:
            description["value_labels"] = repr([(k, list(v.items())) for k, v in self.value_labels.items()])
        return description

    @property
    def labels(self) -> tuple[str, ...]:
        combos: list[list[str]] = [[self.label] if self.label else []]
        for key in self.buckets:
            names = self.value_labels.get(key)
            if names is not None:
                parts = list(dict.fromkeys(names[value] for value in self.buckets[key]))
                combos = [combo + [part] for combo in combos for part in parts]
        return tuple(dict.fromkeys("_".join(combo) for combo in combos))


def _check_value_labels(value_labels: Any, buckets: Mapping[str, list[Any] | ValueRange]
                        ) -> dict[str, dict[Any, str]]:
    """`value_labels` as {bucket key: {value: label}}, after checking that it labels every value
    of listed buckets with a non-empty string."""
    if value_labels is None:
        return {}
    if not isinstance(value_labels, Mapping):
        raise CurriculumConfigError(
            "Expected `value_labels` to map bucket keys to {value: label} mappings, "
            f"received {type(value_labels).__name__}"
        )
    checked = {}
    for key, names in value_labels.items():
        values = buckets.get(key)
        if values is None:
            raise CurriculumConfigError(f"Expected `value_labels` keys among the buckets {list(buckets)}, received {key!r}")
        if isinstance(values, ValueRange):
            raise CurriculumConfigError(
                f"Expected `value_labels` for a bucket of listed values, received one for the range {key!r} {values!r}"
            )
        if not isinstance(names, Mapping):
            raise CurriculumConfigError(
                f"Expected `value_labels[{key!r}]` to map each value to a label, received {type(names).__name__}"
            )
        unlabelled = [value for value in values if not _has_label(names, value)]
        if unlabelled:
            raise CurriculumConfigError(
                f"Expected `value_labels[{key!r}]` to label every value of bucket {key!r}, received none for {unlabelled!r}"
            )
        bad = [name for name in names.values() if not isinstance(name, str) or not name]
        if bad:
            raise CurriculumConfigError(f"Expected `value_labels[{key!r}]` labels to be non-empty strings, received {bad!r}")
        checked[key] = dict(names)
    return checked


def _has_label(names: Mapping[Any, str], value: Any) -> bool:
    try:
        return value in names
    except TypeError:  # an unhashable bucket value (a list, a dict) cannot be a mapping key
        return False


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite_number(value: Any) -> bool:
    """A number a float can hold (an int too large for a float is not)."""
    try:
        return _is_number(value) and math.isfinite(value)
    except OverflowError:
        return False


def _set_path(cfg: dict[str, Any], dotted: str, value: Any) -> None:
    node = cfg
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[leaf] = value
