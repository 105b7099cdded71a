"""The ledger's typed rows: runs, deliveries (a queue message or an outbox row), attempts and
dead letters, as the ledger's functions take them. Plain data: no SQL here but column order."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, NamedTuple

from schedd.model import RunStatus

PULLED_KINDS = frozenset({"queue"})  # kinds whose consumers receive from `messages`


class Keep(Enum):
    KEEP = "keep"


KEEP = Keep.KEEP  # a run column left as it is


@dataclass(frozen=True, slots=True, kw_only=True)
class NewRun:
    """A claimed run; `skipped` is the reason a run was recorded and not delivered."""

    job_id: str
    scheduled_at_ms: int
    tenant_id: str
    fire_at_ms: int
    skipped: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDelivery:
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


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxDelivery:
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


@dataclass(frozen=True, slots=True, kw_only=True)
class RunChange:
    """A run's new status; a column left at KEEP is not written (None writes NULL)."""

    job_id: str
    scheduled_at_ms: int
    status: RunStatus
    attempt: int | Keep = KEEP
    error: str | Keep | None = KEEP
    finished_at_ms: int | Keep | None = KEEP


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One attempt's record: started only (a queue receive), or whole (a pushed call)."""

    job_id: str
    scheduled_at_ms: int
    attempt: int
    started_at_ms: int
    finished_at_ms: int | None = None
    outcome: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
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


def values(row: Delivery | Attempt | DeadLetter) -> tuple[Any, ...]:
    """A dataclass's values in field order: the column order of its statement."""
    getter = _GETTERS.get(type(row))
    if getter is None:  # one attrgetter per row class: apply writes thousands of rows a second
        getter = _GETTERS[type(row)] = operator.attrgetter(*(f.name for f in fields(row)))
    result: tuple[Any, ...] = getter(row)
    return result


_GETTERS: dict[type, Callable[[Any], Any]] = {}
