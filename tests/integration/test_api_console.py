"""What the web console asks of the API, over real HTTP: filtered job lists, one job's audit
trail, and redriving dead letters in a batch (issue 18); the batch's commands also in process."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer

from schedd.api.app import build_app
from schedd.api.context import ApiContext, RaftStatus
from schedd.raft.proposer import Proposer
from schedd.store.apply import StateMachine
from schedd.store.commands import Barrier, LogCommand, R, RedriveDeadletter
from schedd.store.db import Database, ReadPool
from tests.integration.api_helpers import (
    Tenant,
    assert_error,
    create_job,
    job_body,
    new_tenant,
    state,
)
from tests.integration.test_api_commands import LocalReplica
from tests.servers import ADMIN_TOKEN, NodeProcess, http, wait_for

NO_RETRY = {"max_attempts": 1, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


def hook(url: str) -> dict[str, Any]:
    return {"type": "http", "url": url}


def listed(node: NodeProcess, token: str, **query: str | int) -> list[str]:
    """The job ids of every page of GET /v1/jobs with `query`, following next_cursor."""
    ids: list[str] = []
    cursor = ""
    for _ in range(1000):
        params = urllib.parse.urlencode({**query, "cursor": cursor})
        status, page, _ = http("GET", f"{node.url}/v1/jobs?{params}", token=token)
        assert status == 200, page
        ids += [job["job_id"] for job in page["jobs"]]
        if page["next_cursor"] is None:
            return ids
        cursor = page["next_cursor"]
    raise AssertionError("next_cursor never ended")


# ---------------------------------------------------------------- GET /v1/jobs filters


@pytest.fixture(scope="module")
def jobs(node: NodeProcess) -> tuple[Tenant, dict[str, str]]:
    """A tenant with jobs of each kind, by a short name; and another tenant's like one."""
    tenant, other = new_tenant(node), new_tenant(node)
    bodies = {
        "emails": job_body(name="Nightly Emails", target={"type": "queue", "name": "emails"}),
        "reports": job_body(name="weekly report", target={"type": "queue", "name": "reports"}),
        "hook": job_body(name="nightly hook", target=hook("https://Hooks.Example/a?b=1")),
        "other_hook": job_body(target=hook("https://other.example/a")),
        "later": job_body(schedule={"run_at": "2031-01-01T00:00:00Z"}, name="NIGHTLY later"),
    }
    made = {key: create_job(node, tenant.token, body)["job_id"] for key, body in bodies.items()}
    create_job(node, other.token, bodies["hook"])
    done = http("POST", f"{node.url}/v1/jobs/{made['reports']}/pause", token=tenant.token)
    assert done[0] == 200
    return tenant, made


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"target_type": "queue"}, ["emails", "reports", "later"]),
        ({"target_type": "http"}, ["hook", "other_hook"]),
        ({"target_type": "nats"}, []),
        ({"queue": "emails"}, ["emails"]),
        ({"host": "HOOKS.example"}, ["hook"]),
        ({"name": "nightly"}, ["emails", "hook", "later"]),
        ({"name": "NIGHTLY", "target_type": "queue"}, ["emails", "later"]),
        ({"next_run_after": "2030-12-31T23:00:00+01:00"}, ["later"]),
        # the paused job has no next run: it matches neither bound
        ({"next_run_before": "2030-01-01T00:00:00Z"}, ["emails", "hook", "other_hook"]),
        ({"status": "paused", "target_type": "queue"}, ["reports"]),
        ({"status": "active", "queue": "reports"}, []),
    ],
)
def test_filters_list_the_matching_jobs_of_the_tenant_only(
    node: NodeProcess,
    jobs: tuple[Tenant, dict[str, str]],
    query: dict[str, str],
    expected: list[str],
) -> None:
    tenant, made = jobs
    assert listed(node, tenant.token, **query) == sorted(made[key] for key in expected)


def test_a_filtered_list_pages_with_its_limit(
    node: NodeProcess, jobs: tuple[Tenant, dict[str, str]]
) -> None:
    tenant, made = jobs
    query = urllib.parse.urlencode({"name": "nightly", "limit": 2})
    status, page, _ = http("GET", f"{node.url}/v1/jobs?{query}", token=tenant.token)
    assert status == 200 and len(page["jobs"]) == 2 and page["next_cursor"], page
    everything = listed(node, tenant.token, name="nightly", limit=2)
    assert everything == sorted(made[key] for key in ("emails", "hook", "later"))


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"target_type": "ftp"}, "target_type"),
        ({"queue": "no spaces"}, "queue"),
        ({"queue": ""}, "queue"),
        ({"host": "example.com:443"}, "host"),
        ({"host": "a b"}, "host"),
        ({"host": "x" * 254}, "host"),
        ({"name": ""}, "name"),
        ({"name": "n" * 201}, "name"),
        ({"next_run_after": "tomorrow"}, "next_run_after"),
        ({"next_run_before": "2030-01-01T00:00:00"}, "next_run_before"),
        (
            {"next_run_after": "2030-01-02T00:00:00Z", "next_run_before": "2030-01-01T00:00:00Z"},
            "next_run_before",
        ),
        ({"status": "sleeping", "host": "a.example"}, "status"),
    ],
)
def test_a_bad_filter_is_400_naming_it(
    node: NodeProcess, query: dict[str, str], field: str
) -> None:
    tenant = new_tenant(node)
    status, body, _ = http(
        "GET", f"{node.url}/v1/jobs?{urllib.parse.urlencode(query)}", token=tenant.token
    )
    error = assert_error(status, body, 400, "invalid_request")
    assert error["message"].startswith(f"{field}: "), error


def test_a_filtered_page_examines_10000_jobs_and_may_be_empty_with_a_cursor(
    node: NodeProcess,
) -> None:
    tenant = new_tenant(node, max_active_jobs=20_000)
    for _ in range(10):
        items = [job_body() for _ in range(1000)]
        status, _, _ = http(
            "POST", f"{node.url}/v1/jobs:batch", {"jobs": items}, token=tenant.token
        )
        assert status == 200
    needle = create_job(node, tenant.token, job_body(name="needle"))["job_id"]
    first_url = f"{node.url}/v1/jobs?name=needle&limit=5"
    status, first, _ = http("GET", first_url, token=tenant.token)
    assert status == 200 and first["jobs"] == [] and first["next_cursor"], first
    status, second, _ = http(
        "GET", f"{first_url}&cursor={first['next_cursor']}", token=tenant.token
    )
    assert status == 200, second
    assert ([j["job_id"] for j in second["jobs"]], second["next_cursor"]) == ([needle], None)


# ---------------------------------------------------------------- GET /v1/audit?job_id=


def audit_of(
    node: NodeProcess, token: str, job_id: str, headers: dict[str, str] | None = None
) -> list[tuple[str, str | None]]:
    query = urllib.parse.urlencode({"job_id": job_id})
    status, page, _ = http("GET", f"{node.url}/v1/audit?{query}", token=token, headers=headers)
    assert status == 200, page
    return [(record["action"], record["job_id"]) for record in page["audit"]]


def test_a_jobs_audit_trail_holds_its_own_records_in_order(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job_id = create_job(node, tenant.token)["job_id"]
    create_job(node, tenant.token)
    assert http("POST", f"{node.url}/v1/jobs/{job_id}/pause", token=tenant.token)[0] == 200
    assert http("DELETE", f"{node.url}/v1/jobs/{job_id}", token=tenant.token)[0] == 204
    expected = [("create_jobs", job_id), ("pause_job", job_id), ("cancel_job", job_id)]
    assert audit_of(node, tenant.token, job_id) == expected
    assert audit_of(node, ADMIN_TOKEN, job_id) == expected  # the admin sees every tenant's
    as_tenant = {"X-Tenant": tenant.tenant_id}
    assert audit_of(node, ADMIN_TOKEN, job_id, headers=as_tenant) == expected


def test_another_tenants_job_has_no_audit_trail_here(node: NodeProcess) -> None:
    owner, other = new_tenant(node), new_tenant(node)
    job_id = create_job(node, owner.token)["job_id"]
    assert audit_of(node, other.token, job_id) == []
    assert audit_of(node, owner.token, "job_" + "0" * 24) == []


@pytest.mark.parametrize("job_id", ["", "a b", "j" * 129])
def test_a_bad_audit_job_id_is_400(node: NodeProcess, job_id: str) -> None:
    query = urllib.parse.urlencode({"job_id": job_id})
    status, body, _ = http("GET", f"{node.url}/v1/audit?{query}", token=new_tenant(node).token)
    assert assert_error(status, body, 400, "invalid_request")["message"].startswith("job_id: ")


# ---------------------------------------------------------------- POST /v1/deadletters:redrive


def dead_letters(node: NodeProcess, tenant: Tenant, count: int) -> list[str]:
    """`count` dead letters of `tenant`: runs of one-attempt jobs, each nacked once."""
    queue = "dying"
    for _ in range(count):
        body = job_body(schedule={"delay": "0s"}, target={"type": "queue", "name": queue})
        create_job(node, tenant.token, body | {"retry": NO_RETRY})
    receipts: list[str] = []
    for _ in range(30):
        wanted = {"max": 10, "wait": "1s", "visibility_timeout": "30s"}
        _, got, _ = http(
            "POST", f"{node.url}/v1/queues/{queue}/receive", wanted, token=tenant.token
        )
        receipts += [m["receipt"] for m in got["messages"]]
        if len(receipts) == count:
            break
    assert len(receipts) == count, node.log_tail()
    nacked = {"receipts": receipts, "error": "made to fail"}
    assert http("POST", f"{node.url}/v1/queues/{queue}/nack", nacked, token=tenant.token)[0] == 200
    _, page, _ = http("GET", f"{node.url}/v1/deadletters", token=tenant.token)
    ids = [item["id"] for item in page["deadletters"]]
    assert len(ids) == count, page
    # The jobs' completions (deferred by their claim, log level 5) are written by the leader's
    # pruner once their batch closed: wait for them, or a later test's "changes nothing" sees
    # that background write.
    wait_for(lambda: _no_pending_completions(node), 30.0, "the deferred completions written")
    return ids


def _no_pending_completions(node: NodeProcess) -> bool:
    conn = sqlite3.connect(f"file:{node.data_dir / 'state.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM completions").fetchone() == (0,)
    finally:
        conn.close()


def test_redrive_answers_each_id_in_order_and_redrives_only_the_callers(
    node: NodeProcess,
) -> None:
    tenant, other = new_tenant(node), new_tenant(node)
    mine, [theirs] = dead_letters(node, tenant, 3), dead_letters(node, other, 1)
    unknown = "job_" + "0" * 24 + ":1796028778162"
    ids = [mine[0], unknown, mine[1], theirs, mine[2]]
    status, body, _ = http(
        "POST", f"{node.url}/v1/deadletters:redrive", {"ids": ids}, token=tenant.token
    )
    assert status == 200, body
    assert [r["id"] for r in body["results"]] == ids
    for result, dl_id in zip(body["results"], ids, strict=True):
        if dl_id in mine:
            assert result == {"id": dl_id, "redriven": True}
        else:
            assert set(result) == {"id", "error"}
            assert result["error"]["code"] == "deadletter_not_found", result
            assert dl_id in result["error"]["message"]
    _, page, _ = http("GET", f"{node.url}/v1/deadletters", token=tenant.token)
    assert page["deadletters"] == []  # each had one new attempt queued
    _, page, _ = http("GET", f"{node.url}/v1/deadletters", token=other.token)
    assert [d["id"] for d in page["deadletters"]] == [theirs]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"ids": []},
        {"ids": "job_x:1796028778162"},
        {"ids": ["x" * 301]},
        {"ids": [1]},
        {"ids": [""]},
        {"ids": ["a"] * 2},
        {"ids": [f"id-{n}" for n in range(501)]},
        {"ids": ["a"], "more": True},
    ],
)
def test_a_bad_redrive_batch_is_400_and_changes_nothing(
    node: NodeProcess, body: dict[str, Any]
) -> None:
    tenant = new_tenant(node)
    before = state(node)
    status, answer, _ = http("POST", f"{node.url}/v1/deadletters:redrive", body, token=tenant.token)
    assert assert_error(status, answer, 400, "invalid_request")["message"].startswith("ids: ")
    assert state(node) == before


# The API in process over a local replica (no Raft), to see every command a batch proposes.


class Recorder:
    """The node's proposer, recording each command's type. Before a barrier (the node catching
    up) it runs `on_barrier`: what the leader had and this replica lacked. A redrive of an id
    in `slow` waits past any deadline first, as a proposal to a lost leader would."""

    def __init__(self, inner: Proposer) -> None:
        self.inner = inner
        self.types: list[str] = []
        self.on_barrier: Callable[[], None] = lambda: None
        self.slow: set[str] = set()

    async def propose(self, cmd: LogCommand[R], *, now_ms: int | None = None) -> R:
        self.types.append(cmd.TYPE)
        if isinstance(cmd, Barrier):
            self.on_barrier()
        if isinstance(cmd, RedriveDeadletter) and cmd.id in self.slow:
            await asyncio.sleep(60)
        return await self.inner.propose(cmd, now_ms=now_ms)


def bury(db: Database, tenant_id: str, dl_id: str) -> None:
    """A dead letter of a queue job, as apply leaves one."""
    db.conn.execute(
        "INSERT INTO deadletters (id, tenant_id, job_id, scheduled_at_ms, attempts, error, "
        "target, payload, created_at_ms) VALUES (?, ?, ?, 0, 1, 'x', ?, 'null', 0)",
        (dl_id, tenant_id, dl_id.split(":")[0], json.dumps({"type": "queue", "name": "q"})),
    )


def in_process(
    db: Database, scenario: Callable[[TestClient[Any, Any], Recorder], Awaitable[None]]
) -> Recorder:
    """Run `scenario` against the API over `db`, with a 1 s request timeout."""
    recorder = Recorder(Proposer(LocalReplica(StateMachine(db)), timeout_s=1.0))

    async def main() -> None:
        reads = ReadPool(db.path)
        ctx = ApiContext(
            node_id="n1",
            proposer=recorder,
            reads=reads,
            raft=cast(RaftStatus, None),  # catching up proposes a barrier (within its budget)
            admin_token=ADMIN_TOKEN,
            partitions=16,
            payload_limit=64 * 1024,
            request_timeout_s=1.0,
        )
        try:
            async with TestClient(TestServer(build_app(ctx))) as client:
                await scenario(client, recorder)
        finally:
            reads.close()

    asyncio.run(main())
    return recorder


async def tenant_in_process(
    client: TestClient[Any, Any], name: str = "t"
) -> tuple[str, dict[str, str]]:
    """A new tenant: (its id, its Authorization header)."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    answer = await client.post("/v1/tenants", json={"name": name}, headers=admin)
    assert answer.status == 201, await answer.text()
    created = await answer.json()
    return created["tenant_id"], {"Authorization": f"Bearer {created['token']}"}


def test_redrive_proposes_nothing_for_ids_the_tenant_has_not(db: Database) -> None:
    mine, late = "job_" + "1" * 24 + ":1", "job_" + "2" * 24 + ":1"
    theirs, unknown = "job_" + "3" * 24 + ":1", "job_" + "0" * 24 + ":1"

    async def scenario(client: TestClient[Any, Any], recorder: Recorder) -> None:
        tenant_id, auth = await tenant_in_process(client)
        other_id, _ = await tenant_in_process(client, "other")
        bury(db, tenant_id, mine)
        bury(db, other_id, theirs)
        # made on the leader a moment ago: this replica has it once it caught up
        recorder.on_barrier = lambda: bury(db, tenant_id, late)
        recorder.types.clear()
        ids = [unknown, mine, theirs, late]
        answer = await client.post("/v1/deadletters:redrive", json={"ids": ids}, headers=auth)
        assert answer.status == 200, await answer.text()
        results = (await answer.json())["results"]
        assert [r["id"] for r in results] == ids
        assert results[1] == {"id": mine, "redriven": True}
        assert results[3] == {"id": late, "redriven": True}
        for result, dl_id in ((results[0], unknown), (results[2], theirs)):
            assert result["error"] == {
                "code": "deadletter_not_found",
                "message": f"no dead letter with id {dl_id!r}",
            }
        assert recorder.types == ["barrier", "redrive_deadletter", "redrive_deadletter"]

        recorder.types.clear()
        recorder.on_barrier = lambda: None
        made_up = [f"job_{n:024d}:1" for n in range(500)]
        answer = await client.post("/v1/deadletters:redrive", json={"ids": made_up}, headers=auth)
        assert answer.status == 200, await answer.text()
        results = (await answer.json())["results"]
        assert {r["error"]["code"] for r in results} == {"deadletter_not_found"}
        assert recorder.types == ["barrier"]  # one catch-up, no redrive command

    in_process(db, scenario)
    assert db.conn.execute("SELECT id FROM deadletters").fetchall() == [(theirs,)]


def test_a_batch_answers_within_its_timeout_and_a_cut_off_id_is_unknown(db: Database) -> None:
    fast, slow = "job_" + "1" * 24 + ":1", "job_" + "2" * 24 + ":1"

    async def scenario(client: TestClient[Any, Any], recorder: Recorder) -> None:
        tenant_id, auth = await tenant_in_process(client)
        bury(db, tenant_id, fast)
        bury(db, tenant_id, slow)
        recorder.slow = {slow}
        began = time.monotonic()
        answer = await client.post(
            "/v1/deadletters:redrive", json={"ids": [fast, slow]}, headers=auth
        )
        assert time.monotonic() - began < 1.5  # the request timeout is 1 s
        assert answer.status == 200, await answer.text()
        redriven, cut_off = (await answer.json())["results"]
        assert redriven == {"id": fast, "redriven": True}
        assert cut_off["id"] == slow and cut_off["error"]["code"] == "outcome_unknown"
        assert "it may still be" in cut_off["error"]["message"]

    in_process(db, scenario)
