"""Multi-agent episodes: every agent's return counts, however and whenever each agent ends.

Bug class: a wrapper that scores one agent for all, sums where it should average, ends the
episode when the first agent is done, or never sees the end when agents finish at different
steps and report it once (a done flag set for that one step only). Three agents earn known,
different rewards and end at different steps (`ExactAccountingEnv`), holding their done flag
or pulsing it once, through one env, pufferlib Serial and Multiprocessing with shared and
centralized tracking (and in asynchronous batches of half the workers). The env
keeps writing a reward for agents already done, which no return holds; with held flags it also
reports returns itself (`get_episode_rewards`, running totals that go on growing after an
agent's done step), with pulsed ones the wrapper sums the rewards and the env returns its
infos as one dict whose reset info shares its keys with the episode-end info (an auto-reset
must not overwrite the ended episode's numbers). Every episode must be recorded exactly once
with the mean of the three returns; the accounting oracle checks each one, every reported
number, and that the env's own info numbers reach the user unchanged; each recorder (each
env's, or the main process's under centralized tracking) reports pool-wide numbers every
`stats_interval` completions.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import multiprocessing
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator, Mapping

from typing import Any

import numpy as np
import pytest

from curriculum import BucketedTaskGenerator, CurriculumConfig, SingleTaskGenerator, UniformConfig
from curriculum.vector import make_curriculum_vecenv
from harness.envs import PUFFER_BUFFERS, REWARD_WRITES, ExactAccountingEnv
from harness.episodes import EPISODE_RECORD_KEY, LabelledTaskGenerator
from harness.thresholds import MULTI_AGENT as LIMITS

DESIGNS = [("single", None), ("Serial", "shared"), ("Serial", "centralized"), ("Multiprocessing", "shared"),
           ("Multiprocessing", "centralized"), ("Multiprocessing-async", "shared"),
           ("Multiprocessing-async", "centralized")]
"""(backend, tracking); `-async`: four worker processes stepped two at a time (pufferlib's
asynchronous batches: each step returns whichever two workers finished first). A vector run is
reset once midway, after a step whose workers sent infos, then while a step it sent is in
flight (right after `send()`, and after pauses in which the workers answered), and once at its
end: a reset must not wait on workers that answered, and must return the episodes of batches
still in flight (a worker under shared tracking has recorded them already)."""


#: Per-step rewards, each exact in the float32 reward buffer; 0.1 rounded to float32 is not a short
#: binary fraction, so a few steps of it summed in float32 lose bits a float64 sum keeps.
_REWARDS = (1.0, 0.5, 0.25, 0.0, 0.75, float(np.float32(0.1)))
_LENGTHS = (2, 5, 3, 1, 4)


def agent_config(seed: int, num_agents: int = LIMITS.num_agents) -> CurriculumConfig:
    """Tasks whose agents earn different rewards and end at different steps (three options
    per agent, each a different rotation of the same values)."""
    if num_agents == 3:  # the values the golden metrics were recorded with
        rewards = [[1.0, 0.5, 0.25], [0.25, 0.25, 1.0], [0.5, 0.0, 0.75]]
        lengths = [[2, 5, 3], [4, 1, 4], [3, 3, 3]]
    else:
        rewards = [[_REWARDS[(2 * option + agent) % len(_REWARDS)] for agent in range(num_agents)]
                   for option in range(3)]
        lengths = [[_LENGTHS[(option + 2 * agent) % len(_LENGTHS)] for agent in range(num_agents)]
                   for option in range(3)]
    generator = LabelledTaskGenerator(BucketedTaskGenerator({}, {
        "reward_per_step": rewards,
        "episode_length": lengths,
        "end": ["terminal", "truncated"],
    }, label="team", seed=seed))
    return CurriculumConfig(task_generator=generator, algorithm=UniformConfig(), num_active_tasks=LIMITS.pool,
                            seed=seed, score_range=(0.0, 5.0))


@contextlib.contextmanager
def _returns_within(seconds: float, what: str) -> Iterator[None]:
    """Fail by name if the block has not returned after `seconds` (SIGALRM: the test runs in
    its process's main thread), instead of hanging the gate."""
    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"{what} had not returned after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

def _reset_infos(infos: Any, envs: int, what: str) -> Any:
    """A vector reset's `infos`, once the infos of steps still in flight (an env's step info, or
    its episode end and the autoreset's info) are found ahead of the reset's own (one per env:
    of the `envs` its batch returns: its reset info, or an episode end the env's wrapper hands on
    with it), as the vector
    documents: a trainer that takes the infos after the in-flight steps' as the new episodes'
    would credit old episodes to them. Only with dict infos, where every reset has an info."""
    def kind(info: Any) -> str:
        if not isinstance(info, Mapping):
            return ""
        if EPISODE_RECORD_KEY in info:
            return "E"
        numbers = info.get("exact_accounting")
        if not isinstance(numbers, dict):
            return ""
        return "S" if "step" in numbers else "R" if numbers.get("episode_length") == 0 else ""

    kinds = "".join(kind(info) for info in (infos if isinstance(infos, list) else [infos]))
    assert "R" not in kinds or re.fullmatch(f"(S|ER?)*[RE]{{{envs}}}", kinds), (
        f"{what}: the reset returned infos of steps in flight after its own (in order, S a step's info, E an episode "
        f"end, R a reset info; the last {envs} are the reset's own): {kinds}")
    return infos


def _laid_out(layout: str, num_agents: int) -> dict[str, np.ndarray]:
    """An env's buffers (`buf`) as `layout` lays them out, each a numeric array of one number per
    agent, all the env contract asks: "columns", the reward and the two done flags as columns of
    one array each (strided views, as an env that keeps an agent's numbers in one row has);
    "reversed", every per-agent buffer a view with a negative stride; else the done flags of that
    numpy dtype ("uint8", "int32", "float32")."""
    donor = ExactAccountingEnv(num_agents=num_agents)
    buf = {name: np.zeros_like(getattr(donor, name)) for name in PUFFER_BUFFERS}
    if layout == "columns":
        flags = np.zeros((num_agents, 2), dtype=bool)
        buf["terminals"], buf["truncations"] = flags[:, 0], flags[:, 1]
        buf["rewards"] = np.zeros((num_agents, 3), dtype=np.float32)[:, 1]
    elif layout == "reversed":
        for name in ("rewards", "terminals", "truncations", "masks"):
            buf[name] = np.zeros_like(buf[name])[::-1]
    else:
        buf["terminals"], buf["truncations"] = (np.zeros(num_agents, dtype=layout) for _ in range(2))
    return buf


@pytest.mark.parametrize("layout", ["columns", "reversed", "uint8", "int32", "float32"])
def test_every_buffer_layout_the_env_contract_takes_records_every_episode_once(
        curriculum_factory, curriculum_env_class, scenario_seed, layout, oracle) -> None:
    """The env contract asks for numeric arrays of one number per agent, not for contiguous
    bool ones: an env whose done flags and rewards are strided or reversed views, or flags of
    another integer or float dtype, must have every episode's end seen, scored and recorded
    exactly once, as with pufferlib's own buffers."""
    curriculum = curriculum_factory(agent_config(scenario_seed))
    context = f"buffers laid out as {layout}"
    watcher = oracle(context=context)
    env = ExactAccountingEnv(num_agents=LIMITS.num_agents, buf=_laid_out(layout, LIMITS.num_agents),
                             seed=1000 * scenario_seed)
    wrapped = curriculum_env_class(env, watcher.watch(curriculum), seed=scenario_seed,
                                   stats_interval=LIMITS.stats_interval)
    try:
        wrapped.reset()
        actions = np.zeros(LIMITS.num_agents, dtype=np.int32)
        for _ in range(LIMITS.steps):
            watcher.observe(wrapped.step(actions)[4])
        assert env.episodes_completed >= LIMITS.min_episodes and len(watcher.episodes) == env.episodes_completed, (
            f"{context}: the env ended {env.episodes_completed} episodes in {LIMITS.steps} steps, the wrapper "
            f"reported {len(watcher.episodes)}, seed {scenario_seed}")
        wrapped.close()
        watcher.verify(curriculum)
    finally:
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


@pytest.mark.parametrize("done_flags", ["hold", "pulse"])
@pytest.mark.parametrize(("backend", "tracking"), DESIGNS, ids=[f"{b}-{t}" if t else b for b, t in DESIGNS])
def test_every_agent_counts_and_every_episode_is_recorded_once(curriculum_factory, curriculum_env_class,
                                                               require_capability, scenario_seed, backend, tracking,
                                                               done_flags, oracle, golden) -> None:
    asynchronous = backend.endswith("-async")
    backend = backend.removesuffix("-async")
    shared = tracking == "shared" and backend == "Multiprocessing"
    options = {}
    if shared:
        require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                           "this curriculum factory takes no `shared_memory` option: shared tracking cannot be tested")
        options["shared_memory"] = True
    curriculum = curriculum_factory(agent_config(scenario_seed), **options)
    context = f"{backend}{' (async batches)' if asynchronous else ''}/{tracking or 'local'}, {done_flags} flags" \
              f"{', env-reported returns' if done_flags == 'hold' else ', dict infos'}"
    watcher = oracle(context=context)
    in_process = backend != "Multiprocessing"
    target = watcher.watch(curriculum) if in_process else curriculum
    if tracking == "centralized":
        require_capability(callable(getattr(curriculum, "sync_state", None)),
                           "centralized tracking needs sync_state()/apply_sync_state()")

    ran = multiprocessing.Value("q", 0)  # episodes the envs ended, counted across worker processes

    def make_env(buf=None, seed=0):
        return ExactAccountingEnv(num_agents=LIMITS.num_agents, done_flags=done_flags, buf=buf,
                                  after_done_reward=LIMITS.after_done_reward, reports_returns=done_flags == "hold",
                                  infos="list" if done_flags == "hold" else "dict", episode_counter=ran,
                                  seed=seed + 1000 * scenario_seed)

    try:
        if backend == "single":
            env = curriculum_env_class(make_env(), target, seed=scenario_seed, stats_interval=LIMITS.stats_interval)
            env.reset()
            actions = np.zeros(LIMITS.num_agents, dtype=np.int32)
            for _ in range(LIMITS.steps):
                infos = env.step(actions)[4]
                watcher.observe(infos)
            env.close()
        else:
            vec_options = {"num_workers": 2, "overwork": True} if backend == "Multiprocessing" else {}
            if asynchronous:
                vec_options = {"num_workers": LIMITS.num_envs, "batch_size": LIMITS.num_envs // 2, "overwork": True}
            if backend == "Multiprocessing":
                vec_options["worker_timeout"] = LIMITS.worker_timeout
            vecenv = make_curriculum_vecenv(make_env, target, backend=backend, tracking=tracking,
                                            num_envs=LIMITS.num_envs, seed=scenario_seed,
                                            stats_interval=LIMITS.stats_interval, **vec_options)
            try:
                batch = LIMITS.num_envs // 2 if asynchronous else LIMITS.num_envs
                counts = {name: getattr(vecenv, name, None) for name in ("num_agents", "agents_per_batch")}
                expected = {"num_agents": LIMITS.num_envs * LIMITS.num_agents,
                            "agents_per_batch": batch * LIMITS.num_agents}  # what a trainer sizes its state by
                assert counts == expected, (
                    f"{context}: the vector reports {counts}, expected {expected} ({LIMITS.num_envs} envs of "
                    f"{LIMITS.num_agents} agents, batches of {batch} envs), seed {scenario_seed}")
                vecenv.reset(seed=scenario_seed)
                actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
                reset_midway = False
                in_flight = {LIMITS.steps // 2 + LIMITS.in_flight_reset_every * (i + 1): pause
                             for i, pause in enumerate(LIMITS.in_flight_reset_pauses)}
                for step in range(LIMITS.steps):
                    if step in in_flight:  # a reset while a step is sent, not received (answered, after a pause)
                        vecenv.send(actions)
                        time.sleep(in_flight[step])
                        what = f"{context}: a reset with the step sent at step {step} in flight"
                        with _returns_within(LIMITS.reset_deadline, what):
                            watcher.observe(_reset_infos(vecenv.reset(seed=scenario_seed)[1], batch, what))
                        continue
                    infos = vecenv.step(actions)[4]
                    watcher.observe(infos)
                    if not reset_midway and step >= LIMITS.steps // 2 and infos:  # after workers sent infos
                        reset_midway = True
                        what = f"{context}: a reset at step {step}"
                        with _returns_within(LIMITS.reset_deadline, what):
                            watcher.observe(_reset_infos(vecenv.reset(seed=scenario_seed)[1], batch, what))
                # a reset returns the episodes of batches still in flight
                what = f"{context}: the reset after the run"
                with _returns_within(LIMITS.reset_deadline, what):
                    watcher.observe(_reset_infos(vecenv.reset(seed=scenario_seed)[1], batch, what))
            finally:
                vecenv.close()
        ended = len(watcher.episodes)
        assert ended == ran.value, (
            f"{context}: the envs ended {ran.value} episodes, the trainer received the infos of {ended}, "
            f"seed {scenario_seed}"
        )
        assert ended >= LIMITS.min_episodes, (
            f"{context}: the envs reported {ended} episodes in {LIMITS.steps} steps, expected at least "
            f"{LIMITS.min_episodes}, seed {scenario_seed}"
        )
        stats = curriculum.stats()
        recorded = stats["total_completions"] + stats["late_completions"]
        assert recorded == ended, (
            f"{context}: {ended} multi-agent episodes ended but the curriculum recorded {recorded}, seed {scenario_seed}"
        )
        if tracking == "centralized":  # the main process's own counts of what it recorded
            counted = (vecenv.completions, vecenv.late_completions)
            assert counted == (recorded, stats["late_completions"]), (
                f"{context}: the vector reports (completions, late_completions) {counted}; the curriculum recorded "
                f"{recorded}, {stats['late_completions']} of them late, seed {scenario_seed}")
        recorders: dict[str, list[bool]] = {}  # one per env, or the main process's under centralized tracking
        for episode in watcher.episodes:
            recorders.setdefault("main" if tracking == "centralized" else episode.record.env, []).append(
                episode.pool_report)
        interval = LIMITS.stats_interval
        off = {name: ([i + 1 for i, r in enumerate(reports) if r][:8], len(reports)) for name, reports in
               recorders.items() if reports != [i % interval == 0 for i in range(len(reports))]}
        assert not off, (
            f"{context}: pool-wide reports every {interval} completions from the first, late ones counted: (first "
            f"reports at, completions) per recorder {off}, seed {scenario_seed}")
        watcher.verify(curriculum)
        if not asynchronous:  # which workers an asynchronous batch holds depends on timing
            golden({"episodes": ended, "mean_score": sum(e.score for e in watcher.episodes) / ended})
    finally:
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


def _weighted_score(returns: np.ndarray) -> float:
    """A score that tells the agents apart: agent i's return weighs i + 1 (normalised)."""
    weights = np.arange(1, len(returns) + 1, dtype=np.float64)
    return float(np.dot(returns, weights) / weights.sum())


def _buffers(num_agents: int, terminals: Any, truncations: Any) -> dict[str, np.ndarray]:
    """An env's own buffers (as pufferlib makes them) with flag buffers of the given dtypes."""
    made = ExactAccountingEnv(num_agents=num_agents)
    buf = {name: np.zeros_like(getattr(made, name)) for name in ("observations", "rewards", "masks", "actions")}
    return {**buf, "terminals": np.zeros(num_agents, dtype=terminals),
            "truncations": np.zeros(num_agents, dtype=truncations)}


@pytest.mark.parametrize("rewards", REWARD_WRITES)
@pytest.mark.parametrize("score", ["mean", "score_fn"])
@pytest.mark.parametrize("done_flags", ["hold", "pulse"])
@pytest.mark.parametrize("num_agents", [1, 2, 4, 8])
def test_every_agent_count_scores_each_episode_once(curriculum_factory, curriculum_env_class, scenario_seed,
                                                    num_agents, done_flags, score, rewards, oracle) -> None:
    """Other agent counts, and a `score_fn` that weighs the agents differently: a wrapper
    picks its step path by how many agents there are, whether the env reports returns and
    whether the score needs each agent's return, so every combination must score the same.
    `at_end`: a sparse env that writes each return at its agent's done step and nothing in
    between, relying on its `reset()` having zeroed the reward buffer (a wrapper that shows the
    trainer the ended step's rewards across an auto-reset must put the env's back). With held
    flags the env returns its one log dict at every step, as envs that keep a running log do,
    in a list, and with pulsed flags and sparse rewards the dict itself: a wrapper that writes
    its episode entries into it reports the episode again at every later step. The env's flag buffers are any numeric arrays, as documented: with a `score_fn` its
    terminals are int64, with sparse rewards its truncations float32, so two of every four
    combinations have flag buffers of different widths."""
    score_fn = _weighted_score if score == "score_fn" else None
    flags = (np.int64 if score == "score_fn" else np.bool_, np.float32 if rewards == "at_end" else np.bool_)
    context = (f"{num_agents} agent(s), {done_flags} flags, {score}, rewards {rewards}, "
               f"terminals {np.dtype(flags[0])} and truncations {np.dtype(flags[1])}")
    watcher = oracle(context=context, score_fn=score_fn)
    curriculum = curriculum_factory(agent_config(scenario_seed, num_agents))
    inner = ExactAccountingEnv(num_agents=num_agents, done_flags=done_flags, after_done_reward=LIMITS.after_done_reward,
                               reports_returns=done_flags == "hold",
                               infos="log" if done_flags == "hold" else "dict-log" if rewards == "at_end" else "dict",
                               rewards=rewards, seed=scenario_seed, buf=_buffers(num_agents, *flags))
    env = curriculum_env_class(
        inner, watcher.watch(curriculum), seed=scenario_seed, score_fn=score_fn, stats_interval=LIMITS.stats_interval)
    try:
        env.reset()
        actions = np.zeros(num_agents, dtype=np.int32)
        for _ in range(LIMITS.steps):
            watcher.observe(env.step(actions)[4])
        env.close()
        ended = len(watcher.episodes)
        assert ended == inner.episodes_completed, (
            f"{context}: the env ended {inner.episodes_completed} episodes, the trainer received the infos of "
            f"{ended}, seed {scenario_seed}"
        )
        assert ended >= LIMITS.min_episodes, (
            f"{context}: the env reported {ended} episodes in {LIMITS.steps} steps, expected at least "
            f"{LIMITS.min_episodes}, seed {scenario_seed}")
        counters = {"episodes": ended, "desync_truncations": 0, "completions": ended, "late_completions": 0}
        # `episodes` and `desync_truncations` are the wrapper protocol's; the others the built-in's
        shown = {name: getattr(env, name, None) for name in counters}
        wrong = {name: (shown[name], expected) for name, expected in counters.items()
                 if shown[name] is not None and shown[name] != expected}
        assert not wrong, f"{context}: the wrapper's counters (shown, expected): {wrong}, seed {scenario_seed}"
        watcher.verify(curriculum)
    finally:
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


#: calls in a row ("R" a reset, "S" a step), each run followed by steps: resets after a batch of
#: one worker's step and after another reset, in every order up to four calls
_CALL_RUNS = tuple("".join(calls) for length in (2, 3, 4) for calls in itertools.product("RS", repeat=length)
                   if calls[0] == "R" and calls.count("R") >= 2)


@pytest.mark.parametrize("tracking", ["shared", "centralized"])
def test_resets_in_a_row_in_batches_of_one_lose_no_answer(curriculum_factory, require_capability, scenario_seed,
                                                          tracking, oracle) -> None:
    """Batches of one worker (each `recv()` returns whichever worker answered): a `reset()`
    returns one worker's answer and leaves the other's for later, so resets in a row, and
    resets between single steps (`_CALL_RUNS`), must still hand every episode the envs ended to
    the trainer once and record it once; the envs answer every reset with an info, so an answer
    taken for one already returned leaves that worker's pipe a message behind."""
    options = {}
    if tracking == "shared":
        require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                           "this curriculum factory takes no `shared_memory` option: shared tracking cannot be tested")
        options["shared_memory"] = True
    # one-step episodes: every step's answer holds an episode end, so an answer read late shows
    curriculum = curriculum_factory(CurriculumConfig(
        task_generator=LabelledTaskGenerator(SingleTaskGenerator({"episode_length": 1, "reward_per_step": 0.5},
                                                                 label="one step")),
        algorithm=UniformConfig(), num_active_tasks=4, seed=scenario_seed), **options)
    if tracking == "centralized":
        require_capability(callable(getattr(curriculum, "sync_state", None)),
                           "centralized tracking needs sync_state()/apply_sync_state()")
    watcher = oracle(context=f"Multiprocessing, batches of one, {tracking}")
    ran = multiprocessing.Value("q", 0)

    def make_env(buf=None, seed=0):
        return ExactAccountingEnv(num_agents=1, buf=buf, episode_counter=ran, infos="dict",  # infos at every reset
                                  seed=seed + 1000 * scenario_seed)

    vecenv = make_curriculum_vecenv(make_env, curriculum, backend="Multiprocessing", tracking=tracking, num_envs=2,
                                    num_workers=2, batch_size=1, seed=scenario_seed,
                                    worker_timeout=LIMITS.worker_timeout)
    try:
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        for calls in _CALL_RUNS:
            for call in calls:
                if call == "S":
                    watcher.observe(vecenv.step(actions)[4])
                    continue
                with _returns_within(LIMITS.reset_deadline, f"{tracking}: a reset in the calls {calls}"):
                    watcher.observe(vecenv.reset(seed=scenario_seed)[1])
            for _ in range(LIMITS.batch_of_one_steps):
                watcher.observe(vecenv.step(actions)[4])
        with _returns_within(LIMITS.reset_deadline, f"{tracking}: the reset after the run"):
            watcher.observe(vecenv.reset(seed=scenario_seed)[1])
        ended = len(watcher.episodes)
        stats = curriculum.stats()
        recorded = stats["total_completions"] + stats["late_completions"]
        assert ended == ran.value == recorded and ended > 0, (
            f"{tracking}: the envs ended {ran.value} episodes, the trainer received the infos of {ended}, the "
            f"curriculum recorded {recorded}, seed {scenario_seed}")
        if tracking == "centralized":
            assert vecenv.completions == recorded, (
                f"{tracking}: the vector counts {vecenv.completions} completions, the curriculum recorded {recorded}, "
                f"seed {scenario_seed}")
        watcher.verify(curriculum)
    finally:
        vecenv.close()
        if callable(getattr(curriculum, "close", None)):
            curriculum.close()


#: What a trainer's loop may do next, each a legal order of the vector's calls: a step, a step
#: sent then a reset (an epoch ended), a reset started once or twice (an evaluation aborted and
#: restarted) after a step sent or on its own, then received.
_CALL_ORDERS = {"step": 12, "send, reset": 1, "send, async_reset, recv": 1, "async_reset, async_reset, recv": 1,
                "send, async_reset, async_reset, recv": 1}
"""Each order of calls, and its relative weight in the random sequence."""


@pytest.mark.parametrize(("backend", "tracking"), [("Serial", "shared"), ("Serial", "centralized"),
                                                   ("Multiprocessing", "shared"), ("Multiprocessing", "centralized")])
def test_any_legal_order_of_vector_calls_hands_every_episode_over_once(curriculum_factory, require_capability,
                                                                       scenario_seed, backend, tracking,
                                                                       oracle) -> None:
    """A seeded random sequence of `_CALL_ORDERS`: whatever the order, every episode the envs
    ended reaches the trainer's infos exactly once (from the step, reset or `recv()` that
    follows it) and is recorded exactly once; the accounting oracle checks each one."""
    options = {}
    if tracking == "shared" and backend == "Multiprocessing":
        require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                           "this curriculum factory takes no `shared_memory` option: shared tracking cannot be tested")
        options["shared_memory"] = True
    curriculum = curriculum_factory(agent_config(scenario_seed), **options)
    if tracking == "centralized":
        require_capability(callable(getattr(curriculum, "sync_state", None)),
                           "centralized tracking needs sync_state()/apply_sync_state()")
    context = f"{backend}/{tracking}, calls in random orders"
    watcher = oracle(context=context)
    target = watcher.watch(curriculum) if backend == "Serial" else curriculum
    ran = multiprocessing.Value("q", 0)

    def make_env(buf=None, seed=0):
        return ExactAccountingEnv(num_agents=LIMITS.num_agents, buf=buf, infos="dict", episode_counter=ran,
                                  seed=seed + 1000 * scenario_seed)

    rng = np.random.default_rng(scenario_seed)
    weights = np.array(list(_CALL_ORDERS.values()), dtype=float)
    orders = [str(order) for order in rng.choice(list(_CALL_ORDERS), size=LIMITS.call_orders, p=weights / weights.sum())]
    vec_options = {"num_workers": 2, "overwork": True, "worker_timeout": LIMITS.worker_timeout} \
        if backend == "Multiprocessing" else {}
    vecenv = make_curriculum_vecenv(make_env, target, backend=backend, tracking=tracking, num_envs=LIMITS.num_envs,
                                    seed=scenario_seed, **vec_options)
    try:
        watcher.observe(vecenv.reset(seed=scenario_seed)[1])
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        for order in orders:
            for call in order.split(", "):
                if call == "step":
                    watcher.observe(vecenv.step(actions)[4])
                elif call == "send":
                    vecenv.send(actions)
                elif call == "reset":
                    watcher.observe(vecenv.reset(seed=scenario_seed)[1])
                elif call == "async_reset":
                    vecenv.async_reset(seed=scenario_seed)
                else:
                    watcher.observe(vecenv.recv()[4])
        watcher.observe(vecenv.reset(seed=scenario_seed)[1])
    finally:
        vecenv.close()
    stats = curriculum.stats()
    handed, recorded = len(watcher.episodes), stats["total_completions"] + stats["late_completions"]
    assert handed == ran.value == recorded and handed > 0, (
        f"{context}: the envs ended {ran.value} episodes; the trainer's infos held {handed}, the curriculum recorded "
        f"{recorded} (orders of calls: {dict(Counter(orders))}), seed {scenario_seed}")
    watcher.verify(curriculum)
