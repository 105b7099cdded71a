"""What a fetched segment file must be before a node keeps it: a sound SQLite file (quick_check)
whose schema is exactly one family's (no other table, index, view or trigger: reads go through
its indexes, which the rows' digest does not cover), and then its rows' content digest, which
the fetcher compares with the log's. Runs in a process of its own (history/fetcher.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from schedd.store import segments


class NotASegment(ValueError):
    """The file is not a sound segment of any family; the message says why."""


def _schema(conn: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
    return sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall())


def _expected(family: str) -> list[tuple[str, str, str, str | None]]:
    conn = sqlite3.connect(":memory:")
    try:
        segments.create_schema(conn, family)
        return _schema(conn)
    finally:
        conn.close()


def checked_digest(path: Path) -> str:
    """The content digest of the segment file at `path`, once it passed both checks; raises
    NotASegment (or sqlite3.Error for a file SQLite cannot read at all)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        verdict = conn.execute("PRAGMA quick_check").fetchall()
        if verdict != [("ok",)]:
            raise NotASegment(f"SQLite's quick_check: {verdict[0][0]}")
        schema = _schema(conn)
        tables = {name for kind, name, _, _ in schema if kind == "table"}
        family = next(
            (f for f, listed in segments.FAMILY_TABLES.items() if listed[0][0] in tables), None
        )
        if family is None or schema != _expected(family):
            raise NotASegment("its schema is not a history segment's")
        return segments.content_digest(conn)
    finally:
        conn.close()
