"""A fetched segment file is kept only when it is a sound SQLite file whose schema is exactly a
family's (history/verify.py): its rows' digest covers neither indexes nor triggers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from schedd.history.verify import NotASegment, checked_digest
from schedd.store import segments


def made(path: Path, extra: str = "") -> Path:
    conn = sqlite3.connect(path)
    segments.create_schema(conn, segments.AUDIT)
    conn.executescript(extra)
    conn.close()
    return path


def test_a_sound_segment_gives_its_content_digest(tmp_path: Path) -> None:
    path = made(tmp_path / "audit-2026120500.db")
    assert checked_digest(path) == segments.content_digest(path)


@pytest.mark.parametrize(
    "extra",
    [
        "CREATE INDEX sneaky ON audit (at_ms);",
        "CREATE TABLE other (x);",
        "CREATE VIEW v AS SELECT 1;",
        "CREATE TRIGGER t AFTER DELETE ON audit BEGIN SELECT 1; END;",
    ],
)
def test_anything_beyond_the_familys_schema_is_refused(tmp_path: Path, extra: str) -> None:
    with pytest.raises(NotASegment, match="schema"):
        checked_digest(made(tmp_path / "audit-2026120500.db", extra))


def test_bytes_that_are_no_database_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "runs-2026120500.db"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError):
        checked_digest(garbage)
    half = made(tmp_path / "half.db")
    half.write_bytes(half.read_bytes()[: half.stat().st_size // 2])
    with pytest.raises((sqlite3.DatabaseError, NotASegment)):
        checked_digest(half)
