"""Pauses on three real nodes (issue 31): a tenant paused through one node has no run claimed by
any node's dispatcher until it is resumed, then each job's misfire policy decides on the runs it
missed; a queue paused through one node hands nothing to consumers long-polling through the
others, and its resume wakes them; the replicas agree."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_dispatch_cluster import (
    DISPATCH,
    assert_replicas_agree,
    leader_of,
    runs_of,
    wait_balanced,
)
from tests.integration.api_helpers import Tenant, new_tenant
from tests.integration.test_alert_sender import signed_by
from tests.receiver import receiving
from tests.servers import NodeProcess, http, make_nodes, ms, running, wait_for, wait_ready

pytestmark = pytest.mark.cluster
# A run later than 1 s follows its job's misfire policy; alerts may go to a loopback receiver.
SECTIONS = DISPATCH + 'misfire_threshold = "1s"\n[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'
ONE_TRY = {"max_attempts": 1, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}
POLICIES = ("run_once", "skip", "run_all")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    base: Path = tmp_path_factory.mktemp("pauses-cluster")
    with running(make_nodes(base, 3, extra_sections=SECTIONS)) as nodes:
        wait_ready(nodes)
        wait_balanced(nodes[0])
        yield nodes


def post(node: NodeProcess, path: str, body: Any = None, token: str | None = None) -> Any:
    kwargs: dict[str, Any] = {} if token is None else {"token": token}
    status, answer, _ = http("POST", f"{node.url}{path}", body, **kwargs)
    assert status == 200, (path, status, answer)
    return answer


def test_a_paused_tenant_is_claimed_by_no_node_until_resumed(cluster: list[NodeProcess]) -> None:
    leader = leader_of(cluster)
    follower = next(n for n in cluster if n is not leader)
    tenant = new_tenant(follower)
    jobs: dict[str, dict[str, Any]] = {}
    for policy in POLICIES:  # several jobs a policy: their partitions spread over the nodes
        for k in range(3):
            body = {
                "name": f"{policy}-{k}",
                "schedule": {"every": "1s"},
                "target": {"type": "queue", "name": "held"},
                "misfire_policy": policy,
            }
            status, job, _ = http("POST", f"{follower.url}/v1/jobs", body, token=tenant.token)
            assert status == 201, job
            jobs[job["job_id"]] = job
    wait_for(
        lambda: all(runs_of(leader, tenant, job_id) for job_id in jobs), 15, "a run of every job"
    )
    paused = post(follower, f"/v1/tenants/{tenant.tenant_id}/pause", {"reason": "migration"})
    assert paused["paused"] is True
    paused_ms = int(time.time() * 1000)
    time.sleep(4)  # slots missed while paused, past the misfire threshold
    late = {  # a claim committed after the pause: the fence failed
        job_id: [
            r
            for r in runs_of(leader, tenant, job_id)
            if r["dispatched_at"] and ms(r["dispatched_at"]) > paused_ms + 1_000
        ]
        for job_id in jobs
    }
    assert not any(late.values()), late
    before = {job_id: len(runs_of(leader, tenant, job_id)) for job_id in jobs}
    post(leader, f"/v1/tenants/{tenant.tenant_id}/resume")
    after = wait_for(
        lambda: (
            (r := {j: runs_of(leader, tenant, j) for j in jobs})
            and all(len(r[j]) > before[j] for j in jobs)
            and r
        ),
        15,
        "runs of every job after the resume",
    )
    for job_id, job in jobs.items():
        first = after[job_id][before[job_id]]  # oldest first: the first run since the resume
        if job["misfire_policy"] == "skip":
            assert first["status"] == "skipped", (job["name"], first)
        else:
            assert first["status"] != "skipped", (job["name"], first)
    for job_id in jobs:
        status, _, _ = http("DELETE", f"{leader.url}/v1/jobs/{job_id}", token=tenant.token)
        assert status == 204
    assert_replicas_agree(cluster)


def _receive(node: NodeProcess, tenant: Tenant, wait: str) -> list[dict[str, Any]]:
    status, answer, _ = http(
        "POST",
        f"{node.url}/v1/queues/parked/receive",
        {"max": 10, "wait": wait},
        token=tenant.token,
        timeout_s=30,
    )
    assert status == 200, answer
    messages: list[dict[str, Any]] = answer["messages"]
    return messages


def test_a_queue_paused_through_one_node_holds_receives_through_the_others(
    cluster: list[NodeProcess],
) -> None:
    leader = leader_of(cluster)
    followers = [n for n in cluster if n is not leader]
    tenant = new_tenant(leader)
    post(followers[0], "/v1/queues/parked/pause", {"reason": "deploy"}, tenant.token)
    body = {"schedule": {"delay": "0s"}, "target": {"type": "queue", "name": "parked"}}
    created = []
    for _ in range(5):
        status, job, _ = http("POST", f"{leader.url}/v1/jobs", body, token=tenant.token)
        assert status == 201, job
        created.append(job["job_id"])

    def claimed() -> bool:
        _, answer, _ = http("GET", f"{followers[1].url}/v1/queues", token=tenant.token)
        queue = next((q for q in answer["queues"] if q["name"] == "parked"), None)
        return queue is not None and queue["ready"] == 5 and queue["paused"] is True

    wait_for(claimed, 15, "five runs claimed into the paused queue, seen by another node")
    got: dict[str, tuple[list[dict[str, Any]], float]] = {}

    def consume(node: NodeProcess) -> None:
        messages = _receive(node, tenant, "10s")
        got[node.node_id] = (messages, time.monotonic())

    waiting = [threading.Thread(target=consume, args=(node,)) for node in cluster]
    for thread in waiting:
        thread.start()
    time.sleep(1)  # every long poll is waiting (nothing to read it from outside)
    assert got == {}  # none answered while the queue is paused
    post(followers[1], "/v1/queues/parked/resume", None, tenant.token)
    resumed_at = time.monotonic()
    for thread in waiting:
        thread.join(timeout=15)
    # The polls that got the messages were woken by the resume, not by their end (10 s).
    assert all(at - resumed_at < 5 for messages, at in got.values() if messages), got
    received = sorted(m["job_id"] for messages, _ in got.values() for m in messages)
    assert received == sorted(created)  # each once, through whichever node
    assert_replicas_agree(cluster)


def test_a_failing_job_alerts_once_signed_and_pauses_itself(cluster: list[NodeProcess]) -> None:
    leader = leader_of(cluster)
    followers = [n for n in cluster if n is not leader]
    tenant = new_tenant(followers[0])
    with receiving() as receiver:
        policy = {"alert_url": receiver.url("alerts"), "after": 2, "pause": True}
        body = {
            "name": "nightly-export",
            "schedule": {"every": "1s"},
            "target": {"type": "queue", "name": "doomed"},
            "retry": ONE_TRY,
            "on_failure": policy,
        }
        status, job, _ = http("POST", f"{followers[0].url}/v1/jobs", body, token=tenant.token)
        assert status == 201, job
        for k, node in enumerate(followers):  # each dead run nacked through another node
            q = f"{node.url}/v1/queues/doomed"
            got = wait_for(
                lambda q=q: http(
                    "POST", f"{q}/receive", {"max": 1, "wait": "2s"}, token=tenant.token
                )[1]["messages"],
                15,
                "a run to fail",
            )
            nack = {"receipts": [got[0]["receipt"]], "error": f"export failed {k}"}
            post(node, "/v1/queues/doomed/nack", nack, tenant.token)
        [alert] = receiver.wait_for(1, "alerts", timeout_s=20)
        assert signed_by(tenant.signing_secret, alert.headers, alert.body)  # checked here
        sent = json.loads(alert.body)
        assert sent["type"] == "job.failing" and sent["job_id"] == job["job_id"]
        assert sent["consecutive_failures"] == 2 and sent["paused"] is True
        assert [r["error"] for r in sent["runs"]] == ["export failed 1", "export failed 0"]
        for node in cluster:  # every replica shows the pause and why
            status, shown, _ = http(
                "GET", f"{node.url}/v1/jobs/{job['job_id']}", token=tenant.token
            )
            assert shown["status"] == "paused", (node.node_id, shown)
            assert shown["paused_reason"] == "paused after 2 consecutive failures"
        status, listed, _ = http("GET", f"{leader.url}/v1/alerts", token=tenant.token)
        assert status == 200 and len(listed["alerts"]) == 1, listed
        assert len(receiver.received("alerts")) == 1  # one alert for the streak
    assert_replicas_agree(cluster)
