"""Log level 8 in the state machine (issue 31): a paused tenant's claims are refused, a paused
queue's receives hand out nothing, a trigger's own payload is what its claim delivers, and a run
limit completes its job with the claim that reaches it. Every replica decides these alike: the
fences hold whatever the dispatcher and the API believed when they proposed."""

from __future__ import annotations

import json

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


ONE_TRY = {"max_attempts": 1, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}
POLICY = {"alert_url": "https://alerts.example/hook", "after": 2, "pause": True}


def _run_once(apply: Applier, k: int, *, ack: bool) -> None:
    """Run k of job j1 (every minute) claimed, received, then acked or nacked (dead)."""
    at, now = NOW_MS + k * MIN, NOW_MS + 10 * k  # the lease lasts 10 s: claims come early
    assert claim(apply, run_ms=at, next_ms=at + MIN, version=k + 1, ts_ms=now)["claimed"] == 1
    [message] = receive(apply, now, f"r{k}")
    verb = "ack_messages" if ack else "nack_messages"
    body = {"tenant_id": "t1", "queue": "q", "receipts": [message["receipt"]], "error": f"e{k}"}
    assert apply(verb, body, ts_ms=now + 1)["status"] == "ok"


def _alerts(db: Database) -> list[tuple[str, str]]:
    return db.conn.execute("SELECT job_id, body FROM alerts ORDER BY alert_id").fetchall()


def test_the_afterth_dead_run_in_a_row_alerts_once_and_pauses(apply: Applier, db: Database) -> None:
    setup(apply, retry=ONE_TRY, on_failure=POLICY)
    _run_once(apply, 0, ack=False)
    assert _alerts(db) == []  # one dead run: not yet
    _run_once(apply, 1, ack=False)
    [(job_id, body)] = _alerts(db)
    alert = json.loads(body)
    assert job_id == "j1" and alert["type"] == "job.failing" and alert["consecutive_failures"] == 2
    assert [r["error"] for r in alert["runs"]] == ["e1", "e0"] and alert["last_error"] == "e1"
    assert alert["paused"] is True
    status, reason = db.conn.execute(
        "SELECT j.status, p.reason FROM jobs j JOIN pauses p ON p.name = j.job_id"
    ).fetchone()
    assert (status, reason) == ("paused", "paused after 2 consecutive failures")
    assert _count(db, "SELECT count(*) FROM due WHERE is_trigger = 0") == 0
    actors = [a for (a,) in db.conn.execute("SELECT actor FROM audit WHERE action = 'pause_job'")]
    assert actors == ["schedd"]


def test_a_success_starts_the_count_again(apply: Applier, db: Database) -> None:
    setup(apply, retry=ONE_TRY, on_failure=POLICY | {"pause": False})
    _run_once(apply, 0, ack=False)
    _run_once(apply, 1, ack=True)
    _run_once(apply, 2, ack=False)
    assert _alerts(db) == []
    _run_once(apply, 3, ack=False)
    assert len(_alerts(db)) == 1
    _run_once(apply, 4, ack=False)  # the streak goes on: no second alert
    assert len(_alerts(db)) == 1
    assert db.conn.execute("SELECT status FROM jobs").fetchone() == ("active",)


def test_a_tenants_default_policy_applies_to_a_job_without_its_own(
    apply: Applier, db: Database
) -> None:
    setup(apply, retry=ONE_TRY)
    policy = {"alert_url": "https://alerts.example/t", "after": 1, "pause": False}
    update = {"tenant_id": "t1", "changes": {"on_failure": policy}}
    assert apply("update_tenant", update)["status"] == "ok"
    _run_once(apply, 0, ack=False)
    assert [job for job, _ in _alerts(db)] == ["j1"]
    removed = {"tenant_id": "t1", "changes": {"on_failure": None}}
    apply("update_tenant", removed)
    assert _count(db, "SELECT count(*) FROM failure_policies") == 0


def test_dead_runs_of_a_job_without_a_policy_write_nothing_new(
    apply: Applier, db: Database
) -> None:
    setup(apply, retry=ONE_TRY)
    for k in range(3):
        _run_once(apply, k, ack=False)
    assert _alerts(db) == [] and _count(db, "SELECT count(*) FROM pauses") == 0
