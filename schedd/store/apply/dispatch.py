"""Apply functions for dispatch: node heartbeats, partition leases, and fenced run claims.

A claim is accepted only if the claimer still holds the partition's lease at the epoch it read,
the run is still due, and (for scheduled runs) the job is active at the version it read.
"""

from __future__ import annotations

import sqlite3
from collections import Counter

import msgspec

from schedd.model import ClaimRefusal, JobStatus
from schedd.store import ledger, pauses, run_limits, run_payloads
from schedd.store.apply import connections
from schedd.store.command import Command, Handler, Result, ok
from schedd.store.commands import (
    BROKER_TARGET_TYPES,
    AssignLeases,
    Claim,
    ClaimBatch,
    ClaimRow,
    ClaimRuns,
    NodeHeartbeat,
)
from schedd.store.events import DeliveriesReady, Event, MessagesReady
from schedd.store.ledger import batches, completions


def node_heartbeat(tx: sqlite3.Connection, cmd: Command[NodeHeartbeat]) -> Result:
    """A node is alive: record it and extend every lease it holds by `ttl_ms`."""
    b = cmd.body
    tx.execute("UPDATE nodes SET last_seen_ms = ? WHERE node_id = ?", (cmd.ts_ms, b.node_id))
    tx.execute(
        "UPDATE leases SET expires_at_ms = ? WHERE node_id = ?",
        (cmd.ts_ms + b.ttl_ms, b.node_id),
    )
    return ok()


def assign_leases(tx: sqlite3.Connection, cmd: Command[AssignLeases]) -> Result:
    """Give partitions to nodes; each move names the epoch it replaces (compare-and-set)."""
    expires_at = cmd.ts_ms + cmd.body.ttl_ms
    moved = 0
    for move in cmd.body.moves:
        row = tx.execute("SELECT epoch FROM leases WHERE partition = ?", (move.partition,))
        current = row.fetchone()
        if (0 if current is None else current[0]) != move.epoch:
            continue  # someone moved it meanwhile: this move was decided on a stale view
        tx.execute(
            "INSERT INTO leases (partition, node_id, epoch, expires_at_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (partition) DO UPDATE SET node_id = excluded.node_id, "
            "epoch = excluded.epoch, expires_at_ms = excluded.expires_at_ms",
            (move.partition, move.node_id, move.epoch + 1, expires_at),
        )
        moved += 1
    return ok(moved=moved)


AnyClaim = Claim | ClaimRow
AnyClaims = ClaimRuns | ClaimBatch


def claim_runs(tx: sqlite3.Connection, cmd: Command[AnyClaims]) -> Result:
    """Claim due runs; returns {"claimed": n, "rejected": {reason: count}}.

    Set-based: each round reads every claim's lease, due row, job and run in one query and
    writes the accepted ones with one statement per table. A job claimed twice in one batch
    (a trigger beside its scheduled run) goes to a later round, so it sees the first claim's
    effects exactly as one-by-one claims would. claim_batch (level 4) writes each round's
    queue runs as one `batches` row per (tenant, queue) instead of a run and a message each.
    """
    rejected: Counter[str] = Counter()
    fed: set[Event] = set()  # the queues that got messages; DeliveriesReady for outbox rows
    leases = _leases(tx, {claim.partition for claim in cmd.body.claims})
    paused = pauses.paused_tenants(tx)  # level 8: none, unless an operator paused a tenant
    claimed = sum(
        _claim_round(tx, cmd, claims, leases, paused, rejected, fed)
        for claims in _rounds(cmd.body.claims)
    )
    return ok(*sorted(fed, key=repr), claimed=claimed, rejected=dict(rejected))


def _rounds(claims: tuple[AnyClaim, ...]) -> list[list[AnyClaim]]:
    """Split claims so that no round names a job twice, keeping each job's claims in order."""
    if len({claim.job_id for claim in claims}) == len(claims):
        return [list(claims)]  # the usual case: one round
    rounds: list[list[AnyClaim]] = []
    seen: dict[str, int] = {}
    for claim in claims:
        k = seen.get(claim.job_id, 0)
        seen[claim.job_id] = k + 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(claim)
    return rounds


def _leases(tx: sqlite3.Connection, partitions: set[int]) -> dict[int, tuple[str, int, int]]:
    """Claims never change leases: one read per command is enough."""
    marks = ",".join("?" * len(partitions))
    rows = tx.execute(
        f"SELECT partition, node_id, epoch, expires_at_ms FROM leases WHERE partition IN ({marks})",
        sorted(partitions),
    )
    return {partition: (node, epoch, expires) for partition, node, epoch, expires in rows}


_JSON = msgspec.json.Encoder()

# Every claim of a round with what the database holds for it: its due row, job and run.
_CLAIM_STATE = """
WITH c AS (
    SELECT key AS seq, json_extract(value, '$[0]') AS job_id,
           json_extract(value, '$[1]') AS scheduled_at_ms,
           json_extract(value, '$[2]') AS fire_at_ms, json_extract(value, '$[3]') AS partition
    FROM json_each(?)
)
SELECT c.seq,
       EXISTS (SELECT 1 FROM due d WHERE d.partition = c.partition AND d.fire_at_ms = c.fire_at_ms
               AND d.job_id = c.job_id AND d.scheduled_at_ms = c.scheduled_at_ms),
       j.tenant_id, j.spec, j.status, j.version,
       EXISTS (SELECT 1 FROM runs r WHERE r.job_id = c.job_id
               AND r.scheduled_at_ms = c.scheduled_at_ms)
       OR EXISTS (SELECT 1 FROM run_keys k WHERE k.job_id = c.job_id
               AND k.scheduled_at_ms = c.scheduled_at_ms)
FROM c LEFT JOIN jobs j ON j.job_id = c.job_id
ORDER BY c.seq
"""


def _claim_round(
    tx: sqlite3.Connection,
    cmd: Command[AnyClaims],
    claims: list[AnyClaim],
    leases: dict[int, tuple[str, int, int]],
    paused: frozenset[str],
    rejected: Counter[str],
    fed: set[Event],
) -> int:
    keys = _JSON.encode([[c.job_id, c.scheduled_at_ms, c.fire_at_ms, c.partition] for c in claims])
    accepted: list[tuple[AnyClaim, str, ledger.JobDelivery]] = []  # claim, tenant, what to deliver
    deliveries: dict[str, ledger.JobDelivery] = {}  # by spec text: a spike's jobs often share one
    rows = tx.execute(_CLAIM_STATE, (keys.decode(),))
    for seq, is_due, tenant_id, spec, status, version, has_run in rows:
        claim = claims[seq]
        reason = _refusal(cmd, claim, leases.get(claim.partition), is_due, status, version)
        if reason is None and has_run:
            reason = ClaimRefusal.DUPLICATE_RUN
        if reason is None and tenant_id in paused:
            reason = ClaimRefusal.TENANT_PAUSED
        if reason is not None:
            rejected[reason] += 1
            continue
        job = deliveries.get(spec)
        if job is None:
            job = deliveries[spec] = ledger.job_delivery(spec)
        accepted.append((claim, tenant_id, job))
    if accepted:
        accepted = _with_limits(tx, _with_own_payloads(tx, accepted))
        _record_runs(tx, cmd, accepted)
    queues = {(t, job.queue) for c, t, job in accepted if not c.skip and job.kind in _PULLED}
    fed.update(MessagesReady(tenant_id, queue) for tenant_id, queue in queues)
    if any(not c.skip and job.kind not in _PULLED for c, _, job in accepted):
        fed.add(DeliveriesReady())
    return len(accepted)


_PULLED = ledger.PULLED_KINDS
Accepted = list[tuple[AnyClaim, str, ledger.JobDelivery]]


def _with_own_payloads(tx: sqlite3.Connection, accepted: Accepted) -> Accepted:
    """Triggered runs given their own payload (level 8) deliver it, not the job's."""
    triggers = [(c.job_id, c.scheduled_at_ms) for c, _, _ in accepted if c.is_trigger]
    own = run_payloads.overrides(tx, triggers) if triggers else {}
    if not own:
        return accepted
    return [
        (c, t, job)
        if (payload := own.get((c.job_id, c.scheduled_at_ms))) is None
        else (c, t, msgspec.structs.replace(job, payload=payload))
        for c, t, job in accepted
    ]


def _with_limits(tx: sqlite3.Connection, accepted: Accepted) -> Accepted:
    """Scheduled runs of jobs with a run limit (level 8) are counted; the one that reaches the
    limit takes its job's last run (no next run: the job completes)."""
    started = [
        (c.job_id, job.max_runs)
        for c, _, job in accepted
        if job.max_runs is not None and not c.is_trigger and not c.skip
    ]
    reached = run_limits.count_started(tx, started) if started else set()
    if not reached:
        return accepted
    return [
        (msgspec.structs.replace(c, next_run_at_ms=None, next_fire_at_ms=None), t, job)
        if c.job_id in reached and not c.is_trigger and not c.skip
        else (c, t, job)
        for c, t, job in accepted
    ]


def _refusal(
    cmd: Command[AnyClaims],
    claim: AnyClaim,
    lease: tuple[str, int, int] | None,
    is_due: int,
    status: str | None,
    version: int | None,
) -> ClaimRefusal | None:
    """Why apply refuses one claim (a counted reason, never an error), or None."""
    if lease is None or lease[0] != cmd.body.node_id or lease[1] != claim.epoch:
        return ClaimRefusal.STALE_LEASE
    if lease[2] < cmd.ts_ms:
        return ClaimRefusal.EXPIRED_LEASE
    if not is_due:
        return ClaimRefusal.NOT_DUE
    if status is None or status == JobStatus.CANCELLED:
        return ClaimRefusal.CANCELLED
    if not claim.is_trigger and (status != JobStatus.ACTIVE or version != claim.version):
        return ClaimRefusal.STALE_VERSION
    return None


def _record_runs(
    tx: sqlite3.Connection,
    cmd: Command[AnyClaims],
    accepted: list[tuple[AnyClaim, str, ledger.JobDelivery]],
) -> None:
    """Per accepted claim, in one transaction: the due row goes, the run row and its delivery
    (a queue message or an outbox row) come, and a scheduled run moves its job on. In a
    claim_batch the queue runs go into batches instead of run and message rows; with
    `defer_completion` (level 5) the one-time jobs among them are completed later
    (store/ledger/completions.py)."""
    now = cmd.ts_ms
    tx.executemany(
        "DELETE FROM due WHERE partition = ? AND fire_at_ms = ? "
        "AND job_id = ? AND scheduled_at_ms = ?",
        [
            (
                c.partition,
                c.fire_at_ms,
                c.job_id,
                c.scheduled_at_ms,
            )
            for c, _, _ in accepted
        ],
    )
    per_run = accepted
    deferred: list[tuple[AnyClaim, str]] = []  # one-time jobs completed by a later prune
    if isinstance(cmd.body, ClaimBatch):  # queue runs delivered go into batches
        in_batch = [not c.skip and job.kind in _PULLED for c, _, job in accepted]
        placed = _write_batches(tx, now, [a for a, b in zip(accepted, in_batch, strict=True) if b])
        per_run = [a for a, b in zip(accepted, in_batch, strict=True) if not b]
        if cmd.body.defer_completion:
            ending = [(c, t, slot) for c, t, slot in placed if _completes_job(c)]
            completions.defer(tx, [slot for _, _, slot in ending])
            deferred = [(c, t) for c, t, _ in ending]
    runs = [
        # By position (job, run, tenant, fire time, skip reason): thousands a second.
        ledger.NewRun(c.job_id, c.scheduled_at_ms, tenant_id, c.fire_at_ms, c.skip)
        for c, tenant_id, _ in per_run
    ]
    ledger.open_runs(tx, runs, now)
    ledger.enqueue(
        tx,
        [
            ledger.claimed_delivery(run, partition=c.partition, job=job, now_ms=now)
            for run, (c, _, job) in zip(runs, per_run, strict=True)
            if not c.skip
        ],
    )
    later = {(c.job_id, c.scheduled_at_ms) for c, _ in deferred}
    scheduled = [
        (c, t)
        for c, t, _ in accepted
        if not c.is_trigger and (c.job_id, c.scheduled_at_ms) not in later
    ]
    _advance_jobs(tx, cmd, scheduled, deferred)
    connections.release(  # a completed job with a broker target no longer uses its connection
        tx,
        [
            c.job_id
            for c, _, job in accepted
            if _completes_job(c) and job.kind in BROKER_TARGET_TYPES
        ],
    )


def _completes_job(claim: AnyClaim) -> bool:
    """Whether the claim takes its job's last run (a scheduled run with no next one)."""
    return not claim.is_trigger and claim.next_run_at_ms is None


def _write_batches(
    tx: sqlite3.Connection, now_ms: int, queued: list[tuple[AnyClaim, str, ledger.JobDelivery]]
) -> list[tuple[AnyClaim, str, tuple[int, int]]]:
    """Queue runs as one batch per (tenant, queue), in claim order; returns each claim with its
    tenant and where it went (batch_id, slot)."""
    groups: dict[tuple[str, str], list[tuple[AnyClaim, str, ledger.JobDelivery]]] = {}
    for item in queued:
        _, tenant_id, job = item
        groups.setdefault((tenant_id, ledger.queue_name(job)), []).append(item)
    placed = []
    for (tenant_id, queue), items in groups.items():
        runs = [
            batches.BatchRun(c.job_id, c.scheduled_at_ms, c.fire_at_ms, job.payload, job.retry)
            for c, _, job in items
        ]
        batch_id = batches.write_batch(tx, tenant_id, queue, now_ms, runs)
        placed += [(c, tenant_id, (batch_id, slot)) for slot, (c, _, _) in enumerate(items)]
    return placed


def _advance_jobs(
    tx: sqlite3.Connection,
    cmd: Command[AnyClaims],
    scheduled: list[tuple[AnyClaim, str]],
    deferred: list[tuple[AnyClaim, str]],
) -> None:
    """Move each job to the next run its claimer computed, or complete it when none is left;
    a `deferred` job's row is completed later, but it leaves its tenant's live jobs now."""
    tx.executemany(
        "UPDATE jobs SET version = version + 1, status = ?, next_run_at_ms = ?, "
        "next_fire_at_ms = ?, updated_at_ms = ? WHERE job_id = ?",
        [
            (
                (JobStatus.ACTIVE if c.next_run_at_ms is not None else JobStatus.COMPLETED).value,
                c.next_run_at_ms,
                c.next_fire_at_ms,
                cmd.ts_ms,
                c.job_id,
            )
            for c, _ in scheduled
        ],
    )
    tx.executemany(
        "INSERT OR IGNORE INTO due (partition, fire_at_ms, job_id, scheduled_at_ms, is_trigger) "
        "VALUES (?, ?, ?, ?, 0)",
        [
            (
                c.partition,
                c.next_fire_at_ms,
                c.job_id,
                c.next_run_at_ms,
            )
            for c, _ in scheduled
            if c.next_run_at_ms is not None
        ],
    )
    completed = Counter(tenant_id for c, tenant_id in scheduled if c.next_run_at_ms is None)
    completed.update(tenant_id for _, tenant_id in deferred)
    tx.executemany(
        "UPDATE tenants SET live_jobs = live_jobs - ? WHERE tenant_id = ?",
        [(count, tenant_id) for tenant_id, count in sorted(completed.items())],
    )


HANDLERS: dict[str, Handler] = {
    NodeHeartbeat.TYPE: node_heartbeat,
    AssignLeases.TYPE: assign_leases,
    ClaimRuns.TYPE: claim_runs,
    ClaimBatch.TYPE: claim_runs,
}
