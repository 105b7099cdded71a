"""Apply functions for pausing a queue or a tenant (log level 8; a job's pause is apply/jobs.py).

A paused queue's receives hand out nothing (apply/queue.py asks `pauses`); a paused tenant's
claims are refused (apply/dispatch.py), so its due rows wait. Each writes an audit record
naming who and why."""

from __future__ import annotations

import sqlite3

from schedd.store import pauses
from schedd.store.command import Command, Handler, Result, ok, rejected
from schedd.store.commands import PauseQueue, PauseTenant, ResumeQueue, ResumeTenant
from schedd.store.events import MessagesReady, TenantResumed
from schedd.store.pauses import Scope
from schedd.store.records import audit


def pause_queue(tx: sqlite3.Connection, cmd: Command[PauseQueue]) -> Result:
    b = cmd.body
    paused = pauses.pause(
        tx, Scope.QUEUE, b.tenant_id, b.queue, reason=b.reason, actor=b.actor, at_ms=cmd.ts_ms
    )
    if paused:
        audit(tx, cmd, tenant_id=b.tenant_id, detail={"queue": b.queue, "reason": b.reason})
    return ok()


def resume_queue(tx: sqlite3.Connection, cmd: Command[ResumeQueue]) -> Result:
    b = cmd.body
    if not pauses.resume(tx, Scope.QUEUE, b.tenant_id, b.queue):
        return ok()
    audit(tx, cmd, tenant_id=b.tenant_id, detail={"queue": b.queue})
    return ok(MessagesReady(b.tenant_id, b.queue))  # its waiting receives take them at once


def _tenant_exists(tx: sqlite3.Connection, tenant_id: str) -> bool:
    found = tx.execute("SELECT 1 FROM tenants WHERE tenant_id = ?", (tenant_id,))
    return found.fetchone() is not None


def pause_tenant(tx: sqlite3.Connection, cmd: Command[PauseTenant]) -> Result:
    b = cmd.body
    if not _tenant_exists(tx, b.tenant_id):
        return rejected("tenant_not_found", f"no tenant with id {b.tenant_id!r}")
    if pauses.pause(
        tx, Scope.TENANT, b.tenant_id, "", reason=b.reason, actor=b.actor, at_ms=cmd.ts_ms
    ):
        audit(tx, cmd, tenant_id=b.tenant_id, detail={"reason": b.reason})
    return ok()


def resume_tenant(tx: sqlite3.Connection, cmd: Command[ResumeTenant]) -> Result:
    b = cmd.body
    if not _tenant_exists(tx, b.tenant_id):
        return rejected("tenant_not_found", f"no tenant with id {b.tenant_id!r}")
    if not pauses.resume(tx, Scope.TENANT, b.tenant_id, ""):
        return ok()
    audit(tx, cmd, tenant_id=b.tenant_id, detail=None)
    # The dispatchers read the due rows they dropped while it was paused: each job's misfire
    # policy then decides on the runs missed, as after an outage, under the tenant's rate.
    return ok(TenantResumed(b.tenant_id))


HANDLERS: dict[str, Handler] = {
    PauseQueue.TYPE: pause_queue,
    ResumeQueue.TYPE: resume_queue,
    PauseTenant.TYPE: pause_tenant,
    ResumeTenant.TYPE: resume_tenant,
}
