"""Benchmark: broker targets (issue 17) from a real three-node cluster to the loopback brokers.

Per kind (`--kinds`: redis_stream, rabbitmq, nats; Redis 127.0.0.1:6379, RabbitMQ 5672 as
guest, NATS with JetStream 4222): a spike of `--spike` one-time jobs due in the same second, and
a sustained `--rate` runs a second for `--duration` seconds (one-time jobs created ahead, their
due times spread evenly). Jobs are created in batches of 1,000 through the API (a tenant with
`dispatch_rate: 0`, a connection made through `POST /v1/connections`), each scenario into a
fresh stream, queue or JetStream stream. A reader (tests/broker_readers.py: XREAD, an aio-pika
consumer, a JetStream pull consumer) on its own thread timestamps every message it gets: lag =
receipt - scheduled_at. Prints one JSON line per scenario (lag p50/p99, throughput, lost,
duplicated, the nodes' CPU) and writes benchmarks/results/brokers.json. JetStream drops copies
within its duplicate window, so `duplicates` there counts only what got past it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import queue_client as client
from benchmarks.bench_delivery import CpuMeter
from benchmarks.lag import Record, summarize
from schedd.timeformat import format_instant, parse_instant
from tests.broker_readers import KINDS, Reader, destination, reading
from tests.servers import NodeProcess, http, make_nodes, running

RESULTS = Path(__file__).resolve().parent / "results"
URLS = {
    "redis_stream": "redis://127.0.0.1:6379/0",
    "rabbitmq": "amqp://guest:guest@127.0.0.1:5672/",
    "nats": "nats://127.0.0.1:4222",
}
ALIASES = {"redis": "redis_stream", "rabbit": "rabbitmq", "amqp": "rabbitmq"}
SECTIONS = '[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'
MIN_LEAD_S = 10.0  # between the last create and the first due time


class Bench:
    """The cluster, its tenant per kind, and the creating client's measured rate."""

    def __init__(self, nodes: list[NodeProcess]) -> None:
        self.urls = [n.url for n in nodes]
        self.cpu = CpuMeter({n.node_id: n.process.pid for n in nodes if n.process is not None})
        self.create_rate = 0.0  # jobs a second, measured on a first batch

    def tenant(self, kind: str) -> str:
        """A tenant with no dispatch limit and a connection named `kind` to its broker."""
        body = {"name": f"bench-{kind}", "max_active_jobs": 10_000_000, "dispatch_rate": 0}
        status, created, _ = http("POST", f"{self.urls[0]}/v1/tenants", body)
        assert status == 201, created
        token: str = created["token"]
        connection = {"name": kind, "url": URLS[kind]}
        status, made, _ = http("POST", f"{self.urls[0]}/v1/connections", connection, token=token)
        assert status == 201, made
        return token

    def calibrate(self, token: str) -> None:
        """How fast this machine creates jobs: one batch due in an hour (to a queue)."""
        later = format_instant((int(time.time()) + 3600) * 1000)
        body = {"schedule": {"run_at": later}, "target": {"type": "queue", "name": "calibrate"}}
        start = time.time()
        self.create([body] * client.BATCH, token)
        self.create_rate = client.BATCH / max(0.001, time.time() - start)

    def first_due_s(self, count: int) -> int:
        """A whole second after `count` creates at the measured rate (1.5x: a long run is
        slower than one batch), and a lead of at least MIN_LEAD_S."""
        create_s = 1.5 * count / max(self.create_rate, 1.0)
        return math.ceil(time.time() + create_s + max(MIN_LEAD_S, 0.25 * create_s))

    def create(self, bodies: list[dict[str, Any]], token: str) -> None:
        async def post() -> None:
            async with client.session(token, total_s=600) as s:
                await client.post_batches(s, self.urls, bodies)

        asyncio.run(post())

    def dead(self, token: str) -> int:
        """The tenant's dead letters (the first 1,000)."""
        _, page, _ = http("GET", f"{self.urls[0]}/v1/deadletters?limit=1000", token=token)
        return len(page["deadletters"])


def one_time(due_ms: int, target: dict[str, Any], n: int) -> dict[str, Any]:
    return {"schedule": {"run_at": format_instant(due_ms)}, "target": target, "payload": {"n": n}}


def records(reader: Reader) -> list[Record]:
    """(received at, lag s, idempotency key) of every message the reader got."""
    lags: dict[str, float] = {}  # scheduled_at text -> epoch s (many runs share one)
    seen: list[Record] = []
    for message in reader.received():
        at = str(message.body["scheduled_at"])
        if at not in lags:
            lags[at] = parse_instant(at, field="scheduled_at") / 1000
        seen.append((message.at, message.at - lags[at], message.key))
    return seen


def copies(reader: Reader) -> dict[str, int]:
    """Runs received more than once: at the same attempt (a publish made again after a crash or
    a lease that moved) or at a later one (an attempt that timed out or failed, then retried)."""
    attempts: dict[str, list[int]] = {}
    for message in reader.received():
        attempts.setdefault(message.key, []).append(int(message.body["attempt"]))
    doubled = [a for a in attempts.values() if len(a) > 1]
    same = sum(1 for a in doubled if len(set(a)) == 1)
    return {"same_attempt": same, "later_attempt": len(doubled) - same}


def scenario(
    bench: Bench,
    token: str,
    kind: str,
    name: str,
    due_ms: list[int],
    wait_s: float,
) -> dict[str, Any]:
    """One job per entry of `due_ms` into a fresh destination; read until every run arrived
    or `wait_s` after the last due time; the summary."""
    dest = destination(kind)
    with reading([dest]) as reader:
        start = time.time()
        bench.create([one_time(at, dest.target(kind), n) for n, at in enumerate(due_ms)], token)
        create_s = time.time() - start
        first_s, last_s = min(due_ms) / 1000, max(due_ms) / 1000
        early = first_s - time.time()
        print(
            f"{kind} {name}: {len(due_ms):,} created in {create_s:.1f} s; "
            f"first due in {early:.1f} s",
            flush=True,
        )
        time.sleep(max(0.0, first_s - time.time() - 0.5))
        bench.cpu.start()
        stop_at = last_s + wait_s
        while reader.distinct() < len(due_ms) and time.time() < stop_at:
            time.sleep(0.2)
        cpu = bench.cpu.stop()
        seen = records(reader)
        twice = copies(reader)
    return summarize(
        f"{kind}: {name}",
        seen,
        len(due_ms),
        kind=kind,
        created_late=early < 0,
        runs_received_twice=twice,
        dead_letters=bench.dead(token),
        cpu_cores=cpu,
    )


def spike(bench: Bench, token: str, kind: str, count: int) -> dict[str, Any]:
    due_ms = bench.first_due_s(count) * 1000
    return scenario(bench, token, kind, f"spike {count:,}", [due_ms] * count, wait_s=120)


def sustained(bench: Bench, token: str, kind: str, rate: int, seconds: int) -> dict[str, Any]:
    count = rate * seconds
    start_ms = bench.first_due_s(count) * 1000
    due_ms = [start_ms + (i * 1000) // rate for i in range(count)]
    return scenario(bench, token, kind, f"sustained {rate:,}/s for {seconds} s", due_ms, 60)


def kinds_of(text: str) -> list[str]:
    kinds = [ALIASES.get(k.strip(), k.strip()) for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise SystemExit(f"--kinds: unknown {unknown}; choose from {', '.join(KINDS)}")
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated target types")
    parser.add_argument("--spike", type=int, default=30_000, help="runs due in one second")
    parser.add_argument("--rate", type=int, default=2_000, help="sustained runs a second")
    parser.add_argument("--duration", type=int, default=30, help="seconds of the sustained rate")
    args = parser.parse_args()
    kinds = kinds_of(args.kinds)
    RESULTS.mkdir(exist_ok=True)
    results = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        running(make_nodes(Path(tmp), 3, extra_sections=SECTIONS)) as nodes,
    ):
        bench = Bench(nodes)
        for kind in kinds:
            token = bench.tenant(kind)
            bench.calibrate(token)
            if args.spike:
                results.append(spike(bench, token, kind, args.spike))
            if args.rate and args.duration:
                results.append(sustained(bench, token, kind, args.rate, args.duration))
    (RESULTS / "brokers.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {RESULTS / 'brokers.json'}")


if __name__ == "__main__":
    main()
