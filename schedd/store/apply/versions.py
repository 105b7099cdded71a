"""Record a change of a job in its versions (issue 31, log level 8): called by the job handlers
for the level-8 forms of their commands (`versioned`), never for the older forms, which must
write what they always wrote.

A create writes nothing (the hot path); a job's first recorded change writes first the versions
the job had until then (store/versions.py `base_versions`: its create from the job row, and any
change its audit trail holds), so each version's spec stays known however the job changes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol

from schedd.model import JobChange
from schedd.store.command import Command
from schedd.store.records import actor_of
from schedd.store.versions import Version, base_versions

_INSERT = (
    "INSERT INTO job_versions (job_id, version, tenant_id, at_ms, actor, change, fields, spec, "
    "superseded_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class ChangedJob(Protocol):
    """The job a command changes."""

    @property
    def job_id(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...


SCHEDD = "schedd"  # the actor of changes schedd makes itself (a failure policy's pause)


def record(
    tx: sqlite3.Connection,
    cmd: Command[Any],
    job: ChangedJob,
    change: JobChange,
    *,
    fields: Sequence[str] | None = None,
    spec: str | None = None,
    by_schedd: bool = False,
) -> None:
    """Add the version `cmd` makes of the job, if it is a level-8 form (`versioned`); call it
    before the job row is written. `spec` is the stored text of a new spec; None: the job's
    spec stays as it is. `by_schedd`: a change schedd itself made, of a job whose level-8 spec
    asked for it (a pause by its failure policy), recorded with the actor "schedd"."""
    if not by_schedd and not cmd.body.versioned:
        return
    job_id, tenant_id = job.job_id, job.tenant_id
    last = tx.execute(
        "SELECT version FROM job_versions WHERE job_id = ? ORDER BY version DESC LIMIT 1",
        (job_id,),
    ).fetchone()
    if last is None:
        version = _write_base(tx, cmd, tenant_id, job_id, base_versions(tx, job_id))
    else:
        tx.execute(
            "UPDATE job_versions SET superseded_at_ms = ? WHERE job_id = ? AND version = ?",
            (cmd.ts_ms, job_id, last[0]),
        )
        version = last[0] + 1
    if spec is None:
        spec = tx.execute("SELECT spec FROM jobs WHERE job_id = ?", (job_id,)).fetchone()[0]
    names = None if fields is None else json.dumps(list(fields), separators=(",", ":"))
    actor = SCHEDD if by_schedd else actor_of(cmd)
    tx.execute(
        _INSERT,
        (job_id, version, tenant_id, cmd.ts_ms, actor, change.value, names, spec, None),
    )


def _write_base(
    tx: sqlite3.Connection, cmd: Command[Any], tenant_id: str, job_id: str, base: list[Version]
) -> int:
    """Write the versions before the first recorded change, each superseded when the next
    was made (the last by `cmd`); the number of the version `cmd` makes."""
    ends = [v.at_ms for v in base[1:]] + [cmd.ts_ms]
    tx.executemany(
        _INSERT,
        [
            (job_id, v.version, tenant_id, v.at_ms, v.actor, v.change, v.fields, v.spec, end)
            for v, end in zip(base, ends, strict=True)
        ],
    )
    return len(base) + 1
