"""Benchmark: a cluster holding many active jobs (default 1,000,000).

Loads the jobs through POST /v1/jobs:batch, then reports per node: RSS, GET /v1/jobs/{id}
latency (p50/p99), the time a Raft snapshot of the full database takes, the worst write latency
while snapshots run, and how many elections happened (Raft term changes) meanwhile.
Targets (issue 3): RSS < 500 MB, GET p99 < 5 ms, snapshot stall well below the election timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.servers import NodeProcess, http, make_nodes, running

JOB = {"schedule": {"delay": "30d"}, "target": {"type": "queue", "name": "scale"}, "payload": {}}
BATCH = 1_000


async def load(urls: list[str], token: str, total: int, concurrency: int) -> list[str]:
    """Create `total` jobs in batches; returns a sample of their ids."""
    headers = {"Authorization": f"Bearer {token}"}
    sample: list[str] = []
    batches = total // BATCH
    done = 0
    started = time.monotonic()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(batches):
            queue.put_nowait(i)

        async def worker(w: int) -> None:
            nonlocal done
            while not queue.empty():
                n = queue.get_nowait()
                url = f"{urls[w % len(urls)]}/v1/jobs:batch"
                # Keys make a retry after a 503 (outcome unknown) safe, as for any client.
                jobs = [JOB | {"idempotency_key": f"{n}-{i}"} for i in range(BATCH)]
                for _ in range(5):
                    async with session.post(url, json={"jobs": jobs}, headers=headers) as r:
                        if r.status == 503:
                            continue
                        assert r.status == 200, await r.text()
                        results = (await r.json())["results"]
                        break
                else:
                    raise RuntimeError("a batch kept getting 503")
                sample.append(results[random.randrange(BATCH)]["job_id"])
                done += 1
                if done % 50 == 0:
                    rate = done * BATCH / (time.monotonic() - started)
                    print(f"  loaded {done * BATCH:>9,} jobs  ({rate:,.0f}/s)", flush=True)

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return sample


def rss_mb(node: NodeProcess, kind: str = "VmRSS") -> float:
    """Resident memory: VmRSS in all, RssAnon the process's own, RssFile mapped files."""
    assert node.process is not None
    text = Path(f"/proc/{node.process.pid}/status").read_text()
    match = re.search(rf"{kind}:\s+(\d+) kB", text)
    return int(match.group(1)) / 1024 if match else float("nan")


def get_latencies(node: NodeProcess, token: str, ids: list[str], count: int) -> list[float]:
    latencies = []
    for _ in range(count):
        job_id = random.choice(ids)
        started = time.perf_counter()
        status, _, _ = http("GET", f"{node.url}/v1/jobs/{job_id}", token=token)
        latencies.append((time.perf_counter() - started) * 1000)
        assert status == 200
    return latencies


def snapshot_seconds(node: NodeProcess) -> list[float]:
    found = re.findall(r"snapshot written index=\d+ seconds=([\d.]+)", node.log_path.read_text())
    return [float(s) for s in found]


def term(node: NodeProcess) -> int:
    return int(http("GET", f"{node.url}/v1/admin/state")[1]["term"])


def writes_during_snapshots(nodes: list[NodeProcess], token: str, seconds: float) -> list[float]:
    """Sequential small writes for `seconds`: their latencies show any stall."""
    latencies = []
    stop_at = time.monotonic() + seconds
    i = 0
    while time.monotonic() < stop_at:
        node = nodes[i % len(nodes)]
        i += 1
        started = time.perf_counter()
        status, body, _ = http("POST", f"{node.url}/v1/jobs", JOB, token=token)
        latencies.append((time.perf_counter() - started) * 1000)
        assert status == 201, body
        time.sleep(0.02)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--nodes", type=int, default=3, choices=(1, 3))
    parser.add_argument("--concurrency", type=int, default=2, help="batch requests in flight")
    args = parser.parse_args()
    raft = 'compaction_min_entries = 200\ncompaction_min_time = "60s"\n'
    with tempfile.TemporaryDirectory(
        dir=Path.cwd() / "var" if (Path.cwd() / "var").is_dir() else None
    ) as tmp:
        nodes = make_nodes(Path(tmp), args.nodes, raft_extra=raft)
        with running(nodes):
            _, tenant, _ = http(
                "POST",
                f"{nodes[0].url}/v1/tenants",
                {"name": "scale", "max_active_jobs": 10 * args.jobs},
            )
            token = tenant["token"]
            terms_before = [term(n) for n in nodes]
            started = time.monotonic()
            ids = asyncio.run(load([n.url for n in nodes], token, args.jobs, args.concurrency))
            print(f"loaded {args.jobs:,} jobs in {time.monotonic() - started:.0f}s")
            stalls = writes_during_snapshots(nodes, token, 45.0)
            print(
                f"writes during snapshots: p50 {statistics.median(stalls):.1f} ms, "
                f"max {max(stalls):.0f} ms ({len(stalls)} writes)"
            )
            for node in nodes:
                lat = get_latencies(node, token, ids, 2_000)
                cuts = statistics.quantiles(lat, n=100)
                snaps = snapshot_seconds(node)
                db_mb = (node.data_dir / "state.db").stat().st_size / 2**20
                print(
                    f"{node.node_id}: RSS {rss_mb(node):.0f} MB "
                    f"(anon {rss_mb(node, 'RssAnon'):.0f}, files {rss_mb(node, 'RssFile'):.0f}), "
                    f"db {db_mb:.0f} MB, "
                    f"GET p50 {cuts[49]:.2f} ms p99 {cuts[98]:.2f} ms, "
                    f"snapshots {len(snaps)} (longest {max(snaps, default=0):.1f}s)"
                )
            elections = sum(term(n) for n in nodes) - sum(terms_before)
            print(
                f"elections while loading and snapshotting: {elections} (term changes, all nodes)"
            )


if __name__ == "__main__":
    main()
