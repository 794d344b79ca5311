"""The gate's gymnasium-wrapper test fails on realistic bugs of `GymCurriculumEnv`.

The wrapper is the library's own (the plug-in options replace the curriculum and the PufferEnv
wrapper, not it), so its bugs are planted into the library in a child pytest, as a change to
`curriculum/gym_env.py` would put them there.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST = "scenarios/test_config_at_reset.py::test_gymnasium_wrapper_runs_and_records_every_episode_once"

#: bug -> (code run before the gate test, a phrase of the failure it must produce)
PLANTED = {
    "config applied after the reset": ("""
        import curriculum.gym_env as g
        def reset(self, *, seed=None, options=None):
            running, self._running = self._running, False
            task = self._next_task if self._next_task is not None and not running else self._accounting.draw_task()
            self._next_task = task
            obs, info = self.env.reset(seed=seed, options=options)
            self._set_env_config(task.env_cfg)  # bug: after the reset, so the episode runs the previous config
            self._task, self._next_task, self._return, self._running = task, None, 0.0, True
            return obs, info
        g.GymCurriculumEnv.reset = reset
        """, "was handed task"),
    "return kept across episodes": ("""
        import curriculum.gym_env as g
        reset = g.GymCurriculumEnv.reset
        def keep(self, *, seed=None, options=None):
            kept = self._return
            out = reset(self, seed=seed, options=options)
            self._return = kept  # bug: the next episode's return starts from the last one's
            return out
        g.GymCurriculumEnv.reset = keep
        """, "score of episode"),
    "desync cut recorded": ("""
        import curriculum.gym_env as g
        g.is_desync_truncation = lambda env, info: False  # bug: every truncation taken for a time limit
        """, "desync_truncations for episode"),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_gymnasium_wrapper_test_catches_planted_bug(bug: str) -> None:
    plant, needle = PLANTED[bug]
    code = textwrap.dedent(plant) + (
        "\nimport sys, pytest\n"
        f"sys.exit(pytest.main([{TEST!r}, '-p', 'no:xdist', '-p', 'no:randomly', '-p', 'no:cacheprovider', '-q']))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, f"the gymnasium-wrapper test did not fail on {bug!r} (exit {proc.returncode}):\n{output}"
    assert needle in output, f"the gymnasium-wrapper test failed on {bug!r} but not naming {needle!r}:\n{output}"
