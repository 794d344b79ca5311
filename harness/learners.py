"""A real learner on curriculum-sampled tasks: stable-baselines3 PPO through `GymCurriculumEnv`.

The simulated student of the scenarios (`harness.simulator`) is cheap and exact, but it is a
model; this module checks the curriculum against the thing it is for. `run_learner` trains
PPO (torch CPU, one thread) on a task family of `harness.learner_envs`, every env wrapped in
`curriculum.GymCurriculumEnv` over one curriculum:

- `vec_env="dummy"`: SB3 `DummyVecEnv`, all envs in this process on one local curriculum.
- `vec_env="subproc"`: SB3 `SubprocVecEnv`, one process per env, on one shared-memory
  curriculum (`Curriculum(config, shared_memory=True)`, pickled into the workers).

What it measures, from the episode-end infos the wrapper emits (`curriculum_stats/...`), in
environment steps (all envs together, SB3's `num_timesteps`):

- sampling share per variant and per kind (learnable, impossible, noisy) over steps;
- per learnable variant, the step of the first training episode that solved it (`reached`)
  and of the first evaluation in which the greedy policy solved it (`mastered`); and the
  first evaluation in which it solved every learnable variant at once (`all_mastered_step`);
- the share of episodes on impossible and noisy variants before and after that point.

Training stops `post_mastery_steps` after every learnable variant is mastered, or at
`max_steps`. stable-baselines3 and torch are imported on first use: this module (and its
limits, `LEARNER_LIMITS`) import without them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from curriculum import CurriculumConfig, LearningProgressConfig, Stage, StagedProgressionConfig, UniformConfig
from curriculum.stats import PER_LABEL_SAMPLES, SCORE, stat_key
from harness.learner_envs import IMPOSSIBLE, NOISY, TASK_FAMILIES, LearnerTaskFamily, VariantCycleGenerator

__all__ = [
    "CURRICULA",
    "VEC_ENVS",
    "LEARNER_LIMITS",
    "LearnerLimits",
    "PPOSettings",
    "LearnerRun",
    "LearnerRunResult",
    "LearnerComparison",
    "compare_to_uniform",
    "make_curriculum_config",
    "run_learner",
]

CURRICULA: Final = ("learning_progress", "uniform", "staged_progression")
"""Curricula `run_learner` builds by name (others come in through `curriculum_factory`).
Staged progression is an oracle of the task family: one stage per learnable variant, easiest
first, and never an impossible or noisy one."""


@dataclass(frozen=True)
class LearnerLimits:
    """Limits of the learner tier (`scenarios/learners/`), judged on the mean over `seeds`.

    Ratios compare learning progress with uniform sampling on the same family and seed.
    """

    seeds: int = 10
    """Seeds per family (run seeds 0 .. seeds-1 at base seed 0)."""
    max_steps: int = 100_000
    """Environment steps per run at most (about 15-30 s of PPO on one core)."""
    post_mastery_steps: int = 15_000
    """Steps a learning-progress run trains after mastering every learnable variant."""
    max_steps_ratio: float = 0.7
    """Steps until the greedy policy masters every learnable variant, learning progress /
    uniform (uniform runs that never get there count `max_steps`, which favours uniform)."""
    max_unlearnable_share_ratio: float = 0.2
    """Share of episodes on impossible and noisy variants until mastery, learning progress /
    uniform."""
    max_after_mastery_share_ratio: float = 0.2
    """The same share in the `post_mastery_steps` after mastery, learning progress / uniform."""
    run_wall_budget: float = 60.0
    """Seconds one run may take on the 2-core machine (measured and reported, not asserted)."""


LEARNER_LIMITS: Final = LearnerLimits()

VEC_ENVS: Final = ("dummy", "subproc")

_EPISODES_KEY: Final = stat_key("episodes")
_LABEL_PREFIX: Final = stat_key(PER_LABEL_SAMPLES) + "/"
_SCORE_KEY: Final = stat_key(SCORE)


@dataclass(frozen=True)
class PPOSettings:
    """PPO hyperparameters of the learner tier (small nets, short rollouts: a run fits in a minute)."""

    n_envs: int = 8
    """Environments stepped together (one curriculum task per episode in each)."""
    n_steps: int = 64
    """Steps per env per rollout."""
    batch_size: int = 256
    n_epochs: int = 4
    learning_rate: float = 1e-3
    gamma: float = 0.95
    gae_lambda: float = 0.9
    ent_coef: float = 0.01
    net_arch: tuple[int, ...] = (64, 64)


@dataclass(frozen=True)
class LearnerRun:
    """One training run: which family, which curriculum, how long."""

    family: str
    """A key of `harness.learner_envs.TASK_FAMILIES`."""
    curriculum: str = "learning_progress"
    """A name from `CURRICULA` (ignored when `run_learner` gets a `curriculum_factory`)."""
    seed: int = 0
    """Seeds PPO, the curriculum's sampling stream and the envs' noise."""
    max_steps: int = LEARNER_LIMITS.max_steps
    """Environment steps at most."""
    post_mastery_steps: int = LEARNER_LIMITS.post_mastery_steps
    """Steps trained after every learnable variant is mastered (the after-mastery window)."""
    eval_every: int = 2048
    """Environment steps between greedy evaluations of every learnable variant."""
    num_active_tasks: int | None = None
    """Curriculum pool size (None: the family's `default_pool_size`, every variant twice)."""
    vec_env: str = "dummy"
    """`"dummy"` (local curriculum) or `"subproc"` (one process per env, shared-memory curriculum)."""
    ppo: PPOSettings = field(default_factory=PPOSettings)

    def __post_init__(self) -> None:
        if self.family not in TASK_FAMILIES:
            raise ValueError(f"Expected `family` to be one of {tuple(TASK_FAMILIES)}, received {self.family!r}")
        if self.vec_env not in VEC_ENVS:
            raise ValueError(f"Expected `vec_env` to be one of {VEC_ENVS}, received {self.vec_env!r}")
        for name in ("max_steps", "eval_every", "num_active_tasks"):
            value = getattr(self, name)
            if name == "num_active_tasks" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Expected `{name}` to be a positive integer, received {value!r}")
        if isinstance(self.post_mastery_steps, bool) or not isinstance(self.post_mastery_steps, int) \
                or self.post_mastery_steps < 0:
            raise ValueError(f"Expected `post_mastery_steps` to be a non-negative integer, "
                             f"received {self.post_mastery_steps!r}")


@dataclass
class LearnerRunResult:
    """What a run measured. Steps are environment steps over all envs."""

    run: LearnerRun
    family: LearnerTaskFamily
    episode_steps: np.ndarray
    """Per ended episode, the step count at which it ended (non-decreasing)."""
    episode_labels: list[str]
    """Per ended episode, its variant label."""
    episode_scores: np.ndarray
    """Per ended episode, the score the curriculum received."""
    reached: dict[str, int | None]
    """Per learnable label, the step of the first solved training episode (None: never)."""
    mastered: dict[str, int | None]
    """Per learnable label, the step of the first evaluation the greedy policy solved it."""
    all_mastered_step: int | None
    """First evaluation step at which the greedy policy solved every learnable variant."""
    total_steps: int
    wall_time: float
    """Seconds from the first to the last training step (env start-up excluded)."""
    evaluations: list[tuple[int, dict[str, bool]]] = field(default_factory=list)
    """Every evaluation: (step, solved per learnable label)."""
    curriculum_stats: dict[str, Any] = field(default_factory=dict)
    """`curriculum.stats()` at the end of training (`total_completions`, `evictions`, ...)."""

    @property
    def kinds(self) -> list[str]:
        """Per ended episode, its variant kind."""
        kind_of = {v.label: v.kind for v in self.family.variants}
        return [kind_of[label] for label in self.episode_labels]

    def share(self, kinds: Sequence[str], *, start: int = 0, end: int | None = None) -> float:
        """Share of the episodes ended in steps (start, end] whose variant is of `kinds` (NaN: none)."""
        mask = self._window(start, end)
        total = int(mask.sum())
        if total == 0:
            return float("nan")
        chosen = np.array([kind in kinds for kind in self.kinds])
        return float((chosen & mask).sum() / total)

    def episodes_in(self, *, start: int = 0, end: int | None = None) -> int:
        """Episodes ended in steps (start, end]."""
        return int(self._window(start, end).sum())

    def _window(self, start: int, end: int | None) -> np.ndarray:
        steps = self.episode_steps
        upper = self.total_steps if end is None else end
        return (steps > start) & (steps <= upper)

    def steps_to_master_all(self) -> int:
        """`all_mastered_step`, or `total_steps` for a run that never got there (a lower bound)."""
        return self.all_mastered_step if self.all_mastered_step is not None else self.total_steps

    def share_by_label(self, *, start: int = 0, end: int | None = None) -> dict[str, float]:
        """Share of the episodes ended in steps (start, end] per variant label."""
        mask = self._window(start, end)
        counts = Counter(label for label, keep in zip(self.episode_labels, mask) if keep)
        total = sum(counts.values())
        return {v.label: counts[v.label] / total if total else float("nan") for v in self.family.variants}

    def unlearnable_share(self, *, start: int = 0, end: int | None = None) -> float:
        """Share of episodes on impossible or noisy variants."""
        return self.share((IMPOSSIBLE, NOISY), start=start, end=end)


def make_curriculum_config(family: LearnerTaskFamily, curriculum: str, *, seed: int,
                           num_active_tasks: int) -> CurriculumConfig:
    """The curriculum config of a run: the family's generator with the named algorithm."""
    if curriculum == "learning_progress":
        algorithm: Any = LearningProgressConfig()
    elif curriculum == "uniform":
        algorithm = UniformConfig()
    elif curriculum == "staged_progression":
        stages = [Stage(v.label, VariantCycleGenerator([v])) for v in family.learnable]
        algorithm = StagedProgressionConfig(stages=stages, advancement_threshold=0.9, min_episodes=20, window=20)
        return CurriculumConfig(algorithm=algorithm, num_active_tasks=num_active_tasks, seed=seed)
    else:
        raise ValueError(f"Expected `curriculum` to be one of {CURRICULA}, received {curriculum!r}")
    return CurriculumConfig(task_generator=family.generator, algorithm=algorithm,
                            num_active_tasks=num_active_tasks, seed=seed)


class _CurriculumEnvFactory:
    """Builds one `GymCurriculumEnv(family env, curriculum)` (picklable, for `SubprocVecEnv`)."""

    def __init__(self, make_env: Callable[[], Any], curriculum: Any, seed: int) -> None:
        self.make_env = make_env
        self.curriculum = curriculum
        self.seed = seed

    def __call__(self) -> Any:
        from curriculum import GymCurriculumEnv

        env = self.make_env(seed=self.seed)  # each env its own noise stream
        return GymCurriculumEnv(env, self.curriculum, seed=self.seed)


def run_learner(
    run: LearnerRun,
    *,
    curriculum_factory: Callable[..., Any] | None = None,
    family: LearnerTaskFamily | None = None,
) -> LearnerRunResult:
    """Train PPO on `run.family` through `GymCurriculumEnv`; see the module docstring.

    `curriculum_factory(config)` (or `(config, shared_memory=True)` for `"subproc"`) replaces
    the built-in `curriculum.Curriculum`, for canaries and plug-in curricula.
    """
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from curriculum import Curriculum

    torch.set_num_threads(1)
    family = family if family is not None else TASK_FAMILIES[run.family]()
    pool = run.num_active_tasks if run.num_active_tasks is not None else family.default_pool_size
    config = make_curriculum_config(family, run.curriculum, seed=run.seed, num_active_tasks=pool)
    factory = curriculum_factory if curriculum_factory is not None else Curriculum
    shared = run.vec_env == "subproc"
    curriculum = factory(config, shared_memory=True) if shared else factory(config)
    try:
        env_fns = [_CurriculumEnvFactory(family.make_env, curriculum, seed=run.seed * 1000 + i)
                   for i in range(run.ppo.n_envs)]
        # fork: workers start in a fraction of a second instead of importing torch once each
        # (seconds apiece on 2 shared cores); the shared tracker is the same either way
        vec_env = SubprocVecEnv(env_fns, start_method="fork") if shared else DummyVecEnv(env_fns)
        try:
            ppo = run.ppo
            model = PPO(
                "MlpPolicy", vec_env, n_steps=ppo.n_steps, batch_size=ppo.batch_size, n_epochs=ppo.n_epochs,
                learning_rate=ppo.learning_rate, gamma=ppo.gamma, gae_lambda=ppo.gae_lambda, ent_coef=ppo.ent_coef,
                policy_kwargs={"net_arch": list(ppo.net_arch)}, seed=run.seed, device="cpu", verbose=0,
            )
            # no outputs: SB3's default logger makes a directory in the temp dir per run
            model.set_logger(Logger(folder=None, output_formats=[]))
            tracker = _ProgressTracker(run, family)
            model.learn(total_timesteps=run.max_steps, callback=tracker.callback())
        finally:
            vec_env.close()
        stats = getattr(curriculum, "stats", None)
        tracker.curriculum_stats = stats() if stats is not None else {}
    finally:
        close = getattr(curriculum, "close", None)
        if close is not None:
            close()
    return tracker.result()


class _ProgressTracker:
    """Collects episode ends from the training infos and evaluates the greedy policy."""

    def __init__(self, run: LearnerRun, family: LearnerTaskFamily) -> None:
        self.run = run
        self.family = family
        self.steps: list[int] = []
        self.labels: list[str] = []
        self.scores: list[float] = []
        learnable = [v.label for v in family.learnable]
        self.reached: dict[str, int | None] = dict.fromkeys(learnable)
        self.mastered: dict[str, int | None] = dict.fromkeys(learnable)
        self.all_mastered: int | None = None
        self.evaluations: list[tuple[int, dict[str, bool]]] = []
        self.next_eval = run.eval_every
        self.total_steps = 0
        self.started = 0.0
        self.finished = 0.0
        self.curriculum_stats: dict[str, Any] = {}
        self._eval_envs = [family.make_env() for _ in family.learnable]
        for env, variant in zip(self._eval_envs, family.learnable):
            env.set_env_config(variant.env_cfg)

    def callback(self) -> Any:
        from stable_baselines3.common.callbacks import BaseCallback

        tracker = self

        class _Callback(BaseCallback):
            def _on_training_start(self) -> None:
                tracker.started = time.perf_counter()

            def _on_step(self) -> bool:
                return tracker.on_step(self.num_timesteps, self.locals["infos"])

            def _on_rollout_end(self) -> None:
                tracker.on_rollout_end(self.model)

            def _on_training_end(self) -> None:
                tracker.finished = time.perf_counter()
                tracker.total_steps = self.num_timesteps

        return _Callback()

    def on_step(self, step: int, infos: Sequence[dict[str, Any]]) -> bool:
        for info in infos:
            if _EPISODES_KEY not in info:
                continue
            label = next(key[len(_LABEL_PREFIX):] for key in info if key.startswith(_LABEL_PREFIX))
            self.steps.append(step)
            self.labels.append(label)
            self.scores.append(float(info.get(_SCORE_KEY, float("nan"))))
            task = info.get("learner_task")
            if label in self.reached and self.reached[label] is None and task is not None and task["success"]:
                self.reached[label] = step
        self.total_steps = step
        if self.all_mastered is not None and step >= self.all_mastered + self.run.post_mastery_steps:
            return False
        return True

    def on_rollout_end(self, model: Any) -> None:
        step = model.num_timesteps
        if step < self.next_eval:
            return
        self.next_eval = step + self.run.eval_every
        solved = self._evaluate(model)
        self.evaluations.append((step, solved))
        for label, ok in solved.items():
            if ok and self.mastered[label] is None:
                self.mastered[label] = step
        if self.all_mastered is None and all(solved.values()):
            self.all_mastered = step

    def _evaluate(self, model: Any) -> dict[str, bool]:
        """Run the greedy policy once on every learnable variant (the envs are deterministic)."""
        envs = self._eval_envs
        obs = np.stack([env.reset()[0] for env in envs])
        returns = np.zeros(len(envs))
        running = np.ones(len(envs), dtype=bool)
        while running.any():
            actions, _ = model.predict(obs, deterministic=True)
            for i in np.flatnonzero(running):
                obs[i], reward, terminated, truncated, _ = envs[i].step(int(actions[i]))
                returns[i] += reward
                if terminated or truncated:
                    running[i] = False
        target = self.family.success_return - 1e-9
        return {v.label: bool(r >= target) for v, r in zip(self.family.learnable, returns)}

    def result(self) -> LearnerRunResult:
        return LearnerRunResult(
            run=self.run, family=self.family, episode_steps=np.array(self.steps, dtype=np.int64),
            episode_labels=list(self.labels), episode_scores=np.array(self.scores), reached=dict(self.reached),
            mastered=dict(self.mastered), all_mastered_step=self.all_mastered, total_steps=self.total_steps,
            wall_time=self.finished - self.started, evaluations=list(self.evaluations),
            curriculum_stats=dict(self.curriculum_stats),
        )


@dataclass(frozen=True)
class LearnerComparison:
    """A curriculum's run against uniform sampling's run on the same family and seed."""

    steps_ratio: float
    """Steps to master every learnable variant, curriculum / uniform."""
    unlearnable_share: float
    """Curriculum's share of episodes on impossible and noisy variants until mastery (or the
    whole run, if it never got there)."""
    uniform_unlearnable_share: float
    """Uniform's share over its whole run."""
    after_mastery_share: float
    """Curriculum's share after mastery (NaN: it never mastered every variant)."""

    @property
    def unlearnable_share_ratio(self) -> float:
        return self.unlearnable_share / self.uniform_unlearnable_share

    @property
    def after_mastery_share_ratio(self) -> float:
        return self.after_mastery_share / self.uniform_unlearnable_share


def compare_to_uniform(run: LearnerRunResult, uniform: LearnerRunResult) -> LearnerComparison:
    """The learner tier's numbers for one seed."""
    mastered = run.all_mastered_step
    return LearnerComparison(
        steps_ratio=run.steps_to_master_all() / uniform.steps_to_master_all(),
        unlearnable_share=run.unlearnable_share(end=mastered),
        uniform_unlearnable_share=uniform.unlearnable_share(),
        after_mastery_share=run.unlearnable_share(start=mastered) if mastered is not None else float("nan"),
    )
