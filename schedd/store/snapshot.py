"""Snapshots of the store for Raft log compaction: one self-contained SQLite file.

The file is a consistent copy of the database (rollback journal, no -wal beside it) plus a
`snapshot_raft` table holding the Raft library's own opaque state, shipped as it is.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from schedd.store.db import Database, connect, migrate
from schedd.store.files import sync_file


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
    finally:
        copy.close()
    sync_file(out_path)
    return 0 if row is None else int(row[0])


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
    finally:
        snapshot.close()
    db.conn.execute("DROP TABLE IF EXISTS snapshot_raft")
    # A snapshot taken by an older node lacks the later migrations (an index, say): the file
    # must be brought to this version's schema as an opened one is.
    migrate(db.conn)
    db.conn.execute("PRAGMA journal_mode = WAL")
    db.conn.execute("PRAGMA synchronous = NORMAL")
    db.reload()
