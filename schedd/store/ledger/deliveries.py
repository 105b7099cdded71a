"""Ledger writes of deliveries: enqueue (by target kind), hand out, retry, remove, bury in a dead
letter; and which outbox row a sender's report is for (the first outcome of an attempt wins)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import msgspec

from schedd.model import delivery_id
from schedd.store.ledger.rows import (
    PULLED_KINDS,
    DeadLetter,
    Delivery,
    NewRun,
    OutboxDelivery,
    OutboxRow,
    QueueDelivery,
    Reported,
    RunChange,
)
from schedd.store.ledger.runs import set_runs
from schedd.stored_spec import load_spec
from schedd.stored_spec import queue_name as stored_queue_name


class JobDelivery(msgspec.Struct, frozen=True):
    """What a claim copies from a job's stored spec (stored_spec.load_spec): its target's kind
    and queue name as stored, and the target, payload and retry policy as the spec's own JSON
    text (no parse and re-encode)."""

    kind: Any  # the target's "type", as stored
    queue: Any  # the target's "name", as stored (UNSET when it has none)
    target: str
    payload: str
    retry: str
    max_runs: int | None = None  # the job's run limit (level 8), when its spec has one


def job_delivery(spec: str) -> JobDelivery:
    """The delivery fields of a job's stored spec (JSON text), read once per claimed run. A spec
    without a target or a retry policy (none was ever stored) fails as it always did."""
    stored = load_spec(spec)
    if stored.target and not stored.retry:  # a missing target is named first, as before
        raise msgspec.ValidationError("Object missing required field `retry`")
    target = stored.target_fields()
    return JobDelivery(
        target.type,
        target.name,
        bytes(stored.target).decode(),
        bytes(stored.payload).decode(),
        bytes(stored.retry).decode(),
        stored.run_limit(),
    )


def claimed_delivery(run: NewRun, *, partition: int, job: JobDelivery, now_ms: int) -> Delivery:
    """A claimed run's delivery, by its target's kind: a message visible now with no receive
    yet, or an outbox row due now for its first attempt (JSON texts copied from the job)."""
    if job.kind in PULLED_KINDS:
        return QueueDelivery(  # by position: a claim builds thousands a second
            delivery_id(run.job_id, run.scheduled_at_ms),  # msg_id
            run.tenant_id,
            queue_name(job),
            run.job_id,
            run.scheduled_at_ms,
            0,  # attempt: no receive yet
            now_ms,  # visible_at_ms
            job.payload,
            job.retry,
        )
    return OutboxDelivery(
        partition=partition,
        tenant_id=run.tenant_id,
        job_id=run.job_id,
        scheduled_at_ms=run.scheduled_at_ms,
        attempt=1,
        due_at_ms=now_ms,
        target=job.target,
        payload=job.payload,
        retry=job.retry,
    )


def queue_name(job: JobDelivery) -> Any:
    return stored_queue_name(job.queue)


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
        messages,
    )
    tx.executemany(_OUTBOX, [d for d in deliveries if isinstance(d, OutboxDelivery)])


def hand_out(tx: sqlite3.Connection, handed: Sequence[tuple[str, int, int, str]]) -> None:
    """Messages received: (msg_id, attempt, visible_at_ms, receipt) each."""
    tx.executemany(
        "UPDATE messages SET attempt = ?2, visible_at_ms = ?3, receipt = ?4 WHERE msg_id = ?1",
        handed,
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


def reported_rows(tx: sqlite3.Connection, reports: Sequence[Reported]) -> list[OutboxRow | None]:
    """The outbox row each report is for, or None if stale. The first outcome recorded for an
    attempt wins: a later one finds the row gone (done, dead) or at a later attempt (retried),
    and a seq named twice in one batch is stale the second time."""
    seqs = sorted({r.seq for r in reports})
    marks = ",".join("?" * len(seqs))
    rows = {
        row[0]: OutboxRow._make(row)
        for row in tx.execute(
            f"SELECT {', '.join(OutboxRow._fields)} FROM outbox WHERE seq IN ({marks})", seqs
        )
    }
    found: list[OutboxRow | None] = []
    for report in reports:
        row = rows.pop(report.seq, None)
        found.append(row if row is not None and _is_for(row, report) else None)
    return found


def _is_for(row: OutboxRow, report: Reported) -> bool:
    """Does the report belong to this row's current attempt (of this very run)?"""
    job_id = row.job_id if report.job_id is None else report.job_id
    at_ms = row.scheduled_at_ms if report.scheduled_at_ms is None else report.scheduled_at_ms
    return row.attempt == report.attempt and (job_id, at_ms) == (row.job_id, row.scheduled_at_ms)


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
        dead,
    )
    set_runs(tx, [run])


def unbury(tx: sqlite3.Connection, dead_id: str) -> None:
    """A dead letter redriven or deleted."""
    tx.execute("DELETE FROM deadletters WHERE id = ?", (dead_id,))
