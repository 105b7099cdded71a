"""A digest of the replicated tables: equal on every replica at the same applied index."""

from __future__ import annotations

import hashlib
import itertools
import sqlite3

from schedd.store.schema import LATER_TABLES, REPLICATED_TABLES


def state_digest(conn: sqlite3.Connection) -> tuple[int, str]:
    """(applied_index, sha256 hex) read in one transaction, so the two agree."""
    conn.execute("BEGIN")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'applied_index'").fetchone()
        digest = hashlib.sha256()
        for table, order in REPLICATED_TABLES:
            # Table names and orders are constants of schema.py, never input.
            records = conn.execute(f"SELECT * FROM {table} ORDER BY {order}")
            first = records.fetchone()
            if first is None and table in LATER_TABLES:
                continue
            digest.update(f"\x00table {table}\x00".encode())
            for record in itertools.chain(() if first is None else (first,), records):
                digest.update(repr(record).encode())
                digest.update(b"\n")
        return (0 if row is None else int(row[0])), digest.hexdigest()
    finally:
        conn.execute("COMMIT")
