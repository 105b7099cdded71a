"""One round: start the cluster and the receiver, run the workload, consumers and nemesis for a
bounded time, heal, wait for quiescence, collect every node's view and check the history.
Every process and thread started here is stopped in `finally`."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tests.chaos.check_runs import EARLY_TOLERANCE_MS, LATE_BOUND_MS, Violation
from tests.chaos.checker import Observed, check, percentiles
from tests.chaos.client import now_ms
from tests.chaos.cluster import (
    LEASE_TTL_S,
    MISFIRE_THRESHOLD_S,
    ChaosCluster,
    freeze_code,
    freeze_release,
)
from tests.chaos.collect import catch_digests, leader_terms, read_view, wait_quiet
from tests.chaos.consumer import QueueConsumer
from tests.chaos.history import History
from tests.chaos.nemesis import (
    CLOCK_KINDS,
    NETWORK_KINDS,
    PROCESS_KINDS,
    Nemesis,
    Partitioner,
    plan_faults,
    plan_upgrades,
)
from tests.chaos.workload import QUEUES, Prober, TenantWorker, create_tenants
from tests.receiver import Receiver

TENANTS = 2
QUIET_TIMEOUT_S = 120.0


def say(message: str) -> None:
    sys.stderr.write(f"[chaos {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


@contextlib.contextmanager
def _environment(
    base: Path, code_dir: Path, use_netns: bool
) -> Iterator[tuple[ChaosCluster, Receiver, Partitioner | None]]:
    """The cluster (namespaced if asked and possible), the receiver, and the partitioner."""
    net = None
    if use_netns:
        from tests.chaos.netns import NetnsLab

        net = NetnsLab.create(base)
    try:
        if net is not None:
            cluster, receiver = net.cluster(code_dir), net.receiver()
        else:
            cluster, receiver = ChaosCluster.on_loopback(base, code_dir), Receiver()
        receiver.start()
        try:
            yield cluster, receiver, net
        finally:
            cluster.stop_all()
            receiver.stop()
    finally:
        if net is not None:
            net.destroy()


def run_round(
    seed: int,
    workload_s: float,
    base: Path,
    *,
    use_netns: bool = False,
    upgrade_from: str | None = None,
) -> dict[str, Any]:
    """Run one seeded round and return its report (violations included). `upgrade_from`, a git
    revision: the nodes start on that release and are upgraded to today's code one by one
    during the workload (nemesis.plan_upgrades), the faults going on around them."""
    kinds = PROCESS_KINDS + CLOCK_KINDS + (NETWORK_KINDS if use_netns else ())
    plan = plan_faults(seed, workload_s, kinds)
    if upgrade_from is not None:
        upgrades = plan_upgrades(workload_s, [f"n{i}" for i in (1, 2, 3)])
        plan = sorted(plan + upgrades, key=lambda fault: fault.at_s)
    say(
        f"seed={seed} workload={workload_s:g}s mode={'netns' if use_netns else 'loopback'} "
        f"faults={[(f.at_s, f.kind, f.role, f.hold_s) for f in plan]}"
    )
    history = History()
    report: dict[str, Any] = {
        "seed": seed,
        "workload_s": workload_s,
        "mode": "netns" if use_netns else "loopback (process faults only; no partitions)",
        "skipped": [] if use_netns else ["network partitions: run with --netns (root, ip netns)"],
        "settings": {
            "lease_ttl_s": LEASE_TTL_S,
            "misfire_threshold_s": MISFIRE_THRESHOLD_S,
            "late_bound_s": LATE_BOUND_MS / 1000,
            "early_tolerance_ms": EARLY_TOLERANCE_MS,
        },
        "plan": [asdict(f) for f in plan],
    }
    code_dir, code_sha = freeze_code(base)
    report["code"] = {"git_head": _git_head(), "frozen_schedd_sha256": code_sha}
    start_dir = code_dir
    if upgrade_from is not None:
        start_dir = freeze_release(base, upgrade_from)
        report["code"]["upgrade_from"] = upgrade_from
    with _environment(base, start_dir, use_netns) as (cluster, receiver, partitioner):
        cluster.start()
        upgrade_to = None if upgrade_from is None else code_dir
        report |= _round(
            seed, workload_s, base, cluster, receiver, partitioner, plan, history, upgrade_to
        )
    report["history"] = history.to_json()
    counts: dict[str, int] = {}
    for v in report["violations"]:
        counts[v["kind"]] = counts.get(v["kind"], 0) + 1
    report["violation_counts"] = counts
    say(f"seed={seed} done: {len(report['violations'])} violation(s) {counts}")
    return report


def _round(
    seed: int,
    workload_s: float,
    base: Path,
    cluster: ChaosCluster,
    receiver: Receiver,
    partitioner: Partitioner | None,
    plan: list[Any],
    history: History,
    upgrade_to: Path | None,
) -> dict[str, Any]:
    urls = cluster.urls()
    tenants = create_tenants(next(iter(urls.values())), seed, TENANTS)
    end_ms = now_ms() + int(workload_s * 1000)
    workers = [TenantWorker(t, urls, history, receiver, seed, end_ms) for t in tenants]
    consumers = [QueueConsumer(t, q, urls, history, seed) for t in tenants for q in QUEUES]
    prober = Prober(tenants[0], urls, history)
    nemesis = Nemesis(cluster, history, plan, seed, partitioner, prober.fire, upgrade_to)
    threads = [*workers, *consumers, nemesis]
    notes: list[Violation] = []
    try:
        for thread in threads:
            thread.start()
        for worker in workers:
            worker.join(timeout=workload_s + 60)
        say("workload over; healing")
        nemesis.stop.set()
        nemesis.join(timeout=180)
        if nemesis.is_alive():
            notes.append(Violation("nemesis_stuck", None, "the nemesis did not finish"))
        nemesis.heal()
        if cluster.wait_healthy(60) is None:
            notes.append(Violation("cluster_not_recovered", None, "not healthy 60 s after heal"))
        quiet_s, moving = wait_quiet(next(iter(urls.values())), tenants, QUIET_TIMEOUT_S)
        if quiet_s is None:
            notes.append(Violation("not_quiescent", None, f"still moving: {moving}"))
        say(f"quiet after {quiet_s}s; collecting")
    finally:
        for worker in workers:
            worker.stop.set()
        for consumer in consumers:
            consumer.stop.set()
        nemesis.stop.set()
        for thread in threads:
            thread.join(timeout=30)
        nemesis.heal()
        prober.join(timeout_s=30)
    notes += [Violation("cluster_not_recovered", None, str(u)) for u in nemesis.unhealthy]
    notes += [Violation("harness_error", None, f"nemesis: {e}") for e in nemesis.errors]
    notes += _failed_upgrades(history)
    errors = [(t.name, t.errors) for t in workers] + [(t.name, t.errors) for t in consumers]
    notes += [Violation("harness_error", None, f"{n}: {e}") for n, es in errors for e in es]
    collected_ms = now_ms()
    views = {node_id: read_view(node_id, url, tenants) for node_id, url in urls.items()}
    digests = catch_digests(urls)
    observed = Observed(
        ops=history.ops,
        queue_deliveries=history.queue_deliveries,
        http_calls=receiver.received(),
        faults=history.faults,
        tenants=tenants,
        views=views,
        digests=digests,
        threshold_ms=int(MISFIRE_THRESHOLD_S * 1000),
        notes=notes,
        leader_terms=leader_terms({n.node_id: n.log_path for n in cluster.nodes}),
        collected_ms=collected_ms,
    )
    violations, stats = check(observed)
    dump = {
        "views": {k: asdict(v) for k, v in views.items()},
        "history": history.to_json(),
        "queue_deliveries": [asdict(d) for d in history.queue_deliveries],
        "http_calls": [asdict(c) for c in observed.http_calls],
    }
    (base / "collected.json").write_text(json.dumps(dump, default=str))
    return {
        "violations": [asdict(v) for v in violations],
        "stats": stats,
        "faults": _fault_figures(history),
        "quiet_after_s": quiet_s,
        "digests": {
            "caught_all_at_one_index": digests["caught_all_at_one_index"],
            "indexes_compared": len(digests["shared"]),
        },
    }


def _failed_upgrades(history: History) -> list[Violation]:
    """An upgrade must find its node running on the old code and stop it cleanly: a node of the
    old release that halted (an entry it cannot apply) or crashed is a violation."""
    return [
        Violation("upgrade_failed", None, f"{event.target}: {event.facts}")
        for event in history.faults
        if event.kind == "upgrade"
        and not (event.facts.get("was_running") and event.facts.get("exit_code") == 0)
    ]


def _fault_figures(history: History) -> dict[str, Any]:
    facts: dict[str, list[float]] = {}
    for event in history.faults:
        for key in ("failover_s", "partitions_moved_s", "recovery_s", "ready_under_load_s"):
            value = event.facts.get(key)
            if value is not None:
                facts.setdefault(f"{event.kind}:{key}", []).append(value)
    figures: dict[str, Any] = {k: percentiles(v) for k, v in sorted(facts.items())}
    figures["events"] = [asdict(e) for e in history.faults]
    return figures


def _git_head() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()
