"""The `alerts` table (log level 8): failure alerts apply decided to send (a job's runs ended
dead `after` times in a row, store/apply/failures.py), each POSTed signed by the leader's alert
sender, retried until it is answered 2xx or given up; `next_at_ms` is NULL once it is done."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, NamedTuple


class Alert(NamedTuple):
    alert_id: int
    tenant_id: str
    job_id: str
    url: str
    body: str  # the JSON text POSTed (built by apply: the same bytes on every replica)
    created_at_ms: int
    attempts: int
    next_at_ms: int | None


def queue(
    tx: sqlite3.Connection,
    *,
    tenant_id: str,
    job_id: str,
    url: str,
    body: dict[str, Any],
    at_ms: int,
) -> int:
    """Queue one alert whose body is this JSON (compact, as every replica writes it)."""
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return add(tx, tenant_id=tenant_id, job_id=job_id, url=url, body=text, at_ms=at_ms)


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


class AlertRecord(NamedTuple):
    """An alert as the tenant's listing shows it (GET /v1/alerts)."""

    alert_id: int
    job_id: str
    url: str
    body: str
    created_at_ms: int
    attempts: int
    next_at_ms: int | None
    sent_at_ms: int | None
    last_error: str | None


def list_alerts(
    conn: sqlite3.Connection, tenant_id: str, *, before: tuple[int, int] | None, limit: int
) -> list[AlertRecord]:
    """A page of the tenant's alerts, newest first, strictly before `before` (created_at_ms,
    alert_id): one range of `alerts_by_tenant`, whose rows end with the alert id."""
    below = (2**62, 2**62) if before is None else before
    rows = conn.execute(
        f"SELECT {', '.join(AlertRecord._fields)} FROM alerts INDEXED BY alerts_by_tenant "
        "WHERE tenant_id = ? AND (created_at_ms, alert_id) < (?, ?) "
        "ORDER BY created_at_ms DESC, alert_id DESC LIMIT ?",
        (tenant_id, *below, limit),
    )
    return [AlertRecord(*row) for row in rows]
