""" "Run B after A" (issue 33 §2, log level 11): who follows whom, and B's runs.

`dependencies` holds one row per job B not cancelled whose schedule is `{"after": {"job_id":
A, "on": ...}}` (store/job_keys.py writes it with B's other indexed fields). When apply ends a
run of A (`follow`, called by the handler that ends it: an ack, a dead letter, an HTTP or broker
outcome), each dependent B that is active and whose `on` matches gets a run at A's run's
scheduled time, due at once, in the same transaction: A's end and B's run are one log entry,
so no failover can keep one without the other. The run is a trigger-like due row (as a
backfill's), so its claim keeps every fence and B's own target, retry and tenant limits;
`run_upstreams` records which run of A made it. A skipped run of A never ran and ends nothing.

Tenants with no dependency pay one primary-key probe per command (`_HAS_ANY`), never a
per-run read: a spike's acks stay as they were.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Literal

import msgspec

from schedd.store import open_history
from schedd.store.events import DueAdded
from schedd.store.records import add_due

MAX_CHAIN_JOBS = 10  # a job, the one it runs after, and so on up: at most this many
MAX_DOWNSTREAM = 1_000  # dependents a job's view lists

Ended = Literal["succeeded", "dead"]
_MATCHES: dict[Ended, frozenset[str]] = {
    "succeeded": frozenset({"success", "finished"}),
    "dead": frozenset({"failure", "finished"}),
}
_HAS_ANY = "SELECT 1 FROM dependencies WHERE tenant_id = ? LIMIT 1"
_UPSTREAM_OF = "SELECT upstream_job_id FROM dependencies WHERE job_id = ?"
_DEPENDENTS = (
    "SELECT d.upstream_job_id, d.job_id, d.on_outcome, j.partition, j.status "
    "FROM dependencies d JOIN jobs j ON j.job_id = d.job_id "
    "WHERE d.tenant_id = ? AND d.upstream_job_id IN (SELECT value FROM json_each(?)) "
    "ORDER BY d.upstream_job_id, d.job_id"
)
# B already has a run (or one pending) at the slot: a redriven run of A ending again, a manual
# trigger, two endings of one slot.
_HAS_RUN = (
    "SELECT EXISTS (SELECT 1 FROM runs WHERE job_id = :job AND scheduled_at_ms = :at) "
    "OR EXISTS (SELECT 1 FROM run_keys WHERE job_id = :job AND scheduled_at_ms = :at) "
    "OR EXISTS (SELECT 1 FROM run_upstreams WHERE job_id = :job AND scheduled_at_ms = :at) "
    "OR EXISTS (SELECT 1 FROM due WHERE job_id = :job AND scheduled_at_ms = :at)"
)
# The longest chain of dependents below a job (0: none), bounded (a cycle cannot be stored,
# and the bound keeps a corrupt one finite).
_DEPTH_BELOW = f"""
WITH RECURSIVE below(job_id, depth) AS (
    SELECT :job, 0
    UNION
    SELECT d.job_id, below.depth + 1 FROM dependencies d JOIN below
    ON d.tenant_id = :tenant AND d.upstream_job_id = below.job_id
    WHERE below.depth < {MAX_CHAIN_JOBS}
)
SELECT max(depth) FROM below
"""
_JSON = msgspec.json.Encoder()


def refusal(
    conn: sqlite3.Connection,
    tenant_id: str,
    job_id: str,
    upstream_job_id: str,
    *,
    unknown_ok: bool = False,
) -> str | None:
    """Why job `job_id` cannot run after `upstream_job_id` (None: it can): the upstream is not
    this tenant's job, is cancelled, is the job itself, would close a cycle (named), or the
    chain would be longer than MAX_CHAIN_JOBS. The API asks first (its 422) and apply again
    (two changes that pass alone are ordered by the log): the same answer from the same state.
    `unknown_ok`: a plan's (a dry run's) question, whose upstream may be made by the same plan:
    an upstream that does not exist yet is no refusal there."""
    field = "schedule.after.job_id"
    if upstream_job_id == job_id:
        return f"{field}: a job cannot run after itself"
    row = conn.execute(
        "SELECT status FROM jobs WHERE job_id = ? AND tenant_id = ?", (upstream_job_id, tenant_id)
    ).fetchone()
    if row is None:
        return None if unknown_ok else f"{field}: no job {upstream_job_id!r}"
    if row[0] == "cancelled":
        return f"{field}: job {upstream_job_id} is cancelled"
    chain = [job_id, upstream_job_id]
    while len(chain) <= MAX_CHAIN_JOBS:
        above = conn.execute(_UPSTREAM_OF, (chain[-1],)).fetchone()
        if above is None:
            break
        chain.append(str(above[0]))
        if chain[-1] == job_id:
            path = " -> ".join(chain)
            return f"{field}: would close a cycle {path}"
    (below,) = conn.execute(_DEPTH_BELOW, {"job": job_id, "tenant": tenant_id}).fetchone()
    if len(chain) + (below or 0) > MAX_CHAIN_JOBS:
        return (
            f"{field}: would make a chain of more than {MAX_CHAIN_JOBS} jobs run one after another"
        )
    return None


def add(tx: sqlite3.Connection, tenant_id: str, job_id: str, upstream: tuple[str, str]) -> None:
    """Job `job_id` runs after upstream[0], on upstream[1] (checked by `refusal`)."""
    tx.execute(
        "INSERT INTO dependencies (tenant_id, upstream_job_id, job_id, on_outcome) "
        "VALUES (?, ?, ?, ?)",
        (tenant_id, upstream[0], job_id, upstream[1]),
    )


def drop(tx: sqlite3.Connection, job_id: str) -> None:
    """Job `job_id` runs after nothing any more (cancelled, or a schedule of its own)."""
    tx.execute("DELETE FROM dependencies WHERE job_id = ?", (job_id,))


def follow(
    tx: sqlite3.Connection, ts_ms: int, tenant_id: str, ended: Iterable[tuple[str, int, Ended]]
) -> list[DueAdded]:
    """Runs of the tenant's jobs ended (`ended`: (job_id, scheduled_at_ms, how) in the
    command's order, a generator read only when the tenant has dependencies): each active
    dependent whose `on` matches gets a run at that scheduled time, due at `ts_ms`. Returns the
    due runs added (the dispatcher is offered them at once)."""
    if tx.execute(_HAS_ANY, (tenant_id,)).fetchone() is None:
        return []
    runs = list(ended)
    if not runs:
        return []
    upstreams = sorted({job_id for job_id, _, _ in runs})
    dependents: dict[str, list[tuple[str, str, int, str]]] = {}
    for upstream, job_id, on, partition, job_status in tx.execute(
        _DEPENDENTS, (tenant_id, _JSON.encode(upstreams).decode())
    ):
        dependents.setdefault(upstream, []).append((job_id, on, partition, job_status))
    added: list[DueAdded] = []
    for upstream, scheduled_at_ms, status in runs:
        for job_id, on, partition, job_status in dependents.get(upstream, ()):
            # A paused B misses the ending, as a paused schedule misses its occurrences.
            if on not in _MATCHES[status] or job_status != "active":
                continue
            (taken,) = tx.execute(_HAS_RUN, {"job": job_id, "at": scheduled_at_ms}).fetchone()
            if taken or open_history.slots_taken(tx, job_id, [scheduled_at_ms]):
                continue  # (B's run may have moved into history: an open segment's here)
            add_due(
                tx,
                partition=partition,
                fire_at_ms=ts_ms,
                job_id=job_id,
                scheduled_at_ms=scheduled_at_ms,
                is_trigger=True,
            )
            tx.execute(
                "INSERT INTO run_upstreams (job_id, scheduled_at_ms, upstream_job_id, "
                "upstream_status) VALUES (?, ?, ?, ?)",
                (job_id, scheduled_at_ms, upstream, status),
            )
            added.append(DueAdded(job_id, ts_ms, scheduled_at_ms, True))
    return added


def downstream(conn: sqlite3.Connection, tenant_id: str, job_id: str) -> list[tuple[str, str]]:
    """The jobs (not cancelled) that run after this one: (job_id, on), in job_id order."""
    rows = conn.execute(
        "SELECT job_id, on_outcome FROM dependencies WHERE tenant_id = ? AND upstream_job_id = ? "
        "ORDER BY job_id LIMIT ?",
        (tenant_id, job_id, MAX_DOWNSTREAM),
    )
    return [(str(b), str(on)) for b, on in rows]


def upstream_runs(
    conn: sqlite3.Connection, job_id: str, low_ms: int, high_ms: int
) -> dict[int, tuple[str, str]]:
    """The runs of this job in [low_ms, high_ms] that a run of another job made: scheduled
    time -> (upstream job, how its run ended)."""
    rows = conn.execute(
        "SELECT scheduled_at_ms, upstream_job_id, upstream_status FROM run_upstreams "
        "WHERE job_id = ? AND scheduled_at_ms BETWEEN ? AND ?",
        (job_id, low_ms, high_ms),
    )
    return {int(at): (str(a), str(status)) for at, a, status in rows}


def forget_runs(tx: sqlite3.Connection, runs: list[tuple[str, int]]) -> None:
    """Retention deleted these runs (one look when no run was ever made by another's end)."""
    if runs and tx.execute("SELECT 1 FROM run_upstreams LIMIT 1").fetchone() is not None:
        tx.executemany("DELETE FROM run_upstreams WHERE job_id = ? AND scheduled_at_ms = ?", runs)


def forget_job(tx: sqlite3.Connection, tenant_id: str, job_id: str) -> None:
    """Retention deleted a job: the record of its runs' upstreams, and its dependents' rows
    (they stay active and idle: nothing can end a run of it again)."""
    tx.execute("DELETE FROM run_upstreams WHERE job_id = ?", (job_id,))
    tx.execute(
        "DELETE FROM dependencies WHERE tenant_id = ? AND upstream_job_id = ?", (tenant_id, job_id)
    )
