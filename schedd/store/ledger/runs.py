"""Ledger writes of run history: claimed runs, their status, and their attempts."""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from schedd.model import RunStatus
from schedd.store.ledger.rows import KEEP, Attempt, NewRun, RunChange


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
_KEPT = operator.attrgetter(*_RUN_COLUMNS)
_ROWS: dict[tuple[str, ...], Callable[[RunChange], tuple[Any, ...]]] = {}


def set_runs(tx: sqlite3.Connection, changes: Sequence[RunChange]) -> None:
    """Write run statuses; every change of one call must leave the same columns at KEEP."""
    if not changes:
        return
    written = tuple(c for c in _RUN_COLUMNS if getattr(changes[0], c) is not KEEP)
    row_of = _ROWS.get(written)
    if row_of is None:  # one getter per set of columns: apply changes thousands of runs a second
        row_of = _ROWS[written] = operator.attrgetter(
            "status.value", *written, "job_id", "scheduled_at_ms"
        )
    rows = [row_of(change) for change in changes]
    kept_count = len(_RUN_COLUMNS) - len(written)
    if any(KEEP in row for row in rows) or any(
        operator.countOf(_KEPT(change), KEEP) != kept_count for change in changes
    ):
        raise ValueError("set_runs: changes of one call must write the same columns")
    assignments = ", ".join(f"{column} = ?" for column in ("status", *written))
    tx.executemany(f"UPDATE runs SET {assignments} WHERE job_id = ? AND scheduled_at_ms = ?", rows)


def mark_runs(
    tx: sqlite3.Connection,
    status: RunStatus,
    rows: Iterable[tuple[Any, ...]],
    *,
    columns: tuple[str, ...] = (),
) -> None:
    """Set runs to `status` and `columns` to the values each row gives first: rows are
    (*values, job_id, scheduled_at_ms). The hot paths' form of set_runs (a receive, an ack:
    thousands of runs a second, one kind of change each), with no row object per run."""
    if not set(columns) <= set(_RUN_COLUMNS):
        raise ValueError(f"mark_runs: not run columns {columns}")
    assignments = ", ".join([f"status = '{status.value}'", *(f"{c} = ?" for c in columns)])
    tx.executemany(f"UPDATE runs SET {assignments} WHERE job_id = ? AND scheduled_at_ms = ?", rows)


def start_attempts(
    tx: sqlite3.Connection, attempts: Sequence[tuple[str, int, int]], *, started_at_ms: int
) -> None:
    """Attempts begun (a queue receive), each (job_id, scheduled_at_ms, attempt): a new row
    each, replacing a leftover of that number."""
    tx.executemany(
        "INSERT OR REPLACE INTO attempts (job_id, scheduled_at_ms, attempt, started_at_ms) "
        "VALUES (?, ?, ?, ?)",
        [(*key, started_at_ms) for key in attempts],
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
        attempts,
    )
