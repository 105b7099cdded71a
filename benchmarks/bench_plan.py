"""Benchmark: the dispatcher's CPU per run on the claiming node, in-process, no Raft.

Creates N one-time queue jobs due at one instant (bench_apply.py's spike: 256 partitions, all
leased to this node), lets a Dispatcher read them into its heap, then times the ticks that
claim them with this thread's CPU: popping, planning (`_plan_batch`: reading the jobs, the
tenant's bucket, `plan_run`, the claim rows), building the commands and settling results. The
claims are not applied: each proposal is answered at once as fully claimed, so the store is
unchanged and every repeat plans the same runs. Prints the best of `--repeat`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_apply import NOW_MS, PARTITIONS, Log, create_spike  # benchmarks/, beside this file

from schedd.dispatch.dispatcher import Dispatcher
from schedd.store.apply import StateMachine
from schedd.store.commands import LogCommand
from schedd.store.db import Database, connect
from schedd.store.dispatch_reads import DueRun
from schedd.store.results import Claimed


def _claimed_at_once(cmd: LogCommand[Claimed]) -> Future[Claimed]:
    future: Future[Claimed] = Future()
    future.set_result(Claimed(claimed=len(getattr(cmd, "claims", ()))))
    return future


class TimedDispatcher(Dispatcher):
    """A Dispatcher that adds up the thread CPU of its planning (`_plan_batch`)."""

    plan_s = 0.0

    def _plan_batch(self, conn: Any, due: list[DueRun], now_ms: int) -> Any:
        started = time.thread_time()
        claims = super()._plan_batch(conn, due, now_ms)
        self.plan_s += time.thread_time() - started
        return claims


def measure(db_path: Path, n: int) -> tuple[float, float]:
    """(CPU of the claiming ticks, CPU of their planning) for the N due runs, in seconds."""
    dispatcher = TimedDispatcher(
        "n1", PARTITIONS, lambda: connect(db_path, readonly=True), _claimed_at_once
    )
    dispatcher.tick(NOW_MS - 1)  # reads the due rows into the heap; none is due yet
    started = time.thread_time()
    while dispatcher.claimed < n:
        dispatcher.tick(NOW_MS)  # at most MAX_CLAIMS_PER_TICK runs a tick
    return time.thread_time() - started, dispatcher.plan_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30_000, help="runs (default 30,000)")
    parser.add_argument("--repeat", type=int, default=5, help="times measured (best kept)")
    parser.add_argument(
        "--rate", type=int, default=0, help="the tenant's dispatch_rate (default 0: no limit)"
    )
    parser.add_argument(
        "--distinct-specs",
        action="store_true",
        help="a payload of its own in each job's spec (default: every spec the same text)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="schedd-bench-plan-") as tmp:
        db = Database(Path(tmp) / "state.db")
        try:
            log = Log(StateMachine(db))
            create_spike(log, args.n, dispatch_rate=args.rate, distinct_specs=args.distinct_specs)
        finally:
            db.close()
        figures = [measure(Path(tmp) / "state.db", args.n) for _ in range(args.repeat)]
    tick_s = min(tick for tick, _ in figures)
    plan_s = min(plan for _, plan in figures)
    print(
        f"dispatcher CPU per run, {args.n:,} one-time runs, dispatch_rate {args.rate}, "
        f"{'distinct' if args.distinct_specs else 'equal'} specs "
        f"(best of {args.repeat}): ticks {tick_s / args.n * 1e6:.2f} us, "
        f"of which planning {plan_s / args.n * 1e6:.2f} us"
    )


if __name__ == "__main__":
    main()
