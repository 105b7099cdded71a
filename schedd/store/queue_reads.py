"""Reads of the built-in queues for the API: how many messages a queue has visible, the batch
runs a receive took, and each queue of a tenant with its messages by state. Reads only; index
ranges of one tenant."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from schedd.model import idempotency_key
from schedd.store.command import stored_json
from schedd.store.ledger import batches
from schedd.store.views import QueueSummary
from schedd.wire.queues import Message


def visible_count(
    conn: sqlite3.Connection, tenant_id: str, queue: str, now_ms: int, limit: int
) -> int:
    """How many of the queue's messages are visible at `now_ms`, counted up to `limit`."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM messages WHERE tenant_id = ? AND queue = ? "
        "AND visible_at_ms <= ? LIMIT ?)",
        (tenant_id, queue, now_ms, limit),
    ).fetchone()
    count = int(row[0])
    if count < limit:
        found = batches.ready_batches(conn, tenant_id, queue, now_ms, limit - count)
        count += sum(b.counts(now_ms)[0] for b in found)
    return min(count, limit)


def taken_messages(
    conn: sqlite3.Connection, taken: Sequence[str], nonces: Sequence[str]
) -> list[Message]:
    """The per-run messages a receive took (its result's `taken`: msg_ids, log level 7), each
    under the receipt of its nonce, read from this node's store. A message whose receipt is no
    longer that one (acked, or handed out again after its visibility timeout) gives none: its
    receiver is whoever holds the current receipt."""
    receipts = [f"{nonce}.{msg_id}" for nonce, msg_id in zip(nonces, taken, strict=False)]
    if not receipts:
        return []
    ids = taken[: len(receipts)]
    rows = conn.execute(  # by key: no index on receipts (ack, nack and extend go by key too)
        "SELECT receipt, job_id, scheduled_at_ms, attempt, payload FROM messages "
        f"WHERE msg_id IN ({','.join('?' * len(ids))})",
        ids,
    ).fetchall()
    found = {row[0]: row for row in rows}  # a receipt no longer this receive's matches none
    return [
        received(job_id, scheduled_at_ms, attempt, payload, receipt)
        for receipt, job_id, scheduled_at_ms, attempt, payload in (
            found[r] for r in receipts if r in found
        )
    ]


def held_messages(
    conn: sqlite3.Connection, held: list[list[int]], nonces: Sequence[str]
) -> list[Message]:
    """The messages of the batch runs a receive took (its result's `held`: [batch_id, slot,
    ...] lists, log level 6), each under the receipt of its nonce, read from this node's
    store: a held run stays in its batch row until acked or redelivered, and a batch's runs
    never change. A batch gone meanwhile (every run of it finished and pruned) gives none."""
    runs = batches.runs_of(conn, (reference[0] for reference in held))
    messages, taken = [], iter(nonces)
    for batch_id, *slots in held:
        stored = runs.get(batch_id)
        for slot, nonce in zip(slots, taken, strict=False):
            if stored is not None:
                run = stored[slot]
                receipt = batches.receipt(nonce, batch_id, slot)
                messages.append(received(run.job_id, run.scheduled_at_ms, 1, run.payload, receipt))
    return messages


def received(
    job_id: str, scheduled_at_ms: int, attempt: int, payload: str, receipt: str
) -> Message:
    """A message as a receive answers it, from its run and its stored payload text."""
    key = idempotency_key(job_id, scheduled_at_ms)
    return Message(
        receipt=receipt,
        job_id=job_id,
        scheduled_at=key[len(job_id) + 1 :],  # "job_id:scheduled_at": formatted once
        attempt=attempt,
        idempotency_key=key,
        payload=stored_json(payload),
    )


def queue_summaries(conn: sqlite3.Connection, tenant_id: str, now_ms: int) -> list[QueueSummary]:
    """The tenant's queues (holding messages or dead letters) by name, each with its ready,
    in-flight, delayed and dead counts and the age of its oldest ready or in-flight message
    (from its run's scheduled time; None without one): the API's queue objects' counts."""
    counts: dict[str, QueueSummary] = {}
    for queue, ready, in_flight, delayed, oldest_ms in conn.execute(
        "SELECT queue, SUM(visible_at_ms <= ?), "
        "SUM(visible_at_ms > ? AND receipt IS NOT NULL), "
        "SUM(visible_at_ms > ? AND receipt IS NULL), "
        "MIN(CASE WHEN visible_at_ms <= ? OR receipt IS NOT NULL THEN scheduled_at_ms END) "
        "FROM messages WHERE tenant_id = ? GROUP BY queue",
        (now_ms, now_ms, now_ms, now_ms, tenant_id),
    ):
        counts[queue] = QueueSummary(
            name=queue,
            ready=ready,
            in_flight=in_flight,
            delayed=delayed,
            oldest_age_s=None if oldest_ms is None else max(now_ms - oldest_ms, 0) / 1000,
        )
    for batch in batches.open_batches(conn, tenant_id):
        summary = counts.setdefault(batch.queue, QueueSummary(name=batch.queue))
        ready, in_flight, delayed = batch.counts(now_ms)
        summary.ready += ready
        summary.in_flight += in_flight
        summary.delayed += delayed
        oldest = batch.oldest_open_run_ms()
        if oldest is None:
            continue
        age_s = max(now_ms - oldest, 0) / 1000
        if summary.oldest_age_s is None or age_s > summary.oldest_age_s:
            summary.oldest_age_s = age_s
    for target, dead in conn.execute(
        "SELECT target, COUNT(*) FROM deadletters WHERE tenant_id = ? GROUP BY target",
        (tenant_id,),
    ):
        name = json_name(target)
        if name is not None:
            counts.setdefault(name, QueueSummary(name=name)).dead = dead
    return sorted(counts.values(), key=lambda q: q.name)


def json_name(target: str) -> str | None:
    """The queue name of a dead letter's stored target, None for an HTTP target."""
    parsed = json.loads(target)
    name = parsed.get("name") if parsed.get("type") == "queue" else None
    return None if name is None else str(name)
