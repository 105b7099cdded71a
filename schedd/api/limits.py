"""Server limits of the HTTP API: how long a client may take to send a request, how many
bodies the node reads at once, how many long polls a tenant may hold.

Owns the numbers and the counting; it never reads a body or answers a request itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, fields
from typing import TypedDict

from schedd.config import ApiLimits
from schedd.errors import QuotaExceeded, ServerBusy

LINGERING_S = 2.0  # after an answer, unread body bytes are drained this long, then it closes


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLimits(ApiLimits):
    """The `[api]` limits: the settings, whose keys, defaults and bounds `ApiLimits` declares
    (schedd/config.py; docs/configuration.md), and what the API adds that is not a setting."""

    body_wait_s: float = 1.0  # how long a request waits for a body-read slot before a 503

    @classmethod
    def configured(cls, settings: ApiLimits) -> ServerLimits:
        """These limits with the node's `[api]` settings."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(ApiLimits)})

    def runner_options(self) -> RunnerOptions:
        """aiohttp server settings. aiohttp closes a connection that has not sent a complete
        request line and headers `keepalive_timeout` after it opened or after its last answer
        (aiohttp >= 3.10): that is the header timeout, and the idle keep-alive time too."""
        return {"keepalive_timeout": self.header_timeout_s, "lingering_time": LINGERING_S}


class RunnerOptions(TypedDict):
    """The aiohttp AppRunner settings ServerLimits gives (node.py passes them on)."""

    keepalive_timeout: float
    lingering_time: float


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
    """A token bucket per client: `burst` at once, then `per_s` a second; and one more bucket
    for the whole node (`node_per_s`, `node_burst`), so many addresses add up to a bound too.
    Bounds what clients can make the node do (Raft barrier entries for unknown tokens). An IPv6
    client counts by its /64 (one host usually holds a whole /64)."""

    MAX_ADDRESSES = 10_000  # past this the least recently seen address is forgotten

    def __init__(self, per_s: float, burst: int, node_per_s: float, node_burst: int) -> None:
        self.per_s = per_s
        self.burst = burst
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # (tokens, at_s)
        self._node = (float(node_burst), 0.0)
        self._node_rate = (node_per_s, float(node_burst))

    def allow(self, address: str, now_s: float) -> bool:
        key = _client_key(address)
        tokens = _refill(self._buckets.pop(key, None), now_s, self.per_s, float(self.burst))
        node_rate, node_burst = self._node_rate
        node = _refill(self._node, now_s, node_rate, node_burst)
        is_allowed = tokens >= 1.0 and node >= 1.0
        spent = 1.0 if is_allowed else 0.0
        self._buckets[key] = (tokens - spent, now_s)
        self._node = (node - spent, now_s)
        if len(self._buckets) > self.MAX_ADDRESSES:
            self._buckets.popitem(last=False)
        return is_allowed


def _refill(bucket: tuple[float, float] | None, now_s: float, per_s: float, burst: float) -> float:
    if bucket is None:
        return burst
    tokens, at_s = bucket
    return min(burst, tokens + max(0.0, now_s - at_s) * per_s)


def _client_key(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class TenantSlots:
    """Counts each tenant's requests of one kind in progress on this node; one over the limit
    is a 429 (`refusal(held)` says why). With `per_node`, all tenants together hold at most
    that many too (`node_refusal(held)` says why)."""

    def __init__(
        self,
        per_tenant: int,
        refusal: Callable[[int], str],
        *,
        per_node: int | None = None,
        node_refusal: Callable[[int], str] | None = None,
    ) -> None:
        self.per_tenant = per_tenant
        self.per_node = per_node
        self._refusal = refusal
        self._node_refusal = node_refusal or refusal
        self._held: dict[str, int] = {}
        self._total = 0

    @contextlib.contextmanager
    def hold(self, tenant_id: str) -> Iterator[None]:
        held = self._held.get(tenant_id, 0)
        if held >= self.per_tenant:
            raise QuotaExceeded(self._refusal(held))
        if self.per_node is not None and self._total >= self.per_node:
            raise QuotaExceeded(self._node_refusal(self._total))
        self._held[tenant_id] = held + 1
        self._total += 1
        try:
            yield
        finally:
            self._total -= 1
            left = self._held[tenant_id] - 1
            if left:
                self._held[tenant_id] = left
            else:
                del self._held[tenant_id]
