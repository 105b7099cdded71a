"""One node's SQLite file: the writer connection apply uses, readers for everything else.

Only apply (store/apply/) writes, inside `transaction()`, which records the applied index.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from schedd.loop import Loop
from schedd.store import sqlfunctions
from schedd.store.history_reads import SegmentReaders
from schedd.store.schema import MIGRATIONS
from schedd.store.segment_writes import SegmentWriter

T = TypeVar("T")
log = logging.getLogger(__name__)


WRITER_CACHE_KIB = 32 * 1024
READER_THREADS = 4  # a node's reader connections for the API (ReadPool)
READER_CACHE_KIB = 8 * 1024


def connect(
    path: Path | str, *, readonly: bool = False, cache_kib: int = READER_CACHE_KIB
) -> sqlite3.Connection:
    """A connection with schedd's pragmas; autocommit mode, transactions are explicit."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
    if readonly:
        conn.execute("PRAGMA query_only = 1")
    sqlfunctions.register(conn)
    return conn


class Database:
    """The writer side of a node's database: migrations, transactions, the applied index."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = connect(self.path, cache_kib=WRITER_CACHE_KIB)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        # Checkpoints fsync: they run on the Checkpointer's thread, never inside an apply.
        self.conn.execute("PRAGMA wal_autocheckpoint = 0")
        migrate(self.conn)
        self.applied_index = self.get_meta("applied_index", 0)
        # History segments (store/segments.py) beside the file: apply writes them in the same
        # entries, each file committed before this one (store/segment_writes.py).
        self.segments = SegmentWriter(self.path.parent, self.conn)

    def get_meta(self, key: str, default: int) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else int(row[0])

    def set_meta(self, key: str, value: int) -> None:
        """Write one meta value in its own transaction (start-up settings, not replicated state)."""
        self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @contextmanager
    def transaction(self, applied_index: int) -> Iterator[sqlite3.Connection]:
        """One command's transaction; commits its effects together with `applied_index`. The
        history segments it wrote commit first, each with the same index."""
        self.segments.begin(applied_index)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
            self.conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('applied_index', ?)",
                (applied_index,),
            )
            self.segments.commit()
            self.conn.execute("COMMIT")
        except BaseException:
            self.segments.rollback()
            self.conn.execute("ROLLBACK")
            raise
        self.applied_index = applied_index
        self.segments.committed()

    def reload(self) -> None:
        """Re-read cached values after the file's content was replaced (snapshot restore)."""
        self.applied_index = self.get_meta("applied_index", 0)

    def close(self) -> None:
        self.segments.reset()
        self.conn.close()


def migrate(conn: sqlite3.Connection) -> None:
    """Run the migrations this file has not seen yet, each atomically."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    version = 0
    if has_meta:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = 0 if row is None else int(row[0])
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        conn.executescript(
            f"BEGIN;\n{script}\n"
            f"INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', {number});\n"
            "COMMIT;"
        )


class Checkpointer(Loop):
    """Moves the WAL into the database file in the background.

    PASSIVE checkpoints block nobody, but while readers keep coming the WAL is never rewound
    and grows without end (measured: 1.2 GB in 30 s at 2,000 runs/s), which slows every read.
    Past `truncate_above_bytes` it truncates the WAL instead: that waits briefly for readers
    and holds the writer for as long, so apply may pause for a fraction of a second.
    """

    def __init__(
        self, path: Path | str, *, every_s: float = 1.0, truncate_above_bytes: int = 64 * 2**20
    ) -> None:
        super().__init__("store-checkpoint", first_wait_s=every_s)
        self._path = Path(path)
        self._wal_path = Path(f"{path}-wal")
        self._every_s = every_s
        self._truncate_above_bytes = truncate_above_bytes
        self._conn: sqlite3.Connection | None = None

    def tick(self, now_ms: int) -> float:
        if self._conn is None:
            self._conn = connect(self._path, cache_kib=1024)
            self._conn.execute("PRAGMA busy_timeout = 250")
        wal_bytes = self._wal_path.stat().st_size if self._wal_path.exists() else 0
        mode = "TRUNCATE" if wal_bytes > self._truncate_above_bytes else "PASSIVE"
        try:
            self._conn.execute(f"PRAGMA wal_checkpoint({mode})")
        except sqlite3.OperationalError as exc:  # busy: readers did not let go in time
            log.debug("checkpoint deferred mode=%s: %s", mode, exc)
        return self._every_s

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        if self._conn is not None:
            self._conn.close()


class ReadPool:
    """Reader connections on a few threads, so the event loop never waits on SQLite."""

    def __init__(self, path: Path | str, *, threads: int = READER_THREADS) -> None:
        self._path = Path(path)
        self._local = threading.local()
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="store-read")
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # Read-only connections to the history segments beside the file (store/history_reads).
        self.history = SegmentReaders(self._path.parent)

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self._path, readonly=True)
            with self._lock:
                self._connections.append(conn)
        return conn

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` with this thread's reader connection (for callers already off the loop)."""
        return fn(self._connection())

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(conn)` on a reader thread and await its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.run, fn)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self.history.close()
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
