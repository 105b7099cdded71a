"""`schedctl status` on three real nodes: exit 0 when all is well, 1 when a node is down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import ADMIN_TOKEN, NodeProcess, make_nodes, running, wait_for, wait_ready

SCHEDCTL = str(Path(sys.executable).with_name("schedctl"))


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    with running(make_nodes(tmp_path_factory.mktemp("status"), 3)) as started:
        yield started


def schedctl_status(nodes: list[NodeProcess], *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {"SCHEDCTL_TOKEN": ADMIN_TOKEN, "COLUMNS": "200"}
    urls = ",".join(n.url for n in nodes)
    return subprocess.run(
        [SCHEDCTL, "--url", urls, "--timeout", "3", "status", *extra],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def healthy_cluster(nodes: list[NodeProcess]) -> dict[str, Any] | None:
    """The --json answer once it exits 0 with every partition leased and every node holding
    some (a start-up takes a while: a node that registers after the first lease round gets its
    share at the next rebalance; a loaded machine may show a node briefly disconnected, hence
    the polling)."""
    result = schedctl_status(nodes, "--json")
    cluster: dict[str, Any] = json.loads(result.stdout)
    counts = [n["partitions"] for n in cluster["nodes"]]
    is_spread = len(counts) == 3 and sum(counts) == 256 and min(counts) > 0
    return cluster if result.returncode == 0 and is_spread else None


def test_status_exits_1_while_a_node_is_down_and_0_when_it_is_back(
    nodes: list[NodeProcess],
) -> None:
    cluster = wait_for(lambda: healthy_cluster(nodes), 30, "a healthy cluster of three")
    assert cluster["ok"] is True and all(n["partitions"] > 0 for n in cluster["nodes"])
    wait_for(
        lambda: True if schedctl_status(nodes).returncode == 0 else None, 30, "the table, exit 0"
    )

    victim = next(n for n in nodes if n.node_id != cluster["leader"])
    victim.kill()
    try:
        down_json = schedctl_status(nodes, "--json")
        assert down_json.returncode == 1
        answer = json.loads(down_json.stdout)
        [down] = [n for n in answer["nodes"] if n["node_id"] == victim.node_id]
        assert answer["ok"] is False and down["reachable"] is False
        table = schedctl_status(nodes)
        assert table.returncode == 1
        # piped: plain columns; the stopped node's role is `unreachable`, not its last `follower`
        header, *rows = table.stdout.splitlines()
        assert header.split()[:3] == ["NODE", "ROLE", "HEALTHY"]
        [row] = [line.split() for line in rows if line.startswith(victim.node_id + " ")]
        assert row[1:3] == ["unreachable", "no"]
    finally:
        victim.start()
        wait_ready([victim])
    wait_for(lambda: healthy_cluster(nodes), 30, "the cluster healthy again")
