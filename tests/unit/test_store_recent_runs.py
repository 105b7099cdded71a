"""What a job's newest runs say (store/recent_runs.py, issue 31): the job object's
last_success_at, last_failure_at and consecutive_failures, and the `failing` filter, read from
run rows and batch slots alike, bounded to the newest RECENT_RUNS runs.

A Python oracle states the definitions; the SQL must agree with it for any mix of runs."""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedd.store import queries
from schedd.store.db import Database
from schedd.store.job_search import JobFilter, search_jobs
from schedd.store.recent_runs import FAILING, failing_sql
from schedd.timeformat import format_instant
from schedd.wire.jobs import RECENT_RUNS, JobView
from tests.conftest import NOW_MS
from tests.unit.test_store_batches import Store, both, nacked_twice_redriven_acked
from tests.unit.test_store_dispatch import spec

SPEC = json.dumps(spec({"every": "1m"}))
MIN = 60_000
ROW_STATUSES = ("dispatched", "delivered", "retrying", "succeeded", "dead", "skipped", "failed")
SLOT_STATES = "rhds"  # ready, held, done, spilled (a spilled slot's run is a row)


@dataclass(frozen=True, slots=True)
class Run:
    """One run of job j: a run row, or a batch slot (`status` is then r, h, d or s)."""

    at_ms: int
    is_slot: bool
    status: str
    finished_ms: int


def add_job(db: Database, job_id: str = "j", tenant_id: str = "t") -> None:
    db.conn.execute(
        "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, "
        "next_fire_at_ms, version, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, 0, ?, 'active', NULL, NULL, 1, ?, ?)",
        (job_id, tenant_id, SPEC, NOW_MS, NOW_MS),
    )


def add_runs(db: Database, runs: list[Run], job_id: str = "j", tenant_id: str = "t") -> None:
    """Rows as apply leaves them: run rows; the slots in one batch (acked at finished_ms); a
    spilled slot's run also as a row (the spill writes one)."""
    rows = [r for r in runs if not r.is_slot]
    db.conn.executemany(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, 1, ?, ?, NULL)",
        [(job_id, r.at_ms, tenant_id, r.at_ms, r.status, r.at_ms, _finished(r)) for r in rows],
    )
    slots = [r for r in runs if r.is_slot]
    if not slots:
        return
    acked = [r.finished_ms if r.status == "d" else 0 for r in slots]
    times = array("q", [NOW_MS] * len(slots) * 2 + acked)
    batch = db.conn.execute(
        "INSERT INTO batches (tenant_id, queue, claimed_at_ms, runs, slots, times, open, "
        "ready_at_ms, finished_at_ms) VALUES (?, 'q', ?, x'90', ?, ?, 0, NULL, NULL)",
        (tenant_id, NOW_MS, "".join(r.status for r in slots).encode(), times.tobytes()),
    ).lastrowid
    db.conn.executemany(
        "INSERT INTO run_keys VALUES (?, ?, ?, ?, ?)",
        [(job_id, r.at_ms, batch, k, r.at_ms) for k, r in enumerate(slots)],
    )
    spilled = [r for r in slots if r.status == "s"]
    db.conn.executemany(
        "INSERT INTO runs VALUES (?, ?, ?, ?, 'dead', 2, ?, ?, 'nacked')",
        [(job_id, r.at_ms, tenant_id, r.at_ms, r.at_ms, r.finished_ms) for r in spilled],
    )


def _finished(run: Run) -> int | None:
    return run.finished_ms if run.status in ("succeeded", "dead", "failed", "skipped") else None


def expected(runs: list[Run]) -> tuple[str | None, str | None, int]:
    """The oracle: the newest RECENT_RUNS runs (a spilled slot is a dead run row); the newest
    success's finish, the newest death's, and the deaths scheduled after the newest success."""
    seen = []
    for r in runs:
        if r.is_slot and r.status == "s":
            seen.append((r.at_ms, "dead", r.finished_ms))
        elif r.is_slot:
            seen.append((r.at_ms, "succeeded" if r.status == "d" else "", r.finished_ms))
        else:
            seen.append((r.at_ms, r.status, r.finished_ms))
    newest = sorted(seen, reverse=True)[:RECENT_RUNS]
    successes = [(at, fin) for at, status, fin in newest if status == "succeeded"]
    deaths = [(at, fin) for at, status, fin in newest if status in ("dead", "failed")]
    since = successes[0][0] if successes else -1
    return (
        format_instant(successes[0][1]) if successes else None,
        format_instant(deaths[0][1]) if deaths else None,
        sum(1 for at, _ in deaths if at > since),
    )


def shown(db: Database, job_id: str = "j") -> tuple[str | None, str | None, int]:
    job = queries.get_job(db.conn, "t", job_id)
    assert job is not None
    return job.last_success_at, job.last_failure_at, job.consecutive_failures


def is_failing(db: Database, job_id: str = "j") -> bool:
    row = db.conn.execute(f"SELECT ({failing_sql(':job')})", {"job": job_id}).fetchone()
    return bool(row[0])


def run(k: int, status: str, *, is_slot: bool = False) -> Run:
    """The k-th run of a minutely job (k = 0 the oldest), finished 5 s after its time."""
    return Run(NOW_MS + k * MIN, is_slot, status, NOW_MS + k * MIN + 5_000)


def test_a_job_without_runs_shows_nothing_and_is_not_failing(db: Database) -> None:
    add_job(db)
    assert shown(db) == (None, None, 0)
    assert not is_failing(db)


def test_deaths_after_the_last_success_are_counted_and_times_are_when_they_ended(
    db: Database,
) -> None:
    add_job(db)
    runs = [run(k, "succeeded") for k in range(10)] + [run(k, "dead") for k in (10, 11, 12)]
    add_runs(db, runs)
    assert shown(db) == (
        format_instant(runs[9].finished_ms),
        format_instant(runs[12].finished_ms),
        3,
    )
    assert is_failing(db)


def test_runs_in_flight_retrying_or_skipped_count_as_neither(db: Database) -> None:
    add_job(db)
    statuses = ["succeeded", "dead", "skipped", "retrying", "dead", "dispatched", "delivered"]
    add_runs(db, [run(k, status) for k, status in enumerate(statuses)])
    assert shown(db)[2] == 2
    assert is_failing(db)


def test_a_success_after_the_deaths_ends_the_count(db: Database) -> None:
    add_job(db)
    runs = [run(0, "dead"), run(1, "dead"), run(2, "succeeded"), run(3, "retrying")]
    add_runs(db, runs)
    assert shown(db) == (
        format_instant(runs[2].finished_ms),
        format_instant(runs[1].finished_ms),
        0,
    )
    assert not is_failing(db)


def test_only_the_newest_runs_are_read_so_the_count_stops_at_the_bound(db: Database) -> None:
    add_job(db)
    add_runs(db, [run(0, "succeeded")] + [run(k, "dead") for k in range(1, RECENT_RUNS + 6)])
    assert shown(db)[0] is None  # the success is older than the newest RECENT_RUNS runs
    assert shown(db)[2] == RECENT_RUNS


def test_a_success_older_than_the_newest_runs_in_flight_reads_as_none(db: Database) -> None:
    add_job(db)
    add_runs(db, [run(0, "succeeded")] + [run(k, "dispatched") for k in range(1, RECENT_RUNS + 1)])
    assert shown(db) == (None, None, 0)


def test_batch_runs_merge_with_run_rows_and_a_spilled_slot_counts_once(db: Database) -> None:
    add_job(db)
    runs = [
        run(0, "succeeded"),
        run(1, "d", is_slot=True),
        run(2, "dead"),
        run(3, "s", is_slot=True),  # spilled, then died: its run row says so
        run(4, "h", is_slot=True),
    ]
    add_runs(db, runs)
    assert shown(db) == (
        format_instant(runs[1].finished_ms),
        format_instant(runs[3].finished_ms),
        2,
    )
    add_runs(db, [run(5, "d", is_slot=True)])  # a newer batch: acked
    assert shown(db) == (format_instant(NOW_MS + 5 * MIN + 5_000), expected(runs)[1], 0)


@st.composite
def histories(draw: st.DrawFn) -> list[Run]:
    """Up to 80 runs of one job, each a row or a slot, with any status and finish order."""
    count = draw(st.integers(0, 80))
    runs = []
    for k in range(count):
        is_slot = draw(st.booleans())
        status = draw(st.sampled_from(SLOT_STATES if is_slot else ROW_STATUSES))
        finished = NOW_MS + draw(st.integers(0, 200)) * MIN  # finishes in any order
        runs.append(Run(NOW_MS + k * MIN, is_slot, status, finished))
    return runs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=histories())
def test_the_sql_agrees_with_the_definition_for_any_history(
    tmp_path_factory: Any, runs: list[Run]
) -> None:
    db = Database(Path(tmp_path_factory.mktemp("recent")) / "state.db")
    try:
        add_job(db)
        add_runs(db, runs)
        assert shown(db) == expected(runs)
        assert is_failing(db) == (expected(runs)[2] > 0)
    finally:
        db.conn.close()


def test_the_failing_filter_keeps_failing_jobs_and_combines_with_others(db: Database) -> None:
    for job_id, statuses in {
        "j1": ["succeeded", "dead"],
        "j2": ["dead", "succeeded"],
        "j3": [],
        "j4": ["dead"],
    }.items():
        add_job(db, job_id)
        add_runs(db, [run(k, s) for k, s in enumerate(statuses)], job_id)
    add_job(db, "j5", tenant_id="other")
    add_runs(db, [run(0, "dead")], "j5", tenant_id="other")
    found, cursor = search_jobs(db.conn, "t", JobFilter(is_failing=True), after="", limit=10)
    assert [job.job_id for job in found] == ["j1", "j4"] and cursor is None
    assert [job.consecutive_failures for job in found] == [1, 1]
    named = JobFilter(is_failing=True, target_type="http")  # the spec's target is a queue
    assert search_jobs(db.conn, "t", named, after="", limit=10) == ([], None)
    assert "CASE WHEN" in named.conditions()[0] and FAILING in named.conditions()[0]


def test_per_run_and_batch_forms_show_the_same_results(tmp_path: Path) -> None:
    """The same commands (claim, receive, nack twice: dead; redrive, receive, ack) read alike
    whether the run was claimed per run or into a batch."""

    def results(store: Store) -> list[Any]:
        seen = nacked_twice_redriven_acked(store)
        job = queries.get_job(store.db.conn, "t1", "j1")
        assert isinstance(job, JobView)
        return [seen, job.last_success_at, job.last_failure_at, job.consecutive_failures]

    *_, by_run, by_batch = both(tmp_path, results)
    assert by_run[1:] == by_batch[1:]
    assert by_run[1] is not None and by_run[3] == 0  # redriven, then acked: a success


def test_a_dead_run_shows_as_a_failure_in_either_form(tmp_path: Path) -> None:
    def results(store: Store) -> tuple[Any, ...]:
        store.receive(NOW_MS)
        store.settle("nack_messages", NOW_MS + 1, error="boom")
        store.receive(NOW_MS + 20_000)
        store.settle("nack_messages", NOW_MS + 20_001, error="boom")
        job = queries.get_job(store.db.conn, "t1", "j1")
        assert job is not None
        return job.last_success_at, job.last_failure_at, job.consecutive_failures

    *_, by_run, by_batch = both(tmp_path, lambda s: list(results(s)))
    assert by_run == by_batch == [None, format_instant(NOW_MS + 20_001), 1]
