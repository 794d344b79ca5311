"""The accounting oracle: silent on correct runs, loud on every planted bug, with the numbers.

Each planted bug is a small, realistic change to the real code (a formula, a counter rule, an
ordering), made with monkeypatch; the oracle must name the metric it breaks. None of them has
a canary of its own in the gate: the oracle catches them because it recomputes every number.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

import curriculum.curriculum as curriculum_module
import curriculum.env as env_module
import curriculum.stats as stats_module
from curriculum import (
    BucketedTaskGenerator,
    Curriculum,
    CurriculumConfig,
    CurriculumEnv,
    LearningProgressConfig,
    Stage,
    StagedProgressionConfig,
    UniformConfig,
)
from curriculum.stats import accumulate_rollout_stats, process_training_stats
from harness.envs import ExactAccountingEnv
from harness.episodes import ENDED_TERMINAL, EPISODE_RECORD_KEY, EpisodeRecord, LabelledTaskGenerator
from harness.oracle import (
    AccountingOracle,
    OracleMismatch,
    WatchedCurriculum,
    mean_return,
    reference_entropy,
    reference_gini,
)
from harness.runners import run_direct, run_single_env, run_vectorized
from harness.task_spaces import chain_task_space, impossible_task_space


# ---------------------------------------------------------------------------------- references
@pytest.mark.parametrize("values", [[1, 2, 3, 4], [0, 0, 5], [2.5], [0.1, 0.7, 0.2, 0.0, 3.3]])
def test_reference_gini_agrees_with_the_sorted_formula(values: list[float]) -> None:
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    sorted_formula = float(((2 * np.arange(1, n + 1) - n - 1) * x).sum() / (n * x.sum()))
    assert reference_gini(values) == pytest.approx(sorted_formula, abs=1e-12)


def test_reference_gini_and_entropy_edge_cases() -> None:
    assert reference_gini([]) == reference_gini([0, 0]) == 0.0
    assert reference_gini([-1, 1]) == pytest.approx(0.5)  # negatives count as 0
    assert reference_entropy([1, 1, 1, 1]) == pytest.approx(1.0)
    assert reference_entropy([1, 0, 0]) == 0.0
    assert reference_entropy([5]) == 0.0
    assert reference_entropy([1, 3]) == pytest.approx(-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)) / np.log(2))


# ---------------------------------------------------------------------------------- runs
def lp_direct_run(oracle: AccountingOracle) -> None:
    """Learning progress on 5 learnable + 5 noise-paying impossible tasks, evicting, direct runner."""
    space = impossible_task_space(num_learnable=5, num_impossible=5, mode="noise", seed=3)
    config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=16, seed=3, refresh_interval=8)
    run_direct(Curriculum(config), space, episodes=1500, epoch_length=250, stats_interval=50, oracle=oracle)


def lp_serial_run(oracle: AccountingOracle) -> None:
    """Four envs with 3-step episodes under Serial: tasks are evicted while episodes of them run."""
    config = CurriculumConfig(task_generator=impossible_task_space(num_learnable=3, num_impossible=3, mode="noise",
                                                                   seed=4).generator,
                              algorithm=LearningProgressConfig(min_samples_for_lp=2), num_active_tasks=8, seed=4,
                              refresh_interval=4, min_presentations=3, eviction_percentile=50.0)
    run_vectorized(config, functools.partial(impossible_task_space, num_learnable=3, num_impossible=3, mode="noise",
                                             seed=4),
                   backend="Serial", tracking="shared", num_envs=4, episodes=1200, epoch_length=200, episode_length=3,
                   stats_interval=30, oracle=oracle)


def lp_single_env_run(oracle: AccountingOracle) -> None:
    space = chain_task_space(num_tasks=4, seed=1)
    config = CurriculumConfig(task_generator=space.generator, algorithm=LearningProgressConfig(),
                              num_active_tasks=8, seed=1)
    run_single_env(Curriculum(config), space, episodes=600, epoch_length=200, stats_interval=40, oracle=oracle)


def exact_env_run(oracle: AccountingOracle, *, env_kwargs: dict[str, Any], buckets: dict[str, list[Any]],
                  episodes: int = 60, algorithm: Any = None, score_fn: Any = None) -> None:
    """A CurriculumEnv over an ExactAccountingEnv, stepped by hand, epochs through the pipeline."""
    generator = LabelledTaskGenerator(BucketedTaskGenerator({}, buckets, label="exact", seed=2))
    config = CurriculumConfig(task_generator=generator, algorithm=algorithm or UniformConfig(), num_active_tasks=6,
                              seed=2, score_range=(0.0, 100.0))
    curriculum = oracle.watch(Curriculum(config))
    env = CurriculumEnv(ExactAccountingEnv(**env_kwargs), curriculum, stats_interval=7, score_fn=score_fn)
    env.reset()
    actions = np.zeros(env.num_agents, dtype=np.int32)
    raw: dict[str, list[float]] = defaultdict(list)
    for step in range(1, 4 * episodes + 1):
        infos = env.step(actions)[4]
        if infos:
            oracle.observe(infos)
            accumulate_rollout_stats(infos, raw)
        if step % 40 == 0:
            oracle.epoch(process_training_stats(raw, agent_step=len(oracle.episodes), epoch=step // 40 - 1))
            raw.clear()


def staged_direct_run(oracle: AccountingOracle, *, mix: float = 0.0) -> None:
    """Staged progression over a 4-task chain, with regression, through the direct runner
    (`mix`: the share of the pool given to the previous stage's tasks)."""
    space = chain_task_space(num_tasks=4, seed=5)
    stages = [Stage(f"s{i}", LabelledTaskGenerator(BucketedTaskGenerator({"task_index": i}, {}, label=f"task_{i}")))
              for i in range(4)]
    algorithm = StagedProgressionConfig(stages=stages, advancement_threshold=0.5, min_episodes=20, window=10,
                                        regression_threshold=0.3, previous_stage_mix=mix)
    config = CurriculumConfig(algorithm=algorithm, num_active_tasks=4, seed=5)
    run_direct(Curriculum(config), space, episodes=1200, epoch_length=200, oracle=oracle)


MULTI_AGENT = {"env_kwargs": {"num_agents": 3, "done_flags": "hold"},
               "buckets": {"reward_per_step": [[1.0, 0.5, 0.25], [0.25, 0.25, 1.0]], "episode_length": [[2, 4, 3]]}}
TIME_LIMIT = {"env_kwargs": {}, "buckets": {"episode_length": [2, 3], "end": ["truncated", "terminal", "desync"]}}
DICT_INFOS = {"env_kwargs": {"infos": "dict"}, "buckets": {"episode_length": [2, 3], "end": ["truncated", "desync"]}}


def verified(run: Callable[[AccountingOracle], None]) -> AccountingOracle:
    oracle = AccountingOracle(seed=0, context="test")
    run(oracle)
    if not oracle.verified:  # the vectorized runner verifies a curriculum it built before closing it
        oracle.verify()
    return oracle


RUNS: dict[str, Callable[[AccountingOracle], None]] = {
    "lp-direct": lp_direct_run,
    "lp-single-env": lp_single_env_run,
    "lp-serial": lp_serial_run,
    "multi-agent": lambda oracle: exact_env_run(oracle, **MULTI_AGENT),
    "time-limit": lambda oracle: exact_env_run(oracle, **TIME_LIMIT),
    "dict-infos": lambda oracle: exact_env_run(oracle, **DICT_INFOS),
    "staged": staged_direct_run,
    "staged-mixed": lambda oracle: staged_direct_run(oracle, mix=0.5),
}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_correct_runs_have_no_mismatch(run: str) -> None:
    oracle = verified(RUNS[run])
    assert oracle.episodes, "the run produced no episode for the oracle to check"


def test_a_run_whose_oracle_sees_nothing_it_expected_is_flagged() -> None:
    oracle = AccountingOracle(seed=4, context="orphans")
    record = EpisodeRecord("env-a", 0, {"level": 1, "label": "x"}, (1.0,), ENDED_TERMINAL, 1)
    oracle.observe([{EPISODE_RECORD_KEY: record}])
    oracle.observe([{"curriculum_stats/episodes": 1, "curriculum_stats/task_id": 9}])
    message = ("accounting oracle [orphans], seed 4: 3 reported number(s) disagree with what ran:\n"
               "- episode 0 of env env-a (x:[('level', 1)]) ended but the wrapper reported no episode for it\n"
               "- the wrapper reported an episode (task id 9) that no env ran (info keys "
               "['curriculum_stats/episodes', 'curriculum_stats/task_id'])\n"
               # the stats pipeline, run by verify() on every info seen, counts the orphan report too
               "- episodes (env records) in epoch 0: oracle 0, reported 1")
    with pytest.raises(OracleMismatch, match=f"^{re.escape(message)}$"):
        oracle.verify()


def test_watched_curriculum_has_exactly_the_capabilities_it_watches() -> None:
    class Minimal:
        def get_task(self) -> Any: ...

        def update_task_performance(self, task_id: int, score: float) -> Any: ...

        def stats(self) -> dict[str, Any]:
            return {}

    watched = AccountingOracle(seed=0).watch(Minimal())
    assert isinstance(watched, WatchedCurriculum)
    assert getattr(watched, "active_tasks", None) is None and getattr(watched, "get_state", None) is None
    assert callable(watched.update_task_performance)


# ---------------------------------------------------------------------------------- planted bugs
def _unsorted_gini(values: Any) -> float:
    x = np.maximum(np.asarray(values, dtype=np.float64).ravel(), 0.0)  # bug: not sorted
    n = x.size
    if n == 0 or x.sum() <= 0:
        return 0.0
    return max(0.0, float(((2.0 * np.arange(1, n + 1) - n - 1) * x).sum() / (n * x.sum())))


def _log2_entropy(p: Any) -> float:
    p = np.asarray(p, dtype=np.float64).ravel()
    p = p[p > 0] / p.sum()
    return float(-(p * np.log2(p)).sum() / np.log(len(p) or 2))  # bug: log2 against a natural-log maximum


def _entropy_past_one(p: Any) -> float:
    return _ENTROPY(p) * (1.0 + 4e-16)  # bug: not capped at 1 (a uniform distribution's rounds over)


_ENTROPY = curriculum_module.normalized_entropy


def _single_sample_unreduced(monkeypatch: pytest.MonkeyPatch) -> None:
    reduce = stats_module._reduce

    def shortcut(key: str, values: list[float]) -> int | float:
        return values[0] if len(values) == 1 else reduce(key, values)  # bug: one sample is "its own mean"

    monkeypatch.setattr(stats_module, "_reduce", shortcut)


def _counters_as_floats(monkeypatch: pytest.MonkeyPatch) -> None:
    reduce = stats_module._reduce

    def as_float(key: str, values: list[float]) -> int | float:
        return float(reduce(key, values))  # bug: a counter of int reports summed as a float

    monkeypatch.setattr(stats_module, "_reduce", as_float)


def _late_credited_to_new_task(monkeypatch: pytest.MonkeyPatch) -> None:
    update = Curriculum.update_task_performance

    def credit_slot(self: Curriculum, task_id: int, score: float) -> bool:
        current = self._task_ids.item(task_id % self._capacity)
        return update(self, current if current > task_id else task_id, score)  # bug: late -> the slot's new task

    monkeypatch.setattr(Curriculum, "update_task_performance", credit_slot)


def _credit_next_task(monkeypatch: pytest.MonkeyPatch) -> None:
    end_episode = env_module._EpisodeAccounting.end_episode

    def next_first(self: Any, task: Any, returns: np.ndarray, *, desync: bool) -> Any:
        upcoming = self.draw_task()  # bug: the next task is drawn first and takes the credit
        self.draw_task = lambda: upcoming
        try:
            return end_episode(self, upcoming, returns, desync=desync)
        finally:
            del self.draw_task

    monkeypatch.setattr(env_module._EpisodeAccounting, "end_episode", next_first)


def _summed_agent_score(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env_module._EpisodeAccounting, "score",
                        lambda self, task, returns: float(returns.sum()))  # bug: the team total, not the mean


def _counters_averaged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats_module, "SUMMED_STATS",
                        tuple(s for s in stats_module.SUMMED_STATS if s != "completions"))  # bug: averaged


def _substring_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats_module, "is_summed_stat",
                        lambda key: any(part in key for part in stats_module.SUMMED_STATS))  # bug: substrings


def _overview_from_wrong_key(monkeypatch: pytest.MonkeyPatch) -> None:
    overview = dict(stats_module.OVERVIEW_METRICS, **{"overview/completions": "curriculum_stats/episodes"})
    monkeypatch.setattr(stats_module, "OVERVIEW_METRICS", overview)


def _late_never_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    record = env_module.CompletionRecorder.record

    def without_late(self: Any, task_id: int, label: str, score: float) -> dict[str, Any]:
        entries = record(self, task_id, label, score)
        entries[stats_module.stat_key("late_completions")] = 0  # bug: late completions reported as 0
        return entries

    monkeypatch.setattr(env_module.CompletionRecorder, "record", without_late)


def _slot_sums_not_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.tracker import TaskTracker

    assign = TaskTracker.assign

    def keep_sum(self: TaskTracker, slot: int, task_id: int, *, evicted: bool) -> None:
        old = float(self.score_sum[slot])
        assign(self, slot, task_id, evicted=evicted)
        if evicted:
            self.score_sum[slot] = old  # bug: the evicted task's score sum stays with the new task

    monkeypatch.setattr(TaskTracker, "assign", keep_sum)


def _samples_not_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    make_task = Curriculum._make_task

    def keep_samples(self: Curriculum, slot: int, task_id: int) -> Any:
        samples = self._samples[slot]
        task = make_task(self, slot, task_id)
        self._samples[slot] = samples  # bug: the new task inherits the old one's sample count
        return task

    monkeypatch.setattr(Curriculum, "_make_task", keep_samples)


def _total_counts_late(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = Curriculum.stats

    def inflated(self: Curriculum) -> dict[str, Any]:
        out = stats(self)
        out["total_completions"] += out["late_completions"]  # bug: late ones counted as recorded
        return out

    monkeypatch.setattr(Curriculum, "stats", inflated)


def _time_limit_as_desync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env_module, "is_desync_truncation", lambda env, infos: True)  # bug: every cut is a desync


def _advance_one_late(monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.algorithms.staged import StagedProgressionAlgorithm

    record = StagedProgressionAlgorithm.record

    def late(self: Any, slot: int, score: float, completions: int) -> int:
        threshold = self.config.min_episodes
        object.__setattr__(self.config, "min_episodes", threshold + 1)  # bug: off by one
        try:
            return record(self, slot, score, completions)
        finally:
            object.__setattr__(self.config, "min_episodes", threshold)

    monkeypatch.setattr(StagedProgressionAlgorithm, "record", late)


def _draws_one_slot_off(monkeypatch: pytest.MonkeyPatch) -> None:
    refresh = Curriculum._refresh

    def shifted(self: Curriculum) -> None:
        refresh(self)
        self._draws = [(slot + 1) % self._capacity for slot in self._draws]  # bug: an off-by-one in the lookup

    monkeypatch.setattr(Curriculum, "_refresh", shifted)


def _min_presentations_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    init = Curriculum.__init__

    def ignoring(self: Curriculum, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._min_presentations = 1  # bug: the config's min_presentations never reaches the eviction rule

    monkeypatch.setattr(Curriculum, "__init__", ignoring)


def _previous_stage_mix_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.algorithms.staged import StagedProgressionAlgorithm

    init = StagedProgressionAlgorithm.__init__

    def unmixed(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._mixed_slots = 0  # bug: the config's previous_stage_mix never reaches the pool

    monkeypatch.setattr(StagedProgressionAlgorithm, "__init__", unmixed)


def _mean_score_over_one_more(monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.algorithms.base import CurriculumAlgorithm

    def biased(self: Any) -> np.ndarray:
        tracker = self.tracker
        low, high = self.score_range
        mean = tracker.score_sum / (tracker.completions + 1)  # bug: divides by one completion too many
        return (mean - low) / (high - low)

    monkeypatch.setattr(CurriculumAlgorithm, "mean_scores", biased)


def _left_task_reads_successor(monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.tracker import EMPTY, TaskTracker

    def successor_stats(self: TaskTracker, slot: int, task_id: int) -> tuple[int, float, float]:
        if self.task_ids.item(slot) == EMPTY:  # bug: checks for an empty slot, not for the task's own id
            return 0, 0.0, 0.0
        n = self.completions.item(slot)
        return n, (self.score_sum.item(slot) / n if n else 0.0), self.last_score.item(slot)

    monkeypatch.setattr(TaskTracker, "task_stats", successor_stats)


def _replacement_keeps_old_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.curriculum import Curriculum as Real
    from curriculum.task import CurriculumTask

    make_task = Real._make_task

    def cached(self: Any, slot: int, task_id: int) -> CurriculumTask:
        previous = self._tasks[slot]
        task = make_task(self, slot, task_id)
        if previous is not None:  # bug: the slot's config is cached, a replacement runs its predecessor's
            task.env_cfg, task.label = previous.env_cfg, previous.label
        return task

    monkeypatch.setattr(Real, "_make_task", cached)


def _reset_infos_overwrite(monkeypatch: pytest.MonkeyPatch) -> None:
    def overwriting(infos: Any, reset_infos: Any) -> Any:
        if isinstance(infos, dict) and isinstance(reset_infos, Mapping):
            infos.update(reset_infos)  # bug: the new episode's reset info replaces the ended one's keys
            return infos
        return with_reset_infos(infos, reset_infos)

    with_reset_infos = env_module._with_reset_infos
    monkeypatch.setattr(env_module, "_with_reset_infos", overwriting)


def _internal_key_left_in_infos(monkeypatch: pytest.MonkeyPatch) -> None:
    def leaking(infos: Any, entries: Mapping[str, Any]) -> Any:
        return with_entries(infos, {**entries, "curriculum_completion": {"score": 0.0}})  # bug: an internal key

    with_entries = env_module._with_entries
    monkeypatch.setattr(env_module, "_with_entries", leaking)


def _stage_entry_for_every_curriculum(monkeypatch: pytest.MonkeyPatch) -> None:
    def staged_or_not(self: Any, entries: dict[str, Any]) -> Any:
        task = self.draw_task()
        entries["curriculum_stats/stage"] = self.curriculum.stage  # bug: None for a curriculum without stages
        return task

    monkeypatch.setattr(env_module._EpisodeAccounting, "draw_next_task", staged_or_not)


PLANTED: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], str, str]] = {
    "gini without sorting": (lambda mp: (monkeypatch_both(mp, "gini_coefficient", _unsorted_gini)), "lp-direct",
                             "gini"),
    "entropy in the wrong base": (lambda mp: monkeypatch_both(mp, "normalized_entropy", _log2_entropy), "lp-direct",
                                  "entropy"),
    "entropy of uniform sampling past 1": (lambda mp: monkeypatch_both(mp, "normalized_entropy", _entropy_past_one),
                                           "time-limit", "outside [0, 1]"),
    "a gauge of a single sample passed on as it came": (_single_sample_unreduced, "time-limit", "a gauge is a mean"),
    "a counter of int reports summed as a float": (_counters_as_floats, "lp-direct", "a counter is an int"),
    "late completion credited to the slot's new task": (_late_credited_to_new_task, "lp-serial", "late"),
    "episode credited to the next task": (_credit_next_task, "lp-single-env", "wrong task"),
    "multi-agent score summed over agents": (_summed_agent_score, "multi-agent", "score of"),
    "counter averaged over the epoch": (_counters_averaged, "lp-direct", "env_curriculum_stats/completions"),
    "counter rule on substrings": (_substring_counters, "lp-direct", "total_completions"),
    "overview from the wrong key": (_overview_from_wrong_key, "time-limit", "overview/completions"),
    "late completions never reported": (_late_never_reported, "lp-serial", "late"),
    "slot score sum not reset on eviction": (_slot_sums_not_reset, "lp-direct", "mean_score of"),
    "sample count not reset for a new task": (_samples_not_reset, "lp-direct", "sampling_gini"),
    "late completions counted as recorded": (_total_counts_late, "lp-serial", "total_completions"),
    "time-limit truncation treated as desync": (_time_limit_as_desync, "time-limit", "not recorded as a completion"),
    "stage advances one completion late": (_advance_one_late, "staged", "stage after update"),
    "draws one slot off the reported distribution": (_draws_one_slot_off, "lp-direct", "chi-square"),
    "min_presentations ignored": (_min_presentations_ignored, "lp-direct", "before min_presentations=10"),
    "previous_stage_mix ignored": (_previous_stage_mix_ignored, "staged-mixed", "previous_stage_mix=0.5"),
    "uniform's task score off its mean score": (_mean_score_over_one_more, "time-limit", "(its mean score)"),
    "an evicted task reads its successor's numbers": (_left_task_reads_successor, "lp-direct", "left the pool"),
    "a replacement task runs its predecessor's config": (_replacement_keeps_old_config, "lp-direct",
                                                          "its generator gives that id"),
    "an auto-reset's infos overwrite the ended episode's": (_reset_infos_overwrite, "dict-infos",
                                                            "reached the user as"),
    "a key the wrapper uses internally left in the infos": (_internal_key_left_in_infos, "lp-single-env",
                                                            "keys no env wrote"),
    "a stage entry of None for a curriculum without stages": (_stage_entry_for_every_curriculum, "lp-single-env",
                                                              "'curriculum_stats/stage': None"),
}


def monkeypatch_both(mp: pytest.MonkeyPatch, name: str, replacement: Callable[..., float]) -> None:
    """The metric as both the curriculum and the pipeline import it."""
    mp.setattr(curriculum_module, name, replacement)
    mp.setattr(stats_module, name, replacement)


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_oracle_catches_planted_bug(bug: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plant, run, needle = PLANTED[bug]
    plant(monkeypatch)
    with pytest.raises(OracleMismatch) as caught:
        verified(RUNS[run])
    message = str(caught.value)
    assert message.startswith("accounting oracle [test], seed 0: "), message
    assert needle in message, f"the oracle caught {bug!r} but did not name {needle!r}:\n{message}"
    assert "reported" in message, message


def _running_sum_record(self: Any, slot: int, score: float, completions: int) -> int:
    """Staged progression's rule on a plain running window sum, never resynchronised: within the
    oracle's contract (rounding at a threshold may decide either way), and its sum drifts."""
    from curriculum.algorithms.base import POOL_REFILL, POOL_UNCHANGED

    c, window = self._counters, self.config.window
    stage = c.item(0)
    c[2] += 1  # stage_episodes
    count, pos = c.item(3), c.item(4)
    total = self._window_sum.item(0) - (self._window.item(pos) if count == window else 0.0) + score
    self._window[pos] = score
    self._window_sum[0] = total
    c[3], c[4] = min(count + 1, window), (pos + 1) % window
    if c.item(2) < self.config.min_episodes:
        return POOL_UNCHANGED
    mean = total / c.item(3)
    if stage < self._last and mean >= self.config.advancement_threshold:
        self._set_stage(stage + 1)
        c[5] += 1
        return POOL_REFILL
    if stage > 0 and mean < self.config.regression_threshold:
        self._set_stage(stage - 1)
        c[6] += 1
        return POOL_REFILL
    return POOL_UNCHANGED


class _PlugIn:
    """A curriculum of another package: the built-in one behind a class of its own."""

    def __init__(self, inner: Curriculum) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


#: Scores after which the running sum keeps the rounding of scores that left the window:
#: (1.0, 0.0) sums to just under 1, a mean of just under the regression threshold.
_ROUNDING_SCORES = (0.0, 0.2, 0.2, 0.3, 0.261, 0.7, 0.3, 0.0, 1.0, 0.0, 1.0, 0.261, 0.1, 0.2, 0.1)


def _running_sum_run(monkeypatch: pytest.MonkeyPatch, plug_in: bool) -> AccountingOracle:
    from curriculum.algorithms.staged import StagedProgressionAlgorithm

    monkeypatch.setattr(StagedProgressionAlgorithm, "record", _running_sum_record)
    stages = [Stage(f"s{i}", LabelledTaskGenerator(BucketedTaskGenerator({"stage": i}, {}, label=f"s{i}")))
              for i in range(2)]
    algorithm = StagedProgressionConfig(stages=stages, advancement_threshold=0.5, regression_threshold=0.25,
                                        min_episodes=4, window=2)
    oracle = AccountingOracle(seed=0, context="test")
    inner = Curriculum(CurriculumConfig(algorithm=algorithm, num_active_tasks=1, seed=0))
    curriculum = oracle.watch(_PlugIn(inner) if plug_in else inner)
    for score in _ROUNDING_SCORES:
        curriculum.update_task_performance(curriculum.get_task().task_id, score)
    curriculum.stats()
    return oracle


def test_a_plug_ins_staged_decision_left_to_rounding_is_followed_to_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plug-in's stage kept at a threshold by rounding is followed, and so is every later
    decision: a window mean at a threshold after scores that round is at it either way, even
    when the rounding score is the one the oracle replays after following the curriculum."""
    _running_sum_run(monkeypatch, plug_in=True).verify()


def test_the_built_in_stage_moves_on_the_windows_scores_not_on_its_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in rule is exact (a window mean at a threshold is at it, whatever scores left
    the window before): a running sum that regresses on its rounding is named."""
    with pytest.raises(OracleMismatch, match=r"stage after .*oracle 1 .*reported 0"):
        _running_sum_run(monkeypatch, plug_in=False).verify()


def test_mean_return_is_the_default_score() -> None:
    assert mean_return((1.0, 2.0, 6.0)) == 3.0
