"""The API in-process over a replica that installs the leader's snapshot under every write: a
write this node waits for is applied here as part of the snapshot, and then met again in the
log (pysyncobj resumes from the index it compacted at; the copy may hold more). The API must
answer what the first application answered, never a 500."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from aiohttp.test_utils import TestClient, TestServer
from pysyncobj import FAIL_REASON

from schedd.api.app import build_app
from schedd.api.context import ApiContext, RaftStatus
from schedd.raft.answers import Answer
from schedd.raft.proposer import Proposer
from schedd.store.apply import StateMachine
from schedd.store.db import Database, ReadPool
from schedd.store.snapshot import restore_snapshot, write_snapshot

ADMIN = {"Authorization": "Bearer adm_test_token_0123456789abcdef"}
JOB = {"schedule": {"delay": "1h"}, "target": {"type": "queue", "name": "q"}}


class SnapshotUnderEveryWrite:
    """Applies each entry on the leader, ships the leader's snapshot to this node, then
    applies the entry here at the same index: the store already holds it."""

    def __init__(self, leader: StateMachine, here: StateMachine, scratch: Path) -> None:
        self.leader, self.here, self.scratch = leader, here, scratch
        self.index = 0

    def apply_entry(self, blob: bytes, *, callback: Any) -> None:
        self.index += 1
        self.leader.apply(blob, index=self.index)
        write_snapshot(self.leader.db.path, self.scratch, b"raft state")
        restore_snapshot(self.here.db, self.scratch)
        callback(Answer(blob, self.here.apply(blob, index=self.index)), FAIL_REASON.SUCCESS)


def _serve(tmp_path: Path, test: Callable[[TestClient[Any, Any]], Awaitable[None]]) -> None:
    leader = Database(tmp_path / "leader.db")
    here = Database(tmp_path / "here.db")
    reads = ReadPool(here.path)
    replica = SnapshotUnderEveryWrite(StateMachine(leader), StateMachine(here), tmp_path / "snap")

    async def main() -> None:
        ctx = ApiContext(
            node_id="n1",
            proposer=Proposer(replica, timeout_s=5.0),
            reads=reads,
            raft=cast(RaftStatus, None),  # no route here asks for the cluster's status
            admin_token=ADMIN["Authorization"].removeprefix("Bearer "),
            partitions=16,
            payload_limit=65_536,
        )
        async with TestClient(TestServer(build_app(ctx))) as client:
            await test(client)

    try:
        asyncio.run(main())
    finally:
        reads.close()
        here.close()
        leader.close()


def test_a_create_applied_through_an_installed_snapshot_answers_the_job(tmp_path: Path) -> None:
    async def test(client: TestClient[Any, Any]) -> None:
        response = await client.post("/v1/tenants", json={"name": "acme"}, headers=ADMIN)
        assert response.status == 201, await response.text()
        tenant = {"Authorization": f"Bearer {(await response.json())['token']}"}
        response = await client.post("/v1/jobs", json=JOB, headers=tenant)
        assert response.status == 201, await response.text()
        job = await response.json()
        response = await client.get(f"/v1/jobs/{job['job_id']}", headers=tenant)
        assert response.status == 200 and await response.json() == job
        response = await client.post("/v1/jobs:batch", json={"jobs": [JOB, JOB]}, headers=tenant)
        assert response.status == 200, await response.text()
        results = (await response.json())["results"]
        assert all(result["job_id"].startswith("job_") for result in results), results

    _serve(tmp_path, test)
