"""Server limits of the HTTP API: how long a client may take to send a request, how many
bodies the node reads at once, how many long polls a tenant may hold.

Owns the numbers and the counting; it never reads a body or answers a request itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from schedd.errors import QuotaExceeded, ServerBusy

LINGERING_S = 2.0  # after an answer, unread body bytes are drained this long, then it closes


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLimits:
    """The `[api]` limits (docs/configuration.md)."""

    header_timeout_s: float = 15.0  # request line + headers, from connect or the last answer
    body_timeout_s: float = 30.0  # a whole request body, from the handler's first read
    max_body_reads: int = 64  # bodies being read at once, node-wide
    body_wait_s: float = 1.0  # how long a request waits for a body-read slot before a 503
    long_polls_per_tenant: int = 32  # receives with a `wait` in progress, per tenant, per node

    def runner_options(self) -> dict[str, Any]:
        """aiohttp server settings. aiohttp closes a connection that has not sent a complete
        request line and headers `keepalive_timeout` after it opened or after its last answer
        (aiohttp >= 3.10): that is the header timeout, and the idle keep-alive time too."""
        return {"keepalive_timeout": self.header_timeout_s, "lingering_time": LINGERING_S}


class BodyGate:
    """At most `limit` request bodies read at once on this node; a request that cannot get a
    slot within `wait_s` is a 503 (the node is busy), not a growing queue of buffers."""

    def __init__(self, limit: int, wait_s: float) -> None:
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        self._wait_s = wait_s

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout(self._wait_s):
                await self._slots.acquire()
        except TimeoutError:
            raise ServerBusy(
                f"this node is reading {self.limit} request bodies already "
                f"(api.max_body_reads = {self.limit}); retry"
            ) from None
        try:
            yield
        finally:
            self._slots.release()


class AddressBudget:
    """A token bucket per client address: `burst` at once, then `per_s` a second. Bounds what
    one address can make the node do (Raft barrier entries for unknown tokens)."""

    MAX_ADDRESSES = 10_000  # past this the buckets start over: memory stays bounded

    def __init__(self, per_s: float, burst: int) -> None:
        self.per_s = per_s
        self.burst = burst
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, at_s)

    def allow(self, address: str, now_s: float) -> bool:
        tokens, at_s = self._buckets.get(address, (float(self.burst), now_s))
        tokens = min(float(self.burst), tokens + (now_s - at_s) * self.per_s)
        if len(self._buckets) >= self.MAX_ADDRESSES and address not in self._buckets:
            self._buckets.clear()
        if tokens < 1.0:
            self._buckets[address] = (tokens, now_s)
            return False
        self._buckets[address] = (tokens - 1.0, now_s)
        return True


class LongPolls:
    """Counts each tenant's long polls in progress; one over the limit is a 429."""

    def __init__(self, per_tenant: int) -> None:
        self.per_tenant = per_tenant
        self._held: dict[str, int] = {}

    @contextlib.contextmanager
    def hold(self, tenant_id: str) -> Iterator[None]:
        held = self._held.get(tenant_id, 0)
        if held >= self.per_tenant:
            raise QuotaExceeded(
                f"this tenant already has {held} long polls in progress on this node "
                f"(api.long_polls_per_tenant = {self.per_tenant}); retry, or receive with "
                f"fewer consumers"
            )
        self._held[tenant_id] = held + 1
        try:
            yield
        finally:
            left = self._held[tenant_id] - 1
            if left:
                self._held[tenant_id] = left
            else:
                del self._held[tenant_id]
