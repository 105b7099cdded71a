"""Ledger writes of run history: claimed runs, their status, and their attempts."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from schedd.model import RunStatus
from schedd.store.ledger.rows import KEEP, Attempt, NewRun, RunChange, values


def open_runs(tx: sqlite3.Connection, runs: Sequence[NewRun], now_ms: int) -> None:
    """Insert claimed runs: dispatched, or skipped (finished at once, the reason as error)."""
    tx.executemany(
        "INSERT INTO runs (job_id, scheduled_at_ms, tenant_id, fire_at_ms, status, attempt, "
        "dispatched_at_ms, finished_at_ms, error) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)",
        [
            (
                r.job_id,
                r.scheduled_at_ms,
                r.tenant_id,
                r.fire_at_ms,
                (RunStatus.SKIPPED if r.skipped else RunStatus.DISPATCHED).value,
                now_ms,
                now_ms if r.skipped else None,
                r.skipped,
            )
            for r in runs
        ],
    )


_RUN_COLUMNS = ("attempt", "error", "finished_at_ms")


def set_runs(tx: sqlite3.Connection, changes: Sequence[RunChange]) -> None:
    """Write run statuses; every change of one call must leave the same columns at KEEP."""
    if not changes:
        return
    written = [c for c in _RUN_COLUMNS if getattr(changes[0], c) is not KEEP]
    assignments = ", ".join(f"{column} = ?" for column in ("status", *written))
    rows = []
    for change in changes:
        if [c for c in _RUN_COLUMNS if getattr(change, c) is not KEEP] != written:
            raise ValueError("set_runs: changes of one call must write the same columns")
        values = [getattr(change, column) for column in written]
        rows.append((change.status.value, *values, change.job_id, change.scheduled_at_ms))
    tx.executemany(f"UPDATE runs SET {assignments} WHERE job_id = ? AND scheduled_at_ms = ?", rows)


def start_attempts(tx: sqlite3.Connection, attempts: Sequence[Attempt]) -> None:
    """Attempts begun (a queue receive): a new row each, replacing a leftover of that number."""
    tx.executemany(
        "INSERT OR REPLACE INTO attempts (job_id, scheduled_at_ms, attempt, started_at_ms) "
        "VALUES (?, ?, ?, ?)",
        [(a.job_id, a.scheduled_at_ms, a.attempt, a.started_at_ms) for a in attempts],
    )


def finish_attempts(
    tx: sqlite3.Connection,
    attempts: Sequence[tuple[str, int, int]],
    *,
    finished_at_ms: int,
    outcome: str,
    error: str | None = None,
) -> None:
    """End started attempts, each (job_id, scheduled_at_ms, attempt); error None keeps the
    recorded one. An attempt with no row (pruned) is not recreated."""
    tx.executemany(
        "UPDATE attempts SET finished_at_ms = ?, outcome = ?, error = COALESCE(?, error) "
        "WHERE job_id = ? AND scheduled_at_ms = ? AND attempt = ?",
        [(finished_at_ms, outcome, error, *key) for key in attempts],
    )


def record_attempts(tx: sqlite3.Connection, attempts: Sequence[Attempt]) -> None:
    """Whole attempts (a pushed call, reported once done). The caller decides which outcome is
    first for its attempt (the delivery row's attempt); this writes what it is given."""
    tx.executemany(
        "INSERT OR REPLACE INTO attempts (job_id, scheduled_at_ms, attempt, started_at_ms, "
        "finished_at_ms, outcome, error) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [values(a) for a in attempts],
    )
