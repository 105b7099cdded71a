"""The ledger's typed rows: runs, deliveries (a queue message or an outbox row), attempts and
dead letters, as the ledger's functions take them. Plain data: no SQL here but column order.

Named tuples, not dataclasses: apply builds one per run on the claim, receive and ack paths, and
a named tuple costs a third of a frozen dataclass to build; a row's fields are also the values
of its statement, in column order. Build them by keyword."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from schedd.model import RunStatus

PULLED_KINDS = frozenset({"queue"})  # kinds whose consumers receive from `messages`


class Keep(Enum):
    KEEP = "keep"


KEEP = Keep.KEEP  # a run column left as it is


class NewRun(NamedTuple):
    """A claimed run; `skipped` is the reason a run was recorded and not delivered."""

    job_id: str
    scheduled_at_ms: int
    tenant_id: str
    fire_at_ms: int
    skipped: str | None = None


class QueueDelivery(NamedTuple):
    """A message in the built-in queue; `attempt` counts receives so far."""

    msg_id: str
    tenant_id: str
    queue: str
    job_id: str
    scheduled_at_ms: int
    attempt: int
    visible_at_ms: int
    payload: str  # JSON texts, as the claim copied them from the job
    retry: str


class OutboxDelivery(NamedTuple):
    """A pushed delivery (any kind but "queue"); `attempt` is the next one to make."""

    partition: int
    tenant_id: str
    job_id: str
    scheduled_at_ms: int
    attempt: int
    due_at_ms: int
    target: str
    payload: str
    retry: str


Delivery = QueueDelivery | OutboxDelivery


class RunChange(NamedTuple):
    """A run's new status; a column left at KEEP is not written (None writes NULL)."""

    job_id: str
    scheduled_at_ms: int
    status: RunStatus
    attempt: int | Keep = KEEP
    error: str | Keep | None = KEEP
    finished_at_ms: int | Keep | None = KEEP


class Attempt(NamedTuple):
    """One attempt's record: started only (a queue receive), or whole (a pushed call)."""

    job_id: str
    scheduled_at_ms: int
    attempt: int
    started_at_ms: int
    finished_at_ms: int | None = None
    outcome: str | None = None
    error: str | None = None


class DeadLetter(NamedTuple):
    id: str
    tenant_id: str
    job_id: str
    scheduled_at_ms: int
    attempts: int
    error: str | None
    target: str
    payload: str
    created_at_ms: int


class OutboxRow(NamedTuple):
    seq: int
    tenant_id: str
    job_id: str
    scheduled_at_ms: int
    attempt: int
    target: str
    payload: str
    retry: str


class Reported(NamedTuple):
    """A sender's report of one attempt; job_id/scheduled_at_ms are None in old log entries."""

    seq: int
    attempt: int
    job_id: str | None = None
    scheduled_at_ms: int | None = None
