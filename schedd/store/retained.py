"""What the store holds per retention kind: rows (counted up to a cap) and the oldest one kept,
for `GET /v1/admin/retention`, `schedctl gc status` and the metrics. Index reads only."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

ROW_COUNT_CAP = 1_000_000  # counting walks an index: past this a kind says "at least"

# Per kind: (rows, oldest kept). Oldest is the time its retention counts from, found with one
# index seek per tenant (or per tenant and queue); rows count a covering index up to the cap.
_COUNTS = {
    "runs": "SELECT 1 FROM runs INDEXED BY runs_finished WHERE finished_at_ms IS NOT NULL",
    "jobs": "SELECT 1 FROM jobs INDEXED BY jobs_finished "
    "WHERE status IN ('completed', 'cancelled')",
    "deadletters": "SELECT 1 FROM deadletters INDEXED BY deadletters_by_age",
    "messages": "SELECT 1 FROM messages INDEXED BY messages_ready",
    "audit": "SELECT 1 FROM audit",
}
_OLDEST_PER_TENANT = {
    "runs": "SELECT MIN(finished_at_ms) FROM runs INDEXED BY runs_finished "
    "WHERE tenant_id = ? AND finished_at_ms IS NOT NULL",
    "jobs": "SELECT MIN(updated_at_ms) FROM jobs INDEXED BY jobs_finished "
    "WHERE tenant_id = ? AND status IN ('completed', 'cancelled')",
    "deadletters": "SELECT MIN(created_at_ms) FROM deadletters INDEXED BY deadletters_by_age "
    "WHERE tenant_id = ?",
}
KINDS_SHOWN = ("runs", "jobs", "deadletters", "messages", "audit")


@dataclass(frozen=True, slots=True)
class Retained:
    kind: str
    rows: int
    is_capped: bool  # rows is a lower bound
    oldest_ms: int | None


def retained(conn: sqlite3.Connection) -> list[Retained]:
    """Every kind, read in one transaction."""
    conn.execute("BEGIN")
    try:
        tenants = [t for (t,) in conn.execute("SELECT tenant_id FROM tenants ORDER BY tenant_id")]
        return [_kind(conn, kind, tenants) for kind in KINDS_SHOWN]
    finally:
        conn.execute("COMMIT")


def last_prune_ms(conn: sqlite3.Connection) -> int | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'last_prune_ms'").fetchone()
    return None if row is None else int(row[0])


def tenant_queues(conn: sqlite3.Connection, tenant_id: str) -> Iterator[str]:
    """The tenant's queues that hold messages, one index seek each (a skip-scan)."""
    queue = ""
    while True:
        row = conn.execute(
            "SELECT queue FROM messages INDEXED BY messages_ready "
            "WHERE tenant_id = ? AND queue > ? ORDER BY queue LIMIT 1",
            (tenant_id, queue),
        ).fetchone()
        if row is None:
            return
        queue = row[0]
        yield queue


def _kind(conn: sqlite3.Connection, kind: str, tenants: list[str]) -> Retained:
    # _COUNTS and _OLDEST_PER_TENANT hold constant SQL, never input.
    rows = conn.execute(
        f"SELECT COUNT(*) FROM ({_COUNTS[kind]} LIMIT ?)", (ROW_COUNT_CAP + 1,)
    ).fetchone()[0]
    if kind == "audit":
        first = conn.execute("SELECT at_ms FROM audit ORDER BY seq LIMIT 1").fetchone()
        oldest = [None if first is None else first[0]]
    elif kind == "messages":
        oldest = [
            conn.execute(
                "SELECT MIN(visible_at_ms) FROM messages INDEXED BY messages_ready "
                "WHERE tenant_id = ? AND queue = ?",
                (tenant, queue),
            ).fetchone()[0]
            for tenant in tenants
            for queue in tenant_queues(conn, tenant)
        ]
    else:
        oldest = [conn.execute(_OLDEST_PER_TENANT[kind], (t,)).fetchone()[0] for t in tenants]
    known = [int(ms) for ms in oldest if ms is not None]
    return Retained(
        kind, min(rows, ROW_COUNT_CAP), rows > ROW_COUNT_CAP, min(known) if known else None
    )
