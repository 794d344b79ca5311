"""CurriculumEnv: task per episode, config at reset, exact accounting, truncations, errors."""

from __future__ import annotations

import re
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import numpy as np
import pufferlib
import pufferlib.vector
import pytest

from curriculum import (
    AgentCountError,
    CompletionRecorder,
    CurriculumConfigError,
    CurriculumEnv,
    EnvContractError,
    EpisodeNotStartedError,
    InvalidScoreError,
    accumulate_rollout_stats,
    process_training_stats,
)
from curriculum.stats import COMPLETION_INFO_KEY, stat_key
from env_doubles import (
    EASY,
    HARD,
    OBS_LENGTH,
    OBS_REWARD,
    OBS_TAG,
    EnvFailure,
    FixedEpisodeEnv,
    FlakyDrawCurriculum,
    NoConfigEnv,
    ReportingEnv,
    ScriptedFailuresEnv,
    StaggeredAgentsEnv,
    StickyFlagsEnv,
    staged_config,
    two_label_config,
)

ACTION = np.zeros(1, dtype=np.int32)


def run_steps(env: CurriculumEnv, steps: int) -> list[dict[str, Any]]:
    """Step `env` `steps` times; every info dict returned, in order."""
    infos: list[dict[str, Any]] = []
    actions = np.zeros(env.num_agents, dtype=np.int32)
    for _ in range(steps):
        infos.extend(env.step(actions)[4])
    return infos


def run(env: CurriculumEnv, steps: int) -> list[dict[str, Any]]:
    """Reset `env`, then `run_steps`."""
    env.reset()
    return run_steps(env, steps)


def ended(infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [info for info in infos if stat_key("episodes") in info]


# ---- task per episode, config at reset ---------------------------------------------------------
def test_first_episode_runs_the_task_it_was_handed(make_curriculum: Any) -> None:
    inner = FixedEpisodeEnv(reward_per_step=1.0, episode_length=99)
    env = CurriculumEnv(inner, make_curriculum(two_label_config()))
    assert env.task is None
    obs, _ = env.reset()
    task = env.task
    assert inner.set_env_config_calls == [(-1, task.env_cfg)]
    assert inner.episode_configs[0] == {**task.env_cfg, "end": "terminal"}
    assert obs[0, OBS_LENGTH] == task.env_cfg["episode_length"]
    assert obs[0, OBS_REWARD] == task.env_cfg["reward_per_step"]


def test_config_applied_only_between_episodes_and_credited_to_its_task(make_curriculum: Any) -> None:
    inner = FixedEpisodeEnv()
    env = CurriculumEnv(inner, make_curriculum(two_label_config()))
    infos = ended(run(env, 60))
    assert all(step == -1 for step, _ in inner.set_env_config_calls)  # never mid-episode
    tags = {"easy": EASY["tag"], "hard": HARD["tag"]}
    for info in infos:
        (label,) = [k.rsplit("/", 1)[1] for k in info if k.startswith(stat_key("per_label_samples"))]
        assert info["fixed_episode"]["tag"] == tags[label]  # the episode ran the task it is credited to
    assert [c["tag"] for c in inner.episode_configs[: len(infos)]] == [i["fixed_episode"]["tag"] for i in infos]


def test_exact_accounting_single_env(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config())
    env = CurriculumEnv(FixedEpisodeEnv(), curriculum, stats_interval=7)
    infos = ended(run(env, 101))
    episodes = len(infos)
    assert episodes == env.episodes == env.completions == curriculum.tracker.total_completions
    assert float(curriculum.tracker.score_sum.sum()) == 0.5 * episodes
    assert sum(i[stat_key("score")] for i in infos) == 0.5 * episodes
    steps = sum(i["fixed_episode"]["length"] for i in infos)
    assert 101 - 3 <= steps <= 101  # only the running episode is missing


def test_auto_reset_returns_the_ended_step_and_the_next_first_observation(make_curriculum: Any) -> None:
    config = two_label_config(easy=HARD)  # every task: 4 steps of 0.125, tag 2
    inner = FixedEpisodeEnv()
    env = CurriculumEnv(inner, make_curriculum(config))
    env.reset()
    for _ in range(3):
        obs, rewards, terminals, truncations, infos = env.step(ACTION)
        assert not terminals[0] and infos == []
    obs, rewards, terminals, truncations, infos = env.step(ACTION)
    assert terminals[0] and not truncations[0] and rewards[0] == 0.125
    assert obs[0, 3] == 0  # the next episode's first observation
    assert len(inner.episode_configs) == 2 and len(infos) == 1
    assert rewards is inner.rewards and terminals is inner.terminals  # shared buffers, no copies
    obs, rewards, terminals, truncations, infos = env.step(ACTION)
    assert not terminals[0] and obs[0, 3] == 1 and infos == []


def test_explicit_reset_abandons_the_running_episode(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config())
    env = CurriculumEnv(FixedEpisodeEnv(), curriculum)
    env.reset()
    env.step(ACTION)
    env.reset()
    assert env.episodes == 0 and curriculum.tracker.total_completions == 0


# ---- scores --------------------------------------------------------------------------------------
@pytest.mark.parametrize("env_class", [FixedEpisodeEnv, ReportingEnv])
def test_multi_agent_score_is_the_mean_return_or_score_fn(make_curriculum: Any, env_class: type) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD))
    env = CurriculumEnv(env_class(num_agents=3), curriculum)
    infos = ended(run(env, 8))
    assert [i[stat_key("score")] for i in infos] == [0.5, 0.5]
    scored = CurriculumEnv(env_class(num_agents=3), curriculum, score_fn=lambda r: float(r.sum()) / 6)
    infos = ended(run(scored, 4))
    assert [i[stat_key("score")] for i in infos] == [0.25]


def test_score_outside_the_range_names_the_fix(make_curriculum: Any) -> None:
    env = CurriculumEnv(FixedEpisodeEnv(reward_per_step=1.0), make_curriculum(two_label_config(easy=HARD)),
                        score_fn=lambda returns: 2.0)
    env.reset()
    task = env.task
    for _ in range(3):
        env.step(ACTION)
    message = (
        f"Episode score 2.0 of task {task.task_id} ('{task.label}') is outside the curriculum's score_range "
        "[0.0, 1.0]; pass score_fn= to map episode returns [0.5] into it"
    )
    with pytest.raises(InvalidScoreError, match=f"^{re.escape(message)}$"):
        env.step(ACTION)


# ---- truncations ---------------------------------------------------------------------------------
def test_time_limit_truncation_is_a_completion(make_curriculum: Any) -> None:
    time_limit = {**HARD, "end": "truncation"}
    curriculum = make_curriculum(two_label_config(easy=time_limit, hard=time_limit))
    env = CurriculumEnv(FixedEpisodeEnv(), curriculum)
    infos = ended(run(env, 12))
    assert len(infos) == 3 == curriculum.tracker.total_completions
    assert env.desync_truncations == 0


def test_desync_truncations_are_counted_not_recorded(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(hard={**HARD, "end": "desync"}))
    env = CurriculumEnv(FixedEpisodeEnv(), curriculum)
    infos = ended(run(env, 200))
    cut = [i for i in infos if i[stat_key("desync_truncations")]]
    assert cut and all(stat_key("per_label_samples", "hard") in i for i in cut)
    assert all(stat_key("score") not in i and stat_key("completions") not in i for i in cut)
    assert env.desync_truncations == len(cut)
    assert curriculum.tracker.total_completions == env.completions == len(infos) - len(cut)
    metrics = process_training_stats(accumulate_rollout_stats(infos, {}), agent_step=200, epoch=0)
    assert metrics["overview/desync_truncations"] == len(cut)
    assert metrics["env_curriculum_stats/per_label_completions/easy"] == len(infos) - len(cut)
    assert "env_curriculum_stats/per_label_completions/hard" not in metrics


def test_desync_flag_as_env_attribute(make_curriculum: Any) -> None:
    inner = FixedEpisodeEnv(end="truncation")
    inner.desync_truncation = True
    time_limit = {**HARD, "end": "truncation"}
    curriculum = make_curriculum(two_label_config(easy=time_limit, hard=time_limit))
    env = CurriculumEnv(inner, curriculum)
    run(env, 8)
    assert env.desync_truncations == 2 and curriculum.tracker.total_completions == 0


# ---- late completions, tracking modes, stats ------------------------------------------------------
def test_late_completion_of_a_task_from_before_a_stage_change(make_curriculum: Any) -> None:
    curriculum = make_curriculum(staged_config(min_episodes=1))
    first, second = CurriculumEnv(FixedEpisodeEnv(), curriculum), CurriculumEnv(FixedEpisodeEnv(), curriculum)
    first.reset()
    second.reset()
    for _ in range(3):
        first.step(ACTION)
        second.step(ACTION)
    (info,) = first.step(ACTION)[4]  # advances to stage 1: the pool is refilled
    assert info[stat_key("late_completions")] == 0 and info[stat_key("stage")] == 1
    (info,) = second.step(ACTION)[4]
    assert info[stat_key("late_completions")] == 1 and second.late_completions == 1
    assert curriculum.tracker.late_completions == 1 and curriculum.stage == 1


def test_without_local_tracking_the_completion_travels_in_the_info(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD))
    env = CurriculumEnv(FixedEpisodeEnv(), curriculum, local_tracking=False)
    env.reset()
    task = env.task
    infos = ended(run_steps(env, 4))
    assert infos[0][COMPLETION_INFO_KEY] == {"task_id": task.task_id, "label": task.label, "score": 0.5,
                                             "stage_changes": 0}
    assert stat_key("completions") not in infos[0]
    assert curriculum.tracker.total_completions == 0 and env.completions == 0


def test_pool_stats_every_stats_interval_completions(make_curriculum: Any) -> None:
    env = CurriculumEnv(FixedEpisodeEnv(), make_curriculum(two_label_config(easy=HARD)), stats_interval=3)
    infos = ended(run(env, 4 * 7))
    with_pool = [n for n, info in enumerate(infos) if stat_key("pool_occupancy_gini") in info]
    assert with_pool == [0, 3, 6]
    for key in ("pool_lp_gini", "sampling_gini", "sampling_entropy", "mean_lp_score", "total_late_completions"):
        assert stat_key(key) in infos[0]


class ScriptedCurriculum:
    """A protocol curriculum with its own task ids (7 and 4, not slot-encoded) whose task
    scores and per-label LP scores are set by the test."""

    num_active_tasks = 2

    def __init__(self, scores: list[float], *, label_scores: dict[str, float] | None = None) -> None:
        self.scores = np.array(scores)
        self.label_scores = label_scores or {}

    def get_task(self) -> None: ...

    def update_task_performance(self, task_id: int, score: float) -> bool:
        return True

    def stats(self) -> dict[str, Any]:
        return {"per_label_lp_scores": dict(self.label_scores)}


class ScriptedPoolCurriculum(ScriptedCurriculum):
    def active_tasks(self) -> list[Any]:
        return [SimpleNamespace(task_id=7, label="a"), SimpleNamespace(task_id=4, label="a")]

    def task_scores(self) -> np.ndarray:
        return self.scores


def test_per_label_lp_score_is_an_ema_with_rate_one_tenth() -> None:
    recorder = CompletionRecorder(ScriptedPoolCurriculum([1.0, 0.0]), stats_interval=1)
    key = stat_key("per_label_lp_scores", "a")
    assert recorder.record(7, "a", 0.5)[key] == 1.0
    assert recorder.record(4, "a", 0.5)[key] == pytest.approx(0.9)
    assert recorder.record(4, "a", 0.5)[key] == pytest.approx(0.81)


def test_task_scores_are_matched_to_task_ids_through_active_tasks_not_the_id_scheme() -> None:
    """Ids 7 and 4 in a pool of 2: `task_id % num_active_tasks` would swap their scores."""
    curriculum = ScriptedPoolCurriculum([0.25, 0.75], label_scores={"a": 0.5})
    recorder = CompletionRecorder(curriculum, stats_interval=1000)
    key = stat_key("per_label_lp_scores", "a")
    assert recorder.record(4, "a", 0.5)[key] == 0.75  # the pool report is taken at this first completion
    recorder = CompletionRecorder(curriculum, stats_interval=1000)
    assert recorder.record(7, "a", 0.5)[key] == 0.25
    assert recorder.record(9, "a", 0.5)[key] == pytest.approx(0.25 + 0.1 * (0.5 - 0.25))  # not in the pool: label


def test_without_task_scores_the_label_scores_of_the_pool_report_are_used() -> None:
    recorder = CompletionRecorder(ScriptedCurriculum([0.0, 0.0], label_scores={"a": 0.5, "b": 0.0}), stats_interval=1)
    assert recorder.record(7, "a", 0.5)[stat_key("per_label_lp_scores", "a")] == 0.5
    assert recorder.record(4, "b", 0.5)[stat_key("per_label_lp_scores", "b")] == 0.0


def test_reseeds_once_per_process(make_curriculum: Any) -> None:
    config = two_label_config(num_active_tasks=64)
    reseeded, reference = make_curriculum(config), make_curriculum(config)
    CurriculumEnv(FixedEpisodeEnv(), reseeded, seed=5)
    CurriculumEnv(FixedEpisodeEnv(), reseeded, seed=6)  # same process, same handle: no second reseed
    reference.reseed(5)
    assert [reseeded.get_task().task_id for _ in range(20)] == [reference.get_task().task_id for _ in range(20)]


def _buffer_slice() -> dict[str, np.ndarray]:
    """A vector's buffer slice for one single-agent env, as pufferlib hands it to an env."""
    env = FixedEpisodeEnv()
    return {name: getattr(env, name) for name in ("observations", "rewards", "terminals", "truncations", "masks",
                                                  "actions")}


def test_a_vector_env_reseeds_over_the_driver_env_pufferlib_builds_first(make_curriculum: Any) -> None:
    """pufferlib builds a throwaway env (no buffer, seed 0) in every worker before its real
    envs: were that the only reseed, every worker process would draw the same stream."""
    config = two_label_config(num_active_tasks=64)
    reseeded, reference = make_curriculum(config), make_curriculum(config)
    CurriculumEnv(FixedEpisodeEnv(), reseeded, seed=0)  # the driver env
    for seed in (9, 10):  # the worker's envs: the first one reseeds
        buf = _buffer_slice()
        CurriculumEnv(FixedEpisodeEnv(buf=buf), reseeded, seed=seed, buf=buf)
    reference.reseed(9)
    assert [reseeded.get_task().task_id for _ in range(20)] == [reference.get_task().task_id for _ in range(20)]


# ---- delegation and pufferlib ---------------------------------------------------------------------
def test_explicit_delegation_shares_buffers(make_curriculum: Any) -> None:
    inner = FixedEpisodeEnv(num_agents=2)
    env = CurriculumEnv(inner, make_curriculum(two_label_config()))
    for name in ("observations", "rewards", "terminals", "truncations", "masks", "actions", "agent_ids"):
        assert getattr(env, name) is getattr(inner, name), name
    assert env.single_observation_space == inner.single_observation_space
    assert env.single_action_space == inner.single_action_space
    assert env.num_agents == 2 and env.unwrapped is inner
    assert all("__getattr__" not in vars(cls) and "__getattribute__" not in vars(cls)
               for cls in type(env).__mro__ if cls is not object)
    assert isinstance(env, pufferlib.PufferEnv)


def test_runs_as_an_env_of_pufferlib_serial(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD))

    def creator(buf: Any = None, seed: int = 0) -> CurriculumEnv:
        return CurriculumEnv(FixedEpisodeEnv(buf=buf, seed=seed), curriculum, seed=seed, buf=buf)

    vecenv = pufferlib.vector.make(creator, backend=pufferlib.vector.Serial, num_envs=3)
    vecenv.reset()
    episodes = 0
    for _ in range(12):
        _, _, terminals, _, infos = vecenv.step(np.zeros(3, dtype=np.int32))
        episodes += int(terminals.sum())
        assert len(infos) == int(terminals.sum())
    vecenv.close()
    assert episodes == 9 == curriculum.tracker.total_completions


# ---- errors ---------------------------------------------------------------------------------------
def test_step_before_reset(make_curriculum: Any) -> None:
    env = CurriculumEnv(FixedEpisodeEnv(), make_curriculum(two_label_config()))
    message = ("CurriculumEnv.step() called before reset(); call reset() once before the first step "
               "(later episodes start automatically)")
    with pytest.raises(EpisodeNotStartedError, match=f"^{re.escape(message)}$"):
        env.step(ACTION)


def test_env_without_set_env_config(make_curriculum: Any) -> None:
    message = ("NoConfigEnv has no set_env_config(env_cfg) method; CurriculumEnv applies each task's env config "
               "through it before the reset that starts the task's episode")
    with pytest.raises(EnvContractError, match=f"^{re.escape(message)}$"):
        CurriculumEnv(NoConfigEnv(), make_curriculum(two_label_config()))


def test_num_agents_disagreeing_with_buffers(make_curriculum: Any) -> None:
    inner = FixedEpisodeEnv(num_agents=2)
    inner.num_agents = 3  # changed after super().__init__ sized the buffers
    message = ("FixedEpisodeEnv.num_agents is 3 but its `observations` buffer has shape (2, 4); "
               "set num_agents before super().__init__(buf)")
    with pytest.raises(AgentCountError, match=f"^{re.escape(message)}$"):
        CurriculumEnv(inner, make_curriculum(two_label_config()))


def test_vector_buffer_slice_of_another_agent_count(make_curriculum: Any) -> None:
    vector = FixedEpisodeEnv(num_agents=2)  # stands in for the driver-sized slice
    buf = {name: getattr(vector, name) for name in ("observations", "rewards", "terminals", "truncations",
                                                   "masks", "actions")}
    message = ("The vector's `observations` buffer slice holds 2 agents but FixedEpisodeEnv has num_agents=1; "
               "every env of one vector must have the driver env's agent count")
    with pytest.raises(AgentCountError, match=f"^{re.escape(message)}$"):
        CurriculumEnv(FixedEpisodeEnv(num_agents=1), make_curriculum(two_label_config()), buf=buf)


def test_env_ignoring_the_vector_buffers(make_curriculum: Any) -> None:
    buf = {name: getattr(FixedEpisodeEnv(), name) for name in ("observations", "rewards")}
    message = ("FixedEpisodeEnv does not write into the vector's `observations` buffer; pass buf=buf to its "
               "constructor in the env creator")
    with pytest.raises(EnvContractError, match=f"^{re.escape(message)}$"):
        CurriculumEnv(FixedEpisodeEnv(), make_curriculum(two_label_config()), buf=buf)


def test_bad_arguments(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config())
    message = "Expected `stats_interval` to be an integer >= 1, received 0"
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        CurriculumEnv(FixedEpisodeEnv(), curriculum, stats_interval=0)
    message = ("Expected `stage_source` only with local_tracking=False: a curriculum that records its own "
               "completions decides its own stage")
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        CurriculumEnv(FixedEpisodeEnv(), curriculum, stage_source=object())


def test_rewards_buffer_of_another_shape_is_refused_at_construction(make_curriculum: Any) -> None:
    """A (1, 1) rewards buffer used to be accepted, then fail with NotImplementedError at the
    first step."""
    inner = FixedEpisodeEnv()
    inner.rewards = np.zeros((1, 1), dtype=np.float32)
    message = ("Expected FixedEpisodeEnv.rewards to be a numeric numpy array of shape (1,), one number per agent, "
               "received ndarray of shape (1, 1) and dtype float32")
    with pytest.raises(EnvContractError, match=f"^{re.escape(message)}$"):
        CurriculumEnv(inner, make_curriculum(two_label_config()))
    inner = FixedEpisodeEnv(num_agents=2)
    inner.terminals = np.array(["", ""])
    message = ("Expected FixedEpisodeEnv.terminals to be a numeric numpy array of shape (2,), one number per agent, "
               "received ndarray of shape (2,) and dtype <U1")
    with pytest.raises(EnvContractError, match=f"^{re.escape(message)}$"):
        CurriculumEnv(inner, make_curriculum(two_label_config()))


@pytest.mark.parametrize("seed", [-1, "a", 1.5, True])
def test_bad_seed_is_refused(make_curriculum: Any, seed: Any) -> None:
    message = f"Expected `seed` to be None or an integer >= 0, received {seed!r}"
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        CurriculumEnv(FixedEpisodeEnv(), make_curriculum(two_label_config()), seed=seed)


# ---- agents that finish at different steps ------------------------------------------------------
class ReportingStaggeredAgentsEnv(StaggeredAgentsEnv):
    """Reports every agent's running sum of rewards, done or not (the wrapper must read each
    agent's return at its own done step)."""

    def get_episode_rewards(self) -> np.ndarray:
        return np.full(self.num_agents, self.config["reward_per_step"] * self._step)


STAGGERED = [((2, 5, 3), [0.25, 0.625, 0.375]), ((1, 4, 2, 4), [0.125, 0.5, 0.25, 0.5]),
             ((3, 1), [0.375, 0.125])]


@pytest.mark.parametrize("sticky", [False, True], ids=["one-step-flags", "sticky-flags"])
@pytest.mark.parametrize("env_class", [StaggeredAgentsEnv, ReportingStaggeredAgentsEnv])
@pytest.mark.parametrize("scored", [False, True], ids=["mean", "score_fn"])
@pytest.mark.parametrize(("lengths", "returns"), STAGGERED, ids=["3-agents", "4-agents", "2-agents"])
def test_agents_that_finish_at_different_steps_make_one_episode(make_curriculum: Any, lengths: tuple[int, ...],
                                                                returns: list[float], scored: bool,
                                                                env_class: type, sticky: bool) -> None:
    """Agent i's return is its rewards up to its done step; the episode ends with the last
    agent. Flags set for one step only used to give 0 episodes."""
    seen: list[list[float]] = []

    def score_fn(episode_returns: np.ndarray) -> float:
        seen.append(episode_returns.tolist())
        return float(episode_returns.max())

    curriculum = make_curriculum(two_label_config(easy=HARD))
    inner = env_class(agent_lengths=lengths, sticky_flags=sticky)
    env = CurriculumEnv(inner, curriculum, score_fn=score_fn if scored else None)
    env.reset()
    length = max(lengths)
    for episode in range(3):
        for step in range(1, length + 1):
            infos = env.step(np.zeros(len(lengths), dtype=np.int32))[4]
            assert bool(ended(infos)) == (step == length), (episode, step)
    assert env.episodes == curriculum.tracker.total_completions == 3
    expected = max(returns) if scored else sum(returns) / len(returns)
    assert [i[stat_key("score")] for i in ended(infos)] == [pytest.approx(expected, abs=1e-15)]
    assert curriculum.tracker.score_sum.sum() == pytest.approx(3 * expected)
    if scored:
        assert seen == [returns] * 3


def test_an_agent_cut_by_a_desync_makes_the_episode_a_desync_truncation(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD))
    inner = StaggeredAgentsEnv(agent_lengths=(2, 5, 3))
    env = CurriculumEnv(inner, curriculum)
    outcomes = []
    for ends in [("terminal", "desync", "terminal"),  # the last agent to finish is cut
                 ("desync", "terminal", "terminal"),  # an early agent is cut
                 ("truncation", "terminal", "truncation")]:  # time limits: a full episode
        inner._defaults["ends"] = ends  # applied by the reset in run()
        (info,) = ended(run(env, 5))
        outcomes.append((info[stat_key("desync_truncations")], stat_key("score") in info))
    assert outcomes == [(1, False), (1, False), (0, True)]
    assert env.episodes == 3 and env.desync_truncations == 2 and curriculum.tracker.total_completions == 1


def test_an_env_that_never_clears_its_flags_gets_full_episodes(make_curriculum: Any) -> None:
    """Flags left set by the env's reset used to end every later episode after one step."""
    curriculum = make_curriculum(two_label_config(easy=HARD))
    env = CurriculumEnv(StickyFlagsEnv(), curriculum)
    infos = ended(run(env, 12))
    assert [i["fixed_episode"]["length"] for i in infos] == [4, 4, 4]
    assert [i[stat_key("score")] for i in infos] == [0.5, 0.5, 0.5]
    assert env.episodes == curriculum.tracker.total_completions == 3


# ---- failures at an episode's end ---------------------------------------------------------------
def test_a_failing_auto_reset_keeps_the_ended_episode_and_leaks_nothing_into_the_next(make_curriculum: Any) -> None:
    """The env's second reset (the first auto-reset) raises. The old wrapper lost the ended
    episode's stats and scored the next episode 1.0 for an env that always pays 0.5."""
    curriculum = make_curriculum(two_label_config(easy=HARD))
    inner = ScriptedFailuresEnv(fail_from_reset=2)
    env = CurriculumEnv(inner, curriculum)
    env.reset()
    task = env.task
    run_steps(env, 3)
    with pytest.raises(EnvFailure, match="^reset 2 failed$"):
        env.step(ACTION)
    assert env.episodes == curriculum.tracker.total_completions == 1
    drawn = inner.set_env_config_calls[-1][1]  # the config of the task drawn for the failed auto-reset
    message = (f"CurriculumEnv.step() called after the auto-reset that follows the episode of task {task.task_id} "
               f"({task.label!r}) failed; call reset(), which also returns that episode's infos")
    with pytest.raises(EpisodeNotStartedError, match=f"^{re.escape(message)}$"):
        env.step(ACTION)
    inner.fail_from_reset = None
    _, reset_infos = env.reset()
    (episode_info,) = ended(reset_infos)
    assert episode_info[stat_key("score")] == 0.5 and episode_info["fixed_episode"]["length"] == 4
    assert env.task.env_cfg == drawn  # the task drawn for the failed start runs now
    infos = ended(run_steps(env, 4))
    assert [i[stat_key("score")] for i in infos] == [0.5]
    assert env.episodes == curriculum.tracker.total_completions == 2
    assert float(curriculum.tracker.score_sum.sum()) == 1.0


def test_a_reset_whose_draw_fails_still_abandons_the_running_episode(make_curriculum: Any) -> None:
    """`reset()` abandons the running episode even when its task draw fails: `step()` is then
    refused, never run on into an episode recorded for the abandoned task."""
    curriculum = FlakyDrawCurriculum(make_curriculum(two_label_config()))
    env = CurriculumEnv(FixedEpisodeEnv(), curriculum)
    env.reset()
    run_steps(env, 2)
    curriculum.failing = True
    with pytest.raises(LookupError, match="^no task$"):
        env.reset()
    with pytest.raises(EpisodeNotStartedError):
        env.step(ACTION)
    curriculum.failing = False
    env.reset()
    run_steps(env, 4)
    assert env.episodes == curriculum.curriculum.tracker.total_completions >= 1


def test_the_refusal_after_a_failed_auto_reset_names_the_episode(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD))
    inner = ScriptedFailuresEnv()
    env = CurriculumEnv(inner, curriculum)
    env.reset()
    task = env.task
    run_steps(env, 3)
    inner.fail_config = True
    with pytest.raises(EnvFailure, match="^set_env_config failed$"):
        env.step(ACTION)
    message = (f"CurriculumEnv.step() called after the auto-reset that follows the episode of task {task.task_id} "
               f"({task.label!r}) failed; call reset(), which also returns that episode's infos")
    with pytest.raises(EpisodeNotStartedError, match=f"^{re.escape(message)}$"):
        env.step(ACTION)
    inner.fail_config = False
    assert len(ended(env.reset()[1])) == 1
    assert [i[stat_key("score")] for i in ended(run_steps(env, 4))] == [0.5]


BAD_SCORE_FN_RESULTS = [np.array([0.5]), np.array([0.5, 0.5]), "0.5", None, True, Decimal("0.5")]


@pytest.mark.parametrize("result", BAD_SCORE_FN_RESULTS, ids=repr)
def test_a_score_fn_result_that_is_not_a_real_number_drops_the_episode_once(make_curriculum: Any,
                                                                             result: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD))
    results = [result]
    env = CurriculumEnv(FixedEpisodeEnv(), curriculum, score_fn=lambda returns: results.pop() if results else 0.5)
    env.reset()
    task = env.task
    run_steps(env, 3)
    message = (f"Expected score_fn to return a real number in the curriculum's score_range [0.0, 1.0] for task "
               f"{task.task_id} ({task.label!r}), received {result!r} of type {type(result).__name__} for episode "
               "returns [0.5]")
    with pytest.raises(InvalidScoreError, match=f"^{re.escape(message)}$"):
        env.step(ACTION)
    assert env.episodes == 0 and curriculum.tracker.total_completions == 0
    message = (f"CurriculumEnv.step() called after the end of the episode of task {task.task_id} ({task.label!r}) "
               "failed; call reset()")
    with pytest.raises(EpisodeNotStartedError, match=f"^{re.escape(message)}$"):
        env.step(ACTION)
    assert env.episodes == 0  # the failed episode is not counted by a retry either
    infos = ended(run(env, 4))
    assert [i[stat_key("score")] for i in infos] == [0.5]
    assert env.episodes == curriculum.tracker.total_completions == 1


# ---- infos ----------------------------------------------------------------------------------------
def test_infos_returned_as_a_dict_stay_a_dict_with_the_env_values(make_curriculum: Any) -> None:
    """They used to come back as a list of the dict's keys, the env's values dropped."""
    env = CurriculumEnv(ScriptedFailuresEnv(dict_infos=True), make_curriculum(two_label_config(easy=HARD)))
    _, infos = env.reset()
    assert infos == {"reset_count": 1}
    assert env.step(ACTION)[4] == {"step_count": 1}
    run_steps(env, 2)
    infos = env.step(ACTION)[4]
    assert isinstance(infos, dict)
    assert infos["step_count"] == 4 and infos["fixed_episode"] == {"length": 4, "tag": 2}
    assert infos[stat_key("score")] == 0.5 and infos[stat_key("episodes")] == 1
    assert infos["reset_count"] == 2  # the auto-reset's info, under its own key
