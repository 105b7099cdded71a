"""Read-only queries for the API: jobs, runs, tenants, idempotency keys, audit records.

Each takes a reader connection; every query is a key lookup or an index range, never a scan.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from schedd.jobspec import JOB_FIELDS
from schedd.model import JobStatus, MisfirePolicy, OverlapPolicy, RunStatus
from schedd.retention import retention_json
from schedd.store import recent_runs
from schedd.store.failures import Policy
from schedd.store.ledger import completions
from schedd.store.pauses import Pause
from schedd.timeformat import format_instant
from schedd.wire.cluster import AuditRecord
from schedd.wire.deadletters import DeadLetterView
from schedd.wire.failures import OnFailureView
from schedd.wire.jobs import AttemptView, JobView, RunView
from schedd.wire.tenants import TenantView


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """A tenant as the API needs it (the token hash stays in the store)."""

    tenant_id: str
    name: str
    signing_secret: str
    max_active_jobs: int
    dispatch_rate: int
    allowed_hosts: list[str]
    live_jobs: int
    created_at_ms: int
    updated_at_ms: int
    alert_url: str | None = None
    previous_secret: str | None = None
    previous_secret_until_ms: int = 0
    retention: dict[str, int] = field(default_factory=dict)  # its own, shorter, values (ms)

    def signing_secrets(self, now_ms: int) -> list[str]:
        """The secrets that sign a callback now: during a rotation's overlap, old and new."""
        if self.previous_secret and now_ms < self.previous_secret_until_ms:
            return [self.signing_secret, self.previous_secret]
        return [self.signing_secret]

    def view(self, pause: Pause | None = None, on_failure: Policy | None = None) -> TenantView:
        """The API's tenant object (never the token or the signing secret), with its pause and
        its jobs' default failure policy."""
        return TenantView(
            tenant_id=self.tenant_id,
            name=self.name,
            max_active_jobs=self.max_active_jobs,
            dispatch_rate=self.dispatch_rate,
            allowed_hosts=self.allowed_hosts,
            alert_url=self.alert_url,
            active_jobs=self.live_jobs,
            retention=retention_json(self.retention),
            on_failure=None
            if on_failure is None
            else OnFailureView(
                alert_url=on_failure.alert_url, after=on_failure.after, pause=on_failure.pause
            ),
            paused=pause is not None,
            paused_reason=None if pause is None else pause.reason,
            created_at=format_instant(self.created_at_ms),
            updated_at=format_instant(self.updated_at_ms),
        )


_TENANT_COLUMNS = (
    "tenant_id, name, signing_secret, max_active_jobs, dispatch_rate, allowed_hosts, live_jobs, "
    "created_at_ms, updated_at_ms, alert_url, previous_secret, previous_secret_until_ms, retention"
)
# A job as readers see it: the row, and when its claim completed it if that completion is still
# to be written (store/ledger/completions.py; NULL for every other job), and what its newest
# runs say (store/recent_runs.py: a bounded read per job, in the same query).
JOB_COLUMNS = (
    "job_id, tenant_id, spec, status, next_run_at_ms, version, created_at_ms, updated_at_ms, "
    # Level 8: why it was paused, and its scheduled runs claimed (a job with a run limit).
    "(SELECT reason FROM pauses p WHERE p.scope = 'job' AND p.tenant_id = jobs.tenant_id "
    "AND p.name = jobs.job_id), "
    "(SELECT runs_started FROM run_counts c WHERE c.job_id = jobs.job_id), "
    + completions.PENDING_SINCE
    + f", ({recent_runs.SUMMARY})"
    # Level 8: the overdue scanner found it overdue (store/overdue.py).
    + ", EXISTS (SELECT 1 FROM overdue_jobs o WHERE o.job_id = jobs.job_id)"
)
_PENDING = 10  # the pending completion's place in a JOB_COLUMNS row
# A condition on a jobs row: its status as readers see it.
_STATUS_IS = {
    JobStatus.ACTIVE.value: f"status = 'active' AND ({completions.PENDING_SINCE}) IS NULL",
}


def _tenant(row: tuple[Any, ...] | None) -> Tenant | None:
    if row is None:
        return None
    values = list(row)
    values[5] = json.loads(values[5])
    values[12] = json.loads(values[12])
    return Tenant(**dict(zip(_TENANT_COLUMNS.split(", "), values, strict=True)))


def tenant_by_token_hash(conn: sqlite3.Connection, token_hash: str) -> Tenant | None:
    row = conn.execute(
        f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE token_hash = ?", (token_hash,)
    ).fetchone()
    return _tenant(row)


def get_tenant(conn: sqlite3.Connection, tenant_id: str) -> Tenant | None:
    row = conn.execute(
        f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE tenant_id = ?", (tenant_id,)
    ).fetchone()
    return _tenant(row)


def list_tenants(conn: sqlite3.Connection, *, after: str, limit: int) -> list[Tenant]:
    rows = conn.execute(
        f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE tenant_id > ? ORDER BY tenant_id LIMIT ?",
        (after, limit),
    ).fetchall()
    return [t for t in map(_tenant, rows) if t is not None]


_SPEC_NULLS = dict.fromkeys(JOB_FIELDS)


def _policy(kind: type[MisfirePolicy | OverlapPolicy], stored: Any) -> Any:
    """A stored policy as its enum; None where a spec lacks it (only the store's own tests
    write such specs: every release wrote all eight fields)."""
    return None if stored is None else kind(stored)


def job_json(
    job_id: str,
    tenant_id: str,
    spec: Mapping[str, Any],
    status: str,
    next_run_at_ms: int | None,
    version: int,
    created_at_ms: int,
    updated_at_ms: int,
    *,
    paused_reason: str | None = None,
    runs_started: int | None = None,
    overdue: bool = False,
    results: recent_runs.Results = recent_runs.NONE,
) -> JobView:
    """The API's job object; `spec` is the job's spec as stored (jobspec.spec_to_json's keys:
    every release wrote all eight; one missing, as in the store's own tests, reads as null).
    Shown as stored: the API's view of a job is its spec's JSON, free-form values and all.
    `results`: what its newest runs say (none for a job just created)."""
    full: Mapping[str, Any] = {**_SPEC_NULLS, **spec}
    return JobView(
        job_id=job_id,
        tenant_id=tenant_id,
        name=full["name"],
        schedule=full["schedule"],
        window=full["window"],
        target=full["target"],
        payload=full["payload"],
        retry=full["retry"],
        misfire_policy=_policy(MisfirePolicy, full["misfire_policy"]),
        overlap_policy=_policy(OverlapPolicy, full["overlap_policy"]),
        max_runs=full["max_runs"],
        on_failure=full["on_failure"],
        key=full["key"],
        labels=full["labels"] or {},
        status=JobStatus(status),
        paused_reason=paused_reason if status == JobStatus.PAUSED else None,
        next_run_at=None if next_run_at_ms is None else format_instant(next_run_at_ms),
        runs_started=runs_started if runs_started is not None or full["max_runs"] is None else 0,
        version=version,
        created_at=format_instant(created_at_ms),
        updated_at=format_instant(updated_at_ms),
        last_success_at=results.last_success_at,
        last_failure_at=results.last_failure_at,
        consecutive_failures=results.consecutive_failures,
        overdue=overdue and status == JobStatus.ACTIVE,
    )


def job_to_json(row: tuple[Any, ...]) -> JobView:
    """The API's job object from a jobs row (columns as in JOB_COLUMNS)."""
    (
        job_id,
        tenant_id,
        spec,
        status,
        next_run,
        version,
        created,
        updated,
        reason,
        runs,
        pending,
        recent,
        is_overdue,
    ) = row
    status, next_run, version, updated = completions.as_completed(
        status, next_run, version, updated, pending
    )
    spec_json = json.loads(spec)
    return job_json(
        job_id,
        tenant_id,
        spec_json,
        status,
        next_run,
        version,
        created,
        updated,
        paused_reason=reason,
        runs_started=runs,
        results=recent_runs.results_of(recent),
        overdue=bool(is_overdue),
    )


def status_condition(status: str) -> str:
    """The SQL condition (no arguments) that a jobs row has this status as readers see it. A
    completed job whose completion is not written yet is found by `pending_completed`."""
    return _STATUS_IS.get(status, f"status = '{JobStatus(status).value}'")


def get_job_row(conn: sqlite3.Connection, tenant_id: str, job_id: str) -> tuple[Any, ...] | None:
    row: tuple[Any, ...] | None = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = ? AND tenant_id = ?", (job_id, tenant_id)
    ).fetchone()
    return row


def get_job(conn: sqlite3.Connection, tenant_id: str, job_id: str) -> JobView | None:
    row = get_job_row(conn, tenant_id, job_id)
    return None if row is None else job_to_json(row)


def list_jobs(
    conn: sqlite3.Connection, tenant_id: str, *, status: str | None, after: str, limit: int
) -> list[JobView]:
    """A page of a tenant's jobs in job_id order, optionally of one status."""
    sql = f"SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = ? AND job_id > ?"
    if status is not None:
        sql += f" AND {status_condition(status)}"
    rows = conn.execute(sql + " ORDER BY job_id LIMIT ?", (tenant_id, after, limit)).fetchall()
    if status == JobStatus.COMPLETED:  # and those whose completion is still to be written
        rows = sorted(rows + _pending_completed(conn, tenant_id, after, limit))[:limit]
    return [job_to_json(row) for row in rows]


def _pending_completed(
    conn: sqlite3.Connection, tenant_id: str, after: str, limit: int
) -> list[tuple[Any, ...]]:
    ids = completions.pending_job_ids(conn, tenant_id, after, limit)
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id IN ({marks}) AND tenant_id = ?",
        (*ids, tenant_id),
    ).fetchall()
    return [row for row in rows if row[_PENDING] is not None]


def list_runs(
    conn: sqlite3.Connection, job_id: str, *, before_ms: int, limit: int
) -> list[RunView]:
    """A page of a job's runs, newest first, scheduled before `before_ms`: run rows and the
    runs kept in batches (store/ledger/batches.py), merged."""
    rows = conn.execute(
        "SELECT job_id, scheduled_at_ms, fire_at_ms, status, attempt, dispatched_at_ms, "
        "finished_at_ms, error FROM runs WHERE job_id = ? AND scheduled_at_ms < ? "
        "ORDER BY scheduled_at_ms DESC LIMIT ?",
        (job_id, before_ms, limit),
    ).fetchall()
    in_batches = _batch_runs(conn, job_id, before_ms, limit)
    if not rows and not in_batches:
        return []
    # The page's attempts in one range read (not one query per run).
    attempts: dict[int, list[tuple[Any, ...]]] = {}
    if rows:
        for scheduled, *attempt in conn.execute(
            "SELECT scheduled_at_ms, attempt, started_at_ms, finished_at_ms, outcome, error "
            "FROM attempts WHERE job_id = ? AND scheduled_at_ms BETWEEN ? AND ? "
            "ORDER BY scheduled_at_ms, attempt",
            (job_id, rows[-1][1], rows[0][1]),
        ):
            attempts.setdefault(scheduled, []).append(tuple(attempt))
    page = [(row[1], _run_to_json(row, attempts.get(row[1], []))) for row in rows]
    if in_batches:
        page = sorted(page + in_batches, key=lambda pair: pair[0], reverse=True)[:limit]
    low, high = page[-1][0], page[0][0]
    marked = _marked(conn, "backfills", job_id, low, high)
    own = _marked(conn, "run_payloads", job_id, low, high)
    if not marked and not own:
        return [run for _, run in page]
    return [
        msgspec.structs.replace(run, backfill=ms in marked, payload_overridden=ms in own)
        for ms, run in page
    ]


# Tables that mark some of a job's runs by (job_id, scheduled_at_ms): a backfill added them, a
# trigger gave them their own payload.
_RUN_MARKS = frozenset({"backfills", "run_payloads"})


def _marked(
    conn: sqlite3.Connection, table: str, job_id: str, low_ms: int, high_ms: int
) -> set[int]:
    """The runs between two scheduled times that `table` marks (one range read by key)."""
    assert table in _RUN_MARKS  # a constant of this module, never input
    rows = conn.execute(
        f"SELECT scheduled_at_ms FROM {table} WHERE job_id = ? AND scheduled_at_ms BETWEEN ? AND ?",
        (job_id, low_ms, high_ms),
    )
    return {ms for (ms,) in rows}


# A batch run's state and times read in SQL from its slot (store/ledger/batches.py layout):
# its slot byte, and the int64 receive and ack times of the slot (little-endian).
_BATCH_RUNS = """
SELECT k.scheduled_at_ms, k.fire_at_ms, b.claimed_at_ms, substr(b.slots, k.slot + 1, 1),
       substr(b.times, 8 * (length(b.slots) + k.slot) + 1, 8),
       substr(b.times, 8 * (2 * length(b.slots) + k.slot) + 1, 8)
FROM run_keys k JOIN batches b ON b.batch_id = k.batch_id
WHERE k.job_id = ? AND k.scheduled_at_ms < ?
ORDER BY k.scheduled_at_ms DESC LIMIT ?
"""
_BATCH_STATUS = {b"r": ("dispatched", 0), b"h": ("delivered", 1), b"d": ("succeeded", 1)}


def _batch_runs(
    conn: sqlite3.Connection, job_id: str, before_ms: int, limit: int
) -> list[tuple[int, RunView]]:
    """The job's runs still in batches, as (scheduled_at_ms, run object); a spilled run has
    its own run row and is left out here."""
    found = []
    for scheduled, fire, claimed, state, received, acked in conn.execute(
        _BATCH_RUNS, (job_id, before_ms, limit)
    ):
        if state not in _BATCH_STATUS:
            continue
        status, attempt = _BATCH_STATUS[state]
        started = int.from_bytes(received, "little", signed=True)
        finished = int.from_bytes(acked, "little", signed=True) if state == b"d" else None
        attempts = [] if attempt == 0 else [(1, started, finished, finished and "succeeded", None)]
        row = (job_id, scheduled, fire, status, attempt, claimed, finished, None)
        found.append((scheduled, _run_to_json(row, attempts)))
    return found


# A run in one of these statuses has no error of its own: the failures before it are its
# attempts' (`attempts[].error`). Read-time, so old log entries replay to the same state.
_ERRORLESS = frozenset({"succeeded", "delivered"})


def _run_to_json(row: tuple[Any, ...], attempts: list[tuple[Any, ...]]) -> RunView:
    job_id, scheduled, fire, status, attempt, dispatched, finished, error = row
    if status in _ERRORLESS:
        error = None
    return RunView(
        job_id=job_id,
        scheduled_at=format_instant(scheduled),
        fire_at=format_instant(fire),
        status=RunStatus(status),
        attempt=attempt,
        attempts=[
            AttemptView(
                attempt=a,
                started_at=format_instant(started),
                finished_at=None if ended is None else format_instant(ended),
                outcome=outcome,
                error=err,
            )
            for a, started, ended, outcome, err in attempts
        ],
        dispatched_at=None if dispatched is None else format_instant(dispatched),
        finished_at=None if finished is None else format_instant(finished),
        error=error,
    )


def list_audit(
    conn: sqlite3.Connection,
    tenant_id: str | None,
    *,
    after: int,
    limit: int,
    job_id: str | None = None,
) -> list[AuditRecord]:
    """Audit records after sequence `after`; one tenant's, or all when tenant_id is None; only
    one job's when job_id is given."""
    conditions: list[str] = ["seq > ?"]
    args: list[Any] = [after]
    source = "audit"
    if job_id is not None:
        # The job's own range (migration 9), never the tenant's records read one by one.
        source = "audit INDEXED BY audit_by_job"
        conditions.append("job_id = ?")
        args.append(job_id)
    if tenant_id is not None:
        conditions.append("tenant_id = ?")
        args.append(tenant_id)
    rows = conn.execute(
        "SELECT seq, at_ms, tenant_id, actor, action, job_id, detail "
        f"FROM {source} WHERE {' AND '.join(conditions)} ORDER BY seq LIMIT ?",
        (*args, limit),
    ).fetchall()
    return [
        AuditRecord(
            seq=seq,
            at=format_instant(at),
            tenant_id=tenant,
            actor=actor,
            action=action,
            job_id=job,
            detail=None if detail is None else json.loads(detail),
        )
        for seq, at, tenant, actor, action, job, detail in rows
    ]


def list_nodes(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(node_id, api, raft) of every node that registered."""
    rows: list[tuple[str, str, str]] = conn.execute(
        "SELECT node_id, api, raft FROM nodes ORDER BY node_id"
    ).fetchall()
    return rows


DEADLETTER_COLUMNS = "id, job_id, scheduled_at_ms, attempts, error, created_at_ms, target"


def deadletter_view(row: tuple[Any, ...]) -> DeadLetterView:
    dl_id, job_id, scheduled, attempts, error, created, target = row
    return DeadLetterView(
        id=dl_id,
        job_id=job_id,
        scheduled_at=format_instant(scheduled),
        attempts=attempts,
        error=error,
        created_at=format_instant(created),
        target=json.loads(target),
    )


def list_deadletters(
    conn: sqlite3.Connection, tenant_id: str, *, after: str, limit: int
) -> list[DeadLetterView]:
    rows = conn.execute(
        f"SELECT {DEADLETTER_COLUMNS} FROM deadletters WHERE tenant_id = ? AND id > ? "
        "ORDER BY id LIMIT ?",
        (tenant_id, after, limit),
    ).fetchall()
    return [deadletter_view(row) for row in rows]


def get_deadletter(conn: sqlite3.Connection, tenant_id: str, dl_id: str) -> DeadLetterView | None:
    row = conn.execute(
        f"SELECT {DEADLETTER_COLUMNS} FROM deadletters WHERE tenant_id = ? AND id = ?",
        (tenant_id, dl_id),
    ).fetchone()
    return None if row is None else deadletter_view(row)


IDS_PER_QUERY = 500  # with the tenant id, under SQLite's oldest variable limit (999)


def existing_deadletters(conn: sqlite3.Connection, tenant_id: str, ids: list[str]) -> set[str]:
    """Which of `ids` are dead letters of the tenant on this replica."""
    found: set[str] = set()
    for start in range(0, len(ids), IDS_PER_QUERY):
        chunk = ids[start : start + IDS_PER_QUERY]
        marks = ", ".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT id FROM deadletters WHERE tenant_id = ? AND id IN ({marks})",
            (tenant_id, *chunk),
        )
        found.update(row[0] for row in rows)
    return found


def partitions_by_node(conn: sqlite3.Connection, now_ms: int) -> dict[str, list[int]]:
    """The partitions each node holds an unexpired lease on."""
    held: dict[str, list[int]] = {}
    for partition, node_id in conn.execute(
        "SELECT partition, node_id FROM leases WHERE expires_at_ms > ? ORDER BY partition",
        (now_ms,),
    ):
        held.setdefault(node_id, []).append(partition)
    return held
