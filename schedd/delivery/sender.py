"""The sender seam: how the deliveries of a pushed target kind leave a node.

The claim writes every run whose target kind is not "queue" as an outbox row holding the target's
JSON (store/ledger). On the node that leases the row's partition, one outbox sender (caller.py)
takes due rows tenant by tenant, hands each to the `Deliverer` of the row's kind, and proposes
every attempt's `Outcome` with `record_callbacks`; apply then retries, buries or succeeds the run
through the ledger, whatever the kind. A new broker kind is its module in schedd/targets/, its
entry in `targets.KINDS` and its Deliverer (delivery/<kind>.py, made lazily by kinds.py): no
claim, apply, ledger or loop code changes (docs/delivery.md "Adding a target kind").
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import msgspec

from schedd.delivery.outcome import Outcome
from schedd.model import RetryPolicy
from schedd.store.outbox import DueCall
from schedd.store.queries import Tenant
from schedd.stored_spec import load_target_fields


@runtime_checkable
class Deliverer(Protocol):
    """Makes attempts of one target kind. `start()` on the node's loop before the first
    `deliver`, `stop()` at shutdown (pooled connections live between the two)."""

    kind: str

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def deliver(
        self, call: DueCall, tenant: Tenant | None, started_ms: int, policy: RetryPolicy
    ) -> Outcome:
        """One attempt of `call` (its target JSON is `call.target`). Never raises for a remote
        failure: a refusal, timeout or error answer is an Outcome (RETRY carries a Retry-After
        floor in `retry_after_ms` when the remote asked for one). The tenant is None once it is
        gone."""
        ...


@runtime_checkable
class Sender(Protocol):
    """What the node holds of its outbox sender: start, wake on committed deliveries, stop."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def wake_threadsafe(self) -> None: ...

    @property
    def calls_in_flight(self) -> int: ...


@functools.lru_cache(maxsize=4096)
def target_kind(target: str) -> str:
    """The kind of an outbox row's target JSON text ("http", ...); "" if it names none."""
    try:
        kind = load_target_fields(target).type
    except msgspec.DecodeError:  # not JSON, or not an object
        return ""
    return kind if isinstance(kind, str) else ""


def deliverer_for(deliverers: Mapping[str, Deliverer], call: DueCall) -> Deliverer | None:
    """The deliverer for a due row's kind; None if this node has none (an older version)."""
    return deliverers.get(target_kind(call.target))
