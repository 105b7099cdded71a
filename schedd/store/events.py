"""What an applied command changed that a node's loops and caches follow: apply reports these
with its result, and the node hands each to whoever subscribed (node.py) after the entry
committed. Never part of a result, a digest or the log; a rejected command reports none.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DueAdded:
    """A due row came (a job created, updated, resumed or triggered): the dispatcher fires it
    without waiting for its next preload."""

    job_id: str
    fire_at_ms: int
    scheduled_at_ms: int
    is_trigger: bool


@dataclass(frozen=True, slots=True)
class MessagesReady:
    """A queue got messages (a claim, a nack to retry, a redrive): its long polls wake."""

    tenant_id: str
    queue: str


@dataclass(frozen=True, slots=True)
class DeliveriesReady:
    """The HTTP outbox got calls to make (a claim, a redrive): the caller looks at once."""


@dataclass(frozen=True, slots=True)
class CredentialsChanged:
    """A tenant's token changed: tokens cached for authentication are dropped."""

    tenant_id: str


@dataclass(frozen=True, slots=True)
class ConnectionChanged:
    """A tenant's broker connection was created or deleted: the deliverers' cached look-ups of
    it are dropped, so the next attempt uses what the store holds now."""

    tenant_id: str
    name: str


@dataclass(frozen=True, slots=True)
class TenantResumed:
    """A paused tenant was resumed: dispatchers read again the due rows they left while it was
    paused."""

    tenant_id: str


@dataclass(frozen=True, slots=True)
class AlertsDue:
    """Failure alerts were queued (store/alerts.py `add`): the leader's alert sender
    (delivery/alerts.py) looks at once instead of at its next poll."""


@dataclass(frozen=True, slots=True)
class StateReplaced:
    """A snapshot replaced the whole store: everything that follows applied commands starts
    over (reported by the snapshot install, not by a command)."""


Event = (
    DueAdded
    | MessagesReady
    | DeliveriesReady
    | CredentialsChanged
    | ConnectionChanged
    | TenantResumed
    | AlertsDue
    | StateReplaced
)
