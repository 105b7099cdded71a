"""Tenants' broker connections as the deliverers look them up, read from the store off the loop.

A deliverer asks for a connection on every attempt, so an answer is kept for `ttl_s`: a deleted
connection may still be used that long by a run already in the outbox (the API refuses to delete
one that a live job uses), and one created again under its name has a new `created_ms`, which
the deliverers' pools key by.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from schedd.model import BrokerConnection
from schedd.sealing import PayloadKeys
from schedd.store.connections import broker_connection
from schedd.store.db import ReadPool

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

    async def lookup(self, tenant_id: str, name: str) -> BrokerConnection | None:
        """The tenant's connection `name` with its URL opened, None when there is none; raises
        sealing.PayloadUnreadable when no key of this node opens the URL."""
        key = (tenant_id, name)
        now = self._clock()
        cached = self._entries.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        found = await self._reads.read(
            lambda conn: broker_connection(conn, self._payload_keys, tenant_id, name)
        )
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (now + self._ttl_s, found)
        return found
