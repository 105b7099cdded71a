"""The state machine: apply one committed command to the store. The only writer of state.

No clock, no network, no randomness: everything that differs between nodes is in the command.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from schedd import metrics
from schedd.jsonbody import JSONObject, JSONValue
from schedd.store.apply import (
    alerts,
    backfill,
    calendars,
    cluster,
    connections,
    creates,
    deadletters,
    delivery,
    dispatch,
    history,
    jobs,
    overdue,
    pauses,
    queue,
    retention,
    tenants,
)
from schedd.store.command import (
    BATCH,
    Applied,
    Command,
    Handler,
    Rejected,
    Result,
    canonical_json,
    decode,
    typed,
    unbatch,
)
from schedd.store.commands import CATALOGUE, LogCommand
from schedd.store.db import Database
from schedd.store.events import Event

log = logging.getLogger(__name__)

HANDLERS: Mapping[str, Handler] = {
    **cluster.HANDLERS,
    **tenants.HANDLERS,
    **jobs.HANDLERS,
    **creates.HANDLERS,
    **dispatch.HANDLERS,
    **queue.HANDLERS,
    **deadletters.HANDLERS,
    **delivery.HANDLERS,
    **retention.HANDLERS,
    **history.HANDLERS,
    **connections.HANDLERS,
    **pauses.HANDLERS,
    **overdue.HANDLERS,
    **backfill.HANDLERS,
    **alerts.HANDLERS,
    **calendars.HANDLERS,
}
PRUNE_EVERY = 1_000  # indexes between deterministic clean-ups of the dedupe tables
APPLIED_COMMANDS_TTL_MS = 3_600_000
IDEMPOTENCY_TTL_MS = 48 * 3_600_000
REPLAYED: JSONObject = {"status": "replayed"}
if set(HANDLERS) != set(CATALOGUE):  # every wire type has its apply function, and only those
    raise RuntimeError(f"apply functions and catalogue differ: {set(HANDLERS) ^ set(CATALOGUE)}")


class StateMachine:
    """Applies log entries in order; skips what the database already holds."""

    def __init__(
        self,
        db: Database,
        *,
        on_events: Callable[[list[Event]], None] | None = None,
    ) -> None:
        self.db = db
        # The events of an entry's commands that took effect, once the entry committed.
        self._on_events = on_events
        # The last index this machine applied itself (or found at start-up). The store can be
        # ahead of it only when a snapshot restore replaced its content.
        self._applied_here = db.applied_index

    def apply(self, blob: bytes, *, index: int) -> JSONObject:
        """Apply the entry at `index`; returns the result that the proposer receives.

        A `batch` entry (group commit) applies its commands in one transaction, each in a
        savepoint of its own, and returns {"status": "ok", "results": [...]} in order.
        """
        if index <= self.db.applied_index:
            return self._replayed(blob, index)
        cmd = decode(blob, index=index)
        commands = [typed(sub, index=index) for sub in _unbatched(cmd, index)]
        started = time.perf_counter()  # measured for metrics only; never part of the state
        events: list[Event] = []
        with self.db.transaction(applied_index=index) as tx:
            results = [self._apply_one(tx, sub, index, events) for sub in commands]
            if index % PRUNE_EVERY == 0:
                _prune(tx, cmd.ts_ms)
        metrics.APPLY_SECONDS.observe(time.perf_counter() - started)
        self._applied_here = index
        if events and self._on_events is not None:
            self._on_events(events)
        return _answer(cmd, results)

    def _replayed(self, blob: bytes, index: int) -> JSONObject:
        """An entry the store already holds. At a restart nobody waits for it: skip it. After
        a snapshot install, the snapshot (copied while apply went on) may hold entries past the
        index pysyncobj restarts from, and this node's proposer may be waiting for one of them:
        answer what the first application answered, kept by command id in applied_commands."""
        if self.db.applied_index <= self._applied_here:
            return REPLAYED  # a restart's replay: this machine applied it, or found it applied
        cmd = decode(blob, index=index)
        commands = _unbatched(cmd, index)
        kept = (_kept_result(self.db.conn, sub.id) for sub in commands)
        results = [result for result in kept if result is not None]
        if len(results) != len(commands):
            return REPLAYED  # its results were pruned: the proposer answers outcome_unknown
        return _answer(cmd, results)

    def _apply_one(
        self, tx: sqlite3.Connection, cmd: Command[LogCommand[Any]], index: int, events: list[Event]
    ) -> JSONObject:
        """Apply one command in a savepoint; its result as stored and answered (JSON). Its
        events join `events` (a rejected or contained command reports none)."""
        seen = _kept_result(tx, cmd.id)
        if seen is not None:
            return seen  # the same command id again: it acted once
        tx.execute("SAVEPOINT command")
        self.db.segments.savepoint()
        try:
            result = HANDLERS[cmd.type](tx, cmd)
        except sqlite3.DatabaseError as exc:
            if not isinstance(exc, sqlite3.IntegrityError):
                raise  # disk full, I/O error, corruption: this node cannot go on without diverging
            result = self._contain(tx, cmd, index, exc)
        except Exception as exc:
            result = self._contain(tx, cmd, index, exc)
        tx.execute("RELEASE command")
        self.db.segments.release()
        answer = result.to_json()
        kept = result.kept if isinstance(result, Applied) else None
        tx.execute(
            "INSERT INTO applied_commands (command_id, applied_index, at_ms, result) "
            "VALUES (?, ?, ?, ?)",
            (cmd.id, index, cmd.ts_ms, canonical_json(answer) if kept is None else kept),
        )
        if not isinstance(result, Rejected):
            events.extend(result.events)
        return answer

    def _contain(
        self, tx: sqlite3.Connection, cmd: Command[LogCommand[Any]], index: int, exc: Exception
    ) -> Result:
        # A bug that a committed command met. It meets it on every replica alike (apply reads
        # only the command and the database), so undo its writes and record a rejection
        # rather than retry the entry forever.
        log.exception("apply failed; recorded as rejected index=%d type=%s", index, cmd.type)
        tx.execute("ROLLBACK TO command")
        self.db.segments.undo_command()
        return Rejected("internal", f"{cmd.type} could not be applied: {exc}")


def _kept_result(conn: sqlite3.Connection, command_id: str) -> JSONObject | None:
    """The result a command's first application returned (kept for an hour), if any."""
    row = conn.execute(
        "SELECT result FROM applied_commands WHERE command_id = ?", (command_id,)
    ).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def _answer(cmd: Command[Any], results: list[JSONObject]) -> JSONObject:
    """A batch entry's answer lists its commands' results; one command's is its result."""
    if cmd.type != BATCH:
        return results[0]
    return {"status": "ok", "results": cast(list[JSONValue], results)}


def _unbatched(cmd: Command[Any], index: int) -> list[Command[Any]]:
    return unbatch(cmd, index=index) if cmd.type == BATCH else [cmd]


def _prune(tx: sqlite3.Connection, now_ms: int) -> None:
    tx.execute("DELETE FROM applied_commands WHERE at_ms < ?", (now_ms - APPLIED_COMMANDS_TTL_MS,))
    tx.execute("DELETE FROM idempotency WHERE created_at_ms < ?", (now_ms - IDEMPOTENCY_TTL_MS,))
