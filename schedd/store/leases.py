"""Reads of partition leases and node heartbeats: who holds which partition, and the one margin
by which a holder stops using a lease before its end. Reads only; apply writes these rows."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

LEASE_MARGIN_MS = 500  # a holder stops using a lease this long before the local view says it ends


@dataclass(frozen=True, slots=True)
class Lease:
    partition: int
    node_id: str
    epoch: int
    expires_at_ms: int

    def is_valid(self, at_ms: int) -> bool:
        """Whether the lease is still held at `at_ms` (no margin: the leader's view)."""
        return self.expires_at_ms > at_ms


def read_leases(conn: sqlite3.Connection) -> dict[int, Lease]:
    """Every partition's lease, expired or not."""
    rows = conn.execute("SELECT partition, node_id, epoch, expires_at_ms FROM leases").fetchall()
    return {row[0]: Lease(*row) for row in rows}


def held_partitions(
    conn: sqlite3.Connection, node_id: str, now_ms: int, *, margin_ms: int = LEASE_MARGIN_MS
) -> dict[int, int]:
    """Partition -> lease epoch of the leases `node_id` holds for at least `margin_ms` more:
    the partitions it may claim and deliver in now (margin 0 counts every unexpired one)."""
    rows = conn.execute(
        "SELECT partition, epoch FROM leases WHERE node_id = ? AND expires_at_ms > ?",
        (node_id, now_ms + margin_ms),
    ).fetchall()
    return dict(rows)


def live_nodes(conn: sqlite3.Connection, now_ms: int, ttl_ms: int) -> list[str]:
    """The nodes that heartbeated within `ttl_ms` of `now_ms`, in id order."""
    rows = conn.execute(
        "SELECT node_id FROM nodes WHERE last_seen_ms > ? ORDER BY node_id", (now_ms - ttl_ms,)
    ).fetchall()
    return [row[0] for row in rows]
