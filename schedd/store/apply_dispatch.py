"""Apply functions for dispatch: node heartbeats, partition leases, and fenced run claims.

A claim is accepted only if the claimer still holds the partition's lease at the epoch it read,
the run is still due, and (for scheduled runs) the job is active at the version it read.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from schedd.model import JobStatus, RunStatus
from schedd.store.command import Command, ok
from schedd.store.records import MINUTE_MS, add_due


def node_heartbeat(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    """A node is alive: record it and extend every lease it holds by `ttl_ms`."""
    b = cmd.body
    tx.execute("UPDATE nodes SET last_seen_ms = ? WHERE node_id = ?", (cmd.ts_ms, b["node_id"]))
    tx.execute(
        "UPDATE leases SET expires_at_ms = ? WHERE node_id = ?",
        (cmd.ts_ms + int(b["ttl_ms"]), b["node_id"]),
    )
    return ok()


def assign_leases(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    """Give partitions to nodes; each move names the epoch it replaces (compare-and-set)."""
    expires_at = cmd.ts_ms + int(cmd.body["ttl_ms"])
    moved = 0
    for move in cmd.body["moves"]:
        row = tx.execute("SELECT epoch FROM leases WHERE partition = ?", (move["partition"],))
        current = row.fetchone()
        if (0 if current is None else current[0]) != move["epoch"]:
            continue  # someone moved it meanwhile: this move was decided on a stale view
        tx.execute(
            "INSERT INTO leases (partition, node_id, epoch, expires_at_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (partition) DO UPDATE SET node_id = excluded.node_id, "
            "epoch = excluded.epoch, expires_at_ms = excluded.expires_at_ms",
            (move["partition"], move["node_id"], move["epoch"] + 1, expires_at),
        )
        moved += 1
    return ok(moved=moved)


def claim_runs(tx: sqlite3.Connection, cmd: Command) -> dict[str, Any]:
    """Claim due runs; returns {"claimed": [...], "rejected": {reason: count}}."""
    claimed: list[str] = []
    rejected: dict[str, int] = {}
    leases: dict[int, tuple[Any, ...] | None] = {}  # a batch shares few partitions: read each once
    for claim in cmd.body["claims"]:
        reason = _claim_one(tx, cmd, claim, leases)
        if reason is None:
            claimed.append(f"{claim['job_id']}:{claim['scheduled_at_ms']}")
        else:
            rejected[reason] = rejected.get(reason, 0) + 1
    return ok(claimed=claimed, rejected=rejected)


def _claim_one(
    tx: sqlite3.Connection,
    cmd: Command,
    claim: dict[str, Any],
    leases: dict[int, tuple[Any, ...] | None],
) -> str | None:
    """Claim one run, or say why not (the reason is counted, never an error)."""
    partition = claim["partition"]
    if partition not in leases:  # claims never change leases: one read per command is enough
        leases[partition] = tx.execute(
            "SELECT node_id, epoch, expires_at_ms FROM leases WHERE partition = ?", (partition,)
        ).fetchone()
    lease = leases[partition]
    if lease is None or lease[0] != cmd.body["node_id"] or lease[1] != claim["epoch"]:
        return "stale_lease"
    if lease[2] < cmd.ts_ms:
        return "expired_lease"
    due_key = (
        claim["fire_at_ms"] // MINUTE_MS,
        claim["partition"],
        claim["fire_at_ms"],
        claim["job_id"],
        claim["scheduled_at_ms"],
    )
    if not tx.execute(
        "SELECT 1 FROM due WHERE bucket_minute = ? AND partition = ? AND fire_at_ms = ? "
        "AND job_id = ? AND scheduled_at_ms = ?",
        due_key,
    ).fetchone():
        return "not_due"
    job = tx.execute(
        "SELECT tenant_id, spec, status, version FROM jobs WHERE job_id = ?", (claim["job_id"],)
    ).fetchone()
    if job is None or job[2] == JobStatus.CANCELLED:
        return "cancelled"
    is_trigger = bool(claim["is_trigger"])
    if not is_trigger and (job[2] != JobStatus.ACTIVE or job[3] != claim["version"]):
        return "stale_version"
    if tx.execute(
        "SELECT 1 FROM runs WHERE job_id = ? AND scheduled_at_ms = ?",
        (claim["job_id"], claim["scheduled_at_ms"]),
    ).fetchone():
        return "duplicate_run"
    tx.execute(
        "DELETE FROM due WHERE bucket_minute = ? AND partition = ? AND fire_at_ms = ? "
        "AND job_id = ? AND scheduled_at_ms = ?",
        due_key,
    )
    _record_run(tx, cmd, claim, tenant_id=job[0], spec=json.loads(job[1]))
    if not is_trigger:
        _advance_job(tx, cmd, claim)
    return None


def _record_run(
    tx: sqlite3.Connection, cmd: Command, claim: dict[str, Any], *, tenant_id: str, spec: Any
) -> None:
    """The run row, and its delivery in the same transaction: a queue message or an outbox row."""
    job_id, scheduled = claim["job_id"], claim["scheduled_at_ms"]
    skipped = claim.get("skip")  # a reason: misfire policy "skip", or overlap policy "skip"
    tx.execute(
        "INSERT INTO runs (job_id, scheduled_at_ms, tenant_id, fire_at_ms, status, attempt, "
        "dispatched_at_ms, finished_at_ms, error) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)",
        (
            job_id,
            scheduled,
            tenant_id,
            claim["fire_at_ms"],
            (RunStatus.SKIPPED if skipped else RunStatus.DISPATCHED).value,
            cmd.ts_ms,
            cmd.ts_ms if skipped else None,
            skipped,
        ),
    )
    if skipped:
        return
    target = spec["target"]
    if target["type"] == "queue":
        tx.execute(
            "INSERT INTO messages (msg_id, tenant_id, queue, job_id, scheduled_at_ms, attempt, "
            "visible_at_ms, receipt, payload, retry) VALUES (?, ?, ?, ?, ?, 0, ?, NULL, ?, ?)",
            (
                f"{job_id}:{scheduled}",
                tenant_id,
                target["name"],
                job_id,
                scheduled,
                cmd.ts_ms,
                json.dumps(spec.get("payload"), separators=(",", ":"), ensure_ascii=False),
                json.dumps(spec["retry"], separators=(",", ":")),
            ),
        )
    else:
        tx.execute(
            "INSERT INTO outbox (partition, tenant_id, job_id, scheduled_at_ms, attempt, "
            "due_at_ms) VALUES (?, ?, ?, ?, 1, ?)",
            (claim["partition"], tenant_id, job_id, scheduled, cmd.ts_ms),
        )


def _advance_job(tx: sqlite3.Connection, cmd: Command, claim: dict[str, Any]) -> None:
    """Move a job to the next run the claimer computed, or complete it when none is left."""
    next_run, next_fire = claim["next_run_at_ms"], claim["next_fire_at_ms"]
    status = JobStatus.ACTIVE.value if next_run is not None else JobStatus.COMPLETED.value
    tx.execute(
        "UPDATE jobs SET version = version + 1, status = ?, next_run_at_ms = ?, "
        "next_fire_at_ms = ?, updated_at_ms = ? WHERE job_id = ?",
        (status, next_run, next_fire, cmd.ts_ms, claim["job_id"]),
    )
    if next_run is None:
        tx.execute(
            "UPDATE tenants SET live_jobs = live_jobs - 1 WHERE tenant_id = "
            "(SELECT tenant_id FROM jobs WHERE job_id = ?)",
            (claim["job_id"],),
        )
        return
    add_due(
        tx,
        partition=claim["partition"],
        fire_at_ms=next_fire,
        job_id=claim["job_id"],
        scheduled_at_ms=next_run,
    )


HANDLERS = {
    "node_heartbeat": node_heartbeat,
    "assign_leases": assign_leases,
    "claim_runs": claim_runs,
}
