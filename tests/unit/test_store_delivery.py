"""HTTP callbacks in the state machine: outbox rows from claims, recorded outcomes, retries,
dead letters, 410 cancels, redrive, and the signing secret's rotation overlap."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schedd.store import queries
from schedd.store.db import Database
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_dispatch import claim, count, setup, spec

HTTP = {
    "type": "http",
    "url": "https://hooks.example.com/x",
    "method": "POST",
    "headers": {},
    "timeout": "10s",
}
RETRY = {"max_attempts": 2, "backoff": "fixed", "initial_delay": "10s", "max_delay": "10s"}


@pytest.fixture
def claimed(apply: Applier, db: Database) -> Applier:
    """Job j1 (HTTP target) claimed once: one outbox row at attempt 1."""
    setup(apply, schedule={"run_at": "2026-09-21T14:13:20Z"})
    item_spec = spec({"run_at": "2026-09-21T14:13:20Z"}, target=HTTP, retry=RETRY)
    apply(
        "update_job",
        {
            "tenant_id": "t1",
            "job_id": "j1",
            "expected_version": 1,
            "spec": item_spec,
            "next_run_at_ms": NOW_MS,
            "next_fire_at_ms": NOW_MS,
            "fields": ["target", "retry"],
        },
    )
    assert claim(apply, version=2, next_ms=None)["claimed"] == 1
    return apply


def outbox(db: Database) -> list[tuple[Any, ...]]:
    return db.conn.execute(
        "SELECT seq, attempt, due_at_ms, target, payload, retry FROM outbox"
    ).fetchall()


def record(apply: Applier, verdict: str, *, attempt: int = 1, **extra: Any) -> dict[str, Any]:
    outcome = {
        "seq": 1,
        "attempt": attempt,
        "started_at_ms": NOW_MS + 100,
        "finished_at_ms": NOW_MS + 200,
        "verdict": verdict,
        "error": None if verdict == "succeeded" else "http 503",
        "retry_at_ms": NOW_MS + 5_000 if verdict == "retry" else None,
    } | extra
    return apply("record_callbacks", {"node_id": "n1", "outcomes": [outcome]})


def run_row(db: Database) -> tuple[Any, ...]:
    row: tuple[Any, ...] = db.conn.execute(
        "SELECT status, attempt, error, finished_at_ms FROM runs"
    ).fetchone()
    return row


def test_the_claim_copies_target_payload_and_retry_into_the_outbox(
    claimed: Applier, db: Database
) -> None:
    [(seq, attempt, due_at, target, payload, retry)] = outbox(db)
    assert (seq, attempt, due_at) == (1, 1, NOW_MS)
    assert '"url":"https://hooks.example.com/x"' in target
    assert payload == '{"n":1}' and '"max_attempts":2' in retry


def test_a_success_ends_the_run(claimed: Applier, db: Database) -> None:
    assert record(claimed, "succeeded")["succeeded"] == 1
    assert outbox(db) == []
    assert run_row(db) == ("succeeded", 1, None, NOW_MS + 200)
    attempts = db.conn.execute(
        "SELECT attempt, started_at_ms, finished_at_ms, outcome FROM attempts"
    ).fetchall()
    assert attempts == [(1, NOW_MS + 100, NOW_MS + 200, "succeeded")]


def test_a_retry_waits_until_the_time_the_caller_chose(claimed: Applier, db: Database) -> None:
    assert record(claimed, "retry")["retrying"] == 1
    [(_, attempt, due_at, *_)] = outbox(db)
    assert (attempt, due_at) == (2, NOW_MS + 5_000)
    assert run_row(db)[:3] == ("retrying", 1, "http 503")


def test_an_outcome_recorded_twice_counts_once(claimed: Applier, db: Database) -> None:
    record(claimed, "retry")
    again = record(claimed, "retry")  # a retried proposal, or a second caller after a lease move
    assert again["stale"] == 1 and "retrying" not in again
    assert outbox(db)[0][1] == 2
    assert count(db, "SELECT COUNT(*) FROM attempts") == 1


def test_the_last_failed_attempt_makes_a_dead_letter(claimed: Applier, db: Database) -> None:
    record(claimed, "retry")
    result = record(claimed, "retry", attempt=2, error="http 500: boom")
    assert result["dead"] == 1
    assert result["dead_runs"] == [{"job_id": "j1", "scheduled_at_ms": NOW_MS, "tenant_id": "t1"}]
    assert outbox(db) == []
    assert run_row(db)[:3] == ("dead", 2, "http 500: boom")
    assert db.conn.execute("SELECT attempts, error FROM deadletters").fetchone() == (
        2,
        "http 500: boom",
    )


def test_a_client_error_is_not_retried(claimed: Applier, db: Database) -> None:
    assert record(claimed, "failed", error="http 404")["dead"] == 1
    assert run_row(db)[:2] == ("dead", 1)
    assert db.conn.execute("SELECT status FROM jobs").fetchone() == ("completed",)


def test_gone_cancels_the_job_and_says_so_in_the_audit_log(apply: Applier, db: Database) -> None:
    setup(apply)  # a recurring job (every minute), so there is a next run to cancel
    apply(
        "update_job",
        {
            "tenant_id": "t1",
            "job_id": "j1",
            "expected_version": 1,
            "spec": spec({"every": "1m"}, target=HTTP),
            "next_run_at_ms": NOW_MS,
            "next_fire_at_ms": NOW_MS,
            "fields": ["target"],
        },
    )
    claim(apply, version=2)
    assert record(apply, "gone", error="http 410")["dead"] == 1
    assert db.conn.execute("SELECT status FROM jobs").fetchone() == ("cancelled",)
    assert count(db, "SELECT COUNT(*) FROM due") == 0
    assert count(db, "SELECT live_jobs FROM tenants") == 0
    actor, action = db.conn.execute(
        "SELECT actor, action FROM audit ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    assert action == "cancel_job" and "410" in actor


def test_redrive_puts_an_http_dead_letter_back_in_the_outbox(
    claimed: Applier, db: Database
) -> None:
    record(claimed, "failed", error="http 404")
    [(dl_id,)] = db.conn.execute("SELECT id FROM deadletters").fetchall()
    assert (
        claimed("redrive_deadletter", {"tenant_id": "t1", "id": dl_id, "partition": 3})["status"]
        == "ok"
    )
    [(seq, attempt, _, target, payload, retry)] = outbox(db)
    assert attempt == 2 and "hooks.example.com" in target and payload == '{"n":1}'
    assert '"max_attempts":2' in retry.replace(" ", "")  # exactly one more attempt
    assert record(claimed, "retry", seq=seq, attempt=2)["dead"] == 1  # and no more
    [(dl_id,)] = db.conn.execute("SELECT id FROM deadletters").fetchall()
    claimed("redrive_deadletter", {"tenant_id": "t1", "id": dl_id, "partition": 3})
    [(seq, attempt, *_)] = outbox(db)
    assert record(claimed, "succeeded", seq=seq, attempt=3)["succeeded"] == 1
    assert run_row(db)[:2] == ("succeeded", 3)


def test_rotation_keeps_the_old_secret_signing_for_the_overlap(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    apply(
        "rotate_tenant",
        {"tenant_id": "t1", "token_hash": "h2", "signing_secret": "s2", "overlap_ms": 60_000},
    )
    tenant = queries.get_tenant(db.conn, "t1")
    assert tenant is not None
    assert tenant.signing_secrets(NOW_MS + 59_999) == ["s2", "s"]
    assert tenant.signing_secrets(NOW_MS + 60_000) == ["s2"]


def test_one_command_naming_an_attempt_twice_records_it_once(
    claimed: Applier, db: Database
) -> None:
    outcome = {
        "seq": 1,
        "attempt": 1,
        "started_at_ms": NOW_MS + 100,
        "finished_at_ms": NOW_MS + 200,
        "verdict": "succeeded",
        "error": None,
        "retry_at_ms": None,
    }
    result = claimed("record_callbacks", {"node_id": "n1", "outcomes": [outcome, outcome]})
    assert (result["succeeded"], result["stale"]) == (1, 1)
    assert run_row(db) == ("succeeded", 1, None, NOW_MS + 200)


@pytest.mark.parametrize(
    ("named", "fate"),
    [
        ({"job_id": "j2"}, "stale"),  # the seq is the row's, the run another's: a late outcome
        ({"job_id": "j1", "scheduled_at_ms": NOW_MS + 1}, "stale"),
        ({"job_id": "j1", "scheduled_at_ms": NOW_MS}, "succeeded"),
        ({}, "succeeded"),  # an entry from before outcomes named their run: seq and attempt
        ({"job_id": None, "scheduled_at_ms": None}, "succeeded"),  # the catalogue reads null
    ],  # as absent (store/commands.py), and no caller ever wrote a null run
)
def test_an_outcome_counts_only_for_the_run_it_names(
    claimed: Applier, db: Database, named: dict[str, Any], fate: str
) -> None:
    assert record(claimed, "succeeded", **named)[fate] == 1
    assert run_row(db)[0] == ("succeeded" if fate == "succeeded" else "dispatched")


def test_a_redriven_http_run_of_100_attempts_is_recorded_not_refused(
    claimed: Applier, db: Database
) -> None:
    record(claimed, "failed", error="http 404")
    db.conn.execute("UPDATE deadletters SET attempts = 100")  # as after 100 attempts
    [(dl_id,)] = db.conn.execute("SELECT id FROM deadletters").fetchall()
    redrive = {"tenant_id": "t1", "id": dl_id, "partition": 3}
    assert claimed("redrive_deadletter", redrive)["status"] == "ok"
    [(seq, attempt, _, _, _, retry)] = outbox(db)
    assert attempt == 101 and json.loads(retry)["max_attempts"] == 101  # read leniently
    result = record(claimed, "retry", seq=seq, attempt=101, error="http 500")
    assert result["status"] == "ok" and result["dead"] == 1, result
    assert run_row(db)[:3] == ("dead", 101, "http 500")


def test_a_stored_retry_policy_outside_the_apis_rules_is_read_not_refused(
    claimed: Applier, db: Database
) -> None:
    # As an older redrive wrote it: one more attempt than the API allows.
    stored = {"max_attempts": 101, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}
    db.conn.execute("UPDATE outbox SET attempt = 100, retry = ?", (json.dumps(stored),))
    result = record(claimed, "retry", attempt=100, error="http 500")
    assert result["status"] == "ok" and result["retrying"] == 1, result
    assert record(claimed, "retry", attempt=101, error="http 500")["dead"] == 1
    assert run_row(db)[:2] == ("dead", 101)
