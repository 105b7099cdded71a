"""The fan-out to peers: answers gathered concurrently, and every hostile or failing peer costs
only its own answer (too big, not JSON, a redirect, too slow, not listening)."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web
from aiohttp.test_utils import TestServer

from schedd.api.fanout import MAX_ANSWER_BYTES, ask_peers
from tests.servers import free_ports


async def peer(request: web.Request) -> web.StreamResponse:
    kind = request.match_info["kind"]
    if kind == "ok":
        return web.json_response(
            {"token": request.headers["Authorization"], "tenant": request.headers["X-Tenant"]}
        )
    if kind == "big":
        response = web.StreamResponse()  # chunked: no Content-Length to refuse it by
        await response.prepare(request)
        for _ in range(MAX_ANSWER_BYTES // 65536 + 2):
            await response.write(b" " * 65536)
        return response
    if kind == "redirect":
        raise web.HTTPFound("/ok/x")
    if kind == "slow":
        await asyncio.sleep(5)
    bodies = {"notjson": b"{nope", "array": b"[1]", "deep": b"[" * 100_000, "down": b"{}"}
    status = 503 if kind == "down" else 200
    return web.Response(body=bodies.get(kind, b"{}"), status=status)


def test_each_failing_peer_costs_only_its_own_answer() -> None:
    async def main() -> None:
        app = web.Application()
        app.router.add_get("/{kind}/x", peer)
        async with TestServer(app) as server:
            base = f"http://127.0.0.1:{server.port}"
            kinds = ["ok", "big", "redirect", "slow", "notjson", "array", "deep", "down"]
            nodes = [(kind, f"{base}/{kind}", "127.0.0.1:1") for kind in kinds]
            nodes += [("self", f"{base}/ok", "127.0.0.1:1")]
            nodes += [("gone", f"http://127.0.0.1:{free_ports(1)[0]}", "127.0.0.1:1")]
            started = time.monotonic()
            answers = await ask_peers(
                nodes,
                "self",
                "/x",
                admin_token="adm",
                tls=None,
                headers={"X-Tenant": "t1"},
                timeout_s=0.5,
            )
            assert time.monotonic() - started < 2  # concurrently: one timeout, not several
        by_node = {a.node_id: a for a in answers}
        assert list(by_node) == [*kinds, "gone"]  # the rows' order, without this node
        assert by_node["ok"].body == {"token": "Bearer adm", "tenant": "t1"}
        errors = {a.node_id: a.error for a in answers if a.body is None}
        assert errors == {
            "big": f"answer over {MAX_ANSWER_BYTES} bytes",
            "redirect": "answered HTTP 302",
            "slow": "no answer within the timeout",
            "notjson": "its answer is not JSON",
            "array": "its answer is not a JSON object",
            "deep": "its answer is not JSON",
            "down": "answered HTTP 503",
            "gone": "connection refused or unreachable",
        }

    asyncio.run(main())
