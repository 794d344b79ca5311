"""The generator checks catch generators that depart from their arguments (the task-generator
suite's canaries) and pass the built-in ones."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest

from curriculum import BucketedTaskGenerator, ValueRange, WeightedTaskSetGenerator
from curriculum.generators import _task_rng
from harness.generator_checks import REFERENCE_GENERATORS, GeneratorSpec, build, check_generator, \
    same_in_another_process

IDS = list(range(4000))


class TruncatedRange(ValueRange):
    """An int range drawn as int(uniform(low, high)): the top never comes up, 0 twice as often."""

    def draw(self, rng: random.Random) -> float | int:
        return int(rng.uniform(self.low, self.high))


class SharedLists(BucketedTaskGenerator):
    """Hands out the base config itself (no copy): a caller's change shows in later tasks."""

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        cfg, label = super().generate(task_id)
        for key, value in cfg.items():
            if key in self.base_cfg:
                cfg[key] = self.base_cfg[key]
        return cfg, label


class WrongLabel(BucketedTaskGenerator):
    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        cfg, label = super().generate(task_id)
        return cfg, label.replace("large", "medium")


class UnsaltedSet(WeightedTaskSetGenerator):
    """Picks its child with the stream its children draw from."""

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        u = _task_rng(self.seed, task_id).random()
        for child, edge in zip(self.children, self._cum):
            if u < edge:
                return child.generate(task_id)
        return self.children[-1].generate(task_id)


class UnweightedSet(WeightedTaskSetGenerator):
    """Ignores its weights (every child equally likely, weight 0 included)."""

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        return self.children[random.Random(self._salt ^ task_id).randrange(len(self.children))].generate(task_id)


class SkewedGrid(BucketedTaskGenerator):
    """Draws its last bucket with a bias towards the first value (one in five tasks)."""

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        cfg, label = super().generate(task_id)
        if task_id % 5 == 0:
            cfg["difficulty"] = 0
        return cfg, label


def build_process_dependent(spec: GeneratorSpec, seed: int) -> BucketedTaskGenerator:
    """Seeds its draws with `hash()` of its label: different in every process."""
    return BucketedTaskGenerator(spec.base, spec.buckets, label=spec.label, value_labels=spec.value_labels or None,
                                 seed=hash(spec.label) & 0xFFFF)


def _bucketed(cls, spec: GeneratorSpec, **changes: Any):
    buckets = {**spec.buckets, **changes}
    return lambda seed: cls(spec.base, buckets, label=spec.label, value_labels=spec.value_labels or None, seed=seed)


def _weighted(cls):
    spec = REFERENCE_GENERATORS["weighted"]
    return lambda seed: cls([(build(child, seed), weight) for child, weight in spec.children], seed=seed)


@pytest.mark.parametrize("name", list(REFERENCE_GENERATORS))
def test_the_built_in_generators_pass(name) -> None:
    spec = REFERENCE_GENERATORS[name]
    assert check_generator(spec, lambda seed: build(spec, seed), seed=3, ids=IDS) == []


@pytest.mark.parametrize(("name", "make", "expected"), [
    ("int_range", _bucketed(BucketedTaskGenerator, REFERENCE_GENERATORS["int_range"],
                            **{"limits.level": TruncatedRange(-3, 4)}),
     "bucket 'limits.level' value -3: 0 of 4000"),
    ("grid", _bucketed(SharedLists, REFERENCE_GENERATORS["grid"]), "again (after the caller changed its copy)"),
    ("grid", _bucketed(WrongLabel, REFERENCE_GENERATORS["grid"]), "label 'maze_medium', expected 'maze_large'"),
    ("grid", _bucketed(SkewedGrid, REFERENCE_GENERATORS["grid"]), "bucket 'difficulty' value 0:"),
    ("weighted", _weighted(UnsaltedSet), "of child"),
    ("weighted", _weighted(UnweightedSet), "(expected 0 +- 0)"),
])
def test_a_generator_that_departs_from_its_arguments_is_caught(name, make, expected) -> None:
    problems = check_generator(REFERENCE_GENERATORS[name], make, seed=3, ids=IDS)
    assert any(expected in problem for problem in problems), problems


def test_a_generator_that_differs_between_processes_is_caught() -> None:
    ids = list(range(50))
    assert same_in_another_process("grid", 0, ids, hash_seed=1) == []
    problems = same_in_another_process("grid", 0, ids, hash_seed=1, builder="test_generator_checks:build_process_dependent",
                                       path=str(Path(__file__).parent))
    assert problems and "another one (PYTHONHASHSEED=1)" in problems[0], problems


def test_changing_the_callers_copy_cannot_hide_a_missing_key() -> None:
    spec = REFERENCE_GENERATORS["grid"]
    missing = copy.deepcopy(dict(spec.buckets))
    del missing["difficulty"]
    make = lambda seed: BucketedTaskGenerator(spec.base, missing, label=spec.label,  # noqa: E731
                                              value_labels=spec.value_labels, seed=seed)
    assert any("bucket key 'difficulty' is missing" in p for p in check_generator(spec, make, seed=0, ids=IDS[:50]))
