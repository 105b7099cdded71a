"""An attempt's output over HTTP (issue 34): an ack or nack carries `outputs` by receipt, kept
bounded (the first and last 4,096 characters) and shown with the attempt in the runs listing; a
nack with `dead: true` makes a dead letter at once; a bad `outputs` is a 400 naming it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.api_helpers import Tenant, assert_error, create_job, new_tenant
from tests.servers import NodeProcess, http


@pytest.fixture
def tenant(node: NodeProcess) -> Tenant:
    return new_tenant(node)


def call(node: NodeProcess, tenant: Tenant, method: str, path: str, body: Any = None) -> Any:
    return http(method, f"{node.url}{path}", body, token=tenant.token)[:2]


def one_message(node: NodeProcess, tenant: Tenant, queue: str, **job: Any) -> tuple[str, str]:
    """A job due now on `queue`, its message received: (job_id, receipt)."""
    body = {"schedule": {"delay": "0s"}, "target": {"type": "queue", "name": queue}, **job}
    made = create_job(node, tenant.token, body)
    status, got = call(node, tenant, "POST", f"/v1/queues/{queue}/receive", {"wait": "10s"})
    assert status == 200 and len(got["messages"]) == 1, got
    return made["job_id"], got["messages"][0]["receipt"]


def attempts(node: NodeProcess, tenant: Tenant, job_id: str) -> list[dict[str, Any]]:
    """The job's one run's attempts, with their outputs (asked for: ?outputs=true)."""
    status, runs = call(node, tenant, "GET", f"/v1/jobs/{job_id}/runs?outputs=true")
    assert status == 200, runs
    status, plain = call(node, tenant, "GET", f"/v1/jobs/{job_id}/runs")
    assert all(a["output"] is None for a in plain["runs"][0]["attempts"]), plain  # not asked
    found: list[dict[str, Any]] = runs["runs"][0]["attempts"]
    return found


def test_an_acks_output_is_kept_with_the_attempt_bounded(node: NodeProcess, tenant: Tenant) -> None:
    job_id, receipt = one_message(node, tenant, "out")
    long = "a" * 5_000 + "b" * 5_000
    body = {"receipts": [receipt], "outputs": {receipt: long, "x.unknown": "ignored"}}
    status, acked = call(node, tenant, "POST", "/v1/queues/out/ack", body)
    assert status == 200 and acked == {"acked": 1}, acked
    [attempt] = attempts(node, tenant, job_id)
    kept = attempt["output"]
    assert kept.startswith("a" * 4_096 + "\n[... 1,808 characters left out ...]\n")
    assert kept.endswith("b" * 4_096) and len(kept) == 8_192 + len(
        "\n[... 1,808 characters left out ...]\n"
    )


def test_a_dead_nack_buries_the_run_at_once_with_its_output(
    node: NodeProcess, tenant: Tenant
) -> None:
    job_id, receipt = one_message(node, tenant, "doomed")  # three attempts by default
    body = {
        "receipts": [receipt],
        "error": "no user 'alice' on this machine",
        "dead": True,
        "outputs": {receipt: "su: user alice does not exist\n"},
    }
    status, nacked = call(node, tenant, "POST", "/v1/queues/doomed/nack", body)
    assert status == 200 and nacked == {"nacked": 1}, nacked
    [attempt] = attempts(node, tenant, job_id)
    assert attempt["output"] == "su: user alice does not exist\n"
    status, letters = call(node, tenant, "GET", "/v1/deadletters")
    mine = [d for d in letters["deadletters"] if d["job_id"] == job_id]
    assert [d["error"] for d in mine] == ["no user 'alice' on this machine"], letters


def test_bad_outputs_and_dead_are_400s_naming_them(node: NodeProcess, tenant: Tenant) -> None:
    for body, field in [
        ({"receipts": ["r.1"], "outputs": ["x"]}, "outputs"),
        ({"receipts": ["r.1"], "outputs": {"r.1": 7}}, "outputs"),
        ({"receipts": ["r.1"], "dead": "yes"}, "dead"),
    ]:
        status, answer = call(node, tenant, "POST", "/v1/queues/q/nack", body)
        assert assert_error(status, answer, 400)["message"].startswith(field), answer
    job = create_job(node, tenant.token)
    status, answer = call(node, tenant, "GET", f"/v1/jobs/{job['job_id']}/runs?outputs=yes")
    assert assert_error(status, answer, 400)["message"].startswith("outputs"), answer
