"""Every limit the scenario gate checks, in one place, with the calibration behind it.

Statistical checks (`harness.experiments.CHECKS`) judge the mean of a number over the
`seeds` of their setup (base seed B: seeds B*seeds .. B*seeds+seeds-1); their limits come from `benchmarks/calibrate_gate.py`, which replays
each check under many base seeds with the unmodified built-in curriculum (the false-alarm rate)
and with the degraded curricula of `harness.faults.DEGRADATIONS` (the power). Each limit's
docstring states those figures. Exact checks (counts, orders, the accounting oracle) have no
tolerance to calibrate.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["STAGED", "MULTI_AGENT", "WORKER_STREAMS", "IMPOSSIBLE_TASKS", "DEPENDENCY_CHAIN", "EVICTION", "CHECKPOINT", "SHARED_TRACKER", "DESYNC", "STAGE_SYNC", "ENV_WRAPPER", "FORGETTING", "AFTER_MASTERY", "RAY_SERVICE",
           "INVARIANCES", "TASK_GENERATORS", "WORKER_FAILURES"]


@dataclass(frozen=True)
class ImpossibleTasksLimits:
    """Scenario 1: impossible tasks get low learning progress."""

    seeds: int = 20
    """Seeds each check of these setups judges (their mean)."""
    episodes: int = 4000
    """Episodes per run (direct runner)."""
    pool: int = 32
    warmup_episodes: int = 500
    """Samples before this are not counted in shares."""
    epoch_length: int = 250
    lp_skip_epochs: int = 2
    """Per-label LP is averaged over epochs after the first two (the warm-up)."""
    # Each limit below: the built-in's mean over 4000 seeds (0-3999) plus or minus 4.5 standard
    # deviations of a 20-seed mean; "replays": the check's mean at base seeds 0-199 (disjoint
    # seeds), none of which fails.
    max_zero_share: float = 0.042
    """5 learnable + 5 always-zero tasks: impossible share of samples (uniform 0.50). Per seed
    0.0364 +- 0.0053; replays 0.0338-0.0404."""
    min_lp_gap: float = 0.072
    """Mean per-label LP of every learnable label minus every impossible label, the lower of
    the two spaces' limits: always-zero per seed 0.0959 +- 0.0175, replays 0.0853-0.1050;
    constant-plus-noise 0.0904 +- 0.0177, replays 0.0793-0.1029."""
    max_noise_share: float = 0.084
    """5 learnable + 5 constant-plus-noise tasks (uniform 0.50). Per seed 0.0640 +- 0.0191;
    replays 0.0530-0.0782."""
    min_mostly_impossible_learnable_share: float = 0.84
    """5 learnable + 45 impossible: learnable share (uniform 0.10). Per seed 0.877 +- 0.034;
    replays 0.856-0.894."""


IMPOSSIBLE_TASKS = ImpossibleTasksLimits()


@dataclass(frozen=True)
class DependencyChainLimits:
    """Dependency chain: mastery order and speed against uniform practice."""

    seeds: int = 10
    """Seeds each chain check judges (their mean); a chain run costs ~10x an impossible-tasks run."""
    num_tasks: int = 10
    pool: int = 32
    max_episodes: int = 60_000
    check_every: int = 50
    """Mastery of all tasks is checked every this many episodes."""
    baseline_runs: int = 1
    """Uniform-practice runs whose median is a seed's baseline (their spread, ~1.5%, is small
    beside the curriculum's, and the check averages over seeds)."""
    max_ratio_to_uniform: float = 0.45
    """Episodes to master all tasks with the curriculum / uniform random practice, same seed;
    the median over the seeds is judged (robust to a seed that never finishes). 4000 seeds:
    median 0.383, 90th percentile 0.453, worst 0.771. (Before admission preferred
    configurations the pool lacks, 4 of 2000 seeds never mastered the chain within
    `max_episodes`, 3.1-3.2: the pool's first fill had missed a chain task and the pool
    settled without it.) Medians of 10 replayed at base seeds 0-399: 0.347-0.434, sd 0.0152;
    the limit is their mean + 4.4 sd."""
    min_index_shift: float = 2.5
    """Mean sampled task index in the last third of the run minus the first third: sampling
    mass moves along the chain. Per seed 3.29 +- 0.51 (4000 seeds); 10-seed means at base
    seeds 0-399: 2.86-3.76; the limit is below the mean - 4.5 sd of a 10-seed mean (2.56)."""


@dataclass(frozen=True)
class EvictionLimits:
    """Eviction health: a full pool, evicting only stagnant, well-presented tasks."""

    seeds: int = 10
    """Seeds the mean-rank check judges (each run inspects the pool around every call)."""
    episodes: int = 4000
    pool: int = 32
    high_rank: float = 0.5
    max_high_ranked: int = 3
    """Evictions of a task that scored above `high_rank` of the eligible tasks just before it
    left, counted over all the runs. The eviction shortlist is refreshed every
    `refresh_interval` completions, so a single eviction can lag the live ranking: 400 seeds,
    3944 evictions, 9 above 0.5 (0.23%, about 0.23 per 10 runs; 2 seeds had one above 0.75).
    Four or more in 10 runs: about 1e-4 of gate runs."""
    max_mean_rank: float = 0.04
    """Mean rank over all evictions of a run, its mean over the seeds judged. 4000 seeds: 96.8%
    at exactly 0, the rest 0.011-0.235 (mean 0.0016; 5 seeds above 0.1); 10-seed means at base
    seeds 0-399: at most 0.024. Resampled 10-seed means exceed 0.03 in 2e-4 of draws and this
    limit in 1.4e-5 (a canary that evicts by highest score ranks near 1)."""
    min_evictions: int = 40
    """Evictions must actually happen in this task space (5 learnable + 5 impossible), counted
    over all the runs: the built-in curriculum keeps one task of every configuration and stops
    evicting once admissions find nothing better, so a run evicts 4-20 times (40 seeds: mean
    9.9, so about 99 per 10 runs)."""


@dataclass(frozen=True)
class CheckpointLimits:
    """Checkpoint/resume: stop, save, restore, continue == uninterrupted run."""

    episodes_before: int = 1500
    episodes_since_refused: int = 40
    """Episodes played between the checkpoint the refused ones are altered from and the state
    they must leave unchanged (a refused load that kept any part, its random state included,
    shows)."""
    episodes_after: int = 1500
    in_flight: int = 8
    """Most episodes running at once in the run that checkpoints with episodes in flight."""
    unreported_share: float = 0.03
    """Of its finished episodes, the share never reported (cut by a desync)."""
    in_flight_checkpoints: int = 10
    """Checkpoints of that run, each restored into a fresh curriculum (evenly spread)."""
    pool: int = 32
    """Pool of the run whose checkpoint is restored under changed configs."""
    min_changed_fields: int = 6
    """Config fields (curriculum's and algorithm's) the changed-config check must be able to change."""
    generator_probe_ids: int = 64
    """Task ids a changed generator must give other tasks for (to count as a changed config)."""
    many_labels: int = 4000
    """Labels (one per task) of the run whose pool holds more than learning progress tracks."""
    many_labels_pool: int = 1000
    """Its pool: about 880 distinct labels, against a table of 256 (`LABEL_TABLE_SIZE`)."""
    extreme_episodes: int = 2000
    """Episodes of the run whose scores are the most variable the range allows."""
    extreme_every: int = 100
    """That run is checkpointed (and restored into a fresh curriculum) every so many episodes."""
    extreme_pool: int = 16
    """Its pool."""
    cancelling_episodes: int = 1000
    """Episodes of the staged run whose window's scores cancel to about 0, each followed by a
    checkpoint restored into a fresh curriculum (a window of 3: its running sum drifts a few
    ulps below 0 and above the exact sum between re-sums)."""
    far_range_episodes: int = 300
    """Episodes of the one-task run on a narrow score range far from zero, each followed by a
    checkpoint restored into a fresh curriculum (on (1e6, 1e6 + 0.1) a sum of top scores is
    first a few ulps past the top after 23 of them)."""


DEPENDENCY_CHAIN = DependencyChainLimits()
EVICTION = EvictionLimits()
CHECKPOINT = CheckpointLimits()


@dataclass(frozen=True)
class SharedTrackerLimits:
    """Lock removal must not corrupt stats: exact counts under real concurrency."""

    writers: int = 8
    """More writer processes than cores, so a process is often preempted right around its lock
    operations: a commit made after the unlock, rather than before it, then loses updates in
    every run (with 3 writers, in about half the runs)."""
    readers: int = 1
    racing_read_seconds: float = 1.0
    """The racing-reads check: how long this process reads task ids lock-free while a writer
    opens, fills and aborts sections without pause (a read that skips its re-check returned a
    never-committed id about 10-100 times a second here)."""
    updates_per_writer: int = 3000
    pool: int = 1
    """One task, so every writer collides on the same counters (without the lock, updates are
    lost in most runs, though not all: the stuck-holder check is the deterministic one)."""
    journal_pool: int = 16
    """Pool of the stuck-writer check, whose open update writes every row: more rows than the
    shared tracker journals one by one (8), so it journals them all at once mid-update."""
    rollback_pool: int = 16
    rollback_updates: int = 40
    """Pool of the check of a checkpoint restored under an attached handle, and the handle's
    updates per task before it (learning progress evicting: 2-11 of 16 slots change in 20 per
    task, seeds 0-5; a restore then puts older ids back into those)."""
    large_config_memory: int = 65_536
    """A configuration memory of learning progress far larger than a section writes."""
    differential_sections: int = 400
    """Sections of seeded tracker calls given to a local and a shared tracker alike."""
    journal_history: int = 60
    """Updates committed before the stuck writer's, per task of its pool."""
    journal_history_extra: int = 7
    """And these more: a staged window as long as the pool then writes at a position other than
    the slots the stuck writer touches (a window position mistaken for a slot shows)."""
    min_history_evictions: int = 4
    """Evictions the evicting history must make (the built-in: 14-138 at seeds 0-19)."""
    late_reports_per_writer: int = 5000
    """Completions each writer reports for tasks that already left the pool (all late), at once."""
    unpickling_writers: int = 1
    """Writer processes (spawned: 1.6 s of imports each) each unpickling its own copy of the
    curriculum while the parent keeps recording."""
    recorded_around_pickling: int = 100
    """Completions the parent records before it pickles the curriculum, after (before the copies
    unpickle it), and while they write."""
    lock_timeout: float = 1.0
    """Seconds a writer waits for a lock held by a live, stuck process before it errors (the
    checks that expect a stuck holder or a leaked lock; the others use the library's default:
    under load on two cores, a holder among eight contending writers was once descheduled with
    the lock for over 1 s)."""
    checkpoint_pool: int = 100_000
    checkpoints_taken: int = 100
    """Pool of the run whose checkpoints are taken while a worker records without pause, and
    how many: a copy of a 100,000-task pool takes long enough for completions to land during it
    (a snapshot not re-checked after its copy was torn in 4 to 29 of 100 over seeds 0-7)."""
    meanwhile_start: float = 0.15
    """Seconds given to what other processes do while a writer's update is open (unpickling a
    copy, a completion waiting for the lock) to get under way before the update commits."""
    change_attempts: int = 1000
    """Completions a stuck writer may make in its open update until one evicts a task (after
    the evicting history, seeds 0-19: 2-139) or advances the stage (about half the window)."""
    killed_creator_unlinked: float = 10.0
    """Seconds within which a SIGKILLed creator's tracker must be unlinked (measured: under 0.03 s)."""
    kill_pool: int = 8
    kill_history: int = 300
    kill_min_repaired: int = 20
    kill_close_every: int = 4
    """The kill-at-every-line check: its pool, the committed episodes before it (which evict; a
    few more at a time until a completion evicts its task),
    the fewest kills that must land inside a transaction (seed 0: 207 of 236), and every how
    many of those lines a writer also closes its curriculum there before it exits."""
    joining_trainers: int = 2
    """Processes started on their own that attach, record and exit one after another (the
    second finds the block the first could have taken with it)."""
    busy_hold: float = 0.8
    max_lag_after_release: float = 0.3
    """Seconds a live holder keeps the lock busy, and how long after its release the writer
    waiting on it may take to get it (measured: under 0.01 s; a back-off of 20 us doubling
    without a cap sleeps from 0.66 s to 1.31 s, 0.5 s past the release)."""
    handovers: int = 6
    handover_every: float = 0.3
    """Times a holder hands the lock on (to itself, at once) before it gets stuck, and the
    seconds between two handovers, in timeouts (each shorter than one: the wait goes on; all
    of them longer than one, so a timeout counted from the start of the wait shows)."""
    stuck_after_handovers: float = 10.0
    """Seconds it then holds the lock (a waiter that never times out gets it after that)."""
    max_wait_after_handovers: float = 3.0
    """Timeouts a waiter may take after the last handover before `LockTimeoutError`."""
    handover_attempts: int = 8
    """Updates tried: one that wins a handover goes through, and the next waits again."""
    max_wait_after_kill: float = 5.0
    """Seconds the survivors may take to finish once the lock holder was SIGKILLed."""


SHARED_TRACKER = SharedTrackerLimits()


@dataclass(frozen=True)
class DesyncLimits:
    """Scenario 4: desync truncation must not starve rewards (seeds/004)."""

    workers: int = 8
    max_steps: int = 200
    """Episode length of the resource-chain env (first heart at step 85)."""
    rollout_steps: int = 1000
    """Vec steps per run: five full episodes per worker."""
    min_truncate_spread: float = 0.25
    """(latest - earliest) first-episode end across workers, as a fraction of max_steps, with
    the truncating mode (cut points uniform in [1, max_steps]; 8 workers: expected ~0.78)."""
    min_legacy_spread: float = 0.10
    """The same with the legacy mode (first lengths uniform in [max_steps/2, max_steps];
    expected ~0.39)."""
    time_limit_steps: int = 300
    """Vec steps of the time-limit run (episodes of 2-5 steps ending in three ways)."""
    min_reward_rate_ratio: float = 0.70
    """Reward per step over the first two episode lengths with the desync mode in use (legacy,
    full first episodes), divided by the same with no desync (30 seeds: mean 0.85, worst 0.80;
    spreads: legacy worst 0.26, truncate worst 0.50)."""


DESYNC = DesyncLimits()


@dataclass(frozen=True)
class StageSyncLimits:
    """Scenario 2: one staged curriculum across many workers stays consistent (seeds/003)."""

    num_envs: int = 4
    num_workers: int = 2
    """Multiprocessing workers (2 envs each)."""
    stage_episode_lengths: tuple[int, ...] = (5, 7, 9)
    """One stage per length: an episode's length tells which stage it ran."""
    stage_length_spread: int = 1
    """Staggered stages (the stage-sync check): a stage's tasks last its length up to this many
    steps more (lengths stay distinct across stages)."""
    pool: int = 8
    """Tasks in the pool (distinct configs of the stage: each episode tells which task it ran)."""
    broadcast_stages: int = 3
    """The broadcast check: a published state's stage is its change count modulo this."""
    broadcast_read_seconds: float = 0.5
    """How long a worker reads the broadcast while the main process publishes without pause
    (an unchecked read showed about one torn state in 15,000: 245 in 3.6 million)."""
    broadcast_read_timeout: float = 10.0
    """Seconds a worker's read of the broadcast may take after a publish (it takes microseconds)."""
    broadcast_min_reads: int = 100_000
    published_while_read: int = 3
    """States the racing-broadcast check publishes, each just as the worker read the one before."""
    min_episodes: int = 24
    window: int = 12
    advancement_threshold: float = 0.9
    vec_steps: int = 400
    agree_vec_steps: int = 250
    """The main stage-sync run (five vectors): the last stage is reached after about 80 vec
    steps, the rest runs at it (each env ends about 16 episodes there)."""
    max_stage_lag_vec_steps: int = 1
    """A task drawn this many vec steps after an advancement must be of the new stage."""
    followed_share_gap: float = 0.15
    """Largest gap between the share of episodes a centralized vector's workers give paying tasks
    and the main curriculum's sampling mass on them: 160 episodes, whose share near one half has
    a standard deviation of 4 points (at most 9.4 over seeds 0-39 of uniform and staged
    progression; copies that cannot follow learning progress: 43)."""
    # The regressing run (centralized, Multiprocessing, one env per worker): stages of paying and failing tasks, decided on
    # two episodes each, so the stage changes at almost every vec step, back and forth.
    regressing_lengths: tuple[int, ...] = (1, 1, 8)
    """Episode lengths of every stage's tasks (workers end episodes at different steps)."""
    regressing_window: int = 2
    """`window` and `min_episodes` of the regressing run."""
    regressing_vec_steps: int = 400
    min_regressions: int = 10
    """Regressions the regressing run must make, so that it exercises the case it checks (the
    built-in: 24-34 at seeds 0-7)."""


STAGE_SYNC = StageSyncLimits()


@dataclass(frozen=True)
class RayServiceLimits:
    """One curriculum served by a Ray actor to workers on Ray actors (`curriculum.ray_service`).

    The stage-sync run reuses `STAGE_SYNC`'s stages, pool and advancement rule; only the Ray
    topology and the client's queue are set here.
    """

    num_envs: int = 4
    num_workers: int = 2
    """Ray worker actors (2 envs each, one client per worker)."""
    prefetch: int = 2
    """Tasks each worker's client keeps queued (`CurriculumClient(prefetch=)`)."""
    queued_batch_size: int = 64
    """Batch size of the clients whose completions stay queued until the vector closes."""
    close_failing_vec_steps: int = 30
    """Vector steps of the run whose envs fail to close."""
    late_close_delay: float = 2.0
    """Seconds the late worker's env waits before its close fails (the other's fails at once)."""
    schedule_checkpoint_requests: float = 0.025
    """Share of the service schedule's calls before which a checkpoint is written on request."""
    restart_stage_calls: int = 40
    """Completions of score 1.0 before the staged service is killed and restarted by Ray (the
    stages advance on the first 8; the rest only raise its answer numbers)."""
    stage_order_prefetch: int = 8
    """Tasks queued by the client of the run whose answers come out of order (a refill in flight
    beside every batch)."""
    stage_order_calls: int = 24
    """`get_task()` calls of that run (a batch of four scores of 1.0 after every fourth)."""
    batch_size: int = 1
    """Completions per client call: 1, so each episode's own late verdict is in its info and
    the accounting oracle's per-episode counters are exact."""
    accounting_vec_steps: int = 120
    """Vec steps of the accounting run (episodes of 2-4 steps: about 160 episodes)."""
    deferred_batch_size: int = 8
    """The batching client's batch (the wrapper's counters check): verdicts come back later,
    several late ones at once now and then (which a batch of 4 seldom brought back)."""
    deferred_steps: int = 200
    """Steps of each of the two in-process envs sharing the batching client (100 episodes each)."""
    stage_vec_steps: int = 300
    """Vec steps of the stage-sync run (episodes of 5, 7, 9 steps, `STAGE_SYNC.min_episodes` 24
    per stage over 4 envs: the last stage is reached after roughly 80 vec steps)."""
    vec_steps_after_last_stage: int = 24
    """The stage-sync run stops this many vec steps after the service reached its last stage
    (or after `stage_vec_steps`): each worker has then started more than `prefetch` episodes
    of it (9 steps each, 2 envs per worker), and older-stage starts can only come before."""
    max_stale_starts_per_advancement: int = 2
    """Episodes of an older stage one worker may start after the service advanced: the
    client's documented staleness bound (`curriculum.ray_service`: a task handed out was drawn
    at most `prefetch` of this worker's draws earlier), so exactly `prefetch`; no tolerance."""
    max_delay: float = 0.05
    """`CurriculumClient(max_delay=)` of the time-bound check (seconds)."""
    max_delay_interval: float = 0.02
    """Seconds between that check's completions (a sleep: under load only longer, and fewer queue)."""
    max_delay_batch_size: int = 64
    """Its batch size: far above what `max_delay` lets queue."""
    max_delay_completions: int = 30
    """Completions of the time-bound check."""
    schedule_calls: int = 1000
    """Calls of the service's accounts check (a seeded schedule of what 3+ clients do)."""
    schedule_checkpoint_interval: int = 10
    """The service's `checkpoint_interval` in that check (a few batches between files)."""
    client_calls: int = 300
    """Calls of the clients' accounts check (a seeded schedule of what 3 workers' clients do)."""
    client_stall: float = 1.0
    """Seconds the service stalls in that check's calls that time out."""
    client_short_timeout: float = 0.25
    """A client's `timeout` in those calls (under the stall, so each times out)."""
    out_of_range_reward: float = 0.75
    out_of_range_length: int = 2
    """The reward per step and length of the episodes of the Ray step-error check: a return of
    1.5, out of the default score range."""
    out_of_range_steps: int = 6
    """Steps that check runs at most (its episodes end, refused, at `out_of_range_length`)."""
    frozen_worker_timeout: float = 15.0
    """`worker_timeout` of the frozen-worker check, whose vector starts only once every worker's
    client has registered with the service (start-up is no longer in it): a step and a close
    each take milliseconds then, so a worker that does not answer in 15 s is frozen."""
    stopped_workers_within: float = 30.0
    """Seconds the frozen-worker check gives the cluster to end every worker's process once
    the vector closed itself (`ray.kill` is asynchronous; a second or two on two busy cores)."""
    client_evictions: int = 2
    """Evictions after which that check's restoring client draws tasks until one is a task the
    state before them lacks (at most `client_calls` completions, then draws, to get there)."""


RAY_SERVICE = RayServiceLimits()


@dataclass(frozen=True)
class StagedLimits:
    """Staged progression: advance and regress exactly by the rule, on a forgetting chain."""

    num_stages: int = 3
    pool: int = 4
    forgetting_rate: float = 5e-4
    advancement_threshold: float = 0.7
    regression_threshold: float = 0.3
    min_episodes: int = 30
    window: int = 20
    episodes: int = 3000
    epoch_length: int = 250
    num_envs: int = 4
    """Envs of the Serial run."""
    previous_stage_mix: float = 0.25
    """Share of the pool the mixed run gives to the previous stage's tasks."""
    min_advancements: int = 3
    """The runs must exercise the rule (seeds 0-4, direct runner: 8-12 advancements)."""
    min_regressions: int = 2
    """(seeds 0-4, direct runner: 7-11 regressions)."""
    sweep_max: int = 4
    """The rule sweep pairs every `min_episodes` and `window` from 1 to this."""
    sweep_episodes: int = 400
    """Episodes per config of the sweep."""
    sweep_run_length: float = 6.0
    """Mean length of the sweep's runs of high scores (0.5, 0.75 or 1) and low ones (0, 0.25 or 0.5)."""
    sweep_broadcast_every: float = 40.0
    """Mean episodes between two stages the sweep's curriculum adopts from a broadcast (a
    random stage, as a main curriculum or a re-broadcast checkpoint decides it elsewhere)."""
    sweep_mixes: tuple[float, ...] = (0.0, 0.3, 0.4, 0.9)
    """Previous-stage mixes of the sweep: 0.3 of the pool is 1.2 slots, which rounds to 1 (not
    up to 2); 0.4 is 1.6, which rounds to 2 (not down to 1); 0.9 is 3.6, which rounds to the
    whole pool (one slot must still run the current stage)."""
    sweep_thresholds: tuple[float, float] = (0.75, 0.25)
    """Advancement and regression thresholds of the sweep: window means of its scores land on
    them exactly (the rule advances at a mean equal to the threshold, regresses only below)."""
    sweep_tenths_thresholds: tuple[tuple[float, float], ...] = ((0.7, 0.3), (0.4, 0.1))
    sweep_tenths_mixes: tuple[float, ...] = (0.0,)
    """The sweep again on scores in tenths, whose sums round: threshold pairs their window means
    land on (the second where a running sum rounds above an exact mean just below it: 0.2,
    0.1 and 0.9 sum to 1.2000000000000002, whose third is above 0.4, 1.2's below), and the
    mixes of those runs."""
    sweep_score_range: tuple[float, float] = (-3.0, 46.0)
    sweep_score_range_thresholds: tuple[tuple[float, float], ...] = ((0.75, 0.25), (1.0, 0.5))
    """The quarters sweep (mix 0 alone) again with every score mapped into this range, of span
    49: a quarter times 49 is exact and so is its normalisation back by division, but times the
    reciprocal of 49 it rounds (1 to 0.9999999999999999): at these thresholds (the second the
    domain's top, which only a perfect window reaches) the rule must move as on [0, 1]."""


STAGED = StagedLimits()


@dataclass(frozen=True)
class MultiAgentLimits:
    """Multi-agent episodes: agents with different rewards and ends, recorded exactly once."""

    num_agents: int = 3
    pool: int = 9
    num_envs: int = 4
    steps: int = 120
    """Steps (vec steps) per run; episodes last 3-5 steps."""
    min_episodes: int = 20
    """Episodes one env at least completes in `steps` (24 with the slowest tasks)."""
    after_done_reward: float = 0.5
    """Written for agents already done while others play: in no return."""
    stats_interval: int = 5
    """Completions between two pool-wide reports of one recorder (each env's, or the main
    process's under centralized tracking)."""
    worker_timeout: float = 20.0
    """Of the Multiprocessing vectors: a reset that waits on a worker that already answered
    fails, named, instead of hanging the gate (a step takes microseconds)."""
    in_flight_reset_every: int = 10
    in_flight_reset_pauses: tuple[float, ...] = (0.0, 0.05, 0.05, 0.05)
    """After the midway reset, every `in_flight_reset_every` steps: a step sent, then a reset
    after each pause in turn (0: the workers may still be stepping; 0.05 s: they have answered,
    their infos unread; in three of them at least one env ends an episode)."""
    batch_of_one_steps: int = 12
    """Steps after each run of calls in the batches-of-one reset check (an episode ends in every
    worker within them)."""
    reset_deadline: float = 30.0
    """Seconds a vector's `reset()` may take before the check fails it by name: a reset that
    blocks where `worker_timeout` does not reach (a pipe read for good) must not hang the gate."""
    call_orders: int = 160
    """Orders of vector calls in the random-order check (`_CALL_ORDERS`: most of them steps)."""


MULTI_AGENT = MultiAgentLimits()


@dataclass(frozen=True)
class WorkerStreamLimits:
    """Worker streams: different per worker process, reproducible per seed."""

    pool: int = 48
    num_envs: int = 4
    num_workers: int = 2
    vec_steps: int = 150
    compared_prefix: int = 40
    """Episodes of two workers' first envs compared position by position."""
    max_shared_draws: int = 12
    """Positions where two independent uniform streams may draw the same task (32 distinct
    configurations in the pool): the count is about Binomial(40, 0.04), mean 1.6; 12 or more
    has probability below 1e-7. Identical streams score 40."""
    other_seed_offset: int = 1000
    stream_seeds: tuple[int, ...] = (0, 1, 12345)
    """Seeds the one-stream-per-seed check sets in every way (0 first: it reads as "no seed" to a
    truthiness test)."""
    stream_draws: int = 40
    """Draws (or episodes) compared per seed and way."""
    sweep_builds: int = 30
    """Curricula built, wrapped with a seed and dropped one after another in one process."""
    unseeded_handles: int = 3
    """Processes that each attach a handle without a seed: their draws must all differ."""
    reseed_episodes: int = 137
    """Episodes recorded before a reseed (not a multiple of the pool: a batch of draws is in use)."""


WORKER_STREAMS = WorkerStreamLimits()


@dataclass(frozen=True)
class EnvWrapperLimits:
    """Config applied at reset, and per-label metrics through the stats pipeline."""

    episodes: int = 300
    """Episodes of the single-env config check."""
    echo_steps: int = 40
    """Steps of the check whose env writes numbers under the wrapper's names (about 20 episodes)."""
    report_completions: int = 12
    """Completions of the pool-report cadence check (two-step episodes)."""
    failing_call_steps: int = 6
    """Steps (three two-step episodes) within which a curriculum method that raises must reach the trainer."""
    late_report_interval: int = 3
    """`stats_interval` of the two wrappers whose completions are often late (stage changes)."""
    late_report_steps: int = 60
    """Steps of each of those wrappers (episodes of 2 and 3 steps: about 50 completions in all)."""
    abandon_every: int = 4
    """Of those, every this-many-th is abandoned by a `reset()` after its first step."""
    fail_every_reset: int = 7
    """The pufferlib-wrapper check's env fails every this-many-th reset (its start is retried)."""
    fail_every_config: int = 9
    """And every this-many-th `set_env_config` (the next task's config refused by the env, an
    auto-reset's included): the retried start runs the task drawn for it."""
    fail_every_draw: int = 5
    """One `get_task()` call in this many fails there, at random (before drawing anything, as a
    lock timeout does): the draw is retried by `reset()`."""
    fail_every_record: int = 6
    """One completion in this many fails to record there, at random (before recording anything):
    the episode is dropped, neither recorded nor counted."""
    num_envs: int = 4
    vec_steps: int = 600
    epoch_steps: int = 150
    """Vec steps per stats epoch of the per-label check."""
    metric_inputs: int = 500
    """Random sparse distributions the Gini and entropy definitions are checked on."""
    pipeline_epochs: int = 200
    pipeline_steps: int = 6
    """Epochs (of this many vec steps each) of random infos the stats pipeline reduces."""
    churn_episodes: int = 1500
    """Episodes of the churning run whose tasks are checked against their generator."""
    min_churn_evictions: int = 8
    """Evictions the churning run needs for its check to mean something (17 the fewest over seeds 0-19)."""
    renumbered_vec_steps: int = 300
    """Vec steps of each run of the task-id scheme relation."""
    renumbered_stats_interval: int = 3
    """Completions between two pool reports there (a report rebuilds the wrapper's per-task LP)."""
    label_lp_episode_lengths: tuple[int, ...] = (1, 3)
    """Episode lengths of the two envs whose reported per-label LP is checked (different, so one
    env's completions evict tasks the other is running)."""
    label_lp_steps: int = 600
    label_lp_stages: int = 3
    label_lp_stage_window: int = 10
    label_lp_forgetting: float = 2e-3
    label_lp_groups: int = 24
    """Labels of the run with more labels than the pool's 16 slots (task index modulo this)."""
    """Steps of each of those envs."""
    lp_episodes: int = 3000
    """Episodes of the run whose per-task learning progress is held to its definition."""
    lp_check_every: int = 20
    """Episodes between two comparisons of every task's learning progress with the reference."""
    lp_forget_at: float = 0.5
    """Share of those episodes after which the learned tasks are forgotten (lost ground counts)."""
    rules_episodes: int = 2500
    """Episodes of the run whose every completion and refresh is held to the documented rules of
    learning progress."""
    crowded_labels: int = 8
    crowded_labels_episodes: int = 1000
    crowded_min_admissions: int = 5
    """Labels sharing one home in the label table (half of them untracked), the episodes of the
    rules check on them, and the fewest admissions of an untracked label it must see (seeds
    0-19: 9-22)."""
    rules_one_configuration_episodes: int = 1200
    """Episodes of the same check on a pool of copies of one configuration (learned within about
    200, forgotten at 600, learned again)."""
    shortlist_largest_pool: int = 100
    """The shortlist check's pools: every size up to this at which some percentile rounds
    differently in floating point (50, 90 and 100 tasks)."""
    shortlist_episodes_per_task: int = 20
    """Completions per pool task before the shortlist check's one refresh (cold tasks are drawn
    first: every task is presented long before)."""
    random_states_run: int = 300
    """Episodes played before the checkpoint whose statistics the random states replace."""
    random_states: int = 400
    """Random states restored and held to the rules."""
    rules_stats_every: int = 8
    """Episodes between two comparisons of `stats()`'s pool counts with the rules (stats() takes
    as long as a completion and a refresh together)."""
    published_pool: int = 32
    published_episodes: int = 2000
    published_min_ratio: float = 0.0
    """The run whose draws are held to the distribution each refresh publishes: its pool, its
    episodes (one refresh each) and the least log-likelihood ratio of the draws, published
    distribution against the previous one (seeds 0-39: 29.8 to 174.0; a sampler one refresh
    behind: -176.4 to -25.7)."""
    give_up_impossible: int = 19
    give_up_pool: int = 16
    give_up_history: int = 4000
    """The run whose admissions nearly all fail: impossible tasks beside one learnable, its pool,
    and the episodes after which it stops waiting for the learnable task's mastery (600-1900 at
    seeds 0-7; never in 8000 at seed 52) before it stops at warm stagnant tasks in the pool."""
    give_up_failure: float = 0.99
    give_up_episodes: int = 1000
    """The failed-admission rate it is then set to (its checkpoint edited; seed 2 reaches 0.95 by
    itself), and the episodes that must then evict nothing."""
    counts_refresh_intervals: tuple[int, ...] = (5, 16)
    """Completions between refreshes in the check of the pool counts `stats()` reports (the
    documented-rules check reads them at a refresh every completion)."""
    counts_eviction_percentiles: tuple[float, ...] = (0.0, 50.0, 100.0)
    counts_episodes: int = 400
    """Episodes of that check per setting, the counts compared after each."""
    handles: int = 4
    handles_refresh_interval: int = 64
    """Handles of one shared pool in the eviction check, and their refresh interval (long: a
    shortlist mark stays stale for many of the other handles' completions)."""
    handles_variants: int = 5
    handles_min_presentations: int = 5
    """Variants of each kind there (40 configurations for 16 slots: churn), and completions
    before a task may be evicted (the warm-up: a task admitted by another handle becomes
    eligible soon)."""
    handles_meanwhile: int = 10
    """Episodes another handle plays in the middle of a handle's refresh."""
    handles_runs: int = 4
    """Runs of that check per base seed (each with its own seed): a handle reading the pool's
    ids after another one acted in its refresh shows in 30-50% of runs."""
    handles_episodes: int = 3000
    handles_min_evictions: int = 5
    """Episodes of that check, and the evictions it needs to mean something (the fewest over
    seeds 0-19: 11)."""
    memory_episodes: int = 2000
    memory_entries: int = 5
    memory_variants: int = 32
    memory_eviction_percentile: float = 50.0
    """The run that fills learning progress's memory of configurations: episodes, memory
    entries (no power of two: a position masked instead of wrapped shows), variants of each
    kind (128 configurations), and the share of the pool a refresh may evict (churn: every warm
    evicted task is remembered)."""
    memory_few_entries: int = 4
    memory_few_variants: int = 2
    memory_few_runs: int = 3
    memory_few_episodes: int = 6000
    memory_min_hits: int = 3
    """A memory of four entries (its probes reach every one) over two variants of each kind and
    rate: runs per base seed, episodes each, and the admitted tasks that must find their
    configuration in it over those runs (the fewest over base seeds 0-9: 6)."""
    memory_min_replacements: int = 8
    """Evictions into a full memory that run must see to mean something (the fewest over seeds
    0-19: 13)."""
    rules_min_steps: int = 10
    """Refreshes each of its rules (learning progress, the fallback, the frontier, revisits of
    learned and of stalled tasks, retries, cold tasks) must have had a say in for the check to
    mean something (the fewest over seeds 0-11 and both settings: 20, stalled tasks revisited)."""


ENV_WRAPPER = EnvWrapperLimits()


@dataclass(frozen=True)
class ForgettingLimits:
    """Forgetting student: a mastered task that decays is revisited."""

    seeds: int = 20
    """Seeds the revisit check judges (their mean)."""
    num_tasks: int = 4
    pool: int = 8
    forgetting_rate: float = 5e-4
    max_learning_episodes: int = 20_000
    """Cap on the first phase, which runs until every task is mastered."""
    settle_episodes: int = 2000
    """Curriculum episodes after mastery, before the decay."""
    decay_episodes: int = 3000
    """Episodes the student spends on the other tasks, outside the curriculum: the forgotten
    task decays from ~0.9 to ~0.2."""
    window: int = 300
    """Curriculum episodes after the decay in which the forgotten task's share is measured."""
    min_revisit_share: float = 0.71
    """Share of those episodes spent on the forgotten task; its uniform share is 0.25. Per seed
    0.779 +- 0.065 (4000 seeds); 20-seed means at base seeds 0-199: 0.739-0.822; the limit is
    the mean - 4.5 sd of a 20-seed mean."""


FORGETTING = ForgettingLimits()


@dataclass(frozen=True)
class AfterMasteryLimits:
    """After mastery: with every learnable task mastered, samples stay off impossible tasks,
    and no learnable task is left behind on the way there."""

    seeds: int = 20
    """Seeds each check judges (their mean)."""
    num_learnable: int = 5
    num_impossible: int = 5
    """Constant-plus-noise impossible tasks: their noise never settles into zero learning progress."""
    pool: int = 32
    max_learning_episodes: int = 20_000
    """Cap on the first phase, which runs until every learnable task is mastered (checked every
    `check_every`); the built-in curriculum needs about 6,000 (uniform practice about 11,000)."""
    check_every: int = 50
    window: int = 4000
    """Episodes after the first phase in which the impossible share is measured."""
    min_mastered_share: float = 0.9
    """Share of the seeds whose learnable tasks were all mastered within the cap (4000 seeds:
    all mastered; 20-seed shares at base seeds 0-199: 0.95-1; the canary keeping one task per label and trusting
    stagnant verdicts for good: 70% mastered, best 20-seed mean 80%)."""
    max_impossible_share: float = 0.085
    """Share of the window's samples on impossible tasks (uniform: 0.50). 4000 seeds: per seed
    0.064 +- 0.021, 20-seed means at base seeds 0-199: 0.054-0.076, so the limit is the mean +
    4.5 sd of a 20-seed mean; the canary falling back to uniform when no task shows progress:
    0.131, lowest 20-seed mean 0.123."""


AFTER_MASTERY = AfterMasteryLimits()


@dataclass(frozen=True)
class InvarianceLimits:
    """Scenario: metamorphic relations (the same run transformed must make the same choices).
    Exact: no tolerance to calibrate (score statistics compare with a relative 1e-9, for sums
    divided by counts)."""

    episodes: int = 2000
    """Episodes per run (direct loop)."""
    pool: int = 32
    score_ranges: tuple[tuple[float, float], ...] = ((-5.0, 3.0), (-1.0, 0.0), (1.0, 9.0))
    """The other ranges the scores are mapped into (spans a power of two, so with scores that
    are multiples of 1 / `score_quantum` every map is exact in floating point): one whose low
    end is the larger in magnitude, so a bound sized by a signed end instead of a magnitude
    shows; one of span 1 below 0, a shift alone, so a rescaling skipped for a unit span shows;
    one above 0, which a never-played slot's 0 lies outside of."""
    resume_every: int = 100
    """Episodes between two checkpoints of the mapped run, each resumed in a new curriculum
    (where the curriculum can): a task whose scores all sit on a bound of the range must load."""
    score_quantum: int = 1024
    """Scores are rounded to multiples of 1 / this, in both runs."""
    read_api: tuple[str, ...] = ("sampling_probabilities", "task_scores", "stats", "active_tasks")
    """What the reading relation calls after every episode (where the curriculum has it); it
    takes a checkpoint (`get_state()`) every `read_state_every` episodes."""
    read_state_every: int = 50
    read_in_flight_every: int = 5
    """Episodes between two reads the reading relation makes while an episode runs (the
    checkpoints taken in flight among them)."""
    stats_every: int = 10
    """Episodes between two `stats()` compared with the reference run's (a pool of 32 holds
    tasks without completions for its first tens of episodes, and after a stage change)."""
    stale_reports: int = 3
    """Late completions a stale worker reports for every task that left the pool."""
    min_departed: int = 10
    """Tasks that must leave the pool in the late-completion run (else it tests nothing; seeds
    0-19 of the built-in: 26-61)."""
    churn_pool: int = 16
    """The late-completion run's pool, `min_presentations` and `eviction_percentile`: a pool
    that keeps evicting, so tasks keep leaving it."""
    churn_min_presentations: int = 4
    churn_eviction_percentile: float = 50.0
    key_order_episodes: int = 400
    """Episodes of each run of the key-order relation (a quarter more after a checkpoint)."""
    wrapper_envs: int = 4
    wrapper_vec_steps: int = 300
    """The core-protocol relation's vector (Serial) and its steps (episodes of 2 steps: 600
    episodes, past learning progress's warm-up and first evictions)."""


INVARIANCES = InvarianceLimits()


@dataclass(frozen=True)
class TaskGeneratorLimits:
    """Task generators: tasks as declared, in their shares."""

    tasks: int = 6_400
    """Task ids judged per generator and kind of ids (200 per slot of the pool)."""
    pool: int = 32
    """The pool whose strided ids (slot + k * pool) are judged."""
    far_ids: int = 3 << 40
    """The first of the far ids (then every 7919th): ids a long run reaches."""
    cross_process_tasks: int = 300
    """Task ids of each kind compared with another process's."""
    max_same_child_share: float = 0.75
    """Share of ids two seeds of one weighted set may send to the same child (independent picks
    with weights 3:1:0:2 agree on about 39%)."""
    unbuildable_calls: int = 400
    """Hand-outs of the run whose generator cannot build one task of a pool of 8."""
    unbuildable_max_share: float = 1 / 3
    """Share of them that may raise the generator's error: the built-in raised on 28-73 of 400
    over seeds 0-19 (learning progress; uniform sampling 36-60), a curriculum stuck on the bad
    draw on 394-400."""


TASK_GENERATORS = TaskGeneratorLimits()


@dataclass(frozen=True)
class WorkerFailureLimits:
    """Worker failures: named within a deadline, never waited on."""

    num_envs: int = 4
    num_workers: int = 2
    block_envs: int = 6
    """Envs (one per worker) of the layout whose zero-copy batches are blocks of half of them."""
    episode_length: int = 2
    steps_before: int = 20
    """Vec steps before the fault (ten episodes per env)."""
    steps_after: int = 200
    """Vec steps the run may take after the fault: the error must come before they are done."""
    async_any_steps_after: int = 400
    trainer_pause: float = 0.005
    """In batches of any done workers the survivors step on until a periodic check sees the
    dead worker (0.05 s) or the frozen one (`worker_timeout`): 400 steps, each after
    `trainer_pause` seconds of the trainer's own work (2 s; the survivors are done by the
    next step, so no batch ever waits, and a check made only while waiting never runs)."""
    worker_timeout: float = 1.0
    """Seconds a frozen worker may take for one step before the vecenv gives up on it."""
    pause_over_timeout: float = 1.1
    """The trainer's pauses between calls, in `worker_timeout`s, that must fail no worker."""
    slow_reset: float = 0.1
    """Seconds an env's explicit reset takes in that check (longer than `WORKER_CHECK_PERIOD`)."""
    deadline: float = 15.0
    """Seconds after the fault by which `WorkerProcessError` must have been raised (a dead
    worker is seen within `WORKER_CHECK_PERIOD`, a frozen one within `worker_timeout`)."""
    dead_worker_seen: float = 3.0
    """Seconds after a kill by which the error must have come when `worker_timeout` is the
    (much longer) `deadline`: a dead worker is seen within `WORKER_CHECK_PERIOD` (0.05 s)
    whatever the timeout a frozen one gets."""
    stop_grace: float = 0.5
    """Seconds `close()` gives workers to obey SIGTERM before it kills them, in the check of an
    env that ignores it (the library's 2 s, shortened to keep the gate quick)."""
    stop_slack: float = 0.8
    """Seconds `close()` may take beyond one `stop_grace` when no worker obeys SIGTERM: one
    grace period for all `num_envs` workers (one env each), not one per worker (1.5 s more)."""
    start_up_exit_code: int = 3
    """The exit code with which the env constructor of the start-up check ends each worker (not
    0 or 1, so the error's code is this env's)."""
    unnamed_signal: int = 40
    """A real-time signal (SIGRTMIN + 6 on Linux), which `signal.Signals` has no name for: the
    signal a worker is killed by in the check that its error still names how it ended."""
    slow_step: float = 0.2
    """Seconds each step takes in the slow half of the workers, in the check that batches the
    fast half never wait on them."""
    slow_batches: int = 40
    """Batches of two received in that check (the fast pair alone needs well under one slow step
    each; a vector that waits on one more worker than a batch needs, 8 s)."""
    max_slow_share: float = 0.25
    """Share of the batched env steps the slow workers may take in those batches: seeds 0-4
    measured 5-8% (8-10% with both cores kept busy by other processes); a vector waiting on a
    slow worker, 49-50%."""


WORKER_FAILURES = WorkerFailureLimits()
