"""Retention on three real nodes (issue 14): every replica prunes the same rows (equal digests),
and a node wiped and restored from a snapshot while pruning goes on converges too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_replication import leader_of, tenant_token, wait_converged
from tests.servers import NodeProcess, http, make_nodes, running, wait_for, wait_ready

pytestmark = pytest.mark.cluster
RETENTION = '[retention]\nruns = "2s"\naudit = "3s"\ndeadletters = "2s"\nmessages = "2s"\n'
RAFT = 'compaction_min_entries = 50\ncompaction_min_time = "1s"\n'
NOW_JOB = {"schedule": {"delay": "0s"}, "target": {"type": "queue", "name": "q"}}


def create_now_jobs(node: NodeProcess, token: str, count: int) -> None:
    for _ in range(count):
        status, body, _ = http("POST", f"{node.url}/v1/jobs", NOW_JOB, token=token)
        assert status == 201, body


def kept(node: NodeProcess) -> dict[str, int]:
    status, answer, _ = http("GET", f"{node.url}/v1/admin/retention")
    assert status == 200, answer
    return {k["kind"]: k["rows"] for k in answer["kinds"]}


def all_pruned(nodes: list[NodeProcess]) -> bool | None:
    """Every node holds no run, job, message, dead letter or audit row any more."""
    counts: list[dict[str, Any]] = [kept(n) for n in nodes]
    return all(not any(c.values()) for c in counts) or None


def test_pruning_leaves_every_replica_with_the_same_state(tmp_path: Path) -> None:
    nodes = make_nodes(tmp_path, 3, raft_extra=RAFT, extra_sections=RETENTION)
    with running(nodes):
        token = tenant_token(nodes[0])
        create_now_jobs(nodes[1], token, 40)  # their messages go unreceived: dead letters
        wait_for(lambda: all_pruned(nodes), 60, "every kind pruned on every node")
        wait_converged(nodes)
        # A node that lost its disk catches up from a snapshot while pruning goes on.
        wiped = next(n for n in nodes if n is not leader_of(nodes))
        wiped.stop()
        for path in wiped.data_dir.iterdir():
            path.unlink()
        create_now_jobs(leader_of(nodes), token, 80)
        wiped.start()
        wait_ready(nodes)
        wait_for(lambda: all_pruned(nodes), 60, "every kind pruned again")
        wait_converged(nodes, timeout_s=60)
