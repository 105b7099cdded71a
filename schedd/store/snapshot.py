"""Snapshots of the store for Raft log compaction: one self-contained SQLite file.

The file is a consistent copy of the database (rollback journal, no -wal beside it) plus a
`snapshot_raft` table holding the Raft library's own opaque state, shipped as it is, and a
`snapshot_segments` table holding the open history segments' files (issue 35 §1), copied after
the database: each segment keeps its own applied index, so a copy that is ahead of the
database's replays as after a crash between the two commits (store/segment_writes.py). Closed
segments are not in a snapshot: the `segments` table lists them, and a node fetches them apart.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from schedd.store import segments
from schedd.store.db import Database, connect, migrate
from schedd.store.files import sync_dir, sync_file

log = logging.getLogger(__name__)
SEGMENT_CHUNK_BYTES = 16 * 2**20  # an open segment's file in the snapshot, in blobs this long


class SnapshotError(Exception):
    """A file that is not a complete schedd snapshot."""


def write_snapshot(db_path: Path, out_path: Path, raft_state: bytes) -> int:
    """Copy the live database at `db_path` into `out_path`; returns the copy's applied index.

    Runs beside the writer: VACUUM INTO reads one consistent version of the WAL database. The
    copy is fsynced here, off the tick thread, before anyone renames it into place.
    """
    out_path.unlink(missing_ok=True)
    source = connect(db_path)
    try:
        source.execute("VACUUM INTO ?", (str(out_path),))
    finally:
        source.close()
    copy = sqlite3.connect(str(out_path), isolation_level=None)
    try:
        copy.execute("PRAGMA journal_mode = DELETE")
        copy.execute("DROP TABLE IF EXISTS snapshot_raft")  # a restore cut short left one
        copy.execute("CREATE TABLE snapshot_raft (state BLOB NOT NULL)")
        copy.execute("INSERT INTO snapshot_raft (state) VALUES (?)", (raft_state,))
        row = copy.execute("SELECT value FROM meta WHERE key = 'applied_index'").fetchone()
        _copy_open_segments(db_path.parent, copy, out_path.with_name(out_path.name + ".seg"))
    finally:
        copy.close()
    sync_file(out_path)
    return 0 if row is None else int(row[0])


def _copy_open_segments(data_dir: Path, copy: sqlite3.Connection, scratch: Path) -> None:
    """The files of the segments the copy lists as open, each a consistent version of its own
    (VACUUM INTO), taken after the database's copy, stored in chunks."""
    copy.execute("DROP TABLE IF EXISTS snapshot_segments")
    copy.execute(
        "CREATE TABLE snapshot_segments (name TEXT NOT NULL, chunk INTEGER NOT NULL, "
        "data BLOB NOT NULL, PRIMARY KEY (name, chunk))"
    )
    has_table = copy.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'segments'"
    ).fetchone()
    if not has_table:
        return
    names = [n for (n,) in copy.execute("SELECT name FROM segments WHERE state = 'open'")]
    for name in names:
        path = segments.segment_path(data_dir, name)
        scratch.unlink(missing_ok=True)
        # Read-only: a missing file fails the snapshot (retried later) rather than ship an
        # empty segment that the receiving node would then trust.
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            source.execute("VACUUM INTO ?", (str(scratch),))
        finally:
            source.close()
        with scratch.open("rb") as f:
            for chunk, data in enumerate(iter(lambda: f.read(SEGMENT_CHUNK_BYTES), b"")):
                copy.execute(
                    "INSERT INTO snapshot_segments (name, chunk, data) VALUES (?, ?, ?)",
                    (name, chunk, data),
                )
        scratch.unlink()


def check_length(path: Path) -> None:
    """SnapshotError unless the file is exactly as long as its header says. A snapshot reaches a
    follower in 64 KiB chunks; a chunk lost or sent twice around a reconnect (pysyncobj goes on
    with the next chunk) leaves a file whose other pages SQLite would read without complaint."""
    with path.open("rb") as f:
        header = f.read(100)
        size = f.seek(0, 2)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise SnapshotError(f"{path} is not a schedd snapshot: no SQLite header")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    is_count_valid = header[24:28] == header[92:96]  # SQLite's rule for the in-header count
    if not is_count_valid or pages * page_size != size:
        raise SnapshotError(
            f"{path} is not a whole snapshot: {size} bytes, its header says "
            f"{pages} pages of {page_size}"
        )


def read_snapshot(path: Path) -> tuple[int, bytes]:
    """(applied index, Raft state) of a snapshot file; SnapshotError if it is not a whole one."""
    check_length(path)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'applied_index'").fetchone()
            state = conn.execute("SELECT state FROM snapshot_raft").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise SnapshotError(f"{path} is not a schedd snapshot: {exc}") from None
    if state is None:
        raise SnapshotError(f"{path} has no Raft state")
    return (0 if row is None else int(row[0])), bytes(state[0])


def open_snapshot(path: Path) -> sqlite3.Connection:
    """A read-only connection to a snapshot file, usable from another thread: the open file
    stays the same even if the path is replaced before the copy starts."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)


def restore_snapshot(db: Database, source: Path | sqlite3.Connection) -> None:
    """Replace the live database's content with the snapshot's, through the writer connection
    (nothing else may use it meanwhile). Takes a path, or a connection from `open_snapshot`,
    which it closes.

    Readers keep their connections and see the new content at their next transaction. The
    restored file is migrated to this version's schema.
    """
    # Synced at each commit while it lasts: pysyncobj moves on (and truncates its journal to
    # the snapshot's index) once this returns, so a power loss must not bring the old state back.
    db.conn.execute("PRAGMA synchronous = FULL")
    snapshot = open_snapshot(source) if isinstance(source, Path) else source
    try:
        snapshot.backup(db.conn)
        db.conn.execute("DROP TABLE IF EXISTS snapshot_raft")
        db.conn.execute("DROP TABLE IF EXISTS snapshot_segments")
        # A snapshot taken by an older node lacks the later migrations (an index, say): the
        # file must be brought to this version's schema as an opened one is.
        migrate(db.conn)
        _install_segments(db, snapshot)
    finally:
        snapshot.close()
    db.conn.execute("PRAGMA journal_mode = WAL")
    db.conn.execute("PRAGMA synchronous = NORMAL")
    db.reload()


def _install_segments(db: Database, snapshot: sqlite3.Connection) -> None:
    """The history directory made to agree with the installed state: the open segments' files
    from the snapshot; a closed segment's file kept only if this node closed it itself (a
    rollback-journal file: made immutable by its own close_segment); every other file removed
    (an open segment of this node's older state, a segment dropped since), so that no stale
    file's applied index makes the replay skip a part it lacks."""
    db.segments.reset()
    history = segments.history_dir(db.path.parent)
    history.mkdir(parents=True, exist_ok=True)
    closed = {
        str(n) for (n,) in db.conn.execute("SELECT name FROM segments WHERE state = 'closed'")
    }
    for path in history.iterdir():
        name, _, suffix = path.name.partition(".")
        if suffix not in _OUR_SUFFIXES or not _is_segment_name(name):
            continue  # not a segment's file (a fetch in progress keeps its own names)
        if suffix == "db" and name in closed and _is_rollback_file(path):
            continue
        path.unlink(missing_ok=True)
    has_table = snapshot.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'snapshot_segments'"
    ).fetchone()
    if not has_table:
        return
    names = [n for (n,) in snapshot.execute("SELECT DISTINCT name FROM snapshot_segments")]
    for name in names:
        target = segments.segment_path(db.path.parent, name)
        scratch = target.with_name(target.name + ".installing")
        with scratch.open("wb") as f:
            for (data,) in snapshot.execute(
                "SELECT data FROM snapshot_segments WHERE name = ? ORDER BY chunk", (name,)
            ):
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(scratch, target)
    sync_dir(history)
    log.info("snapshot installed %d open history segments", len(names))


_OUR_SUFFIXES = frozenset({"db", "db-wal", "db-shm", "db-journal", "db.installing"})


def _is_segment_name(name: str) -> bool:
    try:
        segments.parse_name(name)
    except segments.SegmentName:
        return False
    return True


def _is_rollback_file(path: Path) -> bool:
    """A SQLite file in rollback-journal mode (header bytes 18-19 are 2 in WAL mode)."""
    with path.open("rb") as f:
        header = f.read(20)
    return len(header) == 20 and header[18] == 1 and header[19] == 1
