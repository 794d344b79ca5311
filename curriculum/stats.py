"""Stats pipeline: info dicts of a rollout -> one metric dict per epoch, named as in the seeds.

Envs (and `CurriculumEnv`) report through the info dicts of a vec step. A training loop calls
`accumulate_rollout_stats(infos, stats)` after every vec step and
`process_training_stats(stats, agent_step=..., epoch=...)` once per epoch, then clears `stats`.

Metric names, so simulator runs and real runs share a dashboard:

- `metric/agent_step`, `metric/epoch`: the x axes.
- `env_<group>/<name>`: every info key `<group>/<name>` (nested dicts flattened with "/"), e.g.
  `curriculum_stats/pool_lp_gini` -> `env_curriculum_stats/pool_lp_gini`,
  `task_dependency/performance` -> `env_task_dependency/performance`; a top-level key
  `<name>` -> `env_<name>`.
- `overview/*`: the few numbers to look at first (`OVERVIEW_METRICS`).

Reduction rule (defined once, `is_summed_stat`): a key is a counter, summed over the epoch,
when one of its "/"-separated parts is in `SUMMED_STATS`; everything else is averaged. The
rule matches whole parts, not substrings: `per_label_samples/<label>` and
`curriculum_stats/completions` are counters, while the cumulative gauge
`curriculum_stats/total_completions` (the same number reported by every env) and
`exact_accounting/episode_length` are averaged. Keys whose last part is in
`IDENTIFIER_STATS` (task ids) are identifiers, not quantities, and are dropped. A counter is
an int when every report of it is a whole number, else a float; a gauge is always a float.
Sums are exact (`math.fsum`, correctly rounded), so an epoch's metrics do not depend on the
order its reports came in (which workers answered first).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, MutableMapping
from numbers import Integral, Real
from typing import Any, Final

import numpy as np

from curriculum.errors import CurriculumConfigError
from curriculum.metrics import gini_coefficient, normalized_entropy

__all__ = [
    "STATS_GROUP",
    "COMPLETION_INFO_KEY",
    "DESYNC_INFO_KEY",
    "SUMMED_STATS",
    "IDENTIFIER_STATS",
    "LP_EMA_ALPHA",
    "EPISODES",
    "COMPLETIONS",
    "LATE_COMPLETIONS",
    "DESYNC_TRUNCATIONS",
    "SCORE",
    "TASK_ID",
    "STAGE",
    "PER_LABEL_SAMPLES",
    "PER_LABEL_COMPLETIONS",
    "PER_LABEL_LP_SCORES",
    "POOL_STAT_RENAMES",
    "OVERVIEW_METRICS",
    "stat_key",
    "is_summed_stat",
    "flatten_info",
    "accumulate_rollout_stats",
    "process_training_stats",
]

STATS_GROUP: Final = "curriculum_stats"
"""Info-key group of everything the curriculum wrappers report (flat keys `curriculum_stats/...`)."""

COMPLETION_INFO_KEY: Final = "curriculum_completion"
"""Info key of a completion a worker leaves for the main process to record (centralized tracking)."""

DESYNC_INFO_KEY: Final = "truncated_by_desync"
"""Info key (at any nesting depth) by which an env marks a truncation as a desync cut."""

# Leaf names of the curriculum stats, one place for each.
EPISODES: Final = "episodes"
"""Counter: episodes that ended (one per episode, desync-truncated ones included)."""
COMPLETIONS: Final = "completions"
"""Counter: episodes reported to the curriculum (`update_task_performance` called)."""
LATE_COMPLETIONS: Final = "late_completions"
"""Counter: of those, the ones the curriculum refused as late (the task left the pool)."""
DESYNC_TRUNCATIONS: Final = "desync_truncations"
"""Counter: episodes cut by a desync truncation, never reported as completions."""
SCORE: Final = "score"
"""Gauge: score of a reported episode (`overview/reward` is its mean)."""
TASK_ID: Final = "task_id"
"""Identifier of the finished task (dropped by `process_training_stats`)."""
STAGE: Final = "stage"
"""Gauge: the stage the reporting curriculum handle is at (staged progression only)."""
PER_LABEL_SAMPLES: Final = "per_label_samples"
"""Counter per label: episodes that ended, by the label of the task they ran."""
PER_LABEL_COMPLETIONS: Final = "per_label_completions"
"""Counter per label: episodes reported to the curriculum."""
PER_LABEL_LP_SCORES: Final = "per_label_lp_scores"
"""Gauge per label: EMA (rate `LP_EMA_ALPHA`) of the algorithm score of completed tasks."""

SUMMED_STATS: Final = (
    PER_LABEL_SAMPLES,
    PER_LABEL_COMPLETIONS,
    EPISODES,
    COMPLETIONS,
    LATE_COMPLETIONS,
    DESYNC_TRUNCATIONS,
)
"""Key parts that make a stat a counter: summed over an epoch, never averaged."""

IDENTIFIER_STATS: Final = (TASK_ID,)
"""Last key parts that name an identifier, not a quantity; dropped from the epoch metrics."""

LP_EMA_ALPHA: Final = 0.1
"""Rate of the per-label learning-progress EMA (seeds/002, task 3)."""

POOL_STAT_RENAMES: Final = {
    "late_completions": "total_late_completions",
    "evictions": "total_evictions",
    "per_label_lp_scores": "pool_per_label_lp_scores",
}
"""`Curriculum.stats()` keys renamed when reported, so cumulative totals and pool snapshots do
not collide with the per-episode counters and EMAs of the same name."""

OVERVIEW_METRICS: Final = {
    "overview/reward": f"{STATS_GROUP}/{SCORE}",
    "overview/episodes": f"{STATS_GROUP}/{EPISODES}",
    "overview/completions": f"{STATS_GROUP}/{COMPLETIONS}",
    "overview/late_completions": f"{STATS_GROUP}/{LATE_COMPLETIONS}",
    "overview/desync_truncations": f"{STATS_GROUP}/{DESYNC_TRUNCATIONS}",
    "overview/sampling_entropy_normalized": f"{STATS_GROUP}/sampling_entropy",
    "overview/stage": f"{STATS_GROUP}/{STAGE}",
}
"""`overview/<name>` -> the raw stat it repeats, reduced by the usual rule (so
`overview/reward` is the mean episode score and `overview/episodes` the episode count).
Present only when the raw stat was reported. Also computed: `overview/label_sampling_gini`
and `overview/label_sampling_entropy`, the Gini coefficient and normalised entropy of the
epoch's per-label sample counts."""


def stat_key(*parts: str) -> str:
    """The flat info key `curriculum_stats/<part>/<part>...`."""
    return "/".join((STATS_GROUP, *parts))


def is_summed_stat(key: str) -> bool:
    """Whether `key` is a counter (summed over an epoch) rather than a gauge (averaged)."""
    return any(part in SUMMED_STATS for part in key.split("/"))


_PLAIN: Final = (float, int, bool)


def _number(value: Any) -> int | float | None:
    """`value` as a plain Python number, or None when it is not one."""
    kind = type(value)
    if kind is float or kind is int:  # the common case first: no abstract-class checks
        return value
    if kind is str:
        return None
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        return float(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return float(value.mean(dtype=np.float64)) if value.size else None  # a float32 array too, in full precision
    if isinstance(value, (list, tuple)) and value:
        if kind is list and type(value[0]) in _PLAIN:  # a flat list of numbers: one numpy call, not one per entry
            try:
                array = np.array(value)
            except (ValueError, TypeError, OverflowError):  # ragged: entry by entry below
                array = None
            if array is not None and array.ndim == 1 and array.dtype.kind in "biuf":
                return float(np.add.reduce(array, dtype=np.float64)) / array.size  # `array.mean()`, bit for bit
        numbers = [_number(v) for v in value]  # an entry that is a list or an array counts as its mean
        if None not in numbers:
            return float(np.mean(numbers))
    return None


def flatten_info(info: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """`(key, value)` pairs of a possibly nested info dict, nested keys joined with "/"."""
    for key, value in info.items():
        full = f"{prefix}{key}"
        if type(value) is dict or (type(value) not in (int, float, str) and isinstance(value, Mapping)):
            yield from flatten_info(value, f"{full}/")
        else:
            yield full, value


def accumulate_rollout_stats(
    infos: Iterable[Mapping[str, Any]] | Mapping[str, Any], stats: MutableMapping[str, list[float]]
) -> MutableMapping[str, list[float]]:
    """Append every numeric value of a vec step's info dicts to `stats[key]`; returns `stats`.

    `infos` is the list of dicts a pufferlib vec step returns (one dict is accepted too).
    Nested dicts are flattened with "/"; lists and arrays count as their mean (as pufferlib
    does); strings and other non-numbers are skipped.
    """
    if isinstance(infos, Mapping):
        infos = (infos,)
    for info in infos:
        if info:
            _accumulate(info, "", stats)
    return stats


def _accumulate(info: Mapping[str, Any], prefix: str, stats: MutableMapping[str, list[float]]) -> None:
    """One (nested) info dict into `stats`; plain numbers take the shortest path."""
    for key, value in info.items():
        kind = type(value)
        if kind is float or kind is int:
            number = value
        elif kind is dict or (kind is not str and isinstance(value, Mapping)):
            _accumulate(value, f"{prefix}{key}/", stats)
            continue
        else:
            number = _number(value)
            if number is None:
                continue
        full = f"{prefix}{key}" if prefix else key
        values = stats.get(full)
        if values is None:
            stats[full] = [number]
        else:
            values.append(number)


def _reduce(key: str, values: list[float]) -> int | float:
    if is_summed_stat(key):
        if all(type(v) is int for v in values):
            return int(sum(values))
        return float(math.fsum(values))
    return float(math.fsum(values) / len(values))


def _is_real(value: Any) -> bool:
    """A real number `float()` takes: Python and numpy numbers, 0-d arrays and tensors (no
    bool, text or sequence)."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or getattr(value, "ndim", 0) != 0:
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _numbers_of(argument: str, key: Any, values: Any) -> list[Any]:
    """`values` as a list, refused by name unless `key` is a str and each value a real number."""
    if not isinstance(key, str) or isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise CurriculumConfigError(f"Expected `{argument}` to map stat keys to lists of numbers, "
                                    f"received {key!r}: {values!r}")
    values = list(values)
    for value in values:
        kind = type(value)
        if kind is not float and kind is not int and not _is_real(value):  # (plain numbers: the common case)
            raise CurriculumConfigError(f"Expected `{argument}` to hold real numbers, received {value!r} "
                                        f"under {key!r}")
    return values


def _metric_name(key: str) -> str:
    return f"env_{key}"


def process_training_stats(
    raw_stats: Mapping[str, list[float]],
    *,
    agent_step: int,
    epoch: int,
    losses: Mapping[str, float] | None = None,
) -> dict[str, int | float]:
    """One epoch's metrics from accumulated rollout stats, with the seeds' metric names.

    Counters (`is_summed_stat`) are summed, gauges averaged, identifiers dropped; see the
    module docstring for the names. `losses` (optional) are reported as `losses/<name>`.
    The result has plain Python numbers and sorted keys. `raw_stats` or `losses` holding
    anything but real numbers under str keys is refused with `CurriculumConfigError`.
    """
    if isinstance(agent_step, bool) or not isinstance(agent_step, Integral) or agent_step < 0:
        raise CurriculumConfigError(f"Expected `agent_step` to be a non-negative integer, received {agent_step!r}")
    if isinstance(epoch, bool) or not isinstance(epoch, Integral) or epoch < 0:
        raise CurriculumConfigError(f"Expected `epoch` to be a non-negative integer, received {epoch!r}")
    if not isinstance(raw_stats, Mapping):
        raise CurriculumConfigError(f"Expected `raw_stats` to be a mapping of stat keys to lists of numbers "
                                    f"(accumulate_rollout_stats), received {type(raw_stats).__name__}")
    if losses is not None and not isinstance(losses, Mapping):
        raise CurriculumConfigError(f"Expected `losses` to be None or a mapping of names to numbers, "
                                    f"received {type(losses).__name__}")
    reduced: dict[str, int | float] = {}
    for key, values in raw_stats.items():
        values = _numbers_of("raw_stats", key, values)
        if not values or key.rsplit("/", 1)[-1] in IDENTIFIER_STATS:
            continue
        reduced[key] = _reduce(key, values)

    out: dict[str, int | float] = {"metric/agent_step": int(agent_step), "metric/epoch": int(epoch)}
    for name, key in OVERVIEW_METRICS.items():
        if key in reduced:
            out[name] = reduced[key]
    label_prefix = stat_key(PER_LABEL_SAMPLES) + "/"
    label_samples = [v for k, v in sorted(reduced.items()) if k.startswith(label_prefix)]
    if label_samples:
        out["overview/label_sampling_gini"] = gini_coefficient(label_samples)
        out["overview/label_sampling_entropy"] = normalized_entropy(label_samples)
    for key, value in reduced.items():
        out[_metric_name(key)] = value
    for name, value in (losses or {}).items():
        if not isinstance(name, str) or not _is_real(value):
            raise CurriculumConfigError(f"Expected `losses` to map names to real numbers, received {name!r}: {value!r}")
        out[f"losses/{name}"] = float(value)
    return dict(sorted(out.items()))
