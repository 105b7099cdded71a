"""The API in process over a local replica (no Raft): every command it proposes fits the
per-command cap; a large batch is split into several commands, a job too large for one is 413."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient, TestServer
from pysyncobj import FAIL_REASON

from schedd.api.app import build_app
from schedd.api.context import ApiContext, RaftStatus
from schedd.raft.answers import Answer
from schedd.raft.proposer import Proposer
from schedd.store.apply import StateMachine
from schedd.store.command import MAX_COMMAND_BYTES
from schedd.store.db import Database, ReadPool

ADMIN = "adm_local_token_0123456789"
PAYLOAD_BYTES = 60 * 1024  # under the default 64 KiB payload limit


class LocalReplica:
    """Applies each entry at once, as a single node would, and records its size."""

    def __init__(self, machine: StateMachine) -> None:
        self.machine = machine
        self.index = machine.db.applied_index
        self.sizes: list[int] = []
        self.is_cut_off = False  # True: entries go out and never come back (the leader is lost)

    def apply_entry(self, blob: bytes, *, callback: Any) -> None:
        self.sizes.append(len(blob))
        if self.is_cut_off:
            return
        self.index += 1
        callback(Answer(blob, self.machine.apply(blob, index=self.index)), FAIL_REASON.SUCCESS)


def _serve(
    db: Database,
    payload_limit: int,
    scenario: Callable[[TestClient[Any, Any]], Awaitable[None]],
    replica: LocalReplica | None = None,
    timeout_s: float = 5.0,
) -> LocalReplica:
    replica = replica or LocalReplica(StateMachine(db))

    async def main() -> None:
        reads = ReadPool(db.path)
        ctx = ApiContext(
            node_id="n1",
            proposer=Proposer(replica, timeout_s=timeout_s),
            reads=reads,
            raft=cast(RaftStatus, None),  # no route used here asks for Raft's state
            admin_token=ADMIN,
            partitions=16,
            payload_limit=payload_limit,
            request_timeout_s=timeout_s,
        )
        try:
            async with TestClient(TestServer(build_app(ctx))) as client:
                await scenario(client)
        finally:
            reads.close()

    asyncio.run(main())
    return replica


async def _tenant_token(client: TestClient[Any, Any]) -> str:
    answer = await client.post(
        "/v1/tenants", json={"name": "big"}, headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert answer.status == 201, await answer.text()
    token: str = (await answer.json())["token"]
    return token


async def _post(
    client: TestClient[Any, Any], path: str, body: Any, auth: dict[str, str]
) -> ClientResponse:
    data = io.BytesIO(json.dumps(body).encode())  # aiohttp warns about large bytes bodies
    headers = auth | {"Content-Type": "application/json"}
    return await client.post(path, data=data, headers=headers)


def _job(n: int, payload_bytes: int) -> dict[str, Any]:
    return {
        "name": f"job-{n}",
        "schedule": {"delay": "1h"},
        "target": {"type": "queue", "name": "q"},
        "payload": "x" * (payload_bytes - 2),  # a JSON string of exactly payload_bytes
    }


def test_a_batch_over_the_command_cap_is_split_and_every_job_created(db: Database) -> None:
    jobs = [_job(n, PAYLOAD_BYTES) for n in range(40)]  # about 2.4 MB: three commands or more

    async def scenario(client: TestClient[Any, Any]) -> None:
        auth = {"Authorization": f"Bearer {await _tenant_token(client)}"}
        answer = await _post(client, "/v1/jobs:batch", {"jobs": jobs}, auth)
        assert answer.status == 200, await answer.text()
        results = (await answer.json())["results"]
        assert all("job_id" in result for result in results), results
        for n, result in enumerate(results):  # in order: each result is its own job
            job = await (await client.get(f"/v1/jobs/{result['job_id']}", headers=auth)).json()
            assert job["name"] == f"job-{n}"

    replica = _serve(db, 64 * 1024, scenario)
    assert max(replica.sizes) <= MAX_COMMAND_BYTES
    assert sum(size > PAYLOAD_BYTES for size in replica.sizes) >= 3  # the batch's commands
    assert db.conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 40


def test_a_job_whose_command_is_over_the_cap_is_413_naming_the_limit(db: Database) -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        auth = {"Authorization": f"Bearer {await _tenant_token(client)}"}
        answer = await _post(client, "/v1/jobs", _job(0, 1_100_000), auth)
        assert answer.status == 413, await answer.text()
        error = (await answer.json())["error"]
        assert error["code"] == "payload_too_large"
        assert f"{MAX_COMMAND_BYTES}-byte limit of one Raft command" in error["message"]
        batch = {"jobs": [_job(1, 1_100_000), _job(2, 1000)]}
        answer = await _post(client, "/v1/jobs:batch", batch, auth)
        assert answer.status == 200, await answer.text()
        too_big, created = (await answer.json())["results"]
        assert too_big["error"]["code"] == "payload_too_large" and "job_id" in created

    # A payload limit the config no longer accepts (it allowed 16 MiB): the proposer's cap holds
    replica = _serve(db, 2 * 1024 * 1024, scenario)
    assert max(replica.sizes) <= MAX_COMMAND_BYTES
    assert db.conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1


def test_a_batch_that_finds_no_leader_proposes_no_more_of_its_commands(db: Database) -> None:
    jobs = [_job(n, PAYLOAD_BYTES) for n in range(40)]  # three commands or more
    replica = LocalReplica(StateMachine(db))

    async def scenario(client: TestClient[Any, Any]) -> None:
        auth = {"Authorization": f"Bearer {await _tenant_token(client)}"}
        replica.is_cut_off = True
        answer = await _post(client, "/v1/jobs:batch", {"jobs": jobs}, auth)
        assert answer.status == 503, await answer.text()  # every command failed: one answer
        assert (await answer.json())["error"]["code"] == "outcome_unknown"  # the one sent

    _serve(db, 64 * 1024, scenario, replica, timeout_s=0.3)
    # Only the first of the batch's commands left: the request answered within one timeout.
    assert sum(size > PAYLOAD_BYTES for size in replica.sizes) == 1
