"""Apply functions for dead letters: redrive (one new attempt) and delete."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from schedd.model import RunStatus
from schedd.store.command import Command, Handler, Result, ok, rejected
from schedd.store.commands import DeleteDeadletter, RedriveDeadletter
from schedd.store.events import DeliveriesReady, MessagesReady

_COLUMNS = "id, tenant_id, job_id, scheduled_at_ms, attempts, target, payload"


def _find(
    tx: sqlite3.Connection, cmd: Command[RedriveDeadletter | DeleteDeadletter]
) -> tuple[Any, ...] | None:
    row: tuple[Any, ...] | None = tx.execute(
        f"SELECT {_COLUMNS} FROM deadletters WHERE id = ? AND tenant_id = ?",
        (cmd.body.id, cmd.body.tenant_id),
    ).fetchone()
    return row


def redrive_deadletter(tx: sqlite3.Connection, cmd: Command[RedriveDeadletter]) -> Result:
    """Give a dead run exactly one more attempt, delivered like a fresh claim."""
    row = _find(tx, cmd)
    if row is None:
        return rejected("deadletter_not_found", f"no dead letter with id {cmd.body.id!r}")
    dl_id, tenant_id, job_id, scheduled_at, attempts, target_json, payload = row
    target = json.loads(target_json)
    # One attempt more than the API allows after a 100-attempt run: stored policies are read
    # leniently (jobspec.stored_retry), never judged by the API's rules. Written as before
    # 2026-12-01, so this command applies alike on every version.
    one_more = {
        "max_attempts": attempts + 1,
        "backoff": "fixed",
        "initial_delay": "1s",
        "max_delay": "1s",
    }
    if target["type"] == "queue":
        tx.execute(
            "INSERT OR REPLACE INTO messages (msg_id, tenant_id, queue, job_id, scheduled_at_ms, "
            "attempt, visible_at_ms, receipt, payload, retry) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
            (
                dl_id,
                tenant_id,
                target["name"],
                job_id,
                scheduled_at,
                attempts,
                cmd.ts_ms,
                payload,
                json.dumps(one_more),
            ),
        )
    else:
        tx.execute(
            "INSERT INTO outbox (partition, tenant_id, job_id, scheduled_at_ms, attempt, "
            "due_at_ms, target, payload, retry) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cmd.body.partition or 0,
                tenant_id,
                job_id,
                scheduled_at,
                attempts + 1,
                cmd.ts_ms,
                target_json,
                payload,
                json.dumps(one_more),
            ),
        )
    tx.execute("DELETE FROM deadletters WHERE id = ?", (dl_id,))
    tx.execute(
        "UPDATE runs SET status = ?, finished_at_ms = NULL "
        "WHERE job_id = ? AND scheduled_at_ms = ?",
        (RunStatus.RETRYING.value, job_id, scheduled_at),
    )
    is_queue = target["type"] == "queue"
    return ok(MessagesReady(tenant_id, target["name"]) if is_queue else DeliveriesReady())


def delete_deadletter(tx: sqlite3.Connection, cmd: Command[DeleteDeadletter]) -> Result:
    if _find(tx, cmd) is None:
        return rejected("deadletter_not_found", f"no dead letter with id {cmd.body.id!r}")
    tx.execute("DELETE FROM deadletters WHERE id = ?", (cmd.body.id,))
    return ok()


HANDLERS: dict[str, Handler] = {
    RedriveDeadletter.TYPE: redrive_deadletter,
    DeleteDeadletter.TYPE: delete_deadletter,
}
