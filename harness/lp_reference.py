"""A reference implementation of the built-in learning progress, from its documentation.

`reference_learning_progress`: `curriculum.algorithms.learning_progress` documents a task's
learning progress as a function of the scores it received: a warm-up whose mean is the
baseline, two EMAs of the normalised score, a noise variance from successive differences, a
peak that remembers learned ground, and a noise band. It is computed again here, plainly and
from scratch for every task (one that inherited statistics from the memory of configurations,
or that is scored in another range than [0, 1], is not covered), so the gate can hold the
library's vectorised, shared-memory version to it number by number.

The rest restates the whole algorithm one transition at a time, on a plain copy of its state
(`read_state`): what a completion does (`reference_record`), which tasks a refresh lets go
(`reference_eviction_candidates`), what an eviction remembers and admits
(`reference_eviction`) and the distribution a refresh samples from (`reference_probabilities`).
Each takes the library's state before the transition as given, so an error is caught at the
transition that makes it and is not carried on.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curriculum import LearningProgressConfig
from curriculum.algorithms.learning_progress import LABEL_TABLE_SIZE, LP_COUNTERS, STATE_FIELDS, _label_key, config_key

__all__ = ["LPState", "label_with_home", "read_state", "reference_eviction", "reference_eviction_candidates",
           "reference_learning_progress", "reference_probabilities", "reference_record", "state_differences"]


def reference_learning_progress(scores: Sequence[float], config: LearningProgressConfig) -> float:
    """The learning progress of a task that started cold and received `scores` (in [0, 1])."""
    warmup = config.min_samples_for_lp
    if len(scores) < warmup:
        return 0.0
    a_f = config.ema_timescale
    a_s = a_f * config.slow_timescale_factor
    # the warm-up: its mean is the baseline (capped), its successive differences the variance
    first = list(scores[:warmup])
    mean = sum(first) / warmup
    differences = [b - a for a, b in zip(first, first[1:])]
    var = sum(0.5 * d * d for d in differences) / len(differences) if differences else 0.0
    baseline = min(mean, config.max_baseline)
    scale = 1.0 / (1.0 - baseline)
    fast = slow = peak = (mean - baseline) * scale
    var *= scale * scale
    last = (first[-1] - baseline) * scale
    mastered_at = (config.max_baseline - baseline) * scale
    for score in scores[warmup:]:
        x = (score - baseline) * scale
        fast += a_f * (x - fast)
        slow += a_s * (x - slow)
        var += a_s * (0.5 * (x - last) ** 2 - var)
        last = x
        learned_at = min(config.mastered_gain + config.noise_z / math.sqrt(warmup) * math.sqrt(var), mastered_at)
        if slow >= peak or peak < learned_at:  # lost ground counts only below a learned peak
            peak = slow
        else:
            peak -= a_s * config.slow_timescale_factor * (peak - slow)
    # the standard deviation of fast - slow for white noise of unit variance
    k2 = a_f / (2 - a_f) + a_s / (2 - a_s) - 2 * a_f * a_s / (a_f + a_s - a_f * a_s)
    gap = max(abs(fast - slow), peak - slow)
    return max(gap - config.noise_z * math.sqrt(max(k2, 0.0)) * math.sqrt(var), 0.0)


# ---- the whole algorithm, one transition at a time ---------------------------------------------
#
# The module docstring of `curriculum.algorithms.learning_progress` states what a completion does
# to the statistics of its task and to the pool's shared tables (budgets renewed at a mastery,
# frontier practice, label usefulness and retries), and how the sampling distribution follows
# from those statistics (exploration floor, cold, revisit and retry budgets, learning progress,
# the frontier and the fallback when nothing learns). The functions below restate those rules
# plainly, task by task, on a copy of the algorithm's state, so a check can hold each completion
# and each refresh of the library to them.


@dataclass
class LPState:
    """A copy of the learning-progress state of a pool: one dict of `STATE_FIELDS` per slot,
    each slot's configuration key and label index (+1; 0 unknown), and the shared tables."""

    rows: list[dict[str, float]]
    keys: list[int]
    labels: list[int]
    usefulness: list[float]
    retries: list[int]
    counters: dict[str, int]
    admission_failure: float
    memory_keys: list[int] = field(default_factory=list)
    memory: list[dict[str, float]] = field(default_factory=list)
    label_keys: list[int] = field(default_factory=list)

    def copy(self) -> LPState:
        return LPState([dict(row) for row in self.rows], list(self.keys), list(self.labels), list(self.usefulness),
                       list(self.retries), dict(self.counters), self.admission_failure, list(self.memory_keys),
                       [dict(row) for row in self.memory], list(self.label_keys))

    def config_shares(self) -> tuple[list[float], int]:
        """Each slot's share of its configuration (1 / its copies) and the number of
        configurations; a task whose configuration is not known yet counts as one of its own."""
        copies = Counter(key for key in self.keys if key)
        return [1.0 / copies[key] if key else 1.0 for key in self.keys], len(copies) + self.keys.count(0)


def read_state(arrays: Mapping[str, np.ndarray]) -> LPState:
    """The state held in a learning-progress tracker's arrays (`tracker.backend.arrays`)."""
    width = len(STATE_FIELDS)
    rows = arrays["lp_state"].reshape(-1, width).tolist()
    memory = arrays["lp_memory"].reshape(-1, width).tolist() if "lp_memory" in arrays else []
    return LPState(
        rows=[dict(zip(STATE_FIELDS, row)) for row in rows],
        keys=arrays["lp_key"].tolist(),
        labels=arrays["lp_label"].tolist(),
        usefulness=arrays["lp_label_usefulness"].tolist(),
        retries=arrays["lp_label_retries"].tolist(),
        counters=dict(zip(LP_COUNTERS, arrays["lp_counters"].tolist())),
        admission_failure=float(arrays["lp_admission_failure"][0]),
        memory_keys=arrays["lp_memory_keys"].tolist() if "lp_memory_keys" in arrays else [],
        memory=[dict(zip(STATE_FIELDS, row)) for row in memory],
        label_keys=arrays["lp_label_keys"].tolist(),
    )


class _Rules:
    """The constants the rules use, derived from a `LearningProgressConfig` as documented."""

    def __init__(self, config: LearningProgressConfig) -> None:
        self.config = config
        self.warmup = config.min_samples_for_lp
        self.a_f = config.ema_timescale
        self.a_s = config.ema_timescale * config.slow_timescale_factor
        a_f, a_s = self.a_f, self.a_s
        k2 = a_f / (2 - a_f) + a_s / (2 - a_s) - 2 * a_f * a_s / (a_f + a_s - a_f * a_s)
        self.band = config.noise_z * math.sqrt(max(k2, 0.0))  # the noise band per unit of noise deviation
        self.retry_samples = max(1, round(1 / a_f))  # one fast-EMA timescale
        self.proven = self.warmup + self.retry_samples
        self.frontier_budget = round(2 / a_s)  # two slow-EMA timescales
        self.frontier_gain = 0.5 * config.mastered_gain

    def learned_at(self, row: Mapping[str, float]) -> float:
        b = row["baseline"]
        gain = self.config.mastered_gain + self.config.noise_z / math.sqrt(self.warmup) * math.sqrt(row["var"])
        return min(gain, (self.config.max_baseline - b) / (1 - b))

    def gap(self, row: Mapping[str, float]) -> float:
        return max(abs(row["fast"] - row["slow"]), row["peak"] - row["slow"])

    def lp(self, row: Mapping[str, float]) -> float:
        if row["count"] < self.warmup:
            return 0.0
        return max(self.gap(row) - self.band * math.sqrt(row["var"]), 0.0)

    def partly_learned(self, row: Mapping[str, float]) -> bool:
        """Its slow EMA significantly (`frontier_z` standard errors of the slow EMA and of the
        warm-up mean, the latter's variance inflated 5x) and at least half of `mastered_gain`
        above its baseline."""
        z2 = self.config.frontier_z ** 2
        error = z2 * self.a_s / (2 - self.a_s) * row["var"] + z2 * 5.0 / self.warmup * row["base_var"]
        return row["slow"] >= self.frontier_gain and row["slow"] ** 2 > error

    def level(self, row: Mapping[str, float]) -> float:
        return row["baseline"] + row["slow"] * (1 - row["baseline"])


def reference_record(before: LPState, slot: int, score: float, config: LearningProgressConfig,
                     task: tuple[Mapping[str, Any], str, frozenset[str]] | None = None) -> LPState:
    """The state after a completion with `score` (in [0, 1]) of the task in `slot`, by the
    documented rules. `task`: its env config, label and the config fields that repeat task ids
    (`id_fields`), for a task of the pool's first fill, identified at its first completion."""
    rules = _Rules(config)
    after = before.copy()
    if after.keys[slot] == 0 and after.rows[slot]["count"] == 0 and task is not None:
        # a task of the first fill: its configuration and label are looked up now, and a
        # configuration seen before hands its statistics on
        env_cfg, label, ignore = task
        after.keys[slot] = config_key(env_cfg, label, ignore=ignore)
        after.labels[slot] = _label_index(after, label)
        after.counters["tasks_identified"] += 1
        _inherit(after, slot)
    row = after.rows[slot]
    n = row["count"] + 1
    row["count"] = n
    if n <= rules.warmup:
        # the warm-up: a running mean of the raw scores, a running mean of half the squared
        # successive differences; at its end the mean is the baseline and everything is normalised
        mean = row["fast"] + (score - row["fast"]) / n
        var = row["var"]
        if n > 1:
            var += (0.5 * (score - row["last"]) ** 2 - var) / (n - 1)
        last = score
        baseline = row["baseline"]
        if n == rules.warmup:
            baseline = min(mean, config.max_baseline)
            scale = 1 / (1 - baseline)
            mean, var, last = (mean - baseline) * scale, var * scale * scale, (score - baseline) * scale
        row.update(fast=mean, slow=mean, peak=mean, var=var, base_var=var, last=last, baseline=baseline)
        return after
    b = row["baseline"]
    x = (score - b) / (1 - b)
    mastered_at = (config.max_baseline - b) / (1 - b)
    was_below = row["slow"] < mastered_at
    row["fast"] += rules.a_f * (x - row["fast"])
    row["slow"] += rules.a_s * (x - row["slow"])
    row["var"] += rules.a_s * (0.5 * (x - row["last"]) ** 2 - row["var"])
    row["last"] = x
    learned_at = rules.learned_at(row)
    if row["slow"] >= row["peak"] or row["peak"] < learned_at:
        row["peak"] = row["slow"]
    else:
        row["peak"] -= rules.a_s * config.slow_timescale_factor * (row["peak"] - row["slow"])
    progressing = row["slow"] >= learned_at or rules.gap(row) > rules.band * math.sqrt(row["var"])
    if not progressing and rules.partly_learned(row):
        row["front"] += 1
    mastered_elsewhere = any(
        other != slot and after.keys[other] == after.keys[slot] and r["count"] >= rules.warmup
        and rules.level(r) >= config.max_baseline for other, r in enumerate(after.rows))
    if was_below and row["slow"] >= mastered_at and not mastered_elsewhere:
        # a configuration newly mastered: every label owes retries, the frontier practises
        # again, admissions are worth trying again, stagnant verdicts are dropped
        after.counters["mastery_events"] += 1
        after.retries = [rules.retry_samples] * len(after.retries)
        for r in after.rows:
            if r["front"] > 0:
                r["front"] = 0.0
        after.admission_failure = 0.0
        for i, (key, entry) in enumerate(zip(after.memory_keys, after.memory)):
            progress = rules.gap(entry) > rules.band * math.sqrt(entry["var"])
            if key and entry["slow"] < rules.learned_at(entry) and not progress:
                after.memory_keys[i] = 0
                after.memory[i] = dict.fromkeys(STATE_FIELDS, 0.0)
    label = after.labels[slot] - 1
    if label >= 0:
        u = after.usefulness[label]
        if progressing:
            if u < 1 - 1e-6:
                after.usefulness[label] = u + rules.a_f * (1 - u)
        else:
            if u > 1e-6:
                after.usefulness[label] = u - rules.a_f * u
            if after.retries[label] > 0:
                after.retries[label] -= 1
    return after


def _pool_masks(state: LPState, rules: _Rules) -> tuple[list[Any], ...]:
    """Per slot: warm, learning progress, learned, stagnant, frontier, stalled, revisited."""
    warm = [row["count"] >= rules.warmup for row in state.rows]
    lp = [rules.lp(row) for row in state.rows]
    learned = [w and row["slow"] >= rules.learned_at(row) for w, row in zip(warm, state.rows)]
    stagnant = [w and v <= 0 and not le for w, v, le in zip(warm, lp, learned)]
    partly = [s and rules.partly_learned(row) for s, row in zip(stagnant, state.rows)]
    frontier = [p and row["front"] < rules.frontier_budget for p, row in zip(partly, state.rows)]
    stalled = [p and not f for p, f in zip(partly, frontier)]
    revisited = [(le and v <= 0) or st for le, v, st in zip(learned, lp, stalled)]
    return warm, lp, learned, stagnant, frontier, stalled, revisited


def _cold_weights(state: LPState, warm: Sequence[bool]) -> list[float]:
    """Per slot: a cold task's part of the cold budget (its label's usefulness x2, capped at 1;
    an unknown label's prior 0.5), 0 for warm tasks."""
    return [0.0 if w else min(2 * (state.usefulness[label - 1] if label else 0.5), 1.0)
            for w, label in zip(warm, state.labels)]


def reference_readouts(state: LPState, config: LearningProgressConfig) -> dict[str, list[Any]]:
    """What the algorithm reads out per slot for `state`, by the documented rules: its
    learning progress (`scores()`, `score_at()`), whether it is warm and learned
    (`learned()`), and its part of the cold budget (`cold_weights()`)."""
    warm, lp, learned, *_ = _pool_masks(state, _Rules(config))
    return {"scores": lp, "learned": learned, "cold_weights": _cold_weights(state, warm)}


def reference_pool_counts(state: LPState, config: LearningProgressConfig) -> dict[str, int]:
    """The pool's tasks by what the documented rules make of them, as `stats()` reports them:
    still in warm-up (cold), learned, on the frontier, revisited; and the state's counters of
    memory hits, admissions skipped and mastery events."""
    warm, _, learned, _, frontier, _, revisited = _pool_masks(state, _Rules(config))
    return {"lp_cold_tasks": warm.count(False), "lp_learned_tasks": sum(learned),
            "lp_frontier_tasks": sum(frontier), "lp_revisited_tasks": sum(revisited),
            **{f"lp_{name}": state.counters[name] for name in ("memory_hits", "admissions_skipped", "mastery_events")}}


def reference_probabilities(state: LPState, config: LearningProgressConfig,
                            tally: Counter | None = None) -> list[float]:
    """The sampling distribution over the pool's slots that `state` gives, by the documented
    rules: every budget split per configuration first, then over its copies. `tally` counts
    the rules that had a say (a check on rules that never decide checks nothing)."""
    rules = _Rules(config)
    n = len(state.rows)
    share, configs = state.config_shares()
    warm, lp, learned, stagnant, frontier, stalled, revisited = _pool_masks(state, rules)
    owed = [label > 0 and state.retries[label - 1] > 0 for label in state.labels]
    retried = [o and s and not f for o, s, f in zip(owed, stagnant, frontier)] if config.retry else [False] * n
    cold = _cold_weights(state, warm)
    num_cold = warm.count(False)

    def split(weights: Sequence[float]) -> list[float]:
        return [w * s for w, s in zip(weights, share)]

    probs = [s * config.exploration / configs for s in share]
    cold_share = config.cold_exploration * sum(cold) / num_cold if num_cold else 0.0
    revisit_share = config.revisit if any(revisited) else 0.0
    retry_share = config.retry if any(retried) else 0.0
    rest = 1 - config.exploration - cold_share - revisit_share - retry_share
    weighted_lp = split(lp)
    if tally is not None:
        tally.update(rule for rule, present in (
            ("learning progress", sum(weighted_lp) > 0), ("frontier", sum(weighted_lp) <= 0 and any(frontier)),
            ("fallback", sum(weighted_lp) <= 0 and not any(frontier) and num_cold < n),
            ("revisit learned", any(le and v <= 0 for le, v in zip(learned, lp))), ("revisit stalled", any(stalled)),
            ("retry", retry_share > 0), ("cold", num_cold > 0)) if present)
    if sum(weighted_lp) > 0:
        budgets = [(rest, weighted_lp)]
    elif num_cold < n:  # nothing learns: the frontier, else learned tasks and unproven stagnant ones
        mask = frontier if any(frontier) else [le or (w and row["count"] < rules.proven)
                                               for le, w, row in zip(learned, warm, state.rows)]
        fallback = split(mask)
        budgets = [(rest, fallback if sum(fallback) else split(warm))]
    elif sum(cold):
        budgets, cold_share = [], cold_share + rest
    else:
        budgets = [(rest, [1.0] * n)]
    budgets += [(revisit_share, split(revisited)), (retry_share, split(retried)), (cold_share, cold)]
    for mass, weights in budgets:
        total = sum(weights)
        if mass and total:
            probs = [p + mass * w / total for p, w in zip(probs, weights)]
    return probs


def state_differences(expected: LPState, got: LPState, *, rel: float = 1e-9, abs_: float = 1e-12) -> list[str]:
    """What differs between two states, one line per field."""

    def close(a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)

    out = []
    for where, rows_e, rows_g in (("slot", expected.rows, got.rows), ("memory entry", expected.memory, got.memory)):
        for i, (e, g) in enumerate(zip(rows_e, rows_g)):
            if e == g:
                continue
            out += [f"{where} {i} {name}: expected {e[name]!r}, got {g[name]!r}" for name in STATE_FIELDS
                    if not close(e[name], g[name])]
    for what, e_values, g_values in (("slot {} configuration key", expected.keys, got.keys),
                                     ("slot {} label index", expected.labels, got.labels),
                                     ("memory entry {} key", expected.memory_keys, got.memory_keys),
                                     ("label table entry {}", expected.label_keys, got.label_keys),
                                     ("label {} retries owed", expected.retries, got.retries)):
        out += [f"{what.format(i)}: expected {e}, got {g}" for i, (e, g) in enumerate(zip(e_values, g_values))
                if e != g]
    out += [f"label {i} usefulness: expected {e!r}, got {g!r}"
            for i, (e, g) in enumerate(zip(expected.usefulness, got.usefulness)) if e != g and not close(e, g)]
    out += [f"counter {name}: expected {expected.counters[name]}, got {got.counters[name]}"
            for name in expected.counters if expected.counters[name] != got.counters[name]]
    if not close(expected.admission_failure, got.admission_failure):
        out.append(f"admission failure rate: expected {expected.admission_failure!r}, got {got.admission_failure!r}")
    return out


def reference_eviction_candidates(state: LPState, config: LearningProgressConfig,
                                  presented: Sequence[bool]) -> list[bool]:
    """Per slot, whether learning progress lets the task go at a refresh in `state`, among the
    `presented` ones (point 4 of the module docstring): warm tasks without learning progress,
    the first non-empty group of never-learned tasks (but one task of every configuration while
    the configurations fit in half the pool, else one of every label while the labels do),
    learned tasks of crowded configurations, learned tasks once learned configurations hold
    more than half the pool; learned ones only while admissions keep finding better tasks, and
    none while nearly all of them fail."""
    rules = _Rules(config)
    n = len(state.rows)
    none = [False] * n
    if state.admission_failure > 0.95:
        return none
    share, configs = state.config_shares()
    kept = [False] * n
    if configs <= n // 2:
        groups = [key if key else ("unknown", slot) for slot, key in enumerate(state.keys)]
    elif len(set(state.labels)) <= n // 2:
        groups = list(state.labels)
    else:
        groups = []
    for slot, group in enumerate(groups):
        if group not in groups[:slot]:
            kept[slot] = True
    warm = [row["count"] >= rules.warmup for row in state.rows]
    idle = [p and w and rules.lp(row) <= 0 for p, w, row in zip(presented, warm, state.rows)]
    learned = [w and row["slow"] >= rules.learned_at(row) for w, row in zip(warm, state.rows)]
    stagnant = [i and not le and not k for i, le, k in zip(idle, learned, kept)]
    if any(stagnant) or state.admission_failure > 0.25:
        return stagnant
    idle_learned = [i and le for i, le in zip(idle, learned)]
    crowded = [il and s * (2 * n / configs) < 1 for il, s in zip(idle_learned, share)]
    if any(crowded):
        return crowded
    learned_configs = sum(s for le, s in zip(learned, share) if le)
    return idle_learned if learned_configs > 0.5 * n else none


def label_with_home(name: str, position: int) -> str:
    """The first of `name_0`, `name_1`, ... whose home in the label table is `position`: labels
    that take the table's first and last entries, or collide and probe on, around its end."""
    return next(label for label in (f"{name}_{i}" for i in range(1_000_000))
                if _label_key(label) % LABEL_TABLE_SIZE == position)


def _label_index(state: LPState, label: str) -> int:
    """The label's index + 1 in the table (open addressing from its key, 4 probes), adding it
    with the prior usefulness 0.5 where there is room; 0: untracked."""
    key = _label_key(label)
    size = len(state.label_keys)
    for probe in range(4):
        i = (key + probe) % size
        if state.label_keys[i] == 0:
            state.label_keys[i] = key
            state.usefulness[i] = 0.5
        if state.label_keys[i] == key:
            return i + 1
    return 0


def _find(state: LPState, key: int) -> int:
    size = len(state.memory_keys)
    for probe in range(4 if size else 0):
        i = (key + probe) % size
        if state.memory_keys[i] == key:
            return i
        if state.memory_keys[i] == 0:
            return -1
    return -1


def _inherit(state: LPState, slot: int) -> None:
    entry = _find(state, state.keys[slot])
    if entry >= 0:
        state.rows[slot] = dict(state.memory[entry])
        state.counters["memory_hits"] += 1


def reference_eviction(state: LPState, slot: int, evicted_task_id: int, generator: Any, capacity: int,
                       config: LearningProgressConfig, ignore: frozenset[str],
                       tally: Counter | None = None) -> tuple[LPState, int]:
    """The state after the task in `slot` (`state`: its completion recorded) is evicted, and the
    id of the task admitted in its place (points 2 and 4 of the module docstring): the evicted
    task's statistics are remembered under its configuration (once warm), and of the next
    `admission_candidates` ids of the slot, those whose configuration is not remembered as
    stagnant and whose label is useful enough qualify: the first qualifying configuration the
    pool does not hold is admitted, else the first qualifying one, else the most useful
    candidate; it starts from what the memory holds for its configuration. `tally` counts a
    full memory neighbourhood (an entry replaced) as "memory full"."""
    rules = _Rules(config)
    after = state.copy()
    row, key = after.rows[slot], after.keys[slot]
    if row["count"] >= rules.warmup and key and after.memory_keys:
        size = len(after.memory_keys)
        probes = [(key + probe) % size for probe in range(4)]
        free = [i for i in probes if after.memory_keys[i] in (key, 0)]
        # the first free or own entry, else (a full neighbourhood) the one resting on the fewest completions
        target = free[0] if free else min(probes, key=lambda i: (after.memory[i]["count"], probes.index(i)))
        if not free and tally is not None:
            tally["memory full"] += 1
        after.memory_keys[target] = key
        after.memory[target] = dict(row)
    after.rows[slot] = dict.fromkeys(STATE_FIELDS, 0.0)
    after.keys[slot], after.labels[slot] = 0, 0
    threshold = config.admission_usefulness
    candidates = []  # (usefulness, task id, key, label index), in the order looked at
    for k in range(1, config.admission_candidates + 1):
        task_id = evicted_task_id + k * capacity
        env_cfg, label = generator.generate(task_id)
        candidate_key = config_key(env_cfg, label, ignore=ignore)
        if candidates and candidates[-1][2] == candidate_key:
            break  # a generator that repeats itself has no choice to offer
        label_index = _label_index(after, label)
        usefulness = after.usefulness[label_index - 1] if label_index else 0.5
        entry = _find(after, candidate_key)
        if entry >= 0:
            remembered = after.memory[entry]
            useful = remembered["slow"] >= rules.learned_at(remembered) or \
                rules.gap(remembered) > rules.band * math.sqrt(remembered["var"])
            usefulness = usefulness if useful else 0.0
        candidates.append((usefulness, task_id, candidate_key, label_index))
        if usefulness >= threshold and candidate_key not in after.keys:
            break
    qualifying = [i for i, c in enumerate(candidates) if c[0] >= threshold]
    if qualifying:
        lacking = [i for i in qualifying if candidates[i][2] not in after.keys]
        chosen = lacking[0] if lacking else qualifying[0]
        skipped = chosen
    else:
        chosen = max(range(len(candidates)), key=lambda i: (candidates[i][0], -i))
        skipped = len(candidates)
    usefulness, task_id, chosen_key, label_index = candidates[chosen]
    after.counters["admissions_skipped"] += skipped
    after.admission_failure += (float(usefulness < threshold) - after.admission_failure) / 8
    after.keys[slot], after.labels[slot] = chosen_key, label_index
    _inherit(after, slot)
    return after, task_id
