"""schedd/raft/journal.py: Raft's term, vote and log reach the disk before pysyncobj acts on them.

A real single-node replica in-process, with os.fsync and pysyncobj's mmap flush recorded.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj import SyncObjConf
from pysyncobj.journal import FileJournal
from pysyncobj.transport import TCPTransport

from schedd.raft import journal
from schedd.raft.proposer import Proposer
from schedd.raft.replica import Replica
from schedd.store.apply import StateMachine
from schedd.store.commands import RegisterNode
from schedd.store.db import Database
from schedd.store.results import Done

Events = list[tuple[str, Any]]


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Events:
    """What reached the disk, in order: ("fsync", path), ("sync", None) (the journal's
    data), ("add", index). The journal's data sync is os.fdatasync of its file (mmap.flush
    would hold the GIL): recorded as "sync" when it names the journal."""
    seen: Events = []
    real_fsync, real_fdatasync, real_add = os.fsync, os.fdatasync, FileJournal.add

    def fsync(fd: int) -> None:
        seen.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        seen.append(("sync", None) if path.endswith("raft.journal") else ("fdatasync", path))
        real_fdatasync(fd)

    def add(self: FileJournal, command: bytes, idx: int, term: int) -> None:
        seen.append(("add", idx))
        real_add(self, command, idx, term)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(FileJournal, "add", add)
    return seen


@pytest.fixture
def replica(
    tmp_path: Path, free_port: Callable[[], int], events: Events
) -> Iterator[tuple[Replica, StateMachine]]:
    db = Database(tmp_path / "state.db")
    machine = StateMachine(db)
    conf = SyncObjConf(
        journalFile=str(tmp_path / "raft.journal"),
        appendEntriesUseBatch=False,
        raftMinTimeout=0.3,
        raftMaxTimeout=0.6,
        appendEntriesPeriod=0.05,
    )

    def halt(reason: str) -> None:
        raise AssertionError(reason)

    node = Replica(f"127.0.0.1:{free_port()}", [], conf, machine, halt)
    try:
        deadline = time.monotonic() + 10
        while node.leader_address() is None:
            assert time.monotonic() < deadline, "a single node never became leader"
            time.sleep(0.02)
        yield node, machine
    finally:
        node.destroy_synchronous()
        db.close()


def test_a_new_term_and_vote_are_fsynced_with_their_directory(
    replica: tuple[Replica, StateMachine], events: Events, tmp_path: Path
) -> None:
    fsynced = [path for kind, path in events if kind == "fsync"]
    meta = str(tmp_path / "raft.journal.meta")
    # A new node first marks itself unsure of its vote (raft/votes.py), file and name.
    assert fsynced[:2] == [str(tmp_path / "raft.journal.unsure"), str(tmp_path)]
    # The new journal's name is made durable next; then the vote is written to a temporary
    # file, fsynced, renamed, and the rename fsynced.
    assert fsynced[2:5] == [str(tmp_path), meta + ".tmp", str(tmp_path)]
    node, _ = replica
    assert node.raftCurrentTerm >= 1
    # The private names journal.py reaches for (pysyncobj 0.3.17): a rename must fail here.
    assert isinstance(node._SyncObj__raftLog, journal.DurableJournal)
    assert isinstance(node._SyncObj__transport, journal.JournalSyncedTransport)
    assert isinstance(node._SyncObj__raftLog._FileJournal__metaStorer, journal.DurableMetaStorer)


def test_an_entry_is_on_disk_before_it_is_applied(
    replica: tuple[Replica, StateMachine], events: Events
) -> None:
    node, machine = replica
    applied: list[int] = []
    real_apply = machine.apply

    def apply(blob: bytes, *, index: int) -> dict[str, Any]:
        events.append(("apply", index))
        applied.append(index)
        return real_apply(blob, index=index)

    machine.apply = apply  # type: ignore[method-assign]
    body = RegisterNode(node_id="a", api="http://x", raft="y")
    assert asyncio.run(Proposer(node, timeout_s=5).propose(body)) == Done()
    index = applied[-1]
    added, applied_at = events.index(("add", index)), events.index(("apply", index))
    assert ("sync", None) in events[added:applied_at]


def test_meta_store_fsyncs_the_file_and_the_rename(tmp_path: Path, events: Events) -> None:
    path = tmp_path / "j.meta"
    journal.DurableMetaStorer(str(path)).storeMeta({"currentTerm": 7, "votedForNodeId": "n2"})
    assert [p for kind, p in events if kind == "fsync"] == [f"{path}.tmp", str(tmp_path)]
    assert not Path(f"{path}.tmp").exists()


class FakeSyncObj:
    """Just enough of a SyncObj for the transport's send: the journal attribute."""

    def __init__(self, raft_log: journal.DurableJournal) -> None:
        self._SyncObj__raftLog = raft_log


@pytest.fixture
def transport(
    tmp_path: Path, events: Events, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[journal.JournalSyncedTransport, journal.DurableJournal]]:
    def send(self: TCPTransport, node: object, message: dict[str, Any]) -> bool:
        events.append(("send", message["type"]))
        return True

    monkeypatch.setattr(TCPTransport, "send", send)
    raft_log = journal.DurableJournal(str(tmp_path / "raft.journal"))
    synced = object.__new__(journal.JournalSyncedTransport)  # no sockets: only send is used
    synced._syncObj = FakeSyncObj(raft_log)
    try:
        yield synced, raft_log
    finally:
        raft_log._destroy()


def test_an_ack_leaves_only_after_the_journal_is_synced(
    transport: tuple[journal.JournalSyncedTransport, journal.DurableJournal], events: Events
) -> None:
    synced, raft_log = transport
    raft_log.add(b"cmd", 1, 1)
    synced.send(object(), {"type": "next_node_idx"})
    synced.send(object(), {"type": "next_node_idx"})  # nothing new: no second sync
    assert events[-3:] == [("sync", None), ("send", "next_node_idx"), ("send", "next_node_idx")]


def test_a_leader_sends_its_entries_then_syncs_them(
    transport: tuple[journal.JournalSyncedTransport, journal.DurableJournal], events: Events
) -> None:
    synced, raft_log = transport
    raft_log.add(b"cmd", 1, 1)
    synced.send(object(), {"type": "append_entries"})
    assert events[-2:] == [("send", "append_entries"), ("sync", None)]
    raft_log.add(b"cmd", 2, 1)
    raft_log.setRaftCommitIndex(2)  # a leader alone commits without sending anything
    assert events[-1] == ("sync", None)


def test_a_journal_past_its_byte_cap_asks_for_compaction_and_shrinks_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14: memory at 1,000,000 jobs. The entries since the last compaction stay in memory
    and in the mapped file: a cap on their bytes compacts early, and the file, which only grew,
    is cut back after the compaction's rewrite."""
    monkeypatch.setattr(journal, "MAX_JOURNAL_BYTES", 2 * 1024 * 1024)
    path = tmp_path / "raft.journal"
    raft_log = journal.DurableJournal(str(path))
    asked: list[int] = []
    raft_log.on_full = lambda: asked.append(len(raft_log))
    entry = b"x" * 10_000
    for idx in range(1, 601):  # about 6 MB of entries
        raft_log.add(entry, idx, 1)
    assert asked and asked[0] == 2 * 1024 * 1024 // (10_000 + 24) + 1  # first past the cap
    grown = path.stat().st_size
    assert grown >= 6_000_000
    raft_log.deleteEntriesTo(598)  # a compaction keeps the last two entries
    assert [e[1] for e in raft_log] == [599, 600] and raft_log.bytes_held == 2 * 10_024
    assert path.stat().st_size <= journal.MIN_MAPPING_BYTES < grown
    raft_log.add(b"after", 601, 1)  # writing goes on in the smaller file
    raft_log.sync()
    raft_log._destroy()
    reopened = journal.DurableJournal(str(path))
    assert [(e[1], len(e[0])) for e in reopened] == [(599, 10_000), (600, 10_000), (601, 5)]
    reopened._destroy()
