"""Effectively once: what SQLiteOnce and PostgresOnce share, and the one order both keep.

In one transaction of the tenant's own database: record the message's idempotency key (an insert
that does nothing when the key is there: then roll back, and the worker acks without calling the
handler), call the handler with the transaction, commit; only then ack. A lost ack brings the
message back, finds its key and is acked; a handler that raises rolls its writes and the key
back, and the message is nacked. Inserting the key first makes a second delivery running at the
same moment wait on the first one's row lock (or SQLite's write lock) and then find the key.
Keys older than `keep_s` are deleted, at most once every `prune_every_s`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

C = TypeVar("C")
Clock = Callable[[], float]  # epoch seconds (time.time)
DEFAULT_TABLE = "schedd_once"
DEFAULT_KEEP_S = 7 * 86_400.0
DEFAULT_PRUNE_EVERY_S = 600.0
IDLE_CONNECTIONS = 100  # at most as many as a worker runs handlers at once
_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,62}"


class Once(Protocol):
    """A store of idempotency keys in the tenant's database (SQLiteOnce, PostgresOnce)."""

    def transaction(self, key: str) -> AbstractContextManager[Any]:
        """A transaction that has recorded `key` (None when it was recorded already): commits
        on a normal exit, rolls back when the block raises."""

    def atransaction(self, key: str) -> AbstractAsyncContextManager[Any]:
        """The same for the asyncio worker."""

    def prune_if_due(self) -> None:
        """Delete expired keys when the last prune is `prune_every_s` old."""

    async def aprune_if_due(self) -> None: ...


def table_name(table: str, *, is_qualified: bool) -> tuple[str, ...]:
    """The table's name parts (`schema.table` where `is_qualified`), checked."""
    pattern = f"{_NAME}(\\.{_NAME})?" if is_qualified else _NAME
    if not re.fullmatch(pattern, table):
        raise ValueError(f"table: must be a plain SQL name like {DEFAULT_TABLE!r}, got {table!r}")
    return tuple(table.split("."))


class Keeping:
    """How long keys are kept, and when the next prune is due."""

    def __init__(self, keep_s: float, prune_every_s: float, clock: Clock) -> None:
        if keep_s <= 0 or prune_every_s < 0:
            raise ValueError("keep_s must be > 0 and prune_every_s >= 0 seconds")
        self.keep_s, self.prune_every_s, self.clock = keep_s, prune_every_s, clock
        self._pruned_s: float | None = None
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def cutoff_if_due(self) -> int | None:
        """The epoch ms before which keys go, when a prune is due (the caller then prunes)."""
        now_s = self.clock()
        with self._lock:
            if self._pruned_s is not None and now_s - self._pruned_s < self.prune_every_s:
                return None
            self._pruned_s = now_s
        return int((now_s - self.keep_s) * 1000)

    def cutoff(self) -> int:
        return int((self.clock() - self.keep_s) * 1000)


class Pool(Generic[C]):
    """Idle connections kept for the next transaction."""

    def __init__(self) -> None:
        self._idle: list[C] = []
        self._lock = threading.Lock()

    def take(self) -> C | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def give(self, connection: C) -> bool:
        """Keep it (False: the pool is full, close it)."""
        with self._lock:
            if len(self._idle) >= IDLE_CONNECTIONS:
                return False
            self._idle.append(connection)
            return True

    def drain(self) -> list[C]:
        with self._lock:
            idle, self._idle = self._idle, []
        return idle
