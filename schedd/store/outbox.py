"""Reads for HTTP callers: the due outbox rows of the partitions a node leases, tenant by tenant."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping
from typing import NamedTuple

from schedd.store.leases import held_partitions
from schedd.store.queries import Tenant, get_tenant


class DueCall(NamedTuple):
    """One HTTP attempt to make: an outbox row as its claim (or last retry) left it."""

    seq: int
    partition: int
    tenant_id: str
    job_id: str
    scheduled_at_ms: int
    attempt: int
    target: str  # JSON texts, as stored: the caller parses each distinct one once
    payload: str
    retry: str


_COLUMNS = "seq, partition, tenant_id, job_id, scheduled_at_ms, attempt, target, payload, retry"

# Each tenant that has outbox rows, by skipping through the (tenant_id, due_at_ms) index: one
# probe per tenant, however many rows a stalled tenant has piled up.
_TENANTS = """
WITH RECURSIVE t(tenant_id) AS (
    SELECT MIN(tenant_id) FROM outbox
    UNION ALL
    SELECT (SELECT MIN(tenant_id) FROM outbox WHERE tenant_id > t.tenant_id)
    FROM t WHERE t.tenant_id IS NOT NULL
)
SELECT tenant_id FROM t WHERE tenant_id IS NOT NULL
"""


def due_calls(
    conn: sqlite3.Connection,
    node_id: str,
    now_ms: int,
    free_slots: Callable[[list[str]], Mapping[str, int]],
    skip: Collection[int],
) -> list[DueCall]:
    """Due calls in the node's partitions, oldest first per tenant, at most `free_slots`
    (given the tenants that have due calls) per tenant, leaving out the rows in `skip`."""
    partitions = list(held_partitions(conn, node_id, now_ms))
    if not partitions:
        return []
    marks = ",".join("?" * len(partitions))
    due = f"FROM outbox WHERE tenant_id = ? AND due_at_ms <= ? AND partition IN ({marks})"
    tenants = [
        tenant_id
        for (tenant_id,) in conn.execute(_TENANTS).fetchall()
        if conn.execute(f"SELECT 1 {due} LIMIT 1", (tenant_id, now_ms, *partitions)).fetchone()
    ]
    free = free_slots(tenants)
    calls: list[DueCall] = []
    for tenant_id in tenants:
        if free.get(tenant_id, 0) <= 0:
            continue
        rows = conn.execute(
            f"SELECT {_COLUMNS} {due} ORDER BY due_at_ms, seq LIMIT ?",
            (tenant_id, now_ms, *partitions, free[tenant_id] + len(skip)),
        )
        fresh = [row for row in rows if row[0] not in skip][: free[tenant_id]]
        calls.extend(map(DueCall._make, fresh))
    return calls


def tenants(conn: sqlite3.Connection, tenant_ids: Collection[str]) -> dict[str, Tenant]:
    """The tenants named (secrets, allowed hosts, alert URL) for signing and checking calls."""
    found = {tenant_id: get_tenant(conn, tenant_id) for tenant_id in tenant_ids}
    return {tenant_id: tenant for tenant_id, tenant in found.items() if tenant is not None}
