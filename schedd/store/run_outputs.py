"""An attempt's output (`run_outputs`, log level 12): what a consumer's command printed, reported
with its ack or nack (`outputs`, by receipt) and kept with the attempt while its run is kept
(issue 34: cron mailed it, and people read it). The runs listing reads it by key range."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


def keep(tx: sqlite3.Connection, outputs: Iterable[tuple[str, int, int, str]]) -> None:
    """(job_id, scheduled_at_ms, attempt, output) each; a second report of one attempt (a
    retried proposal names a receipt no longer held, so none comes) replaces the first."""
    tx.executemany(
        "INSERT OR REPLACE INTO run_outputs (job_id, scheduled_at_ms, attempt, output) "
        "VALUES (?, ?, ?, ?)",
        outputs,
    )


def of_runs(
    conn: sqlite3.Connection, job_id: str, low_ms: int, high_ms: int
) -> dict[tuple[int, int], str]:
    """The outputs of a job's attempts of runs scheduled in [low_ms, high_ms], by (scheduled
    time, attempt)."""
    rows = conn.execute(
        "SELECT scheduled_at_ms, attempt, output FROM run_outputs "
        "WHERE job_id = ? AND scheduled_at_ms BETWEEN ? AND ?",
        (job_id, low_ms, high_ms),
    )
    return {(int(at), int(attempt)): str(output) for at, attempt, output in rows}


def forget_runs(tx: sqlite3.Connection, runs: list[tuple[str, int]]) -> None:
    """Retention deleted these runs (one look when no output was ever kept)."""
    if runs and tx.execute("SELECT 1 FROM run_outputs LIMIT 1").fetchone() is not None:
        tx.executemany("DELETE FROM run_outputs WHERE job_id = ? AND scheduled_at_ms = ?", runs)


def forget_job(tx: sqlite3.Connection, job_id: str) -> None:
    tx.execute("DELETE FROM run_outputs WHERE job_id = ?", (job_id,))
