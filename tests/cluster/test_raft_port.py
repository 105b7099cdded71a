"""Three real nodes withstand strangers on their Raft ports: each listens on its raft.listen only,
never unpickles a frame without the secret, and hangs up on a huge frame; the cluster goes on."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.raftprobe import MiB, Touch, listening_hosts, rss_kib, send_pickle, stream_huge_frame
from tests.servers import NodeProcess, http, make_nodes, running, wait_for

pytestmark = pytest.mark.cluster
NAMES = itertools.count()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    with running(make_nodes(tmp_path_factory.mktemp("cluster"), 3)) as nodes:
        yield nodes


def assert_cluster_writes(nodes: list[NodeProcess]) -> None:
    """Every node is ready and a write through each of them is applied."""
    for node in nodes:
        status, _, _ = http("GET", f"{node.url}/readyz", token=None)
        assert status == 200, node.log_tail()
        name = f"t{next(NAMES)}"
        status, body, _ = http("POST", f"{node.url}/v1/tenants", {"name": name})
        assert status == 201, body


def test_each_node_listens_on_its_raft_address_only(cluster: list[NodeProcess]) -> None:
    for node in cluster:
        assert listening_hosts(node.raft_port) == {"127.0.0.1"}, node.node_id


def test_no_node_unpickles_a_frame_without_the_secret(
    cluster: list[NodeProcess], tmp_path: Path
) -> None:
    for node in cluster:
        marker = tmp_path / f"unpickled-by-{node.node_id}"
        is_closed = send_pickle(node.raft_port, Touch(marker))
        assert not marker.exists(), f"{node.node_id} unpickled a stranger's frame"
        assert is_closed, f"{node.node_id} kept a stranger's connection open"
    assert_cluster_writes(cluster)


def test_every_node_hangs_up_on_a_huge_frame(cluster: list[NodeProcess]) -> None:
    for node in cluster:
        assert node.process is not None
        before = rss_kib(node.process.pid)
        assert stream_huge_frame(node.raft_port, 16 * MiB), f"{node.node_id}: no disconnect"
        assert rss_kib(node.process.pid) - before < 8 * 1024, node.node_id
    assert_cluster_writes(cluster)
    # The peers' own connections were never disturbed: all three still see each other.
    for node in cluster:
        wait_for(lambda n=node: sees_all_healthy(n), 10, f"{node.node_id} seeing its peers")


def sees_all_healthy(node: NodeProcess) -> bool:
    _, body, _ = http("GET", f"{node.url}/v1/cluster")
    return len(body["nodes"]) == 3 and all(peer["healthy"] for peer in body["nodes"])
