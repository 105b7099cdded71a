"""One-time jobs completed later (issue 29, log level 5: claim_batch with defer_completion).

Each test runs the same commands on two fresh stores: one claims with the job's completion in
the claim (level 4), the other defers it to a prune (store/ledger/completions.py). Whatever a
reader shows, and whatever a job command does, must be the same on both; and once the prune
has written the completions, the jobs rows are the same, column for column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedd.store.apply import retention
from schedd.store.job_search import JobFilter, search_jobs
from schedd.store.queries import get_job, list_jobs
from tests.conftest import NOW_MS
from tests.unit.test_store_batches import Store, add_job, claim, one_time
from tests.unit.test_store_retention import RETENTION, prune

JOBS = ("j1", "j2", "j3")


def prune_retention() -> dict[str, int]:
    return RETENTION.as_ms()


SAME_STATE = ("jobs", "tenants", "due", "run_keys", "batches")


class Pair:
    """The two stores: `now` completes jobs in the claim, `later` leaves it to a prune."""

    def __init__(self, tmp_path: Path) -> None:
        self.now = Store(tmp_path / "now.db")
        self.later = Store(tmp_path / "later.db")
        for store, defer in ((self.now, False), (self.later, True)):
            one_time(store.apply)  # j1, one-time, queue q
            for job_id in JOBS[1:]:
                add_job(store.apply, job_id)
            _claim(store, ("j1", "j2"), defer=defer)  # j3 stays active: not due yet

    def both(self, type_: str, body: dict[str, Any], ts_ms: int) -> dict[str, Any]:
        first = self.now.apply(type_, body, ts_ms=ts_ms)
        assert self.later.apply(type_, body, ts_ms=ts_ms) == first
        return first

    def reads(self, store: Store) -> list[Any]:
        conn = store.db.conn
        seen: list[Any] = [get_job(conn, "t1", job_id) for job_id in JOBS]
        for status in (None, "active", "completed", "paused", "cancelled"):
            seen.append(list_jobs(conn, "t1", status=status, after="", limit=10))
            seen.append(list_jobs(conn, "t1", status=status, after="j1", limit=1))
            found = search_jobs(conn, "t1", JobFilter(status=status, queue="q"), after="", limit=10)
            seen.append(found)
        upcoming = JobFilter(next_run_after_ms=0, next_run_before_ms=2**62)
        seen.append(search_jobs(conn, "t1", upcoming, after="", limit=10))
        return seen

    def rows(self, store: Store) -> dict[str, list[tuple[Any, ...]]]:
        return {table: store.rows(table) for table in SAME_STATE}


def _claim(store: Store, jobs: tuple[str, ...], *, defer: bool) -> None:
    if not defer:
        claim(store.apply, "claim_batch", jobs=jobs)
        return
    result = claim_deferring(store, jobs)
    assert result["claimed"] == len(jobs), result


def claim_deferring(store: Store, jobs: tuple[str, ...]) -> dict[str, Any]:
    from schedd.store.commands import ClaimRow
    from tests.unit.test_store_dispatch import claim_item

    fields = ClaimRow.__struct_fields__[:-1]  # skip: absent
    claims = [[(claim_item(next_ms=None) | {"job_id": j})[f] for f in fields] for j in jobs]
    body = {"node_id": "n1", "claims": claims, "defer_completion": True}
    return store.apply("claim_batch", body, ts_ms=NOW_MS)


def test_a_deferred_completion_reads_as_written_and_a_prune_writes_the_same_rows(
    tmp_path: Path,
) -> None:
    pair = Pair(tmp_path)
    later = pair.later.db.conn
    assert later.execute("SELECT COUNT(*) FROM completions").fetchone()[0] == 2
    # The rows differ (that is the point), what readers see does not.
    assert pair.later.rows("jobs") != pair.now.rows("jobs")
    assert [job.status for job in list_jobs(later, "t1", status=None, after="", limit=9)] == [
        "completed",
        "completed",
        "active",
    ]
    assert pair.reads(pair.later) == pair.reads(pair.now)
    assert pair.later.rows("tenants") == pair.now.rows("tenants")  # live_jobs left at the claim

    result = prune(pair.later.apply, NOW_MS + 1_000)
    assert result["completed"] == 2
    assert "completed" not in prune(pair.now.apply, NOW_MS + 1_000)  # nothing was pending
    assert pair.rows(pair.later) == pair.rows(pair.now)
    assert later.execute("SELECT COUNT(*) FROM completions").fetchone()[0] == 0
    assert pair.reads(pair.later) == pair.reads(pair.now)


@pytest.mark.parametrize(
    ("type_", "extra"),
    [
        ("cancel_job", {}),
        ("pause_job", {}),
        ("resume_job", {"expected_version": 1, "next_run_at_ms": NOW_MS, "next_fire_at_ms": 1}),
        ("trigger_job", {"scheduled_at_ms": NOW_MS + 5}),
        (
            "update_job",
            {
                "expected_version": 1,
                "spec": {"name": "x"},
                "next_run_at_ms": NOW_MS + 9,
                "next_fire_at_ms": NOW_MS + 9,
                "fields": ["name"],
            },
        ),
    ],
)
def test_a_job_command_meets_a_pending_completion_as_if_it_were_written(
    tmp_path: Path, type_: str, extra: dict[str, Any]
) -> None:
    pair = Pair(tmp_path)
    result = pair.both(type_, {"tenant_id": "t1", "job_id": "j1"} | extra, NOW_MS + 10)
    assert result["status"] in {"ok", "rejected"}
    j1 = "SELECT * FROM jobs WHERE job_id = 'j1'"
    assert pair.later.db.conn.execute(j1).fetchall() == pair.now.db.conn.execute(j1).fetchall()
    assert pair.reads(pair.later) == pair.reads(pair.now)  # j2's completion is still pending


def test_another_tenants_command_leaves_a_pending_completion_alone(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    body = {"tenant_id": "t2", "job_id": "j1"}
    assert pair.both("cancel_job", body, NOW_MS + 10)["code"] == "job_not_found"
    pending = pair.later.db.conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    assert pending == 2


def test_a_prune_completes_its_share_and_then_says_it_is_not_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = Pair(tmp_path)
    monkeypatch.setattr(retention, "MAX_COMPLETIONS_PER_PRUNE", 1)
    first = prune(pair.later.apply, NOW_MS + 1_000)
    assert (first["completed"], first["done"]) == (1, False)
    second = prune(pair.later.apply, NOW_MS + 1_001)
    assert second["completed"] == 1
    third = prune(pair.later.apply, NOW_MS + 1_002)
    assert "completed" not in third and third["done"]
    statuses = [get_job(pair.later.db.conn, "t1", j).status for j in JOBS]  # type: ignore[union-attr]
    assert statuses == ["completed", "completed", "active"]


def test_a_prune_told_to_write_no_completions_writes_none_and_can_be_done(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    body = {"retention_ms": prune_retention(), "after_tenant": "", "max_completions": 0}
    result = pair.later.apply("prune", body, ts_ms=NOW_MS + 1_000)
    assert "completed" not in result and result["done"]
    assert pair.later.db.conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0] == 2


def test_a_batch_pruned_before_its_completions_were_written_writes_them_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = Pair(tmp_path)
    monkeypatch.setattr(retention, "MAX_COMPLETIONS_PER_PRUNE", 0)  # the sweep's share spent
    for store in (pair.now, pair.later):
        store.receive(NOW_MS)
        assert store.settle("ack_messages", NOW_MS + 1)["acked"] == 2
    # Past the runs' retention: the finished batch goes, with its key rows.
    prune(pair.later.apply, NOW_MS + 3 * 86_400_000)
    prune(pair.now.apply, NOW_MS + 3 * 86_400_000)
    assert pair.later.rows("batches") == [] == pair.now.rows("batches")
    assert pair.later.db.conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0] == 0
    assert pair.rows(pair.later) == pair.rows(pair.now)
