"""Apply functions for job commands: create, update, pause, resume, cancel, trigger.

Each keeps the due index in step with the job row and writes an audit record.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple, TypedDict

from schedd.model import JobChange, JobStatus
from schedd.store import job_keys, pauses, run_payloads
from schedd.store.apply import connections, versions
from schedd.store.command import Command, Handler, Rejected, Result, compact_json, ok, rejected
from schedd.store.commands import (
    BackfillJob,
    CancelJob,
    CreateJobs,
    NewJob,
    PauseJob,
    ResumeJob,
    TriggerJob,
    UpdateJob,
)
from schedd.store.events import DueAdded
from schedd.store.ledger import completions
from schedd.store.pauses import Scope
from schedd.store.records import add_due, audit, remove_scheduled_due
from schedd.store.versions import change_of_update
from schedd.stored_spec import load_spec

JobCommand = CancelJob | UpdateJob | PauseJob | ResumeJob | TriggerJob | BackfillJob

LIVE = (JobStatus.ACTIVE.value, JobStatus.PAUSED.value)


class ErrorJSON(TypedDict):
    code: str
    message: str


class CreatedJSON(TypedDict, total=False):
    """One job of create_jobs' result as kept (results.JobOutcome reads it)."""

    job_id: str
    created: bool
    error: ErrorJSON


class StoredJob(NamedTuple):
    """The columns of a job that apply functions decide on."""

    job_id: str
    tenant_id: str
    partition: int
    status: str
    version: int
    next_run_at_ms: int | None
    next_fire_at_ms: int | None


def _load(tx: sqlite3.Connection, cmd: Command[JobCommand]) -> StoredJob | None:
    """The job the command names, if it exists and belongs to the command's tenant. A pending
    completion (store/ledger/completions.py) is written first, so the command meets the job as
    its claim left it."""
    job = _read(tx, cmd.body.job_id)
    if job is None or job.tenant_id != cmd.body.tenant_id:
        return None
    if job.status == JobStatus.ACTIVE and completions.settle_job(tx, job.job_id):
        return _read(tx, job.job_id)
    return job


def load_job(tx: sqlite3.Connection, cmd: Command[JobCommand]) -> StoredJob | None:
    """`_load` for the job commands applied in other modules (backfill_job)."""
    return _load(tx, cmd)


def _read(tx: sqlite3.Connection, job_id: str) -> StoredJob | None:
    row = tx.execute(
        f"SELECT {', '.join(StoredJob._fields)} FROM jobs WHERE job_id = ?", (job_id,)
    ).fetchone()
    return None if row is None else StoredJob(*row)


def _not_found(cmd: Command[JobCommand]) -> Rejected:
    return rejected("job_not_found", f"no job with id {cmd.body.job_id!r}")


def _set_status(
    tx: sqlite3.Connection, cmd: Command[CancelJob | PauseJob], status: str, *, live_delta: int
) -> None:
    """Move a job out of `active` (cancel, pause): it has no next run until resumed."""
    tx.execute(
        "UPDATE jobs SET status = ?, next_run_at_ms = NULL, next_fire_at_ms = NULL, "
        "version = version + 1, updated_at_ms = ? WHERE job_id = ?",
        (status, cmd.ts_ms, cmd.body.job_id),
    )
    if live_delta:
        tx.execute(
            "UPDATE tenants SET live_jobs = live_jobs + ? WHERE tenant_id = ?",
            (live_delta, cmd.body.tenant_id),
        )


def tenant_quota(tx: sqlite3.Connection, tenant_id: str) -> tuple[int, int] | Rejected:
    """A tenant's (max_active_jobs, live_jobs), or the rejection of a create for no tenant."""
    tenant = tx.execute(
        "SELECT max_active_jobs, live_jobs FROM tenants WHERE tenant_id = ?", (tenant_id,)
    ).fetchone()
    if tenant is None:
        return rejected("tenant_not_found", f"no tenant with id {tenant_id!r}")
    return int(tenant[0]), int(tenant[1])


def create_jobs(tx: sqlite3.Connection, cmd: Command[CreateJobs]) -> Result:
    tenant_id = cmd.body.tenant_id
    quota = tenant_quota(tx, tenant_id)
    if isinstance(quota, Rejected):
        return quota
    limit, live = quota
    results: list[CreatedJSON] = []
    events: list[DueAdded] = []
    for item in cmd.body.jobs:
        result = _create_one(tx, cmd, item, can_add=live < limit)
        if result.get("created"):
            live += 1
            events += _add_due(
                tx, item.partition, item.job_id, item.next_fire_at_ms, item.next_run_at_ms
            )
        results.append(result)
    tx.execute("UPDATE tenants SET live_jobs = ? WHERE tenant_id = ?", (live, tenant_id))
    return ok(*events, results=results)


def _create_one(
    tx: sqlite3.Connection, cmd: Command[CreateJobs], item: NewJob, *, can_add: bool
) -> CreatedJSON:
    tenant_id, key = cmd.body.tenant_id, item.idempotency_key
    if key is not None:
        seen = tx.execute(
            "SELECT request_hash, job_id FROM idempotency WHERE tenant_id = ? AND key = ?",
            (tenant_id, key),
        ).fetchone()
        if seen is not None:
            if seen[0] != item.request_hash:
                return {"error": _error("idempotency_mismatch", _MISMATCH)}
            return {"job_id": seen[1], "created": False}
    if not can_add:
        return {"error": _error("quota_exceeded", "tenant has reached max_active_jobs")}
    problem = connections.check_target(tx, tenant_id, item.spec)
    if problem is not None:
        return {"error": _error("invalid_request", problem)}
    index = job_keys.Index.of_spec(item.spec)  # levels 9 and 10
    holder = None if index.key is None else job_keys.holder(tx, tenant_id, index.key)
    if holder is not None and index.key is not None:
        return {"error": _error("conflict", job_keys.taken_message(index.key, holder))}
    job_id = item.job_id
    refused = job_keys.refusal(tx, tenant_id, job_id, index)  # levels 10 and 11
    if refused is not None:
        return {"error": _error(*refused)}
    tx.execute(
        "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, "
        "next_fire_at_ms, version, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, ?, 'active', ?, ?, 1, ?, ?)",
        (
            job_id,
            tenant_id,
            item.partition,
            compact_json(item.spec),
            item.next_run_at_ms,
            item.next_fire_at_ms,
            cmd.ts_ms,
            cmd.ts_ms,
        ),
    )
    if key is not None:
        tx.execute(
            "INSERT INTO idempotency (tenant_id, key, request_hash, job_id, created_at_ms) "
            "VALUES (?, ?, ?, ?, ?)",
            (tenant_id, key, item.request_hash, job_id, cmd.ts_ms),
        )
    connections.use(tx, tenant_id, job_id, item.spec)
    if not index.is_empty:
        job_keys.add(tx, tenant_id, job_id, index)
    audit(tx, cmd, tenant_id=tenant_id, job_id=job_id, detail=None)
    return {"job_id": job_id, "created": True}


_MISMATCH = "Idempotency-Key was used before with a different body"


def _error(code: str, message: str) -> ErrorJSON:
    return {"code": code, "message": message}


def _add_due(
    tx: sqlite3.Connection,
    partition: int,
    job_id: str,
    fire_at_ms: int | None,
    run_at_ms: int | None,
    *,
    is_trigger: bool = False,
) -> list[DueAdded]:
    """Put a job's next run in the due index (none without one: a schedule that has ended)."""
    if fire_at_ms is None or run_at_ms is None:
        return []
    add_due(
        tx,
        partition=partition,
        fire_at_ms=fire_at_ms,
        job_id=job_id,
        scheduled_at_ms=run_at_ms,
        is_trigger=is_trigger,
    )
    return [DueAdded(job_id, fire_at_ms, run_at_ms, is_trigger)]


def cancel_job(tx: sqlite3.Connection, cmd: Command[CancelJob]) -> Result:
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    status = job.status
    if status == JobStatus.CANCELLED:
        return ok()
    versions.record(tx, cmd, job, JobChange.CANCEL)
    tx.execute("DELETE FROM due WHERE job_id = ?", (cmd.body.job_id,))
    connections.release(tx, [cmd.body.job_id])
    job_keys.release_key(tx, cmd.body.job_id)
    _set_status(tx, cmd, JobStatus.CANCELLED.value, live_delta=-1 if status in LIVE else 0)
    pauses.forget_jobs(tx, job.tenant_id, [cmd.body.job_id])
    audit(tx, cmd, tenant_id=job.tenant_id, job_id=cmd.body.job_id, detail={"was": status})
    return ok()


def update_job(tx: sqlite3.Connection, cmd: Command[UpdateJob]) -> Result:
    """Replace a job's spec and next run (PATCH); the proposer read `expected_version`."""
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    if job.status not in LIVE:
        return rejected("conflict", f"job is {job.status}; create a new job instead")
    if job.version != cmd.body.expected_version:
        return rejected("stale_state", "the job changed meanwhile; read it again")
    b = cmd.body
    problem = connections.check_target(tx, job.tenant_id, b.spec)
    if problem is not None:
        return rejected("invalid_request", problem)
    old_index, new_index = _stored_index(tx, b.job_id), job_keys.Index.of_spec(b.spec)
    if new_index.key is not None and new_index.key != old_index.key:
        holder = job_keys.holder(tx, job.tenant_id, new_index.key)
        if holder is not None:
            return rejected("conflict", job_keys.taken_message(new_index.key, holder))
    refused = job_keys.refusal(tx, job.tenant_id, b.job_id, new_index, old_index)
    if refused is not None:
        return rejected(*refused)
    is_active = job.status == JobStatus.ACTIVE  # a paused job gets its next run on resume
    spec = compact_json(b.spec)
    versions.record(tx, cmd, job, change_of_update(b.fields), fields=b.fields, spec=spec)
    remove_scheduled_due(tx, job)
    connections.release(tx, [b.job_id])
    connections.use(tx, job.tenant_id, b.job_id, b.spec)
    tx.execute(
        "UPDATE jobs SET spec = ?, next_run_at_ms = ?, next_fire_at_ms = ?, "
        "version = version + 1, updated_at_ms = ? WHERE job_id = ?",
        (
            spec,
            b.next_run_at_ms if is_active else None,
            b.next_fire_at_ms if is_active else None,
            cmd.ts_ms,
            b.job_id,
        ),
    )
    if not (old_index.is_empty and new_index.is_empty):
        job_keys.replace(tx, job.tenant_id, b.job_id, old_index, new_index)
    due = (
        _add_due(tx, job.partition, b.job_id, b.next_fire_at_ms, b.next_run_at_ms)
        if is_active
        else []
    )
    audit(
        tx, cmd, tenant_id=job.tenant_id, job_id=b.job_id, detail={"fields": list(b.fields or ())}
    )
    return ok(*due)


def _stored_index(tx: sqlite3.Connection, job_id: str) -> job_keys.Index:
    """The key and labels of a job's spec as stored."""
    (spec,) = tx.execute("SELECT spec FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    stored = load_spec(spec)
    return job_keys.Index.of_stored(stored)


def pause_job(tx: sqlite3.Connection, cmd: Command[PauseJob]) -> Result:
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    if job.status == JobStatus.PAUSED:
        return ok()
    if job.status != JobStatus.ACTIVE:
        return rejected("conflict", f"a {job.status} job cannot be paused")
    b = cmd.body
    versions.record(tx, cmd, job, JobChange.PAUSE)
    remove_scheduled_due(tx, job)
    _set_status(tx, cmd, JobStatus.PAUSED.value, live_delta=0)
    if b.reason is not None:  # level 8
        pauses.pause(
            tx, Scope.JOB, job.tenant_id, b.job_id, reason=b.reason, actor=b.actor, at_ms=cmd.ts_ms
        )
    detail = None if b.reason is None else {"reason": b.reason}
    audit(tx, cmd, tenant_id=job.tenant_id, job_id=b.job_id, detail=detail)
    return ok()


def resume_job(tx: sqlite3.Connection, cmd: Command[ResumeJob]) -> Result:
    """Resume a paused job at the next run the proposer computed from its "now"."""
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    if job.status == JobStatus.ACTIVE:
        return ok()
    if job.status != JobStatus.PAUSED:
        return rejected("conflict", f"a {job.status} job cannot be resumed")
    if job.version != cmd.body.expected_version:
        return rejected("stale_state", "the job changed meanwhile; read it again")
    b = cmd.body
    versions.record(tx, cmd, job, JobChange.RESUME)
    tx.execute(
        "UPDATE jobs SET status = 'active', next_run_at_ms = ?, next_fire_at_ms = ?, "
        "version = version + 1, updated_at_ms = ? WHERE job_id = ?",
        (b.next_run_at_ms, b.next_fire_at_ms, cmd.ts_ms, b.job_id),
    )
    due = _add_due(tx, job.partition, b.job_id, b.next_fire_at_ms, b.next_run_at_ms)
    pauses.forget_jobs(tx, job.tenant_id, [b.job_id])
    audit(tx, cmd, tenant_id=job.tenant_id, job_id=b.job_id, detail=None)
    return ok(*due)


def trigger_job(tx: sqlite3.Connection, cmd: Command[TriggerJob]) -> Result:
    """Add one extra run now, outside the schedule (it does not move next_run_at)."""
    job = _load(tx, cmd)
    if job is None:
        return _not_found(cmd)
    if job.status == JobStatus.CANCELLED:
        return rejected("conflict", "a cancelled job cannot be triggered")
    b = cmd.body
    at = b.scheduled_at_ms
    due = _add_due(tx, job.partition, b.job_id, at, at, is_trigger=True)
    detail: dict[str, object] = {"scheduled_at_ms": b.scheduled_at_ms}
    if b.payload is not None:  # level 8: this run's own payload
        run_payloads.keep(tx, b.job_id, at, b.payload)
        detail["payload_overridden"] = True
    audit(tx, cmd, tenant_id=job.tenant_id, job_id=b.job_id, detail=detail)
    return ok(*due, scheduled_at_ms=at)


HANDLERS: dict[str, Handler] = {
    CreateJobs.TYPE: create_jobs,
    CancelJob.TYPE: cancel_job,
    UpdateJob.TYPE: update_job,
    PauseJob.TYPE: pause_job,
    ResumeJob.TYPE: resume_job,
    TriggerJob.TYPE: trigger_job,
}
