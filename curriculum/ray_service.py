"""One curriculum for workers on many machines, through Ray (`pip install 'curriculum-harness[ray]'`).

`start_curriculum_service(config)` starts a Ray actor that owns one `Curriculum` (any
algorithm: uniform, staged progression, learning progress with eviction; or the curriculum a
plug-in `factory=` builds from the config, as the scenario gate serves the one under test). Each worker (a Ray
actor or task, on any machine of the cluster) talks to it through a `CurriculumClient`, which
has the curriculum's interface (`get_task()`, `update_task_performance(task_id, score)`,
`stats()`, `get_state()`, `load_state()`, `close()`), so it goes wherever a curriculum goes
(`CurriculumEnv(env, client)`).

Batching, both directions:

- Tasks: the client keeps a queue of up to `prefetch` tasks drawn by the actor. When the queue
  falls to half, it asks for more in the background (the request overlaps the episode), and a
  flush of completions tops the queue up in the same round trip.
- Completions: `update_task_performance` checks the score and the id locally (the
  curriculum's `InvalidScoreError` / `UnknownTaskError`, raised at once), queues the
  completion and sends the queue in one call when it holds `batch_size` completions or the
  oldest has waited `max_delay` seconds (checked at the next call). That send does not wait:
  the worker runs on while the service applies the batch, and the verdicts are collected when
  the next batch goes out (one batch in flight at a time). `flush()`, `stats()`,
  `get_state()`, `load_state()` and `close()` send the queue and wait for every verdict. With
  `batch_size=1` each completion is sent and answered within its call.

Staleness bound. A completion reaches the curriculum at most `batch_size - 1` of this worker's
later completions after the episode ended (or `max_delay` seconds, if set, counted at the
worker's next call), plus the one round trip of its batch. A task handed out was drawn at most `prefetch` of this worker's draws
earlier, so its sampling distribution lags by at most the completions every worker recorded
meanwhile. A task that left the pool while it waited in the queue or ran (evicted, or the pool
refilled at a stage change) is a late completion: the actor's `update_task_performance`
returns False and counts it; it is never credited to the slot's new task.

Exactly-once. Every completion goes to the actor in exactly one batch, which carries the
client's id and a sequence number; the actor applies a sequence number once and answers a
resend of it (after a timeout or a lost reply) from its record of that batch. Each completion
therefore ends recorded, counted late, or refused with the curriculum's named error (an id no
`get_task()` issued), exactly once. `client.sent == client.recorded + client.late +
client.refused` once flushed. A completion of a task issued by an earlier incarnation of the
service (before a restart or a `load_state`) whose id the restored curriculum does not know is
counted late, not refused. What a service recorded after its last checkpoint is lost when it
dies: a restart resumes from the checkpoint, as any restore does.

Failures. A dead or unreachable actor, or one that does not answer within the client's
`timeout` (seconds), raises `CurriculumServiceError` from the client call; nothing waits
longer. Unsent completions stay with the client (`pending_completions`) and go out with its
next flush once the service is back (`max_restarts` with a `checkpoint_path`: Ray restarts
the actor, which resumes from the file).

Lost workers. Each client registers its Ray node (and sends it with every call, so a restarted
service learns it again). Every `REAP_INTERVAL` seconds, at its next call, the service asks
the cluster which nodes are alive; a client on a dead node is declared lost: the tasks handed
to it and never completed (episodes running, tasks queued, completions not sent) are counted
`lost_tasks`, and whatever it still sends is refused with `CurriculumServiceError`, never
recorded, so nothing counts twice. `declare_lost(client_id)` does the same for a worker seen
dying on a live node. `service_stats()` holds the accounting of the running incarnation:
`issued_tasks == acknowledged_completions + lost_tasks + abandoned_tasks + outstanding_tasks`.

Only the checkpoint file, the state and the per-client batch records live in the actor; a
client holds a few tasks and completions, and pickles (into another Ray actor) as a new
client of the same service.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from numbers import Integral, Real
from typing import Any, Final

from curriculum import errors as _errors
from curriculum.config import CurriculumConfig
from curriculum.curriculum import Curriculum
from curriculum.errors import (
    CurriculumConfigError,
    CurriculumError,
    CurriculumServiceError,
    CurriculumStateError,
    InvalidScoreError,
    MissingExtraError,
    UnknownTaskError,
)
from curriculum.task import CurriculumTask

try:
    import ray
    from ray import exceptions as _ray_exceptions
except ImportError as _error:  # the lean install: no Ray
    raise MissingExtraError(
        "curriculum.ray_service needs Ray, which the base install does not include: "
        f"pip install 'curriculum-harness[ray]' (importing ray failed: {_error})"
    ) from _error

__all__ = [
    "CurriculumService",
    "CurriculumClient",
    "start_curriculum_service",
    "stop_curriculum_service",
    "DEFAULT_PREFETCH",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TIMEOUT",
    "CHECKPOINT_FORMAT",
    "REAP_INTERVAL",
]

DEFAULT_PREFETCH: Final = 8
"""Tasks a client keeps queued."""

DEFAULT_BATCH_SIZE: Final = 16
"""Completions a client sends in one call."""

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds a client waits for the service before `CurriculumServiceError`."""

CHECKPOINT_FORMAT: Final = "curriculum-service-checkpoint/1"

REAP_INTERVAL: Final = 2.0
"""Seconds between the service's checks for clients on dead nodes (made at its next call)."""

_MAX_ISSUED: Final = 65_536
"""Task ids a client remembers the issuing incarnation of (tasks handed out, not completed)."""

_ERRORS: Final = {name: getattr(_errors, name) for name in _errors.__all__}
"""The library's named errors by name: the service sends a refusal back as (name, message)."""

_TASK_COUNTS: Final = ("issued", "acknowledged", "carried_over", "lost", "abandoned", "lost_clients")
"""The service's task accounting (`CurriculumService.service_stats`)."""

_RAY_FAILURES: Final = tuple(
    getattr(_ray_exceptions, name)
    for name in ("RayActorError", "ActorUnavailableError", "GetTimeoutError", "RaySystemError", "ObjectLostError")
    if hasattr(_ray_exceptions, name)
)


def _task_tuple(task: Any) -> tuple[int, Any, str, int]:
    return task.task_id, task.env_cfg, task.label, getattr(task, "slot", -1)  # a plug-in's task may have no slot


class CurriculumService:
    """The actor's body: one `Curriculum` and the records that make batches exactly-once.

    Start it with `start_curriculum_service` (which wraps it in `ray.remote`). Calls run one
    at a time (`max_concurrency=1`), so the curriculum needs no lock of its own.
    """

    def __init__(
        self,
        config: CurriculumConfig,
        *,
        state: Mapping[str, Any] | None = None,
        checkpoint_path: str | None = None,
        checkpoint_interval: int | None = None,
        factory: Callable[[CurriculumConfig], Any] = Curriculum,
    ) -> None:
        self._config = config
        self._curriculum = factory(config)
        self._checkpoint_path = checkpoint_path
        self._checkpoint_interval = checkpoint_interval
        self._acks: dict[str, tuple[int, list[Any]]] = {}
        # per client: [node id, tasks handed out, completions acknowledged]
        self._clients: dict[str, list[Any]] = {}
        self._lost_clients: set[str] = set()
        self._counts = dict.fromkeys(_TASK_COUNTS, 0)
        self._next_reap = 0.0
        self._since_checkpoint = 0
        self.resumed_from_checkpoint = False
        self._stale_after_restore = 0
        self._answers = 0  # numbers the answers, so a client keeps the newest stage it saw
        if checkpoint_path is not None and os.path.exists(checkpoint_path):
            self._load_checkpoint(checkpoint_path)
            self.resumed_from_checkpoint = True
        elif state is not None:
            self._curriculum.load_state(dict(state))
        self._epoch = uuid.uuid4().hex

    # ---- the client protocol ------------------------------------------------------------------
    def describe(self, client_id: str | None = None, node_id: str | None = None) -> dict[str, Any]:
        """What a new client needs: the config, this incarnation and the current stage. A
        `client_id` registers the client and the Ray node it runs on (`node_id`), so its
        outstanding tasks can be counted lost if that node dies."""
        if client_id is not None and client_id not in self._clients:
            self._clients[client_id] = [node_id, 0, 0]
        return {"config": self._config, "epoch": self._epoch, "stage": self._stage(),
                "resumed_from_checkpoint": self.resumed_from_checkpoint}

    def _stage(self) -> int | None:
        """The curriculum's stage (staged progression), None when it has none."""
        return getattr(self._curriculum, "stage", None)

    def exchange(self, client_id: str, seq: int, items: list[tuple[int, float, str]], want: int,
                 node_id: str | None = None) -> dict[str, Any]:
        """Apply one batch of completions (once per `(client_id, seq)`), then draw `want` tasks.

        `items` are `(task_id, score, epoch of the service that issued the task)`. Results, in
        order: True (recorded), False (late) or `[error name, message]` (refused). `node_id`:
        the client's Ray node (registers a client this incarnation has not seen yet).
        """
        self._maybe_reap()
        if client_id in self._lost_clients:  # declared lost: nothing it sends may count twice
            refusal = ["CurriculumServiceError",
                       f"The curriculum service declared client {client_id} lost (its node died, or "
                       "declare_lost() was called); its outstanding tasks were counted lost and its completions "
                       "are not recorded"]
            answer = self._answer([refusal] * len(items), [])
            answer["lost"] = refusal[1]
            return answer
        record = self._clients.get(client_id)
        if record is None:  # a client of an earlier incarnation (restart, restore): registered now
            record = self._clients[client_id] = [node_id, 0, 0]
        results: list[Any] = []
        if items:
            last = self._acks.get(client_id)
            if last is not None and last[0] == seq:  # a resend: the batch was applied already
                results = last[1]
            else:
                results = [self._record(task_id, score, epoch) for task_id, score, epoch in items]
                self._acks[client_id] = (seq, results)
                current = sum(1 for item in items if item[2] == self._epoch)  # issued by this incarnation
                record[2] += current
                self._counts["acknowledged"] += current
                self._counts["carried_over"] += len(items) - current
                self._since_checkpoint += len(items)
                if (self._checkpoint_interval is not None and self._checkpoint_path is not None
                        and self._since_checkpoint >= self._checkpoint_interval):
                    self.checkpoint()
        tasks = [_task_tuple(self._curriculum.get_task()) for _ in range(want)]
        record[1] += want
        self._counts["issued"] += want
        return self._answer(results, tasks)

    def _answer(self, results: list[Any], tasks: list[Any]) -> dict[str, Any]:
        self._answers += 1
        return {"results": results, "tasks": tasks, "epoch": self._epoch, "stage": self._stage(),
                "answer": self._answers}

    def _record(self, task_id: int, score: float, epoch: str) -> Any:
        try:
            return self._curriculum.update_task_performance(task_id, score)
        except UnknownTaskError as error:
            if epoch != self._epoch:  # issued before a restore: the restored pool never held it
                tracker = getattr(self._curriculum, "tracker", None)
                if tracker is not None:  # a plug-in curriculum without a tracker: counted here only
                    with tracker.lock:
                        tracker.record_late()
                self._stale_after_restore += 1
                return False
            return [type(error).__name__, str(error)]
        except CurriculumError as error:
            return [type(error).__name__, str(error)]

    def release(self, client_id: str) -> None:
        """Forget a closed client; the tasks it held and never completed (its queue, episodes
        cut by the close) are counted `abandoned`."""
        self._acks.pop(client_id, None)
        record = self._clients.pop(client_id, None)
        if record is not None:
            self._counts["abandoned"] += record[1] - record[2]

    def declare_lost(self, client_id: str) -> int:
        """Count a client's outstanding tasks lost (its worker died) and refuse whatever it
        sends from now on; returns the tasks counted lost (0 for a client already lost)."""
        if client_id in self._lost_clients:
            return 0
        self._lost_clients.add(client_id)
        self._acks.pop(client_id, None)
        record = self._clients.pop(client_id, None)
        lost = 0 if record is None else record[1] - record[2]
        self._counts["lost"] += lost
        self._counts["lost_clients"] += 1
        return lost

    def reap_lost_clients(self) -> int:
        """Declare lost every client whose Ray node is dead; returns the tasks counted lost.

        Each client of this incarnation registered its node; a node the cluster reports dead
        takes with it the episodes its workers were running, the tasks they had queued and the
        completions they had not sent yet: all counted `lost`, none recorded (a completion
        that still arrived is refused, not counted twice). Runs at most every `REAP_INTERVAL`
        seconds by itself, at the service's next call."""
        self._next_reap = time.monotonic() + REAP_INTERVAL
        nodes = {node["NodeID"]: node["Alive"] for node in ray.nodes()}
        dead = [client for client, (node, _, _) in self._clients.items()
                if node is not None and not nodes.get(node, True)]
        return sum(self.declare_lost(client) for client in dead)

    def client_accounts(self) -> dict[str, dict[str, Any]]:
        """Per open client: its node, the tasks handed out to it and its completions
        acknowledged (of this incarnation's tasks), and the difference, `outstanding`."""
        return {client: {"node_id": node, "issued": issued, "acknowledged": acked, "outstanding": issued - acked}
                for client, (node, issued, acked) in self._clients.items()}

    def _maybe_reap(self) -> None:
        if time.monotonic() >= self._next_reap:
            self.reap_lost_clients()

    # ---- the curriculum's read side and checkpoints -------------------------------------------
    def stats(self) -> dict[str, Any]:
        return self._curriculum.stats()

    def service_stats(self) -> dict[str, Any]:
        """The service's own numbers (after checking for dead nodes): open clients, completions
        of tasks issued before a restore (counted late), whether it resumed from its checkpoint
        file, and the task accounting of this incarnation: `issued_tasks` ==
        `acknowledged_completions` + `lost_tasks` + `abandoned_tasks` + `outstanding_tasks`
        (completions of tasks an earlier incarnation issued are `carried_over_completions`)."""
        self.reap_lost_clients()
        counts = self._counts
        outstanding = sum(issued - acked for _, issued, acked in self._clients.values())
        return {"clients": len(self._clients), "stale_after_restore": self._stale_after_restore,
                "resumed_from_checkpoint": self.resumed_from_checkpoint, "epoch": self._epoch,
                "issued_tasks": counts["issued"], "acknowledged_completions": counts["acknowledged"],
                "carried_over_completions": counts["carried_over"],
                "lost_tasks": counts["lost"], "lost_clients": counts["lost_clients"],
                "abandoned_tasks": counts["abandoned"], "outstanding_tasks": outstanding}

    def get_state(self) -> dict[str, Any]:
        return self._curriculum.get_state()

    def load_state(self, state: dict[str, Any]) -> Any:
        """Restore a `get_state` snapshot; a new incarnation (earlier tasks complete late)."""
        try:
            self._curriculum.load_state(state)
        except CurriculumError as error:
            return [type(error).__name__, str(error)]
        self._epoch = uuid.uuid4().hex
        return None

    def checkpoint(self, path: str | None = None) -> str:
        """Write the curriculum state and the batch records to `path` (default: the service's
        `checkpoint_path`) atomically; returns the path."""
        target = path if path is not None else self._checkpoint_path
        if target is None:
            raise CurriculumConfigError("Expected a checkpoint path (start the service with checkpoint_path=, or "
                                        "pass path=), received None")
        blob = {"format": CHECKPOINT_FORMAT, "curriculum": self._curriculum.get_state(),
                "acks": {client: [seq, results] for client, (seq, results) in self._acks.items()}}
        directory = os.path.dirname(os.path.abspath(target))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".curriculum-checkpoint-")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(blob, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        self._since_checkpoint = 0
        return target

    def _load_checkpoint(self, path: str) -> None:
        with open(path) as handle:
            try:
                blob = json.load(handle)
            except json.JSONDecodeError as error:
                raise CurriculumStateError(f"Cannot load service checkpoint {path!r}: not JSON ({error})") from None
        if not (isinstance(blob, dict) and blob.get("format") == CHECKPOINT_FORMAT
                and isinstance(blob.get("acks"), dict)):
            found = blob.get("format") if isinstance(blob, dict) else type(blob).__name__
            raise CurriculumStateError(f"Cannot load service checkpoint {path!r}: expected format "
                                       f"{CHECKPOINT_FORMAT!r}, received {found!r}")
        self._curriculum.load_state(blob["curriculum"])
        self._acks = {client: (int(seq), list(results)) for client, (seq, results) in blob["acks"].items()}

    def ping(self) -> str:
        return self._epoch


def start_curriculum_service(
    config: CurriculumConfig,
    *,
    state: Mapping[str, Any] | None = None,
    checkpoint_path: str | os.PathLike[str] | None = None,
    checkpoint_interval: int | None = None,
    name: str | None = None,
    max_restarts: int = 0,
    num_cpus: float = 0,
    factory: Callable[[CurriculumConfig], Any] = Curriculum,
    **actor_options: Any,
) -> Any:
    """Start the actor owning one `Curriculum(config)`; returns its handle (give it to clients).

    `factory`: builds the served curriculum from `config` (default `Curriculum`); any object
    with the curriculum's interface (`harness.protocol.CurriculumProtocol`, plus `get_state` /
    `load_state` for `state=` and checkpoints) can be served. It must be importable in the
    actor's process (a module-level function or class: Ray pickles it by reference).

    `state`: a `get_state()` snapshot to start from. `checkpoint_path`: where `checkpoint()`
    writes; an actor (re)started with an existing file resumes from it. `checkpoint_interval`:
    write the checkpoint every that many completions. `max_restarts`: Ray restarts a dead actor
    up to that many times (-1: always), resuming from `checkpoint_path`. `name`: a named actor
    (`ray.get_actor(name)` from any driver of the cluster). Further `actor_options` go to
    `ray.remote(...).options(...)` (e.g. `resources`, `scheduling_strategy`).
    """
    if not isinstance(config, CurriculumConfig):
        raise CurriculumConfigError(f"Expected `config` to be a CurriculumConfig, received {type(config).__name__}")
    if checkpoint_interval is not None and not (_is_int(checkpoint_interval) and checkpoint_interval >= 1):
        raise CurriculumConfigError(
            f"Expected `checkpoint_interval` to be None or an integer >= 1, received {checkpoint_interval!r}")
    if checkpoint_interval is not None and checkpoint_path is None:
        raise CurriculumConfigError("Expected a `checkpoint_path` with `checkpoint_interval`, received None")
    if not (_is_int(max_restarts) and max_restarts >= -1):
        raise CurriculumConfigError(f"Expected `max_restarts` to be an integer >= -1, received {max_restarts!r}")
    if not ray.is_initialized():
        raise CurriculumServiceError("Expected Ray to be initialized (ray.init(...)) before starting a curriculum "
                                     "service, received an uninitialized Ray")
    if not callable(factory):
        raise CurriculumConfigError(f"Expected `factory` to be callable (config -> curriculum), received {factory!r}")
    path = None if checkpoint_path is None else os.path.abspath(os.fspath(checkpoint_path))
    if state is not None:
        factory(config).load_state(dict(state))  # a bad state fails here, by name, not in the actor
    options: dict[str, Any] = {"num_cpus": num_cpus, "max_restarts": max_restarts, "max_concurrency": 1}
    if name is not None:
        options["name"] = name
    options.update(actor_options)
    actor_class = ray.remote(CurriculumService)
    return actor_class.options(**options).remote(
        config, state=None if state is None else dict(state), checkpoint_path=path,
        checkpoint_interval=checkpoint_interval, factory=factory)


def stop_curriculum_service(service: Any, *, checkpoint: bool = False, timeout: float = DEFAULT_TIMEOUT) -> str | None:
    """Stop the service (after writing its checkpoint with `checkpoint=True`; returns the path)
    and return once it is gone (`CurriculumServiceError` if it still answers after `timeout` s).

    Clients still open raise `CurriculumServiceError` on their next call.
    """
    path = None
    if checkpoint:
        path = _get(service.checkpoint.remote(), timeout, "checkpoint")
    ray.kill(service, no_restart=True)
    deadline = time.monotonic() + timeout  # ray.kill is asynchronous: return once the actor is gone
    while True:
        try:
            ray.get(service.ping.remote(), timeout=max(0.0, deadline - time.monotonic()))
        except _ray_exceptions.GetTimeoutError:
            pass
        except _RAY_FAILURES:
            return path
        if time.monotonic() >= deadline:
            raise CurriculumServiceError(f"The curriculum service still answered {timeout} s after it was killed")
        time.sleep(0.05)


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _get(ref: Any, timeout: float, what: str) -> Any:
    try:
        return ray.get(ref, timeout=timeout)
    except _ray_exceptions.GetTimeoutError:
        raise CurriculumServiceError(
            f"The curriculum service did not answer {what}() within the timeout of {timeout} s") from None
    except _RAY_FAILURES as error:
        raise CurriculumServiceError(
            f"The curriculum service is dead or unreachable ({what}() failed with {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''})") from error
    except _ray_exceptions.RayTaskError as error:
        cause = getattr(error, "cause", None)
        if isinstance(cause, CurriculumError):
            raise type(cause)(*cause.args) from None
        raise CurriculumServiceError(f"The curriculum service failed in {what}(): {cause!r}") from error


def _refusal(result: Any) -> CurriculumError | None:
    if isinstance(result, bool):
        return None
    name, message = result
    return _ERRORS.get(name, CurriculumError)(message)


class CurriculumClient:
    """A worker's handle on a curriculum service, with the curriculum's interface.

    Args:
        service: the handle `start_curriculum_service` returned (or `ray.get_actor(name)`).
        prefetch: tasks kept queued (>= 1).
        batch_size: completions sent per call (>= 1; 1 sends each completion at once).
        timeout: seconds to wait for the service before `CurriculumServiceError` (> 0).
        max_delay: seconds the oldest queued completion may wait, checked at each
            `update_task_performance` (None: only the batch size decides).

    Tasks carry `task_id`, `env_cfg`, `label` and `slot`; their live statistics read 0 (the
    tracker is in the actor: use `stats()`). Counters: `sent` (completions acknowledged by the
    service), `recorded`, `late`, `refused`.
    """

    def __init__(
        self,
        service: Any,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        max_delay: float | None = None,
    ) -> None:
        if not (_is_int(prefetch) and prefetch >= 1):
            raise CurriculumConfigError(f"Expected `prefetch` to be an integer >= 1, received {prefetch!r}")
        if not (_is_int(batch_size) and batch_size >= 1):
            raise CurriculumConfigError(f"Expected `batch_size` to be an integer >= 1, received {batch_size!r}")
        if not (isinstance(timeout, Real) and not isinstance(timeout, bool) and 0 < timeout < math.inf):
            raise CurriculumConfigError(f"Expected `timeout` to be a finite number of seconds > 0, received {timeout!r}")
        if max_delay is not None and not (isinstance(max_delay, Real) and not isinstance(max_delay, bool)
                                          and 0 <= max_delay < math.inf):
            raise CurriculumConfigError(f"Expected `max_delay` to be None or seconds >= 0, received {max_delay!r}")
        if not isinstance(service, ray.actor.ActorHandle):
            raise CurriculumConfigError(
                f"Expected `service` to be the actor handle start_curriculum_service() returned, "
                f"received {type(service).__name__}")
        self._service = service
        self.prefetch = int(prefetch)
        self.batch_size = int(batch_size)
        self.timeout = float(timeout)
        self.max_delay = None if max_delay is None else float(max_delay)
        self.client_id = uuid.uuid4().hex
        self._seq = 0
        self._queue: deque[tuple[CurriculumTask, str]] = deque()
        self._pending: list[tuple[int, float, str]] = []
        self._pending_since = 0.0
        self._outbox: tuple[int, list[tuple[int, float, str]]] | None = None  # sent, not yet acknowledged
        self._outbox_ref: Any = None  # the outbox's request while its answer is outstanding
        self._refill: Any = None  # a background request for tasks
        # task id -> the incarnation of each of its handouts not completed yet, oldest first (a task
        # drawn twice may span a restore: each completion takes one of them, so none is tagged
        # with an incarnation that never issued the id, which would refuse it instead of late)
        self._issued: OrderedDict[int, list[str]] = OrderedDict()
        self._closed = False
        self.sent = 0
        self.recorded = 0
        self.late = 0
        self._late_untaken = 0
        self.refused = 0
        self.node_id: str = ray.get_runtime_context().get_node_id()
        info = _get(service.describe.remote(self.client_id, self.node_id), self.timeout, "describe")
        self.config: CurriculumConfig = info["config"]
        self._epoch: str = info["epoch"]
        self._answer_seen = 0
        self._stage: int | None = info["stage"]
        self._score_low, self._score_high = self.config.score_range

    # ---- pickling: a copy in another process is a new client of the same service -------------
    def __getstate__(self) -> dict[str, Any]:
        return {"service": self._service, "prefetch": self.prefetch, "batch_size": self.batch_size,
                "timeout": self.timeout, "max_delay": self.max_delay}

    def __setstate__(self, state: dict[str, Any]) -> None:
        service = state.pop("service")
        self.__init__(service, **state)  # type: ignore[misc]

    # ---- the curriculum interface --------------------------------------------------------------
    def get_task(self) -> CurriculumTask:
        """The next task, from the queue (refilled from the service when it runs low)."""
        self._check_open()
        queue = self._queue
        if not queue:
            if self._refill is None:
                self._request_tasks()
            self._take_refill()
            if not queue:  # a refill emptied by a state change: ask once more, synchronously
                self._request_tasks()
                self._take_refill()
        task, epoch = queue.popleft()
        issued = self._issued
        handouts = issued.get(task.task_id)
        if handouts is not None:
            handouts.append(epoch)
        else:
            issued[task.task_id] = [epoch]
        if len(issued) > _MAX_ISSUED:
            issued.popitem(last=False)
        if self._refill is None and len(queue) <= self.prefetch // 2:
            self._request_tasks()
        return task

    def update_task_performance(self, task_id: int, score: float) -> bool | None:
        """Queue a completed episode of `task_id` with `score`; send the queue when it is full.

        With `batch_size` 1 the completion is sent and answered within the call, which returns
        its verdict (True recorded, False late: the task left the pool). With a larger batch the
        call that fills the batch sends it without waiting (the worker goes on while the service
        applies it) and returns None, as does every call that only queues; the batch's verdicts
        are collected (and counted in `recorded` / `late`) when the next batch is sent or at
        `flush()`. A bad score or id raises the curriculum's named error at once, before anything
        is queued; an id the service never issued is refused by the service (`UnknownTaskError`
        when its batch's answer is collected; the rest of the batch is recorded).
        """
        self._check_open()
        value = self._check_score(task_id, score)
        if type(task_id) is not int:
            if not _is_int(task_id):
                raise UnknownTaskError(f"Expected an integer task id from get_task(), received {task_id!r}")
            task_id = int(task_id)
        if task_id < 0:
            raise UnknownTaskError(f"Expected a task id issued by this curriculum's get_task(), received {task_id}")
        handouts = self._issued.get(task_id)
        if handouts:
            epoch = handouts.pop(0)
            if not handouts:
                del self._issued[task_id]
        else:
            epoch = self._epoch
        pending = self._pending
        if not pending:
            self._pending_since = time.monotonic()
        pending.append((task_id, value, epoch))
        if len(pending) >= self.batch_size or (
                self.max_delay is not None and time.monotonic() - self._pending_since >= self.max_delay):
            if self.batch_size == 1:
                results = self.flush()
                return results[-1] if results and isinstance(results[-1], bool) else None
            if self._outbox is not None:  # one batch in flight at a time: collect the previous one
                self._collect()
            self._seal_batch()
            self._send()
        return None

    def flush(self) -> list[Any]:
        """Send the queued completions now; their verdicts (True recorded, False late).

        A batch left unacknowledged by an earlier failure goes first, under its own sequence
        number (the service applies it once). Raises `CurriculumServiceError` if the service
        does not answer (the completions stay queued), or the curriculum's named error for a
        completion it refused (after every other completion of the batch was recorded).
        """
        self._check_open()
        verdicts: list[Any] = []
        if self._outbox is not None:
            verdicts.extend(self._collect())
        if self._pending:
            self._seal_batch()
            self._send(want_tasks=True)
            verdicts.extend(self._collect())
        return verdicts

    def stats(self) -> dict[str, Any]:
        """`Curriculum.stats()` of the service's curriculum, after sending this client's queue."""
        self.flush()
        return _get(self._service.stats.remote(), self.timeout, "stats")

    def service_stats(self) -> dict[str, Any]:
        """The service's own counters (`CurriculumService.service_stats`)."""
        self._check_open()
        return _get(self._service.service_stats.remote(), self.timeout, "service_stats")

    @property
    def stage(self) -> int | None:
        """The stage at the service's last answer (staged progression), else None."""
        return self._stage

    @property
    def pending_completions(self) -> int:
        """Completions not yet acknowledged by the service."""
        return len(self._pending) + (len(self._outbox[1]) if self._outbox is not None else 0)

    @property
    def defers_verdicts(self) -> bool:
        """Whether completions are answered after their call returns (`batch_size` above 1);
        a `CurriculumEnv` then counts `take_late_verdicts()` into its episodes'
        `late_completions`."""
        return self.batch_size > 1

    def take_late_verdicts(self) -> int:
        """Late verdicts collected since the last call (each handed over once, whichever of
        the envs sharing this client asks)."""
        taken, self._late_untaken = self._late_untaken, 0
        return taken

    @property
    def unsent_completions(self) -> int:
        """Completions queued here and not sent yet (lost with this worker if it dies)."""
        return len(self._pending)

    @property
    def queued_tasks(self) -> int:
        """Tasks drawn from the service and not handed out yet."""
        return len(self._queue)

    def get_state(self) -> dict[str, Any]:
        """The service curriculum's `get_state()`, after sending this client's queue."""
        self.flush()
        return _get(self._service.get_state.remote(), self.timeout, "get_state")

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore the service's curriculum from a `get_state()` snapshot (for every client).

        Sends this client's queue first and drops its queued tasks (drawn from the state being
        replaced); completions of tasks issued before count late where the restored pool does
        not hold them.
        """
        self.flush()
        refusal = _get(self._service.load_state.remote(state), self.timeout, "load_state")
        if refusal is not None:
            raise _refusal(refusal)  # type: ignore[misc]
        self._queue.clear()
        self._refill = None
        info = _get(self._service.describe.remote(), self.timeout, "describe")
        self._epoch, self._stage = info["epoch"], info["stage"]

    def checkpoint(self, path: str | os.PathLike[str] | None = None) -> str:
        """Send this client's queue, then have the service write its checkpoint; the path."""
        self.flush()
        return _get(self._service.checkpoint.remote(None if path is None else os.fspath(path)), self.timeout,
                    "checkpoint")

    def close(self) -> None:
        """Send the queued completions and leave the service; idempotent. The service keeps
        running for the other clients (`stop_curriculum_service` ends it)."""
        if self._closed:
            return
        try:
            self.flush()
            _get(self._service.release.remote(self.client_id), self.timeout, "release")
        finally:
            self._closed = True
            self._queue.clear()
            self._refill = None

    def __enter__(self) -> CurriculumClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise CurriculumServiceError("Expected an open curriculum client, received one used after close()")

    def _check_score(self, task_id: Any, score: Any) -> float:
        if type(score) is float:
            value = score
        elif isinstance(score, Real) and not isinstance(score, bool):
            try:
                value = float(score)
            except (OverflowError, TypeError, ValueError):
                value = math.nan
        else:
            raise InvalidScoreError(
                f"Expected score in [{self._score_low}, {self._score_high}] for task {task_id} as a real number, "
                f"received {score!r} of type {type(score).__name__}")
        if not self._score_low <= value <= self._score_high:  # NaN fails too
            raise InvalidScoreError(
                f"Expected score in [{self._score_low}, {self._score_high}] for task {task_id}, received {score!r}")
        return value

    def _request_tasks(self) -> None:
        want = self.prefetch - len(self._queue)
        self._refill = self._service.exchange.remote(self.client_id, 0, [], max(want, 1), self.node_id)

    def _take_refill(self) -> None:
        ref, self._refill = self._refill, None
        self._absorb(_get(ref, self.timeout, "exchange"))

    def _absorb(self, answer: dict[str, Any]) -> None:
        if "lost" in answer and not answer["results"]:
            raise CurriculumServiceError(answer["lost"])
        epoch = answer["epoch"]
        if epoch != self._epoch or answer["answer"] > self._answer_seen:  # answers collected out of order
            self._epoch, self._stage, self._answer_seen = epoch, answer["stage"], answer["answer"]
        self._queue.extend((CurriculumTask(task_id, env_cfg, label, slot=slot), epoch)
                           for task_id, env_cfg, label, slot in answer["tasks"])

    def _seal_batch(self) -> None:
        self._seq += 1
        self._outbox = (self._seq, self._pending)
        self._pending = []

    def _send(self, *, want_tasks: bool = False) -> None:
        """Send the outbox (again, after a failure: same sequence number) without waiting."""
        assert self._outbox is not None
        seq, items = self._outbox
        want = 0
        if want_tasks and self._refill is None and len(self._queue) <= self.prefetch // 2:
            want = self.prefetch - len(self._queue)  # top the task queue up in the same round trip
        self._outbox_ref = self._service.exchange.remote(self.client_id, seq, items, want, self.node_id)

    def _collect(self) -> list[Any]:
        """Wait for the outbox's answer (sending it first if a failure left it unsent); count
        its verdicts; raise the first refusal. On a service failure the outbox stays, unsent."""
        assert self._outbox is not None
        if self._outbox_ref is None:
            self._send()
        ref, self._outbox_ref = self._outbox_ref, None
        answer = _get(ref, self.timeout, "exchange")
        seq, items = self._outbox
        self._outbox = None
        self._absorb(answer)
        results = answer["results"]
        self.sent += len(items)
        first_refusal: tuple[int, CurriculumError] | None = None
        refused_before = self.refused
        for position, result in enumerate(results):
            if result is True:
                self.recorded += 1
            elif result is False:
                self.late += 1
                self._late_untaken += 1
            else:
                self.refused += 1
                if first_refusal is None:
                    first_refusal = (position, _refusal(result))  # type: ignore[assignment]
        if first_refusal is not None:
            position, error = first_refusal
            if len(items) > 1:
                error = type(error)(f"{error} (completion {position + 1} of {len(items)} sent together; "
                                    f"{self.refused - refused_before} refused, the others recorded or counted late)")
            raise error
        return results
