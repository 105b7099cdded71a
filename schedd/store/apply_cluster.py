"""Apply functions for cluster membership records: which node serves which addresses."""

from __future__ import annotations

import sqlite3
from typing import Any

from schedd.store.command import Command, ok


def register_node(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    """Record (or refresh) a node's API and Raft addresses, so any node can list them."""
    b = cmd.body
    tx.execute(
        "INSERT INTO nodes (node_id, api, raft, registered_at_ms) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (node_id) DO UPDATE SET api = excluded.api, raft = excluded.raft, "
        "registered_at_ms = excluded.registered_at_ms",
        (b["node_id"], b["api"], b["raft"], cmd.ts_ms),
    )
    return ok()


def barrier(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    """Does nothing: once applied on a node, that node holds everything committed before it."""
    return ok()


HANDLERS = {"register_node": register_node, "barrier": barrier}
