"""A run that ends succeeded has no error of its own (issue 13, point 6): the failures before
its success stay on their attempts, in the API's run object (queries.list_runs)."""

from __future__ import annotations

from typing import Any

from schedd.store import queries
from schedd.store.db import Database
from schedd.wire.jobs import RunView
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_delivery import claimed, record  # noqa: F401  (fixture)
from tests.unit.test_store_dispatch import claim, receive, setup

NACK = {"tenant_id": "t1", "queue": "q", "error": "boom"}


def the_run(db: Database) -> RunView:
    [run] = queries.list_runs(db.conn, "j1", before_ms=2**62, limit=10)
    return run


def errors(run: dict[str, Any]) -> list[tuple[str | None, str | None]]:
    return [(a.outcome, a.error) for a in run.attempts]


def ack(apply: Applier, receipt: str, ts_ms: int) -> None:
    body = {"tenant_id": "t1", "queue": "q", "receipts": [receipt]}
    assert apply("ack_messages", body, ts_ms=ts_ms)["acked"] == 1


def test_a_queue_run_nacked_then_acked_has_no_error(apply: Applier, db: Database) -> None:
    setup(apply)
    claim(apply)
    [first] = receive(apply, NOW_MS, "r1")
    apply("nack_messages", NACK | {"receipts": [first["receipt"]]}, ts_ms=NOW_MS + 1_000)
    assert the_run(db).error == "boom"  # retrying: the failure is still the run's news
    [again] = receive(apply, NOW_MS + 11_000, "r2")
    assert the_run(db).status == "delivered" and the_run(db).error is None
    ack(apply, again["receipt"], NOW_MS + 12_000)
    run = the_run(db)
    assert (run.status, run.attempt, run.error) == ("succeeded", 2, None)
    assert errors(run) == [("failed", "boom"), ("succeeded", None)]


def test_an_http_run_that_failed_then_succeeded_has_no_error(
    claimed: Applier,  # noqa: F811
    db: Database,
) -> None:
    record(claimed, "retry", error="http 500: boom")
    assert the_run(db).error == "http 500: boom"
    record(claimed, "succeeded", attempt=2)
    run = the_run(db)
    assert (run.status, run.attempt, run.error) == ("succeeded", 2, None)
    assert errors(run)[0][1] == "http 500: boom" and errors(run)[1] == ("succeeded", None)


def test_a_redriven_dead_letter_that_succeeds_has_no_error(apply: Applier, db: Database) -> None:
    setup(apply)
    claim(apply)
    [first] = receive(apply, NOW_MS, "r1")
    apply("nack_messages", NACK | {"receipts": [first["receipt"]]}, ts_ms=NOW_MS + 1_000)
    [second] = receive(apply, NOW_MS + 20_000, "r2")
    apply("nack_messages", NACK | {"receipts": [second["receipt"]]}, ts_ms=NOW_MS + 21_000)
    assert (the_run(db).status, the_run(db).error) == ("dead", "boom")
    [(dl_id,)] = db.conn.execute("SELECT id FROM deadletters").fetchall()
    redrive = {"tenant_id": "t1", "id": dl_id}
    assert apply("redrive_deadletter", redrive, ts_ms=NOW_MS + 22_000)["status"] == "ok"
    [third] = receive(apply, NOW_MS + 22_000, "r3")
    ack(apply, third["receipt"], NOW_MS + 23_000)
    run = the_run(db)
    assert (run.status, run.attempt, run.error) == ("succeeded", 3, None)
    assert errors(run) == [("failed", "boom"), ("failed", "boom"), ("succeeded", None)]
