"""Apply functions for the built-in queue: receive, ack, nack, extend; retries and dead letters.

Each receive starts an attempt of the run; a nack or an expired visibility timeout ends it as
failed, and the job's retry policy decides when the message is visible again or that it is dead.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, NamedTuple

from schedd.jobspec import stored_retry
from schedd.model import RunStatus
from schedd.retry import has_attempts_left, retry_delay_ms
from schedd.store.command import Command, Handler, Result, ok
from schedd.store.commands import AckMessages, ExtendMessages, NackMessages, ReceiveMessages
from schedd.store.events import MessagesReady
from schedd.timeformat import format_instant


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
    visible_at = cmd.ts_ms + b.visibility_ms
    tx.executemany(
        "UPDATE messages SET attempt = ?, visible_at_ms = ?, receipt = ? WHERE msg_id = ?",
        [(m.attempt + 1, visible_at, r, m.msg_id) for m, r in zip(messages, receipts, strict=True)],
    )
    tx.executemany(
        "INSERT OR REPLACE INTO attempts (job_id, scheduled_at_ms, attempt, started_at_ms) "
        "VALUES (?, ?, ?, ?)",
        [(m.job_id, m.scheduled_at_ms, m.attempt + 1, cmd.ts_ms) for m in messages],
    )
    tx.executemany(
        "UPDATE runs SET status = ?, attempt = ? WHERE job_id = ? AND scheduled_at_ms = ?",
        [(RunStatus.DELIVERED.value, m.attempt + 1, m.job_id, m.scheduled_at_ms) for m in messages],
    )
    return ok(messages=[_delivery(m, r) for m, r in zip(messages, receipts, strict=True)])


def _delivery(message: Message, receipt: str) -> dict[str, Any]:
    scheduled_at = format_instant(message.scheduled_at_ms)
    return {
        "receipt": receipt,
        "job_id": message.job_id,
        "scheduled_at": scheduled_at,
        "attempt": message.attempt + 1,
        "idempotency_key": f"{message.job_id}:{scheduled_at}",
        "payload": json.loads(message.payload),
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
    tx.executemany("DELETE FROM messages WHERE msg_id = ?", [(m.msg_id,) for m in messages])
    tx.executemany(
        "UPDATE attempts SET finished_at_ms = ?, outcome = 'succeeded' "
        "WHERE job_id = ? AND scheduled_at_ms = ? AND attempt = ?",
        [(cmd.ts_ms, m.job_id, m.scheduled_at_ms, m.attempt) for m in messages],
    )
    tx.executemany(
        "UPDATE runs SET status = ?, finished_at_ms = ? WHERE job_id = ? AND scheduled_at_ms = ?",
        [(RunStatus.SUCCEEDED.value, cmd.ts_ms, m.job_id, m.scheduled_at_ms) for m in messages],
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
    tx.executemany(
        "UPDATE messages SET visible_at_ms = ? WHERE msg_id = ?",
        [(cmd.ts_ms + cmd.body.visibility_ms, m.msg_id) for m in messages],
    )
    return ok(extended=len(messages))


def _fail_attempt(
    tx: sqlite3.Connection, cmd: Command[Any], message: Message, error: str, outcome: str
) -> bool:
    """End the current attempt as failed; True if the run will be tried again."""
    _finish_attempt(tx, cmd, message, outcome, error)
    policy = stored_retry(json.loads(message.retry))
    if has_attempts_left(policy, message.attempt):
        delay = retry_delay_ms(policy, message.attempt, message.msg_id)
        tx.execute(
            "UPDATE messages SET visible_at_ms = ?, receipt = NULL WHERE msg_id = ?",
            (cmd.ts_ms + delay, message.msg_id),
        )
        _set_run(tx, message, RunStatus.RETRYING, error=error)
        return True
    tx.execute("DELETE FROM messages WHERE msg_id = ?", (message.msg_id,))
    _dead_letter(tx, cmd, message, cmd.body.tenant_id, cmd.body.queue, error)
    _set_run(tx, message, RunStatus.DEAD, error=error, finished_at_ms=cmd.ts_ms)
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
        _finish_attempt(tx, cmd, message, "timed_out", "visibility timeout expired")
    tx.execute("DELETE FROM messages WHERE msg_id = ?", (message.msg_id,))
    _dead_letter(tx, cmd, message, tenant_id, queue, error)
    _set_run(tx, message, RunStatus.DEAD, error=error, finished_at_ms=cmd.ts_ms)


def _dead_letter(
    tx: sqlite3.Connection,
    cmd: Command[Any],
    message: Message,
    tenant_id: str,
    queue: str,
    error: str,
) -> None:
    tx.execute(
        "INSERT OR REPLACE INTO deadletters (id, tenant_id, job_id, scheduled_at_ms, attempts, "
        "error, target, payload, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            message.msg_id,
            tenant_id,
            message.job_id,
            message.scheduled_at_ms,
            message.attempt,
            error,
            json.dumps({"type": "queue", "name": queue}),
            message.payload,
            cmd.ts_ms,
        ),
    )


def _finish_attempt(
    tx: sqlite3.Connection, cmd: Command[Any], message: Message, outcome: str, error: str | None
) -> None:
    tx.execute(
        "UPDATE attempts SET finished_at_ms = ?, outcome = ?, error = ? "
        "WHERE job_id = ? AND scheduled_at_ms = ? AND attempt = ?",
        (cmd.ts_ms, outcome, error, message.job_id, message.scheduled_at_ms, message.attempt),
    )


def _set_run(
    tx: sqlite3.Connection,
    message: Message,
    status: RunStatus,
    *,
    attempt: int | None = None,
    error: str | None = None,
    finished_at_ms: int | None = None,
) -> None:
    tx.execute(
        "UPDATE runs SET status = ?, attempt = COALESCE(?, attempt), error = COALESCE(?, error), "
        "finished_at_ms = COALESCE(?, finished_at_ms) WHERE job_id = ? AND scheduled_at_ms = ?",
        (status.value, attempt, error, finished_at_ms, message.job_id, message.scheduled_at_ms),
    )


HANDLERS: dict[str, Handler] = {
    ReceiveMessages.TYPE: receive_messages,
    AckMessages.TYPE: ack_messages,
    NackMessages.TYPE: nack_messages,
    ExtendMessages.TYPE: extend_messages,
}
