"""The protocol a curriculum must satisfy to be gated by the scenario suites, and what each suite needs.

The harness talks to a curriculum only through what is written here, so any implementation
can be plugged in with `curriculum-harness gate --curriculum=package.module:factory` (or
`pytest --pyargs harness.scenarios --gate-curriculum=...`), where
`factory(config: CurriculumConfig) -> CurriculumProtocol`.

- `CurriculumProtocol`: the core every suite uses (`get_task`, `update_task_performance`,
  `stats`). Without it nothing can be gated.
- `CAPABILITIES`: everything beyond the core that some suite uses, with its contract.
- `SUITES`: the one registry of what each suite requires (missing: the suite skips, naming
  the capability and why) and what it uses when present (missing: those checks do not run).
  docs/protocol.md is rendered from it (`render_markdown`).
- `check_curriculum(obj, factory=...)`: raises `CurriculumProtocolError` when the core is not
  met, otherwise prints a per-suite readiness table (runs / skips and why), in the manner of
  gymnasium's env checker. `skip_reason(suite, obj, factory=...)` is what a suite asks.

The task-id rule (`TASK_ID_RULE`) is the one both the state machine and centralized stage
sync hold a curriculum to.
"""

from __future__ import annotations

import inspect
import json
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TextIO, runtime_checkable

__all__ = [
    "TaskProtocol",
    "CurriculumProtocol",
    "CheckpointableCurriculum",
    "CurriculumProtocolError",
    "ProtocolView",
    "TASK_ID_RULE",
    "CONFIG_FIELDS",
    "Capability",
    "CAPABILITIES",
    "Suite",
    "SUITES",
    "SuiteReadiness",
    "check_task",
    "check_curriculum",
    "suite_readiness",
    "skip_reason",
    "missing_capabilities",
    "render_markdown",
]


@runtime_checkable
class TaskProtocol(Protocol):
    """What `get_task()` returns."""

    task_id: int
    """Identifies the task in `update_task_performance`."""
    env_cfg: Mapping[str, Any]
    """Applied to the env at the next reset."""
    label: str
    """Groups tasks in per-label metrics."""


@runtime_checkable
class CurriculumProtocol(Protocol):
    """The methods every scenario uses."""

    def get_task(self) -> TaskProtocol:
        """The task for the next episode."""
        ...

    def update_task_performance(self, task_id: int, score: float) -> Any:
        """Record a finished episode of `task_id` with `score` in [0, 1]."""
        ...

    def stats(self) -> Mapping[str, Any]:
        """Numbers for logging; `per_label_lp_scores` ({label: float}) if the algorithm has LP."""
        ...


@runtime_checkable
class CheckpointableCurriculum(CurriculumProtocol, Protocol):
    """Needed by the checkpoint/resume scenario."""

    def get_state(self) -> Any: ...

    def load_state(self, state: Any) -> None: ...


class ProtocolView:
    """A curriculum seen through `CurriculumProtocol` alone (what a plug-in that offers nothing
    else is): forwards the three methods to `inner`; a check's subclass changes what it needs."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def get_task(self) -> Any:
        return self._inner.get_task()

    def update_task_performance(self, task_id: int, score: float) -> Any:
        return self._inner.update_task_performance(task_id, score)

    def stats(self) -> Mapping[str, Any]:
        return self._inner.stats()


class CurriculumProtocolError(TypeError):
    """An object does not satisfy `CurriculumProtocol`; the message lists every gap."""


def _check_method(obj: Any, name: str, min_args: int, problems: list[str]) -> None:
    method = getattr(type(obj), name, None)
    if method is None or not callable(getattr(obj, name, None)):
        problems.append(f"missing method `{name}()`")
        return
    try:
        params = [
            p for p in inspect.signature(getattr(obj, name)).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
    except (TypeError, ValueError):
        return  # builtins without signatures: trust the call checks below
    if not any(p.kind == p.VAR_POSITIONAL for p in params) and len(params) < min_args:
        problems.append(f"`{name}()` must accept {min_args} positional argument(s), it accepts {len(params)}")


def check_task(task: Any) -> list[str]:
    """What a `get_task()` result lacks (empty list if it is fine)."""
    problems = []
    task_id = getattr(task, "task_id", None)
    if not isinstance(task_id, int) or isinstance(task_id, bool):
        problems.append(f"task.task_id must be an int, received {task_id!r}")
    env_cfg = getattr(task, "env_cfg", None)
    if not isinstance(env_cfg, Mapping):
        problems.append(f"task.env_cfg must be a mapping, received {type(env_cfg).__name__}")
    label = getattr(task, "label", None)
    if not isinstance(label, str):
        problems.append(f"task.label must be a str, received {label!r}")
    return problems


TASK_ID_RULE: Final = """\
A task id is an int >= 0 that names one task for the life of the curriculum: an id is never
reused for another task, and ids come from the curriculum's state, never from which process
called `get_task()`.

1. New ids are made only when a task enters the pool (at construction, on an eviction, decided
   at an update or at the next draw, on a stage change), from the curriculum's own state (a
   counter kept in its state, or slot and generation), never from which process calls. A
   copy made from the same state (a pickled worker copy under centralized tracking, a
   checkpoint restored elsewhere) makes the same ids for the same pool changes: the main
   curriculum knows every id a copy hands out from the pool they share, and
   `apply_sync_state()` must give a copy the ids the main curriculum gave the new stage's
   tasks. A counter bumped per `get_task()` call breaks this.
2. `update_task_performance(task_id, score)` for an id in the pool now: credited (returns
   anything but False). For an id that was in the pool and has left it (evicted, previous
   stage): not credited, returns False and counts in `stats()["late_completions"]`. Any other
   id (negative, or one the curriculum's state never put in its pool): `UnknownTaskError`, and
   nothing changes.
3. So: the state machine's "refuse ids never handed out" means "refuse ids never in the pool"
   (it sends negative ids, and, when the pool is visible through `active_tasks()`, ids above
   every id it has seen); centralized sync's "accept ids a worker copy handed out" holds
   because a worker copy's ids were in the main curriculum's pool too. A fixed task space
   without a pool is a pool that holds every task: its ids are always known.
"""

CONFIG_FIELDS: Final = {
    "task_generator": "build tasks from it: `task_generator.generate(task_id) -> (env_cfg, label)`; the suites "
                      "read `env_cfg` (e.g. `task_index`) and `label` of the tasks you hand out (None for staged "
                      "progression, whose stages carry their generators)",
    "algorithm": "`LearningProgressConfig`, `UniformConfig` or `StagedProgressionConfig` (stages, advancement "
                 "threshold, min_episodes, window); refuse a kind you do not implement with CurriculumConfigError",
    "num_active_tasks": "the pool size; `num_active_tasks` and `active_tasks()` report it",
    "seed": "all randomness; the same config gives the same task stream",
    "score_range": "scores outside it (and NaN) raise InvalidScoreError; otherwise only scores normalised by it "
                   "may matter: the same run with its scores mapped into another range must make the same choices",
    "min_presentations": "a task is not evicted before this many completions",
    "eviction_percentile": "0 switches eviction off (the forgetting suite keeps every task's history)",
    "refresh_interval": "may be ignored",
}
"""The `CurriculumConfig` fields a factory is handed and what the suites expect it to do with them."""


# ---------------------------------------------------------------------------------- capabilities
@dataclass
class _Subject:
    """What readiness is judged on: the curriculum, and (optionally) its factory and env wrapper."""

    curriculum: Any
    factory: Callable[..., Any] | None = None
    env_class: Any = None
    exercise: bool = True
    _stats: Any = None

    def stats(self) -> Any:
        if self._stats is None:
            self._stats = self.curriculum.stats()
        return self._stats


Probe = Callable[[_Subject], "tuple[bool | None, str]"]
"""(present, what was found): True, False, or None when it cannot be told (no factory given)."""


@dataclass(frozen=True)
class Capability:
    """Something beyond the core protocol that a suite uses."""

    name: str
    spelled: str
    """How it is spelled in code."""
    contract: str
    """What it must do."""
    probe: Probe
    on: str = "curriculum"
    """"curriculum", "factory" or "env wrapper"."""


def _methods(*names: str) -> Probe:
    def probe(subject: _Subject) -> tuple[bool | None, str]:
        lacking = [f"{n}()" for n in names if not callable(getattr(subject.curriculum, n, None))]
        return (not lacking, f"lacks {', '.join(lacking)}" if lacking else "")

    return probe


def _stats_keys(*keys: str) -> Probe:
    def probe(subject: _Subject) -> tuple[bool | None, str]:
        stats = subject.stats()
        lacking = [k for k in keys if not isinstance(stats, Mapping) or k not in stats]
        return (not lacking, f"stats() lacks {', '.join(repr(k) for k in lacking)}" if lacking else "")

    return probe


def _per_label_lp(subject: _Subject) -> tuple[bool | None, str]:
    stats = subject.stats()
    scores = stats.get("per_label_lp_scores") if isinstance(stats, Mapping) else None
    if not isinstance(scores, Mapping) or not scores:
        return False, f"stats()['per_label_lp_scores'] is {scores!r}: no learning progress per label"
    return True, ""


_POOL_TASK_ATTRIBUTES: Final = ("task_id", "env_cfg", "label", "num_completions", "mean_score")


def _pool(subject: _Subject) -> tuple[bool | None, str]:
    present, detail = _methods("active_tasks")(subject)
    if not present:
        return present, detail
    size = getattr(subject.curriculum, "num_active_tasks", None)
    if isinstance(size, bool) or not isinstance(size, int):
        return False, f"num_active_tasks is {size!r}, expected an int"
    if subject.exercise:
        tasks = list(subject.curriculum.active_tasks())
        lacking = sorted({a for task in tasks for a in _POOL_TASK_ATTRIBUTES if not hasattr(task, a)})
        if lacking:
            return False, f"active_tasks() returns tasks without {', '.join(lacking)}"
        if len(tasks) != size:
            return False, f"active_tasks() returns {len(tasks)} tasks, num_active_tasks is {size}"
    return True, ""


def _factory_keyword(name: str) -> Probe:
    def probe(subject: _Subject) -> tuple[bool | None, str]:
        if subject.factory is None:
            return None, "pass factory= to tell"
        try:
            parameters = inspect.signature(subject.factory).parameters
        except (TypeError, ValueError):
            return None, "the factory's signature cannot be read"
        if name in parameters:
            return True, ""
        return False, f"the factory takes no `{name}` keyword"

    return probe


def _accepts_config(kind: str) -> Probe:
    def probe(subject: _Subject) -> tuple[bool | None, str]:
        if subject.factory is None or not subject.exercise:
            return None, "pass factory= (and exercise=True) to tell"
        from curriculum.errors import CurriculumConfigError

        try:
            made = subject.factory(_sample_config(kind))
        except (CurriculumConfigError, NotImplementedError) as exc:
            return False, f"the factory refused a {kind} config: {type(exc).__name__}: {exc}"
        close = getattr(made, "close", None)
        if callable(close):
            close()
        return True, ""

    return probe


def _stage_counters(subject: _Subject) -> tuple[bool | None, str]:
    if subject.factory is None or not subject.exercise:
        return None, "pass factory= (and exercise=True) to tell"
    from curriculum.errors import CurriculumConfigError

    try:
        staged = subject.factory(_sample_config("staged"))
    except (CurriculumConfigError, NotImplementedError) as exc:
        return False, f"the factory refused a staged config: {type(exc).__name__}: {exc}"
    try:
        if getattr(staged, "stage", None) is None:
            return False, "a staged curriculum of this factory reports no `stage`"
        stats = staged.stats()
        lacking = [k for k in ("stage", "advancements", "regressions") if k not in stats]
        return (not lacking, f"stats() lacks {', '.join(repr(k) for k in lacking)}" if lacking else "")
    finally:
        close = getattr(staged, "close", None)
        if callable(close):
            close()


def _stage_sync(subject: _Subject) -> tuple[bool | None, str]:
    present, detail = _methods("sync_state", "apply_sync_state")(subject)
    if not present:
        return present, detail
    if not hasattr(subject.curriculum, "stage"):
        return False, "lacks the `stage` attribute"
    return True, ""


def _named_errors(subject: _Subject) -> tuple[bool | None, str]:
    if not subject.exercise:
        return None, "pass exercise=True to tell"
    from curriculum.errors import InvalidScoreError, UnknownTaskError

    curriculum = subject.curriculum
    task = curriculum.get_task()
    problems = []
    for call, expected in ((lambda: curriculum.update_task_performance(task.task_id, math.nan), InvalidScoreError),
                           (lambda: curriculum.update_task_performance(task.task_id, True), InvalidScoreError),
                           (lambda: curriculum.update_task_performance(-1, 0.5), UnknownTaskError)):
        try:
            call()
        except expected:
            continue
        except Exception as exc:  # noqa: BLE001 - reported as the capability's gap
            problems.append(f"raised {type(exc).__name__} instead of {expected.__name__}")
        else:
            problems.append(f"accepted what must raise {expected.__name__}")
    subject._stats = None  # the probes may have changed the counters
    return (not problems, "; ".join(problems))


def _checkpoint(subject: _Subject) -> tuple[bool | None, str]:
    present, detail = _methods("get_state", "load_state")(subject)
    if not present or not subject.exercise:
        return present, detail
    try:
        json.dumps(subject.curriculum.get_state())
    except (TypeError, ValueError) as exc:
        return False, f"get_state() is not JSON-safe ({exc})"
    return True, ""


def _env_wrapper(subject: _Subject) -> tuple[bool | None, str]:
    if subject.env_class is None:
        return True, "the built-in CurriculumEnv"
    try:
        parameters = inspect.signature(subject.env_class).parameters
    except (TypeError, ValueError):
        return None, "the wrapper's signature cannot be read"
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return True, ""
    lacking = [k for k in ("seed", "buf", "score_fn") if k not in parameters]
    return (not lacking, f"the wrapper takes no {', '.join(lacking)} keyword(s)" if lacking else "")


CAPABILITIES: Final[dict[str, Capability]] = {c.name: c for c in (
    Capability(
        "counters", "stats()['total_completions'], stats()['late_completions']",
        "ints: completions credited, and completions of tasks that had left the pool (returned False); their sum "
        "is every update_task_performance call that did not raise",
        _stats_keys("total_completions", "late_completions"),
    ),
    Capability(
        "late_completions", "update_task_performance(...) is False for a task that left the pool",
        "a completion of a task no longer in the pool is not credited: returns False, counts as late "
        "(task-id rule, point 2)",
        lambda subject: (True, "not probed: checked by the state machine"),
    ),
    Capability(
        "named_errors", "InvalidScoreError, UnknownTaskError (curriculum.errors)",
        "a NaN score, one outside config.score_range or a bool raises InvalidScoreError (a ValueError); an id "
        "never in the pool raises UnknownTaskError; either leaves the curriculum unchanged (its get_state(), else "
        "its stats())",
        _named_errors,
    ),
    Capability(
        "per_label_lp", "stats()['per_label_lp_scores']",
        "{label: finite float >= 0}: the mean learning progress of the pool's tasks of each label; empty or "
        "absent for a curriculum without learning progress",
        _per_label_lp,
    ),
    Capability(
        "checkpoint", "get_state(), load_state(state)",
        "get_state() is JSON-safe; a fresh curriculum from the same config given load_state(state) has "
        "get_state() == state and continues with exactly the tasks the original would have handed out",
        _checkpoint,
    ),
    Capability(
        "pool", "active_tasks(), num_active_tasks",
        "the tasks in the pool now (each with task_id, env_cfg, label, num_completions, mean_score), "
        "num_active_tasks of them; every id get_task() returns is among them. Exposing it switches on the "
        "state machine's pool checks",
        _pool,
    ),
    Capability(
        "task_scores", "task_scores()",
        "a float array aligned with active_tasks(): each pool task's score under the algorithm (learning progress "
        "for LP), the ranking eviction uses",
        _methods("task_scores"),
    ),
    Capability(
        "sampling_probabilities", "sampling_probabilities()",
        "a float array of shape (num_active_tasks,) aligned with active_tasks(), >= 0, summing to 1",
        _methods("sampling_probabilities"),
    ),
    Capability(
        "shared_memory", "factory(config, shared_memory=True[, lock_timeout=s])",
        "a curriculum shared by forked processes: every process's updates land in one tracker (`.tracker` with "
        "score_sum, completions, total_completions, late_completions, task_id_at(slot), completions_at(slot), "
        "lock); reseed(seed) gives a process its own draws; a stuck lock holder raises LockTimeoutError; close()",
        _factory_keyword("shared_memory"), on="factory",
    ),
    Capability(
        "stage_sync", "stage, sync_state(), apply_sync_state(sync)",
        "staged progression followed by worker copies: sync_state() -> {'stage': int, 'stage_changes': int}; "
        "apply_sync_state(sync) adopts it (same pool as the main curriculum); stats() reports stage, "
        "advancements, regressions; the curriculum pickles; its `config` attribute is the CurriculumConfig it was "
        "built from (centralized tracking reads config.algorithm)",
        _stage_sync,
    ),
    Capability(
        "stage_counters", "stage, stats()['stage'], stats()['advancements'], stats()['regressions']",
        "a staged curriculum's current stage (None when not staged) and its counts of stage changes; the "
        "accounting oracle replays the StagedProgressionConfig rule (mean of the last `window` scores of the "
        "stage's own tasks, after `min_episodes` of them) and compares the stage after every completion",
        _stage_counters, on="factory",
    ),
    Capability(
        "staged_config", "factory(CurriculumConfig(algorithm=StagedProgressionConfig(...)))",
        "builds a staged-progression curriculum: stages in order, each with its own task generator; advances once "
        "per threshold crossing after min_episodes of the stage",
        _accepts_config("staged"), on="factory",
    ),
    Capability(
        "uniform_config", "factory(CurriculumConfig(algorithm=UniformConfig()))",
        "builds a curriculum that samples the pool uniformly",
        _accepts_config("uniform"), on="factory",
    ),
    Capability(
        "env_wrapper", "EnvClass(env, curriculum, *, seed=None, buf=None, score_fn=None)",
        "for --curriculum-env: a PufferEnv over `env` that applies each task's env_cfg through "
        "env.set_env_config() before the reset that starts it, auto-resets, records each full episode once "
        "(score_fn(per-agent returns), default their mean) and never a desync-truncated one, exposes `episodes` "
        "and `desync_truncations`, and emits the curriculum_stats/* info keys of curriculum.stats",
        _env_wrapper, on="env wrapper",
    ),
)}
"""Everything beyond the core protocol that some suite uses."""


def _sample_config(kind: str) -> Any:
    from curriculum import (
        BucketedTaskGenerator,
        CurriculumConfig,
        LearningProgressConfig,
        Stage,
        StagedProgressionConfig,
        UniformConfig,
    )

    generator = BucketedTaskGenerator({}, {"task_index": [0, 1, 2]}, label="probe")
    if kind == "staged":
        stages = [Stage("first", generator), Stage("second", BucketedTaskGenerator({}, {"task_index": [3]},
                                                                                    label="probe_2"))]
        return CurriculumConfig(task_generator=None, algorithm=StagedProgressionConfig(stages=stages),
                                num_active_tasks=4)
    algorithm = UniformConfig() if kind == "uniform" else LearningProgressConfig()
    return CurriculumConfig(task_generator=generator, algorithm=algorithm, num_active_tasks=4)


# ---------------------------------------------------------------------------------- suites
@dataclass(frozen=True)
class Suite:
    """What one suite hands the factory, requires and uses."""

    name: str
    """The suite module without `test_`."""
    configs: tuple[str, ...]
    """Algorithm kinds of the configs the factory is handed."""
    requires: Mapping[str, str] = field(default_factory=dict)
    """Capability -> why the suite needs it (missing: the suite, or the named variant, skips)."""
    uses: Mapping[str, str] = field(default_factory=dict)
    """Capability -> what runs only when it is present (missing: those checks are left out)."""


SUITES: Final[dict[str, Suite]] = {s.name: s for s in (
    Suite("impossible_tasks", ("learning_progress",),
          uses={"per_label_lp": "the learnable-vs-impossible learning-progress gap checks (the sample-share "
                                "checks run without it)",
                "task_scores": "per-completion LP read from task_scores() by pool position (else per label "
                               "from stats())"}),
    Suite("checkpoint_resume", ("learning_progress", "staged"),
          requires={"checkpoint": "replays a run from a checkpoint taken halfway and compares it with the "
                                  "uninterrupted run"},
          uses={"per_label_lp": "compared between the resumed and the uninterrupted run",
                "staged_config": "the staged-progression checkpoint (stage, its episode count and score window)"}),
    Suite("config_at_reset", ("uniform",),
          requires={"uniform_config": "runs a uniform curriculum over fixed-length tasks",
                    "env_wrapper": "the env wrapper under test runs every episode"}),
    Suite("curriculum_state_machine", ("learning_progress",),
          requires={"counters": "the model counts every update and checks credited + late == updates",
                    "late_completions": "completions of departed tasks must return False",
                    "named_errors": "bad scores and unknown ids must be refused by name, state unchanged"},
          uses={"checkpoint": "checkpoint round trips mid-sequence",
                "pool": "pool size, fresh ids, no departed task coming back, unknown ids above every id seen",
                "sampling_probabilities": "the distribution is a distribution after every step"}),
    Suite("dependency_chain", ("learning_progress",)),
    Suite("desync_truncation", ("uniform",),
          requires={"uniform_config": "runs a uniform curriculum on a delayed-reward env",
                    "counters": "recorded completions are compared with the full episodes run",
                    "env_wrapper": "the env wrapper under test counts episodes and desync truncations"},
          uses={"pool": "the lowest mean score of a recorded task (a partial episode would lower it)"}),
    Suite("eviction_health", ("learning_progress",),
          requires={"pool": "watches which tasks leave the pool",
                    "task_scores": "ranks an evicted task's score among the eligible tasks'"}),
    Suite("forgetting", ("learning_progress",)),
    Suite("after_mastery", ("learning_progress",)),
    Suite("per_label_metrics", ("learning_progress",),
          requires={"env_wrapper": "per-label counters pass through the env wrapper under test"},
          uses={"per_label_lp": "a finite per-label LP for every label run"}),
    Suite("shared_tracker_locking", ("uniform",),
          requires={"uniform_config": "hammers a uniform curriculum from several processes",
                    "shared_memory": "writers in forked processes share one tracker"}),
    Suite("multi_agent", ("uniform",),
          requires={"uniform_config": "runs a uniform curriculum over three-agent tasks",
                    "counters": "episodes recorded are compared with the episodes the envs ran",
                    "env_wrapper": "the env wrapper under test scores and records multi-agent episodes"},
          uses={"shared_memory": "the Multiprocessing/shared variants",
                "stage_sync": "the centralized variants (worker copies report completions to the main one)"}),
    Suite("worker_streams", ("uniform", "learning_progress"),
          requires={"uniform_config": "worker processes draw from a uniform pool of distinct tasks"},
          uses={"shared_memory": "the Multiprocessing run (worker processes share one curriculum); the Serial "
                                 "reproducibility run needs nothing more"}),
    Suite("staged_progression", ("staged",),
          requires={"staged_config": "runs a staged curriculum along a chain at three integration levels",
                    "stage_counters": "the stage after every completion is compared with the rule replayed"}),
    Suite("stage_sync", ("staged",),
          requires={"staged_config": "advances through stages while workers run",
                    "stage_counters": "workers must agree with the stage the curriculum reports",
                    "counters": "episodes recorded are compared with episodes run"},
          uses={"shared_memory": "the shared-tracking variants (Serial and Multiprocessing)",
                "stage_sync": "the centralized-tracking variants (worker copies follow sync_state(); in the fork-server "
                              "variant the curriculum reaches its workers pickled)"}),
    Suite("invariances", ("learning_progress", "staged"),
          uses={"staged_config": "the staged-progression run of the score-range relation",
                "pool": "the late-completion relation (a stale worker reports the tasks that left the pool)"}),
    Suite("worker_failures", ("uniform",),
          requires={"uniform_config": "worker processes run a uniform curriculum until one is killed or frozen",
                    "shared_memory": "the worker processes share one curriculum"}),
    Suite("task_generators", ()),
    Suite("config_contract", ()),
    Suite("ray_service", ("learning_progress", "staged"),
          requires={"counters": "the service's recorded and late completions are compared with the episodes the "
                                "Ray workers ended",
                    "late_completions": "each worker's per-episode late verdict comes from the served curriculum"},
          uses={"staged_config": "the stage-sync run over Ray (workers never ahead of the service, lag bounded "
                                 "by the client's queue)",
                "stage_counters": "the stage, advancements and regressions the stage-sync run checks"}),
)}
"""The one registry of what each suite requires and uses; docs/protocol.md is rendered from it."""


# ---------------------------------------------------------------------------------- readiness
@dataclass(frozen=True)
class SuiteReadiness:
    """Whether a suite runs on a curriculum, and what it leaves out."""

    suite: str
    runs: bool | None
    """True: runs; False: skips; None: cannot be told without the factory."""
    skips_because: tuple[str, ...] = ()
    """Required capabilities that are missing, each with why the suite needs it and what was found."""
    leaves_out: tuple[str, ...] = ()
    """Optional capabilities that are missing: the checks that do not run."""
    unknown: tuple[str, ...] = ()


def _judge(subject: _Subject, cache: dict[str, tuple[bool | None, str]], name: str) -> tuple[bool | None, str]:
    if name not in cache:
        cache[name] = CAPABILITIES[name].probe(subject)
    return cache[name]


def _readiness(subject: _Subject, cache: dict[str, tuple[bool | None, str]], suite: Suite) -> SuiteReadiness:
    skips, unknown, leaves = [], [], []
    for name, why in suite.requires.items():
        present, detail = _judge(subject, cache, name)
        spelled = CAPABILITIES[name].spelled
        if present is False:
            skips.append(f"needs {spelled} ({why}); {detail}" if detail else f"needs {spelled} ({why})")
        elif present is None:
            unknown.append(f"{spelled}: {detail}")
    for name, what in suite.uses.items():
        present, detail = _judge(subject, cache, name)
        if present is False:
            leaves.append(f"without {CAPABILITIES[name].spelled}: {what}")
    runs = False if skips else (None if unknown else True)
    return SuiteReadiness(suite.name, runs, tuple(skips), tuple(leaves), tuple(unknown))


def suite_readiness(curriculum: Any, *, factory: Callable[..., Any] | None = None, env_class: Any = None,
                    exercise: bool = True) -> list[SuiteReadiness]:
    """Per suite of `SUITES`: whether it runs on `curriculum` (built by `factory`), and why not."""
    subject = _Subject(curriculum, factory, env_class, exercise)
    cache: dict[str, tuple[bool | None, str]] = {}
    return [_readiness(subject, cache, suite) for suite in SUITES.values()]


def skip_reason(suite: str, curriculum: Any, *, factory: Callable[..., Any] | None = None,
                env_class: Any = None) -> str | None:
    """Why `suite` must skip on `curriculum` (its missing required capabilities), or None.

    Judged without exercising the curriculum (no extra calls into it); a capability that can
    only be told by exercising it is assumed present, and the suite's own checks judge it.
    """
    if suite not in SUITES:
        raise KeyError(f"unknown suite {suite!r}; expected one of: {', '.join(SUITES)}")
    subject = _Subject(curriculum, factory, env_class, exercise=False)
    readiness = _readiness(subject, {}, SUITES[suite])
    return "; ".join(readiness.skips_because) or None


def missing_capabilities(obj: Any, names: tuple[str, ...]) -> list[str]:
    """The methods in `names` that `obj` lacks."""
    return [n for n in names if not callable(getattr(obj, n, None))]


def check_curriculum(obj: Any, *, factory: Callable[..., Any] | None = None, env_class: Any = None,
                     exercise: bool = True, file: TextIO | None = None) -> list[SuiteReadiness]:
    """Check `obj` against the protocol and print which suites run on it.

    Raises `CurriculumProtocolError` listing every gap when the core protocol is not met
    (nothing can be gated then). Otherwise prints a per-suite readiness table to `file`
    (default stdout; `file=False`-like `io.StringIO()` to keep it) and returns it.

    With `exercise=True` it calls `get_task()`, `update_task_performance()` once with a
    mid-range score, `stats()`, and probes the named errors (a NaN score, the id -1) and a
    checkpoint; with `factory` it also builds a uniform and a staged curriculum to see whether
    the factory accepts those configs.
    """
    problems: list[str] = []
    _check_method(obj, "get_task", 0, problems)
    _check_method(obj, "update_task_performance", 2, problems)
    _check_method(obj, "stats", 0, problems)
    if exercise and not problems:
        task = obj.get_task()
        task_problems = check_task(task)
        problems.extend(task_problems)
        if not task_problems:
            obj.update_task_performance(task.task_id, 0.5)
        stats = obj.stats()
        if not isinstance(stats, Mapping):
            problems.append(f"stats() must return a mapping, received {type(stats).__name__}")
        else:
            lp = stats.get("per_label_lp_scores", {})
            if not isinstance(lp, Mapping) or not all(
                isinstance(v, (int, float)) and math.isfinite(v) for v in lp.values()
            ):
                problems.append("stats()['per_label_lp_scores'] must map labels to finite numbers")
    if problems:
        raise CurriculumProtocolError(
            f"{type(obj).__name__} does not satisfy CurriculumProtocol:\n- " + "\n- ".join(problems)
        )
    readiness = suite_readiness(obj, factory=factory, env_class=env_class, exercise=exercise)
    print(render_readiness(readiness, name=type(obj).__name__), file=file if file is not None else sys.stdout)
    return readiness


def render_readiness(readiness: list[SuiteReadiness], *, name: str = "curriculum") -> str:
    """The readiness table `check_curriculum` prints."""
    width = max(len(r.suite) for r in readiness)
    lines = [f"Scenario suites on {name}:"]
    for entry in readiness:
        state = {True: "runs", False: "skips", None: "unknown"}[entry.runs]
        notes = list(entry.skips_because) or list(entry.unknown)
        lines.append(f"  {entry.suite:<{width}}  {state:<7}  {notes[0] if notes else ''}".rstrip())
        lines += [f"  {'':<{width}}  {'':<7}  {note}" for note in notes[1:]]
        lines += [f"  {'':<{width}}  {'':<7}  {note}" for note in entry.leaves_out]
    runs = sum(r.runs is True for r in readiness)
    lines.append(f"{runs} of {len(readiness)} suites run; a skipped suite is reported with its reason, never as "
                 "a failure")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- docs
def render_markdown() -> str:
    """The per-suite requirements table and the capability list of docs/protocol.md."""
    lines = ["| suite | configs handed to the factory | requires (else the suite skips) | "
             "uses when present (else those checks are left out) |", "|---|---|---|---|"]
    for suite in SUITES.values():
        requires = "<br>".join(f"`{CAPABILITIES[n].spelled}`: {why}" for n, why in suite.requires.items()) or "—"
        uses = "<br>".join(f"`{CAPABILITIES[n].spelled}`: {what}" for n, what in suite.uses.items()) or "—"
        lines.append(f"| `{suite.name}` | {', '.join(suite.configs) or 'none: checks the library'} | {requires} | {uses} |")
    lines += ["", "| capability | on | contract |", "|---|---|---|"]
    lines += [f"| `{c.spelled}` | {c.on} | {c.contract} |" for c in CAPABILITIES.values()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m harness.protocol: the tables of docs/protocol.md
    print(render_markdown(), end="")
