"""Filtered job pages (store/job_search.py): each filter, their AND, and the bounded scan's
cursor, against rows written straight into a fresh store."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schedd.store import job_search
from schedd.store.db import Database
from schedd.store.job_search import JobFilter, search_jobs
from tests.conftest import NOW_MS

QUEUE = {"type": "queue", "name": "digest"}


def http(url: str) -> dict[str, Any]:
    return {"type": "http", "url": url, "method": "POST", "headers": {}, "timeout": "10s"}


def add_job(
    db: Database,
    n: int,
    *,
    target: dict[str, Any] = QUEUE,
    name: str | None = None,
    status: str = "active",
    next_run_at_ms: int | None = NOW_MS,
    tenant_id: str = "t1",
) -> str:
    job_id = f"job_{n:06d}"
    spec = {"name": name, "schedule": {"every": "5m"}, "target": target, "payload": None}
    db.conn.execute(
        "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, "
        "next_fire_at_ms, version, created_at_ms, updated_at_ms) VALUES (?, ?, 0, ?, ?, ?, ?, "
        "1, 0, 0)",
        (job_id, tenant_id, json.dumps(spec), status, next_run_at_ms, next_run_at_ms),
    )
    return job_id


def ids(db: Database, where: JobFilter, *, after: str = "", limit: int = 100) -> list[str]:
    jobs, _ = search_jobs(db.conn, "t1", where, after=after, limit=limit)
    return [job.job_id for job in jobs]


def walk(db: Database, where: JobFilter, **options: Any) -> list[tuple[list[str], str | None]]:
    """Every page of `where` (limit 5, at most 5 pages): (its job ids, its cursor)."""
    pages: list[tuple[list[str], str | None]] = []
    after: str | None = ""
    while after is not None and len(pages) < 5:
        jobs, after = search_jobs(db.conn, "t1", where, after=after, limit=5, **options)
        pages.append(([j.job_id for j in jobs], after))
    return pages


def test_target_type_and_queue_match_the_stored_target(db: Database) -> None:
    add_job(db, 1)
    add_job(db, 2, target={"type": "queue", "name": "other"})
    add_job(db, 3, target=http("https://a.example/x"))
    add_job(db, 4, target={"type": "nats", "connection": "n", "subject": "digest"})
    assert ids(db, JobFilter(target_type="queue")) == ["job_000001", "job_000002"]
    assert ids(db, JobFilter(target_type="nats")) == ["job_000004"]
    assert ids(db, JobFilter(queue="digest")) == ["job_000001"]
    assert ids(db, JobFilter(queue="Digest")) == []  # queue names are exact
    assert ids(db, JobFilter(target_type="http", queue="digest")) == []


def test_host_is_the_urls_host_whatever_its_case_port_or_credentials(db: Database) -> None:
    add_job(db, 1, target=http("https://Hooks.Example.com:8443/a?b=c"))
    add_job(db, 2, target=http("http://hooks.example.com/"))
    add_job(db, 3, target=http("https://hooks.example.com.evil.test/"))
    add_job(db, 4, target=http("https://[2001:db8::1]:8080/x"))
    add_job(db, 5, target={"type": "queue", "name": "hooks.example.com"})
    assert ids(db, JobFilter(host="hooks.example.com")) == ["job_000001", "job_000002"]
    assert ids(db, JobFilter(host="2001:db8::1")) == ["job_000004"]
    assert ids(db, JobFilter(host="example.com")) == []


def test_name_is_a_casefolded_substring_and_a_nameless_job_never_matches(db: Database) -> None:
    add_job(db, 1, name="Weekly DIGEST for Straße")
    add_job(db, 2, name="daily-digest")
    add_job(db, 3)
    assert ids(db, JobFilter(name="digest")) == ["job_000001", "job_000002"]
    assert ids(db, JobFilter(name="strasse")) == ["job_000001"]
    assert ids(db, JobFilter(name="weekly")) == ["job_000001"]


def test_next_run_bounds_are_half_open_and_a_job_without_a_next_run_matches_neither(
    db: Database,
) -> None:
    for n, run_ms in enumerate((NOW_MS - 1, NOW_MS, NOW_MS + 1, NOW_MS + 2, None)):
        add_job(db, n, next_run_at_ms=run_ms)
    assert ids(db, JobFilter(next_run_after_ms=NOW_MS)) == [
        "job_000001",
        "job_000002",
        "job_000003",
    ]
    assert ids(db, JobFilter(next_run_before_ms=NOW_MS + 1)) == ["job_000000", "job_000001"]
    both = JobFilter(next_run_after_ms=NOW_MS, next_run_before_ms=NOW_MS + 2)
    assert ids(db, both) == ["job_000001", "job_000002"]


def test_filters_combine_with_and_with_status_and_stay_within_the_tenant(db: Database) -> None:
    add_job(db, 1, target=http("https://a.example/"), name="nightly", status="paused")
    add_job(db, 2, target=http("https://a.example/"), name="nightly")
    add_job(db, 3, target=http("https://b.example/"), name="nightly", status="paused")
    add_job(db, 4, target=http("https://a.example/"), name="nightly", tenant_id="t2")
    where = JobFilter(status="paused", host="a.example", name="night")
    assert ids(db, where) == ["job_000001"]
    assert ids(db, JobFilter(host="a.example")) == ["job_000001", "job_000002"]


def test_a_full_page_continues_after_its_last_job(db: Database) -> None:
    for n in range(5):
        add_job(db, n)
    jobs, after = search_jobs(db.conn, "t1", JobFilter(queue="digest"), after="", limit=2)
    assert [j.job_id for j in jobs] == ["job_000000", "job_000001"] and after == "job_000001"
    assert jobs[0].target == QUEUE and jobs[0].status == "active"


def test_a_page_examines_at_most_scan_rows_and_continues_after_the_last_one(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_search, "SCAN_ROWS", 10)
    for n in range(25):
        add_job(db, n, name="needle" if n == 22 else None)
    assert walk(db, JobFilter(name="needle")) == [
        ([], "job_000009"),
        ([], "job_000019"),
        (["job_000022"], None),
    ]


def test_a_scan_that_reaches_the_last_job_exactly_has_no_cursor(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_search, "SCAN_ROWS", 10)
    for n in range(10):
        add_job(db, n)
    assert search_jobs(db.conn, "t1", JobFilter(queue="none"), after="", limit=5) == ([], None)


def test_status_alone_is_not_a_scanning_filter() -> None:
    assert not JobFilter(status="active").is_scanning
    assert JobFilter(next_run_before_ms=0).is_scanning


def test_a_page_fills_in_job_order_and_continues_after_its_last_job(db: Database) -> None:
    for n in range(12):
        add_job(db, n, name="needle" if n in (1, 5, 8, 11) else None)
    jobs, after = search_jobs(db.conn, "t1", JobFilter(name="needle"), after="", limit=3)
    assert [j.job_id for j in jobs] == ["job_000001", "job_000005", "job_000008"]
    assert after == "job_000008"
    jobs, after = search_jobs(db.conn, "t1", JobFilter(name="needle"), after=after, limit=3)
    assert [j.job_id for j in jobs] == ["job_000011"] and after is None


def walk_all(db: Database, where: JobFilter, **options: Any) -> list[tuple[list[str], str | None]]:
    """Every page of `where` (limit 5) to the end."""
    pages: list[tuple[list[str], str | None]] = []
    after: str | None = ""
    while after is not None:
        jobs, next_after = search_jobs(db.conn, "t1", where, after=after, limit=5, **options)
        assert next_after is None or next_after > after  # every page moves on
        pages.append(([j.job_id for j in jobs], next_after))
        after = next_after
    return pages


def big_jobs(db: Database, count: int, *, payload_bytes: int, needles: set[int]) -> None:
    payload = {"blob": "x" * payload_bytes}
    for n in range(count):
        spec = {"name": "needle" if n in needles else None, "schedule": {"every": "5m"}}
        spec |= {"target": QUEUE, "payload": payload}
        db.conn.execute(
            "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, "
            "next_fire_at_ms, version, created_at_ms, updated_at_ms) "
            "VALUES (?, 't1', 0, ?, 'active', 0, 0, 1, 0, 0)",
            (f"job_{n:06d}", json.dumps(spec)),
        )


def test_a_spent_time_budget_stops_the_scan_inside_the_query_and_the_scan_goes_on(
    db: Database,
) -> None:
    # 300 jobs of 64 KiB: the budget is checked while the query parses them, not only after
    # a chunk of 250 (the old design examined 250 whatever the time)
    big_jobs(db, 300, payload_bytes=65_536, needles={2, 150, 299})
    jobs, after = search_jobs(
        db.conn, "t1", JobFilter(name="needle"), after="", limit=5, budget_s=0
    )
    assert after is not None and after < "job_000020", after  # a few jobs, at least one
    assert [j.job_id for j in jobs] == (["job_000002"] if after >= "job_000002" else [])
    pages = walk_all(db, JobFilter(name="needle"), budget_s=0)
    shown = [job_id for ids_, _ in pages for job_id in ids_]
    assert shown == ["job_000002", "job_000150", "job_000299"]  # none skipped, none twice
    assert pages[-1][1] is None and len(pages) > 15
    # the connection is clean again: a long query on it is not interrupted
    (total,) = db.conn.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) "
        "SELECT count(*) FROM n"
    ).fetchone()
    assert total == 200_000


def test_a_budget_cut_between_matches_shows_each_match_once(db: Database) -> None:
    for n in range(40):
        add_job(db, n, name="needle" if n % 3 == 0 else None)
    pages = walk_all(db, JobFilter(name="needle"), budget_s=0)
    shown = [job_id for ids_, _ in pages for job_id in ids_]
    assert shown == [f"job_{n:06d}" for n in range(0, 40, 3)]
