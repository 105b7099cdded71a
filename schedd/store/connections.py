"""Reads of tenants' broker connections: the API's list (never the URL) and the deliverers' one
connection with its URL opened. Key lookups and one tenant's key range only."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from schedd.model import BrokerConnection
from schedd.sealing import PayloadKeys
from schedd.timeformat import format_instant
from schedd.wire.tenants import ConnectionView


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionInfo:
    """A connection as its tenant may see it: no URL, so no credentials."""

    name: str
    kind: str
    host: str
    created_at_ms: int

    def view(self) -> ConnectionView:
        """The API's connection object."""
        return ConnectionView(
            name=self.name,
            kind=self.kind,
            host=self.host,
            created_at=format_instant(self.created_at_ms),
        )


def list_connections(
    conn: sqlite3.Connection, tenant_id: str, *, after: str = "", limit: int = 1000
) -> list[ConnectionInfo]:
    """A page of a tenant's connections in name order (the primary key's range)."""
    rows = conn.execute(
        "SELECT name, kind, host, created_at_ms FROM connections "
        "WHERE tenant_id = ? AND name > ? ORDER BY name LIMIT ?",
        (tenant_id, after, limit),
    )
    return [ConnectionInfo(name=r[0], kind=r[1], host=r[2], created_at_ms=r[3]) for r in rows]


def get_connection(conn: sqlite3.Connection, tenant_id: str, name: str) -> ConnectionInfo | None:
    row = conn.execute(
        "SELECT name, kind, host, created_at_ms FROM connections WHERE tenant_id = ? AND name = ?",
        (tenant_id, name),
    ).fetchone()
    if row is None:
        return None
    return ConnectionInfo(name=row[0], kind=row[1], host=row[2], created_at_ms=row[3])


def connection_kinds(conn: sqlite3.Connection, tenant_id: str, names: set[str]) -> dict[str, str]:
    """name -> kind of those of `names` the tenant has."""
    kinds: dict[str, str] = {}
    for name in sorted(names):
        found = get_connection(conn, tenant_id, name)
        if found is not None:
            kinds[name] = found.kind
    return kinds


def broker_connection(
    conn: sqlite3.Connection, keys: PayloadKeys, tenant_id: str, name: str
) -> BrokerConnection | None:
    """The connection a deliverer opens, its URL unsealed (never log, store or answer it).
    Raises sealing.PayloadUnreadable when no configured key opens the URL."""
    row = conn.execute(
        "SELECT kind, url, addresses, created_at_ms FROM connections "
        "WHERE tenant_id = ? AND name = ?",
        (tenant_id, name),
    ).fetchone()
    if row is None:
        return None
    kind, stored_url, addresses, created_ms = row
    return BrokerConnection(
        tenant_id=tenant_id,
        name=name,
        kind=kind,
        url=str(keys.open(stored_url)),
        pinned_addresses=tuple(json.loads(addresses)),
        created_ms=created_ms,
    )


def connection_problem(name: str, wanted_kind: str, kind: str | None) -> str | None:
    """Why a target cannot use connection `name` of `kind` (None: there is none), or None: the
    400 about `target.connection` that the API and apply both give."""
    if kind is None:
        return f"no connection named {name!r}; create it first (POST /v1/connections)"
    if kind != wanted_kind:
        return f"connection {name!r} is a {kind} connection, this target needs a {wanted_kind} one"
    return None
