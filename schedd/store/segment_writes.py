"""apply's writes into history segments, one log entry at a time, crash-safe per file.

SQLite in WAL mode does not make a transaction over several files atomic (only each file's
part), so every segment keeps its own `meta.applied_index` beside its rows and an entry
commits its segment parts first and `state.db` second (`Database.transaction`). After a crash
between the two, the replay of the entry finds the live rows still in `state.db`, moves them
again, and each segment whose index is already at the entry skips its part (`part` answers
None): nothing lost, nothing twice (DESIGN.md rule 3, per file).

Only the apply thread uses a SegmentWriter (and the snapshot restore, while apply waits).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from schedd import metrics
from schedd.store import segments
from schedd.store.files import sync_dir, sync_file

log = logging.getLogger(__name__)

_WRITERS: dict[int, SegmentWriter] = {}  # by id() of the state.db writer connection


def writer_for(tx: sqlite3.Connection) -> SegmentWriter:
    """The segment writer that goes with apply's `state.db` connection `tx`."""
    writer = _WRITERS.get(id(tx))
    if writer is None:
        raise RuntimeError("no segment writer registered for this connection")
    return writer


class SegmentWriter:
    """The writer connections of the open segments and the parts of the entry being applied."""

    def __init__(self, data_dir: Path, state_conn: sqlite3.Connection) -> None:
        self.data_dir = data_dir
        self._conns: dict[str, sqlite3.Connection] = {}
        self._index = 0
        self._parts: dict[str, sqlite3.Connection | None] = {}  # None: the file is ahead, skip
        self._in_command = False
        self._closing: list[str] = []  # closed by this entry: made immutable at its commit
        self._closing_in_command: list[str] = []
        self._after_commit: list[Callable[[], None]] = []
        _WRITERS[id(state_conn)] = self

    @property
    def index(self) -> int:
        """The log index of the entry being applied."""
        return self._index

    def begin(self, index: int) -> None:
        """A new entry (its log index) starts: no part yet."""
        self._index = index
        self._parts.clear()
        self._closing.clear()
        self._after_commit.clear()

    def part(self, name: str) -> sqlite3.Connection | None:
        """The segment's connection inside this entry's transaction of it, or None when the
        segment already holds this entry's part (a replay after a crash between the commits)."""
        if name in self._parts:
            return self._parts[name]
        conn = self._writer(name)
        if segments.applied_index(conn) >= self._index:
            self._parts[name] = None
            return None
        conn.execute("BEGIN IMMEDIATE")
        if self._in_command:
            conn.execute("SAVEPOINT command")
        self._parts[name] = conn
        return conn

    def reader(self, name: str) -> sqlite3.Connection:
        """apply's view of an open segment (what it holds, this entry's writes included)."""
        conn = self._parts.get(name)
        return conn if conn is not None else self._writer(name)

    def _writer(self, name: str) -> sqlite3.Connection:
        conn = self._conns.get(name)
        if conn is None:
            family, _ = segments.parse_name(name)
            path = segments.segment_path(self.data_dir, name)
            conn = self._conns[name] = segments.open_writer(path, family)
        return conn

    # One command of the entry: a contained failure undoes its segment writes too.
    def savepoint(self) -> None:
        self._in_command = True
        self._closing_in_command = []
        for conn in self._live_parts():
            conn.execute("SAVEPOINT command")

    def release(self) -> None:
        for conn in self._live_parts():
            conn.execute("RELEASE command")
        self._closing.extend(self._closing_in_command)
        self._closing_in_command = []
        self._in_command = False

    def undo_command(self) -> None:
        for conn in self._live_parts():
            conn.execute("ROLLBACK TO command")
        self._closing_in_command = []

    def close_at_commit(self, name: str) -> None:
        """The entry closes the segment: once its part is committed, the file is made immutable
        (checkpointed, rollback-journal mode, fsynced) before `state.db` commits the close."""
        self._closing_in_command.append(name)

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run `action` once `state.db` has committed this entry (never for a rolled-back one)."""
        self._after_commit.append(action)

    def commit(self) -> None:
        """Commit each segment part with the entry's index (before `state.db` commits)."""
        for conn in self._live_parts():
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('applied_index', ?)",
                (self._index,),
            )
            conn.execute("COMMIT")
        self._parts.clear()
        for name in self._closing:
            self._finish(name)
        self._closing.clear()

    def rollback(self) -> None:
        for conn in self._live_parts():
            conn.execute("ROLLBACK")
        self._parts.clear()
        self._closing.clear()
        self._closing_in_command = []
        self._after_commit.clear()
        self._in_command = False

    def committed(self) -> None:
        """`state.db` committed the entry: run what waited for it."""
        actions, self._after_commit = self._after_commit, []
        for action in actions:
            try:
                action()
            except Exception:  # a file left behind is retried by nobody: log it loudly
                log.exception("after-commit action failed")

    def forget(self, name: str) -> None:
        """Close the writer of a segment (dropped, or its file about to be replaced)."""
        conn = self._conns.pop(name, None)
        if conn is not None:
            conn.close()

    def reset(self) -> None:
        """Close every writer (a snapshot replaces the open segments' files)."""
        for name in list(self._conns):
            self.forget(name)

    def _live_parts(self) -> list[sqlite3.Connection]:
        return [conn for conn in self._parts.values() if conn is not None]

    def _finish(self, name: str) -> None:
        """Make a closed segment's file immutable: WAL folded in, rollback-journal mode (no -wal
        or -shm beside it), fsynced with its directory. Readers of an open segment do not keep
        it open, so the mode change waits at most for a read in progress."""
        conn = self._writer(name)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        mode = ""
        for _ in range(250):
            mode = str(conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0]).lower()
            if mode == "delete":
                break
            time.sleep(0.02)
        if mode != "delete":
            log.error("segment %s stays in WAL mode after its close (readers held it)", name)
        self.forget(name)
        path = segments.segment_path(self.data_dir, name)
        sync_file(path)
        sync_dir(path.parent)


def unlink_later(path: Path) -> None:
    """Remove a dropped segment's file off the apply thread (a reader that still has it open
    keeps its inode until it closes)."""

    def unlink() -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    threading.Thread(target=unlink, name="segment-unlink", daemon=True).start()


def verify_later(path: Path, digest: str) -> None:
    """Check a closed segment's rows against the digest its close recorded (the leader's), on a
    thread of its own: a mismatch means this node's history diverged, said loudly (as a live
    digest that differs from its peers' would be)."""

    def verify() -> None:
        try:
            mine = segments.content_digest(path)
        except Exception:
            log.exception("closed segment %s could not be read to check its digest", path.name)
            return
        if mine != digest:
            metrics.SEGMENT_DIGEST_MISMATCHES.inc()
            log.error(
                "closed segment %s diverged: its rows digest %s, the cluster recorded %s",
                path.name,
                mine,
                digest,
            )

    threading.Thread(target=verify, name="segment-verify", daemon=True).start()
