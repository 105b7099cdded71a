"""Tenants' broker connections as the deliverers look them up, read from the store off the loop.

A deliverer asks for a connection on every attempt, so an answer is kept for `ttl_s`, unless
apply creates or deletes that connection meanwhile: the node hands `forget` its
`ConnectionChanged` events (and `clear` a snapshot's install), so an attempt that comes after a
connection was made again under its name (a broker that moved, a dead letter redriven once it
was mended) uses the new one, and one after a delete finds none. The deliverers' pools key their
clients by `created_ms`, so the old connection's client is not used either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from schedd.model import BrokerConnection
from schedd.sealing import PayloadKeys
from schedd.store.connections import broker_connection
from schedd.store.db import ReadPool
from schedd.store.events import ConnectionChanged

TTL_S = 5.0
MAX_ENTRIES = 10_000  # tenants x connections a node delivers to; cleared when it grows past


class ConnectionCache:
    def __init__(
        self,
        reads: ReadPool,
        payload_keys: PayloadKeys,
        *,
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reads = reads
        self._payload_keys = payload_keys
        self._ttl_s = ttl_s
        self._clock = clock
        self._entries: dict[tuple[str, str], tuple[float, BrokerConnection | None]] = {}
        # forget() runs on the apply thread: a look-up that read the store before a change and
        # finishes after it must not keep what it read (the generation says it is stale).
        self._lock = threading.Lock()
        self._generation = 0

    async def lookup(self, tenant_id: str, name: str) -> BrokerConnection | None:
        """The tenant's connection `name` with its URL opened, None when there is none; raises
        sealing.PayloadUnreadable when no key of this node opens the URL."""
        key = (tenant_id, name)
        now = self._clock()
        with self._lock:
            cached = self._entries.get(key)
            generation = self._generation
        if cached is not None and cached[0] > now:
            return cached[1]
        found = await self._reads.read(
            lambda conn: broker_connection(conn, self._payload_keys, tenant_id, name)
        )
        with self._lock:
            if generation == self._generation:
                if len(self._entries) >= MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = (now + self._ttl_s, found)
        return found

    def forget(self, changed: Iterable[ConnectionChanged]) -> None:
        """Drop the look-ups of connections apply just created or deleted (any thread)."""
        with self._lock:
            self._generation += 1
            for event in changed:
                self._entries.pop((event.tenant_id, event.name), None)

    def clear(self) -> None:
        """Drop every look-up: a snapshot replaced the store (any thread)."""
        with self._lock:
            self._generation += 1
            self._entries.clear()
