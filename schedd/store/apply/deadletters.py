"""Apply functions for dead letters: redrive (one new attempt) and delete."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import msgspec

from schedd.model import RunStatus
from schedd.store import ledger
from schedd.store.command import Command, Handler, Result, ok, rejected
from schedd.store.commands import DeleteDeadletter, MovedDeadletter, RedriveDeadletter
from schedd.store.events import DeliveriesReady, MessagesReady
from schedd.stored_spec import TargetFields, load_target_fields, queue_name

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
    """Give a dead run exactly one more attempt, delivered like a fresh claim. A dead letter
    that moved into a history segment comes with the command (level 13): it is tombstoned
    there, and its run lives again in the live tables."""
    row = _find(tx, cmd)
    is_live = row is not None
    if row is None and cmd.body.moved is not None:
        row = _revive(tx, cmd.body.tenant_id, cmd.body.id, cmd.body.moved)
    if row is None:
        return rejected("deadletter_not_found", f"no dead letter with id {cmd.body.id!r}")
    dl_id, tenant_id, job_id, scheduled_at, _attempts, target_json, _payload = row
    target = _target_of(target_json)
    ledger.enqueue(tx, [_one_more(cmd, row, target)], is_redrive=True)
    if is_live:
        ledger.unbury(tx, dl_id)
    again = ledger.RunChange(
        job_id=job_id, scheduled_at_ms=scheduled_at, status=RunStatus.RETRYING, finished_at_ms=None
    )
    ledger.set_runs(tx, [again])
    if target.type in ledger.PULLED_KINDS:
        return ok(MessagesReady(tenant_id, queue_name(target.name)))
    return ok(DeliveriesReady())


def _target_of(text: str) -> TargetFields:
    """A dead letter's target kind and queue name (KeyError as target["type"] raised)."""
    target = load_target_fields(text)
    if target.type is msgspec.UNSET:
        raise KeyError("type")
    return target


def _one_more(
    cmd: Command[RedriveDeadletter], row: tuple[Any, ...], target: TargetFields
) -> ledger.Delivery:
    """The dead letter's delivery again, due now, allowed one attempt more than it made."""
    dl_id, tenant_id, job_id, scheduled_at, attempts, target_json, payload = row
    # One attempt more than the API allows after a 100-attempt run: stored policies are read
    # leniently (stored_spec.stored_retry), never judged by the API's rules. Written as before
    # 2026-12-01, so this command applies alike on every version.
    one_more = {
        "max_attempts": attempts + 1,
        "backoff": "fixed",
        "initial_delay": "1s",
        "max_delay": "1s",
    }
    retry = json.dumps(one_more)  # with spaces, as written since v1: stored text is unchanged
    if target.type in ledger.PULLED_KINDS:
        return ledger.QueueDelivery(
            msg_id=dl_id,
            tenant_id=tenant_id,
            queue=queue_name(target.name),
            job_id=job_id,
            scheduled_at_ms=scheduled_at,
            attempt=attempts,  # counts receives: the next one is attempts + 1
            visible_at_ms=cmd.ts_ms,
            payload=payload,
            retry=retry,
        )
    return ledger.OutboxDelivery(
        partition=cmd.body.partition or 0,
        tenant_id=tenant_id,
        job_id=job_id,
        scheduled_at_ms=scheduled_at,
        attempt=attempts + 1,  # the next one to make
        due_at_ms=cmd.ts_ms,
        target=target_json,
        payload=payload,
        retry=retry,
    )


def _in_segment(tx: sqlite3.Connection, segment: str, dl_id: str) -> bool:
    """Whether a moved dead letter is still history: its segment listed, no tombstone."""
    listed = tx.execute(
        "SELECT 1 FROM segments WHERE name = ? AND state != 'dropped'", (segment,)
    ).fetchone()
    gone = tx.execute(
        "SELECT 1 FROM segment_tombstones WHERE segment = ? AND id = ?", (segment, dl_id)
    ).fetchone()
    return listed is not None and gone is None


def _revive(
    tx: sqlite3.Connection, tenant_id: str, dl_id: str, moved: MovedDeadletter
) -> tuple[Any, ...] | None:
    """A moved dead letter redriven: tombstoned in its segment; its run (and attempts), when
    carried and not live, written live again. Its row in _COLUMNS' order, or None."""
    row = moved.row
    if len(row) != _DEADLETTER_WIDTH or row[0] != dl_id or row[1] != tenant_id:
        return None
    if not _in_segment(tx, moved.segment, dl_id):
        return None
    tx.execute("INSERT INTO segment_tombstones (segment, id) VALUES (?, ?)", (moved.segment, dl_id))
    if moved.run is not None:
        key = (row[2], row[3])
        live = tx.execute(
            "SELECT 1 FROM runs WHERE job_id = ? AND scheduled_at_ms = ?", key
        ).fetchone()
        if live is None:
            tx.execute(f"INSERT INTO runs VALUES ({_marks(len(moved.run))})", moved.run)
            for attempt in moved.attempts:
                tx.execute(
                    f"INSERT OR REPLACE INTO attempts VALUES ({_marks(len(attempt))})", attempt
                )
    dl, tenant, job, scheduled, attempts, _error, target, payload, _created = row
    return (dl, tenant, job, scheduled, attempts, target, payload)


_DEADLETTER_WIDTH = 9  # the deadletters table's columns


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def delete_deadletter(tx: sqlite3.Connection, cmd: Command[DeleteDeadletter]) -> Result:
    segment = cmd.body.segment
    if _find(tx, cmd) is not None:
        ledger.unbury(tx, cmd.body.id)
    elif segment is not None and _in_segment(tx, segment, cmd.body.id):
        tx.execute(
            "INSERT INTO segment_tombstones (segment, id) VALUES (?, ?)", (segment, cmd.body.id)
        )
    else:
        return rejected("deadletter_not_found", f"no dead letter with id {cmd.body.id!r}")
    return ok()


HANDLERS: dict[str, Handler] = {
    RedriveDeadletter.TYPE: redrive_deadletter,
    DeleteDeadletter.TYPE: delete_deadletter,
}
