"""Apply functions for cluster membership records: which node serves which addresses."""

from __future__ import annotations

import sqlite3

from schedd.store.command import Command, Handler, Result, ok
from schedd.store.commands import Barrier, DeregisterNode, RegisterNode


def register_node(tx: sqlite3.Connection, cmd: Command[RegisterNode]) -> Result:
    """Record (or refresh) a node's API and Raft addresses, so any node can list them."""
    b = cmd.body
    tx.execute(
        "INSERT INTO nodes (node_id, api, raft, registered_at_ms) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (node_id) DO UPDATE SET api = excluded.api, raft = excluded.raft, "
        "registered_at_ms = excluded.registered_at_ms",
        (b.node_id, b.api, b.raft, cmd.ts_ms),
    )
    return ok()


def deregister_node(tx: sqlite3.Connection, cmd: Command[DeregisterNode]) -> Result:
    """Forget a node removed from the Raft group. Its leases are left to expire: the leader then
    moves them like a dead node's (a removed node can commit nothing to claim with meanwhile)."""
    deleted = tx.execute("DELETE FROM nodes WHERE node_id = ?", (cmd.body.node_id,)).rowcount
    return ok(deregistered=deleted)


def barrier(tx: sqlite3.Connection, cmd: Command[Barrier]) -> Result:
    """Does nothing: once applied on a node, that node holds everything committed before it."""
    return ok()


HANDLERS: dict[str, Handler] = {
    RegisterNode.TYPE: register_node,
    DeregisterNode.TYPE: deregister_node,
    Barrier.TYPE: barrier,
}
