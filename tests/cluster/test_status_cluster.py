"""`schedctl status` on three real nodes: exit 0 when all is well, 1 when a node is down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import ADMIN_TOKEN, NodeProcess, make_nodes, running, wait_for, wait_ready

SCHEDCTL = str(Path(sys.executable).with_name("schedctl"))


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    with running(make_nodes(tmp_path_factory.mktemp("status"), 3)) as started:
        yield started


def status(nodes: list[NodeProcess]) -> tuple[int, dict[str, object], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {"SCHEDCTL_TOKEN": ADMIN_TOKEN, "COLUMNS": "200"}
    urls = ",".join(n.url for n in nodes)
    as_json = subprocess.run(
        [SCHEDCTL, "--url", urls, "--timeout", "3", "status", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    table = subprocess.run(
        [SCHEDCTL, "--url", urls, "--timeout", "3", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert as_json.returncode == table.returncode
    return as_json.returncode, json.loads(as_json.stdout), table.stdout


def test_status_exits_1_while_a_node_is_down_and_0_when_it_is_back(
    nodes: list[NodeProcess],
) -> None:
    def all_well() -> bool | None:
        code, cluster, _ = status(nodes)
        counts = [n["partitions"] for n in cluster["nodes"]]  # type: ignore[attr-defined]
        return True if code == 0 and len(counts) == 3 and sum(counts) == 256 else None

    wait_for(all_well, 30, "a healthy cluster of three")
    code, cluster, table = status(nodes)
    assert cluster["ok"] is True and "leader: " in table
    assert all(n["partitions"] > 0 for n in cluster["nodes"])  # type: ignore[attr-defined]

    victim = next(n for n in nodes if n.node_id != cluster["leader"])
    victim.kill()
    try:
        code, cluster, table = status([n for n in nodes if n is not victim] + [victim])
        assert code == 1 and cluster["ok"] is False
        [down] = [n for n in cluster["nodes"] if n["node_id"] == victim.node_id]  # type: ignore[union-attr]
        assert down["reachable"] is False
        assert "unreachable" in table
    finally:
        victim.start()
        wait_ready([victim])
    wait_for(all_well, 30, "the cluster healthy again")
