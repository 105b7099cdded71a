"""The due backlog for the stats ring (api/stats.py): runs past their fire time, not yet claimed,
counted over the due index with a cap. One short read; it never writes."""

from __future__ import annotations

import sqlite3

STATS_BACKLOG_CAP = 1_000_000  # as the scrape's gauge: the count saturates here

_BACKLOG = (
    "WITH RECURSIVE p(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM p WHERE n < ?) "
    "SELECT COUNT(*) FROM (SELECT 1 FROM due WHERE partition IN p AND fire_at_ms <= ? LIMIT ?)"
)


def due_backlog(
    conn: sqlite3.Connection, partitions: int, now_ms: int, cap: int = STATS_BACKLOG_CAP
) -> int:
    """Runs due at `now_ms` or before and not claimed yet, at most `cap` (every partition: the
    replica holds the whole cluster's due index)."""
    return int(conn.execute(_BACKLOG, (partitions - 1, now_ms, cap)).fetchone()[0])
