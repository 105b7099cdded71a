"""Job routes over real HTTP: create, batch, read, list, change, cancel, runs, preview, quotas.

Also tenant isolation, Idempotency-Key, the payload limit and the audit of every change.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from schedd.cli.ctl.main import cli
from tests.integration.api_helpers import (
    JOB_FIELDS,
    MISSING_JOB_ID,
    QUEUE_TARGET,
    all_audit,
    assert_error,
    create_job,
    get_job,
    job_body,
    list_all_jobs,
    new_tenant,
    tenant_view,
)
from tests.servers import NodeProcess, http

PAYLOAD_LIMIT = 64 * 1024


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _in(**delta: float) -> str:
    return _iso(datetime.now(UTC) + timedelta(**delta))


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# ---------------------------------------------------------------- create and read


def test_create_answers_the_full_job_object(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    body = {
        "name": "weekly-digest",
        "schedule": {"run_at": "2030-10-12T08:00:00+05:30"},
        "window": "5m",
        "target": {"type": "queue", "name": "digest-jobs"},
        "payload": {"user_id": 42, "week": "2030-W41"},
        "retry": {"max_attempts": 5, "backoff": "linear", "initial_delay": "2s", "max_delay": "1m"},
        "misfire_policy": "skip",
    }
    status, job, _ = http("POST", f"{node.url}/v1/jobs", body, token=tenant.token)
    assert status == 201, job
    assert set(job) == JOB_FIELDS
    assert job["job_id"].startswith("job_")
    assert job["tenant_id"] == tenant.tenant_id
    assert job["schedule"] == {"run_at": "2030-10-12T02:30:00Z"}
    assert job["next_run_at"] == "2030-10-12T02:30:00Z"
    assert (job["status"], job["version"]) == ("active", 1)
    assert job["retry"] == body["retry"]
    assert (job["misfire_policy"], job["overlap_policy"]) == ("skip", "allow")
    assert (job["name"], job["window"], job["payload"]) == ("weekly-digest", "5m", body["payload"])
    assert job["created_at"].endswith("Z") and job["updated_at"] == job["created_at"]
    assert get_job(node, tenant.token, job["job_id"]) == job


def test_create_fills_in_the_defaults(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token, {"schedule": {"every": "5m"}, "target": QUEUE_TARGET})
    assert job["retry"] == {
        "max_attempts": 3,
        "backoff": "exponential",
        "initial_delay": "1s",
        "max_delay": "5m",
    }
    assert (job["misfire_policy"], job["overlap_policy"]) == ("run_once", "allow")
    assert (job["name"], job["window"], job["payload"]) == (None, None, None)
    assert job["schedule"]["every"] == "5m" and "start_at" in job["schedule"]


def test_cron_job_next_run_is_in_utc(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    schedule = {"cron": "0 8 * * MON", "timezone": "Asia/Kolkata"}
    job = create_job(node, tenant.token, job_body(schedule=schedule))
    next_run = _instant(job["next_run_at"])
    assert job["next_run_at"].endswith("T02:30:00Z") and next_run.weekday() == 0
    assert datetime.now(UTC) < next_run <= datetime.now(UTC) + timedelta(days=7)


def test_integral_floats_count_as_integers(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    retry = {"max_attempts": 3.0, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}
    job = create_job(node, tenant.token, job_body(retry=retry))
    assert job["retry"]["max_attempts"] == 3 and isinstance(job["retry"]["max_attempts"], int)
    status, raw, _ = http("GET", f"{node.url}/v1/jobs/{job['job_id']}", token=tenant.token)
    assert status == 200 and json.dumps(raw["retry"]["max_attempts"]) == "3"


def test_http_target_is_kept_with_its_defaults(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    target = {"type": "http", "url": "https://hooks.example/x", "headers": {"X-A": "b"}}
    job = create_job(node, tenant.token, job_body(target=target))
    assert job["target"] == {**target, "method": "POST", "timeout": "10s"}


def test_run_at_in_the_past_is_accepted_and_runs_at_once(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token, job_body(schedule={"run_at": "2020-01-01T00:00:00Z"}))
    assert job["next_run_at"] == "2020-01-01T00:00:00Z"


def test_run_at_just_under_ten_years_ahead_is_accepted(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    create_job(node, tenant.token, job_body(schedule={"run_at": _in(days=9 * 365)}))


# ---------------------------------------------------------------- batch


def test_batch_creates_the_valid_items_and_answers_in_order(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    items = [
        job_body(name="first"),
        job_body(schedule={"cron": "not a cron"}),
        job_body(name="third", schedule={"run_at": "2031-01-01T00:00:00Z"}),
        "not an object",
        job_body(unknown_field=1),
        job_body(name="sixth"),
    ]
    status, body, _ = http("POST", f"{node.url}/v1/jobs:batch", {"jobs": items}, token=tenant.token)
    assert status == 200, body
    results = body["results"]
    assert len(results) == len(items)
    for i in (1, 3, 4):
        assert set(results[i]) == {"error"}
        assert set(results[i]["error"]) == {"code", "message"}
        assert results[i]["error"]["message"].startswith(f"jobs[{i}].")
    assert results[1]["error"]["code"] == "invalid_schedule"
    assert results[4]["error"]["code"] == "invalid_request"
    for i in (0, 2, 5):
        assert set(results[i]) == {"job_id", "next_run_at"}
    assert results[2]["next_run_at"] == "2031-01-01T00:00:00Z"
    names = {j["job_id"]: j["name"] for j in list_all_jobs(node, tenant.token)}
    assert names == {results[0]["job_id"]: "first", results[2]["job_id"]: "third",
                     results[5]["job_id"]: "sixth"}  # fmt: skip


def test_batch_takes_a_thousand_jobs(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    items = [job_body(payload={"i": i}) for i in range(1000)]
    status, body, _ = http("POST", f"{node.url}/v1/jobs:batch", {"jobs": items}, token=tenant.token)
    assert status == 200, body
    assert all("job_id" in r for r in body["results"])
    jobs = list_all_jobs(node, tenant.token)
    assert len(jobs) == 1000
    by_id = {j["job_id"]: j["payload"]["i"] for j in jobs}
    assert [by_id[r["job_id"]] for r in body["results"]] == list(range(1000))


@pytest.mark.parametrize(
    "body",
    [
        {"jobs": [job_body()] * 1001},
        {"jobs": []},
        {"jobs": job_body()},
        {"jobs": [job_body()], "extra": 1},
        {"items": [job_body()]},
    ],
    ids=["1001-items", "empty", "not-a-list", "extra-field", "no-jobs"],
)
def test_bad_batch_is_400_and_creates_nothing(node: NodeProcess, body: dict[str, Any]) -> None:
    tenant = new_tenant(node)
    before = tenant_view(node, tenant.token)
    status, answer, _ = http("POST", f"{node.url}/v1/jobs:batch", body, token=tenant.token)
    assert_error(status, answer, 400, "invalid_request")
    assert tenant_view(node, tenant.token) == before


def test_batch_items_carry_their_own_idempotency_keys(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    first = [{**job_body(name="a"), "idempotency_key": "item-a"}]
    _, body, _ = http("POST", f"{node.url}/v1/jobs:batch", {"jobs": first}, token=tenant.token)
    job_id = body["results"][0]["job_id"]
    again = [
        {**job_body(name="a"), "idempotency_key": "item-a"},
        {**job_body(name="changed"), "idempotency_key": "item-a"},
        {**job_body(name="b"), "idempotency_key": "x" * 256},
    ]
    status, body, _ = http("POST", f"{node.url}/v1/jobs:batch", {"jobs": again}, token=tenant.token)
    assert status == 200, body
    replay, mismatch, bad_key = body["results"]
    assert replay["job_id"] == job_id
    assert mismatch["error"]["code"] == "idempotency_mismatch"
    assert bad_key["error"]["code"] == "invalid_request"
    assert [j["job_id"] for j in list_all_jobs(node, tenant.token)] == [job_id]


# ---------------------------------------------------------------- list


def test_list_pages_through_250_jobs_without_duplicates_or_gaps(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    items = [job_body(payload={"i": i}) for i in range(250)]
    _, body, _ = http("POST", f"{node.url}/v1/jobs:batch", {"jobs": items}, token=tenant.token)
    created = {r["job_id"] for r in body["results"]}
    assert len(created) == 250
    pages, cursor = [], None
    while True:
        query = "limit=100" + (f"&cursor={cursor}" if cursor else "")
        status, page, _ = http("GET", f"{node.url}/v1/jobs?{query}", token=tenant.token)
        assert status == 200, page
        assert set(page) == {"jobs", "next_cursor"}
        pages.append([j["job_id"] for j in page["jobs"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [100, 100, 50]
    listed = [job_id for p in pages for job_id in p]
    assert len(listed) == len(set(listed)) and set(listed) == created


def test_list_filters_by_status(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    items = [job_body(payload={"i": i}) for i in range(120)]
    _, body, _ = http("POST", f"{node.url}/v1/jobs:batch", {"jobs": items}, token=tenant.token)
    ids = [r["job_id"] for r in body["results"]]
    for job_id in ids[:5]:
        assert http("DELETE", f"{node.url}/v1/jobs/{job_id}", token=tenant.token)[0] == 204
    for job_id in ids[5:8]:
        assert http("POST", f"{node.url}/v1/jobs/{job_id}/pause", token=tenant.token)[0] == 200
    by_status = {
        status: {j["job_id"] for j in list_all_jobs(node, tenant.token, f"&status={status}")}
        for status in ("active", "paused", "cancelled", "completed")
    }
    assert by_status["cancelled"] == set(ids[:5])
    assert by_status["paused"] == set(ids[5:8])
    assert by_status["active"] == set(ids[8:])
    assert by_status["completed"] == set()
    for status, listed in by_status.items():
        for job in list_all_jobs(node, tenant.token, f"&status={status}"):
            assert job["status"] == status and job["job_id"] in listed


def test_list_of_a_new_tenant_is_empty(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    status, body, _ = http("GET", f"{node.url}/v1/jobs", token=tenant.token)
    assert (status, body) == (200, {"jobs": [], "next_cursor": None})


# ---------------------------------------------------------------- cancel, change, pause


def test_cancel_is_204_twice_and_bumps_the_version_once(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    status, body, _ = http("DELETE", url, token=tenant.token)
    assert (status, body) == (204, None)
    cancelled = get_job(node, tenant.token, job["job_id"])
    assert cancelled["status"] == "cancelled"
    assert cancelled["version"] == job["version"] + 1
    status, body, _ = http("DELETE", url, token=tenant.token)
    assert (status, body) == (204, None)
    assert get_job(node, tenant.token, job["job_id"]) == cancelled


def test_patch_with_a_new_schedule_recomputes_next_run_at(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    change = {"schedule": {"run_at": "2030-01-01T00:00:00+01:00"}}
    status, patched, _ = http("PATCH", url, change, token=tenant.token)
    assert status == 200, patched
    assert patched["next_run_at"] == "2029-12-31T23:00:00Z"
    assert patched["schedule"] == {"run_at": "2029-12-31T23:00:00Z"}
    assert patched["version"] == job["version"] + 1
    change = {"schedule": {"cron": "30 6 * * *", "timezone": "UTC"}}
    status, patched, _ = http("PATCH", url, change, token=tenant.token)
    assert status == 200, patched
    assert patched["next_run_at"].endswith("T06:30:00Z")
    assert _instant(patched["next_run_at"]) <= datetime.now(UTC) + timedelta(days=1)
    assert get_job(node, tenant.token, job["job_id"]) == patched


def test_patch_payload_keeps_next_run_at(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token, job_body(schedule={"every": "7m"}, payload={"v": 1}))
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    status, patched, _ = http("PATCH", url, {"payload": {"v": 2}, "name": "n"}, token=tenant.token)
    assert status == 200, patched
    assert patched["next_run_at"] == job["next_run_at"]
    assert (patched["payload"], patched["name"]) == ({"v": 2}, "n")
    assert patched["schedule"] == job["schedule"]
    assert patched["version"] == job["version"] + 1


def test_patch_that_makes_the_job_invalid_is_400_and_changes_nothing(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    before = tenant_view(node, tenant.token)
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    for change in (
        {"overlap_policy": "skip"},  # recurring only; this job runs once
        {"status": "paused"},
        {"next_run_at": "2030-01-01T00:00:00Z"},
        {"schedule": {"cron": "61 * * * *"}},
        {"target": {"type": "queue", "name": "bad name"}},
    ):
        status, body, _ = http("PATCH", url, change, token=tenant.token)
        assert_error(status, body, 400)
    assert tenant_view(node, tenant.token) == before
    assert get_job(node, tenant.token, job["job_id"]) == job


def test_patch_of_a_cancelled_job_is_409(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    http("DELETE", url, token=tenant.token)
    cancelled = get_job(node, tenant.token, job["job_id"])
    status, body, _ = http("PATCH", url, {"name": "again"}, token=tenant.token)
    assert_error(status, body, 409, "conflict")
    assert get_job(node, tenant.token, job["job_id"]) == cancelled


def test_pause_and_resume(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token, job_body(schedule={"every": "10m"}))
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    status, paused, _ = http("POST", f"{url}/pause", token=tenant.token)
    assert status == 200, paused
    assert (paused["status"], paused["version"]) == ("paused", job["version"] + 1)
    status, again, _ = http("POST", f"{url}/pause", token=tenant.token)
    assert (status, again) == (200, paused)
    status, resumed, _ = http("POST", f"{url}/resume", token=tenant.token)
    assert status == 200, resumed
    assert (resumed["status"], resumed["version"]) == ("active", paused["version"] + 1)
    assert _instant(resumed["next_run_at"]) > datetime.now(UTC) - timedelta(seconds=5)
    status, again, _ = http("POST", f"{url}/resume", token=tenant.token)
    assert (status, again) == (200, resumed)
    assert get_job(node, tenant.token, job["job_id"]) == resumed


@pytest.mark.slow
def test_a_paused_job_whose_schedule_ended_takes_a_new_payload_then_a_new_schedule(
    node: NodeProcess,
) -> None:
    tenant = new_tenant(node)
    schedule = {"every": "1h", "start_at": _in(seconds=2), "end_at": _in(seconds=3)}
    job = create_job(node, tenant.token, job_body(schedule=schedule))
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    status, paused, _ = http("POST", f"{url}/pause", token=tenant.token)
    assert status == 200, paused
    time.sleep(4)  # the schedule's only run (and its end) pass while the job is paused
    status, patched, _ = http("PATCH", url, {"payload": {"v": 2}}, token=tenant.token)
    assert status == 200, patched
    assert (patched["payload"], patched["status"]) == ({"v": 2}, "paused")
    status, body, _ = http("PATCH", url, {"schedule": schedule}, token=tenant.token)
    assert_error(status, body, 400, "invalid_schedule")  # a new schedule must still have a run
    status, body, _ = http("POST", f"{url}/resume", token=tenant.token)
    assert_error(status, body, 400, "invalid_schedule")
    status, patched, _ = http("PATCH", url, {"schedule": {"every": "1h"}}, token=tenant.token)
    assert status == 200, patched
    status, resumed, _ = http("POST", f"{url}/resume", token=tenant.token)
    assert (status, resumed["status"]) == (200, "active"), resumed


def test_resume_or_pause_of_a_cancelled_job_is_409_and_changes_nothing(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    http("DELETE", url, token=tenant.token)
    cancelled = get_job(node, tenant.token, job["job_id"])
    for action in ("resume", "pause", "trigger"):
        status, body, _ = http("POST", f"{url}/{action}", token=tenant.token)
        assert_error(status, body, 409, "conflict")
    assert get_job(node, tenant.token, job["job_id"]) == cancelled
    actions = [r["action"] for r in _audit_of(node, tenant.token, job["job_id"])]
    assert actions == ["create_jobs", "cancel_job"]


def test_trigger_is_202_and_keeps_the_schedule(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    status, body, _ = http(
        "POST", f"{node.url}/v1/jobs/{job['job_id']}/trigger", token=tenant.token
    )
    assert status == 202, body
    assert body["job_id"] == job["job_id"] and body["scheduled_at"].endswith("Z")
    assert get_job(node, tenant.token, job["job_id"]) == job


def test_runs_of_a_new_job_are_an_empty_list(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    status, body, _ = http("GET", f"{node.url}/v1/jobs/{job['job_id']}/runs", token=tenant.token)
    assert (status, body) == (200, {"runs": [], "next_cursor": None})


def test_every_change_is_audited_once(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token, job_body(schedule={"every": "1h"}))
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    http("PATCH", url, {"payload": 1, "name": "x"}, token=tenant.token)
    http("POST", f"{url}/pause", token=tenant.token)
    http("POST", f"{url}/resume", token=tenant.token)
    http("POST", f"{url}/trigger", token=tenant.token)
    http("DELETE", url, token=tenant.token)
    http("DELETE", url, token=tenant.token)  # no change: no record
    http("GET", url, token=tenant.token)  # a read: no record
    records = _audit_of(node, tenant.token, job["job_id"])
    assert [r["action"] for r in records] == [
        "create_jobs",
        "update_job",
        "pause_job",
        "resume_job",
        "trigger_job",
        "cancel_job",
    ]
    assert {r["actor"] for r in records} == {f"tenant:{tenant.tenant_id}"}
    assert {r["tenant_id"] for r in records} == {tenant.tenant_id}
    assert records[1]["detail"] == {"fields": ["name", "payload"]}
    assert [r["seq"] for r in records] == sorted({r["seq"] for r in records})


# ---------------------------------------------------------------- isolation


ISOLATED_ROUTES = [
    ("GET", "", None),
    ("PATCH", "", {"name": "stolen"}),
    ("DELETE", "", None),
    ("POST", "/pause", None),
    ("POST", "/resume", None),
    ("POST", "/trigger", None),
    ("GET", "/runs", None),
]


@pytest.mark.parametrize(("method", "suffix", "body"), ISOLATED_ROUTES)
def test_another_tenants_job_is_404_exactly_like_a_missing_one(
    node: NodeProcess, method: str, suffix: str, body: Any
) -> None:
    owner, intruder = new_tenant(node), new_tenant(node)
    job = create_job(node, owner.token)
    url = f"{node.url}/v1/jobs/{{}}{suffix}"
    foreign = http(method, url.format(job["job_id"]), body, token=intruder.token)
    missing = http(method, url.format(MISSING_JOB_ID), body, token=intruder.token)
    assert_error(foreign[0], foreign[1], 404, "job_not_found")
    assert foreign[0] == missing[0]
    assert json.dumps(foreign[1]).replace(job["job_id"], MISSING_JOB_ID) == json.dumps(missing[1])
    assert get_job(node, owner.token, job["job_id"]) == job
    assert [r["action"] for r in _audit_of(node, owner.token, job["job_id"])] == ["create_jobs"]


def test_a_tenant_lists_only_its_own_jobs(node: NodeProcess) -> None:
    first, second = new_tenant(node), new_tenant(node)
    mine = create_job(node, first.token)
    create_job(node, second.token)
    assert [j["job_id"] for j in list_all_jobs(node, first.token)] == [mine["job_id"]]


# ---------------------------------------------------------------- Idempotency-Key


def test_same_idempotency_key_and_body_answers_the_first_job(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    key = {"Idempotency-Key": "order-42"}
    body = job_body(name="once", payload={"a": 1, "b": [1, 2]})
    status, first, _ = http("POST", f"{node.url}/v1/jobs", body, token=tenant.token, headers=key)
    assert status == 201, first
    reordered = dict(reversed(list(body.items())))  # equal JSON, another key order
    status, second, _ = http(
        "POST", f"{node.url}/v1/jobs", reordered, token=tenant.token, headers=key
    )
    assert (status, second) == (201, first)
    assert [j["job_id"] for j in list_all_jobs(node, tenant.token)] == [first["job_id"]]


def test_same_idempotency_key_with_another_body_is_422_and_changes_nothing(
    node: NodeProcess,
) -> None:
    tenant = new_tenant(node)
    key = {"Idempotency-Key": "order-43"}
    url = f"{node.url}/v1/jobs"
    status, first, _ = http("POST", url, job_body(name="a"), token=tenant.token, headers=key)
    assert status == 201, first
    status, body, _ = http("POST", url, job_body(name="b"), token=tenant.token, headers=key)
    assert_error(status, body, 422, "idempotency_mismatch")
    assert list_all_jobs(node, tenant.token) == [first]


def test_idempotency_keys_are_scoped_per_tenant(node: NodeProcess) -> None:
    first, second = new_tenant(node), new_tenant(node)
    key = {"Idempotency-Key": "shared-key"}
    url = f"{node.url}/v1/jobs"
    status, job_1, _ = http("POST", url, job_body(), token=first.token, headers=key)
    assert status == 201, job_1
    status, job_2, _ = http("POST", url, job_body(name="other"), token=second.token, headers=key)
    assert status == 201, job_2
    assert job_2["job_id"] != job_1["job_id"] and job_2["tenant_id"] == second.tenant_id
    assert [j["job_id"] for j in list_all_jobs(node, first.token)] == [job_1["job_id"]]


def test_idempotency_key_of_255_printable_characters_is_accepted(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    key = {"Idempotency-Key": "k" * 254 + "~"}
    status, job, _ = http(
        "POST", f"{node.url}/v1/jobs", job_body(), token=tenant.token, headers=key
    )
    assert status == 201, job


# ---------------------------------------------------------------- quotas and limits


def test_quota_is_429_with_retry_after_and_cancelling_frees_a_slot(node: NodeProcess) -> None:
    tenant = new_tenant(node, max_active_jobs=2)
    first = create_job(node, tenant.token)
    create_job(node, tenant.token)
    status, body, headers = http("POST", f"{node.url}/v1/jobs", job_body(), token=tenant.token)
    assert_error(status, body, 429, "quota_exceeded")
    assert int(headers["Retry-After"]) >= 1
    assert len(list_all_jobs(node, tenant.token)) == 2
    assert http("DELETE", f"{node.url}/v1/jobs/{first['job_id']}", token=tenant.token)[0] == 204
    create_job(node, tenant.token)
    status, body, headers = http("POST", f"{node.url}/v1/jobs", job_body(), token=tenant.token)
    assert_error(status, body, 429, "quota_exceeded")


def test_quota_counts_the_active_jobs_of_the_tenant(node: NodeProcess) -> None:
    tenant = new_tenant(node, max_active_jobs=3)
    create_job(node, tenant.token)
    _, body, _ = http("GET", f"{node.url}/v1/tenants/{tenant.tenant_id}")
    assert body["active_jobs"] == 1


def test_batch_over_quota_creates_what_fits_in_order(node: NodeProcess) -> None:
    tenant = new_tenant(node, max_active_jobs=2)
    items = [job_body(name=str(i)) for i in range(4)]
    status, body, _ = http("POST", f"{node.url}/v1/jobs:batch", {"jobs": items}, token=tenant.token)
    assert status == 200, body
    results = body["results"]
    assert ["job_id" in r for r in results] == [True, True, False, False]
    assert {r["error"]["code"] for r in results[2:]} == {"quota_exceeded"}
    assert sorted(j["name"] for j in list_all_jobs(node, tenant.token)) == ["0", "1"]


def test_raising_the_quota_lets_creates_through(node: NodeProcess) -> None:
    tenant = new_tenant(node, max_active_jobs=1)
    create_job(node, tenant.token)
    status, body, _ = http("POST", f"{node.url}/v1/jobs", job_body(), token=tenant.token)
    assert_error(status, body, 429, "quota_exceeded")
    http("PATCH", f"{node.url}/v1/tenants/{tenant.tenant_id}", {"max_active_jobs": 2})
    create_job(node, tenant.token)


def test_idempotent_replay_is_answered_even_at_the_quota(node: NodeProcess) -> None:
    tenant = new_tenant(node, max_active_jobs=1)
    key = {"Idempotency-Key": "at-quota"}
    url = f"{node.url}/v1/jobs"
    status, first, _ = http("POST", url, job_body(), token=tenant.token, headers=key)
    assert status == 201, first
    status, again, _ = http("POST", url, job_body(), token=tenant.token, headers=key)
    assert (status, again) == (201, first)


def test_payload_at_the_limit_is_accepted_and_one_byte_more_is_413(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    at_limit = "a" * (PAYLOAD_LIMIT - 2)  # the JSON string adds two quotes
    job = create_job(node, tenant.token, job_body(payload=at_limit))
    assert job["payload"] == at_limit
    before = tenant_view(node, tenant.token)
    over = job_body(payload=at_limit + "a")
    status, body, _ = http("POST", f"{node.url}/v1/jobs", over, token=tenant.token)
    assert_error(status, body, 413, "payload_too_large")
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    status, body, _ = http("PATCH", url, {"payload": at_limit + "a"}, token=tenant.token)
    assert_error(status, body, 413, "payload_too_large")
    assert tenant_view(node, tenant.token) == before
    status, body, _ = http(
        "POST", f"{node.url}/v1/jobs:batch", {"jobs": [over]}, token=tenant.token
    )
    assert status == 200 and body["results"][0]["error"]["code"] == "payload_too_large"


def test_payload_limit_counts_bytes_of_utf8(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    over = job_body(payload="é" * (PAYLOAD_LIMIT // 2))  # 2 bytes each
    status, body, _ = http("POST", f"{node.url}/v1/jobs", over, token=tenant.token)
    assert_error(status, body, 413, "payload_too_large")


# ---------------------------------------------------------------- schedule preview


PREVIEWS = [
    (
        {"cron": "0 8 * * MON", "timezone": "Asia/Kolkata"},
        "2026-10-10T00:00:00Z",
        ["0 8 * * MON", "--tz", "Asia/Kolkata"],
    ),
    (
        {"cron": "30 2 * * *", "timezone": "Europe/Berlin"},
        "2027-03-27T00:00:00Z",
        ["30 2 * * *", "--tz", "Europe/Berlin"],
    ),
    (
        {"cron": "30 1 * * *", "timezone": "America/New_York"},
        "2026-11-01T00:00:00Z",
        ["30 1 * * *", "--tz", "America/New_York"],
    ),
    (
        {"every": "90m", "start_at": "2026-12-01T09:00:00Z"},
        "2026-12-01T08:00:00Z",
        ["--every", "90m", "--start", "2026-12-01T09:00:00Z"],
    ),
    (
        {"run_at": "2026-12-24T18:00:00+01:00"},
        "2026-12-01T00:00:00Z",
        ["--at", "2026-12-24T18:00:00+01:00"],
    ),
]


@pytest.mark.parametrize(
    ("schedule", "after", "args"), PREVIEWS, ids=["cron", "dst-gap", "dst-fold", "every", "at"]
)
def test_preview_gives_the_same_runs_as_schedctl_next(
    node: NodeProcess, schedule: dict[str, str], after: str, args: list[str]
) -> None:
    tenant = new_tenant(node)
    request = {"schedule": schedule, "after": after, "count": 6}
    status, body, _ = http("POST", f"{node.url}/v1/schedules:preview", request, token=tenant.token)
    assert status == 200, body
    result = CliRunner().invoke(cli, ["next", *args, "--after", after, "-n", "6", "--json"])
    assert result.exit_code == 0, result.output
    assert body == json.loads(result.output)
    assert body["runs"] and all(run.endswith("Z") for run in body["runs"])


def test_preview_answers_the_admin_too(node: NodeProcess) -> None:
    schedule = {"every": "1h", "start_at": "2030-01-01T00:30:00Z"}
    request = {"schedule": schedule, "after": "2030-01-01T00:00:00Z", "count": 2}
    status, body, _ = http("POST", f"{node.url}/v1/schedules:preview", request)
    assert status == 200, body
    assert body["runs"] == ["2030-01-01T00:30:00Z", "2030-01-01T01:30:00Z"]
    assert [o["local"] for o in body["occurrences"]] == [
        "2030-01-01T00:30:00+00:00",
        "2030-01-01T01:30:00+00:00",
    ]
    assert "current_runs" not in body and "current_occurrences" not in body


def test_preview_of_an_edit_gives_the_current_schedules_runs_beside(node: NodeProcess) -> None:
    request = {
        "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Berlin"},
        "current": {"cron": "0 9 * * *", "timezone": "America/New_York"},
        "after": "2027-03-27T12:00:00Z",
        "count": 2,
    }
    status, body, _ = http("POST", f"{node.url}/v1/schedules:preview", request)
    assert status == 200, body
    assert body["runs"] == ["2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"]
    assert body["occurrences"][0] == {
        "at": "2027-03-28T01:00:00Z",
        "local": "2027-03-28T03:00:00+02:00",
        "zone": "Europe/Berlin",
        "abbreviation": "CEST",
        "note": "02:30 does not exist on 28 March: runs at 03:00",
    }
    assert body["current_runs"] == ["2027-03-27T13:00:00Z", "2027-03-28T13:00:00Z"]
    assert [o["local"] for o in body["current_occurrences"]] == [
        "2027-03-27T09:00:00-04:00",
        "2027-03-28T09:00:00-04:00",
    ]
    ended = request | {"current": {"run_at": "2027-01-01T00:00:00Z"}}
    status, body, _ = http("POST", f"{node.url}/v1/schedules:preview", ended)
    assert (status, body["current_runs"], body["current_occurrences"]) == (200, [], [])
    tenant = new_tenant(node)  # a job's current schedule may exclude the tenant's calendars
    hols = {"name": "hols", "dates": ["2027-03-28"]}
    assert http("POST", f"{node.url}/v1/calendars", hols, token=tenant.token)[0] == 201
    excluding = request["current"] | {"exclude": ["hols"]}
    status, body, _ = http(
        "POST",
        f"{node.url}/v1/schedules:preview",
        request | {"current": excluding},
        token=tenant.token,
    )
    assert body["current_runs"] == ["2027-03-27T13:00:00Z", "2027-03-29T13:00:00Z"], body
    bad = request | {"current": {"cron": "0 9 * * *", "timezone": "Mars/Olympus"}}
    status, body, _ = http("POST", f"{node.url}/v1/schedules:preview", bad)
    assert status == 400 and body["error"]["message"].startswith("current.timezone: "), body


def test_preview_without_after_starts_now(node: NodeProcess) -> None:
    request = {"schedule": {"cron": "* * * * *"}, "count": 3}
    status, body, _ = http("POST", f"{node.url}/v1/schedules:preview", request)
    assert status == 200, body
    runs = [_instant(r) for r in body["runs"]]
    assert len(runs) == 3 and runs == sorted(runs)
    assert (
        datetime.now(UTC) - timedelta(seconds=5)
        < runs[0]
        <= datetime.now(UTC) + timedelta(minutes=1, seconds=5)
    )


def _audit_of(node: NodeProcess, token: str, job_id: str) -> list[dict[str, Any]]:
    return [r for r in all_audit(node, token) if r["job_id"] == job_id]
