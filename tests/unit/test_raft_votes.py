"""Issue 27: a node restarted with an empty data directory must not vote twice in a term
(raft/votes.py, raft/DESIGN.md "A node that lost its vote"), with real pysyncobj replicas
in-process, and the pysyncobj internals that rely on, pinned."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj import SyncObj, SyncObjConf

from schedd.raft import votes
from schedd.raft.replica import Replica
from schedd.store.apply import StateMachine
from schedd.store.db import Database
from tests.raftprobe import FakePeer

A, B = "127.0.0.2:1", "127.0.0.2:2"  # above 127.0.0.1:*: the fakes connect, not the replica


def halt(reason: str) -> None:
    raise AssertionError(reason)


class Started:
    """Replicas started by a test, stopped (and their stores closed) at its end."""

    def __init__(self) -> None:
        self.nodes: list[tuple[Replica, Database]] = []

    def start(self, data: Path, port: int, peers: list[str], **settings: Any) -> Replica:
        data.mkdir(parents=True, exist_ok=True)
        db = Database(data / "state.db")
        conf = SyncObjConf(
            journalFile=str(data / "raft.journal"),
            appendEntriesUseBatch=False,
            appendEntriesPeriod=0.05,
            **settings,
        )
        node = Replica(f"127.0.0.1:{port}", peers, conf, StateMachine(db), halt)
        self.nodes.append((node, db))
        return node

    def stop(self, node: Replica) -> None:
        for pair in [p for p in self.nodes if p[0] is node]:
            self.nodes.remove(pair)
            node.destroy_synchronous()
            pair[1].close()


@pytest.fixture
def started() -> Iterator[Started]:
    replicas = Started()
    try:
        yield replicas
    finally:
        for node, _ in list(replicas.nodes):
            replicas.stop(node)


def _connected_to_all(node: Replica) -> bool:
    """Whether `node` has a connection to every other member (pysyncobj's status)."""
    status = node.getStatus()
    links = [v for k, v in status.items() if k.startswith("partner_node_status_server_")]
    return len(links) == 2 and all(v == 2 for v in links)


def _wait_for(ready: Callable[[], bool], what: str, timeout_s: float = 15) -> float:
    start = time.monotonic()
    while not ready():
        assert time.monotonic() - start < timeout_s, what
        time.sleep(0.02)
    return time.monotonic() - start


@pytest.mark.slow  # 7-8 s alone: its no-vote checks each listen for a whole window
def test_a_node_restarted_empty_does_not_vote_again_in_a_term_it_voted_in(
    tmp_path: Path, started: Started, free_port: Callable[[], int]
) -> None:
    """The hole of issue 27, on a real replica whose two peers the test plays: it votes for A
    in term 4, loses its data directory and comes back; B asks for its vote in term 4. Before
    the fix it granted it (two leaders of term 4 possible); now it grants nothing until it has
    heard from both peers, and then only in a later term."""
    port, data = free_port(), tmp_path / "w"
    slow = {"raftMinTimeout": 30.0, "raftMaxTimeout": 31.0, "connectionTimeout": 40.0}
    node = started.start(data, port, [A, B], **slow)
    a, b = FakePeer(port, A), FakePeer(port, B)
    a.vote_request(3)  # both peers heard: it may vote from term 4 on (before the fix: for A in 3)
    b.vote_request(3)
    time.sleep(0.5)  # many ticks: the fence (term 3) is learned at the first after both
    a.vote_request(4)
    assert 4 in a.votes(2.0), "no vote for A in term 4"  # (before the fix: 3 too)
    a.close()
    b.close()

    started.stop(node)
    shutil.rmtree(data)  # a replaced disk
    node = started.start(data, port, [A, B], **slow)
    a, b = FakePeer(port, A), FakePeer(port, B)
    b.vote_request(4)
    assert b.votes(2.0) == [], "a second vote in term 4"
    assert node.is_vote_unsure()
    a.vote_request(4)  # A is heard too (term 4): the fence is term 4
    _wait_for(lambda: not node.is_vote_unsure(), "the fence was never learned")
    b.vote_request(4)
    assert b.votes(1.0) == [], "a vote in the fence's own term"
    b.vote_request(5)
    assert b.votes(2.0) == [5], "no vote in a term after the fence"
    a.close()
    b.close()


NO_OP = b"\x01"  # pysyncobj's no-op command: applies to nothing


def told_of_entry_10(data: Path, started: Started, port: int) -> tuple[Replica, FakePeer, FakePeer]:
    """A wiped replica whose peers the test plays: A, the old leader back from a partition,
    sends a heartbeat of term 5 naming commit index 10 (the replica lacks the entry before it,
    so it refuses the append). B has said nothing yet."""
    slow = {"raftMinTimeout": 30.0, "raftMaxTimeout": 31.0, "connectionTimeout": 40.0}
    node = started.start(data, port, [A, B], **slow)
    a, b = FakePeer(port, A), FakePeer(port, B)
    a.send({"type": "append_entries", "term": 5, "commit_index": 10, "prevLogIdx": 9,
            "prevLogTerm": 5, "entries": []})  # fmt: skip
    return node, a, b


@pytest.mark.slow  # about 4 s: its no-vote checks each listen for a whole window
def test_a_wiped_node_votes_only_once_its_log_holds_what_it_may_have_acknowledged(
    tmp_path: Path, started: Started, free_port: Callable[[], int]
) -> None:
    """Chaos seed 2333: A led and committed entry 10 with this node's former self, whose data
    was then lost; B never had entry 10. Before the fix, once the wiped node had heard both it
    voted for B (its own log empty), and B's term erased entry 10, applied on A. Now, until its
    log holds entry 10, it votes only for a candidate whose last entry is at least (5, 10)."""
    node, a, b = told_of_entry_10(tmp_path / "w", started, free_port())
    b.vote_request(6, last_index=9, last_term=5)  # both heard (before the fix: fence 6)
    assert b.votes(1.0) == [], "a vote in the term it learned both members in"
    b.vote_request(7, last_index=9, last_term=5)
    assert b.votes(2.0) == [], "voted for a candidate without entry 10, before holding it"
    assert node.is_vote_unsure()
    # A leads again (term 8, elected by B) and ships entries 2..10: now it holds entry 10.
    a.send({"type": "append_entries", "term": 8, "commit_index": 10, "prevLogIdx": 1,
            "prevLogTerm": 0, "entries": [(NO_OP, i, 5) for i in range(2, 11)]})  # fmt: skip
    _wait_for(lambda: not node.is_vote_unsure(), "the fence was never learned once caught up")
    assert node.commit_index() == 10
    b.vote_request(9, last_index=9, last_term=5)
    assert b.votes(1.0) == [], "a vote for a log without entry 10"
    a.vote_request(9, last_index=10, last_term=5)
    assert a.votes(2.0) == [9], "no vote for the candidate that holds entry 10"
    a.close()
    b.close()


def test_a_wiped_node_not_caught_up_votes_for_a_candidate_at_the_best_position_heard(
    tmp_path: Path, started: Started, free_port: Callable[[], int]
) -> None:
    """Chaos seed 2380: the wiped node had caught up to index 2177 when the leader was cut off;
    it had heard of 2180, and the other follower's vote request named 2180 as its last entry.
    A rule that waited for its own log to hold 2180 left the cluster without a leader for the
    whole partition; a candidate whose last entry is at least the best position heard of holds
    every entry the node's former self may have acknowledged, and gets its vote."""
    node, a, b = told_of_entry_10(tmp_path / "w", started, free_port())
    b.vote_request(6, last_index=10, last_term=5)  # both heard: the fence is term 6
    assert b.votes(1.0) == [], "a vote in the term it learned both members in"
    b.vote_request(7, last_index=10, last_term=5)
    assert b.votes(2.0) == [7], "no vote for a candidate holding every entry heard of"
    assert node.is_vote_unsure()  # its own log still lacks them: it stands for nothing
    a.vote_request(8, last_index=10, last_term=4)  # an older last term: not at the best
    assert a.votes(1.0) == []
    a.close()
    b.close()


def test_the_fence_survives_a_restart_before_it_is_learned(
    tmp_path: Path, started: Started, free_port: Callable[[], int]
) -> None:
    """A node that restarts while still unsure has a .meta by then (pysyncobj wrote the terms
    it heard): the marker keeps it unsure."""
    port, data = free_port(), tmp_path / "w"
    slow = {"raftMinTimeout": 30.0, "raftMaxTimeout": 31.0, "connectionTimeout": 40.0}
    node = started.start(data, port, [A, B], **slow)
    a = FakePeer(port, A)
    a.send({"type": "append_entries", "term": 7, "commit_index": 1})  # a term on disk
    _wait_for(lambda: node._getTerm() == 7, "the heartbeat's term was not taken")
    a.close()
    started.stop(node)
    assert (data / "raft.journal.meta").exists()
    assert (data / f"raft.journal{votes.UNSURE_SUFFIX}").exists()
    # What the next start decides (a restart itself trips over pysyncobj's unclosed .meta).
    assert votes.VoteFence(str(data / "raft.journal")).is_unsure
    (data / f"raft.journal{votes.UNSURE_SUFFIX}").unlink()
    assert not votes.VoteFence(str(data / "raft.journal")).is_unsure  # an old, sure journal


def test_a_new_cluster_elects_and_a_wiped_follower_votes_again_after_its_fence(
    tmp_path: Path, started: Started, free_port: Callable[[], int]
) -> None:
    """Three empty nodes (all unsure) still elect a leader; a follower that then loses its data
    comes back unsure, and once the leader is gone it must take part in the next election
    for the two survivors to have a leader at all."""
    ports = [free_port() for _ in range(3)]
    addresses = [f"127.0.0.1:{p}" for p in ports]
    quick = {"raftMinTimeout": 0.3, "raftMaxTimeout": 0.6, "connectionRetryTime": 1.0}  # as nodes

    def start(i: int) -> Replica:
        peers = [x for x in addresses if x != addresses[i]]
        return started.start(tmp_path / f"n{i}", ports[i], peers, **quick)

    nodes = [start(i) for i in range(3)]
    took = _wait_for(lambda: any(n.is_leader() for n in nodes), "a new cluster elected nobody")
    assert took < 5.0  # two election timeouts or so: each node hears the others' probes first
    # A follower turns sure when it hears the new term, a moment after the leader is elected.
    _wait_for(lambda: not any(n.is_vote_unsure() for n in nodes), "a node stayed unsure")
    leader = next(n for n in nodes if n.is_leader())
    wiped = next(i for i, n in enumerate(nodes) if n is not leader)
    started.stop(nodes[wiped])
    shutil.rmtree(tmp_path / f"n{wiped}")
    nodes[wiped] = start(wiped)
    assert nodes[wiped].is_vote_unsure()
    _wait_for(
        lambda: nodes[wiped].commit_index() >= leader.commit_index() > 1,
        "it never caught up",  # before that it votes in nothing (the test above)
    )
    started.stop(leader)
    survivors = [n for n in nodes if n is not leader]
    _wait_for(lambda: any(n.is_leader() for n in survivors), "the survivors elected nobody")
    assert not nodes[wiped].is_vote_unsure()


def test_a_single_node_that_lost_its_data_leads_at_once(
    tmp_path: Path, started: Started, free_port: Callable[[], int]
) -> None:
    """No other member to hear from: its fence is known at its first tick."""
    node = started.start(tmp_path / "solo", free_port(), [], raftMinTimeout=0.3, raftMaxTimeout=0.6)
    assert _wait_for(node.is_leader, "a single node never led") < 2.0
    assert not node.is_vote_unsure()


def test_the_pysyncobj_internals_the_fence_relies_on(
    tmp_path: Path, started: Started, free_port: Callable[[], int]
) -> None:
    """An upgrade of pysyncobj that renames or reshapes these must fail here, not in a cluster:
    the transport hands messages to the overriding handler, the private steps exist, and a
    vote request is refused with silence."""
    node = started.start(
        tmp_path / "w", free_port(), [A, B], raftMinTimeout=30.0, raftMaxTimeout=31.0,
        connectionTimeout=40.0,
    )  # fmt: skip
    transport = node._SyncObj__transport
    handler = transport._onMessageReceivedCallback
    assert handler.__func__ is Replica._SyncObj__onMessageReceived
    for name in ("_SyncObj__onMessageReceived", "_SyncObj__setCurrentTerm",
                 "_SyncObj__generateRaftTimeout", "_SyncObj__getCurrentLogIndex",
                 "_SyncObj__getCurrentLogTerm"):  # fmt: skip
        assert callable(getattr(SyncObj, name)), name
    assert isinstance(node._SyncObj__raftElectionDeadline, float)
    assert isinstance(node._SyncObj__raftCurrentTerm, int)
    assert {n.id for n in node._SyncObj__otherNodes} == {A, B}
    # The fence is stored as a vote for itself in its term: pysyncobj then refuses that term.
    node._votes.hear(A, 2)
    node._votes.hear(B, 3)
    _wait_for(lambda: not node.is_vote_unsure(), "the fence was not learned at a tick")
    assert node._SyncObj__raftCurrentTerm == 3
    assert node._SyncObj__votedForNodeId == node.selfNode.id
    assert node._SyncObj__raftLog.getVotedForNodeId() == node.selfNode.id


def test_a_hand_over_to_a_wiped_follower_still_moves_the_leadership(
    tmp_path: Path, started: Started, free_port: Callable[[], int]
) -> None:
    """A leader steps down (its clock distrusted, `Replica.step_down`) to its most caught-up
    follower, which may be a wiped one that hears no one but the leader: its probe, in a term
    above the leader's, makes the other follower answer, so it learns its fence and the
    leadership moves within a few election timeouts."""
    ports = [free_port() for _ in range(3)]
    addresses = [f"127.0.0.1:{p}" for p in ports]
    quick = {"raftMinTimeout": 0.3, "raftMaxTimeout": 0.6, "connectionRetryTime": 1.0}

    def start(i: int) -> Replica:
        peers = [x for x in addresses if x != addresses[i]]
        return started.start(tmp_path / f"n{i}", ports[i], peers, **quick)

    nodes = [start(i) for i in range(3)]
    _wait_for(lambda: any(n.is_leader() for n in nodes), "a new cluster elected nobody")
    leader = next(n for n in nodes if n.is_leader())
    wiped = next(i for i, n in enumerate(nodes) if n is not leader)
    started.stop(nodes[wiped])
    shutil.rmtree(tmp_path / f"n{wiped}")
    nodes[wiped] = start(wiped)
    _wait_for(
        lambda: (
            nodes[wiped].commit_index() >= leader.commit_index() > 0
            and nodes[wiped].leader_address() == leader.selfNode.id
        ),
        "the wiped follower never caught up",
    )
    # Connected to the other follower too: that link comes back 2-4 s after the restart here,
    # often after the catch-up. A probe sent before it is lost, and if the old leader then wins
    # again, the wiped node, hearing a leader, never probes and never hears the other follower
    # (CI of stop 40: the fence was not learned in 15 s).
    _wait_for(lambda: _connected_to_all(nodes[wiped]), "the wiped follower never reconnected")
    assert nodes[wiped].is_vote_unsure()
    leader.transferLeadership(node=addresses[wiped])
    _wait_for(lambda: not leader.is_leader(), "the leader never handed over", timeout_s=10)
    _wait_for(lambda: any(n.is_leader() for n in nodes), "nobody leads after", timeout_s=10)
    # The fence is settled on the wiped node's own tick thread: the new leader may be seen
    # (by the other follower winning) a tick before the wiped node has processed what it heard.
    _wait_for(
        lambda: not nodes[wiped].is_vote_unsure(), "the wiped follower never learned its fence"
    )
