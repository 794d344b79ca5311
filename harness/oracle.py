"""The accounting oracle: every number a curriculum run reports, recomputed from what really ran.

Scenarios check behaviours; the oracle checks arithmetic, always. It keeps its own log of the
run, from sources independent of the code under test, and recomputes from it, with a
deliberately simple reference implementation (plain loops, the formulas written out, nothing
imported from `curriculum`), every number the curriculum and the stats pipeline report:

- The env side: every harness env reports an `EpisodeRecord` (config run, per-agent returns,
  how it ended) at each episode's end (`harness.episodes`). `observe(infos)` pairs each record
  with what the wrapper reported for that episode in the same info dict and checks it: one
  episode, the label of the config that ran, the score the returns give (`score_fn`, default
  the mean over agents), a completion for full episodes (time-limit truncations included) and
  none for desync cuts, and one task (label and config) per task id.
- The pipeline: `epoch(metrics)` recomputes the epoch's `metric/*`, `overview/*` and
  `env_*` metrics from the raw info dicts observed since the previous epoch (counters summed,
  gauges averaged, identifiers dropped, Gini and entropy of the per-label samples) and from the
  env records (episodes, completions, desync cuts, per-label counts, mean score).
- The curriculum side: `watch(curriculum)` returns a recording stand-in for the curriculum
  under test (same methods; use it in place of the curriculum in one process). It logs every
  hand-out and every update, observes the pool after each call, and checks on the spot: each
  handed-out task's config and label against what a private copy of its generator gives its id
  (a config that changed after it was generated, or one of another id), a late
  completion only for a task that left the pool, per-task completion counts, mean and last
  scores against the credited updates, a new task starting from nothing (eviction
  bookkeeping), a task that left the pool never reading its successor's numbers, ids never
  coming back, the config's eviction rules (no task evicted before
  `min_presentations` credited completions, none at all with `eviction_percentile` 0), the
  pool's size (`num_active_tasks`) and its `previous_stage_mix` share of previous-stage tasks,
  the stage against a replay of the staged-progression
  rule, and at every `stats()` call its totals, Gini coefficients, entropy and per-label
  numbers against the reference computed from the oracle's own counts and the pool it sees
  (for uniform and staged progression, whose score of a task is its mean score, each task's
  `task_scores()` entry too).
- `wrapper_counts(where, completions, late_completions)`: a wrapper's own counters against the
  watched curriculum's updates and refusals.
- `verify(curriculum)` ends the run: unpaired records or reports, the order and values of the
  updates against the episodes that produced them (single process), and the curriculum's
  final totals and per-task numbers against the episodes' (any number of processes).

Mismatches name the metric, the oracle's value, the reported value, where, and the seed.
"""

from __future__ import annotations

import copy
import math
import pickle
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, Final

import numpy as np

from harness.episodes import ENDED_DESYNC, ENV_INFO_KEYS, EPISODE_RECORD_KEY, EpisodeRecord, task_identity

__all__ = [
    "AccountingOracle",
    "OracleMismatch",
    "WatchedCurriculum",
    "reference_gini",
    "reference_entropy",
    "mean_return",
    "DRAW_TEST_Z",
]

# The metric names of the stats pipeline, written out here on purpose: the oracle is the
# specification the pipeline is checked against, so it shares no constant with it.
_GROUP: Final = "curriculum_stats"
_EPISODES: Final = f"{_GROUP}/episodes"
_COMPLETIONS: Final = f"{_GROUP}/completions"
_LATE: Final = f"{_GROUP}/late_completions"
_DESYNC: Final = f"{_GROUP}/desync_truncations"
_SCORE: Final = f"{_GROUP}/score"
_TASK_ID: Final = f"{_GROUP}/task_id"
_STAGE: Final = f"{_GROUP}/stage"
_SAMPLES: Final = f"{_GROUP}/per_label_samples/"
_LABEL_COMPLETIONS: Final = f"{_GROUP}/per_label_completions/"
_LABEL_LP: Final = f"{_GROUP}/per_label_lp_scores/"
_COUNTER_PARTS: Final = frozenset({"per_label_samples", "per_label_completions", "episodes", "completions",
                                   "late_completions", "desync_truncations"})
_IDENTIFIER_PARTS: Final = frozenset({"task_id"})
_OVERVIEW: Final = {
    "overview/reward": _SCORE,
    "overview/episodes": _EPISODES,
    "overview/completions": _COMPLETIONS,
    "overview/late_completions": _LATE,
    "overview/desync_truncations": _DESYNC,
    "overview/sampling_entropy_normalized": f"{_GROUP}/sampling_entropy",
    "overview/stage": _STAGE,
}
#: Per-episode keys of a wrapper's report; any other `curriculum_stats/` key is a pool report.
_EPISODE_PARTS: Final = ("episodes", "completions", "late_completions", "desync_truncations", "score", "task_id",
                         "stage", "per_label_samples", "per_label_completions", "per_label_lp_scores")
#: `Curriculum.stats()` keys renamed in the infos, so pool totals do not collide with episode counters.
_POOL_RENAMES: Final = {"late_completions": "total_late_completions", "evictions": "total_evictions",
                        "per_label_lp_scores": "pool_per_label_lp_scores"}

#: Algorithms (their config's `name`) whose per-task score is the task's mean score, normalised
#: by the curriculum's `score_range`: `task_scores()` of these is checked task by task.
_MEAN_SCORED: Final = frozenset({"uniform", "staged_progression"})
_BUILTIN_MODULE: Final = "curriculum.curriculum"
"""Where the built-in curriculum is defined: its `task_scores()` (and its subclasses') follow
`_MEAN_SCORED` and its task ids are its generator's; a plug-in's scores and ids are its own."""

_BOUNDARY: Final = 1e-9
"""A plug-in's staged window mean this close to a threshold is at it: rounding may decide either
way (unless every score since the stage began is a multiple of `_EXACT_UNIT`, whose sums are
exact). The built-in curriculum's rule is exact."""
_EXACT_UNIT: Final = 2.0**-32
_MAX_LISTED: Final = 25
DRAW_TEST_Z: Final = 6.0
"""z-score of the draw test's chi-square above which hand-outs contradict the reported
distribution (one-sided normal tail at 6: about 1e-9)."""
_MIN_DRAWS_TESTED: Final = 200
_LEFT_CHECKED: Final = 32
"""Tasks that left the pool whose numbers are checked at every `stats()` call (the latest ones)."""


class OracleMismatch(AssertionError):
    """Reported numbers disagree with the oracle's recomputation; the message lists each one."""


# ---------------------------------------------------------------------------------- references
def reference_gini(values: Iterable[float]) -> float:
    """Gini coefficient as the mean absolute difference over twice the mean (negatives as 0);
    0 for input holding a non-finite value (a NaN or an infinity of either sign)."""
    values = [float(v) for v in values]
    if not all(math.isfinite(v) for v in values):
        return 0.0
    x = [max(v, 0.0) for v in values]
    n = len(x)
    total = sum(x)
    if n == 0 or total <= 0.0 or not math.isfinite(total):
        return 0.0
    differences = 0.0
    for a in x:
        for b in x:
            differences += abs(a - b)
    return differences / (2.0 * n * total)


def reference_entropy(values: Iterable[float]) -> float:
    """Shannon entropy of the normalised values divided by log(n); 0 for n <= 1, all zeros or
    input holding a non-finite value."""
    values = [float(v) for v in values]
    if not all(math.isfinite(v) for v in values):
        return 0.0
    x = [max(v, 0.0) for v in values]
    n = len(x)
    total = sum(x)
    if n <= 1 or total <= 0.0 or not math.isfinite(total):
        return 0.0
    entropy = 0.0
    for v in x:
        if v > 0.0:
            p = v / total
            entropy -= p * math.log(p)
    return entropy / math.log(n)


_UNIT_RANGED: Final = ("gini", "entropy")
"""Parts of the names of numbers documented to lie in [0, 1] (`curriculum.metrics`)."""


def _in_unit_range(value: Any) -> bool:
    try:
        return 0.0 <= float(value) <= 1.0
    except (TypeError, ValueError):
        return False


def mean_return(returns: Sequence[float]) -> float:
    """The default episode score: the mean of the agents' returns."""
    return sum(returns) / len(returns)


def _number(value: Any) -> float | None:
    """A plain number from an info value, as the pipeline counts it (lists and arrays by their mean)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if hasattr(value, "dtype") and hasattr(value, "tolist"):  # numpy scalars and arrays
        value = value.tolist()
        if isinstance(value, (bool, int, float)):
            return float(value)
    if isinstance(value, (list, tuple)) and value and all(_number(v) is not None for v in value):
        return sum(_number(v) for v in value) / len(value)  # type: ignore[misc]
    return None


def _flatten(info: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _is_counter(key: str) -> bool:
    return any(part in _COUNTER_PARTS for part in key.split("/"))


def _raw_key(metric: str) -> str:
    """The stat key an epoch metric reduces (`env_<key>`, or an overview metric's source)."""
    return _OVERVIEW.get(metric, metric.removeprefix("env_"))


def _close(a: float, b: float, *, tolerance: float) -> bool:
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)


# ---------------------------------------------------------------------------------- episodes
@dataclass
class _Episode:
    record: EpisodeRecord
    claims: dict[str, Any]
    score: float | None
    """The reference score (None for a desync cut)."""

    @property
    def desync(self) -> bool:
        return self.record.ended == ENDED_DESYNC

    @property
    def task_id(self) -> Any:
        return self.claims.get(_TASK_ID)

    @property
    def late(self) -> bool:
        return bool(self.claims.get(_LATE, 0))

    @property
    def pool_report(self) -> bool:
        """Whether the episode's info carries a pool-wide report (every `stats_interval` completions)."""
        return any(k.startswith(f"{_GROUP}/") and k[len(_GROUP) + 1:].split("/", 1)[0] not in _EPISODE_PARTS
                   for k in self.claims)

    def where(self) -> str:
        r = self.record
        return f"episode {r.index} of env {r.env} ({r.identity})"


@dataclass
class _StagedReference:
    """The staged-progression rule replayed on the credited completions (single process)."""

    stage_of_label: dict[str, int]
    threshold: float
    regression: float | None
    min_episodes: int
    window: int
    last: int
    stage: int = 0
    episodes: int = 0
    scores: deque = field(default_factory=deque)
    advancements: int = 0
    regressions: int = 0
    before: tuple[int, deque, bool] = (0, deque(), False)
    """Episodes, window and `inexact` before the last credited completion."""
    at_boundary: bool = False
    """The last credited completion left the window mean within `_BOUNDARY` of a threshold
    after a score whose sums can round: a running sum's rounding may decide either way, so the
    curriculum's move is followed. With exactly summable scores a mean at a threshold is at it
    (advancing at `>=`, regressing below)."""
    inexact: bool = False
    """A score since the stage began is not a small multiple of `_EXACT_UNIT`."""
    adopted: int = 0
    """Stage changes decided elsewhere: a broadcast stage adopted sets the count of changes."""
    score_range: tuple[float, float] | None = None
    """The built-in curriculum's: its rule is exact (module docstring of
    `curriculum.algorithms.staged`: a stage moves on the window's scores, normalised by this
    range, summed exactly near a threshold), so its move is never taken on trust."""

    @classmethod
    def from_config(cls, algorithm: Any, score_range: tuple[float, float] | None = None) -> _StagedReference:
        labels = {}
        for index, stage in enumerate(algorithm.stages):
            for label in stage.task_generator.labels:
                labels.setdefault(label, index)
        return cls(labels, algorithm.advancement_threshold, algorithm.regression_threshold,
                   algorithm.min_episodes, algorithm.window, len(algorithm.stages) - 1, score_range=score_range)

    def credit(self, label: str, score: float, *, decide: bool = True) -> None:
        """One credited completion; `decide=False`: counted in the window, no stage move."""
        self.at_boundary = False
        if self.stage_of_label.get(label) != self.stage:
            return  # a previous-stage task (mixed slots) does not count towards this stage
        if self.score_range is not None:
            low, high = self.score_range
            score = (score - low) / (high - low)
        self.before = (self.episodes, deque(self.scores), self.inexact)
        self.episodes += 1
        self.scores.append(score)
        self.inexact = self.inexact or not (abs(score) < 2.0**20 and (score / _EXACT_UNIT).is_integer())
        if len(self.scores) > self.window:
            self.scores.popleft()
        if self.episodes < self.min_episodes or not decide:
            return
        if self.score_range is not None:
            mean = math.fsum(self.scores) / len(self.scores)
        else:  # a plug-in's own arithmetic may round either way at a threshold
            mean = sum(self.scores) / len(self.scores)
            self.at_boundary = self.inexact and any(abs(mean - t) <= _BOUNDARY
                                                    for t in (self.threshold, self.regression) if t is not None)
        if self.stage < self.last and mean >= self.threshold:
            self._move(+1)
            self.advancements += 1
        elif self.regression is not None and self.stage > 0 and mean < self.regression:
            self._move(-1)
            self.regressions += 1

    def _move(self, step: int) -> None:
        self.stage += step
        self.episodes = 0
        self.scores.clear()
        self.inexact = False

    def adopt(self, stage: int, stage_changes: int) -> None:
        """A stage broadcast by the main curriculum: entered afresh, as the main entered it."""
        self._move(stage - self.stage)
        self.adopted = stage_changes - self.advancements - self.regressions

    def stats(self) -> dict[str, float]:
        return {"stage": self.stage, "stage_changes": self.adopted + self.advancements + self.regressions,
                "stage_episodes": self.episodes, "advancements": self.advancements, "regressions": self.regressions,
                "stage_window_mean": sum(self.scores) / len(self.scores) if self.scores else 0.0}


# ---------------------------------------------------------------------------------- oracle
class AccountingOracle:
    """Recomputes a run's numbers from an independent log and collects every disagreement.

    Args:
        seed: named in every mismatch message.
        score_fn: the reference score of an episode from its per-agent returns (default: mean).
        context: a short tag for messages (e.g. "Serial/shared").
        tolerance: relative and absolute tolerance for floats (counts are compared exactly).
        info_keys: top-level info keys that envs or wrappers outside the curriculum's write
            (beyond the harness envs' `ENV_INFO_KEYS`), e.g. gymnasium's `episode`. Any other
            key besides `curriculum_stats` is something the wrapper left in the user's infos.
    """

    def __init__(self, *, seed: int, score_fn: Callable[[Sequence[float]], float] | None = None,
                 context: str = "", tolerance: float = 1e-9, info_keys: Iterable[str] = ()) -> None:
        self.seed = seed
        self.info_keys = frozenset((*ENV_INFO_KEYS, EPISODE_RECORD_KEY, _GROUP, *info_keys))
        self.score_fn = score_fn if score_fn is not None else mean_return
        self.context = context
        self.tolerance = tolerance
        self.verified = False
        self.mismatches: list[str] = []
        self.episodes: list[_Episode] = []
        """Every paired episode, in the order observed."""
        self._epoch_infos: list[dict[str, Any]] = []
        self._epoch_episodes: list[_Episode] = []
        self._epochs = 0
        self._unpaired: list[EpisodeRecord] = []
        self._task_of_id: dict[Any, str] = {}
        self._watched: WatchedCurriculum | None = None
        self.pool_reports: list[dict[str, Any]] = []
        """Pool-wide numbers reported in the infos (`curriculum_stats/<key>` without the group), in order."""

    # ---- reporting ---------------------------------------------------------------------------
    def mismatch(self, message: str) -> None:
        """Record one disagreement (the run goes on; `verify` raises with all of them)."""
        self.mismatches.append(message)

    def _compare(self, what: str, oracle: Any, reported: Any, where: str, *, exact: bool = False) -> None:
        """Counts compare exactly (`exact`), other numbers within the tolerance; a Gini
        coefficient or a normalised entropy must also lie in [0, 1], its documented range, not
        only near the oracle's number (a uniform entropy that rounds to 1 + 2e-16 is out)."""
        if reported is None:
            self.mismatch(f"{what} {where}: oracle {oracle!r}, reported nothing")
            return
        if any(part in what for part in _UNIT_RANGED) and not _in_unit_range(reported):
            self.mismatch(f"{what} {where}: reported {reported!r}, outside [0, 1] (oracle {oracle!r})")
            return
        if exact:
            ok = reported == oracle
        else:
            try:
                ok = _close(float(oracle), float(reported), tolerance=self.tolerance)
            except (TypeError, ValueError):
                ok = False
        if not ok:
            self.mismatch(f"{what} {where}: oracle {oracle!r}, reported {reported!r}")

    # ---- the env side ------------------------------------------------------------------------
    def observe(self, infos: Iterable[Any] | Mapping[str, Any]) -> None:
        """Take one step's infos (a vec step's list, or one dict): pair and check its episodes."""
        dicts = [infos] if isinstance(infos, Mapping) else list(infos)
        for info in dicts:
            if not isinstance(info, Mapping):  # (a dict flattened into its keys: each key a bare string)
                self.mismatch(f"the trainer received {type(info).__name__} {str(info)[:40]!r} among a step's or "
                              "reset's infos, where only info dicts belong")
                continue
            foreign = [key for key in info if key not in self.info_keys
                       and not (isinstance(key, str) and key.startswith(f"{_GROUP}/"))]
            if foreign:
                self.mismatch(f"the wrapper reported {sorted(map(str, foreign))} in an info dict the user receives, "
                              f"keys no env wrote: only the env's own keys and {_GROUP}/* belong there (a key "
                              "the wrapper uses internally left in?)")
            flat = _flatten({k: v for k, v in info.items() if k != EPISODE_RECORD_KEY})
            self._epoch_infos.append(flat)
            record = info.get(EPISODE_RECORD_KEY)
            claims = {k: v for k, v in flat.items() if k.startswith(f"{_GROUP}/")}
            unlogged = {k: v for k, v in claims.items() if v is None}
            if unlogged:
                self.mismatch(f"the wrapper reported {unlogged} in an info dict: every {_GROUP}/* entry holds a value "
                              "a logger can take (an entry left for a curriculum that has no such number?)")
            pool = {k[len(_GROUP) + 1:]: v for k, v in claims.items()
                    if k[len(_GROUP) + 1:].split("/", 1)[0] not in _EPISODE_PARTS}
            if pool:
                self.pool_reports.append(pool)
            if record is not None:
                self._unpaired.append(record)
                self._check_env_numbers(record, flat)
            if _EPISODES in claims:
                if not self._unpaired:
                    self.mismatch(f"the wrapper reported an episode (task id {claims.get(_TASK_ID)!r}) that no env ran "
                                  f"(info keys {sorted(claims)})")
                    continue
                self._add_episode(self._unpaired.pop(0), claims)
        for record in self._unpaired:
            self.mismatch(f"episode {record.index} of env {record.env} ({record.identity}) ended but the wrapper "
                          "reported no episode for it")
        self._unpaired.clear()

    def _check_env_numbers(self, record: EpisodeRecord, flat: Mapping[str, Any]) -> None:
        """The env's own numbers in the info that ended an episode reach the user unchanged."""
        where = f"episode {record.index} of env {record.env} ({record.identity})"
        for key, value in _flatten(record.reported).items():
            if key not in flat:
                self.mismatch(f"the env's info {key!r} of {where} was dropped on its way to the user "
                              f"(env reported {value!r})")
                continue
            reached = flat[key]
            sent, got = _number(value), _number(reached)
            if not (reached == value if sent is None or got is None else _close(sent, got, tolerance=self.tolerance)):
                self.mismatch(f"the env's info {key!r} of {where} reached the user as {reached!r}, the env reported "
                              f"{value!r}: a wrapper overwrote it (with the next episode's reset info?)")

    def _add_episode(self, record: EpisodeRecord, claims: dict[str, Any]) -> None:
        score = None if record.ended == ENDED_DESYNC else float(self.score_fn(record.returns))
        episode = _Episode(record, claims, score)
        self.episodes.append(episode)
        self._epoch_episodes.append(episode)
        where = episode.where()
        self._compare("episodes reported for", 1, claims.get(_EPISODES), where, exact=True)
        labels = {k[len(_SAMPLES):]: v for k, v in claims.items() if k.startswith(_SAMPLES)}
        if record.label is not None and labels != {record.label: 1}:
            self.mismatch(f"per_label_samples for {where}: oracle {{{record.label!r}: 1}}, reported {labels}")
        self._compare("desync_truncations for", int(episode.desync), claims.get(_DESYNC), where, exact=True)
        completions = claims.get(_COMPLETIONS, 0)
        if episode.desync:
            if completions or _SCORE in claims:
                self.mismatch(f"a desync-truncated partial episode was fed to the curriculum: {where} reported "
                              f"completions={completions!r}, score={claims.get(_SCORE)!r}")
        else:
            if completions != 1 or _SCORE not in claims:
                self.mismatch(f"a full episode ({record.ended}) was not recorded as a completion: {where} reported "
                              f"completions={completions!r}, score={claims.get(_SCORE)!r}")
            else:
                self._compare("score of", score, claims.get(_SCORE), f"{where} (returns {list(record.returns)})")
            label_completions = {k[len(_LABEL_COMPLETIONS):]: v for k, v in claims.items()
                                 if k.startswith(_LABEL_COMPLETIONS)}
            if record.label is not None and completions == 1 and label_completions != {record.label: 1}:
                self.mismatch(f"per_label_completions for {where}: oracle {{{record.label!r}: 1}}, "
                              f"reported {label_completions}")
            if claims.get(_LATE, 0) not in (0, 1):
                self.mismatch(f"late_completions for {where}: expected 0 or 1, reported {claims.get(_LATE)!r}")
        task_id = claims.get(_TASK_ID)
        if task_id is not None:
            known = self._task_of_id.setdefault(task_id, record.identity)
            if known != record.identity:
                self.mismatch(f"task id {task_id} was reported for {where}, but earlier for {known}: an episode was "
                              "credited to the wrong task, or one id names two tasks")

    # ---- the pipeline ------------------------------------------------------------------------
    def epoch(self, metrics: Mapping[str, Any], *, agent_step: int | None = None,
              ignore: Callable[[str], bool] | None = None) -> None:
        """Check one epoch's metrics against the infos and episodes observed since the last one.

        `agent_step` is the value `metric/agent_step` must have (default: every episode observed
        so far, the harness runners' meaning); `ignore(key)` skips metrics the caller added.
        """
        epoch = self._epochs
        where = f"in epoch {epoch}"
        reference = self._reference_metrics(self._epoch_infos)
        expected_step = agent_step if agent_step is not None else len(self.episodes)
        reference["metric/agent_step"] = expected_step
        reference["metric/epoch"] = epoch
        skip = ignore or (lambda key: False)
        for key in sorted(set(reference) | set(metrics)):
            if skip(key) or key.startswith("losses/"):
                continue
            if key not in metrics:
                self.mismatch(f"{key} {where}: oracle {reference[key]!r}, reported nothing")
            elif key not in reference:
                self.mismatch(f"{key} {where}: reported {metrics[key]!r}, but no info of the epoch holds it")
            elif not (_is_counter(_raw_key(key)) or key.startswith("metric/")) and type(metrics[key]) is not float:
                self.mismatch(f"{key} {where}: reported {metrics[key]!r} ({type(metrics[key]).__name__}); a gauge is "
                              f"a mean, a plain float, also of a single sample (oracle {reference[key]!r})")
            elif _is_counter(_raw_key(key)) and type(metrics[key]) is not type(reference[key]):
                self.mismatch(f"{key} {where}: reported {metrics[key]!r} ({type(metrics[key]).__name__}); a counter is "
                              f"an int when every report of it is a whole number, else a float (oracle "
                              f"{reference[key]!r})")
            else:
                self._compare(key, reference[key], metrics[key], where, exact=_is_counter(key) or key.startswith("metric/"))
        self._check_epoch_episodes(metrics, where)
        self._epoch_infos = []
        self._epoch_episodes = []
        self._epochs += 1

    def _whole_run_epoch(self) -> None:
        """The stats pipeline (`curriculum.stats`, under test like the rest) over every info the
        run observed, as one epoch, checked like `epoch`: every run under the oracle checks the
        pipeline on its own shapes of infos (desync cuts, many agents, worker processes, ...)."""
        from curriculum.stats import accumulate_rollout_stats, process_training_stats

        raw: dict[str, list[float]] = defaultdict(list)
        accumulate_rollout_stats(self._epoch_infos, raw)
        self.epoch(process_training_stats(raw, agent_step=len(self.episodes), epoch=0))

    def _reference_metrics(self, infos: list[dict[str, Any]]) -> dict[str, Any]:
        values: dict[str, list[float]] = defaultdict(list)
        fractional: set[str] = set()  # keys with a report that is no whole number (a float, a list, an array)
        for flat in infos:
            for key, raw in flat.items():
                number = _number(raw)
                if number is not None:
                    values[key].append(number)
                    if not isinstance(raw, (Integral, np.bool_)):  # (a bool and a numpy int are Integral; a 0-d array is not)
                        fractional.add(key)
        reduced: dict[str, float] = {}
        for key, seen in values.items():
            if key.rsplit("/", 1)[-1] in _IDENTIFIER_PARTS:
                continue
            if _is_counter(key):  # an int when every report is a whole number (documented), else a float
                reduced[key] = math.fsum(seen) if key in fractional else int(sum(seen))
            else:
                reduced[key] = math.fsum(seen) / len(seen)
        out: dict[str, Any] = {f"env_{key}": value for key, value in reduced.items()}
        for name, key in _OVERVIEW.items():
            if key in reduced:
                out[name] = reduced[key]
        samples = [value for key, value in sorted(reduced.items()) if key.startswith(_SAMPLES)]
        if samples:
            out["overview/label_sampling_gini"] = reference_gini(samples)
            out["overview/label_sampling_entropy"] = reference_entropy(samples)
        return out

    def _check_epoch_episodes(self, metrics: Mapping[str, Any], where: str) -> None:
        episodes = self._epoch_episodes
        full = [e for e in episodes if not e.desync]
        truth = {
            "episodes": len(episodes),
            "desync_truncations": len(episodes) - len(full),
            "completions": len(full),
        }
        for name, value in truth.items():
            reported = metrics.get(f"env_{_GROUP}/{name}", 0 if value == 0 else None)
            self._compare(f"{name} (env records)", value, reported, where, exact=True)
        if full:
            self._compare("mean score (env records)", math.fsum(e.score for e in full) / len(full),
                          metrics.get(f"env_{_SCORE}"), where)
        by_label = Counter(e.record.label for e in episodes if e.record.label is not None)
        for label, count in by_label.items():
            self._compare(f"per_label_samples/{label} (env records)", count,
                          metrics.get(f"env_{_SAMPLES}{label}"), where, exact=True)

    # ---- the curriculum side -----------------------------------------------------------------
    def watch(self, curriculum: Any) -> WatchedCurriculum:
        """A recording stand-in for `curriculum` (use it in its place, in this process)."""
        if self._watched is not None:
            raise ValueError("Expected one curriculum per oracle, but this oracle already watches one")
        self._watched = WatchedCurriculum(curriculum, self)
        if callable(getattr(curriculum, "stats", None)):
            self._watched.stats()  # a fresh pool's numbers (nothing recorded, nothing drawn) are checked too
        return self._watched

    def wrapper_counts(self, where: str, completions: int, late_completions: int) -> None:
        """The `completions` and `late_completions` a wrapper (or a set of wrappers, summed)
        counts itself, when every update of the run went through it: the watched curriculum's
        updates and the ones it refused."""
        watched = self._watched
        if watched is None:
            return
        self._compare("completions", watched.total + watched.late, completions, f"counted by {where}", exact=True)
        self._compare("late_completions", watched.late, late_completions, f"counted by {where}", exact=True)

    # ---- the end -----------------------------------------------------------------------------
    def verify(self, curriculum: Any = None) -> None:
        """Final checks (see the module docstring); raises `OracleMismatch` listing every disagreement.

        `curriculum` (the one the episodes were recorded into; default the watched one) is
        checked against the episodes' totals; pass it for runs whose wrappers recorded in
        other processes.
        """
        self.verified = True
        if not self._epochs and self._epoch_infos:  # nobody ran the pipeline: run it on everything seen
            self._whole_run_epoch()
        watched = self._watched
        if watched is not None:
            watched._finish()
            self._match_pool_reports(watched.stats_results)
        target = curriculum if curriculum is not None else (watched.inner if watched is not None else None)
        if target is not None and self.episodes:
            self._check_final_state(target, watched)
        if self.mismatches:
            listed = self.mismatches[:_MAX_LISTED]
            more = len(self.mismatches) - len(listed)
            context = f" [{self.context}]" if self.context else ""
            raise OracleMismatch(
                f"accounting oracle{context}, seed {self.seed}: {len(self.mismatches)} reported number(s) disagree "
                "with what ran:\n- " + "\n- ".join(listed) + (f"\n- ... and {more} more" if more else "")
            )

    def _match_pool_reports(self, results: list[dict[str, Any]]) -> None:
        """Each pool report in the infos must be one of the (checked) `stats()` results, in order."""
        position = 0
        for index, report in enumerate(self.pool_reports):
            numbers = {k: v for k, v in report.items() if _number(v) is not None}
            while position < len(results) and not _same_numbers(numbers, results[position], self.tolerance):
                position += 1
            if position == len(results):
                self.mismatch(f"pool report {index} in the infos ({numbers}) matches no stats() result of the "
                              "curriculum at or after the previous report")
                return
            position += 1

    def _check_final_state(self, curriculum: Any, watched: WatchedCurriculum | None) -> None:
        full = [e for e in self.episodes if not e.desync]
        if watched is not None:
            # one process: the updates must be exactly the full episodes, in order
            updates = watched.updates
            if len(updates) != len(full):
                self.mismatch(f"update_task_performance was called {len(updates)} times for {len(full)} full episodes")
            for index, (episode, (task_id, score, result)) in enumerate(zip(full, updates)):
                if episode.task_id is not None and task_id != episode.task_id or not _close(
                        score, episode.score, tolerance=self.tolerance):
                    self.mismatch(f"update {index} recorded task {task_id} with score {score!r}, but {episode.where()} "
                                  f"was reported as task {episode.task_id} with score {episode.score!r}")
                    break
                if bool(episode.claims.get(_LATE, 0)) != (result is False):
                    self.mismatch(f"{episode.where()} was reported late={episode.claims.get(_LATE)!r}, but "
                                  f"update_task_performance returned {result!r}")
                    break
            return
        stats = curriculum.stats() if callable(getattr(curriculum, "stats", None)) else {}
        credited = [e for e in full if not e.late]
        late = len(full) - len(credited)
        where = f"after {len(self.episodes)} episodes ({len(full)} full)"
        if "total_completions" in stats:
            self._compare("stats()['total_completions']", len(credited), stats["total_completions"], where, exact=True)
        if "late_completions" in stats:
            self._compare("stats()['late_completions']", late, stats["late_completions"], where, exact=True)
        by_task: dict[Any, list[float]] = defaultdict(list)
        for episode in credited:
            by_task[episode.task_id].append(episode.score)
        active = getattr(curriculum, "active_tasks", None)
        if callable(active):
            for task in active():  # the order of records across processes is unknown: no last score
                _check_task(self, task, by_task.get(task.task_id, []), where, ordered=False)


def _reference_generators(generator: Any, algorithm: Any) -> dict[str, Any]:
    """Private copies of the generators a curriculum hands tasks out of: its `task_generator`
    (key ""), or each stage's, by the labels it gives (staged progression). Empty when unknown."""
    stages = getattr(algorithm, "stages", None)
    if stages is None:
        return {"": copy.deepcopy(generator)} if callable(getattr(generator, "generate", None)) else {}
    generators: dict[str, Any] = {}
    for stage in stages:
        private = copy.deepcopy(stage.task_generator)
        for label in private.labels:
            generators.setdefault(label, private)
    return generators


def _contains(env_cfg: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    """Every setting of `expected` is in `env_cfg` with its value (nested configs compared the same way)."""
    for key, value in expected.items():
        if key not in env_cfg:
            return False
        held = env_cfg[key]
        if isinstance(value, Mapping) and isinstance(held, Mapping):
            if not _contains(held, value):
                return False
        elif held != value:
            return False
    return True


def _pool_entries(stats: Mapping[str, Any]) -> dict[str, Any]:
    """`stats()` as the wrapper reports it in the infos: flattened, totals renamed."""
    out = {}
    for key, value in _flatten(stats).items():
        head, sep, rest = key.partition("/")
        out[_POOL_RENAMES.get(head, head) + sep + rest] = value
    return out


def _same_numbers(report: Mapping[str, Any], entries: Mapping[str, Any], tolerance: float) -> bool:
    """Whether a pool report holds exactly the numbers of a `stats()` result (keys that share a
    name with per-episode entries, like `stage`, are left out on both sides)."""
    numbers = {k for k, v in entries.items() if _number(v) is not None and k.split("/", 1)[0] not in _EPISODE_PARTS}
    if set(report) != numbers:
        return False
    return all(_close(_number(report[k]), _number(entries[k]), tolerance=tolerance) for k in report)


def _check_task(oracle: AccountingOracle, task: Any, scores: list[float], where: str, *, ordered: bool = True) -> None:
    """A pool task's live numbers against the scores credited to it since it entered the pool
    (`ordered`: in the order they were recorded, so the last score is known too)."""
    name = f"task {task.task_id} ({getattr(task, 'label', '?')!r}) {where}"
    completions = getattr(task, "num_completions", None)
    if completions is not None:
        oracle._compare("num_completions of", len(scores), completions, name, exact=True)
    mean = getattr(task, "mean_score", None)
    if mean is not None:
        oracle._compare("mean_score of", math.fsum(scores) / len(scores) if scores else 0.0, mean, name)
    last = getattr(task, "last_score", None) if ordered else None
    if last is not None:
        oracle._compare("last_score of", scores[-1] if scores else 0.0, last, name)


class WatchedCurriculum:
    """The curriculum under test, with every hand-out, update and `stats()` call checked.

    Methods a curriculum may lack (`active_tasks`, `task_scores`, `get_state`, ...) are looked up
    on the curriculum itself, so a stand-in has exactly the capabilities of what it watches.
    `update_task_performance` answers every other credited completion with None instead of the
    curriculum's own answer: the protocol allows anything but False there (an external curriculum
    returns None), and a wrapper must not count it late.
    """

    def __init__(self, inner: Any, oracle: AccountingOracle) -> None:
        self.inner = inner
        self.oracle = oracle
        self.updates: list[tuple[Any, float, Any]] = []
        self.stats_results: list[dict[str, Any]] = []
        """Every `stats()` result handed out, as the wrapper reports it in the infos."""
        self.credited: dict[Any, list[float]] = defaultdict(list)
        self.handed: Counter = Counter()
        self.expected: Counter = Counter()
        """Per task, the summed probability `sampling_probabilities()` gave it at each hand-out."""
        self.total = 0
        self.late = 0
        self.evictions = 0
        self.identity: dict[Any, tuple[Any, Any]] = {}
        self.pool: dict[Any, Any] | None = None
        self.ever: set[Any] = set()
        self.departed: set[Any] = set()
        self.left: deque = deque(maxlen=_LEFT_CHECKED)
        """The latest task objects that left the pool: a worker may still hold one."""
        algorithm = getattr(getattr(inner, "config", None), "algorithm", None)
        score_range = getattr(getattr(inner, "config", None), "score_range", None)
        builtin = any(cls.__module__ == _BUILTIN_MODULE for cls in type(inner).__mro__)
        self.staged = _StagedReference.from_config(algorithm, score_range if builtin else None) \
            if hasattr(algorithm, "stages") else None
        self.mean_scored = getattr(algorithm, "name", None) in _MEAN_SCORED and score_range is not None and builtin
        self.generators = _reference_generators(getattr(getattr(inner, "config", None), "task_generator", None),
                                                algorithm) if builtin else {}
        """Private copies of the generators, by label ("" for the only one): what each id's task is (the
        built-in curriculum's ids are its generator's; a plug-in may number tasks its own way)."""
        self._observe_pool("at the start")

    def _generated(self, task: Any) -> bool:
        """Whether `task` is what its generator gives its id (True when that cannot be told)."""
        label, env_cfg = getattr(task, "label", None), getattr(task, "env_cfg", None)
        generator = self.generators.get(label, self.generators.get(""))
        if generator is None or not isinstance(env_cfg, Mapping):
            return True
        expected, expected_label = generator.generate(task.task_id)
        return expected_label == label and _contains(env_cfg, expected)

    def __getattr__(self, name: str) -> Any:  # test double: everything not recorded goes to the curriculum
        value = getattr(self.__dict__["inner"], name)
        if name == "apply_sync_state":  # (recorded, where the curriculum has it)
            return self._apply_sync_state
        return value

    def resume(self, restored: Any) -> None:
        """Watch on through `restored`, a curriculum loaded from the watched one's checkpoint
        (the same pool and numbers, in new task objects)."""
        self.inner = restored
        active = getattr(restored, "active_tasks", None)
        if callable(active) and self.pool is not None:
            pool = {task.task_id: task for task in active()}
            if set(pool) != set(self.pool):
                self.oracle.mismatch(f"the curriculum restored from a checkpoint holds {sorted(pool)}, the one "
                                     f"checkpointed {sorted(self.pool)}")
            self.pool = pool

    # ---- recorded calls ----------------------------------------------------------------------
    def get_task(self) -> Any:
        stage_before = self.inner.stage if self.staged is not None else None
        task = self.inner.get_task()
        oracle = self.oracle
        task_id = task.task_id
        env_cfg = getattr(task, "env_cfg", None)
        label = getattr(task, "label", None)
        identity = (label, task_identity(env_cfg, label) if isinstance(env_cfg, Mapping) else None)
        known = self.identity.setdefault(task_id, identity)
        if known != identity:
            oracle.mismatch(f"get_task() handed out task {task_id} as {identity[1]}, earlier as {known[1]}")
        for getter, held in (("get_env_cfg", env_cfg), ("get_label", label)):  # the task protocol's readers
            read = getattr(task, getter, None)
            if callable(read) and read() != held:
                oracle.mismatch(f"task {task_id}'s {getter}() returned {read()!r}, but the task holds {held!r}")
        if not self._generated(task):
            generator = self.generators.get(label, self.generators.get(""))
            expected, expected_label = generator.generate(task_id)
            oracle.mismatch(f"get_task() handed out task {task_id} as {label!r} {dict(env_cfg)!r}; its generator "
                            f"gives that id {expected_label!r} {expected!r} (a task's config changed after it was "
                            "generated, or is another id's)")
        if task_id in self.departed:
            oracle.mismatch(f"get_task() handed out task {task_id}, which had left the pool")
        self._observe_pool(f"after handing out task {task_id}", stage_before=stage_before)
        if self.pool is not None and task_id not in self.pool:
            oracle.mismatch(f"get_task() handed out task {task_id}, which is not in the pool {sorted(self.pool)}")
        self.handed[task_id] += 1
        probabilities = getattr(self.inner, "sampling_probabilities", None)
        if callable(probabilities) and self.pool is not None:
            p = probabilities()
            if len(p) == len(self.pool):  # slot order is pool order: p[i] is the chance of the i-th task
                for slot_task, chance in zip(self.pool, p):
                    self.expected[slot_task] += float(chance)
        return task

    def update_task_performance(self, task_id: Any, score: float) -> Any:
        # an id that is no integer (a bool, a float, a list) names no task; the curriculum must refuse it
        an_id = isinstance(task_id, Integral) and not isinstance(task_id, bool)
        in_pool = None if self.pool is None else an_id and task_id in self.pool
        # the label of a task handed out here, else (a worker copy handed it out) of the pool's task
        label = getattr(self.pool[task_id], "label", None) if in_pool else \
            self.identity.get(task_id, (None,))[0] if an_id else None
        stage_before = self.inner.stage if self.staged is not None else None
        result = self.inner.update_task_performance(task_id, score)  # refused input raises: nothing to log
        oracle = self.oracle
        self.updates.append((task_id, float(score), result))
        late = result is False
        where = f"update {len(self.updates) - 1} (task {task_id}, score {score!r})"
        if in_pool is not None and in_pool == late:
            oracle.mismatch(f"{where} returned {result!r} although the task was {'in' if in_pool else 'not in'} the "
                            "pool: a late completion is exactly one whose task left the pool")
        if late:
            self.late += 1
        else:
            self.total += 1
            self.credited[task_id].append(float(score))
            if self.staged is not None and label is None:
                self.staged = None  # which stage a task belongs to cannot be told: no replay (no pool, not handed out here)
            if self.staged is not None:
                self.staged.credit(label, float(score))
        self._observe_pool(f"after {where}", stage_before=stage_before)
        if self.pool is not None and not late and task_id in self.pool:
            _check_task(oracle, self.pool[task_id], self.credited[task_id], f"after {where}")
        if self.staged is not None:
            stage = self.inner.stage
            if stage != self.staged.stage:
                replayed = self.staged
                if replayed.at_boundary:  # rounding decided at the threshold: the curriculum's move stands
                    replayed.advancements += (stage > stage_before) - (replayed.stage > stage_before)
                    replayed.regressions += (stage < stage_before) - (replayed.stage < stage_before)
                else:
                    oracle.mismatch(f"stage after {where}: oracle {replayed.stage} (the staged rule replayed on the "
                                    f"credited completions: {replayed.stats()}), reported {stage}")
                if replayed.at_boundary and stage == stage_before:  # the curriculum stayed: count it, no move
                    replayed.stage, (replayed.episodes, replayed.scores, replayed.inexact) = stage, replayed.before
                    replayed.credit(label, float(score), decide=False)
                else:
                    replayed.stage = stage  # follow, so one wrong transition is reported once
                    replayed.episodes, replayed.scores, replayed.inexact = 0, deque(), False
        # the protocol: False for a late completion, anything else when credited; every other
        # credited one comes back as None, so code that takes a falsy answer for late shows
        return None if not late and self.total % 2 else result

    def _apply_sync_state(self, sync: Any) -> Any:
        """Adopt a broadcast stage: the staged rule replayed enters it afresh; the pool the
        stage change brings is new tasks, not evictions."""
        stage_before = self.inner.stage if self.staged is not None else None
        changed = self.inner.apply_sync_state(sync)
        if changed and self.staged is not None:
            self.staged.adopt(int(sync["stage"]), int(sync["stage_changes"]))
        self._observe_pool(f"after adopting the broadcast stage {sync}", stage_before=None if changed else stage_before)
        return changed

    def stats(self) -> Any:
        reported = self.inner.stats()
        self._check_stats(reported, f"at stats() call after {len(self.updates)} updates")
        self.stats_results.append(_pool_entries(reported))
        return reported

    def __reduce__(self) -> Any:
        # a copy (a worker's private one, under centralized tracking) is the curriculum itself, unwatched
        return pickle.loads, (pickle.dumps(self.inner),)

    # ---- checks ------------------------------------------------------------------------------
    def _observe_pool(self, when: str, *, stage_before: Any = None) -> None:
        """Look at the pool; a task that left it while the stage stayed was evicted (whether the
        curriculum evicts when it records a completion or when it draws the next task)."""
        active = getattr(self.inner, "active_tasks", None)
        if not callable(active):
            return
        tasks = list(active())
        pool = {task.task_id: task for task in tasks}
        oracle = self.oracle
        if len(pool) != len(tasks):
            oracle.mismatch(f"the pool holds a task twice {when}: {[t.task_id for t in tasks]}")
        size = getattr(getattr(self.inner, "config", None), "num_active_tasks", None)
        if isinstance(size, int) and len(tasks) != size:
            oracle.mismatch(f"the pool holds {len(tasks)} tasks {when}, the config's num_active_tasks={size}")
        returned = set(pool) & self.departed
        if returned:
            oracle.mismatch(f"tasks {sorted(returned)} left the pool and came back {when}")
        if self.pool is not None:
            gone = set(self.pool) - set(pool)
            if gone and (self.staged is None or self.inner.stage == stage_before):
                self.evictions += len(gone)
                self._check_evictions(gone, when)
            self.departed |= gone
            self.left.extend(self.pool[task_id] for task_id in gone)
            for task_id in set(pool) - set(self.pool):
                _check_task(oracle, pool[task_id], [], f"entering the pool {when}")  # a new task starts from nothing
        if self.staged is not None:
            self._check_stage_pool(tasks, when)
        self.ever |= set(pool)
        self.pool = pool

    def _check_stage_pool(self, tasks: list[Any], when: str) -> None:
        """Staged progression's pool: round(`previous_stage_mix` * pool) tasks of the previous
        stage (at most all but one slot; none at stage 0), the others of the current stage."""
        config = getattr(self.inner, "config", None)
        mix = getattr(getattr(config, "algorithm", None), "previous_stage_mix", None)
        stage = self.inner.stage
        if mix is None or not isinstance(stage, int):
            return
        size = len(tasks)
        previous = min(int(round(mix * size)), size - 1) if stage > 0 else 0
        stages = [self.staged.stage_of_label.get(getattr(task, "label", None)) for task in tasks]
        found = (stages.count(stage - 1) if stage > 0 else 0, stages.count(stage))
        if found != (previous, size - previous):
            self.oracle.mismatch(
                f"the pool {when} holds {found[0]} task(s) of stage {stage - 1} and {found[1]} of stage {stage} "
                f"(stage {stage}, previous_stage_mix={mix}, pool {size}): expected {previous} and {size - previous}")

    def _check_evictions(self, evicted: set[Any], when: str) -> None:
        """The config's eviction rules: no eviction with `eviction_percentile` 0, and none of a
        task with fewer than `min_presentations` credited completions (counted here: skipped
        when other processes record into a shared tracker)."""
        config = getattr(self.inner, "config", None)
        percentile = getattr(config, "eviction_percentile", None)
        if percentile == 0:
            self.oracle.mismatch(f"tasks {sorted(evicted)} were evicted {when} although eviction_percentile=0 "
                                 "switches eviction off")
        minimum = getattr(config, "min_presentations", None)
        if minimum is None or getattr(self.inner, "is_shared", False):
            return
        early = {task_id: len(self.credited.get(task_id, ())) for task_id in sorted(evicted)}
        early = {task_id: count for task_id, count in early.items() if count < minimum}
        if early:
            self.oracle.mismatch(f"tasks were evicted {when} before min_presentations={minimum} credited "
                                 f"completions (task: completions): {early}")

    def _check_stats(self, stats: Mapping[str, Any], where: str) -> None:
        oracle = self.oracle
        inner = self.inner
        expected: dict[str, Any] = {"total_completions": self.total, "late_completions": self.late}
        if self.pool is not None:
            ids = list(self.pool)
            expected["num_active_tasks"] = len(ids)
            expected["tasks_created"] = len(self.ever)
            expected["evictions"] = self.evictions
            expected["pool_occupancy_gini"] = reference_gini(len(self.credited.get(i, ())) for i in ids)
            expected["sampling_gini"] = reference_gini(self.handed.get(i, 0) for i in ids)
            labels = [getattr(self.pool[i], "label", None) for i in ids]
            expected["per_label_active_tasks"] = dict(Counter(labels))
            scores = getattr(inner, "task_scores", None)
            if callable(scores):
                values = [float(v) for v in scores()]
                if len(values) == len(ids):
                    expected["mean_lp_score"] = sum(values) / len(values)
                    expected["pool_lp_gini"] = reference_gini(values)
                    per_label: dict[str, list[float]] = defaultdict(list)
                    for label, value in zip(labels, values):
                        per_label[label].append(value)
                    expected["per_label_lp_scores"] = {k: sum(v) / len(v) for k, v in per_label.items()}
                    if self.mean_scored:
                        self._check_mean_scores(ids, values, where)
                else:
                    oracle.mismatch(f"task_scores() has {len(values)} entries for a pool of {len(ids)} {where}")
            for task_id in ids:
                _check_task(oracle, self.pool[task_id], self.credited.get(task_id, []), where)
        self._check_left(where)
        probabilities = getattr(inner, "sampling_probabilities", None)
        if callable(probabilities):
            values = [float(v) for v in probabilities()]
            expected["sampling_entropy"] = reference_entropy(values)
            if any(v < 0 or not math.isfinite(v) for v in values) or not _close(sum(values), 1.0, tolerance=1e-9):
                oracle.mismatch(f"sampling_probabilities() is not a distribution {where}: {values}")
        if self.staged is not None:
            expected.update(self.staged.stats())
        for key, value in expected.items():
            if key not in stats:
                continue  # a curriculum reports what it has; the protocol fixes what each name means
            reported = stats[key]
            if isinstance(value, dict):
                if not isinstance(reported, Mapping) or set(reported) != set(value):
                    oracle.mismatch(f"stats()[{key!r}] {where}: oracle {value}, reported {reported}")
                    continue
                for sub, number in value.items():
                    oracle._compare(f"stats()[{key!r}][{sub!r}]", number, reported[sub], where,
                                    exact=isinstance(number, int))
            else:
                oracle._compare(f"stats()[{key!r}]", value, reported, where,
                                exact=isinstance(value, int) and key != "stage_window_mean")

    def _check_left(self, where: str) -> None:
        """A task that left the pool reads zeros (the built-in's rule) or the numbers it left
        with, never those of the task that took its place."""
        for task in self.left:
            read = tuple(getattr(task, name, None) for name in ("num_completions", "mean_score", "last_score"))
            scores = self.credited.get(task.task_id, [])
            own = (len(scores), math.fsum(scores) / len(scores) if scores else 0.0, scores[-1] if scores else 0.0)
            if not any(all(r is None or _close(float(r), e, tolerance=self.oracle.tolerance) for r, e in zip(read, ref))
                       for ref in ((0, 0.0, 0.0), own)):
                self.oracle.mismatch(
                    f"task {task.task_id} ({getattr(task, 'label', '?')!r}) left the pool but reads (num_completions, "
                    f"mean_score, last_score) {read} {where}; expected zeros or its own {own}")

    def _check_mean_scores(self, ids: list[Any], values: list[float], where: str) -> None:
        """Each task's score is the mean of its credited scores, normalised (0 before any)."""
        low, high = self.inner.config.score_range
        for task_id, value in zip(ids, values):
            scores = self.credited.get(task_id, [])
            reference = (sum(scores) / len(scores) - low) / (high - low) if scores else 0.0
            self.oracle._compare(f"task_scores() of task {task_id} (its mean score)", reference, value, where)

    def _finish(self) -> None:
        if callable(getattr(self.inner, "stats", None)):
            self._check_stats(self.inner.stats(), f"at the end, after {len(self.updates)} updates")
        self._check_draws()

    def _check_draws(self) -> None:
        """The hand-outs must follow the distribution `sampling_probabilities()` reported for them:
        Pearson's chi-square over tasks (those expected fewer than 5 times pooled), judged with
        the Wilson-Hilferty normal approximation at z > `DRAW_TEST_Z` (a chance below 1e-9)."""
        expected = self.expected
        if not expected or sum(expected.values()) < _MIN_DRAWS_TESTED:
            return
        cells: list[tuple[float, float]] = []
        rest_observed = rest_expected = 0.0
        for task_id, chance in expected.items():
            if chance >= 5.0:
                cells.append((self.handed.get(task_id, 0), chance))
            else:
                rest_observed += self.handed.get(task_id, 0)
                rest_expected += chance
        if rest_expected >= 5.0:
            cells.append((rest_observed, rest_expected))
        df = len(cells) - 1
        if df < 1:
            return
        statistic = sum((o - e) ** 2 / e for o, e in cells)
        z = ((statistic / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
        if z > DRAW_TEST_Z:
            worst = sorted(((o - e) / math.sqrt(e), o, e) for o, e in cells)[-1]
            self.oracle.mismatch(
                f"the {sum(self.handed.values())} hand-outs do not follow sampling_probabilities(): chi-square "
                f"{statistic:.1f} on {df} degrees of freedom (z = {z:.1f}, limit {DRAW_TEST_Z}); the most over-drawn "
                f"task was handed out {worst[1]:.0f} times, expected {worst[2]:.1f}")
