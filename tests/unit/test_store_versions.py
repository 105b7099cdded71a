"""A job's versions (issue 31, log level 8): which commands record one, what each holds, the
versions a job had before its first recorded change, paging, retention, and the create path
left alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schedd.retention import DAY_MS, Retention
from schedd.store.apply import StateMachine
from schedd.store.commands import CancelJob, PauseJob, ResumeJob, UpdateJob
from schedd.store.db import Database
from schedd.store.digest import state_digest
from schedd.store.versions import Version, list_versions, version_view
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_delivery import claimed as claimed

SPEC: dict[str, Any] = {
    "name": "digest",
    "schedule": {"every": "5m", "start_at": "2026-09-21T14:13:20Z"},
    "target": {"type": "queue", "name": "q"},
    "payload": {"n": 1},
}
LATER = NOW_MS + 60_000


def tenant(apply: Applier, tenant_id: str = "t1") -> None:
    body = {
        "tenant_id": tenant_id,
        "name": f"name-{tenant_id}",
        "token_hash": f"hash-{tenant_id}",
        "signing_secret": "whsec_x",
        "max_active_jobs": 100,
        "dispatch_rate": 100,
        "allowed_hosts": [],
    }
    assert apply("create_tenant", body)["status"] == "ok"


def create(apply: Applier, job_id: str = "job_a", *, ts_ms: int = NOW_MS) -> None:
    item = {
        "job_id": job_id,
        "partition": 3,
        "spec": SPEC,
        "next_run_at_ms": LATER,
        "next_fire_at_ms": LATER,
        "idempotency_key": None,
        "request_hash": None,
    }
    body = {"tenant_id": "t1", "actor": "tenant:t1", "jobs": [item]}
    assert apply("create_jobs", body, ts_ms=ts_ms)["status"] == "ok"


def job_version(db: Database, job_id: str = "job_a") -> int:
    return int(
        db.conn.execute("SELECT version FROM jobs WHERE job_id = ?", (job_id,)).fetchone()[0]
    )


def update(
    apply: Applier,
    db: Database,
    spec: dict[str, Any],
    fields: tuple[str, ...],
    *,
    ts_ms: int = NOW_MS + 1_000,
    versioned: bool = False,
) -> dict[str, Any]:
    cmd = UpdateJob(
        tenant_id="t1",
        job_id="job_a",
        actor="tenant:t1",
        expected_version=job_version(db),
        spec=spec,
        next_run_at_ms=LATER,
        next_fire_at_ms=LATER,
        fields=fields,
        versioned=versioned,
    )
    return apply.typed(cmd, ts_ms=ts_ms)


def pause(apply: Applier, *, ts_ms: int, versioned: bool = True) -> dict[str, Any]:
    cmd = PauseJob(tenant_id="t1", job_id="job_a", actor="tenant:t1", versioned=versioned)
    return apply.typed(cmd, ts_ms=ts_ms)


def resume(apply: Applier, db: Database, *, ts_ms: int, versioned: bool = True) -> dict[str, Any]:
    cmd = ResumeJob(
        tenant_id="t1",
        job_id="job_a",
        actor="tenant:t1",
        expected_version=job_version(db),
        next_run_at_ms=LATER,
        next_fire_at_ms=LATER,
        versioned=versioned,
    )
    return apply.typed(cmd, ts_ms=ts_ms)


def cancel(apply: Applier, *, ts_ms: int, versioned: bool = True) -> dict[str, Any]:
    cmd = CancelJob(tenant_id="t1", job_id="job_a", actor="admin", versioned=versioned)
    return apply.typed(cmd, ts_ms=ts_ms)


def rows(db: Database) -> list[tuple[Any, ...]]:
    return db.conn.execute(
        "SELECT job_id, version, change, at_ms, superseded_at_ms FROM job_versions "
        "ORDER BY job_id, version"
    ).fetchall()


def versions(db: Database, job_id: str = "job_a", **page: int) -> list[Version]:
    return list_versions(
        db.conn, job_id, before=page.get("before", 2**62), limit=page.get("limit", 100)
    )


def spec_of(version: Version) -> dict[str, Any] | None:
    return None if version.spec is None else json.loads(version.spec)


def test_versioned_bodies_need_level_8_and_plain_ones_keep_their_bytes() -> None:
    plain = PauseJob(tenant_id="t1", job_id="j")
    assert plain.needed_level() == 1 and "versioned" not in plain.to_body()
    assert PauseJob(tenant_id="t1", job_id="j", versioned=True).needed_level() == 8
    assert CancelJob(tenant_id="t1", job_id="j", versioned=True).needed_level() == 8
    fields: dict[str, Any] = {"expected_version": 1, "next_run_at_ms": 1, "next_fire_at_ms": 1}
    assert ResumeJob(tenant_id="t1", job_id="j", **fields, versioned=True).needed_level() == 8
    change = UpdateJob(tenant_id="t1", job_id="j", spec=SPEC, **fields)
    assert change.needed_level() == 1 and "versioned" not in change.to_body()
    versioned = UpdateJob(tenant_id="t1", job_id="j", spec=SPEC, **fields, versioned=True)
    assert versioned.needed_level() == 8


def test_the_older_forms_write_no_version(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply)
    update(apply, db, SPEC | {"name": "renamed"}, ("name",))
    pause(apply, ts_ms=NOW_MS + 2_000, versioned=False)
    resume(apply, db, ts_ms=NOW_MS + 3_000, versioned=False)
    cancel(apply, ts_ms=NOW_MS + 4_000, versioned=False)
    assert rows(db) == []


def test_a_create_writes_no_version_and_reads_as_version_1(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply)
    assert rows(db) == []
    [first] = versions(db)
    assert first[:5] == (1, NOW_MS, "tenant:t1", "create", None)
    assert spec_of(first) == SPEC


def test_each_level_8_change_records_the_spec_after_it(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply)
    renamed = SPEC | {"name": "renamed", "payload": {"n": 2}}
    assert update(apply, db, renamed, ("name", "payload"), versioned=True)["status"] == "ok"
    assert pause(apply, ts_ms=NOW_MS + 2_000)["status"] == "ok"
    assert resume(apply, db, ts_ms=NOW_MS + 3_000)["status"] == "ok"
    moved = renamed | {"schedule": {"every": "1h", "start_at": "2026-09-21T14:13:20Z"}}
    update(apply, db, moved, ("schedule",), versioned=True, ts_ms=NOW_MS + 4_000)
    assert cancel(apply, ts_ms=NOW_MS + 5_000)["status"] == "ok"
    found = versions(db)
    assert [(v.version, v.change, v.at_ms) for v in found] == [
        (6, "cancel", NOW_MS + 5_000),
        (5, "reschedule", NOW_MS + 4_000),
        (4, "resume", NOW_MS + 3_000),
        (3, "pause", NOW_MS + 2_000),
        (2, "update", NOW_MS + 1_000),
        (1, "create", NOW_MS),
    ]
    assert [spec_of(v) for v in found] == [moved, moved, renamed, renamed, renamed, SPEC]
    assert [v.actor for v in found] == ["admin"] + ["tenant:t1"] * 5
    assert [v.fields for v in found] == [
        None,
        '["schedule"]',
        None,
        None,
        '["name","payload"]',
        None,
    ]
    # Each version but the current one says when the next replaced it (retention counts from it).
    assert [r[4] for r in rows(db)] == [NOW_MS + 1_000 * i for i in range(1, 6)] + [None]


def test_no_change_and_refused_changes_record_nothing(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply)
    pause(apply, ts_ms=NOW_MS + 1_000)
    assert pause(apply, ts_ms=NOW_MS + 2_000)["status"] == "ok"  # already paused
    stale = ResumeJob(
        tenant_id="t1",
        job_id="job_a",
        expected_version=1,
        next_run_at_ms=LATER,
        next_fire_at_ms=LATER,
        versioned=True,
    )
    assert apply.typed(stale)["code"] == "stale_state"
    other = PauseJob(tenant_id="t2", job_id="job_a", versioned=True)
    assert apply.typed(other)["code"] == "job_not_found"
    cancel(apply, ts_ms=NOW_MS + 3_000)
    assert cancel(apply, ts_ms=NOW_MS + 4_000)["status"] == "ok"  # cancelled already
    assert [v.change for v in versions(db)] == ["cancel", "pause", "create"]


def test_changes_made_before_level_8_are_read_from_the_audit_trail(
    apply: Applier, db: Database
) -> None:
    tenant(apply)
    create(apply)
    renamed = SPEC | {"name": "renamed"}
    update(apply, db, renamed, ("name",))  # an older node's form: no version written
    pause(apply, ts_ms=NOW_MS + 2_000, versioned=False)
    expected = [
        (3, NOW_MS + 2_000, "tenant:t1", "pause", None),
        (2, NOW_MS + 1_000, "tenant:t1", "update", '["name"]'),
        (1, NOW_MS, "tenant:t1", "create", None),
    ]
    before = versions(db)
    assert [v[:5] for v in before] == expected
    # The spec is known from the last spec change on; the create's was not kept.
    assert [spec_of(v) for v in before] == [renamed, renamed, None]
    resume(apply, db, ts_ms=NOW_MS + 3_000)  # the first recorded change writes them first
    after = versions(db)
    assert after[1:] == before
    assert after[0][:4] == (4, NOW_MS + 3_000, "tenant:t1", "resume")


def test_pages_go_newest_first_below_the_cursor(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply)
    for i in range(1, 5):
        pause(apply, ts_ms=NOW_MS + 2 * i * 1_000)
        resume(apply, db, ts_ms=NOW_MS + (2 * i + 1) * 1_000)
    assert [v.version for v in versions(db, limit=3)] == [9, 8, 7]
    assert [v.version for v in versions(db, before=7, limit=3)] == [6, 5, 4]
    assert [v.version for v in versions(db, before=2, limit=3)] == [1]
    assert versions(db, before=1) == []
    # An unchanged job pages its synthesized version 1 too.
    create(apply, "job_b")
    assert [v.version for v in versions(db, "job_b", before=2)] == [1]
    assert versions(db, "job_b", before=1) == []


def test_a_version_shows_its_spec_as_the_job_object_does(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply)
    view = version_view("job_a", "t1", versions(db)[0])
    assert view.version == 1 and view.change == "create" and view.changed_by == "tenant:t1"
    assert view.changed_at == "2026-09-21T14:13:20Z"
    assert view.spec is not None
    assert list(view.spec) == [
        "name",
        "schedule",
        "window",
        "target",
        "payload",
        "retry",
        "misfire_policy",
        "overlap_policy",
        "max_runs",
        "on_failure",
        "key",
        "labels",
    ]
    assert view.spec["payload"] == {"n": 1} and view.spec["window"] is None


def _prune(apply: Applier, ts_ms: int, **retention_ms: int) -> dict[str, Any]:
    policy = Retention(**retention_ms).as_ms()
    result = apply("prune", {"retention_ms": policy, "after_tenant": ""}, ts_ms=ts_ms)
    assert result["status"] == "ok", result
    return result


def test_retention_prunes_replaced_versions_with_the_audit_kind(
    apply: Applier, db: Database
) -> None:
    tenant(apply)
    create(apply)
    pause(apply, ts_ms=NOW_MS + 1_000)
    resume(apply, db, ts_ms=NOW_MS + 5 * DAY_MS)
    # Day 3, audit kept 2 days: version 1 was replaced (+1 s) before the cutoff, 2 (day 5) not.
    result = _prune(apply, NOW_MS + 3 * DAY_MS, audit=2 * DAY_MS)
    assert [r[1] for r in rows(db)] == [2, 3]
    assert result["deleted"]["audit"] >= 1
    assert "versions" not in result["deleted"]  # a prune's result keeps its keys
    # Long after: the current version stays while the job does.
    _prune(apply, NOW_MS + 40 * DAY_MS, audit=2 * DAY_MS)
    assert [r[1] for r in rows(db)] == [3]
    assert [v.version for v in versions(db)] == [3]


def test_a_pruned_job_takes_its_versions_along(apply: Applier, db: Database) -> None:
    tenant(apply)
    create(apply)
    create(apply, "job_b")
    cancel(apply, ts_ms=NOW_MS + 1_000)
    _prune(apply, NOW_MS + 10 * DAY_MS, runs=DAY_MS)
    assert db.conn.execute("SELECT job_id FROM jobs").fetchall() == [("job_b",)]
    assert rows(db) == []


def test_the_create_path_runs_no_statement_on_versions(apply: Applier, db: Database) -> None:
    tenant(apply)
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    try:
        create(apply, "job_c")
        row = ["job_d", 1, json.dumps(SPEC), LATER, LATER, None, None, NOW_MS]
        result = apply("add_jobs", {"tenant_id": "t1", "actor": "tenant:t1", "jobs": [row]})
        assert result["status"] == "ok", result
    finally:
        db.conn.set_trace_callback(None)
    assert any("INSERT INTO jobs" in s for s in statements)
    assert not [s for s in statements if "job_versions" in s]


def test_two_stores_applying_the_same_changes_agree(tmp_path: Path) -> None:
    digests = []
    for name in ("a", "b"):
        db = Database(tmp_path / f"{name}.db")
        try:
            apply = Applier(StateMachine(db))
            tenant(apply)
            create(apply)
            update(apply, db, SPEC | {"name": "x"}, ("name",))
            pause(apply, ts_ms=NOW_MS + 2_000)
            cancel(apply, ts_ms=NOW_MS + 3_000)
            digests.append(state_digest(db.conn))
        finally:
            db.close()
    assert digests[0] == digests[1]


@pytest.mark.parametrize("versioned", [False, True])
def test_a_versioned_change_adds_to_the_digest_only_when_used(
    tmp_path: Path, versioned: bool
) -> None:
    digests = []
    for name, flag in (("plain", False), ("other", versioned)):
        db = Database(tmp_path / f"{name}.db")
        try:
            apply = Applier(StateMachine(db))
            tenant(apply)
            create(apply)
            pause(apply, ts_ms=NOW_MS + 2_000, versioned=flag)
            digests.append(state_digest(db.conn))
        finally:
            db.close()
    assert (digests[0] == digests[1]) is not versioned


@pytest.mark.parametrize("versioned", [False, True])
def test_a_410_cancels_the_job_as_a_version_in_the_level_8_form(
    claimed: Applier, db: Database, versioned: bool
) -> None:
    outcome = {
        "seq": 1,
        "attempt": 1,
        "started_at_ms": NOW_MS + 100,
        "finished_at_ms": NOW_MS + 200,
        "verdict": "gone",
        "error": "http 410",
        "retry_at_ms": None,
    }
    body = {"node_id": "n1", "outcomes": [outcome]} | ({"versioned": True} if versioned else {})
    assert claimed("record_callbacks", body, ts_ms=NOW_MS + 300)["dead"] == 1
    found = versions(db, "j1")
    if not versioned:
        assert rows(db) == []  # read from the audit trail: the update and the cancel
        assert [(v.change, v.spec is None) for v in found] == [
            ("cancel", False),
            ("update", False),
            ("create", True),
        ]
        return
    assert [(v.version, v.change) for v in found] == [(3, "cancel"), (2, "update"), (1, "create")]
    assert found[0].actor == "delivery: the target answered 410 Gone"
    assert found[0].at_ms == NOW_MS + 300
