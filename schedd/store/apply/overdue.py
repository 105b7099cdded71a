"""Apply mark_overdue (log level 8): the overdue scanner's findings. A job newly found overdue
gets a row and, where its failure policy (its own or its tenant's) has an alert_url, one alert
(`job.overdue`); it is not alerted again until a success (or a pause, a change) clears it."""

from __future__ import annotations

import sqlite3

from schedd.model import JobStatus
from schedd.store import alerts, failures, overdue
from schedd.store.command import Command, Handler, Result, ok
from schedd.store.commands import MarkOverdue
from schedd.store.events import AlertsDue
from schedd.timeformat import format_duration, format_instant

ALERT_TYPE = "job.overdue"


def mark_overdue(tx: sqlite3.Connection, cmd: Command[MarkOverdue]) -> Result:
    overdue.forget(tx, cmd.body.cleared)
    alerted = False
    for mark in cmd.body.marked:
        row = tx.execute(
            f"SELECT tenant_id, status, {failures.OWN_POLICY}, json_extract(spec, '$.name') "
            "FROM jobs WHERE job_id = ?",
            (mark.job_id,),
        ).fetchone()
        if row is None or row[1] != JobStatus.ACTIVE:
            continue  # paused, cancelled or gone since the scanner read it
        tenant_id, _, own_policy, name = row
        written = tx.execute(
            "INSERT OR IGNORE INTO overdue_jobs (job_id, tenant_id, since_ms, marked_at_ms) "
            "VALUES (?, ?, ?, ?)",
            (mark.job_id, tenant_id, mark.since_ms, cmd.ts_ms),
        )
        if not written.rowcount:
            continue  # marked already: alerted then
        policy = failures.job_policy(tx, tenant_id, own_policy)
        if policy is not None and policy.alert_url is not None:
            body = {
                "type": ALERT_TYPE,
                "job_id": mark.job_id,
                "tenant_id": tenant_id,
                "name": name,
                "no_success_since": format_instant(mark.since_ms),
                "longest_gap": format_duration(mark.gap_ms),
                "at": format_instant(cmd.ts_ms),
            }
            alerts.queue(
                tx,
                tenant_id=tenant_id,
                job_id=mark.job_id,
                url=policy.alert_url,
                body=body,
                at_ms=cmd.ts_ms,
            )
            alerted = True
    return ok(AlertsDue()) if alerted else ok()


HANDLERS: dict[str, Handler] = {MarkOverdue.TYPE: mark_overdue}
