""" "Run B after A" in the state machine (store/dependencies.py): the end of a run of A adds B's
run in the same apply, per run and in batches, over queues and HTTP; `on` decides which ends
count; a skipped run ends nothing; each slot gives B one run; a paused or cancelled B gets none;
apply refuses an unknown, foreign or cancelled upstream, the job itself, cycles and long chains;
tenants without dependencies are not read; retention drops the records with the runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedd.store.command import compact_json
from schedd.store.db import Database
from schedd.store.dependencies import MAX_CHAIN_JOBS
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_batches import Store, claim, one_time
from tests.unit.test_store_delivery import HTTP, record
from tests.unit.test_store_dispatch import RETRY, claim_item, setup, spec
from tests.unit.test_store_retention import prune


def after(job_id: str, on: str = "success") -> dict[str, Any]:
    return {"after": {"job_id": job_id, "on": on}}


def add(
    apply: Applier, job_id: str, schedule: dict[str, Any], *, tenant: str = "t1", **extra: Any
) -> dict[str, Any]:
    item = {
        "job_id": job_id,
        "partition": 3,
        "spec": spec(schedule, **extra),
        "next_run_at_ms": None,
        "next_fire_at_ms": None,
        "idempotency_key": None,
        "request_hash": None,
    }
    result: dict[str, Any] = apply("create_jobs", {"tenant_id": tenant, "jobs": [item]})
    return result["results"][0]


def second_tenant(apply: Applier) -> None:
    body = {
        "tenant_id": "t2",
        "name": "t2",
        "token_hash": "h2",
        "signing_secret": "s",
        "max_active_jobs": 100,
        "dispatch_rate": 100,
        "allowed_hosts": [],
    }
    apply("create_tenant", body)


def follows(db: Database, job_id: str) -> list[tuple[Any, ...]]:
    """(scheduled_at, fire_at, is_trigger) of the job's due rows, and its upstream records."""
    due = db.conn.execute(
        "SELECT scheduled_at_ms, fire_at_ms, is_trigger FROM due WHERE job_id = ? ORDER BY 1",
        (job_id,),
    ).fetchall()
    made = db.conn.execute(
        "SELECT scheduled_at_ms, upstream_job_id, upstream_status FROM run_upstreams "
        "WHERE job_id = ? ORDER BY 1",
        (job_id,),
    ).fetchall()
    return [*due, *made]


def claim_trigger(apply: Applier, job_id: str, scheduled_ms: int, fire_ms: int) -> None:
    item = claim_item(run_ms=scheduled_ms, next_ms=None, trigger=True)
    item |= {"job_id": job_id, "fire_at_ms": fire_ms}
    result = apply("claim_runs", {"node_id": "n1", "claims": [item]}, ts_ms=fire_ms)
    assert result["claimed"] == 1, result


@pytest.mark.parametrize("form", ["claim_runs", "claim_batch"])
def test_an_ack_of_a_gives_b_a_run_at_a_s_slot_and_b_s_ack_gives_c_one(
    tmp_path: Path, form: str
) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    assert add(s.apply, "jb", after("j1"))["created"]
    assert add(s.apply, "jc", after("jb", "finished"))["created"]
    claim(s.apply, form)
    s.receive(NOW_MS)
    assert follows(s.db, "jb") == []  # delivered is not ended
    assert s.settle("ack_messages", NOW_MS + 500)["acked"] == 1
    assert follows(s.db, "jb") == [(NOW_MS, NOW_MS + 500, 1), (NOW_MS, "j1", "succeeded")]
    assert follows(s.db, "jc") == []
    claim_trigger(s.apply, "jb", NOW_MS, NOW_MS + 500)
    [message] = s.receive(NOW_MS + 600)
    assert message["job_id"] == "jb" and message["idempotency_key"].startswith("jb:2026-")
    assert message["scheduled_at"] == s.runs()[0].scheduled_at  # A's slot
    s.settle("ack_messages", NOW_MS + 700)
    assert follows(s.db, "jc") == [(NOW_MS, NOW_MS + 700, 1), (NOW_MS, "jb", "succeeded")]


@pytest.mark.parametrize("form", ["claim_runs", "claim_batch"])
def test_a_dead_run_gives_runs_to_failure_and_finished_dependents_only(
    tmp_path: Path, form: str
) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    for job_id, on in (("j_ok", "success"), ("j_fail", "failure"), ("j_any", "finished")):
        assert add(s.apply, job_id, after("j1", on))["created"]
    claim(s.apply, form)
    s.receive(NOW_MS)
    s.settle("nack_messages", NOW_MS + 1, error="boom")  # retried: not an end
    assert follows(s.db, "j_fail") == []
    s.receive(NOW_MS + 20_000)
    s.settle("nack_messages", NOW_MS + 20_001, error="boom")  # out of attempts: dead
    assert follows(s.db, "j_ok") == []
    for job_id in ("j_fail", "j_any"):
        assert follows(s.db, job_id) == [(NOW_MS, NOW_MS + 20_001, 1), (NOW_MS, "j1", "dead")]
    # Redriven and acked, the slot ends again: j_any has its run already, j_ok gets one.
    s.apply("redrive_deadletter", {"tenant_id": "t1", "id": f"j1:{NOW_MS}"}, ts_ms=NOW_MS + 20_002)
    s.receive(NOW_MS + 20_003)
    s.settle("ack_messages", NOW_MS + 20_004)
    assert follows(s.db, "j_ok") == [(NOW_MS, NOW_MS + 20_004, 1), (NOW_MS, "j1", "succeeded")]
    assert follows(s.db, "j_any") == [(NOW_MS, NOW_MS + 20_001, 1), (NOW_MS, "j1", "dead")]


def test_a_message_expired_by_retention_is_a_failure(apply: Applier, db: Database) -> None:
    one_time(apply)
    add(apply, "jb", after("j1", "failure"))
    claim(apply, "claim_batch")
    later = NOW_MS + 8 * 86_400_000  # past the default retention of unreceived messages
    prune(apply, later)
    assert follows(db, "jb") == [(NOW_MS, later, 1), (NOW_MS, "j1", "dead")]


@pytest.mark.parametrize(
    ("verdicts", "status"), [(["succeeded"], "succeeded"), (["failed"], "dead"), (["gone"], "dead")]
)
def test_http_outcomes_end_runs_too(
    apply: Applier, db: Database, verdicts: list[str], status: str
) -> None:
    setup(apply, schedule={"run_at": "2026-09-21T14:13:20Z"}, target=HTTP, retry=RETRY)
    add(apply, "j_ok", after("j1", "success"))
    add(apply, "j_fail", after("j1", "failure"))
    item = claim_item(next_ms=None)
    assert apply("claim_runs", {"node_id": "n1", "claims": [item]})["claimed"] == 1
    for verdict in verdicts:
        record(apply, verdict)
    wanted = "j_ok" if status == "succeeded" else "j_fail"
    other = "j_fail" if status == "succeeded" else "j_ok"
    assert follows(db, wanted) == [(NOW_MS, NOW_MS, 1), (NOW_MS, "j1", status)]
    assert follows(db, other) == []


def test_a_skipped_run_ends_nothing(apply: Applier, db: Database) -> None:
    setup(apply)
    add(apply, "jb", after("j1", "finished"))
    item = claim_item() | {"skip": "calendar:hols"}
    assert apply("claim_runs", {"node_id": "n1", "claims": [item]})["claimed"] == 1
    assert db.conn.execute("SELECT status FROM runs WHERE job_id = 'j1'").fetchone() == ("skipped",)
    assert follows(db, "jb") == []


def test_a_paused_or_cancelled_dependent_gets_nothing_and_a_cancelled_upstream_still_ends(
    tmp_path: Path,
) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    for job_id in ("j_paused", "j_cancelled", "j_live"):
        add(s.apply, job_id, after("j1"))
    s.apply("pause_job", {"tenant_id": "t1", "job_id": "j_paused"})
    s.apply("cancel_job", {"tenant_id": "t1", "job_id": "j_cancelled"})
    claim(s.apply, "claim_runs")
    s.receive(NOW_MS)
    s.apply("cancel_job", {"tenant_id": "t1", "job_id": "j1"})  # its run in flight goes on
    s.settle("ack_messages", NOW_MS + 5)
    assert follows(s.db, "j_paused") == [] and follows(s.db, "j_cancelled") == []
    assert follows(s.db, "j_live") == [(NOW_MS, NOW_MS + 5, 1), (NOW_MS, "j1", "succeeded")]
    deps = s.db.conn.execute("SELECT job_id FROM dependencies ORDER BY 1").fetchall()
    assert deps == [("j_live",), ("j_paused",)]  # a cancelled A keeps its dependents


def test_a_manual_trigger_of_b_at_the_slot_leaves_one_run(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    add(s.apply, "jb", after("j1"))
    s.apply("trigger_job", {"tenant_id": "t1", "job_id": "jb", "scheduled_at_ms": NOW_MS})
    claim(s.apply, "claim_runs")
    s.receive(NOW_MS)
    s.settle("ack_messages", NOW_MS + 5)
    assert follows(s.db, "jb") == [(NOW_MS, NOW_MS, 1)]  # the trigger's row, no record


def test_apply_refuses_bad_upstreams_naming_the_cycle(apply: Applier, db: Database) -> None:
    setup(apply)
    second_tenant(apply)
    add(apply, "j_other", {"every": "1m"}, tenant="t2")
    add(apply, "j_gone", {"every": "1m"})
    apply("cancel_job", {"tenant_id": "t1", "job_id": "j_gone"})
    for upstream, message in (
        ("j_nope", "no job 'j_nope'"),
        ("j_other", "no job 'j_other'"),
        ("j_gone", "job j_gone is cancelled"),
        ("jb", "a job cannot run after itself"),
    ):
        error = add(apply, "jb", after(upstream))["error"]
        assert error == {
            "code": "invalid_dependency",
            "message": f"schedule.after.job_id: {message}",
        }
    add(apply, "jb", after("j1"))
    add(apply, "jc", after("jb"))
    # j1 after jc closes j1 -> jc -> jb -> j1.
    body = {
        "tenant_id": "t1",
        "job_id": "j1",
        "expected_version": 1,
        "spec": spec(after("jc")),
        "next_run_at_ms": None,
        "next_fire_at_ms": None,
        "fields": ["schedule"],
    }
    result = apply("update_job", body)
    assert result["status"] == "rejected" and result["code"] == "invalid_dependency"
    assert result["message"] == "schedule.after.job_id: would close a cycle j1 -> jc -> jb -> j1"
    assert db.conn.execute("SELECT version FROM jobs WHERE job_id = 'j1'").fetchone() == (1,)


def test_a_chain_is_at_most_max_chain_jobs_long_counting_a_patch_s_dependents(
    apply: Applier, db: Database
) -> None:
    setup(apply)  # j1 heads the chain
    for k in range(2, MAX_CHAIN_JOBS + 1):
        assert add(apply, f"j{k}", after(f"j{k - 1}"))["created"]
    error = add(apply, "j_long", after(f"j{MAX_CHAIN_JOBS}"))["error"]
    assert error["code"] == "invalid_dependency" and "more than 10 jobs" in error["message"]
    # A head of its own with one dependent, moved under j9: 9 + 2 jobs.
    add(apply, "h", {"every": "1m"})
    add(apply, "h2", after("h"))
    body = {
        "tenant_id": "t1",
        "job_id": "h",
        "expected_version": 1,
        "spec": spec(after(f"j{MAX_CHAIN_JOBS - 1}")),
        "next_run_at_ms": None,
        "next_fire_at_ms": None,
        "fields": ["schedule"],
    }
    assert apply("update_job", body)["code"] == "invalid_dependency"
    body["spec"] = spec(after(f"j{MAX_CHAIN_JOBS - 2}"))  # 8 + 2: allowed
    assert apply("update_job", body)["status"] == "ok"
    row = db.conn.execute("SELECT upstream_job_id FROM dependencies WHERE job_id = 'h'").fetchone()
    assert row == (f"j{MAX_CHAIN_JOBS - 2}",)


def test_a_patch_to_a_schedule_of_its_own_drops_the_dependency(
    apply: Applier, db: Database
) -> None:
    setup(apply)
    add(apply, "jb", after("j1"))
    body = {
        "tenant_id": "t1",
        "job_id": "jb",
        "expected_version": 1,
        "spec": spec({"every": "1m"}),
        "next_run_at_ms": NOW_MS,
        "next_fire_at_ms": NOW_MS,
        "fields": ["schedule"],
    }
    assert apply("update_job", body)["status"] == "ok"
    assert db.conn.execute("SELECT COUNT(*) FROM dependencies").fetchone() == (0,)


def test_add_jobs_takes_an_upstream_created_earlier_in_the_same_command(
    apply: Applier, db: Database
) -> None:
    setup(apply)

    def row(job_id: str, schedule: dict[str, Any]) -> list[Any]:
        return [job_id, 3, compact_json(spec(schedule)), None, None, None, None, NOW_MS]

    jobs = [row("ja", {"every": "1m"}), row("jb", after("ja")), row("jc", after("jz"))]
    result = apply("add_jobs", {"tenant_id": "t1", "jobs": jobs})
    assert result["created"] == 2
    assert result["errors"] == [[2, "invalid_dependency", "schedule.after.job_id: no job 'jz'"]]
    deps = db.conn.execute("SELECT upstream_job_id, job_id FROM dependencies").fetchall()
    assert deps == [("ja", "jb")]
    audited = db.conn.execute("SELECT job_id FROM audit WHERE action = 'create_jobs'").fetchall()
    assert [j for (j,) in audited][-2:] == ["ja", "jb"]


def test_acks_of_a_tenant_without_dependencies_read_only_the_probe(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    second_tenant(s.apply)
    add(s.apply, "x", {"every": "1m"}, tenant="t2")
    add(s.apply, "y", after("x"), tenant="t2")  # another tenant's dependency
    claim(s.apply, "claim_batch")
    s.receive(NOW_MS)
    statements: list[str] = []
    s.db.conn.set_trace_callback(statements.append)
    try:
        s.settle("ack_messages", NOW_MS + 5)
    finally:
        s.db.conn.set_trace_callback(None)
    touching = [q for q in statements if "dependencies" in q]
    assert len(touching) == 1 and "LIMIT 1" in touching[0]


def test_retention_drops_upstream_records_with_the_runs_and_rows_with_the_upstream(
    tmp_path: Path,
) -> None:
    s = Store(tmp_path / "s.db")
    one_time(s.apply)
    add(s.apply, "jb", after("j1"))
    claim(s.apply, "claim_runs")
    s.receive(NOW_MS)
    s.settle("ack_messages", NOW_MS + 5)
    claim_trigger(s.apply, "jb", NOW_MS, NOW_MS + 5)
    s.receive(NOW_MS + 6)
    s.settle("ack_messages", NOW_MS + 7)
    assert s.db.conn.execute("SELECT COUNT(*) FROM run_upstreams").fetchone() == (1,)
    prune(s.apply, NOW_MS + 400 * 86_400_000, max_rows=100_000)
    assert s.db.conn.execute("SELECT COUNT(*) FROM run_upstreams").fetchone() == (0,)
    # j1 (one-time, completed) is pruned whole: jb stays, active, after nothing.
    assert s.db.conn.execute("SELECT COUNT(*) FROM dependencies").fetchone() == (0,)
    assert s.db.conn.execute("SELECT status FROM jobs WHERE job_id = 'jb'").fetchone() == (
        "active",
    )
