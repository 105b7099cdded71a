"""Apply functions for tenants' broker connections, and the record of which live jobs use one.

A connection's URL (credentials included, sealed when payload keys are configured) is written
here and never copied into a result, an audit record or a log line.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from schedd.store.command import Command, Handler, Result, ok, rejected
from schedd.store.commands import CreateConnection, DeleteConnection
from schedd.store.connections import connection_problem
from schedd.store.events import ConnectionChanged
from schedd.store.records import audit
from schedd.stored_spec import connection_of

MAX_CONNECTIONS = 100  # per tenant; a wire constant: changing it changes what apply decides
# A few of the jobs that use a connection (never a count: a million jobs may use one).
_USERS = (
    "SELECT job_id FROM connection_uses WHERE tenant_id = ? AND name = ? ORDER BY job_id LIMIT 4"
)


def create_connection(tx: sqlite3.Connection, cmd: Command[CreateConnection]) -> Result:
    b = cmd.body
    if not tx.execute("SELECT 1 FROM tenants WHERE tenant_id = ?", (b.tenant_id,)).fetchone():
        return rejected("tenant_not_found", f"no tenant with id {b.tenant_id!r}")
    if tx.execute(
        "SELECT 1 FROM connections WHERE tenant_id = ? AND name = ?", (b.tenant_id, b.name)
    ).fetchone():
        return rejected("connection_exists", f"a connection named {b.name!r} exists already")
    (count,) = tx.execute(
        "SELECT count(*) FROM connections WHERE tenant_id = ?", (b.tenant_id,)
    ).fetchone()
    if count >= MAX_CONNECTIONS:
        return rejected("quota_exceeded", f"a tenant has at most {MAX_CONNECTIONS} connections")
    tx.execute(
        "INSERT INTO connections (tenant_id, name, kind, url, host, addresses, created_at_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (b.tenant_id, b.name, b.kind, b.url, b.host, json.dumps(list(b.addresses)), cmd.ts_ms),
    )
    shown = {"name": b.name, "kind": b.kind, "host": b.host}
    audit(tx, cmd, tenant_id=b.tenant_id, detail=shown)
    return ok(ConnectionChanged(b.tenant_id, b.name), **shown, created_at_ms=cmd.ts_ms)


def delete_connection(tx: sqlite3.Connection, cmd: Command[DeleteConnection]) -> Result:
    """Refused while a live job uses the connection: that job's runs would have nowhere to go.
    A job created after this delete in the log finds no connection (`check_target`)."""
    b = cmd.body
    if not tx.execute(
        "SELECT 1 FROM connections WHERE tenant_id = ? AND name = ?", (b.tenant_id, b.name)
    ).fetchone():
        return rejected("connection_not_found", f"no connection named {b.name!r}")
    users = [row[0] for row in tx.execute(_USERS, (b.tenant_id, b.name))]
    if users:
        return rejected("connection_in_use", in_use_message(b.name, users))
    tx.execute("DELETE FROM connections WHERE tenant_id = ? AND name = ?", (b.tenant_id, b.name))
    audit(tx, cmd, tenant_id=b.tenant_id, detail={"name": b.name})
    return ok(ConnectionChanged(b.tenant_id, b.name))


def in_use_message(name: str, users: list[str]) -> str:
    """The 409 of a connection that live jobs use, naming the first three of them."""
    shown = ", ".join(users[:3]) + (" and more" if len(users) > 3 else "")
    return (
        f"connection {name!r} is used by live jobs ({shown}): "
        "cancel them or change their targets first"
    )


def check_target(tx: sqlite3.Connection, tenant_id: str, spec: Mapping[str, Any]) -> str | None:
    """Why a job spec's broker target cannot be used now (no such connection of the tenant, or
    one of another kind), or None. Apply decides this, so a job and a delete_connection are
    ordered by the log: whichever comes first wins, on every replica alike."""
    used = connection_of(spec.get("target"))
    if used is None:
        return None
    name, kind = used
    row = tx.execute(
        "SELECT kind FROM connections WHERE tenant_id = ? AND name = ?", (tenant_id, name)
    ).fetchone()
    problem = connection_problem(name, kind, None if row is None else row[0])
    return None if problem is None else f"target.connection: {problem}"


def use(tx: sqlite3.Connection, tenant_id: str, job_id: str, spec: Mapping[str, Any]) -> None:
    """Record the connection a new live job uses, if its target is a broker's."""
    used = connection_of(spec.get("target"))
    if used is not None:
        tx.execute(
            "INSERT INTO connection_uses (job_id, tenant_id, name) VALUES (?, ?, ?)",
            (job_id, tenant_id, used[0]),
        )


def release(tx: sqlite3.Connection, job_ids: list[str]) -> None:
    """These jobs are no longer live (cancelled, completed): they use no connection."""
    if job_ids:
        tx.executemany("DELETE FROM connection_uses WHERE job_id = ?", [(j,) for j in job_ids])


HANDLERS: dict[str, Handler] = {
    CreateConnection.TYPE: create_connection,
    DeleteConnection.TYPE: delete_connection,
}
