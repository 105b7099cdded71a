"""A job's run limit (`max_runs`, log level 8): the `run_counts` table counts the scheduled runs
claimed of each job whose spec has a limit, and the claim that takes the last one completes the
job. Triggers, backfills and runs skipped by the misfire policy do not count. Written only by
apply (apply/dispatch.py), read by the job view."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


def count_started(tx: sqlite3.Connection, started: Iterable[tuple[str, int]]) -> set[str]:
    """Count one more started run for each (job, its limit); the jobs that reached the limit."""
    reached = set()
    for job_id, max_runs in started:
        row = tx.execute("SELECT runs_started FROM run_counts WHERE job_id = ?", (job_id,))
        found = row.fetchone()
        runs = 1 if found is None else found[0] + 1
        tx.execute(
            "INSERT INTO run_counts (job_id, runs_started) VALUES (?, ?) "
            "ON CONFLICT (job_id) DO UPDATE SET runs_started = excluded.runs_started",
            (job_id, runs),
        )
        if runs >= max_runs:
            reached.add(job_id)
    return reached


def runs_started(conn: sqlite3.Connection, job_id: str) -> int:
    row = conn.execute("SELECT runs_started FROM run_counts WHERE job_id = ?", (job_id,))
    found = row.fetchone()
    return 0 if found is None else int(found[0])


def forget(tx: sqlite3.Connection, job_id: str) -> None:
    """A job deleted by retention: its count goes with it."""
    tx.execute("DELETE FROM run_counts WHERE job_id = ?", (job_id,))
