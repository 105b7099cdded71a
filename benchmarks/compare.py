"""Benchmark: the same spike on BullMQ (Redis) and on schedd, one and three nodes, in one run.

Issue 16: N one-time jobs, created in batches of 1,000, all due at one whole second T well
after the last create; one consumer of the same strength per system (BullMQ: one Worker,
concurrency 100; schedd: one process with 16 receive loops of at most 100 messages, acking what
they get). Drain = last first delivery - T; lost, duplicated and early deliveries are counted.
Prints one table with the ratios to BullMQ, writes benchmarks/results/compare.json and
compare.png (runs received over seconds since T). `--single` measures single creates instead
(issue 29): CALLERS concurrent callers for `--seconds` in one node process (bullmq/single.mjs)
on each side, BullMQ's `queue.add` and schedd's `POST /v1/jobs` to the leader over as many
keep-alive connections; rate, p50 and p99 latency, schedd's node CPU per create; results in
benchmarks/results/compare-single.json. BullMQ is a pinned npm package installed into
benchmarks/.bullmq/ (git-ignored) and runs against a private redis-server on a loopback port.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import queue_client as client
from benchmarks.queue_client import BATCH
from schedd.timeformat import format_instant
from tests.servers import NodeProcess, free_ports, http, make_nodes, running

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BULLMQ_SRC = HERE / "bullmq"
BULLMQ_DIR = HERE / ".bullmq"  # git-ignored: npm installs the pinned bullmq here
SYSTEMS = ("bullmq", "schedd1", "schedd3")
Delivery = tuple[str, float]  # (run key, first seen at, epoch s)


# --- the summary (pure) -------------------------------------------------------------------------


def due_at(now_s: float, n: int, rate: float, lead_s: float | None) -> int:
    """T, a whole second: after the estimated creation time (1.5 n / rate: `rate` is one batch's,
    which overestimates a long run's), a lead of at least 10 s (half the creation time when
    longer) unless `lead_s` is given. spike.mjs uses the same rule."""
    create_s = 1.5 * n / max(rate, 1.0)
    lead = lead_s if lead_s is not None else max(10.0, 0.5 * create_s)
    return math.ceil(now_s + create_s + lead)


def summarize(deliveries: list[Delivery], expected: set[str], due_s: float) -> dict[str, Any]:
    """Counts and drain of one system's deliveries: `first` lists each run's first delivery
    in seconds since T, sorted (the plot's curve)."""
    first: dict[str, float] = {}
    twice = 0
    for key, at in deliveries:
        if key in first:
            twice += 1
            first[key] = min(first[key], at)
        else:
            first[key] = at
    times = sorted(at - due_s for key, at in first.items() if key in expected)
    return {
        "received": len(times),
        "lost": len(expected - first.keys()),
        "twice": twice,
        "early": sum(1 for t in times if t < 0),
        "unexpected": len(first.keys() - expected),
        "drain_s": round(times[-1], 3) if times else None,
        "first": [round(t, 3) for t in times],
    }


def ratios(rows: list[dict[str, Any]]) -> None:
    """Add each row's drain and create rate as a ratio to BullMQ's (when BullMQ ran)."""
    base = next((r for r in rows if r["system"] == "bullmq"), None)
    for row in rows:
        for field in ("drain_s", "create_rate"):
            mine, theirs = row.get(field), base.get(field) if base else None
            row[f"{field}_ratio"] = round(mine / theirs, 2) if mine and theirs else None


def table(rows: list[dict[str, Any]]) -> str:
    head: tuple[str, ...] = (
        "system",
        "N",
        "create/s",
        "x bullmq",
        "drain s",
        "x bullmq",
        "lost",
        "twice",
    )
    head += ("early", "peak RSS MB", "node CPU us/run")
    lines = [" | ".join(head)]
    for r in rows:
        drain = "timeout" if r["timed_out"] else r["drain_s"]
        cells = [r["system"], f"{r['n']:,}", f"{r['create_rate']:,.0f}", r["create_rate_ratio"]]
        cells += [drain, r["drain_s_ratio"], r["lost"], r["twice"], r["early"]]
        cells += ["/".join(map(str, r["peak_rss_mb"])) if r.get("peak_rss_mb") else None]
        cells += [r.get("node_cpu_us")]
        lines.append(" | ".join("-" if c is None else str(c) for c in cells))
    return "\n".join(lines)


# --- BullMQ -------------------------------------------------------------------------------------


def install_bullmq() -> None:
    """npm install the pinned bullmq and ioredis into benchmarks/.bullmq/ unless there."""
    BULLMQ_DIR.mkdir(exist_ok=True)
    shutil.copy(BULLMQ_SRC / "package.json", BULLMQ_DIR / "package.json")
    for script in ("spike.mjs", "single.mjs"):  # they resolve bullmq from there
        shutil.copy(BULLMQ_SRC / script, BULLMQ_DIR / script)
    pinned = json.loads((BULLMQ_SRC / "package.json").read_text())["dependencies"]
    if all(installed_version(name) == version for name, version in pinned.items()):
        return
    print(f"installing {pinned} into {BULLMQ_DIR}", flush=True)
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--no-save"],
        cwd=BULLMQ_DIR,
        check=True,
        timeout=300,
    )


def installed_version(package: str) -> str | None:
    path = BULLMQ_DIR / "node_modules" / package / "package.json"
    return json.loads(path.read_text())["version"] if path.exists() else None


@contextmanager
def redis_server(tmp: Path) -> Iterator[int]:
    """A private redis-server on a free loopback port, no persistence; stopped by PID."""
    [port] = free_ports(1)
    log = (tmp / "redis.log").open("wb")
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    command += ["--appendonly", "no", "--dir", str(tmp), "--daemonize", "no"]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process, timeout_s=10)
        yield port
    finally:
        stop(process)
        log.close()


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"redis-server did not listen on {port} within {timeout_s} s")


def stop(process: subprocess.Popen[Any]) -> None:
    """SIGTERM this process (by its PID), wait, then SIGKILL."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def run_bullmq(n: int, lead_s: float | None, timeout_s: float) -> dict[str, Any]:
    install_bullmq()
    with (
        tempfile.TemporaryDirectory(prefix="compare-redis-") as tmp,
        redis_server(Path(tmp)) as port,
    ):
        out = Path(tmp) / "bullmq.json"
        command = ["node", str(BULLMQ_DIR / "spike.mjs"), "--port", str(port), "--n", str(n)]
        command += ["--out", str(out), "--timeout-s", str(timeout_s)]
        command += [] if lead_s is None else ["--lead-s", str(lead_s)]
        node = subprocess.Popen(command)
        try:
            node.wait(timeout=timeout_s + 60 + n / 100)  # creation at >= 100 jobs/s, then drain
        finally:
            stop(node)
        raw = json.loads(out.read_text())
    deliveries = [(str(i), at / 1000) for i, at in raw["deliveries"]]
    due_s = raw["due_ms"] / 1000
    create_s = (raw["create_end_ms"] - raw["create_start_ms"]) / 1000
    summary = summarize(deliveries, {str(i) for i in range(n)}, due_s)
    lead = due_s - raw["create_end_ms"] / 1000
    return row("bullmq", n, create_s, lead, raw["timed_out"], summary)


def row(
    system: str, n: int, create_s: float, lead_s: float, timed_out: bool, summary: dict[str, Any]
) -> dict[str, Any]:
    print(
        f"{system}: created {n:,} in {create_s:.1f} s (T {lead_s:.1f} s after the last create); "
        f"received {summary['received']:,}, drain {summary['drain_s']} s"
        + (" (timed out)" if timed_out else ""),
        flush=True,
    )
    return {
        "system": system,
        "n": n,
        "create_s": round(create_s, 2),
        "create_rate": round(n / create_s, 1) if create_s else None,
        "lead_s": round(lead_s, 2),
        "timed_out": timed_out,
        **summary,
    }


# --- schedd -------------------------------------------------------------------------------------


async def spike_schedd(
    urls: list[str], token: str, n: int, lead_s: float | None, timeout_s: float, pids: list[int]
) -> tuple[float, float, float, list[str], list[Delivery], bool, dict[str, float]]:
    async with client.session(token) as s:
        later = format_instant((int(time.time()) + 3600) * 1000)  # calibration: due in an hour
        start = time.time()
        await client.post_batches(s, urls, [job(later, "calibrate")] * BATCH)
        rate = BATCH / max(0.001, time.time() - start)
        due_s = due_at(time.time(), n, rate, lead_s)
        start, create_cpu = time.time(), cpu_s(pids)
        results = await client.post_batches(
            s, urls, [job(format_instant(due_s * 1000), "spike")] * n
        )
        created = [f"{r['job_id']}:{r['next_run_at']}" for r in results]
        create_s = time.time() - start
        create_cpu_us = round((cpu_s(pids) - create_cpu) / n * 1e6, 1)  # all nodes, per job
        print(
            f"schedd: {n:,} created in {create_s:.1f} s (node CPU {create_cpu_us} us a job), "
            f"due in {due_s - time.time():.1f} s"
        )
        await asyncio.sleep(max(0.0, due_s - time.time() - 1))
        stop_at = time.monotonic() + (due_s - time.time()) + timeout_s
        nodes_before, consumer_before = cpu_s(pids), time.process_time()
        received, timed_out = await client.receive_all(s, urls, "spike", len(created), stop_at)
        cpu = {  # microseconds of CPU per run through the drain: all nodes, and the consumer
            "node_cpu_us": round((cpu_s(pids) - nodes_before) / n * 1e6, 1),
            "consumer_cpu_us": round((time.process_time() - consumer_before) / n * 1e6, 1),
            "create_cpu_us": create_cpu_us,
        }
    deliveries = [(m["idempotency_key"], at) for m, at in received]
    return due_s, create_s, due_s - start - create_s, created, deliveries, timed_out, cpu


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user and system) the processes have used so far (/proc/<pid>/stat)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat
    return total / os.sysconf("SC_CLK_TCK")


def job(run_at: str, queue: str) -> dict[str, Any]:
    return {"schedule": {"run_at": run_at}, "target": {"type": "queue", "name": queue}}


@dataclass
class BenchCluster:
    """A running schedd cluster with a benchmark tenant (no quota, no dispatch rate)."""

    nodes: list[NodeProcess]
    token: str
    tmp: Path

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def pids(self) -> list[int]:
        return [node.process.pid for node in self.nodes if node.process is not None]


@contextmanager
def bench_cluster(nodes: int) -> Iterator[BenchCluster]:
    with (
        tempfile.TemporaryDirectory(prefix="compare-schedd-") as tmp,
        running(make_nodes(Path(tmp), nodes)) as cluster,
    ):
        tenant = {"name": "bench", "max_active_jobs": 10_000_000, "dispatch_rate": 0}
        status, body, _ = http("POST", f"{cluster[0].url}/v1/tenants", tenant)
        assert status == 201, body
        yield BenchCluster(list(cluster), body["token"], Path(tmp))


def run_schedd(nodes: int, n: int, lead_s: float | None, timeout_s: float) -> dict[str, Any]:
    with bench_cluster(nodes) as bench:
        pids = bench.pids
        result = asyncio.run(spike_schedd(bench.urls, bench.token, n, lead_s, timeout_s, pids))
        peak_rss = peak_rss_mb(pids)
    due_s, create_s, lead, created, deliveries, timed_out, cpu = result
    summary = summarize(deliveries, set(created), due_s) | cpu
    summary["peak_rss_mb"] = peak_rss
    print(
        f"schedd{nodes}: peak RSS per node {summary['peak_rss_mb']} MB; CPU per run through "
        f"the drain: nodes {cpu['node_cpu_us']} us, consumer {cpu['consumer_cpu_us']} us",
        flush=True,
    )
    return row(f"schedd{nodes}", n, create_s, lead, timed_out, summary)


def peak_rss_mb(pids: list[int]) -> list[int]:
    """Each live process's highest resident set size so far, the kernel's own high-water mark
    (VmHWM), in MB (issue 16: at most 500 MB per node through the 620,000-run spike)."""
    return [round(status_kib(pid, "VmHWM") / 1024) for pid in pids]


def status_kib(pid: int, field: str) -> int:
    """A live process's /proc status field in KiB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# --- single creates (--single) ------------------------------------------------------------------

CALLERS = 64


def latency_row(
    system: str, count: int, elapsed_s: float, latencies: list[float]
) -> dict[str, Any]:
    """Rate and latency percentiles (ms) of one system's single creates."""
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    found = {
        "system": system,
        "creates": count,
        "rate": round(count / elapsed_s, 1),
        "p50_ms": round(cuts[49], 2),
        "p99_ms": round(cuts[98], 2),
    }
    print(
        f"{system}: {found['rate']:,.0f} single creates/s, p50 {found['p50_ms']} ms, "
        f"p99 {found['p99_ms']} ms",
        flush=True,
    )
    return found


def single_bullmq(seconds: float) -> dict[str, Any]:
    install_bullmq()
    with (
        tempfile.TemporaryDirectory(prefix="compare-redis-") as tmp,
        redis_server(Path(tmp)) as port,
    ):
        raw = single_node_client(Path(tmp) / "single.json", seconds, port=port)
    return latency_row("bullmq", raw["count"], raw["elapsed_s"], raw["latencies_ms"])


def single_node_client(
    out: Path, seconds: float, *, port: int | None = None, url: str = "", token: str = ""
) -> dict[str, Any]:
    """Run bullmq/single.mjs (one side or the other) and read what it wrote."""
    command = ["node", str(BULLMQ_DIR / "single.mjs"), "--callers", str(CALLERS)]
    command += ["--seconds", str(seconds), "--out", str(out)]
    if port is not None:
        command += ["--port", str(port)]
    else:
        body = job(format_instant((int(time.time()) + 3600) * 1000), "single")
        command += ["--url", url, "--token", token, "--body", json.dumps(body)]
    subprocess.run(command, check=True, timeout=seconds + 120)
    found: dict[str, Any] = json.loads(out.read_text())
    assert found["errors"] == 0, f"{found['errors']} creates failed"
    return found


def leader_url(cluster: list[Any]) -> str:
    """The API of the node that leads Raft (the issue's single creates went to the leader)."""
    _, state, _ = http("GET", f"{cluster[0].url}/v1/admin/state")
    for node in cluster:
        if state["leader"] in (node.node_id, f"127.0.0.1:{node.raft_port}"):
            return str(node.url)
    return str(cluster[0].url)


def single_schedd(nodes: int, seconds: float) -> dict[str, Any]:
    with bench_cluster(nodes) as bench:
        install_bullmq()  # the node client sits beside it
        before = cpu_s(bench.pids)
        out = bench.tmp / "single.json"
        raw = single_node_client(out, seconds, url=leader_url(bench.nodes), token=bench.token)
        node_cpu = cpu_s(bench.pids) - before
    count = raw["count"]
    found = latency_row(f"schedd{nodes}", count, raw["elapsed_s"], raw["latencies_ms"])
    found["node_cpu_us"] = round(node_cpu / max(count, 1) * 1e6, 1)
    return found


def single_table(rows: list[dict[str, Any]]) -> str:
    base = next((r["rate"] for r in rows if r["system"] == "bullmq"), None)
    lines = ["system | creates/s | x bullmq | p50 ms | p99 ms | node CPU us/create"]
    for r in rows:
        ratio = "-" if base is None else f"{r['rate'] / base:.3f}"
        cpu = r.get("node_cpu_us", "-")
        lines.append(
            f"{r['system']} | {r['rate']:,.0f} | {ratio} | {r['p50_ms']} | {r['p99_ms']} | {cpu}"
        )
    return "\n".join(lines)


def run_single(systems: list[str], seconds: float) -> None:
    rows = [
        single_bullmq(seconds) if system == "bullmq" else single_schedd(int(system[-1]), seconds)
        for system in systems
    ]
    print(single_table(rows))
    RESULTS.mkdir(exist_ok=True)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    report = {"measured_at": when, "callers": CALLERS, "seconds": seconds, "rows": rows}
    (RESULTS / "compare-single.json").write_text(json.dumps(report, indent=2) + "\n")


# --- output -------------------------------------------------------------------------------------


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no plot)")
        return
    fig, ax = plt.subplots(figsize=(9, 5))
    for r in rows:
        ax.plot(r["first"], range(1, len(r["first"]) + 1), label=f"{r['system']} ({r['n']:,})")
    ax.set_xlabel("seconds since T (all jobs due)")
    ax.set_ylabel("runs received (first delivery)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="jobs (620000: the seed's spike)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset")
    parser.add_argument(
        "--lead-s", type=float, help="T lies this far after the last create (default: estimated)"
    )
    parser.add_argument(
        "--timeout-s", type=float, help="drain timeout after T (default: max(120, 3 s per 1,000))"
    )
    parser.add_argument(
        "--single",
        action="store_true",
        help=f"single creates instead: {CALLERS} concurrent callers on each system",
    )
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="--single: seconds per system (default 10)"
    )
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    if unknown := set(systems) - set(SYSTEMS):
        parser.error(f"unknown systems {sorted(unknown)}: pick from {', '.join(SYSTEMS)}")
    if args.single:
        run_single(systems, args.seconds)
        return
    timeout_s = args.timeout_s or max(120.0, 3 * args.n / 1000)
    rows = []
    for system in systems:
        if system == "bullmq":
            rows.append(run_bullmq(args.n, args.lead_s, timeout_s))
        else:
            rows.append(run_schedd(int(system[-1]), args.n, args.lead_s, timeout_s))
    ratios(rows)
    print(table(rows))
    RESULTS.mkdir(exist_ok=True)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    report = {
        "measured_at": when,
        "rows": [{k: v for k, v in r.items() if k != "first"} for r in rows],
    }
    (RESULTS / "compare.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(rows, RESULTS / "compare.png")


if __name__ == "__main__":
    main()
