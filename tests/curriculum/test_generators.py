"""Task generators: single, weighted set, bucketed (value lists and ranges).

Every generator is a pure function of (its config, task id): the same id gives the same env
config and label in any instance and any process; bad configs are refused with a named error.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from typing import Any

import numpy as np
import pytest
from helpers import exact, generate_in_child, grid_generator, mixed_generator

from curriculum import (
    BucketedTaskGenerator,
    CurriculumConfigError,
    SingleTaskGenerator,
    TaskGenerator,
    ValueRange,
    WeightedTaskSetGenerator,
)

IDS = range(4000)


def _shares(values: list[Any]) -> dict[Any, float]:
    counts = Counter(values)
    return {value: count / len(values) for value, count in counts.items()}


def _binomial_tolerance(p: float, n: int) -> float:
    """Five standard deviations of a share estimated from n draws."""
    return 5.0 * (p * (1.0 - p) / n) ** 0.5


# ---- single ----------------------------------------------------------------------------------
def test_single_task_is_the_same_config_for_every_id_and_a_fresh_copy_each_time() -> None:
    generator = SingleTaskGenerator({"map": {"width": 10}, "label": "maze"})
    first, label = generator.generate(0)
    first["map"]["width"] = 99  # an env mutating its config must not change the task
    assert generator.generate(0) == ({"map": {"width": 10}, "label": "maze"}, "maze")
    assert generator.generate(12345) == generator.generate(7)
    assert label == "maze"
    assert generator.labels == ("maze",)


def test_single_task_label_defaults_and_explicit_label_wins() -> None:
    assert SingleTaskGenerator({"a": 1}).generate(3)[1] == "default"
    assert SingleTaskGenerator({"a": 1, "label": "x"}, label="y").generate(3)[1] == "y"


# ---- weighted set ----------------------------------------------------------------------------
def test_weighted_set_picks_children_in_proportion_to_their_weights() -> None:
    generator = WeightedTaskSetGenerator(
        [(SingleTaskGenerator({}, label="a"), 1.0), (SingleTaskGenerator({}, label="b"), 3.0),
         (SingleTaskGenerator({}, label="never"), 0.0), SingleTaskGenerator({}, label="c")],
        seed=4,
    )
    shares = _shares([generator.generate(i)[1] for i in IDS])
    assert "never" not in shares
    for label, weight in (("a", 1 / 5), ("b", 3 / 5), ("c", 1 / 5)):  # a bare child weighs 1.0
        assert abs(shares[label] - weight) < _binomial_tolerance(weight, len(IDS)), (label, shares)
    assert generator.labels == ("a", "b", "never", "c")


@pytest.mark.parametrize("bucketed_weight", [1.0, 3.0])
def test_weighted_choice_is_independent_of_the_chosen_childs_own_draws(bucketed_weight: float) -> None:
    """The set and its child see the same task ids; with correlated streams a child with a
    quarter of the weight would only ever produce a quarter of its values."""
    bucketed = BucketedTaskGenerator({}, {"size": [0, 1, 2, 3], "noise": ValueRange(0.0, 1.0)}, label="grid")
    generator = WeightedTaskSetGenerator(
        [(SingleTaskGenerator({"size": -1}, label="single"), 4.0 - bucketed_weight), (bucketed, bucketed_weight)]
    )
    cfgs = [cfg for cfg, label in (generator.generate(i) for i in IDS) if label == "grid"]
    assert len(cfgs) > 500
    sizes = _shares([cfg["size"] for cfg in cfgs])
    assert set(sizes) == {0, 1, 2, 3}
    for share in sizes.values():
        assert abs(share - 0.25) < _binomial_tolerance(0.25, len(cfgs))
    noise = np.array([cfg["noise"] for cfg in cfgs])
    assert noise.min() < 0.05 and noise.max() > 0.95
    assert abs(noise.mean() - 0.5) < 5 * (1 / 12 / len(cfgs)) ** 0.5


def test_nested_weighted_sets_with_equal_seeds_still_use_every_inner_child() -> None:
    inner = WeightedTaskSetGenerator([SingleTaskGenerator({}, label="x"), SingleTaskGenerator({}, label="y")])
    outer = WeightedTaskSetGenerator([(inner, 1.0), (SingleTaskGenerator({}, label="z"), 1.0)])
    shares = _shares([outer.generate(i)[1] for i in IDS])
    for label, share in (("x", 0.25), ("y", 0.25), ("z", 0.5)):
        assert abs(shares[label] - share) < _binomial_tolerance(share, len(IDS)), shares


# ---- bucketed --------------------------------------------------------------------------------
def test_bucketed_value_lists_cover_every_value_and_set_dotted_paths() -> None:
    base = {"game": {"name": "maze", "size": 0}, "seed": 1}
    generator = BucketedTaskGenerator(base, {"game.size": [5, 7, 9], "game.rules.gravity": [True, False]},
                                      label="maze")
    tasks = [generator.generate(i) for i in range(300)]
    assert {cfg["game"]["size"] for cfg, _ in tasks} == {5, 7, 9}
    assert {cfg["game"]["rules"]["gravity"] for cfg, _ in tasks} == {True, False}
    assert all(cfg["game"]["name"] == "maze" and cfg["seed"] == 1 and label == "maze" for cfg, label in tasks)
    assert base == {"game": {"name": "maze", "size": 0}, "seed": 1}  # the base config is never modified


@pytest.mark.parametrize("make", [
    lambda base: BucketedTaskGenerator(base, {"game.size": [5, 7, 9]}, label="maze"),
    lambda base: SingleTaskGenerator(base, label="maze"),
], ids=["bucketed", "single"])
def test_generated_configs_are_values_no_task_or_caller_shares(make) -> None:
    base = {"game": {"name": "maze", "size": 0}}
    generator = make(base)
    first, _ = generator.generate(0)
    snapshot = repr(first)
    first["game"]["name"] = "edited by the env"  # an env that writes into the config it was given
    base["game"]["name"] = "edited by the caller"  # a caller reusing its dict for the next generator
    later = [generator.generate(i)[0] for i in range(1, 50)]
    assert all(cfg["game"]["name"] == "maze" for cfg in later)
    assert repr(generator.generate(0)[0]) == snapshot  # the same id, the same task


def test_list_values_of_a_bucket_are_each_tasks_own_and_never_the_callers() -> None:
    opponents = [[1], [1, 2]]
    generator = BucketedTaskGenerator({}, {"opponents": opponents}, label="arena")
    first, _ = generator.generate(0)
    first["opponents"].append("edited by the env")
    opponents[0].append("edited by the caller")
    opponents[1].append("edited by the caller")
    assert {tuple(generator.generate(i)[0]["opponents"]) for i in range(100)} == {(1,), (1, 2)}


def test_bucketed_value_ranges_draw_ints_for_int_ends_and_floats_otherwise() -> None:
    generator = BucketedTaskGenerator({}, {"count": ValueRange(2, 5), "speed": ValueRange(0.5, 1.5),
                                           "fixed": ValueRange(3.0, 3.0)})
    cfgs = [generator.generate(i)[0] for i in range(500)]
    counts = {cfg["count"] for cfg in cfgs}
    assert counts == {2, 3, 4, 5}
    assert all(type(cfg["count"]) is int for cfg in cfgs)
    speeds = np.array([cfg["speed"] for cfg in cfgs])
    assert speeds.min() >= 0.5 and speeds.max() <= 1.5 and speeds.max() - speeds.min() > 0.9
    assert {cfg["fixed"] for cfg in cfgs} == {3.0}


def test_bucket_seed_changes_the_tasks() -> None:
    a, b = grid_generator(seed=0), grid_generator(seed=1)
    assert [a.generate(i) for i in range(20)] != [b.generate(i) for i in range(20)]


# ---- determinism and labels ------------------------------------------------------------------
@pytest.mark.parametrize("factory", [grid_generator, mixed_generator])
def test_same_id_same_task_across_instances(factory) -> None:
    first, second = factory(), factory()
    ids = [0, 1, 2, 17, 10**9, 2**62]
    assert [first.generate(i) for i in ids] == [second.generate(i) for i in ids]
    assert [first.generate(i) for i in ids] == [first.generate(i) for i in ids]
    assert len({repr(first.generate(i)) for i in range(50)}) > 10  # ids really select different tasks


@pytest.mark.multiprocessing
@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_same_id_same_task_in_another_process(start_method: str) -> None:
    """A child builds the generators from scratch (spawned children have their own hash seed)."""
    ids = list(range(0, 400, 7))
    context = multiprocessing.get_context(start_method)
    for name, factory in (("grid", grid_generator), ("mixed", mixed_generator)):
        queue = context.Queue()
        child = context.Process(target=generate_in_child, args=(name, ids, queue))
        child.start()
        remote = queue.get(timeout=30)
        child.join(timeout=30)
        assert child.exitcode == 0
        assert remote == [factory().generate(i) for i in ids]


@pytest.mark.parametrize("generator", [
    SingleTaskGenerator({"x": 1}),
    SingleTaskGenerator({"x": 1, "label": 7}),
    grid_generator(),
    BucketedTaskGenerator({"label": "from_base"}, {"x": [1]}),
    mixed_generator(),
], ids=["single", "single-numeric-label", "bucketed", "bucketed-base-label", "weighted"])
def test_every_task_carries_a_string_label_that_the_generator_declares(generator: TaskGenerator) -> None:
    labels = {generator.generate(i)[1] for i in range(200)}
    assert all(isinstance(label, str) and label for label in labels)
    assert labels <= set(generator.labels)


def test_equal_descriptions_mean_equal_tasks_even_when_bucket_order_differs() -> None:
    """A saved state is accepted by a curriculum whose generator describes itself the same way,
    so equal descriptions must mean equal tasks (buckets are drawn in insertion order)."""
    forward = BucketedTaskGenerator({}, {"a": [1, 2, 3], "b": [4, 5, 6]})
    backward = BucketedTaskGenerator({}, {"b": [4, 5, 6], "a": [1, 2, 3]})
    same_tasks = [forward.generate(i) for i in range(30)] == [backward.generate(i) for i in range(30)]
    assert same_tasks or forward.describe() != backward.describe()
    assert forward.describe() == BucketedTaskGenerator({}, {"a": [1, 2, 3], "b": [4, 5, 6]}).describe()


# ---- bad configs -----------------------------------------------------------------------------
BAD_CONFIGS = [
    (lambda: SingleTaskGenerator([("x", 1)]), "Expected `env_cfg` to be a mapping, received list"),
    (lambda: SingleTaskGenerator({}, label=3), "Expected `label` to be a string, received 3"),
    (lambda: WeightedTaskSetGenerator([]), "Expected `children` to hold at least one generator, received none"),
    (lambda: WeightedTaskSetGenerator(SingleTaskGenerator({})),
     "Expected `children` to be a sequence of generators or (generator, weight) pairs, received SingleTaskGenerator"),
    (lambda: WeightedTaskSetGenerator([({"x": 1}, 1.0)]), "Expected each of `children` to be a TaskGenerator, received dict"),
    (lambda: WeightedTaskSetGenerator([(SingleTaskGenerator({}), -1.0)]),
     "Expected the weights in `children` to be finite and >= 0, received -1.0"),
    (lambda: WeightedTaskSetGenerator([(SingleTaskGenerator({}), float("nan"))]),
     "Expected the weights in `children` to be finite and >= 0, received nan"),
    (lambda: WeightedTaskSetGenerator([(SingleTaskGenerator({}), float("inf"))]),
     "Expected the weights in `children` to be finite and >= 0, received inf"),
    (lambda: WeightedTaskSetGenerator([(SingleTaskGenerator({}), 10**400)]),
     f"Expected the weights in `children` to be finite and >= 0, received {10**400}"),
    (lambda: WeightedTaskSetGenerator([(SingleTaskGenerator({}), "2")]),
     "Expected the weights in `children` to be finite and >= 0, received '2'"),
    (lambda: WeightedTaskSetGenerator([(SingleTaskGenerator({}), 0.0)]),
     "Expected the weights in `children` to sum to > 0, received 0.0"),
    (lambda: WeightedTaskSetGenerator([(SingleTaskGenerator({}),)]),
     "Expected each of `children` to be a TaskGenerator or a (TaskGenerator, weight) pair, received a tuple of length 1"),
    (lambda: WeightedTaskSetGenerator([SingleTaskGenerator({})], seed=1.5), "Expected `seed` to be an integer, received 1.5"),
    (lambda: ValueRange(3, 1), "Expected ValueRange low <= high, received low=3, high=1"),
    (lambda: ValueRange(0.0, float("inf")),
     "Expected ValueRange low and high to be finite numbers, received low=0.0, high=inf"),
    (lambda: ValueRange(float("nan"), 1.0),
     "Expected ValueRange low and high to be finite numbers, received low=nan, high=1.0"),
    (lambda: ValueRange(0, 10**400),
     f"Expected ValueRange low and high to be finite numbers, received low=0, high={10**400}"),
    (lambda: ValueRange("a", "b"), "Expected ValueRange low and high to be finite numbers, received low='a', high='b'"),
    (lambda: BucketedTaskGenerator(None, {}), "Expected `base_cfg` to be a mapping, received NoneType"),
    (lambda: BucketedTaskGenerator({}, [("x", [1])]),
     "Expected `buckets` to be a mapping of dotted config keys to value lists or ValueRanges, received list"),
    (lambda: BucketedTaskGenerator({}, {"x": []}),
     "Expected bucket 'x' to be a non-empty list of values or a ValueRange, received []"),
    (lambda: BucketedTaskGenerator({}, {"x": "abc"}),
     "Expected bucket 'x' to be a non-empty list of values or a ValueRange, received 'abc'"),
    (lambda: BucketedTaskGenerator({}, {"x": 5}),
     "Expected bucket 'x' to be a non-empty list of values or a ValueRange, received 5"),
    (lambda: BucketedTaskGenerator({}, {"a..b": [1]}), "Expected bucket keys to be dotted paths like 'a.b', received 'a..b'"),
    (lambda: BucketedTaskGenerator({}, {3: [1]}), "Expected bucket keys to be dotted paths like 'a.b', received 3"),
    (lambda: BucketedTaskGenerator({}, {"x": [1]}, label=["l"]), "Expected `label` to be a string, received ['l']"),
    (lambda: BucketedTaskGenerator({}, {"x": [1]}, seed="0"), "Expected `seed` to be an integer, received '0'"),
]


@pytest.mark.parametrize(("build", "message"), BAD_CONFIGS, ids=[m for _, m in BAD_CONFIGS])
def test_bad_generator_config_is_refused_with_its_message(build, message: str) -> None:
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        build()


# ---- bucket values with labels of their own -----------------------------------------------------
WIDTHS = {10: "small", 20: "medium", 40: "large"}


def _by_width(**options: Any) -> BucketedTaskGenerator:
    return BucketedTaskGenerator({"game": {"map": {}}}, {"game.map.width": [10, 20, 40], "game.seed": [1, 2, 3]},
                                 value_labels={"game.map.width": WIDTHS}, **options)


def test_bucket_values_label_their_tasks() -> None:
    generator = _by_width(label="maze", seed=3)
    assert generator.labels == ("maze_small", "maze_medium", "maze_large")
    tasks = [generator.generate(task_id) for task_id in IDS]
    assert all(label == f"maze_{WIDTHS[cfg['game']['map']['width']]}" for cfg, label in tasks)
    assert set(label for _, label in tasks) == set(generator.labels)
    assert [generator.generate(task_id) for task_id in range(50)] == tasks[:50]  # still a pure function of the id
    # the same draws as without value labels: only the label changes
    plain = BucketedTaskGenerator({"game": {"map": {}}}, {"game.map.width": [10, 20, 40], "game.seed": [1, 2, 3]},
                                  label="maze", seed=3)
    assert [cfg for cfg, _ in tasks] == [plain.generate(task_id)[0] for task_id in IDS]


def test_value_labels_alone_make_the_label_and_join_in_bucket_order() -> None:
    generator = BucketedTaskGenerator({}, {"speed": [1, 2], "width": [10, 40]},
                                      value_labels={"width": {10: "narrow", 40: "wide"}, "speed": {1: "slow", 2: "fast"}})
    assert generator.labels == ("slow_narrow", "slow_wide", "fast_narrow", "fast_wide")
    assert {generator.generate(task_id)[1] for task_id in range(200)} == set(generator.labels)


def test_value_labels_change_the_description() -> None:
    huge = BucketedTaskGenerator({"game": {"map": {}}}, {"game.map.width": [10, 20, 40], "game.seed": [1, 2, 3]},
                                 value_labels={"game.map.width": {**WIDTHS, 40: "huge"}})
    assert _by_width().describe() != huge.describe()
    assert _by_width().describe() == _by_width().describe()


def test_value_labels_give_per_difficulty_metrics() -> None:
    from curriculum import Curriculum, CurriculumConfig, UniformConfig

    generator = BucketedTaskGenerator({}, {"width": [10, 20, 40]}, value_labels={"width": WIDTHS}, seed=0)
    scores: dict[str, list[float]] = {}
    with Curriculum(CurriculumConfig(task_generator=generator, algorithm=UniformConfig(), num_active_tasks=12)) as c:
        for _ in range(300):
            task = c.get_task()
            score = 10 / task.env_cfg["width"]  # wider is harder
            c.update_task_performance(task.task_id, score)
            scores.setdefault(task.label, []).append(score)
    assert {label: set(values) for label, values in scores.items()} == {"small": {1.0}, "medium": {0.5},
                                                                         "large": {0.25}}


@pytest.mark.parametrize(("value_labels", "message"), [
    ([("w", {})], "Expected `value_labels` to map bucket keys to {value: label} mappings, received list"),
    ({"h": {}}, "Expected `value_labels` keys among the buckets ['w', 'r'], received 'h'"),
    ({"r": {}}, "Expected `value_labels` for a bucket of listed values, received one for the range 'r' "
                "ValueRange(low=0.0, high=1.0)"),
    ({"w": ["small"]}, "Expected `value_labels['w']` to map each value to a label, received list"),
    ({"w": {10: "small"}}, "Expected `value_labels['w']` to label every value of bucket 'w', received none for [20]"),
    ({"w": {10: "small", 20: ""}}, "Expected `value_labels['w']` labels to be non-empty strings, received ['']"),
])
def test_bad_value_labels_are_refused_by_name(value_labels: Any, message: str) -> None:
    with pytest.raises(CurriculumConfigError, match=exact(message)):
        BucketedTaskGenerator({}, {"w": [10, 20], "r": ValueRange(0.0, 1.0)}, value_labels=value_labels)
