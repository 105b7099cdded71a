"""Retention end to end on a real node (issue 14): seconds-long retention, each kind pruned
after its cutoff and not before, a tenant's shorter values, the disk-low refusal."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api_helpers import create_job, new_tenant
from tests.integration.test_schedctl import Ctl
from tests.servers import (
    ADMIN_TOKEN,
    NodeProcess,
    http,
    make_nodes,
    metrics_text,
    running,
    wait_for,
)

RETENTION = '[retention]\nruns = "4s"\naudit = "1h"\ndeadletters = "4s"\nmessages = "3s"\n'
NOW_JOB = {"schedule": {"delay": "0s"}, "target": {"type": "queue", "name": "q"}}


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    base: Path = tmp_path_factory.mktemp("retention")
    with running(make_nodes(base, 1, extra_sections=RETENTION)) as nodes:
        yield nodes[0]


def receive(node: NodeProcess, token: str) -> list[dict[str, Any]]:
    body = {"max": 10, "wait": "5s", "visibility_timeout": "30s"}
    status, answer, _ = http("POST", f"{node.url}/v1/queues/q/receive", body, token=token)
    assert status == 200, answer
    messages: list[dict[str, Any]] = answer["messages"]
    return messages


def runs(node: NodeProcess, token: str, job_id: str) -> list[dict[str, Any]] | None:
    """The job's runs, or None once the job itself is gone."""
    status, answer, _ = http("GET", f"{node.url}/v1/jobs/{job_id}/runs", token=token)
    if status == 404:
        return None
    assert status == 200, answer
    found: list[dict[str, Any]] = answer["runs"]
    return found


@pytest.mark.slow
def test_a_finished_one_time_job_goes_after_its_retention_not_before(short: NodeProcess) -> None:
    tenant = new_tenant(short)
    job = create_job(short, tenant.token, NOW_JOB)
    [message] = wait_for(lambda: receive(short, tenant.token) or None, 20, "the run's message")
    acks = {"receipts": [message["receipt"]]}
    status, _, _ = http("POST", f"{short.url}/v1/queues/q/ack", acks, token=tenant.token)
    acked_at = time.monotonic()
    assert status == 200
    kept = runs(short, tenant.token, job["job_id"])
    assert kept is not None and [r["status"] for r in kept] == ["succeeded"]
    wait_for(lambda: runs(short, tenant.token, job["job_id"]) is None or None, 30, "the prune")
    assert time.monotonic() - acked_at >= 4.0  # never before its retention
    status, _, _ = http("GET", f"{short.url}/v1/jobs/{job['job_id']}", token=tenant.token)
    assert status == 404


@pytest.mark.slow
def test_an_unreceived_message_becomes_a_dead_letter_then_goes(short: NodeProcess) -> None:
    tenant = new_tenant(short)
    job = create_job(short, tenant.token, NOW_JOB)

    def dead_letters() -> list[dict[str, Any]]:
        status, answer, _ = http("GET", f"{short.url}/v1/deadletters", token=tenant.token)
        assert status == 200, answer
        found: list[dict[str, Any]] = answer["deadletters"]
        return found

    [dead] = wait_for(lambda: dead_letters() or None, 30, "a dead letter")
    assert dead["job_id"] == job["job_id"]
    assert dead["error"] == "not received within 3s (retention.messages)"
    wait_for(lambda: dead_letters() == [] or None, 30, "the dead letter's own retention")


def test_a_tenant_shortens_its_own_retention(short: NodeProcess) -> None:
    tenant = new_tenant(short)
    ctl = Ctl(short.url, tenant.token)
    shown = ctl("retention", "set", "runs=1s", "--json")
    assert shown.returncode == 0, shown.stderr
    status, answer, _ = http("GET", f"{short.url}/v1/retention", token=tenant.token)
    assert status == 200
    assert answer["retention"] == {
        "runs": "1s",
        "audit": "1h",
        "deadletters": "4s",
        "messages": "3s",
    }
    assert answer["own"] == {"runs": "1s"} and answer["node"]["runs"] == "4s"
    longer = ctl("retention", "set", "deadletters=30d", "--json")
    assert longer.returncode == 0, longer.stderr
    assert json.loads(longer.stdout)["retention"]["deadletters"] == "4s"  # the node's is shorter
    audit = ctl("retention", "set", "audit=1s")
    assert audit.returncode == 2 and "error: audit:" in audit.stderr  # the operator's record
    bad = ctl("retention", "set", "forever=1d")
    assert bad.returncode == 2 and "error: forever: is not a kind" in bad.stderr
    status, answer, _ = http("PUT", f"{short.url}/v1/retention", {"runs": "0s"}, token=tenant.token)
    assert status == 400 and "body.runs" in answer["error"]["message"]


def test_gc_status_shows_what_the_node_keeps(short: NodeProcess) -> None:
    new_tenant(short)  # an audit record, whatever ran before on this node (the module's fixture)
    admin = Ctl(short.url, ADMIN_TOKEN)
    wait_for(lambda: http("GET", f"{short.url}/v1/admin/retention")[1]["last_prune"], 20, "a prune")
    result = admin("gc", "status")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["KIND", "ROWS", "OLDEST", "KEPT", "(UTC)", "RETENTION"]
    assert [line.split()[0] for line in lines[1:6]] == [
        "runs",
        "jobs",
        "deadletters",
        "messages",
        "audit",
    ]
    assert any(line.startswith("writes") and line.split()[-1] == "accepted" for line in lines)
    status, answer, _ = http("GET", f"{short.url}/v1/admin/retention")
    assert status == 200 and answer["files"]["database"] > 0 and answer["files"]["journal"] > 0
    assert answer["disk"]["free_bytes"] > answer["disk"]["min_free_bytes"]
    text = metrics_text(short.url)
    assert "schedd_disk_low 0.0" in text and 'schedd_data_bytes{file="database"}' in text
    assert "schedd_last_prune_timestamp_seconds" in text
    assert 'schedd_retained_oldest_timestamp_seconds{kind="audit"}' in text


@pytest.mark.slow
def test_low_disk_refuses_new_data_and_keeps_the_rest_going(tmp_path: Path) -> None:
    [node] = make_nodes(tmp_path, 1)
    with running([node]):
        tenant = new_tenant(node)
        job = create_job(node, tenant.token)
    config = node.config_path.read_text()
    node.config_path.write_text(config + '\n[storage]\nmin_free = "99.9%"\n')
    with running([node]):
        status, answer, headers = http("POST", f"{node.url}/v1/jobs", NOW_JOB, token=tenant.token)
        assert status == 507 and answer["error"]["code"] == "storage_low"
        assert "storage.min_free" in answer["error"]["message"]
        assert headers["Retry-After"] == "60"
        added = Ctl(node.url, tenant.token)("add", "--in", "1m", "--queue", "q")
        assert added.returncode == 3 and "storage.min_free" in added.stderr
        status, _, _ = http("DELETE", f"{node.url}/v1/jobs/{job['job_id']}", token=tenant.token)
        assert status == 204  # cancelling frees space: never refused
        status, ready, _ = http("GET", f"{node.url}/readyz", token=None)
        assert status == 200 and ready["writes"] == "refused"
        status, health, _ = http("GET", f"{node.url}/healthz", token=None)
        assert health["disk_low"] is True
        status, gc, _ = http("GET", f"{node.url}/v1/admin/retention")
        assert gc["writes"] == "refused" and gc["disk"]["low"] is True
