"""Calendars over real HTTP (issue 33 §1): create, list, read, replace, delete (409 while a job
excludes it), bad names and dates named in 400s; a job excluding a calendar that holds today
records its runs skipped with reason calendar:NAME, and runs again once the calendar changes;
the preview leaves the calendar's dates out."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.integration.api_helpers import (
    Tenant,
    assert_error,
    create_job,
    job_body,
    new_tenant,
)
from tests.servers import NodeProcess, http, wait_for


@pytest.fixture
def tenant(node: NodeProcess) -> Tenant:
    return new_tenant(node)


def call(node: NodeProcess, tenant: Tenant, method: str, path: str, body: Any = None) -> Any:
    return http(method, f"{node.url}{path}", body, token=tenant.token)[:2]


def today(offset_days: int = 0) -> str:
    return (datetime.now(UTC) + timedelta(days=offset_days)).date().isoformat()


def test_calendars_are_created_listed_read_replaced_and_deleted(
    node: NodeProcess, tenant: Tenant
) -> None:
    status, made = call(
        node, tenant, "POST", "/v1/calendars", {"name": "us", "dates": ["2027-07-04", "2026-12-25"]}
    )
    assert status == 201, made
    assert made["dates"] == ["2026-12-25", "2027-07-04"] and made["used_by"] == 0
    assert (made["dates_count"], made["first"], made["last"]) == (2, "2026-12-25", "2027-07-04")
    status, again = call(node, tenant, "POST", "/v1/calendars", {"name": "us", "dates": []})
    assert_error(status, again, 409, "conflict")
    status, listed = call(node, tenant, "GET", "/v1/calendars")
    assert status == 200 and [c["name"] for c in listed["calendars"]] == ["us"], listed
    assert "dates" not in listed["calendars"][0]
    status, replaced = call(node, tenant, "PUT", "/v1/calendars/us", {"dates": ["2027-01-01"]})
    assert status == 200 and replaced["dates"] == ["2027-01-01"], replaced
    status, created = call(node, tenant, "PUT", "/v1/calendars/fr", {"dates": []})
    assert status == 200 and created["dates_count"] == 0, created

    schedule = {"cron": "0 9 * * *", "timezone": "Europe/Paris", "exclude": ["us"]}
    job = create_job(node, tenant.token, job_body(schedule=schedule))
    assert job["schedule"]["exclude"] == ["us"]
    status, shown = call(node, tenant, "GET", "/v1/calendars/us")
    assert shown["used_by"] == 1, shown
    status, refused = call(node, tenant, "DELETE", "/v1/calendars/us")
    assert job["job_id"] in assert_error(status, refused, 409, "conflict")["message"]
    call(node, tenant, "DELETE", f"/v1/jobs/{job['job_id']}")
    assert call(node, tenant, "DELETE", "/v1/calendars/us")[0] == 204
    status, gone = call(node, tenant, "GET", "/v1/calendars/us")
    assert_error(status, gone, 404, "calendar_not_found")
    # Another tenant's calendars are its own.
    other = new_tenant(node)
    assert call(node, other, "GET", "/v1/calendars/fr")[0] == 404


def test_bad_calendars_and_excludes_are_400s_naming_the_field(
    node: NodeProcess, tenant: Tenant
) -> None:
    for body, field in [
        ({"name": "has space", "dates": []}, "name"),
        ({"name": "ok", "dates": ["2026-13-01"]}, "dates[0]"),
        ({"name": "ok", "dates": "2026-12-25"}, "dates"),
        ({"name": "ok"}, "dates"),
    ]:
        status, answer = call(node, tenant, "POST", "/v1/calendars", body)
        assert assert_error(status, answer, 400)["message"].startswith(field), answer
    missing = {"cron": "0 9 * * *", "exclude": ["nowhere"]}
    status, answer = call(node, tenant, "POST", "/v1/jobs", job_body(schedule=missing))
    assert "nowhere" in assert_error(status, answer, 400, "invalid_request")["message"]
    status, answer = call(
        node, tenant, "POST", "/v1/jobs", job_body(schedule={"delay": "1h", "exclude": ["x"]})
    )
    assert_error(status, answer, 400, "invalid_schedule")


def runs_of(node: NodeProcess, tenant: Tenant, job_id: str) -> list[dict[str, Any]]:
    status, page = call(node, tenant, "GET", f"/v1/jobs/{job_id}/runs?limit=100")
    assert status == 200, page
    found: list[dict[str, Any]] = page["runs"]
    return found


def test_a_calendar_holding_today_skips_runs_until_it_changes(
    node: NodeProcess, tenant: Tenant
) -> None:
    dates = [today(-1), today(), today(1)]  # around UTC midnight too
    assert call(node, tenant, "POST", "/v1/calendars", {"name": "hols", "dates": dates})[0] == 201
    every = {"every": "1s", "exclude": ["hols"]}
    job = create_job(node, tenant.token, job_body(schedule=every))

    def skipped() -> list[dict[str, Any]]:
        return [r for r in runs_of(node, tenant, job["job_id"]) if r["status"] == "skipped"]

    wait_for(lambda: len(skipped()) >= 2, 15, "two runs skipped by the calendar")
    assert all(r["error"] == "calendar:hols" for r in skipped())
    assert all(r["status"] == "skipped" for r in runs_of(node, tenant, job["job_id"]))
    # Preview honours the calendar: no occurrence today or tomorrow.
    status, preview = call(
        node, tenant, "POST", "/v1/schedules:preview", {"schedule": every, "count": 3}
    )
    assert status == 200 and all(run[:10] > today(1) for run in preview["runs"]), preview

    changed_at = time.time()
    assert call(node, tenant, "PUT", "/v1/calendars/hols", {"dates": [today(30)]})[0] == 200
    delivered = ("delivered", "succeeded", "pending", "dispatched")

    def ran() -> bool:
        return any(r["status"] in delivered for r in runs_of(node, tenant, job["job_id"]))

    wait_for(ran, 15, "a run once the calendar no longer holds today")
    late_skips = [
        r
        for r in skipped()
        if datetime.fromisoformat(r["scheduled_at"]).timestamp() > changed_at + 1
    ]
    assert late_skips == []  # no occurrence after the change was skipped
