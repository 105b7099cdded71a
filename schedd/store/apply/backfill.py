"""Apply of backfill_job: runs for a job's past occurrences, paced on its tenant's backfill lane.

Each run is a due row as a trigger's is (outside the schedule: it never moves the job's next
run, and its claim is fenced like any other), marked in `backfills`. No run is added for an
occurrence that has one.
"""

from __future__ import annotations

import sqlite3

import msgspec

from schedd.model import JobStatus
from schedd.store import open_history
from schedd.store.apply.jobs import load_job
from schedd.store.command import Command, Handler, Result, ok, rejected
from schedd.store.commands import BackfillJob
from schedd.store.events import DueAdded
from schedd.store.records import audit

# Due rows firing this soon after the command are offered to the dispatcher at once (events
# are no state); later ones wait for its preload (dispatch.dispatcher.PRELOAD_WINDOW_MS).
OFFERED_WITHIN_MS = 60_000

_JSON = msgspec.json.Encoder()

# The slots that already have a run (its own row, or a key in a batch) or a backfill mark.
# A pending due row needs no look-up: the scheduled one is the job's next run (slots from it
# on are skipped), and a trigger's time is never one of the schedule's occurrences
# (schedule.trigger_time).
_TAKEN = """
SELECT s.value FROM json_each(:slots) s
WHERE EXISTS (SELECT 1 FROM runs r WHERE r.job_id = :job AND r.scheduled_at_ms = s.value)
   OR EXISTS (SELECT 1 FROM run_keys k WHERE k.job_id = :job AND k.scheduled_at_ms = s.value)
   OR EXISTS (SELECT 1 FROM backfills f WHERE f.job_id = :job AND f.scheduled_at_ms = s.value)
"""


def backfill_job(tx: sqlite3.Connection, cmd: Command[BackfillJob]) -> Result:
    """Add a paced run for each slot that has none; answers {"runs": n, "last_fire_at_ms"}."""
    b = cmd.body
    job = load_job(tx, cmd)
    if job is None:
        return rejected("job_not_found", f"no job with id {b.job_id!r}")
    if job.status == JobStatus.CANCELLED:
        return rejected("conflict", "a cancelled job cannot be backfilled")
    if b.per_s <= 0:
        return rejected("invalid_request", f"per_s: must be positive, got {b.per_s}")
    if b.closed_through is not None and _closed_since(tx, b.closed_through):
        return rejected("stale_state", "a history segment closed since the backfill was planned")
    slots = sorted({s for s in b.slots if job.next_run_at_ms is None or s < job.next_run_at_ms})
    new = _not_taken(tx, b.job_id, slots)
    if not new:
        return ok(runs=0)
    start = max(cmd.ts_ms, _lane(tx, b.tenant_id))
    fires = [start + k * 1000 // b.per_s for k in range(len(new))]
    tx.executemany(
        "INSERT OR IGNORE INTO due (partition, fire_at_ms, job_id, scheduled_at_ms, is_trigger) "
        "VALUES (?, ?, ?, ?, 1)",
        [(job.partition, fire, b.job_id, slot) for fire, slot in zip(fires, new, strict=True)],
    )
    tx.executemany(
        "INSERT INTO backfills (job_id, scheduled_at_ms) VALUES (?, ?)",
        [(b.job_id, slot) for slot in new],
    )
    lane_end = start + -(-len(new) * 1000 // b.per_s)  # the first free fire time after them
    tx.execute(
        "INSERT INTO backfill_lanes (tenant_id, next_fire_at_ms) VALUES (?, ?) "
        "ON CONFLICT (tenant_id) DO UPDATE SET next_fire_at_ms = excluded.next_fire_at_ms",
        (b.tenant_id, lane_end),
    )
    detail = {"runs": len(new), "first_ms": new[0], "last_ms": new[-1]}
    audit(tx, cmd, tenant_id=b.tenant_id, job_id=b.job_id, detail=detail)
    soon = cmd.ts_ms + OFFERED_WITHIN_MS
    events = [
        DueAdded(b.job_id, fire, slot, True)
        for fire, slot in zip(fires, new, strict=True)
        if fire <= soon
    ]
    return ok(*events, runs=len(new), last_fire_at_ms=fires[-1])


def _not_taken(tx: sqlite3.Connection, job_id: str, slots: list[int]) -> list[int]:
    if not slots:
        return []
    taken = {
        row[0] for row in tx.execute(_TAKEN, {"slots": _JSON.encode(slots).decode(), "job": job_id})
    }
    # Runs moved into history (level 13): the open segments here; the closed ones were read
    # by the proposer, which left their slots out of the command.
    taken |= open_history.slots_taken(tx, job_id, [s for s in slots if s not in taken])
    return [slot for slot in slots if slot not in taken]


def _closed_since(tx: sqlite3.Connection, closed_through: int) -> bool:
    """Whether a segment closed after the proposer read the closed ones (their rows are no
    longer in the open segments this apply reads, and the proposer did not see them)."""
    found = tx.execute(
        "SELECT 1 FROM segments WHERE state = 'closed' AND closed_index > ? LIMIT 1",
        (closed_through,),
    ).fetchone()
    return found is not None


def _lane(tx: sqlite3.Connection, tenant_id: str) -> int:
    """Where the tenant's backfill lane is free from (0: it has none)."""
    row = tx.execute(
        "SELECT next_fire_at_ms FROM backfill_lanes WHERE tenant_id = ?", (tenant_id,)
    ).fetchone()
    return 0 if row is None else int(row[0])


HANDLERS: dict[str, Handler] = {BackfillJob.TYPE: backfill_job}
