"""The consumers this node saw receiving from each tenant's queues in the last few minutes.

In memory only, per node, never replicated: GET /v1/queues asks every node for its own
(api/fanout.py). Event loop thread only."""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable

from schedd.timeformat import format_instant
from schedd.wire.queues import CONSUMER_NAME as CONSUMER_NAME_TEXT
from schedd.wire.queues import SeenConsumer

CONSUMER_NAME = re.compile(CONSUMER_NAME_TEXT)
MAX_AGE_S = 300.0
MAX_PER_TENANT = 1_000  # (queue, consumer) pairs
MAX_ENTRIES = 100_000  # (tenant, queue, consumer) triples on this node, all tenants together
UNKNOWN = "unknown"  # the consumer of a receive without a name or a client address

Key = tuple[str, str, str]  # tenant id, queue, consumer


class RecentConsumers:
    """Who received from which queue of which tenant, and when (wall clock, as shown).

    Bounded twice: at most `max_per_tenant` (queue, consumer) pairs per tenant, and at most
    `max_entries` in all (else tenants x 1,000 would be unbounded); past either bound the least
    recently seen is forgotten first. Expiry runs on the monotonic clock, in the order entries
    were last seen (which that clock keeps), so a wall clock stepping back forgets nothing
    early or late."""

    def __init__(
        self,
        *,
        max_per_tenant: int = MAX_PER_TENANT,
        max_entries: int = MAX_ENTRIES,
        max_age_s: float = MAX_AGE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_per_tenant, self._max_entries = max_per_tenant, max_entries
        self._max_age_s, self._monotonic = max_age_s, monotonic
        self._all: OrderedDict[Key, float] = OrderedDict()  # -> seen (monotonic), oldest first
        self._tenants: dict[str, OrderedDict[tuple[str, str], int]] = {}  # -> seen (epoch ms)

    def saw(self, tenant_id: str, queue: str, consumer: str, at_ms: int) -> None:
        """Note that `consumer` received from the tenant's `queue` at `at_ms` (wall clock)."""
        self._expire()
        self._all[(tenant_id, queue, consumer)] = self._monotonic()
        self._all.move_to_end((tenant_id, queue, consumer))
        seen = self._tenants.setdefault(tenant_id, OrderedDict())
        seen[(queue, consumer)] = at_ms
        seen.move_to_end((queue, consumer))
        if len(seen) > self._max_per_tenant:
            self._forget((tenant_id, *next(iter(seen))))
        if len(self._all) > self._max_entries:
            self._forget(next(iter(self._all)))

    def recent(self, tenant_id: str) -> list[tuple[str, str, int]]:
        """(queue, consumer, last seen ms) of the tenant, seen within the window, least recently
        seen first."""
        self._expire()
        seen = self._tenants.get(tenant_id, OrderedDict())
        return [(queue, consumer, at_ms) for (queue, consumer), at_ms in seen.items()]

    def __len__(self) -> int:
        return len(self._all)

    def _expire(self) -> None:
        oldest_s = self._monotonic() - self._max_age_s
        while self._all and next(iter(self._all.values())) < oldest_s:
            self._forget(next(iter(self._all)))

    def _forget(self, key: Key) -> None:
        tenant_id, queue, consumer = key
        del self._all[key]
        seen = self._tenants[tenant_id]
        del seen[(queue, consumer)]
        if not seen:
            del self._tenants[tenant_id]


def consumer_json(queue: str, consumer: str, last_seen_ms: int, node_id: str) -> SeenConsumer:
    """One consumer as GET /v1/queues shows it (with the queue it received from)."""
    return SeenConsumer(
        queue=queue, consumer=consumer, last_seen=format_instant(last_seen_ms), node=node_id
    )
