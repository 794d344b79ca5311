"""`GymCurriculumEnv`: the `CurriculumEnv` semantics for a single-agent `gymnasium.Env`.

Same task, score, truncation and stats policies as `curriculum.env.CurriculumEnv`, with
gymnasium's reset discipline instead of auto-reset:

- The config of a task reaches the env through `env.unwrapped.set_env_config(env_cfg)`,
  called by `reset()` just before the wrapped `reset()` (the same hook as the PufferEnv
  wrapper, so one env class serves both; `reset(options=...)` is passed through untouched).
- `reset()` starts the task drawn when the previous episode ended (the first `reset()` draws
  one). Called while an episode runs, it abandons that episode (not reported) and draws anew.
- `reset(seed=s)` also seeds the task draw: it calls `curriculum.reseed(s)` (when the
  curriculum has one) and draws the episode's task from the reseeded stream, so the same seed
  on a curriculum in the same state starts the same task, as gymnasium's `check_env` expects.
  For a local curriculum the task stream that follows is then reproducible; a shared one
  (`shared_memory=True`) reseeds only this process's draws, while the pool and its scores
  keep changing with every other process's completions.
- The step that ends an episode (terminated or truncated) records it, draws the next task and
  returns the `curriculum_stats/...` entries merged into its info dict. The env is not reset:
  the caller (or gymnasium's vector autoreset) calls `reset()`, which applies the next task.
- A desync truncation (`truncated` with `truncated_by_desync: True` in the info, or the
  unwrapped env's `desync_truncation` attribute true) is counted, never reported; a plain
  time-limit truncation is a full episode and is reported.
- Failures at an episode's end, as for `CurriculumEnv`: if scoring or recording raises, the
  episode is dropped (neither recorded nor counted); if drawing the next task raises, the
  episode stays recorded, and its last step's info with its entries comes with the info of
  the next `reset()` (the reset's own keys are added where they do not clash).

Attributes (`action_space`, `observation_space`, `spec`, `render_mode`, `np_random`,
`unwrapped`, ...) are forwarded by `gymnasium.Wrapper`'s explicit properties.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium
import numpy as np

from curriculum.env import (
    DEFAULT_STATS_INTERVAL,
    EpisodeCounters,
    ScoreFn,
    StageSource,
    is_desync_truncation,
)
from curriculum.errors import CurriculumConfigError, EnvContractError, EpisodeNotStartedError

__all__ = ["GymCurriculumEnv"]


class GymCurriculumEnv(EpisodeCounters, gymnasium.Wrapper):
    """Wraps a single-agent gymnasium env: one curriculum task per episode, stats in infos.

    Arguments as for `CurriculumEnv` (`seed`, `score_fn`, `local_tracking`, `stats_interval`,
    `stage_source`); `score_fn` receives a one-element array holding the episode return.
    """

    def __init__(
        self,
        env: gymnasium.Env,
        curriculum: Any,
        *,
        seed: int | None = None,
        score_fn: ScoreFn | None = None,
        local_tracking: bool = True,
        stats_interval: int = DEFAULT_STATS_INTERVAL,
        stage_source: StageSource | None = None,
    ) -> None:
        if not isinstance(env, gymnasium.Env):
            raise CurriculumConfigError(f"Expected `env` to be a gymnasium.Env, received {type(env).__name__}")
        super().__init__(env)
        set_env_config = getattr(env.unwrapped, "set_env_config", None)
        if not callable(set_env_config):
            raise EnvContractError(
                f"{type(env.unwrapped).__name__} has no set_env_config(env_cfg) method; GymCurriculumEnv applies "
                "each task's env config through env.unwrapped.set_env_config before the reset that starts the task"
            )
        self._set_env_config = set_env_config
        self._bind_curriculum(curriculum, seed=seed, score_fn=score_fn, local_tracking=local_tracking,
                              stats_interval=stats_interval, stage_source=stage_source)
        self._task: Any = None
        self._next_task: Any = None
        self._running = False
        self._return = 0.0
        self._pending_info: dict[str, Any] | None = None  # an ended episode's, not returned yet

    @property
    def task(self) -> Any:
        """The task of the running (or just ended) episode; None before the first reset."""
        return self._task


    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Apply the next task's config, then reset the env (a running episode is abandoned)."""
        task = self._next_task
        # the running episode (if any) is abandoned first: a reset that fails below (its draw included) leaves none
        running, self._running = self._running, False
        if seed is not None:
            reseed = getattr(self.curriculum, "reseed", None)
            if callable(reseed):
                reseed(seed)
            task = None  # drawn before the reseed: not from the seeded stream
        if task is None or running:
            task = self._accounting.draw_task()
            self._next_task = task  # a start that fails below is retried with this task
        self._set_env_config(task.env_cfg)
        obs, info = self.env.reset(seed=seed, options=options)
        self._task = task
        self._next_task = None
        self._return = 0.0
        self._running = True
        if self._pending_info is not None:
            info, self._pending_info = {**info, **self._pending_info}, None
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; at an episode's end, record it, draw the next task and report stats."""
        if not self._running:
            raise EpisodeNotStartedError(
                "GymCurriculumEnv.step() called with no running episode; call reset() first "
                "(after an episode ends, reset() starts the next task)"
            )
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        if terminated or truncated:
            self._running = False
            desync = bool(truncated) and is_desync_truncation(self.env.unwrapped, info)
            accounting = self._accounting
            accounting.settled_entries = None
            try:
                self._next_task, entries = accounting.end_episode(self._task, np.array([self._return]), desync=desync)
            except BaseException:
                settled = accounting.settled_entries  # settled, then the draw failed (else None)
                self._pending_info = None if settled is None else {**info, **settled}
                raise
            info = {**info, **entries}
        return obs, reward, terminated, truncated, info
