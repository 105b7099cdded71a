"""Retention in apply (issue 14): each kind pruned at its cutoff and not before, cutoffs from
the command's time, bounded rows per command, a tenant's shorter values, digests equal."""

from __future__ import annotations

from typing import Any

import pytest

from schedd.retention import Retention
from schedd.store import queries
from schedd.store.apply.retention import MAX_ROWS_PER_PRUNE
from schedd.store.db import Database
from schedd.store.digest import state_digest
from tests.conftest import NOW_MS, Applier
from tests.servers import ms as ms_of
from tests.unit.test_store_dispatch import MIN, claim, count, receive, setup

SEC = 1_000
HOUR = 3_600_000
RETENTION = Retention(runs=HOUR, audit=2 * HOUR, deadletters=3 * HOUR, messages=HOUR)


def prune(
    apply: Applier, ts_ms: int, *, after: str = "", max_rows: int = 1_000, **changes: int
) -> dict[str, Any]:
    policy = RETENTION.as_ms() | changes
    body = {"retention_ms": policy, "after_tenant": after, "max_rows": max_rows}
    result = apply("prune", body, ts_ms=ts_ms)
    assert result["status"] == "ok", result
    return result


def ack(apply: Applier, receipt: str, ts_ms: int) -> None:
    body = {"tenant_id": "t1", "queue": "q", "receipts": [receipt]}
    assert apply("ack_messages", body, ts_ms=ts_ms)["acked"] == 1


def one_time_job_done(apply: Applier, *, finished_ms: int) -> None:
    """Job j1 runs once at NOW_MS; its message is acked at `finished_ms`."""
    setup(apply, schedule={"run_at": "2026-09-21T14:13:20Z"})
    claim(apply, next_ms=None)
    [message] = receive(apply, NOW_MS, "r1")
    ack(apply, message["receipt"], finished_ms)


def test_a_finished_run_is_kept_until_its_cutoff_then_pruned_with_its_job(
    apply: Applier, db: Database
) -> None:
    one_time_job_done(apply, finished_ms=NOW_MS + SEC)
    assert db.conn.execute("SELECT status FROM jobs").fetchone() == ("completed",)
    kept = prune(apply, NOW_MS + SEC + HOUR)  # exactly at the cutoff: not older than it
    assert kept["deleted"]["runs"] == 0 and count(db, "SELECT COUNT(*) FROM runs") == 1
    gone = prune(apply, NOW_MS + SEC + HOUR + 1)
    assert gone["deleted"]["runs"] == 1 and gone["deleted"]["jobs"] == 1 and gone["done"]
    for table in ("runs", "attempts", "jobs", "due", "messages"):
        assert count(db, f"SELECT COUNT(*) FROM {table}") == 0, table


def test_an_active_jobs_old_runs_go_and_the_job_stays(apply: Applier, db: Database) -> None:
    setup(apply)  # every minute
    claim(apply)
    [message] = receive(apply, NOW_MS, "r1")
    ack(apply, message["receipt"], NOW_MS + SEC)
    prune(apply, NOW_MS + 2 * HOUR)
    assert count(db, "SELECT COUNT(*) FROM runs") == 0
    assert count(db, "SELECT COUNT(*) FROM attempts") == 0
    assert db.conn.execute("SELECT status FROM jobs").fetchone() == ("active",)
    assert count(db, "SELECT COUNT(*) FROM due") == 1  # its next run is untouched


def test_a_run_still_in_delivery_is_never_pruned(apply: Applier, db: Database) -> None:
    setup(apply, schedule={"run_at": "2026-09-21T14:13:20Z"})
    claim(apply, next_ms=None)
    receive(apply, NOW_MS, "r1")  # received, never acked: the run is not finished
    apply("cancel_job", {"tenant_id": "t1", "job_id": "j1"}, ts_ms=NOW_MS + SEC)
    prune(apply, NOW_MS + HOUR // 2, messages=10 * HOUR)
    assert count(db, "SELECT COUNT(*) FROM jobs") == 1  # cancelled, but its run is in flight
    assert count(db, "SELECT COUNT(*) FROM runs") == 1


def test_an_unreceived_message_becomes_a_dead_letter_first(apply: Applier, db: Database) -> None:
    setup(apply)
    claim(apply)  # a message visible from NOW_MS, never received
    assert prune(apply, NOW_MS + HOUR)["deleted"]["messages"] == 0
    result = prune(apply, NOW_MS + HOUR + 1)
    assert result["deleted"]["messages"] == 1
    assert count(db, "SELECT COUNT(*) FROM messages") == 0
    [(error, attempts)] = db.conn.execute("SELECT error, attempts FROM deadletters").fetchall()
    assert error == "not received within 1h (retention.messages)" and attempts == 0
    assert db.conn.execute("SELECT status, error FROM runs").fetchone() == ("dead", error)
    # the dead letter is kept for its own retention, then goes
    assert prune(apply, NOW_MS + 4 * HOUR + 1)["deleted"]["deadletters"] == 0
    assert prune(apply, NOW_MS + 4 * HOUR + 2)["deleted"]["deadletters"] == 1
    assert count(db, "SELECT COUNT(*) FROM deadletters") == 0


def test_a_message_whose_consumer_vanished_ends_its_attempt_as_timed_out(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    claim(apply)
    receive(apply, NOW_MS, "r1")  # visible again at NOW_MS + 30 s; nobody comes back
    prune(apply, NOW_MS + 30 * SEC + HOUR + 1, runs=10 * HOUR)
    assert db.conn.execute("SELECT outcome FROM attempts").fetchall() == [("timed_out",)]
    assert count(db, "SELECT COUNT(*) FROM deadletters") == 1


def test_audit_rows_go_in_sequence_order_up_to_the_first_young_one(
    apply: Applier, db: Database
) -> None:
    setup(apply)  # create_tenant and create_jobs audit rows at NOW_MS
    for minute in (1, 3, 2):  # proposers' clocks: nearly in order
        change = {"tenant_id": "t1", "changes": {"dispatch_rate": minute}}
        apply("update_tenant", change, ts_ms=NOW_MS + minute * 60_000)
    prune(apply, NOW_MS + 2 * HOUR + 2 * 60_000 + 1)  # older than 2h: minutes 0, 1 and 2
    minutes = [m for (m,) in db.conn.execute("SELECT (at_ms - ?) / 60000 FROM audit", (NOW_MS,))]
    assert minutes == [3, 2]  # the minute-2 row after the minute-3 one waits its turn
    prune(apply, NOW_MS + 2 * HOUR + 3 * 60_000 + 1)
    assert count(db, "SELECT COUNT(*) FROM audit") == 0


def test_one_prune_changes_at_most_its_budget_and_the_next_goes_on(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    claim(apply)
    [message] = receive(apply, NOW_MS, "r1")
    ack(apply, message["receipt"], NOW_MS + SEC)
    claim(apply, version=2, run_ms=NOW_MS + MIN, next_ms=None, ts_ms=NOW_MS + 2 * SEC)
    for k in range(4):  # four triggered runs too: six finished runs in all
        at = NOW_MS + (k + 2) * SEC
        apply("trigger_job", {"tenant_id": "t1", "job_id": "j1", "scheduled_at_ms": at}, ts_ms=at)
        claim(apply, version=3 + k, run_ms=at, next_ms=None, trigger=True, ts_ms=at)
    for m in receive(apply, NOW_MS + 7 * SEC, *(f"r{k}" for k in range(2, 7))):
        ack(apply, m["receipt"], NOW_MS + 8 * SEC)
    assert count(db, "SELECT COUNT(*) FROM runs WHERE status = 'succeeded'") == 6
    first = prune(apply, NOW_MS + 2 * HOUR, max_rows=4)
    assert first["deleted"]["runs"] == 4 and not first["done"] and first["next_after"] == ""
    second = prune(apply, NOW_MS + 2 * HOUR, max_rows=4, after=first["next_after"])
    assert second["deleted"]["runs"] == 2
    assert count(db, "SELECT COUNT(*) FROM runs") == 0


def test_a_prune_never_changes_more_than_the_hard_cap(apply: Applier, db: Database) -> None:
    setup(apply)
    for n in range(MAX_ROWS_PER_PRUNE + 50):  # audit rows, each older than the cutoff
        apply("update_tenant", {"tenant_id": "t1", "changes": {"dispatch_rate": n}})
    result = prune(apply, NOW_MS + 3 * HOUR, max_rows=10 * MAX_ROWS_PER_PRUNE)
    assert result["deleted"]["audit"] == MAX_ROWS_PER_PRUNE and not result["done"]


def test_a_tenant_may_shorten_its_own_retention_but_not_lengthen_it(
    apply: Applier, db: Database
) -> None:
    one_time_job_done(apply, finished_ms=NOW_MS + SEC)
    shorter = apply("set_retention", {"tenant_id": "t1", "retention_ms": {"runs": 60_000}})
    assert shorter["status"] == "ok"
    prune(apply, NOW_MS + SEC + 60_001)
    assert count(db, "SELECT COUNT(*) FROM runs") == 0  # one minute, not the node's hour
    longer = {"tenant_id": "t1", "retention_ms": {"deadletters": 100 * HOUR}}
    assert apply("set_retention", longer)["status"] == "ok"
    stored = db.conn.execute("SELECT retention FROM tenants").fetchone()[0]
    assert stored == '{"deadletters": 360000000}'  # replaced: runs is the node's again
    assert RETENTION.shortened_by({"deadletters": 100 * HOUR}) == RETENTION
    unknown = apply("set_retention", {"tenant_id": "nope", "retention_ms": {}})
    assert unknown["code"] == "tenant_not_found"


@pytest.mark.parametrize("max_rows", [1, 3, 1_000])
def test_pruning_in_any_budget_reaches_the_same_state(tmp_path: Any, max_rows: int) -> None:
    from schedd.store.apply import StateMachine

    databases = []
    for name in ("whole", "pieces"):
        db = Database(tmp_path / f"{name}-{max_rows}.db")
        apply = Applier(StateMachine(db))
        one_time_job_done(apply, finished_ms=NOW_MS + SEC)
        budget = 1_000 if name == "whole" else max_rows
        after, done = "", False
        for _ in range(50):
            result = prune(apply, NOW_MS + 5 * HOUR, after=after, max_rows=budget)
            after, done = result["next_after"], result["done"]
            if done:
                break
        assert done
        databases.append(db)
    tables = ("jobs", "runs", "attempts", "audit", "deadletters", "messages")
    counts = [[count(db, f"SELECT COUNT(*) FROM {t}") for t in tables] for db in databases]
    assert counts[0] == counts[1]
    for db in databases:
        db.close()


def test_prune_is_deterministic_on_two_replicas(tmp_path: Any) -> None:
    from schedd.store.apply import StateMachine

    digests = []
    for name in ("a", "b"):
        db = Database(tmp_path / f"{name}.db")
        apply = Applier(StateMachine(db))
        one_time_job_done(apply, finished_ms=NOW_MS + SEC)
        prune(apply, NOW_MS + 5 * HOUR, max_rows=2)
        digests.append(state_digest(db.conn))
        db.close()
    assert digests[0] == digests[1]


def test_run_history_pages_stay_consistent_across_a_prune(apply: Applier, db: Database) -> None:
    """Keyset pages (newest first): a prune between two pages removes old runs, and the second
    page holds only runs older than the first page's last, none twice, none skipped that still
    exist."""
    setup(apply)
    claim(apply)
    claim(apply, version=2, run_ms=NOW_MS + MIN, next_ms=None, ts_ms=NOW_MS + 2 * SEC)
    for k in range(6):
        at = NOW_MS + (k + 2) * SEC
        apply("trigger_job", {"tenant_id": "t1", "job_id": "j1", "scheduled_at_ms": at}, ts_ms=at)
        claim(apply, version=3 + k, run_ms=at, next_ms=None, trigger=True, ts_ms=at)
    for k, m in enumerate(receive(apply, NOW_MS + 9 * SEC, *(f"r{k}" for k in range(8)))):
        ack(apply, m["receipt"], NOW_MS + 10 * SEC + k)  # finished in scheduled order
    first = queries.list_runs(db.conn, "j1", before_ms=2**62, limit=4)
    assert len(first) == 4
    prune(apply, NOW_MS + HOUR + 10 * SEC + 3, max_rows=3)  # the three oldest finished go
    cursor = ms_of(first[-1].scheduled_at)
    second = queries.list_runs(db.conn, "j1", before_ms=cursor, limit=4)
    left = {r.scheduled_at for r in queries.list_runs(db.conn, "j1", before_ms=2**62, limit=99)}
    assert all(ms_of(r.scheduled_at) < cursor for r in second)
    assert {r.scheduled_at for r in second} == left - {r.scheduled_at for r in first}
    assert len(left) == 5 and second  # three of eight pruned; the older page still has runs


def test_kept_command_results_go_after_the_time_the_prune_names(
    apply: Applier, db: Database
) -> None:
    setup(apply)  # four commands at NOW_MS, their results kept
    kept = count(db, "SELECT COUNT(*) FROM applied_commands")
    assert prune(apply, NOW_MS + HOUR)["deleted"]["commands"] == 0  # not named: apply's hour
    body = {"retention_ms": RETENTION.as_ms(), "commands_ms": 600_000}
    result = apply("prune", body, ts_ms=NOW_MS + 600_001)
    assert result["deleted"]["commands"] == kept  # every result from NOW_MS
    assert (
        count(db, "SELECT COUNT(*) FROM applied_commands WHERE at_ms = ?".replace("?", str(NOW_MS)))
        == 0
    )
