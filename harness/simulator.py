"""`TaskDependencySimulator`: a cheap simulated student for curriculum experiments.

The student has one performance value per task. Tasks have prerequisites (a chain by default,
any DAG on request), so the order in which a curriculum presents tasks matters: practising a
task whose prerequisites are not mastered is nearly wasted, and every task is forgotten when
it is not practised. That is the smallest model in which a good curriculum (one that tracks
the frontier of what the student can learn next) beats uniform sampling by a wide, measurable
margin, which is what the scenarios need.

Calibration of the defaults (10-task chain, 20 seeds; "mastered all" = the first sample
after which every task is at `mastery_threshold` or above at the same time, checked every
10 samples for the uniform student):

- uniform random practice:              median 19,086 samples (range 18,411-19,631)
- frontier practice (first unmastered): 3,741 samples for every seed (performance itself is
  noise-free; the seed only moves rewards and the uniform draw)
- speed-up of frontier over uniform:    median 5.1x (minimum 4.9x)

Other shapes with the defaults: 5-task chain uniform ~4.4k vs frontier 1.6k; 20-task chain
uniform ~93k vs frontier 11.7k. Throughput: ~0.86M `sample_task` calls/s on a 10-task chain
(one core of the dev container).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np

__all__ = [
    "DEFAULT_NUM_TASKS",
    "IMPOSSIBLE_MODES",
    "GATE_MODES",
    "TaskDependencySimulator",
]

DEFAULT_NUM_TASKS: Final = 10
IMPOSSIBLE_MODES: Final = ("zero", "noise")
GATE_MODES: Final = ("product", "min")

_NOISE_BLOCK = 4096  # standard normals drawn per refill; a refill is one vectorised numpy call


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_unit(name: str, value: Any, *, low_open: bool = False, high_open: bool = False) -> float:
    """`value` as a float inside [0, 1] (ends open on request), or a ValueError naming `name`."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = (value > 0.0 if low_open else value >= 0.0) and (value < 1.0 if high_open else value <= 1.0)
    if not ok:
        lo = "(0" if low_open else "[0"
        hi = "1)" if high_open else "1]"
        raise ValueError(f"Expected `{name}` to be a number in {lo}, {hi}, received {value!r}")
    return value


def _check_non_negative(name: str, value: Any, *, positive: bool = False) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = math.isfinite(value) and (value > 0.0 if positive else value >= 0.0)
    if not ok:
        kind = "a positive" if positive else "a non-negative"
        raise ValueError(f"Expected `{name}` to be {kind} finite number, received {value!r}")
    return value


def _find_cycle(num_tasks: int, dependants: Sequence[Sequence[int]]) -> list[int] | None:
    """One cycle of the prerequisite graph as a closed node list (`[a, b, a]`), or None."""
    state = [0] * num_tasks  # 0 = unvisited, 1 = on the current path, 2 = done
    for root in range(num_tasks):
        if state[root]:
            continue
        path = [root]
        iters = [iter(dependants[root])]
        state[root] = 1
        while iters:
            node = next(iters[-1], None)
            if node is None:
                state[path.pop()] = 2
                iters.pop()
            elif state[node] == 1:
                return path[path.index(node) :] + [node]
            elif state[node] == 0:
                state[node] = 1
                path.append(node)
                iters.append(iter(dependants[node]))
    return None


class TaskDependencySimulator:
    r"""A student whose per-task performance grows with gated practice and decays without it.

    State: performance `P[i]` in [0, 1], practice count `n[i]`, global step `t` (one
    `sample_task` call anywhere is one step). `sample_task(i)` is one practice episode on task
    `i` at step `t <- t + 1`:

        forget     P[j] <- P[j] * (1 - f) ** (t - tau[j]),  tau[j] <- t
                   for j in {i} + pre(i) + dep(i)   (lazy: exact, since decay composes)
        mastery    m(p) = sigmoid((p - theta) / w)
        gate       g[i] = prod_{j in pre(i)} m(P[j])      (`gate="min"`: min instead of prod;
                                                         g = 1 without prerequisites)
        reward     r = clip(P[i] + b[i] + eps, 0, 1),    eps ~ N(0, noise_std**2)
                   (the episode is played with the performance it started with)
        practice   P[i] <- P[i] + alpha * g[i] * (1 - P[i])        if n[i] >= L[i]
        transfer   P[d] <- P[d] + alpha * m(P[i]) * max(0, kappa - P[d])   for d in dep(i)
        count      n[i] <- n[i] + 1

    with alpha = `learning_rate`, f = `forgetting_rate`, theta = `mastery_threshold`,
    w = `mastery_width`, kappa = `transfer`, L = `reward_latency`, b[i] ~ U[-bias_scale,
    bias_scale] drawn once at construction. Transfer lets a mastered prerequisite lift its
    dependants to at most `kappa` without any direct practice (so a learning-progress
    curriculum sees a faint signal on the next task before it is ever sampled).

    Why a smooth gate and not a hard `P[pre] >= theta` switch: with a hard gate a dependant's
    learning turns on and off abruptly, and under forgetting it chatters every time the
    prerequisite drifts across the threshold; the sigmoid gives a graded onset (a nearly mastered
    prerequisite already allows slow learning, as real transfer does), keeps the dynamics
    continuous in every parameter (calibration sweeps are smooth), and still makes practice
    on a task with unlearned prerequisites nearly worthless (m(0) ~ 1e-7 with the defaults).

    Impossible tasks never learn (neither by practice nor by transfer); their reward is exactly
    0.0 (`impossible_mode="zero"`) or `clip(impossible_level + eps, 0, 1)` (`"noise"`). Their
    dependants stay gated (m(0) ~ 1e-7), so they are practically unlearnable too.

    Cost: `sample_task` is O(in-degree + out-degree) of the practised task (O(1) on a chain),
    never O(num_tasks): forgetting is applied lazily from each task's last-update step.
    Reading `performance` is a pure function of the state (it never changes the trajectory).
    """

    def __init__(
        self,
        num_tasks: int = DEFAULT_NUM_TASKS,
        *,
        edges: Iterable[tuple[int, int]] | None = None,
        learning_rate: float = 0.01,
        forgetting_rate: float = 5e-5,
        transfer: float = 0.1,
        mastery_threshold: float = 0.8,
        mastery_width: float = 0.05,
        gate: str = "product",
        noise_std: float = 0.1,
        bias_scale: float = 0.05,
        impossible_tasks: Iterable[int] = (),
        impossible_mode: str = "zero",
        impossible_level: float = 0.5,
        reward_latency: int | Sequence[int] = 0,
        seed: int | None = 0,
    ) -> None:
        if not _is_int(num_tasks) or num_tasks < 1:
            raise ValueError(f"Expected `num_tasks` to be a positive integer, received {num_tasks!r}")
        num_tasks = int(num_tasks)
        self._alpha = _check_unit("learning_rate", learning_rate, low_open=True)
        self._forget = _check_unit("forgetting_rate", forgetting_rate, high_open=True)
        self._kappa = _check_unit("transfer", transfer)
        self._theta = _check_unit("mastery_threshold", mastery_threshold, low_open=True, high_open=True)
        self._width = _check_non_negative("mastery_width", mastery_width, positive=True)
        if gate not in GATE_MODES:
            raise ValueError(f"Expected `gate` to be one of {GATE_MODES!r}, received {gate!r}")
        self._noise_std = _check_non_negative("noise_std", noise_std)
        bias_scale = _check_non_negative("bias_scale", bias_scale)
        if impossible_mode not in IMPOSSIBLE_MODES:
            raise ValueError(
                f"Expected `impossible_mode` to be one of {IMPOSSIBLE_MODES!r}, received {impossible_mode!r}"
            )
        self._impossible_level = _check_unit("impossible_level", impossible_level)
        if seed is not None and not _is_int(seed):
            raise ValueError(f"Expected `seed` to be an integer or None, received {seed!r}")

        prerequisites, dependants = self._build_graph(num_tasks, edges)
        impossible = self._check_impossible(num_tasks, impossible_tasks)
        latency = self._check_latency(num_tasks, reward_latency)

        self._num_tasks = num_tasks
        self._gate_mode = gate
        self._impossible_mode = impossible_mode
        self._edges = tuple((p, d) for d in range(num_tasks) for p in prerequisites[d])
        self._pre = prerequisites
        self._dep = dependants
        self._impossible = impossible
        self._impossible_zero = impossible_mode == "zero"
        self._latency = latency
        self._decay = 1.0 - self._forget
        self._seed = seed

        self._rng = np.random.default_rng(seed)
        self._bias = self._rng.uniform(-bias_scale, bias_scale, size=num_tasks).tolist()
        self._noise: list[float] = []
        self._noise_pos = 0
        self._P = [0.0] * num_tasks
        self._tau = [0] * num_tasks
        self._count = [0] * num_tasks
        self._t = 0

    # ---------------------------------------------------------------- construction checks
    @staticmethod
    def _build_graph(
        num_tasks: int, edges: Iterable[tuple[int, int]] | None
    ) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
        if edges is None:
            pairs = [(i - 1, i) for i in range(1, num_tasks)]
        else:
            pairs = []
            seen: set[tuple[int, int]] = set()
            for edge in edges:
                if (
                    not isinstance(edge, (tuple, list, np.ndarray))
                    or len(edge) != 2
                    or not all(_is_int(x) for x in edge)
                ):
                    raise ValueError(
                        f"Expected each edge to be a (prerequisite, dependant) pair of task indices, "
                        f"received {edge!r}"
                    )
                prereq, dependant = int(edge[0]), int(edge[1])
                if not (0 <= prereq < num_tasks and 0 <= dependant < num_tasks):
                    raise ValueError(
                        f"Expected edge task indices in [0, {num_tasks}), received edge {(prereq, dependant)!r}"
                    )
                if (prereq, dependant) in seen:
                    raise ValueError(f"Expected each edge once, received edge {(prereq, dependant)!r} twice")
                seen.add((prereq, dependant))
                pairs.append((prereq, dependant))
        pre: list[list[int]] = [[] for _ in range(num_tasks)]
        dep: list[list[int]] = [[] for _ in range(num_tasks)]
        for prereq, dependant in pairs:
            pre[dependant].append(prereq)
            dep[prereq].append(dependant)
        cycle = _find_cycle(num_tasks, dep)
        if cycle is not None:
            path = " -> ".join(str(node) for node in cycle)
            raise ValueError(f"Expected `edges` to form an acyclic graph, found the cycle {path}")
        return tuple(tuple(p) for p in pre), tuple(tuple(d) for d in dep)

    @staticmethod
    def _check_impossible(num_tasks: int, impossible_tasks: Iterable[int]) -> tuple[bool, ...]:
        flags = [False] * num_tasks
        for index in impossible_tasks:
            if not _is_int(index) or not 0 <= index < num_tasks:
                raise ValueError(
                    f"Expected `impossible_tasks` to hold task indices in [0, {num_tasks}), received {index!r}"
                )
            flags[int(index)] = True
        return tuple(flags)

    @staticmethod
    def _check_latency(num_tasks: int, reward_latency: int | Sequence[int]) -> tuple[int, ...]:
        if _is_int(reward_latency):
            values = [reward_latency] * num_tasks
        elif isinstance(reward_latency, (Sequence, np.ndarray)) and not isinstance(reward_latency, (str, bytes)):
            values = list(reward_latency)
            if len(values) != num_tasks:
                raise ValueError(
                    f"Expected `reward_latency` to be an integer or one integer per task ({num_tasks}), "
                    f"received {len(values)} values"
                )
        else:
            raise ValueError(
                f"Expected `reward_latency` to be an integer or one integer per task, received {reward_latency!r}"
            )
        for value in values:
            if not _is_int(value) or value < 0:
                raise ValueError(f"Expected `reward_latency` values to be non-negative integers, received {value!r}")
        return tuple(int(v) for v in values)

    # ---------------------------------------------------------------- properties
    @property
    def num_tasks(self) -> int:
        """Number of tasks."""
        return self._num_tasks

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        """The prerequisite graph as `(prerequisite, dependant)` pairs."""
        return self._edges

    @property
    def mastery_threshold(self) -> float:
        """Performance at which a task counts as mastered (and its gate is at 0.5)."""
        return self._theta

    @property
    def global_step(self) -> int:
        """Number of practice episodes so far, over all tasks."""
        return self._t

    @property
    def bias(self) -> np.ndarray:
        """The fixed per-task reward offsets."""
        return np.array(self._bias, dtype=np.float64)

    @property
    def practice_counts(self) -> np.ndarray:
        """Practice episodes per task."""
        return np.array(self._count, dtype=np.int64)

    @property
    def impossible_tasks(self) -> tuple[int, ...]:
        """Indices of the tasks that can never be learned."""
        return tuple(i for i, flag in enumerate(self._impossible) if flag)

    def prerequisites(self, task_index: int) -> tuple[int, ...]:
        """The direct prerequisites of a task."""
        return self._pre[self._check_index(task_index)]

    @property
    def performance(self) -> np.ndarray:
        """Current performance of every task (a copy; forgetting applied up to now)."""
        P = np.array(self._P, dtype=np.float64)
        elapsed = self._t - np.array(self._tau, dtype=np.int64)
        return P * np.power(self._decay, elapsed)

    def performance_list(self) -> list[float]:
        """`performance` as plain floats, computed without numpy (cheaper for a few tasks)."""
        t, decay = self._t, self._decay
        return [p * decay ** (t - tau) for p, tau in zip(self._P, self._tau)]

    def task_performance(self, task_index: int) -> float:
        """Current performance of one task (forgetting applied up to now)."""
        i = self._check_index(task_index)
        return self._P[i] * self._decay ** (self._t - self._tau[i])

    def is_mastered(self, task_index: int, *, threshold: float | None = None) -> bool:
        """Whether a task's current performance is at least `threshold` (default: mastery)."""
        return self.task_performance(task_index) >= (self._theta if threshold is None else threshold)

    def num_mastered(self, *, threshold: float | None = None) -> int:
        """How many tasks are currently at or above `threshold` (default: mastery)."""
        limit = self._theta if threshold is None else threshold
        return int(np.count_nonzero(self.performance >= limit))

    def _check_index(self, task_index: int) -> int:
        if not _is_int(task_index) or not 0 <= task_index < self._num_tasks:
            raise ValueError(
                f"Expected `task_index` to be an integer in [0, {self._num_tasks}), received {task_index!r}"
            )
        return int(task_index)

    # ---------------------------------------------------------------- dynamics
    def _mastery(self, p: float) -> float:
        z = (p - self._theta) / self._width
        if z >= 0.0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)

    def sample_task(self, task_index: int) -> float:
        """Play one practice episode of a task: returns its reward and updates the student."""
        if task_index.__class__ is not int and not _is_int(task_index):
            raise ValueError(
                f"Expected `task_index` to be an integer in [0, {self._num_tasks}), received {task_index!r}"
            )
        if not 0 <= task_index < self._num_tasks:
            raise ValueError(
                f"Expected `task_index` to be an integer in [0, {self._num_tasks}), received {task_index!r}"
            )
        P = self._P
        tau = self._tau
        decay = self._decay
        t = self._t + 1
        self._t = t

        pos = self._noise_pos
        if pos >= len(self._noise):
            self._noise = self._rng.standard_normal(_NOISE_BLOCK).tolist()
            pos = 0
        eps = self._noise[pos] * self._noise_std
        self._noise_pos = pos + 1

        count = self._count[task_index]
        self._count[task_index] = count + 1
        if self._impossible[task_index]:
            if self._impossible_zero:
                return 0.0
            reward = self._impossible_level + eps
            return 0.0 if reward < 0.0 else 1.0 if reward > 1.0 else reward

        dt = t - tau[task_index]
        p = P[task_index] * decay**dt if dt else P[task_index]
        reward = p + self._bias[task_index] + eps
        reward = 0.0 if reward < 0.0 else 1.0 if reward > 1.0 else reward

        if count >= self._latency[task_index]:
            gate = 1.0
            prereqs = self._pre[task_index]
            if prereqs:
                mastery = self._mastery
                if self._gate_mode == "product":
                    for j in prereqs:
                        dt_j = t - tau[j]
                        p_j = P[j] * decay**dt_j if dt_j else P[j]
                        P[j] = p_j
                        tau[j] = t
                        gate *= mastery(p_j)
                else:
                    for j in prereqs:
                        dt_j = t - tau[j]
                        p_j = P[j] * decay**dt_j if dt_j else P[j]
                        P[j] = p_j
                        tau[j] = t
                        m = mastery(p_j)
                        if m < gate:
                            gate = m
            p += self._alpha * gate * (1.0 - p)
        P[task_index] = p
        tau[task_index] = t

        dependants = self._dep[task_index]
        if dependants and self._kappa > 0.0:
            push = self._alpha * self._mastery(p)
            kappa = self._kappa
            impossible = self._impossible
            for d in dependants:
                if impossible[d]:
                    continue
                dt_d = t - tau[d]
                p_d = P[d] * decay**dt_d if dt_d else P[d]
                if p_d < kappa:
                    p_d += push * (kappa - p_d)
                P[d] = p_d
                tau[d] = t
        return reward

    # ---------------------------------------------------------------- checkpointing
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs (bias, performance, clocks, counts, RNG), as plain values."""
        return {
            "num_tasks": self._num_tasks,
            "edges": [list(e) for e in self._edges],
            "bias": list(self._bias),
            "performance": list(self._P),
            "last_update_step": list(self._tau),
            "practice_counts": list(self._count),
            "global_step": self._t,
            "noise": list(self._noise),
            "noise_pos": self._noise_pos,
            "rng_state": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict()` taken from a simulator built with the same structure."""
        if state.get("num_tasks") != self._num_tasks:
            raise ValueError(
                f"Expected a state for {self._num_tasks} tasks, received one for {state.get('num_tasks')!r}"
            )
        if [tuple(e) for e in state.get("edges", ())] != list(self._edges):
            raise ValueError("Expected a state with the same prerequisite edges as this simulator")
        self._bias = [float(x) for x in state["bias"]]
        self._P = [float(x) for x in state["performance"]]
        self._tau = [int(x) for x in state["last_update_step"]]
        self._count = [int(x) for x in state["practice_counts"]]
        self._t = int(state["global_step"])
        self._noise = [float(x) for x in state["noise"]]
        self._noise_pos = int(state["noise_pos"])
        self._rng.bit_generator.state = state["rng_state"]

    def __repr__(self) -> str:
        return (
            f"TaskDependencySimulator(num_tasks={self._num_tasks}, edges={len(self._edges)}, "
            f"global_step={self._t}, seed={self._seed!r})"
        )
