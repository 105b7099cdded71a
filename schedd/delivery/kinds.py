"""The broker deliverers a node holds, one per kind of `targets.KINDS`, each kind's module
(`TargetKind.delivery`, and its client library: redis-py, aio-pika, nats-py) imported at the
kind's first run (probe.py does the same for `/test`). A node whose tenants use no broker of a
kind never loads that library: the three cost about 150 ms of CPU at every start (0.46-0.47 s
against 0.28-0.34 s to import schedd.node with and without them, 2026-12-03), and the test
suite starts about 200 nodes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, cast

from schedd.delivery.brokers import (
    BROKER_CONNECTIONS,
    LINK_STATES,
    BrokerDeliverer,
    Lookup,
)
from schedd.delivery.outcome import Outcome
from schedd.delivery.read_limits import ReadBudgets
from schedd.guard.targets import TargetGuard
from schedd.model import RetryPolicy
from schedd.sealing import PayloadKeys
from schedd.store.outbox import DueCall
from schedd.store.queries import Tenant
from schedd.targets import KINDS, TargetKind


class LazyDeliverer:
    """A broker kind's `Deliverer`, made by `make` at the kind's first run; until then its
    connection gauges read 0."""

    def __init__(self, kind: str, make: Callable[[], BrokerDeliverer[Any, Any]]) -> None:
        self.kind = kind
        self._make = make
        self._made: BrokerDeliverer[Any, Any] | None = None
        self._is_started = False

    def start(self) -> None:
        self._is_started = True
        for state in LINK_STATES:
            BROKER_CONNECTIONS.labels(kind=self.kind, state=state).set(0)

    async def stop(self) -> None:
        if self._made is not None:
            await self._made.stop()

    async def deliver(
        self, call: DueCall, tenant: Tenant | None, started_ms: int, policy: RetryPolicy
    ) -> Outcome:
        if self._made is None:  # the import blocks the loop once, for tens of ms
            self._made = self._make()
            if self._is_started:
                self._made.start()
        return await self._made.deliver(call, tenant, started_ms, policy)


def broker_deliverers(
    payload_keys: PayloadKeys, lookup: Lookup, guard: TargetGuard, reads: ReadBudgets
) -> list[LazyDeliverer]:
    """A node's deliverers of every broker kind (`targets.KINDS`), with its guard and read
    budgets."""

    def maker(kind: TargetKind) -> Callable[[], BrokerDeliverer[Any, Any]]:
        def make() -> BrokerDeliverer[Any, Any]:
            deliverer = importlib.import_module(kind.delivery).DELIVERER
            return cast(
                BrokerDeliverer[Any, Any], deliverer(payload_keys, lookup, guard=guard, reads=reads)
            )

        return make

    return [LazyDeliverer(kind.name, maker(kind)) for kind in KINDS]
