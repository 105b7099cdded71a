"""The consumers this node saw receiving from each tenant's queues in the last few minutes.

In memory only, per node, bounded per tenant (the least recently seen is forgotten first);
never replicated: GET /v1/queues asks every node for its own (api/fanout.py). Event loop
thread only."""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from schedd.timeformat import format_instant

CONSUMER_NAME = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")
MAX_AGE_MS = 5 * 60_000
MAX_PER_TENANT = 1_000  # (queue, consumer) pairs
UNKNOWN = "unknown"  # the consumer of a receive without a name or a client address


class RecentConsumers:
    """tenant -> (queue, consumer) -> when last seen (epoch ms), oldest first."""

    def __init__(
        self, *, max_per_tenant: int = MAX_PER_TENANT, max_age_ms: int = MAX_AGE_MS
    ) -> None:
        self._max_per_tenant, self._max_age_ms = max_per_tenant, max_age_ms
        self._tenants: dict[str, OrderedDict[tuple[str, str], int]] = {}
        self._swept_ms = 0

    def saw(self, tenant_id: str, queue: str, consumer: str, now_ms: int) -> None:
        """Note that `consumer` received from the tenant's `queue` at `now_ms`."""
        seen = self._tenants.setdefault(tenant_id, OrderedDict())
        seen[(queue, consumer)] = now_ms
        seen.move_to_end((queue, consumer))
        while len(seen) > self._max_per_tenant:
            seen.popitem(last=False)
        if now_ms - self._swept_ms >= self._max_age_ms:  # tenants nobody asks about, too
            self._swept_ms = now_ms
            for tenant in list(self._tenants):
                self._expire(tenant, now_ms)

    def recent(self, tenant_id: str, now_ms: int) -> list[tuple[str, str, int]]:
        """(queue, consumer, last seen ms) of the tenant, seen within the window, oldest first."""
        self._expire(tenant_id, now_ms)
        seen = self._tenants.get(tenant_id, OrderedDict())
        return [(queue, consumer, at_ms) for (queue, consumer), at_ms in seen.items()]

    def _expire(self, tenant_id: str, now_ms: int) -> None:
        seen = self._tenants.get(tenant_id)
        if seen is None:
            return
        while seen and next(iter(seen.values())) < now_ms - self._max_age_ms:
            seen.popitem(last=False)
        if not seen:
            del self._tenants[tenant_id]


def consumer_json(queue: str, consumer: str, last_seen_ms: int, node_id: str) -> dict[str, Any]:
    """One consumer as GET /v1/queues shows it (with the queue it received from)."""
    return {
        "queue": queue,
        "consumer": consumer,
        "last_seen": format_instant(last_seen_ms),
        "node": node_id,
    }
