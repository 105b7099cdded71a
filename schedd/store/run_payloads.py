"""A triggered run's own payload (`run_payloads`, log level 8): POST /v1/jobs/{id}/trigger with
a body. trigger_job writes it; the claim of that run delivers it in place of the job's; it is
kept while the run is, so the run's history says that its payload was overridden (the runs
listing reads it by key, queries._marked)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


def keep(tx: sqlite3.Connection, job_id: str, scheduled_at_ms: int, payload: str) -> None:
    tx.execute(
        "INSERT OR REPLACE INTO run_payloads (job_id, scheduled_at_ms, payload) VALUES (?, ?, ?)",
        (job_id, scheduled_at_ms, payload),
    )


def overrides(
    conn: sqlite3.Connection, runs: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], str]:
    """The payloads of those runs that have their own, by (job, scheduled time). A claim of a
    backfill's many trigger-like runs asks once whether any run has its own."""
    found: dict[tuple[str, int], str] = {}
    if conn.execute("SELECT 1 FROM run_payloads LIMIT 1").fetchone() is None:
        return found
    for job_id, scheduled_at_ms in runs:
        row = conn.execute(
            "SELECT payload FROM run_payloads WHERE job_id = ? AND scheduled_at_ms = ?",
            (job_id, scheduled_at_ms),
        ).fetchone()
        if row is not None:
            found[(job_id, scheduled_at_ms)] = row[0]
    return found


def forget_runs(tx: sqlite3.Connection, runs: Iterable[tuple[str, int]]) -> None:
    tx.executemany("DELETE FROM run_payloads WHERE job_id = ? AND scheduled_at_ms = ?", runs)


def forget_job(tx: sqlite3.Connection, job_id: str) -> None:
    tx.execute("DELETE FROM run_payloads WHERE job_id = ?", (job_id,))
