""" "Run B after A" over real HTTP (issue 33 §2): an ack of A's message gives B a message at A's
scheduled time at once, a failure gives `on: failure` its run, B's runs name the run of A that
made them, A's job shows its downstream; cycles, unknown and foreign upstreams are 422s naming
the field; the fields an `after` schedule cannot have are 400s; it has no preview and no
backfill; cancelling A leaves B active and idle."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.api_helpers import (
    Tenant,
    assert_error,
    create_job,
    get_job,
    new_tenant,
)
from tests.servers import NodeProcess, http

RETRY_ONCE = {"max_attempts": 1}


@pytest.fixture
def tenant(node: NodeProcess) -> Tenant:
    return new_tenant(node)


def call(node: NodeProcess, tenant: Tenant, method: str, path: str, body: Any = None) -> Any:
    return http(method, f"{node.url}{path}", body, token=tenant.token)[:2]


def queue(name: str) -> dict[str, str]:
    return {"type": "queue", "name": name}


def after(job_id: str, on: str = "success") -> dict[str, Any]:
    return {"after": {"job_id": job_id, "on": on}}


def receive(node: NodeProcess, tenant: Tenant, name: str, wait: str = "10s") -> dict[str, Any]:
    """One message of the queue, long-polled (the test fails if none comes in time)."""
    status, got = call(node, tenant, "POST", f"/v1/queues/{name}/receive", {"max": 1, "wait": wait})
    assert status == 200 and len(got["messages"]) == 1, got
    message: dict[str, Any] = got["messages"][0]
    return message


def settle(node: NodeProcess, tenant: Tenant, name: str, verb: str, receipt: str) -> None:
    status, body = call(node, tenant, "POST", f"/v1/queues/{name}/{verb}", {"receipts": [receipt]})
    assert status == 200, body


def test_an_ack_of_a_gives_b_its_run_at_once_with_a_s_slot(
    node: NodeProcess, tenant: Tenant
) -> None:
    a = create_job(node, tenant.token, {"schedule": {"every": "1s"}, "target": queue("qa")})
    b = create_job(node, tenant.token, {"schedule": after(a["job_id"]), "target": queue("qb")})
    assert b["schedule"] == after(a["job_id"]) and b["next_run_at"] is None
    status, c = call(
        node,
        tenant,
        "POST",
        "/v1/jobs",
        {"schedule": after(b["job_id"], "finished"), "target": queue("qc")},
    )
    assert status == 201, c
    assert get_job(node, tenant.token, a["job_id"])["downstream"] == [
        {"job_id": b["job_id"], "on": "success"}
    ]
    assert "downstream" not in get_job(node, tenant.token, c["job_id"])

    first = receive(node, tenant, "qa")
    settle(node, tenant, "qa", "ack", first["receipt"])
    acked_at = time.monotonic()
    followed = receive(node, tenant, "qb")
    assert time.monotonic() - acked_at < 5  # offered at once, not at the next preload
    assert followed["job_id"] == b["job_id"]
    assert followed["scheduled_at"] == first["scheduled_at"]
    assert followed["idempotency_key"] == f"{b['job_id']}:{first['scheduled_at']}"
    settle(node, tenant, "qb", "nack", followed["receipt"])  # retried: not an end yet

    status, runs = call(node, tenant, "GET", f"/v1/jobs/{b['job_id']}/runs")
    assert status == 200, runs
    [run] = runs["runs"]
    assert run["triggered_by"] == {
        "job_id": a["job_id"],
        "scheduled_at": first["scheduled_at"],
        "status": "succeeded",
    }
    status, a_runs = call(node, tenant, "GET", f"/v1/jobs/{a['job_id']}/runs")
    assert all(r["triggered_by"] is None for r in a_runs["runs"])


def test_a_dead_run_of_a_starts_its_failure_dependent(node: NodeProcess, tenant: Tenant) -> None:
    a = create_job(
        node,
        tenant.token,
        {"schedule": {"delay": "0s"}, "target": queue("fa"), "retry": RETRY_ONCE},
    )
    on_fail = create_job(
        node, tenant.token, {"schedule": after(a["job_id"], "failure"), "target": queue("fb")}
    )
    create_job(node, tenant.token, {"schedule": after(a["job_id"]), "target": queue("fc")})
    message = receive(node, tenant, "fa")
    settle(node, tenant, "fa", "nack", message["receipt"])  # one attempt: dead
    followed = receive(node, tenant, "fb")
    assert followed["job_id"] == on_fail["job_id"]
    assert followed["scheduled_at"] == message["scheduled_at"]
    status, none = call(node, tenant, "POST", "/v1/queues/fc/receive", {"max": 1, "wait": "1s"})
    assert status == 200 and none["messages"] == []


def test_bad_upstreams_are_422_and_fields_an_after_schedule_cannot_have_are_400(
    node: NodeProcess, tenant: Tenant
) -> None:
    a = create_job(node, tenant.token, {"schedule": {"every": "1h"}, "target": queue("q")})
    b = create_job(node, tenant.token, {"schedule": after(a["job_id"]), "target": queue("q")})
    status, body = call(
        node, tenant, "PATCH", f"/v1/jobs/{a['job_id']}", {"schedule": after(b["job_id"])}
    )
    error = assert_error(status, body, 422, "invalid_dependency")
    cycle = f"{a['job_id']} -> {b['job_id']} -> {a['job_id']}"
    assert error["message"] == f"schedule.after.job_id: would close a cycle {cycle}"
    other = new_tenant(node)
    foreign = create_job(node, other.token, {"schedule": {"every": "1h"}, "target": queue("q")})
    for upstream in ("job_0000000000000000000000", foreign["job_id"]):
        status, body = call(
            node, tenant, "POST", "/v1/jobs", {"schedule": after(upstream), "target": queue("q")}
        )
        assert (
            f"no job '{upstream}'"
            in assert_error(status, body, 422, "invalid_dependency")["message"]
        )
    for extra, field in (
        ({"window": "1m"}, "window"),
        ({"max_runs": 3}, "max_runs"),
        ({"overlap_policy": "skip"}, "overlap_policy"),
    ):
        status, body = call(
            node,
            tenant,
            "POST",
            "/v1/jobs",
            {"schedule": after(a["job_id"]), "target": queue("q"), **extra},
        )
        assert assert_error(status, body, 400)["message"].startswith(field), body
    schedule = {**after(a["job_id"]), "exclude": ["hols"]}
    status, body = call(
        node, tenant, "POST", "/v1/jobs", {"schedule": schedule, "target": queue("q")}
    )
    assert assert_error(status, body, 400, "invalid_schedule")["message"].startswith(
        "schedule.exclude"
    )
    status, body = call(
        node,
        tenant,
        "POST",
        "/v1/jobs",
        {"schedule": {"after": {"job_id": a["job_id"], "on": "x"}}, "target": queue("q")},
    )
    assert assert_error(status, body, 400, "invalid_schedule")["message"].startswith(
        "schedule.after.on"
    )


def test_an_after_job_has_no_preview_and_no_backfill_and_outlives_its_upstream(
    node: NodeProcess, tenant: Tenant
) -> None:
    a = create_job(node, tenant.token, {"schedule": {"every": "1h"}, "target": queue("q")})
    b = create_job(node, tenant.token, {"schedule": after(a["job_id"]), "target": queue("q")})
    status, body = call(
        node, tenant, "POST", "/v1/schedules:preview", {"schedule": after(a["job_id"])}
    )
    message = assert_error(status, body, 400, "invalid_schedule")["message"]
    assert message == (
        f"schedule.after: has no times of its own: it runs when job {a['job_id']} ends (success)"
    )
    status, body = call(
        node,
        tenant,
        "POST",
        f"/v1/jobs/{b['job_id']}/backfill",
        {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"},
    )
    assert_error(status, body, 422, "invalid_backfill")
    assert call(node, tenant, "DELETE", f"/v1/jobs/{a['job_id']}")[0] in (200, 204)
    left = get_job(node, tenant.token, b["job_id"])
    assert (left["status"], left["next_run_at"]) == ("active", None)
    assert get_job(node, tenant.token, a["job_id"])["downstream"] == [
        {"job_id": b["job_id"], "on": "success"}
    ]


def test_a_dry_run_put_by_key_refuses_what_apply_would_except_an_upstream_yet_to_be_made(
    node: NodeProcess, tenant: Tenant
) -> None:
    a = create_job(node, tenant.token, {"schedule": {"every": "1h"}, "target": queue("q")})
    b = {"schedule": after(a["job_id"]), "target": queue("q")}
    status, made = call(node, tenant, "PUT", "/v1/jobs/by-key/b", b)
    assert status == 201, made
    # A after b would close a cycle: refused by the plan as by the PUT itself.
    cyclic = {"schedule": after(made["job_id"]), "target": queue("q")}
    a_key = "/v1/jobs/by-key/a?dry_run=true"
    status, body = call(node, tenant, "PUT", a_key, cyclic)  # no job has key a: a new one
    assert status == 200 and body["action"] == "create", body
    status, body = call(node, tenant, "PATCH", f"/v1/jobs/{a['job_id']}", {"key": "a"})
    assert status == 200, body
    status, body = call(node, tenant, "PUT", a_key, cyclic)
    assert "would close a cycle" in assert_error(status, body, 422, "invalid_dependency")["message"]
    missing = {"schedule": {"every": "1h", "exclude": ["nope"]}, "target": queue("q")}
    status, body = call(node, tenant, "PUT", "/v1/jobs/by-key/c?dry_run=true", missing)
    assert "no calendar named 'nope'" in assert_error(status, body, 400)["message"]
    later = {"schedule": after("<upstream-key>"), "target": queue("q")}
    status, body = call(node, tenant, "PUT", "/v1/jobs/by-key/d?dry_run=true", later)
    assert status == 200 and body["action"] == "create", body
