"""Benchmark: HTTP callback delivery from a real three-node cluster to a local receiver.

Scenarios (issue 5): throughput, as a spike of N callbacks due in the same second and as a
sustained rate of every-1s jobs; and isolation, tenants whose endpoint always times out
(`--stall-tenants`, 1 by default) beside a tenant with a steady stream. The receiver is a lean
aiohttp server in its own process (loopback only); it measures lag (receive time - scheduled_at
from the body) and, per tenant, the requests it holds at once. Each result carries the CPU the
nodes and the receiver used and how busy the machine was (`--profile DIR`: py-spy stacks of
every node). Prints JSON results and writes benchmarks/results/delivery.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_dispatch import create, plot
from benchmarks.lag import Record, summarize
from schedd.timeformat import format_instant
from tests.servers import NodeProcess, http, make_nodes, running

RESULTS = Path(__file__).resolve().parent / "results"
PY_SPY = Path(sys.executable).parent / "py-spy"


# ------------------------------------------------------------------ the receiver process


class Tally:
    """What the receiver saw: callbacks per tenant, and requests held at once per tenant."""

    def __init__(self) -> None:
        self.records: dict[str, list[Record]] = {}
        self.in_flight: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.samples: list[tuple[float, dict[str, int]]] = []

    def take(self) -> dict[str, Any]:
        taken = {"records": self.records, "peak": self.peak, "samples": self.samples}
        self.records, self.peak, self.samples = {}, Counter(self.in_flight), []
        return taken


def build_receiver(tally: Tally, hold_s: float) -> web.Application:
    """`/fast/{tenant}` answers 200 at once; `/slow/{tenant}` holds the request `hold_s`."""

    async def fast(request: web.Request) -> web.Response:
        body = await request.read()
        now = time.time()
        scheduled_s = datetime.fromisoformat(json.loads(body)["scheduled_at"]).timestamp()
        key = request.headers.get("Idempotency-Key", "")
        tally.records.setdefault(request.match_info["tenant"], []).append(
            (now, now - scheduled_s, key)
        )
        return web.Response(text="ok")

    async def slow(request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        tally.in_flight[tenant] += 1
        tally.peak[tenant] = max(tally.peak[tenant], tally.in_flight[tenant])
        try:
            await request.read()
            await asyncio.sleep(hold_s)  # cancelled when the caller gives up and disconnects
            return web.Response(text="late")
        finally:
            tally.in_flight[tenant] -= 1

    async def counts(request: web.Request) -> web.Response:
        found = {tenant: len({k for _, _, k in seen}) for tenant, seen in tally.records.items()}
        return web.json_response(found)

    async def take(request: web.Request) -> web.Response:
        return web.json_response(tally.take())

    app = web.Application()
    app.router.add_post("/fast/{tenant}", fast)
    app.router.add_post("/slow/{tenant}", slow)
    app.router.add_get("/_counts", counts)
    app.router.add_get("/_take", take)
    return app


async def _sample(tally: Tally) -> None:
    while True:
        await asyncio.sleep(0.2)
        if any(tally.in_flight.values()):
            tally.samples.append((time.time(), dict(tally.in_flight)))


async def _serve_receiver(conn: Connection, hold_s: float) -> None:
    tally = Tally()
    runner = web.AppRunner(
        build_receiver(tally, hold_s), access_log=None, handler_cancellation=True
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    server: Any = site._server  # the bound port (0 asked the OS for a free one)
    conn.send(server.sockets[0].getsockname()[1])
    sampler = asyncio.create_task(_sample(tally))
    try:
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told to stop
    finally:
        sampler.cancel()
        await runner.cleanup()


def serve_receiver(conn: Connection, hold_s: float) -> None:
    """The receiver process's main: serve until the parent sends anything (or goes away)."""
    with contextlib.suppress(EOFError, KeyboardInterrupt):
        asyncio.run(_serve_receiver(conn, hold_s))


@contextlib.contextmanager
def receiver_process(hold_s: float) -> Iterator[tuple[str, int]]:
    """(base URL, pid) of a receiver in its own process (its own GIL), always stopped after."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=serve_receiver, args=(child, hold_s), name="receiver")
    process.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("the receiver did not start")
        assert process.pid is not None
        yield f"http://127.0.0.1:{parent.recv()}", process.pid
    finally:
        with contextlib.suppress(OSError):
            parent.send("stop")
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()


# ------------------------------------------------------------------ measuring


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of every CPU so far: idle and iowait count as not busy."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


class CpuMeter:
    """CPU use of each process (in cores) between `start()` and `stop()`, and the share of the
    machine's CPU time that was busy (anything near 1.0 means the figures are CPU-bound)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._start: dict[str, float] = {}
        self._machine = (0, 0)
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._start = {name: cpu_s(pid) for name, pid in self.pids.items()}
        self._machine = machine_ticks()

    def stop(self) -> dict[str, float]:
        wall = time.monotonic() - self._t0
        busy, total = (now - then for now, then in zip(machine_ticks(), self._machine, strict=True))
        used = {name: (cpu_s(pid) - self._start[name]) / wall for name, pid in self.pids.items()}
        return {name: round(cores, 2) for name, cores in used.items()} | {
            "total": round(sum(used.values()), 2),
            "machine_busy": round(busy / total, 2) if total else 0.0,
        }


@contextlib.contextmanager
def profiling(
    directory: Path | None, name: str, pids: dict[str, int], seconds: int
) -> Iterator[None]:
    """py-spy (raw collapsed stacks, per thread) on every node for `seconds`, if asked."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    spies = []
    for node, pid in pids.items():
        output = directory / f"{name}-{node}.txt"
        command = [str(PY_SPY), "record", "--pid", str(pid), "--duration", str(seconds)]
        command += ["--rate", "50", "--format", "raw", "--threads", "--nonblocking"]
        spies.append(
            subprocess.Popen(
                [*command, "--output", str(output)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    try:
        yield
    finally:
        for spy in spies:
            try:
                spy.wait(timeout=seconds + 30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()


def received(receiver: str, tenant: str) -> int:
    _, counts, _ = http("GET", f"{receiver}/_counts", token=None, timeout_s=30)
    return int(counts.get(tenant, 0))


def wait_received(receiver: str, tenant: str, expected: int, deadline_s: float) -> None:
    stop_at = time.monotonic() + deadline_s
    while received(receiver, tenant) < expected and time.monotonic() < stop_at:
        time.sleep(0.5)


def take(receiver: str) -> dict[str, Any]:
    """Everything the receiver saw since the last take (and it forgets it)."""
    _, taken, _ = http("GET", f"{receiver}/_take", token=None, timeout_s=60)
    result: dict[str, Any] = taken
    return result


def records_of(taken: dict[str, Any], *tenants: str) -> list[Record]:
    return [(r[0], r[1], r[2]) for t in tenants for r in taken["records"].get(t, [])]


# ------------------------------------------------------------------ scenarios


class Bench:
    """The cluster, the receiver and the options every scenario shares."""

    def __init__(self, nodes: list[NodeProcess], receiver: str, receiver_pid: int, args: Any):
        self.urls = [n.url for n in nodes]
        self.receiver = receiver
        self.node_pids = {n.node_id: n.process.pid for n in nodes if n.process is not None}
        self.cpu = CpuMeter(self.node_pids | {"receiver": receiver_pid})
        self.args = args

    def tenant(self, name: str) -> str:
        body = {"name": name, "max_active_jobs": 10_000_000, "dispatch_rate": 0}
        status, created, _ = http("POST", f"{self.urls[0]}/v1/tenants", body)
        assert status == 201, created
        token: str = created["token"]
        return token

    def create(self, token: str, bodies: list[dict[str, Any]]) -> None:
        asyncio.run(create(self.urls, token, bodies))

    def profile(self, name: str, seconds: int) -> contextlib.AbstractContextManager[None]:
        return profiling(self.args.profile, name, self.node_pids, seconds)


def http_target(url: str, timeout: str) -> dict[str, Any]:
    return {"type": "http", "url": url, "timeout": timeout}


def spike(bench: Bench, count: int) -> tuple[dict[str, Any], list[Record]]:
    """`count` one-time callbacks due in the same second, spread over `--tenants` tenants."""
    names = [f"spike{i}" for i in range(bench.args.tenants)]
    due_ms = (int(time.time()) + 20 + count // 3000) * 1000
    for i, name in enumerate(names):
        body = {
            "schedule": {"run_at": format_instant(due_ms)},
            "target": http_target(f"{bench.receiver}/fast/{name}", "10s"),
        }
        share = count // len(names) + (1 if i < count % len(names) else 0)
        bench.create(bench.tenant(name), [body] * share)
    wait_s = due_ms / 1000 - time.time()
    print(f"spike: {count:,} callbacks due at {format_instant(due_ms)} (in {wait_s:.0f}s)")
    time.sleep(max(0.0, wait_s - 0.5))
    bench.cpu.start()
    with bench.profile("spike", bench.args.profile_s):
        for name in names:
            wait_received(bench.receiver, name, count // len(names), deadline_s=180)
    cpu = bench.cpu.stop()
    seen = records_of(take(bench.receiver), *names)
    label = f"spike {count:,} ({len(names)} tenant{'s' if len(names) > 1 else ''})"
    return summarize(label, seen, count, cpu_cores=cpu), seen


def sustained(bench: Bench, rate: int, seconds: int) -> tuple[dict[str, Any], list[Record]]:
    """`rate` every-1s jobs for `seconds`: `rate` callbacks a second."""
    start_ms = (int(time.time()) + 15) * 1000
    end_ms = start_ms + seconds * 1000 - 1
    schedule = {
        "every": "1s",
        "start_at": format_instant(start_ms),
        "end_at": format_instant(end_ms),
    }
    body = {"schedule": schedule, "target": http_target(f"{bench.receiver}/fast/steady", "10s")}
    bench.create(bench.tenant("steady"), [body] * rate)
    time.sleep(max(0.0, start_ms / 1000 - time.time() - 0.5))
    bench.cpu.start()
    with bench.profile("sustained", min(seconds, bench.args.profile_s)):
        wait_received(bench.receiver, "steady", rate * seconds, deadline_s=seconds + 30)
    cpu = bench.cpu.stop()
    seen = records_of(take(bench.receiver), "steady")
    return summarize(f"sustained {rate:,}/s", seen, rate * seconds, cpu_cores=cpu), seen


def isolation(
    bench: Bench, slow_jobs: int, fast_rate: int, seconds: int
) -> tuple[dict[str, Any], list[Record]]:
    """`--stall-tenants` tenants whose every call times out after 1 s, each with `slow_jobs` jobs
    due at once, beside tenant `fast` with `fast_rate` every-1s jobs: the fast one's lag, and
    what each stalling tenant holds at the receiver at once."""
    start_ms = (int(time.time()) + 15) * 1000
    stalling = [f"stall{i}" for i in range(bench.args.stall_tenants)]
    for name in stalling:
        stall = {
            "schedule": {"run_at": format_instant(start_ms)},
            "target": http_target(f"{bench.receiver}/slow/{name}", "1s"),
            "retry": {"max_attempts": 1},
        }
        bench.create(bench.tenant(name), [stall] * slow_jobs)
    schedule = {
        "every": "1s",
        "start_at": format_instant(start_ms + 2000),  # the stalling tenants have their slots
        "end_at": format_instant(start_ms + 2000 + seconds * 1000 - 1),
    }
    fast = {"schedule": schedule, "target": http_target(f"{bench.receiver}/fast/fast", "10s")}
    bench.create(bench.tenant("fast"), [fast] * fast_rate)
    time.sleep(max(0.0, start_ms / 1000 - time.time() - 0.5))
    bench.cpu.start()
    with bench.profile("isolation", min(seconds, bench.args.profile_s)):
        wait_received(bench.receiver, "fast", fast_rate * seconds, deadline_s=seconds + 40)
    cpu = bench.cpu.stop()
    taken = take(bench.receiver)
    seen = records_of(taken, "fast")
    held = [sum(s.get(name, 0) for name in stalling) for _, s in taken["samples"]]
    label = f"isolation: {fast_rate:,}/s beside {len(stalling)} tenant(s) that always time out"
    result = summarize(
        label,
        seen,
        fast_rate * seconds,
        stall_peak_in_flight=max(taken["peak"].get(name, 0) for name in stalling),
        stall_share=3 * bench.args.tenant_concurrency,  # per node, on each of the 3 nodes
        stall_all_mean_in_flight=round(statistics.mean(held), 1) if held else 0,
        cpu_cores=cpu,
    )
    return result, seen


# ------------------------------------------------------------------ main


def node_sections(args: Any) -> str:
    return (
        '[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'
        f"concurrency = {args.concurrency}\ntenant_concurrency = {args.tenant_concurrency}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spike", type=int, default=30_000, help="callbacks due in one second")
    parser.add_argument("--tenants", type=int, default=1, help="tenants sharing the spike")
    parser.add_argument("--rate", type=int, default=2_000, help="sustained callbacks a second")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--stall-tenants", type=int, default=1)
    parser.add_argument("--slow-jobs", type=int, default=4_000, help="per stalling tenant")
    parser.add_argument("--fast-rate", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=512, help="[delivery] concurrency")
    parser.add_argument("--tenant-concurrency", type=int, default=64)
    parser.add_argument("--profile", type=Path, help="py-spy raw stacks of every node, here")
    parser.add_argument("--profile-s", type=int, default=15)
    parser.add_argument("--plot", action="store_true", help="also draw lag over time, as a png")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    results, series = [], {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        receiver_process(hold_s=30.0) as (receiver, receiver_pid),
        running(make_nodes(Path(tmp), 3, extra_sections=node_sections(args))) as nodes,
    ):
        bench = Bench(nodes, receiver, receiver_pid, args)
        if args.spike:
            result, seen = spike(bench, args.spike)
            results.append(result)
            series[result["scenario"]] = seen
        if args.rate:
            result, seen = sustained(bench, args.rate, args.seconds)
            results.append(result)
            series[result["scenario"]] = seen
        if args.fast_rate:
            result, seen = isolation(bench, args.slow_jobs, args.fast_rate, args.seconds)
            results.append(result)
            series[result["scenario"]] = seen
    (RESULTS / "delivery.json").write_text(json.dumps(results, indent=2) + "\n")
    if args.plot:
        plot(series, RESULTS / "delivery.png")


if __name__ == "__main__":
    main()
