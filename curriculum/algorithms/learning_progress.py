"""Bidirectional learning progress, with a memory of tasks and budgets that keep it working
once everything learnable is mastered.

Learning progress of a task
---------------------------
The first `min_samples_for_lp` completions of a task (its warm-up) only measure it: their mean
score becomes the baseline b (capped at `max_baseline`) and seeds both EMAs, so one lucky or
unlucky first episode cannot open a gap that then decays like progress. After that a score s
becomes x = (s - b) / (1 - b), followed by a fast EMA (rate a_f = `ema_timescale`) and a slow
one (a_s = a_f * `slow_timescale_factor`). Learning progress is their gap in either direction
(improving or forgetting), minus what noise alone would make:

    LP = max(0, max(|fast - slow|, lost) - noise_z * k * sigma),
    k^2 = a_f/(2-a_f) + a_s/(2-a_s) - 2 a_f a_s / (a_f + a_s - a_f a_s),

where k * sigma is the standard deviation of the gap for white noise of variance sigma^2.
- sigma^2 is an EMA of half the squared difference of successive x. Unlike the spread around
  the fast EMA, it does not grow with the trend itself, so a task learned (or forgotten)
  quickly is not mistaken for a noisy one.
- `lost` is how far the slow EMA sits below its own peak, for a task whose peak was learned
  (below). A forgotten task that is being relearned has fast and slow EMAs that cross on the
  way back up, and |fast - slow| alone reads zero there, long before the task is back where
  it was; `lost` keeps its LP until it is. The peak follows a lower slow EMA slowly (rate
  a_s * `slow_timescale_factor`), so ground that is never regained stops counting.

Why LP alone is not enough: what went wrong after mastery
----------------------------------------------------------
LP is zero both for a mastered task (high score, no change) and for an impossible one (low
score, no change). In a real PPO run, once every learnable task was mastered every LP was 0:
the sampler then gave nearly all its mass to cold (newly admitted) tasks, eviction kept
replacing zero-LP tasks by fresh draws from the generator, an impossible configuration that
was evicted came back as a new cold task, and impossible settings took their share of the
generator again (23-40% of samples). The mechanisms below break that loop; each one is also
what makes the mostly-impossible and prerequisite-chain task spaces work.

1. Learned is not impossible. A warm task is *learned* when its slow EMA is at least
   `mastered_gain` above its baseline (it was learned here) or its level b + slow (1 - b) is at
   least `max_baseline` (it arrived mastered). Learned tasks without LP share the `revisit`
   budget, so each is sampled regularly and forgetting shows up as LP within a few samples
   (so do partly learned tasks that practice did not move, 6). Tasks never learned and without
   LP (impossible, or not yet within reach) get the uniform `exploration` floor, plus the two
   budgets of 5.
2. A memory of task configurations (`config_memory` entries keyed by a hash of label and env
   config, leaving out top-level fields in which the generator repeats the task id: a tag or a
   seed taken from the id tells tasks apart, not what they are; `id_fields` finds them by
   probing the generator). When a task leaves the pool its statistics are stored under its
   configuration; a task whose configuration was seen before starts from them instead of cold.
   An impossible configuration that comes back is known to be stagnant at once and costs no
   cold samples; a mastered one is known to be mastered.
3. Per-label usefulness: an EMA, per label, of whether each warm completion showed progress or
   mastery (1) or neither (0). A cold task's share of the `cold_exploration` budget scales with
   its label's usefulness (x2, capped at 1), so cold exploration shrinks by itself where new
   tasks keep turning out stagnant.
4. Choosing what to admit. When eviction frees a slot, up to `admission_candidates` next task
   ids are looked at; of those whose configuration is not remembered as stagnant and whose
   label's usefulness is at least `admission_usefulness`, the first configuration the pool
   does not hold is admitted, else the first of them (else the most useful candidate). A
   mostly-impossible space fills its pool with learnable tasks. Preferring what the pool lacks
   matters when its first fill missed a configuration: the pool can settle with every task
   kept (learned ones, one copy of each stagnant configuration), evictions stop, and a
   missing task of a prerequisite chain was then never admitted (the chain stalled at its
   step budget on 4 of 2000 seeds, about 3x uniform practice's episodes). Eviction takes warm
   tasks without LP in this order: never-learned tasks (keeping one task of every configuration
   while the configurations fit in half the pool, else one of every label: a configuration the
   student learns too slowly to show LP yet looks stagnant, and with its last copy gone it
   never came back; seen as learnable tasks never mastered in 40% of 5 + 5 runs), then learned
   tasks whose configuration holds more than twice its share of the pool,
   then learned tasks once learned configurations hold more than `LEARNED_POOL_SHARE` of it.
   Learned tasks are only let go while admissions keep finding something better (an EMA of
   failed admissions under `_ADMISSION_FAILURE_LIMIT`).
5. Retry when the student changes. A task not yet within reach (the next one of a
   prerequisite chain) looks exactly like an impossible one until the student masters what it
   needs. So whenever a configuration is mastered for the first time in the pool (its level
   crosses `max_baseline`), every label is owed one fast-EMA timescale (1 / a_f completions)
   of samples of its stagnant never-learned tasks, paid from the `retry` budget (a label
   rather than every configuration: a mostly-impossible space has many), the memory's
   stagnant verdicts are dropped, so admission offers those configurations again, and the
   frontier's practice budgets start again (6). When no
   task has LP, the rest of the mass goes to learned tasks and to stagnant ones not yet proven
   (fewer than warm-up + 1 / a_f completions), unless a task is on the frontier (6). Once
   everything learnable is mastered nothing crosses any more, and impossible tasks are left
   with the exploration floor.
6. The frontier. A task the student is learning slowly looks stagnant too: in a PPO run on a
   crafting chain, the deepest chain paid its intermediate products (normalised level 0.15-0.25
   against a warm-up baseline near 0) while the heart came too rarely for the fast and slow EMAs
   to part beyond the noise band; it got the exploration floor (0.5%) for a third of the run,
   while the rest of the mass went to mastered chains, and its level stood still because it was
   not practised. A never-learned task without LP is on the frontier when its slow EMA is at
   least half of `mastered_gain` and `frontier_z` standard errors above its baseline, counting
   the error of the slow EMA (from the noise variance) and of the baseline (from the warm-up's
   own variance, `base_var`, inflated for the few samples it rests on; the current variance
   would not do: a task that starts to succeed sometimes is noisier than it was), and has had
   fewer than two slow-EMA timescales of completions there without LP (`front`) since a
   configuration was last mastered: practice moves a task being learned, not a noise task
   whose warm-up came out low and quiet, but what practice could not move before the student
   mastered the previous link of a chain it may move after (PPO on the crafting chain: the
   depth-6 chain spent its budget while depth 5 was being learned, then got the floor for up
   to 6,000 completions after depth 5 was mastered; renewed there, it was mastered at 26.6k
   steps instead of 51.2k on that seed, and the family took 0.74x uniform's steps instead of
   0.78x over 20 seeds). When no
   task has LP the rest goes to the frontier, if any, before learned tasks; frontier tasks owe
   no retries. A partly learned task that spent its frontier practice shares the `revisit`
   budget with learned tasks: neither the rest (a noise task whose baseline came out low would
   keep it after mastery) nor only the floor (PPO, crafting seed 38: depth 6 stood at 0.30
   above its baseline after its frontier practice, when depths 1-5 were mastered and no
   mastery was left to renew it; on the floor it got 15 samples in 6,000 completions and was
   mastered at 49.2k steps, uniform 34.8k; revisited, at 26.6k). The simulated students of the gate seldom stall this way (their practice raises
   the level steadily, so LP shows): its calibration runs hardly change (README).

Copies of one configuration in the pool are one task of the student: LP, revisit, retry and
floor shares are split per configuration first, then over its copies, so the sampling does not
depend on how many copies the pool happens to hold.

Sampling: `exploration` per configuration over the pool; the cold budget over cold tasks as in
3; `revisit` over learned tasks without LP; `retry` over due labels; the rest over tasks with
LP, in proportion to LP. Without LP the rest goes as in 5 and 6; with no warm task at all, to cold
tasks; else uniformly.

All of it lives in tracker arrays (`extra_layout`): per-slot statistics (one row of
`STATE_FIELDS` per slot, so a completion reads and writes them in one call each), the
configuration memory, the label table and the counters are shared across processes and
checkpointed with the tracker. `record` runs under the tracker lock and is O(1) (it scans the
pool only when a task's level first reaches `max_baseline`); `replacement_task_id`, only when a
task is evicted, generates at most `admission_candidates` configurations and compares each
qualifying one with the pool's keys (one vectorised O(pool) pass per candidate); `scores`,
`probabilities` and `eviction_candidates` are vectorised over the pool and run once per
refresh.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from curriculum.algorithms.base import POOL_UNCHANGED, CurriculumAlgorithm
from curriculum.config import LearningProgressConfig
from curriculum.generators import TaskGenerator

__all__ = ["LearningProgressAlgorithm", "STATE_FIELDS", "LABEL_TABLE_SIZE", "LEARNED_POOL_SHARE", "LP_COUNTERS",
           "config_key", "id_fields"]

#: Statistics of a task, in this order: a row of `lp_state` per slot, and what a configuration
#: memory entry keeps. `base_var` is the noise variance of the warm-up (how far off the baseline
#: may be); `last` the previous x (for the noise estimate); `front` the completions spent on the
#: frontier without learning progress; `count` the completions the statistics rest on,
#: inherited ones included.
STATE_FIELDS = ("fast", "slow", "var", "baseline", "base_var", "last", "peak", "front", "count")
_FAST, _SLOW, _VAR, _BASE, _BASE_VAR, _LAST, _PEAK, _FRONT, _COUNT = range(len(STATE_FIELDS))
_NUM_FIELDS = len(STATE_FIELDS)

#: Distinct labels whose usefulness is tracked (open addressing; more labels go untracked).
LABEL_TABLE_SIZE = 256
LEARNED_POOL_SHARE = 0.5
"""Share of the pool learned configurations may hold before learned tasks can be evicted."""

#: int64 counters of the algorithm, in this order.
LP_COUNTERS = ("memory_hits", "admissions_skipped", "mastery_events", "tasks_identified")
_HITS, _SKIPPED, _EVENTS, _IDENTIFIED = range(len(LP_COUNTERS))

_PROBES = 4
"""Table positions tried for a key before a memory entry is overwritten (or a label untracked)."""
_PRIOR_USEFULNESS = 0.5
"""Usefulness of a label nothing is known about yet."""
_SETTLED_USEFUL, _SETTLED_STAGNANT = 1.0 - 1e-6, 1e-6
"""A label usefulness beyond these is not updated towards 1 (or 0) any more."""
_FRONTIER_GAIN = 0.5
"""Share of `mastered_gain` a never-learned task must have gained to be on the frontier: a
chance task whose warm-up scores were all alike (a locked corridor's first door, which opens
by chance in nearly every episode) has no baseline error to speak of, and a gain of a few
hundredths is then significant without meaning anything."""
_BASE_VAR_INFLATION = 5.0
"""Factor on the warm-up's noise variance in the frontier test. That variance rests on the 4
successive differences of the default warm-up, and comes out several times too small often
enough to make a noise task's baseline look precise (PPO on a noisy crafting chain: 5 uniform
returns with standard deviation 0.10 against the noise's 0.29, a baseline 0.3 below the mean,
and the task took 70% of the samples after mastery). Student's t with 4 degrees of freedom puts
the tail of 3 normal standard errors at 6.6 of them: (6.6 / 3)^2 = 4.9."""
_FRONTIER_TIMESCALES = 2.0
"""Slow-EMA timescales (1 / a_s completions each) of practice a frontier task gets without
showing learning progress or being learned before it leaves the frontier (until a configuration
is next mastered: the budget starts again then; meanwhile it is revisited like a learned
task). What the warm-up's
variance cannot rule out, practice does: a noise task whose baseline came out low stays where
it is however often it is sampled (on the simulator, 12 of 4000 runs of the after-mastery setup
gave such a task up to 64% of the samples after mastery), while a task learned slowly rises."""
_ADMISSION_RATE = 1.0 / 8
"""Rate of the EMA of failed admissions (no candidate good enough)."""
_ADMISSION_FAILURE_LIMIT = 0.25
"""Learned tasks are evicted only while fewer admissions than this fail."""
_ADMISSION_GIVE_UP = 0.95
"""No task is evicted while more admissions than this fail (until a task is next mastered)."""
_CROWDED = 2.0
"""A learned configuration holding more than this many times its share of the pool is crowded."""


def config_key(env_cfg: Any, label: str, *, ignore: frozenset[str] = frozenset()) -> int:
    """A positive int64 key of a task's label and env config without the top-level fields in
    `ignore`, the same in every process (for configs whose `repr` is: plain data)."""
    if ignore and isinstance(env_cfg, Mapping):
        env_cfg = {k: v for k, v in env_cfg.items() if k not in ignore}
    digest = hashlib.blake2b(repr((label, env_cfg)).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") >> 1) or 1


def id_fields(generator: TaskGenerator, capacity: int) -> frozenset[str]:
    """Top-level env config fields in which `generator` repeats the task id (a tag, a seed
    taken from the id): they tell tasks apart but not what a task is, so configuration keys
    leave them out. Found by generating three probe ids of one slot."""
    fields: set[str] | None = None
    for task_id in (1, capacity + 1, 2 * capacity + 1):
        env_cfg, _ = generator.generate(task_id)
        echo = {k for k, v in env_cfg.items() if type(v) is int and v == task_id} if isinstance(env_cfg, Mapping) \
            else set()
        fields = echo if fields is None else fields & echo
    return frozenset(fields or ())


def _label_key(label: str) -> int:
    return (int.from_bytes(hashlib.blake2b(label.encode(), digest_size=8).digest(), "little") >> 1) or 1


class _PoolView(NamedTuple):
    """What one refresh knows about the pool, per slot (and the number of configurations)."""

    lp: np.ndarray
    warm: np.ndarray
    learned: np.ndarray
    idle: np.ndarray
    """Without LP."""
    stagnant: np.ndarray
    """Warm, without LP, never learned."""
    frontier: np.ndarray
    """Stagnant, but with a slow EMA significantly above the baseline (partly learned), and
    frontier practice left."""
    stalled: np.ndarray
    """Partly learned, its frontier practice spent."""
    share: np.ndarray | None
    """1 / the copies of the slot's configuration in the pool (None: the same for every slot)."""
    configs: int
    kept: np.ndarray
    """The one task of its label that eviction keeps."""


class LearningProgressAlgorithm(CurriculumAlgorithm):
    """Samples tasks in proportion to their learning progress, revisits learned ones, and
    remembers which configurations and labels turned out stagnant."""

    evicts = True
    key_arrays = frozenset({"lp_key", "lp_label_keys", "lp_memory_keys"})
    cold_arrays = frozenset({"lp_memory", "lp_memory_keys"})

    def __init__(self, config: LearningProgressConfig, capacity: int, generator: TaskGenerator) -> None:
        super().__init__(capacity)
        self.config = config
        self.generator = generator
        a_f = config.ema_timescale
        a_s = a_f * config.slow_timescale_factor
        self._a_fast = a_f
        self._a_slow = a_s
        k2 = a_f / (2 - a_f) + a_s / (2 - a_s) - 2 * a_f * a_s / (a_f + a_s - a_f * a_s)
        self._noise_scale = config.noise_z * math.sqrt(max(k2, 0.0))
        self._max_baseline = config.max_baseline
        self._mastered_gain = config.mastered_gain
        self._warmup = config.min_samples_for_lp
        self._memory_size = config.config_memory
        self._peak_decay = a_s * config.slow_timescale_factor
        # the baseline (the warm-up mean) is off by about sigma / sqrt(warm-up)
        self._baseline_noise = config.noise_z / math.sqrt(self._warmup)
        # variance of the slow EMA per unit of noise variance, and of the baseline per unit of
        # warm-up variance (inflated: see _BASE_VAR_INFLATION), for the frontier test
        self._frontier_terms = (config.frontier_z ** 2 * a_s / (2 - a_s),
                                config.frontier_z ** 2 * _BASE_VAR_INFLATION / self._warmup)
        self._frontier_gain = _FRONTIER_GAIN * config.mastered_gain
        self._frontier_budget = round(_FRONTIER_TIMESCALES / a_s)
        self._retry_samples = max(1, round(1.0 / a_f))
        self._proven = self._warmup + self._retry_samples
        self._id_fields = id_fields(generator, capacity)
        self._record_constants = (a_f, a_s, self._max_baseline, self._mastered_gain, self._peak_decay,
                                  self._noise_scale ** 2)
        self._view: _PoolView | None = None
        self._group_cache: tuple[tuple[int, ...], None, np.ndarray, int, np.ndarray] | None = None
        self._slot_weights = np.arange(1, capacity + 1, dtype=np.int64) * 0x9E3779B1

    # ---- layout --------------------------------------------------------------------------------
    def extra_layout(self) -> dict[str, tuple[str, int]]:
        n = self.capacity
        # one row per slot, so a completion reads and writes its statistics in one call each
        layout = {"lp_state": ("float64", n * _NUM_FIELDS), "lp_key": ("int64", n), "lp_label": ("int64", n)}
        layout["lp_label_keys"] = ("int64", LABEL_TABLE_SIZE)
        layout["lp_label_usefulness"] = ("float64", LABEL_TABLE_SIZE)
        layout["lp_label_retries"] = ("int64", LABEL_TABLE_SIZE)
        layout["lp_counters"] = ("int64", len(LP_COUNTERS))
        layout["lp_admission_failure"] = ("float64", 1)
        if self._memory_size:
            layout["lp_memory_keys"] = ("int64", self._memory_size)
            layout["lp_memory"] = ("float64", self._memory_size * _NUM_FIELDS)
        return layout

    def bind(self, tracker: Any) -> None:
        super().bind(tracker)
        arrays = tracker.backend.arrays
        self._state = arrays["lp_state"].reshape(self.capacity, _NUM_FIELDS)
        (self._fast, self._slow, self._var, self._baseline, self._base_var, self._last, self._peak,
         self._front, self._count) = self._state.T
        self._key = arrays["lp_key"]  # configuration key; 0: not known yet
        self._label = arrays["lp_label"]  # label table index + 1; 0: not known yet (or untracked)
        self._label_keys = arrays["lp_label_keys"]
        self._usefulness = arrays["lp_label_usefulness"]
        self._retries = arrays["lp_label_retries"]  # samples of stagnant tasks each label is still owed
        self._counters = arrays["lp_counters"]
        self._admission_failure = arrays["lp_admission_failure"]
        self._memory_keys = arrays.get("lp_memory_keys")
        self._memory = arrays.get("lp_memory")
        self._state_view = memoryview(arrays["lp_state"])
        self._key_view = memoryview(self._key)
        self._label_view = memoryview(self._label)
        self._usefulness_view = memoryview(self._usefulness)
        self._retries_view = memoryview(self._retries)
        self._view = None
        self._group_cache = None
        self._label_indices: dict[str, tuple[int, int]] = {}  # label -> (index + 1, key), checked on use

    def generator_for_slot(self, slot: int) -> TaskGenerator:
        return self.generator

    # ---- writes (under the tracker lock) -------------------------------------------------------
    def reset_slot(self, slot: int) -> None:
        if self._count.item(slot) >= self._warmup and self._key.item(slot) != 0:
            self._remember(slot)
        self._state[slot] = 0.0
        self._key[slot] = 0
        self._label[slot] = 0

    def replacement_task_id(self, slot: int, evicted_task_id: int) -> int:
        """Of the next `admission_candidates` ids of `slot`, those whose configuration is not
        remembered as stagnant and whose label is useful enough qualify: the first qualifying
        configuration the pool does not hold, else the first qualifying one; else the most
        useful candidate."""
        generate = self.generator.generate
        threshold = self.config.admission_usefulness
        best = (-1.0, 0, 0, 0)  # usefulness, task id, key, label index
        qualified = None  # the first qualifying candidate, and how many were passed over before it
        previous = 0
        looked = 0
        for k in range(1, self.config.admission_candidates + 1):
            task_id = evicted_task_id + k * self.capacity
            env_cfg, label = generate(task_id)
            key = config_key(env_cfg, label, ignore=self._id_fields)
            if key == previous:  # a generator that repeats itself for consecutive ids has no choice to offer
                break
            previous = key
            looked = k
            label_index = self._label_index(label)
            usefulness = self._usefulness.item(label_index - 1) if label_index else _PRIOR_USEFULNESS
            entry = self._find(key)
            if entry >= 0 and not self._entry_useful(entry):
                usefulness = 0.0
            candidate = (usefulness, task_id, key, label_index)
            if usefulness >= threshold:
                if not (self._key == key).any():  # (O(pool), only for a qualifying candidate)
                    qualified = (candidate, k - 1)
                    break
                if qualified is None:
                    qualified = (candidate, k - 1)
            elif usefulness > best[0]:
                best = candidate
        if qualified is not None:
            best, skipped = qualified
        else:
            skipped = looked
        self._counters[_SKIPPED] += skipped
        failure = self._admission_failure.item(0)
        self._admission_failure[0] = failure + _ADMISSION_RATE * (float(best[0] < threshold) - failure)
        _, task_id, key, label_index = best
        self._key[slot] = key
        self._label[slot] = label_index
        self._inherit(slot, key)
        return task_id

    def record(self, slot: int, score: float, completions: int) -> int:
        # memoryviews of the arrays: scalar reads and writes at half the cost of numpy's
        state = self._state_view
        i = slot * _NUM_FIELDS
        fast, slow, var, b, base_var, last, peak, front, n = state[i:i + _NUM_FIELDS].tolist()
        if n == 0.0 and self._key_view[slot] == 0:
            self._identify(slot)
            fast, slow, var, b, base_var, last, peak, front, n = state[i:i + _NUM_FIELDS].tolist()
        n += 1.0
        a_f, a_s, max_baseline, mastered_gain, peak_decay, band2 = self._record_constants
        if n <= self._warmup:
            # warm-up: raw scores, whose mean becomes the baseline and seeds the EMAs, so one
            # noisy early score cannot open a gap that then decays like progress
            fast += (score - fast) / n
            if n > 1.0:
                d = score - last
                var += (0.5 * d * d - var) / (n - 1.0)
            if n == self._warmup:
                b = fast if fast < max_baseline else max_baseline
                scale = 1.0 / (1.0 - b)
                fast = (fast - b) * scale
                var *= scale * scale
                score = (score - b) * scale
            state[i + _FAST] = fast
            state[i + _SLOW] = fast
            state[i + _VAR] = var
            state[i + _BASE] = b
            state[i + _BASE_VAR] = var
            state[i + _LAST] = score
            state[i + _PEAK] = fast
            state[i + _COUNT] = n
            return POOL_UNCHANGED
        x = (score - b) / (1.0 - b)
        mastered_at = (max_baseline - b) / (1.0 - b)  # the slow EMA at level max_baseline
        was_below = slow < mastered_at
        fast += a_f * (x - fast)
        slow += a_s * (x - slow)
        d = x - last
        var += a_s * (0.5 * d * d - var)
        learned_at = mastered_gain + self._baseline_noise * math.sqrt(var)
        if mastered_at < learned_at:
            learned_at = mastered_at
        if slow >= peak or peak < learned_at:  # ground lost counts only below a learned peak
            peak = slow
        else:
            peak -= peak_decay * (peak - slow)
        state[i + _FAST] = fast
        state[i + _SLOW] = slow
        state[i + _VAR] = var
        state[i + _LAST] = x
        state[i + _PEAK] = peak
        state[i + _COUNT] = n
        gap = fast - slow if fast > slow else slow - fast
        if peak - slow > gap:
            gap = peak - slow
        progressing = slow >= learned_at or gap * gap > band2 * var
        if not progressing and slow >= self._frontier_gain:
            slow_terms, base_terms = self._frontier_terms
            if slow * slow > slow_terms * var + base_terms * base_var:  # practised on the frontier
                state[i + _FRONT] = front + 1.0
        if was_below and slow >= mastered_at and not self._mastered_elsewhere(slot):
            # a configuration newly mastered: every label is owed samples of its stagnant tasks,
            # and admissions are worth trying again
            self._counters[_EVENTS] += 1
            self._retries[:] = self._retry_samples
            self._front[self._front > 0.0] = 0.0  # and frontier tasks to practice again
            self._admission_failure[0] = 0.0
            self._forget_stagnant()
        label = self._label_view[slot] - 1
        if label >= 0:
            usefulness = self._usefulness_view
            u = usefulness[label]
            if progressing:
                if u < _SETTLED_USEFUL:  # (an EMA this close to 1 stays put: no write)
                    usefulness[label] = u + a_f * (1.0 - u)
            else:
                if u > _SETTLED_STAGNANT:
                    usefulness[label] = u - a_f * u
                retries = self._retries_view
                owed = retries[label]
                if owed > 0:
                    retries[label] = owed - 1
        return POOL_UNCHANGED

    def _learned_at(self, b: float, var: float) -> float:
        """The slow EMA from which a task with baseline `b` and noise variance `var` counts as
        learned: `mastered_gain` above a baseline that is itself the mean of a few noisy scores
        (so plus `noise_z` of its standard error), or the level `max_baseline`."""
        return min(self._mastered_gain + self._baseline_noise * math.sqrt(var), (self._max_baseline - b) / (1.0 - b))

    def _mastered_elsewhere(self, slot: int) -> bool:
        """Whether another task of the pool with this slot's configuration is mastered (O(pool),
        only when a task's level reaches `max_baseline`)."""
        same = np.flatnonzero(self._key == self._key.item(slot))
        same = same[(same != slot) & (self._count[same] >= self._warmup)]
        b = self._baseline[same]
        return bool(((b + self._slow[same] * (1.0 - b)) >= self._max_baseline).any())

    def _identify(self, slot: int) -> None:
        """Key and label of a task the pool was filled with, at its first completion; a
        configuration seen before hands its statistics on."""
        env_cfg, label = self.generator.generate(self.tracker.task_ids.item(slot))
        key = config_key(env_cfg, label, ignore=self._id_fields)
        self._key[slot] = key
        self._label[slot] = self._label_index(label)
        self._counters[_IDENTIFIED] += 1
        if self._count.item(slot) == 0:
            self._inherit(slot, key)

    def _label_index(self, label: str) -> int:
        """Label table index + 1 of `label`, adding it if there is room; 0 if untracked."""
        known = self._label_indices.get(label)
        if known is not None and self._label_keys.item(known[0] - 1) == known[1]:  # (a loaded state may differ)
            return known[0]
        key = _label_key(label)
        keys = self._label_keys
        for probe in range(_PROBES):
            i = (key + probe) % LABEL_TABLE_SIZE
            stored = keys.item(i)
            if stored == 0:
                keys[i] = key
                self._usefulness[i] = _PRIOR_USEFULNESS
                stored = key
            if stored == key:
                self._label_indices[label] = (i + 1, key)
                return i + 1
        return 0

    def _find(self, key: int) -> int:
        """Memory entry holding `key`, or -1."""
        keys = self._memory_keys
        if keys is None:
            return -1
        for probe in range(_PROBES):
            i = (key + probe) % self._memory_size
            stored = keys.item(i)
            if stored == key:
                return i
            if stored == 0:
                return -1
        return -1

    def _entry_useful(self, entry: int) -> bool:
        """Whether a remembered configuration had LP beyond its noise band or was learned."""
        m = self._memory
        base = entry * _NUM_FIELDS
        fast, slow, peak = m.item(base + _FAST), m.item(base + _SLOW), m.item(base + _PEAK)
        gap = max(abs(fast - slow), peak - slow)
        var = m.item(base + _VAR)
        return slow >= self._learned_at(m.item(base + _BASE), var) or gap > self._noise_scale * math.sqrt(var)

    def _forget_stagnant(self) -> None:
        """Drop the memory's verdicts on configurations that showed neither learning progress
        nor mastery: the student just mastered something, so what was out of reach (or only
        learning too slowly to see) may not be any more, and admission should offer it again
        (O(memory), once per mastery)."""
        keys = self._memory_keys
        if keys is None:
            return
        m = self._memory.reshape(-1, _NUM_FIELDS)
        fast, slow, var, base, peak = m[:, _FAST], m[:, _SLOW], m[:, _VAR], m[:, _BASE], m[:, _PEAK]
        gap = np.maximum(np.abs(fast - slow), peak - slow)
        stale = (keys != 0) & (slow < self._learned_at_pool(base, var)) & (gap <= self._noise_scale * np.sqrt(var))
        if stale.any():
            self.tracker.lock.touch_globals()
            keys[stale] = 0
            m[stale] = 0.0

    def _remember(self, slot: int) -> None:
        keys = self._memory_keys
        if keys is None:
            return
        key = self._key.item(slot)
        m = self._memory
        target, fewest = -1, math.inf
        for probe in range(_PROBES):
            i = (key + probe) % self._memory_size
            stored = keys.item(i)
            if stored == key or stored == 0:
                target = i
                break
            count = m.item(i * _NUM_FIELDS + _COUNT)
            if count < fewest:  # a full neighbourhood: replace the entry with the least evidence
                target, fewest = i, count
        self.tracker.lock.touch_globals()
        keys[target] = key
        base = target * _NUM_FIELDS
        m[base:base + _NUM_FIELDS] = self._state[slot]

    def _inherit(self, slot: int, key: int) -> None:
        entry = self._find(key)
        if entry < 0:
            return
        m = self._memory
        base = entry * _NUM_FIELDS
        self._state[slot] = m[base:base + _NUM_FIELDS]
        self._counters[_HITS] += 1

    # ---- reads (lock-free, once per refresh) ---------------------------------------------------
    def scores(self) -> np.ndarray:
        slow = self._slow
        gap = np.maximum(np.abs(self._fast - slow), self._peak - slow)
        gap -= self._noise_scale * np.sqrt(self._var)
        lp = np.maximum(gap, 0.0, out=gap)
        lp[self._count < self._warmup] = 0.0
        return lp

    def score_at(self, slot: int) -> float:
        if self._count.item(slot) < self._warmup:
            return 0.0
        slow = self._slow.item(slot)
        gap = max(abs(self._fast.item(slot) - slow), self._peak.item(slot) - slow)
        return max(gap - self._noise_scale * math.sqrt(self._var.item(slot)), 0.0)

    def learned(self) -> np.ndarray:
        """Per slot: warm and learned (its slow EMA `mastered_gain` above its baseline, or its
        level at least `max_baseline`)."""
        return (self._count >= self._warmup) & (self._slow >= self._learned_at_pool())

    def _learned_at_pool(self, b: np.ndarray | None = None, var: np.ndarray | None = None) -> np.ndarray:
        """`_learned_at` of every slot (or of the rows with baselines `b` and variances `var`)."""
        b = self._baseline if b is None else b
        var = self._var if var is None else var
        learned_at = self._max_baseline - b
        learned_at /= 1.0 - b
        return np.minimum(learned_at, self._mastered_gain + self._baseline_noise * np.sqrt(var), out=learned_at)

    def cold_weights(self) -> np.ndarray:
        """Per slot: a cold task's part of the cold budget relative to one nothing is known
        about (its label's usefulness x2, capped at 1); 0 for warm tasks."""
        usefulness = np.concatenate(([_PRIOR_USEFULNESS], self._usefulness))[self._label]
        return np.where(self._count < self._warmup, np.minimum(2.0 * usefulness, 1.0), 0.0)

    def _groups(self) -> tuple[np.ndarray | None, int, np.ndarray]:
        """Per slot 1 / copies of its configuration in the pool (unknown ones count as distinct;
        None when every configuration has as many copies), the number of configurations, and
        the slots kept as their label's one task (while the labels take at most half the pool).
        Recomputed only when a task changed."""
        # a fingerprint of which slot holds which configuration and label (int64 arithmetic
        # wraps, which a fingerprint does not mind): a task replaced by one of the same
        # configuration changes nothing here
        weights = self._slot_weights
        changes = (int(self._key @ weights), int(self._label @ weights))
        cache = self._group_cache
        if cache is not None and cache[0] == changes:
            return cache[2], cache[3], cache[4]
        n = self.capacity
        key, label = self._key.copy(), self._label.copy()
        _, group, copies = np.unique(np.where(key != 0, key, -1 - np.arange(n)), return_inverse=True,
                                     return_counts=True)
        kept = np.zeros(n, dtype=bool)
        if copies.size <= n // 2:  # one task of every configuration
            first = np.zeros(copies.size, dtype=np.int64)
            first[group[::-1]] = np.arange(n - 1, -1, -1)  # the last write is the first slot
            kept[first] = True
        else:
            labels = np.unique(label)
            if labels.size <= n // 2:  # else one task of every label
                first_of_label = np.zeros(LABEL_TABLE_SIZE + 1, dtype=np.int64)
                first_of_label[label[::-1]] = np.arange(n - 1, -1, -1)
                kept[first_of_label[labels]] = True
        # every configuration with as many copies as the others: splitting per configuration
        # changes no weight relative to another, and is skipped (None)
        share = None if copies.min() == copies.max() else 1.0 / copies[group]
        self._group_cache = (changes, None, share, copies.size, kept)
        return share, copies.size, kept

    def _pool_view(self, scores: np.ndarray) -> _PoolView:
        warm = self._count >= self._warmup
        learned = self._slow >= self._learned_at_pool()
        learned &= warm
        share, configs, kept = self._groups()
        lp = np.where(warm, scores, 0.0)
        idle = lp <= 0.0
        stagnant = warm & idle
        stagnant &= ~learned
        frontier, stalled = self._frontier(stagnant)
        return _PoolView(lp, warm, learned, idle, stagnant, frontier, stalled, share, configs, kept)

    def _frontier(self, stagnant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Of the `stagnant` slots, those whose slow EMA lies at least half of `mastered_gain`
        and `frontier_z` standard errors (of the slow EMA and of the warm-up mean) above the
        baseline (partly learned): those with frontier practice left, and the others."""
        slow_terms, base_terms = self._frontier_terms
        slow = self._slow
        partly = stagnant & (slow >= self._frontier_gain)
        partly &= slow * slow > slow_terms * self._var + base_terms * self._base_var
        frontier = partly & (self._front < self._frontier_budget)
        return frontier, partly & ~frontier

    @staticmethod
    def _per_config(mask: np.ndarray, share: np.ndarray | None) -> np.ndarray:
        """`mask` as weights split per configuration (as it is when `share` is None)."""
        return mask if share is None else mask * share

    def due_retry(self, view: _PoolView) -> np.ndarray:
        """Per slot: a warm, never-learned task without LP, not on the frontier, whose label is
        still owed samples since a configuration was last mastered."""
        owed = np.concatenate(([0], self._retries))[self._label] > 0
        owed &= view.stagnant
        owed &= ~view.frontier
        return owed

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        n = scores.shape[0]
        config = self.config
        view = self._view = self._pool_view(scores)
        warm, learned, share = view.warm, view.learned, view.share
        num_cold = n - int(np.count_nonzero(warm))
        lp = view.lp if share is None else view.lp * share  # copies of one configuration share its weight
        lp_total = float(lp.sum())
        revisited = learned & view.idle
        revisited |= view.stalled
        revisit = self._per_config(revisited, share) if revisited.any() else None
        revisit_total = float(revisit.sum()) if revisit is not None else 0.0
        retry = self._per_config(self.due_retry(view), share) if config.retry and self._retries.any() else None
        retry_total = float(retry.sum()) if retry is not None else 0.0
        cold = self.cold_weights() if num_cold else None
        cold_total = float(cold.sum()) if cold is not None else 0.0
        cold_share = config.cold_exploration * cold_total / num_cold if num_cold else 0.0
        revisit_share = config.revisit if revisit_total else 0.0
        retry_share = config.retry if retry_total else 0.0
        rest = 1.0 - config.exploration - cold_share - revisit_share - retry_share
        probs = np.full(n, config.exploration / n) if share is None else share * (config.exploration / view.configs)
        if lp_total > 0.0 and math.isfinite(lp_total):
            # normalise first: rest / lp_total overflows to inf when LP is subnormal (inf * 0 = NaN)
            lp /= lp_total
            lp *= rest
            probs += lp
        elif num_cold < n:
            # nothing is learning: the frontier (partly learned tasks, improving too slowly to show
            # LP) if any, else learned tasks and stagnant ones whose verdict is not proven yet
            frontier = view.frontier
            mask = frontier if frontier.any() else learned | (warm & (self._count < self._proven))
            fallback = self._per_config(mask, share)
            total = float(fallback.sum())
            if not total:
                fallback = self._per_config(warm, share)
                total = float(fallback.sum())
            probs += fallback * (rest / total)
        elif cold_total > 0.0:
            cold_share += rest
        else:
            probs += rest / n
        if revisit_share:
            probs += revisit * (revisit_share / revisit_total)
        if retry_share:
            probs += retry * (retry_share / retry_total)
        if cold_share > 0.0:
            probs += cold * (cold_share / cold_total)
        return probs

    def eviction_candidates(self, eligible: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """Warm tasks without LP, the first non-empty group of: never-learned tasks except one
        per label while the labels take at most half the pool (a task not yet within reach looks
        stagnant until the student is ready for it); learned tasks of crowded configurations;
        learned tasks while learned configurations hold more than `LEARNED_POOL_SHARE` of the
        pool. Learned ones only while admissions find better tasks."""
        view, self._view = self._view, None
        if view is None:
            view = self._pool_view(scores)
        failure = self._admission_failure.item(0)
        if failure > _ADMISSION_GIVE_UP:  # nothing better to admit: churn would only cost samples
            return np.zeros_like(eligible)
        idle = eligible & view.warm & (scores <= 0.0)
        stagnant = idle & view.stagnant & ~view.kept
        if stagnant.any() or failure > _ADMISSION_FAILURE_LIMIT:
            return stagnant
        n = eligible.shape[0]
        idle_learned = idle & view.learned
        share = np.full(n, view.configs / n) if view.share is None else view.share
        crowded = idle_learned & (share * (_CROWDED * n / view.configs) < 1.0)
        if crowded.any():
            return crowded
        learned_configs = float((view.learned * share).sum())  # configurations with all copies learned count 1
        return idle_learned if learned_configs > LEARNED_POOL_SHARE * n else np.zeros(n, dtype=bool)

    def check_arrays(self, arrays: dict[str, np.ndarray]) -> str | None:
        state = arrays["lp_state"].reshape(-1, _NUM_FIELDS)
        if (state[:, _VAR] < 0).any() or (state[:, _BASE_VAR] < 0).any():
            return "negative learning-progress variances"
        if (state[:, _BASE] > self._max_baseline).any():  # b = 1 would divide by zero
            return f"learning-progress baselines above max_baseline={self._max_baseline}"
        if (state[:, _COUNT] < 0).any() or (state[:, _FRONT] < 0).any() or (arrays["lp_label_retries"] < 0).any() \
                or (arrays["lp_counters"] < 0).any():
            return "negative learning-progress counts"
        label = arrays["lp_label"]
        if ((label < 0) | (label > LABEL_TABLE_SIZE)).any():
            return f"label indices outside [0, {LABEL_TABLE_SIZE}]"
        if (arrays["lp_key"] < 0).any() or (arrays["lp_label_keys"] < 0).any():
            return "negative configuration or label keys"
        usefulness = arrays["lp_label_usefulness"]
        failure = arrays["lp_admission_failure"]
        if ((usefulness < 0) | (usefulness > 1)).any() or ((failure < 0) | (failure > 1)).any():
            return "label usefulness or admission failure rate outside [0, 1]"
        if "lp_memory" in arrays:
            memory = arrays["lp_memory"].reshape(-1, _NUM_FIELDS)
            if (memory[:, _VAR] < 0).any() or (memory[:, _BASE_VAR] < 0).any() or (memory[:, _COUNT] < 0).any() \
                    or (memory[:, _FRONT] < 0).any() or (arrays["lp_memory_keys"] < 0).any() \
                    or (memory[:, _BASE] > self._max_baseline).any():
                return ("configuration memory entries with negative keys, variances, counts or frontier practice, or "
                        f"baselines above max_baseline={self._max_baseline}")
        return None

    def stats(self) -> dict[str, Any]:
        view = self._pool_view(self.scores())
        return {
            "lp_noise_band_scale": self._noise_scale,
            "lp_learned_tasks": int(np.count_nonzero(view.learned)),
            "lp_revisited_tasks": int(np.count_nonzero((view.learned & view.idle) | view.stalled)),
            "lp_cold_tasks": int(np.count_nonzero(~view.warm)),
            "lp_frontier_tasks": int(np.count_nonzero(view.frontier)),
            "lp_memory_hits": self._counters.item(_HITS),
            "lp_admissions_skipped": self._counters.item(_SKIPPED),
            "lp_mastery_events": self._counters.item(_EVENTS),
        }
