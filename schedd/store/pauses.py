"""The `pauses` table (migration 12, log level 8): who paused a job, a queue or a tenant, when
and why. Apply writes it (store/apply/pauses.py, apply/jobs.py); the claim fence, the receive,
the dispatcher and the API read it here. The table is empty until someone pauses a queue or a
tenant or gives a reason, so the hot paths' reads of it find nothing in an index of nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from enum import StrEnum
from typing import NamedTuple


class Scope(StrEnum):
    JOB = "job"  # name: the job's id (a row only when a reason was given)
    QUEUE = "queue"  # name: the queue
    TENANT = "tenant"  # name: ""


class Pause(NamedTuple):
    reason: str | None
    actor: str | None
    paused_at_ms: int


def pause(
    tx: sqlite3.Connection,
    scope: Scope,
    tenant_id: str,
    name: str,
    *,
    reason: str | None,
    actor: str | None,
    at_ms: int,
) -> bool:
    """Record a pause; False (nothing written) when that one is paused already."""
    written = tx.execute(
        "INSERT OR IGNORE INTO pauses (scope, tenant_id, name, reason, actor, paused_at_ms) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (scope.value, tenant_id, name, reason, actor, at_ms),
    )
    return written.rowcount > 0


def resume(tx: sqlite3.Connection, scope: Scope, tenant_id: str, name: str) -> bool:
    """Forget a pause; False when there was none."""
    gone = tx.execute(
        "DELETE FROM pauses WHERE scope = ? AND tenant_id = ? AND name = ?",
        (scope.value, tenant_id, name),
    )
    return gone.rowcount > 0


def forget_jobs(tx: sqlite3.Connection, tenant_id: str, job_ids: Iterable[str]) -> None:
    """Jobs resumed, cancelled or deleted: their reasons go."""
    tx.executemany(
        "DELETE FROM pauses WHERE scope = 'job' AND tenant_id = ? AND name = ?",
        [(tenant_id, job_id) for job_id in job_ids],
    )


def find(conn: sqlite3.Connection, scope: Scope, tenant_id: str, name: str) -> Pause | None:
    row = conn.execute(
        "SELECT reason, actor, paused_at_ms FROM pauses "
        "WHERE scope = ? AND tenant_id = ? AND name = ?",
        (scope.value, tenant_id, name),
    ).fetchone()
    return None if row is None else Pause(*row)


def paused_tenants(conn: sqlite3.Connection) -> frozenset[str]:
    """The tenants none of whose runs may be claimed now."""
    return frozenset(tenants_paused(conn))


def tenants_paused(conn: sqlite3.Connection) -> dict[str, Pause]:
    """Every paused tenant's pause, by tenant."""
    rows = conn.execute(
        "SELECT tenant_id, reason, actor, paused_at_ms FROM pauses WHERE scope = 'tenant'"
    )
    return {tenant_id: Pause(reason, actor, at) for tenant_id, reason, actor, at in rows}


def in_tenant(conn: sqlite3.Connection, scope: Scope, tenant_id: str) -> dict[str, Pause]:
    """A tenant's paused queues or jobs (with a reason), by name."""
    rows = conn.execute(
        "SELECT name, reason, actor, paused_at_ms FROM pauses WHERE scope = ? AND tenant_id = ?",
        (scope.value, tenant_id),
    )
    return {name: Pause(reason, actor, at) for name, reason, actor, at in rows}
