"""What a task generator must do, checked against what its arguments declare.

A generator maps a task id to `(env_cfg, label)`. From its arguments alone one can say what
every task may hold and how often each value must come up; `GeneratorSpec` holds that, and
`check_generator` compares a generator's tasks with it:

- every task is a fresh config (changing one never shows in another, nor in the generator),
  with the base config's fields (of their types: a defaultdict, an OrderedDict, a tuple stay
  what they are), every bucket key set to one of its values (a range's ints
  are ints within both ends, its floats floats within them), and the label its values name;
- the same id gives the same task again, from a fresh generator built with the same
  arguments, and in another process (`same_in_another_process`);
- over many ids (the strided ids a pool hands out, and ids far beyond 2^32) each value of a
  list, each integer of an int range and each tenth of a float range comes up in its share, and
  so does each pair of two buckets' values (draws independent of each other);
- a weighted set picks its children in proportion to their weights (never one of weight 0),
  and each child's own draws keep their shares among the ids it gets (the pick and the
  child's draws independent).

Shares are judged cell by cell: a count may stray from its expectation by at most `Z`
binomial standard deviations (a false alarm about once in 10^9 cells).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curriculum import BucketedTaskGenerator, SingleTaskGenerator, TaskGenerator, ValueRange, WeightedTaskSetGenerator
from harness.copies import plain_copy

__all__ = ["GeneratorSpec", "REFERENCE_GENERATORS", "check_generator", "same_in_another_process", "weight_of", "Z"]

Z = 6.0
"""Binomial standard deviations a count may stray from its expectation."""

FLOAT_BINS = 10
"""A float range is judged in this many equal parts."""


@dataclass(frozen=True)
class GeneratorSpec:
    """What a generator's arguments declare: its base config, its buckets (a list of values
    or a `ValueRange` per dotted key), its label and value labels, and for a weighted set
    its children's specs with their weights (None: the child is given without a weight, which
    the library documents as a weight of 1)."""

    base: Mapping[str, Any] = field(default_factory=dict)
    buckets: Mapping[str, Sequence[Any] | ValueRange] = field(default_factory=dict)
    label: str = ""
    value_labels: Mapping[str, Mapping[Any, str]] = field(default_factory=dict)
    children: Sequence[tuple[GeneratorSpec, float | None]] = ()


def _bucketed(spec: GeneratorSpec, seed: int) -> BucketedTaskGenerator:
    # (value labels as given: a spec without any passes an empty mapping, which labels nothing, as None does)
    return BucketedTaskGenerator(spec.base, spec.buckets, label=spec.label or None,
                                 value_labels=spec.value_labels, seed=seed)


_GRID = GeneratorSpec(  # (containers other than dict and list in the base: a task keeps their types; a bucket
    # key into an OrderedDict section sets its value there, beside the section's other keys)
    base={"game": {"name": "maze", "map": OrderedDict(width=0, walls=[1, 2])}, "mode": "train",
          "rewards": defaultdict(float, goal=1.0)},
    buckets={"game.map.width": [10, 20, 40], "difficulty": [0, 1, 2, 3, 4], "opponents": [[1], [1, 2], [3]]},
    # the label map names a value the bucket does not hold (one map shared by several generators):
    # no task can get its label, so `labels` must not list it
    label="maze", value_labels={"game.map.width": {10: "small", 20: "medium", 40: "large", 80: "huge"}},
)
_INT_RANGE = GeneratorSpec(  # (empty sections in the base, one a bucket key fills: each task gets its own)
    base={"kind": "ints", "limits": {}, "spawn": {}, "inventory": []},
    buckets={"limits.level": ValueRange(-3, 4)}, label="ints")
_FLOAT_RANGE = GeneratorSpec(buckets={"speed": ValueRange(0.5, 2.0), "size": [1, 2], "physics.gravity.scale": [0.5, 2],
                                      "friction": ValueRange(0.0, 1.0),  # (whole-number ends, float all the same)
                                      "jitter": ValueRange(0, 0.5), "scale": ValueRange(0.25, 3)},  # (one int end)
                             label="floats")  # a dotted key whose parents the (empty) base lacks
_VALUE_LABELLED = GeneratorSpec(  # no label of its own: a task's label is its values' labels alone
    # (a bucket of one value, labelled: every task's label carries it)
    base={"arena": {"size": 0, "walls": True}},
    buckets={"arena.size": [8, 16], "team": ["red", "blue", "green"], "tier": [1]},
    value_labels={"arena.size": {8: "small", 16: "large"}, "team": {"red": "r", "blue": "b", "green": "g"},
                  "tier": {1: "pro"}},
)
# the same, its label maps given in another key order than its buckets: a mapping's order means
# nothing, and a task's label joins its values' labels in bucket order
_VALUE_LABELLED_REORDERED = GeneratorSpec(
    base=_VALUE_LABELLED.base, buckets=_VALUE_LABELLED.buckets,
    value_labels=dict(reversed(list(_VALUE_LABELLED.value_labels.items()))),
)
# (a config with a "label" key of its own: the label argument names the tasks, the key stays in their config;
# lists in lists and dicts in lists: a map's rows, its rooms, each task's own to edit)
_SINGLE = GeneratorSpec(base={"fixed": True, "nested": {"values": [1, 2, 3]}, "label": "from_the_config",
                              "grid": [[0, 1], [2, [3]]], "rooms": [{"doors": [1, 2]}],
                              "rewards": defaultdict(float, lava=-1.0), "order": OrderedDict(first=1, second=2),
                              "shape": (3, 4)}, label="single")
_NEVER = GeneratorSpec(base={"never": True}, label="never")
# no label, no value labels (an empty mapping of them): every task's label is "default"
# (a bucket of tuples holding dicts: spawn points, each task's own to edit)
_UNLABELLED = GeneratorSpec(base={"kind": "plain"}, buckets={"level": [1, 2, 3], "size": ValueRange(0, 4),
                                                              "spawns": [({"x": 0},), ({"x": 5}, {"x": 1})]})
# (the child of weight 0 between two others: every child after it keeps its own share)
_WEIGHTED = GeneratorSpec(children=((_GRID, 3.0), (_NEVER, 0.0), (_INT_RANGE, 1.0), (_FLOAT_RANGE, 2)))
# children that share labels (a difficulty label reused across task families): the set lists each once;
# two of them given without a weight, as users write them
_SHARED_LABELS = GeneratorSpec(children=(
    (_INT_RANGE, None), (GeneratorSpec(base={"kind": "more ints"}, buckets={"level": ValueRange(0, 9)}, label="ints"), 2.0),
    (GeneratorSpec(base={"kind": "sizes"}, buckets={"size": [8, 16]}, value_labels={"size": {8: "ints", 16: "big"}}),
     None)))


def weight_of(weight: float | None) -> float:
    """A child's weight as the spec gives it (a child given without one weighs 1)."""
    return 1.0 if weight is None else weight


def build(spec: GeneratorSpec, seed: int, *, numpy_numbers: bool = False) -> TaskGenerator:
    """The built-in generator `spec` describes (`numpy_numbers`: its seeds and weights given as
    numpy scalars, as a config read with numpy gives them: the same generator)."""
    if numpy_numbers:
        seed = np.int64(seed)
    if spec.children:
        # every child with the set's seed, as users write it: the pick must not follow the children's draws
        children = [build(child, seed, numpy_numbers=numpy_numbers) for child, _ in spec.children]
        return WeightedTaskSetGenerator([
            child if weight is None else (child, np.float64(weight) if numpy_numbers else weight)
            for child, (_, weight) in zip(children, spec.children)], seed=seed)
    if spec.buckets:
        return _bucketed(spec, seed)
    return SingleTaskGenerator(spec.base, label=spec.label)


REFERENCE_GENERATORS: dict[str, GeneratorSpec] = {
    "grid": _GRID, "value_labelled": _VALUE_LABELLED, "value_labels_reordered": _VALUE_LABELLED_REORDERED,
    "int_range": _INT_RANGE, "float_range": _FLOAT_RANGE,
    "single": _SINGLE, "weighted": _WEIGHTED, "weighted_shared_labels": _SHARED_LABELS, "unlabelled": _UNLABELLED,
}
"""The generators the gate checks, by name."""


def _get_path(cfg: Mapping[str, Any], dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


def _without(cfg: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """`cfg` with the bucket keys' values blanked (what must equal the base config)."""
    out = plain_copy(dict(cfg))
    for dotted in keys:
        node = out
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node:
            node[last] = None
    return out


def _cell(value: Any, values: Sequence[Any] | ValueRange) -> Any:
    """The cell a drawn value falls in: the value's index in a list, the integer of an int
    range, the tenth of a float range."""
    if isinstance(values, ValueRange):
        if isinstance(values.low, int) and isinstance(values.high, int):
            return value
        if values.high == values.low:
            return 0
        return min(int((value - values.low) / (values.high - values.low) * FLOAT_BINS), FLOAT_BINS - 1)
    return next(i for i, v in enumerate(values) if v == value and type(v) is type(value))


def _cells(values: Sequence[Any] | ValueRange) -> list[Any]:
    if isinstance(values, ValueRange):
        if isinstance(values.low, int) and isinstance(values.high, int):
            return list(range(values.low, values.high + 1))
        return list(range(FLOAT_BINS)) if values.high > values.low else [0]
    return list(range(len(values)))


def _value_problem(key: str, value: Any, values: Sequence[Any] | ValueRange) -> str | None:
    if value is _MISSING:
        return f"bucket key {key!r} is missing from the config"
    if isinstance(values, ValueRange):
        ints = isinstance(values.low, int) and isinstance(values.high, int)
        kind = int if ints else float
        if type(value) is not kind or not values.low <= value <= values.high:
            return (f"{key}={value!r} ({type(value).__name__}) is not a {kind.__name__} in "
                    f"[{values.low}, {values.high}]")
        return None
    if not any(v == value and type(v) is type(value) for v in values):
        return f"{key}={value!r} is none of the bucket's values {list(values)!r}"
    return None


def _expected_label(spec: GeneratorSpec, cfg: Mapping[str, Any]) -> str:
    parts = [spec.label] if spec.label else []
    for key in spec.buckets:
        names = spec.value_labels.get(key)
        if names is not None:
            parts.append(names[_get_path(cfg, key)])
    return "_".join(parts) if parts else "default"


def _task_problem(spec: GeneratorSpec, cfg: Any, label: Any) -> str | None:
    """What is wrong with one task of a bucketed or single generator, or None."""
    if not isinstance(cfg, dict):
        return f"env_cfg is a {type(cfg).__name__}, expected a dict"
    for key, values in spec.buckets.items():
        problem = _value_problem(key, _get_path(cfg, key), values)
        if problem:
            return problem
    if _typed(_without(cfg, list(spec.buckets))) != _typed(_blank_base(spec)):
        return f"env_cfg {cfg!r} does not keep the base config {dict(spec.base)!r} outside the bucket keys"
    expected = _expected_label(spec, cfg)
    if label != expected:
        return f"label {label!r}, expected {expected!r} for {cfg!r}"
    return None


def _typed(value: Any) -> Any:
    """`value` with every container's type beside its content: a defaultdict equals a dict
    and a tuple no list under `==`, but an env reading `cfg["rewards"]["lava"]` or a shape
    tells them apart."""
    if isinstance(value, Mapping):
        return type(value).__name__, {key: _typed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [_typed(item) for item in value]
    return value


_BLANK_BASES: dict[int, tuple[GeneratorSpec, dict[str, Any]]] = {}
"""Per spec (by id, the spec kept alive beside it so its id is never reused): its blank base."""


def _blank_base(spec: GeneratorSpec) -> dict[str, Any]:
    """The base config with every bucket key's path created (as generating a task does) and
    its value blanked: what every task must equal outside its bucket keys."""
    cached = _BLANK_BASES.get(id(spec))
    if cached is not None and cached[0] is spec:
        return cached[1]
    blank = plain_copy(dict(spec.base))
    for dotted in spec.buckets:
        node = blank
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = None
    _BLANK_BASES[id(spec)] = (spec, blank)
    return blank


def _stray(counts: Mapping[Any, int], shares: Mapping[Any, float], n: int) -> list[str]:
    """Cells whose count strays more than `Z` binomial standard deviations from n * share."""
    out = []
    for cell, share in shares.items():
        expected = n * share
        sd = math.sqrt(n * share * (1.0 - share)) if 0.0 < share < 1.0 else 0.0
        got = counts.get(cell, 0)
        if abs(got - expected) > Z * sd + 1e-9:
            out.append(f"{cell!r}: {got} of {n} (expected {expected:.0f} +- {Z * sd:.0f})")
    extra = [cell for cell in counts if cell not in shares]
    if extra:
        out.append(f"cells outside the declared ones: {extra[:5]!r}")
    return out


def _shares(spec: GeneratorSpec, tasks: list[tuple[Any, Any]], what: str) -> list[str]:
    """Per bucket and per pair of buckets: counts of each cell against uniform shares."""
    problems = []
    n = len(tasks)
    keys = list(spec.buckets)
    for key in keys:
        values = spec.buckets[key]
        cells = _cells(values)
        counts = Counter(_cell(_get_path(cfg, key), values) for cfg, _ in tasks)
        for line in _stray(counts, {c: 1.0 / len(cells) for c in cells}, n):
            problems.append(f"{what}: bucket {key!r} value {line}")
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            cells_a, cells_b = _cells(spec.buckets[a]), _cells(spec.buckets[b])
            counts = Counter((_cell(_get_path(cfg, a), spec.buckets[a]), _cell(_get_path(cfg, b), spec.buckets[b]))
                             for cfg, _ in tasks)
            share = 1.0 / (len(cells_a) * len(cells_b))
            for line in _stray(counts, {(x, y): share for x in cells_a for y in cells_b}, n):
                problems.append(f"{what}: buckets {a!r} x {b!r} pair {line}")
    return problems


def _leaves(spec: GeneratorSpec) -> list[tuple[GeneratorSpec, float]]:
    """A weighted set's children with their normalised weights."""
    total = sum(weight_of(w) for _, w in spec.children)
    return [(child, weight_of(w) / total) for child, w in spec.children]


def _which_child(spec: GeneratorSpec, cfg: Any, label: Any) -> int | None:
    """The child whose tasks look like this one (labels and base configs tell them apart)."""
    matches = [i for i, (child, _) in enumerate(spec.children) if _task_problem(child, cfg, label) is None]
    return matches[0] if len(matches) == 1 else None


def check_generator(spec: GeneratorSpec, make: Callable[[int], TaskGenerator], *, seed: int,
                    ids: Sequence[int]) -> list[str]:
    """Every way the generator `make(seed)` departs from `spec` over the task `ids`."""
    generator = make(seed)
    fresh = make(seed)
    problems: list[str] = []
    tasks = []
    for task_id in ids:
        cfg, label = generator.generate(task_id)
        kept = plain_copy(cfg)
        if isinstance(cfg, dict):  # a caller that changes its task must not change the next one
            cfg["changed"] = True
            for value in cfg.values():
                if isinstance(value, dict):
                    value["changed"] = True
                elif isinstance(value, list):
                    value.append("changed")
        again = generator.generate(task_id)
        if again != (kept, label):
            problems.append(f"task {task_id}: generated {kept!r}, {label!r}; again (after the caller changed its "
                            f"copy) {again!r}")
            break
        if fresh.generate(task_id) != (kept, label):
            problems.append(f"task {task_id}: a generator built with the same arguments gives "
                            f"{fresh.generate(task_id)!r}, this one {(kept, label)!r}")
            break
        tasks.append((kept, label))
    if problems:
        return problems
    listed = tuple(getattr(generator, "labels", ()))
    drawn = {label for _, label in tasks}
    # (a weighted set also lists the labels of a child of weight 0)
    if not (drawn <= set(listed) if spec.children else drawn == set(listed)) or len(set(listed)) != len(listed):
        problems.append(f"labels drawn {sorted(drawn)} but the generator's `labels` are {list(listed)} (each label "
                        f"it can produce, once)")
    if spec.children:
        return problems + _check_weighted(spec, tasks, ids)
    for task_id, (cfg, label) in zip(ids, tasks):
        problem = _task_problem(spec, cfg, label)
        if problem:
            return [f"task {task_id}: {problem}"]
    return problems + _shares(spec, tasks, f"{len(tasks)} tasks")


def _check_weighted(spec: GeneratorSpec, tasks: list[tuple[Any, Any]], ids: Sequence[int]) -> list[str]:
    problems = []
    picked: dict[int, list[tuple[Any, Any]]] = {}
    for task_id, (cfg, label) in zip(ids, tasks):
        child = _which_child(spec, cfg, label)
        if child is None:
            return [f"task {task_id}: {cfg!r}, {label!r} is a task of none of the children"]
        picked.setdefault(child, []).append((cfg, label))
    n = len(tasks)
    counts = Counter({child: len(group) for child, group in picked.items()})
    weights = {i: w for i, (_, w) in enumerate(_leaves(spec))}
    problems += [f"{n} tasks: child {line}" for line in _stray(counts, weights, n)]
    for child, group in picked.items():
        child_spec = spec.children[child][0]
        problems += _shares(child_spec, group, f"the {len(group)} tasks of child {child}")
    return problems


_CHILD = """
import importlib, json, sys
from harness.generator_checks import REFERENCE_GENERATORS
names, seed, ids, builder, path = json.loads(sys.stdin.read())
if path:
    sys.path.insert(0, path)
module, function = builder.split(":")
build = getattr(importlib.import_module(module), function)
built = [build(REFERENCE_GENERATORS[name], seed) for name in names]
print(json.dumps([[list(getattr(g, "labels", ())), *(g.generate(i) for i in ids)] for g in built], sort_keys=True,
                 default=repr))
"""


def same_in_another_process(names: str | Sequence[str], seed: int, ids: Sequence[int], *, hash_seed: int,
                            builder: str = "harness.generator_checks:build", path: str | None = None) -> list[str]:
    """Whether a fresh process (with its own string-hash seed) generates the same tasks, and
    lists the same labels in the same order, as this one for each generator `names` names, both
    building them with `builder(spec, seed)`
    ("module:function", importable from `path` if given)."""
    names = [names] if isinstance(names, str) else list(names)
    module, function = builder.split(":")
    if path and path not in sys.path:
        sys.path.insert(0, path)
    build_here = getattr(importlib.import_module(module), function)
    built = [build_here(REFERENCE_GENERATORS[name], seed) for name in names]
    expected = json.loads(json.dumps([[list(getattr(g, "labels", ())), *(g.generate(i) for i in ids)] for g in built],
                                     sort_keys=True, default=repr))
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    done = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps([names, seed, list(ids), builder, path]),
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    if done.returncode:
        return [f"the other process failed: {done.stderr.strip()[-500:]}"]
    for name, (labels, *ours), (their_labels, *theirs) in zip(names, expected, json.loads(done.stdout)):
        if labels != their_labels:
            return [f"{name} generator: this process lists the labels {labels}, another one "
                    f"(PYTHONHASHSEED={hash_seed}) {their_labels}"]
        for task_id, a, b in zip(ids, ours, theirs):
            if a != b:
                return [f"{name} generator, task {task_id}: this process generates {a!r}, another one "
                        f"(PYTHONHASHSEED={hash_seed}) {b!r}"]
    return []
