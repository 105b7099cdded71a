"""A single real node: tenants, jobs and the contract's error bodies end to end."""

from __future__ import annotations

from tests.servers import NodeProcess, http


def test_tenant_creates_and_reads_a_job(node: NodeProcess) -> None:
    status, tenant, _ = http("POST", f"{node.url}/v1/tenants", {"name": "smoke"})
    assert status == 201, tenant
    token = tenant["token"]
    body = {
        "schedule": {"cron": "0 8 * * MON", "timezone": "Asia/Kolkata"},
        "target": {"type": "queue", "name": "digest-jobs"},
        "payload": {"user_id": 42},
    }
    status, job, _ = http("POST", f"{node.url}/v1/jobs", body, token=token)
    assert status == 201, job
    assert job["next_run_at"].endswith("T02:30:00Z")
    status, again, _ = http("GET", f"{node.url}/v1/jobs/{job['job_id']}", token=token)
    assert status == 200 and again == job


def test_a_405_names_the_methods_the_route_has(node: NodeProcess) -> None:
    status, answer, headers = http("PUT", f"{node.url}/v1/jobs", {})
    assert status == 405 and answer["error"]["code"] == "method_not_allowed"
    allowed = {method.strip() for method in headers["Allow"].split(",")}
    assert {"GET", "POST"} <= allowed
