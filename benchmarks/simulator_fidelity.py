"""Simulator fidelity: do the simulated student and a real learner rank curricula alike?

Each learner task family (`harness.learner_envs`) is mirrored as a simulated student
(`harness.simulator.TaskDependencySimulator`, driven by `harness.runners.run_direct`): its
learnable variants become a prerequisite chain in difficulty order, its impossible variants
tasks that never pay, its noisy variants tasks whose reward is the same uniform draw in [0, 1]
the real env pays. The same curricula (`harness.learners.CURRICULA`, same configs, same pool)
run on both; for each the script reports, against uniform sampling on the same seed:

- the cost to master every learnable variant (simulator: episodes until every chain task is at
  the mastery threshold at once, checked every `CHECK_EVERY` episodes; PPO: environment steps
  until the greedy policy solves every learnable variant), as a ratio to uniform's;
- the share of episodes on impossible and noisy variants until then.

and ranks the curricula on each. PPO figures come from `benchmarks/learners.json` (written by
`benchmarks.learners`); the simulator runs here (seconds).

    .venv/bin/python -m benchmarks.simulator_fidelity
    .venv/bin/python -m benchmarks.simulator_fidelity --seeds 20 --simulator learning_rate=0.03 transfer=0
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `harness` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from curriculum import Curriculum
from harness.learner_envs import IMPOSSIBLE, LEARNABLE, NOISY, TASK_FAMILIES, LearnerTaskFamily, Variant
from harness.learners import CURRICULA, make_curriculum_config
from harness.runners import run_direct
from harness.simulator import TaskDependencySimulator
from harness.task_spaces import TaskSpace

__all__ = ["FamilyStudent", "simulated_family", "simulate", "compare", "main"]

CHECK_EVERY = 50
MAX_EPISODES = 30_000
HERE = Path(__file__).resolve().parent


class FamilyStudent(TaskDependencySimulator):
    """A simulated student of a learner task family: noisy tasks pay a uniform draw in [0, 1]
    (as the real env's noisy variants do), impossible ones 0, learnable ones form a chain."""

    def __init__(self, num_tasks: int, *, noisy_tasks: tuple[int, ...], seed: int, **kwargs: Any) -> None:
        super().__init__(num_tasks, seed=seed, **kwargs)
        self._noisy_tasks = frozenset(noisy_tasks)
        self._noisy_rng = np.random.default_rng([seed, 1])

    def sample_task(self, task_index: int) -> float:
        reward = super().sample_task(task_index)
        return float(self._noisy_rng.random()) if task_index in self._noisy_tasks else reward


def simulated_family(family: LearnerTaskFamily, *, seed: int,
                     simulator_kwargs: dict[str, Any]) -> tuple[TaskSpace, LearnerTaskFamily]:
    """The simulated mirror of `family`: (task space, family whose configs are task indices)."""
    order = list(family.learnable) + [v for v in family.variants if v.kind != LEARNABLE]
    index = {v.label: i for i, v in enumerate(order)}
    learnable = len(family.learnable)
    edges = [(i - 1, i) for i in range(1, learnable)]
    student = FamilyStudent(
        len(order), edges=edges, seed=seed,
        impossible_tasks=[index[v.label] for v in order if v.kind != LEARNABLE],
        noisy_tasks=tuple(index[v.label] for v in order if v.kind == NOISY),
        **simulator_kwargs,
    )
    variants = tuple(Variant(v.label, {"task_index": index[v.label]}, v.kind, v.difficulty) for v in family.variants)
    mirror = LearnerTaskFamily(f"{family.name}_simulated", family.make_env, variants)
    space = TaskSpace(student, mirror.generator, tuple(v.label for v in family.learnable),
                      tuple(v.label for v in family.variants if v.kind != LEARNABLE))
    return space, mirror


def simulate(family_name: str, curriculum: str, seed: int, simulator_kwargs: dict[str, Any]) -> dict[str, Any]:
    """One simulated run: episodes to master the chain and the unlearnable share until then.

    Runs stop at mastery (`MAX_EPISODES` at most). Families with the same numbers of learnable,
    impossible and noisy variants have the same mirror, so their runs are computed once."""
    family = TASK_FAMILIES[family_name]()
    shape = tuple(sum(v.kind == k for v in family.variants) for k in (LEARNABLE, IMPOSSIBLE, NOISY))
    key = (shape, curriculum, seed, tuple(sorted(simulator_kwargs.items())))
    if key not in _SIMULATED:
        _SIMULATED[key] = _simulate(family, curriculum, seed, simulator_kwargs)
    return _SIMULATED[key]


_SIMULATED: dict[Any, dict[str, Any]] = {}


class _Mastered(Exception):
    """Ends a simulated run at mastery."""


def _simulate(family: LearnerTaskFamily, curriculum: str, seed: int, simulator_kwargs: dict[str, Any]) -> dict[str, Any]:
    space, mirror = simulated_family(family, seed=seed, simulator_kwargs=simulator_kwargs)
    config = make_curriculum_config(mirror, curriculum, seed=seed, num_active_tasks=mirror.default_pool_size)
    learnable = range(len(family.learnable))
    unlearnable = set(space.impossible_labels)
    student = space.simulator
    state = {"mastered_at": None, "unlearnable": 0}

    def on_episode(episode: int, task: Any, reward: float) -> None:
        state["unlearnable"] += task.label in unlearnable
        if (episode + 1) % CHECK_EVERY == 0 and all(student.is_mastered(i) for i in learnable):
            state["mastered_at"] = episode + 1
            raise _Mastered

    with Curriculum(config) as built:
        try:
            run_direct(built, space, episodes=MAX_EPISODES, epoch_length=MAX_EPISODES, on_episode=on_episode)
        except _Mastered:
            pass
    episodes = state["mastered_at"] or MAX_EPISODES
    return {"episodes_to_master_all": episodes, "never_mastered": state["mastered_at"] is None,
            "unlearnable_share": state["unlearnable"] / episodes}


def _ppo_runs(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return json.loads(path.read_text())["runs"]


def compare(seeds: int, simulator_kwargs: dict[str, Any], ppo_json: Path) -> str:
    """The fidelity table (markdown): per family and curriculum, simulator vs PPO."""
    ppo = _ppo_runs(ppo_json)
    lines = ["| family | curriculum | simulator: episodes to master, ratio to uniform | simulator: impossible + "
             "noisy share | PPO: steps to master, ratio to uniform | PPO: impossible + noisy share |",
             "|---|---|---|---|---|---|"]
    rankings: list[str] = []
    for family in TASK_FAMILIES:
        sim = {c: [simulate(family, c, s, simulator_kwargs) for s in range(seeds)] for c in CURRICULA}
        real = {c: [r for r in ppo if r["family"] == family and r["curriculum"] == c] for c in CURRICULA}
        sim_ratio, sim_share, ppo_ratio, ppo_share = {}, {}, {}, {}
        for c in CURRICULA:
            base = sim["uniform"]
            sim_ratio[c] = float(np.mean([r["episodes_to_master_all"] / u["episodes_to_master_all"]
                                          for r, u in zip(sim[c], base)]))
            sim_share[c] = float(np.mean([r["unlearnable_share"] for r in sim[c]]))
            never = sum(r["never_mastered"] for r in sim[c])
            uniform_real = {r["seed"]: r for r in real["uniform"]}
            pairs = [(r, uniform_real[r["seed"]]) for r in real[c] if r["seed"] in uniform_real]
            if pairs:
                ppo_ratio[c] = float(np.mean([_steps(r) / _steps(u) for r, u in pairs]))
                ppo_share[c] = float(np.mean([r["unlearnable_share_until_mastery"] for r, _ in pairs]))
            lines.append(
                f"| {family} | {c} | {sim_ratio[c]:.2f}{f' ({never} never)' if never else ''} | {sim_share[c]:.1%} | "
                + (f"{ppo_ratio[c]:.2f} ({len(pairs)} seeds) | {ppo_share[c]:.1%} |" if pairs else "n/a | n/a |"))
        for what, simulated, real_values in (("cost to master", sim_ratio, ppo_ratio),
                                             ("impossible + noisy share", sim_share, ppo_share)):
            sim_order = sorted(simulated, key=simulated.get)
            real_order = sorted(real_values, key=real_values.get)
            verdict = "n/a" if not real_order else "agree" if sim_order == real_order else "DISAGREE"
            rankings.append(f"- {family}, {what}: simulator {' < '.join(sim_order)}; "
                            f"PPO {' < '.join(real_order) or 'n/a'}: {verdict}")
    return "\n".join(lines + [""] + rankings)


def _steps(run: dict[str, Any]) -> int:
    return run["all_mastered_step"] if run["all_mastered_step"] is not None else run["total_steps"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--ppo-json", type=Path, default=HERE / "learners.json")
    parser.add_argument("--simulator", nargs="*", default=[], metavar="NAME=VALUE",
                        help="TaskDependencySimulator keyword overrides, e.g. transfer=0")
    args = parser.parse_args(argv)
    kwargs = {}
    for item in args.simulator:
        name, _, value = item.partition("=")
        kwargs[name] = ast.literal_eval(value)
    print(f"simulator overrides: {kwargs or 'none (defaults)'}; {args.seeds} simulated seeds")
    print(compare(args.seeds, kwargs, args.ppo_json))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
