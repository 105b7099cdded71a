"""Failure policies (log level 8): a job's own (its spec's "on_failure") or its tenant's default
(`failure_policies`). Read by apply when a run ends dead (store/apply/failures.py) and by the
API's tenant view."""

from __future__ import annotations

import json
import sqlite3
from typing import NamedTuple


class Policy(NamedTuple):
    alert_url: str | None
    after: int
    pause: bool


def policy_of(value: object) -> Policy | None:
    """A stored policy, read leniently: None when it is not an object of the known shape."""
    if not isinstance(value, dict):
        return None
    url, after, pause = value.get("alert_url"), value.get("after"), value.get("pause")
    if type(after) is not int or after < 1 or not isinstance(pause, bool):
        return None
    if url is not None and not isinstance(url, str):
        return None
    return Policy(url, after, pause)


def set_default(tx: sqlite3.Connection, tenant_id: str, policy: object) -> None:
    """A tenant's default (None: none)."""
    if policy is None:
        tx.execute("DELETE FROM failure_policies WHERE tenant_id = ?", (tenant_id,))
        return
    tx.execute(
        "INSERT OR REPLACE INTO failure_policies (tenant_id, on_failure) VALUES (?, ?)",
        (tenant_id, json.dumps(policy, separators=(",", ":"), sort_keys=True)),
    )


def default_of(conn: sqlite3.Connection, tenant_id: str) -> Policy | None:
    row = conn.execute(
        "SELECT on_failure FROM failure_policies WHERE tenant_id = ?", (tenant_id,)
    ).fetchone()
    return None if row is None else policy_of(json.loads(row[0]))


# A job's own policy as SQL reads it from the stored spec, without decoding the spec (its payload)
OWN_POLICY = "json_extract(spec, '$.on_failure')"


def job_policy(conn: sqlite3.Connection, tenant_id: str, own: str | None) -> Policy | None:
    """The policy a job follows: its own (`own`: OWN_POLICY's value, a JSON text or a scalar),
    else its tenant's default."""
    if own is not None:
        return policy_of(json.loads(own) if isinstance(own, str) and own[:1] == "{" else own)
    return default_of(conn, tenant_id)
