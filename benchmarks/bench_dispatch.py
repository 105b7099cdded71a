"""Benchmark: dispatch on a real three-node cluster, measured by a consumer that receives and acks.

Two scenarios (issue 4): a spike of N runs due in the same second, and a sustained rate of
recurring runs. Prints throughput and p50/p99/max lag (receive time - scheduled time), writes
them to benchmarks/results/dispatch.json and draws lag over time to dispatch.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import queue_client as client
from benchmarks.lag import summarize
from schedd.timeformat import format_instant, parse_instant
from tests.servers import http, make_nodes, running

RESULTS = Path(__file__).resolve().parent / "results"


async def create(urls: list[str], token: str, bodies: list[dict[str, Any]]) -> None:
    async with client.session(token) as s:
        await client.post_batches(s, urls, bodies)


async def consume(
    urls: list[str], token: str, queue: str, expected: int, deadline_s: float
) -> list[tuple[float, float, str]]:
    """(received_at, lag_s, idempotency_key) per message, until `expected` or the deadline."""
    async with client.session(token, total_s=60) as s:
        received, _ = await client.receive_all(
            s, urls, queue, expected, time.monotonic() + deadline_s
        )
    return [
        (at, at - parse_instant(m["scheduled_at"], field="x") / 1000, m["idempotency_key"])
        for m, at in received
    ]


def background(urls: list[str], token: str, count: int) -> None:
    """Jobs due later (1 to 25 hours ahead): the spike's due lookup must not slow down."""
    start = time.time()
    later_ms = (int(start) + 3600) * 1000
    bodies = [
        {
            "schedule": {"run_at": format_instant(later_ms + (i * 86_400_000) // count)},
            "target": {"type": "queue", "name": "later"},
        }
        for i in range(count)
    ]
    asyncio.run(create(urls, token, bodies))
    print(f"background: {count:,} jobs due later, created in {time.time() - start:.0f}s")


def spike(urls: list[str], token: str, count: int) -> tuple[dict[str, Any], list[Any]]:
    due_ms = (int(time.time()) + 25 + count // 5000) * 1000
    bodies = [
        {
            "schedule": {"run_at": format_instant(due_ms)},
            "target": {"type": "queue", "name": "spike"},
        }
        for _ in range(count)
    ]
    asyncio.run(create(urls, token, bodies))
    wait_s = due_ms / 1000 - time.time()
    print(f"spike: {count:,} jobs due at {format_instant(due_ms)} (in {wait_s:.0f}s)", flush=True)
    time.sleep(max(0.0, wait_s - 1))
    seen = asyncio.run(consume(urls, token, "spike", count, deadline_s=120))
    return summarize("spike", seen, count), seen


def sustained(
    urls: list[str], token: str, rate: int, seconds: int
) -> tuple[dict[str, Any], list[Any]]:
    start_ms = (int(time.time()) + 15) * 1000
    end_ms = start_ms + seconds * 1000 - 1
    bodies = [
        {
            "schedule": {
                "every": "1s",
                "start_at": format_instant(start_ms),
                "end_at": format_instant(end_ms),
            },
            "target": {"type": "queue", "name": "steady"},
        }
        for _ in range(rate)
    ]
    asyncio.run(create(urls, token, bodies))
    time.sleep(max(0.0, start_ms / 1000 - time.time() - 1))
    seen = asyncio.run(consume(urls, token, "steady", rate * seconds, deadline_s=seconds + 30))
    return summarize(f"sustained {rate}/s", seen, rate * seconds), seen


def plot(series: dict[str, list[Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no plot)")
        return
    fig, axes = plt.subplots(len(series), 1, figsize=(9, 3.5 * len(series)))
    for ax, (name, seen) in zip([axes] if len(series) == 1 else axes, series.items(), strict=True):
        if seen:
            t0 = min(t for t, _, _ in seen)
            times = sorted(t - t0 for t, _, _ in seen)
            ax.scatter([t - t0 for t, _, _ in seen], [lag for _, lag, _ in seen], s=1)
            received = ax.twinx()  # how the backlog drains
            received.plot(times, range(1, len(times) + 1), color="tab:orange", linewidth=1)
            received.set_ylabel("received so far", color="tab:orange")
        ax.set_title(name)
        ax.set_xlabel("seconds since the first message")
        ax.set_ylabel("lag (s)", color="tab:blue")
    fig.tight_layout()
    fig.savefig(path)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spike", type=int, default=100_000)
    parser.add_argument("--rate", type=int, default=2_000)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument(
        "--background", type=int, default=0, help="jobs due 1-25 h later, created first"
    )
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, running(make_nodes(Path(tmp), 3)) as nodes:
        urls = [n.url for n in nodes]
        _, tenant, _ = http(
            "POST",
            f"{urls[0]}/v1/tenants",
            {"name": "bench", "max_active_jobs": 10_000_000, "dispatch_rate": 0},
        )
        token = tenant["token"]
        results, series = [], {}
        if args.background:
            background(urls, token, args.background)
        if args.spike:
            result, seen = spike(urls, token, args.spike)
            if args.background:
                result["scenario"] = f"spike, {args.background:,} other jobs due later"
            results.append(result)
            series[result["scenario"]] = seen
        if args.rate:
            result, seen = sustained(urls, token, args.rate, args.seconds)
            results.append(result)
            series[result["scenario"]] = seen
    (RESULTS / "dispatch.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(series, RESULTS / "dispatch.png")


if __name__ == "__main__":
    main()
