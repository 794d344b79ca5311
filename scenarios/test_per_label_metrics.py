"""Per-label metrics: present for every label, counters summed exactly through the pipeline.

`per_label_samples/<label>` and `per_label_completions/<label>` are counters: summed over an
epoch they must equal, to the unit, the episodes of that label that ran (seeds/000: summed,
not averaged). Per-label LP scores must be present and finite for every label seen (when the curriculum has
learning progress at all). The accounting oracle recomputes every metric of every epoch.

The oracle's Gini and entropy references are checked against the library's on distributions
runs rarely produce: labels or tasks with no samples (zeros), point masses, ties, tiny and huge
scales. A dashboard reading "evenly spread" for a pool where most tasks get nothing is the
failure this prevents.

The per-task learning progress those per-label scores average is held, for the built-in
learning progress, to its documented definition recomputed from each task's scores
(`harness.lp_reference`): an EMA at the wrong rate, a baseline not capped or a noise band off by
a little changes no share a statistical check could see, and every number on the dashboard.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter, defaultdict
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from curriculum import (BucketedTaskGenerator, Curriculum, CurriculumConfig, CurriculumConfigError,
                        LearningProgressConfig, SingleTaskGenerator, Stage, StagedProgressionConfig,
                        UniformConfig, TaskGenerator, gini_coefficient, normalized_entropy)
from curriculum.env import CompletionRecorder
from curriculum.algorithms.learning_progress import LABEL_TABLE_SIZE, STATE_FIELDS, id_fields
from curriculum.stats import LP_EMA_ALPHA, accumulate_rollout_stats, process_training_stats
from harness.copies import plain_copy
from harness.envs import TaskDependencyEnv
from harness.lp_reference import (LPState, label_with_home, read_state, reference_eviction, reference_eviction_candidates,
                                   reference_learning_progress, reference_pool_counts, reference_probabilities,
                                   reference_readouts, reference_record, state_differences)
from harness.oracle import AccountingOracle, reference_entropy, reference_gini
from harness.protocol import ProtocolView
from harness.task_spaces import TaggedTasks, chain_task_space, impossible_task_space
from harness.thresholds import ENV_WRAPPER as LIMITS
from harness.thresholds import INVARIANCES

NUM_TASKS = 5


def test_per_label_counters_are_exact_and_lp_is_reported(curriculum_factory, curriculum_env_class, scenario_seed,
                                                         golden, oracle, uses_builtin_curriculum) -> None:
    space = chain_task_space(num_tasks=NUM_TASKS, seed=scenario_seed)
    watcher = oracle(context="Serial")
    curriculum = watcher.watch(curriculum_factory(CurriculumConfig(
        task_generator=space.generator, algorithm=LearningProgressConfig(), num_active_tasks=16, seed=scenario_seed)))
    reports_lp = bool(curriculum.stats().get("per_label_lp_scores"))  # empty or absent: no learning progress
    assert reports_lp or not uses_builtin_curriculum, "the built-in curriculum no longer reports per_label_lp_scores"
    envs = []

    def make_env(buf=None, seed=0):
        env = curriculum_env_class(TaskDependencyEnv(num_tasks=NUM_TASKS, buf=buf, seed=seed), curriculum,
                                   seed=seed, buf=buf)
        envs.append(env)
        return env

    import pufferlib.vector

    vecenv = pufferlib.vector.make(make_env, backend=pufferlib.vector.Serial, num_envs=LIMITS.num_envs)
    vecenv.reset(seed=scenario_seed)
    actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
    epochs, raw, counted = [], defaultdict(list), Counter()
    for step in range(1, LIMITS.vec_steps + 1):
        _, _, terminals, truncations, infos = vecenv.step(actions)
        watcher.observe(infos)
        accumulate_rollout_stats(infos, raw)
        for info in infos:
            index = info.get("task_dependency", {}).get("task_index") if isinstance(info, dict) else None
            if index is not None:
                counted[f"task_{index}"] += 1
        if step % LIMITS.epoch_steps == 0:
            metrics = process_training_stats(raw, agent_step=step * LIMITS.num_envs, epoch=len(epochs))
            watcher.epoch(metrics, agent_step=step * LIMITS.num_envs)
            epochs.append((metrics, counted))
            raw, counted = defaultdict(list), Counter()
    vecenv.close()
    watcher.verify()
    for epoch, (metrics, expected) in enumerate(epochs):
        reported = {k.removeprefix("env_curriculum_stats/per_label_samples/"): v for k, v in metrics.items()
                    if k.startswith("env_curriculum_stats/per_label_samples/")}
        assert reported == dict(expected), (
            f"epoch {epoch}: per_label_samples {reported} differ from the episodes run per label {dict(expected)}, "
            f"seed {scenario_seed}"
        )
        completions = {k.removeprefix("env_curriculum_stats/per_label_completions/"): v for k, v in metrics.items()
                       if k.startswith("env_curriculum_stats/per_label_completions/")}
        assert completions == dict(expected), (
            f"epoch {epoch}: per_label_completions {completions} differ from the episodes run per label "
            f"{dict(expected)}, seed {scenario_seed}"
        )
        if not reports_lp:
            continue  # a curriculum without learning progress reports no LP to check
        lp = {k.removeprefix("env_curriculum_stats/per_label_lp_scores/"): v for k, v in metrics.items()
              if k.startswith("env_curriculum_stats/per_label_lp_scores/")}
        assert set(lp) == set(expected) and all(math.isfinite(v) and v >= 0 for v in lp.values()), (
            f"epoch {epoch}: per_label_lp_scores {lp} must hold a finite LP for each label run {sorted(expected)}, "
            f"seed {scenario_seed}"
        )
    golden({"epochs": [{k: v for k, v in m.items() if "per_label_samples" in k} for m, _ in epochs]})


def _sparse_distributions(seed: int, count: int) -> list[list[float]]:
    """Sample counts or probabilities of 1-64 entries: some zero, some tied, scaled 1e-6 to 1e6;
    in some, negative entries (scores passed to the metrics: documented as counting as 0), and
    in a few a NaN or an infinity of either sign (documented: the metric is then 0)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(1, 65))
        values = rng.choice([1.0, 2.0, rng.random()], size=n) if rng.random() < 0.3 else rng.random(n)
        values[rng.random(n) < rng.random()] = 0.0  # a random share of entries never sampled
        if rng.random() < 0.2:
            values[rng.random(n) < 0.3] *= -1.0
        values = values * 10.0 ** rng.integers(-6, 7)
        if rng.random() < 0.1:
            values[rng.integers(n)] = rng.choice([np.nan, np.inf, -np.inf])
        out.append(values.tolist())
    return out


def test_sampling_metrics_match_their_definitions_with_unsampled_entries(scenario_seed) -> None:
    """`gini_coefficient` and `normalized_entropy` (what `stats()` and the pipeline report) equal
    the oracle's written-out references on every input, zero entries counting towards n, and
    leave an array passed in as it was (a caller's `task_scores()` keeps its order and signs)."""
    for values in _sparse_distributions(scenario_seed, LIMITS.metric_inputs):
        for name, metric, reference in (("gini_coefficient", gini_coefficient, reference_gini),
                                        ("normalized_entropy", normalized_entropy, reference_entropy)):
            got, expected = metric(values), reference(values)
            assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12), (
                f"{name} of {len(values)} entries ({values.count(0.0)} zero): {got!r}, by its definition "
                f"{expected!r}; input {values}, seed {scenario_seed}")
            array = np.array(values, dtype=np.float64)
            unchanged = np.array_equal(array, np.array(values), equal_nan=True)
            assert math.isclose(metric(array), expected, rel_tol=1e-9, abs_tol=1e-12) and unchanged, (
                f"{name} of a float64 array changed it: {values} became {array.tolist()}, seed {scenario_seed}")


#: Every numpy number type an env's info may hold (C envs report per-agent counters as unsigned
#: arrays): each dtype kind (bool, signed, unsigned, float) at every width.
_NUMPY_NUMBERS = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                  np.float16, np.float32, np.float64)
#: Every kind of value envs put in their infos, as a maker of one from a random stream: plain and
#: numpy numbers (of every type in `_NUMPY_NUMBERS`), sequences and arrays (counted as their
#: mean: lists, tuples, arrays of 0, 1 and 2 dimensions, nested ones too, 0-d ones of bools and
#: of every numpy type), and what is no number
#: (strings, None, empty lists, tuples and arrays (a per-agent array masked to the agents that
#: finished: empty on most steps), and sequences holding any of those beside numbers).
_VALUE_KINDS = (
    lambda rng: rng.randint(0, 5), lambda rng: rng.random() * 4, lambda rng: rng.random() < 0.5,
    lambda rng: np.float32(rng.random()), lambda rng: np.float64(rng.random() * 3), lambda rng: np.int64(rng.randint(0, 5)),
    lambda rng: np.bool_(rng.random() < 0.5), lambda rng: [rng.randint(0, 2) for _ in range(3)],
    lambda rng: [rng.random(), rng.randint(0, 3)], lambda rng: np.array([rng.random(), rng.random()], dtype=np.float32),
    lambda rng: np.array([True, rng.random() < 0.5]), lambda rng: [[rng.random()], [1, 2]], lambda rng: "x",
    lambda rng: None, lambda rng: [], lambda rng: (), lambda rng: (rng.random(), rng.randint(0, 3)),
    lambda rng: ((rng.random(),), [rng.randint(0, 2), 1]), lambda rng: np.array(rng.random() * 2),
    lambda rng: np.array([[rng.randint(0, 3), 1], [rng.random(), 0]]),
    lambda rng: np.array([rng.randint(0, 3) for _ in range(rng.randint(1, 3))], dtype=rng.choice(_NUMPY_NUMBERS)),
    lambda rng: np.array([[rng.randint(0, 3)], [1]], dtype=rng.choice(_NUMPY_NUMBERS)),
    lambda rng: rng.choice(_NUMPY_NUMBERS)(rng.randint(0, 3)),
    lambda rng: [rng.random(), None], lambda rng: ["x", rng.randint(0, 3), rng.random()],
    lambda rng: [rng.random(), []], lambda rng: (rng.randint(0, 2), (None,)), lambda rng: [[rng.random()], ["x"]],
    lambda rng: np.array([], dtype=rng.choice(_NUMPY_NUMBERS)), lambda rng: np.zeros((0, 2)),
    lambda rng: np.array(rng.random() < 0.5), lambda rng: np.array(rng.randint(0, 3), dtype=rng.choice(_NUMPY_NUMBERS)),
)
#: Gauges only: per-env nanosecond timestamps, ints whose sum no int64 holds (averaged exactly to
#: float64; a counter's sum past 2**53 has no exact float).
_HUGE_KINDS = (lambda rng: [rng.randint(2**61, 2**62) for _ in range(rng.randint(2, 4))],
               lambda rng: rng.randint(2**61, 2**62))
#: Keys of the random infos: counters (a part among the pipeline's summed stats), gauges (some
#: holding a counter's name inside a part, some a part of a counter's or an identifier's name:
#: a counter or an identifier is named by a whole part), and identifiers, at every depth.
_INFO_KEYS = ("episodes", "completions", "rate", "score", "task_id", "total_completions", "deep/episodes", "deep/rate",
              "deep/deeper/score", "deep/episodes_per_hour", "deep/task_id", "deep/deeper/task_id", "task", "deep/id",
              "episode", "per_label_samples/nav/maze")  # (a per-label counter whose label holds a '/')
#: Where an env's info puts its keys: under its own group, or at the top of the dict.
_INFO_GROUPS = ("env", None)
_TOP_LEVEL_KEYS = ("env", *{key.split("/", 1)[0] for key in _INFO_KEYS})


def _random_info(rng: random.Random) -> dict[str, Any]:
    """One env's info: a few of `_INFO_KEYS`, under the env's group or at the top, each of a
    random kind."""
    info: dict[str, Any] = {}
    group = rng.choice(_INFO_GROUPS)
    for key in rng.sample(_INFO_KEYS, rng.randint(1, len(_INFO_KEYS))):
        *parents, leaf = key.split("/")
        node = info if group is None else info.setdefault(group, {})
        for part in parents:
            node = node.setdefault(part, {})
        counter = leaf in ("episodes", "completions", "total_completions") or key.startswith("per_label_samples")
        node[leaf] = rng.choice(_VALUE_KINDS if counter else _VALUE_KINDS + _HUGE_KINDS)(rng)
    return info


class _ScalarTensor:
    """A 0-d tensor as torch hands out a loss (`loss.detach()`): no Python or numpy number, but
    0-dimensional, and `float()` takes it (the gate installs no torch)."""

    ndim = 0

    def __init__(self, value: float) -> None:
        self._value = value

    def __float__(self) -> float:
        return self._value

    def item(self) -> float:
        return self._value

    def __repr__(self) -> str:
        return f"tensor({self._value})"


#: The kinds of value a trainer's losses come as: plain numbers, numpy scalars, 0-d arrays and tensors.
_LOSS_KINDS = (lambda rng: rng.random(), lambda rng: rng.randint(0, 3), lambda rng: np.float32(rng.random()),
               lambda rng: np.float64(rng.random()), lambda rng: np.array(rng.random()),
               lambda rng: _ScalarTensor(rng.random()))


#: The kinds of integer a trainer's step and epoch counters come as.
_STEP_KINDS = (int, np.int64, np.uint32, np.int8)


def test_the_stats_pipeline_reduces_every_mix_of_value_kinds_as_defined(scenario_seed) -> None:
    """Epochs of random infos mixing every kind of value envs report (an int from one env, a
    numpy float or a per-agent list from another, under one key) reduce as the oracle's
    written-out reference says: counters summed (exactly, fractions kept), gauges averaged,
    identifiers and non-numbers dropped, and bit for bit the same when the same reports come in
    another order (sums are exact). Losses of every kind come out as `losses/<name>`, and
    the metrics (the step and epoch axes too, given as numpy integers) are plain Python numbers
    under sorted keys (as documented: a logger or
    `json.dumps` takes them as they are)."""
    rng = random.Random(scenario_seed)
    for epoch in range(LIMITS.pipeline_epochs):
        oracle = AccountingOracle(seed=scenario_seed, context=f"random infos, epoch {epoch}", info_keys=_TOP_LEVEL_KEYS)
        raw: dict[str, list[float]] = defaultdict(list)
        steps = []
        for _ in range(LIMITS.pipeline_steps):
            infos = [_random_info(rng) for _ in range(rng.randint(0, 4))]
            oracle.observe(infos)
            accumulate_rollout_stats(infos, raw)
            steps.append(infos)
        losses = {name: rng.choice(_LOSS_KINDS)(rng) for name in rng.sample(("policy", "value", "entropy"), 2)}
        step = rng.randint(0, 100)
        metrics = process_training_stats(raw, agent_step=rng.choice(_STEP_KINDS)(step),
                                         epoch=rng.choice(_STEP_KINDS)(0), losses=losses)
        oracle.epoch(metrics, agent_step=step)
        shuffled: dict[str, list[float]] = defaultdict(list)  # the same reports, workers answering in another order
        for infos in rng.sample(steps, len(steps)):
            accumulate_rollout_stats(rng.sample(infos, len(infos)), shuffled)
        reordered = process_training_stats(shuffled, agent_step=step, epoch=0, losses=losses)
        moved = {key: (value, reordered.get(key)) for key, value in metrics.items() if reordered.get(key) != value}
        assert not oracle.mismatches, (
            f"the stats pipeline reduced random infos otherwise than its definition, epoch {epoch}, seed "
            f"{scenario_seed}:\n" + "\n".join(oracle.mismatches[:6]))
        wrong_losses = {name: metrics.get(f"losses/{name}") for name, value in losses.items()
                        if metrics.get(f"losses/{name}") != float(value)}
        not_plain = {key: type(value).__name__ for key, value in metrics.items() if type(value) not in (int, float)}
        assert not wrong_losses and not not_plain and list(metrics) == sorted(metrics) and not moved, (
            f"epoch {epoch}, seed {scenario_seed}: losses {losses} reported as {wrong_losses}; metrics that are no "
            f"plain Python number: {not_plain}; keys sorted: {list(metrics) == sorted(metrics)}; metrics that "
            f"changed with the order of the same reports (in order, reordered): {dict(list(moved.items())[:4])}")


#: (counter, whole numbers its reports hold): sums no float64 holds exactly (past 2**53)
_WIDE_COUNTS = (("episodes", (2**53, 1)), ("per_label_samples/maze", (10**17, 3, 4)),
                ("completions", (2**62, *([1] * 9))), ("episodes", (np.int64(2**60), np.uint64(2**63), 1)))


def test_a_counter_of_whole_numbers_is_summed_exactly_at_any_size() -> None:
    """A counter whose reports are whole numbers (ints or numpy integers: a global step or
    sample count an env reports) sums to the exact int, past 2**53 too, where a float sum
    loses the low digits."""
    wrong = []
    for key, reports in _WIDE_COUNTS:
        *parents, leaf = key.split("/")
        raw: dict[str, list[float]] = defaultdict(list)
        for count in reports:
            info: dict[str, Any] = {leaf: count}
            for part in reversed(parents):
                info = {part: info}
            accumulate_rollout_stats([info], raw)
        got = process_training_stats(raw, agent_step=0, epoch=0).get(f"env_{key}")
        if got != sum(int(count) for count in reports) or type(got) is not int:
            wrong.append(f"{key} reported as {reports}: {got!r}, exactly {sum(int(count) for count in reports)}")
    assert not wrong, f"counters of whole numbers summed inexactly: {wrong}"


def _built_in(curriculum_factory, require_capability, config: CurriculumConfig, why: str) -> Curriculum:
    """The curriculum under test for `config` if it is the built-in one; a plug-in's is closed
    and the check skipped with `why`."""
    curriculum = curriculum_factory(config)
    if not isinstance(curriculum, Curriculum) and callable(getattr(curriculum, "close", None)):
        curriculum.close()
    require_capability(isinstance(curriculum, Curriculum), why)
    return curriculum


#: The documented defaults, and settings that each differ from them (a constant in place of a
#: setting shows under the second).
_LP_SETTINGS = {
    "defaults": LearningProgressConfig(),
    # counts derived from the rates fall between two integers, past the half (1 / a_f = 6.67 retry
    # samples, 2 / a_s = 47.6 completions of frontier practice), so truncating is not rounding;
    # every budget and threshold of its own size, none equal to another (the defaults' revisit,
    # retry and admission usefulness are all 0.1: one read for another changes nothing there)
    "settings": LearningProgressConfig(ema_timescale=0.15, slow_timescale_factor=0.28, min_samples_for_lp=3,
                                       noise_z=1.5, max_baseline=0.6, mastered_gain=0.3, exploration=0.04,
                                       cold_exploration=0.16, revisit=0.12, retry=0.08, frontier_z=2.5,
                                       admission_candidates=6, admission_usefulness=0.06,
                                       config_memory=61),  # (no power of two: a position masked, not wrapped, shows)
    # a threshold on a value the state takes exactly: a configuration remembered as stagnant has
    # usefulness 0, which "at least 0" admits and "above 0" would not
    "boundary": LearningProgressConfig(admission_usefulness=0.0),
    # no memory of configurations: an evicted task's statistics go nowhere, its successor starts cold
    "no_memory": LearningProgressConfig(config_memory=0),
    # the shortest warm-up: it ends at a task's first completion, before any difference between
    # two scores exists (what is done at its end must not wait for one)
    "one_sample_warmup": LearningProgressConfig(min_samples_for_lp=1),
}


@pytest.mark.parametrize("settings", sorted(_LP_SETTINGS))
def test_every_tasks_learning_progress_follows_its_definition(curriculum_factory, require_capability, scenario_seed,
                                                              settings) -> None:
    """Every task's learning progress (`task_scores()`, what `per_label_lp_scores` averages)
    equals the documented definition computed from the scores it received
    (`harness.lp_reference`), at every check of a run with learnable, impossible and noisy
    tasks, evictions, and learned tasks forgotten halfway. Tasks whose configuration was seen
    before (they inherit remembered statistics) are left out."""
    config = _LP_SETTINGS[settings]
    generator = BucketedTaskGenerator({}, {"kind": ["learnable", "impossible", "noisy"], "rate": [0.01, 0.03, 0.1],
                                           "variant": list(range(10_000))},
                                      value_labels={"kind": {k: k for k in ("learnable", "impossible", "noisy")}},
                                      seed=scenario_seed)
    curriculum = _built_in(curriculum_factory, require_capability, CurriculumConfig(
        task_generator=generator, algorithm=config, num_active_tasks=16, seed=scenario_seed, refresh_interval=5),
        "the reference is the definition of the built-in learning progress (a Curriculum with a "
        "LearningProgressConfig), not this curriculum's")
    rng = np.random.default_rng(scenario_seed)
    received: dict[int, list[float]] = defaultdict(list)
    practice: Counter = Counter()
    configs: dict[tuple, int] = {}  # configuration -> the first task id that had it
    tracker = curriculum.tracker
    checked = 0
    try:
        for episode in range(1, LIMITS.lp_episodes + 1):
            task = curriculum.get_task()
            cfg = task.env_cfg
            configs.setdefault(tuple(sorted(cfg.items())), task.task_id)
            if episode == int(LIMITS.lp_episodes * LIMITS.lp_forget_at):
                practice.clear()  # the student forgets everything it learned
            if cfg["kind"] == "learnable":
                practice[task.task_id] += 1
                level = min(1.0, practice[task.task_id] * cfg["rate"])
                score = float(np.clip(level + rng.normal(0.0, 0.1), 0.0, 1.0))
            else:
                score = 0.0 if cfg["kind"] == "impossible" else float(rng.random())
            curriculum.update_task_performance(task.task_id, score)
            received[task.task_id].append(score)
            if episode % LIMITS.lp_check_every:
                continue
            lp = curriculum.task_scores()
            for slot, task_id in enumerate(tracker.task_ids.tolist()):
                pool_task = curriculum.active_tasks()[slot]
                if configs.get(tuple(sorted(pool_task.env_cfg.items()))) not in (None, task_id):
                    continue  # a configuration seen before: it starts from remembered statistics
                scores = received.get(task_id, [])
                assert tracker.completions_at(slot) == len(scores), (
                    f"[{settings}] task {task_id} (slot {slot}) has {tracker.completions_at(slot)} completions, it "
                    f"received {len(scores)} scores, episode {episode}, seed {scenario_seed}")
                expected = reference_learning_progress(scores, config)
                assert math.isclose(lp[slot], expected, rel_tol=1e-7, abs_tol=1e-9), (
                    f"[{settings}] task {task_id} ({pool_task.label}, slot {slot}) has learning progress "
                    f"{float(lp[slot])!r}, by its definition {expected!r} after {len(scores)} scores (last "
                    f"{[round(s, 3) for s in scores[-5:]]}), episode {episode}, seed {scenario_seed}")
                checked += expected > 0.0
    finally:
        curriculum.close()
    assert checked >= LIMITS.lp_episodes // LIMITS.lp_check_every, (
        f"[{settings}] only {checked} comparisons had learning progress to compare, seed {scenario_seed}")


_ID_OFFSET, _ID_STRIDE = 1_000_003, 7


class _RenumberedTasks:
    """The curriculum under test seen through another task id scheme (a plug-in's own ids:
    neither slot positions nor the built-in's), and without its tracker."""

    def __init__(self, curriculum: Any) -> None:
        self._inner = curriculum

    def __getattr__(self, name: str) -> Any:  # test double: everything without ids goes to the curriculum
        if name == "tracker":
            raise AttributeError(name)
        if name == "active_tasks":  # where the curriculum has it
            active_tasks = self._inner.active_tasks
            return lambda: [self._task(task) for task in active_tasks()]
        return getattr(self._inner, name)

    @staticmethod
    def _task(task: Any) -> SimpleNamespace:
        return SimpleNamespace(task_id=_ID_OFFSET + _ID_STRIDE * task.task_id, env_cfg=task.env_cfg, label=task.label)

    def get_task(self) -> SimpleNamespace:
        return self._task(self._inner.get_task())

    def update_task_performance(self, task_id: int, score: float) -> Any:
        return self._inner.update_task_performance((task_id - _ID_OFFSET) // _ID_STRIDE, score)


def _reported(curriculum_factory, curriculum_env_class, seed: int, renumbered: bool) -> list[dict[str, Any]]:
    """The curriculum entries of every info dict of a Serial run (task ids in the curriculum's own scheme)."""
    import pufferlib.vector

    space = chain_task_space(num_tasks=NUM_TASKS, seed=seed)
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=space.generator, algorithm=LearningProgressConfig(), num_active_tasks=16, seed=seed))
    seen = _RenumberedTasks(curriculum) if renumbered else curriculum

    def make_env(buf=None, seed=0):
        return curriculum_env_class(TaskDependencyEnv(num_tasks=NUM_TASKS, buf=buf, seed=seed), seen, seed=seed,
                                    buf=buf, stats_interval=LIMITS.renumbered_stats_interval)

    vecenv = pufferlib.vector.make(make_env, backend=pufferlib.vector.Serial, num_envs=LIMITS.num_envs)
    reported = []
    try:
        vecenv.reset(seed=seed)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        for _ in range(LIMITS.renumbered_vec_steps):
            infos = vecenv.step(actions)[4]
            for info in infos:
                entries = {k: v for k, v in info.items() if k.startswith("curriculum_stats/")}
                if renumbered and "curriculum_stats/task_id" in entries:
                    entries["curriculum_stats/task_id"] = (entries["curriculum_stats/task_id"] - _ID_OFFSET) // _ID_STRIDE
                reported.append(entries)
    finally:
        vecenv.close()
        close = getattr(curriculum, "close", None)
        if callable(close):
            close()
    return reported


def test_the_task_id_scheme_changes_no_reported_number(curriculum_factory, curriculum_env_class,
                                                       scenario_seed) -> None:
    """The same run through the env wrapper, with the curriculum's task ids renumbered (as a
    plug-in with ids of its own hands them out) and no tracker to read them from, reports the
    same numbers episode for episode: per-task learning progress looked up by position, or
    kept from an earlier pool report, shows as per-label LP that drifts from the run's."""
    reference = _reported(curriculum_factory, curriculum_env_class, scenario_seed, renumbered=False)
    renumbered = _reported(curriculum_factory, curriculum_env_class, scenario_seed, renumbered=True)
    differing = next((i for i, (a, b) in enumerate(zip(reference, renumbered)) if a != b), None)
    assert differing is None and len(reference) == len(renumbered), (
        f"info {differing} of the run differs once the task ids are renumbered: "
        f"{ {k: (v, renumbered[differing].get(k)) for k, v in reference[differing].items() if renumbered[differing].get(k) != v} }"
        f" (reference, renumbered), seed {scenario_seed}" if differing is not None else
        f"{len(reference)} info dicts in the run, {len(renumbered)} once the task ids are renumbered, seed {scenario_seed}")


class _ReportWatch:
    """The curriculum under test, noting what each `task_scores()` call returned, with the pool
    ids it is read against (what a pool report of the wrapper sees)."""

    def __init__(self, curriculum: Any) -> None:
        self._inner = curriculum
        self.reports: list[dict[Any, float]] = []

    def __getattr__(self, name: str) -> Any:  # test double: everything else goes to the curriculum
        return getattr(self._inner, name)

    def task_scores(self) -> Any:
        scores = self._inner.task_scores()
        tracker = getattr(self._inner, "tracker", None)
        ids = tracker.task_ids.tolist() if tracker is not None else [t.task_id for t in self._inner.active_tasks()]
        self.reports.append(dict(zip(ids, np.asarray(scores, dtype=np.float64).reshape(-1).tolist())))
        return scores


@pytest.mark.parametrize("algorithm", ["learning_progress", "uniform", "learning_progress, more labels than the pool holds",
                                       "staged_progression"])
def test_reported_label_lp_follows_its_definition(curriculum_factory, curriculum_env_class, require_capability,
                                                  scenario_seed, algorithm) -> None:
    """Each episode's `per_label_lp_scores/<label>` is the EMA (rate `LP_EMA_ALPHA`) of the
    algorithm score of the tasks of that label its env completed, each read from that env's
    last pool report (by task id; the report's per-label score for a task not in it), starting
    from the first of them. Two envs of different episode lengths share a churning pool, so
    some of their completions arrive after the task left it: a late completion is not the
    task's any more, and reports no LP and moves no EMA. Under uniform sampling a task's score
    is its mean score, not 0 from its first completion on (learning progress is 0 through a
    task's warm-up, whatever the EMA started from). Under staged progression (a fast-forgetting
    chain, about 30 moves each way) a stage's labels leave the pool at every move and come
    back: a label's EMA goes on from where it was. With more labels than the pool has slots,
    labels leave the churning pool and come back: a label's EMA goes on from where it was (a
    completion that evicts its own task, the last of its label, finds nothing to score it by
    in the report made at it, and reports none)."""
    space = impossible_task_space(num_learnable=5, num_impossible=45, seed=scenario_seed)
    churning = algorithm.startswith("learning_progress")
    generator = space.generator
    if algorithm.endswith("more labels than the pool holds"):
        tasks = range(space.simulator.num_tasks)
        groups = {i: f"group/{i % LIMITS.label_lp_groups}" for i in tasks}  # (a "/" inside, as in "maze/small")
        generator = BucketedTaskGenerator({}, {"task_index": list(tasks)}, value_labels={"task_index": groups},
                                          seed=scenario_seed)
    options = dict(min_presentations=INVARIANCES.churn_min_presentations,
                   eviction_percentile=INVARIANCES.churn_eviction_percentile) if churning else {}
    algorithm_config: Any = LearningProgressConfig() if churning else UniformConfig()
    if algorithm == "staged_progression":  # a stage's labels leave the pool at each move, and come back
        space = chain_task_space(num_tasks=LIMITS.label_lp_stages, seed=scenario_seed,
                                 forgetting_rate=LIMITS.label_lp_forgetting)
        generator, churning = None, True
        algorithm_config = StagedProgressionConfig(
            stages=[Stage(f"stage_{i}", BucketedTaskGenerator({"task_index": i}, {}, label=f"task_{i}",
                                                              seed=scenario_seed))
                    for i in range(LIMITS.label_lp_stages)],
            advancement_threshold=0.7, regression_threshold=0.3, min_episodes=LIMITS.label_lp_stage_window,
            window=LIMITS.label_lp_stage_window)
    try:
        curriculum = curriculum_factory(CurriculumConfig(
            task_generator=generator, algorithm=algorithm_config, seed=scenario_seed,
            num_active_tasks=INVARIANCES.churn_pool, **options))
    except (CurriculumConfigError, NotImplementedError) as error:
        require_capability(False, f"the {algorithm} run needs a {algorithm} curriculum; the factory refused the "
                                  f"config: {type(error).__name__}: {error}")
    require_capability(callable(getattr(curriculum, "task_scores", None)),
                       "this curriculum reports no per-task scores (`task_scores()`)")
    watch = _ReportWatch(curriculum)
    envs = [curriculum_env_class(TaskDependencyEnv(space.simulator, episode_length=length), watch, seed=i,
                                 stats_interval=LIMITS.renumbered_stats_interval)
            for i, length in enumerate(LIMITS.label_lp_episode_lengths)]
    ema: list[dict[str, float]] = [{} for _ in envs]
    report: list[tuple[dict[Any, float], dict[str, float]]] = [({}, {}) for _ in envs]
    late = checked = 0
    for env in envs:
        env.reset(seed=scenario_seed)
    for step in range(LIMITS.label_lp_steps):
        for e, env in enumerate(envs):
            calls = len(watch.reports)
            infos = env.step(np.zeros(1, dtype=np.int32))[4]
            for info in (i for i in infos if isinstance(i, dict) and "curriculum_stats/completions" in i):
                pool = {k.removeprefix("curriculum_stats/pool_per_label_lp_scores/"): v for k, v in info.items()
                        if k.startswith("curriculum_stats/pool_per_label_lp_scores/")}
                if len(watch.reports) > calls:  # this completion made a pool report
                    report[e] = (watch.reports[-1], pool)
                label = next(k.removeprefix("curriculum_stats/per_label_completions/") for k in info
                             if k.startswith("curriculum_stats/per_label_completions/"))
                reported = info.get(f"curriculum_stats/per_label_lp_scores/{label}")
                if info["curriculum_stats/late_completions"]:
                    late += 1
                    assert reported is None, (
                        f"env {e}, step {step}: a late completion of task {info['curriculum_stats/task_id']} reported "
                        f"per_label_lp_scores/{label} = {reported}, seed {scenario_seed}")
                    continue
                by_id, by_label = report[e]
                lp = by_id.get(info["curriculum_stats/task_id"], by_label.get(label))
                if lp is not None:
                    old = ema[e].get(label)
                    ema[e][label] = lp if old is None else old + LP_EMA_ALPHA * (lp - old)
                expected = ema[e].get(label) if lp is not None else None  # (nothing to score it by: reports none)
                assert (reported is None and expected is None) or (
                    reported is not None and expected is not None and math.isclose(reported, expected, rel_tol=1e-9)), (
                    f"env {e}, step {step}: per_label_lp_scores/{label} = {reported}, by its definition {expected} "
                    f"(task {info['curriculum_stats/task_id']}), seed {scenario_seed}")
                checked += 1
    for env in envs:
        env.close()
    require_capability((late > 0 or not churning) and checked > 0,
                       f"no late completion in {LIMITS.label_lp_steps} steps ({checked} checked), seed {scenario_seed}")


def _slow_level(practice: int) -> float:
    """Success probability of a task the student learns slowly: nothing in its first 5 episodes,
    then half the time and no better with practice (partly learned, as PPO's deepest crafting
    chain is when it pays the intermediate products: the frontier's case)."""
    return 0.0 if practice <= 5 else 0.5


_RULES_KINDS = ("learnable", "impossible", "noisy", "slow")
#: The kinds of the rules check: and "steady" tasks, always scored exactly the mastery level.
_ALL_RULES_KINDS = (*_RULES_KINDS, "steady")
#: Labels for the kinds whose homes are the label table's first entry (two), its last (two)
#: and its middle, so the table's ends and its probing (on past a taken entry, around the end)
#: all decide.
_EDGE_LABELS = {kind: label_with_home(kind, position) for kind, position in
                zip(_ALL_RULES_KINDS, (LABEL_TABLE_SIZE - 1, 0, 0, LABEL_TABLE_SIZE - 1, LABEL_TABLE_SIZE // 2))}


def _rules_config(algorithm: LearningProgressConfig, seed: int, *, refresh_interval: int,
                  variants: int = 2, labels: dict[str, str] | None = None, pool: int = 16,
                  kinds: tuple[str, ...] = _RULES_KINDS) -> CurriculumConfig:
    """`pool` slots over learnable configurations at two rates, impossible, noisy and slowly
    learned ones (and the other `kinds`), `variants` of each, labelled by kind (or by
    `labels`); every config tagged with its task id (which tells tasks apart, not what they are)."""
    generator = TaggedTasks(BucketedTaskGenerator({}, {"kind": list(kinds), "rate": [0.05, 0.1],
                                                       "variant": list(range(variants))},
                                                  value_labels={"kind": labels or {k: k for k in kinds}}, seed=seed))
    return CurriculumConfig(task_generator=generator, algorithm=algorithm, num_active_tasks=pool, seed=seed,
                            refresh_interval=refresh_interval)


_STEADY_SCORE = LearningProgressConfig().max_baseline
"""What a "steady" task always scores: exactly the mastery level (3 of 4 subgoals, every time),
where a threshold tested with the wrong comparison decides every completion."""


def _rules_student(task: Any, practice: Counter, rng: np.random.Generator) -> float:
    """A score for one episode of `task`: a learnable configuration improves with its practice,
    impossible ones pay 0, noisy ones a uniform draw, slowly learned tasks `_slow_level`,
    steady ones `_STEADY_SCORE`; of a "held" configuration, tasks of even id `_STEADY_SCORE` and
    those of odd id a level that climbs with their own practice past it."""
    cfg = task.env_cfg
    if cfg["kind"] == "steady":
        return _STEADY_SCORE
    configuration = tuple(sorted((k, v) for k, v in cfg.items() if k != "level_seed"))
    practice[configuration] += 1
    practice[task.task_id] += 1
    if cfg["kind"] == "held":
        return _STEADY_SCORE if task.task_id % 2 == 0 else min(1.0, practice[task.task_id] * cfg["rate"])
    if cfg["kind"] == "learnable":
        level = min(1.0, practice[configuration] * cfg["rate"])
        return float(np.clip(level + rng.normal(0.0, 0.1), 0.0, 1.0))
    if cfg["kind"] == "slow":  # (a skill of each task: every new one starts low)
        return float(rng.random() < _slow_level(practice[task.task_id]))
    return 0.0 if cfg["kind"] == "impossible" else float(rng.random())


def _followed(curriculum_factory, require_capability, config: CurriculumConfig,
              why: str) -> tuple[Curriculum, Any, Any, frozenset[str]]:
    """The built-in curriculum of `config` (`why` a plug-in is skipped), its tracker, the
    tracker's arrays and the config fields that only tag tasks with their ids."""
    curriculum = _built_in(curriculum_factory, require_capability, config,
                           f"{why} (a Curriculum with a LearningProgressConfig), not this curriculum's")
    tracker = curriculum.tracker
    return curriculum, tracker, tracker.backend.arrays, id_fields(config.task_generator, tracker.capacity)


def _shortlist_wrong(curriculum: Any, tracker: Any, candidates: list[bool]) -> str | None:
    """What the last refresh's eviction shortlist (`get_state()["evictable"]`: per slot the id
    of the task marked, else -1) does against `CurriculumConfig.eviction_percentile`: the
    lowest-scoring of the tasks the rules let go (`candidates`), as many as that percent of the
    tasks presented `min_presentations` times (rounded down), at most every candidate."""
    config = curriculum.config
    marked = [task_id >= 0 and task_id == tracker.task_id_at(slot)
              for slot, task_id in enumerate(curriculum.get_state()["evictable"])]
    presented = int(np.count_nonzero(tracker.completions >= config.min_presentations))
    size = min(int(presented * config.eviction_percentile / 100.0), sum(candidates))
    scores = curriculum.task_scores()
    outside = [slot for slot, (m, c) in enumerate(zip(marked, candidates)) if m and not c]
    kept = [float(scores[slot]) for slot, (m, c) in enumerate(zip(marked, candidates)) if c and not m]
    if outside or sum(marked) != size or (kept and any(scores[slot] > min(kept) for slot in np.flatnonzero(marked))):
        return (f"shortlisted slots {np.flatnonzero(marked).tolist()} (scores "
                f"{[round(float(scores[slot]), 6) for slot in np.flatnonzero(marked)]}) for eviction; by the rules "
                f"the {size} lowest-scoring of the candidates {np.flatnonzero(candidates).tolist()} ({presented} "
                f"tasks presented, eviction_percentile {config.eviction_percentile})")
    return None


def _readouts_wrong(algorithm: Any, reference: dict[str, list[Any]]) -> str | None:
    """What the algorithm's per-slot readouts (`scores()`, `score_at()`, `learned()`,
    `cold_weights()`) say against `reference` (`reference_readouts`): the first slots that differ."""
    slots = range(len(reference["scores"]))
    read = {"scores()": algorithm.scores().tolist(), "score_at()": [algorithm.score_at(slot) for slot in slots],
            "learned()": algorithm.learned().tolist(), "cold_weights()": algorithm.cold_weights().tolist()}
    expected = {"scores()": reference["scores"], "score_at()": reference["scores"],
                "learned()": reference["learned"], "cold_weights()": reference["cold_weights"]}
    for name, values in read.items():
        wrong = [(slot, value, rule) for slot, (value, rule) in enumerate(zip(values, expected[name]))
                 if not math.isclose(value, rule, rel_tol=1e-9, abs_tol=1e-12)]
        if wrong:
            return f"the algorithm's {name} is (slot, value, by the rules) {wrong[:6]}"
    return None


def _mastered_beside_a_copy(before: LPState, after: LPState, slot: int, config: LearningProgressConfig) -> bool:
    """Whether the completion took its task's level (baseline + slow EMA times the rest) from
    below `max_baseline` to it while another warm task of its configuration stood at or above
    it: no new mastery, by the rules."""
    def level(row: dict[str, float]) -> float:
        return row["baseline"] + row["slow"] * (1.0 - row["baseline"])

    cap = config.max_baseline
    return level(before.rows[slot]) < cap <= level(after.rows[slot]) and any(
        other != slot and after.keys[other] == after.keys[slot] and row["count"] >= config.min_samples_for_lp
        and level(row) >= cap for other, row in enumerate(after.rows))


def _follow_rules(curriculum_factory, require_capability, curriculum_config: CurriculumConfig, name: str,
                  episodes: int) -> Counter:
    """Play `episodes` of `_rules_student` (who forgets everything halfway) on the built-in
    curriculum of `curriculum_config`, refreshed at every completion, holding each completion,
    eviction, admission, refresh and (every `rules_stats_every` episodes) the pool counts of
    `stats()` to the documented rules; returns how many refreshes each rule decided."""
    generator = curriculum_config.task_generator
    config = curriculum_config.algorithm
    curriculum, tracker, arrays, ignore = _followed(curriculum_factory, require_capability, curriculum_config,
                                                    "the rules are those of the built-in learning progress")
    rng = np.random.default_rng(curriculum_config.seed)
    practice: Counter = Counter()
    decided: Counter = Counter()
    try:
        for episode in range(1, episodes + 1):
            task = curriculum.get_task()
            if episode == episodes // 2:
                practice.clear()  # the student forgets everything it learned
            score = _rules_student(task, practice, rng)
            slot = tracker.task_ids.tolist().index(task.task_id)
            before = read_state(arrays)
            presented = (tracker.completions >= curriculum.config.min_presentations).tolist()
            curriculum.update_task_performance(task.task_id, score)
            after = read_state(arrays)
            where = (f"[{name}] episode {episode}, task {task.task_id} ({task.label}, slot {slot}), "
                     f"seed {curriculum_config.seed}")
            expected = reference_record(before, slot, score, config, (task.env_cfg, task.label, ignore))
            admitted = tracker.task_ids.item(slot)
            if admitted != task.task_id:  # evicted (shortlisted by the refresh that saw the state before)
                assert reference_eviction_candidates(before, config, presented)[slot], (
                    f"{where}: evicted, but the documented rules did not let it go at the refresh before "
                    f"(statistics {before.rows[slot]})")
                expected, expected_id = reference_eviction(expected, slot, task.task_id, generator,
                                                           tracker.capacity, config, ignore)
                assert admitted == expected_id, (
                    f"{where}: evicted, and task {admitted} admitted in its place; by the documented rules task "
                    f"{expected_id}")
                decided["eviction"] += 1
                decided["untracked label admitted"] += expected.labels[slot] == 0
            differences = state_differences(expected, after)
            assert not differences, (
                f"{where}: a completion with score {score!r}"
                + (f" that evicted the task for task {admitted}" if admitted != task.task_id else "")
                + " left a state the documented rules do not give:\n" + "\n".join(differences[:10]))
            decided["mastery"] += after.counters["mastery_events"] > before.counters["mastery_events"]
            decided["mastered beside a copy at mastery level"] += _mastered_beside_a_copy(before, after, slot, config)
            probabilities = curriculum.sampling_probabilities()
            reference = reference_probabilities(after, config, decided)
            wrong = [(s, float(p), r) for s, (p, r) in enumerate(zip(probabilities, reference))
                     if not math.isclose(p, r, rel_tol=1e-9, abs_tol=1e-12)]
            assert not wrong, (
                f"{where}: the refresh after it samples slots (slot, probability, by the rules) "
                f"{wrong[:6]}")
            wrong_readouts = _readouts_wrong(curriculum._algorithm, reference_readouts(after, config))
            assert not wrong_readouts, f"{where}: after it, {wrong_readouts}"
            wrong_shortlist = _shortlist_wrong(curriculum, tracker, reference_eviction_candidates(
                after, config, (tracker.completions >= curriculum.config.min_presentations).tolist()))
            assert not wrong_shortlist, f"{where}: the refresh after it {wrong_shortlist}"
            if episode % LIMITS.rules_stats_every == 1:
                counts = reference_pool_counts(after, config)
                reported = {name: curriculum.stats().get(name) for name in counts}
                assert reported == counts, f"{where}: stats() reports the pool as {reported}, by the rules {counts}"
    finally:
        curriculum.close()
    return decided


#: Pools (slots, copies of each of the 10 configurations) other than 20 and 2: under changed
#: settings, an odd pool whose configurations fill exactly its half rounded up, where "fit in
#: half the pool" decides on the rounding.
_RULES_POOLS = {"settings": (19, 1)}


@pytest.mark.parametrize("settings", sorted(_LP_SETTINGS))
def test_every_completion_and_refresh_follows_the_documented_rules(curriculum_factory, require_capability,
                                                                   scenario_seed, settings) -> None:
    """Each completion changes the learning-progress state as the module docstring of
    `curriculum.algorithms.learning_progress` says (the task's statistics, frontier practice,
    label usefulness and retries, the budgets a mastery renews; for a task of the first fill,
    its configuration looked up; for an evicted one, its statistics remembered, the task the
    rules admit in its place and what it inherits), only a task the rules let go is evicted,
    and each refresh samples from
    the distribution those rules give for that state (`harness.lp_reference`): exploration
    floor, cold, revisit and retry budgets, learning progress, the frontier and the fallback
    when nothing learns, split per configuration. Learnable, impossible, noisy and slowly
    learned tasks, tasks always scored exactly the mastery level, copies of one configuration,
    evictions and a student who forgets halfway make each rule decide; a budget misspent in a state the simulated students seldom reach
    (a stalled task left to the floor, frontier practice not renewed) shows here. The pool
    counts `stats()` reports (cold, learned, frontier, revisited tasks) are those of the rules."""
    config = _LP_SETTINGS[settings]
    config = dataclasses.replace(config, config_memory=min(config.config_memory, 64))
    pool, variants = _RULES_POOLS.get(settings, (20, 2))
    curriculum_config = _rules_config(config, scenario_seed, refresh_interval=1, labels=_EDGE_LABELS, pool=pool,
                                      variants=variants, kinds=_ALL_RULES_KINDS)
    decided = _follow_rules(curriculum_factory, require_capability, curriculum_config, settings, LIMITS.rules_episodes)
    rules = ("learning progress", "fallback", "frontier", "revisit learned", "revisit stalled", "retry", "cold",
             "mastery", "eviction")
    if settings == "no_memory":  # (what an evicted task leaves its successor; the other settings cover the rest)
        rules = ("cold", "eviction")
    elif settings == "one_sample_warmup":  # (each completion is checked; of the rules, those that read the
        # baseline a warm-up's end sets: with every task warm at its first score the others' states seldom arise)
        rules = ("learning progress", "revisit learned", "cold", "mastery", "eviction")
    thin = {rule: decided[rule] for rule in rules
            if decided[rule] < (1 if rule in ("mastery", "eviction") else LIMITS.rules_min_steps)}
    assert not thin, f"[{settings}] rules that decided too few refreshes to be checked: {thin}, seed {scenario_seed}"


class _Copies(TaskGenerator):
    """Task id `k`: configuration `k % configurations` of `kind` (rate 0.2), tagged with `k`; a
    pool whose size is a multiple of `configurations` starts with as many copies of each."""

    def __init__(self, configurations: int, kind: str = "learnable") -> None:
        self.configurations = configurations
        self.kind = kind

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        return {"kind": self.kind, "rate": 0.2, "variant": task_id % self.configurations,
                "level_seed": task_id}, self.kind

    def describe(self) -> dict[str, Any]:
        return {"type": "copies", "configurations": self.configurations, "kind": self.kind}

    @property
    def labels(self) -> tuple[str, ...]:
        return (self.kind,)


@pytest.mark.parametrize("configurations, kind", [(1, "learnable"), (8, "learnable"), (1, "held")],
                         ids=["1", "8", "1-held"])
def test_a_pool_of_copies_follows_the_documented_rules(curriculum_factory, require_capability, scenario_seed,
                                                       configurations: int, kind: str) -> None:
    """The rules hold also when every configuration has as many copies as every other: here
    the 16 slots hold copies of one learnable configuration, or two of each of 8 (their tasks
    differ only by a tag taken from the task id), learned, kept while nothing better can be
    admitted, forgotten halfway and learned again. Shares of the pool counted per
    configuration are uniform, the case an implementation may take a shortcut for; with 8,
    the learned configurations fill exactly half the pool, which "more than half" keeps. Held:
    half the copies score exactly the mastery level from their first episode while the others
    climb past it, which is no new mastery of the configuration."""
    curriculum_config = CurriculumConfig(task_generator=_Copies(configurations, kind),
                                         algorithm=LearningProgressConfig(config_memory=64), num_active_tasks=16,
                                         seed=scenario_seed, refresh_interval=1)
    decided = _follow_rules(curriculum_factory, require_capability, curriculum_config,
                            f"{configurations} configuration(s)", LIMITS.rules_one_configuration_episodes)
    assert decided["revisit learned"] >= LIMITS.rules_min_steps, (
        f"[{configurations} configuration(s)] the pool was not learned: rules decided {dict(decided)}, seed "
        f"{scenario_seed}")
    assert kind != "held" or decided["mastered beside a copy at mastery level"] > 0, (
        f"[held] no task reached the mastery level beside a copy at it: rules decided {dict(decided)}, seed "
        f"{scenario_seed}")


def test_labels_the_table_cannot_place_follow_the_documented_rules(curriculum_factory, require_capability,
                                                                   scenario_seed) -> None:
    """Labels whose home entries in the label table are all taken (more labels than a
    neighbourhood holds, as a space of many procedurally named task families has) are
    untracked: a task of such a label is admitted with the prior usefulness, and its
    completions move no label's usefulness or retries. Eight labels (one per variant, each
    configuration of every kind and rate) share one home, so four of them find no entry;
    every completion, eviction and admission is held to the documented rules."""
    variants = {variant: label_with_home(f"variant{variant}", 0) for variant in range(LIMITS.crowded_labels)}
    generator = TaggedTasks(BucketedTaskGenerator({}, {"kind": list(_RULES_KINDS), "rate": [0.05, 0.1],
                                                       "variant": list(variants)},
                                                  value_labels={"variant": variants}, seed=scenario_seed))
    curriculum_config = CurriculumConfig(task_generator=generator, algorithm=LearningProgressConfig(config_memory=64),
                                         num_active_tasks=16, seed=scenario_seed, refresh_interval=1,
                                         min_presentations=3, eviction_percentile=50.0)
    decided = _follow_rules(curriculum_factory, require_capability, curriculum_config, "crowded labels",
                            LIMITS.crowded_labels_episodes)
    assert decided["untracked label admitted"] >= LIMITS.crowded_min_admissions, (
        f"[crowded labels] only {decided['untracked label admitted']} admissions of a task whose label the table "
        f"could not place in {LIMITS.crowded_labels_episodes} episodes: the check measured too little, seed "
        f"{scenario_seed}")


def _random_statistics(rng: np.random.Generator, algorithm: LearningProgressConfig, warmup: int,
                       calm: bool) -> list[float]:
    """One task's learning-progress statistics drawn within their documented ranges (see
    `STATE_FIELDS`), spread so that every rule's edge is crossed: variances log-uniform over
    four decades, the fast EMA often within the noise band of the slow one, counts on both
    sides of the warm-up, frontier practice on both sides of its budget; `calm`: no learning
    progress (the fast EMA and the peak on the slow one, above the baseline, warm-up over), the
    pool states where the fallback and the frontier
    decide."""
    cap = algorithm.max_baseline
    lowest = -cap / (1.0 - cap)
    slow = float(rng.uniform(0.0 if calm else lowest, 1.0))
    var, base_var = (float(10 ** rng.uniform(-4.0, 0.0)) for _ in range(2))
    fast = slow if calm else slow + (float(rng.normal(0.0, math.sqrt(var) / 4)) if rng.random() < 0.7
                                     else float(rng.uniform(-0.5, 0.5)))
    row = {"fast": min(max(fast, lowest), 1.0), "slow": slow, "var": var, "baseline": float(rng.uniform(0.0, cap)),
           "base_var": base_var, "last": float(rng.uniform(lowest, 1.0)),
           "peak": float(rng.uniform(slow, 1.0)) if rng.random() < 0.5 and not calm else slow,
           "front": float(rng.integers(0, 200)),
           "count": float(rng.integers(warmup if calm else 0, 3 * warmup))}
    return [row[field] for field in STATE_FIELDS]


def _one_score_short_of_mastery(row: list[float], algorithm: LearningProgressConfig,
                                rng: np.random.Generator) -> list[float]:
    """`row` (a warm task's statistics) with its slow EMA just below the mastery level, where one
    score of 1 takes it past: the slow EMA inside `[(m - a) / (1 - a), m)`, `m` the level
    `max_baseline` normalised by the task's baseline, `a` the slow EMA's rate."""
    fields = dict(zip(STATE_FIELDS, row))
    b, cap = fields["baseline"], algorithm.max_baseline
    mastered_at = (cap - b) / (1.0 - b)
    rate = algorithm.ema_timescale * algorithm.slow_timescale_factor
    low = (mastered_at - rate) / (1.0 - rate)
    slow = float(rng.uniform(low + 0.1 * (mastered_at - low), mastered_at - 0.1 * (mastered_at - low)))
    fields.update(slow=slow, fast=slow, peak=max(fields["peak"], slow), count=max(fields["count"],
                                                                                   algorithm.min_samples_for_lp))
    return [fields[field] for field in STATE_FIELDS]


def _faint(row: list[float], rng: np.random.Generator) -> list[float]:
    """`row` (a calm task's statistics) made to show learning progress of about 1e-309 with no
    noise to hide it: subnormal, yet precise to 13 digits, so a pool of one to three of them has
    a total learning progress whose inverse times the rest overflows."""
    fields = dict(zip(STATE_FIELDS, row))
    fields.update(slow=0.0, peak=0.0, var=0.0, fast=float(rng.uniform(0.1, 1.4)) * 1e-309)
    return [fields[field] for field in STATE_FIELDS]


def _percent_roundings(largest_pool: int) -> list[tuple[int, int]]:
    """(percentile, tasks presented) pairs up to `largest_pool` tasks where that percent of the
    tasks, rounded down, differs from what floating-point orders of the same sum give (the
    fraction taken first, or the count divided first): 28.999999999999996 is 28."""
    return [(percent, n) for percent in range(1, 101) for n in range(1, largest_pool + 1)
            if {int(n * (percent / 100.0)), int(percent / 100.0 * n), int(n / 100.0 * percent)}
            != {n * percent // 100}]


def test_the_eviction_shortlist_is_its_percent_of_the_presented_tasks_exactly(curriculum_factory,
                                                                              require_capability,
                                                                              scenario_seed) -> None:
    """At every (`eviction_percentile`, pool) pair up to `LIMITS.shortlist_largest_pool` tasks
    where floating-point rounding could cut a shortlist short (29% of 100 tasks, 58% of 50,
    ...), a pool of distinct impossible tasks, each presented before the first refresh, is
    refreshed once: the tasks it shortlists are that percent of the presented ones rounded
    down, the lowest-scoring of those the rules let go."""
    pairs = _percent_roundings(LIMITS.shortlist_largest_pool)
    assert pairs, "no percentile rounds differently in floating point: the check measured nothing"
    for percent, pool in pairs:
        generator = TaggedTasks(BucketedTaskGenerator({"kind": "impossible", "rate": 0.1},
                                                      {"variant": list(range(pool))}, label="impossible",
                                                      seed=scenario_seed))
        config = CurriculumConfig(task_generator=generator, algorithm=LearningProgressConfig(), num_active_tasks=pool,
                                  seed=scenario_seed, min_presentations=1, eviction_percentile=float(percent),
                                  refresh_interval=LIMITS.shortlist_episodes_per_task * pool)
        curriculum, tracker, arrays, _ = _followed(curriculum_factory, require_capability, config,
                                                   "the shortlist's rule is the built-in curriculum's")
        try:
            for _ in range(config.refresh_interval):  # the last completion refreshes
                task = curriculum.get_task()
                curriculum.update_task_performance(task.task_id, 0.0)
            presented = (tracker.completions >= config.min_presentations).tolist()
            assert all(presented), (
                f"only {sum(presented)} of {pool} tasks were presented at the refresh, seed {scenario_seed}: the check "
                "measured too little")
            candidates = reference_eviction_candidates(read_state(arrays), config.algorithm, presented)
            wrong = _shortlist_wrong(curriculum, tracker, candidates)
            assert not wrong, f"eviction_percentile {percent}, {pool} tasks, seed {scenario_seed}: the refresh {wrong}"
        finally:
            curriculum.close()


def test_states_drawn_at_random_sample_as_the_rules_say(curriculum_factory, require_capability,
                                                        scenario_seed) -> None:
    """States the simulated students seldom reach: the checkpoint of a run (real keys, labels
    and usefulness) with every pool task's statistics and every remembered configuration's
    drawn at random within their documented ranges (now and then a few tasks the only ones with
    learning progress, of a subnormal size; now and then every task one score of 1 short of
    mastery, and a 1 recorded), restored with `load_state`, and one episode recorded. The
    state that completion leaves (the task's statistics, and at a mastery the budgets it renews
    and the remembered verdicts it drops), the distribution the refresh after it samples from,
    the pool counts `stats()` reports and the tasks it shortlists for eviction (at
    `eviction_percentile=100`, every task the rules let go) must be those the documented rules
    give for that state; the random draws land on both sides of every rule's edge (the learned
    level, the noise band, the frontier's test and budget, a remembered configuration's
    progress), where a run's states pass by only now and then."""
    algorithm = dataclasses.replace(LearningProgressConfig(), config_memory=64)
    config = dataclasses.replace(_rules_config(algorithm, scenario_seed, refresh_interval=1, labels=_EDGE_LABELS),
                                 eviction_percentile=100.0)  # (its upper end: every task let go is shortlisted)
    curriculum, tracker, arrays, ignore = _followed(curriculum_factory, require_capability, config,
                                                    "the rules are those of the built-in learning progress")
    rng = np.random.default_rng(scenario_seed)
    practice: Counter = Counter()
    decided: Counter = Counter()
    warmup = algorithm.min_samples_for_lp
    try:
        for _ in range(LIMITS.random_states_run):
            task = curriculum.get_task()
            curriculum.update_task_performance(task.task_id, _rules_student(task, practice, rng))
        played = curriculum.get_state()
        for trial in range(LIMITS.random_states):
            state = plain_copy(played)
            calm = bool(rng.random() < 0.5)
            rows = [_random_statistics(rng, algorithm, warmup, calm) for _ in range(tracker.capacity)]
            if calm and rng.random() < 0.25:
                for slot in rng.choice(tracker.capacity, size=int(rng.integers(1, 4)), replace=False).tolist():
                    rows[slot] = _faint(rows[slot], rng)
            short_of_mastery = not calm and rng.random() < 0.25
            if short_of_mastery:
                rows = [_one_score_short_of_mastery(row, algorithm, rng) for row in rows]
            state["arrays"]["lp_state"] = [value for row in rows for value in row]
            keys = state["arrays"]["lp_memory_keys"]
            for key in rng.integers(1, 2 ** 62, len(keys) // 2).tolist():  # (each where a lookup probes first)
                keys[key % len(keys)] = keys[key % len(keys)] or key
            state["arrays"]["lp_memory"] = [value for key in keys for value in (
                _random_statistics(rng, algorithm, warmup, bool(rng.random() < 0.5)) if key
                else [0.0] * len(STATE_FIELDS))]
            state["arrays"]["lp_label_retries"] = rng.integers(0, 3, len(state["arrays"]["lp_label_retries"])).tolist()
            state["evictable"] = [-1] * len(state["evictable"])  # (the shortlist of the run's statistics)
            curriculum.load_state(state)  # (sampling as the checkpoint did until the next refresh)
            task = curriculum.get_task()
            score = 1.0 if short_of_mastery else _rules_student(task, practice, rng)
            slot = tracker.task_ids.tolist().index(task.task_id)
            before = read_state(arrays)
            curriculum.update_task_performance(task.task_id, score)
            drawn = read_state(arrays)  # as the refresh after that completion saw it
            expected = reference_record(before, slot, score, algorithm, (task.env_cfg, task.label, ignore))
            differences = state_differences(expected, drawn)
            assert not differences, (
                f"random state {trial}, seed {scenario_seed}: a completion of task {task.task_id} (slot {slot}) with "
                f"score {score!r} left a state the documented rules do not give:\n" + "\n".join(differences[:10]))
            if drawn.counters["mastery_events"] > before.counters["mastery_events"]:
                dropped = sum(bool(b) and not a for b, a in zip(before.memory_keys, drawn.memory_keys))
                decided["mastery dropping remembered verdicts"] += dropped > 0
                decided["mastery keeping remembered verdicts"] += any(drawn.memory_keys)
            reference = reference_probabilities(drawn, algorithm, decided)
            probabilities = curriculum.sampling_probabilities()
            wrong = [(slot, float(p), r) for slot, (p, r) in enumerate(zip(probabilities, reference))
                     if not math.isclose(p, r, rel_tol=1e-9, abs_tol=1e-12)]
            assert not wrong, (
                f"random state {trial}, seed {scenario_seed}: the curriculum samples slots (slot, probability, by the "
                f"rules) {wrong[:6]}; statistics of the first: {drawn.rows[wrong[0][0]]}")
            counts = reference_pool_counts(drawn, algorithm)
            reported = {name: curriculum.stats().get(name) for name in counts}
            assert reported == counts, (f"random state {trial}, seed {scenario_seed}: stats() reports the pool as "
                                        f"{reported}, by the rules {counts}")
            wrong_readouts = _readouts_wrong(curriculum._algorithm, reference_readouts(drawn, algorithm))
            assert not wrong_readouts, f"random state {trial}, seed {scenario_seed}: {wrong_readouts}"
            wrong_shortlist = _shortlist_wrong(curriculum, tracker, reference_eviction_candidates(
                drawn, algorithm, (tracker.completions >= curriculum.config.min_presentations).tolist()))
            assert not wrong_shortlist, f"random state {trial}, seed {scenario_seed}: the refresh {wrong_shortlist}"
    finally:
        curriculum.close()
    thin = {rule: decided[rule] for rule in ("learning progress", "fallback", "frontier", "revisit learned",
                                             "revisit stalled", "retry", "cold", "mastery dropping remembered verdicts",
                                             "mastery keeping remembered verdicts")
            if decided[rule] < LIMITS.rules_min_steps}  # (the fewest over seeds 0-19: 47, the fallback)
    assert not thin, f"rules that decided too few of the random states to be checked: {thin}, seed {scenario_seed}"


def test_each_refresh_draws_from_the_distribution_it_publishes(curriculum_factory, require_capability,
                                                               scenario_seed) -> None:
    """The task drawn right after a refresh comes from the distribution that refresh publishes
    (`sampling_probabilities()`), not from the one before it: over a run of a churning pool,
    refreshed at every completion, the log-likelihood ratio of the drawn slots under the new
    distribution against the previous one must favour the new one (its expectation is a sum of
    KL divergences, >= 0; a sampler one refresh behind makes it negative)."""
    space = impossible_task_space(num_learnable=5, num_impossible=45, seed=scenario_seed)
    config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=LIMITS.published_pool, seed=scenario_seed, refresh_interval=1)
    curriculum, tracker, _, _ = _followed(curriculum_factory, require_capability, config,
                                          "reads the slot of each task the built-in curriculum hands out")
    student = space.simulator
    ratio = 0.0
    try:
        task = curriculum.get_task()
        for _ in range(LIMITS.published_episodes):
            before = curriculum.sampling_probabilities()
            curriculum.update_task_performance(task.task_id, student.sample_task(task.env_cfg["task_index"]))
            after = curriculum.sampling_probabilities()
            task = curriculum.get_task()
            slot = tracker.task_ids.tolist().index(task.task_id)
            ratio += math.log(after[slot] / before[slot])
    finally:
        curriculum.close()
    assert ratio >= LIMITS.published_min_ratio, (
        f"over {LIMITS.published_episodes} refreshes the drawn slots' log-likelihood ratio, published distribution "
        f"against the one before it, is {ratio:.1f} (limit >= {LIMITS.published_min_ratio}): the draws follow an "
        f"older distribution than sampling_probabilities() reports, seed {scenario_seed}")


_GIVE_UP = 0.95
"""The failed-admission rate over which learning progress evicts nothing (its module docstring)."""


def test_nothing_is_evicted_while_nearly_every_admission_fails(curriculum_factory, require_capability,
                                                               scenario_seed) -> None:
    """A pool of a mostly impossible space whose admissions nearly all fail (the failed-admission
    rate over `_ADMISSION_GIVE_UP`, a state such runs reach) lets no task go, never-learned
    ones included, as the module docstring says: each eviction would only trade a cold task
    for another just as useless. The run checks that the rules without the give-up would have
    evicted (warm stagnant tasks are there), so the check can fail."""
    space = impossible_task_space(num_learnable=1, num_impossible=LIMITS.give_up_impossible, seed=scenario_seed)
    config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=LIMITS.give_up_pool, seed=scenario_seed, refresh_interval=1)
    curriculum, tracker, arrays, _ = _followed(curriculum_factory, require_capability, config,
                                               "the give-up is a rule of the built-in learning progress")
    student = space.simulator

    def would_evict() -> bool:  # by the rules with admissions succeeding
        presented = (tracker.completions >= config.min_presentations).tolist()
        below = dataclasses.replace(read_state(arrays), admission_failure=0.5)
        return any(reference_eviction_candidates(below, config.algorithm, presented))

    try:
        for episode in range(1, 2 * LIMITS.give_up_history + 1):
            task = curriculum.get_task()
            curriculum.update_task_performance(task.task_id, student.sample_task(task.env_cfg["task_index"]))
            # past the learnable task's mastery, if it comes (a mastery makes admissions worth trying again)
            if (episode % 50 == 0 and (episode >= LIMITS.give_up_history or read_state(arrays).counters["mastery_events"])
                    and would_evict()):
                break
        state = curriculum.get_state()
        state["arrays"]["lp_admission_failure"][0] = LIMITS.give_up_failure
        curriculum.load_state(state)
        assert would_evict(), (
            f"after {episode} episodes no warm stagnant task is in the pool: the rules would evict nothing even "
            f"without the give-up, so this run checks nothing, seed {scenario_seed}")
        evicted, checked = [], 0
        for episode in range(LIMITS.give_up_episodes):
            task = curriculum.get_task()
            failure = arrays["lp_admission_failure"].item(0)  # as the refresh that shortlisted saw it
            curriculum.update_task_performance(task.task_id, student.sample_task(task.env_cfg["task_index"]))
            if episode == 0:
                continue  # shortlisted by the checkpoint's own refresh, at its unedited rate
            checked += failure > _GIVE_UP
            if failure > _GIVE_UP and task.task_id not in tracker.task_ids.tolist():
                evicted.append((episode, task.task_id, task.label, round(failure, 4)))
        assert not evicted, (
            f"{len(evicted)} tasks were evicted in {checked} episodes whose failed-admission rate was over "
            f"{_GIVE_UP} (episode, task, label, rate: {evicted[:4]}); the documented rule evicts none while more "
            f"than {_GIVE_UP:.0%} of admissions fail, seed {scenario_seed}")
    finally:
        curriculum.close()


@pytest.mark.parametrize("refresh_interval", LIMITS.counts_refresh_intervals)
def test_the_pool_counts_stats_reports_are_those_of_the_state_it_is_read_in(curriculum_factory, require_capability,
                                                                           scenario_seed, refresh_interval) -> None:
    """`stats()` counts the pool's cold, learned, frontier and revisited tasks as the documented
    rules make them of the state at the moment it is called, also between refreshes and
    whether eviction is off, on for some tasks or for all (a count kept from the last refresh
    lags behind every completion since)."""
    for percentile in LIMITS.counts_eviction_percentiles:
        config = dataclasses.replace(_rules_config(LearningProgressConfig(config_memory=16), scenario_seed,
                                                   refresh_interval=refresh_interval),
                                     eviction_percentile=percentile)
        curriculum, _, arrays, _ = _followed(curriculum_factory, require_capability, config,
                                             "the counts are those of the built-in learning progress")
        rng = np.random.default_rng(scenario_seed)
        practice: Counter = Counter()
        try:
            for episode in range(1, LIMITS.counts_episodes + 1):
                task = curriculum.get_task()
                curriculum.update_task_performance(task.task_id, _rules_student(task, practice, rng))
                counts = reference_pool_counts(read_state(arrays), config.algorithm)
                reported = {name: curriculum.stats().get(name) for name in counts}
                assert reported == counts, (
                    f"episode {episode}, refresh every {refresh_interval} completions, eviction percentile "
                    f"{percentile}: stats() reports the pool as {reported}, by the rules for its state now {counts}, "
                    f"seed {scenario_seed}")
        finally:
            curriculum.close()


def test_a_full_config_memory_keeps_what_the_rules_keep(curriculum_factory, require_capability,
                                                        scenario_seed) -> None:
    """Learning progress's memory of configurations is small and the pool churns through many
    configurations, so evicted tasks keep arriving at a full memory neighbourhood. Every
    completion changes the state as the documented rules say; an eviction into a full memory
    replaces the entry resting on the fewest completions (a mastered configuration's evidence
    outlives a task seen a few times), and the task admitted next starts from what is left."""
    decided = _fill_memory(curriculum_factory, require_capability, scenario_seed, LIMITS.memory_variants,
                           LIMITS.memory_episodes)
    assert decided["memory full"] >= LIMITS.memory_min_replacements, (
        f"only {decided['memory full']} evictions into a full memory in {LIMITS.memory_episodes} episodes, seed "
        f"{scenario_seed}: the check measured too little")


def test_configurations_coming_back_find_what_a_full_memory_holds(curriculum_factory, require_capability,
                                                                 scenario_seed) -> None:
    """The same small memory over few configurations (one of each kind and rate at two
    variants), so evicted configurations come back while the memory holds them, wherever in
    their neighbourhood they were stored: each admitted task inherits what the rules find.
    `LIMITS.memory_few_runs` runs per base seed (an entry stored at its neighbourhood's last
    place and looked up again is a matter of which configurations collide)."""
    hits = 0
    for run in range(LIMITS.memory_few_runs):
        seed = scenario_seed * LIMITS.memory_few_runs + run
        hits += _fill_memory(curriculum_factory, require_capability, seed, LIMITS.memory_few_variants,
                             LIMITS.memory_few_episodes, LIMITS.memory_few_entries)["memory hits"]
    assert hits >= LIMITS.memory_min_hits, (
        f"only {hits} admitted tasks found their configuration in the memory over {LIMITS.memory_few_runs} runs, base "
        f"seed {scenario_seed}: the check measured too little")


def _fill_memory(curriculum_factory, require_capability, seed: int, variants: int, episodes: int,
                 entries: int = LIMITS.memory_entries) -> Counter:
    """One run of the full-memory checks, with a memory of `entries`: every completion and
    eviction held to the documented rules; returns what decided (evictions into a full memory,
    memory hits)."""
    algorithm = LearningProgressConfig(config_memory=entries)
    config = dataclasses.replace(
        _rules_config(algorithm, seed, refresh_interval=16, variants=variants),
        min_presentations=3, eviction_percentile=LIMITS.memory_eviction_percentile)
    generator = config.task_generator
    curriculum, tracker, arrays, ignore = _followed(curriculum_factory, require_capability, config,
                                                    "the memory is that of the built-in learning progress")
    rng = np.random.default_rng(seed)
    practice: Counter = Counter()
    decided: Counter = Counter()
    try:
        for episode in range(1, episodes + 1):
            task = curriculum.get_task()
            score = _rules_student(task, practice, rng)
            slot = tracker.task_ids.tolist().index(task.task_id)
            before = read_state(arrays)
            curriculum.update_task_performance(task.task_id, score)
            expected = reference_record(before, slot, score, algorithm, (task.env_cfg, task.label, ignore))
            admitted, replaced = tracker.task_ids.item(slot), decided["memory full"]
            if admitted != task.task_id:
                expected, expected_id = reference_eviction(expected, slot, task.task_id, generator,
                                                           tracker.capacity, algorithm, ignore, decided)
                assert admitted == expected_id, (
                    f"episode {episode}, seed {seed}: task {task.task_id} evicted, and task {admitted} "
                    f"admitted in its place; by the documented rules task {expected_id}")
            differences = state_differences(expected, read_state(arrays))
            assert not differences, (
                f"episode {episode}, task {task.task_id} ({task.label}, slot {slot}), seed {seed}: a "
                f"completion with score {score!r}"
                + (" that evicted the task into a full memory" if decided["memory full"] > replaced else
                   " that evicted the task" if admitted != task.task_id else "")
                + " left a state the documented rules do not give:\n" + "\n".join(differences[:10]))
        decided["memory hits"] = int(read_state(arrays).counters["memory_hits"])
    finally:
        curriculum.close()
    return decided


def test_handles_sharing_a_pool_evict_only_tasks_they_shortlisted(require_capability, uses_builtin_curriculum,
                                                                   scenario_seed) -> None:
    """Several handles of one shared learning-progress curriculum (as the workers of a vector
    are) each shortlist evictions at their own refreshes. A handle may only evict a task its
    own last refresh saw in that slot and the documented rules let go there: another handle
    may have evicted the shortlisted task and admitted a new one into the slot meanwhile, a
    task no refresh of this handle ever scored (a new task has no learning progress yet after
    its warm-up, so a stale mark would throw it out). Another process may act at any moment,
    also in the middle of a refresh: once a refresh has chosen what learning progress lets go,
    another handle plays a few episodes before the refresh marks its shortlist."""
    require_capability(uses_builtin_curriculum, "the rules are those of the built-in learning progress, whose "
                       "handles share one pool")
    for run in range(LIMITS.handles_runs):  # (a race shows in some runs, not in every one)
        _evict_from_shared_pool(scenario_seed * LIMITS.handles_runs + run)


def _evict_from_shared_pool(seed: int) -> None:
    """One run of `test_handles_sharing_a_pool_evict_only_tasks_they_shortlisted` (`seed`)."""
    config = dataclasses.replace(
        _rules_config(LearningProgressConfig(config_memory=64), seed,
                      refresh_interval=LIMITS.handles_refresh_interval, variants=LIMITS.handles_variants),
        min_presentations=LIMITS.handles_min_presentations)
    creator = Curriculum(config, shared_memory=True)
    handles = [creator] + [Curriculum.attach(creator.shared_memory_name, config, seed=i)
                           for i in range(1, LIMITS.handles)]
    tracker = creator.tracker
    arrays = tracker.backend.arrays
    # handle -> pool ids, state, presented at its last refresh, and whether another handle acted in it
    seen: dict[int, tuple[list[int], Any, list[bool], bool]] = {}
    rng = np.random.default_rng(seed)
    practice: Counter = Counter()
    played = Counter()
    refreshing = [False]

    def play(index: int) -> None:
        """One episode of handle `index`; an eviction it makes is checked against its last refresh."""
        handle = handles[index]
        task = handle.get_task()
        score = _rules_student(task, practice, rng)
        slot = tracker.task_ids.tolist().index(task.task_id)
        before, counted = tracker.evictions, played["evictions"]
        ids, state, presented, meanwhile = seen[index]  # (the update may end with a refresh of its own)
        handle.update_task_performance(task.task_id, score)
        played["episodes"] += 1
        # (another handle playing in the refresh that may end this update counts its own evictions)
        if tracker.evictions - before == played["evictions"] - counted:
            return
        played["evictions"] += 1
        where = (f"handle {index} of {len(handles)}, episode {played['episodes']}, task {task.task_id} ({task.label}, "
                 f"slot {slot}), seed {seed}")
        assert ids[slot] == task.task_id, (
            f"{where}: evicted, but the handle's last refresh saw task {ids[slot]} in that slot: the task was "
            f"admitted since, and no refresh of this handle ever scored it")
        # (a refresh another handle acted in read some numbers before and some after: no one state to replay)
        assert meanwhile or reference_eviction_candidates(state, config.algorithm, presented)[slot], (
            f"{where}: evicted, but the documented rules did not let it go at the handle's last refresh "
            f"(statistics {state.rows[slot]})")

    def watch(index: int, handle: Curriculum) -> None:
        refresh, candidates = handle._refresh, handle._algorithm.eviction_candidates  # (watched from outside)

        def watched_refresh() -> None:
            seen[index] = (tracker.task_ids.tolist(), read_state(arrays),
                           (tracker.completions >= config.min_presentations).tolist(), False)
            refreshing[0] = True
            try:
                refresh()
            finally:
                refreshing[0] = False

        def shortlisted_meanwhile(eligible: np.ndarray, scores: np.ndarray) -> np.ndarray:
            out = candidates(eligible, scores)
            if refreshing[0] and not played["meanwhile"] and len(seen) == len(handles):
                played["meanwhile"] = 1  # another handle acts between this refresh's reads
                seen[index] = (*seen[index][:3], True)
                try:
                    for _ in range(LIMITS.handles_meanwhile):
                        play((index + 1) % len(handles))
                finally:
                    played["meanwhile"] = 0
            return out

        handle._refresh = watched_refresh
        handle._algorithm.eviction_candidates = shortlisted_meanwhile
        watched_refresh()

    try:
        for index, handle in enumerate(handles):
            watch(index, handle)
        while played["episodes"] < LIMITS.handles_episodes:
            if played["episodes"] % 1000 == 999:
                practice.clear()  # forgetting: learned tasks lose ground, churn goes on
            play(int(rng.integers(len(handles))))
    finally:
        for handle in reversed(handles):
            handle.close()
    assert played["evictions"] >= LIMITS.handles_min_evictions, (
        f"only {played['evictions']} evictions in {played['episodes']} episodes, seed {seed}: the check "
        "measured too little")



class _PoolMovedBetweenReads(ProtocolView):
    """A pool read twice for one report, a task admitted between the reads: `task_scores()`
    holds the three tasks before it, `active_tasks()` the four after (the new one first)."""

    def active_tasks(self) -> list[Any]:
        return self._inner.active_tasks()

    def task_scores(self) -> np.ndarray:
        return np.array([0.1, 0.2, 0.3])

    def stats(self) -> dict[str, Any]:
        return {**self._inner.stats(), "per_label_lp_scores": {"maze": 0.7}}


def test_a_pool_report_read_across_a_change_pairs_no_task_with_another_tasks_score() -> None:
    """A recorder matches `task_scores()` to `active_tasks()` position by position only when
    both were read of one pool: when their lengths differ (the pool changed between the two
    reads) no task gets the score at its position, which may be another task's; each gets
    its label's score from the report's `per_label_lp_scores` (0.7 here; the per-label LP an
    episode reports is an EMA of its tasks' scores, so 0.7 all along)."""
    curriculum = Curriculum(CurriculumConfig(task_generator=SingleTaskGenerator({"size": 1}, label="maze"),
                                             algorithm=UniformConfig(), num_active_tasks=4, seed=0))
    try:
        recorder = CompletionRecorder(_PoolMovedBetweenReads(curriculum), stats_interval=1)
        pool = [task.task_id for task in curriculum.active_tasks()]
        reported = {}
        for task_id in pool[1:3]:
            entries = recorder.record(task_id, "maze", 0.5)
            reported[task_id] = entries.get("curriculum_stats/per_label_lp_scores/maze")
    finally:
        curriculum.close()
    assert reported == {task_id: 0.7 for task_id in pool[1:3]}, (
        f"task scores of 3 tasks read with 4 task ids: the per-label LP each episode reported is {reported}, "
        f"expected the label's 0.7 from the report (0.1-0.3 are scores of tasks at other positions)")
