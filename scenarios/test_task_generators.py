"""Task generators: every task is what the generator's arguments declare, in their shares.

Bug class: a range whose upper end is never drawn or whose integers lean towards zero, a
bucket value or a weighted set's child drawn more or less often than declared, a weighted
set whose pick is correlated with its child's own draws, a task config shared with the
generator or with other tasks (a caller's change showing up in later tasks), a label that
names another value, a task that differs between processes or between two generators built
alike. Every curriculum samples through its generator, so such a bug skews every pool
while each component's own numbers look fine.

The built-in generators (a grid of lists with value labels, one of them for a value it lacks, and nested keys, one labelled by
its values' labels alone (its label maps given in bucket order, and in another), an int range across zero, a float range, a single task, a weighted set of them with a child of weight 0)
are checked against what their arguments declare (`harness.generator_checks`): exactly, per
task (bounds, types, base config, label, copies, determinism, another process, a caller that
reuses the dicts and lists it built the generator from); and over
many task ids (the strided ids a pool of 32 hands out, and ids beyond 2^32), each value's,
pair's and child's share within `Z` binomial standard deviations.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from curriculum import BucketedTaskGenerator, ValueRange, WeightedTaskSetGenerator
from harness.generator_checks import REFERENCE_GENERATORS, Z, build, check_generator, same_in_another_process, weight_of
from harness.thresholds import TASK_GENERATORS as LIMITS

from .test_config_contract import _short


def _ids(kind: str) -> list[int]:
    if kind == "pool":  # slot + k * capacity: the ids evictions hand out
        return [slot + k * LIMITS.pool for k in range(LIMITS.tasks // LIMITS.pool) for slot in range(LIMITS.pool)]
    return [LIMITS.far_ids + 7919 * i for i in range(LIMITS.tasks)]


@pytest.mark.parametrize("ids", ["pool", "far"])
@pytest.mark.parametrize("name", list(REFERENCE_GENERATORS))
def test_tasks_are_what_the_generator_declares(name, ids, scenario_seed) -> None:
    spec = REFERENCE_GENERATORS[name]
    problems = check_generator(spec, lambda seed: build(spec, seed), seed=scenario_seed, ids=_ids(ids))
    assert not problems, (
        f"{name} generator, {ids} task ids, seed {scenario_seed} ({len(problems)} problem(s), shares judged at "
        f"{Z:g} standard deviations):\n  " + "\n  ".join(problems[:12]))


def test_numpy_numbers_for_its_seed_and_weights_give_the_same_generator(scenario_seed) -> None:
    """A generator whose seed and weights come as numpy scalars (a config read with numpy)
    describes itself as, and gives every task of, the one built from plain numbers: a
    checkpoint or an attaching process that finds the two alike must find the same tasks."""
    ids = _ids("pool")[:LIMITS.cross_process_tasks] + _ids("far")[:LIMITS.cross_process_tasks]
    for name, spec in REFERENCE_GENERATORS.items():
        plain, numpy_built = build(spec, scenario_seed), build(spec, scenario_seed, numpy_numbers=True)
        described = json.dumps(plain.describe(), sort_keys=True, default=repr)
        assert json.dumps(numpy_built.describe(), sort_keys=True, default=repr) == described, (
            f"{name} generator: numpy numbers for its seed and weights change describe(), seed {scenario_seed}")
        differ = [i for i in ids if numpy_built.generate(i) != plain.generate(i)]
        assert not differ, (
            f"{name} generator: numpy numbers for its seed and weights give other tasks for {len(differ)} of "
            f"{len(ids)} ids (first {differ[:3]}), with the same describe(), seed {scenario_seed}")


def test_another_process_generates_the_same_tasks(scenario_seed) -> None:
    ids = _ids("pool")[:LIMITS.cross_process_tasks] + _ids("far")[:LIMITS.cross_process_tasks]
    problems = same_in_another_process(list(REFERENCE_GENERATORS), scenario_seed, ids, hash_seed=scenario_seed + 1)
    assert not problems, f"seed {scenario_seed}: {problems[0]}"


def test_another_seed_gives_other_tasks(scenario_seed) -> None:
    ids = _ids("pool")[:LIMITS.cross_process_tasks]
    for name, spec in REFERENCE_GENERATORS.items():
        if not spec.buckets and not spec.children:
            continue
        first, other = build(spec, scenario_seed), build(spec, scenario_seed + 1)
        same = sum(first.generate(i) == other.generate(i) for i in ids)
        assert same < len(ids) // 2, (
            f"{name} generator: seeds {scenario_seed} and {scenario_seed + 1} gave the same task for {same} of "
            f"{len(ids)} ids")


def test_task_ids_far_apart_give_independent_tasks(scenario_seed) -> None:
    """Each task id seeds its own draws: ids that differ only in their high bits (2^32 or 2^53
    apart: an id folded to 32 bits, or passed through a float) must not repeat each other's
    tasks more than two generators of different seeds do."""
    ids = _ids("pool")[:LIMITS.cross_process_tasks]
    for name, spec in REFERENCE_GENERATORS.items():
        if not spec.buckets and not spec.children:
            continue
        generator = build(spec, scenario_seed)
        for offset in (2**32, 2**53):
            same = sum(generator.generate(i) == generator.generate(i + offset) for i in ids)
            assert same < len(ids) // 2, (
                f"{name} generator: ids {offset} apart gave the same task for {same} of {len(ids)} ids, seed "
                f"{scenario_seed}")


def _change_in_place(value) -> None:
    """Change every dict and list reachable from `value` (through tuples too), each entry and
    its length (a caller reusing its own objects, an env editing its task's config)."""
    if isinstance(value, tuple):
        for item in value:
            _change_in_place(item)
    elif isinstance(value, dict):
        for key, item in list(value.items()):
            if isinstance(item, (dict, list, tuple)):
                _change_in_place(item)
            else:
                value[key] = "changed"
        value["changed"] = True
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, (dict, list, tuple)):
                _change_in_place(item)
            else:
                value[index] = "changed"
        value.append("changed")  # (a scalar: lists shared by mistake grow by one entry a call, not twice as deep)


def test_a_label_given_empty_is_taken_as_given(scenario_seed) -> None:
    """A label given as "" (the documented "label, when given") is a label, not a missing one:
    with value labels, tasks take the value labels alone; without them, the label "". A base
    config's own "label" entry (what a missing label falls back on) must not show."""
    ids = _ids("pool")[:LIMITS.cross_process_tasks]
    sizes = {8: "small", 16: "large"}
    labelled = BucketedTaskGenerator({"label": "base"}, {"size": [8, 16]}, label="", value_labels={"size": sizes},
                                     seed=scenario_seed)
    alone = BucketedTaskGenerator({"label": "base"}, {"size": [8, 16]}, label="", seed=scenario_seed)
    got = {"with value labels": ({labelled.generate(i)[1] for i in ids}, set(labelled.labels)),
           "without": ({alone.generate(i)[1] for i in ids}, set(alone.labels))}
    expected = {"with value labels": ({"small", "large"}, {"small", "large"}), "without": ({""}, {""})}
    assert got == expected, (f"a generator given label=\"\": (task labels, `labels`) {got}, expected {expected}, "
                             f"seed {scenario_seed}")


def test_changing_the_callers_config_changes_no_task(scenario_seed) -> None:
    """A caller that builds a generator and then reuses (changes) the dicts and lists it
    passed in (base configs, bucket values, value labels) changes no task, no label and no
    description: the generator holds its own copies."""
    ids = _ids("pool")[:LIMITS.cross_process_tasks]
    for name, spec in REFERENCE_GENERATORS.items():
        own = copy.deepcopy(spec)
        generator = build(own, scenario_seed)
        before = [generator.generate(i) for i in ids]
        labels = generator.labels
        described = json.dumps(generator.describe(), sort_keys=True, default=repr)
        for part in (own, *(child for child, _ in own.children)):
            _change_in_place(part.base)
            for values in part.buckets.values():
                _change_in_place(values)
            for names in part.value_labels.values():
                _change_in_place(names)
        assert generator.labels == labels, (
            f"{name} generator: the caller changed the config it built the generator from, and its labels changed "
            f"from {labels!r} to {generator.labels!r}, seed {scenario_seed}")
        after = [generator.generate(i) for i in ids]
        changed = next((i for i, a, b in zip(ids, before, after) if a != b), None)
        assert changed is None, (
            f"{name} generator: the caller changed the config it built the generator from, and task {changed} "
            f"changed from {_short(before[ids.index(changed)])} to {_short(after[ids.index(changed)])}, seed {scenario_seed}")
        assert json.dumps(generator.describe(), sort_keys=True, default=repr) == described, (
            f"{name} generator: the caller changed the config it built the generator from, and describe() changed "
            f"with it, seed {scenario_seed}")


def test_changing_a_tasks_config_changes_no_other_task(scenario_seed) -> None:
    """An env that edits the config it was handed in place (a spawn point moved, an enemy's hp
    lowered: dicts and lists, inside tuples too) changes no task generated after it, its own id
    generated again included: each task gets its own copy of every mutable part."""
    ids = _ids("pool")[:LIMITS.cross_process_tasks]
    for name, spec in REFERENCE_GENERATORS.items():
        generator = build(spec, scenario_seed)
        before = copy.deepcopy([generator.generate(i) for i in ids])
        for i in ids:
            _change_in_place(generator.generate(i)[0])
        after = [generator.generate(i) for i in ids]
        changed = next((i for i, a, b in zip(ids, before, after) if a != b), None)
        assert changed is None, (
            f"{name} generator: envs edited their task configs in place, and task {changed} changed from "
            f"{_short(before[ids.index(changed)])} to {_short(after[ids.index(changed)])}, seed {scenario_seed}")


def _variants(spec):
    """`spec` changed in one argument at a time (the seed aside): (what changed, new spec)."""
    out = []
    if spec.label:
        out.append(("label", dataclasses.replace(spec, label=spec.label + "_other")))
    if spec.base:
        out.append(("base config", dataclasses.replace(spec, base={**spec.base, "extra": 1})))
    for key, values in spec.buckets.items():
        changed = ValueRange(values.low, values.high + 1) if isinstance(values, ValueRange) else [*values, 99]
        labels = spec.value_labels if key not in spec.value_labels else \
            {**spec.value_labels, key: {**spec.value_labels[key], 99: "other"}}
        out.append((f"bucket {key!r}", dataclasses.replace(spec, buckets={**spec.buckets, key: changed},
                                                           value_labels=labels)))
    for key, names in spec.value_labels.items():
        renamed = {value: name + "_other" for value, name in names.items()}
        out.append((f"value labels of {key!r}", dataclasses.replace(spec, value_labels={**spec.value_labels,
                                                                                       key: renamed})))
    if spec.children:
        weights = [(child, weight_of(weight) + 1) for child, weight in spec.children]
        out.append(("weights", dataclasses.replace(spec, children=tuple(weights))))
    return out


def test_every_argument_shows_in_the_description_and_the_seed_in_the_tasks(scenario_seed) -> None:
    """`describe()` tells a checkpoint or an attaching process which generator made the pool:
    two generators whose arguments differ in anything must describe themselves differently,
    and a weighted set's own seed must change which child an id gets (its children unchanged)."""
    for name, spec in REFERENCE_GENERATORS.items():
        described = json.dumps(build(spec, scenario_seed).describe(), sort_keys=True, default=repr)
        other_seed = json.dumps(build(spec, scenario_seed + 1).describe(), sort_keys=True, default=repr)
        assert spec.base and not spec.buckets and not spec.children or other_seed != described, (
            f"{name} generator: seeds {scenario_seed} and {scenario_seed + 1} describe themselves alike: {described}")
        for what, variant in _variants(spec):
            changed = json.dumps(build(variant, scenario_seed).describe(), sort_keys=True, default=repr)
            assert changed != described, (
                f"{name} generator: another {what} gives the same describe() {described}, seed {scenario_seed}")
    spec = REFERENCE_GENERATORS["weighted"]
    ids = _ids("pool")[:LIMITS.cross_process_tasks]
    children = [(build(child, scenario_seed), weight) for child, weight in spec.children]
    first = WeightedTaskSetGenerator(children, seed=scenario_seed)
    other = WeightedTaskSetGenerator(children, seed=scenario_seed + 1)
    same = sum(first.generate(i)[1] == other.generate(i)[1] for i in ids)
    assert same < len(ids) * LIMITS.max_same_child_share, (
        f"weighted set: seeds {scenario_seed} and {scenario_seed + 1} over the same children picked the same child "
        f"for {same} of {len(ids)} ids (the set's seed must decide its picks), seed {scenario_seed}")
