"""Failures seen before customers see them (issue 31), over real HTTP on one node: a job's
last_success_at, last_failure_at and consecutive_failures after real runs succeed and die, and
GET /v1/jobs?failing=true; each tenant sees only its own."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.integration.api_helpers import Tenant, assert_error, create_job, get_job, new_tenant
from tests.integration.test_api_console import NO_RETRY, listed
from tests.integration.test_schedctl import Ctl
from tests.servers import NodeProcess, http, wait_for


def receive_one(node: NodeProcess, tenant: Tenant, queue: str) -> str:
    """The receipt of the next message of `queue` (long-polling until it comes)."""

    def received() -> str | None:
        wanted = {"max": 1, "wait": "2s", "visibility_timeout": "60s"}
        status, got, _ = http(
            "POST", f"{node.url}/v1/queues/{queue}/receive", wanted, token=tenant.token
        )
        assert status == 200, got
        return got["messages"][0]["receipt"] if got["messages"] else None

    receipt: str = wait_for(received, 30.0, f"a message on {queue}")
    return receipt


def settle(node: NodeProcess, tenant: Tenant, queue: str, verb: str, error: str = "") -> None:
    body: dict[str, Any] = {"receipts": [receive_one(node, tenant, queue)]}
    if verb == "nack":
        body["error"] = error
    status, answer, _ = http(
        "POST", f"{node.url}/v1/queues/{queue}/{verb}", body, token=tenant.token
    )
    assert status == 200, answer


def trigger(node: NodeProcess, tenant: Tenant, job_id: str) -> None:
    status, answer, _ = http("POST", f"{node.url}/v1/jobs/{job_id}/trigger", token=tenant.token)
    assert status == 202, answer


def results(job: dict[str, Any]) -> tuple[bool, bool, int]:
    """(has a last success, has a last failure, consecutive failures)."""
    return (
        job["last_success_at"] is not None,
        job["last_failure_at"] is not None,
        job["consecutive_failures"],
    )


def test_a_jobs_results_follow_its_runs_and_the_failing_filter_lists_it(
    node: NodeProcess,
) -> None:
    tenant, other = new_tenant(node), new_tenant(node)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    body = {"schedule": {"every": "1h"}, "target": {"type": "queue", "name": queue}}
    job = create_job(node, tenant.token, body | {"retry": NO_RETRY})
    job_id = job["job_id"]
    assert results(job) == (False, False, 0)  # the create's answer: no runs yet
    healthy = create_job(node, tenant.token, body | {"target": {"type": "queue", "name": "x"}})

    trigger(node, tenant, job_id)
    settle(node, tenant, queue, "ack")
    seen = get_job(node, tenant.token, job_id)
    assert results(seen) == (True, False, 0)
    assert seen["last_success_at"].endswith("Z")
    assert listed(node, tenant.token, failing="true") == []

    for count in (1, 2):  # two runs die: each one attempt, nacked
        trigger(node, tenant, job_id)
        settle(node, tenant, queue, "nack", error=f"order {count} not found")
        seen = get_job(node, tenant.token, job_id)
        assert results(seen) == (True, True, count)
        assert seen["last_failure_at"] >= seen["last_success_at"]
    assert listed(node, tenant.token, failing="true") == [job_id]
    assert listed(node, tenant.token, failing="true", status="paused") == []
    assert listed(node, tenant.token, failing="false") == sorted([job_id, healthy["job_id"]])
    page = http("GET", f"{node.url}/v1/jobs?limit=10", token=tenant.token)[1]["jobs"]
    assert [results(j) for j in page if j["job_id"] == job_id] == [(True, True, 2)]

    # Another tenant: no such job, and nothing failing.
    assert http("GET", f"{node.url}/v1/jobs/{job_id}", token=other.token)[0] == 404
    assert listed(node, other.token, failing="true") == []

    trigger(node, tenant, job_id)  # a success ends the streak
    settle(node, tenant, queue, "ack")
    assert results(get_job(node, tenant.token, job_id)) == (True, True, 0)
    assert listed(node, tenant.token, failing="true") == []


def test_a_bad_failing_value_is_400_naming_it(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    status, body, _ = http("GET", f"{node.url}/v1/jobs?failing=yes", token=tenant.token)
    error = assert_error(status, body, 400, "invalid_request")
    assert error["message"].startswith("failing: must be true or false"), error


def bury(node: NodeProcess, tenant: Tenant, errors: list[str]) -> None:
    """One dead letter per error: one-attempt jobs' runs, each nacked with its error."""
    queue = f"dying-{uuid.uuid4().hex[:8]}"
    for _ in errors:
        body = {"schedule": {"delay": "0s"}, "target": {"type": "queue", "name": queue}}
        create_job(node, tenant.token, body | {"retry": NO_RETRY})
    for error in errors:
        settle(node, tenant, queue, "nack", error=error)


def groups(node: NodeProcess, token: str, query: str = "") -> dict[str, Any]:
    status, answer, _ = http("GET", f"{node.url}/v1/deadletters?group_by=error{query}", token=token)
    assert status == 200, answer
    assert set(answer) == {"groups", "partial"}, answer
    found: dict[str, Any] = answer
    return found


def test_dead_letters_group_by_error_and_one_group_is_listed_and_redriven(
    node: NodeProcess,
) -> None:
    tenant, other = new_tenant(node), new_tenant(node)
    missing = [f"order {n} not found" for n in (11, 12, 13)]
    refused = [f"connect to 10.0.0.{n}:5432 refused" for n in (1, 2)]
    bury(node, tenant, [missing[0], refused[0], missing[1], refused[1], missing[2]])
    bury(node, other, ["order 99 not found"])

    answer = groups(node, tenant.token)
    assert answer["partial"] is False
    found = [(g["count"], g["example"]) for g in answer["groups"]]
    assert found == [(3, missing[2]), (2, refused[1])]
    largest = answer["groups"][0]
    assert set(largest) == {"fingerprint", "example", "count", "first_at", "last_at"}
    assert largest["first_at"] <= largest["last_at"]
    assert [g["count"] for g in groups(node, tenant.token, "&limit=1")["groups"]] == [3]
    assert [g["count"] for g in groups(node, other.token)["groups"]] == [1]

    query = f"fingerprint={largest['fingerprint']}&limit=2"
    status, page, _ = http("GET", f"{node.url}/v1/deadletters?{query}", token=tenant.token)
    assert status == 200 and len(page["deadletters"]) == 2 and page["next_cursor"], page
    rest = http(
        "GET", f"{node.url}/v1/deadletters?{query}&cursor={page['next_cursor']}", token=tenant.token
    )[1]
    ids = [d["id"] for d in page["deadletters"] + rest["deadletters"]]
    assert sorted(d["error"] for d in page["deadletters"] + rest["deadletters"]) == missing
    assert rest["next_cursor"] is None
    theirs = http("GET", f"{node.url}/v1/deadletters?{query}", token=other.token)[1]
    # The same failure has the same fingerprint in every tenant: each lists only its own.
    assert [d["error"] for d in theirs["deadletters"]] == ["order 99 not found"]
    assert not {d["id"] for d in theirs["deadletters"]} & set(ids)

    status, redriven, _ = http(
        "POST", f"{node.url}/v1/deadletters:redrive", {"ids": ids}, token=tenant.token
    )
    assert status == 200 and all(r.get("redriven") for r in redriven["results"]), redriven
    assert [(g["count"], g["example"]) for g in groups(node, tenant.token)["groups"]] == [
        (2, refused[1])
    ]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("group_by=job", "group_by"),
        ("group_by=error&cursor=abc", "cursor"),
        ("group_by=error&fingerprint=0123456789abcdef", "fingerprint"),
        ("fingerprint=XYZ", "fingerprint"),
        ("group_by=error&limit=0", "limit"),
    ],
)
def test_a_bad_grouping_is_400_naming_the_parameter(
    node: NodeProcess, query: str, field: str
) -> None:
    tenant = new_tenant(node)
    status, body, _ = http("GET", f"{node.url}/v1/deadletters?{query}", token=tenant.token)
    error = assert_error(status, body, 400, "invalid_request")
    assert error["message"].startswith(f"{field}"), error


def test_schedctl_shows_failing_jobs_and_groups_and_redrives_one_group(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    ctl = Ctl(node.url, tenant.token)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    body = {"schedule": {"every": "1h"}, "target": {"type": "queue", "name": queue}}
    job_id = create_job(node, tenant.token, body | {"retry": NO_RETRY})["job_id"]
    trigger(node, tenant, job_id)
    settle(node, tenant, queue, "nack", error="order 7 not found")
    bury(node, tenant, ["order 8 not found", "connect to 10.0.0.1:5432 refused"])

    failing = ctl.json("ls", "--failing")["jobs"]  # the one-time jobs' runs died too
    assert [(j["status"], j["consecutive_failures"]) for j in failing] == [
        ("active", 1),
        ("completed", 1),
        ("completed", 1),
    ]
    table = ctl("ls", "--failing")
    assert table.returncode == 0, table.stderr
    header, row, *_ = table.stdout.splitlines()
    assert "FAILED IN A ROW" in header and row.split()[:4] == [job_id, "-", "active", "1"]
    shown = [line.split() for line in ctl("get", job_id).stdout.splitlines()]
    assert ["failed", "in", "a", "row", "1"] in shown

    grouped = ctl.json("deadletters", "ls", "--group-by", "error")
    assert [(g["count"], g["example"]) for g in grouped["groups"]] == [
        (2, "order 8 not found"),  # the newest of its group
        (1, "connect to 10.0.0.1:5432 refused"),
    ]
    table = ctl("deadletters", "ls", "--group-by", "error").stdout.splitlines()
    assert table[0].split()[:2] == ["FINGERPRINT", "COUNT"] and len(table) == 3
    fingerprint = grouped["groups"][0]["fingerprint"]
    listed = ctl.json("deadletters", "ls", "--fingerprint", fingerprint, "--all")["deadletters"]
    assert sorted(d["error"] for d in listed) == ["order 7 not found", "order 8 not found"]

    redriven = ctl("deadletters", "redrive", "--fingerprint", fingerprint)
    assert redriven.returncode == 0, redriven.stderr
    assert "redriven: 2, not redriven: 0" in redriven.stderr
    left = ctl.json("deadletters", "ls", "--group-by", "error")["groups"]
    assert [g["count"] for g in left] == [1]
    refused = ctl("deadletters", "ls", "--group-by", "error", "--all")
    assert refused.returncode == 2 and "--group-by" in refused.stderr
