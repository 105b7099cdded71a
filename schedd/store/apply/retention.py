"""Apply functions for retention: `prune` deletes what outlived its retention, a bounded number
of rows per command in key order; `set_retention` stores a tenant's own (shorter) values.

The cutoffs come from the command's timestamp and the retention it carries (the proposer's
config), never from this node's clock or config, so every replica deletes the same rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schedd import metrics
from schedd.retention import KINDS, TENANT_KINDS, Retention
from schedd.store import (
    dependencies,
    job_keys,
    moved_runs,
    overdue,
    run_limits,
    run_outputs,
    run_payloads,
)
from schedd.store.apply.queue import Message, expire_batch_slots, expire_message
from schedd.store.command import Command, Handler, Result, ok, rejected
from schedd.store.commands import MoveHistory, Prune, SetRetention
from schedd.store.ledger import batches, completions
from schedd.store.records import audit
from schedd.store.retained import tenant_queues
from schedd.timeformat import format_duration

# What one prune command may touch: rows deleted or dead-lettered, and rows looked at.
MAX_ROWS_PER_PRUNE = 250  # measured: about 4 ms of apply (median), 8 ms p90
MAX_TENANTS_PER_PRUNE = 64
_MESSAGE_COLUMNS = ", ".join(Message._fields)
PRUNED = ("messages", "runs", "jobs", "deadletters", "audit")  # in the order they are pruned
# The results kept to answer a retried command (apply/machine.py keeps them an hour, pruned every
# 1,000 entries): a prune that names `commands_ms` also deletes those older than that, up to
# this many, outside the row budget (each is one small delete by key).
MAX_COMMANDS_PER_PRUNE = 1_000
# One-time jobs whose claim left their completion to a prune (log level 5): written first,
# outside the row budget, oldest claim first (each is one job row update in key order).
MAX_COMPLETIONS_PER_PRUNE = 1_000


@dataclass
class Budget:
    """Rows a prune command may still change, and what it changed per kind."""

    left: int
    deleted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PRUNED, 0))

    def take(self, kind: str, count: int) -> None:
        self.left -= count
        self.deleted[kind] += count


# move_history's moves of a tenant's history (None: the admin actions' audit), after its
# prune: (tenant, cutoff per kind, budget).
Move = Callable[[str | None, dict[str, int], "Budget"], None]


def prune(
    tx: sqlite3.Connection, cmd: Command[Prune] | Command[MoveHistory], *, move: Move | None = None
) -> Result:
    """Prune the tenants after `after_tenant` in id order, until the row budget is spent; with
    `move` (move_history), each tenant's history that is not past retention moves after it.

    Returns `next_after`: where the next prune command starts ("" once a pass over every
    tenant is complete, `done` true)."""
    b = cmd.body
    policy = Retention(**{k: b.retention_ms[k] for k in KINDS})
    after = b.after_tenant or ""
    budget = Budget(min(_or(b.max_rows, MAX_ROWS_PER_PRUNE), MAX_ROWS_PER_PRUNE))
    max_tenants = min(_or(b.max_tenants, MAX_TENANTS_PER_PRUNE), MAX_TENANTS_PER_PRUNE)
    most_completions = min(
        _or(b.max_completions, MAX_COMPLETIONS_PER_PRUNE), MAX_COMPLETIONS_PER_PRUNE
    )
    completed = completions.complete_pending(tx, most_completions)
    if after == "":
        _prune_audit(tx, None, cmd.ts_ms - policy.audit, budget)  # admin actions
        if move is not None:
            move(None, _cutoffs(cmd.ts_ms, policy), budget)
    tenants = tx.execute(
        "SELECT tenant_id, retention FROM tenants WHERE tenant_id > ? ORDER BY tenant_id LIMIT ?",
        (after, max_tenants),
    ).fetchall()
    next_after = after
    for tenant_id, own in tenants:
        if budget.left <= 0:
            break
        own_policy = policy.shortened_by(json.loads(own))
        _prune_tenant(tx, cmd, tenant_id, own_policy, budget)
        if move is not None:
            move(tenant_id, _cutoffs(cmd.ts_ms, own_policy), budget)
        if budget.left <= 0:
            break  # this tenant may have more: the next command starts with it again
        next_after = tenant_id
    commands = _prune_commands(tx, cmd, b.commands_ms)
    done = (
        budget.left > 0
        and len(tenants) < max_tenants
        and commands < MAX_COMMANDS_PER_PRUNE
        and (completed < most_completions or most_completions == 0)
    )
    tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_prune_ms', ?)", (cmd.ts_ms,))
    deleted = budget.deleted | {"commands": commands}
    for kind, count in deleted.items():
        metrics.PRUNED_ROWS.labels(kind=kind).inc(count)  # each node counts its own store's
    extra = {"completed": completed} if completed else {}  # a level-5 log's prunes only
    return ok(deleted=deleted, next_after="" if done else next_after, done=done, **extra)


def _cutoffs(now_ms: int, policy: Retention) -> dict[str, int]:
    return {kind: now_ms - getattr(policy, kind) for kind in ("runs", "deadletters", "audit")}


def _prune_commands(tx: sqlite3.Connection, cmd: Command[Any], keep_ms: int | None) -> int:
    """Kept results of commands older than `keep_ms` (when the prune names it)."""
    if keep_ms is None:
        return 0
    ids = tx.execute(
        "SELECT command_id FROM applied_commands INDEXED BY applied_commands_by_age "
        "WHERE at_ms < ? ORDER BY at_ms, command_id LIMIT ?",
        (cmd.ts_ms - int(keep_ms), MAX_COMMANDS_PER_PRUNE),
    ).fetchall()
    tx.executemany("DELETE FROM applied_commands WHERE command_id = ?", ids)
    return len(ids)


def _prune_tenant(
    tx: sqlite3.Connection, cmd: Command[Any], tenant_id: str, policy: Retention, budget: Budget
) -> None:
    now = cmd.ts_ms
    # Messages first: each becomes a dead letter (and its run dead), never vanishes unseen.
    _expire_messages(tx, cmd, tenant_id, now - policy.messages, policy.messages, budget)
    _prune_runs(tx, tenant_id, now - policy.runs, budget)
    _prune_jobs(tx, tenant_id, now - policy.runs, budget)
    _prune_deadletters(tx, tenant_id, now - policy.deadletters, budget)
    _prune_audit(tx, tenant_id, now - policy.audit, budget)
    _prune_versions(tx, tenant_id, now - policy.audit, budget)
    _prune_alerts(tx, tenant_id, now - policy.audit, budget)


def _expire_messages(
    tx: sqlite3.Connection,
    cmd: Command[Any],
    tenant_id: str,
    cutoff_ms: int,
    retention_ms: int,
    budget: Budget,
) -> None:
    """Messages visible since before the cutoff and not received since: dead letters now.
    The runs their ends give other jobs (expire_message's answer) are not offered to the
    dispatcher: its once-a-minute full read of the due index finds them."""
    error = f"not received within {format_duration(retention_ms)} (retention.messages)"
    for queue in tenant_queues(tx, tenant_id):
        if budget.left <= 0:
            return
        rows = tx.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages INDEXED BY messages_ready "
            "WHERE tenant_id = ? AND queue = ? AND visible_at_ms < ? "
            "ORDER BY visible_at_ms, msg_id LIMIT ?",
            (tenant_id, queue, cutoff_ms, budget.left),
        ).fetchall()
        for message in map(Message._make, rows):
            expire_message(tx, cmd, message, tenant_id=tenant_id, queue=queue, error=error)
        budget.take("messages", len(rows))
    if budget.left > 0:
        budget.take(
            "messages", expire_batch_slots(tx, cmd, tenant_id, cutoff_ms, error, budget.left)
        )


# A backfill's mark (log level 8) goes with its run: the runs listing shows it no more, and a
# later backfill of the range may run the occurrence again, as for any pruned run.
_DELETE_BACKFILL_MARK = "DELETE FROM backfills WHERE job_id = ? AND scheduled_at_ms = ?"


def _prune_runs(tx: sqlite3.Connection, tenant_id: str, cutoff_ms: int, budget: Budget) -> None:
    if budget.left <= 0:
        return
    runs = tx.execute(
        "SELECT job_id, scheduled_at_ms FROM runs INDEXED BY runs_finished "
        "WHERE tenant_id = ? AND finished_at_ms IS NOT NULL AND finished_at_ms < ? "
        "ORDER BY finished_at_ms, job_id, scheduled_at_ms LIMIT ?",
        (tenant_id, cutoff_ms, budget.left),
    ).fetchall()
    tx.executemany("DELETE FROM attempts WHERE job_id = ? AND scheduled_at_ms = ?", runs)
    tx.executemany("DELETE FROM runs WHERE job_id = ? AND scheduled_at_ms = ?", runs)
    run_payloads.forget_runs(tx, runs)
    dependencies.forget_runs(tx, runs)
    run_outputs.forget_runs(tx, runs)
    tx.executemany(_DELETE_BACKFILL_MARK, runs)
    budget.take("runs", len(runs))
    _prune_batches(tx, tenant_id, cutoff_ms, budget)


def _prune_batches(tx: sqlite3.Connection, tenant_id: str, cutoff_ms: int, budget: Budget) -> None:
    """Batches whose every run finished before the cutoff, whole, with their runs' key rows;
    each counts its runs against the budget (the first is taken whatever its size)."""
    for batch_id, runs in tx.execute(
        "SELECT batch_id, runs FROM batches INDEXED BY batches_finished WHERE tenant_id = ? "
        "AND finished_at_ms IS NOT NULL AND finished_at_ms < ? ORDER BY finished_at_ms, batch_id",
        (tenant_id, cutoff_ms),
    ).fetchall():
        if budget.left <= 0:
            return
        completions.settle_batch(tx, batch_id)  # its jobs' derived state needs its key rows
        keys = batches.run_keys(runs)
        tx.executemany("DELETE FROM run_keys WHERE job_id = ? AND scheduled_at_ms = ?", keys)
        run_payloads.forget_runs(tx, keys)
        dependencies.forget_runs(tx, keys)
        run_outputs.forget_runs(tx, keys)
        tx.executemany(_DELETE_BACKFILL_MARK, keys)
        tx.execute("DELETE FROM batches WHERE batch_id = ?", (batch_id,))
        budget.take("runs", len(keys))


def _prune_jobs(tx: sqlite3.Connection, tenant_id: str, cutoff_ms: int, budget: Budget) -> None:
    """Completed and cancelled jobs finished before the cutoff, with their runs. A job with a
    run still in delivery (a message or call in flight) or finished since waits for it."""
    if budget.left <= 0:
        return
    jobs = tx.execute(
        "SELECT job_id FROM jobs INDEXED BY jobs_finished WHERE tenant_id = ? "
        "AND status IN ('completed', 'cancelled') AND updated_at_ms < ? "
        "AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.job_id = jobs.job_id "
        "AND (runs.finished_at_ms IS NULL OR runs.finished_at_ms >= ?)) "
        "AND NOT EXISTS (SELECT 1 FROM run_keys k JOIN batches b ON b.batch_id = k.batch_id "
        "WHERE k.job_id = jobs.job_id AND (b.finished_at_ms IS NULL OR b.finished_at_ms >= ?)) "
        "ORDER BY updated_at_ms, job_id LIMIT ?",
        (tenant_id, cutoff_ms, cutoff_ms, cutoff_ms, budget.left),
    ).fetchall()
    for (job_id,) in jobs:
        runs = tx.execute("DELETE FROM runs WHERE job_id = ?", (job_id,)).rowcount
        tx.execute("DELETE FROM attempts WHERE job_id = ?", (job_id,))
        tx.execute("DELETE FROM run_keys WHERE job_id = ?", (job_id,))
        tx.execute("DELETE FROM backfills WHERE job_id = ?", (job_id,))
        tx.execute("DELETE FROM due WHERE job_id = ?", (job_id,))
        tx.execute("DELETE FROM job_versions WHERE job_id = ?", (job_id,))
        tx.execute("DELETE FROM jobs WHERE job_id = ?", (job_id,))
        run_payloads.forget_job(tx, job_id)
        run_limits.forget(tx, job_id)
        overdue.forget(tx, [job_id])
        moved_runs.forget(tx, [job_id])
        job_keys.forget(tx, job_id)
        dependencies.forget_job(tx, tenant_id, job_id)
        run_outputs.forget_job(tx, job_id)
        budget.take("runs", runs)
        budget.take("jobs", 1)


def _prune_deadletters(
    tx: sqlite3.Connection, tenant_id: str, cutoff_ms: int, budget: Budget
) -> None:
    if budget.left <= 0:
        return
    ids = tx.execute(
        "SELECT id FROM deadletters INDEXED BY deadletters_by_age "
        "WHERE tenant_id = ? AND created_at_ms < ? ORDER BY created_at_ms, id LIMIT ?",
        (tenant_id, cutoff_ms, budget.left),
    ).fetchall()
    tx.executemany("DELETE FROM deadletters WHERE id = ?", ids)
    budget.take("deadletters", len(ids))


def _prune_audit(
    tx: sqlite3.Connection, tenant_id: str | None, cutoff_ms: int, budget: Budget
) -> None:
    """The oldest audit rows in sequence order, up to the first one newer than the cutoff
    (proposers' clocks differ a little, so time order is nearly but not exactly seq order)."""
    if budget.left <= 0:
        return
    rows = tx.execute(
        "SELECT seq, at_ms FROM audit INDEXED BY audit_by_tenant "
        "WHERE tenant_id IS ? ORDER BY seq LIMIT ?",
        (tenant_id, budget.left),
    ).fetchall()
    old = []
    for seq, at_ms in rows:
        if at_ms >= cutoff_ms:
            break
        old.append((seq,))
    tx.executemany("DELETE FROM audit WHERE seq = ?", old)
    budget.take("audit", len(old))


def _prune_versions(tx: sqlite3.Connection, tenant_id: str, cutoff_ms: int, budget: Budget) -> None:
    """Job versions superseded before the cutoff, oldest first: a job's history is kept as
    long as its audit records; its current version stays while the job does. Counted with the
    audit rows, so a prune's result has the same keys at every log level."""
    if budget.left <= 0:
        return
    rows = tx.execute(
        "SELECT job_id, version FROM job_versions INDEXED BY job_versions_superseded "
        "WHERE tenant_id = ? AND superseded_at_ms IS NOT NULL AND superseded_at_ms < ? "
        "ORDER BY superseded_at_ms, job_id, version LIMIT ?",
        (tenant_id, cutoff_ms, budget.left),
    ).fetchall()
    tx.executemany("DELETE FROM job_versions WHERE job_id = ? AND version = ?", rows)
    budget.take("audit", len(rows))


def _prune_alerts(tx: sqlite3.Connection, tenant_id: str, cutoff_ms: int, budget: Budget) -> None:
    """Failure alerts done (sent or given up) and created before the cutoff, oldest first:
    kept as long as audit records, and counted with them (the result's keys stay the same).
    An alert still being retried stays whatever its age."""
    if budget.left <= 0:
        return
    rows = tx.execute(
        "SELECT alert_id FROM alerts INDEXED BY alerts_by_tenant "
        "WHERE tenant_id = ? AND created_at_ms < ? AND next_at_ms IS NULL "
        "ORDER BY created_at_ms, alert_id LIMIT ?",
        (tenant_id, cutoff_ms, budget.left),
    ).fetchall()
    tx.executemany("DELETE FROM alerts WHERE alert_id = ?", rows)
    budget.take("audit", len(rows))


def set_retention(tx: sqlite3.Connection, cmd: Command[SetRetention]) -> Result:
    """A tenant's own retention per kind (milliseconds); kinds not named are cleared."""
    b = cmd.body
    own = {k: v for k, v in b.retention_ms.items() if k in TENANT_KINDS}
    updated = tx.execute(
        "UPDATE tenants SET retention = ?, updated_at_ms = ? WHERE tenant_id = ?",
        (json.dumps(own, sort_keys=True), cmd.ts_ms, b.tenant_id),
    ).rowcount
    if not updated:
        return rejected("tenant_not_found", f"no tenant with id {b.tenant_id!r}")
    audit(tx, cmd, tenant_id=b.tenant_id, detail={"retention_ms": own})
    return ok(retention_ms=own)


HANDLERS: dict[str, Handler] = {
    Prune.TYPE: prune,
    SetRetention.TYPE: set_retention,
}


def _or(value: int | None, default: int) -> int:
    return default if value is None else value
