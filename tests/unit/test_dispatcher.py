"""The dispatcher driven by tick(now_ms) against a real store: DST, misfires, overlap, rates.

Its proposals are applied at once to the state machine, as a one-node cluster would.
"""

from __future__ import annotations

import itertools
from collections import Counter
from concurrent.futures import Future
from typing import Any

import pytest

from schedd.dispatch import plan as plan_module
from schedd.dispatch.dispatcher import Dispatcher
from schedd.jobspec import parse_job, spec_to_json
from schedd.model import partition_of
from schedd.schedule import fire_time, first_run_at
from schedd.store.commands import ClaimBatch, ClaimRuns, LogCommand, R, answer_of
from schedd.store.db import Database, connect
from schedd.store.queries import list_runs
from schedd.timeformat import format_instant, parse_instant
from tests.conftest import Applier

PARTITIONS = 4


def ms(text: str) -> int:
    return parse_instant(text, field="t")


class Cluster:
    """One node: a dispatcher whose claims go straight into the state machine."""

    def __init__(self, apply: Applier, db: Database) -> None:
        self.apply, self.db, self.now = apply, db, 0
        apply(
            "create_tenant",
            {
                "tenant_id": "t1",
                "name": "t1",
                "token_hash": "h1",
                "signing_secret": "s",
                "max_active_jobs": 10**6,
                "dispatch_rate": 0,
                "allowed_hosts": [],
            },
        )
        apply("register_node", {"node_id": "n1", "api": "a", "raft": "r"})
        moves = [{"partition": p, "node_id": "n1", "epoch": 0} for p in range(PARTITIONS)]
        apply("assign_leases", {"ttl_ms": 10**12, "moves": moves})
        self.dispatcher = Dispatcher(
            "n1", PARTITIONS, lambda: connect(db.path, readonly=True), self.submit
        )

    def submit(self, cmd: LogCommand[R]) -> Future[R]:
        future: Future[R] = Future()
        future.set_result(self.apply.propose(cmd, ts_ms=self.now))
        return future

    def add_job(self, job_id: str, body: dict[str, Any], now: int, tenant: str = "t1") -> None:
        spec = parse_job(body | {"target": {"type": "queue", "name": "q"}}, now_ms=now)
        run_at = first_run_at(spec.schedule, now)
        assert run_at is not None
        fire_at = fire_time(job_id, run_at, spec.window_ms or 0)
        item = {
            "job_id": job_id,
            "partition": partition_of(job_id, PARTITIONS),
            "spec": spec_to_json(spec),
            "next_run_at_ms": run_at,
            "next_fire_at_ms": fire_at,
            "idempotency_key": None,
            "request_hash": None,
        }
        result = self.apply("create_jobs", {"tenant_id": tenant, "jobs": [item]}, ts_ms=now)
        assert result["results"][0].get("created"), result

    def run_until(self, end: int, step_ms: int = 1_000) -> None:
        while self.now <= end:
            self.dispatcher.tick(self.now)
            self.now += step_ms

    def runs(self, job_id: str) -> list[tuple[str, str]]:
        # The store's read of a job's runs (run rows and batch slots alike), oldest first.
        found = list_runs(self.db.conn, job_id, before_ms=2**62, limit=10_000)
        return [(run.scheduled_at, run.status) for run in reversed(found)]


@pytest.fixture
def cluster(apply: Applier, db: Database) -> Cluster:
    return Cluster(apply, db)


def test_fixed_time_job_fires_once_across_both_dst_changes(cluster: Cluster) -> None:
    start = ms("2026-03-07T12:00:00Z")
    cluster.now = start
    cluster.add_job(
        "job_fixed", {"schedule": {"cron": "30 1 * * *", "timezone": "America/New_York"}}, start
    )
    cluster.add_job(
        "job_gap", {"schedule": {"cron": "30 2 * * *", "timezone": "America/New_York"}}, start
    )
    cluster.run_until(ms("2026-03-09T12:00:00Z"), step_ms=60_000)
    assert [at for at, _ in cluster.runs("job_gap")] == [
        "2026-03-08T07:00:00Z",  # 02:30 does not exist: the transition instant, 03:00 EDT
        "2026-03-09T06:30:00Z",
    ]
    assert [at for at, _ in cluster.runs("job_fixed")] == [
        "2026-03-08T06:30:00Z",
        "2026-03-09T05:30:00Z",
    ]


def test_wildcard_job_fires_in_both_passes_of_the_repeated_hour(cluster: Cluster) -> None:
    start = ms("2026-11-01T04:50:00Z")
    cluster.now = start
    cluster.add_job(
        "job_half", {"schedule": {"cron": "*/30 1 * * *", "timezone": "America/New_York"}}, start
    )
    cluster.run_until(ms("2026-11-01T07:10:00Z"), step_ms=60_000)
    assert [at for at, _ in cluster.runs("job_half")] == [
        "2026-11-01T05:00:00Z",
        "2026-11-01T05:30:00Z",  # 01:00, 01:30 EDT
        "2026-11-01T06:00:00Z",
        "2026-11-01T06:30:00Z",  # 01:00, 01:30 EST
    ]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # one catch-up run (or a skipped one) for the 24 missed, then 02:05 on schedule
        ("run_once", ["dispatched", "dispatched"]),
        ("skip", ["skipped", "dispatched"]),
        ("run_all", ["dispatched"] * 26),
    ],
)
def test_misfire_policy_after_a_two_hour_outage(
    cluster: Cluster, policy: str, expected: list[str]
) -> None:
    start = ms("2026-06-01T00:00:00Z")
    cluster.now = start
    body = {
        "schedule": {"every": "5m", "start_at": "2026-06-01T00:05:00Z"},
        "misfire_policy": policy,
    }
    cluster.add_job("job_m", body, start)
    cluster.now = start + 2 * 3_600_000 + 1_000  # the dispatcher was down for two hours
    cluster.run_until(cluster.now + 10 * 60_000 - 2_000, step_ms=500)
    statuses = [status for _, status in cluster.runs("job_m")]
    if policy == "run_all":
        # every missed occurrence (24 of them), then the two that fell due while catching up
        assert len(statuses) >= 24 and set(statuses) == {"dispatched"}
        scheduled = [parse_instant(at, field="t") for at, _ in cluster.runs("job_m")]
        assert all(b - a == 300_000 for a, b in itertools.pairwise(scheduled))
    else:
        assert statuses == expected


def test_overlap_skip_records_a_skipped_run_while_the_previous_is_in_flight(
    cluster: Cluster,
) -> None:
    start = ms("2026-06-01T00:00:00Z")
    cluster.now = start
    cluster.add_job("job_o", {"schedule": {"every": "1m"}, "overlap_policy": "skip"}, start)
    cluster.run_until(start + 3 * 60_000 + 500)
    assert [status for _, status in cluster.runs("job_o")] == ["dispatched", "skipped", "skipped"]


def test_window_fires_inside_the_window(cluster: Cluster, db: Database) -> None:
    start = ms("2026-06-01T00:00:00Z")
    cluster.now = start
    for i in range(20):
        cluster.add_job(f"job_w{i:02d}", {"schedule": {"every": "10m"}, "window": "5m"}, start)
    cluster.run_until(start + 36 * 60_000, step_ms=1_000)
    offsets = [
        fire - scheduled
        for scheduled, fire in db.conn.execute(f"SELECT scheduled_at_ms, fire_at_ms FROM {CLAIMED}")
    ]
    assert len(offsets) == 60
    assert all(0 <= offset < 300_000 for offset in offsets)
    assert len(set(offsets)) > 50  # spread, not all at the start


def add_second_tenant(cluster: Cluster, *, dispatch_rate: int, ts_ms: int) -> None:
    """Tenant t2 beside the fixture's t1, with its own dispatch rate (0: none)."""
    cluster.apply(
        "create_tenant",
        {
            "tenant_id": "t2",
            "name": "t2",
            "token_hash": "h2",
            "signing_secret": "s",
            "max_active_jobs": 10**6,
            "dispatch_rate": dispatch_rate,
            "allowed_hosts": [],
        },
        ts_ms=ts_ms,
    )


def test_rate_limited_tenant_does_not_starve_another(cluster: Cluster, db: Database) -> None:
    start = ms("2026-06-01T00:00:00Z")
    cluster.now = start
    add_second_tenant(cluster, dispatch_rate=0, ts_ms=start)
    cluster.apply(
        "update_tenant", {"tenant_id": "t1", "changes": {"dispatch_rate": 50}}, ts_ms=start
    )
    due = {"schedule": {"run_at": "2026-06-01T00:00:10Z"}}
    for i in range(300):
        cluster.add_job(f"job_big{i:03d}", due, start)
    for i in range(3):
        cluster.add_job(f"job_small{i}", due, start, tenant="t2")
    cluster.run_until(start + 10_000 + 100, step_ms=100)
    small, big = (claimed_count(db, tenant) for tenant in ("t2", "t1"))
    assert small == 3  # at once, although t1's 300 runs are due at the same time
    assert big <= 60  # t1 gets its 50/s (one second of tokens), the rest waits its turn
    cluster.run_until(start + 17_000, step_ms=100)
    assert claimed_count(db, "t1") + claimed_count(db, "t2") == 303


def recorded_dispatcher(cluster: Cluster, db: Database, **options: Any) -> list[LogCommand]:
    """Give `cluster` a dispatcher on `db` whose proposals are recorded, in order, then
    submitted; returns the record."""
    proposed: list[LogCommand] = []
    submit = cluster.submit

    def recording(cmd: LogCommand[R]) -> Future[R]:
        proposed.append(cmd)
        return submit(cmd)

    cluster.dispatcher = Dispatcher(
        "n1", PARTITIONS, lambda: connect(db.path, readonly=True), recording, **options
    )
    return proposed


def test_a_tenant_over_its_rate_has_its_last_runs_parked_and_the_claims_keep_job_order(
    cluster: Cluster, db: Database
) -> None:
    start = ms("2026-06-01T00:00:00Z")
    cluster.now = start
    proposed = recorded_dispatcher(cluster, db)
    add_second_tenant(cluster, dispatch_rate=3, ts_ms=start)
    due = {"schedule": {"run_at": "2026-06-01T00:00:10Z"}}
    for i in range(10):  # even ones t2's (3 runs a second), odd ones t1's (no limit)
        cluster.add_job(f"job_{i}", due, start, tenant="t2" if i % 2 == 0 else "t1")
    cluster.run_until(start + 12_000, step_ms=1_000)
    claimed = [
        [claim.job_id for claim in cmd.claims]
        for cmd in proposed
        if isinstance(cmd, ClaimBatch | ClaimRuns)
    ]
    assert claimed == [
        ["job_0", "job_1", "job_2", "job_3", "job_4", "job_5", "job_7", "job_9"],
        ["job_6", "job_8"],  # t2's bucket refilled a second later
    ]


# Every claimed run: its own row, or a slot of a batch (queue runs at log level 4).
CLAIMED = (
    "(SELECT job_id, scheduled_at_ms, fire_at_ms FROM runs "
    "UNION ALL SELECT job_id, scheduled_at_ms, fire_at_ms FROM run_keys)"
)


def claimed_count(db: Database, tenant_id: str) -> int:
    return int(
        db.conn.execute(
            f"SELECT COUNT(*) FROM {CLAIMED} JOIN jobs USING (job_id) WHERE jobs.tenant_id = ?",
            (tenant_id,),
        ).fetchone()[0]
    )


def test_trigger_and_cancel(cluster: Cluster, db: Database) -> None:
    start = ms("2026-06-01T00:00:00Z")
    cluster.now = start
    cluster.add_job("job_t", {"schedule": {"every": "1h"}}, start)
    cluster.apply(
        "trigger_job",
        {"tenant_id": "t1", "job_id": "job_t", "scheduled_at_ms": start + 1_000},
        ts_ms=start,
    )
    cluster.dispatcher.offer_many([("job_t", start + 1_000, start + 1_000, True)])
    cluster.run_until(start + 5_000)
    assert cluster.runs("job_t") == [(format_instant(start + 1_000), "dispatched")]
    cluster.apply("cancel_job", {"tenant_id": "t1", "job_id": "job_t"}, ts_ms=cluster.now)
    cluster.run_until(start + 2 * 3_600_000, step_ms=60_000)
    assert len(cluster.runs("job_t")) == 1


def test_after_a_snapshot_install_the_dispatcher_reads_its_due_runs_again_at_once(
    cluster: Cluster,
) -> None:
    start = ms("2026-06-01T12:00:00Z")
    cluster.dispatcher.tick(start)  # preloaded: the next preload is 5 s away
    # A run the state gained without a command this node applied (a snapshot brought it).
    cluster.add_job("job_from_snapshot", {"schedule": {"run_at": "2026-06-01T12:00:01Z"}}, start)
    cluster.dispatcher.tick(start + 1_500)
    assert cluster.runs("job_from_snapshot") == []  # unknown until the next preload
    cluster.dispatcher.forget()
    cluster.dispatcher.tick(start + 1_600)
    assert cluster.runs("job_from_snapshot") == [("2026-06-01T12:00:01Z", "dispatched")]


def add_stored_job(cluster: Cluster, job_id: str, cron: str, stored_cron: str, now: int) -> None:
    """A job whose stored spec says `stored_cron` (as an older version may have stored it)."""
    spec = parse_job(
        {"schedule": {"cron": cron}, "target": {"type": "queue", "name": "q"}}, now_ms=now
    )
    run_at = first_run_at(spec.schedule, now)
    assert run_at is not None
    stored = spec_to_json(spec)
    stored["schedule"] = {**stored["schedule"], "cron": stored_cron}
    item = {
        "job_id": job_id,
        "partition": partition_of(job_id, PARTITIONS),
        "spec": stored,
        "next_run_at_ms": run_at,
        "next_fire_at_ms": run_at,
        "idempotency_key": None,
        "request_hash": None,
    }
    result = cluster.apply("create_jobs", {"tenant_id": "t1", "jobs": [item]}, ts_ms=now)
    assert result["results"][0].get("created"), result


def test_a_stored_step_in_non_ascii_digits_keeps_firing(cluster: Cluster) -> None:
    # Versions before 2026-12-01 took `*/٣` (Arabic-Indic 3) as `*/3`; the API now refuses it,
    # but a job stored then must go on firing as it did.
    start = ms("2026-06-01T00:00:30Z")
    cluster.now = start
    add_stored_job(cluster, "job_legacy", "*/3 * * * *", "*/\u0663 * * * *", start)
    cluster.run_until(start + 10 * 60_000)
    assert [at for at, _ in cluster.runs("job_legacy")] == [
        "2026-06-01T00:03:00Z",
        "2026-06-01T00:06:00Z",
        "2026-06-01T00:09:00Z",
    ]


def test_a_job_whose_stored_schedule_cannot_be_read_stops_no_other_run(
    cluster: Cluster,
) -> None:
    start = ms("2026-06-01T00:00:30Z")
    cluster.now = start
    add_stored_job(cluster, "job_broken", "*/3 * * * *", "*/\u00b2 * * * *", start)
    add_stored_job(cluster, "job_fine", "*/3 * * * *", "*/3 * * * *", start)
    cluster.run_until(start + 4 * 60_000)
    assert cluster.runs("job_fine") == [("2026-06-01T00:03:00Z", "dispatched")]
    assert cluster.runs("job_broken") == []


def test_the_periodic_preload_reads_only_what_the_window_gained(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every 5 s the preload reads the rows the window took in since the last read, not the
    whole window again (a 300,000-run spike re-read its rows every 5 s for the minute before
    and during its claims). Rows added below the line are offered by apply; without an offer
    (here: rows written behind the dispatcher's back, as a snapshot would) a forced read or
    the minute's full read finds them."""
    from schedd.dispatch import dispatcher as module

    reads: Counter[str] = Counter()  # job id -> times its due row was read
    real_due_runs = module.due_runs

    def counted(*args: Any, **kwargs: Any) -> Any:
        rows = real_due_runs(*args, **kwargs)
        reads.update(run.job_id for run in rows)
        return rows

    monkeypatch.setattr(module, "due_runs", counted)
    monkeypatch.setattr(module, "MAX_CLAIMS_PER_TICK", 3)  # reads and claims cut at 3
    start = ms("2026-06-01T12:00:00Z")
    ids = [f"job_{i:02d}" for i in range(12)]
    for i, job_id in enumerate(ids):
        run_at = format_instant(start + 30_000 + i)
        cluster.add_job(job_id, {"schedule": {"run_at": run_at}}, start)
    cluster.now = start
    cluster.run_until(start + 40_000)  # 8 preloads: 5 before the runs are due
    assert all(
        cluster.runs(job_id) == [(format_instant(start + 30_000 + i), "dispatched")]
        for i, job_id in enumerate(ids)
    )
    # A row is read once, or twice when a read was cut at it (the rest of its millisecond).
    assert all(1 <= reads[job_id] <= 2 for job_id in ids), reads

    cluster.add_job("unoffered_a", {"schedule": {"run_at": "2026-06-01T12:00:50Z"}}, start)
    cluster.run_until(start + 52_000)
    assert cluster.runs("unoffered_a") == []  # below the line and not offered: not read yet
    cluster.dispatcher.forget()
    cluster.run_until(start + 53_000)
    assert cluster.runs("unoffered_a") == [("2026-06-01T12:00:50Z", "dispatched")]

    cluster.add_job("unoffered_b", {"schedule": {"run_at": "2026-06-01T12:01:00Z"}}, start)
    cluster.run_until(start + 115_000)  # the minute's full read after the forced one
    assert cluster.runs("unoffered_b") == [("2026-06-01T12:01:00Z", "dispatched")]


def test_a_rejected_claim_or_a_new_epoch_reads_the_window_again(cluster: Cluster) -> None:
    """A claim refused for its lease leaves its due row where it was, and a partition held
    again under a new epoch may have gained rows another node added: neither is offered, so
    the next tick reads every row of the window (not only what it gained)."""
    start = ms("2026-06-01T12:00:00Z")
    refusals = {"left": 1}
    submit = cluster.submit

    def refusing(cmd: LogCommand[R]) -> Future[R]:
        if refusals["left"]:  # the first claim command is refused without applying
            refusals["left"] -= 1
            future: Future[R] = Future()
            future.set_result(answer_of(cmd, {"status": "ok", "rejected": {"expired_lease": 1}}))
            return future
        return submit(cmd)

    cluster.dispatcher._submit = refusing
    cluster.add_job("refused", {"schedule": {"run_at": "2026-06-01T12:00:01Z"}}, start)
    cluster.dispatcher.tick(start + 1_000)  # read, claimed, refused
    assert cluster.runs("refused") == []
    cluster.dispatcher.tick(start + 1_100)  # read again at once, claimed
    assert cluster.runs("refused") == [("2026-06-01T12:00:01Z", "dispatched")]

    # Rows added behind the dispatcher's back below its read line, then the leases come back
    # under a new epoch: read at the next tick.
    cluster.add_job("moved", {"schedule": {"run_at": "2026-06-01T12:00:03Z"}}, start)
    cluster.dispatcher.tick(start + 2_000)
    assert cluster.runs("moved") == []  # not offered, below the line: not read yet
    moves = [{"partition": p, "node_id": "n1", "epoch": 1} for p in range(PARTITIONS)]
    cluster.apply("assign_leases", {"ttl_ms": 10**12, "moves": moves}, ts_ms=start + 2_500)
    cluster.dispatcher.tick(start + 3_000)
    assert cluster.runs("moved") == [("2026-06-01T12:00:03Z", "dispatched")]


def test_an_offer_below_the_read_line_is_kept_after_the_clock_steps_back(
    cluster: Cluster,
) -> None:
    """The read line was drawn at now + 60 s; after a small step back an offer just below it
    is beyond the new now + 60 s, but no incremental read will take it: it is kept."""
    start = ms("2026-06-01T12:00:00Z")
    cluster.dispatcher.tick(start)  # read up to start + 60 s; the next full read then
    run_at = start + 59_900
    cluster.add_job("edge", {"schedule": {"run_at": format_instant(run_at)}}, start)
    cluster.dispatcher.offer_many([("edge", run_at, run_at, False)])
    cluster.dispatcher.tick(start - 300)  # the clock stepped back 300 ms
    cluster.now = start + 59_000
    cluster.run_until(start + 59_950, step_ms=50)  # it fires before the next full read
    assert cluster.runs("edge") == [(format_instant(run_at), "dispatched")]


def test_claims_go_into_batches_only_once_no_member_lags_level_4_and_defer_at_5(
    cluster: Cluster, db: Database
) -> None:
    start = ms("2026-06-01T00:00:00Z")
    cluster.now = start
    n2_level = 3
    proposed = recorded_dispatcher(
        cluster, db, lagging=lambda level: ["n2"] if level > n2_level else []
    )
    for i in range(4):
        cluster.add_job(f"job_{i}", {"schedule": {"every": "1m"}}, start)
    cluster.run_until(start + 60_000 + 500)
    n2_level = 4
    cluster.run_until(start + 2 * 60_000 + 500)
    n2_level = 5
    cluster.run_until(start + 3 * 60_000 + 500)
    claims = [cmd for cmd in proposed if isinstance(cmd, ClaimRuns | ClaimBatch)]
    forms = [(c.TYPE, getattr(c, "defer_completion", None)) for c in claims]
    stages = [form for i, form in enumerate(forms) if i == 0 or forms[i - 1] != form]
    assert stages == [("claim_runs", None), ("claim_batch", False), ("claim_batch", True)]
    assert [len(cluster.runs(f"job_{i}")) for i in range(4)] == [3, 3, 3, 3]
    assert db.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 4  # the first minute's
    assert db.conn.execute("SELECT COUNT(*) FROM run_keys").fetchone()[0] == 8  # the others


def test_one_time_runs_are_claimed_as_the_schedule_path_would_claim_them(
    cluster: Cluster, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim command's content, planned with plan_run's one-time shortcut and without it
    # (every run then through load_schedule and next_after), from the same store and clock.
    start = ms("2026-06-01T12:00:00Z")
    cluster.now = start
    cluster.add_job("on_time", {"schedule": {"run_at": "2026-06-01T12:00:01Z"}}, start)
    cluster.add_job("late", {"schedule": {"run_at": "2026-06-01T11:00:00Z"}}, start)
    cluster.add_job(
        "windowed", {"schedule": {"run_at": "2026-06-01T12:00:01Z"}, "window": "1s"}, start
    )
    cluster.add_job(
        "late_skip",
        {"schedule": {"run_at": "2026-06-01T11:00:00Z"}, "misfire_policy": "skip"},
        start,
    )
    cluster.add_job("recurring", {"schedule": {"every": "1m"}}, start - 60_000)

    def claims_planned() -> list[ClaimBatch | ClaimRuns]:
        proposed: list[ClaimBatch | ClaimRuns] = []

        def recording(cmd: LogCommand[R]) -> Future[R]:
            assert isinstance(cmd, ClaimBatch | ClaimRuns)
            proposed.append(cmd)
            future: Future[R] = Future()
            future.set_result(answer_of(cmd, {"claimed": len(cmd.claims)}))  # store unchanged
            return future

        dispatcher = Dispatcher(
            "n1", PARTITIONS, lambda: connect(db.path, readonly=True), recording
        )
        dispatcher.tick(start + 2_000)
        return proposed

    shortcut = claims_planned()
    monkeypatch.setattr(plan_module, "_is_last_one_time_run", lambda schedule, at_ms: False)
    assert claims_planned() == shortcut
    assert sorted(claim.job_id for cmd in shortcut for claim in cmd.claims) == [
        "late",
        "late_skip",
        "on_time",
        "recurring",
        "windowed",
    ]
