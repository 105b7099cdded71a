"""Reads of the replicated `segments` table for moving closed files between nodes: which
closed segments this node should hold (newest first) and whether a name is one of them."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClosedSegment:
    """A closed segment as the replicated `segments` table lists it."""

    name: str
    content_digest: str


def closed_segments(conn: sqlite3.Connection) -> list[ClosedSegment]:
    """Every closed segment the log lists, newest period first (the history asked for most)."""
    rows = conn.execute(
        "SELECT name, content_digest FROM segments WHERE state = 'closed'"
        " ORDER BY period_start_ms DESC, name"
    ).fetchall()
    return [ClosedSegment(name=name, content_digest=digest) for name, digest in rows]


def is_closed_segment(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM segments WHERE name = ? AND state = 'closed'", (name,)
    ).fetchone()
    return row is not None
