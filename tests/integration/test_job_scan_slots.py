"""A tenant runs at most JOB_SCANS_PER_TENANT filtered job lists at once on a node (each holds
a reader thread for up to its scan budget): one more is a 429, another tenant's goes on; and all
tenants together at most JOB_SCANS_PER_NODE, so a reader thread stays free for other reads."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from schedd.api import jobs
from schedd.api.context import JOB_SCANS_PER_NODE, JOB_SCANS_PER_TENANT
from schedd.store.db import READER_THREADS, Database
from tests.integration.test_console_static import ADMIN, serve


def add_tenants(path: Path, *tenants: str) -> None:
    db = Database(path)
    for tenant in tenants:
        db.conn.execute(
            "INSERT INTO tenants (tenant_id, name, token_hash, signing_secret, max_active_jobs, "
            "dispatch_rate, allowed_hosts, created_at_ms, updated_at_ms) "
            "VALUES (?, ?, ?, 's', 10, 10, '[]', 0, 0)",
            (tenant, tenant, f"hash-{tenant}"),
        )
    db.close()


def held_scans(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Semaphore, threading.Event]:
    """Make every job search wait: (released once per search that started, set to let them
    all go on)."""
    started, release = threading.Semaphore(0), threading.Event()
    real = jobs.search_jobs

    def slow_search(*args: Any, **kwargs: Any) -> Any:
        started.release()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(jobs, "search_jobs", slow_search)
    return started, release


def as_tenant(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}", "X-Tenant": tenant}


def test_a_tenants_filtered_lists_past_its_slots_are_429_and_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = held_scans(monkeypatch)

    async def scenario(client: TestClient[Any, Any]) -> None:
        held = [
            asyncio.create_task(client.get("/v1/jobs?name=x", headers=as_tenant("t1")))
            for _ in range(JOB_SCANS_PER_TENANT)
        ]
        for _ in held:
            assert await asyncio.to_thread(started.acquire, True, 10)
        refused = await client.get("/v1/jobs?name=x", headers=as_tenant("t1"))
        assert refused.status == 429, await refused.text()
        assert "filtered job lists in progress" in (await refused.json())["error"]["message"]
        unfiltered = await client.get("/v1/jobs?status=active", headers=as_tenant("t1"))
        assert unfiltered.status == 200  # a plain page is no scan
        other = asyncio.create_task(client.get("/v1/jobs?name=x", headers=as_tenant("t2")))
        assert await asyncio.to_thread(started.acquire, True, 10)  # t2's scan started
        release.set()
        for answer in [*await asyncio.gather(*held), await other]:
            assert answer.status == 200, await answer.text()
        again = await client.get("/v1/jobs?name=x", headers=as_tenant("t1"))
        assert again.status == 200  # the slots were given back

    add_tenants(tmp_path / "state.db", "t1", "t2")
    serve(tmp_path, scenario)


def test_two_tenants_scans_never_take_every_reader_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = held_scans(monkeypatch)

    async def scenario(client: TestClient[Any, Any]) -> None:
        assert JOB_SCANS_PER_NODE == READER_THREADS - 1 < 2 * JOB_SCANS_PER_TENANT
        tenants = ["t1", "t1", "t2"][:JOB_SCANS_PER_NODE]
        held = [
            asyncio.create_task(client.get("/v1/jobs?name=x", headers=as_tenant(tenant)))
            for tenant in tenants
        ]
        for _ in held:
            assert await asyncio.to_thread(started.acquire, True, 10)
        # t2 holds one scan, below its own limit: the node's limit refuses its second
        refused = await asyncio.wait_for(client.get("/v1/jobs?name=x", headers=as_tenant("t2")), 5)
        assert refused.status == 429, await refused.text()
        message = (await refused.json())["error"]["message"]
        assert f"this node already runs {JOB_SCANS_PER_NODE} filtered job lists" in message
        # a reader thread is free: another read is answered while the scans are held
        other = await asyncio.wait_for(client.get("/v1/jobs", headers=as_tenant("t3")), 5)
        assert other.status == 200, await other.text()
        release.set()
        for answer in await asyncio.gather(*held):
            assert answer.status == 200, await answer.text()
        again = await client.get("/v1/jobs?name=x", headers=as_tenant("t2"))
        assert again.status == 200  # the node's slots were given back

    add_tenants(tmp_path / "state.db", "t1", "t2", "t3")
    serve(tmp_path, scenario)
