"""A worker node dies under a curriculum service (`curriculum.ray_service`).

Real Ray, two nodes on this machine (`ray.cluster_utils.Cluster`: a head node holding the
service and a second raylet holding one worker), and a real node death (`remove_node` kills
that raylet and every worker process on it). Skipped when Ray is not installed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="needs the [ray] extra: pip install 'curriculum-harness[ray]' (or make ray)")

from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from curriculum import CurriculumServiceError  # noqa: E402
from curriculum.ray_service import REAP_INTERVAL, CurriculumClient, start_curriculum_service  # noqa: E402
from helpers import lp_config  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]

HERE = Path(__file__).resolve().parent
DOOMED = "doomed_node"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, Any]]:
    """A head node (the driver, the service, a surviving worker) and a node to kill."""
    if ray.is_initialized():
        ray.shutdown()
    address = os.environ.get("RAY_ADDRESS")  # Cluster points it at itself; later ray.init() calls must not follow
    path = os.pathsep.join([str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    doomed = nodes.add_node(num_cpus=1, resources={DOOMED: 1})
    ray.init(address=nodes.address, logging_level=logging.ERROR, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        yield nodes, doomed
    finally:
        ray.shutdown()
        nodes.shutdown()
        _wait_until_no_local_cluster()
        if address is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = address


def _wait_until_no_local_cluster(timeout: float = 30.0) -> None:
    """Until this cluster's processes are gone: `ray.init()` with no address joins any local
    cluster it finds running (and refuses `num_cpus=` then), so the next module's own cluster
    must not find this one."""
    from ray._private.services import find_gcs_addresses

    deadline = time.monotonic() + timeout
    while find_gcs_addresses() and time.monotonic() < deadline:
        time.sleep(0.2)


@ray.remote(num_cpus=0)
class NodeWorker:
    """A worker whose episodes end `lag` draws after they start (so some are always running)."""

    def __init__(self, service: Any) -> None:
        self.client = CurriculumClient(service, prefetch=8, batch_size=16, timeout=20.0)
        self.running: list[int] = []

    def client_id(self) -> str:
        return self.client.client_id

    def run(self, episodes: int, *, lag: int) -> dict[str, int]:
        for step in range(episodes):
            self.running.append(self.client.get_task().task_id)
            if len(self.running) > lag:
                self.client.update_task_performance(self.running.pop(0), (step % 7) / 7)
        return {"running": len(self.running), "unsent": self.client.unsent_completions,
                "queued": self.client.queued_tasks}

    def finish(self) -> dict[str, int]:
        for task_id in self.running:
            self.client.update_task_performance(task_id, 0.5)
        self.running = []
        self.client.close()
        return {"sent": self.client.sent, "recorded": self.client.recorded, "late": self.client.late,
                "refused": self.client.refused}


def test_a_dead_node_counts_its_tasks_lost_and_nothing_twice(cluster: tuple[Any, Any]) -> None:
    nodes, doomed = cluster
    head = ray.get_runtime_context().get_node_id()
    on_head = NodeAffinitySchedulingStrategy(head, soft=False)
    service = start_curriculum_service(lp_config(8), scheduling_strategy=on_head)
    survivor = NodeWorker.options(scheduling_strategy=on_head).remote(service)
    victim = NodeWorker.options(resources={DOOMED: 0.5}).remote(service)
    victim_id, survivor_id = ray.get([victim.client_id.remote(), survivor.client_id.remote()], timeout=60)

    reports = ray.get([victim.run.remote(203, lag=5), survivor.run.remote(150, lag=5)], timeout=60)
    victim_report = reports[0]
    assert victim_report["running"] == 5 and victim_report["unsent"] > 0, victim_report
    time.sleep(0.5)  # the victim's last batch and refill reach the service before its node dies
    before = ray.get(service.client_accounts.remote(), timeout=20)
    assert before[victim_id]["node_id"] == doomed.node_id
    in_flight = before[victim_id]["outstanding"]
    # its running episodes, unsent completions and queued tasks (plus a refill it has not taken yet)
    held = victim_report["running"] + victim_report["unsent"] + victim_report["queued"]
    assert held <= in_flight <= held + 8, (before[victim_id], victim_report)

    killed_at = time.monotonic()
    nodes.remove_node(doomed)
    # the survivor's own traffic makes the service notice the dead node, within REAP_INTERVAL
    while time.monotonic() - killed_at < REAP_INTERVAL + 1.0:
        ray.get(survivor.run.remote(10, lag=5), timeout=20)
    accounts = ray.get(service.client_accounts.remote(), timeout=20)
    assert victim_id not in accounts and survivor_id in accounts, accounts
    stats = ray.get(service.service_stats.remote(), timeout=20)
    assert stats["lost_clients"] == 1 and stats["lost_tasks"] == in_flight, (stats, in_flight)

    # nothing of the victim was recorded after its death, nothing twice; the survivor goes on
    survivor_report = ray.get(survivor.finish.remote(), timeout=20)
    assert survivor_report["refused"] == 0 and survivor_report["sent"] == \
        survivor_report["recorded"] + survivor_report["late"]
    stats = ray.get(service.service_stats.remote(), timeout=20)
    assert stats["issued_tasks"] == (stats["acknowledged_completions"] + stats["lost_tasks"]
                                     + stats["abandoned_tasks"] + stats["outstanding_tasks"]), stats
    assert stats["outstanding_tasks"] == 0 and stats["clients"] == 0, stats
    assert _recorded(service) == stats["acknowledged_completions"], stats
    # every acknowledged completion is one of the victim's before its death or one of the survivor's
    assert stats["acknowledged_completions"] == before[victim_id]["acknowledged"] + survivor_report["sent"], (
        stats, before[victim_id], survivor_report)
    ray.kill(service, no_restart=True)


def _recorded(service: Any) -> int:
    """Completions the served curriculum took in: recorded plus counted late."""
    stats = ray.get(service.stats.remote(), timeout=20)
    return int(stats["total_completions"] + stats["late_completions"])


def test_a_client_declared_lost_is_refused_by_name(cluster: tuple[Any, Any]) -> None:
    """`declare_lost` (for a worker the user saw die on a live node): its outstanding tasks are
    counted lost, and a completion it still sends is refused, not recorded a second time."""
    service = start_curriculum_service(lp_config(8))
    client = CurriculumClient(service, prefetch=4, batch_size=4, timeout=20.0)
    tasks = [client.get_task() for _ in range(3)]
    client.update_task_performance(tasks[0].task_id, 0.5)
    client.flush()
    outstanding = ray.get(service.client_accounts.remote(), timeout=20)[client.client_id]["outstanding"]
    assert ray.get(service.declare_lost.remote(client.client_id), timeout=20) == outstanding >= 2
    assert ray.get(service.declare_lost.remote(client.client_id), timeout=20) == 0  # once
    recorded = _recorded(service)
    client.update_task_performance(tasks[1].task_id, 0.5)
    with pytest.raises(CurriculumServiceError, match="declared client .* lost"):
        client.flush()
    assert client.refused == 1 and _recorded(service) == recorded
    stats = ray.get(service.service_stats.remote(), timeout=20)
    assert stats["lost_tasks"] == outstanding and stats["acknowledged_completions"] == 1, stats
    ray.kill(service, no_restart=True)
