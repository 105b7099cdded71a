"""The delivery ledger (schedd/store/ledger/) against a real store: the rows each write leaves,
which columns a change leaves alone, and the first outcome of an attempt winning. What each
delivery path leaves through the apply handlers is in test_store_ledger_paths.py."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from schedd.model import RetryPolicy, RunStatus
from schedd.retry import retry_delay_ms
from schedd.store import ledger
from schedd.store.db import Database
from schedd.stored_spec import stored_retry
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_delivery import HTTP
from tests.unit.test_store_delivery import RETRY as HTTP_RETRY
from tests.unit.test_store_dispatch import claim, setup, spec

TABLES = ("runs", "messages", "outbox", "attempts", "deadletters")


@contextmanager
def tx(db: Database) -> Iterator[sqlite3.Connection]:
    with db.transaction(applied_index=db.applied_index + 1) as conn:
        yield conn


def rows(db: Database, table: str) -> list[tuple[Any, ...]]:
    return db.conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()


def tables(db: Database) -> dict[str, list[tuple[Any, ...]]]:
    return {table: rows(db, table) for table in TABLES}


def job_with(apply: Applier, **extra: Any) -> None:
    """Job j1 of tenant t1 in partition 3, due now, with the spec's target/retry changed."""
    setup(apply, schedule={"run_at": "2026-09-21T14:13:20Z"})
    if extra:
        body = {
            "tenant_id": "t1",
            "job_id": "j1",
            "expected_version": 1,
            "spec": spec({"run_at": "2026-09-21T14:13:20Z"}, **extra),
            "next_run_at_ms": NOW_MS,
            "next_fire_at_ms": NOW_MS,
            "fields": sorted(extra),
        }
        assert apply("update_job", body)["status"] == "ok"


Extra = dict[str, Any]
RUN = ("j1", NOW_MS, "t1", NOW_MS, "dispatched", 0, NOW_MS, None, None)
HTTP_TARGET = (
    '{"type":"http","url":"https://hooks.example.com/x","method":"POST","headers":{},'
    '"timeout":"10s"}'
)
RETRY_TEXT = '{"max_attempts":2,"backoff":"fixed","initial_delay":"10s","max_delay":"10s"}'


@pytest.mark.parametrize(
    ("extra", "table", "delivery"),
    [
        ({}, "messages", (f"j1:{NOW_MS}", "t1", "q", "j1", NOW_MS, 0, NOW_MS, None)),
        ({"target": HTTP, "retry": HTTP_RETRY}, "outbox", (1, 3, "t1", "j1", NOW_MS, 1, NOW_MS)),
    ],
    ids=["queue", "http"],
)
def test_a_claimed_run_gets_one_delivery_of_its_targets_kind(
    apply: Applier, db: Database, extra: Extra, table: str, delivery: tuple[Any, ...]
) -> None:
    """A queue message, visible now and never received; or an outbox row due now for attempt 1,
    with the target's JSON. Payload and retry are copied from the job as compact JSON."""
    job_with(apply, **extra)
    assert claim(apply, version=2 if extra else 1, next_ms=None)["claimed"] == 1
    assert rows(db, "runs") == [RUN]
    copied = (
        ('{"n":1}', RETRY_TEXT) if table == "messages" else (HTTP_TARGET, '{"n":1}', RETRY_TEXT)
    )
    assert {t: r for t, r in tables(db).items() if r and t != "runs"} == {
        table: [(*delivery, *copied)]
    }


def test_a_skipped_run_is_finished_at_once_with_its_reason(db: Database) -> None:
    run = ledger.NewRun(
        job_id="j", scheduled_at_ms=5, tenant_id="t", fire_at_ms=6, skipped="overlap"
    )
    with tx(db) as conn:
        ledger.open_runs(conn, [run], NOW_MS)
    assert rows(db, "runs") == [("j", 5, "t", 6, "skipped", 0, NOW_MS, NOW_MS, "overlap")]


def message(msg_id: str = "j:5", attempt: int = 0) -> ledger.QueueDelivery:
    return ledger.QueueDelivery(
        msg_id=msg_id,
        tenant_id="t",
        queue="q",
        job_id="j",
        scheduled_at_ms=5,
        attempt=attempt,
        visible_at_ms=NOW_MS,
        payload="null",
        retry="{}",
    )


def outbox_row(job_id: str) -> ledger.OutboxDelivery:
    return ledger.OutboxDelivery(
        partition=3,
        tenant_id="t",
        job_id=job_id,
        scheduled_at_ms=5,
        attempt=1,
        due_at_ms=NOW_MS,
        target='{"type":"http"}',
        payload="null",
        retry="{}",
    )


def test_outbox_rows_take_their_seq_in_the_order_given(db: Database) -> None:
    with tx(db) as conn:
        ledger.enqueue(conn, [outbox_row("b"), message(), outbox_row("a")])
    assert [(seq, job) for seq, _, _, job, *_ in rows(db, "outbox")] == [(1, "b"), (2, "a")]
    assert rows(db, "messages")[0][:8] == ("j:5", "t", "q", "j", 5, 0, NOW_MS, None)


def test_a_claim_never_overwrites_a_message_a_redrive_replaces_it(db: Database) -> None:
    with tx(db) as conn:
        ledger.enqueue(conn, [message()])
    with pytest.raises(sqlite3.IntegrityError), tx(db) as conn:
        ledger.enqueue(conn, [message(attempt=7)])
    with tx(db) as conn:
        ledger.enqueue(conn, [message(attempt=7)], is_redrive=True)
    assert [row[5] for row in rows(db, "messages")] == [7]


def open_run(db: Database) -> None:
    with tx(db) as conn:
        ledger.open_runs(
            conn,
            [ledger.NewRun(job_id="j", scheduled_at_ms=5, tenant_id="t", fire_at_ms=5)],
            NOW_MS,
        )


def run_state(db: Database) -> tuple[Any, ...]:
    row: tuple[Any, ...] = db.conn.execute(
        "SELECT status, attempt, error, finished_at_ms FROM runs"
    ).fetchone()
    return row


def test_set_runs_writes_only_the_columns_it_is_given(db: Database) -> None:
    open_run(db)
    change = ledger.RunChange(job_id="j", scheduled_at_ms=5, status=RunStatus.RETRYING)
    with tx(db) as conn:
        ledger.set_runs(conn, [_with(change, attempt=2, error="boom")])
    assert run_state(db) == ("retrying", 2, "boom", None)
    with tx(db) as conn:  # a redrive: the status, and finished_at_ms written as NULL
        ledger.set_runs(conn, [_with(change, status=RunStatus.DEAD, finished_at_ms=9)])
        ledger.set_runs(conn, [_with(change, finished_at_ms=None)])
    assert run_state(db) == ("retrying", 2, "boom", None)
    with tx(db) as conn:
        ledger.set_runs(conn, [_with(change, status=RunStatus.SUCCEEDED, error=None)])
    assert run_state(db) == ("succeeded", 2, None, None)


@pytest.mark.parametrize("first", [0, 1], ids=["fewer-after", "more-after"])
def test_set_runs_refuses_changes_that_write_different_columns(db: Database, first: int) -> None:
    one = ledger.RunChange(job_id="j", scheduled_at_ms=5, status=RunStatus.DEAD, error="x")
    other = ledger.RunChange(job_id="j", scheduled_at_ms=5, status=RunStatus.DEAD)
    changes = [one, other] if first == 0 else [other, one]
    with pytest.raises(ValueError, match="same columns"), tx(db) as conn:
        ledger.set_runs(conn, changes)


def test_mark_runs_sets_the_status_and_only_the_columns_named(db: Database) -> None:
    open_run(db)
    with tx(db) as conn:
        ledger.mark_runs(conn, RunStatus.DELIVERED, [(3, "j", 5)], columns=("attempt",))
    assert run_state(db) == ("delivered", 3, None, None)
    with tx(db) as conn:
        ledger.mark_runs(conn, RunStatus.SUCCEEDED, [(9, "j", 5)], columns=("finished_at_ms",))
    assert run_state(db) == ("succeeded", 3, None, 9)
    with pytest.raises(ValueError, match="not run columns"), tx(db) as conn:
        ledger.mark_runs(conn, RunStatus.DEAD, [("x", "j", 5)], columns=("tenant_id",))


def _fields(change: ledger.RunChange) -> dict[str, Any]:
    return {
        "job_id": change.job_id,
        "scheduled_at_ms": change.scheduled_at_ms,
        "status": change.status,
    }


def _with(change: ledger.RunChange, **values: Any) -> ledger.RunChange:
    return ledger.RunChange(**(_fields(change) | values))


def test_a_queue_retry_hides_the_message_until_the_policys_time(db: Database) -> None:
    with tx(db) as conn:
        ledger.enqueue(conn, [message()])
        ledger.hand_out(conn, [("j:5", 1, NOW_MS + 30_000, "r1.j:5")])
    assert rows(db, "messages")[0][5:8] == (1, NOW_MS + 30_000, "r1.j:5")
    policy_delay = retry_delay_ms(_policy(), 1, "j:5")
    with tx(db) as conn:
        ledger.schedule_retry(conn, "j:5", NOW_MS + policy_delay)
    assert rows(db, "messages")[0][5:8] == (1, NOW_MS + policy_delay, None)
    assert 5_000 <= policy_delay <= 10_000  # the upper half of the 10 s fixed backoff


def _policy() -> RetryPolicy:
    return stored_retry({"max_attempts": 3, "backoff": "fixed", "initial_delay": "10s"})


def test_an_outbox_retry_moves_the_row_to_its_next_attempt(db: Database) -> None:
    with tx(db) as conn:
        ledger.enqueue(conn, [outbox_row("j")])
        ledger.schedule_retry(conn, 1, NOW_MS + 7_000)
    assert rows(db, "outbox")[0][:7] == (1, 3, "t", "j", 5, 2, NOW_MS + 7_000)


def test_attempts_start_finish_and_keep_an_error_a_success_does_not_name(db: Database) -> None:
    with tx(db) as conn:
        ledger.start_attempts(conn, [("j", 5, 1)], started_at_ms=10)
        ledger.finish_attempts(conn, [("j", 5, 1)], finished_at_ms=20, outcome="failed", error="e")
        ledger.finish_attempts(conn, [("j", 5, 1)], finished_at_ms=30, outcome="succeeded")
        ledger.finish_attempts(conn, [("j", 5, 2)], finished_at_ms=30, outcome="failed", error="e")
    assert rows(db, "attempts") == [("j", 5, 1, 10, 30, "succeeded", "e")]  # no attempt 2 row
    with tx(db) as conn:  # a receive again: the leftover row is replaced
        ledger.start_attempts(conn, [("j", 5, 1)], started_at_ms=10)
    assert rows(db, "attempts") == [("j", 5, 1, 10, None, None, None)]


def test_a_whole_attempt_is_recorded_in_one_row(db: Database) -> None:
    whole = ledger.Attempt(
        job_id="j",
        scheduled_at_ms=5,
        attempt=1,
        started_at_ms=10,
        finished_at_ms=20,
        outcome="failed",
        error="http 503",
    )
    with tx(db) as conn:
        ledger.record_attempts(conn, [whole])
    assert rows(db, "attempts") == [("j", 5, 1, 10, 20, "failed", "http 503")]


def dead_letter(target: str, dead_id: str = "j:5") -> ledger.DeadLetter:
    return ledger.DeadLetter(
        id=dead_id,
        tenant_id="t",
        job_id="j",
        scheduled_at_ms=5,
        attempts=3,
        error="boom",
        target=target,
        payload="null",
        created_at_ms=NOW_MS,
    )


@pytest.mark.parametrize("delivery", ["j:5", 1], ids=["message", "outbox"])
def test_burying_a_delivery_makes_a_dead_letter_and_a_dead_run(
    db: Database, delivery: str | int
) -> None:
    open_run(db)
    target = ledger.queue_target("q")
    dead_run = ledger.RunChange(
        job_id="j", scheduled_at_ms=5, status=RunStatus.DEAD, error="boom", finished_at_ms=NOW_MS
    )
    with tx(db) as conn:
        ledger.enqueue(conn, [message(), outbox_row("j")])
        ledger.bury(conn, delivery, dead_letter(target), dead_run)
    left = rows(db, "outbox") if delivery == "j:5" else rows(db, "messages")
    assert len(left) == 1 and not (rows(db, "messages") and rows(db, "outbox"))
    assert rows(db, "deadletters") == [
        ("j:5", "t", "j", 5, 3, "boom", '{"type": "queue", "name": "q"}', "null", NOW_MS)
    ]
    assert run_state(db) == ("dead", 0, "boom", NOW_MS)
    with tx(db) as conn:
        ledger.unbury(conn, "j:5")
    assert rows(db, "deadletters") == []


def test_the_first_outcome_recorded_for_an_attempt_wins(db: Database) -> None:
    with tx(db) as conn:
        ledger.enqueue(conn, [outbox_row("a"), outbox_row("b")])
    first = ledger.Reported(seq=1, attempt=1, job_id="a", scheduled_at_ms=5)
    with tx(db) as conn:
        found = ledger.reported_rows(
            conn,
            [
                first,
                first,  # the same seq twice in a batch: the second is stale
                ledger.Reported(seq=2, attempt=1),  # an old entry naming no run: still matches
                ledger.Reported(seq=9, attempt=1),  # no such row
            ],
        )
        assert [row and row.job_id for row in found] == ["a", None, "b", None]
        ledger.schedule_retry(conn, 1, NOW_MS)  # the first outcome was a retry
        ledger.remove(conn, [2])  # and the other a success
        late = [first, ledger.Reported(seq=2, attempt=1, job_id="b", scheduled_at_ms=5)]
        assert ledger.reported_rows(conn, late) == [None, None]
        other_run = ledger.Reported(seq=1, attempt=2, job_id="a", scheduled_at_ms=6)
        assert ledger.reported_rows(conn, [other_run]) == [None]
        assert ledger.reported_rows(conn, [other_run._replace(scheduled_at_ms=5)])[0] is not None


def test_remove_deletes_messages_by_id_and_outbox_rows_by_seq(db: Database) -> None:
    with tx(db) as conn:
        ledger.enqueue(conn, [message(), outbox_row("a"), outbox_row("b")])
        ledger.remove(conn, ["j:5", 2])
        ledger.extend(conn, ["nothing"], NOW_MS)
    assert rows(db, "messages") == [] and [r[0] for r in rows(db, "outbox")] == [1]
