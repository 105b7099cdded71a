"""The benchmarks' schedd client: creates in batches of 1,000 (two requests in flight), and a
consumer of receive loops that ack what they get. One copy for bench_dispatch and compare, so
both measure schedd with the same client."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

BATCH = 1000
RECEIVERS = 16  # concurrent receive loops, spread over the nodes
Delivery = tuple[dict[str, Any], float]  # (message, received at: time.time())


def session(token: str, *, total_s: float = 120) -> aiohttp.ClientSession:
    """A session that sends the tenant's token, with a connection per receive loop."""
    return aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {token}"},
        timeout=aiohttp.ClientTimeout(total=total_s),
        connector=aiohttp.TCPConnector(limit=RECEIVERS + 4),
    )


async def post_batches(
    s: aiohttp.ClientSession, urls: list[str], bodies: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """POST /v1/jobs:batch of 1,000, two requests in flight, spread over the nodes; each job's
    result (every one must be created)."""
    chunks = [bodies[i : i + BATCH] for i in range(0, len(bodies), BATCH)]
    created: list[dict[str, Any]] = []

    async def post(i: int, chunk: list[dict[str, Any]]) -> None:
        async with s.post(f"{urls[i % len(urls)]}/v1/jobs:batch", json={"jobs": chunk}) as r:
            assert r.status == 200, await r.text()
            results = (await r.json())["results"]
        assert all("error" not in result for result in results), results
        created.extend(results)

    for start in range(0, len(chunks), 2):
        await asyncio.gather(*(post(start + k, c) for k, c in enumerate(chunks[start : start + 2])))
    return created


async def receive_all(
    s: aiohttp.ClientSession, urls: list[str], queue: str, expected: int, stop_at: float
) -> tuple[list[Delivery], bool]:
    """RECEIVERS loops (long poll, at most 100 messages) that ack what they get, until
    `expected` distinct runs were seen or `stop_at` (monotonic): (deliveries, timed out)."""
    deliveries: list[Delivery] = []
    seen: set[str] = set()

    async def loop(w: int) -> None:
        base = f"{urls[w % len(urls)]}/v1/queues/{queue}"
        body = {"max": 100, "wait": "1s", "visibility_timeout": "60s"}
        while len(seen) < expected and time.monotonic() < stop_at:
            async with s.post(f"{base}/receive", json=body) as r:
                if r.status != 200:
                    await asyncio.sleep(0.2)
                    continue
                messages = (await r.json())["messages"]
            now = time.time()
            deliveries.extend((m, now) for m in messages)
            seen.update(m["idempotency_key"] for m in messages)
            if messages:
                receipts = {"receipts": [m["receipt"] for m in messages]}
                async with s.post(f"{base}/ack", json=receipts) as r:
                    await r.read()

    await asyncio.gather(*(loop(w) for w in range(RECEIVERS)))
    return deliveries, len(seen) < expected
