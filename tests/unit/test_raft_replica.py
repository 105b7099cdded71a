"""pysyncobj behaviour schedd relies on, pinned with a real single-node replica in-process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj import SyncObjConf

from schedd.raft.proposer import Proposer
from schedd.raft.replica import Replica
from schedd.store.apply import StateMachine
from schedd.store.db import Database


def halt(reason: str) -> None:
    raise AssertionError(reason)


def start(
    db: Database, port: int, *, peers: tuple[str, ...] = (), lead: bool = True, **settings: Any
) -> Replica:
    """A replica on `db` with short timeouts; alone (`lead`), wait until it leads."""
    conf = SyncObjConf(
        journalFile=str(db.path.with_name("raft.journal")),
        appendEntriesUseBatch=False,
        raftMinTimeout=0.3,
        raftMaxTimeout=0.6,
        appendEntriesPeriod=0.05,
        **settings,
    )
    node = Replica(f"127.0.0.1:{port}", list(peers), conf, StateMachine(db), halt)
    deadline = time.monotonic() + 10
    while lead and node.leader_address() is None:
        assert time.monotonic() < deadline, "a single node never became leader"
        time.sleep(0.02)
    return node


@pytest.fixture
def replica(tmp_path: Path, free_port: Callable[[], int]) -> Iterator[Replica]:
    db = Database(tmp_path / "state.db")
    node = start(db, free_port())
    try:
        yield node
    finally:
        node.destroy_synchronous()
        db.close()


def test_apply_index_is_last_applied_plus_one(replica: Replica) -> None:
    proposer = Proposer(replica, timeout_s=5)

    async def register(node_id: str) -> None:
        body = {"node_id": node_id, "api": "http://x", "raft": "y"}
        result = await proposer.propose("register_node", body)
        assert result["status"] == "ok"

    db: Database = replica._state_machine.db
    for node_id in ("a", "b"):
        asyncio.run(register(node_id))
        # The callback may run before pysyncobj bumps its counter: let the tick finish. Once
        # settled, the index schedd stored for the entry must be pysyncobj's own.
        settle_by = time.monotonic() + 2
        while replica.raftLastApplied < db.applied_index and time.monotonic() < settle_by:
            time.sleep(0.005)
        assert db.applied_index == replica.raftLastApplied
    rows = db.conn.execute("SELECT node_id FROM nodes ORDER BY node_id").fetchall()
    assert rows == [("a",), ("b",)]


def test_result_reaches_the_proposer(replica: Replica) -> None:
    proposer = Proposer(replica, timeout_s=5)
    result = asyncio.run(proposer.propose("update_tenant", {"tenant_id": "nope", "changes": {}}))
    assert result == {
        "status": "rejected",
        "code": "tenant_not_found",
        "message": "no tenant with id 'nope'",
    }


def test_a_follower_postpones_its_election_after_a_long_stall(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    """Issue 14: a snapshot install holds the tick thread for seconds; the election timer, which
    ran out meanwhile, starts afresh (pysyncobj's private names, pinned here)."""
    db = Database(tmp_path / "state.db")
    peer = f"127.0.0.1:{free_port()}"  # never answers: this node stays a follower
    # no tick thread: nothing else touches the timer
    node = start(db, free_port(), peers=(peer,), lead=False, autoTick=False)
    try:
        node._SyncObj__raftElectionDeadline = time.monotonic() - 5  # a 5 s stall just ended
        node.postpone_election()
        left = node._SyncObj__raftElectionDeadline - time.monotonic()
        assert 0.25 <= left <= 0.6
    finally:
        node.destroy()  # no tick thread to join
        db.close()


def test_a_journal_past_its_cap_compacts_without_waiting_for_its_time_slot(
    tmp_path: Path, free_port: Callable[[], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14: with logCompactionSplit a forced compaction would wait for this node's slot
    (up to compaction_min_time away); past the journal's byte cap it starts at once."""
    from schedd.raft import journal
    from schedd.raft.snapshots import SnapshotHooks

    monkeypatch.setattr(journal, "MAX_JOURNAL_BYTES", 200_000)
    db = Database(tmp_path / "state.db")
    hooks = SnapshotHooks(db, tmp_path / "raft.snapshot")
    node = start(
        db,
        free_port(),
        fullDumpFile=str(tmp_path / "raft.snapshot"),
        serializer=hooks.serialize,
        deserializer=hooks.deserialize,
        serializeChecker=hooks.check,
        logCompactionMinEntries=10**6,  # neither count nor time would compact in this test
        logCompactionMinTime=3600,
        logCompactionSplit=True,
    )
    try:
        proposer = Proposer(node, timeout_s=5)

        async def fill() -> None:
            for i in range(40):  # about 400 KB of entries: twice the cap
                body = {"node_id": f"n{i}", "api": "http://x/" + "a" * 10_000, "raft": "y"}
                assert (await proposer.propose("register_node", body))["status"] == "ok"

        asyncio.run(fill())
        deadline = time.monotonic() + 15
        while not (tmp_path / "raft.snapshot").exists() or len(node._SyncObj__raftLog) > 20:
            assert time.monotonic() < deadline, "the journal was not compacted"
            time.sleep(0.05)
    finally:
        node.destroy_synchronous()
        db.close()
