"""Config applied at reset: every episode runs exactly the task it was handed, from its first
step to its last, the first episode included (seeds/004, "CurriculumEnv Config Timing").

The exact-accounting env reports the config it is running in every observation, so an episode
that starts on the previous task's config, or whose config changes mid-episode, is visible.
The same holds through the gymnasium wrapper (`GymCurriculumEnv`, what stable-baselines3 and
other gymnasium trainers use), with terminal ends, time-limit truncations and desync cuts,
under the accounting oracle.
"""

from __future__ import annotations

import numpy as np

from curriculum import BucketedTaskGenerator, CurriculumConfig, GymCurriculumEnv, UniformConfig
from harness.envs import GymExactAccountingEnv, ExactAccountingEnv
from harness.episodes import LabelledTaskGenerator
from harness.thresholds import ENV_WRAPPER as LIMITS


class _HandedOut:
    """Records every task the curriculum hands out, in order."""

    def __init__(self, curriculum) -> None:
        self.curriculum = curriculum
        self.tasks = []

    def __getattr__(self, name):  # test double: everything else goes to the curriculum
        return getattr(self.curriculum, name)

    def get_task(self):
        task = self.curriculum.get_task()
        self.tasks.append(task)
        return task


def _score(returns) -> float:
    return min(float(sum(returns) / len(returns)) / 10.0, 1.0)


def test_every_episode_runs_its_own_task_from_first_to_last_step(curriculum_factory, curriculum_env_class,
                                                                 scenario_seed, golden, oracle) -> None:
    generator = LabelledTaskGenerator(BucketedTaskGenerator(
        {}, {"episode_length": [2, 3, 5, 8], "reward_per_step": [0.25, 0.5, 1.0]}, label="exact", seed=scenario_seed))
    watcher = oracle(score_fn=_score, context="single env")
    curriculum = _HandedOut(watcher.watch(curriculum_factory(CurriculumConfig(
        task_generator=generator, algorithm=UniformConfig(), num_active_tasks=12, seed=scenario_seed))))
    env = curriculum_env_class(ExactAccountingEnv(), curriculum, seed=scenario_seed, score_fn=_score)
    obs, _ = env.reset(seed=scenario_seed)
    actions = np.zeros(1, dtype=np.int32)
    episodes, steps_in_episode, seen = [], 0, []
    current = (float(obs[0][0]), float(obs[0][1]))
    while len(episodes) < LIMITS.episodes:
        running = (float(obs[0][0]), float(obs[0][1]))
        seen.append(running)
        obs, _, terminals, truncations, infos = env.step(actions)
        watcher.observe(infos)
        steps_in_episode += 1
        if terminals[0] or truncations[0]:
            episodes.append((current, sorted(set(seen)), steps_in_episode))
            seen, steps_in_episode = [], 0
            current = (float(obs[0][0]), float(obs[0][1]))
    for index, ((start_cfg, configs, length), task) in enumerate(zip(episodes, curriculum.tasks)):
        expected = (float(task.env_cfg["episode_length"]), float(task.env_cfg["reward_per_step"]))
        assert configs == [expected], (
            f"episode {index} was handed task {task.task_id} with config {expected} (episode_length, reward_per_step) "
            f"but ran {configs}, seed {scenario_seed}"
        )
        assert length == expected[0], (
            f"episode {index} lasted {length} steps, its task's episode_length is {expected[0]:.0f}, seed {scenario_seed}"
        )
    watcher.verify()
    golden({"episodes": len(episodes), "first_configs": [e[0] for e in episodes[:8]]})


def test_gymnasium_wrapper_runs_and_records_every_episode_once(curriculum_factory, scenario_seed, oracle) -> None:
    """`GymCurriculumEnv` over a gymnasium env: each episode runs its own task's config from its
    first step, full episodes and time-limit truncations are recorded once, desync cuts never,
    and every number it reports matches the oracle's recomputation."""
    generator = LabelledTaskGenerator(BucketedTaskGenerator(
        {}, {"episode_length": [2, 3, 5], "reward_per_step": [0.25, 1.0], "end": ["terminal", "truncated", "desync"]},
        label="exact", seed=scenario_seed))
    watcher = oracle(score_fn=_score, context="GymCurriculumEnv")
    curriculum = _HandedOut(watcher.watch(curriculum_factory(CurriculumConfig(
        task_generator=generator, algorithm=UniformConfig(), num_active_tasks=12, seed=scenario_seed))))
    env = GymCurriculumEnv(GymExactAccountingEnv(seed=scenario_seed), curriculum, seed=scenario_seed,
                           score_fn=_score, stats_interval=7)
    ran = []
    for index in range(LIMITS.episodes):
        obs, info = env.reset(seed=scenario_seed if index == 0 else None)
        watcher.observe(info)
        configs = set()
        done = False
        while not done:
            configs.add((float(obs[0]), float(obs[1])))
            obs, _, terminated, truncated, info = env.step(0)
            watcher.observe(info)
            done = terminated or truncated
        ran.append(sorted(configs))
    for index, (configs, task) in enumerate(zip(ran, curriculum.tasks)):
        expected = (float(task.env_cfg["episode_length"]), float(task.env_cfg["reward_per_step"]))
        assert configs == [expected], (
            f"GymCurriculumEnv: episode {index} was handed task {task.task_id} with config {expected} "
            f"(episode_length, reward_per_step) but ran {configs}, seed {scenario_seed}")
    watcher.verify()
