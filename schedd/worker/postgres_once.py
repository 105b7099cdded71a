"""PostgresOnce: effectively-once handlers writing to PostgreSQL through psycopg 3 (once.py has
the order). psycopg is imported when the first transaction needs it, so the rest of
schedd.worker works without it (`pip install 'schedd[worker-postgres]'`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING

from schedd.worker.once import (
    DEFAULT_KEEP_S,
    DEFAULT_PRUNE_EVERY_S,
    DEFAULT_TABLE,
    Clock,
    Keeping,
    Pool,
    table_name,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection, sql

    Conn = Connection[tuple[object, ...]]
    AsyncConn = AsyncConnection[tuple[object, ...]]


class PostgresOnce:
    """Record each handled message's idempotency key in table `table` (`schema.table` allowed)
    of the PostgreSQL database at `dsn`, in the handler's own transaction (the handler gets
    the psycopg Connection, or AsyncConnection in the asyncio worker). Do not commit it."""

    def __init__(
        self,
        dsn: str,
        *,
        table: str = DEFAULT_TABLE,
        keep_s: float = DEFAULT_KEEP_S,
        prune_every_s: float = DEFAULT_PRUNE_EVERY_S,
        connect_timeout_s: int = 10,
        clock: Clock = time.time,
    ) -> None:
        self.dsn = dsn
        self.table = table_name(table, is_qualified=True)
        self.keeping = Keeping(keep_s, prune_every_s, clock)
        self._connect_timeout_s = connect_timeout_s
        self._pool: Pool[Conn] = Pool()
        self._apool: Pool[AsyncConn] = Pool()
        self._has_table = False
        self._lock = threading.Lock()

    def connect(self) -> Conn:
        """A connection of our own, the key table made on first use."""
        import psycopg

        conn = psycopg.connect(self.dsn, connect_timeout=self._connect_timeout_s)
        with self._lock:
            if not self._has_table:
                try:
                    for statement in self._schema():
                        conn.execute(statement)
                    conn.commit()
                except _ddl_races():
                    conn.rollback()  # another worker made it at the same moment
                self._has_table = True
        return conn

    async def aconnect(self) -> AsyncConn:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(
            self.dsn, connect_timeout=self._connect_timeout_s
        )
        if not self._has_table:
            try:
                for statement in self._schema():
                    await conn.execute(statement)
                await conn.commit()
            except _ddl_races():
                await conn.rollback()  # another worker made it at the same moment
            self._has_table = True
        return conn

    @contextmanager
    def transaction(self, key: str) -> Iterator[Conn | None]:
        conn = self._pool.take() or self.connect()
        is_healthy = False
        try:
            is_new = conn.execute(self._insert(), (key, self.keeping.now_ms())).rowcount == 1
            try:
                yield conn if is_new else None
            except BaseException:
                conn.rollback()
                is_healthy = True
                raise
            if is_new:
                conn.commit()
            else:
                conn.rollback()
            is_healthy = True
        finally:
            self._release(conn, is_healthy)

    @asynccontextmanager
    async def atransaction(self, key: str) -> AsyncIterator[AsyncConn | None]:
        conn = self._apool.take() or await self.aconnect()
        is_healthy = False
        try:
            cursor = await conn.execute(self._insert(), (key, self.keeping.now_ms()))
            is_new = cursor.rowcount == 1
            try:
                yield conn if is_new else None
            except BaseException:
                await conn.rollback()
                is_healthy = True
                raise
            await (conn.commit() if is_new else conn.rollback())
            is_healthy = True
        finally:
            if not (is_healthy and not conn.broken and self._apool.give(conn)):
                await conn.close()

    def is_recorded(self, key: str) -> bool:
        """Whether `key` is recorded (committed)."""
        from psycopg import sql

        conn = self._pool.take() or self.connect()
        try:
            query = sql.SQL("SELECT 1 FROM {} WHERE key = %s").format(self._table())
            found = conn.execute(query, (key,)).fetchone() is not None
            conn.rollback()
            return found
        finally:
            self._release(conn, True)

    def prune(self, cutoff_ms: int | None = None) -> int:
        """Delete the keys recorded before `cutoff_ms` (default: `keep_s` ago); how many."""
        conn = self._pool.take() or self.connect()
        try:
            cutoff = self.keeping.cutoff() if cutoff_ms is None else cutoff_ms
            deleted = conn.execute(self._delete(), (cutoff,)).rowcount
            conn.commit()
            return deleted
        finally:
            self._release(conn, True)

    def prune_if_due(self) -> None:
        cutoff_ms = self.keeping.cutoff_if_due()
        if cutoff_ms is not None:
            self.prune(cutoff_ms)

    async def aprune_if_due(self) -> None:
        cutoff_ms = self.keeping.cutoff_if_due()
        if cutoff_ms is None:
            return
        conn = self._apool.take() or await self.aconnect()
        try:
            await conn.execute(self._delete(), (cutoff_ms,))
            await conn.commit()
        finally:
            if not self._apool.give(conn):
                await conn.close()

    def close(self) -> None:
        """Close the idle connections (the asyncio ones: `await aclose()`)."""
        for conn in self._pool.drain():
            conn.close()

    async def aclose(self) -> None:
        for conn in self._apool.drain():
            await conn.close()

    def _table(self) -> sql.Identifier:
        from psycopg import sql

        return sql.Identifier(*self.table)

    def _schema(self) -> list[sql.Composed]:
        from psycopg import sql

        index = sql.Identifier(f"{self.table[-1][:45]}_recorded_at_ms")
        return [
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} "
                "(key text PRIMARY KEY, recorded_at_ms bigint NOT NULL)"
            ).format(self._table()),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (recorded_at_ms)").format(
                index, self._table()
            ),
        ]

    def _insert(self) -> sql.Composed:
        from psycopg import sql

        return sql.SQL(
            "INSERT INTO {} (key, recorded_at_ms) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"
        ).format(self._table())

    def _delete(self) -> sql.Composed:
        from psycopg import sql

        return sql.SQL("DELETE FROM {} WHERE recorded_at_ms < %s").format(self._table())

    def _release(self, conn: Conn, is_healthy: bool) -> None:
        if not (is_healthy and not conn.broken and self._pool.give(conn)):
            conn.close()


def _ddl_races() -> tuple[type[Exception], ...]:
    """What CREATE ... IF NOT EXISTS raises when another session makes the same at once."""
    from psycopg import errors

    return (errors.UniqueViolation, errors.DuplicateTable, errors.DuplicateObject)
