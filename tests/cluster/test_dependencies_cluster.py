"""Run B after A (issue 33 §2) on three real nodes while the Raft leader is killed three times
during a chain of 1,000 runs of A: A's run ending and B's run being made are one log entry, so
B has exactly one run for every run of A that succeeded (none lost, none doubled), each naming
that run, the consumer gets every one of them, and the replicas agree."""

from __future__ import annotations

import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from schedd.timeformat import format_instant
from tests.cluster.test_backfill_cluster import backfill
from tests.cluster.test_dispatch_cluster import (
    DISPATCH,
    LEASE_TTL_S,
    Consumer,
    assert_replicas_agree,
    leader_of,
    taken_over,
)
from tests.integration.api_helpers import Tenant, new_tenant
from tests.servers import NodeProcess, http, make_nodes, ms, now_ms, running, wait_for, wait_ready

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
CHAIN = 1_000  # A's backfilled 1 s slots: paced at 50 a second, about 20 s of runs
DISPATCH_RATE = 100  # the tenant's: its backfills take half
KILLS_AT = (0.15, 0.45, 0.75)  # the leader dies when the consumer has this share of A's runs
DRAIN_TIMEOUT_S = 90.0
RETRY = {"max_attempts": 10, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}
ENDED = frozenset({"succeeded", "dead", "skipped"})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    base: Path = tmp_path_factory.mktemp("dependencies-cluster")
    with running(make_nodes(base, 3, extra_sections=DISPATCH)) as nodes:
        yield nodes


def note(line: str) -> None:
    """A timing, on stderr as it happens (shown with -s, and with a failure's report)."""
    sys.stderr.write(f"{line}\n")


class FailoverConsumer(Consumer):
    """A Consumer that moves to the next node whenever a call fails (refused by a killed node,
    a 503 while Raft elects a leader), so it keeps acking through every kill."""

    def __init__(self, nodes: list[NodeProcess], first: int, tenant: Tenant, queue: str) -> None:
        super().__init__(nodes[first], tenant, queue)
        self.nodes, self.turn = nodes, first

    def call(self, verb: str, body: dict[str, Any]) -> dict[str, Any] | None:
        answer = super().call(verb, body)
        if answer is None:
            self.turn += 1
            self.node = self.nodes[self.turn % len(self.nodes)]
        return answer

    def __enter__(self) -> FailoverConsumer:
        self.start()
        return self

    def keys(self) -> set[str]:
        return {key for key, _ in list(self.received)}

    def has(self, count: int) -> bool:
        """Whether it received `count` distinct runs."""
        return len(self.keys()) >= count


def try_runs(node: NodeProcess, tenant: Tenant, job_id: str) -> list[dict[str, Any]] | None:
    """Every run of the job as `node` has them (None when it cannot answer just now)."""
    runs: list[dict[str, Any]] = []
    cursor = ""
    while True:
        url = f"{node.url}/v1/jobs/{job_id}/runs?limit=1000" + (
            f"&cursor={cursor}" if cursor else ""
        )
        try:
            status, page, _ = http("GET", url, token=tenant.token, timeout_s=10)
        except OSError:
            return None
        if status != 200:
            return None
        runs += page["runs"]
        if page["next_cursor"] is None:
            return runs
        cursor = page["next_cursor"]


@dataclass(frozen=True, slots=True)
class Chain:
    """Both jobs' runs as one node saw them, one read after the other."""

    a_status: str
    a_runs: list[dict[str, Any]]
    b_runs: list[dict[str, Any]]

    @property
    def a_succeeded(self) -> set[str]:
        return {r["scheduled_at"] for r in self.a_runs if r["status"] == "succeeded"}

    @property
    def b_slots(self) -> list[str]:
        return [r["scheduled_at"] for r in self.b_runs]

    def summary(self) -> str:
        a_by: dict[str, int] = defaultdict(int)
        b_by: dict[str, int] = defaultdict(int)
        for run in self.a_runs:
            a_by[run["status"]] += 1
        for run in self.b_runs:
            b_by[run["status"]] += 1
        missing = sorted(self.a_succeeded - set(self.b_slots))
        extra = sorted(set(self.b_slots) - self.a_succeeded)
        doubled = sorted({s for s in self.b_slots if self.b_slots.count(s) > 1})
        return (
            f"A {self.a_status}, its runs {dict(a_by)}, B runs {dict(b_by)}; B missing at "
            f"{len(missing)} slots {missing[:10]}, B extra at {len(extra)} {extra[:10]}, "
            f"doubled {doubled[:10]}"
        )


def read_chain(nodes: list[NodeProcess], tenant: Tenant, a_id: str, b_id: str) -> Chain | None:
    """A's status and both jobs' runs from the first running node that answers."""
    for node in nodes:
        if not node.is_running():
            continue
        try:
            status, a, _ = http("GET", f"{node.url}/v1/jobs/{a_id}", token=tenant.token)
        except OSError:
            continue
        a_runs = try_runs(node, tenant, a_id) if status == 200 else None
        b_runs = try_runs(node, tenant, b_id) if a_runs is not None else None
        if a_runs is not None and b_runs is not None:
            return Chain(a["status"], a_runs, b_runs)
    return None


def new_leader(survivors: list[NodeProcess], killed: NodeProcess) -> str | None:
    """The leader both survivors name, when they are ready and it is one of them (at first
    they still name the killed one, until an election timeout passes)."""
    leaders = set()
    for node in survivors:
        try:
            ready, _, _ = http("GET", f"{node.url}/readyz", token=None, timeout_s=2)
            _, state, _ = http("GET", f"{node.url}/v1/admin/state", timeout_s=5)
        except OSError:
            return None
        if ready != 200:
            return None
        leaders.add(state["leader"])
    [leader] = leaders if len(leaders) == 1 else [None]
    return leader if leader in {n.node_id for n in survivors} else None


def partitions_moved(watcher: NodeProcess, killed: NodeProcess) -> bool:
    """Every partition leased to a live node (False while the watcher cannot say)."""
    try:
        return taken_over(watcher, killed)
    except (OSError, AssertionError, KeyError):
        return False


def kill_the_leader(cluster: list[NodeProcess], drain: float) -> None:
    """SIGKILL the Raft leader, wait until the other two elect one of them and hold all the
    partitions, start it again, and wait until all three are ready under one leader."""
    leader = leader_of(cluster)
    survivors = [n for n in cluster if n is not leader]
    killed_at = time.monotonic()
    leader.kill()
    try:
        elected = wait_for(lambda: new_leader(survivors, leader), 30, "a new leader")
        elected_at = time.monotonic()
        wait_for(
            lambda: partitions_moved(survivors[0], leader),
            LEASE_TTL_S + 10,
            "the killed node's partitions on live nodes",
        )
        moved_at = time.monotonic()
    finally:
        leader.start()
    wait_ready(cluster, timeout_s=30)
    note(
        f"killed {leader.node_id} (leader) at {killed_at - drain:.1f}s: {elected} elected in "
        f"{elected_at - killed_at:.1f}s, partitions moved in {moved_at - killed_at:.1f}s, "
        f"all three ready in {time.monotonic() - killed_at:.1f}s"
    )


def test_b_gets_one_run_for_every_succeeded_run_of_a_across_leader_kills(
    cluster: list[NodeProcess],
) -> None:
    began = time.monotonic()
    wait_ready(cluster)
    node = cluster[0]
    tenant = new_tenant(node, dispatch_rate=DISPATCH_RATE)
    start = (now_ms() // 1_000 - CHAIN - 1) * 1_000
    end = (now_ms() // 1_000 + 2) * 1_000  # a few scheduled runs of A of its own, then none
    a_body = {
        "schedule": {
            "every": "1s",
            "start_at": format_instant(start),
            "end_at": format_instant(end),
        },
        "target": {"type": "queue", "name": "a"},
        "retry": RETRY,
    }
    status, a, _ = http("POST", f"{node.url}/v1/jobs", a_body, token=tenant.token)
    assert status == 201, a
    b_body = {
        "schedule": {"after": {"job_id": a["job_id"], "on": "success"}},
        "target": {"type": "queue", "name": "b"},
        "retry": RETRY,
    }
    status, b, _ = http("POST", f"{node.url}/v1/jobs", b_body, token=tenant.token)
    assert status == 201, b
    a_id, b_id = a["job_id"], b["job_id"]
    span = {"from": format_instant(start), "to": format_instant(start + CHAIN * 1_000)}
    with (
        FailoverConsumer(cluster, 0, tenant, "a") as a_consumer,
        FailoverConsumer(cluster, 1, tenant, "b") as b_consumer,
    ):
        assert backfill(node, tenant, a_id, span) == {"runs": CHAIN}
        drain = time.monotonic()
        note(f"jobs created and A's backfill answered in {drain - began:.1f}s")
        for share in KILLS_AT:
            wait_for(
                partial(a_consumer.has, int(share * CHAIN)),
                DRAIN_TIMEOUT_S,
                f"{share:.0%} of A's runs received",
            )
            kill_the_leader(cluster, drain)
        last: list[Chain] = []

        def drained() -> Chain | None:
            if len(b_consumer.keys()) < CHAIN:  # cheap: no full read before B can be done
                return None
            chain = read_chain(cluster, tenant, a_id, b_id)
            if chain is None:
                return None
            last[:] = [chain]
            a_ended = all(r["status"] in ENDED for r in chain.a_runs)
            backfilled = sum(r["backfill"] for r in chain.a_runs)
            b_done = all(r["status"] == "succeeded" for r in chain.b_runs)
            a_done = chain.a_status == "completed" and a_ended and backfilled == CHAIN
            if a_done and b_done:
                return chain if set(chain.b_slots) >= chain.a_succeeded else None
            return None

        try:
            chain = wait_for(drained, DRAIN_TIMEOUT_S, "a run of B for every succeeded run of A")
        except AssertionError as exc:
            seen = last[0] if last else read_chain(cluster, tenant, a_id, b_id)
            raise AssertionError(f"{exc}; {seen.summary() if seen else 'no read'}") from None
        note(f"B caught up with A: {time.monotonic() - drain:.1f}s into the drain")
    # A's end and B's run are one log entry: none lost, none doubled.
    assert sum(r["backfill"] for r in chain.a_runs) == CHAIN
    assert all(r["status"] == "succeeded" for r in chain.a_runs), chain.summary()
    assert len(chain.b_slots) == len(set(chain.b_slots)), chain.summary()
    assert set(chain.b_slots) == chain.a_succeeded, chain.summary()
    assert {ms(s) for s in chain.a_succeeded} >= {start + k * 1_000 for k in range(CHAIN)}
    wrong = [
        r
        for r in chain.b_runs
        if r["triggered_by"]
        != {"job_id": a_id, "scheduled_at": r["scheduled_at"], "status": "succeeded"}
    ]
    assert not wrong, f"{len(wrong)} runs of B name another run of A: {wrong[:3]}"
    # Every run of B reached the consumer (again only as a redelivery, with a higher attempt).
    for consumer, job_id, runs in (
        (a_consumer, a_id, chain.a_runs),
        (b_consumer, b_id, chain.b_runs),
    ):
        attempts: dict[str, list[int]] = defaultdict(list)
        for key, attempt in consumer.received:
            attempts[key].append(attempt)
        keys = {f"{job_id}:{r['scheduled_at']}" for r in runs}
        assert keys <= set(attempts), f"never delivered: {sorted(keys - set(attempts))[:10]}"
        doubled = {k: a for k, a in attempts.items() if a != sorted(set(a))}
        assert not doubled, f"{consumer.queue}: delivered twice at one attempt: {doubled}"
    assert_replicas_agree(cluster)
    for consumer in (a_consumer, b_consumer):
        failed = Counter(failure[0] for failure in consumer.failures)
        again = sum(attempt > 1 for _, attempt in consumer.received)
        note(
            f"queue {consumer.queue}: {len(consumer.received)} messages, {again} of them "
            f"redeliveries; failed calls {dict(failed)}"
        )
    note(f"{len(chain.a_runs)} runs of A and of B; {time.monotonic() - began:.1f}s in all")
