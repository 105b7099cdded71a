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


class DatesCache:
    """Calendars' dates as a reader last parsed them, read again only when a calendar changed:
    once a batch (`new_batch`), one indexed look-up of its updated_at_ms, not 10,000 dates'
    JSON."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str], tuple[int, frozenset[str]]] = {}
        self._checked: dict[tuple[str, str], frozenset[str] | None] = {}  # this batch's

    def new_batch(self) -> None:
        self._checked.clear()

    def dates_of(
        self, conn: sqlite3.Connection, tenant_id: str, name: str
    ) -> frozenset[str] | None:
        key = (tenant_id, name)
        if key not in self._checked:
            self._checked[key] = self._read(conn, tenant_id, name)
        return self._checked[key]

    def _read(self, conn: sqlite3.Connection, tenant_id: str, name: str) -> frozenset[str] | None:
        row = conn.execute(
            "SELECT updated_at_ms FROM calendars WHERE tenant_id = ? AND name = ?",
            (tenant_id, name),
        ).fetchone()
        key = (tenant_id, name)
        if row is None:
            self._found.pop(key, None)
            return None
        known = self._found.get(key)
        if known is not None and known[0] == row[0]:
            return known[1]
        dates = dates_of(conn, tenant_id, name) or frozenset()
        self._found[key] = (row[0], dates)
        return dates


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
