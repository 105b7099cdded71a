"""Apply functions for calendars (issue 33, log level 10): put (create or replace) and delete.

A replace raises the version of every job not cancelled that excludes the calendar: a claim
planned with the old dates carries the old version and is refused as stale, so the dispatcher
plans it again with the new dates. A change takes effect for every occurrence not yet claimed.
"""

from __future__ import annotations

import json
import sqlite3

from schedd.store.command import Command, Handler, Result, ok, rejected
from schedd.store.commands import DeleteCalendar, PutCalendar
from schedd.store.records import audit

MAX_CALENDARS = 100  # per tenant; a wire constant: changing it changes what apply decides
_USERS = "SELECT job_id FROM calendar_uses WHERE tenant_id = ? AND name = ? ORDER BY job_id LIMIT 4"


def put_calendar(tx: sqlite3.Connection, cmd: Command[PutCalendar]) -> Result:
    b = cmd.body
    if not tx.execute("SELECT 1 FROM tenants WHERE tenant_id = ?", (b.tenant_id,)).fetchone():
        return rejected("tenant_not_found", f"no tenant with id {b.tenant_id!r}")
    found = tx.execute(
        "SELECT updated_at_ms FROM calendars WHERE tenant_id = ? AND name = ?",
        (b.tenant_id, b.name),
    ).fetchone()
    dates = json.dumps(list(b.dates))
    detail = {"name": b.name, "dates": len(b.dates)}
    if found is None:
        (count,) = tx.execute(
            "SELECT count(*) FROM calendars WHERE tenant_id = ?", (b.tenant_id,)
        ).fetchone()
        if count >= MAX_CALENDARS:
            return rejected("quota_exceeded", f"a tenant has at most {MAX_CALENDARS} calendars")
        tx.execute(
            "INSERT INTO calendars (tenant_id, name, dates, created_at_ms, updated_at_ms) "
            "VALUES (?, ?, ?, ?, ?)",
            (b.tenant_id, b.name, dates, cmd.ts_ms, cmd.ts_ms),
        )
        audit(tx, cmd, tenant_id=b.tenant_id, detail=detail)
        return ok(created=True)
    if b.create_only:
        return rejected("conflict", f"a calendar named {b.name!r} exists already (PUT replaces)")
    # Strictly later than the last change, even within one millisecond: readers cache a
    # calendar's dates by it (store/calendars.py DatesCache).
    updated = max(cmd.ts_ms, found[0] + 1)
    tx.execute(
        "UPDATE calendars SET dates = ?, updated_at_ms = ? WHERE tenant_id = ? AND name = ?",
        (dates, updated, b.tenant_id, b.name),
    )
    fenced = tx.execute(
        "UPDATE jobs SET version = version + 1 WHERE job_id IN "
        "(SELECT job_id FROM calendar_uses WHERE tenant_id = ? AND name = ?)",
        (b.tenant_id, b.name),
    ).rowcount
    audit(tx, cmd, tenant_id=b.tenant_id, detail={**detail, "jobs_fenced": fenced})
    return ok(jobs_fenced=fenced)


def delete_calendar(tx: sqlite3.Connection, cmd: Command[DeleteCalendar]) -> Result:
    """Refused while a job not cancelled excludes the calendar (cancel it, or change its
    schedule, first)."""
    b = cmd.body
    if not tx.execute(
        "SELECT 1 FROM calendars WHERE tenant_id = ? AND name = ?", (b.tenant_id, b.name)
    ).fetchone():
        return rejected("calendar_not_found", f"no calendar named {b.name!r}")
    users = [row[0] for row in tx.execute(_USERS, (b.tenant_id, b.name))]
    if users:
        shown = ", ".join(users[:3]) + (" and more" if len(users) > 3 else "")
        return rejected(
            "conflict",
            f"calendar {b.name!r} is used by jobs ({shown}): cancel them or change their "
            "schedules first",
        )
    tx.execute("DELETE FROM calendars WHERE tenant_id = ? AND name = ?", (b.tenant_id, b.name))
    audit(tx, cmd, tenant_id=b.tenant_id, detail={"name": b.name})
    return ok()


HANDLERS: dict[str, Handler] = {
    PutCalendar.TYPE: put_calendar,
    DeleteCalendar.TYPE: delete_calendar,
}
