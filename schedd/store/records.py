"""Row writers shared by the apply functions: audit records and the due index."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any, Protocol

from schedd.store.command import Command


def audit(
    tx: sqlite3.Connection,
    cmd: Command[Any],
    *,
    tenant_id: str | None,
    job_id: str | None = None,
    detail: Mapping[str, object] | None,  # written as JSON
) -> None:
    """Record who did what, when (the proposer's clock), to which job."""
    tx.execute(
        "INSERT INTO audit (at_ms, tenant_id, actor, action, job_id, detail) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            cmd.ts_ms,
            tenant_id,
            actor_of(cmd),
            cmd.type,
            job_id,
            None if detail is None else json.dumps(detail, separators=(",", ":")),
        ),
    )


def add_due(
    tx: sqlite3.Connection,
    *,
    partition: int,
    fire_at_ms: int,
    job_id: str,
    scheduled_at_ms: int,
    is_trigger: bool = False,
) -> None:
    """Put one upcoming run in the due index."""
    tx.execute(
        "INSERT OR IGNORE INTO due (partition, fire_at_ms, job_id, scheduled_at_ms, is_trigger) "
        "VALUES (?, ?, ?, ?, ?)",
        (partition, fire_at_ms, job_id, scheduled_at_ms, int(is_trigger)),
    )


class ScheduledRun(Protocol):
    """A job's next scheduled run: the due row's exact key."""

    @property
    def job_id(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def next_run_at_ms(self) -> int | None: ...
    @property
    def next_fire_at_ms(self) -> int | None: ...


def remove_scheduled_due(tx: sqlite3.Connection, job: ScheduledRun) -> None:
    """Take a job's scheduled (not triggered) next run out of the due index."""
    if job.next_fire_at_ms is None:
        return
    tx.execute(
        "DELETE FROM due WHERE partition = ? AND fire_at_ms = ? "
        "AND job_id = ? AND scheduled_at_ms = ? AND is_trigger = 0",
        (
            job.partition,
            job.next_fire_at_ms,
            job.job_id,
            job.next_run_at_ms,
        ),
    )


def actor_of(cmd: Command[Any]) -> str:
    """Who proposed the command (its body's `actor`; "admin" when it names none)."""
    actor = getattr(cmd.body, "actor", None)
    return "admin" if actor is None else str(actor)
