"""Reads for the dispatcher: the due index of a partition, the jobs a batch of due runs belongs
to, whether a job has a run in flight, and the tenants' dispatch rates. Reads only."""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

import msgspec

from schedd.model import RunStatus
from schedd.stored_spec import SpecPlan, load_plan

# The run statuses that hold an overlap (a run not finished yet).
IN_FLIGHT = tuple(s.value for s in (RunStatus.DISPATCHED, RunStatus.DELIVERED, RunStatus.RETRYING))
JOBS_PER_READ = 500


class DueRun(NamedTuple):
    """One row of the due index, ordered by when it fires (a tuple: heap comparisons in C)."""

    fire_at_ms: int
    partition: int
    job_id: str
    scheduled_at_ms: int
    is_trigger: bool = False


class JobRow(msgspec.Struct, frozen=True):
    """The stored fields of a job that claiming one of its runs reads (a Struct: one is made a
    due run, at a fifth of a frozen dataclass's cost)."""

    tenant_id: str
    plan: SpecPlan  # the spec's planning fields, typed once per spec text
    status: str
    version: int
    next_run_at_ms: int | None


def tenant_rates(conn: sqlite3.Connection) -> dict[str, int]:
    """Each tenant's dispatch rate (runs a second)."""
    return dict(conn.execute("SELECT tenant_id, dispatch_rate FROM tenants"))


def due_runs(
    conn: sqlite3.Connection,
    partition: int,
    until_ms: int,
    limit: int,
    *,
    after_ms: int | None = None,
) -> list[DueRun]:
    """A partition's due rows firing at or before `until_ms` and after `after_ms` (when given;
    else late ones included), oldest first."""
    rows = conn.execute(
        "SELECT fire_at_ms, partition, job_id, scheduled_at_ms, is_trigger FROM due "
        "WHERE partition = ? AND fire_at_ms > ? AND fire_at_ms <= ? ORDER BY fire_at_ms LIMIT ?",
        (partition, -(2**63) if after_ms is None else after_ms, until_ms, limit),
    ).fetchall()
    return [DueRun(f, p, j, s, bool(t)) for f, p, j, s, t in rows]


def read_jobs(conn: sqlite3.Connection, job_ids: set[str]) -> dict[str, JobRow]:
    """The jobs named that exist, by id (read in chunks of JOBS_PER_READ ids)."""
    jobs: dict[str, JobRow] = {}
    # A spec equal to the row before's is not read again: a spike's jobs are often made from
    # one body. Comparing two texts costs little even when they differ (a dict of read specs
    # had to hash each text: 0.2 us, against 0.7 to decode it).
    last_spec: str | None = None
    last_plan = SpecPlan()
    ids = sorted(job_ids)
    for start in range(0, len(ids), JOBS_PER_READ):
        chunk = ids[start : start + JOBS_PER_READ]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            "SELECT job_id, tenant_id, spec, status, version, next_run_at_ms FROM jobs "
            f"WHERE job_id IN ({marks})",
            chunk,
        ).fetchall()
        for job_id, tenant_id, spec, status, version, next_run in rows:
            if spec != last_spec:
                last_spec, last_plan = spec, load_plan(spec)
            jobs[job_id] = JobRow(tenant_id, last_plan, status, version, next_run)
    return jobs


def has_run_in_flight(conn: sqlite3.Connection, job_id: str) -> bool:
    """Whether one of the job's runs is dispatched and not yet finished (overlap policies)."""
    row = conn.execute(
        "SELECT 1 FROM runs WHERE job_id = ? AND status IN (?, ?, ?) LIMIT 1", (job_id, *IN_FLIGHT)
    ).fetchone()
    if row is not None:
        return True
    # A run in a batch is in flight while its slot is ready or held (store/ledger/batches.py).
    row = conn.execute(
        "SELECT 1 FROM run_keys k JOIN batches b ON b.batch_id = k.batch_id WHERE k.job_id = ? "
        "AND b.open > 0 AND substr(b.slots, k.slot + 1, 1) IN (x'72', x'68') LIMIT 1",
        (job_id,),
    ).fetchone()
    return row is not None
