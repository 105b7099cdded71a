"""What apply does when a run ends dead and its job has a failure policy (log level 8): on the
`after`-th dead run in a row (a success starts the count again), one alert for the leader's
sender to POST (store/alerts.py) and, with `pause`, the job paused with the reason why. One
alert per streak: the runs that die after it add none until a run succeeds.

Called by the two places a run dies (apply/queue.py `_bury`, apply/delivery.py). A job with no
policy of its own and a tenant with no default cost two key reads, and write nothing: a log
older than level 8 applies as it did."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, NamedTuple

from schedd.model import JobChange, JobStatus, RunStatus
from schedd.store import alerts, failures, moved_runs, open_history, pauses, queries
from schedd.store.apply import versions
from schedd.store.command import Command
from schedd.store.ledger import completions
from schedd.store.pauses import Scope
from schedd.store.records import remove_scheduled_due
from schedd.timeformat import format_instant

ALERT_TYPE = "job.failing"


class _Job(NamedTuple):
    """The columns of a job a failure policy acts on."""

    job_id: str
    tenant_id: str
    partition: int
    status: str
    own_policy: str | None  # failures.OWN_POLICY
    name: str | None
    next_run_at_ms: int | None
    next_fire_at_ms: int | None


_JOB = (
    f"SELECT job_id, tenant_id, partition, status, {failures.OWN_POLICY}, "
    "json_extract(spec, '$.name'), next_run_at_ms, next_fire_at_ms FROM jobs WHERE job_id = ?"
)


def on_dead(tx: sqlite3.Connection, cmd: Command[Any], job_id: str, error: str) -> None:
    """A run of `job_id` just ended dead (its row says so): act on the job's failure policy.
    The alert sender finds a new alert at its next look (it looks every second)."""
    row = tx.execute(_JOB, (job_id,)).fetchone()
    if row is None:
        return
    job = _Job(*row)
    policy = failures.job_policy(tx, job.tenant_id, job.own_policy)
    if policy is None:
        return
    streak = dead_streak(tx, job_id, policy.after)
    if streak.length != policy.after:
        return  # not there yet, or alerted already for this streak
    paused = policy.pause and _pause(tx, cmd, job, policy.after)
    if policy.alert_url is None:
        return
    body = {
        "type": ALERT_TYPE,
        "job_id": job_id,
        "tenant_id": job.tenant_id,
        "name": job.name,
        "consecutive_failures": streak.length,
        "runs": [{"scheduled_at": run.scheduled_at, "error": run.error} for run in streak.runs],
        "last_error": error,
        "paused": paused,
        "at": format_instant(cmd.ts_ms),
    }
    alerts.queue(
        tx, tenant_id=job.tenant_id, job_id=job_id, url=policy.alert_url, body=body, at_ms=cmd.ts_ms
    )


class DeadRun(NamedTuple):
    scheduled_at: str  # as the runs listing formats it (the alert body's text)
    error: str | None


class Streak(NamedTuple):
    """A job's newest dead runs in a row: those read (newest first, with their errors) and the
    moved ones before them that only their count remembers (store/moved_runs.py)."""

    runs: list[DeadRun]
    moved: int = 0

    @property
    def length(self) -> int:
        return len(self.runs) + self.moved


def dead_streak(tx: sqlite3.Connection, job_id: str, most: int) -> Streak:
    """The job's newest finished runs that ended dead in a row (at most `most` + 1 counted): its
    runs by scheduled time, those of the runs table and of batches alike (the runs listing's
    reader), passing over runs still in flight and skipped ones; a success, or a run failed for
    good, ends the streak. A job whose runs a level-14 move took out of the live tables has a
    moved summary: its live runs are read, and when they end without breaking the streak, the
    moved deaths after the newest moved success continue it. Without one (nothing moved, or
    only by level-13 moves), the live runs and the open segments are read, as at level 13."""
    moved = moved_runs.of(tx, job_id)
    limit = 4 * (most + 1)
    if moved is None:
        runs = open_history.newest_runs(tx, job_id, limit)
    else:
        runs = queries.list_runs(tx, job_id, before_ms=2**62, limit=limit)
    streak: list[DeadRun] = []
    for run in runs:
        if run.status == RunStatus.SKIPPED or run.finished_at is None:
            continue
        if run.status != RunStatus.DEAD:
            return Streak(streak)
        streak.append(DeadRun(run.scheduled_at, run.error))
        if len(streak) > most:
            return Streak(streak)
    if moved is None or len(runs) == limit:
        return Streak(streak)
    return Streak(streak, min(moved.deaths, most + 1 - len(streak)))


def pause_reason(after: int) -> str:
    return f"paused after {after} consecutive failures"


def _pause(tx: sqlite3.Connection, cmd: Command[Any], job: _Job, after: int) -> bool:
    """Pause an active job as its policy asks (a pause by "schedd", with its reason, audited
    and versioned); False when it is not active."""
    if job.status != JobStatus.ACTIVE or completions.settle_job(tx, job.job_id):
        return False  # a completion pending (a one-time job): nothing left to pause
    reason = pause_reason(after)
    versions.record(tx, cmd, job, JobChange.PAUSE, by_schedd=True)
    remove_scheduled_due(tx, job)
    tx.execute(
        "UPDATE jobs SET status = ?, next_run_at_ms = NULL, next_fire_at_ms = NULL, "
        "version = version + 1, updated_at_ms = ? WHERE job_id = ?",
        (JobStatus.PAUSED.value, cmd.ts_ms, job.job_id),
    )
    pauses.pause(
        tx,
        Scope.JOB,
        job.tenant_id,
        job.job_id,
        reason=reason,
        actor=versions.SCHEDD,
        at_ms=cmd.ts_ms,
    )
    tx.execute(
        "INSERT INTO audit (at_ms, tenant_id, actor, action, job_id, detail) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            cmd.ts_ms,
            job.tenant_id,
            versions.SCHEDD,
            "pause_job",
            job.job_id,
            json.dumps({"reason": reason}, separators=(",", ":")),
        ),
    )
    return True
