"""HTTP delivery on three real nodes calling a local receiver: kill -9 of the node whose calls are
in flight means those calls are made again by the node that takes its partitions, with the same
`Idempotency-Key`, and every run still ends `succeeded` once; a batch over every node's
partitions, made while leases move, is delivered at least once and recorded once."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.model import partition_of
from tests.cluster.test_dispatch_cluster import (
    assert_replicas_agree,
    leader_of,
    runs_of,
    wait_balanced,
)
from tests.integration.api_helpers import Tenant, new_tenant
from tests.receiver import Answer, Received, Receiver, receiving
from tests.servers import NodeProcess, http, make_nodes, running, wait_for, wait_ready

pytestmark = pytest.mark.cluster
PARTITIONS = 256
LEASE_TTL_S = 2.0
SECTIONS = (
    f'[dispatch]\nlease_ttl = "{LEASE_TTL_S:g}s"\n\n[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'
)
HELD_JOBS = 30
HOLD_S = 6.0  # the receiver holds the first calls this long: the victim dies meanwhile
BATCH_JOBS = 200
RETRY = {"max_attempts": 10, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    """Three nodes shared by the module; a test that kills one starts it again."""
    base: Path = tmp_path_factory.mktemp("delivery-cluster")
    with running(make_nodes(base, 3, extra_sections=SECTIONS)) as nodes:
        yield nodes


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as started:
        yield started


# ------------------------------------------------------------------ helpers


def create_http_jobs(
    node: NodeProcess, tenant: Tenant, url: str, count: int
) -> list[dict[str, Any]]:
    """`count` one-time jobs due now that call `url`, spread over the partitions by their ids."""
    body = {
        "schedule": {"delay": "0s"},
        "target": {"type": "http", "url": url, "timeout": "10s"},
        "payload": {"n": 1},
        "retry": RETRY,
    }
    status, created, _ = http(
        "POST", f"{node.url}/v1/jobs:batch", {"jobs": [body] * count}, token=tenant.token
    )
    assert status == 200, created
    results: list[dict[str, Any]] = created["results"]
    assert all("job_id" in r for r in results), results
    return results


def header(request: Received, name: str) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == name.lower()), None)


def calls_by_job(requests: list[Received]) -> dict[str, list[Received]]:
    """The receiver's requests grouped by the job id in their body."""
    grouped: dict[str, list[Received]] = defaultdict(list)
    for request in requests:
        grouped[json.loads(request.body)["job_id"]].append(request)
    return grouped


def only_run(node: NodeProcess, tenant: Tenant, job_id: str) -> dict[str, Any]:
    """The one run of a one-time job: a run recorded twice is a failure."""
    runs = runs_of(node, tenant, job_id)
    assert len(runs) == 1, f"{job_id} has {len(runs)} runs: {runs}"
    return runs[0]


def all_succeeded(node: NodeProcess, tenant: Tenant, jobs: list[dict[str, Any]]) -> bool:
    return all(
        [r["status"] for r in runs_of(node, tenant, job["job_id"])] == ["succeeded"] for job in jobs
    )


def check_delivered(
    node: NodeProcess, tenant: Tenant, jobs: list[dict[str, Any]], requests: list[Received]
) -> dict[str, list[Received]]:
    """Every job delivered at least once, all its calls with its run's key and attempt 1
    (a redelivery after a crash is the same attempt), and its one run recorded `succeeded`."""
    grouped = calls_by_job(requests)
    missing = [job["job_id"] for job in jobs if job["job_id"] not in grouped]
    assert not missing, f"never delivered: {missing}"
    for job in jobs:
        run = only_run(node, tenant, job["job_id"])
        assert run["status"] == "succeeded", run
        key = f"{job['job_id']}:{run['scheduled_at']}"
        for request in grouped[job["job_id"]]:
            assert header(request, "Idempotency-Key") == key, request.headers
            assert header(request, "webhook-id") == key, request.headers
            assert json.loads(request.body) == {
                "job_id": job["job_id"],
                "scheduled_at": run["scheduled_at"],
                "attempt": 1,
                "payload": {"n": 1},
            }
        assert [a["attempt"] for a in run["attempts"]] == [1], run
    return grouped


def holder_of(held: dict[str, set[int]], job_id: str) -> str:
    partition = partition_of(job_id, PARTITIONS)
    return next(node_id for node_id, parts in held.items() if partition in parts)


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("role", ["follower", "leader"])
def test_kill_9_of_the_delivering_node_mid_flight_delivers_again_with_the_same_key(
    cluster: list[NodeProcess], receiver: Receiver, role: str
) -> None:
    wait_ready(cluster)
    held = wait_balanced(cluster[0])
    receiver.script("hold", *[Answer(delay_s=HOLD_S)] * HELD_JOBS, Answer())
    leader = leader_of(cluster)
    watcher = next(n for n in cluster if n is not leader)
    tenant = new_tenant(watcher)  # everything through one survivor: it reads its own writes
    jobs = create_http_jobs(watcher, tenant, receiver.url("hold"), HELD_JOBS)
    first_calls = receiver.wait_for(HELD_JOBS, "hold", timeout_s=15)
    by_node: dict[str, list[str]] = defaultdict(list)
    for job_id in calls_by_job(first_calls):
        by_node[holder_of(held, job_id)].append(job_id)
    victim = leader if role == "leader" else next(n for n in cluster if n not in (leader, watcher))
    in_flight = by_node[victim.node_id]
    # Which node holds a job's partition is a hash: 30 jobs give the victim about 10, and
    # fewer than one only once in ~200,000 runs (3 was asked before: 2% of runs failed).
    assert in_flight, by_node
    victim.kill()
    try:
        killed_at = time.time()
        arrived = [r.at for r in first_calls if json.loads(r.body)["job_id"] in in_flight]
        assert killed_at - min(arrived) < HOLD_S, "the victim's calls were answered before"
        statuses = [r["status"] for j in in_flight for r in runs_of(watcher, tenant, j)]
        assert "succeeded" not in statuses, "the victim recorded outcomes it never received"
        wait_for(
            lambda: all_succeeded(watcher, tenant, jobs),
            LEASE_TTL_S + HOLD_S + 20,  # an election, a lease move, then the held calls end
            "every run succeeded on the survivors",
        )
    finally:
        victim.start()
    grouped = check_delivered(watcher, tenant, jobs, receiver.received("hold"))
    redelivered = [j for j in in_flight if len(grouped[j]) >= 2]
    assert redelivered == in_flight, {j: len(grouped[j]) for j in in_flight}
    wait_ready(cluster)
    assert_replicas_agree(cluster)


def test_a_batch_over_every_nodes_partitions_is_delivered_and_recorded_once(
    cluster: list[NodeProcess], receiver: Receiver
) -> None:
    wait_ready(cluster)  # the victim of the last test may still be taking its partitions back
    tenant = new_tenant(cluster[0])
    jobs = create_http_jobs(cluster[0], tenant, receiver.url("batch"), BATCH_JOBS)
    wait_for(
        lambda: all_succeeded(cluster[0], tenant, jobs),
        30,
        "every run of the batch succeeded",
    )
    held = wait_balanced(cluster[0])
    holders = {holder_of(held, job["job_id"]) for job in jobs}
    assert holders == {n.node_id for n in cluster}, "the batch did not reach every node"
    check_delivered(cluster[0], tenant, jobs, receiver.received("batch"))
    assert_replicas_agree(cluster)
