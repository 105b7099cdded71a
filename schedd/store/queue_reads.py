"""Reads of the built-in queues for the API: how many messages a queue has visible, and each
queue of a tenant with its messages by state. Reads only; index ranges of one tenant."""

from __future__ import annotations

import json
import sqlite3
from typing import Any


def visible_count(
    conn: sqlite3.Connection, tenant_id: str, queue: str, now_ms: int, limit: int
) -> int:
    """How many of the queue's messages are visible at `now_ms`, counted up to `limit`."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM messages WHERE tenant_id = ? AND queue = ? "
        "AND visible_at_ms <= ? LIMIT ?)",
        (tenant_id, queue, now_ms, limit),
    ).fetchone()
    return int(row[0])


def queue_summaries(conn: sqlite3.Connection, tenant_id: str, now_ms: int) -> list[dict[str, Any]]:
    """The tenant's queues (holding messages or dead letters) by name, each with its ready,
    in-flight, delayed and dead counts: the API's queue objects."""
    counts: dict[str, dict[str, Any]] = {}
    for queue, ready, in_flight, delayed in conn.execute(
        "SELECT queue, SUM(visible_at_ms <= ?), "
        "SUM(visible_at_ms > ? AND receipt IS NOT NULL), "
        "SUM(visible_at_ms > ? AND receipt IS NULL) FROM messages "
        "WHERE tenant_id = ? GROUP BY queue",
        (now_ms, now_ms, now_ms, tenant_id),
    ):
        counts[queue] = {
            "name": queue,
            "ready": ready,
            "in_flight": in_flight,
            "delayed": delayed,
            "dead": 0,
        }
    for target, dead in conn.execute(
        "SELECT target, COUNT(*) FROM deadletters WHERE tenant_id = ? GROUP BY target",
        (tenant_id,),
    ):
        name = json_name(target)
        if name is not None:
            empty = {"name": name, "ready": 0, "in_flight": 0, "delayed": 0, "dead": 0}
            counts.setdefault(name, empty)
            counts[name]["dead"] = dead
    return sorted(counts.values(), key=lambda q: str(q["name"]))


def json_name(target: str) -> str | None:
    """The queue name of a dead letter's stored target, None for an HTTP target."""
    parsed = json.loads(target)
    name = parsed.get("name") if parsed.get("type") == "queue" else None
    return None if name is None else str(name)
