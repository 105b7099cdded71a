"""Apply add_jobs (log level 5): create_jobs's rows, decided job by job, written set by set.

The same rows as create_jobs for the same jobs (jobs, due, idempotency, connection_uses, one
audit record a job under the action "create_jobs"); each set is one executemany, and the spec
is stored as the text the command carries. Must not decide anything create_jobs decides
otherwise: a test applies both forms and compares the tables.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any, TypedDict

import msgspec

from schedd.store import job_keys
from schedd.store.apply.jobs import tenant_quota
from schedd.store.command import Command, Handler, Rejected, Result, ok
from schedd.store.commands import AddJobs, CreateJobs, NewJobRow
from schedd.store.connections import connection_problem
from schedd.store.events import DueAdded
from schedd.store.records import actor_of
from schedd.stored_spec import load_spec

_MISMATCH = "Idempotency-Key was used before with a different body"
_KEYS_SEEN = (
    "SELECT key, request_hash, job_id FROM idempotency "
    "WHERE tenant_id = ? AND key IN (SELECT value FROM json_each(?))"
)


class _Rows:
    """The row sets of one command's created jobs, in the command's order (written before a
    job that runs after another, which may be one of them)."""

    def __init__(self, events: list[DueAdded] | None = None) -> None:
        self.jobs: list[tuple[Any, ...]] = []
        self.due: list[tuple[Any, ...]] = []
        self.keys: list[tuple[Any, ...]] = []
        self.uses: list[tuple[Any, ...]] = []
        self.indexed: list[tuple[str, job_keys.Index]] = []  # levels 9, 10 and 11
        self.events: list[DueAdded] = [] if events is None else events


def add_jobs(tx: sqlite3.Connection, cmd: Command[AddJobs]) -> Result:
    tenant_id = cmd.body.tenant_id
    quota = tenant_quota(tx, tenant_id)
    if isinstance(quota, Rejected):
        return quota
    limit, live = quota
    jobs = cmd.body.jobs
    seen = _keys_seen(tx, tenant_id, (job.idempotency_key for job in jobs))
    specs = _Specs(tx, tenant_id)
    keys = _Keys(tx, tenant_id)
    rows = _Rows()
    created = 0
    existing: list[list[int | str]] = []  # [index, job_id]
    errors: list[list[int | str]] = []  # [index, code, message]
    for i, job in enumerate(jobs):
        key = job.idempotency_key
        if key is not None and key in seen:
            _seen_before(i, job, seen[key], existing, errors)
            continue
        if live >= limit:
            errors.append([i, "quota_exceeded", "tenant has reached max_active_jobs"])
            continue
        used, problem = specs.check(job.spec)
        if problem is not None:
            errors.append([i, "invalid_request", problem])
            continue
        index = specs.index(job.spec)
        if index.upstream is not None:  # its upstream may be a job of this command (level 11)
            _write(tx, cmd, rows)
            rows = _Rows(rows.events)
        refused = _index_refusal(tx, tenant_id, job.job_id, keys, index)
        if refused is not None:
            errors.append([i, *refused])
            continue
        keys.take(index, job.job_id)
        live += 1
        created += 1
        if key is not None:
            seen[key] = (job.request_hash, job.job_id)
        _add(rows, cmd, job, used)
        if not index.is_empty:
            rows.indexed.append((job.job_id, index))
    _write(tx, cmd, rows)
    tx.execute("UPDATE tenants SET live_jobs = ? WHERE tenant_id = ?", (live, tenant_id))
    fields: AddedJSON = {"created": created}
    if existing:
        fields["existing"] = existing
    if errors:
        fields["errors"] = errors
    return ok(*rows.events, **fields)


def _seen_before(
    i: int,
    job: NewJobRow,
    seen: tuple[str | None, str],
    existing: list[list[int | str]],
    errors: list[list[int | str]],
) -> None:
    """A job whose Idempotency-Key was used before: the job made then, or a mismatch."""
    request_hash, job_id = seen
    if request_hash == job.request_hash:
        existing.append([i, job_id])
    else:
        errors.append([i, "idempotency_mismatch", _MISMATCH])


class AddedJSON(TypedDict, total=False):
    """add_jobs' result as kept (results.JobsAdded reads it); the lists only when not empty."""

    created: int
    existing: list[list[int | str]]
    errors: list[list[int | str]]


def _keys_seen(
    tx: sqlite3.Connection, tenant_id: str, keys: Iterable[str | None]
) -> dict[str, tuple[str | None, str]]:
    """The command's Idempotency-Keys seen before: key -> (request hash, job id)."""
    wanted = [key for key in keys if key is not None]
    if not wanted:
        return {}
    found = tx.execute(_KEYS_SEEN, (tenant_id, msgspec.json.encode(wanted).decode()))
    return {key: (request_hash, job_id) for key, request_hash, job_id in found}


def _index_refusal(
    tx: sqlite3.Connection, tenant_id: str, job_id: str, keys: _Keys, index: job_keys.Index
) -> tuple[str, str] | None:
    """(code, message) of a job its key, calendars or upstream refuse (create_jobs' order),
    or None."""
    taken = keys.taken(index)
    if taken is not None:
        return "conflict", taken
    return job_keys.refusal(tx, tenant_id, job_id, index)


class _Keys:
    """The keys of one command's jobs, checked free: against the store and the command's
    jobs before (whose rows are written at the end)."""

    def __init__(self, tx: sqlite3.Connection, tenant_id: str) -> None:
        self._tx = tx
        self._tenant_id = tenant_id
        self._taken: dict[str, str] = {}  # key -> the job of this command that takes it

    def taken(self, index: job_keys.Index) -> str | None:
        """Why the job cannot have its key (it is taken), or None."""
        key = index.key
        if key is None:
            return None
        holder = self._taken.get(key) or job_keys.holder(self._tx, self._tenant_id, key)
        return None if holder is None else job_keys.taken_message(key, holder)

    def take(self, index: job_keys.Index, job_id: str) -> None:
        """The job is created: its key is taken for the command's later jobs."""
        if index.key is not None:
            self._taken[index.key] = job_id


class _Specs:
    """The broker connection a spec's target uses, checked against the tenant's connections
    (read once per name and command: this command writes none); and a spec's key, labels and
    excluded calendars.
    Each spec text is read once per command (a spike's jobs often share one)."""

    def __init__(self, tx: sqlite3.Connection, tenant_id: str) -> None:
        self._tx = tx
        self._tenant_id = tenant_id
        # spec text -> ((name, kind) of its connection or None, its key, labels and calendars)
        self._specs: dict[str, tuple[tuple[str, str] | None, job_keys.Index]] = {}
        self._kinds: dict[str, str | None] = {}  # name -> the stored connection's kind

    def _read(self, text: str) -> tuple[tuple[str, str] | None, job_keys.Index]:
        found = self._specs.get(text)
        if found is None:
            spec = load_spec(text)
            index = job_keys.Index.of_stored(spec)
            self._specs[text] = found = (spec.connection(), index)
        return found

    def index(self, text: str) -> job_keys.Index:
        return self._read(text)[1]

    def check(self, spec: str) -> tuple[str | None, str | None]:
        """(connection name the job uses or None, why it cannot be used or None)."""
        used = self._read(spec)[0]
        if used is None:
            return None, None
        name, kind = used
        if name not in self._kinds:
            row = self._tx.execute(
                "SELECT kind FROM connections WHERE tenant_id = ? AND name = ?",
                (self._tenant_id, name),
            ).fetchone()
            self._kinds[name] = None if row is None else row[0]
        problem = connection_problem(name, kind, self._kinds[name])
        return name, None if problem is None else f"target.connection: {problem}"


def _add(rows: _Rows, cmd: Command[AddJobs], job: NewJobRow, used: str | None) -> None:
    tenant_id, ts_ms = cmd.body.tenant_id, cmd.ts_ms
    rows.jobs.append(
        (
            job.job_id,
            tenant_id,
            job.partition,
            job.spec,
            job.next_run_at_ms,
            job.next_fire_at_ms,
            job.created_at_ms,
            job.created_at_ms,
        )
    )
    fire_at, run_at = job.next_fire_at_ms, job.next_run_at_ms
    if fire_at is not None and run_at is not None:
        rows.due.append((job.partition, fire_at, job.job_id, run_at))
        rows.events.append(DueAdded(job.job_id, fire_at, run_at, False))
    if job.idempotency_key is not None:
        rows.keys.append((tenant_id, job.idempotency_key, job.request_hash, job.job_id, ts_ms))
    if used is not None:
        rows.uses.append((job.job_id, tenant_id, used))


def _write(tx: sqlite3.Connection, cmd: Command[AddJobs], rows: _Rows) -> None:
    """Each row set in one statement run many times; the audit records in the jobs' order."""
    if not rows.jobs:
        return
    tx.executemany(
        "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, "
        "next_fire_at_ms, version, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, ?, 'active', ?, ?, 1, ?, ?)",
        rows.jobs,
    )
    tx.executemany(
        "INSERT OR IGNORE INTO due (partition, fire_at_ms, job_id, scheduled_at_ms, is_trigger) "
        "VALUES (?, ?, ?, ?, 0)",
        rows.due,
    )
    if rows.keys:
        tx.executemany(
            "INSERT INTO idempotency (tenant_id, key, request_hash, job_id, created_at_ms) "
            "VALUES (?, ?, ?, ?, ?)",
            rows.keys,
        )
    if rows.uses:
        tx.executemany(
            "INSERT INTO connection_uses (job_id, tenant_id, name) VALUES (?, ?, ?)", rows.uses
        )
    job_keys.add_many(tx, cmd.body.tenant_id, rows.indexed)
    tenant_id, actor = cmd.body.tenant_id, actor_of(cmd)
    tx.executemany(
        "INSERT INTO audit (at_ms, tenant_id, actor, action, job_id, detail) "
        f"VALUES (?, ?, ?, '{CreateJobs.TYPE}', ?, NULL)",
        [(cmd.ts_ms, tenant_id, actor, row[0]) for row in rows.jobs],
    )


HANDLERS: dict[str, Handler] = {AddJobs.TYPE: add_jobs}
