"""Wall-clock jumps on one of three real nodes (libfaketime, tests/faketime.py): the node stops
dispatching by its wrong clock at once, its partitions (and leadership) move to nodes whose
clocks agree, every run reaches a consumer on time (unguarded, they came 17-19 s late, claims
stamped by the wrong clock), and the node takes its share back once corrected."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.timeformat import format_instant
from tests.faketime import ClockShift
from tests.integration.api_helpers import Tenant, new_tenant
from tests.servers import NodeProcess, http, make_nodes, metrics_text, now_ms, running, wait_for

pytestmark = pytest.mark.cluster
DISPATCH = '[dispatch]\nlease_ttl = "2s"\nmax_clock_offset = "500ms"\n'
JOBS = 40
EARLY_TOLERANCE_MS = 100
LATE_BOUND_MS = 3_000  # the partitions moved long before the runs were due
JUMP_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base: Path = tmp_path_factory.mktemp("clock-cluster")
    nodes = make_nodes(base, 3, extra_sections=DISPATCH)
    shifts = {n.node_id: ClockShift(base / f"{n.node_id}.faketime") for n in nodes}
    for node in nodes:
        node.extra_env = shifts[node.node_id].env()
    with running(nodes):
        yield {"nodes": nodes, "shifts": shifts}


class Receiver(threading.Thread):
    """Receives and acks a queue through one node, noting the real time each run arrived."""

    def __init__(self, node: NodeProcess, tenant: Tenant) -> None:
        super().__init__(daemon=True)
        self.node, self.tenant = node, tenant
        self.arrived: dict[str, int] = {}  # idempotency key -> first arrival, real epoch ms
        self.stop = threading.Event()

    def run(self) -> None:
        url = f"{self.node.url}/v1/queues/q/"
        while not self.stop.is_set():
            body = {"max": 100, "wait": "1s", "visibility_timeout": "30s"}
            try:
                status, answer, _ = http("POST", url + "receive", body, token=self.tenant.token)
            except OSError:
                continue
            if status != 200:
                continue
            for message in answer["messages"]:
                self.arrived.setdefault(message["idempotency_key"], now_ms())
            receipts = [m["receipt"] for m in answer["messages"]]
            if receipts:
                http("POST", url + "ack", {"receipts": receipts}, token=self.tenant.token)


def role_of(node: NodeProcess) -> str:
    _, state, _ = http("GET", f"{node.url}/v1/admin/state", timeout_s=5)
    return str(state["role"])


def partitions_of(viewer: NodeProcess, node_id: str) -> set[int]:
    _, body, _ = http("GET", f"{viewer.url}/v1/cluster", timeout_s=5)
    return next(set(n["partitions"]) for n in body["nodes"] if n["node_id"] == node_id)


def readiness(node: NodeProcess) -> tuple[int, Any]:
    status, body, _ = http("GET", f"{node.url}/readyz", token=None, timeout_s=5)
    return status, body


def metric(node: NodeProcess, name: str) -> float | None:
    for line in metrics_text(node.url, timeout_s=5).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def create_jobs(node: NodeProcess, tenant: Tenant, run_at_ms: int) -> list[tuple[str, int]]:
    """JOBS one-time jobs due at `run_at_ms` (whole seconds), spread over the partitions."""
    run_at_ms -= run_at_ms % 1000
    body = {
        "schedule": {"run_at": format_instant(run_at_ms)},
        "target": {"type": "queue", "name": "q"},
    }
    status, created, _ = http(
        "POST", f"{node.url}/v1/jobs:batch", {"jobs": [body] * JOBS}, token=tenant.token
    )
    assert status == 200, created
    return [(r["job_id"], run_at_ms) for r in created["results"]]


def jump_and_check(cluster: dict[str, Any], victim: NodeProcess) -> None:
    nodes: list[NodeProcess] = cluster["nodes"]
    others = [n for n in nodes if n is not victim]
    shift: ClockShift = cluster["shifts"][victim.node_id]
    tenant = new_tenant(others[0])
    receiver = Receiver(others[0], tenant)
    receiver.start()
    try:
        jobs = create_jobs(others[1], tenant, now_ms() + 15_000)
        shift.shift(JUMP_S)
        # The first 503 may say "no leader" while leadership moves: wait for the clock's.
        wait_for(
            lambda: (s := readiness(victim))[0] == 503 and "clock" in s[1]["reason"],
            10,
            "the victim to be unready for its clock",
        )
        assert metric(victim, "schedd_clock_trusted") == 0
        body = {"schedule": {"delay": "10s"}, "target": {"type": "queue", "name": "q"}}
        status, refused, _ = http("POST", f"{victim.url}/v1/jobs", body, token=tenant.token)
        assert (status, refused["error"]["code"]) == (503, "cluster_unavailable"), refused
        assert "clock" in refused["error"]["message"]
        wait_for(lambda: role_of(victim) == "follower", 15, "leadership to leave the victim")
        wait_for(lambda: not partitions_of(others[0], victim.node_id), 15, "partitions to move")
        wait_for(lambda: len(receiver.arrived) >= JOBS, 45, "every run to arrive")
        for job_id, run_at in jobs:
            arrived = next(t for k, t in receiver.arrived.items() if k.startswith(f"{job_id}:"))
            assert run_at - EARLY_TOLERANCE_MS <= arrived <= run_at + LATE_BOUND_MS, (
                job_id,
                arrived - run_at,
            )
        assert len(receiver.arrived) == JOBS
        offset = metric(victim, "schedd_clock_offset_seconds")  # peers' clocks minus its own
        assert offset is not None and -JUMP_S - 2 < offset < -JUMP_S + 2, offset
    finally:
        receiver.stop.set()
        receiver.join(timeout=15)
        shift.shift(0)
    wait_for(lambda: readiness(victim)[0] == 200, 15, "the victim to be ready again")
    assert metric(victim, "schedd_clock_trusted") == 1
    wait_for(lambda: partitions_of(others[0], victim.node_id), 20, "partitions to come back")


def test_a_follower_whose_clock_jumps_ahead_fires_nothing_early(cluster: dict[str, Any]) -> None:
    victim = next(n for n in cluster["nodes"] if role_of(n) == "follower")
    jump_and_check(cluster, victim)


def test_a_leader_whose_clock_jumps_ahead_hands_over_and_fires_nothing_early(
    cluster: dict[str, Any],
) -> None:
    victim = next(n for n in cluster["nodes"] if role_of(n) == "leader")
    jump_and_check(cluster, victim)
