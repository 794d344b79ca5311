"""Metamorphic relations: a run transformed in a way the curriculum must not care about makes
the same choices, episode for episode.

Bug class: code that depends on something it should not, invisible in the gate's usual runs
because those never vary it:

- the score range: a threshold, baseline or clip applied to raw scores where normalised ones
  are meant, or a span taken as `high` instead of `high - low`. Every other suite scores in
  the default [0, 1], where raw and normalised scores coincide; a run whose rewards live in
  [-1, 1] or [0, 100] is then silently wrong.
- label names: per-label tables filled in one order and read in another (sorted names vs
  first-seen order), special cases keyed on a name.
- late completions: a completion of a task that already left the pool (a stale worker) must
  count as late and change nothing else; crediting it to the slot's new task, advancing a
  counter the sampler reads or drawing from the random stream all change what comes next.
- shared memory: the same run with its statistics in shared memory (one process) must make
  the same choices as with local ones; a shared-tracker path that reads, rounds or restores
  anything differently shows.
- task-id tags: a generator that also writes the task id into its configs (a level seed
  taken from the id, a tag) describes the same tasks; a curriculum that tells configurations
  apart by their whole config sees every admission as new, and one that drops the wrong
  fields merges different tasks.
- the core protocol: the library's wrappers driving a curriculum seen through `get_task`,
  `update_task_performance` and `stats` alone (a plug-in curriculum with no `config` and no
  `is_shared`) must hand out the same tasks and record the same scores, returns outside [0, 1]
  included, as with the curriculum itself; and what they cannot check without those (that a
  curriculum is shared across worker processes, that it suits centralized tracking) must be
  refused by name before any process starts, never assumed.
- key order: a task config whose keys are listed in another order (a YAML load against code,
  another process) is the same config; a description, a checkpoint or a weighted pick that
  depends on the order splits one task space into two.
- numbers: task ids and scores passed as numpy scalars of any width are the ids and scores
  themselves; a check for `int` or `float` where the protocol says integral and real refuses
  the ids a trainer's int64 arrays hold.
- reading: a caller that overwrites what it read (probabilities normalised in place, a stats
  dict extended, a checkpoint's lists edited) must change nothing; a read that hands out a
  live view of the curriculum's state lets it.

Each relation needs no oracle: the reference run is the same curriculum on the same student
and seed. Scores are rounded to multiples of 1/1024 in both runs, so mapping them into
`INVARIANCES.score_range` and back is exact in floating point: a curriculum that normalises
(s - low) / (high - low) sees bit-identical numbers. The first divergence is named (episode,
task ids, seed), and every `stats()` number must match the reference (or, for a score
statistic, its image in the other range), every `stats_every` episodes and at the end: early
and right after a stage change the pool holds tasks nothing was recorded for yet.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from curriculum import (
    BucketedTaskGenerator,
    CurriculumConfig,
    CurriculumConfigError,
    LearningProgressConfig,
    SingleTaskGenerator,
    TaskGenerator,
    WeightedTaskSetGenerator,
)
from curriculum.vector import make_curriculum_vecenv
from harness.envs import ExactAccountingEnv
from harness.episodes import EPISODE_RECORD_KEY
from harness.protocol import ProtocolView, missing_capabilities
from harness.task_spaces import TaggedTasks, TaskSpace, chain_task_space, impossible_task_space
from harness.thresholds import INVARIANCES as LIMITS

from .test_staged_progression import staged_config, staged_space

Score = Callable[[float], float]


def _quantised(reward: float) -> float:
    return round(reward * LIMITS.score_quantum) / LIMITS.score_quantum


def _mapped(score_range: tuple[float, float]) -> Score:
    low, high = score_range
    return lambda score: low + score * (high - low)


class _Run:
    """A run's task ids, the late completions a stale worker reported, its `stats()` every
    `LIMITS.stats_every` episodes (`trace`: early ones see fresh tasks, as do those after a
    stage change) and at the end (`stats`)."""

    def __init__(self, curriculum: Any, space: TaskSpace, *, score: Score = float,
                 stale: Callable[[Any, list[int]], int] | None = None,
                 reader: Callable[[Any], None] | None = None,
                 resume: Callable[[Any], Any] | None = None) -> None:
        self.ids: list[int] = []
        self.late = 0
        self.trace: list[tuple[int, Any]] = []
        for episode in range(1, LIMITS.episodes + 1):
            if resume is not None and episode % LIMITS.resume_every == 0:
                curriculum = resume(curriculum)
            task = curriculum.get_task()
            if reader is not None:
                reader(curriculum, in_flight=True)
            reward = _quantised(space.simulator.sample_task(space.task_index(task.env_cfg)))
            curriculum.update_task_performance(task.task_id, score(reward))
            self.ids.append(task.task_id)
            if stale is not None:
                self.late += stale(curriculum, self.ids)
            if reader is not None:
                reader(curriculum, in_flight=False)
            if episode % LIMITS.stats_every == 0:
                self.trace.append((episode, curriculum.stats()))
        self.stats = curriculum.stats()


def _trace_mismatches(reference: _Run, other: _Run, image: Callable[[Any], Any] | None = None,
                      expected: Callable[[Any], Any] = lambda stats: stats) -> list[str]:
    """Where `other`'s stats() differ from `reference`'s (`expected` of them), at the first
    episode of the trace where any do, else at the end."""
    for (episode, a), (_, b) in zip(reference.trace, other.trace):
        differ = _mismatches(expected(a), b, image, f"stats() after episode {episode}")
        if differ:
            return differ
    return _mismatches(expected(reference.stats), other.stats, image, "stats()")


def _first_divergence(reference: list[int], other: list[int]) -> int | None:
    return next((i for i, (a, b) in enumerate(zip(reference, other)) if a != b), None)


def _assert_same_stream(reference: list[int], other: list[int], what: str, seed: int) -> None:
    episode = _first_divergence(reference, other)
    assert episode is None, (
        f"{what}: the run diverged from the reference at episode {episode}: task {other[episode]} handed out "
        f"where the reference handed out task {reference[episode]} (the same student, config and seed), seed {seed}")


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) \
            or not isinstance(b, (int, float)):
        return a == b
    return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _mismatches(reference: Any, other: Any, image: Callable[[Any], Any] | None, path: str) -> list[str]:
    """Where `other` differs from `reference` (or, with `image`, from its image too)."""
    if isinstance(reference, Mapping) and isinstance(other, Mapping):
        if set(reference) != set(other):
            return [f"{path}: keys {sorted(map(str, reference))} in the reference, {sorted(map(str, other))} here"]
        return [m for key in reference for m in _mismatches(reference[key], other[key], image, f"{path}[{key!r}]")]
    if isinstance(reference, (list, tuple)) and isinstance(other, (list, tuple)) and len(reference) == len(other):
        return [m for i, (a, b) in enumerate(zip(reference, other)) for m in _mismatches(a, b, image, f"{path}[{i}]")]
    if _close(reference, other) or (image is not None and _close(image(reference), other)):
        return []
    return [f"{path}: {other!r} here, {reference!r} in the reference"]


def _lp_config(generator: TaskGenerator, seed: int, **options: Any) -> CurriculumConfig:
    options.setdefault("num_active_tasks", LIMITS.pool)
    return CurriculumConfig(task_generator=generator, algorithm=LearningProgressConfig(), seed=seed, **options)


def _churn_config(generator: TaskGenerator, seed: int) -> CurriculumConfig:
    return _lp_config(generator, seed, num_active_tasks=LIMITS.churn_pool,
                      min_presentations=LIMITS.churn_min_presentations,
                      eviction_percentile=LIMITS.churn_eviction_percentile)


_SETUPS: dict[str, tuple[Callable[[int], TaskSpace], Callable[..., CurriculumConfig]]] = {
    "learning_progress": (
        lambda seed: impossible_task_space(num_learnable=5, num_impossible=5, mode="noise", seed=seed),
        lambda space, seed, **options: _lp_config(space.generator, seed, **options)),
    "staged": (
        staged_space,
        lambda space, seed, **options: dataclasses.replace(staged_config(seed), **options)),
}


def _build(curriculum_factory: Callable[..., Any], config: CurriculumConfig, setup: str,
           require_capability: Callable[[bool, str], None]) -> Any:
    """The factory's curriculum; a factory refusing the config kind skips with its reason."""
    try:
        return curriculum_factory(config)
    except (CurriculumConfigError, NotImplementedError) as error:
        require_capability(False, f"the {setup} run needs a {setup} curriculum; the factory refused the config: "
                                  f"{type(error).__name__}: {error}")


@pytest.mark.parametrize("setup", list(_SETUPS))
@pytest.mark.parametrize("score_range", LIMITS.score_ranges, ids=lambda r: f"{r[0]:g}..{r[1]:g}")
def test_score_range_changes_nothing(curriculum_factory, require_capability, scenario_seed, setup,
                                     score_range: tuple[float, float]) -> None:
    """The same run with every score mapped into `score_range` (and the config saying
    so) hands out the same tasks and reports the same numbers (a score statistic: mapped),
    also across checkpoints taken along the run, each resumed in a new curriculum: tasks that
    always scored 0 or 1 have their mean on a bound of the range."""
    make_space, make_config = _SETUPS[setup]
    space = make_space(scenario_seed)
    reference = _Run(_build(curriculum_factory, make_config(space, scenario_seed), setup, require_capability), space)
    space = make_space(scenario_seed)
    mapped = _mapped(score_range)
    config = make_config(space, scenario_seed, score_range=score_range)
    curriculum = curriculum_factory(config)
    checkpoints = not missing_capabilities(curriculum, ("get_state", "load_state"))

    def resume(saving: Any) -> Any:
        """The run goes on in a new curriculum restored from a checkpoint of this one."""
        state = json.loads(json.dumps(saving.get_state()))
        resumed = curriculum_factory(config)
        try:
            resumed.load_state(state)
        except Exception as error:  # named, with the run's numbers, below
            raise AssertionError(
                f"{setup}, score_range={score_range}: a checkpoint of the run could not be resumed in a new "
                f"curriculum: {type(error).__name__}: {error}, seed {scenario_seed}") from error
        return resumed

    run = _Run(curriculum, space, score=mapped, resume=resume if checkpoints else None)
    what = f"{setup}, every score s mapped to {score_range[0]} + s * {score_range[1] - score_range[0]} " \
           f"(score_range={score_range})" + (f", checkpointed and resumed every {LIMITS.resume_every} episodes"
                                             if checkpoints else "")
    _assert_same_stream(reference.ids, run.ids, what, scenario_seed)
    differ = _trace_mismatches(reference, run, lambda v: mapped(v) if isinstance(v, float) else v)
    assert not differ, f"{what}: stats() differ from the [0, 1] run's (and from their image), seed " \
                       f"{scenario_seed}: " + "; ".join(differ[:5])


# the same characters in reverse order: names keep their length and shape, and sorted order flips
_REVERSED = str.maketrans("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                          "9876543210zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA")


def renamed(label: str) -> str:
    """The name a label gets in the renamed run (sorted order of labels reversed)."""
    return "r_" + label.translate(_REVERSED)


class RenamedLabels(TaskGenerator):
    """`generator` with every label renamed (`renamed`), the tasks unchanged."""

    def __init__(self, generator: TaskGenerator) -> None:
        self.generator = generator

    def generate(self, task_id: int) -> tuple[dict[str, Any], str]:
        env_cfg, label = self.generator.generate(task_id)
        return env_cfg, renamed(label)

    def describe(self) -> dict[str, Any]:
        return {"type": "renamed_labels", "generator": self.generator.describe()}

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(renamed(label) for label in self.generator.labels)


def _renamed_keys(stats: Any, labels: set[str]) -> Any:
    """`stats` with every label (a key, or the last part of a `prefix/label` key) renamed."""
    if not isinstance(stats, Mapping):
        return stats
    out = {}
    for key, value in stats.items():
        if isinstance(key, str):
            head, _, tail = key.rpartition("/")
            if key in labels:
                key = renamed(key)
            elif head and tail in labels:
                key = f"{head}/{renamed(tail)}"
        out[key] = _renamed_keys(value, labels)
    return out


def test_label_names_change_nothing(curriculum_factory, scenario_seed) -> None:
    """The chain with every label renamed (and their sorted order reversed) hands out the same
    tasks, and reports the same numbers under the new names."""
    space = chain_task_space(num_tasks=6, seed=scenario_seed)
    reference = _Run(curriculum_factory(_lp_config(space.generator, scenario_seed)), space)
    space = chain_task_space(num_tasks=6, seed=scenario_seed)
    run = _Run(curriculum_factory(_lp_config(RenamedLabels(space.generator), scenario_seed)), space)
    what = "6-task chain, every label renamed (task_0 -> r_gzhp_9, ...)"
    _assert_same_stream(reference.ids, run.ids, what, scenario_seed)
    differ = _trace_mismatches(reference, run, expected=lambda stats: _renamed_keys(stats, set(space.learnable_labels)))
    assert not differ, f"{what}: stats() differ from the reference's under the new names, seed {scenario_seed}: " \
                       + "; ".join(differ[:5])


def test_late_completions_change_nothing_but_the_late_count(curriculum_factory, require_capability,
                                                            scenario_seed) -> None:
    """A stale worker reports every task that left the pool `LIMITS.stale_reports` more times,
    right after it left: each report is refused as late (False), and the run hands out the same
    tasks and reports the same numbers as without them, but its late completions."""
    make_space = lambda: impossible_task_space(num_learnable=5, num_impossible=45, seed=scenario_seed)  # noqa: E731
    space = make_space()
    curriculum = curriculum_factory(_churn_config(space.generator, scenario_seed))
    require_capability(callable(getattr(curriculum, "active_tasks", None)),
                       "this curriculum has no `active_tasks()`, so a stale worker cannot tell which tasks left")
    reference = _Run(curriculum, space)
    verdicts: list[tuple[int, Any]] = []
    held: set[int] = set()

    def stale_worker(curriculum: Any, ids: list[int]) -> int:
        held.add(ids[-1])
        active = {task.task_id for task in curriculum.active_tasks()}
        departed = sorted(held - active)
        for task_id in departed:
            held.discard(task_id)
            for _ in range(LIMITS.stale_reports):
                verdicts.append((task_id, curriculum.update_task_performance(task_id, 1.0)))
        return len(departed) * LIMITS.stale_reports

    space = make_space()
    run = _Run(curriculum_factory(_churn_config(space.generator, scenario_seed)), space, stale=stale_worker)
    departed = len(verdicts) // LIMITS.stale_reports
    assert departed >= LIMITS.min_departed, (
        f"only {departed} tasks left the pool in {LIMITS.episodes} episodes (at least {LIMITS.min_departed} "
        f"needed for the late-completion relation to test anything), seed {scenario_seed}")
    credited = [(task_id, verdict) for task_id, verdict in verdicts if verdict is not False]
    assert not credited, (
        f"completions of tasks that had left the pool were not refused as late: {credited[:5]} "
        f"({len(credited)} of {len(verdicts)}), seed {scenario_seed}")
    what = f"5 learnable + 45 impossible tasks, pool {LIMITS.churn_pool}, {len(verdicts)} late completions of {departed} departed tasks"
    _assert_same_stream(reference.ids, run.ids, what, scenario_seed)
    expected = dict(reference.stats)
    if "late_completions" in expected:
        expected["late_completions"] += len(verdicts)
    differ = _mismatches(expected, run.stats, None, "stats()")
    assert not differ, f"{what}: stats() differ from the run without them (late_completions aside), seed " \
                       f"{scenario_seed}: " + "; ".join(differ[:5])


#: The numpy types a trainer's arrays hand ids and scores over as (an int64 array of running task
#: ids, float32 returns): each width a completion's task id and score may come as.
_NUMPY_IDS = (np.int64, np.int32, np.uint64, np.uint32)
_NUMPY_SCORES = (np.float64, np.float32, np.float16)


class _NumpyCaller:
    """A curriculum whose completions are reported with numpy scalars: the task id and the
    score each of the next type in `_NUMPY_IDS` (of those that hold the id) / `_NUMPY_SCORES`
    in turn."""

    def __init__(self, curriculum: Any) -> None:
        self.curriculum = curriculum
        self.calls = 0

    def get_task(self) -> Any:
        return self.curriculum.get_task()

    def update_task_performance(self, task_id: int, score: float) -> Any:
        self.calls += 1
        widths = [kind for kind in _NUMPY_IDS if np.iinfo(kind).min <= task_id <= np.iinfo(kind).max]
        return self.curriculum.update_task_performance(widths[self.calls % len(widths)](task_id),
                                                       _NUMPY_SCORES[self.calls % len(_NUMPY_SCORES)](score))

    def stats(self) -> dict[str, Any]:
        return self.curriculum.stats()


@pytest.mark.parametrize("setup", list(_SETUPS))
def test_numpy_numbers_change_nothing(curriculum_factory, require_capability, scenario_seed, setup) -> None:
    """Task ids and scores reported as numpy scalars (of every integer and float width a
    trainer's arrays hold; the scores, multiples of 1/1024, are exact in each) make the same
    run as plain ints and floats: the protocol takes any integral id and any real score."""
    make_space, make_config = _SETUPS[setup]
    space = make_space(scenario_seed)
    reference = _Run(_build(curriculum_factory, make_config(space, scenario_seed), setup, require_capability), space)
    space = make_space(scenario_seed)
    run = _Run(_NumpyCaller(curriculum_factory(make_config(space, scenario_seed))), space)
    what = f"{setup}, ids as {[t.__name__ for t in _NUMPY_IDS]} and scores as {[t.__name__ for t in _NUMPY_SCORES]}"
    _assert_same_stream(reference.ids, run.ids, what, scenario_seed)
    differ = _trace_mismatches(reference, run)
    assert not differ, f"{what}: stats() differ from the plain run's, seed {scenario_seed}: " + "; ".join(differ[:5])


@pytest.mark.parametrize("setup", ["churn", "staged"])
def test_shared_memory_changes_nothing(curriculum_factory, require_capability, scenario_seed, setup) -> None:
    """The same run with its statistics in shared memory (one process) hands out the same tasks
    and reports the same numbers as with local ones: the shared tracker's transactions, journal
    and versions are bookkeeping, never part of the curriculum's choices. Nor is the handle
    that records: in the evicting learning-progress run, completions recorded through a
    second handle (`attach`) of the shared curriculum, whose first handle draws the tasks,
    change nothing either."""
    require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                       "this curriculum factory takes no `shared_memory` option")
    if setup == "staged":
        make_space, make_config = _SETUPS["staged"]
    else:  # learning progress evicting every few episodes: the memory of configurations is written often
        make_space = lambda seed: impossible_task_space(num_learnable=5, num_impossible=45, seed=seed)  # noqa: E731
        make_config = lambda space, seed: _churn_config(space.generator, seed)  # noqa: E731
    space = make_space(scenario_seed)
    reference = _Run(_build(curriculum_factory, make_config(space, scenario_seed), setup, require_capability), space)
    space = make_space(scenario_seed)
    shared = curriculum_factory(make_config(space, scenario_seed), shared_memory=True)
    try:
        run = _Run(shared, space)
    finally:
        getattr(shared, "close", lambda: None)()
    what = f"{setup}, statistics in shared memory"
    _assert_same_stream(reference.ids, run.ids, what, scenario_seed)
    differ = _trace_mismatches(reference, run)
    assert not differ, f"{what}: stats() differ from the local run's, seed {scenario_seed}: " + "; ".join(differ[:5])
    attach = getattr(type(shared), "attach", None)
    if setup == "staged" or attach is None or getattr(shared, "shared_memory_name", None) is None:
        return  # (a drawing handle learns of a stage change at its next batch of draws)
    space = make_space(scenario_seed)
    drawer = curriculum_factory(make_config(space, scenario_seed), shared_memory=True)
    recorder = attach(drawer.shared_memory_name, make_config(space, scenario_seed))
    try:
        elsewhere = _Run(_RecordedElsewhere(drawer, recorder), space)
    finally:
        recorder.close()
        drawer.close()
    what = f"{setup}, completions recorded through a second handle of the shared curriculum"
    _assert_same_stream(run.ids, elsewhere.ids, what, scenario_seed)
    differ = _trace_mismatches(run, elsewhere, expected=_RecordedElsewhere.drawn)
    assert not differ, (f"{what}: stats() differ from those of the handle that drew and recorded, seed "
                        f"{scenario_seed}: " + "; ".join(differ[:5]))


class _RecordedElsewhere:
    """A shared curriculum whose tasks one handle draws and another (a recorder in the main
    process, a second process) records: what a completion does may not depend on which
    handle handed the task out."""

    def __init__(self, drawer: Any, recorder: Any) -> None:
        self.drawer, self.recorder = drawer, recorder

    def get_task(self) -> Any:
        return self.drawer.get_task()

    def update_task_performance(self, task_id: int, score: float) -> Any:
        return self.recorder.update_task_performance(task_id, score)

    def stats(self) -> dict[str, Any]:
        return self.drawn(self.drawer.stats())

    @staticmethod
    def drawn(stats: dict[str, Any]) -> dict[str, Any]:
        """`stats` but the entropy of the distribution drawn from: a handle that draws and does
        not record refreshes it at its next draw, not at the completion that made it due."""
        return {name: value for name, value in stats.items() if name != "sampling_entropy"}


def _scribble(value: Any) -> None:
    """Overwrite every array, list and dict reachable from `value`, as a caller that reuses what
    it read does (a logging hook normalising probabilities in place, a dict of stats extended)."""
    if isinstance(value, np.ndarray):
        if value.flags.writeable and value.dtype.kind in "biuf":
            value[...] = 1
    elif isinstance(value, dict):
        for item in list(value.values()):
            _scribble(item)
        value["scribbled"] = 1
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, (int, float)):
                value[i] = 1
            else:
                _scribble(item)
        value.reverse()  # sorted or consumed, as a caller does with a list it owns
        if value:
            value.pop()
        value.append(1)


class _Reader:
    """After every episode (and while every `LIMITS.read_in_flight_every`-th runs), reads
    `LIMITS.read_api` and overwrites what it got back; a checkpoint (`get_state()`, the whole
    configuration memory) every `LIMITS.read_state_every` episodes after the episode, and as
    often halfway between, while one runs (a trainer checkpoints with episodes in flight)."""

    def __init__(self) -> None:
        self.episodes = 0
        self.kept: list[tuple[str, int, Any, str]] = []  # (read, episode, what it returned, as it was then)
        self.moved: list[str] = []  # reads whose result changed afterwards, with the curriculum

    def __call__(self, curriculum: Any, *, in_flight: bool) -> None:
        self.episodes += not in_flight
        every = LIMITS.read_state_every
        if in_flight and (self.episodes + 1) % LIMITS.read_in_flight_every:
            return
        for name, episode, result, then in self.kept:  # a read is a copy of one moment: it stays as it was
            if _frozen(result) != then:
                self.moved.append(f"{name}() read after episode {episode} changed by episode {self.episodes}")
        self.kept = []
        checkpoint = (self.episodes + 1) % every == every // 2 if in_flight else self.episodes % every == 0
        names = LIMITS.read_api + (("get_state",) if checkpoint else ())
        for name in names:
            read = getattr(curriculum, name, None)
            if callable(read):
                _scribble(read())
                result = read()
                self.kept.append((name, self.episodes, result, _frozen(result)))


def _frozen(value: Any) -> str:
    """`value`'s numbers, arrays, lists and dicts as text, to tell later whether they changed (any
    other object, a plug-in's task with its own counters, by its identity: it is not the read's)."""
    def other(item: Any) -> Any:
        return item.tolist() if isinstance(item, (np.ndarray, np.generic)) else f"<{type(item).__name__} {id(item)}>"

    return json.dumps(value, sort_keys=True, default=other)


@pytest.mark.parametrize("setup", ["churn", "staged"])
def test_reading_changes_nothing(curriculum_factory, require_capability, scenario_seed, setup) -> None:
    """The same run with a caller that, after every episode and while some run, reads the curriculum
    (`LIMITS.read_api`, and a checkpoint now and then) and overwrites every array, list and dict
    it got back hands out the same
    tasks and reports the same numbers: what a read returns is the caller's, never a live view
    of the curriculum's state (a second read, kept, is left as it was while the run goes on)."""
    if setup == "staged":
        make_space, make_config = _SETUPS["staged"]
    else:
        make_space = lambda seed: impossible_task_space(num_learnable=5, num_impossible=45, seed=seed)  # noqa: E731
        make_config = lambda space, seed: _churn_config(space.generator, seed)  # noqa: E731
    space = make_space(scenario_seed)
    reference = _Run(_build(curriculum_factory, make_config(space, scenario_seed), setup, require_capability), space)
    space = make_space(scenario_seed)
    reader = _Reader()
    run = _Run(curriculum_factory(make_config(space, scenario_seed)), space, reader=reader)
    what = (f"{setup}, every read's result overwritten by the caller after every episode and while every "
            f"{LIMITS.read_in_flight_every}th runs "
            f"({', '.join(LIMITS.read_api)}; get_state every {LIMITS.read_state_every} episodes, after one and while "
            f"one runs)")
    _assert_same_stream(reference.ids, run.ids, what, scenario_seed)
    differ = _trace_mismatches(reference, run)
    assert not differ, f"{what}: stats() differ from the run without the reads, seed {scenario_seed}: " + \
                       "; ".join(differ[:5])
    assert not reader.moved, (f"{setup}: what a read returned changed with the curriculum afterwards (a live view, "
                              f"not the caller's copy): {reader.moved[:4]}, seed {scenario_seed}")


def test_task_id_tags_change_nothing(curriculum_factory, scenario_seed) -> None:
    """Learning progress evicting every few episodes (its memory of configurations in use) with
    every config also carrying its task id hands out the same tasks and reports the same
    numbers as without the tag."""
    make_space = lambda: impossible_task_space(num_learnable=5, num_impossible=45, seed=scenario_seed)  # noqa: E731
    space = make_space()
    reference = _Run(curriculum_factory(_churn_config(space.generator, scenario_seed)), space)
    space = make_space()
    run = _Run(curriculum_factory(_churn_config(TaggedTasks(space.generator), scenario_seed)), space)
    what = "5 learnable + 45 impossible tasks, pool 16, every config tagged with its task id (level_seed)"
    _assert_same_stream(reference.ids, run.ids, what, scenario_seed)
    differ = _trace_mismatches(reference, run)
    assert not differ, f"{what}: stats() differ from the untagged run's, seed {scenario_seed}: " + "; ".join(differ[:5])


class _CoreProtocolOnly(ProtocolView):
    """A curriculum seen through the core protocol alone (`harness.protocol.CurriculumProtocol`),
    as a plug-in curriculum that offers nothing else is: no `config`, no `is_shared`; its
    `stats()` numbers come as numpy scalars and its nested dicts as read-only mappings, as a
    plug-in's computed numbers do."""

    def stats(self) -> Mapping[str, Any]:
        return _computed(self._inner.stats())


def _computed(value: Any) -> Any:
    """`value` with its numbers as numpy scalars and its dicts as read-only mappings."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: _computed(item) for key, item in value.items()})
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int64(value)
    return np.float64(value) if isinstance(value, float) else value


#: Returns of 2-step episodes: 0.5 to 3.0, in a score range of [0, 4] (most outside [0, 1]).
_WIDE_RETURNS = (0.25, 0.5, 1.0, 1.5)


def _wide_returns_config(seed: int) -> CurriculumConfig:
    children = [SingleTaskGenerator({"reward_per_step": reward, "episode_length": 2}, label=f"r{reward}")
                for reward in _WIDE_RETURNS]
    return _lp_config(WeightedTaskSetGenerator(children, seed=seed), seed, num_active_tasks=8,
                      score_range=(0.0, 4.0))


def _exact_env(buf=None, seed=0):
    return ExactAccountingEnv(buf=buf, seed=seed)


def _wrapped_run(curriculum: Any, seed: int) -> tuple[list[list[float]], list[Any]]:
    """The configs (reward per step) each env ran, vec step by vec step, through a Serial
    vector, and the infos of each vec step (the curriculum's stats and per-label LP among them)."""
    vecenv = make_curriculum_vecenv(_exact_env, curriculum, backend="Serial", num_envs=LIMITS.wrapper_envs, seed=seed)
    ran, infos = [], []
    try:
        obs, _ = vecenv.reset(seed=seed)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        for _ in range(LIMITS.wrapper_vec_steps):
            step = vecenv.step(actions)
            ran.append(step[0].reshape(LIMITS.wrapper_envs, -1)[:, 1].tolist())
            # (an episode's record names the env by a process-wide counter: the rest must match)
            infos.append([{key: value for key, value in info.items() if key != EPISODE_RECORD_KEY} for info in step[4]])
    finally:
        vecenv.close()
    return ran, infos


def test_the_core_protocol_alone_changes_nothing(curriculum_factory, require_capability, scenario_seed) -> None:
    """The library's vector and env wrappers run a curriculum seen through the core protocol
    alone exactly as they run the curriculum itself (the same tasks, every return recorded,
    in a score range of [0, 4]); on Multiprocessing with shared tracking, and with centralized
    tracking, such a curriculum is refused by name, before any worker starts: nothing says it
    is shared, or which algorithm it runs."""
    config = _wide_returns_config(scenario_seed)
    reference = _build(curriculum_factory, config, "learning_progress", require_capability)
    seen = curriculum_factory(_wide_returns_config(scenario_seed))
    try:
        expected, expected_infos = _wrapped_run(reference, scenario_seed)
        try:
            ran, infos = _wrapped_run(_CoreProtocolOnly(seen), scenario_seed)
        except Exception as error:  # noqa: BLE001 - reported with the relation
            pytest.fail(f"a Serial vector over the curriculum seen through the core protocol alone raised "
                        f"{type(error).__name__}: {error} (returns {[2 * r for r in _WIDE_RETURNS]}, score range "
                        f"{config.score_range}), seed {scenario_seed}")
        step = next((i for i, (a, b) in enumerate(zip(expected, ran)) if a != b), None)
        assert step is None, (
            f"through the core protocol alone the envs ran rewards per step {ran[step]} at vec step {step + 1}, "
            f"{expected[step]} through the curriculum itself, seed {scenario_seed}")
        differ = _mismatches(expected_infos, infos, None, "infos")
        assert not differ, (f"through the core protocol alone the vector reported other infos than through the "
                            f"curriculum itself, seed {scenario_seed}: " + "; ".join(differ[:5]))
        differ = _mismatches(reference.stats(), seen.stats(), None, "stats()")
        assert not differ, (f"through the core protocol alone, stats() differ from the run through the curriculum "
                            f"itself, seed {scenario_seed}: " + "; ".join(differ[:5]))
        before = seen.stats()
        for options in ({"backend": "Multiprocessing", "tracking": "shared", "num_workers": 2},
                        {"backend": "Serial", "tracking": "centralized"}):
            try:
                vecenv = make_curriculum_vecenv(_exact_env, _CoreProtocolOnly(seen), num_envs=2, seed=scenario_seed,
                                                overwork=True, **options)
            except CurriculumConfigError:
                continue
            vecenv.close()
            pytest.fail(f"make_curriculum_vecenv({options}) accepted a curriculum seen through the core protocol "
                        f"alone (nothing says it is shared, or which algorithm it runs), seed {scenario_seed}")
        assert seen.stats() == before, f"a refused vector changed the curriculum's stats(), seed {scenario_seed}"
    finally:
        for curriculum in (reference, seen):
            getattr(curriculum, "close", lambda: None)()


def _keyed_generator(reverse: bool, seed: int) -> TaskGenerator:
    """Rooms and a bucketed maze whose configs list their keys as written, or reversed (the
    buckets keep their order: a bucketed generator draws them in it)."""
    def config(*pairs: tuple[str, Any]) -> dict[str, Any]:
        return dict(reversed(pairs) if reverse else pairs)

    rooms = [SingleTaskGenerator(config(("width", w), ("height", h), ("walls", walls)), label=f"room{w}")
             for w, h, walls in ((4, 4, 0), (6, 4, 1), (8, 6, 2))]
    maze = BucketedTaskGenerator(config(("width", 8), ("height", 8), ("walls", 1), ("keys", 0)),
                                 {"walls": [0, 1, 2], "height": [4, 8]}, label="maze", seed=seed)
    return WeightedTaskSetGenerator([(rooms[0], 1.0), (rooms[1], 2.0), (rooms[2], 1.0), (maze, 3.0)], seed=seed)


def _keyed_run(curriculum: Any, episodes: int, seed: int) -> list[tuple[int, list[tuple[str, Any]]]]:
    """Task ids and configs (sorted items) handed out; scores a fixed function of the config
    plus noise from `seed`."""
    noise = np.random.default_rng(seed)
    ran = []
    for _ in range(episodes):
        task = curriculum.get_task()
        cfg = dict(task.env_cfg)
        level = (cfg["width"] + 3 * cfg["height"] + 5 * cfg["walls"]) % 11 / 11
        curriculum.update_task_performance(task.task_id, float(min(1.0, level + 0.1 * noise.random())))
        ran.append((task.task_id, sorted(cfg.items())))
    return ran


def test_config_key_order_changes_nothing(curriculum_factory, require_capability, scenario_seed) -> None:
    """The same run with every task config (and a bucketed generator's base config) listing its
    keys in reverse hands out the same tasks with equal configs; a checkpoint of one run loads
    into a curriculum built from the other's config, which goes on as the first would."""
    def config(reverse: bool) -> CurriculumConfig:
        return _churn_config(_keyed_generator(reverse, scenario_seed), scenario_seed)

    reference = _build(curriculum_factory, config(False), "learning_progress", require_capability)
    reversed_keys = curriculum_factory(config(True))
    try:
        expected = _keyed_run(reference, LIMITS.key_order_episodes, scenario_seed)
        ran = _keyed_run(reversed_keys, LIMITS.key_order_episodes, scenario_seed)
        step = next((i for i, (a, b) in enumerate(zip(expected, ran)) if a != b), None)
        assert step is None, (
            f"with every config's keys reversed the run diverged at episode {step}: task {ran[step]} handed out where "
            f"the reference handed out task {expected[step]}, seed {scenario_seed}")
        if not missing_capabilities(reference, ("get_state", "load_state")):
            resumed = curriculum_factory(config(True))
            try:
                try:
                    resumed.load_state(reference.get_state())
                except Exception as error:  # noqa: BLE001 - reported with the relation
                    pytest.fail(f"a checkpoint was refused by a curriculum whose configs list their keys in another "
                                f"order: {type(error).__name__}: {error}, seed {scenario_seed}")
                after = _keyed_run(resumed, LIMITS.key_order_episodes // 4, scenario_seed + 1)
                assert after == _keyed_run(reference, LIMITS.key_order_episodes // 4, scenario_seed + 1), (
                    f"restored into a curriculum whose configs list their keys in another order, the run went on "
                    f"otherwise than the one it was saved from, seed {scenario_seed}")
            finally:
                getattr(resumed, "close", lambda: None)()
    finally:
        for curriculum in (reference, reversed_keys):
            getattr(curriculum, "close", lambda: None)()
