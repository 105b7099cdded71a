"""Reads for HTTP callers: the due outbox rows of the partitions a node leases, tenant by tenant."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from schedd.store.queries import Tenant, get_tenant

LEASE_MARGIN_MS = 500  # as the dispatcher: stop using a lease a little before it ends


class DueCall(NamedTuple):
    """One HTTP attempt to make: an outbox row as its claim (or last retry) left it."""

    seq: int
    partition: int
    tenant_id: str
    job_id: str
    scheduled_at_ms: int
    attempt: int
    target: dict[str, Any]
    payload: str  # JSON text, put in the request body as it is
    retry: dict[str, Any]


_COLUMNS = "seq, partition, tenant_id, job_id, scheduled_at_ms, attempt, target, payload, retry"


def due_calls(
    conn: sqlite3.Connection,
    node_id: str,
    now_ms: int,
    free_slots: Mapping[str, int],
    default_slots: int,
    skip: Collection[int],
) -> list[DueCall]:
    """Due calls in the node's partitions: per tenant at most its free slots (oldest first),
    leaving out the rows in `skip` (calls in flight here)."""
    partitions = [
        row[0]
        for row in conn.execute(
            "SELECT partition FROM leases WHERE node_id = ? AND expires_at_ms > ?",
            (node_id, now_ms + LEASE_MARGIN_MS),
        )
    ]
    if not partitions:
        return []
    marks = ",".join("?" * len(partitions))
    tenants = [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT tenant_id FROM outbox WHERE due_at_ms <= ?", (now_ms,)
        )
    ]
    calls: list[DueCall] = []
    for tenant_id in tenants:
        free = free_slots.get(tenant_id, default_slots)
        if free <= 0:
            continue
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM outbox WHERE tenant_id = ? AND due_at_ms <= ? "
            f"AND partition IN ({marks}) ORDER BY due_at_ms, seq LIMIT ?",
            (tenant_id, now_ms, *partitions, free + len(skip)),
        )
        fresh = [row for row in rows if row[0] not in skip][:free]
        calls.extend(
            DueCall(
                seq=row[0],
                partition=row[1],
                tenant_id=row[2],
                job_id=row[3],
                scheduled_at_ms=row[4],
                attempt=row[5],
                target=json.loads(row[6]),
                payload=row[7],
                retry=json.loads(row[8]),
            )
            for row in fresh
        )
    return calls


def tenants(conn: sqlite3.Connection, tenant_ids: Collection[str]) -> dict[str, Tenant]:
    """The tenants named (secrets, allowed hosts, alert URL) for signing and checking calls."""
    found = {tenant_id: get_tenant(conn, tenant_id) for tenant_id in tenant_ids}
    return {tenant_id: tenant for tenant_id, tenant in found.items() if tenant is not None}
