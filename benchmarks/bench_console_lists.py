"""Benchmark: the list routes the web console uses, for one tenant with 1,000,000 jobs (issue 18).

Builds the store once (benchmarks/console_store.py; cached under var/bench/, keyed by size, schema
and builder version), then serves it with the real aiohttp app in this process (no Raft: reads
only, through a ReadPool, on a loopback port) and times GET requests with the tenant's token:
pages of /v1/jobs followed by cursor, the filters that scan (each request examines at most
10,000 jobs), a job's audit trail, dead letters and queues. Per request: median and p95 of
`--reps` repetitions, or of every request of a walk over the whole tenant.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sqlite3
import statistics
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlencode

from aiohttp.test_utils import TestClient, TestServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import console_store as store
from schedd.api.app import build_app
from schedd.api.context import ApiContext, Proposing, RaftStatus
from schedd.store.db import ReadPool
from schedd.timeformat import format_instant

ROOT = Path(__file__).resolve().parents[1]
AUTH = {"Authorization": f"Bearer {store.TOKEN}"}
Client = TestClient[Any, Any]


class Table:
    """The rows printed at the end: what was asked, and how long each request took (ms)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, list[float], str]] = []

    def add(self, what: str, how: str, ms: list[float], note: str = "") -> None:
        note = f"{note}; RSS {proc_kib('VmRSS') / 1024:.0f} MB".lstrip("; ")
        self.rows.append((what, how, ms, note))
        print(f"  {what:<60} {_cuts(ms)}  {note}", flush=True)

    def print(self) -> None:
        head = f"{'request':<60} {'how measured':<26} {'median':>9} {'p95':>9} {'max':>9}"
        print("\n" + head + "  notes\n" + "-" * len(head))
        for what, how, ms, note in self.rows:
            print(f"{what:<60} {how:<26} {_cuts(ms)}  {note}")


def _cuts(ms: list[float]) -> str:
    p95 = statistics.quantiles(ms, n=20, method="inclusive")[18] if len(ms) >= 2 else ms[0]
    return f"{statistics.median(ms):>7.1f}ms {p95:>7.1f}ms {max(ms):>7.1f}ms"


async def get(client: Client, path: str, query: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """One GET: its time until the whole body is read (ms), and the JSON object."""
    url = f"{path}?{urlencode(query)}" if query else path
    started = time.perf_counter()
    async with client.get(url, headers=AUTH) as response:
        data = await response.read()
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status == 200, (url, response.status, data[:300])
    return elapsed, cast(dict[str, Any], json.loads(data))


async def repeat(client: Client, path: str, query: dict[str, str], reps: int) -> list[float]:
    return [(await get(client, path, query))[0] for _ in range(reps)]


async def walk(
    client: Client, path: str, query: dict[str, str], key: str, pages: int | None
) -> tuple[list[float], int, dict[str, str]]:
    """Follow next_cursor for `pages` requests (None: to the end). Returns each request's
    time, the items seen, and the query of the request after the last one made."""
    times: list[float] = []
    seen = 0
    asked = dict(query)
    while pages is None or len(times) < pages:
        ms, body = await get(client, path, asked)
        times.append(ms)
        seen += len(body[key])
        if body["next_cursor"] is None:
            break
        asked = query | {"cursor": body["next_cursor"]}
    return times, seen, asked


async def pages(
    client: Client, table: Table, what: str, query: dict[str, str], reps: int, key: str = "jobs"
) -> None:
    """Page 1 repeated, the walk to page 100, then page 100 repeated."""
    path = "/v1/deadletters" if key == "deadletters" else "/v1/jobs"
    table.add(f"{what} page 1", f"{reps} reps", await repeat(client, path, query, reps))
    times, seen, hundredth = await walk(client, path, query, key, 99)
    table.add(
        f"{what} pages 1-{len(times)} walk", f"{len(times)} requests", times, f"{seen:,} seen"
    )
    last = "page 100" if "cursor" in hundredth and len(times) == 99 else f"page {len(times)} (last)"
    table.add(f"{what} {last}", f"{reps} reps", await repeat(client, path, hundredth, reps))


async def full_walk(
    client: Client, table: Table, what: str, query: dict[str, str], expected: str
) -> None:
    """Every request a client makes to see all the matches of a scanning filter."""
    started = time.monotonic()
    times, seen, _ = await walk(client, "/v1/jobs", query, "jobs", None)
    total = time.monotonic() - started
    note = f"{seen} matches ({expected}) in {len(times)} requests, {total:.1f}s in all"
    table.add(f"{what} (whole tenant)", f"{len(times)} requests", times, note)


async def scenario(client: Client, size: int, reps: int, middle: str) -> Table:
    table = Table()
    limit = {"limit": "50"}
    await pages(client, table, "GET /v1/jobs?limit=50", limit, reps)
    await pages(client, table, "  ?status=active", limit | {"status": "active"}, reps)
    await pages(client, table, "  ?status=paused", limit | {"status": "paused"}, reps)
    http = limit | {"target_type": "http", "host": store.HOSTS[1]}
    await pages(client, table, f"  ?target_type=http&host={store.HOSTS[1]}", http, reps)
    needles = f"{len(range(store.needle_every(size) // 2, size, store.needle_every(size)))} made"
    await full_walk(client, table, "  ?name=needle", limit | {"name": "needle"}, needles)
    window = _window(hours=1)
    table.add(
        "  ?next_run_after/before (1 h) page 1",
        f"{reps} reps",
        await repeat(client, "/v1/jobs", limit | window, reps),
    )
    await full_walk(client, table, "  ?next_run_after/before (1 h)", limit | window, "~0.05%")
    week = limit | _window(hours=24 * 7)
    table.add(
        "  ?next_run_after/before (7 d) page 1",
        f"{reps} reps",
        await repeat(client, "/v1/jobs", week, reps),
    )
    table.add(
        "GET /v1/jobs/{id} (the middle job)",
        f"{reps} reps",
        await repeat(client, f"/v1/jobs/{middle}", {}, reps),
    )
    table.add(
        "GET /v1/audit?job_id=<the middle job>",
        f"{reps} reps",
        await repeat(client, "/v1/audit", {"job_id": middle}, reps),
    )
    table.add(
        "GET /v1/audit?limit=50 (the tenant's)",
        f"{reps} reps",
        await repeat(client, "/v1/audit", limit, reps),
    )
    await pages(client, table, "GET /v1/deadletters?limit=50", limit, reps, key="deadletters")
    _, body = await get(client, "/v1/queues", {})
    note = f"{len(body['queues'])} queues, partial={body['partial']}, no peers registered"
    table.add("GET /v1/queues", f"{reps} reps", await repeat(client, "/v1/queues", {}, reps), note)
    return table


def _middle_job(path: Path, size: int) -> str:
    """The job in the middle of the tenant's id order (read from the file, not the API)."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        row = conn.execute(
            "SELECT job_id FROM jobs WHERE tenant_id = ? ORDER BY job_id LIMIT 1 OFFSET ?",
            (store.TENANT_ID, size // 2),
        ).fetchone()
    return str(row[0])


def _window(hours: int) -> dict[str, str]:
    """A next-run window in the middle of the 60 days the one-time runs spread over."""
    start = store.BASE_MS + 30 * store.DAY_MS + 3_600_000 // 2
    end = start + hours * 3_600_000
    return {"next_run_after": format_instant(start), "next_run_before": format_instant(end)}


def proc_kib(field: str) -> int:
    """A line of this process's /proc status (VmRSS, VmHWM: the peak), in KiB."""
    match = re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text())
    return int(match.group(1)) if match else -1


async def measure(path: Path, size: int, reps: int) -> Table:
    reads = ReadPool(path)
    ctx = ApiContext(
        node_id="bench",
        proposer=cast(Proposing, None),  # reads only: nothing is proposed
        reads=reads,
        raft=cast(RaftStatus, None),  # no route used here asks for Raft's state
        admin_token="adm_bench_console_lists_0123456789",
        partitions=store.PARTITIONS,
        payload_limit=65536,
    )
    try:
        async with TestClient(TestServer(build_app(ctx))) as client:
            return await scenario(client, size, reps, _middle_job(path, size))
    finally:
        reads.close()


def ensure_store(size: int, root: Path) -> Path:
    """The cached store, built first (in a child process, so its memory is not counted here)."""
    path = store.cached_path(root, size)
    if path.exists():
        print(f"store: {path} (cached, {path.stat().st_size / 2**20:,.0f} MB)")
        return path
    scratch = path.with_suffix(".building")
    for stale in root.glob(f"{scratch.name}*"):
        stale.unlink()
    print(f"building {size:,} jobs into {path} ...", flush=True)
    started = time.monotonic()
    command = [sys.executable, __file__, "--jobs", str(size), "--build-into", str(scratch)]
    subprocess.run(command, check=True)
    scratch.rename(path)
    seconds = time.monotonic() - started
    print(f"built in {seconds:.0f}s ({path.stat().st_size / 2**20:,.0f} MB)", flush=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs of the one tenant")
    parser.add_argument("--reps", type=int, default=20, help="repetitions per timed request")
    parser.add_argument("--dir", type=Path, default=ROOT / "var" / "bench", help="cache folder")
    parser.add_argument("--build-into", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_into is not None:
        store.build(args.build_into, args.jobs)
        return
    path = ensure_store(args.jobs, args.dir)
    print(f"tenant: {args.jobs:,} jobs; RSS before serving {proc_kib('VmRSS') / 1024:.0f} MB")
    table = asyncio.run(measure(path, args.jobs, args.reps))
    table.print()
    print(
        f"\njobs: {args.jobs:,}   peak RSS of this process (server and client): "
        f"{proc_kib('VmHWM') / 1024:.0f} MB   now {proc_kib('VmRSS') / 1024:.0f} MB "
        f"(anonymous {proc_kib('RssAnon') / 1024:.0f}, files {proc_kib('RssFile') / 1024:.0f})"
    )


if __name__ == "__main__":
    main()
