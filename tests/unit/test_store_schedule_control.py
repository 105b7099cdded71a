"""Log level 8 in the state machine (issue 31): a paused tenant's claims are refused, a paused
queue's receives hand out nothing, a trigger's own payload is what its claim delivers, and a run
limit completes its job with the claim that reaches it. Every replica decides these alike: the
fences hold whatever the dispatcher and the API believed when they proposed."""

from __future__ import annotations

from schedd.store.db import Database
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_dispatch import MIN, claim, receive, setup

PAUSE_TENANT = {"tenant_id": "t1", "reason": "migration", "actor": "admin"}


def _count(db: Database, sql: str) -> int:
    return int(db.conn.execute(sql).fetchone()[0])


def test_a_paused_tenants_claims_are_refused_and_its_due_row_waits(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    assert apply("pause_tenant", PAUSE_TENANT)["status"] == "ok"
    assert claim(apply)["rejected"] == {"tenant_paused": 1}
    assert _count(db, "SELECT count(*) FROM runs") == 0
    assert _count(db, "SELECT count(*) FROM due") == 1
    assert apply("resume_tenant", {"tenant_id": "t1"})["status"] == "ok"
    assert claim(apply)["claimed"] == 1
    actions = [a for (a,) in db.conn.execute("SELECT action FROM audit ORDER BY seq")]
    assert actions[-2:] == ["pause_tenant", "resume_tenant"]


def test_pausing_an_unknown_tenant_is_refused(apply: Applier) -> None:
    answer = apply("pause_tenant", {"tenant_id": "nobody"})
    assert answer["status"] == "rejected" and answer["code"] == "tenant_not_found"


def test_a_paused_queue_hands_out_nothing_until_resumed(apply: Applier, db: Database) -> None:
    setup(apply)
    claim(apply)
    apply("pause_queue", {"tenant_id": "t1", "queue": "q", "reason": "relay swap"})
    assert receive(apply, NOW_MS, "r1") == []
    assert _count(db, "SELECT count(*) FROM messages WHERE receipt IS NULL") == 1
    other = apply("pause_queue", {"tenant_id": "t2", "queue": "q"})  # another tenant's
    assert other["status"] == "ok"
    assert receive(apply, NOW_MS, "r2") == []  # still this tenant's pause
    apply("resume_queue", {"tenant_id": "t1", "queue": "q"})
    [message] = receive(apply, NOW_MS + 1, "r3")
    assert message["job_id"] == "j1"


def test_a_triggered_run_with_its_own_payload_delivers_it(apply: Applier, db: Database) -> None:
    setup(apply, run_ms=NOW_MS + MIN)
    at = NOW_MS + 5
    trigger = {"tenant_id": "t1", "job_id": "j1", "scheduled_at_ms": at, "payload": '{"own":1}'}
    assert apply("trigger_job", trigger)["status"] == "ok"
    assert claim(apply, run_ms=at, trigger=True, next_ms=None)["claimed"] == 1
    [message] = receive(apply, NOW_MS + 10, "r1")
    assert message["payload"] == {"own": 1}
    assert db.conn.execute("SELECT payload FROM run_payloads").fetchall() == [('{"own":1}',)]


def test_the_claim_that_reaches_max_runs_completes_the_job(apply: Applier, db: Database) -> None:
    setup(apply, max_runs=2)
    first = claim(apply, run_ms=NOW_MS, next_ms=NOW_MS + MIN)
    assert first["claimed"] == 1
    assert db.conn.execute("SELECT status FROM jobs").fetchone() == ("active",)
    apply("trigger_job", {"tenant_id": "t1", "job_id": "j1", "scheduled_at_ms": NOW_MS + 7})
    trigger = claim(apply, run_ms=NOW_MS + 7, trigger=True, next_ms=None, version=2)
    assert trigger["claimed"] == 1  # a trigger is not counted
    second = claim(apply, run_ms=NOW_MS + MIN, next_ms=NOW_MS + 2 * MIN, version=2)
    assert second["claimed"] == 1
    status, next_run = db.conn.execute("SELECT status, next_run_at_ms FROM jobs").fetchone()
    assert (status, next_run) == ("completed", None)
    assert _count(db, "SELECT count(*) FROM due") == 0
    assert db.conn.execute("SELECT runs_started FROM run_counts").fetchall() == [(2,)]


def test_a_job_without_max_runs_writes_no_count(apply: Applier, db: Database) -> None:
    setup(apply)
    claim(apply)
    assert _count(db, "SELECT count(*) FROM run_counts") == 0
    assert _count(db, "SELECT count(*) FROM pauses") == 0
