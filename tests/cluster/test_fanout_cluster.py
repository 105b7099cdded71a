"""Answers that gather every node, on three real nodes: a consumer that received through one
node shows in another's GET /v1/queues, and /v1/stats?scope=cluster lists every node, each
sampling on the same wall-clock ticks; a killed node is listed as failed (the queue answer as
partial, once the 2 s cache of the other nodes' consumers has expired) while the others answer
in time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from schedd.api.fanout import TIMEOUT_S
from tests.integration.api_helpers import new_tenant
from tests.servers import NodeProcess, http, make_nodes, ms, running, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    with running(make_nodes(tmp_path_factory.mktemp("fanout"), 3)) as started:
        yield started


def cluster_stats(node: NodeProcess) -> list[dict[str, Any]]:
    status, answer, _ = http("GET", f"{node.url}/v1/stats?scope=cluster", timeout_s=10)
    assert status == 200, answer
    found: list[dict[str, Any]] = answer["nodes"]
    return found


def test_consumers_and_stats_are_gathered_from_every_node(nodes: list[NodeProcess]) -> None:
    n1, n2, n3 = nodes
    tenant = new_tenant(n1)
    status, answer, _ = http(
        "POST", f"{n2.url}/v1/queues/work/receive", {"consumer": "via-n2"}, token=tenant.token
    )
    assert status == 200, answer
    status, listed, _ = http("GET", f"{n1.url}/v1/queues", token=tenant.token)
    assert status == 200 and listed["partial"] is False, listed
    [queue] = listed["queues"]
    assert [(c["consumer"], c["node"]) for c in queue["consumers"]] == [("via-n2", "n2")]

    # Every node registered and has taken a sample (the first comes 5 s after its start).
    everyone = wait_for(
        lambda: (s := cluster_stats(n1)) and len(s) == 3 and all(n.get("samples") for n in s) and s,
        20,
        "three nodes with samples",
    )
    assert [n["node_id"] for n in everyone] == ["n1", "n2", "n3"]
    assert all(n["node"]["role"] in ("leader", "follower") for n in everyone)
    ticks = [{ms(sample["at"]) for sample in n["samples"]} for n in everyone]
    assert all(tick % 5_000 == 0 for tick in set.union(*ticks))

    n3.kill()
    started = time.monotonic()
    after = {n["node_id"]: n for n in cluster_stats(n1)}
    assert time.monotonic() - started < TIMEOUT_S + 1
    assert set(after["n3"]) == {"node_id", "error"}
    assert after["n1"]["samples"] and after["n2"]["samples"]

    def queues() -> dict[str, Any]:
        status, listed, _ = http("GET", f"{n1.url}/v1/queues", token=tenant.token)
        assert status == 200, listed
        return dict(listed)

    listed = wait_for(lambda: (q := queues())["partial"] and q, 5, "a partial answer")
    assert [c["consumer"] for c in listed["queues"][0]["consumers"]] == ["via-n2"]
