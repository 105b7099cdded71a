"""SQLiteOnce: effectively-once handlers writing to a SQLite database (once.py has the order).

The transaction begins IMMEDIATE: it holds the database's write lock from the key's insert to the
commit, so handlers of one database commit one at a time (a handler should be short; others wait
up to `busy_timeout_s`, then fail and are nacked).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator

from schedd.worker.once import (
    DEFAULT_KEEP_S,
    DEFAULT_PRUNE_EVERY_S,
    DEFAULT_TABLE,
    Clock,
    Keeping,
    Pool,
    table_name,
)


class SQLiteOnce:
    """Record each handled message's idempotency key in table `table` of the SQLite database
    at `path`, in the handler's own transaction (the handler gets the sqlite3.Connection)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = DEFAULT_TABLE,
        keep_s: float = DEFAULT_KEEP_S,
        prune_every_s: float = DEFAULT_PRUNE_EVERY_S,
        busy_timeout_s: float = 30.0,
        clock: Clock = time.time,
    ) -> None:
        self.path = os.fspath(path)
        self.table = table_name(table, is_qualified=False)[0]
        self.keeping = Keeping(keep_s, prune_every_s, clock)
        self._busy_timeout_s = busy_timeout_s
        self._pool: Pool[sqlite3.Connection] = Pool()
        self._has_table = False
        self._lock = threading.Lock()

    def connect(self) -> sqlite3.Connection:
        """A connection of our own (autocommit: transactions are begun explicitly), the key
        table made on first use."""
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        with self._lock:
            if not self._has_table:
                conn.execute(
                    f'CREATE TABLE IF NOT EXISTS "{self.table}" (key TEXT PRIMARY KEY, '
                    "recorded_at_ms INTEGER NOT NULL) WITHOUT ROWID"
                )
                conn.execute(
                    f'CREATE INDEX IF NOT EXISTS "{self.table}_recorded_at_ms" '
                    f'ON "{self.table}" (recorded_at_ms)'
                )
                self._has_table = True
        return conn

    @contextlib.contextmanager
    def transaction(self, key: str) -> Iterator[sqlite3.Connection | None]:
        conn = self._pool.take() or self.connect()
        is_healthy = False
        try:
            is_new = self._claim(conn, key)
            try:
                yield conn if is_new else None
            except BaseException:
                conn.execute("ROLLBACK")
                is_healthy = True
                raise
            conn.execute("COMMIT" if is_new else "ROLLBACK")
            is_healthy = True
        finally:
            self._release(conn, is_healthy)

    @contextlib.asynccontextmanager
    async def atransaction(self, key: str) -> AsyncIterator[sqlite3.Connection | None]:
        """The asyncio form: the lock, the key and the commit wait in a thread; the handler's
        own statements on the connection run where it calls them."""
        conn = self._pool.take()
        if conn is None:
            conn = await asyncio.to_thread(self.connect)
        is_healthy = False
        try:
            is_new = await asyncio.to_thread(self._claim, conn, key)
            try:
                yield conn if is_new else None
            except BaseException:
                await asyncio.to_thread(conn.execute, "ROLLBACK")
                is_healthy = True
                raise
            await asyncio.to_thread(conn.execute, "COMMIT" if is_new else "ROLLBACK")
            is_healthy = True
        finally:
            self._release(conn, is_healthy)

    def is_recorded(self, key: str) -> bool:
        """Whether `key` is recorded (committed)."""
        conn = self._pool.take() or self.connect()
        try:
            query = f'SELECT 1 FROM "{self.table}" WHERE key = ?'
            return conn.execute(query, (key,)).fetchone() is not None
        finally:
            self._release(conn, True)

    def prune(self, cutoff_ms: int | None = None) -> int:
        """Delete the keys recorded before `cutoff_ms` (default: `keep_s` ago); how many."""
        conn = self._pool.take() or self.connect()
        try:
            query = f'DELETE FROM "{self.table}" WHERE recorded_at_ms < ?'
            cutoff = self.keeping.cutoff() if cutoff_ms is None else cutoff_ms
            return conn.execute(query, (cutoff,)).rowcount
        finally:
            self._release(conn, True)

    def prune_if_due(self) -> None:
        cutoff_ms = self.keeping.cutoff_if_due()
        if cutoff_ms is not None:
            self.prune(cutoff_ms)

    async def aprune_if_due(self) -> None:
        cutoff_ms = self.keeping.cutoff_if_due()
        if cutoff_ms is not None:
            await asyncio.to_thread(self.prune, cutoff_ms)

    def close(self) -> None:
        """Close the idle connections."""
        for conn in self._pool.drain():
            conn.close()

    def _claim(self, conn: sqlite3.Connection, key: str) -> bool:
        """Begin, and insert the key: whether it was new (else it is recorded already)."""
        conn.execute("BEGIN IMMEDIATE")
        insert = f'INSERT OR IGNORE INTO "{self.table}" (key, recorded_at_ms) VALUES (?, ?)'
        try:
            return conn.execute(insert, (key, self.keeping.now_ms())).rowcount == 1
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _release(self, conn: sqlite3.Connection, is_healthy: bool) -> None:
        if conn.in_transaction:  # the handler left it in a state we cannot vouch for
            is_healthy = False
        if not (is_healthy and self._pool.give(conn)):
            conn.close()
