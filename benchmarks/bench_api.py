"""Benchmark: job creation through the HTTP API of a real local cluster.

Starts N `schedd serve` nodes on free loopback ports, then measures single creates with 64
concurrent clients spread over the nodes, and batch creates (1,000 jobs per request).
Targets (issue 3): >= 2,000 single creates/s and >= 20,000 batched jobs/s on 3 nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.servers import ADMIN_TOKEN, make_nodes, running

JOB = {
    "schedule": {"delay": "1h"},
    "target": {"type": "queue", "name": "bench"},
    "payload": {"n": 1},
}


async def _tenant(session: aiohttp.ClientSession, url: str) -> str:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    body = {"name": f"bench-{time.monotonic_ns()}", "max_active_jobs": 10_000_000}
    async with session.post(f"{url}/v1/tenants", json=body, headers=headers) as response:
        assert response.status == 201, await response.text()
        return str((await response.json())["token"])


async def single_creates(
    urls: list[str], clients: int, seconds: float
) -> tuple[float, list[float]]:
    """Creates/s and per-request latencies (ms) of `clients` concurrent single creates."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients * 2)) as session:
        headers = {"Authorization": f"Bearer {await _tenant(session, urls[0])}"}
        latencies: list[float] = []
        errors = 0
        stop_at = time.monotonic() + seconds

        async def client(i: int) -> None:
            nonlocal errors
            url = f"{urls[i % len(urls)]}/v1/jobs"
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                async with session.post(url, json=JOB, headers=headers) as response:
                    await response.read()
                    if response.status != 201:
                        errors += 1
                latencies.append((time.perf_counter() - started) * 1000)

        started = time.monotonic()
        await asyncio.gather(*(client(i) for i in range(clients)))
        elapsed = time.monotonic() - started
    if errors:
        print(f"  errors: {errors}")
    return len(latencies) / elapsed, latencies


async def batch_creates(urls: list[str], batches: int, size: int, concurrency: int) -> float:
    """Jobs/s through POST /v1/jobs:batch."""
    async with aiohttp.ClientSession() as session:
        headers = {"Authorization": f"Bearer {await _tenant(session, urls[0])}"}
        body = {"jobs": [JOB] * size}
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(batches):
            queue.put_nowait(i)

        async def worker(w: int) -> None:
            while not queue.empty():
                queue.get_nowait()
                url = f"{urls[w % len(urls)]}/v1/jobs:batch"
                async with session.post(url, json=body, headers=headers) as response:
                    assert response.status == 200, await response.text()
                    results = (await response.json())["results"]
                    assert all("job_id" in r for r in results), results[:3]

        started = time.monotonic()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        return batches * size / (time.monotonic() - started)


def report(name: str, rate: float, latencies: list[float] | None = None) -> None:
    line = f"{name:<28} {rate:>10,.0f}/s"
    if latencies:
        cuts = statistics.quantiles(latencies, n=100)
        line += f"   p50 {cuts[49]:.1f} ms  p99 {cuts[98]:.1f} ms"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3, choices=(1, 3))
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batches", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, running(make_nodes(Path(tmp), args.nodes)) as nodes:
        urls = [node.url for node in nodes]
        print(f"cluster: {args.nodes} node(s), {args.clients} clients")
        rate, latencies = asyncio.run(single_creates(urls, args.clients, args.seconds))
        report("single creates", rate, latencies)
        report("batch creates (1000/req)", asyncio.run(batch_creates(urls, args.batches, 1000, 4)))


if __name__ == "__main__":
    main()
