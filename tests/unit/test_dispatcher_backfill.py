"""A big backfill under the dispatcher (tick-driven, real store): its runs fire paced on their
tenant's backfill lane, are never skipped as misfires, and a run due now is claimed on time
beside them."""

from __future__ import annotations

from schedd.api.backfill import backfill_rate
from schedd.schedule import occurrences_between, parse_schedule
from schedd.store.commands import BackfillJob, ClaimBatch, ClaimRuns
from schedd.store.db import Database
from tests.unit.test_dispatcher import (
    Cluster,
    add_second_tenant,
    claimed_count,
    cluster,
    ms,
    recorded_dispatcher,
)

__all__ = ["cluster"]  # the fixture, shared

MIN = 60_000


def test_a_run_due_now_is_claimed_on_time_beside_a_100_000_slot_backfill(
    cluster: Cluster, db: Database
) -> None:
    start = ms("2026-06-01T00:00:00Z")
    cluster.now = start
    proposed = recorded_dispatcher(cluster, db)
    cluster.apply("update_tenant", {"tenant_id": "t1", "changes": {"dispatch_rate": 200}})
    schedule = {"every": "1m", "start_at": "2026-01-01T00:00:00Z"}
    cluster.add_job("job_old", {"schedule": schedule, "misfire_policy": "skip"}, start)
    slots = occurrences_between(
        parse_schedule(schedule, now_ms=start), start - 100_000 * MIN, start, 100_000
    )
    assert len(slots) == 100_000
    per_s = backfill_rate(200)  # 100 a second: half the tenant's rate
    for k in range(0, len(slots), 5_000):
        cmd = BackfillJob(
            tenant_id="t1", job_id="job_old", slots=tuple(slots[k : k + 5_000]), per_s=per_s
        )
        assert cluster.apply.propose(cmd, ts_ms=start).runs == 5_000
    due_at = start + 5_000
    cluster.add_job("job_now", {"schedule": {"run_at": "2026-06-01T00:00:05Z"}}, start)
    add_second_tenant(cluster, dispatch_rate=200, ts_ms=start)  # another tenant, the same rate
    cluster.add_job("job_other", {"schedule": {"run_at": "2026-06-01T00:00:05Z"}}, start, "t2")
    cluster.run_until(due_at, step_ms=100)
    # The run due now went out in the tick of its fire time, in the same tenant, although
    # 100,000 backfill runs wait: they are not ahead of it, being paced on their own lane.
    claims = [c for cmd in proposed if isinstance(cmd, ClaimBatch | ClaimRuns) for c in cmd.claims]
    [on_time] = [c for c in claims if c.job_id == "job_now"]
    [other] = [c for c in claims if c.job_id == "job_other"]
    assert on_time.fire_at_ms == other.fire_at_ms == due_at
    first_claim = next(
        cmd
        for cmd in proposed
        if isinstance(cmd, ClaimBatch | ClaimRuns)
        and any(c.fire_at_ms == due_at for c in cmd.claims)
    )
    assert {"job_now", "job_other"} <= {c.job_id for c in first_claim.claims}  # one tick
    assert cluster.runs("job_now") == [("2026-06-01T00:00:05Z", "dispatched")]
    # The backfill took its share, never more: 100 a second from the start.
    backfilled = [c for c in claims if c.job_id == "job_old"]
    assert 450 <= len(backfilled) <= per_s * 5 + 1
    assert all(c.is_trigger and c.fire_at_ms <= due_at for c in backfilled)
    assert [c.scheduled_at_ms for c in backfilled] == slots[: len(backfilled)]  # oldest first
    # Old slots of a job whose misfire policy is skip are run, not skipped as misfires.
    assert {status for _, status in cluster.runs("job_old")} == {"dispatched"}
    assert claimed_count(db, "t1") == len(backfilled) + 1
