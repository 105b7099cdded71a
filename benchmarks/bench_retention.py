"""Benchmark: retention under load, in compressed time, on a real cluster (issue 14).

Every node keeps runs, audit, dead letters and messages for --retention (60 s). --recurring jobs
fire every second and --one-time-rate one-time jobs a second are created, each due 1-2 s after
its creation, all to one queue that 16 consumers receive from and ack. Every 10 s the script
samples, per node: the database (state.db with its WAL) and Raft journal sizes, the snapshot,
RSS and the rows retention pruned. It prints the samples, lag (receive time - scheduled time)
per minute and after the warm-up, the run rate achieved, and a flatness verdict per node and
series; it writes benchmarks/results/retention.json and retention.png.

    make bench-retention                      # the issue's run: 10 minutes, 1,000 + 500 runs/s
    .venv/bin/python benchmarks/bench_retention.py --duration 150 --recurring 200 \
        --one-time-rate 100                   # a short check (about 3.5 minutes in all)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import re
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.lag import percentiles
from schedd.storage import file_sizes
from schedd.timeformat import format_instant, parse_duration, parse_instant
from tests.servers import ADMIN_TOKEN, NodeProcess, http, make_nodes, running

RESULTS = Path(__file__).resolve().parent / "results"
QUEUE = "retained"
WORKERS = 16  # consumer loops, spread over the nodes
SAMPLE_EVERY_S = 10
TICKS_PER_S = 10  # one-time jobs are created in this many batches a second
CREATES_IN_FLIGHT = 8  # batch requests of the creator at once; past it the creator falls behind
LEAD_S = 10  # the recurring jobs start this long after they are created
DRAIN_S = 30  # after the load window: how long to wait for the last runs
WARMUP_S = 60  # the first minute is excluded from the lag figures and the flatness verdict
GROWTH_FRACTION = 0.10  # flatness: a later sample may exceed the reference by 10% + 5 MB
GROWTH_MB = 5.0
MB = 1_000_000
# Per node and sample, in MB: the database with its WAL (as GET /v1/admin/retention's `files`),
# the WAL alone, the Raft journal, the Raft snapshot and the resident memory.
TABLE = (
    ("database", "db"),
    ("wal", "wal"),
    ("journal", "jrnl"),
    ("snapshot", "snap"),
    ("rss", "rss"),
)
# Judged for flatness: the three the issue names (the overall verdict), and state.db alone
# (without the WAL, whose size follows checkpoints rather than what is kept), shown beside them.
VERDICT_SERIES = ("database", "journal", "rss")
EXTRA_SERIES = ("db_file",)
COMMIT_INDEX = re.compile(r"^schedd_raft_commit_index ([0-9.e+]+)$", re.MULTILINE)
PRUNED = re.compile(r'^schedd_pruned_rows_total\{kind="(\w+)"\} ([0-9.e+]+)$', re.MULTILINE)


@dataclass
class Load:
    """What the creator and the consumers saw; lags are bucketed by scheduled second since t0."""

    t0: float
    duration: int
    recurring_ids: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    lags: dict[int, list[float]] = field(default_factory=dict)
    recurring_received: int = 0
    one_time_received: int = 0
    outside_window: int = 0
    duplicates: int = 0
    redelivered: int = 0
    receives: int = 0  # receive calls answered 200
    empty_receives: int = 0  # of which with no message
    one_time_created: int = 0
    one_time_late: int = 0  # created only after their run_at had passed
    create_latency_s: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    expected_recurring: int = 0
    creating: bool = True  # the creator may still add one-time jobs
    final_tables: dict[str, dict[str, int]] | None = None  # the first node's, after the drain

    def finished(self) -> bool:
        """Every recurring run and every one-time job created so far was received."""
        return (
            not self.creating
            and self.recurring_received >= self.expected_recurring
            and self.one_time_received >= self.one_time_created
        )

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1

    def received(self, now: float, message: dict[str, Any]) -> None:
        if message.get("attempt", 1) > 1:
            self.redelivered += 1
        key = message["idempotency_key"]
        if key in self.seen:
            self.duplicates += 1
            return
        self.seen.add(key)
        scheduled = parse_instant(message["scheduled_at"], field="scheduled_at") / 1000
        second = int(scheduled - self.t0)
        if not 0 <= second < self.duration:
            self.outside_window += 1
            return
        self.lags.setdefault(second, []).append(now - scheduled)
        if message["job_id"] in self.recurring_ids:
            self.recurring_received += 1
        else:
            self.one_time_received += 1


def rss(node: NodeProcess) -> dict[str, int]:
    """Resident bytes of the node process: from /proc (VmRSS, RssAnon, RssFile), else psutil."""
    assert node.process is not None
    pid = node.process.pid
    with contextlib.suppress(OSError):
        text = Path(f"/proc/{pid}/status").read_text()
        fields = dict(re.findall(r"^(VmRSS|RssAnon|RssFile):\s+(\d+) kB", text, re.MULTILINE))
        return {
            "rss": int(fields.get("VmRSS", 0)) * 1024,
            "rss_anon": int(fields.get("RssAnon", 0)) * 1024,
            "rss_file": int(fields.get("RssFile", 0)) * 1024,
        }
    try:
        psutil = importlib.import_module("psutil")
        return {"rss": int(psutil.Process(pid).memory_info().rss)}
    except Exception:  # no psutil, or the process is gone (psutil.Error)
        return {"rss": 0}


async def get_json(session: aiohttp.ClientSession, url: str) -> Any:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with session.get(url, headers=headers) as response:
        if response.status != 200:
            raise aiohttp.ClientError(f"{url}: {response.status}")
        return await response.json()


async def sample_node(
    session: aiohttp.ClientSession, node: NodeProcess, load: Load
) -> dict[str, Any]:
    """Files and RSS at once (the sampling instant), then the node's counters over HTTP."""
    entry: dict[str, Any] = {**file_sizes(node.data_dir), **rss(node)}
    for name, path in (("db_file", "state.db"), ("wal", "state.db-wal")):
        try:
            entry[name] = (node.data_dir / path).stat().st_size
        except FileNotFoundError:
            entry[name] = 0
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        async with session.get(f"{node.url}/metrics", headers=headers) as response:
            text = await response.text()
        entry["pruned"] = {kind: int(float(n)) for kind, n in PRUNED.findall(text)}
        commit = COMMIT_INDEX.search(text)
        entry["commit_index"] = None if commit is None else int(float(commit.group(1)))
        status = await get_json(session, f"{node.url}/v1/admin/retention")
        entry["rows"] = {k["kind"]: k["rows"] for k in status["kinds"]}
        entry["last_prune"] = status["last_prune"]
        entry["api_files"] = status.get("files")
    except (aiohttp.ClientError, TimeoutError, KeyError, ValueError):
        load.error("sample")
    return entry


async def sampler(
    session: aiohttp.ClientSession, nodes: list[NodeProcess], load: Load, tables: bool
) -> list[dict[str, Any]]:
    """A sample every SAMPLE_EVERY_S from t0 to the end of the load window (both included);
    with `tables`, the first node's largest tables too."""
    samples = []
    for t in range(0, load.duration + 1, SAMPLE_EVERY_S):
        await asyncio.sleep(max(0.0, load.t0 + t - time.time()))
        leader = None
        with contextlib.suppress(aiohttp.ClientError, TimeoutError, KeyError):
            leader = (await get_json(session, f"{nodes[0].url}/v1/admin/state"))["leader"]
        entries = await asyncio.gather(*(sample_node(session, n, load) for n in nodes))
        sample = {
            "t": t,
            "leader": leader,
            "nodes": dict(zip([n.node_id for n in nodes], entries, strict=True)),
        }
        if tables:
            sample["tables"] = await tables_of(nodes[0], load)
        samples.append(sample)
        print(sample_line(sample, nodes), flush=True)
    return samples


def table_sizes(db: Path, top: int = 8) -> dict[str, dict[str, int]]:
    """The largest tables of one node's database (indexes counted with their table): bytes and
    rows, read through a read-only connection (SQLite's dbstat, WAL included)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        sizes: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            sizes[table] = sizes.get(table, 0) + int(size)
        largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:top]
        return {
            table: {
                "bytes": size,
                "rows": conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0],
            }
            for table, size in largest
        }
    finally:
        conn.close()


async def tables_of(node: NodeProcess, load: Load) -> dict[str, dict[str, int]] | None:
    try:
        return await asyncio.to_thread(table_sizes, node.data_dir / "state.db")
    except sqlite3.Error:
        load.error("table sizes")
        return None


def sample_line(sample: dict[str, Any], nodes: list[NodeProcess]) -> str:
    parts = [f"t={sample['t']:>4}s"]
    for node in nodes:
        e = sample["nodes"][node.node_id]
        parts.append(
            f"{node.node_id}: db {e['database'] / MB:6.1f} jr {e['journal'] / MB:6.1f} "
            f"rss {e['rss'] / MB:5.0f} pruned {sum(e.get('pruned', {}).values()):>8}"
        )
    return " | ".join(parts)


async def create_recurring(
    session: aiohttp.ClientSession, urls: list[str], token: str, count: int, duration: int
) -> tuple[float, set[str]]:
    """The recurring jobs, every 1s from t0 (a whole second LEAD_S ahead) for `duration` s."""
    start_ms = (int(time.time()) + LEAD_S + count // 2000) * 1000
    body = {
        "schedule": {
            "every": "1s",
            "start_at": format_instant(start_ms),
            "end_at": format_instant(start_ms + duration * 1000 - 1),
        },
        "target": {"type": "queue", "name": QUEUE},
    }
    ids: set[str] = set()
    headers = {"Authorization": f"Bearer {token}"}
    for i, first in enumerate(range(0, count, 1000)):
        chunk = [body] * min(1000, count - first)
        url = f"{urls[i % len(urls)]}/v1/jobs:batch"
        async with session.post(url, json={"jobs": chunk}, headers=headers) as response:
            assert response.status == 200, await response.text()
            results = (await response.json())["results"]
        failed = [r for r in results if "job_id" not in r]
        assert not failed, f"recurring jobs refused: {failed[:3]}"
        ids.update(r["job_id"] for r in results)
    print(f"recurring: {count:,} jobs every 1s from {format_instant(start_ms)}", flush=True)
    return start_ms / 1000, ids


async def creator(
    session: aiohttp.ClientSession, urls: list[str], token: str, rate: int, load: Load
) -> None:
    """`rate` one-time jobs a second, in TICKS_PER_S batches, each due 1-2 s after its batch is
    sent; only runs due inside the load window [t0, t0 + duration) are created."""
    headers = {"Authorization": f"Bearer {token}"}
    gate = asyncio.Semaphore(CREATES_IN_FLIGHT)
    tasks: set[asyncio.Task[None]] = set()

    async def post(url: str, bodies: list[dict[str, Any]], due_ms: list[int]) -> None:
        sent = time.time()
        try:
            async with session.post(url, json={"jobs": bodies}, headers=headers) as response:
                if response.status != 200:
                    load.error(f"create {response.status}")
                    return
                results = (await response.json())["results"]
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError):
            load.error("create exception")
            return
        finally:
            gate.release()
        done = time.time()
        load.create_latency_s.append(done - sent)
        for result, due in zip(results, due_ms, strict=True):
            if "job_id" in result:
                load.one_time_created += 1
                load.one_time_late += due < done * 1000
            else:
                load.error(f"create item {result.get('error', {}).get('code')}")

    tick_s = 1 / TICKS_PER_S
    end_ms = int((load.t0 + load.duration) * 1000)
    tick = 0
    while True:
        at = load.t0 - 2 + tick * tick_s
        if at + 1 >= load.t0 + load.duration:
            break
        await asyncio.sleep(max(0.0, at - time.time()))
        n = (
            rate * (tick % TICKS_PER_S + 1) // TICKS_PER_S
            - rate * (tick % TICKS_PER_S) // TICKS_PER_S
        )
        base_ms = int((at + 1) * 1000)
        due = [base_ms + (1000 * j) // max(1, n) for j in range(n)]
        due = [d for d in due if load.t0 * 1000 <= d < end_ms]
        tick += 1
        if not due:
            continue
        bodies = [
            {"schedule": {"run_at": format_instant(d)}, "target": {"type": "queue", "name": QUEUE}}
            for d in due
        ]
        await gate.acquire()
        task = asyncio.create_task(post(f"{urls[tick % len(urls)]}/v1/jobs:batch", bodies, due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)


async def consumer(
    session: aiohttp.ClientSession, url: str, token: str, load: Load, stop: asyncio.Event
) -> None:
    """Receive up to 100 messages (long poll 1 s), note them, ack them; until `stop`."""
    headers = {"Authorization": f"Bearer {token}"}
    body = {"max": 100, "wait": "1s", "visibility_timeout": "30s"}
    while not stop.is_set():
        try:
            async with session.post(
                f"{url}/v1/queues/{QUEUE}/receive", json=body, headers=headers
            ) as response:
                if response.status != 200:
                    load.error(f"receive {response.status}")
                    await asyncio.sleep(0.2)
                    continue
                messages = (await response.json())["messages"]
            now = time.time()
            load.receives += 1
            load.empty_receives += not messages
            for message in messages:
                load.received(now, message)
            if load.finished():
                stop.set()
            if not messages:
                continue
            receipts = {"receipts": [m["receipt"] for m in messages]}
            async with session.post(
                f"{url}/v1/queues/{QUEUE}/ack", json=receipts, headers=headers
            ) as response:
                await response.read()
                if response.status != 200:
                    load.error(f"ack {response.status}")
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError):
            load.error("consumer exception")
            await asyncio.sleep(0.2)


async def run_load(
    nodes: list[NodeProcess], token: str, args: argparse.Namespace
) -> tuple[Load, list[dict[str, Any]]]:
    urls = [n.url for n in nodes]
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        t0, recurring_ids = await create_recurring(
            session, urls, token, args.recurring, args.duration
        )
        load = Load(
            t0=t0,
            duration=args.duration,
            recurring_ids=recurring_ids,
            expected_recurring=args.recurring * args.duration,
        )
        stop = asyncio.Event()
        workers = [
            asyncio.create_task(consumer(session, urls[w % len(urls)], token, load, stop))
            for w in range(WORKERS)
        ]
        sampling = asyncio.create_task(sampler(session, nodes, load, args.tables))
        await asyncio.sleep(max(0.0, t0 - 3 - time.time()))
        await creator(session, urls, token, args.one_time_rate, load)
        samples = await sampling
        deadline = t0 + args.duration + DRAIN_S
        load.creating = False
        if load.finished():
            stop.set()
        with contextlib.suppress(TimeoutError):  # until every run came, or the deadline
            await asyncio.wait_for(stop.wait(), timeout=max(0.0, deadline - time.time()))
        stop.set()
        await asyncio.gather(*workers)
        load.final_tables = await tables_of(nodes[0], load)
    return load, samples


def lag_summary(load: Load, first: int, last: int) -> dict[str, Any]:
    """Lag percentiles of the runs scheduled in seconds [first, last) after t0."""
    lags = [lag for s in range(first, last) for lag in load.lags.get(s, [])]
    return {"from_s": first, "to_s": last, "runs": len(lags), **percentiles(lags)}


def pruned_between(samples: list[dict[str, Any]], first: int, last: int) -> int | None:
    """Rows pruned (the most any node counted) between the samples at `first` and `last` s."""
    at = {s["t"]: s for s in samples}
    if first not in at or last not in at:
        return None
    counts = []
    for node_id, entry in at[last]["nodes"].items():
        before = at[first]["nodes"][node_id].get("pruned")
        after = entry.get("pruned")
        if before is not None and after is not None:
            counts.append(sum(after.values()) - sum(before.values()))
    return max(counts) if counts else None


def windows(duration: int) -> tuple[int, int]:
    """(warm-up end, first sample of the later half) in s: the samples from the end of the
    warm-up on are split into an earlier and a later half (10 minutes: 60-330 s, 340-600 s)."""
    after = list(range(WARMUP_S, duration + 1, SAMPLE_EVERY_S))
    return WARMUP_S, after[(len(after) + 1) // 2]


def criterion(duration: int) -> str:
    warm, later = windows(duration)
    return (
        f"per node and series, the first {warm}s excluded (retention deletes nothing before): "
        f"reference = the highest sample from t={warm}s to t={later - SAMPLE_EVERY_S}s; flat "
        f"when no sample from t={later}s to t={duration}s exceeds it by more than "
        f"{GROWTH_FRACTION:.0%} of it + {GROWTH_MB:.0f} MB. Comparing highs, not single samples, "
        "lets a bounded sawtooth (WAL checkpoints, Raft log compactions) pass while steady "
        "growth fails; the least-squares slope over the later half is shown for information."
    )


def flatness(samples: list[dict[str, Any]], nodes: list[str], duration: int) -> dict[str, Any]:
    warm, later_from = windows(duration)
    verdict: dict[str, Any] = {}
    for node_id in nodes:
        verdict[node_id] = {}
        for series in VERDICT_SERIES + EXTRA_SERIES:
            points = [(s["t"], s["nodes"][node_id][series] / MB) for s in samples]
            earlier = [v for t, v in points if warm <= t < later_from]
            later = [(t, v) for t, v in points if t >= later_from]
            if not earlier or len(later) < 2:
                verdict[node_id][series] = {"flat": None, "why": "too few samples"}
                continue
            reference = max(earlier)
            allowance = reference * GROWTH_FRACTION + GROWTH_MB
            peak = max(v for _, v in later)
            verdict[node_id][series] = {
                "reference_mb": round(reference, 2),
                "later_max_mb": round(peak, 2),
                "growth_mb": round(peak - reference, 2),
                "allowed_mb": round(allowance, 2),
                "slope_mb_per_min": round(slope(later) * 60, 3),
                "flat": peak - reference <= allowance,
            }
    return verdict


def slope(points: list[tuple[int, float]]) -> float:
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var if var else 0.0


def print_samples(samples: list[dict[str, Any]], nodes: list[str], load: Load) -> None:
    print(
        "\nsamples, MB (db = state.db with its WAL; wal alone; jrnl = Raft journal; snap = Raft "
        f"snapshot); runs rows = finished runs kept by {nodes[0]}; pruned = rows pruned since the "
        "previous sample (the most any node counted); entries/s = Raft log entries committed a "
        f"second ({nodes[0]}'s commit index); p99 lag of the runs due in the last 10 s"
    )
    head = " ".join(f"{n + ' ' + label:>8}" for n in nodes for _, label in TABLE)
    print(
        f"{'t (s)':>5} {'leader':>6} {head} {'runs rows':>9} {'pruned':>7} {'entries/s':>9} "
        f"{'p99 lag':>7}"
    )
    previous: int | None = None
    at = {s["t"]: s for s in samples}
    for s in samples:
        cells = " ".join(
            f"{s['nodes'][n].get(key, 0) / MB:8.1f}" for n in nodes for key, _ in TABLE
        )
        rows = s["nodes"][nodes[0]].get("rows", {}).get("runs", "?")
        pruned = "" if previous is None else pruned_between(samples, previous, s["t"])
        lag = lag_summary(load, max(0, s["t"] - SAMPLE_EVERY_S), s["t"])["p99_lag_s"]
        entries = ""
        if previous is not None:
            before = at[previous]["nodes"][nodes[0]].get("commit_index")
            after = s["nodes"][nodes[0]].get("commit_index")
            if before is not None and after is not None:
                entries = f"{(after - before) / (s['t'] - previous):.0f}"
        print(
            f"{s['t']:>5} {s['leader'] or '?':>6} {cells} {rows:>9} "
            f"{'' if pruned is None else pruned:>7} {entries:>9} {'' if lag is None else lag:>7}"
        )
        previous = s["t"]


def report(
    load: Load, samples: list[dict[str, Any]], nodes: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    duration = args.duration
    print_samples(samples, nodes, load)
    intended = args.recurring + args.one_time_rate
    minutes = []
    print("\nper minute (by scheduled time):")
    print(f"{'minute':>6} {'runs':>8} {'runs/s':>7} {'p50':>7} {'p99':>7} {'max':>7} {'pruned':>8}")
    for first in range(0, duration, 60):
        last = min(duration, first + 60)
        m = lag_summary(load, first, last)
        m["runs_per_s"] = round(m["runs"] / (last - first), 1)
        m["pruned_rows"] = pruned_between(samples, first, last)
        minutes.append(m)
        print(
            f"{first // 60 + 1:>6} {m['runs']:>8} {m['runs_per_s']:>7} {m['p50_lag_s']!s:>7} "
            f"{m['p99_lag_s']!s:>7} {m['max_lag_s']!s:>7} {m['pruned_rows']!s:>8}"
        )
    steady = lag_summary(load, WARMUP_S, duration)
    steady_rate = steady["runs"] / max(1, duration - WARMUP_S)
    expected_recurring = args.recurring * duration
    intended_one_time = args.one_time_rate * duration  # due in [t0, t0 + duration)
    delivery = {
        "recurring_expected": expected_recurring,
        "recurring_received": load.recurring_received,
        "recurring_lost": expected_recurring - load.recurring_received,
        "one_time_intended": intended_one_time,
        "one_time_created": load.one_time_created,
        "one_time_created_late": load.one_time_late,
        "one_time_received": load.one_time_received,
        "one_time_lost": load.one_time_created - load.one_time_received,
        "outside_window": load.outside_window,
        "duplicates": load.duplicates,
        "redelivered": load.redelivered,
        "receives": load.receives,
        "empty_receives": load.empty_receives,
        "create_latency": percentiles(load.create_latency_s),
    }
    rates = {
        "intended_runs_per_s": intended,
        "achieved_runs_per_s_after_warmup": round(steady_rate, 1),
        "achieved_fraction": round(steady_rate / intended, 3) if intended else None,
    }
    verdict = flatness(samples, nodes, duration)
    lag_ok = steady["p99_lag_s"] is not None and steady["p99_lag_s"] <= 1.0
    worst_minute = max(
        (m["p99_lag_s"] for m in minutes[1:] if m["p99_lag_s"] is not None), default=None
    )
    print(f"\nafter the first {WARMUP_S}s: {json.dumps(steady)}")
    print(f"worst per-minute p99 after the first minute: {worst_minute} s")
    print(f"run rate: {json.dumps(rates)}")
    print(f"delivery: {json.dumps(delivery)}")
    print(f"errors: {json.dumps(load.errors)}")
    if load.final_tables:
        print(f"\n{nodes[0]}'s largest tables after the drain (indexes included):")
        for table, size in load.final_tables.items():
            print(f"  {table:<24} {size['bytes'] / MB:8.1f} MB {size['rows']:>10,} rows")
    print(f"\nflatness criterion: {criterion(duration)}")
    for node_id, series in verdict.items():
        for name, v in series.items():
            word = {True: "flat", False: "GROWING", None: "no verdict"}[v["flat"]]
            detail = {k: x for k, x in v.items() if k != "flat"}
            extra = " (not in the overall verdict)" if name in EXTRA_SERIES else ""
            print(f"  {node_id} {name:<8} {word:<10} {json.dumps(detail)}{extra}")
    all_flat = all(v[name]["flat"] for v in verdict.values() for name in VERDICT_SERIES)
    windows_after = [
        pruned_between(samples, t - SAMPLE_EVERY_S, t)
        for t in range(WARMUP_S + SAMPLE_EVERY_S, duration + 1, SAMPLE_EVERY_S)
    ]
    pruning = sum(1 for p in windows_after if p)
    print(
        f"\nverdict: database, journal and RSS {'all flat' if all_flat else 'NOT all flat'} "
        f"on every node; sustained p99 after the first {WARMUP_S}s {steady['p99_lag_s']} s "
        f"{'<=' if lag_ok else '>'} 1 s (rows were pruned in {pruning} of the "
        f"{len(windows_after)} 10-s windows meanwhile)"
    )
    return {
        "config": {
            "duration_s": duration,
            "recurring": args.recurring,
            "one_time_rate": args.one_time_rate,
            "retention": args.retention,
            "nodes": args.nodes,
            "compaction_min_time": args.compaction_min_time,
            "consumers": WORKERS,
            "sample_every_s": SAMPLE_EVERY_S,
        },
        "t0": format_instant(int(load.t0 * 1000)),
        "samples": samples,
        "lag": {
            "per_minute": minutes,
            "per_10s": [
                lag_summary(load, t, t + SAMPLE_EVERY_S)
                | {"pruned_rows": pruned_between(samples, t, t + SAMPLE_EVERY_S)}
                for t in range(0, duration, SAMPLE_EVERY_S)
            ],
            "after_warmup": steady,
            "worst_minute_p99_s": worst_minute,
        },
        "rates": rates,
        "delivery": delivery,
        "errors": load.errors,
        "final_tables": {nodes[0]: load.final_tables},
        "flatness": {"criterion": criterion(duration), "nodes": verdict},
        "verdict": {
            "all_flat": all_flat,
            "lag_p99_ok": lag_ok,
            "pruning_windows": [pruning, len(windows_after)],
        },
    }


def plot(result: dict[str, Any], load: Load, nodes: list[str], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no plot)")
        return
    samples = result["samples"]
    times = [s["t"] for s in samples]
    warm, later_from = windows(result["config"]["duration_s"])
    fig, axes = plt.subplots(4, 1, figsize=(10, 13), sharex=True)
    panels = (  # (solid series, dashed series or None, title)
        ("database", "db_file", "database MB: state.db + WAL (solid), state.db alone (dashed)"),
        ("journal", None, "Raft journal MB (the snapshot, dotted)"),
        ("rss", "rss_anon", "RSS MB (solid), anonymous memory only (dashed)"),
    )
    for ax, (solid, dashed, title) in zip(axes, panels, strict=False):
        for i, node_id in enumerate(nodes):
            color = f"C{i}"
            values = [s["nodes"][node_id].get(solid, 0) / MB for s in samples]
            ax.plot(times, values, color=color, label=node_id)
            if dashed is not None:
                values = [s["nodes"][node_id].get(dashed, 0) / MB for s in samples]
                ax.plot(times, values, "--", color=color, linewidth=0.8)
            if solid == "journal":
                values = [s["nodes"][node_id].get("snapshot", 0) / MB for s in samples]
                ax.plot(times, values, ":", color=color, linewidth=0.8)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left")
    lag_ax = axes[3]
    buckets = range(0, result["config"]["duration_s"], SAMPLE_EVERY_S)
    figures = [lag_summary(load, b, b + SAMPLE_EVERY_S) for b in buckets]
    mids = [b + SAMPLE_EVERY_S / 2 for b in buckets]
    for key, style in (("p50_lag_s", "-"), ("p99_lag_s", "-"), ("max_lag_s", ":")):
        lag_ax.plot(mids, [f[key] for f in figures], style, label=key.split("_")[0])
    lag_ax.axhline(1.0, color="red", linewidth=0.8)
    lag_ax.set_ylim(bottom=0)
    lag_ax.set_ylabel("lag (s), by scheduled time")
    lag_ax.set_xlabel("seconds since the first run")
    lag_ax.legend(loc="upper left")
    pruned_ax = lag_ax.twinx()
    pruned = [pruned_between(samples, t - SAMPLE_EVERY_S, t) for t in times[1:]]
    pruned_ax.bar(
        [t - SAMPLE_EVERY_S / 2 for t in times[1:]],
        [(p or 0) / SAMPLE_EVERY_S for p in pruned],
        width=SAMPLE_EVERY_S * 0.8,
        alpha=0.25,
        color="tab:gray",
    )
    pruned_ax.set_ylabel("rows pruned / s", color="tab:gray")
    lag_ax.set_title("lag p50 / p99 / max per 10 s; rows pruned per second (bars)")
    for ax in axes:
        ax.axvspan(0, warm, color="0.9", zorder=0)
        ax.axvline(later_from, color="0.6", linewidth=0.8, linestyle="--")
    config = result["config"]
    fig.suptitle(
        f"{config['recurring']:,} recurring + {config['one_time_rate']:,} one-time runs/s, "
        f"retention {config['retention']}, {config['nodes']} nodes\n(shaded: warm-up; "
        f"dashed line: the later half of the flatness verdict starts)"
    )
    fig.tight_layout()
    fig.savefig(path)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=600, help="load window, s (600)")
    parser.add_argument("--recurring", type=int, default=1000, help="jobs firing every 1s")
    parser.add_argument("--one-time-rate", type=int, default=500, help="one-time jobs a second")
    parser.add_argument("--retention", default="60s", help="for runs, audit, deadletters, messages")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument(
        "--tables",
        action="store_true",
        help="every sample: the first node's largest tables (dbstat; costs a read of the file)",
    )
    parser.add_argument(
        "--compaction-min-time",
        help="[raft] compaction_min_time for every node (default: the node's, 5m)",
    )
    args = parser.parse_args()
    parse_duration(args.retention, field="--retention", minimum_ms=1000)
    if args.duration < WARMUP_S + 3 * SAMPLE_EVERY_S or args.duration % SAMPLE_EVERY_S:
        parser.error(
            f"--duration must be a multiple of {SAMPLE_EVERY_S} s, at least "
            f"{WARMUP_S + 3 * SAMPLE_EVERY_S} s"
        )
    retention = "".join(
        f'{kind} = "{args.retention}"\n' for kind in ("runs", "audit", "deadletters", "messages")
    )
    RESULTS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raft = ""
        if args.compaction_min_time:
            raft = f'compaction_min_time = "{args.compaction_min_time}"\n'
        made = make_nodes(
            Path(tmp), args.nodes, raft_extra=raft, extra_sections=f"[retention]\n{retention}"
        )
        with running(made) as nodes:
            _, tenant, _ = http(
                "POST",
                f"{nodes[0].url}/v1/tenants",
                {"name": "bench", "max_active_jobs": 10_000_000, "dispatch_rate": 0},
            )
            load, samples = asyncio.run(run_load(nodes, tenant["token"], args))
        names = [n.node_id for n in nodes]
        result = report(load, samples, names, args)
    (RESULTS / "retention.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {RESULTS / 'retention.json'}")
    plot(result, load, names, RESULTS / "retention.png")


if __name__ == "__main__":
    main()
