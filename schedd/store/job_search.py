"""Filtered pages of a tenant's jobs (GET /v1/jobs with target, name, next-run or failing
filters).

No index covers these fields: each page examines jobs in job_id order after the cursor, at most
SCAN_ROWS of them and for about SCAN_BUDGET_S (checked inside the query, between jobs), so a page
costs the same with 1,000,000 jobs as with 10,000, and large payloads (the filters parse each
spec) shorten the stretch, not the time.
Never writes.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from schedd.model import JobStatus
from schedd.store import recent_runs
from schedd.store.ledger import completions
from schedd.store.queries import JOB_COLUMNS, job_to_json, status_condition
from schedd.wire.jobs import JobView

SCAN_ROWS = 10_000  # jobs examined per filtered page at most, matching or not
SCAN_BUDGET_S = 0.1  # a page stops examining once this has passed (checked inside the query)
# SQLite calls the budget check every this many virtual-machine steps of the scan (a job's
# examination takes a few dozen; one large spec's parse is one step, bounded by payload_limit).
PROGRESS_STEPS = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFilter:
    """What a listed job must match (every given field: AND). `host` is lowercase, `name`
    casefolded; next-run bounds are half-open: after <= next_run_at_ms < before; `is_failing`:
    only jobs whose newest finished run died (store/recent_runs.py)."""

    status: str | None = None
    target_type: str | None = None
    queue: str | None = None
    host: str | None = None
    name: str | None = None
    next_run_after_ms: int | None = None
    next_run_before_ms: int | None = None
    is_failing: bool = False
    labels: tuple[tuple[str, str], ...] = ()  # (name, value) pairs, each one a job must have

    @property
    def is_scanning(self) -> bool:
        """Whether a page needs the bounded scan (status alone is an index range)."""
        return (
            any(
                value is not None
                for value in (
                    self.target_type,
                    self.queue,
                    self.host,
                    self.name,
                    self.next_run_after_ms,
                    self.next_run_before_ms,
                )
            )
            or self.is_failing
        )

    def conditions(self) -> tuple[str, list[Any]]:
        """The SQL condition on a jobs row (cheapest terms first) and its arguments."""
        terms: list[tuple[str, tuple[Any, ...]]] = [
            (_HAS_LABEL, (name, value)) for name, value in self.labels
        ]
        if self.next_run_after_ms is not None:
            terms.append(("next_run_at_ms >= ?", (self.next_run_after_ms,)))
        if self.next_run_before_ms is not None:
            terms.append(("next_run_at_ms < ?", (self.next_run_before_ms,)))
        if self.next_run_after_ms is not None or self.next_run_before_ms is not None:
            # A job completed by a claim whose completion is not written yet has no next run.
            terms.append((f"({completions.PENDING_SINCE}) IS NULL", ()))
        if self.target_type is not None:
            terms.append((f"{_TYPE} = ?", (self.target_type,)))
        if self.queue is not None:
            terms.append((f"{_TYPE} = 'queue' AND {_QUEUE} = ?", (self.queue,)))
        if self.host is not None:
            terms.append((f"{_TYPE} = 'http' AND {_HOST} = ?", (self.host,)))
        if self.name is not None:
            terms.append((f"instr({_NAME}, ?) > 0", (self.name,)))
        sql = " AND ".join(term for term, _ in terms) or "1"
        if self.is_failing:  # the dearest term: read a job's runs only if the others matched
            sql = f"CASE WHEN {sql} THEN ({recent_runs.FAILING}) ELSE 0 END"
        return sql, [arg for _, args in terms for arg in args]


# A label a job must have (store/job_keys.py: kept while the job is).
_HAS_LABEL = (
    "EXISTS (SELECT 1 FROM job_labels l WHERE l.tenant_id = jobs.tenant_id "
    "AND l.name = ? AND l.value = ? AND l.job_id = jobs.job_id)"
)
# The stored spec's fields a filter reads (schedd_* are store/sqlfunctions.py's).
_TYPE = "json_extract(spec, '$.target.type')"
_QUEUE = "json_extract(spec, '$.target.name')"
_HOST = "schedd_url_host(json_extract(spec, '$.target.url'))"
_NAME = "schedd_fold(json_extract(spec, '$.name'))"


def search_jobs(
    conn: sqlite3.Connection,
    tenant_id: str,
    where: JobFilter,
    *,
    after: str,
    limit: int,
    budget_s: float = SCAN_BUDGET_S,
) -> tuple[list[JobView], str | None]:
    """Up to `limit` matching jobs after `after` (of `where.status` if given), examining jobs
    in job_id order until the page is full, SCAN_ROWS were examined, `budget_s` has passed, or
    the jobs end; and the job_id to continue after: the last job shown when the page is full,
    else the last job examined when jobs are left beyond it, else None.

    The budget bounds a page's cost whatever the jobs' size (the filters parse each job's spec,
    payload included): SQLite's progress handler checks it while the scan runs and interrupts
    it. Every examined job reaches this function in order, so the cursor is exact wherever the
    scan stops (no job skipped or shown twice); every page examines at least one job, so a scan
    always moves on. The handler is removed before the connection goes back to its pool."""
    scope = "tenant_id = ? AND job_id > ?" + _status_scope(where.status)

    def after_(job_id: str) -> list[Any]:  # the scope's arguments for jobs after job_id
        return [tenant_id, job_id]

    condition, args = where.conditions()
    scan = _Scan(deadline=time.monotonic() + budget_s)
    conn.execute("BEGIN")  # one read transaction: the scan and the rows shown, one state
    try:
        conn.set_progress_handler(scan.is_over, PROGRESS_STEPS)
        try:
            examined = conn.execute(
                f"SELECT job_id, coalesce(({condition}), 0) FROM jobs WHERE {scope} "
                "ORDER BY job_id LIMIT ?",
                (*args, *after_(after), SCAN_ROWS),
            )
            is_full = scan.take(examined, limit)
        finally:
            conn.set_progress_handler(None, 0)
        rows = [_job_row(conn, job_id) for job_id in scan.matched]
        if is_full:
            return _page(rows, scan.matched[-1])
        if scan.last is None or not (scan.is_interrupted or scan.count >= SCAN_ROWS):
            return _page(rows, None)  # the jobs ended
        beyond = conn.execute(
            f"SELECT 1 FROM jobs WHERE {scope} LIMIT 1", after_(scan.last)
        ).fetchone()
        return _page(rows, scan.last if beyond else None)
    finally:
        conn.execute("COMMIT")


def labelled_jobs(
    conn: sqlite3.Connection, tenant_id: str, where: JobFilter, *, after: str, limit: int
) -> list[JobView]:
    """A page of the jobs that have every label of `where` (and its status, if given), in
    job_id order after `after`: read from the first label's rows in job_labels (no scan of
    the tenant's other jobs), the others checked per job."""
    (name, value), *others = where.labels
    condition, args = JobFilter(labels=tuple(others)).conditions()
    rows = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id IN (SELECT job_id FROM job_labels "
        "WHERE tenant_id = ? AND name = ? AND value = ? AND job_id > ?) AND tenant_id = ?"
        f"{_status_scope(where.status)} AND {condition} ORDER BY job_id LIMIT ?",
        (tenant_id, name, value, after, tenant_id, *args, limit),
    ).fetchall()
    return [job_to_json(row) for row in rows]


def _status_scope(status: str | None) -> str:
    """The scan's condition on status, as readers see it (a pending completion included)."""
    if status is None:
        return ""
    if status == JobStatus.COMPLETED:
        return (
            " AND status IN ('active', 'completed') "
            f"AND (status = 'completed' OR ({completions.PENDING_SINCE}) IS NOT NULL)"
        )
    return f" AND {status_condition(status)}"


@dataclass(slots=True, kw_only=True)
class _Scan:
    """One page's scan: the jobs it examined and matched, and its deadline."""

    deadline: float
    last: str | None = None  # the last job examined
    count: int = 0
    matched: list[str] = field(default_factory=list)
    is_interrupted: bool = False

    def is_over(self) -> bool:
        """SQLite's progress handler: true interrupts the query (never before one job)."""
        if self.last is not None and time.monotonic() >= self.deadline:
            self.is_interrupted = True
        return self.is_interrupted

    def take(self, examined: sqlite3.Cursor, limit: int) -> bool:
        """Read the examined jobs until the page is full (true) or the query ends or is
        interrupted by the budget."""
        try:
            for job_id, is_match in examined:
                self.last, self.count = job_id, self.count + 1
                if is_match:
                    self.matched.append(job_id)
                    if len(self.matched) == limit:
                        return True
        except sqlite3.OperationalError:
            if not self.is_interrupted:
                raise
        return False


def _job_row(conn: sqlite3.Connection, job_id: str) -> tuple[Any, ...]:
    row: tuple[Any, ...] = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)
    ).fetchone()
    return row


def _page(rows: list[tuple[Any, ...]], next_after: str | None) -> tuple[list[JobView], str | None]:
    return [job_to_json(row) for row in rows], next_after
