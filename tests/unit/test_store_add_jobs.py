"""add_jobs (log level 5): the rows and outcomes of create_jobs, in the compact form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedd.api.creates import outcomes
from schedd.store import queries
from schedd.store.apply import StateMachine
from schedd.store.command import compact_json
from schedd.store.commands import AddJobs, CreateConnection, CreateJobs, NewJob, NewJobRow
from schedd.store.db import Database
from schedd.store.results import JobOutcome
from schedd.store.schema import REPLICATED_TABLES
from schedd.timeformat import format_instant
from tests.conftest import NOW_MS, Applier

QUEUE = {"type": "queue", "name": "q"}
REDIS = {"type": "redis_stream", "connection": "r", "stream": "s"}


def spec(target: dict[str, Any], payload: Any = None) -> dict[str, Any]:
    return {
        "name": None,
        "schedule": {"run_at": "2026-10-01T00:00:00Z"},
        "target": target,
        "payload": payload,
    }


def item(
    job_id: str,
    *,
    target: dict[str, Any] = QUEUE,
    key: str | None = None,
    body: str = "h1",
    run_ms: int | None = NOW_MS + 60_000,
    payload: Any = None,
) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "partition": int(job_id[-1], 16) % 4,
        "spec": spec(target, payload),
        "next_run_at_ms": run_ms,
        "next_fire_at_ms": run_ms,
        "idempotency_key": key,
        "request_hash": None if key is None else body,
    }


def new_store(tmp_path: Path, name: str, *, max_jobs: int) -> Applier:
    apply = Applier(StateMachine(Database(tmp_path / f"{name}.db")))
    tenant = {
        "tenant_id": "t1",
        "name": "one",
        "token_hash": "h",
        "signing_secret": "whsec_x",
        "max_active_jobs": max_jobs,
        "dispatch_rate": 100,
        "allowed_hosts": [],
    }
    assert apply("create_tenant", tenant)["status"] == "ok"
    return apply


def connect(apply: Applier) -> None:
    cmd = CreateConnection(
        tenant_id="t1",
        name="r",
        kind="redis",
        url="redis://h:6379/0",
        host="h:6379",
        addresses=("203.0.113.7",),
    )
    assert apply.typed(cmd)["status"] == "ok"


def shown(outcome: JobOutcome) -> dict[str, Any]:
    """An outcome in create_jobs's JSON form: {"job_id", "created"} or {"error"}."""
    if outcome.error is not None:
        return {"error": {"code": outcome.error.code, "message": outcome.error.message}}
    return {"job_id": outcome.job_id, "created": outcome.created}


def old_form(apply: Applier, items: list[dict[str, Any]], ts_ms: int) -> list[dict[str, Any]]:
    cmd = CreateJobs(tenant_id="t1", actor="tenant:t1", jobs=tuple(NewJob(**i) for i in items))
    return [shown(outcome) for outcome in apply.propose(cmd, ts_ms=ts_ms).results]


def new_form(
    apply: Applier, items: list[dict[str, Any]], ts_ms: int, *, made_ms: int | None = None
) -> list[dict[str, Any]]:
    """add_jobs of the items, made by the API at `made_ms` (the command's time by default)."""
    made = ts_ms if made_ms is None else made_ms
    rows = tuple(row_of(i, made) for i in items)
    cmd = AddJobs(tenant_id="t1", actor="tenant:t1", jobs=rows)
    return [shown(outcome) for outcome in outcomes(cmd, apply.propose(cmd, ts_ms=ts_ms))]


def row_of(job: dict[str, Any], made_ms: int = NOW_MS) -> NewJobRow:
    """An item as add_jobs carries it, made by the API at `made_ms`."""
    return NewJobRow(
        job["job_id"],
        job["partition"],
        compact_json(job["spec"]),
        job["next_run_at_ms"],
        job["next_fire_at_ms"],
        job["idempotency_key"],
        job["request_hash"],
        made_ms,
    )


def tables(apply: Applier) -> dict[str, list[tuple[Any, ...]]]:
    """Every replicated table but the kept results (the two forms answer differently), with
    rowids where a table has them (jobs and audit: the order rows were written in)."""
    conn = apply.machine.db.conn
    found = {}
    for table, key in REPLICATED_TABLES:
        if table == "applied_commands":
            continue
        rowid = "rowid, " if table in ("jobs", "audit") else ""
        found[table] = conn.execute(f"SELECT {rowid}* FROM {table} ORDER BY {key}").fetchall()
    return found


COMMANDS = [
    [item("job_01"), item("job_02", run_ms=None), item("job_03", key="k1")],
    [
        item("job_04", key="k1"),  # the same key and body: the first job again
        item("job_05", key="k1", body="h2"),  # another body: a mismatch
        item("job_06", key="k2"),
        item("job_07", key="k2"),  # a key first used in this very command
        item("job_08", target=REDIS),  # no connection named r yet
        item("job_09", payload={"z": [1.5, "é", None], "a": 2}),
    ],
    [item("job_0a", target=REDIS), item("job_0b"), item("job_0c"), item("job_0d")],  # quota
]


def test_add_jobs_writes_what_create_jobs_writes_and_answers_alike(tmp_path: Path) -> None:
    old = new_store(tmp_path, "old", max_jobs=8)
    new = new_store(tmp_path, "new", max_jobs=8)
    for step, items in enumerate(COMMANDS):
        if step == 2:
            connect(old)
            connect(new)
        ts_ms = NOW_MS + step
        assert new_form(new, items, ts_ms) == old_form(old, items, ts_ms), step
    written = tables(new)
    assert written == tables(old)
    assert len(written["jobs"]) == 8 and len(written["idempotency"]) == 2
    assert written["connection_uses"] == [("job_0a", "t1", "r")]
    quota = new_form(new, [item("job_0e")], NOW_MS + 9)
    assert quota == [{"error": {"code": "quota_exceeded", "message": ANY_QUOTA}}]


ANY_QUOTA = "tenant has reached max_active_jobs"


def keyed(job_id: str, job_key: str, **labels: str) -> dict[str, Any]:
    """An item whose spec has a stable key and labels (level 9)."""
    found = item(job_id)
    found["spec"] = {**found["spec"], "key": job_key, "labels": labels}
    return found


def test_add_jobs_indexes_keys_and_labels_as_create_jobs_does(tmp_path: Path) -> None:
    old = new_store(tmp_path, "old", max_jobs=20)
    new = new_store(tmp_path, "new", max_jobs=20)
    commands = [
        [keyed("job_01", "a", team="x"), keyed("job_02", "b"), item("job_03")],
        [
            keyed("job_04", "a", team="y"),  # taken by job_01
            keyed("job_05", "c", team="x", env="prod"),
            keyed("job_06", "c"),  # taken by job_05, of this very command
        ],
    ]
    for step, items in enumerate(commands):
        assert new_form(new, items, NOW_MS + step) == old_form(old, items, NOW_MS + step), step
    written = tables(new)
    assert written == tables(old)
    assert written["job_keys"] == [
        ("t1", "a", "job_01"),
        ("t1", "b", "job_02"),
        ("t1", "c", "job_05"),
    ]
    assert written["job_labels"] == [
        ("t1", "env", "prod", "job_05"),
        ("t1", "team", "x", "job_01"),
        ("t1", "team", "x", "job_05"),
    ]
    refused = new_form(new, [keyed("job_07", "b")], NOW_MS + 5)
    assert refused == [{"error": {"code": "conflict", "message": ANY_TAKEN}}]


ANY_TAKEN = "key 'b' is taken by job job_02, which is not cancelled"


def test_add_jobs_writes_each_jobs_own_creation_time(tmp_path: Path) -> None:
    """Grouped single creates: the command comes later than the jobs were made (and their next
    runs computed); each job's created_at is its own."""
    new = new_store(tmp_path, "new", max_jobs=8)
    new_form(new, [item("job_01")], NOW_MS + 50, made_ms=NOW_MS + 7)
    job = queries.get_job(new.machine.db.conn, "t1", "job_01")
    assert job is not None
    assert job.created_at == job.updated_at == format_instant(NOW_MS + 7)


def test_the_outcomes_of_add_jobs(tmp_path: Path) -> None:
    apply = new_store(tmp_path, "s", max_jobs=10)
    first = new_form(apply, [item("job_01", key="k"), item("job_02")], NOW_MS)
    assert first == [{"job_id": "job_01", "created": True}, {"job_id": "job_02", "created": True}]
    again = new_form(apply, [item("job_03", key="k"), item("job_04", key="k", body="h2")], NOW_MS)
    assert again[0] == {"job_id": "job_01", "created": False}
    assert again[1]["error"]["code"] == "idempotency_mismatch"
    assert queries.get_job(apply.machine.db.conn, "t1", "job_03") is None


def test_add_jobs_answers_only_what_was_not_created_as_proposed(tmp_path: Path) -> None:
    apply = new_store(tmp_path, "s", max_jobs=2000)
    jobs = tuple(row_of(item(f"job_{i:04x}")) for i in range(1000))
    result = apply.typed(AddJobs(tenant_id="t1", jobs=jobs))
    assert result == {"status": "ok", "created": 1000}


def test_add_jobs_stores_the_spec_text_it_carries(tmp_path: Path) -> None:
    apply = new_store(tmp_path, "s", max_jobs=10)
    row = row_of(item("job_01", payload={"b": 1, "a": [2]}))
    assert row.spec == compact_json(spec(QUEUE, {"b": 1, "a": [2]}))
    apply.typed(AddJobs(tenant_id="t1", jobs=(row,)))
    [(stored,)] = apply.machine.db.conn.execute("SELECT spec FROM jobs").fetchall()
    assert stored == row.spec


def test_the_audit_shows_each_created_job_as_create_jobs_did(tmp_path: Path) -> None:
    apply = new_store(tmp_path, "s", max_jobs=10)
    new_form(apply, [item("job_01"), item("job_02", key="k"), item("job_03", key="k")], NOW_MS)
    conn = apply.machine.db.conn
    records = queries.list_audit(conn, "t1", after=0, limit=10)
    assert [(r.action, r.job_id, r.actor) for r in records] == [
        ("create_tenant", None, "admin"),
        ("create_jobs", "job_01", "tenant:t1"),
        ("create_jobs", "job_02", "tenant:t1"),
    ]
    [one] = queries.list_audit(conn, "t1", after=0, limit=10, job_id="job_02")
    assert one.action == "create_jobs" and one.detail is None


def test_a_job_id_twice_in_one_command_rejects_the_command(tmp_path: Path) -> None:
    apply = new_store(tmp_path, "s", max_jobs=10)
    jobs = (row_of(item("job_01")), row_of(item("job_01")))
    result = apply.typed(AddJobs(tenant_id="t1", jobs=jobs))
    assert result["status"] == "rejected"
    assert apply.machine.db.conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


@pytest.mark.parametrize("tenant_id", ["t2"])
def test_add_jobs_of_an_unknown_tenant_is_rejected(tmp_path: Path, tenant_id: str) -> None:
    apply = new_store(tmp_path, "s", max_jobs=10)
    result = apply.typed(AddJobs(tenant_id=tenant_id, jobs=(row_of(item("job_01")),)))
    assert result["status"] == "rejected" and result["code"] == "tenant_not_found"
