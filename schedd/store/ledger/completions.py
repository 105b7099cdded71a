"""One-time jobs completed by a claim, written later (issue 29, log level 5).

A claim that takes a one-time job's only run used to update the job row in the same apply
(status `completed`, version + 1, no next run). That update cost every replica about a quarter
of its CPU in a spike (py-spy, docs/performance.md): 500 job rows a claim, each on a page of its
own. A `claim_batch` with `defer_completion` writes instead a `completions` row per such run,
keyed by its batch slot (appended in key order: a few pages a claim), and `prune` (paced by
the leader, after the spike) completes the jobs later in key order: `complete_pending`.

Meanwhile the job row still says `active` with its last run as next run, and the state a
reader sees is derived: a job is completed when its row is active and its next run is a
pending completion (`PENDING_SINCE`). Readers show it as the update will write it
(`as_completed`), and every apply function that acts on a job settles it first (`settle_job`),
so a job command meets the same state as if the claim had updated the row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from schedd.model import JobStatus
from schedd.store.ledger import batches

# The claim time of a job's pending completion, or NULL: a scalar subquery for a SELECT over
# `jobs` (unaliased). Two key lookups: the run's key row, then its batch slot.
PENDING_SINCE = (
    "CASE WHEN jobs.status = 'active' THEN (SELECT b.claimed_at_ms FROM run_keys k "
    "JOIN completions c ON c.batch_id = k.batch_id AND c.slot = k.slot "
    "JOIN batches b ON b.batch_id = k.batch_id "
    "WHERE k.job_id = jobs.job_id AND k.scheduled_at_ms = jobs.next_run_at_ms) END"
)

# The update a claim used to make, made now: `updated_at_ms` is the claim's time, so the row is
# the same whenever it is written.
_COMPLETE = (
    "UPDATE jobs SET version = version + 1, status = 'completed', next_run_at_ms = NULL, "
    "next_fire_at_ms = NULL, updated_at_ms = ? "
    "WHERE job_id = ? AND status = 'active' AND next_run_at_ms = ?"
)


def defer(tx: sqlite3.Connection, slots: Iterable[tuple[int, int]]) -> None:
    """Record (batch_id, slot) runs whose claim completed their one-time job."""
    tx.executemany("INSERT INTO completions (batch_id, slot) VALUES (?, ?)", slots)


def pending_job_ids(conn: sqlite3.Connection, tenant_id: str, after: str, limit: int) -> list[str]:
    """The first `limit` jobs after `after` (by id) of a tenant whose completion is pending."""
    found: list[str] = []
    for runs, slots in conn.execute(
        "SELECT b.runs, group_concat(c.slot) FROM completions c "
        "JOIN batches b ON b.batch_id = c.batch_id WHERE b.tenant_id = ? GROUP BY c.batch_id",
        (tenant_id,),
    ):
        keys = batches.run_keys(runs)
        ids = (keys[int(slot)][0] for slot in str(slots).split(","))
        found += [job_id for job_id in ids if job_id > after]
    return sorted(found)[:limit]


def as_completed(
    status: str,
    next_run_at_ms: int | None,
    version: int,
    updated_at_ms: int,
    pending_since_ms: int | None,
) -> tuple[str, int | None, int, int]:
    """A job row's (status, next run, version, updated at) as readers see them."""
    if pending_since_ms is None:
        return status, next_run_at_ms, version, updated_at_ms
    return JobStatus.COMPLETED.value, None, version + 1, int(pending_since_ms)


def settle_job(tx: sqlite3.Connection, job_id: str) -> bool:
    """Write the job's pending completion now, if it has one; whether it had."""
    row = tx.execute(
        "SELECT k.batch_id, k.slot FROM jobs JOIN run_keys k ON k.job_id = jobs.job_id "
        "AND k.scheduled_at_ms = jobs.next_run_at_ms "
        "JOIN completions c ON c.batch_id = k.batch_id AND c.slot = k.slot "
        "WHERE jobs.job_id = ? AND jobs.status = 'active'",
        (job_id,),
    ).fetchone()
    if row is None:
        return False
    _complete(tx, [(int(row[0]), int(row[1]))])
    return True


def settle_batch(tx: sqlite3.Connection, batch_id: int) -> None:
    """Write every pending completion of a batch now (before the batch is pruned)."""
    slots = tx.execute(
        "SELECT batch_id, slot FROM completions WHERE batch_id = ?", (batch_id,)
    ).fetchall()
    _complete(tx, slots)


def complete_pending(tx: sqlite3.Connection, most: int) -> int:
    """Write up to `most` pending completions, oldest batch first; returns how many."""
    slots = tx.execute(
        "SELECT batch_id, slot FROM completions ORDER BY batch_id, slot LIMIT ?", (most,)
    ).fetchall()
    _complete(tx, slots)
    return len(slots)


def _complete(tx: sqlite3.Connection, slots: list[tuple[int, int]]) -> None:
    by_batch: dict[int, list[int]] = {}
    for batch_id, slot in slots:
        by_batch.setdefault(batch_id, []).append(slot)
    updates = []
    for batch_id, its_slots in by_batch.items():
        claimed_at, runs = tx.execute(
            "SELECT claimed_at_ms, runs FROM batches WHERE batch_id = ?", (batch_id,)
        ).fetchone()
        keys = batches.run_keys(runs)
        updates += [(claimed_at, *keys[slot]) for slot in its_slots]
    tx.executemany(_COMPLETE, updates)
    tx.executemany("DELETE FROM completions WHERE batch_id = ? AND slot = ?", slots)
