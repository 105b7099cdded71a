"""Three real `schedd serve` nodes: replication, failover, restarts, snapshots, isolation."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.store.snapshot import SnapshotError, read_snapshot
from tests.servers import NodeProcess, http, make_nodes, running, wait_for, wait_ready

pytestmark = pytest.mark.cluster
JOB = {"schedule": {"delay": "1h"}, "target": {"type": "queue", "name": "q"}}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[NodeProcess]]:
    """A cluster of the test's own: for the tests that kill, stop or restart its nodes."""
    with running(make_nodes(tmp_path, 3)) as nodes:
        yield nodes


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    """One cluster for the tests that only write and read through it, each with a tenant of
    its own (a cluster start is three node starts: about 3 s of CPU)."""
    with running(make_nodes(tmp_path_factory.mktemp("shared"), 3)) as nodes:
        yield nodes


def tenant_token(node: NodeProcess, name: str = "acme") -> str:
    status, body, _ = http("POST", f"{node.url}/v1/tenants", {"name": name})
    assert status == 201, body
    return str(body["token"])


def leader_of(nodes: list[NodeProcess]) -> NodeProcess:
    for node in nodes:
        if node.is_running():
            _, state, _ = http("GET", f"{node.url}/v1/admin/state")
            if state["role"] == "leader":
                return node
    raise AssertionError("no leader")


def states(nodes: list[NodeProcess]) -> list[tuple[int, str]]:
    result = []
    for node in nodes:
        _, state, _ = http("GET", f"{node.url}/v1/admin/state")
        result.append((state["applied_index"], state["digest"]))
    return result


def wait_converged(nodes: list[NodeProcess], timeout_s: float = 30.0) -> tuple[int, str]:
    """Until every node reports the same applied index and digest."""
    deadline = time.monotonic() + timeout_s
    seen: list[tuple[int, str]] = []
    while time.monotonic() < deadline:
        seen = states(nodes)
        if len(set(seen)) == 1:
            return seen[0]
        time.sleep(0.2)
    raise AssertionError(f"replicas did not converge: {seen}")


def job_ids(node: NodeProcess, token: str) -> set[str]:
    ids: set[str] = set()
    cursor = ""
    while True:
        url = f"{node.url}/v1/jobs?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        status, body, _ = http("GET", url, token=token)
        assert status == 200, body
        ids.update(job["job_id"] for job in body["jobs"])
        if not body["next_cursor"]:
            return ids
        cursor = body["next_cursor"]


def create_jobs(node: NodeProcess, token: str, count: int) -> set[str]:
    created = set()
    for _ in range(count):
        status, body, _ = http("POST", f"{node.url}/v1/jobs", JOB, token=token)
        assert status == 201, body
        created.add(body["job_id"])
    return created


def test_write_through_a_follower_is_readable_there_at_once(
    shared_cluster: list[NodeProcess],
) -> None:
    cluster = shared_cluster
    leader = leader_of(cluster)
    follower = next(n for n in cluster if n is not leader)
    token = tenant_token(follower, name="follower-write")
    status, job, _ = http("POST", f"{follower.url}/v1/jobs", JOB, token=token)
    assert status == 201, job
    status, again, _ = http("GET", f"{follower.url}/v1/jobs/{job['job_id']}", token=token)
    assert status == 200 and again == job  # read-your-writes on the answering node
    wait_converged(cluster)
    for node in cluster:
        assert job["job_id"] in job_ids(node, token)


class Writer(threading.Thread):
    """Creates jobs through every live node in turn; remembers the acknowledged ones."""

    def __init__(self, nodes: list[NodeProcess], token: str) -> None:
        super().__init__(daemon=True)
        self.nodes, self.token = nodes, token
        self.acknowledged: set[str] = set()
        self.failures: list[tuple[str, Any]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            node = self.nodes[i % len(self.nodes)]
            i += 1
            if not node.is_running():
                continue
            try:
                status, body, _ = http(
                    "POST", f"{node.url}/v1/jobs", JOB, token=self.token, timeout_s=10
                )
            except OSError as exc:
                self.failures.append((node.node_id, repr(exc)))  # it died under this request
                continue
            if status == 201:
                self.acknowledged.add(body["job_id"])
            else:
                self.failures.append((node.node_id, status))


def test_kill_9_of_the_leader_loses_no_acknowledged_write(cluster: list[NodeProcess]) -> None:
    token = tenant_token(cluster[0])
    writer = Writer(cluster, token)
    writer.start()
    try:
        time.sleep(1.5)
        before = len(writer.acknowledged)
        old_leader = leader_of(cluster)
        old_leader.kill()
        killed_at = time.monotonic()
        survivors = [n for n in cluster if n is not old_leader]
        wait_ready(survivors, timeout_s=20)
        failover_s = time.monotonic() - killed_at
        time.sleep(1.5)
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    assert before > 0 and len(writer.acknowledged) > before, writer.failures
    assert failover_s < 15, f"new leader took {failover_s:.1f}s"
    # A live node refuses a write it cannot commit with a 503, never a 500 or a hang; only
    # requests to the node that was killed may fail at the connection.
    assert all(
        status == 503 or node_id == old_leader.node_id for node_id, status in writer.failures
    ), writer.failures
    # A write is acknowledged once applied on the node that answered; the other survivor may
    # apply it a heartbeat later: compare once both have applied the same log.
    wait_converged(survivors)
    for node in survivors:
        assert writer.acknowledged <= job_ids(node, token)
    old_leader.start()
    wait_ready(cluster)
    wait_converged(cluster)
    assert writer.acknowledged <= job_ids(old_leader, token)


def test_restart_of_one_node_and_of_all_nodes_keeps_the_state(cluster: list[NodeProcess]) -> None:
    token = tenant_token(cluster[0])
    created = create_jobs(cluster[1], token, 20)
    wait_converged(cluster)
    cluster[2].stop()
    created |= create_jobs(cluster[0], token, 10)  # written while n3 is down
    cluster[2].start()
    wait_ready(cluster)
    converged = wait_converged(cluster)
    assert job_ids(cluster[2], token) == created
    for node in cluster:
        assert node.stop() == 0  # SIGTERM is a clean exit
    for node in cluster:
        node.start()
    wait_ready(cluster)
    after = wait_converged(cluster)
    assert after[1] == converged[1] or after[0] > converged[0]
    for node in cluster:
        assert job_ids(node, token) == created


def test_isolated_node_answers_503_within_the_request_timeout(cluster: list[NodeProcess]) -> None:
    token = tenant_token(cluster[0])
    lonely = cluster[0]
    for node in cluster[1:]:
        node.kill()
    started = time.monotonic()
    status, body, headers = http("POST", f"{lonely.url}/v1/jobs", JOB, token=token, timeout_s=30)
    elapsed = time.monotonic() - started
    assert status == 503, body
    assert body["error"]["code"] in {"no_leader", "outcome_unknown"}
    assert headers.get("Retry-After") == "1"
    assert elapsed < 5.0 + 1.5, f"took {elapsed:.1f}s"
    status, _, _ = http("GET", f"{lonely.url}/readyz", token=None)
    assert status in {200, 503}  # readiness may lag the loss of the leader briefly


def test_snapshot_then_restart_and_a_wiped_node_catches_up(tmp_path: Path) -> None:
    raft_extra = 'compaction_min_entries = 50\ncompaction_min_time = "1s"\n'
    nodes = make_nodes(tmp_path, 3, raft_extra=raft_extra)
    with running(nodes):
        token = tenant_token(nodes[0])
        created = create_jobs(nodes[0], token, 150)
        deadline = time.monotonic() + 30
        while not all(
            (n.data_dir / "raft.snapshot").stat().st_size > 0
            for n in nodes
            if (n.data_dir / "raft.snapshot").exists()
        ) or not all((n.data_dir / "raft.snapshot").exists() for n in nodes):
            assert time.monotonic() < deadline, "no snapshot was written"
            create_jobs(nodes[0], token, 5)
            time.sleep(0.2)
        created = job_ids(nodes[0], token)
        for node in nodes:
            node.stop()
        for node in nodes:
            node.start()
        wait_ready(nodes)
        wait_converged(nodes)
        for node in nodes:
            assert job_ids(node, token) == created
        # A node that lost its disk gets the leader's snapshot plus the rest of the log.
        wiped = nodes[2]
        wiped.stop()
        for path in wiped.data_dir.iterdir():
            path.unlink()
        created |= create_jobs(nodes[0], token, 60)
        wiped.start()
        wait_ready(nodes)
        wait_converged(nodes, timeout_s=60)
        assert job_ids(wiped, token) == created


def test_new_tenant_token_works_at_once_on_every_node(shared_cluster: list[NodeProcess]) -> None:
    cluster = shared_cluster
    for i in range(5):
        token = tenant_token(cluster[i % 3], name=f"fresh-{i}")
        for node in cluster:  # no wait: a node that has not applied it yet catches up first
            status, body, _ = http("POST", f"{node.url}/v1/jobs", JOB, token=token)
            assert status == 201, (node.node_id, body)
    status, body, _ = http("POST", f"{cluster[1].url}/v1/jobs", JOB, token="sk_nobody")
    assert status == 401 and body["error"]["code"] == "unauthorized"


def _snapshot_index(node: NodeProcess) -> int:
    """The applied index of the node's current snapshot file (0: none yet, or being swapped)."""
    try:
        return read_snapshot(node.data_dir / "raft.snapshot")[0]
    except (SnapshotError, OSError):
        return 0


def _compact_past(nodes: list[NodeProcess], index: int, token: str, timeout_s: float) -> None:
    """Write until every node has compacted its log twice past `index`: a snapshot's file may
    hold more than the log index pysyncobj compacted at, the second one cannot."""
    deadline = time.monotonic() + timeout_s
    for _ in range(2):
        while min(_snapshot_index(n) for n in nodes) <= index:
            assert time.monotonic() < deadline, [_snapshot_index(n) for n in nodes]
            create_jobs(nodes[0], token, 10)
        index = max(_snapshot_index(n) for n in nodes)


def test_a_token_rotated_in_an_installed_snapshot_is_refused_at_once(tmp_path: Path) -> None:
    raft_extra = 'compaction_min_entries = 50\ncompaction_min_time = "1s"\n'
    nodes = make_nodes(tmp_path, 3, raft_extra=raft_extra)
    with running(nodes):
        lagging = next(n for n in nodes if n is not leader_of(nodes))
        others = [n for n in nodes if n is not lagging]
        status, tenant, _ = http("POST", f"{others[0].url}/v1/tenants", {"name": "acme"})
        assert status == 201, tenant
        old_token = tenant["token"]
        wait_converged(nodes)
        lagging.stop()
        status, rotated, _ = http(
            "POST", f"{others[0].url}/v1/tenants/{tenant['tenant_id']}/rotate"
        )
        assert status == 200, rotated
        _, state, _ = http("GET", f"{others[0].url}/v1/admin/state")
        _compact_past(others, state["applied_index"], rotated["token"], timeout_s=60)
        # The lagging node comes back alone (the others paused), so nothing but its own journal
        # can reach it: it authenticates the old token from its own state and caches it.
        for node in others:
            node.pause()
        try:
            lagging.start()
            wait_for(
                lambda: _status(lagging, old_token) == 200, 30, "the old token, before catching up"
            )
        finally:
            for node in others:
                node.resume()
        # Its log is behind every other node's compaction: the leader ships its snapshot.
        wait_for(lambda: "restoring snapshot" in lagging.log_tail(400), 60, "a snapshot install")
        wait_converged(nodes, timeout_s=60)
        assert _status(lagging, old_token) == 401
        assert _status(lagging, rotated["token"]) == 200


def _status(node: NodeProcess, token: str) -> int | None:
    try:
        status, _, _ = http("GET", f"{node.url}/v1/jobs?limit=1", token=token, timeout_s=5)
    except OSError:
        return None  # not serving yet
    return status
