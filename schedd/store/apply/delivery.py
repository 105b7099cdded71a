"""Apply functions for HTTP callbacks: the outcome of each attempt a node's caller made.

The caller proposes what happened (status class, error excerpt, times, and when to retry); apply
decides the run's fate from the outbox row and the retry policy the claim copied into it. The
first outcome recorded for an attempt wins: a late duplicate (two callers during a lease move, a
retried proposal) finds the row gone or at a later attempt and is counted as stale.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import TypedDict

from schedd.model import RunStatus, Verdict, delivery_id
from schedd.retry import has_attempts_left
from schedd.store import dependencies, ledger
from schedd.store.apply import failures
from schedd.store.apply.jobs import cancel_job
from schedd.store.command import Command, Handler, Result, ok
from schedd.store.commands import CallbackOutcome, CancelJob, RecordCallbacks
from schedd.store.events import DueAdded
from schedd.stored_spec import load_retry


class DeadRunJSON(TypedDict):
    """A run that died, as the result keeps it (results.DeadRun reads it)."""

    job_id: str
    scheduled_at_ms: int
    tenant_id: str


def record_callbacks(tx: sqlite3.Connection, cmd: Command[RecordCallbacks]) -> Result:
    """Record HTTP attempts; returns how many runs succeeded, will retry, died, or were stale.

    Successes, the common case, are written set-based (one statement per table, in job order);
    failures one by one, as each may retry, die or cancel its job."""
    outcomes = cmd.body.outcomes
    # An outcome from a log entry older than the run check names no run (None): seq and attempt
    # alone decide, as they did then.
    reports = [
        ledger.Reported(
            seq=o.seq, attempt=o.attempt, job_id=o.job_id, scheduled_at_ms=o.scheduled_at_ms
        )
        for o in outcomes
    ]
    fates: Counter[str] = Counter()
    dead: list[DeadRunJSON] = []
    successes: list[tuple[ledger.OutboxRow, CallbackOutcome]] = []
    for outcome, row in zip(outcomes, ledger.reported_rows(tx, reports), strict=True):
        if row is None:
            fates["stale"] += 1
        elif outcome.verdict == Verdict.SUCCEEDED:
            successes.append((row, outcome))
        elif _record_one(tx, cmd, row, outcome) == "dead":
            fates["dead"] += 1
            dead.append(
                {
                    "job_id": row.job_id,
                    "scheduled_at_ms": row.scheduled_at_ms,
                    "tenant_id": row.tenant_id,
                }
            )
        else:
            fates["retrying"] += 1
    _record_successes(tx, successes)
    fates["succeeded"] += len(successes)
    followers = _follow(tx, cmd.ts_ms, [row for row, _ in successes], dead)
    return ok(*followers, **{fate: n for fate, n in fates.items() if n}, dead_runs=dead)


def _follow(
    tx: sqlite3.Connection, ts_ms: int, succeeded: list[ledger.OutboxRow], dead: list[DeadRunJSON]
) -> list[DueAdded]:
    """The runs these ends give other jobs (store/dependencies.py), tenant by tenant: a caller
    reports one partition's runs, of one or a few tenants."""
    ended: dict[str, list[tuple[str, int, dependencies.Ended]]] = {}
    for r in succeeded:
        ended.setdefault(r.tenant_id, []).append((r.job_id, r.scheduled_at_ms, "succeeded"))
    for d in dead:
        ended.setdefault(d["tenant_id"], []).append((d["job_id"], d["scheduled_at_ms"], "dead"))
    followers: list[DueAdded] = []
    for tenant_id, runs in sorted(ended.items()):
        followers += dependencies.follow(tx, ts_ms, tenant_id, runs)
    return followers


def _record_successes(
    tx: sqlite3.Connection, successes: list[tuple[ledger.OutboxRow, CallbackOutcome]]
) -> None:
    successes.sort(key=lambda pair: (pair[0].job_id, pair[0].scheduled_at_ms))
    ledger.record_attempts(tx, [_attempt(r, o, Verdict.SUCCEEDED, None) for r, o in successes])
    ledger.remove(tx, [r.seq for r, _ in successes])
    ledger.set_runs(
        tx,
        [_run(r, RunStatus.SUCCEEDED, None, finished_at_ms=o.finished_at_ms) for r, o in successes],
    )


def _record_one(
    tx: sqlite3.Connection,
    cmd: Command[RecordCallbacks],
    row: ledger.OutboxRow,
    outcome: CallbackOutcome,
) -> str:
    verdict, error = outcome.verdict, outcome.error
    ledger.record_attempts(tx, [_attempt(row, outcome, Verdict.FAILED, error)])
    policy = load_retry(row.retry)  # the outbox row's text: slices of valid JSON, cached
    if verdict == Verdict.RETRY and has_attempts_left(policy, row.attempt):
        ledger.schedule_retry(tx, row.seq, _retry_at(outcome))
        ledger.set_runs(tx, [_run(row, RunStatus.RETRYING, error, finished_at_ms=None)])
        return "retrying"
    dead = ledger.DeadLetter(
        id=delivery_id(row.job_id, row.scheduled_at_ms),
        tenant_id=row.tenant_id,
        job_id=row.job_id,
        scheduled_at_ms=row.scheduled_at_ms,
        attempts=row.attempt,
        error=error,
        target=row.target,
        payload=row.payload,
        created_at_ms=cmd.ts_ms,
    )
    run = _run(row, RunStatus.DEAD, error, finished_at_ms=outcome.finished_at_ms)
    ledger.bury(tx, row.seq, dead, run)
    if verdict != Verdict.GONE:  # a job its target cancels has no failures to act on
        failures.on_dead(tx, cmd, row.job_id, error or "")
    else:  # the target says it no longer exists: stop calling it
        body = CancelJob(
            tenant_id=row.tenant_id,
            job_id=row.job_id,
            actor=GONE_ACTOR,
            versioned=cmd.body.versioned,
        )
        cancel_job(tx, Command(type=CancelJob.TYPE, id=cmd.id, ts_ms=cmd.ts_ms, body=body))
    return "dead"


def _attempt(
    row: ledger.OutboxRow, outcome: CallbackOutcome, result: str, error: str | None
) -> ledger.Attempt:
    """The row's current attempt, whole: the caller reports its start and end together."""
    return ledger.Attempt(
        job_id=row.job_id,
        scheduled_at_ms=row.scheduled_at_ms,
        attempt=row.attempt,
        started_at_ms=outcome.started_at_ms,
        finished_at_ms=outcome.finished_at_ms,
        outcome=result,
        error=error,
    )


def _run(
    row: ledger.OutboxRow, status: RunStatus, error: str | None, *, finished_at_ms: int | None
) -> ledger.RunChange:
    """The row's run after this attempt: every column written (None writes NULL)."""
    return ledger.RunChange(
        job_id=row.job_id,
        scheduled_at_ms=row.scheduled_at_ms,
        status=status,
        attempt=row.attempt,
        error=error,
        finished_at_ms=finished_at_ms,
    )


def _retry_at(outcome: CallbackOutcome) -> int:
    if outcome.retry_at_ms is None:
        raise ValueError("a retry verdict without retry_at_ms")
    return outcome.retry_at_ms


GONE_ACTOR = "delivery: the target answered 410 Gone"


HANDLERS: dict[str, Handler] = {RecordCallbacks.TYPE: record_callbacks}
