"""The `overdue_jobs` table (log level 8): recurring jobs that had no successful run within
twice their schedule's longest gap, as the leader's overdue scanner (dispatch/overdue.py) last
found them. Written by apply (store/apply/overdue.py); read by the scanner, the job view
(`JOB_COLUMNS`) and the metrics (`schedd_jobs_overdue`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


def marked(conn: sqlite3.Connection, job_ids: Iterable[str]) -> set[str]:
    """Those of the jobs the table holds."""
    ids = list(job_ids)
    if not ids:
        return set()
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT job_id FROM overdue_jobs WHERE job_id IN ({marks})", ids)
    return {job_id for (job_id,) in rows}


def marked_in_tenant(conn: sqlite3.Connection, tenant_id: str, after: str, last: str) -> set[str]:
    """The tenant's overdue jobs with ids in (after, last]."""
    rows = conn.execute(
        "SELECT job_id FROM overdue_jobs WHERE tenant_id = ? AND job_id > ? AND job_id <= ?",
        (tenant_id, after, last),
    )
    return {job_id for (job_id,) in rows}


def counts_by_tenant(conn: sqlite3.Connection) -> dict[str, int]:
    rows = conn.execute("SELECT tenant_id, count(*) FROM overdue_jobs GROUP BY tenant_id")
    return dict(rows.fetchall())


def forget(tx: sqlite3.Connection, job_ids: Iterable[str]) -> None:
    tx.executemany("DELETE FROM overdue_jobs WHERE job_id = ?", [(j,) for j in job_ids])
