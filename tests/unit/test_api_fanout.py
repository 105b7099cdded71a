"""The fan-out to peers: answers gathered concurrently, and every hostile or failing peer costs
only its own answer (too big, not JSON, a redirect, too slow, not listening); one kept-alive
session, a bound on fan-outs in flight, a quiet period for a peer that timed out; the answer
cache shared by callers for its lifetime."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web
from aiohttp.test_utils import TestServer

from schedd.api.fanout import MAX_ANSWER_BYTES, QUIET, AnswerCache, Fanout
from tests.servers import free_ports


async def peer(request: web.Request) -> web.StreamResponse:
    kind = request.match_info["kind"]
    if kind == "ok":
        return web.json_response(
            {
                "token": request.headers["Authorization"],
                "tenant": request.headers["X-Tenant"],
                "encoding": request.headers["Accept-Encoding"],
            }
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


@asynccontextmanager
async def peer_server(
    handler: web.Handler = peer,
) -> AsyncIterator[tuple[str, Counter[str]]]:
    """A fake peer at /{kind}/x; the counter tells the requests per kind."""
    asked: Counter[str] = Counter()

    async def counting(request: web.Request) -> web.StreamResponse:
        asked[request.match_info["kind"]] += 1
        return await handler(request)

    app = web.Application()
    app.router.add_get("/{kind}/x", counting)
    async with TestServer(app) as server:
        yield f"http://127.0.0.1:{server.port}", asked


def test_each_failing_peer_costs_only_its_own_answer() -> None:
    async def main() -> None:
        fanout = Fanout(admin_token="adm", tls=None, timeout_s=0.5)
        async with peer_server() as (base, _):
            kinds = ["ok", "big", "redirect", "slow", "notjson", "array", "deep", "down"]
            peers = [(kind, f"{base}/{kind}") for kind in kinds]
            peers += [("gone", f"http://127.0.0.1:{free_ports(1)[0]}")]
            started = time.monotonic()
            answers = await fanout.ask(peers, "/x", headers={"X-Tenant": "t1"})
            assert time.monotonic() - started < 2  # concurrently: one timeout, not several
            await fanout.close()
        by_node = {a.node_id: a for a in answers}
        assert list(by_node) == [*kinds, "gone"]  # the peers' order
        assert by_node["ok"].body == {"token": "Bearer adm", "tenant": "t1", "encoding": "identity"}
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


def test_one_session_keeps_its_connection_and_the_token_is_only_a_request_header() -> None:
    async def whoami(request: web.Request) -> web.StreamResponse:
        port = request.transport.get_extra_info("peername")[1] if request.transport else None
        cookie = request.headers.get("Cookie")
        response = web.json_response({"port": port, "cookie": cookie})
        response.set_cookie("peer", "planted")
        return response

    async def main() -> None:
        fanout = Fanout(admin_token="adm", tls=None)
        async with peer_server(whoami) as (base, asked):
            first, second = [(await fanout.ask([("n2", f"{base}/ok")], "/x"))[0] for _ in "12"]
            assert first.body and second.body
            assert first.body["port"] == second.body["port"]  # the same TCP connection
            assert second.body["cookie"] is None  # a peer's cookie is not sent back
            session = fanout._session
            assert session is not None and "Authorization" not in session.headers
            await fanout.close()
            assert session.closed and fanout._session is None
            assert asked["ok"] == 2

    asyncio.run(main())


def test_fan_outs_in_flight_are_bounded_and_the_others_wait_their_turn() -> None:
    at_once, most = 0, 0

    async def held(request: web.Request) -> web.StreamResponse:
        nonlocal at_once, most
        at_once += 1
        most = max(most, at_once)
        await asyncio.sleep(0.2)
        at_once -= 1
        return web.json_response({})

    async def main() -> None:
        fanout = Fanout(admin_token="adm", tls=None, max_in_flight=2)
        async with peer_server(held) as (base, asked):
            answers = await asyncio.gather(
                *(fanout.ask([("n2", f"{base}/ok")], "/x") for _ in range(6))
            )
            await fanout.close()
        assert all(answer.body == {} for [answer] in answers)
        assert asked["ok"] == 6 and most == 2

    asyncio.run(main())


def test_a_peer_that_timed_out_is_not_asked_again_for_the_quiet_period() -> None:
    now = [1_000.0]

    async def main() -> None:
        fanout = Fanout(
            admin_token="adm", tls=None, timeout_s=0.2, quiet_s=10.0, monotonic=lambda: now[0]
        )
        async with peer_server() as (base, asked):
            peers = [("slow", f"{base}/slow"), ("ok", f"{base}/ok")]
            headers = {"X-Tenant": "t1"}
            first = await fanout.ask(peers, "/x", headers=headers)
            assert first[0].error == "no answer within the timeout"
            now[0] += 9.9
            started = time.monotonic()
            quiet = await fanout.ask(peers, "/x", headers=headers)
            assert time.monotonic() - started < 0.2
            assert quiet[0].error == QUIET.format(quiet_s=10.0) and quiet[1].body
            assert asked == {"slow": 1, "ok": 2}  # the other peer is asked as ever
            now[0] += 0.2
            await fanout.ask(peers, "/x", headers=headers)
            assert asked == {"slow": 2, "ok": 3}
            await fanout.close()

    asyncio.run(main())


def test_the_answer_cache_shares_one_gathering_for_its_lifetime_and_forgets_the_lru() -> None:
    now = [0.0]
    gathered: Counter[str] = Counter()

    async def main() -> None:
        cache: AnswerCache[str] = AnswerCache(ttl_s=2.0, max_keys=2, monotonic=lambda: now[0])

        def gather(key: str) -> Callable[[], Awaitable[str]]:
            async def slow() -> str:
                gathered[key] += 1
                await asyncio.sleep(0.05)
                return f"{key}#{gathered[key]}"

            return slow

        at_once = await asyncio.gather(*(cache.get("t1", gather("t1")) for _ in range(5)))
        assert at_once == ["t1#1"] * 5 and gathered["t1"] == 1  # callers at once share it
        now[0] += 1.9
        assert await cache.get("t1", gather("t1")) == "t1#1"
        now[0] += 0.1
        assert await cache.get("t1", gather("t1")) == "t1#2"  # its lifetime is over
        await cache.get("t2", gather("t2"))
        await cache.get("t3", gather("t3"))  # past max_keys: t1, least recently used, goes
        await cache.get("t1", gather("t1"))
        assert gathered == {"t1": 3, "t2": 1, "t3": 1}

    asyncio.run(main())
