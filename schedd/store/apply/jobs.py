"""Apply functions for job commands: create, update, pause, resume, cancel, trigger.

Each keeps the due index in step with the job row and writes an audit record.
"""

from __future__ import annotations

import sqlite3
from typing import Any, NamedTuple

from schedd.model import JobStatus
from schedd.store.command import Command, compact_json, ok, rejected
from schedd.store.records import add_due, audit, remove_scheduled_due

LIVE = (JobStatus.ACTIVE.value, JobStatus.PAUSED.value)


class JobRow(NamedTuple):
    """The columns of a job that apply functions decide on."""

    job_id: str
    tenant_id: str
    partition: int
    status: str
    version: int
    next_run_at_ms: int | None
    next_fire_at_ms: int | None


def _load(tx: sqlite3.Connection, cmd: Command) -> JobRow | None:
    """The job the command names, if it exists and belongs to the command's tenant."""
    row = tx.execute(
        f"SELECT {', '.join(JobRow._fields)} FROM jobs WHERE job_id = ?", (cmd.body["job_id"],)
    ).fetchone()
    if row is None or row[1] != cmd.body["tenant_id"]:
        return None
    return JobRow(*row)


def _not_found(cmd: Command) -> dict[str, Any]:
    return rejected("job_not_found", f"no job with id {cmd.body['job_id']!r}")


def _set_status(tx: sqlite3.Connection, cmd: Command, status: str, *, live_delta: int) -> None:
    """Move a job out of `active` (cancel, pause): it has no next run until resumed."""
    tx.execute(
        "UPDATE jobs SET status = ?, next_run_at_ms = NULL, next_fire_at_ms = NULL, "
        "version = version + 1, updated_at_ms = ? WHERE job_id = ?",
        (status, cmd.ts_ms, cmd.body["job_id"]),
    )
    if live_delta:
        tx.execute(
            "UPDATE tenants SET live_jobs = live_jobs + ? WHERE tenant_id = ?",
            (live_delta, cmd.body["tenant_id"]),
        )


def create_jobs(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    tenant_id = cmd.body["tenant_id"]
    tenant = tx.execute(
        "SELECT max_active_jobs, live_jobs FROM tenants WHERE tenant_id = ?", (tenant_id,)
    ).fetchone()
    if tenant is None:
        return rejected("tenant_not_found", f"no tenant with id {tenant_id!r}")
    limit, live = tenant
    results: list[dict[str, Any]] = []
    for item in cmd.body["jobs"]:
        result = _create_one(tx, cmd, item, can_add=live < limit)
        if result.get("created"):
            live += 1
        results.append(result)
    tx.execute("UPDATE tenants SET live_jobs = ? WHERE tenant_id = ?", (live, tenant_id))
    return ok(results=results)


def _create_one(
    tx: sqlite3.Connection, cmd: Command, item: dict[str, Any], *, can_add: bool
) -> dict[str, Any]:
    tenant_id, key = cmd.body["tenant_id"], item.get("idempotency_key")
    if key is not None:
        seen = tx.execute(
            "SELECT request_hash, job_id FROM idempotency WHERE tenant_id = ? AND key = ?",
            (tenant_id, key),
        ).fetchone()
        if seen is not None:
            if seen[0] != item["request_hash"]:
                return {"error": _error("idempotency_mismatch", _MISMATCH)}
            return {"job_id": seen[1], "created": False}
    if not can_add:
        return {"error": _error("quota_exceeded", "tenant has reached max_active_jobs")}
    job_id = item["job_id"]
    tx.execute(
        "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, "
        "next_fire_at_ms, version, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, ?, 'active', ?, ?, 1, ?, ?)",
        (
            job_id,
            tenant_id,
            item["partition"],
            compact_json(item["spec"]),
            item["next_run_at_ms"],
            item["next_fire_at_ms"],
            cmd.ts_ms,
            cmd.ts_ms,
        ),
    )
    add_due(
        tx,
        partition=item["partition"],
        fire_at_ms=item["next_fire_at_ms"],
        job_id=job_id,
        scheduled_at_ms=item["next_run_at_ms"],
    )
    if key is not None:
        tx.execute(
            "INSERT INTO idempotency (tenant_id, key, request_hash, job_id, created_at_ms) "
            "VALUES (?, ?, ?, ?, ?)",
            (tenant_id, key, item["request_hash"], job_id, cmd.ts_ms),
        )
    audit(tx, cmd, tenant_id=tenant_id, job_id=job_id, detail=None)
    return {"job_id": job_id, "created": True}


_MISMATCH = "Idempotency-Key was used before with a different body"


def _error(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


def cancel_job(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    status = job.status
    if status == JobStatus.CANCELLED:
        return ok()
    tx.execute("DELETE FROM due WHERE job_id = ?", (cmd.body["job_id"],))
    _set_status(tx, cmd, JobStatus.CANCELLED.value, live_delta=-1 if status in LIVE else 0)
    audit(tx, cmd, tenant_id=job.tenant_id, job_id=cmd.body["job_id"], detail={"was": status})
    return ok()


def update_job(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    """Replace a job's spec and next run (PATCH); the proposer read `expected_version`."""
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    if job.status not in LIVE:
        return rejected("conflict", f"job is {job.status}; create a new job instead")
    if job.version != cmd.body["expected_version"]:
        return rejected("stale_state", "the job changed meanwhile; read it again")
    b = cmd.body
    is_active = job.status == JobStatus.ACTIVE  # a paused job gets its next run on resume
    remove_scheduled_due(tx, job)
    tx.execute(
        "UPDATE jobs SET spec = ?, next_run_at_ms = ?, next_fire_at_ms = ?, "
        "version = version + 1, updated_at_ms = ? WHERE job_id = ?",
        (
            compact_json(b["spec"]),
            b["next_run_at_ms"] if is_active else None,
            b["next_fire_at_ms"] if is_active else None,
            cmd.ts_ms,
            b["job_id"],
        ),
    )
    if is_active:
        add_due(
            tx,
            partition=job.partition,
            fire_at_ms=b["next_fire_at_ms"],
            job_id=b["job_id"],
            scheduled_at_ms=b["next_run_at_ms"],
        )
    audit(
        tx, cmd, tenant_id=job.tenant_id, job_id=b["job_id"], detail={"fields": b.get("fields", [])}
    )
    return ok()


def pause_job(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    if job.status == JobStatus.PAUSED:
        return ok()
    if job.status != JobStatus.ACTIVE:
        return rejected("conflict", f"a {job.status} job cannot be paused")
    remove_scheduled_due(tx, job)
    _set_status(tx, cmd, JobStatus.PAUSED.value, live_delta=0)
    audit(tx, cmd, tenant_id=job.tenant_id, job_id=cmd.body["job_id"], detail=None)
    return ok()


def resume_job(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    """Resume a paused job at the next run the proposer computed from its "now"."""
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    if job.status == JobStatus.ACTIVE:
        return ok()
    if job.status != JobStatus.PAUSED:
        return rejected("conflict", f"a {job.status} job cannot be resumed")
    if job.version != cmd.body["expected_version"]:
        return rejected("stale_state", "the job changed meanwhile; read it again")
    b = cmd.body
    tx.execute(
        "UPDATE jobs SET status = 'active', next_run_at_ms = ?, next_fire_at_ms = ?, "
        "version = version + 1, updated_at_ms = ? WHERE job_id = ?",
        (b["next_run_at_ms"], b["next_fire_at_ms"], cmd.ts_ms, b["job_id"]),
    )
    add_due(
        tx,
        partition=job.partition,
        fire_at_ms=b["next_fire_at_ms"],
        job_id=b["job_id"],
        scheduled_at_ms=b["next_run_at_ms"],
    )
    audit(tx, cmd, tenant_id=job.tenant_id, job_id=b["job_id"], detail=None)
    return ok()


def trigger_job(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    """Add one extra run now, outside the schedule (it does not move next_run_at)."""
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    if job.status == JobStatus.CANCELLED:
        return rejected("conflict", "a cancelled job cannot be triggered")
    b = cmd.body
    add_due(
        tx,
        partition=job.partition,
        fire_at_ms=b["scheduled_at_ms"],
        job_id=b["job_id"],
        scheduled_at_ms=b["scheduled_at_ms"],
        is_trigger=True,
    )
    audit(
        tx,
        cmd,
        tenant_id=job.tenant_id,
        job_id=b["job_id"],
        detail={"scheduled_at_ms": b["scheduled_at_ms"]},
    )
    return ok(scheduled_at_ms=b["scheduled_at_ms"])


HANDLERS = {
    "create_jobs": create_jobs,
    "cancel_job": cancel_job,
    "update_job": update_job,
    "pause_job": pause_job,
    "resume_job": resume_job,
    "trigger_job": trigger_job,
}
