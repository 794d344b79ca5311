"""Worker streams: many workers draw different task sequences, and a run reproduces from its seed.

Bug class (seeds/003 and kin): every worker process drawing the same sequence (a sampling
stream shared through fork, a per-worker reseed that never happens or ignores its seed),
or task ids derived from the wrong counter, so distinct tasks collide. A pool of distinct
tasks (each episode's record names the task it ran); four envs on two worker processes
(pufferlib Multiprocessing, shared tracking) and on Serial. Checked: no two worker
processes draw the same sequence, also when the parent ran a vector over the curriculum first
(its handle was reseeded in the parent before the workers were forked); the same seed gives the same per-env sequences again and
another seed different ones; every number is checked by the accounting oracle (one task id
per task config and back).

And a seed means one stream however it is set (seed 0 included, the value a truthiness test
takes for "no seed"): `reseed(s)` on a curriculum that has already run, the gymnasium
wrapper's `reset(seed=s)` after episodes have ended, and a process attaching to a shared
curriculum with `seed=s` all draw what a fresh curriculum reseeded with s draws, and a wrapper
built without a seed leaves the stream alone. And both
seeds count: no two (config seed, worker seed) pairs draw the same stream (a stream seeded
with their sum makes config seed 1 on worker 0 a copy of config seed 0 on worker 1, so the
"independent" seeds of a sweep rerun each other's workers).
"""

from __future__ import annotations

import gc
import inspect
import multiprocessing as mp
from typing import Any

import numpy as np
import pytest

from curriculum import (BucketedTaskGenerator, Curriculum, CurriculumConfig, CurriculumEnv, GymCurriculumEnv,
                        LearningProgressConfig, SingleTaskGenerator, Stage, StagedProgressionConfig, UniformConfig)
from curriculum.vector import make_curriculum_vecenv
from harness.envs import ExactAccountingEnv, GymExactAccountingEnv
from harness.episodes import LabelledTaskGenerator
from harness.thresholds import WORKER_STREAMS as LIMITS


def stream_config(seed: int, algorithm) -> CurriculumConfig:
    generator = LabelledTaskGenerator(BucketedTaskGenerator(
        {}, {"episode_length": [1, 2, 3, 4], "reward_per_step": [0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]},
        label="stream", seed=seed))
    return CurriculumConfig(task_generator=generator, algorithm=algorithm, num_active_tasks=LIMITS.pool, seed=seed,
                            score_range=(0.0, 4.0))


def _env(buf=None, seed=0):
    return ExactAccountingEnv(buf=buf, seed=seed)


def _streams(curriculum_factory, seed: int, backend: str, algorithm, oracle, *,
             parent_vector: bool = False, evaluation_env: bool = False) -> dict[int, list]:
    """Per env slot of the vector, the task tags its episodes ran, in order (`parent_vector`:
    after a Serial vector over the same curriculum ran in this process, as an evaluation
    vector built before the training one does; `evaluation_env`: with an env of a seed of its
    own built over the curriculum a quarter into the run, as a trainer builds an evaluation env)."""
    options = {"shared_memory": True} if backend == "Multiprocessing" else {}
    curriculum = curriculum_factory(stream_config(seed, algorithm), **options)
    watcher = oracle(context=f"{backend} streams, seed {seed}")
    if parent_vector:  # (its episodes are the oracle's too; its envs' seeds lie outside the vector's)
        evaluation = make_curriculum_vecenv(_env, curriculum, backend="Serial", tracking="shared", num_envs=2,
                                            seed=seed + LIMITS.other_seed_offset)
        watcher.observe(evaluation.reset(seed=seed)[1])
        for _ in range(LIMITS.vec_steps // 4):
            watcher.observe(evaluation.step(np.zeros(evaluation.action_space.shape, dtype=np.int32))[4])
        evaluation.close()
    target = watcher.watch(curriculum) if backend == "Serial" else curriculum
    vec_options = {"num_workers": LIMITS.num_workers, "overwork": True} if backend == "Multiprocessing" else {}
    vecenv = make_curriculum_vecenv(_env, target, backend=backend, tracking="shared", num_envs=LIMITS.num_envs,
                                    seed=seed, **vec_options)
    try:
        vecenv.reset(seed=seed)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        for step in range(LIMITS.vec_steps):
            if evaluation_env and step == LIMITS.vec_steps // 4:
                CurriculumEnv(_env(), target, seed=seed + LIMITS.other_seed_offset).close()
            watcher.observe(vecenv.step(actions)[4])
    finally:
        vecenv.close()
    watcher.verify(curriculum)
    close = getattr(curriculum, "close", None)  # optional (docs/protocol.md)
    if close is not None:
        close()
    streams: dict[str, list] = {}
    for episode in watcher.episodes:
        if not parent_vector or int(episode.record.env.split(":")[1]) < seed + LIMITS.other_seed_offset:
            streams.setdefault(episode.record.env, []).append(episode.record.identity)
    # env names are `<pid>:<seed>:<n>`: order the envs by their vector seed, which names the slot
    names = sorted(streams, key=lambda n: int(n.split(":")[1]))
    env_seeds = [int(name.split(":")[1]) for name in names]
    expected = list(range(seed, seed + LIMITS.num_envs))
    assert env_seeds == expected, (
        f"{backend}: make_curriculum_vecenv(seed={seed}) built envs with seeds {env_seeds}, expected env i to get "
        f"seed + i: {expected}")
    return {index: streams[name] for index, name in enumerate(names)}


@pytest.fixture
def shared_factory(curriculum_factory, require_capability):
    require_capability("shared_memory" in inspect.signature(curriculum_factory).parameters,
                       "this curriculum factory takes no `shared_memory` option: worker processes cannot share it")
    return curriculum_factory


def test_worker_processes_draw_different_sequences_reproducibly(shared_factory, scenario_seed, oracle,
                                                                golden) -> None:
    first = _streams(shared_factory, scenario_seed, "Multiprocessing", UniformConfig(), oracle)
    again = _streams(shared_factory, scenario_seed, "Multiprocessing", UniformConfig(), oracle)
    other = _streams(shared_factory, scenario_seed + LIMITS.other_seed_offset, "Multiprocessing", UniformConfig(),
                     oracle)
    after_evaluation = _streams(shared_factory, scenario_seed, "Multiprocessing", UniformConfig(), oracle,
                                parent_vector=True)
    assert len(first) == LIMITS.num_envs, f"{len(first)} envs reported episodes, expected {LIMITS.num_envs}"
    per_worker = LIMITS.num_envs // LIMITS.num_workers
    workers = [sum((first[slot] for slot in range(w * per_worker, (w + 1) * per_worker)), [])
               for w in range(LIMITS.num_workers)]
    prefix = LIMITS.compared_prefix
    for run, streams in (("", first), (" after a Serial vector over the curriculum ran in the parent", after_evaluation)):
        for a in range(LIMITS.num_workers):
            for b in range(a + 1, LIMITS.num_workers):
                same = sum(x == y for x, y in zip(streams[a * per_worker][:prefix], streams[b * per_worker][:prefix]))
                assert same < LIMITS.max_shared_draws, (
                    f"worker processes {a} and {b} drew the same task in {same} of their first {prefix} episodes"
                    f"{run} (uniform over {LIMITS.pool} tasks: about {prefix / LIMITS.pool:.0f}); their streams are "
                    f"not independent, seed {scenario_seed}"
                )
    assert first == again, (
        f"the same seed gave different per-env task sequences (first difference at env "
        f"{next(i for i in first if first[i] != again.get(i))}), seed {scenario_seed}"
    )
    assert first != other, f"seeds {scenario_seed} and {scenario_seed + LIMITS.other_seed_offset} gave the same run"
    golden({"episodes_per_env": [len(first[i]) for i in sorted(first)],
            "distinct_tasks_per_worker": [len(set(w)) for w in workers]})


def test_serial_learning_progress_run_reproduces_from_its_seed(curriculum_factory, scenario_seed, oracle) -> None:
    """Also when the second run builds an evaluation env with a seed of its own over the
    curriculum mid-run: the vector's seeds are final in its process, so the evaluation env
    does not restart the training stream."""
    first = _streams(curriculum_factory, scenario_seed, "Serial", LearningProgressConfig(), oracle)
    again = _streams(curriculum_factory, scenario_seed, "Serial", LearningProgressConfig(), oracle, evaluation_env=True)
    differ = next((step for step, pair in enumerate(zip(first[0], again[0])) if pair[0] != pair[1]), None)
    assert first == again, (
        f"the same seed gave different per-env task sequences under Serial, the second run with an evaluation env of "
        f"another seed built at vec step {LIMITS.vec_steps // 4} (env 0's episodes differ from episode {differ} on), "
        f"seed {scenario_seed}")


def _gym_stream(env: GymCurriculumEnv, seed: int | None, episodes: int) -> list[int]:
    """Task ids of `episodes` gymnasium episodes, the first started with `reset(seed=seed)`."""
    ids = []
    for index in range(episodes):
        if index == 0:
            env.reset(seed=seed)
        else:
            env.reset()  # as a training loop calls it: no seed given
        ids.append(env.task.task_id)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(0)
            done = terminated or truncated
    return ids


def _attach_and_draw(attach, name: str, config: CurriculumConfig, conn) -> None:
    handle = attach(name, config)
    conn.send(tuple(handle.get_task().task_id for _ in range(LIMITS.stream_draws)))
    getattr(handle, "close", lambda: None)()


def _draws_of_unseeded_handles(attach, name: str, config: CurriculumConfig) -> list[tuple[int, ...]]:
    """What handles attached without a seed, one per (forked) process, draw."""
    context = mp.get_context("fork")
    draws = []
    for _ in range(LIMITS.unseeded_handles):
        here, there = context.Pipe()
        child = context.Process(target=_attach_and_draw, args=(attach, name, config, there))
        child.start()
        draws.append(here.recv() if here.poll(30) else ())
        child.join(timeout=30)
    return draws


def test_a_seed_gives_one_stream_however_it_is_set(curriculum_factory, require_capability, scenario_seed) -> None:
    """Uniform sampling (draws depend on the stream alone): for each seed, a used curriculum
    reseeded (and reseeded with it again), a gymnasium env reset with the seed (then with none:
    a plain `reset()` reseeds nothing), over a local and (shared memory) a shared curriculum,
    and a handle attached
    with the seed draw the tasks a fresh curriculum reseeded with it draws; handles attached
    without one, each in its own process, draw streams of their own."""
    config = stream_config(scenario_seed, UniformConfig())
    for seed in LIMITS.stream_seeds:
        fresh = curriculum_factory(config)
        reseed = getattr(fresh, "reseed", None)
        require_capability(callable(reseed), "this curriculum has no reseed(seed)")
        reseed(seed)
        expected = [fresh.get_task().task_id for _ in range(LIMITS.stream_draws)]

        used = curriculum_factory(config)
        for _ in range(LIMITS.stream_draws):
            used.update_task_performance(used.get_task().task_id, 0.5)
        used.reseed(seed)
        got = [used.get_task().task_id for _ in range(LIMITS.stream_draws)]
        assert got == expected, (f"reseed({seed}) after {LIMITS.stream_draws} episodes drew {got[:8]}..., a fresh "
                                 f"curriculum reseeded with {seed} draws {expected[:8]}..., seed {scenario_seed}")
        used.reseed(seed)  # the same seed again: the stream starts over, as a rerun from that seed does
        again = [used.get_task().task_id for _ in range(LIMITS.stream_draws)]
        assert again == expected, (
            f"reseed({seed}) a second time drew {again[:8]}..., a fresh curriculum reseeded with {seed} draws "
            f"{expected[:8]}..., seed {scenario_seed}")

        reference = _gym_stream(GymCurriculumEnv(GymExactAccountingEnv(), curriculum_factory(config), seed=0),
                                seed, LIMITS.stream_draws)
        assert reference == expected, (  # a plain reset() starts the task drawn when the last episode ended
            f"GymCurriculumEnv.reset(seed={seed}), then reset() at each episode end, started {reference[:8]}..., a "
            f"curriculum reseeded with {seed} draws {expected[:8]}..., seed {scenario_seed}")
        env = GymCurriculumEnv(GymExactAccountingEnv(), curriculum_factory(config), seed=0)
        _gym_stream(env, seed + 1, LIMITS.stream_draws)
        got = _gym_stream(env, seed, LIMITS.stream_draws)
        assert got == reference, (
            f"GymCurriculumEnv.reset(seed={seed}) after {LIMITS.stream_draws} episodes started {got[:8]}..., on a "
            f"fresh env {reference[:8]}..., seed {scenario_seed}")

        if "shared_memory" in inspect.signature(curriculum_factory).parameters:
            shared = curriculum_factory(config, shared_memory=True)
            attach = getattr(type(shared), "attach", None)
            name = getattr(shared, "shared_memory_name", None)
            if callable(attach) and name:
                handle = attach(name, config, seed=seed)
                got = [handle.get_task().task_id for _ in range(LIMITS.stream_draws)]
                getattr(handle, "close", lambda: None)()
                assert got == expected, (
                    f"a handle attached with seed={seed} drew {got[:8]}..., a curriculum reseeded with {seed} draws "
                    f"{expected[:8]}..., seed {scenario_seed}")
                unseeded = _draws_of_unseeded_handles(attach, name, config)
                assert len(set(unseeded)) == len(unseeded), (
                    f"handles attached without a seed in {len(unseeded)} processes drew the same tasks: "
                    f"{[draws[:8] for draws in unseeded]}, seed {scenario_seed}")
            # (a shared curriculum's reseed reseeds this process's draws: a seeded reset seeds them too)
            got = _gym_stream(GymCurriculumEnv(GymExactAccountingEnv(), shared, seed=0), seed, LIMITS.stream_draws)
            getattr(shared, "close", lambda: None)()
            assert got == reference, (
                f"GymCurriculumEnv.reset(seed={seed}) over a shared curriculum started {got[:8]}..., over a local one "
                f"{reference[:8]}..., seed {scenario_seed}")


def test_seeds_that_differ_above_32_bits_give_streams_of_their_own(curriculum_factory, require_capability,
                                                                   scenario_seed) -> None:
    """Seeds a trainer derives from time or entropy are wide: `reseed(s)` and `reseed(s + k *
    2**32)` (k = 1, 2**31) draw streams of their own, as seeds differing in their low bits do
    (two workers in lockstep would run the same tasks)."""
    config = stream_config(scenario_seed, UniformConfig())
    for seed in LIMITS.stream_seeds:
        base = _reseeded_stream(curriculum_factory, require_capability, config, seed)
        for wide in (seed + 2**32, seed + 2**63):
            other = _reseeded_stream(curriculum_factory, require_capability, config, wide)
            same = sum(a == b for a, b in zip(base, other))
            assert same < len(base) // 2, (
                f"reseed({seed}) and reseed({wide}) drew the same task at {same} of {len(base)} draws: seeds that "
                f"differ above their low 32 bits must give streams of their own, seed {scenario_seed}")


def _reseeded_stream(curriculum_factory, require_capability, config: CurriculumConfig, seed: int) -> list[int]:
    """The first `LIMITS.stream_draws` task ids of a curriculum of `config` reseeded with `seed`
    (the curriculum closed and dropped after)."""
    reference = curriculum_factory(config)
    require_capability(callable(getattr(reference, "reseed", None)), "this curriculum has no reseed(seed)")
    reference.reseed(seed)
    stream = [reference.get_task().task_id for _ in range(LIMITS.stream_draws)]
    getattr(reference, "close", lambda: None)()
    return stream


def test_every_new_curriculum_wrapped_with_a_seed_takes_it(curriculum_factory, require_capability,
                                                           scenario_seed) -> None:
    """A seed sweep in one process (a curriculum and its env built, run and dropped, then the
    next): every new curriculum an env is built on with `seed=s` draws the stream of a
    curriculum reseeded with s, whatever the process built and dropped before it (a new
    object may take a dropped one's address)."""
    config = stream_config(scenario_seed, UniformConfig())
    seed = LIMITS.stream_seeds[-1]
    expected = _reseeded_stream(curriculum_factory, require_capability, config, seed)
    differ = []
    for build in range(LIMITS.sweep_builds):
        gc.collect(1)  # (the young generations: where the dropped curriculum's cycles are)
        curriculum = curriculum_factory(config)
        env = CurriculumEnv(ExactAccountingEnv(), curriculum, seed=seed)
        got = [curriculum.get_task().task_id for _ in range(LIMITS.stream_draws)]
        if got != expected:
            differ.append(build)
        env.close()
        getattr(curriculum, "close", lambda: None)()
        del env, curriculum
    assert not differ, (
        f"of {LIMITS.sweep_builds} curricula built one after another in one process, each wrapped with seed={seed}, "
        f"builds {differ} did not draw the seed's stream ({expected[:8]}...), seed {scenario_seed}")


@pytest.mark.parametrize("wrapper", ["CurriculumEnv", "GymCurriculumEnv"])
def test_a_wrapper_built_without_a_seed_leaves_the_stream_alone(curriculum_factory, scenario_seed, wrapper) -> None:
    """A wrapper built without `seed` (the usual call, and the resume flow: a checkpoint loaded,
    then the env built over it) leaves the curriculum's sampling stream where its seed and its
    history put it: it draws what the same curriculum unwrapped draws."""
    config = stream_config(scenario_seed, UniformConfig())
    curricula = [curriculum_factory(config) for _ in range(2)]
    try:
        for curriculum in curricula:  # the same history: some draws
            for _ in range(LIMITS.stream_draws):
                curriculum.get_task()
        if wrapper == "CurriculumEnv":
            env = CurriculumEnv(ExactAccountingEnv(), curricula[1])
        else:
            env = GymCurriculumEnv(GymExactAccountingEnv(), curricula[1])
        unwrapped, wrapped = ([c.get_task().task_id for _ in range(LIMITS.stream_draws)] for c in curricula)
        env.close()
        assert wrapped == unwrapped, (
            f"{wrapper} built without a seed moved the curriculum's stream: it draws {wrapped[:8]}..., the same "
            f"curriculum unwrapped {unwrapped[:8]}..., seed {scenario_seed}")
    finally:
        for curriculum in curricula:
            getattr(curriculum, "close", lambda: None)()


class _Unhashable:
    """A curriculum as a user's own class may present it: compared by value (a dataclass, so not
    hashable) and with `__slots__` (so not weak-referenceable); everything else is the curriculum's."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_inner"), name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unhashable) and other._inner is self._inner

    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize("wrapper", ["CurriculumEnv", "GymCurriculumEnv"])
def test_a_curriculum_that_cannot_be_hashed_or_weakly_referenced_still_takes_the_seed(
        curriculum_factory, require_capability, scenario_seed, wrapper: str) -> None:
    """A wrapper given `seed=s` reseeds its curriculum with s even when it cannot remember the
    curriculum in a registry (unhashable, not weak-referenceable): otherwise every worker of a
    user's own curriculum class draws its parent's stream."""
    config = stream_config(scenario_seed, UniformConfig())
    seed = LIMITS.stream_seeds[-1]
    expected = _reseeded_stream(curriculum_factory, require_capability, config, seed)
    curriculum = curriculum_factory(config)
    view = _Unhashable(curriculum)
    try:
        if wrapper == "GymCurriculumEnv":
            env = GymCurriculumEnv(GymExactAccountingEnv(), view, seed=seed)
        else:
            env = CurriculumEnv(ExactAccountingEnv(), view, seed=seed)
        got = [curriculum.get_task().task_id for _ in range(LIMITS.stream_draws)]
        env.close()
    finally:
        getattr(curriculum, "close", lambda: None)()
    assert got == expected, (
        f"{wrapper}(seed={seed}) over a curriculum it can neither hash nor weakly reference: it then drew "
        f"{got[:8]}..., not the seed's stream {expected[:8]}..., seed {scenario_seed}")


def test_config_seed_and_worker_seed_both_count(curriculum_factory, require_capability, scenario_seed) -> None:
    """Uniform sampling: curricula of config seeds `scenario_seed + c`, each reseeded with worker
    seed w (c, w in 0..2), draw nine different streams."""
    streams: dict[tuple[int, ...], tuple[int, int]] = {}
    for c in range(3):
        config_seed = scenario_seed + c
        for worker_seed in range(3):
            curriculum = curriculum_factory(stream_config(config_seed, UniformConfig()))
            reseed = getattr(curriculum, "reseed", None)
            require_capability(callable(reseed), "this curriculum has no reseed(seed)")
            reseed(worker_seed)
            drawn = tuple(curriculum.get_task().task_id for _ in range(LIMITS.stream_draws))
            getattr(curriculum, "close", lambda: None)()
            same = streams.setdefault(drawn, (config_seed, worker_seed))
            assert same == (config_seed, worker_seed), (
                f"config seed {config_seed} reseeded with {worker_seed} draws {list(drawn[:8])}..., the same "
                f"{LIMITS.stream_draws} tasks as config seed {same[0]} reseeded with {same[1]}, seed {scenario_seed}")


@pytest.mark.parametrize("tracking", ["shared", "centralized"])
def test_a_vector_reset_seeds_env_i_with_the_given_seed_plus_i(tracking: str) -> None:
    """`reset(seed=s)` of a vector, whatever seed it was built with, starts env i from seed
    s + i (pufferlib's convention), every time it is called: a trainer that reseeds its vector
    per run replays that run's env streams; `reset(seed=None)` reseeds no env."""
    curriculum = Curriculum(CurriculumConfig(task_generator=SingleTaskGenerator({"episode_length": 2}),
                                             algorithm=UniformConfig(), num_active_tasks=4))
    vecenv = make_curriculum_vecenv(_env, curriculum, backend="Serial", tracking=tracking, num_envs=3, seed=7)
    try:
        envs = [wrapper.env for wrapper in vecenv.vecenv.envs]
        for seed in (100, 200):
            vecenv.reset(seed=seed)
            received = [env.reset_seeds[-1] for env in envs]
            assert received == [seed + i for i in range(len(envs))], (
                f"{tracking} tracking: reset(seed={seed}) of a vector built with seed=7 reset its envs with seeds "
                f"{received}, expected {[seed + i for i in range(len(envs))]}")
        vecenv.reset(seed=None)
        received = [env.reset_seeds[-1] for env in envs]
        assert received == [None] * len(envs), (
            f"{tracking} tracking: reset(seed=None) reset the envs with seeds {received}: an unseeded reset leaves "
            f"each env's own stream alone (seed None)")
    finally:
        vecenv.close()
        curriculum.close()


@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
@pytest.mark.parametrize("end", ["terminal", "truncated"])
def test_a_vector_returns_the_end_flags_its_envs_wrote(backend: str, end: str) -> None:
    """Every episode of these envs ends one way (a terminal state, or a time limit): the
    terminals and truncations a vector step returns are the env's, each in its own array (a
    trainer bootstraps a truncated episode's value and not a terminated one's)."""
    curriculum = Curriculum(CurriculumConfig(task_generator=SingleTaskGenerator({"episode_length": 2, "reward_per_step": 0.25, "end": end}),
                                             algorithm=UniformConfig(), num_active_tasks=4),
                            shared_memory=backend == "Multiprocessing")
    options = {"num_workers": 2, "overwork": True} if backend == "Multiprocessing" else {}
    vecenv = make_curriculum_vecenv(_env, curriculum, backend=backend, tracking="shared", num_envs=4, seed=0,
                                    **options)
    flags = {"terminal": 0, "truncated": 0}
    try:
        vecenv.reset(seed=0)
        actions = np.zeros(vecenv.action_space.shape, dtype=np.int32)
        for _ in range(6):
            _, _, terminals, truncations, _ = vecenv.step(actions)
            flags["terminal"] += int(np.count_nonzero(terminals))
            flags["truncated"] += int(np.count_nonzero(truncations))
    finally:
        vecenv.close()
        curriculum.close()
    other = "truncated" if end == "terminal" else "terminal"
    assert flags[end] > 0 and flags[other] == 0, (
        f"{backend}: envs whose episodes all end {end} (2 steps each, 4 envs, 6 steps) came back with {flags} "
        f"flags set: {end} ones expected, and no {other} one")


#: What `reseed` may change in a checkpoint: the sampling stream and the draws refreshed from it.
_STREAM_KEYS = frozenset({"rng", "draws", "draw_pos", "since_refresh", "probabilities"})


@pytest.mark.parametrize("algorithm", ["uniform", "learning_progress", "staged"])
def test_reseeding_changes_the_stream_and_nothing_recorded(uses_builtin_curriculum, require_capability,
                                                           scenario_seed, algorithm) -> None:
    """`reseed` gives a handle its own sampling stream; what was recorded (completions, scores,
    how often each task was handed out, the algorithm's statistics, the stage) stays as it was:
    the checkpoint taken just after differs from the one taken just before only in the stream
    and the draws refreshed from it."""
    require_capability(uses_builtin_curriculum, "compares the built-in curriculum's checkpoints")
    generator = LabelledTaskGenerator(BucketedTaskGenerator({}, {"level": list(range(6))}, seed=scenario_seed))
    if algorithm == "staged":
        config = CurriculumConfig(algorithm=StagedProgressionConfig(stages=[Stage("first", generator),
                                                                            Stage("second", generator)]),
                                  num_active_tasks=8, seed=scenario_seed)
    else:
        config = CurriculumConfig(task_generator=generator, num_active_tasks=8, seed=scenario_seed,
                                  algorithm=UniformConfig() if algorithm == "uniform" else LearningProgressConfig())
    curriculum = Curriculum(config)
    rng = np.random.default_rng(scenario_seed)
    try:
        for _ in range(LIMITS.reseed_episodes):
            task = curriculum.get_task()
            curriculum.update_task_performance(task.task_id, float(rng.random()))
        before = curriculum.get_state()
        curriculum.reseed(scenario_seed + 1)
        after = curriculum.get_state()
    finally:
        curriculum.close()
    changed = sorted(key for key in before if key != "arrays" and key not in _STREAM_KEYS
                     and not _same(before[key], after[key]))
    changed += sorted(f"arrays/{name}" for name in before["arrays"]
                      if not _same(before["arrays"][name], after["arrays"][name]))
    assert not changed, (f"{algorithm}: reseed({scenario_seed + 1}) after {LIMITS.reseed_episodes} episodes changed "
                         f"what was recorded: {changed}, seed {scenario_seed}")


def _same(a: Any, b: Any) -> bool:
    return bool(np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))
