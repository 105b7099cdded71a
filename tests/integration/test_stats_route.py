"""GET /v1/stats in process: admin only; this node's Raft figures and its sample ring; with
scope=cluster, only the other Raft members asked, and a peer's answer passed on only as far as
it is a stats answer."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from schedd.api.app import build_app
from schedd.api.context import ApiContext, CommitView, Proposing, RaftStatus, token_hash
from schedd.api.limits import ServerLimits
from schedd.api.stats import STATS, Counters
from schedd.model import RaftView
from schedd.store.db import Database, ReadPool
from tests.integration.test_console_static import ADMIN, serve

SELF_RAFT, PEER_RAFT, GONE_RAFT = "127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"
PeerScenario = Callable[[TestClient[Any, Any], Counter[str]], Awaitable[None]]


class FakeRaft:
    def status(self) -> RaftView:
        return RaftView(
            address=SELF_RAFT, role="leader", leader=SELF_RAFT, term=4, applied_index=40
        )

    def commit_view(self) -> CommitView:
        return CommitView(commit_index=42, applied_index=40, is_leader=True)

    def clock_problem(self) -> str | None:
        return None

    def is_ready(self) -> bool:
        return True

    def members(self) -> list[str]:
        return [SELF_RAFT, PEER_RAFT]


def serve_with_peers(
    tmp_path: Path,
    peer: Callable[[web.Request], Awaitable[web.StreamResponse]],
    scenario: PeerScenario,
    *,
    limits: ServerLimits | None = None,
    tenant_token: str = "tenant-token",
) -> None:
    """Run `scenario` against node n1 in process, registered beside n2 (a Raft member, answered
    by `peer`) and n3 (registered, removed from Raft); tenant t1 has `tenant_token`. The
    counter tells the requests each node's address got (n1's and n3's must get none)."""
    db = Database(tmp_path / "state.db")
    asked: Counter[str] = Counter()

    async def fake(request: web.Request) -> web.StreamResponse:
        asked[request.match_info["node"]] += 1
        return await peer(request)

    async def main() -> None:
        peers = web.Application()
        peers.router.add_get("/{node}/{path:.*}", fake)
        async with TestServer(peers) as server:
            base = f"http://127.0.0.1:{server.port}"
            rows = [("n1", SELF_RAFT), ("n2", PEER_RAFT), ("n3", GONE_RAFT)]
            with db.conn:
                db.conn.executemany(
                    "INSERT INTO nodes (node_id, api, raft, registered_at_ms) VALUES (?, ?, ?, 0)",
                    [(node_id, f"{base}/{node_id}", raft) for node_id, raft in rows],
                )
                db.conn.execute(
                    "INSERT INTO tenants (tenant_id, name, token_hash, signing_secret,"
                    " max_active_jobs, dispatch_rate, allowed_hosts, created_at_ms, updated_at_ms)"
                    " VALUES ('t1', 't1', ?, 's', 10, 10, '[]', 0, 0)",
                    (token_hash(tenant_token),),
                )
            reads = ReadPool(db.path)
            ctx = ApiContext(
                node_id="n1",
                proposer=cast(Proposing, None),
                reads=reads,
                raft=cast(RaftStatus, FakeRaft()),
                admin_token=ADMIN,
                partitions=16,
                payload_limit=65536,
                limits=limits or ServerLimits(),
            )
            try:
                async with TestClient(TestServer(build_app(ctx))) as client:
                    await scenario(client, asked)
                assert ctx.fanout._session is None  # the app's cleanup closed it
            finally:
                reads.close()

    asyncio.run(main())


def test_stats_answers_the_admin_with_the_node_and_its_samples(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        ring = client.server.app[STATS]
        zero = Counters(claimed=0, deliveries={"queue": 0}, lag_buckets=[(float("inf"), 0)])
        ring.tick(0, 0.0, zero, 0)
        ring.tick(5_000, 5.0, Counters(claimed=10, deliveries={"queue": 5}, lag_buckets=[]), 9)
        response = await client.get("/v1/stats", headers={"Authorization": f"Bearer {ADMIN}"})
        assert response.status == 200
        body = await response.json()
        assert body["node_id"] == "n1" and body["interval_s"] == 5 and body["window_s"] == 900
        assert body["node"] == {
            "role": "leader",
            "term": 4,
            "applied_index": 40,
            "commit_index": 42,
            "lag": 2,
            "partitions": 0,
            "clock_trusted": True,
            "ready": True,
        }
        (sample,) = body["samples"]
        assert sample["claims_per_s"] == 2.0 and sample["backlog"] == 9
        assert sample["deliveries_per_s"] == {"queue": 1.0}
        assert (await client.get("/v1/stats")).status == 401

    serve(tmp_path, scenario, raft=FakeRaft())


GOOD = {
    "at": "2026-12-02T17:00:05Z",
    "claims_per_s": 1.5,
    "deliveries_per_s": {"queue": 1.0, "http": 0},
    "claim_lag_p50_s": None,
    "claim_lag_p99_s": 0.25,
    "backlog": 3,
}
HOSTILE = [
    None,
    "sample",
    [GOOD],
    GOOD | {"at": None},
    GOOD | {"at": "yesterday"},
    GOOD | {"claims_per_s": "12"},
    GOOD | {"claim_lag_p99_s": True},
    GOOD | {"backlog": 1e300},
    GOOD | {"deliveries_per_s": None},
    GOOD | {"deliveries_per_s": {"queue": "1"}},
    GOOD | {"deliveries_per_s": {"<img>": 1.0}},
    GOOD | {"deliveries_per_s": {f"k{i}": 1.0 for i in range(17)}},
]


def test_cluster_stats_pass_on_only_a_peers_valid_samples_and_typed_node_fields(
    tmp_path: Path,
) -> None:
    async def hostile(request: web.Request) -> web.StreamResponse:
        assert request.query["scope"] == "node"  # a peer never fans out again
        node = {"role": "<b>leader</b>" * 10, "term": "4", "applied_index": 7, "lag": None}
        extra = GOOD | {"at": "2026-12-02T17:00:10.000+00:00", "claims_per_s": None, "x": 1}
        samples = [GOOD, *HOSTILE, extra]
        return web.json_response({"node": node | {"ready": 1, "extra": "x"}, "samples": samples})

    async def scenario(client: TestClient[Any, Any], asked: Counter[str]) -> None:
        headers = {"Authorization": f"Bearer {ADMIN}"}
        response = await client.get("/v1/stats?scope=cluster", headers=headers)
        assert response.status == 200
        nodes = {n["node_id"]: n for n in (await response.json())["nodes"]}
        assert asked == {"n2": 1}  # not itself, not n3 (no longer a Raft member)
        assert list(nodes) == ["n1", "n2"]
        assert nodes["n2"]["node"] == {
            "role": None,
            "term": None,
            "applied_index": 7,
            "commit_index": None,
            "lag": None,
            "partitions": None,
            "clock_trusted": None,
            "ready": None,
        }
        assert nodes["n2"]["samples"] == [
            GOOD,
            GOOD | {"at": "2026-12-02T17:00:10Z", "claims_per_s": None},
        ]

    serve_with_peers(tmp_path, hostile, scenario)
