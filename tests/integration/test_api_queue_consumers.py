"""GET /v1/queues on one real node: the age of a queue's oldest message, and the consumers that
received from it (named, or by their address), kept per tenant; /v1/stats?scope=cluster. In
process: the other nodes' consumers asked at most once per 2 s per tenant, of Raft members
only; a receive refused with 429 is no consumer."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from schedd.api.context import CONTEXT
from schedd.api.fanout import AnswerCache
from schedd.api.limits import ServerLimits
from tests.integration.api_helpers import Tenant, create_job, new_tenant
from tests.integration.test_stats_route import serve_with_peers
from tests.servers import NodeProcess, http, ms, now_ms, wait_for


def queues(node: NodeProcess, token: str) -> dict[str, Any]:
    status, answer, _ = http("GET", f"{node.url}/v1/queues", token=token)
    assert status == 200, answer
    return {"partial": answer["partial"], **{q["name"]: q for q in answer["queues"]}}


def receive(node: NodeProcess, tenant: Tenant, queue: str, **body: Any) -> tuple[int, Any]:
    status, answer, _ = http(
        "POST", f"{node.url}/v1/queues/{queue}/receive", body, token=tenant.token, timeout_s=30
    )
    return status, answer


def test_oldest_age_counts_ready_and_in_flight_messages_and_is_null_without_any(
    node: NodeProcess,
) -> None:
    tenant = new_tenant(node)
    target = {"type": "queue", "name": "aged"}
    job = create_job(node, tenant.token, {"schedule": {"delay": "0s"}, "target": target})
    scheduled_ms = ms(job["next_run_at"])
    ready = wait_for(lambda: queues(node, tenant.token).get("aged"), 20, "a ready message")
    assert ready["ready"] == 1 and ready["oldest_age_s"] is not None
    assert 0 <= ready["oldest_age_s"] <= (now_ms() - scheduled_ms) / 1000
    status, answer = receive(node, tenant, "aged", wait="5s", visibility_timeout="1m")
    assert status == 200 and len(answer["messages"]) == 1, answer
    in_flight = queues(node, tenant.token)["aged"]
    assert in_flight["in_flight"] == 1 and in_flight["oldest_age_s"] >= ready["oldest_age_s"]
    receipts = [answer["messages"][0]["receipt"]]
    status, _, _ = http(
        "POST", f"{node.url}/v1/queues/aged/ack", {"receipts": receipts}, token=tenant.token
    )
    assert status == 200
    # Empty now; still listed, for the consumer seen receiving from it.
    emptied = queues(node, tenant.token)["aged"]
    assert emptied["ready"] == emptied["in_flight"] == 0 and emptied["oldest_age_s"] is None


def test_consumers_are_named_by_their_field_or_their_address_per_tenant(
    node: NodeProcess,
) -> None:
    tenant, other = new_tenant(node), new_tenant(node)
    before = now_ms() // 1000 * 1000
    assert receive(node, tenant, "named", consumer="worker-1@host.example:42")[0] == 200
    assert receive(node, tenant, "named")[0] == 200
    listed = queues(node, tenant.token)
    assert listed["partial"] is False
    named = listed["named"]
    assert named["ready"] == 0 and named["oldest_age_s"] is None
    assert [(c["consumer"], c["node"]) for c in named["consumers"]] == [
        ("127.0.0.1", "n1"),
        ("worker-1@host.example:42", "n1"),
    ]
    assert all(before <= ms(c["last_seen"]) <= now_ms() for c in named["consumers"])
    assert queues(node, other.token) == {"partial": False}  # another tenant sees none of them

    status, error = receive(node, tenant, "named", consumer="two words")
    assert status == 400 and "consumer" in error["error"]["message"], error
    assert receive(node, tenant, "named", consumer="x" * 129)[0] == 400


def test_the_local_consumers_route_is_the_admins_with_a_tenant(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    assert receive(node, tenant, "local", consumer="w1")[0] == 200
    url = f"{node.url}/v1/queues/consumers/local"
    assert http("GET", url, token=tenant.token)[0] == 403
    assert http("GET", url)[0] == 403  # the admin must name the tenant
    status, answer, _ = http("GET", url, headers={"X-Tenant": tenant.tenant_id})
    assert status == 200, answer
    assert answer["node_id"] == "n1"
    [seen] = answer["consumers"]
    assert (seen["queue"], seen["consumer"], seen["node"]) == ("local", "w1", "n1")


def test_cluster_stats_of_a_single_node_list_it_once(node: NodeProcess) -> None:
    status, answer, _ = http("GET", f"{node.url}/v1/stats?scope=cluster")
    assert status == 200, answer
    assert set(answer) == {"nodes", "interval_s", "window_s"}
    [only] = answer["nodes"]
    assert only["node_id"] == "n1" and only["node"]["role"] == "leader"
    assert isinstance(only["samples"], list)
    status, node_scope, _ = http("GET", f"{node.url}/v1/stats?scope=node")
    assert status == 200 and node_scope["node_id"] == "n1"
    status, error, _ = http("GET", f"{node.url}/v1/stats?scope=everything")
    assert status == 400 and "scope" in error["error"]["message"], error


async def n2_consumers(request: web.Request) -> web.StreamResponse:
    assert request.headers["X-Tenant"] == "t1"
    told = {"queue": "mail", "consumer": "via-n2", "last_seen": "2026-12-02T17:00:00Z"}
    return web.json_response({"node_id": "n2", "consumers": [told]})


def test_the_other_nodes_consumers_are_asked_at_most_once_per_two_seconds_per_tenant(
    tmp_path: Path,
) -> None:
    async def scenario(client: TestClient[Any, Any], asked: Counter[str]) -> None:
        now = [0.0]
        ctx = client.server.app[CONTEXT]
        ctx.peer_consumers = AnswerCache(monotonic=lambda: now[0])
        auth = {"Authorization": "Bearer tenant-token"}

        async def listed() -> list[dict[str, Any]]:
            response = await client.get("/v1/queues", headers=auth)
            assert response.status == 200
            body = await response.json()
            assert body["partial"] is False
            consumers: list[dict[str, Any]] = body["queues"][0]["consumers"]
            return consumers

        for _ in range(3):
            assert [(c["consumer"], c["node"]) for c in await listed()] == [("via-n2", "n2")]
        await asyncio.gather(*(listed() for _ in range(5)))
        assert asked == {"n2": 1}  # never itself, never n3 (registered, not a Raft member)
        now[0] += 2.0
        await listed()
        assert asked == {"n2": 2}

    serve_with_peers(tmp_path, n2_consumers, scenario)


def test_a_receive_refused_for_too_many_long_polls_is_no_consumer(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any], asked: Counter[str]) -> None:
        auth = {"Authorization": "Bearer tenant-token"}

        async def receive(consumer: str) -> int:
            body = {"consumer": consumer, "wait": "1s"}
            response = await client.post("/v1/queues/mail/receive", json=body, headers=auth)
            return response.status

        held = asyncio.ensure_future(receive("admitted"))
        consumers = client.server.app[CONTEXT].consumers
        for _ in range(100):  # until it holds the tenant's one long poll
            if consumers.recent("t1"):
                break
            await asyncio.sleep(0.01)
        assert await receive("refused") == 429
        assert await held == 200
        response = await client.get("/v1/queues", headers=auth)
        [mail] = (await response.json())["queues"]
        assert sorted(c["consumer"] for c in mail["consumers"]) == ["admitted", "via-n2"]

    serve_with_peers(tmp_path, n2_consumers, scenario, limits=ServerLimits(long_polls_per_tenant=1))
