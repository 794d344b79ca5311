"""`CurriculumEnv`: one curriculum task per episode for a pufferlib `PufferEnv`.

The wrapper hands the wrapped env one task per episode, applies the task's env config at
reset (never mid-episode), credits the episode's score to the task that produced it and
reports curriculum stats through the info dicts (`curriculum.stats`).

Policies:

- Task per episode. The first `reset()` draws a task and calls `env.set_env_config(env_cfg)`
  before `env.reset()`, so the first episode already runs its own task. The next task is drawn
  when an episode ends and applied at the reset that starts the next one. An explicit `reset()`
  abandons a running episode (it is not reported) and starts a new one with a new task.
- Auto-reset, like pufferlib's native envs. The step in which the episode ends records the
  episode, draws the next task, applies its config and resets the wrapped env, all within that
  `step()` call. It returns the new episode's first observation with the rewards, terminals
  and truncations of the step that ended the old one, so a vectorized trainer just keeps
  stepping. Before the next step the wrapper puts back the rewards the env's reset left and
  clears the done flags, so every episode starts with no agent done: an env that never clears
  its own flags still gets correct episode boundaries.
- Agents (multi-agent envs). Agent i is done from the first step of the episode at which
  `terminals[i]` or `truncations[i]` is set; the wrapper latches it, so a flag the env sets
  for that one step only still counts, and one it leaves set changes nothing. Agent i's return
  is the sum of its rewards up to and including that step; rewards written for it afterwards
  are ignored. The episode ends at the step in which the last agent becomes done. When every
  agent ends in the same step (the common case) no latching is needed; the per-step cost of
  latching is paid only between the first and the last agent's end.
- Truncations. A plain (time-limit) truncation ends a full-length episode: it is recorded like
  a terminal. A desync truncation (the env cut its first episode short to stagger workers,
  seeds/004) is not a completion: it is counted in `desync_truncations` and never reported to
  the curriculum. An episode is a desync truncation when some agent is truncated at its done
  step and, at that step, either the env's attribute `desync_truncation` is true or the
  step's infos hold `truncated_by_desync: True` at any nesting depth (as
  `harness.envs.ResourceChainEnv` emits).
- Score. The mean over agents of the episode returns, or `score_fn(episode_returns)`, which
  must return a real number (else `InvalidScoreError`). Episode returns come from
  `env.get_episode_rewards()` when the env defines it (read at each agent's done step, no
  per-step cost), else the wrapper sums the rewards buffer each step: one Python float per
  step for one agent, or for several agents with the default score (the mean needs only the
  total); a numpy add of per-agent returns, about 0.5 us, only when a `score_fn` needs them.
- Stats. The info dict of the step that ends an episode (the env's own, merged, or a new one)
  carries flat `curriculum_stats/...` keys: counters `episodes`, `completions`,
  `late_completions`, `desync_truncations`, `per_label_samples/<label>`,
  `per_label_completions/<label>`; gauges `score`, `stage`, `per_label_lp_scores/<label>`
  (EMA of the task's algorithm score, rate 0.1) and the task id; plus, every `stats_interval`
  completions, the pool-wide numbers of `Curriculum.stats()` (`pool_lp_gini`,
  `pool_occupancy_gini`, `sampling_gini`, `sampling_entropy`, `mean_lp_score`,
  `total_completions`, `total_late_completions`, ...). Infos the env returns as a list stay a
  list (the entries go into its last dict, or a new one); infos it returns as a dict stay that
  dict, with the entries added.
- Failures at an episode's end. Nothing of an ended episode leaks into the next one. If
  scoring or recording it raises (a bad `score_fn` result, an unknown task, a lock timeout),
  the episode is dropped, neither recorded nor counted. If drawing the next task, applying its
  config or the env's reset raises, the ended episode stays recorded and its info entries are
  returned by the next `reset()`, which starts the task already drawn (if any). Either way the
  error propagates and the wrapper refuses `step()` until `reset()`.
- Local tracking off (`local_tracking=False`, centralized tracking): the wrapper never calls
  `update_task_performance`; the episode-end info carries
  `{"curriculum_completion": {"task_id", "label", "score", "stage_changes"}}` for a
  main-process recorder (`curriculum.vector.CentralizedCurriculumVecEnv`), and the stage is
  taken from `stage_source` (the main process's broadcast) before every task draw.

The hot path of a non-terminal step is the wrapped `step` call, one state check, one reward
read and a test of one machine word per flag buffer (the agents' flags read as one integer,
for 1, 2, 4 or 8 agents; `any()` over words otherwise), all on memoryviews of the env's
buffers (benchmarks/test_env_overhead.py). Everything else is forwarded explicitly; there is
no `__getattr__` (seeds/004).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from numbers import Integral, Real
from typing import Any, Final, Protocol

import numpy as np
import pufferlib

from curriculum.errors import (
    AgentCountError,
    CurriculumConfigError,
    EnvContractError,
    EpisodeNotStartedError,
    InvalidScoreError,
)
from curriculum.stats import (
    COMPLETION_INFO_KEY,
    COMPLETIONS,
    DESYNC_INFO_KEY,
    DESYNC_TRUNCATIONS,
    EPISODES,
    LATE_COMPLETIONS,
    LP_EMA_ALPHA,
    PER_LABEL_COMPLETIONS,
    PER_LABEL_LP_SCORES,
    PER_LABEL_SAMPLES,
    POOL_STAT_RENAMES,
    SCORE,
    STAGE,
    TASK_ID,
    flatten_info,
    stat_key,
)

__all__ = [
    "CurriculumEnv",
    "CompletionRecorder",
    "StageSource",
    "ScoreFn",
    "DEFAULT_STATS_INTERVAL",
    "BUFFER_NAMES",
    "pool_stats_entries",
    "is_desync_truncation",
]

ScoreFn = Callable[[np.ndarray], float]
"""Maps the per-agent returns of an episode to its score in the curriculum's `score_range`."""

DEFAULT_STATS_INTERVAL: Final = 100
"""Completions between two reports of the pool-wide `Curriculum.stats()` (an O(pool) call)."""

BUFFER_NAMES: Final = ("observations", "rewards", "terminals", "truncations", "masks", "actions")
"""The per-agent buffers of a PufferEnv, shared (never copied) by the wrapper."""

_REQUIRED_ENV_ATTRIBUTES: Final = (
    "single_observation_space",
    "single_action_space",
    "num_agents",
    *BUFFER_NAMES,
    "reset",
    "step",
)

_PER_AGENT_BUFFERS: Final = ("rewards", "terminals", "truncations")
"""Buffers the wrapper reads every step: one number per agent, shape (num_agents,)."""

# Episode phases of CurriculumEnv (a non-zero phase sends `step` down its slow path).
_RUNNING: Final = 0
_FLAGS_STALE: Final = 1  # an auto-reset put the ended episode's flags back in the buffers
_NOT_STARTED: Final = 2  # before the first reset, or after a failed episode end or reset
_LATCHED: Final = 3  # some agents are done, others still play


class StageSource(Protocol):
    """Where a worker's curriculum copy reads the main process's stage (centralized tracking)."""

    @property
    def version(self) -> int:
        """Changes whenever a new stage is published; cheap to read."""
        ...

    def read(self) -> Mapping[str, int] | None:
        """The published `sync_state()` (`stage`, `stage_changes`), or None before any."""
        ...


# Curriculum handle -> (pid, vector env?) of the env that last reseeded it, so that the envs of
# one process share one sampling stream and every worker process gets its own.
_RESEEDED: weakref.WeakKeyDictionary[Any, tuple[int, bool]] = weakref.WeakKeyDictionary()


def _reseed_once_per_process(curriculum: Any, seed: int, *, in_vector: bool) -> None:
    """Reseed `curriculum` from the first env built over it in this process.

    pufferlib builds a throwaway driver env (no vector buffer, default seed) in every worker
    process before the worker's real envs; were it to reseed, every worker would draw the same
    stream. So an env of a vector (`in_vector`, built with its buffer slice) reseeds a handle
    that only such a driver env reseeded in this process.
    """
    reseed = getattr(curriculum, "reseed", None)
    if reseed is None:
        return
    pid = os.getpid()
    try:
        previous = _RESEEDED.get(curriculum)
        if previous is not None and previous[0] == pid and (previous[1] or not in_vector):
            return
        _RESEEDED[curriculum] = (pid, in_vector)
    except TypeError:  # not weak-referenceable: reseed every time
        pass
    reseed(seed)


def pool_stats_entries(curriculum: Any) -> dict[str, Any]:
    """`curriculum.stats()` as flat `curriculum_stats/...` info entries (`POOL_STAT_RENAMES` applied)."""
    out: dict[str, Any] = {}
    for key, value in flatten_info(curriculum.stats()):
        head, sep, rest = key.partition("/")
        out[stat_key(POOL_STAT_RENAMES.get(head, head) + sep + rest)] = value
    return out


def _check_interval(stats_interval: Any) -> int:
    if isinstance(stats_interval, bool) or not isinstance(stats_interval, Integral) or stats_interval < 1:
        raise CurriculumConfigError(f"Expected `stats_interval` to be an integer >= 1, received {stats_interval!r}")
    return int(stats_interval)


_COMPLETIONS_KEY: Final = stat_key(COMPLETIONS)
_LATE_KEY: Final = stat_key(LATE_COMPLETIONS)


class CompletionRecorder:
    """Records finished episodes into a curriculum and reports them as `curriculum_stats/...` entries.

    Used by a locally tracking `CurriculumEnv` and by the main process under centralized
    tracking, so both report the same numbers: `completions`, `late_completions`,
    `per_label_completions/<label>`, `per_label_lp_scores/<label>` (EMA, rate `LP_EMA_ALPHA`,
    of the algorithm score of the completed task; a late completion, no longer the task's,
    reports none and moves nothing) and, every `stats_interval` completions (from
    the first), the pool-wide `curriculum.stats()`.

    The algorithm score of a task is read from the last pool report: `task_scores()` matched to
    task ids through `active_tasks()` (same order; a curriculum with a `tracker` lends its
    `task_ids` array instead, the same ids without building a task per slot), so any id scheme
    works. A task that was not in the pool at that report, or a curriculum without those
    methods, gets its label's score from the report's `per_label_lp_scores`.
    """

    def __init__(self, curriculum: Any, *, stats_interval: int = DEFAULT_STATS_INTERVAL) -> None:
        self.curriculum = curriculum
        self.stats_interval = _check_interval(stats_interval)
        self.completions = 0
        """Episodes recorded (`update_task_performance` calls)."""
        self.late_completions = 0
        """Of those, the ones the curriculum refused as late."""
        self._record = curriculum.update_task_performance
        # a curriculum that answers completions later (a batching Ray client) hands over its
        # late verdicts as they arrive: each episode reports those not reported yet
        self._deferred = bool(getattr(curriculum, "defers_verdicts", False))
        self._pool_scores = _pool_scores(curriculum)
        self._report_ids: list[Any] = []  # task ids at the last pool report, in task_scores() order
        self._report_scores: list[float] = []
        self._report_by_id: dict[Any, float] | None = None  # built on the first lookup the order misses
        self._label_scores: Mapping[str, float] = {}
        self._lp_ema: dict[str, float] = {}
        self._label_keys: dict[str, tuple[str, str]] = {}

    def record(self, task_id: int, label: str, score: float) -> dict[str, Any]:
        """Credit `score` to `task_id`; the entries to merge into the episode's info dict."""
        late = self._record(task_id, score) is False
        late_count = int(late)
        if self._deferred:
            late_count = int(self.curriculum.take_late_verdicts())
        self.completions += 1
        self.late_completions += late_count
        keys = self._label_keys.get(label)
        if keys is None:
            keys = self._label_keys[label] = (stat_key(PER_LABEL_COMPLETIONS, label),
                                              stat_key(PER_LABEL_LP_SCORES, label))
        entries: dict[str, Any] = {_COMPLETIONS_KEY: 1, _LATE_KEY: late_count, keys[0]: 1}
        if (self.completions - 1) % self.stats_interval == 0:
            entries.update(self._pool_report())
        if not late:
            lp = self._lp_score(task_id, label)
            if lp is not None:
                old = self._lp_ema.get(label)
                ema = lp if old is None else old + LP_EMA_ALPHA * (lp - old)
                self._lp_ema[label] = ema
                entries[keys[1]] = ema
        return entries

    def _pool_report(self) -> dict[str, Any]:
        entries = pool_stats_entries(self.curriculum)
        prefix = stat_key(POOL_STAT_RENAMES[PER_LABEL_LP_SCORES]) + "/"
        self._label_scores = {k[len(prefix):]: v for k, v in entries.items() if k.startswith(prefix)}
        if self._pool_scores is not None:
            task_scores, task_ids = self._pool_scores
            scores = np.asarray(task_scores(), dtype=np.float64).reshape(-1).tolist()
            ids = task_ids()
            self._report_ids, self._report_scores = (ids, scores) if len(ids) == len(scores) else ([], [])
            self._report_by_id = None
        return entries

    def _lp_score(self, task_id: int, label: str) -> float | None:
        ids = self._report_ids
        if ids:
            if type(task_id) is int:  # the built-in scheme puts task g * n + s at position s: try it first
                position = task_id % len(ids)
                if ids[position] == task_id:
                    return self._report_scores[position]
            by_id = self._report_by_id
            if by_id is None:
                by_id = self._report_by_id = dict(zip(ids, self._report_scores))
            value = by_id.get(task_id)
            if value is not None:
                return value
        value = self._label_scores.get(label)
        return None if value is None else float(value)


def _pool_scores(curriculum: Any) -> tuple[Callable[[], Any], Callable[[], list[Any]]] | None:
    """(task scores, task ids in the same order) readers of a curriculum, or None without them."""
    task_scores = getattr(curriculum, "task_scores", None)
    if not callable(task_scores):
        return None
    if isinstance(getattr(getattr(curriculum, "tracker", None), "task_ids", None), np.ndarray):
        return task_scores, lambda: curriculum.tracker.task_ids.tolist()  # looked up now: never a stale view
    active_tasks = getattr(curriculum, "active_tasks", None)
    if not callable(active_tasks):
        return None
    return task_scores, lambda: [task.task_id for task in active_tasks()]


def _holds_desync_flag(info: Any) -> bool:
    if not isinstance(info, Mapping):
        return False
    flag = info.get(DESYNC_INFO_KEY)
    if isinstance(flag, (bool, np.bool_)) and flag:
        return True
    return any(_holds_desync_flag(value) for value in info.values() if isinstance(value, Mapping))


def is_desync_truncation(env: Any, infos: Sequence[Any] | Mapping[str, Any]) -> bool:
    """Whether a truncated episode was cut by a desync (env attribute or info flag)."""
    if getattr(env, "desync_truncation", False):
        return True
    if isinstance(infos, Mapping):
        return _holds_desync_flag(infos)
    return any(_holds_desync_flag(info) for info in infos or ())


def _check_seed(seed: Any) -> None:
    if seed is not None and (not isinstance(seed, Integral) or isinstance(seed, bool) or seed < 0):
        raise CurriculumConfigError(f"Expected `seed` to be None or an integer >= 0, received {seed!r}")


class _EpisodeAccounting:
    """The curriculum side of an episode, shared by `CurriculumEnv` and `GymCurriculumEnv`:
    draw a task (following the broadcast stage, if any) and settle an ended episode."""

    def __init__(
        self,
        curriculum: Any,
        *,
        local_tracking: bool,
        score_fn: ScoreFn | None,
        stats_interval: int,
        stage_source: StageSource | None,
    ) -> None:
        for method in ("get_task", "update_task_performance", "stats"):
            if not callable(getattr(curriculum, method, None)):
                raise CurriculumConfigError(
                    f"Expected `curriculum` to have a {method}() method (CurriculumProtocol), "
                    f"received {type(curriculum).__name__}"
                )
        if score_fn is not None and not callable(score_fn):
            raise CurriculumConfigError(f"Expected `score_fn` to be callable or None, received {score_fn!r}")
        if not isinstance(local_tracking, bool):
            raise CurriculumConfigError(f"Expected `local_tracking` to be a bool, received {local_tracking!r}")
        stats_interval = _check_interval(stats_interval)
        if stage_source is not None:
            if local_tracking:
                raise CurriculumConfigError(
                    "Expected `stage_source` only with local_tracking=False: a curriculum that records its own "
                    "completions decides its own stage"
                )
            if not (hasattr(stage_source, "version") and callable(getattr(stage_source, "read", None))):
                raise CurriculumConfigError(
                    f"Expected `stage_source` to have a `version` and a read() method (StageSource), "
                    f"received {type(stage_source).__name__}"
                )
            if not callable(getattr(curriculum, "apply_sync_state", None)):
                raise CurriculumConfigError(
                    f"Expected a curriculum with apply_sync_state() to follow `stage_source`, "
                    f"received {type(curriculum).__name__}"
                )
        self.curriculum = curriculum
        self.local_tracking = local_tracking
        self.recorder = CompletionRecorder(curriculum, stats_interval=stats_interval) if local_tracking else None
        self.score_fn = score_fn
        self.stage_source = stage_source
        self.episodes = 0
        self.desync_truncations = 0
        self._get_task = curriculum.get_task
        self._staged = getattr(curriculum, "stage", None) is not None
        self._seen_version: int | None = None
        self._stage_changes = 0
        self.settled_entries: dict[str, Any] | None = None
        score_range = getattr(getattr(curriculum, "config", None), "score_range", None)
        self._score_low, self._score_high = score_range if score_range is not None else (-np.inf, np.inf)

    def draw_task(self) -> Any:
        """The next task, drawn after adopting the latest broadcast stage."""
        source = self.stage_source
        if source is not None and source.version != self._seen_version:
            version = source.version
            sync = source.read()
            if sync is not None:
                self.curriculum.apply_sync_state(sync)
                self._stage_changes = int(sync["stage_changes"])
            self._seen_version = version
        return self._get_task()

    def score(self, task: Any, episode_returns: np.ndarray) -> float:
        """The episode's score: the mean return or `score_fn(returns)`, a real number in range."""
        score_fn = self.score_fn
        if score_fn is None:
            score = float(episode_returns.mean())
        else:
            value = score_fn(episode_returns)
            score = _real_or_none(value)
            if score is None:
                raise InvalidScoreError(
                    f"Expected score_fn to return a real number in the curriculum's score_range "
                    f"[{self._score_low}, {self._score_high}] for task {task.task_id} ({task.label!r}), received "
                    f"{value!r} of type {type(value).__name__} for episode returns {episode_returns.tolist()}"
                )
        if not self._score_low <= score <= self._score_high:
            raise InvalidScoreError(
                f"Episode score {score!r} of task {task.task_id} ({task.label!r}) is outside the curriculum's "
                f"score_range [{self._score_low}, {self._score_high}]; pass score_fn= to map episode returns "
                f"{episode_returns.tolist()} into it"
            )
        return score

    def settle(self, task: Any, episode_returns: np.ndarray, *, desync: bool) -> dict[str, Any]:
        """Score and record the ended episode of `task`; its info entries.

        Raises before anything is counted when the episode cannot be scored or recorded, so a
        failed episode end is never counted, and never twice.
        """
        label = task.label
        entries: dict[str, Any] = {
            stat_key(EPISODES): 1,
            stat_key(PER_LABEL_SAMPLES, label): 1,
            stat_key(TASK_ID): task.task_id,
            stat_key(DESYNC_TRUNCATIONS): int(desync),
        }
        if desync:
            self.desync_truncations += 1
        else:
            score = self.score(task, episode_returns)
            entries[stat_key(SCORE)] = score
            if self.recorder is not None:
                entries.update(self.recorder.record(task.task_id, label, score))
            else:
                entries[COMPLETION_INFO_KEY] = {
                    "task_id": task.task_id,
                    "label": label,
                    "score": score,
                    "stage_changes": self._stage_changes,
                }
        self.episodes += 1
        return entries

    def draw_next_task(self, entries: dict[str, Any]) -> Any:
        """The task of the next episode; adds the stage it was drawn at to the ended episode's `entries`."""
        task = self.draw_task()
        if self._staged:
            entries[stat_key(STAGE)] = self.curriculum.stage
        return task

    def end_episode(self, task: Any, episode_returns: np.ndarray, *, desync: bool) -> tuple[Any, dict[str, Any]]:
        """`settle` the episode of `task`, then draw the next task: (next task, info entries).

        While the draw runs, `settled_entries` holds the settled episode's entries, so a
        wrapper can still return them if the draw raises.
        """
        entries = self.settle(task, episode_returns, desync=desync)
        self.settled_entries = entries
        next_task = self.draw_next_task(entries)
        self.settled_entries = None
        return next_task, entries


def _real_or_none(value: Any) -> float | None:
    if isinstance(value, Real) and not isinstance(value, bool):
        try:
            return float(value)
        except (OverflowError, TypeError, ValueError):
            return None
    return None


def _with_entries(infos: Any, entries: Mapping[str, Any]) -> list[Any] | dict[str, Any]:
    """The step's infos with the curriculum entries: a dict stays a dict (entries added), a
    list gets them merged into its last dict (or appended as a new one)."""
    if isinstance(infos, Mapping):
        return {**infos, **entries}
    merged = list(infos or ())
    if merged and isinstance(merged[-1], Mapping):
        merged[-1] = {**merged[-1], **entries}
    else:
        merged.append(dict(entries))
    return merged


def _with_reset_infos(infos: list[Any] | dict[str, Any], reset_infos: Any) -> list[Any] | dict[str, Any]:
    """`infos` plus what the env's reset returned: appended to a list, added under new keys to a dict."""
    if not reset_infos:
        return infos
    extra = [reset_infos] if isinstance(reset_infos, Mapping) else list(reset_infos)
    if isinstance(infos, dict):
        for info in extra:
            if isinstance(info, Mapping):
                for key, value in info.items():
                    infos.setdefault(key, value)
        return infos
    infos.extend(dict(info) if isinstance(info, Mapping) else info for info in extra)
    return infos


class EpisodeCounters:
    """What both wrappers share: the curriculum side of their episodes (`_EpisodeAccounting`)
    and the episode counters read from it."""

    _accounting: _EpisodeAccounting

    def _bind_curriculum(
        self,
        curriculum: Any,
        *,
        seed: int | None,
        score_fn: ScoreFn | None,
        local_tracking: bool,
        stats_interval: int,
        stage_source: StageSource | None,
        in_vector: bool = False,
    ) -> None:
        """Set up the episode accounting and give this process its own sampling stream
        (`in_vector`: the env was built with a vector's buffer slice)."""
        _check_seed(seed)
        self._accounting = _EpisodeAccounting(
            curriculum,
            local_tracking=local_tracking,
            score_fn=score_fn,
            stats_interval=stats_interval,
            stage_source=stage_source,
        )
        self.curriculum = curriculum
        if seed is not None:
            _reseed_once_per_process(curriculum, seed, in_vector=in_vector)

    @property
    def episodes(self) -> int:
        """Episodes ended and settled (reported or not); abandoned and failed ones are not counted."""
        return self._accounting.episodes

    @property
    def desync_truncations(self) -> int:
        """Episodes cut by a desync truncation (never reported to the curriculum)."""
        return self._accounting.desync_truncations

    @property
    def completions(self) -> int:
        """Episodes reported to the curriculum by this wrapper (local tracking; else 0)."""
        recorder = self._accounting.recorder
        return recorder.completions if recorder is not None else 0

    @property
    def late_completions(self) -> int:
        """Of those, the ones the curriculum refused as late."""
        recorder = self._accounting.recorder
        return recorder.late_completions if recorder is not None else 0


def _flag_words(flags: np.ndarray) -> memoryview:
    """A view whose items are non-zero exactly when some agent's flag is set: the buffer's
    bytes read as the widest machine words that tile it (integer and bool flags), so the flags
    of 1, 2, 4 or 8 agents are one read; else the flags themselves."""
    if flags.dtype.kind in "biu" and flags.flags.c_contiguous:
        for word, size in (("Q", 8), ("I", 4), ("H", 2), ("B", 1)):
            if flags.nbytes % size == 0:
                return memoryview(flags).cast("B").cast(word)
    return memoryview(flags)


StepResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]


class CurriculumEnv(EpisodeCounters, pufferlib.PufferEnv):
    """Wraps a native `PufferEnv`: one curriculum task per episode, auto-reset, stats in infos.

    Args:
        env: the env to wrap; it must have `set_env_config(env_cfg)` (applied at its next
            reset), the PufferEnv spaces and `num_agents`, and write into its buffers in place
            (`rewards`, `terminals`, `truncations` of shape `(num_agents,)`). An env off the
            vector's buffers is refused when built; one that rebinds a buffer later, at the
            next episode end or reset (a rebound `terminals` hides the episode ends themselves:
            the per-step path reads the vector's buffers and checks nothing, to stay cheap).
        curriculum: a `Curriculum` (or any object with `get_task`, `update_task_performance`
            and `stats`).
        seed: reseeds the curriculum handle once per process (the first env built over it in
            a process does), so worker processes draw different task sequences.
        score_fn: maps the episode's per-agent returns to a score in the curriculum's
            `score_range`; default: their mean.
        local_tracking: record completions here (`update_task_performance`); False reports
            them in the infos for a main-process recorder (centralized tracking).
        stats_interval: completions between two reports of the pool-wide `curriculum.stats()`.
        stage_source: with `local_tracking=False`, the main process's stage broadcast the
            curriculum copy follows before each task draw.
        buf: the buffer slice pufferlib's vector handed the env creator; when given, the
            wrapper checks that `env` really writes into it.

    The module docstring states the reset, agent, truncation, score, stats and failure policies.
    """

    def __init__(
        self,
        env: Any,
        curriculum: Any,
        *,
        seed: int | None = None,
        score_fn: ScoreFn | None = None,
        local_tracking: bool = True,
        stats_interval: int = DEFAULT_STATS_INTERVAL,
        stage_source: StageSource | None = None,
        buf: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        # PufferEnv.__init__ is not called on purpose: it would allocate or rebind buffers,
        # while the wrapper forwards the wrapped env's own buffers (below, as properties).
        self._check_env(env, buf)
        self.env = env
        self._bind_curriculum(curriculum, seed=seed, score_fn=score_fn, local_tracking=local_tracking,
                              stats_interval=stats_interval, stage_source=stage_source, in_vector=buf is not None)
        n = int(env.num_agents)
        self._num_agents = n
        self._env_step = env.step
        self._env_reset = env.reset
        self._set_env_config = env.set_env_config
        self._bind_buffers()
        self._task: Any = None
        self._phase = _NOT_STARTED
        self._not_started = "CurriculumEnv.step() called before reset(); call reset() once before the first step " \
                            "(later episodes start automatically)"
        self._return = 0.0
        self._returns = np.zeros(n, dtype=np.float64)
        self._post_reset_rewards: np.ndarray | None = None
        self._active: np.ndarray | None = None  # while latched: agents not done yet
        self._done_returns: np.ndarray | None = None  # while latched: env-reported returns at each done step
        self._desync = False  # while latched: an agent was cut by a desync truncation
        self._pending_task: Any = None  # drawn for an episode whose start failed
        self._pending_infos: tuple[Any, dict[str, Any]] | None = None  # an ended episode's, not returned yet
        episode_rewards = getattr(env, "get_episode_rewards", None)
        self._episode_rewards = episode_rewards if callable(episode_rewards) else None
        # The step variant is picked once, here, so the hot path never branches on it.
        self._mean_only = score_fn is None and n > 1  # the default score needs only the total
        one_word = len(self._terminal_words) == 1 and len(self._truncation_words) == 1
        if self._episode_rewards is not None:
            fast_step = self._step_env_returns if one_word else self._step_env_returns_any_word
        elif n == 1:
            fast_step = self._step_one_agent
        elif self._mean_only:
            fast_step = self._step_total_return if one_word else self._step_total_return_any_word
        else:
            fast_step = self._step_agent_returns
        self._fast_step = fast_step
        self.step = fast_step

    # ---- construction checks -----------------------------------------------------------------
    @staticmethod
    def _check_env(env: Any, buf: Mapping[str, np.ndarray] | None) -> None:
        missing = [name for name in _REQUIRED_ENV_ATTRIBUTES if not hasattr(env, name)]
        if missing:
            raise EnvContractError(
                f"Expected a PufferEnv to wrap, received {type(env).__name__} without {', '.join(missing)}"
            )
        if not callable(getattr(env, "set_env_config", None)):
            raise EnvContractError(
                f"{type(env).__name__} has no set_env_config(env_cfg) method; CurriculumEnv applies each task's "
                "env config through it before the reset that starts the task's episode"
            )
        n = env.num_agents
        if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:
            raise AgentCountError(f"Expected {type(env).__name__}.num_agents to be an integer >= 1, received {n!r}")
        for name in BUFFER_NAMES:
            rows = np.shape(getattr(env, name))[:1]
            if rows != (n,):
                raise AgentCountError(
                    f"{type(env).__name__}.num_agents is {n} but its `{name}` buffer has shape "
                    f"{np.shape(getattr(env, name))}; set num_agents before super().__init__(buf)"
                )
        for name in _PER_AGENT_BUFFERS:
            array = getattr(env, name)
            if not (isinstance(array, np.ndarray) and array.shape == (n,) and array.dtype.kind in "biuf"):
                raise EnvContractError(
                    f"Expected {type(env).__name__}.{name} to be a numeric numpy array of shape ({n},), one number "
                    f"per agent, received {type(array).__name__} of shape {np.shape(array)} and dtype "
                    f"{getattr(array, 'dtype', None)}"
                )
        if buf is None:
            return
        if not isinstance(buf, Mapping):
            raise EnvContractError(f"Expected `buf` to be None or the vector's dict of buffers, received {buf!r}")
        for name in BUFFER_NAMES:
            given = buf.get(name)
            if given is None:
                continue
            if len(given) != n:
                raise AgentCountError(
                    f"The vector's `{name}` buffer slice holds {len(given)} agents but {type(env).__name__} has "
                    f"num_agents={n}; every env of one vector must have the driver env's agent count"
                )
            if not np.shares_memory(getattr(env, name), given):
                raise EnvContractError(
                    f"{type(env).__name__} does not write into the vector's `{name}` buffer; pass buf=buf to its "
                    "constructor in the env creator"
                )

    def _bind_buffers(self) -> None:
        env = self.env
        self._rewards = env.rewards
        self._terminals = env.terminals
        self._truncations = env.truncations
        self._reward_view = memoryview(env.rewards)
        self._terminal_words = _flag_words(env.terminals)
        self._truncation_words = _flag_words(env.truncations)

    def _check_buffers_in_place(self) -> None:
        env = self.env
        if env.rewards is not self._rewards or env.terminals is not self._terminals \
                or env.truncations is not self._truncations:
            raise EnvContractError(
                f"{type(env).__name__} replaced its rewards/terminals/truncations buffers; a PufferEnv must write "
                "into the buffers it was given (array[...] = value), never rebind them"
            )

    # ---- explicit delegation -----------------------------------------------------------------
    @property
    def single_observation_space(self) -> Any:
        return self.env.single_observation_space

    @property
    def single_action_space(self) -> Any:
        return self.env.single_action_space

    @property
    def observation_space(self) -> Any:
        return self.env.observation_space

    @property
    def action_space(self) -> Any:
        return self.env.action_space

    @property
    def num_agents(self) -> int:
        return self._num_agents

    @property
    def observations(self) -> np.ndarray:
        return self.env.observations

    @property
    def rewards(self) -> np.ndarray:
        return self.env.rewards

    @property
    def terminals(self) -> np.ndarray:
        return self.env.terminals

    @property
    def truncations(self) -> np.ndarray:
        return self.env.truncations

    @property
    def masks(self) -> np.ndarray:
        return self.env.masks

    @property
    def actions(self) -> np.ndarray:
        return self.env.actions

    @property
    def agent_ids(self) -> np.ndarray:
        return self.env.agent_ids

    @property
    def unwrapped(self) -> Any:
        """The innermost env (through any wrappers that define `unwrapped`)."""
        return getattr(self.env, "unwrapped", self.env)

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        """Close the wrapped env (the curriculum belongs to the caller and stays open)."""
        self.env.close()

    # ---- curriculum state --------------------------------------------------------------------
    @property
    def task(self) -> Any:
        """The task of the running episode (None before the first reset)."""
        return self._task

    @property
    def local_tracking(self) -> bool:
        return self._accounting.local_tracking

    # ---- episodes ----------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        """Start an episode (a running one is abandoned, unreported).

        Its task is newly drawn, or the one drawn for an episode whose start failed. The infos
        are the env's, plus those of an ended episode an earlier failure kept from being returned.
        """
        # the running episode is abandoned first: a reset that fails below (its draw included) leaves none
        self._clear_episode(_NOT_STARTED, "CurriculumEnv.step() called after the env's reset raised; call reset()")
        task = self._pending_task
        if task is None:
            task = self._accounting.draw_task()
        self._pending_task = task
        self._set_env_config(task.env_cfg)
        obs, infos = self._env_reset(seed)
        self._check_buffers_in_place()
        self._pending_task = None
        self._task = task
        self._terminals.fill(False)
        self._truncations.fill(False)
        self._phase = _RUNNING
        pending = self._pending_infos
        if pending is not None:
            self._pending_infos = None
            infos = _with_reset_infos(_with_entries(*pending), infos)
        return obs, infos

    def step(self, actions: np.ndarray) -> StepResult:
        """Step the env; at an episode's end, record it and auto-reset with the next task.

        (Per-agent returns summed with numpy, for a `score_fn`; the constructor binds the
        cheapest variant that fits the env as `self.step`.)
        """
        if self._phase:
            return self._slow_step(actions)
        result = self._env_step(actions)
        self._returns += self._rewards
        if any(self._terminal_words) or any(self._truncation_words):
            return self._end_step(result)
        return result

    _step_agent_returns = step

    def _step_one_agent(self, actions: np.ndarray) -> StepResult:
        if self._phase:
            return self._slow_step(actions)
        result = self._env_step(actions)
        self._return += self._reward_view[0]
        if self._terminal_words[0] or self._truncation_words[0]:
            return self._end_step(result)
        return result

    def _step_total_return(self, actions: np.ndarray) -> StepResult:
        if self._phase:
            return self._slow_step(actions)
        result = self._env_step(actions)
        self._return += sum(self._reward_view)  # Python floats: cheaper than a numpy add for few agents
        if self._terminal_words[0] or self._truncation_words[0]:
            return self._end_step(result)
        return result

    def _step_total_return_any_word(self, actions: np.ndarray) -> StepResult:
        if self._phase:
            return self._slow_step(actions)
        result = self._env_step(actions)
        self._return += sum(self._reward_view)
        if any(self._terminal_words) or any(self._truncation_words):
            return self._end_step(result)
        return result

    def _step_env_returns(self, actions: np.ndarray) -> StepResult:
        if self._phase:
            return self._slow_step(actions)
        result = self._env_step(actions)
        if self._terminal_words[0] or self._truncation_words[0]:
            return self._end_step(result)
        return result

    def _step_env_returns_any_word(self, actions: np.ndarray) -> StepResult:
        if self._phase:
            return self._slow_step(actions)
        result = self._env_step(actions)
        if any(self._terminal_words) or any(self._truncation_words):
            return self._end_step(result)
        return result

    def _slow_step(self, actions: np.ndarray) -> StepResult:
        """A step outside the running phase: refused, first of an episode, or latched."""
        phase = self._phase
        if phase == _NOT_STARTED:
            raise EpisodeNotStartedError(self._not_started)
        if phase == _FLAGS_STALE:  # first step after an auto-reset: the env's own buffers back
            self._rewards[...] = self._post_reset_rewards
            self._terminals.fill(False)
            self._truncations.fill(False)
            self._phase = _RUNNING
            return self._fast_step(actions)
        return self._step_latched(actions)

    def _step_latched(self, actions: np.ndarray) -> StepResult:
        """A step while some agents are done: only the others' rewards and flags count."""
        result = self._env_step(actions)
        active = self._active
        if self._episode_rewards is None:
            if self._mean_only:
                self._return += sum(self._rewards[active].tolist())
            else:
                np.add(self._returns, self._rewards, out=self._returns, where=active)
        newly_done = active & np.logical_or(self._terminals, self._truncations)
        if not newly_done.any():
            return result
        self._latch(newly_done, result[4])
        if active.any():
            return result
        return self._finish_episode(result, desync=self._desync)

    def _latch(self, newly_done: np.ndarray, infos: Any) -> None:
        """Mark `newly_done` agents done at this step (their returns end here)."""
        self._active &= ~newly_done
        if not self._desync and self._truncations[newly_done].any():
            self._desync = is_desync_truncation(self.env, infos)
        if self._episode_rewards is not None:
            self._done_returns[newly_done] = self._reported_returns()[newly_done]

    def _end_step(self, result: StepResult) -> StepResult:
        """A step in which some agent's flag is set: the episode ends, or its agents start latching."""
        if self._num_agents > 1:
            done = np.logical_or(self._terminals, self._truncations)
            if not done.all():  # some agents still play
                self._active = np.ones(self._num_agents, dtype=bool)
                self._done_returns = np.zeros(self._num_agents) if self._episode_rewards is not None else None
                self._desync = False
                self._latch(done, result[4])
                self._phase = _LATCHED
                return result
        desync = bool(self._truncations.any()) and is_desync_truncation(self.env, result[4])
        return self._finish_episode(result, desync=desync)

    def _reported_returns(self) -> np.ndarray:
        returns = np.asarray(self._episode_rewards(), dtype=np.float64).reshape(-1)
        if returns.shape != (self._num_agents,):
            raise AgentCountError(
                f"{type(self.env).__name__}.get_episode_rewards() returned {returns.shape[0]} returns for "
                f"num_agents={self._num_agents}"
            )
        return returns

    def _episode_returns(self) -> np.ndarray:
        if self._done_returns is not None:  # latched: each agent's reported return at its done step
            return self._done_returns.copy()
        if self._episode_rewards is not None:
            return self._reported_returns()
        if self._num_agents == 1:
            return np.array([self._return])
        if self._mean_only:  # per-agent returns were not kept; their mean is what gets scored
            return np.full(self._num_agents, self._return / self._num_agents)
        return self._returns.copy()

    def _clear_episode(self, phase: int, not_started: str) -> None:
        """Forget the running episode's returns and latches; enter `phase`."""
        self._return = 0.0
        self._returns.fill(0.0)
        self._active = None
        self._done_returns = None
        self._desync = False
        self._phase = phase
        self._not_started = not_started

    def _keep_ended_episode(self, task: Any, infos: Any, entries: dict[str, Any]) -> None:
        """Hold a settled episode's infos for `reset()` until the auto-reset succeeds."""
        self._pending_infos = (infos, entries)
        self._not_started = (f"CurriculumEnv.step() called after the auto-reset that follows the episode of task "
                             f"{task.task_id} ({task.label!r}) failed; call reset(), which also returns that "
                             "episode's infos")

    def _finish_episode(self, result: StepResult, *, desync: bool) -> StepResult:
        """Settle the ended episode, draw the next task and auto-reset the env onto it."""
        obs, rewards, terminals, truncations, infos = result
        self._check_buffers_in_place()
        returns = self._episode_returns()
        task = self._task
        ended = (self._rewards.copy(), self._terminals.copy(), self._truncations.copy())
        # From here on the episode is over: nothing of it may reach the next one, whatever raises.
        self._clear_episode(_NOT_STARTED, f"CurriculumEnv.step() called after the end of the episode of task "
                                          f"{task.task_id} ({task.label!r}) failed; call reset()")
        accounting = self._accounting
        accounting.settled_entries = None
        try:
            next_task, entries = accounting.end_episode(task, returns, desync=desync)
        except BaseException:
            if accounting.settled_entries is not None:  # settled, then the draw failed
                self._keep_ended_episode(task, infos, accounting.settled_entries)
            raise
        self._keep_ended_episode(task, infos, entries)
        self._pending_task = next_task
        self._set_env_config(next_task.env_cfg)
        obs, reset_infos = self._env_reset()
        self._check_buffers_in_place()
        self._pending_task = None
        self._pending_infos = None
        self._task = next_task
        self._post_reset_rewards = self._rewards.copy()
        self._rewards[...] = ended[0]
        self._terminals[...] = ended[1]
        self._truncations[...] = ended[2]
        self._phase = _FLAGS_STALE
        return obs, self._rewards, self._terminals, self._truncations, _with_reset_infos(
            _with_entries(infos, entries), reset_infos)
