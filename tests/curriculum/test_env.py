"""CurriculumEnv: task per episode, config at reset, exact accounting, truncations, errors."""

from __future__ import annotations

import re
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
    FixedEpisodeEnv,
    NoConfigEnv,
    ReportingEnv,
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


def test_per_label_lp_score_is_an_ema_with_rate_one_tenth() -> None:
    class Scripted:
        """A protocol curriculum whose task scores are set by the test."""

        num_active_tasks = 2
        scores = np.array([1.0, 0.0])

        def get_task(self) -> None: ...

        def update_task_performance(self, task_id: int, score: float) -> bool:
            return True

        def stats(self) -> dict[str, Any]:
            return {}

        def task_scores(self) -> np.ndarray:
            return self.scores

    recorder = CompletionRecorder(Scripted(), stats_interval=1)
    key = stat_key("per_label_lp_scores", "a")
    assert recorder.record(0, "a", 0.5)[key] == 1.0
    assert recorder.record(1, "a", 0.5)[key] == pytest.approx(0.9)
    assert recorder.record(1, "a", 0.5)[key] == pytest.approx(0.81)


def test_reseeds_once_per_process(make_curriculum: Any) -> None:
    config = two_label_config(num_active_tasks=64)
    reseeded, reference = make_curriculum(config), make_curriculum(config)
    CurriculumEnv(FixedEpisodeEnv(), reseeded, seed=5)
    CurriculumEnv(FixedEpisodeEnv(), reseeded, seed=6)  # same process, same handle: no second reseed
    reference.reseed(5)
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
