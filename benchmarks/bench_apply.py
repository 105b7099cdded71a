"""Benchmark: the state machine's apply cost per run, one replica, no Raft and no HTTP.

Creates N one-time queue jobs due at one instant, then applies, the way the cluster does:
claims in batches of 500 in a dispatcher's order over the product's 256 partitions, receives
of 100 and acks of 100 (as a consumer does). Prints the apply time per run for each kind of
command. Every replica of a cluster pays these costs for every run, so they bound the spike's
drain (issue 16).

Commands are written as log entries (JSON bytes, as the journal holds them), so the figure
includes decoding, and the benchmark runs unchanged across refactors of the command types.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import proto_batch  # benchmarks/, beside this file

from schedd.store.apply import StateMachine
from schedd.store.db import Database

NOW_MS = 1_790_000_000_000
PARTITIONS = 256  # the product's default (config cluster.partitions)
TAKEN_PER_TICK = 20_000  # the dispatcher's MAX_CLAIMS_PER_TICK
CLAIM_BATCH = 500
RECEIVE_MAX = 100


class Spent:
    """Time spent in apply: wall clock (fsyncs included) and this thread's CPU (steadier on a
    shared machine: it leaves out waiting for the disk)."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def add(self, elapsed: tuple[float, float]) -> None:
        self.wall += elapsed[0]
        self.cpu += elapsed[1]


class Log:
    """Applies JSON log entries at increasing indexes and times the ones asked for."""

    def __init__(self, machine: StateMachine) -> None:
        self.machine = machine
        self.index = machine.db.applied_index
        self.ids = itertools.count(1)

    def apply(
        self, type_: str, body: dict[str, Any], ts_ms: int = NOW_MS
    ) -> tuple[Any, tuple[float, float]]:
        envelope = {"v": 1, "type": type_, "id": f"c{next(self.ids)}", "ts": ts_ms, "body": body}
        blob = json.dumps(envelope, separators=(",", ":")).encode()
        self.index += 1
        started, cpu = time.perf_counter(), time.thread_time()
        result = self.machine.apply(blob, index=self.index)
        elapsed = (time.perf_counter() - started, time.thread_time() - cpu)
        assert result.get("status") == "ok", result
        return result, elapsed


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def create_spike(
    log: Log, n: int, *, dispatch_rate: int = 1_000_000, distinct_specs: bool = False
) -> list[tuple[int, str]]:
    """A tenant, one node leasing every partition, and N one-time queue jobs due at NOW_MS
    ((partition, job id) each); with `distinct_specs`, each job's payload (so its stored spec)
    is its own."""
    tenant = {
        "tenant_id": "t1",
        "name": "bench",
        "token_hash": "h",
        "signing_secret": "s",
        "max_active_jobs": n + 3,
        "dispatch_rate": dispatch_rate,
        "allowed_hosts": [],
    }
    log.apply("create_tenant", tenant)
    log.apply("register_node", {"node_id": "n1", "api": "a", "raft": "r"})
    moves = [{"partition": p, "node_id": "n1", "epoch": 0} for p in range(PARTITIONS)]
    log.apply("assign_leases", {"ttl_ms": 3_600_000, "moves": moves})
    spec = {
        "name": None,
        "schedule": {"run_at": "2026-09-21T14:13:20Z"},
        "window": None,
        "target": {"type": "queue", "name": "q"},
        "payload": {"n": 1},
        "retry": {"max_attempts": 3, "backoff": "fixed", "initial_delay": "10s"},
        "misfire_policy": "run_once",
        "overlap_policy": "allow",
    }
    jobs = [(i % PARTITIONS, f"job-{i:08d}") for i in range(n)]
    for chunk in _chunks(jobs, 1_000):
        items = [
            {
                "job_id": job_id,
                "partition": partition,
                "spec": spec | {"payload": {"n": job_id}} if distinct_specs else spec,
                "next_run_at_ms": NOW_MS,
                "next_fire_at_ms": NOW_MS,
                "idempotency_key": None,
                "request_hash": None,
            }
            for partition, job_id in chunk
        ]
        log.apply("create_jobs", {"tenant_id": "t1", "jobs": items}, ts_ms=NOW_MS - 60_000)
    return jobs


CLAIM_FIELDS = (  # ClaimRow's order: claim_batch sends each claim as an array
    "job_id",
    "scheduled_at_ms",
    "fire_at_ms",
    "partition",
    "epoch",
    "version",
    "is_trigger",
    "next_run_at_ms",
    "next_fire_at_ms",
)


def _claim_order(jobs: list[tuple[int, str]], order: str) -> list[tuple[int, str]]:
    """The runs in the order a dispatcher claims them: it takes up to TAKEN_PER_TICK due runs
    of one instant from its heap, whole partitions in turn (its heap orders by fire time, then
    partition), and sorts each take by job before cutting it into batches of CLAIM_BATCH. "job":
    a heap ordered by job instead (measured 2026-12-03, not kept: no gain in CPU, see
    docs/performance.md)."""
    if order == "job":
        return sorted(jobs, key=lambda job: job[1])
    by_partition = sorted(jobs)
    return [
        job
        for start in range(0, len(by_partition), TAKEN_PER_TICK)
        for job in sorted(by_partition[start : start + TAKEN_PER_TICK], key=lambda job: job[1])
    ]


def _claims(log: Log, jobs: list[tuple[int, str]], form: str, order: str) -> Spent:
    spent = Spent()
    for chunk in _chunks(_claim_order(jobs, order), CLAIM_BATCH):
        claims = [
            {
                "partition": partition,
                "epoch": 1,
                "job_id": job_id,
                "scheduled_at_ms": NOW_MS,
                "fire_at_ms": NOW_MS,
                "is_trigger": False,
                "version": 1,
                "next_run_at_ms": None,
                "next_fire_at_ms": None,
            }
            for partition, job_id in chunk
        ]
        body: dict[str, Any] = {"node_id": "n1", "claims": claims}
        if form != "claim_runs":
            body["claims"] = [[c[f] for f in CLAIM_FIELDS] for c in claims]
        if form == "deferred":  # level 5: the one-time jobs' completion left to a prune
            body["defer_completion"] = True
        _, elapsed = log.apply("claim_runs" if form == "claim_runs" else "claim_batch", body)
        spent.add(elapsed)
    return spent


def _completions(log: Log) -> Spent:
    """Prunes until every deferred completion is written (the leader's pruner after a spike).
    The retention is long: only the completions are written, nothing is deleted."""
    spent = Spent()
    week_ms = 7 * 86_400_000
    retention = dict.fromkeys(("runs", "messages", "deadletters", "audit"), week_ms)
    body = {"retention_ms": retention, "after_tenant": "", "max_rows": 250}
    while True:
        result, elapsed = log.apply("prune", body, ts_ms=NOW_MS + 10_000)
        spent.add(elapsed)
        if result.get("done"):
            return spent


def _receives_and_acks(log: Log, n: int) -> tuple[Spent, Spent, int]:
    receive_s, ack_s = Spent(), Spent()
    received = 0
    nonces = itertools.count()
    while received < n:
        body = {
            "tenant_id": "t1",
            "queue": "q",
            "max": RECEIVE_MAX,
            "receipts": [f"n{next(nonces)}" for _ in range(RECEIVE_MAX)],
            "visibility_ms": 30_000,
        }
        result, elapsed = log.apply("receive_messages", body, ts_ms=NOW_MS + 1)
        receive_s.add(elapsed)
        receipts = [m["receipt"] for m in result["messages"]]
        assert receipts, "the queue ran dry before every run was received"
        received += len(receipts)
        ack = {"tenant_id": "t1", "queue": "q", "receipts": receipts}
        result, elapsed = log.apply("ack_messages", ack, ts_ms=NOW_MS + 2)
        assert result["acked"] == len(receipts)
        ack_s.add(elapsed)
    return receive_s, ack_s, received


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000, help="runs (default 50,000)")
    parser.add_argument("--repeat", type=int, default=3, help="fresh stores measured (best kept)")
    parser.add_argument(
        "--proto",
        action="store_true",
        help="also the batch prototype's SQLite cost for the same spike (proto_batch.py)",
    )
    parser.add_argument(
        "--form",
        choices=("deferred", "batch", "runs", "all"),
        default="all",
        help="claims as claim_batch deferring one-time jobs' completion to prunes (deferred, log "
        "level 5; the prunes that write them are measured as 'complete'), as claim_batch (log "
        "level 4: queue runs in batches), as claim_runs (per run, before level 4) or all three",
    )
    parser.add_argument(
        "--order",
        choices=("job", "partition"),
        default="partition",
        help="the runs a dispatcher takes at one instant: whole partitions in turn (partition, "
        "the dispatcher's order) or consecutive jobs of all partitions (job)",
    )
    parser.add_argument(
        "--dependents",
        action="store_true",
        help="the spike's tenant also has one job that runs after another (log level 11): its "
        "acks read the dependencies of the runs they end, not only the one-row probe",
    )
    args = parser.parse_args()
    forms = {"deferred": ["deferred"], "batch": ["claim_batch"], "runs": ["claim_runs"]}
    for form in forms.get(args.form, ["claim_runs", "claim_batch", "deferred"]):
        _print_form(args.n, args.repeat, form, args.order, dependents=args.dependents)
    if args.proto:
        _print_proto(args.n, args.repeat)


def _add_dependency(log: Log) -> None:
    """Job dep-b runs after dep-a (neither in the spike): the tenant has a dependency."""
    spec = {
        "name": None,
        "schedule": {"every": "1h", "start_at": "2026-09-21T14:13:20Z"},
        "window": None,
        "target": {"type": "queue", "name": "other"},
        "payload": None,
        "retry": {"max_attempts": 3, "backoff": "fixed", "initial_delay": "10s"},
        "misfire_policy": "run_once",
        "overlap_policy": "allow",
    }
    after = spec | {"schedule": {"after": {"job_id": "dep-a", "on": "success"}}}
    for job_id, job_spec in (("dep-a", spec), ("dep-b", after)):
        item = {
            "job_id": job_id,
            "partition": 0,
            "spec": job_spec,
            "next_run_at_ms": None,
            "next_fire_at_ms": None,
            "idempotency_key": None,
            "request_hash": None,
        }
        result, _ = log.apply("create_jobs", {"tenant_id": "t1", "jobs": [item]})
        assert result["results"][0].get("created"), result


def _print_form(n: int, repeat: int, form: str, order: str, *, dependents: bool = False) -> None:
    """Apply N runs claimed with `form` in `order`, received and acked, `repeat` times; print
    the best."""
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="schedd-bench-apply-") as tmp:
            db = Database(Path(tmp) / "state.db")
            try:
                log = Log(StateMachine(db))
                jobs = create_spike(log, n)
                if dependents:
                    _add_dependency(log)
                claim_s = _claims(log, jobs, form, order)
                receive_s, ack_s, received = _receives_and_acks(log, n)
                assert received == n
                complete_s = _completions(log) if form == "deferred" else None
            finally:
                db.close()
        figures = {"claim": claim_s, "receive": receive_s, "ack": ack_s}
        if complete_s is not None:
            figures["complete"] = complete_s
        for name, spent in figures.items():
            wall, cpu = best.get(name, (spent.wall, spent.cpu))
            best[name] = (min(wall, spent.wall), min(cpu, spent.cpu))
    print(
        f"apply cost per run, one replica, {n:,} runs, {form}, claimed in {order} order"
        f"{', the tenant has a dependency' if dependents else ''} (best of {repeat}):"
    )
    print(f"  {'':<8} {'wall':>8} {'cpu':>8}")
    for name, (wall, cpu) in [*best.items(), ("total", _sums(best.values()))]:
        print(f"  {name:<8} {wall / n * 1e6:5.1f} us {cpu / n * 1e6:5.1f} us")


def _print_proto(n: int, repeat: int) -> None:
    """The batch prototype's SQLite statements for the same spike (CPU, best of `repeat`), with
    one-time jobs completed in the claim and with their completion deferred."""
    for complete_jobs in (True, False):
        best: dict[str, float] = {}
        for _ in range(repeat):
            with tempfile.TemporaryDirectory(prefix="schedd-bench-proto-") as tmp:
                path = Path(tmp) / "proto.db"
                for name, cpu in proto_batch.run(path, n, complete_jobs=complete_jobs).items():
                    best[name] = min(best.get(name, cpu), cpu)
        what = "jobs completed in the claim" if complete_jobs else "job completion deferred"
        print(
            f"batch prototype, SQLite and its Python only, {what}, {n:,} runs (best of {repeat}):"
        )
        total = sum(best[name] for name in proto_batch.KINDS)
        for name, cpu in [*best.items(), ("total", total)]:
            print(f"  {name:<16} {cpu * 1e6:5.1f} us cpu")


def _sums(pairs: Iterable[tuple[float, float]]) -> tuple[float, float]:
    walls, cpus = zip(*pairs, strict=True)
    return sum(walls), sum(cpus)


if __name__ == "__main__":
    main()
