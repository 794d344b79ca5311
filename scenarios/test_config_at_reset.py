"""Config applied at reset: every episode runs exactly the task it was handed, from its first
step to its last, the first episode included (seeds/004, "CurriculumEnv Config Timing").

The exact-accounting env reports the config it is running in every observation, so an episode
that starts on the previous task's config, or whose config changes mid-episode, is visible.
The same holds through the gymnasium wrapper (`GymCurriculumEnv`, what stable-baselines3 and
other gymnasium trainers use), with terminal ends, time-limit truncations and desync cuts,
under the accounting oracle; the env sits inside gymnasium's own wrappers (what
`gymnasium.make` adds), signals desync cuts by its `desync_truncation` attribute, and the
wrapper passes each `reset(seed=, options=)` on to the env as given. At an episode's end the
trainer reads the wrapper's own `curriculum_stats/...` entries, whatever the env wrote under
those names.

And the task handed out is the one its id names: under churn, with its settings nested in a
sub-config, every task's config is what a private copy of the generator gives its id (a
generator that copies configs shallowly lets drawing one task rewrite another's).
"""

from __future__ import annotations

import copy
import inspect
import math
import random
import sys
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from numbers import Integral, Real
from typing import Any, ClassVar

import gymnasium
import numpy as np
import pytest

from curriculum import (BucketedTaskGenerator, CurriculumConfig, CurriculumConfigError, EpisodeNotStartedError,
                        GymCurriculumEnv, InvalidScoreError, LearningProgressConfig, SingleTaskGenerator, Stage,
                        StagedProgressionConfig, UniformConfig)
from curriculum.errors import LockTimeoutError, UnknownTaskError
from harness.envs import GymExactAccountingEnv, ExactAccountingEnv
from harness.episodes import LabelledTaskGenerator
from harness.protocol import ProtocolView
from harness.task_spaces import impossible_task_space
from harness.thresholds import ENV_WRAPPER as LIMITS
from harness.thresholds import INVARIANCES


class DrawFailed(RuntimeError):
    """A task draw that failed (as a lock timeout does), before anything was drawn."""


class DrawInterrupted(KeyboardInterrupt):
    """Ctrl-C landing in a task draw, before anything was drawn: no `Exception`, so only a
    handler of `BaseException` keeps what the episode's end had settled."""


class RecordFailed(RuntimeError):
    """A completion that failed to record (a store the curriculum writes to was unavailable),
    before anything was recorded."""


#: What a failed record raises, in turn: any error, and the named ones a curriculum raises for a
#: completion it cannot take (a task a rolled-back curriculum never had, a lock held too long).
#: Each must propagate from the wrapper and drop the episode, none be taken for a verdict.
RECORD_FAILURES = (RecordFailed, UnknownTaskError, LockTimeoutError)


class _HandedOut:
    """Records every task the curriculum hands out, in order; with `fail_every`, one
    `get_task()` in that many (drawn at random from `seed`: a fixed period can fall on the
    retries alone) raises `DrawFailed` or, every other time, `DrawInterrupted` instead, drawing nothing; with `fail_records_every`, one
    `update_task_performance()` in that many raises one of `RECORD_FAILURES` (in turn), recording nothing."""

    def __init__(self, curriculum, fail_every: int | None = None, seed: int = 0, *,
                 fail_records_every: int | None = None) -> None:
        self.curriculum = curriculum
        self.tasks = []
        self.fail_every = fail_every
        self.failures = random.Random(seed)
        self.fail_records_every = fail_records_every
        self.record_failures = random.Random(f"{seed}-records")
        self.calls = 0
        self.failed_draws = 0
        self.failed_records = 0

    def update_task_performance(self, task_id, score):
        if self.fail_records_every and self.record_failures.random() * self.fail_records_every < 1.0:
            self.failed_records += 1
            failure = RECORD_FAILURES[self.failed_records % len(RECORD_FAILURES)]
            raise failure(f"the completion of task {task_id} failed to record ({failure.__name__})")
        return self.curriculum.update_task_performance(task_id, score)

    def __getattr__(self, name):  # test double: everything else goes to the curriculum
        return getattr(self.curriculum, name)

    def get_task(self):
        self.calls += 1
        if self.fail_every and self.failures.random() * self.fail_every < 1.0:
            self.failed_draws += 1
            failure = DrawInterrupted if self.failed_draws % 2 == 0 else DrawFailed
            raise failure(f"get_task() call {self.calls} failed")
        task = self.curriculum.get_task()
        self.tasks.append(task)
        return task


#: The mean return (episode_length 3 x reward_per_step 1.0) that `_score` maps out of the
#: curriculum's range: the wrapper must refuse that episode (`InvalidScoreError`), not clip it.
OUT_OF_RANGE_RETURN = 3.0


#: A reward one float32 step above 1 (so exact in every buffer) whose returns over 3 and 5 steps
#: are not float32 numbers: a wrapper that rounds a return to float32 records another score.
FINE_REWARD = 1.0 + 2.0**-23


def _score(returns) -> float:
    mean = float(sum(returns) / len(returns))
    return 1.5 if mean == OUT_OF_RANGE_RETURN else min(mean / 10.0, 1.0)


def _out_of_range(config: tuple[float, float]) -> bool:
    length, reward = config
    return length * reward == OUT_OF_RANGE_RETURN


def _assert_out_of_range_scores_refused(refused: int, ran: list[tuple[float, float]], seed: int) -> None:
    """Every full episode whose score left the range was dropped: refused with
    `InvalidScoreError` (by the wrapper, or by a curriculum it leaves the range to), or failed
    to record before the curriculum could refuse it."""
    expected = sum(1 for config in ran if _out_of_range(config))
    assert refused == expected, (
        f"{expected} full episodes scored 1.5 (outside the score range [0, 1]); {refused} of them were refused "
        f"with InvalidScoreError (or failed to record first), seed {seed}")


def test_every_episode_runs_its_own_task_from_first_to_last_step(curriculum_factory, curriculum_env_class,
                                                                 scenario_seed, golden, oracle) -> None:
    """Every episode runs the task handed out for it, also when the env's start fails now and
    then (every `LIMITS.fail_every_reset`-th reset raises, the auto-reset or an explicit
    `reset()`, and every `LIMITS.fail_every_config`-th `set_env_config`; the retry starts the
    task drawn for the failed start, no other is drawn; the
    ended episode's infos come with the retry), when the curriculum's draw fails now and then
    (one `get_task()` in `LIMITS.fail_every_draw`; the ended episode stays recorded, and its
    infos come with the `reset()` that draws again), when recording an episode fails now and
    then (one in `LIMITS.fail_every_record`: the episode is dropped, neither recorded nor
    counted by the wrapper), when its score leaves the score range (refused with
    `InvalidScoreError` and dropped likewise, never clipped), and when an episode is abandoned
    by `reset()` after its first step (every `LIMITS.abandon_every`-th). After an episode end
    that failed, `step()` is refused until `reset()`. The env's own resets get a seed only from
    the loop's `reset(seed=)`: an auto-reset never reseeds it."""
    generator = LabelledTaskGenerator(BucketedTaskGenerator(
        {}, {"episode_length": [2, 3, 5, 8], "reward_per_step": [0.25, 0.5, 1.0]}, label="exact", seed=scenario_seed))
    watcher = oracle(score_fn=_score, context="single env")
    curriculum = _HandedOut(watcher.watch(curriculum_factory(CurriculumConfig(
        task_generator=generator, algorithm=UniformConfig(), num_active_tasks=12, seed=scenario_seed))),
        fail_every=LIMITS.fail_every_draw, seed=scenario_seed, fail_records_every=LIMITS.fail_every_record)
    inner = ExactAccountingEnv(fail_every_reset=LIMITS.fail_every_reset, fail_every_config=LIMITS.fail_every_config)
    env = curriculum_env_class(inner, curriculum, seed=scenario_seed, score_fn=_score)
    seeded = []  # the seed of every reset() call the loop made, failed ones included

    def reset(seed=None):  # a failed start is retried, as a training loop does: with the task drawn for it
        while True:
            seeded.append(seed)
            try:
                obs, infos = env.reset(seed=seed)
            except (RuntimeError, DrawInterrupted):  # the running episode, if any, was abandoned all the same
                _assert_step_refused_until_reset(env, scenario_seed, np.zeros(1, dtype=np.int32))
                continue
            watcher.observe(infos)
            return obs

    obs = reset(seed=scenario_seed)
    actions = np.zeros(1, dtype=np.int32)
    episodes, steps_in_episode, seen = [], 0, []
    refused = 0
    current = (float(obs[0][0]), float(obs[0][1]))
    while len(episodes) < LIMITS.episodes:
        running = (float(obs[0][0]), float(obs[0][1]))
        seen.append(running)
        try:
            obs, _, terminals, truncations, infos = env.step(actions)
        except (RuntimeError, InvalidScoreError, DrawInterrupted, *RECORD_FAILURES) as error:
            # the episode ended; it or the next start failed
            refused += isinstance(error, (InvalidScoreError, *RECORD_FAILURES)) and _out_of_range(current)
            _assert_step_refused_until_reset(env, scenario_seed, actions)
            obs, terminals, truncations = reset(), [True], [False]
        else:
            watcher.observe(infos)
        steps_in_episode += 1
        abandoned = len(episodes) % LIMITS.abandon_every == LIMITS.abandon_every - 1
        if terminals[0] or truncations[0] or abandoned:
            episodes.append((current, sorted(set(seen)), None if abandoned else steps_in_episode))
            if abandoned and not (terminals[0] or truncations[0]):
                obs = reset()  # start over: the running episode is abandoned, unreported
            seen, steps_in_episode = [], 0
            current = (float(obs[0][0]), float(obs[0][1]))
    given = [seed for seed in seeded if seed is not None]
    received = [seed for seed in inner.reset_seeds if seed is not None]
    assert received == given, (
        f"the env's resets were given the seeds {received[:8]} ({len(received)} in all), the loop's reset() calls "
        f"{given} ({len(given)}): an auto-reset must not reseed the env (its episodes would replay one random "
        f"stream), seed {scenario_seed}")
    for index, ((start_cfg, configs, length), task) in enumerate(zip(episodes, curriculum.tasks)):
        expected = (float(task.env_cfg["episode_length"]), float(task.env_cfg["reward_per_step"]))
        assert configs == [expected], (
            f"episode {index} was handed task {task.task_id} with config {expected} (episode_length, reward_per_step) "
            f"but ran {configs}, seed {scenario_seed}"
        )
        assert length in (None, expected[0]), (
            f"episode {index} lasted {length} steps, its task's episode_length is {expected[0]:.0f}, seed {scenario_seed}"
        )
    watcher.verify()
    _assert_wrapper_counts_what_was_recorded(env, curriculum, scenario_seed)
    _assert_out_of_range_scores_refused(refused, [e[1][0] for e in episodes if e[2] is not None], scenario_seed)
    golden({"episodes": len(episodes), "first_configs": [e[0] for e in episodes[:8]]})


def _assert_wrapper_counts_what_was_recorded(env, curriculum, seed: int) -> None:
    """The wrapper's own completion count (where it keeps one) is what the curriculum recorded:
    an episode whose record failed is not counted; and its episode count (ended and settled,
    documented) is those completions and its desync cuts, no failed or abandoned episode."""
    completions = getattr(env, "completions", None)
    if completions is None:
        return  # a plug-in wrapper that keeps no count
    stats = curriculum.stats()
    recorded = stats["total_completions"] + stats["late_completions"]
    assert completions == recorded, (
        f"{type(env).__name__} counts {completions} completions, the curriculum recorded {recorded} "
        f"({curriculum.failed_records} records failed), seed {seed}")
    episodes, cuts = getattr(env, "episodes", None), getattr(env, "desync_truncations", None)
    if episodes is None or cuts is None:
        return
    assert episodes == recorded + cuts, (
        f"{type(env).__name__} counts {episodes} episodes, but {recorded} were recorded and {cuts} cut by desync "
        f"truncations ({curriculum.failed_records} records failed: a failed episode is not counted), seed {seed}")


#: Labels of the gymnasium run by episode length, a "/" inside as in hierarchical labels
#: ("maze/small"): every per-label number and overview counts them like any other.
_LENGTH_LABELS = {2: "length/2", 3: "length/3", 5: "length/5"}


# the env returns one info dict from every reset and step on purpose (gymnasium's checker warns
# about it): a wrapper that writes its episode entries into it repeats them at every later step
@pytest.mark.filterwarnings("ignore:.*The infos returned by `step` and the following `step` share an object")
@pytest.mark.filterwarnings("ignore:.*The infos returned by `reset` and the following `step` share an object")
@pytest.mark.parametrize("desync_signal", ["attribute", "loose", "mixed"])
def test_gymnasium_wrapper_runs_and_records_every_episode_once(curriculum_factory, scenario_seed, oracle,
                                                              desync_signal) -> None:
    """`GymCurriculumEnv` over a gymnasium env: each episode runs its own task's config from its
    first step, full episodes and time-limit truncations are recorded once, desync cuts never,
    episodes abandoned by a `reset()` after their first step (gymnasium's way to start over)
    never, and leave nothing in the next one, every number it reports matches the oracle's
    recomputation, and a draw that fails now and then (one `get_task()` in
    `LIMITS.fail_every_draw`, at an episode's end or in `reset()`) loses nothing: the ended
    episode stays recorded and its infos come with the `reset()` that draws again; an episode
    whose record fails (one in `LIMITS.fail_every_record`) or whose score leaves the range is
    dropped, and not counted; an env start that fails now and then (every
    `LIMITS.fail_every_reset`-th) is retried on the task drawn for it. Desync cuts are flagged
    by the env's attribute, or by an info flag that is also there (False, or True) when the
    episode ended otherwise ("loose"): only a truncation with the flag is a cut, also at a step
    that terminates as well ("mixed"). After an episode end that failed, `step()` is refused
    until `reset()`. The tasks' labels hold a "/" (`_LENGTH_LABELS`)."""
    generator = LabelledTaskGenerator(BucketedTaskGenerator(
        {}, {"episode_length": [2, 3, 5], "reward_per_step": [0.25, 1.0, FINE_REWARD],
         "end": ["terminal", "truncated", "desync"]},
        label="exact", value_labels={"episode_length": _LENGTH_LABELS}, seed=scenario_seed))
    watcher = oracle(score_fn=_score, context="GymCurriculumEnv")
    curriculum = _HandedOut(watcher.watch(curriculum_factory(CurriculumConfig(
        task_generator=generator, algorithm=UniformConfig(), num_active_tasks=12, seed=scenario_seed))),
        fail_every=LIMITS.fail_every_draw, seed=scenario_seed, fail_records_every=LIMITS.fail_every_record)
    inner = GymExactAccountingEnv(seed=scenario_seed, desync_signal=desync_signal,
                                  fail_every_reset=LIMITS.fail_every_reset)
    made = gymnasium.wrappers.OrderEnforcing(gymnasium.wrappers.PassiveEnvChecker(inner))  # as gymnasium.make builds it
    env = GymCurriculumEnv(made, curriculum, seed=scenario_seed, score_fn=_score, stats_interval=7)
    ran, resets, refused, full, named, unstarted = [], [], 0, [], [], []
    for index in range(LIMITS.episodes):
        seed, options = scenario_seed if index == 0 else None, {"episode": index} if index % 2 else None
        while True:  # a failed draw or env start is retried, as a training loop does
            try:
                obs, info = env.reset(seed=seed, options=options)
            except (RuntimeError, DrawInterrupted):  # (DrawFailed is one); the running episode was abandoned all the same
                _assert_step_refused_until_reset(env, scenario_seed, 0)
                last = named[-1][-1] if named else None  # a start that failed started no task
                if (None if env.task is None else env.task.task_id) != last:
                    unstarted.append((index, None if env.task is None else env.task.task_id, last))
                continue
            break
        resets.append((seed, options))
        watcher.observe(info)
        configs, tasks = set(), {env.task.task_id}  # (`task`: the running episode's, or the one just ended)
        done = ended = False
        while not done:
            configs.add((float(obs[0]), float(obs[1])))
            try:
                obs, _, terminated, truncated, info = env.step(0)
            except (DrawFailed, DrawInterrupted):  # the episode ended and was recorded; the next reset() draws again
                ended = True
                _assert_step_refused_until_reset(env, scenario_seed, 0)
                break
            except (*RECORD_FAILURES, InvalidScoreError):  # the episode ended and was dropped; the next reset() draws
                refused += _out_of_range(min(configs))
                ended = True
                _assert_step_refused_until_reset(env, scenario_seed, 0)
                break
            finally:
                tasks.add(env.task.task_id)
            watcher.observe(info)
            ended = terminated or truncated
            done = ended or index % LIMITS.abandon_every == LIMITS.abandon_every - 1
        ran.append(sorted(configs))
        named.append(sorted(tasks))
        full.append(ended)
    assert not unstarted, (
        f"GymCurriculumEnv: after a reset() whose start failed, `env.task` named a task that never started instead "
        f"of the episode that ended last (None before the first): (episode, named, ended last) {unstarted[:4]}, "
        f"seed {scenario_seed}")
    for index, (configs, task, tasks) in enumerate(zip(ran, curriculum.tasks, named)):
        expected = (float(task.env_cfg["episode_length"]), float(task.env_cfg["reward_per_step"]))
        assert configs == [expected], (
            f"GymCurriculumEnv: episode {index} was handed task {task.task_id} with config {expected} "
            f"(episode_length, reward_per_step) but ran {configs}, seed {scenario_seed}")
        assert tasks == [task.task_id], (
            f"GymCurriculumEnv: episode {index} ran task {task.task_id}, but `env.task` named tasks {tasks} from its "
            f"reset to its last step (the running episode's, or the one just ended), seed {scenario_seed}")
    passed = next((i for i, (given, got) in enumerate(zip(resets, inner.resets)) if given != got), None)
    assert passed is None and len(inner.resets) == len(resets), (
        f"GymCurriculumEnv: reset {passed} was called with (seed, options) {resets[passed]}, the env received "
        f"{inner.resets[passed]}, seed {scenario_seed}" if passed is not None else
        f"GymCurriculumEnv: {len(resets)} reset() calls, the env was reset {len(inner.resets)} times, "
        f"seed {scenario_seed}")
    unconfigured = [index for index, configured in enumerate(inner.configured) if not configured]
    assert not unconfigured, (
        f"GymCurriculumEnv: {len(unconfigured)} of the env's {len(inner.configured)} episode starts came without "
        f"set_env_config before them (starts {unconfigured[:6]}); every task starts with its config set, the same task "
        f"drawn again too, seed {scenario_seed}")
    watcher.verify()
    _assert_wrapper_counts_what_was_recorded(env, curriculum, scenario_seed)
    scored = [configs[0] for configs, task, ended in zip(ran, curriculum.tasks, full)
              if ended and task.env_cfg["end"] != "desync"]  # a desync cut is never scored
    _assert_out_of_range_scores_refused(refused, scored, scenario_seed)


def _assert_step_refused_until_reset(env, seed: int, action: Any) -> None:
    """After an episode end that failed (its record, its score, the next draw or the env's next
    start), the episode is over: a `step()` before `reset()` must be refused, not run on (nor
    credit the ended task again)."""
    name = type(env).__name__
    try:
        env.step(action)
    except EpisodeNotStartedError:
        return
    except Exception as error:  # noqa: BLE001 - reported below
        pytest.fail(f"{name}: step() after a failed episode end raised {type(error).__name__}: {error}, "
                    f"expected EpisodeNotStartedError (call reset() first), seed {seed}")
    pytest.fail(f"{name}: step() after a failed episode end ran on instead of asking for reset(), seed {seed}")


#: What a `score_fn` returns in the centralized-tracking check: scores in and out of the range,
#: of every kind of real number (numpy scalars, fractions), and results that are no score at all.
_RESULTS = (0.5, 1.0, math.nan, math.inf, -math.inf, 1.5, -0.25, np.float32(0.5), np.float64(0.25), np.int64(1),
            Fraction(1, 3), np.float32(1.5), np.int64(-1), True, False, np.bool_(True), "0.5", None,
            10**400, -10**400, Decimal("0.5"), np.array(0.5))
"""(10**400: an int no float holds, as an exact integer return sum may be)"""


def test_a_wrapper_that_leaves_recording_to_the_main_process_refuses_a_score_out_of_range(
        curriculum_factory, curriculum_env_class, require_capability, scenario_seed) -> None:
    """Under centralized tracking (`local_tracking=False`) the wrapper sends each completion to
    the main process to record; it is the last to see the episode, so a score outside the score
    range the curriculum's config declares (NaN always) must be refused there, at the episode's
    end, never sent on, and so must a result that is not a number (a success flag, a numpy bool,
    a string, None), which a curriculum recording it itself would refuse. A score in the range
    is sent."""
    require_capability("local_tracking" in inspect.signature(curriculum_env_class).parameters,
                       "this env wrapper takes no `local_tracking` option: it always records itself")
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=LabelledTaskGenerator(SingleTaskGenerator({"episode_length": 2}, label="reported")),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed))
    outcomes = {}
    for score in _RESULTS:
        env = curriculum_env_class(ExactAccountingEnv(episode_length=2), curriculum, local_tracking=False,
                                   score_fn=lambda returns, score=score: score, seed=scenario_seed)
        env.reset()
        try:
            for _ in range(2):
                env.step(np.zeros(1, dtype=np.int32))
        except InvalidScoreError:
            outcomes[repr(score)] = "refused"
        else:
            outcomes[repr(score)] = "sent"
        finally:
            env.close()
    # the range the curriculum declares (its config's), else any number: NaN is never a score
    low, high = getattr(getattr(curriculum, "config", None), "score_range", None) or (-math.inf, math.inf)
    def is_score(value: Any) -> bool:  # (a number no float holds is none, whatever the range)
        return isinstance(value, Real) and not isinstance(value, (bool, np.bool_)) and low <= value <= high \
            and not (isinstance(value, Integral) and abs(value) > sys.float_info.max)

    wrong = {name: outcome for (name, outcome), score in zip(outcomes.items(), _RESULTS)
             if outcome != ("sent" if is_score(score) else "refused")}
    assert not wrong, (f"scores of episodes the wrapper reports for the main process (range [{low}, {high}]): "
                       f"{wrong}, seed {scenario_seed}")


class ScoreFnFailed(KeyError):
    """A `score_fn`'s own failure (a lookup of its own that found nothing)."""


def _failing_score(returns) -> float:
    raise ScoreFnFailed(f"no score for returns {list(returns)}")


@pytest.mark.parametrize("wrapper", ["pufferlib", "gymnasium"])
def test_a_score_fn_that_raises_reaches_the_trainer_as_its_own_error(curriculum_factory, curriculum_env_class,
                                                                     scenario_seed, wrapper) -> None:
    """A `score_fn` that raises: its own error propagates from the wrapper's `step()` as it is,
    not renamed (a trainer's `except KeyError` must still catch it), and the episode is dropped,
    neither recorded nor counted."""
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25}, label="exact"),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed))
    if wrapper == "pufferlib":
        env, action = curriculum_env_class(ExactAccountingEnv(), curriculum, seed=scenario_seed,
                                           score_fn=_failing_score), np.zeros(1, dtype=np.int32)
    else:
        env, action = GymCurriculumEnv(GymExactAccountingEnv(), curriculum, seed=scenario_seed,
                                       score_fn=_failing_score), 0
    env.reset(seed=scenario_seed)
    try:
        for _ in range(2):  # (the episode ends at its second step)
            env.step(action)
    except Exception as error:  # noqa: BLE001 - its kind is the check
        raised = error
    else:
        raised = None
    assert type(raised) is ScoreFnFailed, (
        f"{type(env).__name__}: a score_fn raising ScoreFnFailed (a KeyError) at an episode's end made step() raise "
        f"{raised!r}; the score_fn's own error must propagate as it is, seed {scenario_seed}")
    stats = curriculum.stats()
    recorded = stats.get("total_completions", 0) + stats.get("late_completions", 0)
    assert recorded == 0, (
        f"{type(env).__name__}: the episode whose score_fn raised was recorded ({recorded} completions), seed "
        f"{scenario_seed}")


class CurriculumCallFailed(KeyError):
    """A curriculum method's own failure (a lookup of its own that found nothing)."""


_CURRICULUM_CALLS = ("get_task", "update_task_performance", "stats", "task_scores", "active_tasks")
"""What a wrapper calls on a curriculum while it steps: the protocol, and the pool report's reads."""


def _failing(inner: Any, failing: str) -> tuple[Any, dict[str, Any]]:
    """`inner` seen through the methods of `_CURRICULUM_CALLS` it has, and its switches: once
    `armed`, every call of `failing` raises `CurriculumCallFailed` (counted in `raised`)."""
    switches: dict[str, Any] = {"armed": False, "raised": 0}

    def forwarded(name: str) -> Any:
        def call(self: Any, *args: Any) -> Any:
            if name == failing and switches["armed"]:
                switches["raised"] += 1
                raise CurriculumCallFailed(f"{name}() found nothing")
            return getattr(inner, name)(*args)
        return call

    methods = {name: forwarded(name) for name in _CURRICULUM_CALLS if callable(getattr(inner, name, None))}
    return type("FailingCurriculum", (), methods)(), switches


@pytest.mark.parametrize("wrapper", ["pufferlib", "gymnasium"])
@pytest.mark.parametrize("method", _CURRICULUM_CALLS)
def test_a_curriculum_call_that_raises_reaches_the_trainer_as_its_own_error(curriculum_factory, curriculum_env_class,
                                                                            require_capability, scenario_seed,
                                                                            wrapper, method) -> None:
    """A curriculum whose method raises while the wrapper steps (a plug-in's lookup, a service's
    timeout, the pool report's reads among them): its own error propagates from `step()` as it
    is, never swallowed (a trainer would go on with a curriculum that no longer answers, or
    without the pool's numbers) nor renamed."""
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25}, label="exact"),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed))
    pool_reads = all(callable(getattr(curriculum, name, None)) for name in ("task_scores", "active_tasks"))
    require_capability(callable(getattr(curriculum, method, None)) and (pool_reads or method in _CURRICULUM_CALLS[:3]),
                       f"the wrapper does not call {method}() of this curriculum (the pool report reads task "
                       "scores only with both task_scores() and active_tasks())")
    view, switches = _failing(curriculum, method)
    if wrapper == "pufferlib":
        env, action = curriculum_env_class(ExactAccountingEnv(), view, seed=scenario_seed, stats_interval=1), \
            np.zeros(1, dtype=np.int32)
    else:
        env, action = GymCurriculumEnv(GymExactAccountingEnv(), view, seed=scenario_seed, stats_interval=1), 0
    raised = None
    try:
        env.reset(seed=scenario_seed)
        switches["armed"] = True
        for _ in range(LIMITS.failing_call_steps):
            env.step(action)
    except Exception as error:  # noqa: BLE001 - its kind is the check
        raised = error
    finally:
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()
    assert switches["raised"] and type(raised) is CurriculumCallFailed, (
        f"{type(env).__name__}: {method}() raised CurriculumCallFailed (a KeyError) {switches['raised']} time(s) in "
        f"{LIMITS.failing_call_steps} steps of two-step episodes (a pool report every completion), and step() "
        f"raised {raised!r}; the curriculum's own error must propagate as it is, seed {scenario_seed}")


class _NanPayingEnv(ExactAccountingEnv):
    """Pays NaN at the first step of every episode (its reward code divided by zero)."""

    def step(self, actions: Any) -> Any:
        result = super().step(actions)
        if self.steps_taken % 2 == 1:
            self.rewards[:] = np.nan
        return result


class _GymNanPayingEnv(GymExactAccountingEnv):
    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, math.nan if not (terminated or truncated) else reward, terminated, truncated, info


@pytest.mark.parametrize("wrapper", ["pufferlib", "gymnasium"])
def test_an_episode_with_a_nan_reward_is_refused_not_recorded(curriculum_factory, curriculum_env_class,
                                                              scenario_seed, wrapper) -> None:
    """An env that pays a NaN reward (a division by zero in its reward code): the episode's
    return, and so its score, is NaN, which no curriculum can learn from. The wrapper refuses it
    at the episode's end (`InvalidScoreError` from `step()`) and records nothing."""
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25}, label="nan"),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed))
    if wrapper == "pufferlib":
        env, action = curriculum_env_class(_NanPayingEnv(), curriculum, seed=scenario_seed), \
            np.zeros(1, dtype=np.int32)
    else:
        env, action = GymCurriculumEnv(_GymNanPayingEnv(), curriculum, seed=scenario_seed), 0
    try:
        env.reset(seed=scenario_seed)
        raised = None
        try:
            for _ in range(2):  # (the episode ends at its second step)
                env.step(action)
        except Exception as error:  # noqa: BLE001 - its kind is the check
            raised = error
        stats = curriculum.stats()
        recorded = stats.get("total_completions", 0) + stats.get("late_completions", 0)
        assert isinstance(raised, InvalidScoreError) and recorded == 0, (
            f"{type(env).__name__}: an episode of NaN rewards ended with {raised!r} and {recorded} completions "
            f"recorded; expected InvalidScoreError and none, seed {scenario_seed}")
    finally:
        env.close()
        getattr(curriculum, "close", lambda: None)()


#: What an env that forwards numbers it logged writes in its own infos under the wrapper's names:
#: a count and a task id no episode of this wrapper has.
_ECHOED = {"curriculum_stats/episodes": 0, "curriculum_stats/task_id": -1}


class _EchoingEnv(ExactAccountingEnv):
    """Writes `_ECHOED` into its own info dict at every step (a dict of its own, last in the list)."""

    def step(self, actions: Any) -> Any:
        *result, infos = super().step(actions)
        return (*result, [*(infos or []), dict(_ECHOED)])


class _GymEchoingEnv(GymExactAccountingEnv):
    def step(self, action: Any) -> Any:
        *result, info = super().step(action)
        return (*result, {**info, **_ECHOED})


@pytest.mark.parametrize("wrapper", ["pufferlib", "gymnasium"])
def test_the_wrappers_entries_are_its_own_whatever_the_env_wrote_under_their_names(
        curriculum_factory, curriculum_env_class, scenario_seed, wrapper) -> None:
    """An env whose info already holds `curriculum_stats/...` keys (numbers it forwards, another
    wrapper's): at an episode's end the trainer reads the wrapper's own entries under those names,
    the episode it counted and the task that ran, not the env's."""
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=BucketedTaskGenerator({"reward_per_step": 0.25}, {"episode_length": [1, 2, 3]}),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed))
    if wrapper == "pufferlib":
        env, action = curriculum_env_class(_EchoingEnv(), curriculum, seed=scenario_seed), np.zeros(1, dtype=np.int32)
    else:
        env, action = GymCurriculumEnv(_GymEchoingEnv(), curriculum, seed=scenario_seed), 0
    try:
        env.reset(seed=scenario_seed)
        wrong, ended = [], 0
        for step in range(LIMITS.echo_steps):
            ran = env.task.task_id
            _, _, terminated, truncated, infos = env.step(action)
            if not (np.any(terminated) or np.any(truncated)):
                continue
            ended += 1
            for info in [infos] if isinstance(infos, dict) else infos:  # (each dict holding the names)
                got = {key: info.get(key) for key in _ECHOED}
                if set(info) & set(_ECHOED) and got != {"curriculum_stats/episodes": 1, "curriculum_stats/task_id": ran}:
                    wrong.append((step, ran, got))
            if wrapper == "gymnasium":  # (no auto-reset)
                env.reset()
        assert ended and not wrong, (
            f"{type(env).__name__}: of {ended} episode ends, {len(wrong)} hand the trainer the env's own values under "
            f"the wrapper's names (step, task that ran, entries read): {wrong[:3]}, seed {scenario_seed}")
    finally:
        env.close()
        getattr(curriculum, "close", lambda: None)()


class _ResetReportingEnv(ExactAccountingEnv):
    """`ExactAccountingEnv` (`infos` its step infos' shape, or "empty": an empty list at every
    step, an episode's end included, as pufferlib's own envs return) whose every `reset()`
    reports the number of its starts under a key of its own, in one dict or in a list holding
    one (or, `reset_infos` "empty-dict", "empty-list" or "none", reports nothing: `{}`, `[]` or
    None). With list step infos, the dicts of an episode's end carry that key too (-1: the step's
    own value), as an env reporting the same field at each start and end does."""

    EMPTY_RESETS: ClassVar[dict[str, Any]] = {"empty-dict": {}, "empty-list": [], "none": None}

    def __init__(self, *, reset_infos: str, infos: str, **settings: Any) -> None:
        super().__init__(infos="list" if infos == "empty" else infos, **settings)
        self.starts, self._reset_shape, self._step_shape = 0, reset_infos, infos

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        obs, _ = super().reset(seed)
        self.starts += 1
        if self._reset_shape in self.EMPTY_RESETS:
            return obs, copy.copy(self.EMPTY_RESETS[self._reset_shape])
        info = {"started": self.starts}
        return obs, info if self._reset_shape == "dict" else [info]

    def step(self, actions: Any) -> tuple[Any, ...]:
        *result, infos = super().step(actions)
        if self._step_shape == "empty":
            infos = []
        elif self._step_shape == "list":
            infos = [{**info, "started": -1} if isinstance(info, dict) else info for info in infos]
        return (*result, infos)


def _reported_starts(infos: Any) -> list[int]:
    return [info["started"] for info in ([infos] if isinstance(infos, Mapping) else infos or ())
            if isinstance(info, Mapping) and info.get("started", -1) != -1]


@pytest.mark.parametrize("reset_infos", ["dict", "list", *_ResetReportingEnv.EMPTY_RESETS])
@pytest.mark.parametrize("step_infos", ["dict", "list", "empty"])
def test_what_an_env_reports_at_each_reset_reaches_the_trainer(curriculum_factory, curriculum_env_class,
                                                                 scenario_seed, step_infos, reset_infos) -> None:
    """Whatever the shapes of an env's step and reset infos (a dict, a list of dicts, a list
    that is always empty), what it reports when it starts an episode (its reset's infos: a
    map's seed, a generation's numbers) reaches the trainer once per start: with the first
    `reset()`, and with the step whose episode end the wrapper's auto-reset followed, in a
    list as its own entry (never merged into the ended step's dict, whose value of the same key
    would hide it). Every step's infos keep the env's shape: a list stays a list, with the
    curriculum's entries at each episode end, and no entry the env did not report (a reset
    that reports nothing, `{}`, `[]` or None, adds no empty info)."""
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=BucketedTaskGenerator({"reward_per_step": 0.25}, {"episode_length": [1, 2, 3]}),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed))
    inner = _ResetReportingEnv(reset_infos=reset_infos, infos=step_infos)
    env = curriculum_env_class(inner, curriculum, seed=scenario_seed)
    shape = Mapping if step_infos == "dict" else list
    try:
        seen = _reported_starts(env.reset(seed=scenario_seed)[1])
        for step in range(LIMITS.echo_steps):
            _, _, terminals, truncations, infos = env.step(np.zeros(1, dtype=np.int32))
            assert isinstance(infos, shape), (
                f"step infos a {step_infos}, reset infos a {reset_infos}: step {step} handed the trainer infos of type "
                f"{type(infos).__name__}, the env returned a {shape.__name__}, seed {scenario_seed}")
            ended = bool(np.any(terminals) or np.any(truncations))
            entries = [info for info in ([infos] if isinstance(infos, Mapping) else infos)
                       if isinstance(info, Mapping) and "curriculum_stats/episodes" in info]
            assert len(entries) == ended, (
                f"step infos a {step_infos}, reset infos a {reset_infos}: step {step} (episode end: {ended}) handed "
                f"{len(entries)} infos with the curriculum's entries, seed {scenario_seed}")
            made_up = [info for info in ([] if isinstance(infos, Mapping) else infos)
                       if isinstance(info, Mapping) and not info]
            assert not made_up, (
                f"step infos a {step_infos}, reset infos a {reset_infos}: step {step} (episode end: {ended}) handed "
                f"the trainer {len(made_up)} empty info(s) the env never reported among {len(infos)}, seed "
                f"{scenario_seed}")
            seen += _reported_starts(infos)
        reports = reset_infos not in _ResetReportingEnv.EMPTY_RESETS
        assert seen == (list(range(1, inner.starts + 1)) if reports else []), (
            f"step infos a {step_infos}, reset infos a {reset_infos}: the env started {inner.starts} episodes, the "
            f"trainer read the starts {seen[:12]} from its infos, seed {scenario_seed}")
    finally:
        env.close()
        getattr(curriculum, "close", lambda: None)()


def test_every_task_is_the_one_its_id_names(curriculum_factory, require_capability, scenario_seed, oracle) -> None:
    """Under churn (5 learnable of 50 tasks, evictions every few episodes), with the student
    task nested in a sub-config beside a sibling setting, every handed-out task's config and
    label are what a private copy of the generator gives its id (the oracle's check), and the
    run's numbers are the oracle's."""
    space = impossible_task_space(num_learnable=5, num_impossible=45, seed=scenario_seed,
                                  index_path="student.task_index")
    watcher = oracle(context="nested configs under churn")
    curriculum = watcher.watch(curriculum_factory(CurriculumConfig(
        task_generator=space.generator, algorithm=LearningProgressConfig(), seed=scenario_seed,
        num_active_tasks=INVARIANCES.churn_pool, min_presentations=INVARIANCES.churn_min_presentations,
        eviction_percentile=INVARIANCES.churn_eviction_percentile)))  # the churn of the late-completion relation
    for _ in range(LIMITS.churn_episodes):
        task = curriculum.get_task()
        curriculum.update_task_performance(task.task_id, space.simulator.sample_task(space.task_index(task.env_cfg)))
    require_capability(curriculum.evictions >= LIMITS.min_churn_evictions,
                       f"only {curriculum.evictions} evictions in {LIMITS.churn_episodes} episodes (at least "
                       f"{LIMITS.min_churn_evictions} needed for new tasks to be generated beside handed-out ones), "
                       f"seed {scenario_seed}")
    watcher.verify()


@pytest.mark.parametrize("interval", [1, 2, 3])
def test_pool_reports_come_every_stats_interval_completions_from_the_first(curriculum_factory, curriculum_env_class,
                                                                          scenario_seed, oracle, interval) -> None:
    """A wrapper reports pool-wide numbers with its first completion and then every
    `stats_interval` completions (documented), `stats_interval=1` included: every completion."""
    watcher = oracle(context=f"stats_interval={interval}")
    curriculum = watcher.watch(curriculum_factory(CurriculumConfig(
        task_generator=LabelledTaskGenerator(SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25},
                                                                 label="two steps")),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed)))
    env = curriculum_env_class(ExactAccountingEnv(episode_length=2), curriculum, seed=scenario_seed,
                               stats_interval=interval)
    env.reset()
    for _ in range(2 * LIMITS.report_completions):
        watcher.observe(env.step(np.zeros(1, dtype=np.int32))[4])
    env.close()
    reports = [episode.pool_report for episode in watcher.episodes]
    expected = [index % interval == 0 for index in range(len(reports))]
    assert reports == expected and len(reports) == LIMITS.report_completions, (
        f"stats_interval={interval}: pool reports at completions "
        f"{[i + 1 for i, r in enumerate(reports) if r]} of {len(reports)}, expected "
        f"{[i + 1 for i, r in enumerate(expected) if r]}, seed {scenario_seed}")
    watcher.verify()


class _DeepStats(ProtocolView):
    """A curriculum whose `stats()` also hold a group nested three levels deep, as a plug-in's may."""

    NESTED = {"plugin": {"group": {"leaf": 1.5, "deeper": {"x": 2}}, "flat": 3}}
    REPORTED = {"curriculum_stats/plugin/group/leaf": 1.5, "curriculum_stats/plugin/group/deeper/x": 2,
                "curriculum_stats/plugin/flat": 3}

    def stats(self) -> dict[str, Any]:
        return {**self._inner.stats(), **self.NESTED}


def test_a_pool_report_holds_every_number_under_its_whole_path(curriculum_factory, curriculum_env_class,
                                                               scenario_seed) -> None:
    """A pool report flattens `stats()` at every depth: a number nested in groups is reported
    under the names of all its groups joined with "/", so two groups' numbers of one name
    never meet under one key."""
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=LabelledTaskGenerator(SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25},
                                                                 label="two steps")),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed))
    env = curriculum_env_class(ExactAccountingEnv(episode_length=2), _DeepStats(curriculum), seed=scenario_seed,
                               stats_interval=1)
    reports = []
    try:
        env.reset()
        for _ in range(4):
            for info in env.step(np.zeros(1, dtype=np.int32))[4]:
                entries = {key: value for key, value in info.items() if "plugin" in key or "group" in key
                           or key.endswith(("/leaf", "/x", "/flat"))}
                if entries:
                    reports.append(entries)
    finally:
        env.close()
        getattr(curriculum, "close", lambda: None)()
    assert reports and all(report == _DeepStats.REPORTED for report in reports), (
        f"stats() holding {_DeepStats.NESTED} were reported as {reports[:2]} ({len(reports)} reports), expected "
        f"{_DeepStats.REPORTED} in each, seed {scenario_seed}")


def test_pool_reports_keep_their_schedule_through_late_completions(curriculum_factory, curriculum_env_class,
                                                                   require_capability, scenario_seed, oracle) -> None:
    """A late completion is a completion for `stats_interval` too: two wrappers share a staged
    pool that changes stage at every completion (a paying stage advances, a paying-nothing one
    falls back), so each change makes the other wrapper's running episode late; each wrapper
    still reports with its first completion and every `stats_interval` after it."""
    interval = LIMITS.late_report_interval
    watcher = oracle(context=f"stats_interval={interval}, late completions")
    stages = [Stage(name, LabelledTaskGenerator(SingleTaskGenerator(config, label=name))) for name, config in
              (("pays", {"episode_length": 2, "reward_per_step": 0.25}),
               ("pays nothing", {"episode_length": 3, "reward_per_step": 0.0}))]
    try:
        curriculum = watcher.watch(curriculum_factory(CurriculumConfig(
            num_active_tasks=4, seed=scenario_seed,
            algorithm=StagedProgressionConfig(stages=stages, advancement_threshold=0.4, regression_threshold=0.1,
                                              window=1, min_episodes=1))))
    except (CurriculumConfigError, NotImplementedError) as error:
        require_capability(False, f"the run needs a staged curriculum; the factory refused the config: "
                                  f"{type(error).__name__}: {error}")
    envs = [curriculum_env_class(ExactAccountingEnv(episode_length=2), curriculum, seed=scenario_seed + i,
                                 stats_interval=interval) for i in range(2)]
    for env in envs:
        env.reset()
    for _ in range(LIMITS.late_report_steps):
        for env in envs:
            watcher.observe(env.step(np.zeros(1, dtype=np.int32))[4])
    for env in envs:
        env.close()
    late = curriculum.stats().get("late_completions", 0)
    require_capability(late > 0, "this curriculum records no completion late when its stage changes")
    per_env: dict[str, list[bool]] = {}
    for episode in watcher.episodes:
        per_env.setdefault(episode.record.env, []).append(episode.pool_report)
    off = {env: [i + 1 for i, r in enumerate(reports) if r][:8] for env, reports in per_env.items()
           if reports != [i % interval == 0 for i in range(len(reports))]}
    assert len(per_env) == 2 and not off, (
        f"stats_interval={interval}, {late} late completions: pool reports at completions {off} of wrappers "
        f"{ {env: len(reports) for env, reports in per_env.items()} }, expected at 1, {1 + interval}, "
        f"{1 + 2 * interval}, ..., seed {scenario_seed}")
    watcher.verify()
