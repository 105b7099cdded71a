"""A backup's history segments (store/backup_history.py): `schedd backup` copies the segments
its database copy lists beside it, an open one trimmed to that copy; `schedd restore` puts them
back, removes every other segment file and starts an open segment's applied index at 0."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from schedd.store import history_reads, segments
from schedd.store.backup import restore_backup, write_backup
from schedd.store.backup_history import copy_segments, history_of
from schedd.store.db import Database
from schedd.wire.jobs import RunView
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_moved_runs import HOUR, RETENTION, hourly, move_and_close, run


def segment_rows(path: Path, table: str = "runs") -> list[tuple[str, int]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT job_id, scheduled_at_ms FROM {table} ORDER BY 2").fetchall()
    finally:
        conn.close()


def runs_of(db: Database) -> tuple[list[RunView], bool]:
    readers = history_reads.SegmentReaders(db.path.parent)
    return history_reads.job_runs(
        db.conn, readers, "j1", before_ms=2**62, limit=10, not_before_ms=0
    )


def test_a_backup_restores_its_closed_and_open_segments(
    apply: Applier, db: Database, tmp_path: Path
) -> None:
    hourly(apply)
    run(apply, 0, ok=True)
    run(apply, 1, ok=False)
    h0 = segments.period_start(NOW_MS)
    move_and_close(apply, db, h0 + 2 * HOUR + 60_000)  # run 0's hour closed, run 1's open
    states = dict(db.conn.execute("SELECT name, state FROM segments WHERE family = 'runs'"))
    assert sorted(states.values()) == ["closed", "open"]
    out = tmp_path / "backups" / "b.db"
    out.parent.mkdir()
    info = write_backup(db.path.parent, out)
    assert info.segments.copied == len(list(db.conn.execute("SELECT 1 FROM segments")))
    assert info.segments.missing == ()
    copied = history_of(out)
    for name, state in states.items():
        kept = copied / f"{name}.db"
        digest = segments.content_digest(kept)
        assert digest == segments.content_digest(segments.segment_path(db.path.parent, name))
        if state == "closed":
            (recorded,) = db.conn.execute(
                "SELECT content_digest FROM segments WHERE name = ?", (name,)
            ).fetchone()
            assert digest == recorded

    target = tmp_path / "restored"
    stale = segments.segment_path(target, segments.segment_name("runs", NOW_MS + 9 * HOUR))
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an older life's segment")
    restored = restore_backup(out, target)
    assert restored.segments.copied == info.segments.copied
    assert not stale.exists()  # its applied index belongs to the old log
    fresh = Database(target / "state.db")
    try:
        for name, state in states.items():
            reader = sqlite3.connect(segments.segment_path(target, name))
            index = segments.applied_index(reader)
            reader.close()
            assert (index == 0) is (state == "open"), (name, state, index)
        # The moved runs read as they did on the node the backup came from.
        page = runs_of(fresh)
        assert page == runs_of(db) and len(page[0]) == 2 and page[1] is True
    finally:
        fresh.close()


def test_an_open_segment_is_trimmed_to_the_database_copy(
    apply: Applier, db: Database, tmp_path: Path
) -> None:
    """Rows a move took out after the database copy are still live in it: the segment copy,
    taken later, leaves them out, so the pair reads as one version."""
    hourly(apply)
    run(apply, 0, ok=True)  # ended in hour H0
    h0 = segments.period_start(NOW_MS)
    body = {"retention_ms": RETENTION.as_ms(), "after_tenant": "", "max_rows": 1_000}
    assert apply("move_history", body, ts_ms=h0 + HOUR + 60_000)["moved"]["runs"] == 1
    # A late run of hour H0, still live when the database is copied.
    db.conn.execute(
        "INSERT INTO runs (job_id, scheduled_at_ms, tenant_id, fire_at_ms, status, attempt, "
        "finished_at_ms) VALUES ('j2', ?, 't1', ?, 'succeeded', 1, ?)",
        (NOW_MS, NOW_MS, NOW_MS + 10),
    )
    db_copy = tmp_path / "copy.db"
    db.conn.execute("VACUUM INTO ?", (str(db_copy),))
    assert apply("move_history", body, ts_ms=h0 + HOUR + 120_000)["moved"]["runs"] == 1
    name = segments.segment_name("runs", NOW_MS)
    live = segments.segment_path(db.path.parent, name)
    assert segment_rows(live) == [("j1", NOW_MS), ("j2", NOW_MS)]
    out = tmp_path / "segs"
    assert copy_segments(db.path.parent, db_copy, out).copied >= 1
    assert segment_rows(out / f"{name}.db") == [("j1", NOW_MS)]
    mode = sqlite3.connect(out / f"{name}.db").execute("PRAGMA journal_mode").fetchone()
    assert mode == ("delete",)
