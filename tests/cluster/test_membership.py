"""Raft membership through `schedctl cluster`: a fourth node joins and catches up, the leader
and a follower are removed, the group keeps its quorum rules, and a restarted member whose
config still names the old peers knows the new membership from its journal."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api_helpers import new_tenant
from tests.servers import (
    ADMIN_TOKEN,
    NodeProcess,
    http,
    make_nodes,
    running,
    wait_for,
    wait_ready,
    write_config,
)

pytestmark = pytest.mark.cluster
SCHEDCTL = str(Path(sys.executable).with_name("schedctl"))
DISPATCH = '[dispatch]\nlease_ttl = "2s"\n'


def schedctl(nodes: list[NodeProcess], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {"SCHEDCTL_TOKEN": ADMIN_TOKEN, "COLUMNS": "200"}
    urls = ",".join(n.url for n in nodes)
    return subprocess.run(
        [SCHEDCTL, "--url", urls, "--timeout", "15", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[NodeProcess]]:
    """n1-n3 form the cluster; n4 is configured to join it (peers: the three), not started."""
    made = make_nodes(tmp_path, 4, extra_sections=DISPATCH)
    first = made[:3]
    for node in first:
        write_config(node, [n.raft for n in first if n is not node], extra_sections=DISPATCH)
    joining = made[3]
    with running(first):
        try:
            yield made
        except BaseException:
            sys.stderr.write(f"--- log of {joining.node_id}\n{joining.log_tail()}\n")
            raise
        finally:
            joining.stop()


def answers(node: NodeProcess, path: str) -> int | None:
    try:
        return http("GET", f"{node.url}{path}", token=None, timeout_s=5)[0]
    except OSError:
        return None


def state(node: NodeProcess) -> dict[str, Any]:
    status, body, _ = http("GET", f"{node.url}/v1/admin/state", timeout_s=5)
    assert status == 200, body
    result: dict[str, Any] = body
    return result


def cluster_view(node: NodeProcess) -> dict[str, Any]:
    status, body, _ = http("GET", f"{node.url}/v1/cluster", timeout_s=5)
    assert status == 200, body
    result: dict[str, Any] = body
    return result


def caught_up(nodes: list[NodeProcess]) -> bool:
    """Every node applied the same index with the same digest (polled: writes keep coming)."""
    states = [state(n) for n in nodes]
    return len({(s["applied_index"], s["digest"]) for s in states}) == 1


def test_add_then_remove_the_leader_and_a_follower(nodes: list[NodeProcess]) -> None:
    n1, n2, _, n4 = nodes
    tenant = new_tenant(n1)
    job = {"schedule": {"every": "1s"}, "target": {"type": "queue", "name": "q"}}
    status, _, _ = http("POST", f"{n1.url}/v1/jobs", job, token=tenant.token)
    assert status == 201

    n4.start()  # not a member yet: it serves, but finds no leader
    wait_for(lambda: answers(n4, "/healthz"), 30, "n4 to serve")
    assert answers(n4, "/readyz") == 503
    added = schedctl([n2], "cluster", "add-node", n4.raft)
    assert added.returncode == 0, added.stderr
    assert f"added {n4.raft}" in added.stdout
    wait_ready(nodes)
    wait_for(lambda: caught_up(nodes), 30, "n4 to catch up with the same digest")
    assert all(cluster_view(n)["members"] == sorted(m.raft for m in nodes) for n in nodes)
    wait_for(lambda: cluster_view(n1)["nodes"][3]["partitions"], 20, "n4 to lease some partitions")
    again = schedctl([n1], "cluster", "add-node", n4.raft)
    assert again.returncode == 1 and "already a member" in again.stderr, again.stderr

    leader_id = state(n1)["leader"]
    leader = next(n for n in nodes if n.node_id == leader_id)
    removed = schedctl(nodes, "cluster", "remove-node", leader_id)
    assert removed.returncode == 0, removed.stderr
    assert f"removed {leader_id} ({leader.raft})" in removed.stdout
    leader.stop()
    rest = [n for n in nodes if n is not leader]
    wait_ready(rest)
    assert all(state(n)["leader"] != leader_id for n in rest)
    view = cluster_view(rest[0])
    assert sorted(n["node_id"] for n in view["nodes"]) == sorted(n.node_id for n in rest)

    # Three members now: one more may fail and writes still commit (2 of 3).
    follower = next(n for n in rest if state(n)["role"] == "follower")
    follower.kill()
    alive = [n for n in rest if n is not follower]
    wait_ready(alive)
    status, body, _ = http("POST", f"{alive[0].url}/v1/jobs", job, token=tenant.token)
    assert status == 201, body

    # A restarted member whose config still lists the removed leader (and lacks n4, for the
    # first three) gets the membership from its journal: the cluster stays one group of three.
    follower.start()
    wait_ready(rest)
    wait_for(lambda: caught_up(rest), 30, "the restarted member to catch up")
    assert cluster_view(follower)["members"] == sorted(n.raft for n in rest)

    # A follower goes the same way; the remaining two keep leading and writing.
    victim = next(n for n in rest if state(n)["role"] == "follower")
    gone = schedctl(rest, "cluster", "remove-node", victim.raft, "--json")
    assert gone.returncode == 0, gone.stderr
    victim.stop()
    pair = [n for n in rest if n is not victim]
    wait_ready(pair)
    status, body, _ = http("POST", f"{pair[0].url}/v1/jobs", job, token=tenant.token)
    assert status == 201, body


def test_step_down_and_bad_membership_requests(nodes: list[NodeProcess]) -> None:
    n1 = nodes[0]
    first = nodes[:3]
    leader = state(n1)["leader"]
    handed = schedctl(first, "cluster", "step-down")
    assert handed.returncode == 0, handed.stderr
    assert f"{leader} stepped down" in handed.stdout
    wait_ready(first)
    assert state(n1)["leader"] != leader
    follower = next(n for n in first if state(n)["role"] == "follower")
    status, body, _ = http("POST", f"{follower.url}/v1/cluster/leader/step-down")
    assert (status, body["error"]["code"]) == (409, "conflict"), body

    bad = schedctl([n1], "cluster", "add-node", "not-an-address")
    assert bad.returncode == 2 and "raft" in bad.stderr, bad.stderr
    unknown = schedctl([n1], "cluster", "remove-node", "n9")
    assert unknown.returncode == 1 and "no member 'n9'" in unknown.stderr, unknown.stderr
    status, body, _ = http("DELETE", f"{n1.url}/v1/cluster/nodes/n1")
    assert (status, body["error"]["code"]) == (409, "conflict"), body
    status, body, _ = http("POST", f"{n1.url}/v1/cluster/nodes", {"raft": "x:1", "extra": 1})
    assert status == 400, body
    status, body, _ = http("POST", f"{n1.url}/v1/cluster/nodes", {"raft": "10.0.0.9:9"}, token=None)
    assert status == 401, body
    assert all(cluster_view(n)["members"] == sorted(m.raft for m in first) for n in first)
