"""A lagging follower receives and installs the leader's snapshot (issue 14), with three Raft
replicas in this process: a snapshot that takes longer to ship than the connection timeout."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from schedd.raft.proposer import Proposer
from schedd.store.commands import RegisterNode
from schedd.store.db import connect
from schedd.store.snapshot import SnapshotError, read_snapshot
from tests.replicas import Member, leader_of, pad, two_of_three, write_configs
from tests.servers import wait_for

CONNECTION_TIMEOUT_S = 2.0
CHUNK_EVERY_S = 0.025  # 64 KiB chunks: 2.6 MB/s
# Short elections (as raft_conf sets them for 300-600 ms), and a connection timeout the
# shipping outlasts.
SETTINGS = {
    "raftMinTimeout": 0.3,
    "raftMaxTimeout": 0.6,
    "appendEntriesPeriod": 0.075,
    "leaderFallbackTimeout": 1.2,
    "connectionTimeout": CONNECTION_TIMEOUT_S,
}


def _throttle_shipping(member: Member) -> None:
    """Each snapshot chunk from this member takes CHUNK_EVERY_S to prepare (a slow link or a
    busy leader), whatever this machine's speed."""
    serializer = member.replica._SyncObj__serializer
    send = serializer.getTransmissionData

    def throttled(node: object) -> object:
        time.sleep(CHUNK_EVERY_S)
        return send(node)

    serializer.getTransmissionData = throttled


def _snapshot_index(member: Member) -> int:
    try:
        return read_snapshot(member.db.path.with_name("raft.snapshot"))[0]
    except (SnapshotError, OSError):
        return 0


def _count(member: Member, sql: str) -> int:
    """Through a reader of its own: the writer connection belongs to the replica's apply."""
    conn = connect(member.db.path, readonly=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


# pysyncobj drops a shipped snapshot's file object without closing it (CPython closes it).
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in.*raft.snapshot:pytest.PytestUnraisableExceptionWarning"
)
@pytest.mark.slow
def test_a_snapshot_that_ships_for_longer_than_the_connection_timeout_is_installed(
    tmp_path: Path,
) -> None:
    """pysyncobj's follower said nothing until the last chunk, so the leader dropped the
    connection after connectionTimeout and started the snapshot over, forever."""
    paths = write_configs(tmp_path)
    pad(tmp_path / "n1" / "state.db", 8)  # 128 chunks: about 3.2 s to ship
    (tmp_path / "n2").mkdir(exist_ok=True)
    shutil.copy(tmp_path / "n1" / "state.db", tmp_path / "n2" / "state.db")
    members = two_of_three(paths, **SETTINGS)
    try:
        leader = wait_for(lambda: leader_of(members), 15, "a leader")
        for member in members:
            _throttle_shipping(member)
        body = RegisterNode(node_id="n9", api="http://x", raft="y")
        asyncio.run(Proposer(leader.replica, timeout_s=10).propose(body))  # a rejection raises
        for member in members:
            member.replica.compact_soon()
        index = wait_for(lambda: _snapshot_index(leader), 30, "the leader's snapshot")

        started = time.monotonic()
        third = Member(paths[2], **SETTINGS)
        members.append(third)
        wait_for(lambda: third.db.applied_index >= index, 60, "the snapshot installed")
        assert time.monotonic() - started > CONNECTION_TIMEOUT_S  # the case under test
        padding = "SELECT count(*) FROM padding"
        assert _count(third, padding) == _count(leader, padding) == 128
        assert _count(third, "SELECT count(*) FROM nodes WHERE node_id = 'n9'") == 1
        assert not any(m.halted for m in members)
    finally:
        for member in members:
            member.stop()
