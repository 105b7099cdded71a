"""Cells on one node's API in process (no Raft): a request for another cell's partition is a
307 naming the owner, a create draws its id in the cell's range, a keyed batch item of another
cell's is refused in its place, GET /v1/cells; and without [cells] nothing of it shows."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from aiohttp.test_utils import TestClient, TestServer
from pysyncobj import FAIL_REASON

from schedd.api.app import build_app
from schedd.api.context import ApiContext, RaftStatus, token_hash
from schedd.cells.directory import CellRange, Directory, key_partition
from schedd.cells.view import CellSettings, CellView
from schedd.model import partition_of
from schedd.raft.answers import Answer
from schedd.raft.proposer import Proposer
from schedd.store.apply import StateMachine
from schedd.store.commands import RotateTenant
from schedd.store.db import Database, ReadPool
from tests.conftest import Applier
from tests.unit.test_store_batches import claim, one_time

ADMIN = "adm_local_token_0123456789"
URLS = {"c1": ("http://c1-a:8701",), "c2": ("http://c2-a:8701", "http://c2-b:8701")}
DIRECTORY = Directory(1024, (CellRange(0, 511, "c1"), CellRange(512, 1023, "c2")), URLS, 4182)
JOB = {"schedule": {"cron": "0 3 * * *"}, "target": {"type": "queue", "name": "q"}}
Client = TestClient[Any, Any]


class LocalReplica:
    def __init__(self, machine: StateMachine) -> None:
        self.machine = machine
        self.index = machine.db.applied_index

    def apply_entry(self, blob: bytes, *, callback: Any) -> None:
        self.index += 1
        callback(Answer(blob, self.machine.apply(blob, index=self.index)), FAIL_REASON.SUCCESS)


def serve(
    db: Database, cells: CellView | None, scenario: Callable[[Client], Awaitable[None]]
) -> None:
    async def main() -> None:
        reads = ReadPool(db.path)
        ctx = ApiContext(
            node_id="n1",
            proposer=Proposer(LocalReplica(StateMachine(db)), timeout_s=5),
            reads=reads,
            raft=cast(RaftStatus, None),
            admin_token=ADMIN,
            partitions=1024 if cells else 16,
            payload_limit=65536,
            cells=cells,
        )
        try:
            async with TestClient(TestServer(build_app(ctx))) as client:
                await scenario(client)
        finally:
            reads.close()

    asyncio.run(main())


def cell_c1(directory: Directory | None = DIRECTORY) -> CellView:
    settings = CellSettings(
        cell="c1", first=0, last=511, partitions=1024, deployment="d", etcd=("http://e:1",)
    )
    return CellView(settings, directory)


async def tenant(client: Client, **extra: Any) -> tuple[dict[str, str], dict[str, Any]]:
    answer = await client.post(
        "/v1/tenants", json={"name": "acme", **extra}, headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert answer.status == 201, await answer.text()
    created = await answer.json()
    return {"Authorization": f"Bearer {created['token']}"}, created


def an_id_of(partitions: range) -> str:
    return next(
        f"job_{n:024x}" for n in range(100_000) if partition_of(f"job_{n:024x}", 1024) in partitions
    )


def test_another_cells_job_is_a_307_to_its_owner_with_the_same_path_and_query(db: Database) -> None:
    async def scenario(client: Client) -> None:
        auth, _ = await tenant(client)
        job_id = an_id_of(range(512, 1024))
        partition = partition_of(job_id, 1024)
        for method, path in [
            ("GET", f"/v1/jobs/{job_id}?x=a%20b&y=1"),
            ("PATCH", f"/v1/jobs/{job_id}"),
            ("DELETE", f"/v1/jobs/{job_id}"),
            ("POST", f"/v1/jobs/{job_id}/pause"),
            ("POST", f"/v1/jobs/{job_id}/trigger"),
            ("GET", f"/v1/jobs/{job_id}/versions"),
            ("GET", f"/v1/deadletters/{job_id}:1790000000000"),
            ("POST", f"/v1/deadletters/{job_id}:1790000000000/redrive"),
        ]:
            answer = await client.request(method, path, headers=auth, allow_redirects=False)
            assert answer.status == 307, (path, await answer.text())
            assert answer.headers["Location"] == "http://c2-a:8701" + path
            assert await answer.json() == {
                "error": {
                    "code": "wrong_cell",
                    "message": f"partition {partition} is served by cell c2",
                    "cell": "c2",
                    "urls": list(URLS["c2"]),
                    "directory_revision": 4182,
                }
            }
        own = an_id_of(range(0, 512))
        answer = await client.get(f"/v1/jobs/{own}", headers=auth, allow_redirects=False)
        assert answer.status == 404  # served here: it just does not exist

    serve(db, cell_c1(), scenario)


def test_creates_land_in_the_cell_and_keys_in_their_partition(db: Database) -> None:
    async def scenario(client: Client) -> None:
        auth, created = await tenant(client)
        tenant_id = created["tenant_id"]
        for _ in range(20):
            answer = await client.post("/v1/jobs", json=JOB, headers=auth)
            assert answer.status == 201
            assert partition_of((await answer.json())["job_id"], 1024) <= 511
        keys = [f"k{n}" for n in range(40)]
        here = next(k for k in keys if key_partition(tenant_id, k, 1024) <= 511)
        there = next(k for k in keys if key_partition(tenant_id, k, 1024) > 511)
        answer = await client.put(f"/v1/jobs/by-key/{here}", json=JOB, headers=auth)
        assert answer.status == 201
        job_id = (await answer.json())["job_id"]
        assert partition_of(job_id, 1024) == key_partition(tenant_id, here, 1024)
        answer = await client.put(
            f"/v1/jobs/by-key/{there}", json=JOB, headers=auth, allow_redirects=False
        )
        assert (answer.status, answer.headers["Location"]) == (
            307,
            f"http://c2-a:8701/v1/jobs/by-key/{there}",
        )
        answer = await client.post(
            "/v1/jobs", json=JOB | {"key": there}, headers=auth, allow_redirects=False
        )
        assert answer.status == 307
        batch = {"jobs": [JOB, JOB | {"key": there}, JOB | {"key": f"{here}-b"}]}
        answer = await client.post("/v1/jobs:batch", json=batch, headers=auth)
        results = (await answer.json())["results"]
        assert "job_id" in results[0]
        assert results[1]["error"]["code"] == "wrong_cell"
        assert "served by cell c2" in results[1]["error"]["message"]
        assert "http://c2-a:8701" in results[1]["error"]["message"]

    serve(db, cell_c1(), scenario)


def test_a_cell_not_in_the_directory_yet_serves_nothing(db: Database) -> None:
    async def scenario(client: Client) -> None:
        auth, _ = await tenant(client)
        answer = await client.post("/v1/jobs", json=JOB, headers=auth)
        assert (answer.status, (await answer.json())["error"]["code"]) == (
            503,
            "cluster_unavailable",
        )
        answer = await client.get("/v1/cells", headers=auth)
        assert (await answer.json())["directory_revision"] == 0

    serve(db, cell_c1(None), scenario)


def test_get_cells_answers_the_directory_to_any_token(db: Database) -> None:
    async def scenario(client: Client) -> None:
        auth, _ = await tenant(client)
        for headers in (auth, {"Authorization": f"Bearer {ADMIN}"}):
            answer = await client.get("/v1/cells", headers=headers)
            assert await answer.json() == {
                "directory_revision": 4182,
                "partitions": 1024,
                "self": "c1",
                "cells": [
                    {"cell": "c1", "ranges": [[0, 511]], "urls": list(URLS["c1"])},
                    {"cell": "c2", "ranges": [[512, 1023]], "urls": list(URLS["c2"])},
                ],
            }

    serve(db, cell_c1(), scenario)


def test_a_cell_adopts_another_cells_tenant_with_its_credentials(db: Database) -> None:
    given = {
        "tenant_id": "tnt_0123456789abcdef",
        "token": "sk_" + "A" * 43,
        "signing_secret": "whsec_" + "B" * 43 + "=",
    }

    async def scenario(client: Client) -> None:
        auth, created = await tenant(client, **given)
        assert created == given
        answer = await client.post("/v1/jobs", json=JOB, headers=auth)
        assert answer.status == 201

    serve(db, cell_c1(), scenario)


def test_without_cells_nothing_is_redirected_and_there_is_one_default_cell(db: Database) -> None:
    async def scenario(client: Client) -> None:
        auth, _ = await tenant(client)
        answer = await client.get("/v1/jobs/job_000000000000000000000001", headers=auth)
        assert answer.status == 404
        answer = await client.get("/v1/cells", headers=auth)
        assert await answer.json() == {
            "directory_revision": 0,
            "partitions": 16,
            "self": "default",
            "cells": [{"cell": "default", "ranges": [[0, 15]], "urls": []}],
        }
        answer = await client.post(
            "/v1/tenants",
            json={"name": "x", "tenant_id": "tnt_0123456789abcdef"},
            headers={"Authorization": f"Bearer {ADMIN}"},
        )
        assert answer.status == 400
        assert "is for a cell" in (await answer.json())["error"]["message"]

    serve(db, None, scenario)


def test_a_patch_giving_a_job_a_key_of_another_partition_is_refused(db: Database) -> None:
    async def scenario(client: Client) -> None:
        auth, created = await tenant(client)
        answer = await client.post("/v1/jobs", json=JOB, headers=auth)
        job_id = (await answer.json())["job_id"]
        own = partition_of(job_id, 1024)
        key = next(
            f"k{n}"
            for n in range(10_000)
            if key_partition(created["tenant_id"], f"k{n}", 1024) != own
        )
        answer = await client.patch(f"/v1/jobs/{job_id}", json={"key": key}, headers=auth)
        assert answer.status == 400
        assert (await answer.json())["error"]["message"].startswith(f"key: {key!r} belongs")

    serve(db, cell_c1(), scenario)


TENANT_TOKEN = "sk_" + "T" * 43


def cell_c2() -> CellView:
    settings = CellSettings(
        cell="c2", first=512, last=1023, partitions=1024, deployment="d", etcd=("http://e:1",)
    )
    return CellView(settings, DIRECTORY)


def claimed_batch(db: Database) -> None:
    """Tenant t1 (TENANT_TOKEN) with one queue run claimed into a batch: in every store this
    is batch 1, slot 0, as the AUTOINCREMENT ids of two cells' stores are."""
    apply = Applier(StateMachine(db))
    one_time(apply)
    claim(apply, "claim_batch")
    apply.typed(
        RotateTenant(tenant_id="t1", token_hash=token_hash(TENANT_TOKEN), signing_secret="s")
    )


async def received_receipt(client: Client) -> str:
    answer = await client.post("/v1/queues/q/receive", json={"max": 1}, headers=TENANT_AUTH)
    [message] = (await answer.json())["messages"]
    receipt: str = message["receipt"]
    return receipt


TENANT_AUTH = {"Authorization": f"Bearer {TENANT_TOKEN}"}


def test_a_receipt_is_settled_only_by_the_cell_that_handed_it_out(
    db: Database, tmp_path: Path
) -> None:
    other = Database(tmp_path / "c1.db")
    claimed_batch(other)
    claimed_batch(db)
    handed: list[str] = []

    async def in_c1(client: Client) -> None:
        handed.append(await received_receipt(client))

    async def in_c2(client: Client) -> None:
        [of_c1] = handed
        own = await received_receipt(client)
        assert of_c1.startswith("c1~") and own.startswith("c2~")
        assert of_c1.split(".", 1)[1] == own.split(".", 1)[1]  # the same batch id and slot
        path = "/v1/queues/q/ack"
        for action in ("ack", "nack", "extend"):
            answer = await client.post(
                f"/v1/queues/q/{action}",
                json={"receipts": [of_c1]},
                headers=TENANT_AUTH,
                allow_redirects=False,
            )
            assert answer.status == 307, await answer.text()
            assert answer.headers["Location"] == f"http://c1-a:8701/v1/queues/q/{action}"
            error = (await answer.json())["error"]
            assert (error["code"], error["cell"]) == ("wrong_cell", "c1")
        answer = await client.post(path, json={"receipts": [of_c1[3:]]}, headers=TENANT_AUTH)
        assert answer.status == 400
        assert "not handed out by a cell" in (await answer.json())["error"]["message"]
        both = {"receipts": [of_c1, own], "outputs": {of_c1: "x", own: "done"}}
        answer = await client.post(path, json=both, headers=TENANT_AUTH)
        assert await answer.json() == {"acked": 1}  # c2's own only: c1's run is not c2's

    try:
        serve(other, cell_c1(), in_c1)
        serve(db, cell_c2(), in_c2)
    finally:
        other.close()


def test_without_cells_receipts_are_the_stores(db: Database) -> None:
    claimed_batch(db)

    async def scenario(client: Client) -> None:
        receipt = await received_receipt(client)
        assert re.fullmatch(r"[^~]+\.~[0-9]+\.[0-9]+", receipt), (
            receipt
        )  # `<nonce>.~<batch>.<slot>`
        answer = await client.post(
            "/v1/queues/q/ack", json={"receipts": [receipt]}, headers=TENANT_AUTH
        )
        assert await answer.json() == {"acked": 1}

    serve(db, None, scenario)


def test_adopting_a_tenant_again_is_a_200_when_equal_and_a_409_when_not(db: Database) -> None:
    given = {
        "tenant_id": "tnt_0123456789abcdef",
        "token": "sk_" + "A" * 43,
        "signing_secret": "whsec_" + "B" * 43 + "=",
    }
    admin = {"Authorization": f"Bearer {ADMIN}"}

    async def scenario(client: Client) -> None:
        await tenant(client, **given)
        again = await client.post("/v1/tenants", json={"name": "acme", **given}, headers=admin)
        assert (again.status, await again.json()) == (200, given)
        for changed in (
            {"name": "acme-2"},
            {"token": "sk_" + "C" * 43},
            {"signing_secret": "whsec_" + "D" * 43 + "="},
        ):
            body = {"name": "acme", **given, **changed}
            answer = await client.post("/v1/tenants", json=body, headers=admin)
            assert answer.status == 409, await answer.text()
            error = (await answer.json())["error"]
            assert error["code"] == "tenant_exists"
            assert "tnt_0123456789abcdef exists already in this cell" in error["message"]

    serve(db, cell_c1(), scenario)


def test_an_idempotency_key_decides_the_cell_so_a_retry_through_any_cell_lands_once(
    db: Database,
) -> None:
    async def scenario(client: Client) -> None:
        auth, created = await tenant(client)
        tid = created["tenant_id"]
        keys = [f"retry-{n}" for n in range(100)]
        here = next(k for k in keys if key_partition(tid, f"idempotency:{k}", 1024) <= 511)
        there = next(k for k in keys if key_partition(tid, f"idempotency:{k}", 1024) > 511)
        answer = await client.post(
            "/v1/jobs", json=JOB, headers=auth | {"Idempotency-Key": there}, allow_redirects=False
        )
        assert (answer.status, answer.headers["Location"]) == (307, "http://c2-a:8701/v1/jobs")
        job_ids = set()
        for _ in range(2):  # the retry is answered the job the first created
            answer = await client.post(
                "/v1/jobs", json=JOB, headers=auth | {"Idempotency-Key": here}
            )
            assert answer.status == 201
            job_ids.add((await answer.json())["job_id"])
        [job_id] = job_ids
        assert partition_of(job_id, 1024) == key_partition(tid, f"idempotency:{here}", 1024)
        items = [JOB | {"idempotency_key": there}, JOB | {"idempotency_key": f"{here}"}]
        answer = await client.post("/v1/jobs:batch", json={"jobs": items}, headers=auth)
        results = (await answer.json())["results"]
        assert results[0]["error"]["code"] == "wrong_cell"
        assert "http://c2-a:8701" in results[0]["error"]["message"]
        assert "job_id" in results[1]

    serve(db, cell_c1(), scenario)


def after(job_id: str) -> dict[str, Any]:
    return {"schedule": {"after": {"job_id": job_id}}, "target": JOB["target"]}


def test_an_after_job_lives_in_its_upstreams_partition_or_is_sent_to_its_cell(
    db: Database,
) -> None:
    async def scenario(client: Client) -> None:
        auth, created = await tenant(client)
        upstream = (await (await client.post("/v1/jobs", json=JOB, headers=auth)).json())["job_id"]
        answer = await client.post("/v1/jobs", json=after(upstream), headers=auth)
        assert answer.status == 201, await answer.text()
        job_id = (await answer.json())["job_id"]
        assert partition_of(job_id, 1024) == partition_of(upstream, 1024)
        elsewhere = an_id_of(range(512, 1024))
        answer = await client.post(
            "/v1/jobs", json=after(elsewhere), headers=auth, allow_redirects=False
        )
        assert (answer.status, answer.headers["Location"]) == (307, "http://c2-a:8701/v1/jobs")
        tid = created["tenant_id"]
        key = next(f"k{n}" for n in range(100) if key_partition(tid, f"k{n}", 1024) <= 511)
        answer = await client.post("/v1/jobs", json=after(elsewhere) | {"key": key}, headers=auth)
        assert answer.status == 422
        error = (await answer.json())["error"]
        assert error["code"] == "invalid_dependency"
        assert f"{elsewhere!r} lives in cell c2, its key {key!r} in cell c1" in error["message"]
        answer = await client.patch(
            f"/v1/jobs/{job_id}", json={"schedule": {"after": {"job_id": elsewhere}}}, headers=auth
        )
        assert answer.status == 422
        assert "lives in cell c2, this job in cell c1" in (await answer.json())["error"]["message"]

    serve(db, cell_c1(), scenario)
