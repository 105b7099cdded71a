"""Dispatch on three real nodes: partition leases spread and move on failures, runs keep firing
after kill -9 and SIGSTOP, and each test ends with a history check and equal replica digests."""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from schedd.model import partition_of
from tests.integration.api_helpers import Tenant, new_tenant
from tests.servers import NodeProcess, http, make_nodes, ms, now_ms, running, wait_for, wait_ready

pytestmark = pytest.mark.cluster
PARTITIONS = 256
LEASE_TTL_S = 2.0
DISPATCH = f'[dispatch]\nlease_ttl = "{LEASE_TTL_S:g}s"\n'
JOBS = 30
RETRY = {"max_attempts": 10, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    """Three nodes shared by the module; a test that stops one starts it again."""
    base: Path = tmp_path_factory.mktemp("dispatch-cluster")
    with running(make_nodes(base, 3, extra_sections=DISPATCH)) as nodes:
        yield nodes


# ------------------------------------------------------------------ helpers


def held_partitions(node: NodeProcess) -> dict[str, set[int]]:
    """node_id -> the partitions it holds an unexpired lease on, as `node` sees it (every
    registered node is listed, with no partitions when it holds none)."""
    status, body, _ = http("GET", f"{node.url}/v1/cluster", timeout_s=5)
    assert status == 200, body
    return {n["node_id"]: set(n["partitions"]) for n in body["nodes"]}


def leader_of(nodes: list[NodeProcess]) -> NodeProcess:
    for node in nodes:
        _, state, _ = http("GET", f"{node.url}/v1/admin/state")
        if state["role"] == "leader":
            return node
    raise AssertionError("no leader")


def start_jobs(node: NodeProcess, tenant: Tenant, queue: str) -> list[dict[str, Any]]:
    """JOBS jobs that run every second, spread over the partitions by their random ids."""
    body = {"schedule": {"every": "1s"}, "target": {"type": "queue", "name": queue}}
    status, created, _ = http(
        "POST",
        f"{node.url}/v1/jobs:batch",
        {"jobs": [body | {"retry": RETRY}] * JOBS},
        token=tenant.token,
    )
    assert status == 200, created
    results: list[dict[str, Any]] = created["results"]
    assert all("job_id" in r for r in results), results
    return results


def runs_of(node: NodeProcess, tenant: Tenant, job_id: str) -> list[dict[str, Any]]:
    """Every run of a job, oldest first."""
    runs: list[dict[str, Any]] = []
    cursor = ""
    while True:
        url = f"{node.url}/v1/jobs/{job_id}/runs?limit=100"
        status, page, _ = http(
            "GET", url + (f"&cursor={cursor}" if cursor else ""), token=tenant.token
        )
        assert status == 200, page
        runs += page["runs"]
        if page["next_cursor"] is None:
            return sorted(runs, key=lambda r: ms(r["scheduled_at"]))
        cursor = page["next_cursor"]


class Consumer(threading.Thread):
    """Receives and acks a queue through one node, remembering every delivery it saw."""

    def __init__(self, node: NodeProcess, tenant: Tenant, queue: str) -> None:
        super().__init__(daemon=True)
        self.node, self.tenant, self.queue = node, tenant, queue
        self.received: list[tuple[str, int]] = []  # (idempotency_key, attempt)
        self.failures: list[Any] = []
        self.stop = threading.Event()

    def __enter__(self) -> Consumer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.join(timeout=15)

    def call(self, verb: str, body: dict[str, Any]) -> dict[str, Any] | None:
        url = f"{self.node.url}/v1/queues/{self.queue}/{verb}"
        try:
            status, answer, _ = http("POST", url, body, token=self.tenant.token, timeout_s=10)
        except OSError as exc:
            self.failures.append((verb, repr(exc)))
            return None
        if status != 200:
            self.failures.append((verb, status, answer))  # a 503 while Raft elects a leader
            return None
        result: dict[str, Any] = answer
        return result

    def run(self) -> None:
        while not self.stop.is_set():
            body = {"max": 100, "wait": "1s", "visibility_timeout": "3s"}
            answer = self.call("receive", body)
            if answer is None:
                time.sleep(0.2)
                continue
            messages = answer["messages"]
            self.received += [(m["idempotency_key"], m["attempt"]) for m in messages]
            receipts = [m["receipt"] for m in messages]
            # An ack that fails is a redelivery later, with a higher attempt: not a loss.
            if receipts and self.call("ack", {"receipts": receipts}) is None:
                self.call("ack", {"receipts": receipts})


def finish(node: NodeProcess, tenant: Tenant, jobs: list[dict[str, Any]]) -> int:
    """Cancel the jobs and wait until the consumer acked every run; returns the cancel time."""
    for job in jobs:
        status, body, _ = http("DELETE", f"{node.url}/v1/jobs/{job['job_id']}", token=tenant.token)
        assert status == 204, body
    cancelled_ms = now_ms()

    def all_acked() -> bool:
        return all(
            r["status"] == "succeeded" for job in jobs for r in runs_of(node, tenant, job["job_id"])
        )

    wait_for(all_acked, 30, "every run acked")
    return cancelled_ms


def check_history(
    node: NodeProcess,
    tenant: Tenant,
    jobs: list[dict[str, Any]],
    consumer: Consumer,
    cancelled_ms: int,
) -> None:
    """Every job's runs form an unbroken 1 s sequence from its first run to its cancellation,
    and the consumer got each run once, or again only as a redelivery with a higher attempt."""
    keys: set[str] = set()
    for job in jobs:
        runs = runs_of(node, tenant, job["job_id"])
        at = [ms(r["scheduled_at"]) for r in runs]
        assert at[0] == ms(job["next_run_at"]), (job, runs[0])
        gaps = [b - a for a, b in itertools.pairwise(at)]
        assert gaps == [1_000] * len(gaps), f"{job['job_id']} skipped or doubled runs: {gaps}"
        assert at[-1] >= cancelled_ms - 3_000, f"{job['job_id']} fell behind: {at[-1]}"
        keys |= {f"{job['job_id']}:{r['scheduled_at']}" for r in runs}
    attempts: dict[str, list[int]] = defaultdict(list)
    for key, attempt in consumer.received:
        attempts[key].append(attempt)
    assert set(attempts) == keys
    doubled = {k: a for k, a in attempts.items() if a != sorted(set(a))}
    assert not doubled, f"delivered twice at the same attempt: {doubled}"


def assert_replicas_agree(nodes: list[NodeProcess], timeout_s: float = 20.0) -> None:
    """Nodes reporting the same applied index report the same digest; all three are seen at
    one index (heartbeats keep writing, so the states are read at the same moment)."""
    deadline = time.monotonic() + timeout_s

    def state(node: NodeProcess) -> tuple[int, str]:
        _, body, _ = http("GET", f"{node.url}/v1/admin/state", timeout_s=5)
        return body["applied_index"], body["digest"]

    with ThreadPoolExecutor(len(nodes)) as pool:
        while True:
            states = list(pool.map(state, nodes))
            by_index: dict[int, set[str]] = defaultdict(set)
            for index, digest in states:
                by_index[index].add(digest)
            assert all(len(d) == 1 for d in by_index.values()), f"replicas diverged: {states}"
            if len(by_index) == 1:
                return
            assert time.monotonic() < deadline, f"never caught the nodes at one index: {states}"
            time.sleep(0.05)


def wait_dispatching(node: NodeProcess, tenant: Tenant, jobs: list[dict[str, Any]]) -> None:
    wait_for(
        lambda: all(len(runs_of(node, tenant, job["job_id"])) >= 2 for job in jobs),
        15,
        "two runs of every job",
    )


def wait_runs_after(
    node: NodeProcess, tenant: Tenant, jobs: list[dict[str, Any]], after_ms: int, timeout_s: float
) -> None:
    wait_for(
        lambda: all(
            ms(runs_of(node, tenant, job["job_id"])[-1]["scheduled_at"]) > after_ms for job in jobs
        ),
        timeout_s,
        "runs of every job after the failure",
    )


# ------------------------------------------------------------------ tests


def pick(cluster: list[NodeProcess], role: str) -> tuple[NodeProcess, NodeProcess]:
    """(the node that fails, a node that stays up) for a failure of the leader or a follower."""
    leader = leader_of(cluster)
    followers = [n for n in cluster if n is not leader]
    return (leader, followers[0]) if role == "leader" else (followers[0], followers[1])


def taken_over(watcher: NodeProcess, failed: NodeProcess) -> bool:
    """Every partition has an unexpired lease, none of them on `failed`."""
    held = held_partitions(watcher)
    return not held[failed.node_id] and set().union(*held.values()) == set(range(PARTITIONS))


def wait_balanced(node: NodeProcess, timeout_s: float = 30) -> dict[str, set[int]]:
    """Until every node holds a third of the partitions (the leader moves 16 a second)."""

    def balanced() -> dict[str, set[int]] | None:
        held = held_partitions(node)
        counts = sorted(len(p) for p in held.values())
        return held if len(held) == 3 and counts in ([85, 85, 86], [85, 86, 86]) else None

    return wait_for(balanced, timeout_s, "85 or 86 partitions on every node")


def test_leases_spread_evenly_over_the_nodes(cluster: list[NodeProcess]) -> None:
    held = wait_balanced(cluster[0])
    assert set().union(*held.values()) == set(range(PARTITIONS))
    wait_for(
        lambda: all(held_partitions(node) == held for node in cluster[1:]),
        5,
        "the same holders on every replica",
    )
    assert_replicas_agree(cluster)


@pytest.mark.parametrize("role", ["follower", "leader"])
def test_kill_9_moves_a_nodes_partitions_and_its_runs_still_fire(
    cluster: list[NodeProcess], role: str
) -> None:
    wait_ready(cluster)
    wait_balanced(cluster[0])
    victim, watcher = pick(cluster, role)
    tenant = new_tenant(watcher)  # everything through one node: it reads its own writes
    with Consumer(watcher, tenant, "k") as consumer:
        jobs = start_jobs(watcher, tenant, "k")
        wait_dispatching(watcher, tenant, jobs)
        lost = held_partitions(watcher)[victim.node_id]
        orphaned = [j for j in jobs if partition_of(j["job_id"], PARTITIONS) in lost]
        assert len(orphaned) >= 3, f"{len(orphaned)} of {JOBS} jobs in its partitions"
        victim.kill()
        try:
            wait_for(
                lambda: taken_over(watcher, victim),
                LEASE_TTL_S + 8,  # an election (up to 2.5 s) may come first
                "the victim's partitions on live nodes",
            )
            wait_runs_after(watcher, tenant, orphaned, now_ms(), timeout_s=5)
        finally:
            victim.start()
        wait_ready(cluster)
        cancelled_ms = finish(watcher, tenant, jobs)
    check_history(watcher, tenant, jobs, consumer, cancelled_ms)
    assert_replicas_agree(cluster)


@pytest.mark.parametrize("role", ["follower", "leader"])
def test_node_paused_past_its_lease_claims_nothing_twice_and_loses_nothing(
    cluster: list[NodeProcess], role: str
) -> None:
    wait_ready(cluster)
    sleeper, watcher = pick(cluster, role)  # a paused leader also wakes up believing it leads
    tenant = new_tenant(watcher)
    with Consumer(watcher, tenant, "s") as consumer:
        jobs = start_jobs(watcher, tenant, "s")
        wait_dispatching(watcher, tenant, jobs)
        wait_for(lambda: held_partitions(watcher)[sleeper.node_id], 15, "partitions on it")
        sleeper.pause()
        paused_ms = now_ms()
        try:
            wait_for(lambda: taken_over(watcher, sleeper), 10, "its partitions on other nodes")
            time.sleep(max(0.0, paused_ms / 1000 + 5 - time.time()))  # paused 5 s in all
        finally:
            sleeper.resume()
        resumed_ms = now_ms()
        wait_ready(cluster)
        wait_runs_after(watcher, tenant, jobs, resumed_ms + 1_000, timeout_s=10)
        cancelled_ms = finish(watcher, tenant, jobs)
    check_history(watcher, tenant, jobs, consumer, cancelled_ms)
    assert_replicas_agree(cluster)
