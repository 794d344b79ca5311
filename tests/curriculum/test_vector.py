"""Many workers, one curriculum: both designs on pufferlib Serial and Multiprocessing.

Every episode is recorded exactly once, workers never sample from a stage the global state
has not reached, and the stage lag after an advancement is at most one vec step.
"""

from __future__ import annotations

import multiprocessing
import re
from typing import Any

import numpy as np
import pufferlib
import pufferlib.vector
import pytest

from env_doubles import HARD, FixedEpisodeEnv, ScriptedFailuresEnv, staged_config, two_label_config
from curriculum import (
    CentralizedCurriculumVecEnv,
    CurriculumConfig,
    CurriculumConfigError,
    EnvContractError,
    EpisodeNotStartedError,
    LearningProgressConfig,
    SingleTaskGenerator,
    StageBroadcast,
    WorkerProcessError,
    make_curriculum_vecenv,
)
from curriculum.vector import default_num_workers, physical_cores
from curriculum.stats import stat_key

MP = pytest.mark.multiprocessing
DESIGNS = [
    pytest.param("Serial", "shared", id="serial-shared"),
    pytest.param("Serial", "centralized", id="serial-centralized"),
    pytest.param("Multiprocessing", "shared", id="mp-shared", marks=MP),
    pytest.param("Multiprocessing", "centralized", id="mp-centralized", marks=MP),
]
NUM_ENVS = 4


def fixed_env(buf: Any = None, seed: int = 0) -> FixedEpisodeEnv:
    return FixedEpisodeEnv(buf=buf, seed=seed)


def vec_options(backend: str) -> dict[str, Any]:
    return {"num_workers": 2, "overwork": True} if backend == "Multiprocessing" else {}


def label_of(info: dict[str, Any]) -> str:
    (label,) = [k.rsplit("/", 1)[1] for k in info if k.startswith(stat_key("per_label_samples"))]
    return label


def test_env_i_of_the_vector_gets_seed_plus_i(make_curriculum: Any) -> None:
    seeds: list[int] = []

    def recording_env(buf: Any = None, seed: int = 0) -> FixedEpisodeEnv:
        seeds.append(seed)
        return fixed_env(buf=buf, seed=seed)

    curriculum = make_curriculum(two_label_config(), shared=False)
    vecenv = make_curriculum_vecenv(recording_env, curriculum, num_envs=NUM_ENVS, seed=7)
    vecenv.close()
    assert sorted(set(seeds)) == [7, 8, 9, 10]  # pufferlib's make() does not pass its seed on: the wrapper adds it


@pytest.mark.parametrize(("backend", "tracking"), DESIGNS)
def test_every_episode_recorded_exactly_once(make_curriculum: Any, backend: str, tracking: str) -> None:
    config = two_label_config(hard={**HARD, "end": "desync"})  # "hard" episodes are desync cuts
    curriculum = make_curriculum(config, shared=tracking == "shared")
    vecenv = make_curriculum_vecenv(fixed_env, curriculum, backend=backend, tracking=tracking, num_envs=NUM_ENVS,
                                    stats_interval=5, **vec_options(backend))
    terminal_episodes = desync_episodes = 0
    infos: list[dict[str, Any]] = []
    try:
        vecenv.reset()
        for _ in range(24):
            _, _, terminals, truncations, step_infos = vecenv.step(np.zeros(NUM_ENVS, dtype=np.int32))
            terminal_episodes += int(terminals.sum())
            desync_episodes += int(truncations.sum())
            infos.extend(step_infos)
    finally:
        vecenv.close()
    assert terminal_episodes > 0 and desync_episodes > 0
    ended = [info for info in infos if stat_key("episodes") in info]
    assert len(ended) == terminal_episodes + desync_episodes
    assert sum(info[stat_key("desync_truncations")] for info in ended) == desync_episodes
    assert all(label_of(info) == "hard" for info in ended if info[stat_key("desync_truncations")])
    tracker = curriculum.tracker
    assert tracker.total_completions == terminal_episodes and tracker.late_completions == 0
    assert float(tracker.score_sum.sum()) == 0.5 * terminal_episodes
    assert sum(info.get(stat_key("completions"), 0) for info in ended) == terminal_episodes
    assert all("curriculum_completion" not in info for info in infos)  # consumed by the main process


@pytest.mark.parametrize(("backend", "tracking"), DESIGNS)
def test_stage_sync_lag_is_at_most_one_vec_step(make_curriculum: Any, backend: str, tracking: str) -> None:
    # One-step episodes: every env ends an episode and draws a task at every vec step, so a
    # broadcast that arrives one step late shows as a task drawn from the old stage.
    one_step = {"reward_per_step": 0.5, "episode_length": 1}
    curriculum = make_curriculum(staged_config(num_stages=3, min_episodes=4, episode=one_step),
                                 shared=tracking == "shared")
    vecenv = make_curriculum_vecenv(fixed_env, curriculum, backend=backend, tracking=tracking, num_envs=NUM_ENVS,
                                    stats_interval=1000, **vec_options(backend))
    steps = 12
    stage_after: dict[int, int] = {}  # vec step -> global stage once it returned (-1: the reset)
    episodes = 0
    try:
        vecenv.reset()
        stage_after[-1] = curriculum.stage
        for step in range(steps):
            infos = vecenv.step(np.zeros(NUM_ENVS, dtype=np.int32))[4]
            stage_after[step] = curriculum.stage
            assert len(infos) == NUM_ENVS
            for info in infos:
                episodes += 1
                drawn = step - 1  # the step whose auto-reset drew this task (-1: the reset)
                task_stage = int(label_of(info).removeprefix("stage"))
                assert stage_after.get(drawn - 1, 0) <= task_stage <= stage_after[drawn], (step, info)
                reported = info[stat_key("stage")]  # the worker's stage after drawing its next task
                assert stage_after[step - 1] <= reported <= stage_after[step], (step, info)
    finally:
        vecenv.close()
    stats = curriculum.stats()
    assert curriculum.stage == 2 and stats["advancements"] == 2 and stats["regressions"] == 0
    assert episodes == NUM_ENVS * steps
    assert curriculum.tracker.total_completions + curriculum.tracker.late_completions == episodes


@pytest.mark.parametrize("backend", ["Serial", "Multiprocessing"])
def test_centralized_workers_follow_a_restored_stage(make_curriculum: Any, backend: str) -> None:
    # A checkpoint at stage 2 restored after the vector was built (the resume flow): the reset's
    # draws come from it, not from the stage the workers were forked at.
    one_step = {"reward_per_step": 0.5, "episode_length": 1}
    config = staged_config(num_stages=3, min_episodes=4, episode=one_step)
    source = make_curriculum(config)
    while source.stage < 2:
        source.update_task_performance(source.get_task().task_id, 0.5)
    checkpoint = source.get_state()
    curriculum = make_curriculum(config)
    vecenv = make_curriculum_vecenv(fixed_env, curriculum, backend=backend, tracking="centralized", num_envs=NUM_ENVS,
                                    stats_interval=1000, **vec_options(backend))
    actions = np.zeros(NUM_ENVS, dtype=np.int32)
    try:
        curriculum.load_state(checkpoint)
        vecenv.reset()
        assert [label_of(info) for info in vecenv.step(actions)[4]] == ["stage2"] * NUM_ENVS
        assert curriculum.tracker.late_completions == 0
    finally:
        vecenv.close()


@MP
def test_shared_workers_draw_their_own_task_sequences(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD, num_active_tasks=64), shared=True)
    vecenv = make_curriculum_vecenv(fixed_env, curriculum, backend="Multiprocessing", num_envs=2, num_workers=2,
                                    overwork=True)
    sequences: list[list[int]] = [[], []]
    try:
        vecenv.reset()
        for _ in range(40):
            infos = vecenv.step(np.zeros(2, dtype=np.int32))[4]
            for worker, info in enumerate(infos):  # both end together; worker order
                sequences[worker].append(info[stat_key("task_id")])
    finally:
        vecenv.close()
    assert len(sequences[0]) == 10 and sequences[0] != sequences[1]


@MP
def test_a_worker_that_dies_is_reported_not_awaited(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(easy=HARD), shared=True)
    vecenv = make_curriculum_vecenv(fixed_env, curriculum, backend="Multiprocessing", num_envs=2, num_workers=2,
                                    overwork=True, score_fn=lambda returns: 2.0)  # InvalidScoreError in the workers
    pattern = (r"^Vectorized worker \d \(pid \d+\) exited with code 1 during its step; its traceback, if any, is on "
               r"stderr\. The vecenv closed itself and stopped every worker; build a new one to continue$")
    try:
        vecenv.reset()
        with pytest.raises(WorkerProcessError, match=pattern):
            for _ in range(4):
                vecenv.step(np.zeros(2, dtype=np.int32))
    finally:
        vecenv.close()


@MP
@pytest.mark.parametrize("tracking", ["shared", "centralized"])
@pytest.mark.parametrize("batching", [{}, {"batch_size": 1, "zero_copy": False}], ids=["sync", "async"])
def test_a_reset_after_workers_sent_infos_returns_and_loses_no_episode(make_curriculum: Any, tracking: str,
                                                                       batching: dict[str, Any]) -> None:
    """pufferlib's reset reads the pipe of a worker whose infos a batch already returned (it
    blocks for ever) and drops the infos of steps still running: the wrapper must do neither."""
    curriculum = make_curriculum(two_label_config(), shared=tracking == "shared")
    vecenv = make_curriculum_vecenv(fixed_env, curriculum, backend="Multiprocessing", tracking=tracking, num_envs=2,
                                    num_workers=2, overwork=True, worker_timeout=10.0, **batching)
    ended = 0
    try:
        vecenv.reset()
        actions = np.zeros(vecenv.agents_per_batch, dtype=np.int32)
        for resets in range(3):
            steps_with_infos = 0
            while steps_with_infos < 2:  # then a reset while the last batch's workers flag infos
                infos = vecenv.step(actions)[4]
                ended += sum(stat_key("episodes") in info for info in infos)
                steps_with_infos += bool(infos)
            infos = vecenv.reset()[1]  # the episodes of batches still in flight come with it
            ended += sum(stat_key("episodes") in info for info in infos)
    finally:
        vecenv.close()
    tracker = curriculum.tracker
    assert ended > 0 and tracker.total_completions + tracker.late_completions == ended


def test_stage_broadcast_publishes_whole_states() -> None:
    broadcast = StageBroadcast()
    assert broadcast.version == 0 and broadcast.read() is None
    broadcast.publish({"stage": 2, "stage_changes": 3})
    assert broadcast.version == 2 and broadcast.read() == {"stage": 2, "stage_changes": 3}


# ---- refusals -----------------------------------------------------------------------------------
def test_unknown_options_are_refused_by_name(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config())
    message = ("Unknown option(s) 'env_method', 'num_worker' for make_curriculum_vecenv; expected keyword arguments "
               "from ('batch_size', 'zero_copy', 'overwork')")
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        make_curriculum_vecenv(fixed_env, curriculum, num_envs=2, num_worker=2, env_method=True)
    message = "Expected `backend` to be one of ('Serial', 'Multiprocessing'), received 'Dask'"
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        make_curriculum_vecenv(fixed_env, curriculum, num_envs=2, backend="Dask")
    message = ("Expected backend='Ray' with tracking='ray' (workers on Ray actors, one curriculum service), "
               "received backend='Ray' with tracking='shared'")
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        make_curriculum_vecenv(fixed_env, curriculum, num_envs=2, backend="Ray")
    message = "Expected `tracking` to be one of ('shared', 'centralized'), received 'local'"
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        make_curriculum_vecenv(fixed_env, curriculum, num_envs=2, tracking="local")


def test_centralized_tracking_refuses_learning_progress(make_curriculum: Any) -> None:
    config = CurriculumConfig(task_generator=SingleTaskGenerator({"tag": 1}, label="a"),
                              algorithm=LearningProgressConfig(), num_active_tasks=4)
    message = ("Centralized tracking supports staged progression and uniform curricula, received "
               "'learning_progress': worker copies cannot follow a pool the main process changes by evicting tasks; "
               "use tracking='shared' with Curriculum(config, shared_memory=True)")
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        make_curriculum_vecenv(fixed_env, make_curriculum(config), num_envs=2, tracking="centralized")


def test_shared_tracking_on_multiprocessing_needs_a_shared_curriculum(make_curriculum: Any) -> None:
    message = ("Expected a shared curriculum (Curriculum(config, shared_memory=True)) for tracking='shared' on "
               "Multiprocessing, received a local one: each worker process would record into its own private copy")
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        make_curriculum_vecenv(fixed_env, make_curriculum(two_label_config()), backend="Multiprocessing",
                               num_envs=2, num_workers=2, overwork=True)


def test_centralized_staged_wrapper_needs_a_broadcast(make_curriculum: Any) -> None:
    vecenv = pufferlib.vector.make(fixed_env, backend=pufferlib.vector.Serial, num_envs=1)
    message = ("Expected a `stage_broadcast` for a staged curriculum under centralized tracking: without it the "
               "workers never learn of a stage change")
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        CentralizedCurriculumVecEnv(vecenv, make_curriculum(staged_config()))


# ---- layouts, defaults and usage errors ---------------------------------------------------------
@MP
def test_the_default_worker_count_fits_the_physical_cores(make_curriculum: Any) -> None:
    """num_workers=num_envs used to reach pufferlib's cores check, which fails with
    "module 'pufferlib' has no attribute 'APIUsageError'" on a machine with fewer cores."""
    curriculum = make_curriculum(two_label_config(), shared=True)
    num_envs = 2 * physical_cores()
    with make_curriculum_vecenv(fixed_env, curriculum, backend="Multiprocessing", num_envs=num_envs) as vecenv:
        assert len(vecenv.vecenv.processes) == default_num_workers(num_envs) == physical_cores()
        vecenv.reset()
        vecenv.step(np.zeros(num_envs, dtype=np.int32))


@pytest.mark.parametrize(("num_envs", "batch_size", "cores", "expected"), [
    (4, None, 2, 2), (6, None, 4, 3), (4, 2, 2, 2), (8, 4, 2, 2), (8, 2, 2, None), (4, 1, 2, None), (4, 1, 4, 4), (1, None, 8, 1),
    (12, 6, 4, 4),
])
def test_default_num_workers(num_envs: int, batch_size: int | None, cores: int, expected: int | None) -> None:
    assert default_num_workers(num_envs, batch_size=batch_size, cores=cores) == expected


def _cores_message() -> str:
    cores = physical_cores()
    return (f"Expected `num_workers` at most the {cores} physical cores, received {2 * cores}; pass overwork=True to "
            "run more worker processes than cores")


BAD_VECTOR_ARGUMENTS = [
    ({"num_envs": 4, "num_workers": 3},
     "Expected `num_workers` to be None or an integer in [1, num_envs=4] that divides num_envs, received 3"),
    ({"num_envs": 4, "num_workers": 0},
     "Expected `num_workers` to be None or an integer in [1, num_envs=4] that divides num_envs, received 0"),
    ({"num_envs": 4, "num_workers": 2, "batch_size": 3},
     "Expected `batch_size` to be a multiple of num_envs / num_workers = 2 (whole workers per batch), received 3"),
    ({"num_envs": 4, "num_workers": 4, "batch_size": 3, "overwork": True},
     "Expected `batch_size` to divide num_envs=4 with zero_copy=True (equal batches), received 3; pass "
     "zero_copy=False for uneven batches"),
    ({"num_envs": 4, "batch_size": 1, "num_workers": 2},
     "Expected `batch_size` to be a multiple of num_envs / num_workers = 2 (whole workers per batch), received 1"),
    ({"num_envs": 4, "batch_size": 0}, "Expected `batch_size` to be None or an integer in [1, num_envs=4], received 0"),
    ({"num_envs": 4, "batch_size": 2.0},
     "Expected `batch_size` to be None or an integer in [1, num_envs=4], received 2.0"),
    ({"num_envs": 4, "zero_copy": "no"}, "Expected `zero_copy` to be a bool, received 'no'"),
    ({"num_envs": 4, "overwork": 1}, "Expected `overwork` to be a bool, received 1"),
    ({"num_envs": 0}, "Expected `num_envs` to be an integer in [1, 65536], received 0"),
    ({"num_envs": 10**9}, "Expected `num_envs` to be an integer in [1, 65536], received 1000000000"),
    ({"num_envs": 2, "seed": -1}, "Expected `seed` to be an integer >= 0, received -1"),
    ({"num_envs": 2, "seed": None}, "Expected `seed` to be an integer >= 0, received None"),
    ({"num_envs": 2, "worker_timeout": 0},
     "Expected `worker_timeout` to be None or a finite number of seconds > 0, received 0"),
    ({"num_envs": 2, "score_fn": 1.0}, "Expected `score_fn` to be callable or None, received 1.0"),
    ({"num_envs": 2, "stats_interval": 0}, "Expected `stats_interval` to be an integer >= 1, received 0"),
    ({"num_envs": 2, "tracking": None}, "Expected `tracking` to be one of ('shared', 'centralized'), received None"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_VECTOR_ARGUMENTS, ids=[m[:60] for _, m in BAD_VECTOR_ARGUMENTS])
def test_a_layout_pufferlib_would_refuse_is_refused_by_name_before_any_process_starts(make_curriculum: Any,
                                                                                     kwargs: dict, message: str) -> None:
    curriculum = make_curriculum(two_label_config(), shared=True)
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        make_curriculum_vecenv(fixed_env, curriculum, backend="Multiprocessing", **kwargs)
    assert multiprocessing.active_children() == []


def test_more_workers_than_cores_need_overwork(make_curriculum: Any) -> None:
    curriculum = make_curriculum(two_label_config(), shared=True)
    cores = physical_cores()
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(_cores_message())}$"):
        make_curriculum_vecenv(fixed_env, curriculum, backend="Multiprocessing", num_envs=2 * cores,
                               num_workers=2 * cores)
    message = ("Expected a `batch_size` that whole workers can serve with at most "
               f"{cores} workers (the physical cores) over num_envs={2 * cores}, received 1; pass num_workers= and "
               "overwork=True")
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        make_curriculum_vecenv(fixed_env, curriculum, backend="Multiprocessing", num_envs=2 * cores, batch_size=1)


def test_serial_takes_only_one_synchronous_batch(make_curriculum: Any) -> None:
    message = ("Expected `batch_size` None or num_envs=4 on Serial (one synchronous batch), received 2; smaller "
               "batches need backend='Multiprocessing'")
    with pytest.raises(CurriculumConfigError, match=f"^{re.escape(message)}$"):
        make_curriculum_vecenv(fixed_env, make_curriculum(two_label_config()), num_envs=4, batch_size=2)


@pytest.mark.parametrize(("backend", "tracking"), DESIGNS)
def test_stepping_before_the_reset_and_after_close_is_refused_by_name(make_curriculum: Any, backend: str,
                                                                     tracking: str) -> None:
    """pufferlib's own refusal surfaced as "module 'pufferlib' has no attribute 'APIUsageError'"."""
    curriculum = make_curriculum(two_label_config(), shared=tracking == "shared")
    vecenv = make_curriculum_vecenv(fixed_env, curriculum, backend=backend, tracking=tracking, num_envs=NUM_ENVS,
                                    **vec_options(backend))
    actions = np.zeros(NUM_ENVS, dtype=np.int32)
    with vecenv:
        message = "The vecenv was stepped before its reset; call reset() (or async_reset() and recv()) first"
        with pytest.raises(EpisodeNotStartedError, match=f"^{re.escape(message)}$"):
            vecenv.step(actions)
        message = "recv() called with nothing to receive; call async_reset() or send() first"
        with pytest.raises(EpisodeNotStartedError, match=f"^{re.escape(message)}$"):
            vecenv.recv()
        vecenv.reset()
        message = (f"Expected actions in the vecenv's action space {vecenv.action_space}, received an array of shape "
                   "(3,) and dtype int32")
        with pytest.raises(EnvContractError, match=f"^{re.escape(message)}$"):
            vecenv.step(np.zeros(3, dtype=np.int32))
        vecenv.step(actions)
    message = "The vecenv is closed and its workers are stopped; build a new one"
    with pytest.raises(WorkerProcessError, match=f"^{re.escape(message)}$"):
        vecenv.step(actions)
    assert all(process.exitcode is not None for process in getattr(vecenv.vecenv, "processes", ()))


@MP
def test_a_centralized_completion_from_an_env_with_dict_infos_reaches_the_main_process(make_curriculum: Any) -> None:
    """With one env per worker pufferlib extends the step's infos with what the worker sent, so a
    dict would arrive as its keys, the completion lost."""
    curriculum = make_curriculum(staged_config(num_stages=2, min_episodes=1000))

    def dict_info_env(buf: Any = None, seed: int = 0) -> ScriptedFailuresEnv:
        return ScriptedFailuresEnv(buf=buf, seed=seed, dict_infos=True)

    with make_curriculum_vecenv(dict_info_env, curriculum, backend="Multiprocessing", tracking="centralized",
                                num_envs=2, num_workers=2) as vecenv:
        vecenv.reset()
        ended = []
        for _ in range(8):
            ended += [info for info in vecenv.step(np.zeros(2, dtype=np.int32))[4] if stat_key("episodes") in info]
    assert len(ended) == 4 and all(info["fixed_episode"]["length"] == 4 for info in ended)
    assert vecenv.completions == curriculum.tracker.total_completions == 4


@pytest.mark.parametrize("batch_size", [None, NUM_ENVS])
def test_serial_accepts_the_default_and_the_full_batch(make_curriculum: Any, batch_size: int | None) -> None:
    """pufferlib's Serial takes `batch_size` as its number of envs, so batch_size=None used to
    fail inside pufferlib with a TypeError (found by tests/faults/test_input_faults.py)."""
    with make_curriculum_vecenv(fixed_env, make_curriculum(two_label_config()), num_envs=NUM_ENVS,
                                batch_size=batch_size) as vecenv:
        assert vecenv.num_envs == NUM_ENVS
        vecenv.reset()
        assert len(vecenv.step(np.zeros(NUM_ENVS, dtype=np.int32))[1]) == NUM_ENVS


def test_pufferlib_usage_errors_keep_their_own_message() -> None:
    """pufferlib-core 3.0.7 raises `pufferlib.APIUsageError` without exporting it; with
    curriculum.vector imported its messages come through instead of an AttributeError."""
    with pytest.raises(pufferlib.APIUsageError, match="^num_envs must be divisible by num_workers$"):
        pufferlib.vector.make(fixed_env, backend=pufferlib.vector.Serial, num_envs=2, num_workers=3)
