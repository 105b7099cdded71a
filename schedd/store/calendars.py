"""Reading calendars (issue 33): a calendar's dates and its view; written only by apply
(apply/calendars.py)."""

from __future__ import annotations

import json
import sqlite3
from typing import NamedTuple


class StoredCalendar(NamedTuple):
    name: str
    dates: tuple[str, ...]
    created_at_ms: int
    updated_at_ms: int


def dates_of(conn: sqlite3.Connection, tenant_id: str, name: str) -> frozenset[str] | None:
    """A calendar's dates (None: the tenant has no such calendar)."""
    row = conn.execute(
        "SELECT dates FROM calendars WHERE tenant_id = ? AND name = ?", (tenant_id, name)
    ).fetchone()
    return None if row is None else frozenset(json.loads(row[0]))


def get(conn: sqlite3.Connection, tenant_id: str, name: str) -> StoredCalendar | None:
    row = conn.execute(
        "SELECT name, dates, created_at_ms, updated_at_ms FROM calendars "
        "WHERE tenant_id = ? AND name = ?",
        (tenant_id, name),
    ).fetchone()
    return None if row is None else _calendar(row)


def list_all(conn: sqlite3.Connection, tenant_id: str) -> list[StoredCalendar]:
    """The tenant's calendars in name order (at most apply's MAX_CALENDARS)."""
    rows = conn.execute(
        "SELECT name, dates, created_at_ms, updated_at_ms FROM calendars WHERE tenant_id = ? "
        "ORDER BY name",
        (tenant_id,),
    ).fetchall()
    return [_calendar(row) for row in rows]


def used_by(conn: sqlite3.Connection, tenant_id: str, name: str) -> int:
    """How many jobs not cancelled exclude the calendar."""
    (count,) = conn.execute(
        "SELECT count(*) FROM calendar_uses WHERE tenant_id = ? AND name = ?", (tenant_id, name)
    ).fetchone()
    return int(count)


def _calendar(row: tuple[str, str, int, int]) -> StoredCalendar:
    name, dates, created, updated = row
    return StoredCalendar(name, tuple(json.loads(dates)), created, updated)
