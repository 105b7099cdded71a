"""Dispatch in the state machine: leases, fenced claims (the seed's race), the built-in queue."""

from __future__ import annotations

from typing import Any

import pytest

from schedd.store.db import Database
from tests.conftest import NOW_MS, Applier

MIN = 60_000
RETRY = {"max_attempts": 2, "backoff": "fixed", "initial_delay": "10s", "max_delay": "10s"}


def spec(schedule: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": None,
        "schedule": schedule,
        "window": None,
        "target": {"type": "queue", "name": "q"},
        "payload": {"n": 1},
        "retry": RETRY,
        "misfire_policy": "run_once",
        "overlap_policy": "allow",
    } | extra


def setup(
    apply: Applier,
    *,
    job_id: str = "j1",
    run_ms: int = NOW_MS,
    schedule: dict[str, Any] | None = None,
    **spec_fields: Any,
) -> None:
    apply(
        "create_tenant",
        {
            "tenant_id": "t1",
            "name": "t1",
            "token_hash": "h",
            "signing_secret": "s",
            "max_active_jobs": 100,
            "dispatch_rate": 100,
            "allowed_hosts": [],
        },
    )
    apply("register_node", {"node_id": "n1", "api": "a", "raft": "r1"})
    apply("register_node", {"node_id": "n2", "api": "b", "raft": "r2"})
    apply(
        "assign_leases",
        {"ttl_ms": 10_000, "moves": [{"partition": 3, "node_id": "n1", "epoch": 0}]},
    )
    item = {
        "job_id": job_id,
        "partition": 3,
        "spec": spec(schedule or {"every": "1m"}, **spec_fields),
        "next_run_at_ms": run_ms,
        "next_fire_at_ms": run_ms,
        "idempotency_key": None,
        "request_hash": None,
    }
    assert apply("create_jobs", {"tenant_id": "t1", "jobs": [item]})["results"][0]["created"]


def claim_item(
    *,
    epoch: int = 1,
    version: int = 1,
    run_ms: int = NOW_MS,
    next_ms: int | None = NOW_MS + MIN,
    trigger: bool = False,
) -> dict[str, Any]:
    """One claim of job j1 (partition 3) as a dispatcher plans it."""
    return {
        "partition": 3,
        "epoch": epoch,
        "job_id": "j1",
        "scheduled_at_ms": run_ms,
        "fire_at_ms": run_ms,
        "is_trigger": trigger,
        "version": version,
        "next_run_at_ms": next_ms,
        "next_fire_at_ms": next_ms,
    }


def claim(apply: Applier, *, node: str = "n1", ts_ms: int = NOW_MS, **item: Any) -> dict[str, Any]:
    body = {"node_id": node, "claims": [claim_item(**item)]}
    return apply("claim_runs", body, ts_ms=ts_ms)


def count(db: Database, sql: str) -> int:
    return int(db.conn.execute(sql).fetchone()[0])


def test_two_dispatchers_with_the_same_read_claim_a_run_once(apply: Applier, db: Database) -> None:
    setup(apply)
    first = claim(apply)
    second = claim(apply)  # the same stale read: version 1, the same scheduled time
    assert first["claimed"] == 1
    assert second["claimed"] == 0 and second["rejected"] == {"not_due": 1}
    assert count(db, "SELECT COUNT(*) FROM runs") == 1
    assert count(db, "SELECT COUNT(*) FROM messages") == 1


def test_recurring_job_rescheduled_in_the_claim_is_never_claimed_twice(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    claim(apply)
    # The claim moved the job to its next run (version 2): a stale version-1 claim of that
    # next run is refused, a current one succeeds, and no run exists twice.
    stale = claim(apply, version=1, run_ms=NOW_MS + MIN, next_ms=NOW_MS + 2 * MIN)
    assert stale["rejected"] == {"stale_version": 1}
    fresh = claim(apply, version=2, run_ms=NOW_MS + MIN, next_ms=NOW_MS + 2 * MIN)
    assert fresh["claimed"] == 1
    assert count(db, "SELECT COUNT(*) FROM runs") == 2
    assert db.conn.execute("SELECT version, next_run_at_ms FROM jobs").fetchone() == (
        3,
        NOW_MS + 2 * MIN,
    )


def test_one_batch_naming_a_job_several_times_acts_as_claims_one_by_one(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    apply("trigger_job", {"tenant_id": "t1", "job_id": "j1", "scheduled_at_ms": NOW_MS + 5_000})

    def one(run_ms: int, version: int, *, trigger: bool = False) -> dict[str, Any]:
        next_ms = None if trigger else run_ms + MIN
        return claim_item(run_ms=run_ms, version=version, next_ms=next_ms, trigger=trigger)

    claims = [
        one(NOW_MS, 1),  # claimed: the job moves to NOW + MIN at version 2
        one(NOW_MS + 5_000, 1, trigger=True),  # claimed: triggers ignore the version
        one(NOW_MS, 1),  # its due row went with the first claim
        one(NOW_MS + MIN, 2),  # due since the first claim, at the version it made
        one(NOW_MS + MIN, 1),  # a stale read of the same run
    ]
    result = apply("claim_runs", {"node_id": "n1", "claims": claims}, ts_ms=NOW_MS + 5_000)
    assert result["claimed"] == 3
    assert result["rejected"] == {"not_due": 2}
    runs = db.conn.execute("SELECT scheduled_at_ms FROM runs ORDER BY 1").fetchall()
    assert runs == [(NOW_MS,), (NOW_MS + 5_000,), (NOW_MS + MIN,)]
    assert db.conn.execute("SELECT version, next_run_at_ms FROM jobs").fetchone() == (
        3,
        NOW_MS + 2 * MIN,
    )
    assert count(db, "SELECT COUNT(*) FROM messages") == 3


def test_claims_are_fenced_by_the_lease(apply: Applier, db: Database) -> None:
    setup(apply)
    assert claim(apply, node="n2")["rejected"] == {"stale_lease": 1}
    assert claim(apply, epoch=7)["rejected"] == {"stale_lease": 1}
    assert claim(apply, ts_ms=NOW_MS + 60_000)["rejected"] == {"expired_lease": 1}
    # The lease moves to n2: n1, paused past its lease with its old epoch, gets nothing.
    apply(
        "assign_leases",
        {"ttl_ms": 10_000, "moves": [{"partition": 3, "node_id": "n2", "epoch": 1}]},
    )
    assert claim(apply, node="n1", epoch=1)["rejected"] == {"stale_lease": 1}
    assert claim(apply, node="n2", epoch=2)["claimed"] == 1


def test_lease_moves_are_compare_and_set_and_heartbeats_renew(apply: Applier, db: Database) -> None:
    setup(apply)
    stale_move = {"ttl_ms": 10_000, "moves": [{"partition": 3, "node_id": "n2", "epoch": 0}]}
    assert apply("assign_leases", stale_move)["moved"] == 0
    apply("node_heartbeat", {"node_id": "n1", "ttl_ms": 10_000}, ts_ms=NOW_MS + 5_000)
    assert db.conn.execute("SELECT node_id, epoch, expires_at_ms FROM leases").fetchone() == (
        "n1",
        1,
        NOW_MS + 15_000,
    )


def test_one_time_job_completes_with_its_claim(apply: Applier, db: Database) -> None:
    setup(apply, schedule={"run_at": "2026-09-21T14:13:20Z"})
    assert claim(apply, next_ms=None)["claimed"]
    assert db.conn.execute("SELECT status, next_run_at_ms FROM jobs").fetchone() == (
        "completed",
        None,
    )
    assert count(db, "SELECT COUNT(*) FROM due") == 0
    assert count(db, "SELECT live_jobs FROM tenants") == 0


def test_cancelled_job_cannot_be_claimed(apply: Applier, db: Database) -> None:
    setup(apply)
    apply("cancel_job", {"tenant_id": "t1", "job_id": "j1"})
    assert claim(apply, version=2)["rejected"] == {"not_due": 1}
    assert count(db, "SELECT COUNT(*) FROM runs") == 0


def receive(apply: Applier, ts_ms: int, *receipts: str) -> list[dict[str, Any]]:
    body = {
        "tenant_id": "t1",
        "queue": "q",
        "max": 10,
        "visibility_ms": 30_000,
        "receipts": list(receipts),
    }
    return list(apply("receive_messages", body, ts_ms=ts_ms)["messages"])


def test_receive_then_ack_succeeds_the_run(apply: Applier, db: Database) -> None:
    setup(apply)
    claim(apply)
    [message] = receive(apply, NOW_MS, "r1", "r2")
    assert message["attempt"] == 1 and message["payload"] == {"n": 1}
    assert message["receipt"] == f"r1.j1:{NOW_MS}"  # the proposer's nonce, then the message
    assert receive(apply, NOW_MS + 1_000, "r3") == []  # invisible while in flight
    receipts = [message["receipt"], "bogus", f"r2.j1:{NOW_MS}", message["receipt"]]
    ack = {"tenant_id": "t1", "queue": "q", "receipts": receipts}
    assert apply("ack_messages", ack, ts_ms=NOW_MS + 2_000)["acked"] == 1
    assert db.conn.execute("SELECT status, attempt FROM runs").fetchone() == ("succeeded", 1)
    assert db.conn.execute("SELECT outcome FROM attempts").fetchall() == [("succeeded",)]


def test_nack_retries_after_backoff_then_dead_letters(apply: Applier, db: Database) -> None:
    setup(apply)
    claim(apply)
    [first] = receive(apply, NOW_MS, "r1")
    nack = {"tenant_id": "t1", "queue": "q", "receipts": [first["receipt"]], "error": "boom"}
    apply("nack_messages", nack, ts_ms=NOW_MS + 1_000)
    assert db.conn.execute("SELECT status, error FROM runs").fetchone() == ("retrying", "boom")
    assert receive(apply, NOW_MS + 1_000 + 4_000, "r2") == []  # the fixed 10 s backoff (5-10 s)
    [again] = receive(apply, NOW_MS + 1_000 + 10_000, "r2")
    assert again["attempt"] == 2
    apply("nack_messages", nack | {"receipts": [again["receipt"]]}, ts_ms=NOW_MS + 20_000)
    assert db.conn.execute("SELECT status FROM runs").fetchone() == ("dead",)
    assert count(db, "SELECT COUNT(*) FROM messages") == 0
    assert db.conn.execute("SELECT attempts, error FROM deadletters").fetchone() == (2, "boom")


def test_expired_visibility_is_a_failed_attempt_and_a_redelivery(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    claim(apply)
    [first] = receive(apply, NOW_MS, "r1")
    [again] = receive(apply, NOW_MS + 31_000, "r2")
    assert again["attempt"] == 2 and again["receipt"] == f"r2.j1:{NOW_MS}"
    outcomes = db.conn.execute("SELECT attempt, outcome FROM attempts ORDER BY attempt").fetchall()
    assert outcomes == [(1, "timed_out"), (2, None)]
    stale_ack = {"tenant_id": "t1", "queue": "q", "receipts": [first["receipt"]]}
    assert apply("ack_messages", stale_ack, ts_ms=NOW_MS + 32_000)["acked"] == 0


def test_extend_keeps_a_message_invisible(apply: Applier) -> None:
    setup(apply)
    claim(apply)
    [message] = receive(apply, NOW_MS, "r1")
    receipts = [message["receipt"]]
    extend = {"tenant_id": "t1", "queue": "q", "receipts": receipts, "visibility_ms": 60_000}
    elsewhere = extend | {"queue": "other"}
    assert apply("extend_messages", elsewhere, ts_ms=NOW_MS + 20_000)["extended"] == 0
    assert apply("extend_messages", extend, ts_ms=NOW_MS + 20_000)["extended"] == 1
    assert receive(apply, NOW_MS + 40_000, "r2") == []


def test_redrive_gives_a_dead_run_one_more_attempt(apply: Applier, db: Database) -> None:
    setup(apply)
    claim(apply)
    nack = {"tenant_id": "t1", "queue": "q", "error": "boom"}
    [first] = receive(apply, NOW_MS, "r1")
    apply("nack_messages", nack | {"receipts": [first["receipt"]]}, ts_ms=NOW_MS + 1_000)
    [second] = receive(apply, NOW_MS + 20_000, "r2")
    apply("nack_messages", nack | {"receipts": [second["receipt"]]}, ts_ms=NOW_MS + 21_000)
    [(dl_id,)] = db.conn.execute("SELECT id FROM deadletters").fetchall()
    other = apply("redrive_deadletter", {"tenant_id": "t2", "id": dl_id}, ts_ms=NOW_MS + 22_000)
    assert other["code"] == "deadletter_not_found"
    assert (
        apply("redrive_deadletter", {"tenant_id": "t1", "id": dl_id}, ts_ms=NOW_MS + 22_000)[
            "status"
        ]
        == "ok"
    )
    [again] = receive(apply, NOW_MS + 22_000, "r3")
    assert again["attempt"] == 3
    apply("nack_messages", nack | {"receipts": [again["receipt"]]}, ts_ms=NOW_MS + 23_000)
    assert db.conn.execute("SELECT attempts FROM deadletters").fetchone() == (3,)  # dead again
    assert apply("delete_deadletter", {"tenant_id": "t1", "id": dl_id})["status"] == "ok"
    assert count(db, "SELECT COUNT(*) FROM deadletters") == 0


MOST = {"max_attempts": 100, "backoff": "fixed", "initial_delay": "0s", "max_delay": "0s"}


def _dead_after_100_attempts(apply: Applier, db: Database) -> tuple[str, int]:
    """Job j1 (queue q, 100 attempts) received and nacked 100 times; (dead letter id, now)."""
    setup(apply)
    item_spec = spec({"every": "1m"}, retry=MOST)
    body = {"tenant_id": "t1", "job_id": "j1", "expected_version": 1, "spec": item_spec}
    fields = {"next_run_at_ms": NOW_MS, "next_fire_at_ms": NOW_MS, "fields": ["retry"]}
    assert apply("update_job", body | fields)["status"] == "ok"
    claim(apply, version=2)
    now = NOW_MS
    for attempt in range(1, 101):
        [message] = receive(apply, now, f"r{attempt}")
        assert message["attempt"] == attempt
        nack = {"tenant_id": "t1", "queue": "q", "receipts": [message["receipt"]], "error": "no"}
        assert apply("nack_messages", nack, ts_ms=now)["nacked"] == 1
    [(dl_id, attempts)] = db.conn.execute("SELECT id, attempts FROM deadletters").fetchall()
    assert attempts == 100
    return dl_id, now + 1


@pytest.mark.parametrize("ends_by", ["nack", "visibility timeout"])
def test_a_redriven_queue_run_of_100_attempts_fails_again_and_the_queue_still_works(
    apply: Applier, db: Database, ends_by: str
) -> None:
    dl_id, now = _dead_after_100_attempts(apply, db)
    assert (
        apply("redrive_deadletter", {"tenant_id": "t1", "id": dl_id}, ts_ms=now)["status"] == "ok"
    )
    [again] = receive(apply, now, "redriven")
    assert again["attempt"] == 101
    if ends_by == "nack":
        nack = {"tenant_id": "t1", "queue": "q", "receipts": [again["receipt"]], "error": "no"}
        assert apply("nack_messages", nack, ts_ms=now + 1)["status"] == "ok"
    else:
        assert receive(apply, now + 31_000, "after") == []  # the expired attempt ends it: dead
    assert db.conn.execute("SELECT status, attempt FROM runs").fetchone() == ("dead", 101)
    assert db.conn.execute("SELECT attempts FROM deadletters").fetchone() == (101,)
    assert receive(apply, now + 60_000, "later") == []  # receiving goes on (it was a 500)
