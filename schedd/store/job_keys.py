"""What apply indexes from a job's spec: its stable key and labels (issue 32, log level 9), the
calendars its schedule excludes (issue 33, log level 10) and the job it runs after (level 11).

`job_keys` holds the key of each job not cancelled (so a key names at most one such job of a
tenant: PUT /v1/jobs/by-key/{key}); `job_labels` each label of each job while the job is kept;
`calendar_uses` each calendar each job not cancelled excludes (a calendar in use cannot be
deleted, and a change of it fences the claims of the jobs that use it); `dependencies` (store/
dependencies.py) the job each job not cancelled runs after. Apply writes them from
the spec it stores (a create, an update), drops the key and the uses when the job is cancelled
and all when retention deletes it. The readers below never write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from schedd.calendars import stored_exclude
from schedd.store import dependencies
from schedd.stored_spec import StoredSpec, stored_upstream

_HOLDER = "SELECT job_id FROM job_keys WHERE tenant_id = ? AND key = ?"


class Index(NamedTuple):
    """What a stored spec gives the index: its key, labels, excluded calendars and upstream
    ((job_id, on) of an `after` schedule); a value no release wrote, as in the store's own
    tests, reads as none."""

    key: str | None
    labels: tuple[tuple[str, str], ...]
    calendars: tuple[str, ...] = ()
    upstream: tuple[str, str] | None = None

    @classmethod
    def of(
        cls,
        key: Any,
        labels: Any,
        calendars: tuple[str, ...] = (),
        upstream: tuple[str, str] | None = None,
    ) -> Index:
        pairs: tuple[tuple[str, str], ...] = ()
        if isinstance(labels, Mapping):
            pairs = tuple(
                (name, value)
                for name, value in sorted(labels.items())
                if isinstance(name, str) and isinstance(value, str)
            )
        return cls(key if isinstance(key, str) else None, pairs, calendars, upstream)

    @classmethod
    def of_spec(cls, spec: Mapping[str, Any]) -> Index:
        schedule = spec.get("schedule")
        if not isinstance(schedule, Mapping):
            return cls.of(spec.get("key"), spec.get("labels"))
        calendars = stored_exclude(schedule)
        return cls.of(spec.get("key"), spec.get("labels"), calendars, stored_upstream(schedule))

    @classmethod
    def of_stored(cls, spec: StoredSpec) -> Index:
        return cls.of(spec.key, spec.labels, spec.excluded_calendars(), spec.upstream())

    @property
    def is_empty(self) -> bool:
        """Nothing to index (most specs): no key, no labels, no calendars."""
        return self == NONE


NONE = Index(None, ())


def refusal(
    conn: sqlite3.Connection,
    tenant_id: str,
    job_id: str,
    index: Index,
    old: Index = NONE,
    *,
    planning: bool = False,
) -> tuple[str, str] | None:
    """Why a spec (replacing `old`'s) cannot be stored, beyond its key, as (error code,
    message): a calendar it excludes does not exist (`invalid_request`, as at level 10), or the
    job it runs after cannot be (`invalid_dependency`; a new upstream only: a job whose
    upstream was pruned can still be changed). None: it can. `planning`: a dry run's question
    (an upstream that does not exist yet may be made by the same plan)."""
    missing = missing_calendar(conn, tenant_id, index) if index.calendars else None
    if missing is not None:
        return "invalid_request", missing
    if index.upstream is None or (
        old.upstream is not None and old.upstream[0] == index.upstream[0]
    ):
        return None
    refused = dependencies.refusal(conn, tenant_id, job_id, index.upstream[0], unknown_ok=planning)
    return None if refused is None else ("invalid_dependency", refused)


def missing_calendar(conn: sqlite3.Connection, tenant_id: str, index: Index) -> str | None:
    """Why a spec cannot be stored: a calendar it excludes does not exist (None: all do)."""
    for name in index.calendars:
        found = conn.execute(
            "SELECT 1 FROM calendars WHERE tenant_id = ? AND name = ?", (tenant_id, name)
        ).fetchone()
        if found is None:
            return f"schedule.exclude: no calendar named {name!r} (POST /v1/calendars first)"
    return None


def holder(conn: sqlite3.Connection, tenant_id: str, key: str) -> str | None:
    """The job not cancelled that has this key, if any."""
    row = conn.execute(_HOLDER, (tenant_id, key)).fetchone()
    return None if row is None else str(row[0])


def taken_message(key: str, job_id: str) -> str:
    return f"key {key!r} is taken by job {job_id}, which is not cancelled"


def add(tx: sqlite3.Connection, tenant_id: str, job_id: str, index: Index) -> None:
    """Index a new job (its key checked free and its upstream by `dependencies.refusal`, by
    the caller)."""
    if index.key is not None:
        tx.execute(
            "INSERT INTO job_keys (tenant_id, key, job_id) VALUES (?, ?, ?)",
            (tenant_id, index.key, job_id),
        )
    if index.labels:
        tx.executemany(
            "INSERT INTO job_labels (tenant_id, name, value, job_id) VALUES (?, ?, ?, ?)",
            [(tenant_id, name, value, job_id) for name, value in index.labels],
        )
    if index.calendars:
        tx.executemany(
            "INSERT INTO calendar_uses (tenant_id, name, job_id) VALUES (?, ?, ?)",
            [(tenant_id, name, job_id) for name in index.calendars],
        )
    if index.upstream is not None:
        dependencies.add(tx, tenant_id, job_id, index.upstream)


def add_many(tx: sqlite3.Connection, tenant_id: str, jobs: Iterable[tuple[str, Index]]) -> None:
    """`add` for the jobs of one command, a statement per table."""
    keys, labels, uses = [], [], []
    for job_id, index in jobs:
        if index.upstream is not None:  # rare: a row of its own
            dependencies.add(tx, tenant_id, job_id, index.upstream)
        if index.key is not None:
            keys.append((tenant_id, index.key, job_id))
        labels += [(tenant_id, name, value, job_id) for name, value in index.labels]
        uses += [(tenant_id, name, job_id) for name in index.calendars]
    if keys:
        tx.executemany("INSERT INTO job_keys (tenant_id, key, job_id) VALUES (?, ?, ?)", keys)
    if labels:
        tx.executemany(
            "INSERT INTO job_labels (tenant_id, name, value, job_id) VALUES (?, ?, ?, ?)", labels
        )
    if uses:
        tx.executemany("INSERT INTO calendar_uses (tenant_id, name, job_id) VALUES (?, ?, ?)", uses)


def replace(tx: sqlite3.Connection, tenant_id: str, job_id: str, old: Index, new: Index) -> None:
    """A job's spec changed (its new key checked free by the caller)."""
    if old.key != new.key:
        tx.execute("DELETE FROM job_keys WHERE job_id = ?", (job_id,))
    if old.labels != new.labels:
        tx.execute("DELETE FROM job_labels WHERE job_id = ?", (job_id,))
    if old.calendars != new.calendars:
        tx.execute("DELETE FROM calendar_uses WHERE job_id = ?", (job_id,))
    if old.key != new.key and new.key is not None:
        add(tx, tenant_id, job_id, Index(new.key, ()))
    if old.labels != new.labels:
        add(tx, tenant_id, job_id, Index(None, new.labels))
    if old.calendars != new.calendars:
        add(tx, tenant_id, job_id, Index(None, (), new.calendars))
    if old.upstream != new.upstream:
        dependencies.drop(tx, job_id)
        if new.upstream is not None:
            dependencies.add(tx, tenant_id, job_id, new.upstream)


def release_key(tx: sqlite3.Connection, job_id: str) -> None:
    """A job cancelled: its key is free for another job, its calendars for a delete, and it
    runs after nothing (its labels stay while it is kept)."""
    tx.execute("DELETE FROM job_keys WHERE job_id = ?", (job_id,))
    tx.execute("DELETE FROM calendar_uses WHERE job_id = ?", (job_id,))
    dependencies.drop(tx, job_id)


def forget(tx: sqlite3.Connection, job_id: str) -> None:
    """A job deleted by retention."""
    release_key(tx, job_id)
    tx.execute("DELETE FROM job_labels WHERE job_id = ?", (job_id,))
