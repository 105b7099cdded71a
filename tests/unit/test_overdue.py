"""Overdue jobs (issue 31): the rule (two occurrences after the last success, the second given
its gap, at most a minute, to finish), the scanner's step (marks and clears a page's id range),
and apply (one alert per mark where a failure policy has an alert_url)."""

from __future__ import annotations

import json
from typing import Any

from schedd.dispatch.overdue import OverdueScanner, overdue_since
from schedd.store import queries
from schedd.store.db import Database
from schedd.timeformat import format_instant
from schedd.wire.jobs import JobView
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_dispatch import setup

HOUR = 3_600_000


def view(schedule: dict[str, str], *, created_ms: int, success_ms: int | None = None) -> JobView:
    spec = {
        "name": None,
        "schedule": schedule,
        "window": None,
        "target": {"type": "queue", "name": "q"},
        "payload": None,
        "retry": {},
        "misfire_policy": "run_once",
        "overlap_policy": "allow",
    }
    job = queries.job_json("j1", "t1", spec, "active", None, 1, created_ms, created_ms)
    if success_ms is None:
        return job
    return JobView(**{**_fields(job), "last_success_at": format_instant(success_ms)})


def _fields(job: JobView) -> dict[str, Any]:
    return {f: getattr(job, f) for f in job.__struct_fields__}


def test_an_every_job_is_overdue_once_two_intervals_passed_without_a_success() -> None:
    every = {"every": "1h", "start_at": format_instant(NOW_MS)}
    job = view(every, created_ms=NOW_MS)
    assert overdue_since(job, NOW_MS + 2 * HOUR) is None  # the second run is just due
    assert overdue_since(job, NOW_MS + 2 * HOUR + 59_999) is None
    mark = overdue_since(job, NOW_MS + 2 * HOUR + 60_000)
    assert mark is not None and mark.since_ms == NOW_MS and mark.gap_ms == HOUR
    recent = view(every, created_ms=NOW_MS, success_ms=NOW_MS + 2 * HOUR + 10)
    assert overdue_since(recent, NOW_MS + 3 * HOUR) is None  # a success starts it again


def test_a_weekday_cron_is_not_overdue_over_the_weekend() -> None:
    friday_evening = 1_764_957_600_000  # 2025-12-05T18:00:00Z, a Friday
    cron = {"cron": "0 9 * * MON-FRI", "timezone": "UTC"}
    job = view(cron, created_ms=friday_evening)
    monday_morning = friday_evening + 63 * HOUR  # Monday 09:00: one occurrence came
    assert overdue_since(job, monday_morning + 1) is None
    tuesday = friday_evening + (63 + 24) * HOUR + 60_000  # the second came and had a minute
    assert overdue_since(job, tuesday) is not None


def test_a_one_time_job_is_never_overdue() -> None:
    job = view({"run_at": format_instant(NOW_MS)}, created_ms=NOW_MS - HOUR)
    assert overdue_since(job, NOW_MS + 100 * HOUR) is None


def test_the_scanner_marks_and_clears_and_apply_alerts_once(apply: Applier, db: Database) -> None:
    policy = {"alert_url": "https://alerts.example/o", "after": 3, "pause": False}
    setup(apply, schedule={"every": "1m"}, on_failure=policy)
    later = NOW_MS + 10 * 60_000  # no run succeeded for ten minutes
    command, last, scanned = OverdueScanner.step(db.conn, "t1", "", later)
    assert scanned == 1
    assert last is None and command is not None
    assert [m.job_id for m in command.marked] == ["j1"] and command.cleared == ()
    apply.typed(command, ts_ms=later)
    assert queries.get_job(db.conn, "t1", "j1").overdue is True  # type: ignore[union-attr]
    [(body,)] = db.conn.execute("SELECT body FROM alerts").fetchall()
    assert json.loads(body)["type"] == "job.overdue"
    again, _, _ = OverdueScanner.step(db.conn, "t1", "", later + 60_000)
    assert again is None  # marked already: no new mark, no second alert
    apply("pause_job", {"tenant_id": "t1", "job_id": "j1"})
    cleared, _, _ = OverdueScanner.step(db.conn, "t1", "", later + 120_000)
    assert cleared is not None and cleared.cleared == ("j1",) and cleared.marked == ()
    apply.typed(cleared)
    assert db.conn.execute("SELECT count(*) FROM overdue_jobs").fetchone()[0] == 0
    assert db.conn.execute("SELECT count(*) FROM alerts").fetchone()[0] == 1
