"""The store's read models (store/views.py) encode to the bytes the API answered when they were
dicts: the same keys, in the same order, None as null."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from schedd.jobspec import JOB_FIELDS, parse_job, spec_to_json
from schedd.store import queries
from schedd.store.db import Database
from schedd.store.views import QueueSummary
from tests.conftest import NOW_MS

ENCODER = msgspec.json.Encoder()  # api/http.py's json_response encodes with one like it


def stored_spec() -> dict[str, Any]:
    body = {
        "name": "nightly",
        "schedule": {"cron": "0 8 * * *", "timezone": "Europe/Paris"},
        "target": {"type": "http", "url": "https://h.example/hook", "headers": {"X-A": "1"}},
        "payload": {"b": [1, 2.5, None], "a": "é"},
    }
    return spec_to_json(parse_job(body, now_ms=NOW_MS))


def test_a_job_encodes_as_its_dict_did() -> None:
    spec = stored_spec()
    row = (
        *("job_a", "t1", json.dumps(spec), "active", NOW_MS + 60_000, 3, NOW_MS, NOW_MS + 5),
        *(None, None, None),  # paused reason, runs started (level 8), pending completion
        f"[{NOW_MS + 9},null,0]",  # what its newest runs say (issue 31)
        0,  # not marked overdue
    )
    as_dict = {
        "job_id": "job_a",
        "tenant_id": "t1",
        **spec,
        "max_runs": None,  # level 8 (issue 31): a spec without a limit stores none
        "on_failure": None,
        "key": None,  # level 9 (issue 32): a spec without a key or labels stores neither
        "labels": {},
        "status": "active",
        "paused_reason": None,
        "next_run_at": "2026-09-21T14:14:20Z",
        "runs_started": None,
        "version": 3,
        "created_at": "2026-09-21T14:13:20Z",
        "updated_at": "2026-09-21T14:13:20.005Z",
        "last_success_at": "2026-09-21T14:13:20.009Z",  # issue 31: what its newest runs say
        "last_failure_at": None,
        "consecutive_failures": 0,
        "overdue": False,
    }
    job = queries.job_to_json(row)
    assert ENCODER.encode(job) == ENCODER.encode(as_dict)
    assert job.spec_fields() == {
        **spec,
        "max_runs": None,
        "on_failure": None,
        "key": None,
        "labels": {},
    }
    assert set(job.spec_fields()) == JOB_FIELDS


def test_a_run_encodes_as_its_dict_did() -> None:
    row = ("job_a", NOW_MS, NOW_MS + 7, "retrying", 2, NOW_MS + 8, None, "http 500")
    attempts = [
        (1, NOW_MS + 9, NOW_MS + 10, "failed", "http 500"),
        (2, NOW_MS + 11, None, None, None),
    ]
    as_dict = {
        "job_id": "job_a",
        "scheduled_at": "2026-09-21T14:13:20Z",
        "fire_at": "2026-09-21T14:13:20.007Z",
        "status": "retrying",
        "attempt": 2,
        "attempts": [
            {
                "attempt": 1,
                "started_at": "2026-09-21T14:13:20.009Z",
                "finished_at": "2026-09-21T14:13:20.010Z",
                "outcome": "failed",
                "error": "http 500",
                "output": None,  # level 12 (issue 34)
            },
            {
                "attempt": 2,
                "started_at": "2026-09-21T14:13:20.011Z",
                "finished_at": None,
                "outcome": None,
                "error": None,
                "output": None,
            },
        ],
        "dispatched_at": "2026-09-21T14:13:20.008Z",
        "finished_at": None,
        "error": "http 500",
        "payload_overridden": False,  # level 8 (issue 31)
        "backfill": False,
        "triggered_by": None,  # level 11 (issue 33)
    }
    assert ENCODER.encode(queries._run_to_json(row, attempts)) == ENCODER.encode(as_dict)


def test_an_audit_record_and_a_dead_letter_encode_as_their_dicts_did(db: Database) -> None:
    db.conn.execute(
        "INSERT INTO audit (at_ms, tenant_id, actor, action, job_id, detail) "
        "VALUES (?, NULL, 'admin', 'set_retention', NULL, '{\"runs\": \"7d\", \"a\": [1]}')",
        (NOW_MS,),
    )
    [record] = queries.list_audit(db.conn, None, after=0, limit=10)
    as_dict: dict[str, Any] = {
        "seq": 1,
        "at": "2026-09-21T14:13:20Z",
        "tenant_id": None,
        "actor": "admin",
        "action": "set_retention",
        "job_id": None,
        "detail": {"runs": "7d", "a": [1]},
    }
    assert ENCODER.encode(record) == ENCODER.encode(as_dict)
    row = ("job_a:5", "job_a", NOW_MS, 3, None, NOW_MS + 1, '{"type": "queue", "name": "q"}')
    as_dict = {
        "id": "job_a:5",
        "job_id": "job_a",
        "scheduled_at": "2026-09-21T14:13:20Z",
        "attempts": 3,
        "error": None,
        "created_at": "2026-09-21T14:13:20.001Z",
        "target": {"type": "queue", "name": "q"},
    }
    assert ENCODER.encode(queries.deadletter_view(row)) == ENCODER.encode(as_dict)


def test_a_queue_summary_encodes_as_its_dict_did() -> None:
    as_dict = {
        "name": "mail",
        "ready": 2,
        "in_flight": 0,
        "delayed": 1,
        "dead": 0,
        "oldest_age_s": 2.5,
    }
    summary = QueueSummary(name="mail", ready=2, delayed=1, oldest_age_s=2.5)
    assert ENCODER.encode(summary) == ENCODER.encode(as_dict)
    assert ENCODER.encode(QueueSummary(name="q")) == ENCODER.encode(
        {"name": "q", "ready": 0, "in_flight": 0, "delayed": 0, "dead": 0, "oldest_age_s": None}
    )


def test_a_tenant_encodes_as_its_dict_did() -> None:
    tenant = queries.Tenant(
        tenant_id="tnt_1",
        name="acme",
        signing_secret="whsec_x",
        max_active_jobs=10,
        dispatch_rate=5,
        allowed_hosts=["h.example"],
        live_jobs=2,
        created_at_ms=NOW_MS,
        updated_at_ms=NOW_MS + 1,
        retention={"runs": 86_400_000},
    )
    as_dict = {
        "tenant_id": "tnt_1",
        "name": "acme",
        "max_active_jobs": 10,
        "dispatch_rate": 5,
        "allowed_hosts": ["h.example"],
        "alert_url": None,
        "active_jobs": 2,
        "retention": {"runs": "1d"},
        "on_failure": None,  # level 8 (issue 31)
        "paused": False,
        "paused_reason": None,
        "created_at": "2026-09-21T14:13:20Z",
        "updated_at": "2026-09-21T14:13:20.001Z",
    }
    assert ENCODER.encode(tenant.view()) == ENCODER.encode(as_dict)
