"""What a job's moved runs say (store/moved_runs.py, log level 14): once move_history (with
`summarize`) took a job's finished runs out of the live tables into segments, and the segments
closed, its last success, last failure and failure streak, the `failing` filter, the overdue
scanner and its failure policy read what they read before the move."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from schedd.dispatch.overdue import overdue_since
from schedd.retention import Retention
from schedd.store import moved_runs, queries, segments
from schedd.store.db import Database
from schedd.store.job_search import JobFilter, search_jobs
from schedd.store.schema import LATER_TABLES, REPLICATED_TABLES
from schedd.wire.jobs import JobView
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_batches import BOX, add_job, one_time
from tests.unit.test_store_batches import claim as claim_form
from tests.unit.test_store_dispatch import claim, receive, setup

SEC = 1_000
HOUR = 3_600_000
DAY = 24 * HOUR
RETENTION = Retention(runs=7 * DAY, audit=30 * DAY, deadletters=14 * DAY, messages=HOUR)
ONE_TRY = {"max_attempts": 1, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}
POLICY = {"alert_url": "https://alerts.example/hook", "after": 3, "pause": True}


def hourly(apply: Applier, **spec_fields: Any) -> None:
    """Job j1, every hour from NOW_MS, one attempt a run; the lease held for days."""
    setup(apply, schedule={"every": "1h"}, retry=ONE_TRY, **spec_fields)
    moves = [{"partition": 3, "node_id": "n1", "epoch": 1}]
    assert apply("assign_leases", {"ttl_ms": 30 * DAY, "moves": moves})["moved"] == 1


def run(apply: Applier, k: int, *, ok: bool) -> None:
    """The k-th hourly run claimed at its time, received, and acked or nacked (dead) a second
    later, with the error `e<k>`."""
    at = NOW_MS + k * HOUR
    claimed = claim(apply, epoch=2, run_ms=at, next_ms=at + HOUR, version=k + 1, ts_ms=at)
    assert claimed["claimed"] == 1, claimed
    [message] = receive(apply, at, f"r{k}")
    verb = "ack_messages" if ok else "nack_messages"
    body = {"tenant_id": "t1", "queue": "q", "receipts": [message["receipt"]], "error": f"e{k}"}
    assert apply(verb, body, ts_ms=at + SEC)["status"] == "ok"


def move_and_close(apply: Applier, db: Database, ts_ms: int, *, summarize: bool = True) -> None:
    """Every run that ended before ts_ms's hour moved, and every segment whose hour (and grace)
    is over closed."""
    body: dict[str, Any] = {
        "retention_ms": RETENTION.as_ms(),
        "after_tenant": "",
        "max_rows": 1_000,
    }
    if summarize:
        body["summarize"] = True
    result = apply("move_history", body, ts_ms=ts_ms)
    assert result["status"] == "ok" and result["done"], result
    open_ = db.conn.execute("SELECT name, period_start_ms FROM segments WHERE state = 'open'")
    for name, period in open_.fetchall():
        if period + HOUR + segments.CLOSE_GRACE_MS <= ts_ms:
            assert apply("close_segment", {"name": name}, ts_ms=ts_ms)["status"] == "ok"


def live_runs(db: Database) -> int:
    return int(db.conn.execute("SELECT count(*) FROM runs").fetchone()[0])


def job(db: Database, job_id: str = "j1") -> JobView:
    found = queries.get_job(db.conn, "t1", job_id)
    assert found is not None
    return found


def results(view: JobView) -> tuple[str | None, str | None, int]:
    return view.last_success_at, view.last_failure_at, view.consecutive_failures


def failing(db: Database) -> list[str]:
    jobs, _ = search_jobs(db.conn, "t1", JobFilter(is_failing=True), after="", limit=100)
    return [j.job_id for j in jobs]


def test_job_results_and_failing_read_the_same_after_the_runs_moved(
    apply: Applier, db: Database
) -> None:
    hourly(apply)
    run(apply, 0, ok=True)
    run(apply, 1, ok=False)
    run(apply, 2, ok=False)
    before = results(job(db))
    assert before[2] == 2 and before[0] is not None and before[1] is not None
    assert failing(db) == ["j1"]
    move_and_close(apply, db, NOW_MS + 3 * HOUR)
    assert live_runs(db) == 0  # every run in a closed segment
    closed = db.conn.execute("SELECT count(*) FROM segments WHERE family = 'runs'").fetchone()
    assert closed == (3,)
    assert results(job(db)) == before
    assert failing(db) == ["j1"]
    # A live run dies: the streak goes on across the moved ones.
    run(apply, 3, ok=False)
    last_success, last_failure, streak = results(job(db))
    assert (last_success, streak) == (before[0], 3) and last_failure != before[1]
    # A live success ends it.
    run(apply, 4, ok=True)
    assert results(job(db))[2] == 0 and failing(db) == []


def test_a_level_13_move_writes_no_summary(apply: Applier, db: Database) -> None:
    """A journal of level 13 replays to its recorded digest: its moves write nothing new (and
    so the job's results go blank once its runs moved: the gap level 14 closes)."""
    hourly(apply)
    run(apply, 0, ok=True)
    move_and_close(apply, db, NOW_MS + 2 * HOUR, summarize=False)
    assert db.conn.execute("SELECT count(*) FROM moved_run_summaries").fetchone() == (0,)
    assert results(job(db)) == (None, None, 0)


def test_the_summary_table_is_replicated_and_counts_only_once_it_holds_a_row() -> None:
    """(A log that never wrote it digests as recorded: tests/unit/test_log_compat.py.)"""
    assert ("moved_run_summaries", "job_id") in REPLICATED_TABLES
    assert "moved_run_summaries" in LATER_TABLES


def test_no_overdue_mark_for_a_job_whose_last_success_moved(apply: Applier, db: Database) -> None:
    hourly(apply)
    for k in range(4):
        run(apply, k, ok=True)
    now = NOW_MS + 4 * HOUR + 30 * 60 * SEC  # the run at +4 h may still be on its way
    assert overdue_since(job(db), now) is None
    move_and_close(apply, db, NOW_MS + 5 * HOUR)
    assert live_runs(db) == 0
    assert job(db).last_success_at is not None
    assert overdue_since(job(db), now) is None
    # Blank, it would be: two hours after its creation had no success.
    assert overdue_since(msgspec.structs.replace(job(db), last_success_at=None), now) is not None


def _alerts(db: Database) -> list[dict[str, Any]]:
    return [json.loads(body) for (body,) in db.conn.execute("SELECT body FROM alerts")]


def test_a_failure_policy_counts_a_streak_across_moved_and_live_runs(
    apply: Applier, db: Database
) -> None:
    hourly(apply, on_failure=POLICY)
    run(apply, 0, ok=True)
    run(apply, 1, ok=False)
    run(apply, 2, ok=False)
    move_and_close(apply, db, NOW_MS + 3 * HOUR)
    assert live_runs(db) == 0 and _alerts(db) == []
    run(apply, 3, ok=False)  # the third dead run in a row, the first two moved
    [alert] = _alerts(db)
    assert alert["consecutive_failures"] == 3
    assert [r["error"] for r in alert["runs"]] == ["e3"]  # the live ones are listed
    assert db.conn.execute("SELECT status FROM jobs").fetchone() == ("paused",)


def test_one_alert_per_streak_when_its_runs_move_between_deaths(
    apply: Applier, db: Database
) -> None:
    hourly(apply, on_failure=POLICY | {"pause": False})
    for k in range(3):
        run(apply, k, ok=False)
    assert len(_alerts(db)) == 1
    move_and_close(apply, db, NOW_MS + 3 * HOUR)
    run(apply, 3, ok=False)  # the fourth: the streak goes on, no second alert
    assert len(_alerts(db)) == 1


def test_without_a_summary_a_closed_segment_hides_the_streak(apply: Applier, db: Database) -> None:
    """The regression a level-13 move leaves (the Pruner sends summarize once every member
    applies 14)."""
    hourly(apply, on_failure=POLICY)
    run(apply, 0, ok=True)
    run(apply, 1, ok=False)
    run(apply, 2, ok=False)
    move_and_close(apply, db, NOW_MS + 3 * HOUR, summarize=False)
    run(apply, 3, ok=False)
    assert _alerts(db) == []


def test_batch_runs_moved_are_successes_at_their_ack(apply: Applier, db: Database) -> None:
    one_time(apply)
    add_job(apply, "j2")
    claim_form(apply, "claim_batch", jobs=("j1", "j2"))
    body = BOX | {"max": 2, "visibility_ms": 30_000, "receipts": ["a", "b"]}
    receipts = [m["receipt"] for m in apply("receive_messages", body)["messages"]]
    apply("ack_messages", BOX | {"receipts": receipts[:1]}, ts_ms=NOW_MS + 1)
    apply("ack_messages", BOX | {"receipts": receipts[1:]}, ts_ms=NOW_MS + 2)
    before = [results(job(db, j)) for j in ("j1", "j2")]
    assert all(r[0] is not None for r in before)
    move_and_close(apply, db, NOW_MS + 2 * HOUR)
    assert db.conn.execute("SELECT count(*) FROM batches").fetchone() == (0,)
    assert [results(job(db, j)) for j in ("j1", "j2")] == before
    rows = db.conn.execute("SELECT * FROM moved_run_summaries ORDER BY job_id").fetchall()
    assert [(r[0], r[1], r[3], r[5]) for r in rows] == [
        ("j1", NOW_MS, None, 0),
        ("j2", NOW_MS, None, 0),
    ]


def test_merging_moves_keeps_the_newest_and_counts_deaths_after_the_success() -> None:
    first = moved_runs.Moved()
    for at, status in ((1, "succeeded"), (2, "dead"), (3, "dead")):
        first.add(status, at, at + 10)
    row = moved_runs.merged(None, "j", first)
    assert row == moved_runs.Summary("j", 1, 11, 3, 13, 2)
    later = moved_runs.Moved()
    later.add("dead", 4, 14)
    later.add("skipped", 5, 15)
    assert moved_runs.merged(row, "j", later) == moved_runs.Summary("j", 1, 11, 4, 14, 3)
    success = moved_runs.Moved()
    success.add("succeeded", 6, 16)
    success.add("dead", 7, 17)
    assert moved_runs.merged(row, "j", success) == moved_runs.Summary("j", 6, 16, 7, 17, 1)


def test_a_pruned_job_takes_its_summary_with_it(apply: Applier, db: Database) -> None:
    one_time(apply)
    claim(apply, next_ms=None)
    [message] = receive(apply, NOW_MS, "r1")
    body = {"tenant_id": "t1", "queue": "q", "receipts": [message["receipt"]]}
    assert apply("ack_messages", body, ts_ms=NOW_MS + SEC)["acked"] == 1
    move_and_close(apply, db, NOW_MS + 2 * HOUR)
    assert db.conn.execute("SELECT job_id FROM moved_run_summaries").fetchall() == [("j1",)]
    move_and_close(apply, db, NOW_MS + 8 * DAY)  # past the runs retention: the job goes
    assert db.conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    assert db.conn.execute("SELECT count(*) FROM moved_run_summaries").fetchone() == (0,)
