"""Migrations: a database made by an older release is brought up to date on open, once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from schedd.store.db import Database
from schedd.store.schema import MIGRATIONS
from schedd.store.snapshot import restore_snapshot, write_snapshot


def indexes(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}


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
        assert {"jobs_by_tenant_status", "audit_by_job"} <= indexes(db.conn)
    finally:
        db.close()
    again = Database(path)  # opening an up-to-date file runs nothing twice
    try:
        assert again.get_meta("schema_version", 0) == len(MIGRATIONS)
    finally:
        again.close()


def test_a_snapshot_from_an_older_schema_is_migrated_on_restore(
    db: Database, tmp_path: Path
) -> None:
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    for script in MIGRATIONS[:8]:  # a node of the release before audit_by_job
        conn.executescript(f"BEGIN;\n{script}\nCOMMIT;")
    conn.executescript(
        "INSERT INTO meta (key, value) VALUES ('schema_version', 8), ('applied_index', 7);\n"
        "INSERT INTO audit (at_ms, tenant_id, actor, action, job_id) "
        "VALUES (1, 't1', 'a', 'create_jobs', 'job_a');"
    )
    conn.close()
    write_snapshot(old, tmp_path / "snapshot", b"raft")
    restore_snapshot(db, tmp_path / "snapshot")
    assert "audit_by_job" in indexes(db.conn)
    assert db.get_meta("schema_version", 0) == len(MIGRATIONS)
    assert db.applied_index == 7
    assert db.conn.execute("SELECT job_id FROM audit").fetchall() == [("job_a",)]
