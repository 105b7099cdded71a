"""Apply functions for tenant commands: create, update, rotate credentials."""

from __future__ import annotations

import json
import sqlite3

from schedd.store import failures
from schedd.store.command import Command, Handler, Result, ok, rejected
from schedd.store.commands import CreateTenant, RotateTenant, UpdateTenant
from schedd.store.events import CredentialsChanged
from schedd.store.records import audit

TENANT_FIELDS = ("name", "max_active_jobs", "dispatch_rate", "allowed_hosts", "alert_url")


def create_tenant(tx: sqlite3.Connection, cmd: Command[CreateTenant]) -> Result:
    b = cmd.body
    if tx.execute("SELECT 1 FROM tenants WHERE name = ?", (b.name,)).fetchone():
        return rejected("tenant_exists", f"a tenant named {b.name!r} exists already")
    # Only a cell's adoption of another cell's tenant names its id and token (api/tenants.py):
    # two at once must not reach the UNIQUE constraints (an internal error).
    if tx.execute(
        "SELECT 1 FROM tenants WHERE tenant_id = ? OR token_hash = ?", (b.tenant_id, b.token_hash)
    ).fetchone():
        return rejected("tenant_exists", f"a tenant with id {b.tenant_id!r} or its token exists")
    tx.execute(
        "INSERT INTO tenants (tenant_id, name, token_hash, signing_secret, max_active_jobs, "
        "dispatch_rate, allowed_hosts, alert_url, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            b.tenant_id,
            b.name,
            b.token_hash,
            b.signing_secret,
            b.max_active_jobs,
            b.dispatch_rate,
            json.dumps(list(b.allowed_hosts)),
            b.alert_url,
            cmd.ts_ms,
            cmd.ts_ms,
        ),
    )
    audit(tx, cmd, tenant_id=b.tenant_id, detail={"name": b.name})
    return ok(tenant_id=b.tenant_id)


def update_tenant(tx: sqlite3.Connection, cmd: Command[UpdateTenant]) -> Result:
    tenant_id, changes = cmd.body.tenant_id, cmd.body.changes
    if not tx.execute("SELECT 1 FROM tenants WHERE tenant_id = ?", (tenant_id,)).fetchone():
        return rejected("tenant_not_found", f"no tenant with id {tenant_id!r}")
    name = changes.get("name")
    if (
        name is not None
        and tx.execute(
            "SELECT 1 FROM tenants WHERE name = ? AND tenant_id != ?", (name, tenant_id)
        ).fetchone()
    ):
        return rejected("tenant_exists", f"a tenant named {name!r} exists already")
    for key in TENANT_FIELDS:
        if key in changes:
            value = json.dumps(changes[key]) if key == "allowed_hosts" else changes[key]
            # `key` comes from the fixed TENANT_FIELDS tuple, never from the command.
            tx.execute(f"UPDATE tenants SET {key} = ? WHERE tenant_id = ?", (value, tenant_id))
    if "on_failure" in changes:  # level 8: its jobs' default failure policy
        failures.set_default(tx, tenant_id, changes["on_failure"])
    tx.execute("UPDATE tenants SET updated_at_ms = ? WHERE tenant_id = ?", (cmd.ts_ms, tenant_id))
    audit(tx, cmd, tenant_id=tenant_id, detail={"fields": sorted(changes)})
    return ok(tenant_id=tenant_id)


def rotate_tenant(tx: sqlite3.Connection, cmd: Command[RotateTenant]) -> Result:
    """New token and signing secret; the old secret still signs for `overlap_ms`."""
    b = cmd.body
    updated = tx.execute(
        "UPDATE tenants SET token_hash = ?, previous_secret = signing_secret, "
        "previous_secret_until_ms = ?, signing_secret = ?, updated_at_ms = ? WHERE tenant_id = ?",
        (
            b.token_hash,
            cmd.ts_ms + (b.overlap_ms or 0),
            b.signing_secret,
            cmd.ts_ms,
            b.tenant_id,
        ),
    ).rowcount
    if not updated:
        return rejected("tenant_not_found", f"no tenant with id {b.tenant_id!r}")
    audit(tx, cmd, tenant_id=b.tenant_id, detail=None)
    return ok(CredentialsChanged(b.tenant_id), tenant_id=b.tenant_id)


HANDLERS: dict[str, Handler] = {
    CreateTenant.TYPE: create_tenant,
    UpdateTenant.TYPE: update_tenant,
    RotateTenant.TYPE: rotate_tenant,
}
