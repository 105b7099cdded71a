"""The forecast's reads (GET /v1/forecast, the leader's spike warning): active jobs' next runs
and specs in job_id order, and the due index's triggers and paced backfills in the span.

Bounded: the jobs are read in chunks until `budget_s` has passed, so a tenant with 1,000,000
jobs gets a forecast in about the same time as one with 100,000, marked partial. Never writes.
"""

from __future__ import annotations

import sqlite3
import time

from schedd.forecast import ForecastJob, RunFilter, Span, Tally, outside_calendars
from schedd.store import calendars
from schedd.store.ledger import completions

BUDGET_S = 1.0  # a forecast stops counting jobs once this has passed (then it is partial)
CHUNK = 500  # jobs read per query; the budget is checked between chunks

# Active jobs with a next run before the span's end, their run count toward max_runs. A job
# whose last run was claimed but whose completion is not written yet has no next run.
# The spec's planning fields are taken out in SQL: its payload (up to the payload limit) never
# reaches Python. A schedule that is not an object (no release wrote one) reads as none.
_JOBS = (
    "SELECT job_id, tenant_id, json_object('schedule', CASE json_type(spec, '$.schedule') "
    "WHEN 'object' THEN json(json_extract(spec, '$.schedule')) END, "
    "'window', json_extract(spec, '$.window')), json_extract(spec, '$.max_runs'), "
    "next_run_at_ms, next_fire_at_ms, "
    "coalesce((SELECT runs_started FROM run_counts c WHERE c.job_id = jobs.job_id), 0) "
    "FROM jobs WHERE status = 'active' AND job_id > ? AND next_run_at_ms < ? "
    f"AND ({completions.PENDING_SINCE}) IS NULL"
)
# Triggers and backfills (is_trigger rows) of active jobs, one partition's range of the key.
_EXTRA_DUE = (
    "SELECT d.fire_at_ms, j.tenant_id, count(*) FROM due d JOIN jobs j ON j.job_id = d.job_id "
    "WHERE d.partition = ? AND d.fire_at_ms >= ? AND d.fire_at_ms < ? AND d.is_trigger = 1 "
    "AND j.status = 'active'{scope} GROUP BY d.fire_at_ms, j.tenant_id"
)


def read_forecast(
    conn: sqlite3.Connection,
    span: Span,
    *,
    tenant_id: str | None,
    partitions: int,
    budget_s: float = BUDGET_S,
) -> Tally:
    """The runs due per step of `span`: one tenant's, or (tenant_id None) the cluster's with
    each tenant's apart. One read transaction; partial when the budget ran out."""
    tally = Tally(span, by_tenant=tenant_id is None, run_filter=calendar_filter(conn))
    deadline = time.monotonic() + budget_s
    conn.execute("BEGIN")
    try:
        count_extra_due(conn, tally, tenant_id, partitions)
        after: str | None = ""
        while after is not None:
            after = count_jobs(conn, tally, tenant_id, after, most=CHUNK)
            if after is not None and time.monotonic() >= deadline:
                tally.mark_partial()
                break
    finally:
        conn.execute("COMMIT")
    return tally


def count_extra_due(
    conn: sqlite3.Connection, tally: Tally, tenant_id: str | None, partitions: int
) -> None:
    """Count the due index's triggers and backfills of active jobs in the span (counted per
    fire time in SQL: a paced backfill's many runs are not rows in Python)."""
    span = tally.span
    sql, scope = _EXTRA_DUE.format(scope=""), list[str]()
    if tenant_id is not None:
        sql, scope = _EXTRA_DUE.format(scope=" AND j.tenant_id = ?"), [tenant_id]
    for partition in range(partitions):
        rows = conn.execute(sql, (partition, span.from_ms, span.to_ms, *scope))
        for fire_at_ms, tenant, runs in rows:
            tally.add_run(tenant, fire_at_ms, runs)


def count_jobs(
    conn: sqlite3.Connection,
    tally: Tally,
    tenant_id: str | None,
    after: str,
    *,
    most: int = CHUNK,
) -> str | None:
    """Count the scheduled runs of up to `most` active jobs after `after` (job_id order) with a
    next run before the span's end; the last job_id counted when more may follow, else None."""
    sql, scope = _JOBS, list[str]()
    if tenant_id is not None:
        sql, scope = sql + " AND tenant_id = ?", [tenant_id]
    rows = conn.execute(
        sql + " ORDER BY job_id LIMIT ?", (after, tally.span.to_ms, *scope, most)
    ).fetchall()
    for job_id, tenant, plan, max_runs, next_run_at_ms, next_fire_at_ms, started in rows:
        job = ForecastJob(
            job_id=job_id,
            tenant_id=tenant,
            plan=plan,
            max_runs=max_runs,
            next_run_at_ms=next_run_at_ms,
            next_fire_at_ms=next_fire_at_ms,
            runs_started=started,
        )
        tally.add_job(job)
    return rows[-1][0] if len(rows) == most else None


def calendar_filter(conn: sqlite3.Connection) -> RunFilter:
    """The run filter of the tenants' calendars as `conn` reads them, each read once."""
    read: dict[tuple[str, str], frozenset[str] | None] = {}

    def dates_of(tenant_id: str, name: str) -> frozenset[str] | None:
        key = (tenant_id, name)
        if key not in read:
            read[key] = calendars.dates_of(conn, tenant_id, name)
        return read[key]

    return outside_calendars(dates_of)
