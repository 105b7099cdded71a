"""Tenants' broker connections in the state machine: create and delete, the jobs that use one,
the order of a job and a concurrent delete, what results, audit and readers show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from schedd.sealing import PayloadKeys, new_key_line
from schedd.store import connections as reads
from schedd.store.apply import StateMachine
from schedd.store.apply.connections import MAX_CONNECTIONS
from schedd.store.commands import (
    BROKER_TARGET_LEVEL,
    CreateConnection,
    CreateJobs,
    DeleteConnection,
    NewJob,
    UpdateJob,
)
from schedd.store.db import Database
from schedd.store.digest import state_digest
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_dispatch import claim, setup, spec

URL = "redis://digest-user:s3cret-pw@redis.acme.example:6379/0"
REDIS = {"type": "redis_stream", "connection": "r", "stream": "digests"}
NATS = {"type": "nats", "connection": "n", "subject": "a.b"}


def connect(
    apply: Applier, name: str = "r", *, kind: str = "redis", url: str = URL, tenant: str = "t1"
) -> dict[str, Any]:
    cmd = CreateConnection(
        tenant_id=tenant,
        name=name,
        kind=kind,
        url=url,
        host="redis.acme.example:6379",
        addresses=("203.0.113.7",),
        actor=f"tenant:{tenant}",
    )
    return apply.typed(cmd)


def drop(apply: Applier, name: str = "r") -> dict[str, Any]:
    return apply.typed(DeleteConnection(tenant_id="t1", name=name, actor="tenant:t1"))


def new_job(apply: Applier, job_id: str, target: dict[str, Any], **schedule: Any) -> dict[str, Any]:
    item = NewJob(
        job_id=job_id,
        partition=3,
        spec=spec(schedule or {"every": "1m"}, target=target),
        next_run_at_ms=NOW_MS,
        next_fire_at_ms=NOW_MS,
        idempotency_key=None,
        request_hash=None,
    )
    result = apply.typed(CreateJobs(tenant_id="t1", jobs=(item,)))
    assert result["status"] == "ok", result
    outcome: dict[str, Any] = result["results"][0]
    return outcome


def uses(db: Database) -> list[tuple[str, str, str]]:
    return db.conn.execute("SELECT job_id, tenant_id, name FROM connection_uses").fetchall()


@pytest.fixture
def tenant(apply: Applier) -> Applier:
    setup(apply, job_id="q1")  # tenant t1, nodes, partition 3 leased to n1, a queue job
    return apply


def test_create_keeps_the_url_but_no_result_or_audit_record_shows_it(
    tenant: Applier, db: Database
) -> None:
    result = connect(tenant)
    assert result == {
        "status": "ok",
        "name": "r",
        "kind": "redis",
        "host": "redis.acme.example:6379",
        "created_at_ms": NOW_MS,
    }
    row = db.conn.execute("SELECT kind, url, host, addresses FROM connections").fetchone()
    assert row == ("redis", URL, "redis.acme.example:6379", '["203.0.113.7"]')
    everything_but_the_table = [
        *db.conn.execute("SELECT result FROM applied_commands"),
        *db.conn.execute("SELECT detail FROM audit"),
    ]
    assert not any("s3cret" in str(row) for row in everything_but_the_table)
    [detail] = db.conn.execute("SELECT detail FROM audit WHERE action = 'create_connection'")
    assert json.loads(detail[0]) == {
        "name": "r",
        "kind": "redis",
        "host": "redis.acme.example:6379",
    }


def test_a_name_is_taken_once_per_tenant_and_a_tenant_has_a_bounded_number(
    tenant: Applier,
) -> None:
    connect(tenant)
    again = connect(tenant, url="redis://other:6379")
    assert again["status"] == "rejected" and again["code"] == "connection_exists"
    for i in range(1, MAX_CONNECTIONS):
        assert connect(tenant, f"c{i}")["status"] == "ok"
    over = connect(tenant, "one-more")
    assert over["status"] == "rejected" and over["code"] == "quota_exceeded"
    unknown_tenant = connect(tenant, "x", tenant="t9")
    assert unknown_tenant["code"] == "tenant_not_found"


def test_a_job_needs_a_connection_of_its_tenant_and_of_its_kind(tenant: Applier) -> None:
    missing = new_job(tenant, "j1", REDIS)
    assert missing["error"]["code"] == "invalid_request"
    assert missing["error"]["message"].startswith("target.connection: no connection named 'r'")
    connect(tenant, "n")  # a redis connection under the name a NATS target asks for
    wrong = new_job(tenant, "j1", NATS)
    assert wrong["error"]["message"] == (
        "target.connection: connection 'n' is a redis connection, this target needs a nats one"
    )
    connect(tenant)
    assert new_job(tenant, "j1", REDIS) == {"job_id": "j1", "created": True}


def test_delete_is_refused_while_a_live_job_uses_the_connection(
    tenant: Applier, db: Database
) -> None:
    connect(tenant)
    new_job(tenant, "j1", REDIS)
    new_job(tenant, "j2", REDIS)
    assert uses(db) == [("j1", "t1", "r"), ("j2", "t1", "r")]
    tenant("pause_job", {"tenant_id": "t1", "job_id": "j2"})
    tenant("cancel_job", {"tenant_id": "t1", "job_id": "j1"})
    refused = drop(tenant)
    assert refused["status"] == "rejected" and refused["code"] == "connection_in_use"
    assert "(j2)" in refused["message"]  # paused is live; the cancelled j1 is not named
    tenant("cancel_job", {"tenant_id": "t1", "job_id": "j2"})
    assert uses(db) == []
    assert drop(tenant) == {"status": "ok"}
    assert drop(tenant)["code"] == "connection_not_found"


def test_the_in_use_message_names_three_jobs_and_says_there_are_more(tenant: Applier) -> None:
    connect(tenant)
    for i in range(5):
        new_job(tenant, f"j{i}", REDIS)
    message = drop(tenant)["message"]
    assert "(j0, j1, j2 and more)" in message


def test_a_job_created_after_the_delete_in_the_log_is_refused(tenant: Applier) -> None:
    # Two API nodes: one read the connection and proposed a job, the other deleted it; the
    # log put the delete first. Every replica refuses the job alike.
    connect(tenant)
    assert drop(tenant)["status"] == "ok"
    late = new_job(tenant, "j1", REDIS)
    assert late["error"]["code"] == "invalid_request"
    assert "target.connection" in late["error"]["message"]


def test_a_delete_after_the_job_in_the_log_is_refused(tenant: Applier) -> None:
    connect(tenant)
    new_job(tenant, "j1", REDIS)
    assert drop(tenant)["code"] == "connection_in_use"


def test_changing_a_jobs_target_moves_its_use(tenant: Applier, db: Database) -> None:
    connect(tenant)
    connect(tenant, "n", kind="nats", url="nats://nats.acme.example")
    new_job(tenant, "j1", REDIS)
    update = UpdateJob(
        tenant_id="t1",
        job_id="j1",
        expected_version=1,
        spec=spec({"every": "1m"}, target=NATS),
        next_run_at_ms=NOW_MS,
        next_fire_at_ms=NOW_MS,
    )
    assert tenant.typed(update)["status"] == "ok"
    assert uses(db) == [("j1", "t1", "n")]
    assert drop(tenant) == {"status": "ok"}
    to_queue = UpdateJob(
        tenant_id="t1",
        job_id="j1",
        expected_version=2,
        spec=spec({"every": "1m"}),
        next_run_at_ms=NOW_MS,
        next_fire_at_ms=NOW_MS,
    )
    assert tenant.typed(to_queue)["status"] == "ok"
    assert uses(db) == []


def test_a_change_to_a_missing_connection_is_refused(tenant: Applier) -> None:
    connect(tenant)
    new_job(tenant, "j1", REDIS)
    update = UpdateJob(
        tenant_id="t1",
        job_id="j1",
        expected_version=1,
        spec=spec({"every": "1m"}, target=NATS),
        next_run_at_ms=NOW_MS,
        next_fire_at_ms=NOW_MS,
    )
    result = tenant.typed(update)
    assert result["status"] == "rejected" and result["code"] == "invalid_request"
    assert result["message"].startswith("target.connection: no connection named 'n'")


def test_a_one_time_job_completed_by_its_claim_no_longer_uses_its_connection(
    tenant: Applier, db: Database
) -> None:
    connect(tenant)
    new_job(tenant, "j1", REDIS, run_at="2026-09-21T14:13:20Z")
    assert uses(db) == [("j1", "t1", "r")]
    result = claim(tenant, next_ms=None)
    assert result["status"] == "ok" and result["claimed"] == 1, result
    assert db.conn.execute("SELECT status FROM jobs WHERE job_id = 'j1'").fetchone() == (
        "completed",
    )
    outbox = db.conn.execute("SELECT target FROM outbox").fetchall()
    assert [json.loads(t)["type"] for (t,) in outbox] == ["redis_stream"]
    assert uses(db) == []
    assert drop(tenant) == {"status": "ok"}


def test_a_recurring_jobs_claim_keeps_its_use(tenant: Applier, db: Database) -> None:
    connect(tenant)
    new_job(tenant, "j1", REDIS)
    assert claim(tenant)["claimed"] == 1
    assert uses(db) == [("j1", "t1", "r")]


def test_the_in_use_check_reads_an_index_not_the_jobs(db: Database) -> None:
    plan = db.conn.execute(
        "EXPLAIN QUERY PLAN SELECT job_id FROM connection_uses WHERE tenant_id = ? AND name = ? "
        "ORDER BY job_id LIMIT 4",
        ("t1", "r"),
    ).fetchall()
    details = " ".join(row[-1] for row in plan)
    assert "USING COVERING INDEX connection_uses_by_name (tenant_id=? AND name=?)" in details
    assert "jobs" not in details and "TEMP B-TREE" not in details


def test_replicas_applying_the_same_commands_agree(tmp_path: Path) -> None:
    digests = []
    for name in ("a", "b"):
        db = Database(tmp_path / f"{name}.db")
        try:
            apply = Applier(StateMachine(db))
            setup(apply, job_id="q1")
            connect(apply)
            new_job(apply, "j1", REDIS)
            drop(apply)
            apply("cancel_job", {"tenant_id": "t1", "job_id": "j1"})
            drop(apply)
            connect(apply)
            digests.append(state_digest(db.conn))
        finally:
            db.close()
    assert digests[0] == digests[1]


def test_an_unused_connections_table_leaves_the_digest_as_before(
    tenant: Applier, db: Database
) -> None:
    before = state_digest(db.conn)[1]
    connect(tenant)
    with_one = state_digest(db.conn)[1]
    drop(tenant)
    assert with_one != before
    # The index moved on, the content is as before (applied_commands and audit aside):
    db.conn.execute("DELETE FROM applied_commands WHERE command_id IN ('cmd-6', 'cmd-7')")
    db.conn.execute("DELETE FROM audit WHERE action LIKE '%_connection'")
    db.conn.commit()
    assert state_digest(db.conn)[1] == before


def test_the_deliverers_reader_opens_a_sealed_url(tenant: Applier, db: Database) -> None:
    keys = PayloadKeys.from_file(_key_file(db))
    sealed = keys.seal(URL)
    assert isinstance(sealed, str) and "s3cret" not in sealed
    connect(tenant, url=sealed)
    found = reads.broker_connection(db.conn, keys, "t1", "r")
    assert found is not None
    assert (found.url, found.kind, found.pinned_addresses) == (URL, "redis", ("203.0.113.7",))
    assert found.created_ms == NOW_MS
    assert reads.broker_connection(db.conn, keys, "t1", "other") is None
    assert reads.broker_connection(db.conn, keys, "t2", "r") is None  # another tenant's name
    [shown] = reads.list_connections(db.conn, "t1")
    assert msgspec.structs.asdict(shown.view()) == {
        "name": "r",
        "kind": "redis",
        "host": "redis.acme.example:6379",
        "created_at": "2026-09-21T14:13:20Z",
    }


def _key_file(db: Database) -> Path:
    path = Path(db.path).parent / "keys"
    path.write_text(new_key_line("k1") + "\n")
    return path


def test_jobs_with_broker_targets_need_log_level_3() -> None:
    def item(target: dict[str, Any]) -> NewJob:
        return NewJob(
            job_id="j",
            partition=0,
            spec={"target": target},
            next_run_at_ms=None,
            next_fire_at_ms=None,
            idempotency_key=None,
            request_hash=None,
        )

    queue = {"type": "queue", "name": "q"}
    assert CreateJobs(tenant_id="t", jobs=()).needed_level() == 1
    assert CreateJobs(tenant_id="t", jobs=(item(queue),)).needed_level() == 1
    both = CreateJobs(tenant_id="t", jobs=(item(queue), item(NATS)))
    assert both.needed_level() == BROKER_TARGET_LEVEL == 3
    change = UpdateJob(
        tenant_id="t",
        job_id="j",
        expected_version=1,
        spec={"target": REDIS},
        next_run_at_ms=None,
        next_fire_at_ms=None,
    )
    assert change.needed_level() == 3
    assert DeleteConnection(tenant_id="t", name="r").needed_level() == 3
