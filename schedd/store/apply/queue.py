"""Apply functions for the built-in queue: receive, ack, nack, extend; retries and dead letters.

Each receive starts an attempt of the run; a nack or an expired visibility timeout ends it as
failed, and the job's retry policy decides when the message is visible again or that it is dead.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, NamedTuple

from schedd.jobspec import stored_retry
from schedd.model import RunStatus, idempotency_key
from schedd.retry import has_attempts_left, retry_delay_ms
from schedd.store import ledger
from schedd.store.command import Command, Handler, Result, ok, stored_json
from schedd.store.commands import AckMessages, ExtendMessages, NackMessages, ReceiveMessages
from schedd.store.events import MessagesReady


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
    ack, nack and extend find the message by its key.
    """
    b = cmd.body
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM messages WHERE tenant_id = ? AND queue = ? "
        "AND visible_at_ms <= ? ORDER BY visible_at_ms, msg_id LIMIT ?",
        (b.tenant_id, b.queue, cmd.ts_ms, b.max),
    ).fetchall()
    messages = []
    for message in map(Message._make, rows):
        timed_out = message.receipt is not None  # its visibility timeout passed without an ack
        if not timed_out or _fail_attempt(
            tx, cmd, message, "visibility timeout expired", "timed_out"
        ):
            messages.append(message)
    nonces = b.receipts
    receipts = [f"{nonce}.{m.msg_id}" for nonce, m in zip(nonces, messages, strict=False)]
    _hand_out(tx, cmd, messages, receipts)
    return ok(messages=[_delivery(m, r) for m, r in zip(messages, receipts, strict=True)])


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


def _delivery(message: Message, receipt: str) -> dict[str, Any]:
    key = idempotency_key(message.job_id, message.scheduled_at_ms)
    return {
        "receipt": receipt,
        "job_id": message.job_id,
        "scheduled_at": key[len(message.job_id) + 1 :],  # "job_id:scheduled_at": formatted once
        "attempt": message.attempt + 1,
        "idempotency_key": key,
        "payload": stored_json(message.payload),
    }


def _by_receipts(
    tx: sqlite3.Connection, cmd: Command[AckMessages | NackMessages | ExtendMessages]
) -> list[Message]:
    """The tenant's messages in this queue that the command's receipts hold now (each once)."""
    wanted = {str(r) for r in cmd.body.receipts}
    ids = sorted({r.partition(".")[2] for r in wanted})
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
    return ok(acked=len(messages))


def nack_messages(tx: sqlite3.Connection, cmd: Command[NackMessages]) -> Result:
    """The consumer failed: retry per the job's policy, or make the run a dead letter."""
    nacked = 0
    error = (cmd.body.error or "nacked")[:4000]
    for message in _by_receipts(tx, cmd):
        _fail_attempt(tx, cmd, message, error, "failed")
        nacked += 1
    fed = [MessagesReady(cmd.body.tenant_id, cmd.body.queue)] if nacked else []
    return ok(*fed, nacked=nacked)


def extend_messages(tx: sqlite3.Connection, cmd: Command[ExtendMessages]) -> Result:
    """Keep messages invisible for longer while their consumer works on them."""
    messages = _by_receipts(tx, cmd)
    ledger.extend(tx, [m.msg_id for m in messages], cmd.ts_ms + cmd.body.visibility_ms)
    return ok(extended=len(messages))


def _fail_attempt(
    tx: sqlite3.Connection, cmd: Command[Any], message: Message, error: str, outcome: str
) -> bool:
    """End the current attempt as failed; True if the run will be tried again."""
    now = cmd.ts_ms
    ledger.finish_attempts(
        tx, [_current_attempt(message)], finished_at_ms=now, outcome=outcome, error=error
    )
    policy = stored_retry(json.loads(message.retry))
    if has_attempts_left(policy, message.attempt):
        delay = retry_delay_ms(policy, message.attempt, message.msg_id)
        ledger.schedule_retry(tx, message.msg_id, now + delay)
        ledger.set_runs(tx, [_run(message, RunStatus.RETRYING, error=error)])
        return True
    _bury(tx, cmd, message, tenant_id=cmd.body.tenant_id, queue=cmd.body.queue, error=error)
    return False


def expire_message(
    tx: sqlite3.Connection,
    cmd: Command[Any],
    message: Message,
    *,
    tenant_id: str,
    queue: str,
    error: str,
) -> None:
    """Retention: a message nobody received in time becomes a dead letter, its run dead (an
    attempt whose visibility timeout passed ends as timed out)."""
    if message.receipt is not None:
        ledger.finish_attempts(
            tx,
            [_current_attempt(message)],
            finished_at_ms=cmd.ts_ms,
            outcome="timed_out",
            error="visibility timeout expired",
        )
    _bury(tx, cmd, message, tenant_id=tenant_id, queue=queue, error=error)


def _bury(
    tx: sqlite3.Connection,
    cmd: Command[Any],
    message: Message,
    *,
    tenant_id: str,
    queue: str,
    error: str,
) -> None:
    """The message becomes a dead letter (of its id) and its run is dead."""
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


HANDLERS: dict[str, Handler] = {
    ReceiveMessages.TYPE: receive_messages,
    AckMessages.TYPE: ack_messages,
    NackMessages.TYPE: nack_messages,
    ExtendMessages.TYPE: extend_messages,
}
