"""A backfill on three real nodes across a leader kill: every slot of the range is claimed
exactly once (no slot lost, none delivered twice at one attempt), and the replicas agree."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.model import partition_of
from schedd.timeformat import format_instant
from tests.cluster.test_dispatch_cluster import (
    DISPATCH,
    LEASE_TTL_S,
    PARTITIONS,
    Consumer,
    assert_replicas_agree,
    finish,
    held_partitions,
    leader_of,
    runs_of,
    taken_over,
    wait_balanced,
)
from tests.integration.api_helpers import Tenant, new_tenant
from tests.servers import NodeProcess, http, make_nodes, ms, now_ms, running, wait_for, wait_ready

pytestmark = pytest.mark.cluster
JOBS = 6
STEP_MS = 10_000
SLOTS = 360  # an hour of 10 s slots a job: 2,160 runs paced at 200 a second
RETRY = {"max_attempts": 10, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    base: Path = tmp_path_factory.mktemp("backfill-cluster")
    with running(make_nodes(base, 3, extra_sections=DISPATCH)) as nodes:
        yield nodes


def backfill(node: NodeProcess, tenant: Tenant, job_id: str, body: dict[str, str]) -> Any:
    """POST the backfill until it is answered 202 (a 503 while Raft elects a leader, or a
    timeout, may have applied part of it: a retry adds only the rest)."""

    def attempt() -> Any:
        try:
            status, answer, _ = http(
                "POST", f"{node.url}/v1/jobs/{job_id}/backfill", body, token=tenant.token
            )
        except OSError:
            return None
        assert status in (202, 503), answer
        return answer if status == 202 else None

    return wait_for(attempt, 30, f"a backfill of {job_id} answered")


def test_a_backfill_across_a_leader_kill_claims_every_slot_exactly_once(
    cluster: list[NodeProcess],
) -> None:
    wait_ready(cluster)
    wait_balanced(cluster[0])
    leader = leader_of(cluster)
    watcher = next(n for n in cluster if n is not leader)
    tenant = new_tenant(watcher, dispatch_rate=400)  # its backfills: 200 runs a second
    start = (now_ms() // 60_000 - 120) * 60_000
    body = {
        "schedule": {"every": "10s", "start_at": format_instant(start)},
        "target": {"type": "queue", "name": "bf"},
        "retry": RETRY,
    }
    status, created, _ = http(
        "POST", f"{watcher.url}/v1/jobs:batch", {"jobs": [body] * 4 * JOBS}, token=tenant.token
    )
    assert status == 200, created
    # Half of the jobs backfilled in partitions the leader holds: their claims move with the kill.
    lost = held_partitions(watcher)[leader.node_id]
    on_leader = [j for j in created["results"] if partition_of(j["job_id"], PARTITIONS) in lost]
    elsewhere = [j for j in created["results"] if j not in on_leader]
    assert len(on_leader) >= JOBS // 2, len(on_leader)
    jobs = on_leader[:1] + elsewhere[:1] + on_leader[1:2] + elsewhere[1:2]
    jobs += on_leader[2:3] + elsewhere[2:3]
    for job in created["results"]:
        if job not in jobs:
            http("DELETE", f"{watcher.url}/v1/jobs/{job['job_id']}", token=tenant.token)
    span = {"from": format_instant(start), "to": format_instant(start + SLOTS * STEP_MS)}
    expected = {format_instant(start + k * STEP_MS) for k in range(SLOTS)}
    with Consumer(watcher, tenant, "bf") as consumer:
        for job in jobs[: JOBS // 2]:  # before the kill: the whole count
            assert backfill(watcher, tenant, job["job_id"], span) == {"runs": SLOTS}
        wait_for(
            lambda: any(r["backfill"] for r in runs_of(watcher, tenant, jobs[0]["job_id"])),
            15,
            "the first backfill runs claimed",
        )
        leader.kill()  # mid-backfill: about 1,000 of its runs wait, paced over the next seconds
        try:
            for job in jobs[JOBS // 2 :]:  # across the election: retried until answered
                backfill(watcher, tenant, job["job_id"], span)
            wait_for(lambda: taken_over(watcher, leader), LEASE_TTL_S + 10, "its partitions")
        finally:
            leader.start()
        wait_ready(cluster)

        def backfilled() -> dict[str, list[dict[str, Any]]] | None:
            found = {
                job["job_id"]: [r for r in runs_of(watcher, tenant, job["job_id"]) if r["backfill"]]
                for job in jobs
            }
            done = all(
                len(runs) == SLOTS and all(r["status"] == "succeeded" for r in runs)
                for runs in found.values()
            )
            return found if done else None

        found = wait_for(backfilled, 60, "every backfill run claimed and acked")
        cancelled_ms = finish(watcher, tenant, jobs)
    assert cancelled_ms > start
    keys: set[str] = set()
    for job_id, runs in found.items():
        assert {r["scheduled_at"] for r in runs} == expected, job_id  # none lost
        assert all(ms(r["scheduled_at"]) < ms(span["to"]) for r in runs)
        keys |= {f"{job_id}:{r['scheduled_at']}" for r in runs}
    attempts: dict[str, list[int]] = defaultdict(list)
    for key, attempt in consumer.received:
        attempts[key].append(attempt)
    assert keys <= set(attempts), "a backfill run was never delivered"
    doubled = {k: a for k, a in attempts.items() if k in keys and a != sorted(set(a))}
    assert not doubled, f"claimed or delivered twice at one attempt: {doubled}"
    url = f"{watcher.url}/v1/jobs/{jobs[0]['job_id']}/backfill"
    status, again, _ = http("POST", url, span, token=tenant.token)  # cancelled now
    assert (status, again["error"]["code"]) == (409, "conflict")
    assert_replicas_agree(cluster)
