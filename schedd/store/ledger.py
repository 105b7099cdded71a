"""The delivery ledger: the one place that writes delivery state (runs, queue messages, outbox
rows, attempts, dead letters) for the claim, the queue, HTTP outcomes, redrive and retention.

Functions take the apply transaction and typed rows; they decide nothing (no clock, no policy
beyond what they are given) and keep the statements, their order and their edge cases as the
replicated digest expects. Target kinds: "queue" is pulled by consumers from `messages`; every
other kind (http, and the brokers to come) is pushed from `outbox` by that kind's node-side sender.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from schedd.model import RunStatus, delivery_id
from schedd.store.command import compact_json

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


# ---------------------------------------------------------------- runs


def open_runs(tx: sqlite3.Connection, runs: Sequence[NewRun], now_ms: int) -> None:
    """Insert claimed runs: dispatched, or skipped (finished at once, the reason as error)."""
    tx.executemany(
        "INSERT INTO runs (job_id, scheduled_at_ms, tenant_id, fire_at_ms, status, attempt, "
        "dispatched_at_ms, finished_at_ms, error) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)",
        [
            (
                r.job_id,
                r.scheduled_at_ms,
                r.tenant_id,
                r.fire_at_ms,
                (RunStatus.SKIPPED if r.skipped else RunStatus.DISPATCHED).value,
                now_ms,
                now_ms if r.skipped else None,
                r.skipped,
            )
            for r in runs
        ],
    )


_RUN_COLUMNS = ("attempt", "error", "finished_at_ms")


def set_runs(tx: sqlite3.Connection, changes: Sequence[RunChange]) -> None:
    """Write run statuses; every change of one call must leave the same columns at KEEP."""
    if not changes:
        return
    written = [c for c in _RUN_COLUMNS if getattr(changes[0], c) is not KEEP]
    assignments = ", ".join(f"{column} = ?" for column in ("status", *written))
    rows = []
    for change in changes:
        if [c for c in _RUN_COLUMNS if getattr(change, c) is not KEEP] != written:
            raise ValueError("set_runs: changes of one call must write the same columns")
        values = [getattr(change, column) for column in written]
        rows.append((change.status.value, *values, change.job_id, change.scheduled_at_ms))
    tx.executemany(f"UPDATE runs SET {assignments} WHERE job_id = ? AND scheduled_at_ms = ?", rows)


# ---------------------------------------------------------------- deliveries


def claimed_delivery(
    run: NewRun,
    *,
    partition: int,
    target: Mapping[str, Any],
    payload: Any,
    retry: Any,
    now_ms: int,
) -> Delivery:
    """A claimed run's delivery, by its target's kind: a message visible now with no receive
    yet, or an outbox row due now for its first attempt (JSON values copied from the job)."""
    if target["type"] in PULLED_KINDS:
        return QueueDelivery(
            msg_id=delivery_id(run.job_id, run.scheduled_at_ms),
            tenant_id=run.tenant_id,
            queue=target["name"],
            job_id=run.job_id,
            scheduled_at_ms=run.scheduled_at_ms,
            attempt=0,
            visible_at_ms=now_ms,
            payload=compact_json(payload),
            retry=compact_json(retry),
        )
    return OutboxDelivery(
        partition=partition,
        tenant_id=run.tenant_id,
        job_id=run.job_id,
        scheduled_at_ms=run.scheduled_at_ms,
        attempt=1,
        due_at_ms=now_ms,
        target=compact_json(target),
        payload=compact_json(payload),
        retry=compact_json(retry),
    )


_MESSAGE = (
    "INTO messages (msg_id, tenant_id, queue, job_id, scheduled_at_ms, attempt, visible_at_ms, "
    "receipt, payload, retry) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)"
)
_OUTBOX = (
    "INSERT INTO outbox (partition, tenant_id, job_id, scheduled_at_ms, attempt, due_at_ms, "
    "target, payload, retry) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def enqueue(
    tx: sqlite3.Connection, deliveries: Sequence[Delivery], *, is_redrive: bool = False
) -> None:
    """Write deliveries: every message, then every outbox row (seq in the order given). A
    redrive replaces a message of the same id; a claim's insert must find none."""
    messages = [d for d in deliveries if isinstance(d, QueueDelivery)]
    tx.executemany(
        ("INSERT OR REPLACE " if is_redrive else "INSERT ") + _MESSAGE,
        [_row(d) for d in messages],
    )
    tx.executemany(_OUTBOX, [_row(d) for d in deliveries if isinstance(d, OutboxDelivery)])


def _row(row: Delivery | Attempt | DeadLetter) -> tuple[Any, ...]:
    """A dataclass's values in field order: the column order of its statement."""
    return tuple(getattr(row, f.name) for f in fields(row))


def hand_out(tx: sqlite3.Connection, handed: Sequence[tuple[str, int, int, str]]) -> None:
    """Messages received: (msg_id, attempt, visible_at_ms, receipt) each."""
    tx.executemany(
        "UPDATE messages SET attempt = ?, visible_at_ms = ?, receipt = ? WHERE msg_id = ?",
        [(attempt, visible_at, receipt, msg_id) for msg_id, attempt, visible_at, receipt in handed],
    )


def extend(tx: sqlite3.Connection, msg_ids: Sequence[str], visible_at_ms: int) -> None:
    """Keep received messages invisible until `visible_at_ms`."""
    tx.executemany(
        "UPDATE messages SET visible_at_ms = ? WHERE msg_id = ?",
        [(visible_at_ms, msg_id) for msg_id in msg_ids],
    )


def schedule_retry(tx: sqlite3.Connection, delivery: str | int, due_at_ms: int) -> None:
    """Make a failed delivery due again at `due_at_ms` (see `retry.retry_delay_ms`): a message
    (by msg_id) becomes visible, unreceived; an outbox row (by seq) moves to its next attempt."""
    if isinstance(delivery, str):
        tx.execute(
            "UPDATE messages SET visible_at_ms = ?, receipt = NULL WHERE msg_id = ?",
            (due_at_ms, delivery),
        )
    else:
        tx.execute(
            "UPDATE outbox SET attempt = attempt + 1, due_at_ms = ? WHERE seq = ?",
            (due_at_ms, delivery),
        )


def remove(tx: sqlite3.Connection, deliveries: Sequence[str | int]) -> None:
    """Delete deliveries that are done: messages by msg_id, outbox rows by seq."""
    msg_ids = [(d,) for d in deliveries if isinstance(d, str)]
    seqs = [(d,) for d in deliveries if isinstance(d, int)]
    if msg_ids:
        tx.executemany("DELETE FROM messages WHERE msg_id = ?", msg_ids)
    if seqs:
        tx.executemany("DELETE FROM outbox WHERE seq = ?", seqs)


# ---------------------------------------------------------------- attempts


def start_attempts(tx: sqlite3.Connection, attempts: Sequence[Attempt]) -> None:
    """Attempts begun (a queue receive): a new row each, replacing a leftover of that number."""
    tx.executemany(
        "INSERT OR REPLACE INTO attempts (job_id, scheduled_at_ms, attempt, started_at_ms) "
        "VALUES (?, ?, ?, ?)",
        [(a.job_id, a.scheduled_at_ms, a.attempt, a.started_at_ms) for a in attempts],
    )


def finish_attempts(
    tx: sqlite3.Connection,
    attempts: Sequence[tuple[str, int, int]],
    *,
    finished_at_ms: int,
    outcome: str,
    error: str | None = None,
) -> None:
    """End started attempts, each (job_id, scheduled_at_ms, attempt); error None keeps the
    recorded one. An attempt with no row (pruned) is not recreated."""
    tx.executemany(
        "UPDATE attempts SET finished_at_ms = ?, outcome = ?, error = COALESCE(?, error) "
        "WHERE job_id = ? AND scheduled_at_ms = ? AND attempt = ?",
        [(finished_at_ms, outcome, error, *key) for key in attempts],
    )


def record_attempts(tx: sqlite3.Connection, attempts: Sequence[Attempt]) -> None:
    """Whole attempts (a pushed call, reported once done). The caller decides which outcome is
    first for its attempt (the delivery row's attempt); this writes what it is given."""
    tx.executemany(
        "INSERT OR REPLACE INTO attempts (job_id, scheduled_at_ms, attempt, started_at_ms, "
        "finished_at_ms, outcome, error) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [_row(a) for a in attempts],
    )


# ---------------------------------------------------------------- dead letters


def queue_target(queue: str) -> str:
    """A queue message's target as its dead letter stores it (text kept as written since v1)."""
    return json.dumps({"type": "queue", "name": queue})


def bury(tx: sqlite3.Connection, delivery: str | int, dead: DeadLetter, run: RunChange) -> None:
    """A delivery out of attempts: its row goes, a dead letter comes (replacing one of that id),
    and the run is marked dead."""
    remove(tx, [delivery])
    tx.execute(
        "INSERT OR REPLACE INTO deadletters (id, tenant_id, job_id, scheduled_at_ms, attempts, "
        "error, target, payload, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        _row(dead),
    )
    set_runs(tx, [run])


def unbury(tx: sqlite3.Connection, dead_id: str) -> None:
    """A dead letter redriven or deleted."""
    tx.execute("DELETE FROM deadletters WHERE id = ?", (dead_id,))
