"""Apply functions for HTTP callbacks: the outcome of each attempt a node's caller made.

The caller proposes what happened (status class, error excerpt, times, and when to retry); apply
decides the run's fate from the outbox row and the retry policy the claim copied into it. The
first outcome recorded for an attempt wins: a late duplicate (two callers during a lease move, a
retried proposal) finds the row gone or at a later attempt and is counted as stale.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Any, NamedTuple, TypeVar

from schedd.jobspec import stored_retry
from schedd.model import RunStatus
from schedd.retry import has_attempts_left
from schedd.store.apply.jobs import cancel_job
from schedd.store.command import Command, Handler, Result, ok
from schedd.store.commands import CallbackOutcome, CancelJob, RecordCallbacks

SUCCEEDED, RETRY, FAILED, GONE = "succeeded", "retry", "failed", "gone"
T = TypeVar("T")


class OutboxRow(NamedTuple):
    seq: int
    tenant_id: str
    job_id: str
    scheduled_at_ms: int
    attempt: int
    target: str
    payload: str
    retry: str


_COLUMNS = ", ".join(OutboxRow._fields)


def record_callbacks(tx: sqlite3.Connection, cmd: Command[RecordCallbacks]) -> Result:
    """Record HTTP attempts; returns how many runs succeeded, will retry, died, or were stale.

    Successes, the common case, are written set-based (one statement per table, in job order);
    failures one by one, as each may retry, die or cancel its job."""
    outcomes = cmd.body.outcomes
    seqs = sorted({o.seq for o in outcomes})
    marks = ",".join("?" * len(seqs))
    rows = {
        row[0]: OutboxRow._make(row)
        for row in tx.execute(f"SELECT {_COLUMNS} FROM outbox WHERE seq IN ({marks})", seqs)
    }
    fates: Counter[str] = Counter()
    dead: list[dict[str, Any]] = []
    successes: list[tuple[OutboxRow, CallbackOutcome]] = []
    for outcome in outcomes:
        row = rows.pop(outcome.seq, None)  # a seq named twice: the second is stale
        if row is None or not _is_for(row, outcome):
            fates["stale"] += 1
        elif outcome.verdict == SUCCEEDED:
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
    return ok(**{fate: n for fate, n in fates.items() if n}, dead_runs=dead)


def _is_for(row: OutboxRow, outcome: CallbackOutcome) -> bool:
    """Does the outcome belong to this row's current attempt (of this very run)?"""
    named = (_or(outcome.job_id, row.job_id), _or(outcome.scheduled_at_ms, row.scheduled_at_ms))
    return row.attempt == outcome.attempt and named == (row.job_id, row.scheduled_at_ms)


def _record_successes(
    tx: sqlite3.Connection, successes: list[tuple[OutboxRow, CallbackOutcome]]
) -> None:
    successes.sort(key=lambda pair: (pair[0].job_id, pair[0].scheduled_at_ms))
    tx.executemany(
        "INSERT OR REPLACE INTO attempts (job_id, scheduled_at_ms, attempt, started_at_ms, "
        "finished_at_ms, outcome, error) VALUES (?, ?, ?, ?, ?, 'succeeded', NULL)",
        [
            (r.job_id, r.scheduled_at_ms, r.attempt, o.started_at_ms, o.finished_at_ms)
            for r, o in successes
        ],
    )
    tx.executemany("DELETE FROM outbox WHERE seq = ?", [(r.seq,) for r, _ in successes])
    tx.executemany(
        "UPDATE runs SET status = ?, attempt = ?, error = NULL, finished_at_ms = ? "
        "WHERE job_id = ? AND scheduled_at_ms = ?",
        [
            (RunStatus.SUCCEEDED.value, r.attempt, o.finished_at_ms, r.job_id, r.scheduled_at_ms)
            for r, o in successes
        ],
    )


def _record_one(
    tx: sqlite3.Connection, cmd: Command[RecordCallbacks], row: OutboxRow, outcome: CallbackOutcome
) -> str:
    verdict, error = outcome.verdict, outcome.error
    tx.execute(
        "INSERT OR REPLACE INTO attempts (job_id, scheduled_at_ms, attempt, started_at_ms, "
        "finished_at_ms, outcome, error) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            row.job_id,
            row.scheduled_at_ms,
            row.attempt,
            outcome.started_at_ms,
            outcome.finished_at_ms,
            "failed",
            error,
        ),
    )
    policy = stored_retry(json.loads(row.retry))
    if verdict == RETRY and has_attempts_left(policy, row.attempt):
        tx.execute(
            "UPDATE outbox SET attempt = attempt + 1, due_at_ms = ? WHERE seq = ?",
            (_retry_at(outcome), row.seq),
        )
        _set_run(tx, row, RunStatus.RETRYING, error)
        return "retrying"
    tx.execute("DELETE FROM outbox WHERE seq = ?", (row.seq,))
    tx.execute(
        "INSERT OR REPLACE INTO deadletters (id, tenant_id, job_id, scheduled_at_ms, attempts, "
        "error, target, payload, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            f"{row.job_id}:{row.scheduled_at_ms}",
            row.tenant_id,
            row.job_id,
            row.scheduled_at_ms,
            row.attempt,
            error,
            row.target,
            row.payload,
            cmd.ts_ms,
        ),
    )
    _set_run(tx, row, RunStatus.DEAD, error, finished_at_ms=outcome.finished_at_ms)
    if verdict == GONE:  # the target says it no longer exists: stop calling it
        body = CancelJob(tenant_id=row.tenant_id, job_id=row.job_id, actor=GONE_ACTOR)
        cancel_job(tx, Command(type=CancelJob.TYPE, id=cmd.id, ts_ms=cmd.ts_ms, body=body))
    return "dead"


def _retry_at(outcome: CallbackOutcome) -> int:
    if outcome.retry_at_ms is None:
        raise ValueError("a retry verdict without retry_at_ms")
    return outcome.retry_at_ms


GONE_ACTOR = "delivery: the target answered 410 Gone"


def _set_run(
    tx: sqlite3.Connection,
    row: OutboxRow,
    status: RunStatus,
    error: str | None,
    *,
    finished_at_ms: int | None = None,
) -> None:
    tx.execute(
        "UPDATE runs SET status = ?, attempt = ?, error = ?, finished_at_ms = ? "
        "WHERE job_id = ? AND scheduled_at_ms = ?",
        (status.value, row.attempt, error, finished_at_ms, row.job_id, row.scheduled_at_ms),
    )


HANDLERS: dict[str, Handler] = {RecordCallbacks.TYPE: record_callbacks}


def _or(value: T | None, default: T) -> T:
    return default if value is None else value
