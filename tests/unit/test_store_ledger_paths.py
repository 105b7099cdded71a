"""Each delivery path, driven by commands, leaves exactly these rows (every column of runs,
messages, outbox, attempts and dead letters): the queue's receive, nack (retry, dead), redrive
and ack; HTTP outcomes (retry, stale, dead), redrive and success; a visibility timeout.

The expected rows are the ones the apply handlers wrote before they moved onto the ledger
(issue 15 phase 2, taken from that code), so they pin what the ledger writes for each path:
stored text, JSON spacing, attempt numbers and which columns a change leaves alone.
"""

from __future__ import annotations

from typing import Any

from schedd.store.db import Database
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_delivery import HTTP, record
from tests.unit.test_store_delivery import RETRY as HTTP_RETRY
from tests.unit.test_store_dispatch import claim, receive
from tests.unit.test_store_ledger import job_with, tables

MSG = f"j1:{NOW_MS}"
BOX = {"tenant_id": "t1", "queue": "q"}
PAYLOAD = '{"n":1}'
RETRY = '{"max_attempts":2,"backoff":"fixed","initial_delay":"10s","max_delay":"10s"}'
ONE_MORE = '{"max_attempts": 3, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}'
TARGET = (
    '{"type":"http","url":"https://hooks.example.com/x","method":"POST","headers":{},'
    '"timeout":"10s"}'
)
Row = tuple[Any, ...]


def state(
    run: Row, *, messages: Row = (), outbox: Row = (), attempts: Row = (), dead: Row = ()
) -> dict[str, list[Row]]:
    """The five tables of one run: its row (from status on) and at most one of the others."""
    return {
        "runs": [("j1", NOW_MS, "t1", NOW_MS, run[0], run[1], NOW_MS, *run[2:])],
        "messages": [(MSG, "t1", "q", "j1", NOW_MS, *messages)] if messages else [],
        "outbox": [(outbox[0], 3, "t1", "j1", NOW_MS, *outbox[1:])] if outbox else [],
        "attempts": [("j1", NOW_MS, *a) for a in attempts],
        "deadletters": [(MSG, "t1", "j1", NOW_MS, *dead)] if dead else [],
    }


def nack(apply: Applier, nonce: str, at_ms: int) -> None:
    apply("nack_messages", BOX | {"receipts": [f"{nonce}.{MSG}"], "error": "boom"}, ts_ms=at_ms)


QUEUE_FAILED = (1, NOW_MS, NOW_MS + 1, "failed", "boom")
QUEUE_DEAD = (2, NOW_MS + 20_000, NOW_MS + 2, "failed", "boom")


def test_the_queue_paths_leave_these_rows(apply: Applier, db: Database) -> None:
    job_with(apply)
    claim(apply)
    receive(apply, NOW_MS, "r1")
    assert tables(db) == state(
        ("delivered", 1, None, None),
        messages=(1, NOW_MS + 30_000, f"r1.{MSG}", PAYLOAD, RETRY),
        attempts=[(1, NOW_MS, None, None, None)],
    )
    nack(apply, "r1", NOW_MS + 1)  # retried in the upper half of 10 s, keyed by the run
    assert tables(db) == state(
        ("retrying", 1, None, "boom"),
        messages=(1, NOW_MS + 8_197, None, PAYLOAD, RETRY),
        attempts=[QUEUE_FAILED],
    )
    receive(apply, NOW_MS + 20_000, "r2")
    nack(apply, "r2", NOW_MS + 2)
    queue_target = '{"type": "queue", "name": "q"}'  # with spaces, as written since v1
    assert tables(db) == state(
        ("dead", 2, NOW_MS + 2, "boom"),
        attempts=[QUEUE_FAILED, QUEUE_DEAD],
        dead=(2, "boom", queue_target, PAYLOAD, NOW_MS + 2),
    )
    apply("redrive_deadletter", {"tenant_id": "t1", "id": MSG}, ts_ms=NOW_MS + 3)
    assert tables(db) == state(
        ("retrying", 2, None, "boom"),
        messages=(2, NOW_MS + 3, None, PAYLOAD, ONE_MORE),
        attempts=[QUEUE_FAILED, QUEUE_DEAD],
    )
    receive(apply, NOW_MS + 4, "r3")
    apply("ack_messages", BOX | {"receipts": [f"r3.{MSG}"]}, ts_ms=NOW_MS + 5)
    assert tables(db) == state(  # the run keeps the last error it had
        ("succeeded", 3, NOW_MS + 5, "boom"),
        attempts=[QUEUE_FAILED, QUEUE_DEAD, (3, NOW_MS + 4, NOW_MS + 5, "succeeded", None)],
    )


def http_attempt(attempt: int, outcome: str = "failed") -> Row:
    return (
        attempt,
        NOW_MS + 100,
        NOW_MS + 200,
        outcome,
        None if outcome == "succeeded" else "http 503",
    )


def test_the_http_paths_leave_these_rows(apply: Applier, db: Database) -> None:
    job_with(apply, target=HTTP, retry=HTTP_RETRY)
    claim(apply, version=2, next_ms=None)
    retrying = state(
        ("retrying", 1, None, "http 503"),
        outbox=(1, 2, NOW_MS + 5_000, TARGET, PAYLOAD, RETRY),
        attempts=[http_attempt(1)],
    )
    assert record(apply, "retry")["retrying"] == 1
    assert tables(db) == retrying
    assert record(apply, "failed")["stale"] == 1  # attempt 1 again: the first outcome won
    assert tables(db) == retrying
    assert record(apply, "failed", attempt=2)["dead"] == 1
    assert tables(db) == state(
        ("dead", 2, NOW_MS + 200, "http 503"),
        attempts=[http_attempt(1), http_attempt(2)],
        dead=(2, "http 503", TARGET, PAYLOAD, NOW_MS),
    )
    apply("redrive_deadletter", {"tenant_id": "t1", "id": MSG, "partition": 3}, ts_ms=NOW_MS + 7)
    assert tables(db) == state(  # a new seq: an outcome of the old row can never match it
        ("retrying", 2, None, "http 503"),
        outbox=(2, 3, NOW_MS + 7, TARGET, PAYLOAD, ONE_MORE),
        attempts=[http_attempt(1), http_attempt(2)],
    )
    assert record(apply, "succeeded", seq=2, attempt=3)["succeeded"] == 1
    assert tables(db) == state(  # a pushed success clears the run's error
        ("succeeded", 3, NOW_MS + 200, None),
        attempts=[http_attempt(1), http_attempt(2), http_attempt(3, "succeeded")],
    )


def test_a_receive_after_the_visibility_timeout_leaves_these_rows(
    apply: Applier, db: Database
) -> None:
    job_with(apply)
    claim(apply)
    receive(apply, NOW_MS, "r1")
    later = NOW_MS + 31_000  # attempt 1 timed out: failed, retried, and handed out again at once
    receive(apply, later, "r2")
    timed_out = "visibility timeout expired"
    assert tables(db) == state(
        ("delivered", 2, None, timed_out),
        messages=(2, later + 30_000, f"r2.{MSG}", PAYLOAD, RETRY),
        attempts=[(1, NOW_MS, later, "timed_out", timed_out), (2, later, None, None, None)],
    )
