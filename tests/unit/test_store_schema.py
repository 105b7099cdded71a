"""Migrations: a database made by an older release is brought up to date on open, once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from schedd.store.db import Database
from schedd.store.schema import MIGRATIONS


def test_old_database_is_migrated_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        f"BEGIN;\n{MIGRATIONS[0]}\n"
        "INSERT INTO meta (key, value) VALUES ('schema_version', 1);\n"
        "INSERT INTO meta (key, value) VALUES ('applied_index', 41);\n"
        "COMMIT;"
    )
    conn.close()
    db = Database(path)
    try:
        assert db.get_meta("schema_version", 0) == len(MIGRATIONS)
        assert db.applied_index == 41
        indexes = {
            row[0] for row in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
        assert "jobs_by_tenant_status" in indexes
    finally:
        db.close()
    again = Database(path)  # opening an up-to-date file runs nothing twice
    try:
        assert again.get_meta("schema_version", 0) == len(MIGRATIONS)
    finally:
        again.close()
