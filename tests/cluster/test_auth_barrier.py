"""Unknown tokens on three real nodes: a flood of them adds only a bounded number of Raft log
entries, and a tenant created on one node is still accepted at once on another."""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from schedd.api.context import BARRIER_BURST, BARRIERS_PER_S
from tests.integration.api_helpers import new_tenant
from tests.servers import NodeProcess, http, make_nodes, running

pytestmark = pytest.mark.cluster
FLOOD = 200


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    with running(make_nodes(tmp_path_factory.mktemp("barrier"), 3)) as started:
        yield started


def _state(node: NodeProcess) -> dict[str, str | int]:
    status, state, _ = http("GET", f"{node.url}/v1/admin/state", timeout_s=5)
    assert status == 200, state
    found: dict[str, str | int] = state
    return found


def _follower(nodes: list[NodeProcess]) -> tuple[NodeProcess, NodeProcess]:
    leader_id = _state(nodes[0])["leader"]
    leader = next(n for n in nodes if n.raft == leader_id or n.node_id == leader_id)
    return leader, next(n for n in nodes if n is not leader)


def _index_growth(node: NodeProcess, seconds: float) -> int:
    """Entries the cluster's background work (heartbeats, leases) adds in `seconds`."""
    before = int(_state(node)["applied_index"])
    time.sleep(seconds)  # a measured interval, not a wait for a condition
    return int(_state(node)["applied_index"]) - before


def _flood(node: NodeProcess, count: int, clients: int) -> tuple[int, float, int]:
    """`count` requests with random unknown tokens from `clients` threads: (log entries
    added meanwhile, seconds taken, the most entries background work added in as long just
    before or just after: after a cluster's start its leases settle, so it is not steady)."""

    def unknown(_: int) -> int:
        token = "sk_" + secrets.token_urlsafe(32)
        return http("GET", f"{node.url}/v1/jobs", token=token, timeout_s=15)[0]

    earlier = _index_growth(node, 1.0)
    before, started = int(_state(node)["applied_index"]), time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        statuses = list(pool.map(unknown, range(count)))
    took = time.monotonic() - started
    assert statuses == [401] * count
    added = int(_state(node)["applied_index"]) - before
    return added, took, max(math.ceil(earlier * took), _index_growth(node, took))


def _bound(took: float, background: int) -> int:
    """Barriers one address may cause in `took` seconds, plus what the cluster's background
    work (heartbeats, leases) added in as long (measured, with margin)."""
    return int(BARRIER_BURST + BARRIERS_PER_S * took + 2 * background + 2)


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_unknown_tokens_add_a_bounded_number_of_log_entries(
    nodes: list[NodeProcess], role: str
) -> None:
    leader, follower = _follower(nodes)
    if role == "leader":  # one at a time: today each would be a barrier entry of its own
        added, took, background = _flood(leader, FLOOD, clients=1)
        assert added <= _bound(took, background), (added, took, background)
    else:  # a follower waits a heartbeat instead: many clients, so that this stays short
        added, took, background = _flood(follower, FLOOD, clients=20)
        assert added <= _bound(took, background), (added, took, background)


def test_a_new_tenant_is_accepted_at_once_on_another_node(nodes: list[NodeProcess]) -> None:
    leader, follower = _follower(nodes)
    for creator, user in ((leader, follower), (follower, leader), (leader, follower)):
        for _ in range(6):  # spend this address's barrier budget: no log entry from here on
            token = "sk_" + secrets.token_urlsafe(32)
            assert http("GET", f"{user.url}/v1/jobs", token=token)[0] == 401
        tenant = new_tenant(creator)
        status, body, _ = http("GET", f"{user.url}/v1/jobs", token=tenant.token)
        assert status == 200, body
