"""POST /v1/jobs/{id}/backfill on one real node: the runs it adds are claimed and delivered with
their own scheduled_at and show as backfills; bad input is a 422 naming the field; tenants
are isolated."""

from __future__ import annotations

from typing import Any

import pytest

from schedd.schedule import occurrences_between, parse_schedule
from schedd.timeformat import format_instant
from tests.integration.api_helpers import (
    MISSING_JOB_ID,
    Tenant,
    assert_error,
    create_job,
    new_tenant,
)
from tests.servers import NodeProcess, http, ms, now_ms, wait_for

MIN = 60_000
HOUR = 60 * MIN


def backfill(node: NodeProcess, tenant: Tenant, job_id: str, body: Any) -> tuple[int, Any]:
    status, answer, _ = http(
        "POST", f"{node.url}/v1/jobs/{job_id}/backfill", body, token=tenant.token
    )
    return status, answer


def minutely_job(node: NodeProcess, tenant: Tenant, start_ms: int, queue: str) -> dict[str, Any]:
    schedule = {"every": "1m", "start_at": format_instant(start_ms)}
    body = {"schedule": schedule, "target": {"type": "queue", "name": queue}}
    return create_job(node, tenant.token, body)


def all_runs(node: NodeProcess, tenant: Tenant, job_id: str) -> list[dict[str, Any]]:
    status, page, _ = http(
        "GET", f"{node.url}/v1/jobs/{job_id}/runs?limit=1000", token=tenant.token
    )
    assert status == 200, page
    runs: list[dict[str, Any]] = page["runs"]
    return runs


def span(from_ms: int, to_ms: int) -> dict[str, str]:
    return {"from": format_instant(from_ms), "to": format_instant(to_ms)}


def test_a_backfill_runs_each_past_slot_once_and_shows_it_in_history(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    start = (now_ms() // MIN - 30) * MIN
    job = minutely_job(node, tenant, start, "backfilled")
    status, answer = backfill(node, tenant, job["job_id"], span(start, start + 20 * MIN))
    assert (status, answer) == (202, {"runs": 20})
    expected = [format_instant(start + k * MIN) for k in range(20)]
    runs = wait_for(
        lambda: (found := all_runs(node, tenant, job["job_id"])) and len(found) >= 20 and found,
        15,
        "the backfill's runs to be claimed",
    )
    assert sorted(r["scheduled_at"] for r in runs) == expected
    assert all(r["backfill"] is True for r in runs)
    # Delivered with the idempotency key a normal run of the slot has.
    status, got, _ = http(
        "POST",
        f"{node.url}/v1/queues/backfilled/receive",
        {"max": 50, "wait": "1s"},
        token=tenant.token,
    )
    assert status == 200, got
    keys = sorted(m["idempotency_key"] for m in got["messages"])
    assert keys == sorted(f"{job['job_id']}:{at}" for at in expected)
    # Again, wider: only the slots without a run are added (and counted).
    status, answer = backfill(node, tenant, job["job_id"], span(start - 5 * MIN, start + 25 * MIN))
    assert (status, answer) == (202, {"runs": 5})  # the every job starts at `start`


def test_a_job_s_own_runs_are_not_backfills(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    status, job, _ = http(
        "POST",
        f"{node.url}/v1/jobs",
        {"schedule": {"delay": "0s"}, "target": {"type": "queue", "name": "own"}},
        token=tenant.token,
    )
    assert status == 201, job
    [run] = wait_for(lambda: all_runs(node, tenant, job["job_id"]), 15, "the job's run")
    assert run["backfill"] is False
    # Its one occurrence has a run: a backfill over it adds none.
    at = ms(run["scheduled_at"])
    assert backfill(node, tenant, job["job_id"], span(at, at + 1)) == (202, {"runs": 0})


def test_a_cron_backfill_takes_the_job_s_zone_and_dst_rule(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    schedule = {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}
    job = create_job(
        node, tenant.token, {"schedule": schedule, "target": {"type": "queue", "name": "tz"}}
    )
    # March 2026: 02:30 does not exist on the 29th; it runs at 03:00 (01:00Z) that night.
    from_ms, to_ms = ms("2026-03-01T00:00:00+01:00"), ms("2026-04-01T00:00:00+02:00")
    status, answer = backfill(node, tenant, job["job_id"], span(from_ms, to_ms))
    assert (status, answer) == (202, {"runs": 31})
    slots = occurrences_between(parse_schedule(schedule, now_ms=0), from_ms, to_ms, 100)
    assert format_instant(slots[28]) == "2026-03-29T01:00:00Z"
    runs = wait_for(
        lambda: (found := all_runs(node, tenant, job["job_id"])) and len(found) >= 31 and found,
        15,
        "the runs",
    )
    assert sorted(ms(r["scheduled_at"]) for r in runs) == slots


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"to": "2026-01-01T00:00:00Z"}, "from"),
        ({"from": "2026-01-01T00:00:00Z"}, "to"),
        ({"from": "2026-01-01T00:00:00", "to": "2026-01-02T00:00:00Z"}, "from"),
        ({"from": "2026-01-01T00:00:00Z", "to": 5}, "to"),
        ({"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "step": 1}, "step"),
        ({"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "from"),  # reversed
        ({"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "from"),  # empty
        ({"from": "2026-01-01T00:00:00Z", "to": "2999-01-01T00:00:00Z"}, "to"),  # future
    ],
)
def test_bad_input_is_a_422_naming_the_field(
    node: NodeProcess, body: dict[str, Any], field: str
) -> None:
    tenant = new_tenant(node)
    job = minutely_job(node, tenant, now_ms() - HOUR, "bad")
    status, answer = backfill(node, tenant, job["job_id"], body)
    error = assert_error(status, answer, 422, "invalid_backfill")
    assert error["message"].startswith(f"{field}: "), error
    assert all_runs(node, tenant, job["job_id"]) == []


def test_more_than_100_000_occurrences_is_a_422_naming_the_limit(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    now = now_ms()
    body = {"schedule": {"every": "1s", "start_at": format_instant(now - 3 * 86_400_000)}}
    job = create_job(node, tenant.token, body | {"target": {"type": "queue", "name": "many"}})
    status, answer = backfill(node, tenant, job["job_id"], span(now - 2 * 86_400_000, now - 1))
    error = assert_error(status, answer, 422, "invalid_backfill")
    assert "100,000" in error["message"] and error["message"].startswith("to: ")
    # Exactly the limit is taken.
    status, answer = backfill(node, tenant, job["job_id"], span(now - 100_001_000, now - 1_000))
    assert (status, answer) == (202, {"runs": 100_000})


def test_another_tenant_s_job_is_404_and_a_cancelled_one_409(node: NodeProcess) -> None:
    owner, intruder = new_tenant(node), new_tenant(node)
    job = minutely_job(node, owner, now_ms() - HOUR, "mine")
    body = span(now_ms() - HOUR, now_ms() - MIN)
    foreign = backfill(node, intruder, job["job_id"], body)
    missing = backfill(node, intruder, MISSING_JOB_ID, body)
    assert_error(*foreign, 404, "job_not_found")
    assert (
        foreign[1]["error"]["message"].replace(job["job_id"], MISSING_JOB_ID)
        == (missing[1]["error"]["message"])
    )
    assert all_runs(node, owner, job["job_id"]) == []
    http("DELETE", f"{node.url}/v1/jobs/{job['job_id']}", token=owner.token)
    assert_error(*backfill(node, owner, job["job_id"], body), 409, "conflict")
