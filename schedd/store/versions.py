"""A job's history of versions (issue 31): the job_versions rows, and the versions a job had
before its first recorded change, read from its row and its audit trail (`base_versions`).

Read-only. apply/versions.py writes the rows, starting with `base_versions` on a job's first
recorded change, so a job that no level-8 command changed reads as that change will find it.
A create writes no row: version 1 of an unchanged job is its row (creation time, spec) and its
create's audit record (who).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

from schedd.model import JobChange
from schedd.store.queries import job_json
from schedd.timeformat import format_instant
from schedd.wire.jobs import JobVersionView


class Version(NamedTuple):
    """One version as stored: `fields` a JSON list (an update's), `spec` the job's stored spec
    text after the change (payload sealed as stored), None when it was not recorded."""

    version: int
    at_ms: int
    actor: str | None
    change: str
    fields: str | None
    spec: str | None


COLUMNS = ", ".join(Version._fields)
CREATE_ACTION = "create_jobs"  # add_jobs records its creates under this action too
CHANGE_OF_ACTION = {
    "update_job": JobChange.UPDATE,
    "pause_job": JobChange.PAUSE,
    "resume_job": JobChange.RESUME,
    "cancel_job": JobChange.CANCEL,
}
_ACTIONS = ", ".join(f"'{action}'" for action in (CREATE_ACTION, *CHANGE_OF_ACTION))
_SPEC_CHANGES = (JobChange.UPDATE, JobChange.RESCHEDULE)


def change_of_update(fields: Sequence[str] | None) -> JobChange:
    """A PATCH of the schedule alone is a reschedule (what `schedctl reschedule` sends)."""
    return JobChange.RESCHEDULE if list(fields or ()) == ["schedule"] else JobChange.UPDATE


def base_versions(conn: sqlite3.Connection, job_id: str) -> list[Version]:
    """The versions of a job without rows: its create, then each change its audit trail still
    holds (made before the cluster recorded versions), oldest first. A spec is known only from
    the last spec change on (the job's spec now); before it, None."""
    job = conn.execute(
        "SELECT spec, created_at_ms FROM jobs WHERE job_id = ?", (job_id,)
    ).fetchone()
    if job is None:
        return []
    spec, created_at_ms = job
    records = conn.execute(
        "SELECT at_ms, actor, action, detail FROM audit INDEXED BY audit_by_job "
        f"WHERE job_id = ? AND action IN ({_ACTIONS}) ORDER BY seq",
        (job_id,),
    ).fetchall()
    creator = next((actor for _, actor, action, _ in records if action == CREATE_ACTION), None)
    changes = [_audited(*record) for record in records if record[2] != CREATE_ACTION]
    last_spec_change = max(
        (i for i, (_, _, change, _) in enumerate(changes) if change in _SPEC_CHANGES), default=-1
    )
    versions = [
        Version(1, created_at_ms, creator, JobChange.CREATE, None, _if(last_spec_change < 0, spec))
    ]
    for i, (at_ms, actor, change, fields) in enumerate(changes):
        versions.append(
            Version(i + 2, at_ms, actor, change, fields, _if(i >= last_spec_change, spec))
        )
    return versions


def _audited(at_ms: int, actor: str, action: str, detail: str | None) -> tuple[Any, ...]:
    """(at_ms, actor, change, fields) of an audit record of a job change."""
    if action != "update_job":
        return at_ms, actor, CHANGE_OF_ACTION[action], None
    fields = json.loads(detail or "{}").get("fields") or []
    return at_ms, actor, change_of_update(fields), json.dumps(fields, separators=(",", ":"))


def _if(known: bool, spec: str) -> str | None:
    return spec if known else None


def job_versions(
    conn: sqlite3.Connection, tenant_id: str, job_id: str, *, before: int, limit: int
) -> list[Version] | None:
    """A page of the tenant's job's versions (`list_versions`), read in one transaction;
    None when the tenant has no such job."""
    conn.execute("BEGIN")
    try:
        found = conn.execute(
            "SELECT 1 FROM jobs WHERE job_id = ? AND tenant_id = ?", (job_id, tenant_id)
        ).fetchone()
        if found is None:
            return None
        return list_versions(conn, job_id, before=before, limit=limit)
    finally:
        conn.execute("COMMIT")


def list_versions(
    conn: sqlite3.Connection, job_id: str, *, before: int, limit: int
) -> list[Version]:
    """A page of a job's versions numbered below `before`, newest first."""
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM job_versions WHERE job_id = ? AND version < ? "
        "ORDER BY version DESC LIMIT ?",
        (job_id, before, limit),
    ).fetchall()
    if rows or _has_rows(conn, job_id):
        return [Version(*row) for row in rows]
    base = [v for v in base_versions(conn, job_id) if v.version < before]
    return base[::-1][:limit]


def _has_rows(conn: sqlite3.Connection, job_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM job_versions WHERE job_id = ? LIMIT 1", (job_id,))
    return found.fetchone() is not None


def version_view(job_id: str, tenant_id: str, version: Version) -> JobVersionView:
    """The API's version object; its spec's fields as the job object shows them (the payload
    as stored: the API opens it)."""
    spec = None
    if version.spec is not None:
        shown = job_json(job_id, tenant_id, json.loads(version.spec), "active", None, 1, 0, 0)
        spec = shown.spec_fields()
    return JobVersionView(
        version=version.version,
        changed_at=format_instant(version.at_ms),
        changed_by=version.actor,
        change=version.change,
        fields=None if version.fields is None else json.loads(version.fields),
        spec=spec,
    )
