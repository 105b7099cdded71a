"""Jobs by stable key and labels over real HTTP (issue 32): PUT by key creates, replaces or
leaves a job as it is, concurrent PUTs of one key make one job, GET and DELETE by key, the key
freed by a cancel, labels as filters, and bad keys and labels named in 400s."""

from __future__ import annotations

import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.integration.api_helpers import (
    JOB_FIELDS,
    Tenant,
    assert_error,
    create_job,
    get_job,
    job_body,
    list_all_jobs,
    new_tenant,
)
from tests.servers import NodeProcess, http

NIGHTLY: dict[str, Any] = {
    "name": "nightly-report",
    "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Paris"},
    "target": {"type": "queue", "name": "reports"},
    "payload": {"report": "sales"},
    "labels": {"team": "payments", "schedd.set": "prod"},
}


@pytest.fixture
def tenant(node: NodeProcess) -> Tenant:
    return new_tenant(node)


def by_key(node: NodeProcess, key: str) -> str:
    return f"{node.url}/v1/jobs/by-key/{urllib.parse.quote(key, safe='')}"


def put(
    node: NodeProcess, tenant: Tenant, key: str, body: dict[str, Any], query: str = ""
) -> tuple[int, Any]:
    status, answer, _ = http("PUT", by_key(node, key) + query, body, token=tenant.token)
    return status, answer


def test_put_creates_then_leaves_an_equal_job_alone_then_replaces_a_changed_one(
    node: NodeProcess, tenant: Tenant
) -> None:
    status, created = put(node, tenant, "reports/nightly:sales", NIGHTLY)
    assert status == 201, created
    assert set(created) == JOB_FIELDS | {"changed"}
    assert created["changed"] is True and created["version"] == 1
    assert created["key"] == "reports/nightly:sales"
    assert created["labels"] == {"schedd.set": "prod", "team": "payments"}

    status, again = put(node, tenant, "reports/nightly:sales", {**NIGHTLY, "key": created["key"]})
    assert status == 200, again
    assert again["changed"] is False
    assert again["job_id"] == created["job_id"] and again["version"] == 1

    changed = {**NIGHTLY, "payload": {"report": "refunds"}}
    status, plan = put(node, tenant, "reports/nightly:sales", changed, "?dry_run=true")
    assert status == 200, plan
    assert plan["action"] == "update"
    assert plan["current"]["payload"] == {"report": "sales"}
    assert plan["proposed"]["payload"] == {"report": "refunds"}
    assert get_job(node, tenant.token, created["job_id"])["version"] == 1  # a plan changes nothing

    status, updated = put(node, tenant, "reports/nightly:sales", changed)
    assert status == 200, updated
    assert updated["changed"] is True and updated["version"] == 2
    assert updated["job_id"] == created["job_id"] and updated["payload"] == {"report": "refunds"}
    # A field left out of a PUT's body takes its default: the body is the whole job.
    status, plain = put(node, tenant, "reports/nightly:sales", {**changed, "labels": {}})
    assert status == 200 and plain["labels"] == {} and plain["version"] == 3, plain

    # The path's key may hold a raw slash too; GET by key finds the job.
    status, found, _ = http(
        "GET", f"{node.url}/v1/jobs/by-key/reports/nightly:sales", token=tenant.token
    )
    assert status == 200 and found["job_id"] == created["job_id"], found
    assert get_job(node, tenant.token, created["job_id"])["key"] == "reports/nightly:sales"


def test_a_dry_run_of_a_new_key_creates_nothing(node: NodeProcess, tenant: Tenant) -> None:
    status, plan = put(node, tenant, "new-one", NIGHTLY, "?dry_run=true")
    assert status == 200, plan
    assert plan["action"] == "create" and plan["current"] is None
    assert plan["proposed"]["key"] == "new-one"
    assert plan["proposed"]["schedule"] == {"cron": "0 2 * * *", "timezone": "Europe/Paris"}
    assert list_all_jobs(node, tenant.token) == []
    status, same = put(node, tenant, "new-one", NIGHTLY)
    assert status == 201, same
    status, plan = put(node, tenant, "new-one", NIGHTLY, "?dry_run=true")
    assert plan["action"] == "unchanged", plan


def test_concurrent_puts_of_one_key_make_one_job(node: NodeProcess, tenant: Tenant) -> None:
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: put(node, tenant, "race", NIGHTLY), range(8)))
    statuses = sorted(status for status, _ in answers)
    assert statuses.count(201) == 1 and statuses.count(200) == 7, answers
    assert len({answer["job_id"] for _, answer in answers}) == 1
    assert len(list_all_jobs(node, tenant.token)) == 1


def test_a_key_names_one_job_not_cancelled(node: NodeProcess, tenant: Tenant) -> None:
    first = create_job(node, tenant.token, job_body(key="billing"))
    status, body, _ = http(
        "POST", f"{node.url}/v1/jobs", job_body(key="billing"), token=tenant.token
    )
    error = assert_error(status, body, 409, "conflict")
    assert "billing" in error["message"] and first["job_id"] in error["message"]
    # Two jobs of one key in one batch: the second is refused, the first created.
    status, batch, _ = http(
        "POST",
        f"{node.url}/v1/jobs:batch",
        {"jobs": [job_body(key="pair"), job_body(key="pair")]},
        token=tenant.token,
    )
    assert status == 200, batch
    assert "job_id" in batch["results"][0] and batch["results"][1]["error"]["code"] == "conflict"
    # Another tenant has keys of its own.
    other = new_tenant(node)
    assert create_job(node, other.token, job_body(key="billing"))["key"] == "billing"

    status, _, _ = http("DELETE", by_key(node, "billing"), token=tenant.token)
    assert status == 204
    assert get_job(node, tenant.token, first["job_id"])["status"] == "cancelled"
    status, body, _ = http("GET", by_key(node, "billing"), token=tenant.token)
    assert "billing" in assert_error(status, body, 404, "job_not_found")["message"]
    status, body, _ = http("DELETE", by_key(node, "billing"), token=tenant.token)
    assert_error(status, body, 404, "job_not_found")
    status, again = put(node, tenant, "billing", job_body())  # the key is free again
    assert status == 201 and again["job_id"] != first["job_id"], again


def test_patch_changes_labels_and_refuses_a_taken_key(node: NodeProcess, tenant: Tenant) -> None:
    one = create_job(node, tenant.token, job_body(key="one", labels={"team": "a"}))
    create_job(node, tenant.token, job_body(key="two"))
    url = f"{node.url}/v1/jobs/{one['job_id']}"
    status, body, _ = http("PATCH", url, {"key": "two"}, token=tenant.token)
    assert_error(status, body, 409, "conflict")
    status, body, _ = http("PATCH", url, {"labels": {"team": "b"}}, token=tenant.token)
    assert status == 200 and body["labels"] == {"team": "b"}, body
    assert [j["key"] for j in list_all_jobs(node, tenant.token, "&label=team=a")] == []
    assert [j["key"] for j in list_all_jobs(node, tenant.token, "&label=team=b")] == ["one"]
    status, body, _ = http("PATCH", url, {"key": "uno"}, token=tenant.token)
    assert status == 200 and body["key"] == "uno", body
    assert get_job(node, tenant.token, one["job_id"])["job_id"] == one["job_id"]
    status, found, _ = http("GET", by_key(node, "uno"), token=tenant.token)
    assert status == 200 and found["job_id"] == one["job_id"], found
    status, found, _ = http("GET", by_key(node, "one"), token=tenant.token)
    assert status == 404, found


def test_labels_filter_the_job_list(node: NodeProcess, tenant: Tenant) -> None:
    made = {}
    for key, labels in [
        ("a", {"team": "pay", "env": "prod"}),
        ("b", {"team": "pay", "env": "dev"}),
        ("c", {"team": "ops", "env": "prod"}),
        ("d", {}),
    ]:
        made[key] = create_job(node, tenant.token, job_body(key=key, labels=labels, name=key))

    def keys(query: str) -> list[str]:
        return [job["key"] for job in list_all_jobs(node, tenant.token, query)]

    assert keys("&label=team=pay") == ["a", "b"]
    assert keys("&label=team=pay&label=env=prod") == ["a"]
    assert keys("&label=env=prod&label=team=pay") == ["a"]
    assert keys("&label=team=nobody") == []
    assert keys("&label=team=pay&name=b") == ["b"]  # with a scanning filter too
    # Paging through a label's jobs one at a time shows each once, in job_id order.
    assert keys("&label=env=prod").__len__() == 2
    status, page, _ = http("GET", f"{node.url}/v1/jobs?label=team=pay&limit=1", token=tenant.token)
    assert status == 200 and len(page["jobs"]) == 1 and page["next_cursor"], page
    http("DELETE", f"{node.url}/v1/jobs/{made['a']['job_id']}", token=tenant.token)
    assert keys("&label=team=pay&status=active") == ["b"]
    assert keys("&label=team=pay&status=cancelled") == ["a"]  # labels stay with the job
    for bad in ["team", "Team=x", "=x", "team=" + "x" * 201]:
        status, body, _ = http(
            "GET", f"{node.url}/v1/jobs?label={urllib.parse.quote(bad)}", token=tenant.token
        )
        assert "label" in assert_error(status, body, 400, "invalid_request")["message"]


@pytest.mark.parametrize(
    ("path_key", "body", "field"),
    [
        ("has space", {}, "key"),
        ("x" * 201, {}, "key"),
        ("ok", {"key": "other"}, "key"),
        ("ok", {"labels": {"Team": "x"}}, "labels"),
        ("ok", {"labels": {"team": 5}}, "labels"),
        ("ok", {"labels": {f"l{i}": "x" for i in range(17)}}, "labels"),
        ("ok", {"labels": {"team": "x" * 201}}, "labels"),
    ],
)
def test_bad_keys_and_labels_are_400s_naming_the_field(
    node: NodeProcess, tenant: Tenant, path_key: str, body: dict[str, Any], field: str
) -> None:
    status, answer = put(node, tenant, path_key, job_body(**body))
    assert assert_error(status, answer, 400)["message"].startswith(field), answer
    assert list_all_jobs(node, tenant.token) == []


def test_a_completed_job_of_a_key_is_left_as_it_is_or_refused_a_change(
    node: NodeProcess, tenant: Tenant
) -> None:
    body = job_body(schedule={"delay": "0s"})
    status, created = put(node, tenant, "once", body)
    assert status == 201, created
    deadline = time.monotonic() + 20
    while get_job(node, tenant.token, created["job_id"])["status"] != "completed":
        assert time.monotonic() < deadline, "the one-time job did not complete"
        time.sleep(0.05)
    same = {**body, "schedule": {"run_at": created["schedule"]["run_at"]}}
    status, again = put(node, tenant, "once", same)  # its run_at is past: not judged again
    assert status == 200 and again["changed"] is False, again
    status, answer = put(node, tenant, "once", {**same, "payload": {"new": 1}})
    assert "completed" in assert_error(status, answer, 409, "conflict")["message"]


def test_an_every_schedule_without_start_keeps_the_jobs_own(
    node: NodeProcess, tenant: Tenant
) -> None:
    body = job_body(schedule={"every": "15m"})
    status, created = put(node, tenant, "every", body)
    assert status == 201 and "start_at" in created["schedule"], created
    status, again = put(node, tenant, "every", body)
    assert status == 200 and again["changed"] is False, again
    assert again["schedule"] == created["schedule"]
    status, moved = put(node, tenant, "every", job_body(schedule={"every": "20m"}))
    assert status == 200 and moved["changed"] is True, moved
    assert moved["schedule"]["start_at"] == created["schedule"]["start_at"]


def test_a_dry_run_checks_the_target_as_the_put_does(node: NodeProcess, tenant: Tenant) -> None:
    """A plan that says "create" must not meet a refusal when applied: the SSRF guard and a
    broker target's connection are checked by the dry run too."""
    private = job_body(target={"type": "http", "url": "http://10.1.2.3/hook"})
    broker = job_body(target={"type": "redis_stream", "connection": "nope", "stream": "s"})
    for body in (private, broker):
        planned = put(node, tenant, "checked", body, "?dry_run=true")
        applied = put(node, tenant, "checked", body)
        assert planned[0] == applied[0] and 400 <= planned[0] < 500, (planned, applied)
        assert planned[1]["error"]["code"] == applied[1]["error"]["code"]
    assert list_all_jobs(node, tenant.token) == []
