"""Each delivery path written through the ledger leaves the very rows its apply handler writes
today: the queue's receive, nack (retry, dead), redrive and ack; HTTP outcomes (retry, stale,
dead), redrive and success. A store driven by commands and a twin driven by ledger calls must hold
equal tables after each step; this is the dry run of moving the handlers onto the ledger."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.jobspec import stored_retry
from schedd.model import RunStatus, delivery_id
from schedd.retry import retry_delay_ms
from schedd.store import ledger
from schedd.store.apply import StateMachine
from schedd.store.db import Database
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_delivery import HTTP, record
from tests.unit.test_store_delivery import RETRY as HTTP_RETRY
from tests.unit.test_store_dispatch import RETRY, claim, receive
from tests.unit.test_store_ledger import job_with, tables, tx

MSG = f"j1:{NOW_MS}"
ONE_MORE = {"backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "twin.db")
    try:
        yield database
    finally:
        database.close()


def run(**values: Any) -> ledger.RunChange:
    return ledger.RunChange(job_id="j1", scheduled_at_ms=NOW_MS, **values)


def hand_out(db: Database, at_ms: int, attempt: int, nonce: str) -> None:
    """receive_messages of MSG: its attempt starts."""
    with tx(db) as conn:
        ledger.hand_out(conn, [(MSG, attempt, at_ms + 30_000, f"{nonce}.{MSG}")])
        ledger.start_attempts(conn, [("j1", NOW_MS, attempt)], started_at_ms=at_ms)
        ledger.set_runs(conn, [run(status=RunStatus.DELIVERED, attempt=attempt)])


def nack(db: Database, at_ms: int, attempt: int, *, is_last: bool) -> None:
    """nack_messages of MSG with error "boom": a retry per the message's policy, or dead."""
    with tx(db) as conn:
        key = ("j1", NOW_MS, attempt)
        ledger.finish_attempts(conn, [key], finished_at_ms=at_ms, outcome="failed", error="boom")
        if not is_last:
            delay = retry_delay_ms(stored_retry(RETRY), attempt, MSG)
            ledger.schedule_retry(conn, MSG, at_ms + delay)
            ledger.set_runs(conn, [run(status=RunStatus.RETRYING, error="boom")])
            return
        dead = ledger.DeadLetter(
            id=MSG,
            tenant_id="t1",
            job_id="j1",
            scheduled_at_ms=NOW_MS,
            attempts=attempt,
            error="boom",
            target=ledger.queue_target("q"),
            payload='{"n":1}',
            created_at_ms=at_ms,
        )
        ledger.bury(conn, MSG, dead, run(status=RunStatus.DEAD, error="boom", finished_at_ms=at_ms))


def redrive(db: Database, at_ms: int, delivery: ledger.Delivery, dead_id: str) -> None:
    with tx(db) as conn:
        ledger.enqueue(conn, [delivery], is_redrive=isinstance(delivery, ledger.QueueDelivery))
        ledger.unbury(conn, dead_id)
        ledger.set_runs(conn, [run(status=RunStatus.RETRYING, finished_at_ms=None)])


def one_more(attempts: int) -> str:
    return json.dumps({"max_attempts": attempts + 1} | ONE_MORE)


def test_the_queue_paths_through_the_ledger(apply: Applier, db: Database, twin: Database) -> None:
    twin_apply = Applier(StateMachine(twin))
    for applier in (apply, twin_apply):
        job_with(applier)
        claim(applier)
    box = {"tenant_id": "t1", "queue": "q"}

    receive(apply, NOW_MS, "r1")
    hand_out(twin, NOW_MS, 1, "r1")
    assert tables(twin) == tables(db)
    apply("nack_messages", box | {"receipts": [f"r1.{MSG}"], "error": "boom"}, ts_ms=NOW_MS + 1)
    nack(twin, NOW_MS + 1, 1, is_last=False)
    assert tables(twin) == tables(db)
    receive(apply, NOW_MS + 20_000, "r2")
    hand_out(twin, NOW_MS + 20_000, 2, "r2")
    apply("nack_messages", box | {"receipts": [f"r2.{MSG}"], "error": "boom"}, ts_ms=NOW_MS + 2)
    nack(twin, NOW_MS + 2, 2, is_last=True)
    assert tables(twin) == tables(db)

    apply("redrive_deadletter", {"tenant_id": "t1", "id": MSG}, ts_ms=NOW_MS + 3)
    requeued = ledger.QueueDelivery(
        msg_id=MSG,
        tenant_id="t1",
        queue="q",
        job_id="j1",
        scheduled_at_ms=NOW_MS,
        attempt=2,
        visible_at_ms=NOW_MS + 3,
        payload='{"n":1}',
        retry=one_more(2),
    )
    redrive(twin, NOW_MS + 3, requeued, MSG)
    assert tables(twin) == tables(db)

    receive(apply, NOW_MS + 4, "r3")
    hand_out(twin, NOW_MS + 4, 3, "r3")
    apply("ack_messages", box | {"receipts": [f"r3.{MSG}"]}, ts_ms=NOW_MS + 5)
    with tx(twin) as conn:
        ledger.remove(conn, [MSG])
        key = ("j1", NOW_MS, 3)
        ledger.finish_attempts(conn, [key], finished_at_ms=NOW_MS + 5, outcome="succeeded")
        ledger.set_runs(conn, [run(status=RunStatus.SUCCEEDED, finished_at_ms=NOW_MS + 5)])
    assert tables(twin) == tables(db)
    assert tables(db)["runs"][0][4] == "succeeded"


def report(twin: Database, seq: int, attempt: int, verdict: str, **extra: Any) -> None:
    """record_callbacks of one outcome, as tests.unit.test_store_delivery.record proposes it."""
    with tx(twin) as conn:
        reported = ledger.Reported(seq=seq, attempt=attempt, job_id="j1", scheduled_at_ms=NOW_MS)
        [row] = ledger.reported_rows(conn, [reported])
        if row is None:
            return  # stale
        error = None if verdict == "succeeded" else "http 503"
        whole = ledger.Attempt(
            job_id="j1",
            scheduled_at_ms=NOW_MS,
            attempt=attempt,
            started_at_ms=NOW_MS + 100,
            finished_at_ms=NOW_MS + 200,
            outcome="succeeded" if verdict == "succeeded" else "failed",
            error=error,
        )
        ledger.record_attempts(conn, [whole])
        done = {"attempt": attempt, "error": error}
        if verdict == "succeeded":
            ledger.remove(conn, [seq])
            changed = run(status=RunStatus.SUCCEEDED, finished_at_ms=NOW_MS + 200, **done)
            ledger.set_runs(conn, [changed])
        elif verdict == "retry":
            ledger.schedule_retry(conn, seq, extra["retry_at_ms"])
            ledger.set_runs(conn, [run(status=RunStatus.RETRYING, finished_at_ms=None, **done)])
        else:
            dead = ledger.DeadLetter(
                id=delivery_id("j1", NOW_MS),
                tenant_id="t1",
                job_id="j1",
                scheduled_at_ms=NOW_MS,
                attempts=attempt,
                error=error,
                target=row.target,
                payload=row.payload,
                created_at_ms=NOW_MS,
            )
            gone = run(status=RunStatus.DEAD, finished_at_ms=NOW_MS + 200, **done)
            ledger.bury(conn, seq, dead, gone)


def test_the_http_paths_through_the_ledger(apply: Applier, db: Database, twin: Database) -> None:
    twin_apply = Applier(StateMachine(twin))
    for applier in (apply, twin_apply):
        job_with(applier, target=HTTP, retry=HTTP_RETRY)
        claim(applier, version=2, next_ms=None)

    assert record(apply, "retry")["retrying"] == 1
    report(twin, 1, 1, "retry", retry_at_ms=NOW_MS + 5_000)
    assert tables(twin) == tables(db)
    assert record(apply, "failed")["stale"] == 1  # attempt 1 again: the first outcome won
    report(twin, 1, 1, "failed")
    assert tables(twin) == tables(db)
    assert record(apply, "failed", attempt=2)["dead"] == 1
    report(twin, 1, 2, "failed")
    assert tables(twin) == tables(db)

    target = tables(db)["deadletters"][0][6]
    apply("redrive_deadletter", {"tenant_id": "t1", "id": MSG, "partition": 3}, ts_ms=NOW_MS + 7)
    again = ledger.OutboxDelivery(
        partition=3,
        tenant_id="t1",
        job_id="j1",
        scheduled_at_ms=NOW_MS,
        attempt=3,
        due_at_ms=NOW_MS + 7,
        target=target,
        payload='{"n":1}',
        retry=one_more(2),
    )
    redrive(twin, NOW_MS + 7, again, MSG)
    assert tables(twin) == tables(db)

    assert record(apply, "succeeded", seq=2, attempt=3)["succeeded"] == 1
    report(twin, 2, 3, "succeeded")
    assert tables(twin) == tables(db)
    assert tables(db)["runs"][0][4:6] == ("succeeded", 3)


def test_a_receive_after_the_visibility_timeout_through_the_ledger(
    apply: Applier, db: Database, twin: Database
) -> None:
    twin_apply = Applier(StateMachine(twin))
    for applier in (apply, twin_apply):
        job_with(applier)
        claim(applier)
    receive(apply, NOW_MS, "r1")
    hand_out(twin, NOW_MS, 1, "r1")
    later = NOW_MS + 31_000  # attempt 1 timed out: failed, retried, and handed out again at once
    receive(apply, later, "r2")
    with tx(twin) as conn:
        timed_out = "visibility timeout expired"
        key = ("j1", NOW_MS, 1)
        ledger.finish_attempts(
            conn, [key], finished_at_ms=later, outcome="timed_out", error=timed_out
        )
        delay = retry_delay_ms(stored_retry(RETRY), 1, MSG)
        ledger.schedule_retry(conn, MSG, later + delay)
        ledger.set_runs(conn, [run(status=RunStatus.RETRYING, error=timed_out)])
    hand_out(twin, later, 2, "r2")
    assert tables(twin) == tables(db)
    assert [row[5] for row in tables(db)["attempts"]] == ["timed_out", None]
