"""The state machine: apply one committed command to the store. The only writer of state.

No clock, no network, no randomness: everything that differs between nodes is in the command.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from schedd.errors import CorruptLog
from schedd.store import apply_cluster, apply_jobs, apply_tenants
from schedd.store.command import Command, decode, rejected
from schedd.store.db import Database

log = logging.getLogger(__name__)

Handler = Callable[[sqlite3.Connection, Command], dict[str, Any]]
HANDLERS: Mapping[str, Handler] = {
    **apply_cluster.HANDLERS,
    **apply_tenants.HANDLERS,
    **apply_jobs.HANDLERS,
}
PRUNE_EVERY = 1_000  # indexes between deterministic clean-ups of the dedupe tables
APPLIED_COMMANDS_TTL_MS = 3_600_000
IDEMPOTENCY_TTL_MS = 48 * 3_600_000
REPLAYED: dict[str, Any] = {"status": "replayed"}


class StateMachine:
    """Applies log entries in order; skips what the database already holds."""

    def __init__(
        self, db: Database, *, on_applied: Callable[[Command], None] | None = None
    ) -> None:
        self.db = db
        self._on_applied = on_applied

    def apply(self, blob: bytes, *, index: int) -> dict[str, Any]:
        """Apply the entry at `index`; returns the result that the proposer receives."""
        if index <= self.db.applied_index:
            return REPLAYED  # already in SQLite: a replay after restart or snapshot install
        cmd = decode(blob, index=index)
        handler = HANDLERS.get(cmd.type)
        if handler is None:
            raise CorruptLog(f"unknown command type {cmd.type!r} at index {index}")
        try:
            with self.db.transaction(applied_index=index) as tx:
                result = self._apply_once(tx, handler, cmd, index)
        except sqlite3.IntegrityError as exc:
            return self._record_failure(cmd, index, exc)
        except sqlite3.DatabaseError:
            raise  # disk full, I/O error, corruption: this node cannot go on without diverging
        except Exception as exc:
            return self._record_failure(cmd, index, exc)
        if self._on_applied is not None and result.get("status") == "ok":
            self._on_applied(cmd)
        return result

    def _record_failure(self, cmd: Command, index: int, exc: Exception) -> dict[str, Any]:
        # A bug that a committed command met. It meets it on every replica alike (apply reads
        # only the command and the database), so record a rejection rather than retry forever.
        log.exception("apply failed; recorded as rejected index=%d type=%s", index, cmd.type)
        with self.db.transaction(applied_index=index):
            pass
        return rejected("internal", f"{cmd.type} could not be applied: {exc}")

    def _apply_once(
        self, tx: sqlite3.Connection, handler: Handler, cmd: Command, index: int
    ) -> dict[str, Any]:
        row = tx.execute(
            "SELECT result FROM applied_commands WHERE command_id = ?", (cmd.id,)
        ).fetchone()
        if row is not None:
            result: dict[str, Any] = json.loads(row[0])
            return result
        result = handler(tx, cmd)
        tx.execute(
            "INSERT INTO applied_commands (command_id, applied_index, at_ms, result) "
            "VALUES (?, ?, ?, ?)",
            (cmd.id, index, cmd.ts_ms, json.dumps(result, separators=(",", ":"))),
        )
        if index % PRUNE_EVERY == 0:
            _prune(tx, cmd.ts_ms)
        return result


def _prune(tx: sqlite3.Connection, now_ms: int) -> None:
    tx.execute("DELETE FROM applied_commands WHERE at_ms < ?", (now_ms - APPLIED_COMMANDS_TTL_MS,))
    tx.execute("DELETE FROM idempotency WHERE created_at_ms < ?", (now_ms - IDEMPOTENCY_TTL_MS,))
