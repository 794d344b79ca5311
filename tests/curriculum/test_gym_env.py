"""GymCurriculumEnv: the CurriculumEnv semantics with gymnasium's reset discipline."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.pendulum import PendulumEnv
from gymnasium.utils.env_checker import check_env

from env_doubles import HARD, FixedGymEnv, FlakyDrawCurriculum, two_label_config
from curriculum import (
    BucketedTaskGenerator,
    CurriculumConfig,
    CurriculumConfigError,
    EnvContractError,
    EpisodeNotStartedError,
    GymCurriculumEnv,
    InvalidScoreError,
    UniformConfig,
)
from curriculum.stats import COMPLETION_INFO_KEY, stat_key


def run_episodes(env: GymCurriculumEnv, episodes: int) -> list[dict[str, Any]]:
    """Episode-end infos of `episodes` episodes, resetting between them like a gym loop."""
    out = []
    for _ in range(episodes):
        env.reset()
        while True:
            _, _, terminated, truncated, info = env.step(0)
            if terminated or truncated:
                out.append(info)
                break
    return out


def test_each_episode_runs_its_task_and_is_credited_to_it(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config())
    env = GymCurriculumEnv(FixedGymEnv(), curriculum)
    obs, _ = env.reset()
    assert obs[1] == env.task.env_cfg["tag"]  # the first episode already runs its task
    infos = run_episodes(env, 30)  # its first reset abandons the unstarted episode: nothing recorded
    tags = {"easy": 1, "hard": 2}
    for config, info in zip(env.unwrapped.configs_at_reset[1:], infos, strict=True):
        (label,) = [k.rsplit("/", 1)[1] for k in info if k.startswith(stat_key("per_label_samples"))]
        assert config["tag"] == tags[label]
    assert env.episodes == env.completions == curriculum.tracker.total_completions == 30
    assert float(curriculum.tracker.score_sum.sum()) == 15.0


def test_no_auto_reset_and_step_after_the_end_is_refused(make_curriculum: Any) -> None:
    env = GymCurriculumEnv(FixedGymEnv(), make_curriculum(two_label_config(easy=HARD)))
    run_episodes(env, 1)
    message = ("GymCurriculumEnv.step() called with no running episode; call reset() first "
               "(after an episode ends, reset() starts the next task)")
    with pytest.raises(EpisodeNotStartedError, match=f"^{re.escape(message)}$"):
        env.step(0)


def test_time_limit_truncation_recorded_desync_truncation_not(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy={**HARD, "end": "truncation"}, hard={**HARD, "end": "desync"}))
    env = GymCurriculumEnv(FixedGymEnv(), curriculum)
    infos = run_episodes(env, 40)
    cut = [info for info in infos if info[stat_key("desync_truncations")]]
    assert 0 < len(cut) < 40
    assert env.desync_truncations == len(cut)
    assert curriculum.tracker.total_completions == 40 - len(cut)


def test_without_local_tracking_the_completion_travels_in_the_info(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD))
    env = GymCurriculumEnv(FixedGymEnv(), curriculum, local_tracking=False)
    (info,) = run_episodes(env, 1)
    assert info[COMPLETION_INFO_KEY]["score"] == 0.5
    assert curriculum.tracker.total_completions == 0


def test_env_without_set_env_config(make_curriculum: Any) -> None:
    class Plain(FixedGymEnv):
        set_env_config = None  # type: ignore[assignment]

    message = ("Plain has no set_env_config(env_cfg) method; GymCurriculumEnv applies each task's env config "
               "through env.unwrapped.set_env_config before the reset that starts the task")
    with pytest.raises(EnvContractError, match=f"^{re.escape(message)}$"):
        GymCurriculumEnv(Plain(), make_curriculum(two_label_config()))


def test_forwards_through_gymnasium_wrapper_properties(make_curriculum: Any) -> None:
    inner = FixedGymEnv()
    env = GymCurriculumEnv(gymnasium.wrappers.TimeLimit(inner, max_episode_steps=100),
                           make_curriculum(two_label_config()))
    assert env.observation_space == inner.observation_space and env.action_space == inner.action_space
    assert env.unwrapped is inner
    assert all("__getattr__" not in vars(cls) for cls in type(env).__mro__ if cls is not object)


@pytest.mark.parametrize("result", [np.array([0.5]), "0.5", None], ids=repr)
def test_a_score_fn_result_that_is_not_a_real_number_drops_the_episode_once(make_curriculum: Any,
                                                                             result: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD))
    results = [result]
    env = GymCurriculumEnv(FixedGymEnv(), curriculum, score_fn=lambda returns: results.pop() if results else 0.5)
    env.reset()
    task = env.task
    for _ in range(3):
        env.step(0)
    message = (f"Expected score_fn to return a real number in the curriculum's score_range [0.0, 1.0] for task "
               f"{task.task_id} ({task.label!r}), received {result!r} of type {type(result).__name__} for episode "
               "returns [0.5]")
    with pytest.raises(InvalidScoreError, match=f"^{re.escape(message)}$"):
        env.step(0)
    assert env.episodes == 0 and curriculum.tracker.total_completions == 0
    with pytest.raises(EpisodeNotStartedError):
        env.step(0)
    (info,) = run_episodes(env, 1)
    assert info[stat_key("score")] == 0.5 and env.episodes == curriculum.tracker.total_completions == 1


def test_a_failing_task_draw_keeps_the_ended_episode_for_the_next_reset(make_curriculum: Any) -> None:
    """The episode stays recorded; its entries and its last step's info (here the episode
    statistics of gymnasium's `RecordEpisodeStatistics`) come with the next `reset()`."""
    curriculum = FlakyDrawCurriculum(make_curriculum(two_label_config(easy=HARD)))
    env = GymCurriculumEnv(gymnasium.wrappers.RecordEpisodeStatistics(FixedGymEnv()), curriculum)
    env.reset()
    for _ in range(3):
        env.step(0)
    curriculum.failing = True
    with pytest.raises(LookupError, match="^no task$"):
        env.step(0)
    assert env.episodes == curriculum.curriculum.tracker.total_completions == 1
    curriculum.failing = False
    _, info = env.reset()
    assert info[stat_key("score")] == 0.5 and info[stat_key("episodes")] == 1
    assert info["episode"]["l"] == 4 and info["episode"]["r"] == 0.5
    _, info = env.reset()  # given once
    assert stat_key("score") not in info and "episode" not in info


def test_a_reset_whose_draw_fails_still_abandons_the_running_episode(make_curriculum: Any) -> None:
    """`reset()` abandons the running episode even when its task draw fails: `step()` is then
    refused, never run on into an episode that would be recorded for the abandoned task."""
    curriculum = FlakyDrawCurriculum(make_curriculum(two_label_config()))
    env = GymCurriculumEnv(FixedGymEnv(), curriculum)
    env.reset()
    env.step(0)
    curriculum.failing = True
    with pytest.raises(LookupError, match="^no task$"):
        env.reset()
    with pytest.raises(EpisodeNotStartedError):
        env.step(0)
    curriculum.failing = False
    run_episodes(env, 1)
    assert env.episodes == curriculum.curriculum.tracker.total_completions == 1


class FailingStartGymEnv(FixedGymEnv):
    """`FixedGymEnv` whose next `reset()` raises while `failing` is set (its pending config kept)."""

    failing = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        if self.failing:
            raise RuntimeError("the env failed to start")
        return super().reset(seed=seed, options=options)


class CountedDrawCurriculum(FlakyDrawCurriculum):
    """`FlakyDrawCurriculum` that keeps every task it handed out."""

    def __init__(self, curriculum: Any) -> None:
        super().__init__(curriculum)
        self.drawn: list[Any] = []

    def get_task(self) -> Any:
        task = super().get_task()
        self.drawn.append(task)
        return task


@pytest.mark.parametrize("running", [False, True])
def test_a_failed_env_start_is_retried_with_the_task_drawn_for_it(make_curriculum: Any, running: bool) -> None:
    """After an episode's end, or when `reset()` abandons a running episode, a start that fails
    is retried with the task drawn for it: no other task is drawn, and that one runs."""
    curriculum = CountedDrawCurriculum(make_curriculum(two_label_config()))
    inner = FailingStartGymEnv()
    env = GymCurriculumEnv(inner, curriculum)
    run_episodes(env, 3)
    if running:
        env.reset()
        env.step(0)
    inner.failing = True
    with pytest.raises(RuntimeError, match="^the env failed to start$"):
        env.reset()
    with pytest.raises(EpisodeNotStartedError):
        env.step(0)  # the abandoned episode is over
    drawn = len(curriculum.drawn)
    inner.failing = False
    obs, _ = env.reset()
    assert len(curriculum.drawn) == drawn and env.task is curriculum.drawn[-1]
    assert obs[1] == env.task.env_cfg["tag"] and inner.configs_at_reset[-1]["tag"] == env.task.env_cfg["tag"]


def test_an_env_that_is_not_a_gymnasium_env_is_refused(make_curriculum: Any) -> None:
    message = "Expected `env` to be a gymnasium.Env, received dict"
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        GymCurriculumEnv({}, make_curriculum(two_label_config()))


# ---- gymnasium's env checker and reset(seed=...) ------------------------------------------------
class ConfigurableCartPole(CartPoleEnv):
    """CartPole whose pole length is a task's config: the dynamics, not the first observation,
    depend on the task (which is what `check_env`'s step determinism check sees)."""

    def set_env_config(self, env_cfg: Mapping[str, Any]) -> None:
        self.length = float(env_cfg["pole_length"])
        self.polemass_length = self.masspole * self.length


class ConfigurablePendulum(PendulumEnv):
    """Pendulum (continuous actions) whose gravity is a task's config."""

    def set_env_config(self, env_cfg: Mapping[str, Any]) -> None:
        self.g = float(env_cfg["gravity"])


def _bucketed(key: str, values: list[float], *, base: Mapping[str, Any] | None = None,
              seed: int = 0) -> CurriculumConfig:
    return CurriculumConfig(task_generator=BucketedTaskGenerator(base or {}, {key: values}, label=key),
                            algorithm=UniformConfig(), num_active_tasks=8, seed=seed)


TAGGED = {"reward_per_step": 0.125, "episode_length": 2}

CHECKED_ENVS = {
    "cartpole": (ConfigurableCartPole, lambda: _bucketed("pole_length", [0.25, 0.5, 1.0, 2.0])),
    "pendulum": (ConfigurablePendulum, lambda: _bucketed("gravity", [5.0, 9.81, 15.0])),
    "fixed": (FixedGymEnv, lambda: two_label_config()),
}


@pytest.mark.parametrize("name", sorted(CHECKED_ENVS))
def test_check_env_passes_on_the_wrapper_wherever_it_passes_on_the_env(make_curriculum: Any, name: str) -> None:
    env_class, config = CHECKED_ENVS[name]
    check_env(env_class(), skip_render_check=True)  # the env alone passes gymnasium's checker ...
    wrapped = GymCurriculumEnv(env_class(), make_curriculum(config()))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is different from the unwrapped version.*")
        check_env(wrapped, skip_render_check=True)  # ... and so does the wrapper (reset(seed=) seeds the draw)


def _task_stream(env: GymCurriculumEnv, seed: int | None, episodes: int) -> list[int]:
    env.reset(seed=seed)
    stream = [env.task.task_id]
    for _ in range(episodes - 1):
        while True:
            _, _, terminated, truncated, _ = env.step(0)
            if terminated or truncated:
                break
        env.reset()
        stream.append(env.task.task_id)
    return stream


def test_reset_with_a_seed_makes_the_task_stream_of_a_local_curriculum_reproducible(make_curriculum: Any) -> None:
    config = _bucketed("tag", [1, 2, 3, 4, 5, 6, 7, 8], base=TAGGED)
    streams = [_task_stream(GymCurriculumEnv(FixedGymEnv(), make_curriculum(config)), seed, 40)
               for seed in (7, 7, 8)]
    assert streams[0] == streams[1]
    assert streams[0] != streams[2]
    # a seed in the middle of a run restarts the same stream from the same curriculum state
    env = GymCurriculumEnv(FixedGymEnv(), make_curriculum(config))
    env.reset(seed=3)
    first = env.task.task_id
    env.reset(seed=3)
    assert env.task.task_id == first


def test_reset_with_a_seed_reseeds_only_this_handle_of_a_shared_curriculum(make_curriculum: Any) -> None:
    shared = make_curriculum(_bucketed("tag", [1, 2, 3, 4, 5, 6, 7, 8], base=TAGGED), shared=True)
    env = GymCurriculumEnv(FixedGymEnv(), shared)
    first = _task_stream(env, 5, 10)
    assert _task_stream(env, 5, 1) == first[:1]
    assert shared.tracker.total_completions == 9  # the completions are shared; the stream is this handle's
