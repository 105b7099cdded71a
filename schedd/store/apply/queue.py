"""Apply functions for the built-in queue: receive, ack, nack, extend; retries and dead letters.

Each receive starts an attempt of the run; a nack or an expired visibility timeout ends it as
failed, and the job's retry policy decides when the message is visible again or that it is dead.
"""

from __future__ import annotations

import itertools
import sqlite3
from typing import Any, NamedTuple

from schedd.model import RunStatus, idempotency_key
from schedd.retry import has_attempts_left, retry_delay_ms
from schedd.store import dependencies, ledger, pauses, run_outputs
from schedd.store.apply import failures
from schedd.store.command import (
    Applied,
    Command,
    Handler,
    Result,
    fast_canonical_json,
    ok,
    stored_json,
    stored_json_as_canonical,
)
from schedd.store.commands import AckMessages, ExtendMessages, NackMessages, ReceiveMessages
from schedd.store.events import DueAdded, Event, MessagesReady
from schedd.store.ledger import batches
from schedd.store.pauses import Scope
from schedd.stored_spec import load_retry

SUCCEEDED: dependencies.Ended = "succeeded"  # how a run ended, for the jobs that run after it
DEAD: dependencies.Ended = "dead"


class Message(NamedTuple):
    msg_id: str
    job_id: str
    scheduled_at_ms: int
    attempt: int
    receipt: str | None
    payload: str
    retry: str


_COLUMNS = ", ".join(Message._fields)


def receive_messages(tx: sqlite3.Connection, cmd: Command[ReceiveMessages]) -> Result:
    """Hand out up to `max` visible messages, each as a new attempt under a fresh receipt.

    A receipt is "<nonce>.<msg_id>": the proposer's random nonce, and the message it names, so
    ack, nack and extend find the message by its key. Per-run messages go first (retries and
    redeliveries), then slots of the queue's batches (level 4), whose receipts are
    "<nonce>.~<batch_id>.<slot>". The answer names what was taken by reference where the
    command asks so (levels 6 and 7), and holds the rest as deliveries.
    """
    b = cmd.body
    # A paused queue (level 8) hands out nothing: the answer of a receive that found none.
    most = 0 if pauses.find(tx, Scope.QUEUE, b.tenant_id, b.queue) else b.max
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM messages WHERE tenant_id = ? AND queue = ? "
        "AND visible_at_ms <= ? ORDER BY visible_at_ms, msg_id LIMIT ?",
        (b.tenant_id, b.queue, cmd.ts_ms, most),
    ).fetchall()
    messages = []
    followers: list[Event] = []
    for message in map(Message._make, rows):
        timed_out = message.receipt is not None  # its visibility timeout passed without an ack
        if not timed_out or _fail_attempt(
            tx, cmd, message, "visibility timeout expired", "timed_out", followers
        ):
            messages.append(message)
    room = min(most, len(b.receipts)) - len(messages)
    held = _receive_batches(tx, cmd, messages, room, followers)
    nonces = b.receipts
    receipts = [f"{nonce}.{m.msg_id}" for nonce, m in zip(nonces, messages, strict=False)]
    _hand_out(tx, cmd, messages, receipts)
    delivered: list[dict[str, object]] = []  # the whole form (before level 6 and 7)
    payloads: list[str] = []
    fields: dict[str, object] = {"messages": delivered}
    if b.runs_by_reference:
        fields["taken"] = [m.msg_id for m in messages]
    else:
        for m, receipt in zip(messages, receipts, strict=True):
            delivered.append(
                _message(m.job_id, m.scheduled_at_ms, m.attempt + 1, m.payload, receipt)
            )
            payloads.append(m.payload)
    if b.by_reference:
        fields["held"] = _references(held)
    else:
        for nonce, (batch, slot) in zip(nonces[len(receipts) :], held, strict=False):
            run = batch.runs[slot]
            receipt = batches.receipt(nonce, batch.batch_id, slot)
            delivered.append(_message(run.job_id, run.scheduled_at_ms, 1, run.payload, receipt))
            payloads.append(run.payload)
    kept = fast_canonical_json({"status": "ok", **fields})
    for delivery, payload in zip(delivered, payloads, strict=True):
        delivery["payload"] = stored_json(payload)  # what the receiver is answered
    return Applied(fields, tuple(followers), kept=kept)


def _message(
    job_id: str, scheduled_at_ms: int, attempt: int, payload: str, receipt: str
) -> dict[str, object]:
    """A delivery as kept (API.md's message object, its payload's floats as canonical_json
    writes them): the whole form, which levels 6 and 7 name by reference instead."""
    key = idempotency_key(job_id, scheduled_at_ms)
    return {
        "receipt": receipt,
        "job_id": job_id,
        "scheduled_at": key[len(job_id) + 1 :],  # "job_id:scheduled_at": formatted once
        "attempt": attempt,
        "idempotency_key": key,
        "payload": stored_json_as_canonical(payload),
    }


def _references(held: list[tuple[batches.Batch, int]]) -> list[list[int]]:
    """The slots taken as [batch_id, slot, ...] lists, in the order taken."""
    references: list[list[int]] = []
    for batch, slot in held:
        if not references or references[-1][0] != batch.batch_id:
            references.append([batch.batch_id])
        references[-1].append(slot)
    return references


def _receive_batches(
    tx: sqlite3.Connection,
    cmd: Command[ReceiveMessages],
    messages: list[Message],
    room: int,
    followers: list[Event],
) -> list[tuple[batches.Batch, int]]:
    """Take up to `room` slots of the queue's batches, oldest first: a ready slot is held
    (attempt 1); a held one past its deadline is spilled and fails as timed out, and if it is
    retried it joins `messages` (handed out the per-run way)."""
    if room <= 0:
        return []
    now, b = cmd.ts_ms, cmd.body
    held: list[tuple[batches.Batch, int]] = []
    touched = []
    for batch in batches.ready_batches(tx, b.tenant_id, b.queue, now, room):
        touched.append(batch)
        for slot in list(batch.eligible(now)):
            if room <= 0:
                break
            room -= 1
            if batch.slots[slot] == batches.READY:
                batch.hold(slot, now, now + b.visibility_ms)
                held.append((batch, slot))
                continue
            message = _spilled(tx, batch, slot, now)
            if _fail_attempt(
                tx, cmd, message, "visibility timeout expired", "timed_out", followers
            ):
                messages.append(message)
    batches.save_all(tx, touched, now)
    return held


def _spilled(tx: sqlite3.Connection, batch: batches.Batch, slot: int, now_ms: int) -> Message:
    """A batch slot written out as a per-run message (batches.spill), as the Message the
    per-run code fails or expires: one that was received carries a receipt (never compared:
    the caller ends its attempt at once)."""
    run = batch.runs[slot]
    msg_id, received = batches.spill(tx, batch, slot, now_ms)
    receipt = "" if received else None
    return Message(
        msg_id, run.job_id, run.scheduled_at_ms, int(received), receipt, run.payload, run.retry
    )


def expire_batch_slots(
    tx: sqlite3.Connection, cmd: Command[Any], tenant_id: str, cutoff_ms: int, error: str, most: int
) -> int:
    """Retention: batch runs visible since before the cutoff and not received since (or held
    past their deadline) become dead letters the per-run way; returns how many. A batch is
    never split: the batch that reaches `most` is the last."""
    expired = 0
    for row in tx.execute(
        f"SELECT {batches.COLUMNS} FROM batches INDEXED BY batches_ready WHERE tenant_id = ? "
        "AND ready_at_ms < ? ORDER BY ready_at_ms, batch_id",
        (tenant_id, cutoff_ms),
    ).fetchall():
        if expired >= most:
            break
        batch = batches.Batch(*row, conn=tx)
        for slot in list(batch.eligible(cutoff_ms - 1)):
            message = _spilled(tx, batch, slot, cmd.ts_ms)
            expire_message(tx, cmd, message, tenant_id=tenant_id, queue=batch.queue, error=error)
            expired += 1
        batch.save(tx, cmd.ts_ms)
    return expired


def _hand_out(
    tx: sqlite3.Connection,
    cmd: Command[ReceiveMessages],
    messages: list[Message],
    receipts: list[str],
) -> None:
    """Each message's next attempt starts now, under its receipt; its run is delivered."""
    now, visible_at = cmd.ts_ms, cmd.ts_ms + cmd.body.visibility_ms
    ledger.hand_out(
        tx,
        [(m.msg_id, m.attempt + 1, visible_at, r) for m, r in zip(messages, receipts, strict=True)],
    )
    ledger.start_attempts(
        tx, [(m.job_id, m.scheduled_at_ms, m.attempt + 1) for m in messages], started_at_ms=now
    )
    ledger.mark_runs(
        tx,
        RunStatus.DELIVERED,
        [(m.attempt + 1, m.job_id, m.scheduled_at_ms) for m in messages],
        columns=("attempt",),
    )


def _run(message: Message, status: RunStatus, **columns: Any) -> ledger.RunChange:
    """The change of a message's run to `status`, writing only the columns given."""
    return ledger.RunChange(
        job_id=message.job_id, scheduled_at_ms=message.scheduled_at_ms, status=status, **columns
    )


def _current_attempt(message: Message) -> tuple[str, int, int]:
    """The message's current attempt, as the ledger names one."""
    return message.job_id, message.scheduled_at_ms, message.attempt


def _by_receipts(
    tx: sqlite3.Connection, cmd: Command[AckMessages | NackMessages | ExtendMessages]
) -> list[Message]:
    """The tenant's messages in this queue that the command's receipts hold now (each once)."""
    wanted = {str(r) for r in cmd.body.receipts}
    # A batch's receipt names no message ("<nonce>.~<batch>.<slot>": no msg_id starts so).
    ids = sorted(
        {i for r in wanted if (i := r.partition(".")[2]) and not i.startswith(batches.RECEIPT_MARK)}
    )
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = tx.execute(
        # "+": look messages up by key, not by the tenant's (possibly huge) queue index
        f"SELECT {_COLUMNS} FROM messages WHERE msg_id IN ({marks}) AND +tenant_id = ? "
        "AND +queue = ? ORDER BY msg_id",
        (*ids, cmd.body.tenant_id, cmd.body.queue),
    )
    return [m for m in map(Message._make, rows) if m.receipt in wanted]


def ack_messages(tx: sqlite3.Connection, cmd: Command[AckMessages]) -> Result:
    """The consumer finished: the run succeeded. Unknown or expired receipts are not counted."""
    messages = _by_receipts(tx, cmd)
    now = cmd.ts_ms
    ledger.remove(tx, [m.msg_id for m in messages])
    attempts = [(m.job_id, m.scheduled_at_ms, m.attempt) for m in messages]
    ledger.finish_attempts(tx, attempts, finished_at_ms=now, outcome="succeeded")
    ledger.mark_runs(
        tx,
        RunStatus.SUCCEEDED,
        [(now, m.job_id, m.scheduled_at_ms) for m in messages],
        columns=("finished_at_ms",),
    )
    held = _held(tx, cmd)
    for batch, slot in held:
        batch.finish(slot, batches.DONE, now)
    batches.save_all(tx, (batch for batch, _ in held), now)
    if cmd.body.outputs:
        _keep_outputs(tx, cmd.body.outputs, messages, held)
    ended = itertools.chain(
        ((m.job_id, m.scheduled_at_ms, SUCCEEDED) for m in messages),
        ((b.runs[slot].job_id, b.runs[slot].scheduled_at_ms, SUCCEEDED) for b, slot in held),
    )
    followers = dependencies.follow(tx, now, cmd.body.tenant_id, ended)
    return ok(*followers, acked=len(messages) + len(held))


def _keep_outputs(
    tx: sqlite3.Connection,
    outputs: dict[str, str],
    messages: list[Message],
    held: list[tuple[batches.Batch, int]],
) -> None:
    """The outputs the command reports for the attempts its receipts end (level 12): a
    message's current attempt, a batch slot's first (a receipt the command does not end: none)."""
    kept = [
        (m.job_id, m.scheduled_at_ms, m.attempt, outputs[m.receipt])
        for m in messages
        if m.receipt in outputs
    ]
    slots = _by_slot(outputs)
    for batch, slot in held:
        text = slots.get((batch.batch_id, slot))
        if text is not None:
            run = batch.runs[slot]
            kept.append((run.job_id, run.scheduled_at_ms, 1, text))
    run_outputs.keep(tx, kept)


def _by_slot(outputs: dict[str, str]) -> dict[tuple[int, int] | None, str]:
    """The outputs of batch receipts by (batch_id, slot)."""
    return {batches.parse_receipt(receipt): text for receipt, text in outputs.items()}


def _held(
    tx: sqlite3.Connection, cmd: Command[AckMessages | NackMessages | ExtendMessages]
) -> list[tuple[batches.Batch, int]]:
    """The batch slots of this tenant's queue that the command's receipts hold now."""
    b = cmd.body
    return batches.held_by_receipts(tx, b.tenant_id, b.queue, map(str, b.receipts))


def nack_messages(tx: sqlite3.Connection, cmd: Command[NackMessages]) -> Result:
    """The consumer failed: retry per the job's policy, or make the run a dead letter."""
    nacked = 0
    error = (cmd.body.error or "nacked")[:4000]
    followers: list[Event] = []
    outputs, dead = cmd.body.outputs, cmd.body.dead  # level 12
    kept: list[tuple[str, int, int, str]] = []
    for message in _by_receipts(tx, cmd):
        if message.receipt in outputs:
            text = outputs[message.receipt]
            kept.append((message.job_id, message.scheduled_at_ms, message.attempt, text))
        _fail_attempt(tx, cmd, message, error, "failed", followers, dead=dead)
        nacked += 1
    held = _held(tx, cmd)
    slot_outputs = _by_slot(outputs)
    for batch, slot in held:
        message = _spilled(tx, batch, slot, cmd.ts_ms)
        printed = slot_outputs.get((batch.batch_id, slot))
        if printed is not None:
            kept.append((message.job_id, message.scheduled_at_ms, message.attempt, printed))
        _fail_attempt(tx, cmd, message, error, "failed", followers, dead=dead)
        nacked += 1
    batches.save_all(tx, (batch for batch, _ in held), cmd.ts_ms)
    if kept:
        run_outputs.keep(tx, kept)
    fed = [MessagesReady(cmd.body.tenant_id, cmd.body.queue)] if nacked else []
    return ok(*fed, *followers, nacked=nacked)


def extend_messages(tx: sqlite3.Connection, cmd: Command[ExtendMessages]) -> Result:
    """Keep messages invisible for longer while their consumer works on them."""
    messages = _by_receipts(tx, cmd)
    deadline = cmd.ts_ms + cmd.body.visibility_ms
    ledger.extend(tx, [m.msg_id for m in messages], deadline)
    held = _held(tx, cmd)
    for batch, slot in held:
        batch.extend(slot, deadline)
    batches.save_all(tx, (batch for batch, _ in held), cmd.ts_ms)
    return ok(extended=len(messages) + len(held))


def _fail_attempt(
    tx: sqlite3.Connection,
    cmd: Command[Any],
    message: Message,
    error: str,
    outcome: str,
    followers: list[Event],
    *,
    dead: bool = False,
) -> bool:
    """End the current attempt as failed; True if the run will be tried again (else it is
    dead, at once when `dead` says so, and the runs its end gives other jobs are added to
    `followers`)."""
    now = cmd.ts_ms
    ledger.finish_attempts(
        tx, [_current_attempt(message)], finished_at_ms=now, outcome=outcome, error=error
    )
    policy = load_retry(message.retry)
    if not dead and has_attempts_left(policy, message.attempt):
        delay = retry_delay_ms(policy, message.attempt, message.msg_id)
        ledger.schedule_retry(tx, message.msg_id, now + delay)
        ledger.set_runs(tx, [_run(message, RunStatus.RETRYING, error=error)])
        return True
    followers += _bury(
        tx, cmd, message, tenant_id=cmd.body.tenant_id, queue=cmd.body.queue, error=error
    )
    return False


def expire_message(
    tx: sqlite3.Connection,
    cmd: Command[Any],
    message: Message,
    *,
    tenant_id: str,
    queue: str,
    error: str,
) -> list[DueAdded]:
    """Retention: a message nobody received in time becomes a dead letter, its run dead (an
    attempt whose visibility timeout passed ends as timed out). Returns the runs its end
    gives other jobs."""
    if message.receipt is not None:
        ledger.finish_attempts(
            tx,
            [_current_attempt(message)],
            finished_at_ms=cmd.ts_ms,
            outcome="timed_out",
            error="visibility timeout expired",
        )
    return _bury(tx, cmd, message, tenant_id=tenant_id, queue=queue, error=error)


def _bury(
    tx: sqlite3.Connection,
    cmd: Command[Any],
    message: Message,
    *,
    tenant_id: str,
    queue: str,
    error: str,
) -> list[DueAdded]:
    """The message becomes a dead letter (of its id) and its run is dead; returns the runs
    its end gives other jobs (store/dependencies.py)."""
    dead = ledger.DeadLetter(
        id=message.msg_id,
        tenant_id=tenant_id,
        job_id=message.job_id,
        scheduled_at_ms=message.scheduled_at_ms,
        attempts=message.attempt,
        error=error,
        target=ledger.queue_target(queue),
        payload=message.payload,
        created_at_ms=cmd.ts_ms,
    )
    run = _run(message, RunStatus.DEAD, error=error, finished_at_ms=cmd.ts_ms)
    ledger.bury(tx, message.msg_id, dead, run)
    failures.on_dead(tx, cmd, message.job_id, error)
    ended = [(message.job_id, message.scheduled_at_ms, DEAD)]
    return dependencies.follow(tx, cmd.ts_ms, tenant_id, ended)


HANDLERS: dict[str, Handler] = {
    ReceiveMessages.TYPE: receive_messages,
    AckMessages.TYPE: ack_messages,
    NackMessages.TYPE: nack_messages,
    ExtendMessages.TYPE: extend_messages,
}
