"""backfill_job in the state machine: dedupe against runs, idempotent re-apply, pacing on the
tenant's lane, tenant isolation, fenced claims of the runs it adds, retention of its marks."""

from __future__ import annotations

from typing import Any

import pytest

from schedd.errors import Conflict, JobNotFound
from schedd.store import queries
from schedd.store.commands import BackfillJob, ClaimBatch, ClaimRow
from schedd.store.db import Database
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_dispatch import MIN, claim_item, setup

PAST = [NOW_MS - k * MIN for k in range(10, 0, -1)]  # ten past minutes, oldest first


def backfill(
    apply: Applier, slots: list[int], *, tenant: str = "t1", per_s: int = 10, ts_ms: int = NOW_MS
) -> dict[str, Any]:
    cmd = BackfillJob(tenant_id=tenant, job_id="j1", slots=tuple(slots), per_s=per_s)
    return apply.typed(cmd, ts_ms=ts_ms)


def due_rows(db: Database) -> list[tuple[int, int, int]]:
    return db.conn.execute(
        "SELECT scheduled_at_ms, fire_at_ms, is_trigger FROM due WHERE job_id = 'j1' "
        "ORDER BY scheduled_at_ms"
    ).fetchall()


def test_a_backfill_adds_one_paced_trigger_row_per_slot(apply: Applier, db: Database) -> None:
    setup(apply)
    result = backfill(apply, PAST, per_s=4)
    assert result["runs"] == 10 and result["status"] == "ok"
    backfilled = [row for row in due_rows(db) if row[2] == 1]
    assert [s for s, _, _ in backfilled] == PAST
    # 4 a second from the command's time: 250 ms apart, the first at once.
    assert [f for _, f, _ in backfilled] == [NOW_MS + 250 * k for k in range(10)]
    assert result["last_fire_at_ms"] == NOW_MS + 2_250
    # The job's own next run is untouched (scheduled row, version, next_run_at).
    assert (NOW_MS, NOW_MS, 0) in due_rows(db)
    assert db.conn.execute("SELECT version, next_run_at_ms FROM jobs").fetchone() == (1, NOW_MS)
    marks = db.conn.execute("SELECT scheduled_at_ms FROM backfills ORDER BY 1").fetchall()
    assert [m for (m,) in marks] == PAST


def test_slots_with_a_run_or_a_pending_backfill_are_skipped(apply: Applier, db: Database) -> None:
    setup(apply, run_ms=PAST[3])  # the job's scheduled run at PAST[3] is claimed below
    row = ClaimRow(**claim_item(run_ms=PAST[3], next_ms=PAST[3] + MIN))
    assert apply.propose(ClaimBatch(node_id="n1", claims=(row,))).claimed == 1  # a batch run
    first = backfill(apply, PAST[:2])
    assert first["runs"] == 2
    again = backfill(apply, PAST[:4])  # 0 and 1 pending, 3 has its run; 4 on is the schedule's
    assert again["runs"] == 1
    assert [s for s, _, t in due_rows(db) if t] == PAST[:3]


def test_slots_from_the_jobs_next_run_on_are_left_to_the_schedule(
    apply: Applier, db: Database
) -> None:
    setup(apply, run_ms=PAST[5])  # overdue: the dispatcher will claim PAST[5] and on itself
    assert backfill(apply, PAST)["runs"] == 5
    assert [s for s, _, t in due_rows(db) if t] == PAST[:5]


def test_applying_the_same_backfill_again_adds_nothing(apply: Applier, db: Database) -> None:
    setup(apply)
    assert backfill(apply, PAST)["runs"] == 10
    tables = ("due", "backfills", "backfill_lanes", "audit", "jobs")
    before = {t: db.conn.execute(f"SELECT * FROM {t}").fetchall() for t in tables}
    assert backfill(apply, PAST, ts_ms=NOW_MS + 1)["runs"] == 0  # a retry with a new id
    assert {t: db.conn.execute(f"SELECT * FROM {t}").fetchall() for t in tables} == before


def test_consecutive_backfills_share_the_tenants_lane(apply: Applier, db: Database) -> None:
    setup(apply)
    backfill(apply, PAST[:5], per_s=5)  # 0, 200, ..., 800: the lane is free from NOW + 1000
    second = backfill(apply, PAST[5:], per_s=5, ts_ms=NOW_MS + 100)
    fires = [f for _, f, t in due_rows(db) if t]
    assert fires[5:] == [NOW_MS + 1_000 + 200 * k for k in range(5)]
    assert second["last_fire_at_ms"] == NOW_MS + 1_800
    # Once the lane is behind the command's time, the next backfill starts at its time.
    apply("cancel_job", {"tenant_id": "t1", "job_id": "j1"})
    lane = db.conn.execute("SELECT next_fire_at_ms FROM backfill_lanes").fetchone()
    assert lane == (NOW_MS + 2_000,)


def test_another_tenants_job_is_not_found_and_a_cancelled_one_conflicts(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    with pytest.raises(JobNotFound):
        apply.propose(BackfillJob(tenant_id="t2", job_id="j1", slots=tuple(PAST), per_s=10))
    assert db.conn.execute("SELECT COUNT(*) FROM backfills").fetchone()[0] == 0
    apply("cancel_job", {"tenant_id": "t1", "job_id": "j1"})
    with pytest.raises(Conflict):
        apply.propose(BackfillJob(tenant_id="t1", job_id="j1", slots=tuple(PAST), per_s=10))


def test_backfill_runs_are_claimed_once_fenced_and_listed_as_backfills(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    backfill(apply, PAST[:2], per_s=1000)

    def claim_of(slot: int, fire: int, *, epoch: int = 1) -> dict[str, Any]:
        item = claim_item(run_ms=slot, version=1, next_ms=None, trigger=True, epoch=epoch)
        return item | {"fire_at_ms": fire}

    fires = {s: f for s, f, t in due_rows(db) if t}
    stale = apply(
        "claim_runs", {"node_id": "n1", "claims": [claim_of(PAST[0], fires[PAST[0]], epoch=7)]}
    )
    assert stale["rejected"] == {"stale_lease": 1}
    claims = [claim_of(s, fires[s]) for s in PAST[:2]]
    assert apply("claim_runs", {"node_id": "n1", "claims": claims})["claimed"] == 2
    assert apply("claim_runs", {"node_id": "n1", "claims": claims})["rejected"] == {"not_due": 2}
    runs = queries.list_runs(db.conn, "j1", before_ms=2**62, limit=10)
    assert [(r.scheduled_at, r.backfill) for r in runs] == [
        (r.scheduled_at, True) for r in runs
    ] and len(runs) == 2
    # The job itself did not move: a backfill run is no scheduled run.
    assert db.conn.execute("SELECT version, next_run_at_ms FROM jobs").fetchone() == (1, NOW_MS)


def test_retention_deletes_a_mark_with_its_run_and_a_jobs_marks_with_the_job(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    backfill(apply, PAST[:2], per_s=1000)
    fire = {s: f for s, f, t in due_rows(db) if t}[PAST[0]]
    item = claim_item(run_ms=PAST[0], next_ms=None, trigger=True) | {
        "fire_at_ms": fire,
        "skip": "skipped: test",  # finished at once, so retention may take it
    }
    assert apply("claim_runs", {"node_id": "n1", "claims": [item]})["claimed"] == 1
    hour = 3_600_000
    body = {
        "retention_ms": {"runs": hour, "audit": 9 * hour, "deadletters": hour, "messages": hour}
    }
    apply("prune", body, ts_ms=NOW_MS + 2 * hour)
    marks = db.conn.execute("SELECT scheduled_at_ms FROM backfills").fetchall()
    assert marks == [(PAST[1],)]  # its run is gone; the pending one's mark stays
    apply("cancel_job", {"tenant_id": "t1", "job_id": "j1"}, ts_ms=NOW_MS + 2 * hour)
    apply("prune", body, ts_ms=NOW_MS + 4 * hour)
    assert db.conn.execute("SELECT COUNT(*) FROM backfills").fetchone()[0] == 0
    assert db.conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0
