"""The store's reads for dispatch and the queue API (store/leases.py, store/dispatch_reads.py,
store/queue_reads.py), against rows written straight into a fresh store."""

from __future__ import annotations

import json

from schedd.store.db import Database
from schedd.store.dispatch_reads import (
    JOBS_PER_READ,
    DueRun,
    due_runs,
    has_run_in_flight,
    read_jobs,
    tenant_rates,
)
from schedd.store.leases import LEASE_MARGIN_MS, Lease, held_partitions, live_nodes, read_leases
from schedd.store.queue_reads import json_name, queue_summaries, visible_count
from schedd.store.views import QueueSummary
from schedd.stored_spec import SpecPlan
from tests.conftest import NOW_MS


def add_leases(db: Database, rows: list[tuple[int, str, int, int]]) -> None:
    db.conn.executemany(
        "INSERT INTO leases (partition, node_id, epoch, expires_at_ms) VALUES (?, ?, ?, ?)", rows
    )


def test_held_partitions_leave_out_leases_ending_within_the_margin(db: Database) -> None:
    add_leases(
        db,
        [
            (0, "n1", 4, NOW_MS + LEASE_MARGIN_MS + 1),  # usable
            (1, "n1", 5, NOW_MS + LEASE_MARGIN_MS),  # ends within the margin
            (2, "n1", 6, NOW_MS),  # expired
            (3, "n2", 7, NOW_MS + 10_000),  # another node's
        ],
    )
    assert held_partitions(db.conn, "n1", NOW_MS) == {0: 4}
    assert held_partitions(db.conn, "n1", NOW_MS, margin_ms=0) == {0: 4, 1: 5}
    assert held_partitions(db.conn, "n3", NOW_MS) == {}


def test_read_leases_and_their_validity(db: Database) -> None:
    add_leases(db, [(0, "n1", 1, NOW_MS + 1), (1, "n2", 2, NOW_MS)])
    leases = read_leases(db.conn)
    assert leases == {0: Lease(0, "n1", 1, NOW_MS + 1), 1: Lease(1, "n2", 2, NOW_MS)}
    assert [lease.is_valid(NOW_MS) for lease in leases.values()] == [True, False]


def test_live_nodes_heartbeated_within_the_ttl(db: Database) -> None:
    db.conn.executemany(
        "INSERT INTO nodes (node_id, api, raft, registered_at_ms, last_seen_ms) "
        "VALUES (?, 'a', ?, 0, ?)",
        [("n2", "r2", NOW_MS - 1_000), ("n1", "r1", NOW_MS - 4_999), ("n3", "r3", NOW_MS - 5_000)],
    )
    assert live_nodes(db.conn, NOW_MS, 5_000) == ["n1", "n2"]


def test_due_runs_of_one_partition_oldest_first_up_to_the_limit(db: Database) -> None:
    db.conn.executemany(
        "INSERT INTO due (partition, fire_at_ms, job_id, scheduled_at_ms, is_trigger) "
        "VALUES (?, ?, ?, ?, ?)",
        [(0, 300, "c", 300, 0), (0, 100, "a", 90, 1), (0, 200, "b", 200, 0), (1, 50, "x", 50, 0)],
    )
    assert due_runs(db.conn, 0, 300, 10) == [
        DueRun(100, 0, "a", 90, True),
        DueRun(200, 0, "b", 200, False),
        DueRun(300, 0, "c", 300, False),
    ]
    assert due_runs(db.conn, 0, 299, 1) == [DueRun(100, 0, "a", 90, True)]


def test_read_jobs_past_one_chunk_of_ids(db: Database) -> None:
    count = JOBS_PER_READ + 3
    db.conn.executemany(
        "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, version, "
        "created_at_ms, updated_at_ms) VALUES (?, 't1', 0, ?, 'active', ?, 2, 0, 0)",
        [(f"j{i:04}", json.dumps({"n": i, "window": f"{i}s"}), i) for i in range(count)],
    )
    jobs = read_jobs(db.conn, {f"j{i:04}" for i in range(count)} | {"missing"})
    assert len(jobs) == count
    last = jobs[f"j{count - 1:04}"]
    assert (last.tenant_id, last.plan, last.status, last.version) == (
        "t1",
        SpecPlan(window=f"{count - 1}s"),
        "active",
        2,
    )
    assert last.next_run_at_ms == count - 1


def test_read_jobs_decodes_each_spec_whether_or_not_it_equals_the_one_before(
    db: Database,
) -> None:
    windows = ["1s", "1s", "2s", "1s", "1s", "3s"]  # runs of equal specs and single ones
    db.conn.executemany(
        "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, version, "
        "created_at_ms, updated_at_ms) VALUES (?, 't1', 0, ?, 'active', 0, 1, 0, 0)",
        [(f"j{i}", json.dumps({"window": window})) for i, window in enumerate(windows)],
    )
    jobs = read_jobs(db.conn, {f"j{i}" for i in range(len(windows))})
    assert [jobs[f"j{i}"].plan for i in range(len(windows))] == [
        SpecPlan(window=window) for window in windows
    ]


def test_a_run_in_flight_is_dispatched_delivered_or_retrying(db: Database) -> None:
    for job_id, status in [
        ("a", "dispatched"),
        ("b", "delivered"),
        ("c", "retrying"),
        ("d", "succeeded"),
        ("d2", "skipped"),
    ]:
        db.conn.execute(
            "INSERT INTO runs (job_id, scheduled_at_ms, tenant_id, fire_at_ms, status, attempt) "
            "VALUES (?, 0, 't1', 0, ?, 1)",
            (job_id, status),
        )
    flights = {j: has_run_in_flight(db.conn, j) for j in ("a", "b", "c", "d", "d2", "none")}
    assert flights == {"a": True, "b": True, "c": True, "d": False, "d2": False, "none": False}


def test_tenant_rates(db: Database) -> None:
    db.conn.executemany(
        "INSERT INTO tenants (tenant_id, name, token_hash, signing_secret, max_active_jobs, "
        "dispatch_rate, allowed_hosts, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, 's', 1, ?, '[]', 0, 0)",
        [("t1", "one", "h1", 0), ("t2", "two", "h2", 25)],
    )
    assert tenant_rates(db.conn) == {"t1": 0, "t2": 25}


def add_message(
    db: Database,
    msg_id: str,
    queue: str,
    visible_at: int,
    receipt: str | None,
    scheduled_at: int = 0,
) -> None:
    db.conn.execute(
        "INSERT INTO messages (msg_id, tenant_id, queue, job_id, scheduled_at_ms, attempt, "
        "visible_at_ms, receipt, payload, retry) VALUES (?, 't1', ?, ?, ?, 1, ?, ?, 'null', '{}')",
        (msg_id, queue, msg_id, scheduled_at, visible_at, receipt),
    )


def test_queue_summaries_and_visible_counts(db: Database) -> None:
    add_message(db, "m1", "mail", NOW_MS, None, NOW_MS - 1_500)  # ready
    add_message(db, "m2", "mail", NOW_MS - 5, "r2", NOW_MS - 1_000)  # receipt expired: ready
    add_message(db, "m3", "mail", NOW_MS + 1, "r3", NOW_MS - 2_500)  # in flight: the oldest
    add_message(db, "m4", "mail", NOW_MS + 1, None, NOW_MS - 9_000)  # delayed: not counted
    add_message(db, "m5", "later", NOW_MS + 1, None, NOW_MS - 9_000)  # only delayed ones
    for dl_id, target in [("d1", {"type": "queue", "name": "gone"}), ("d2", {"type": "http"})]:
        db.conn.execute(
            "INSERT INTO deadletters (id, tenant_id, job_id, scheduled_at_ms, attempts, error, "
            "target, payload, created_at_ms) VALUES (?, 't1', ?, 0, 3, 'x', ?, 'null', 0)",
            (dl_id, dl_id, json.dumps(target)),
        )
    assert queue_summaries(db.conn, "t1", NOW_MS) == [
        QueueSummary(name="gone", dead=1),
        QueueSummary(name="later", delayed=1),
        QueueSummary(name="mail", ready=2, in_flight=1, delayed=1, oldest_age_s=2.5),
    ]
    assert queue_summaries(db.conn, "t2", NOW_MS) == []
    assert visible_count(db.conn, "t1", "mail", NOW_MS, 10) == 2
    assert visible_count(db.conn, "t1", "mail", NOW_MS, 1) == 1
    assert visible_count(db.conn, "t1", "mail", NOW_MS + 1, 10) == 4
    assert json_name('{"type": "http", "name": "x"}') is None
