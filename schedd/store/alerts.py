"""The `alerts` table (log level 8): failure alerts apply decided to send (a job's runs ended
dead `after` times in a row, store/apply/failures.py), each POSTed signed by the leader's alert
sender, retried until it is answered 2xx or given up; `next_at_ms` is NULL once it is done."""

from __future__ import annotations

import sqlite3
from typing import NamedTuple


class Alert(NamedTuple):
    alert_id: int
    tenant_id: str
    job_id: str
    url: str
    body: str  # the JSON text POSTed (built by apply: the same bytes on every replica)
    created_at_ms: int
    attempts: int
    next_at_ms: int | None


def add(
    tx: sqlite3.Connection, *, tenant_id: str, job_id: str, url: str, body: str, at_ms: int
) -> int:
    """Queue one alert, due at once; its id."""
    cursor = tx.execute(
        "INSERT INTO alerts (tenant_id, job_id, url, body, created_at_ms, attempts, next_at_ms) "
        "VALUES (?, ?, ?, ?, ?, 0, ?)",
        (tenant_id, job_id, url, body, at_ms, at_ms),
    )
    return int(cursor.lastrowid or 0)


def due(conn: sqlite3.Connection, now_ms: int, limit: int) -> list[Alert]:
    """Alerts to send now, oldest first."""
    rows = conn.execute(
        f"SELECT {', '.join(Alert._fields)} FROM alerts INDEXED BY alerts_due "
        "WHERE next_at_ms IS NOT NULL AND next_at_ms <= ? ORDER BY next_at_ms, alert_id LIMIT ?",
        (now_ms, limit),
    )
    return [Alert(*row) for row in rows]
