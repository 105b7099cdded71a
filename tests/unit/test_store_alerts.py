"""Failure alerts in the store (issue 31, log level 8): `record_alerts` writes the sender's
outcomes into the alert's row (sent, retried, given up), ignores an outcome that is not for the
alert's next attempt, leaves every replica alike, and retention deletes alerts done."""

from __future__ import annotations

import json
from typing import Any

from schedd.retention import DAY_MS, Retention
from schedd.store import alerts
from schedd.store.commands import AlertOutcome, RecordAlerts
from schedd.store.db import Database
from schedd.store.results import AlertsRecorded
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_versions import tenant

BODY = json.dumps({"type": "job.failing", "job_id": "job_a"}, separators=(",", ":"))
COLUMNS = "attempts, next_at_ms, sent_at_ms, last_error"


def add_alert(db: Database, *, tenant_id: str = "t1", at_ms: int = NOW_MS) -> int:
    """An alert row as the lead's apply side writes it (outside any command of ours)."""
    with db.transaction(applied_index=db.applied_index) as tx:
        return alerts.add(
            tx,
            tenant_id=tenant_id,
            job_id="job_a",
            url="https://hooks.example/a",
            body=BODY,
            at_ms=at_ms,
        )


def record(apply: Applier, *outcomes: AlertOutcome, ts_ms: int = NOW_MS) -> AlertsRecorded:
    return apply.propose(RecordAlerts(outcomes=outcomes), ts_ms=ts_ms)


def row(db: Database, alert_id: int) -> tuple[Any, ...]:
    found = db.conn.execute(f"SELECT {COLUMNS} FROM alerts WHERE alert_id = ?", (alert_id,))
    return tuple(found.fetchone())


def failed(alert_id: int, attempt: int, retry_at_ms: int | None) -> AlertOutcome:
    return AlertOutcome(
        alert_id=alert_id, attempt=attempt, sent=False, error="http 500", retry_at_ms=retry_at_ms
    )


def test_a_sent_alert_is_done(apply: Applier, db: Database) -> None:
    alert_id = add_alert(db)
    result = record(apply, AlertOutcome(alert_id=alert_id, attempt=1, sent=True), ts_ms=NOW_MS + 7)
    assert result == AlertsRecorded(sent=1)
    assert row(db, alert_id) == (1, None, NOW_MS + 7, None)
    assert alerts.due(db.conn, NOW_MS + DAY_MS, 10) == []


def test_a_failed_attempt_is_retried_at_the_time_the_sender_chose(
    apply: Applier, db: Database
) -> None:
    alert_id = add_alert(db)
    assert record(apply, failed(alert_id, 1, NOW_MS + 5_000)) == AlertsRecorded(retrying=1)
    assert row(db, alert_id) == (1, NOW_MS + 5_000, None, "http 500")
    assert alerts.due(db.conn, NOW_MS + 4_999, 10) == []
    [due] = alerts.due(db.conn, NOW_MS + 5_000, 10)
    assert (due.alert_id, due.attempts) == (alert_id, 1)
    sent = AlertOutcome(alert_id=alert_id, attempt=2, sent=True)
    assert record(apply, sent, ts_ms=NOW_MS + 6_000) == AlertsRecorded(sent=1)
    # Sent at last: the last failure stays shown beside the time it was sent.
    assert row(db, alert_id) == (2, None, NOW_MS + 6_000, "http 500")


def test_a_failure_without_retry_time_gives_the_alert_up(apply: Applier, db: Database) -> None:
    alert_id = add_alert(db)
    blocked = AlertOutcome(alert_id=alert_id, attempt=1, sent=False, error="blocked: loopback")
    assert record(apply, blocked) == AlertsRecorded(failed=1)
    assert row(db, alert_id) == (1, None, None, "blocked: loopback")
    assert alerts.due(db.conn, NOW_MS + DAY_MS, 10) == []


def test_an_outcome_not_for_the_next_attempt_changes_nothing(apply: Applier, db: Database) -> None:
    alert_id = add_alert(db)
    first = failed(alert_id, 1, NOW_MS + 5_000)
    assert record(apply, first) == AlertsRecorded(retrying=1)
    # The same outcome again (a proposal retried after a timeout, in a new command): stale.
    assert record(apply, first) == AlertsRecorded(stale=1)
    assert record(apply, failed(alert_id, 3, NOW_MS + 9_000)) == AlertsRecorded(stale=1)
    assert row(db, alert_id) == (1, NOW_MS + 5_000, None, "http 500")
    done = AlertOutcome(alert_id=alert_id, attempt=2, sent=True)
    assert record(apply, done, ts_ms=NOW_MS + 6_000) == AlertsRecorded(sent=1)
    # Done: nothing moves it again, neither a late failure nor an unknown alert.
    late = record(apply, failed(alert_id, 3, NOW_MS + 9_000), failed(alert_id + 99, 1, None))
    assert late == AlertsRecorded(stale=2)
    assert row(db, alert_id) == (2, None, NOW_MS + 6_000, "http 500")


def test_one_command_records_several_alerts_each_by_its_own_row(
    apply: Applier, db: Database
) -> None:
    a, b, c = add_alert(db), add_alert(db), add_alert(db)
    result = record(
        apply,
        AlertOutcome(alert_id=a, attempt=1, sent=True),
        failed(b, 1, NOW_MS + 5_000),
        failed(c, 1, None),
    )
    assert result == AlertsRecorded(sent=1, retrying=1, failed=1)
    assert [row(db, i)[1] for i in (a, b, c)] == [None, NOW_MS + 5_000, None]


def test_a_stale_outcome_changes_nothing_and_the_next_attempt_counts(
    apply: Applier, db: Database
) -> None:
    alert_id = add_alert(db)
    record(apply, failed(alert_id, 1, NOW_MS + 5_000))
    assert record(apply, failed(alert_id, 1, NOW_MS + 5_000)) == AlertsRecorded(stale=1)
    assert row(db, alert_id) == (1, NOW_MS + 5_000, None, "http 500")
    record(apply, AlertOutcome(alert_id=alert_id, attempt=2, sent=True), ts_ms=NOW_MS + 1)
    assert row(db, alert_id) == (2, None, NOW_MS + 1, "http 500")


def test_record_alerts_is_a_level_8_command() -> None:
    assert RecordAlerts(outcomes=()).needed_level() == 8


def _prune(apply: Applier, ts_ms: int, **retention_ms: int) -> dict[str, Any]:
    policy = Retention(**retention_ms).as_ms()
    result = apply("prune", {"retention_ms": policy, "after_tenant": ""}, ts_ms=ts_ms)
    assert result["status"] == "ok", result
    return result


def test_retention_deletes_alerts_done_before_the_audit_cutoff_as_audit_rows(
    apply: Applier, db: Database
) -> None:
    tenant(apply)
    sent, pending, recent = add_alert(db), add_alert(db), add_alert(db, at_ms=NOW_MS + 5 * DAY_MS)
    record(apply, AlertOutcome(alert_id=sent, attempt=1, sent=True))
    record(apply, AlertOutcome(alert_id=recent, attempt=1, sent=True), ts_ms=NOW_MS + 5 * DAY_MS)
    (audit_rows,) = db.conn.execute("SELECT count(*) FROM audit").fetchone()  # the tenant's
    result = _prune(apply, NOW_MS + 3 * DAY_MS, audit=2 * DAY_MS)
    kinds = {"messages", "runs", "jobs", "deadletters", "audit", "commands"}
    assert set(result["deleted"]) == kinds  # the same keys as ever
    assert result["deleted"]["audit"] == audit_rows + 1
    kept = [r for (r,) in db.conn.execute("SELECT alert_id FROM alerts ORDER BY alert_id")]
    assert kept == [pending, recent]  # one still retried stays whatever its age
