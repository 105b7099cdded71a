"""The state machine: each command's effects and rejections, replay and dedupe rules."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from schedd.errors import CorruptLog
from schedd.store import queries
from schedd.store.apply import StateMachine, machine
from schedd.store.command import Command, encode, encode_batch
from schedd.store.db import Database
from schedd.store.digest import state_digest
from schedd.store.snapshot import restore_snapshot, write_snapshot
from tests.conftest import NOW_MS, Applier

SPEC = {
    "name": None,
    "schedule": {"run_at": "2026-10-01T00:00:00Z"},
    "target": {"type": "queue", "name": "q"},
}


def tenant(apply: Applier, tenant_id: str = "t1", *, max_jobs: int = 10) -> None:
    result = apply(
        "create_tenant",
        {
            "tenant_id": tenant_id,
            "name": f"name-{tenant_id}",
            "token_hash": f"hash-{tenant_id}",
            "signing_secret": "whsec_x",
            "max_active_jobs": max_jobs,
            "dispatch_rate": 100,
            "allowed_hosts": [],
        },
    )
    assert result["status"] == "ok"


def job_item(
    job_id: str, *, run_ms: int = NOW_MS + 60_000, key: str | None = None
) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "partition": 7,
        "spec": SPEC,
        "next_run_at_ms": run_ms,
        "next_fire_at_ms": run_ms,
        "idempotency_key": key,
        "request_hash": None if key is None else "h1",
    }


def create(apply: Applier, *items: dict[str, Any], tenant_id: str = "t1") -> list[dict[str, Any]]:
    result = apply(
        "create_jobs", {"tenant_id": tenant_id, "actor": "tenant:t1", "jobs": list(items)}
    )
    assert result["status"] == "ok", result
    return list(result["results"])


def due_rows(db: Database) -> list[tuple[Any, ...]]:
    return db.conn.execute("SELECT partition, fire_at_ms, job_id, is_trigger FROM due").fetchall()


def test_create_job_writes_job_due_row_and_audit(apply: Applier, db: Database) -> None:
    tenant(apply)
    assert create(apply, job_item("job_a")) == [{"job_id": "job_a", "created": True}]
    job = queries.get_job(db.conn, "t1", "job_a")
    assert job is not None
    assert job.status == "active" and job.version == 1
    assert job.next_run_at == "2026-09-21T14:14:20Z"
    assert due_rows(db) == [(7, NOW_MS + 60_000, "job_a", 0)]
    actions = [r.action for r in queries.list_audit(db.conn, "t1", after=0, limit=10)]
    assert actions == ["create_tenant", "create_jobs"]


def test_other_tenant_cannot_see_or_cancel_a_job(apply: Applier, db: Database) -> None:
    tenant(apply, "t1")
    tenant(apply, "t2")
    create(apply, job_item("job_a"))
    assert queries.get_job(db.conn, "t2", "job_a") is None
    result = apply("cancel_job", {"tenant_id": "t2", "job_id": "job_a"})
    assert result["code"] == "job_not_found"


def test_quota_rejects_jobs_beyond_max_active(apply: Applier, db: Database) -> None:
    tenant(apply, max_jobs=2)
    results = create(apply, job_item("a"), job_item("b"), job_item("c"))
    assert [r.get("created") for r in results] == [True, True, None]
    assert results[2]["error"]["code"] == "quota_exceeded"
    apply("cancel_job", {"tenant_id": "t1", "job_id": "a"})
    assert create(apply, job_item("d")) == [{"job_id": "d", "created": True}]


def test_idempotency_key_returns_first_job_or_mismatch(apply: Applier) -> None:
    tenant(apply)
    create(apply, job_item("a", key="k"))
    assert create(apply, job_item("b", key="k")) == [{"job_id": "a", "created": False}]
    other = job_item("c", key="k") | {"request_hash": "different"}
    assert create(apply, other)[0]["error"]["code"] == "idempotency_mismatch"


def test_cancel_removes_due_rows_and_repeats_quietly(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply, job_item("a"))
    apply("trigger_job", {"tenant_id": "t1", "job_id": "a", "scheduled_at_ms": NOW_MS})
    assert len(due_rows(db)) == 2
    assert apply("cancel_job", {"tenant_id": "t1", "job_id": "a"})["status"] == "ok"
    assert due_rows(db) == []
    assert apply("cancel_job", {"tenant_id": "t1", "job_id": "a"})["status"] == "ok"
    job = queries.get_job(db.conn, "t1", "a")
    assert job is not None and job.status == "cancelled" and job.version == 2


def test_pause_resume_moves_the_due_row(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply, job_item("a"))
    assert apply("pause_job", {"tenant_id": "t1", "job_id": "a"})["status"] == "ok"
    assert due_rows(db) == []
    stale = apply(
        "resume_job",
        {
            "tenant_id": "t1",
            "job_id": "a",
            "expected_version": 1,
            "next_run_at_ms": 5,
            "next_fire_at_ms": 5,
        },
    )
    assert stale["code"] == "stale_state"
    resumed = apply(
        "resume_job",
        {
            "tenant_id": "t1",
            "job_id": "a",
            "expected_version": 2,
            "next_run_at_ms": 9,
            "next_fire_at_ms": 9,
        },
    )
    assert resumed["status"] == "ok"
    assert due_rows(db) == [(7, 9, "a", 0)]


def test_resume_of_cancelled_job_is_a_conflict(apply: Applier) -> None:
    tenant(apply)
    create(apply, job_item("a"))
    apply("cancel_job", {"tenant_id": "t1", "job_id": "a"})
    result = apply(
        "resume_job",
        {
            "tenant_id": "t1",
            "job_id": "a",
            "expected_version": 2,
            "next_run_at_ms": 9,
            "next_fire_at_ms": 9,
        },
    )
    assert result["code"] == "conflict"


def test_update_replaces_spec_and_due_row_with_version_check(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply, job_item("a"))
    body = {
        "tenant_id": "t1",
        "job_id": "a",
        "spec": SPEC | {"name": "x"},
        "next_run_at_ms": 42,
        "next_fire_at_ms": 43,
    }
    assert apply("update_job", body | {"expected_version": 7})["code"] == "stale_state"
    assert apply("update_job", body | {"expected_version": 1})["status"] == "ok"
    assert due_rows(db) == [(7, 43, "a", 0)]
    job = queries.get_job(db.conn, "t1", "a")
    assert job is not None and job.name == "x" and job.version == 2


def test_replayed_index_is_skipped(db: Database) -> None:
    machine = StateMachine(db)
    cmd = Command(
        type="create_tenant",
        id="x",
        ts_ms=NOW_MS,
        body={
            "tenant_id": "t",
            "name": "n",
            "token_hash": "h",
            "signing_secret": "s",
            "max_active_jobs": 1,
            "dispatch_rate": 1,
            "allowed_hosts": [],
        },
    )
    assert machine.apply(encode(cmd), index=1)["status"] == "ok"
    assert machine.apply(encode(cmd), index=1) == {"status": "replayed"}
    assert db.applied_index == 1


def test_same_command_id_acts_once(apply: Applier, db: Database) -> None:
    tenant(apply)
    cmd = Command(
        type="create_jobs",
        id="fixed",
        ts_ms=NOW_MS,
        body={"tenant_id": "t1", "jobs": [job_item("a")]},
    )
    first = apply.blob(encode(cmd))
    second = apply.blob(encode(cmd))
    assert first == second
    assert db.conn.execute("SELECT COUNT(*) FROM jobs").fetchone() == (1,)


def test_undecodable_entry_and_unknown_type_halt(apply: Applier) -> None:
    with pytest.raises(CorruptLog):
        apply.blob(b"\x80not json")
    with pytest.raises(CorruptLog):
        apply("drop_everything", {})


def test_handler_bug_is_recorded_as_rejection_and_does_not_wedge(
    apply: Applier, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant(apply)

    def buggy(tx: sqlite3.Connection, cmd: Command[Any]) -> Any:
        tx.execute(
            "INSERT INTO nodes (node_id, api, raft, registered_at_ms) VALUES ('x', '', '', 0)"
        )
        raise KeyError("a bug")

    monkeypatch.setitem(machine.HANDLERS, "barrier", buggy)  # type: ignore[index]
    result = apply("barrier", {})
    assert result["status"] == "rejected" and result["code"] == "internal"
    assert db.conn.execute("SELECT COUNT(*) FROM nodes").fetchone() == (0,)  # rolled back
    assert db.applied_index == apply.index
    assert create(apply, job_item("b"))[0]["created"] is True  # the canary write


def test_a_body_that_does_not_fit_its_type_halts_as_corrupt_log(
    apply: Applier, db: Database
) -> None:
    tenant(apply)
    before = db.applied_index
    missing = "missing required field `partition` - at `$.jobs[0]`"
    with pytest.raises(CorruptLog, match=re.escape(missing)):
        apply("create_jobs", {"tenant_id": "t1", "jobs": [{"job_id": "a"}]})  # no fields
    assert db.applied_index == before  # nothing applied: the node stops here


def test_digest_is_equal_for_equal_histories(tmp_path: Any) -> None:
    digests = []
    for name in ("a", "b"):
        database = Database(tmp_path / f"{name}.db")
        applier = Applier(StateMachine(database))
        tenant(applier)
        create(applier, job_item("j1"), job_item("j2"))
        applier("cancel_job", {"tenant_id": "t1", "job_id": "j1"})
        digests.append(state_digest(database.conn))
        database.close()
    assert digests[0] == digests[1]
    assert digests[0][0] == 3


def test_tenant_update_and_rotate(apply: Applier, db: Database) -> None:
    tenant(apply, "t1")
    tenant(apply, "t2")
    renamed = apply(
        "update_tenant", {"tenant_id": "t1", "changes": {"name": "acme", "dispatch_rate": 7}}
    )
    assert renamed["status"] == "ok"
    taken = apply("update_tenant", {"tenant_id": "t2", "changes": {"name": "acme"}})
    assert taken["code"] == "tenant_exists"
    found = queries.get_tenant(db.conn, "t1")
    assert found is not None and found.name == "acme" and found.dispatch_rate == 7
    rotated = apply(
        "rotate_tenant", {"tenant_id": "t1", "token_hash": "new", "signing_secret": "s2"}
    )
    assert rotated["status"] == "ok"
    assert queries.tenant_by_token_hash(db.conn, "hash-t1") is None
    again = queries.tenant_by_token_hash(db.conn, "new")
    assert again is not None and again.tenant_id == "t1" and again.signing_secret == "s2"
    missing = apply(
        "rotate_tenant", {"tenant_id": "nope", "token_hash": "x", "signing_secret": "y"}
    )
    assert missing["code"] == "tenant_not_found"


def test_duplicate_tenant_name_is_rejected(apply: Applier) -> None:
    tenant(apply, "t1")
    body = {
        "tenant_id": "t9",
        "name": "name-t1",
        "token_hash": "h9",
        "signing_secret": "s",
        "max_active_jobs": 1,
        "dispatch_rate": 1,
        "allowed_hosts": [],
    }
    assert apply("create_tenant", body)["code"] == "tenant_exists"


def test_register_node_upserts_addresses(apply: Applier, db: Database) -> None:
    apply("register_node", {"node_id": "n1", "api": "http://a:1", "raft": "a:2"})
    apply("register_node", {"node_id": "n1", "api": "http://a:3", "raft": "a:2"})
    assert queries.list_nodes(db.conn) == [("n1", "http://a:3", "a:2")]


def test_batch_entry_applies_each_command_in_its_own_savepoint(
    apply: Applier, db: Database
) -> None:
    tenant(apply)
    good = Command(
        type="create_jobs", id="g", ts_ms=NOW_MS, body={"tenant_id": "t1", "jobs": [job_item("a")]}
    )
    broken = Command(
        type="create_jobs",
        id="b",
        ts_ms=NOW_MS,
        body={"tenant_id": "t1", "jobs": [job_item("a")]},  # job "a" again: IntegrityError
    )
    later = Command(
        type="create_jobs", id="l", ts_ms=NOW_MS, body={"tenant_id": "t1", "jobs": [job_item("c")]}
    )
    result = apply.blob(
        encode_batch([encode(good), encode(broken), encode(later)], id="batch-1", ts_ms=NOW_MS)
    )
    assert result["status"] == "ok"
    codes = [r.get("code", r["status"]) for r in result["results"]]
    assert codes == ["ok", "internal", "ok"]
    assert sorted(r[0] for r in db.conn.execute("SELECT job_id FROM jobs")) == ["a", "c"]
    # A retry of the whole batch acts once: each command's id is remembered.
    again = apply.blob(encode_batch([encode(good), encode(later)], id="batch-2", ts_ms=NOW_MS))
    assert [r["results"] for r in again["results"]] == [
        result["results"][0]["results"],
        result["results"][2]["results"],
    ]
    assert db.conn.execute("SELECT COUNT(*) FROM jobs").fetchone() == (2,)


def test_an_entry_an_installed_snapshot_holds_answers_its_first_result(
    apply: Applier, db: Database, tmp_path: Path
) -> None:
    """pysyncobj re-applies the entries after the index it compacted at; the snapshot's copy,
    taken while apply went on, may hold some of them, and this node may wait for one."""
    follower = StateMachine(Database(tmp_path / "follower" / "state.db"))
    try:
        tenant(apply)
        single = encode(_create_cmd("single", "a"))
        batch = encode_batch(
            [encode(_create_cmd("in-batch-1", "b")), encode(_create_cmd("in-batch-2", "a"))],
            id="batch",
            ts_ms=NOW_MS,
        )
        first = [apply.blob(single), apply.blob(batch)]
        write_snapshot(db.path, tmp_path / "snapshot", b"raft state")
        restore_snapshot(follower.db, tmp_path / "snapshot")
        again = [follower.apply(single, index=2), follower.apply(batch, index=3)]
        assert again == first
        # Even the batch's Idempotency-Key replay answers as it first did (job a, not created).
        assert first[1]["results"][1]["results"][0]["created"] is False
    finally:
        follower.db.close()


def _create_cmd(command_id: str, job_id: str) -> Command:
    return Command(
        type="create_jobs",
        id=command_id,
        ts_ms=NOW_MS,
        body={"tenant_id": "t1", "jobs": [job_item(job_id, key=f"key-{job_id}")]},
    )
