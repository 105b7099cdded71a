"""Clock trust (schedd/dispatch/clock.py): the probe verdict, the jump check, and a dispatcher
that fires nothing while its clock is distrusted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from schedd.addresses import reachable_api_url
from schedd.dispatch.clock import (
    PROBE_EVERY_S,
    UNLISTED_PROBE_EVERY_S,
    ClockGuard,
    ClockProbe,
    PeerReading,
    is_trusted_by,
)
from schedd.errors import ClusterUnavailable
from schedd.peers import MEMBERS_NOT_HEARD, PeerReports
from schedd.raft.proposer import Proposer
from schedd.store.commands import NodeHeartbeat
from schedd.store.db import Database, connect
from tests.conftest import Applier
from tests.ports import free_ports
from tests.unit.test_dispatcher import Cluster, ms

MAX = 500


def agree(offset_ms: float = 10.0) -> PeerReading:
    return PeerReading(offset_ms, 5.0)


def off(offset_ms: float = -30_000.0) -> PeerReading:
    return PeerReading(offset_ms, 5.0)


@pytest.mark.parametrize(
    ("readings", "leader", "trusted"),
    [
        ({}, "n1", True),  # alone (or nobody answers): nothing contradicts this clock
        ({}, None, True),
        ({"n2": agree(), "n3": agree(-20)}, "n2", True),
        ({"n2": off(), "n3": off()}, "n1", False),  # even the leader yields to two peers
        ({"n2": off(), "n3": agree()}, "n2", True),  # 2 of 3 agree with this node
        ({"n2": off()}, "n2", False),  # a tie: the leader's clock decides
        ({"n2": off()}, "n1", True),
        ({"n2": off()}, None, False),  # a tie and no leader: do not fire by this clock
        ({"n2": off()}, "n3", False),  # a tie and the leader did not answer
        ({"n2": agree()}, "n3", True),
        ({"n2": off(+30_000), "n3": off(+29_000)}, "n2", False),  # behind, not ahead
    ],
)
def test_verdict_of_a_probe_round(
    readings: dict[str, PeerReading], leader: str | None, trusted: bool
) -> None:
    assert is_trusted_by("n1", readings, leader, MAX) is trusted


def test_a_reading_disagrees_only_beyond_its_error() -> None:
    # 800 ms off, but the round trip leaves +-400 ms of doubt: not proof of disagreement
    doubtful = {"n2": PeerReading(800.0, 400.0), "n3": PeerReading(800.0, 400.0)}
    assert is_trusted_by("n1", doubtful, "n2", MAX)
    certain = {"n2": PeerReading(800.0, 100.0), "n3": PeerReading(800.0, 100.0)}
    assert not is_trusted_by("n1", certain, "n2", MAX)


class FakeClocks:
    def __init__(self) -> None:
        self.wall = 1_000_000.0
        self.mono = 50.0

    def advance(self, ms: float) -> None:
        self.wall += ms
        self.mono += ms

    def guard(self) -> ClockGuard:
        return ClockGuard(MAX, wall_ms=lambda: self.wall, monotonic_ms=lambda: self.mono)


def test_a_jump_distrusts_at_once_and_only_a_later_round_forgives_it() -> None:
    clocks = FakeClocks()
    guard = clocks.guard()
    woken: list[bool] = []
    guard.on_jump = lambda: woken.append(True)
    clocks.advance(1_000)
    assert guard.is_trusted()
    round_before = guard.probe_started()
    clocks.advance(100)
    clocks.wall += 30_000  # an NTP step forward
    assert not guard.is_trusted()
    assert woken == [True]
    assert "jumped +30.000s" in guard.reason
    guard.record_round(round_before, {"n2": agree()}, trusted=True)
    assert not guard.is_trusted()  # that round began before the jump: it proves nothing
    clocks.advance(100)
    round_after = guard.probe_started()
    guard.record_round(round_after, {"n2": off(), "n3": off()}, trusted=False)
    assert not guard.is_trusted()
    assert "disagrees with the cluster" in guard.reason
    clocks.wall -= 30_000  # corrected: a jump back, and peers agree again
    clocks.advance(100)
    assert not guard.is_trusted()
    guard.record_round(guard.probe_started(), {"n2": agree(), "n3": agree()}, trusted=True)
    assert guard.is_trusted()
    assert guard.offset_ms == 10.0


def test_slow_drift_is_not_a_jump_but_a_probe_catches_it() -> None:
    clocks = FakeClocks()
    guard = clocks.guard()
    for _ in range(100):  # 100 ms of drift per step, 10 s in all, never one big step
        clocks.advance(1_000)
        clocks.wall += 100
        assert guard.is_trusted()
    guard.record_round(guard.probe_started(), {"n2": off(-10_000), "n3": off(-10_000)}, False)
    assert not guard.is_trusted()


def test_a_thread_paused_between_its_two_readings_is_not_a_jump() -> None:
    wall, mono = [1_000_000.0], [0.0]

    def slow_mono() -> float:  # each reading 300 ms after the last: the pair is not tight
        mono[0] += 300
        return mono[0]

    guard = ClockGuard(MAX, wall_ms=lambda: wall[0], monotonic_ms=slow_mono)
    wall[0] += 5_000
    assert guard.is_trusted()


def test_reachable_api_url_replaces_a_wildcard_host_with_the_raft_host() -> None:
    assert reachable_api_url("http://10.0.0.2:8701", "10.0.0.2:9701") == "http://10.0.0.2:8701"
    assert reachable_api_url("http://0.0.0.0:8701", "10.0.0.2:9701") == "http://10.0.0.2:8701"
    assert reachable_api_url("http://[::]:8701", "[fd00::2]:9701") == "http://[fd00::2]:8701"


def test_dispatcher_fires_nothing_while_the_clock_is_distrusted(
    apply: Applier, db: Database
) -> None:
    cluster = Cluster(apply, db)
    trusted = [False]
    cluster.dispatcher._is_clock_trusted = lambda: trusted[0]
    start = ms("2026-06-01T00:00:00Z")
    cluster.now = start
    cluster.add_job("job_a", {"schedule": {"run_at": "2026-06-01T00:00:05Z"}}, start)
    cluster.run_until(start + 20_000)
    assert cluster.runs("job_a") == []
    trusted[0] = True
    cluster.run_until(start + 22_000)
    assert cluster.runs("job_a") == [("2026-06-01T00:00:05Z", "dispatched")]


def test_a_proposer_whose_clock_is_distrusted_refuses_before_sending() -> None:
    sent: list[bytes] = []

    class Replica:
        def apply_entry(self, blob: bytes, *, callback: Any) -> None:
            sent.append(blob)

    proposer = Proposer(Replica(), timeout_s=1, refusal=lambda: "wall clock jumped +30.000s")
    with pytest.raises(ClusterUnavailable, match="clock jumped"):
        asyncio.run(proposer.propose(NodeHeartbeat(node_id="n1", ttl_ms=2000)))
    assert sent == []


def test_the_probe_lists_the_members_only_once_its_store_lists_this_node(
    tmp_path: Path,
) -> None:
    """An upgrade chaos round (seed 2370): a node wiped and restarted on new code probed with
    an empty store, took the empty list for the members, found none lagging and let add_jobs
    through to two old members, which halted. Until the store lists this node, every level
    above 1 waits, and the probe looks again soon."""
    db = Database(tmp_path / "state.db")
    peers = PeerReports("n1")
    probe = ClockProbe(
        "n1", ClockGuard(500), lambda: connect(db.path, readonly=True), lambda: None, lambda: None,
        peers=peers,
    )  # fmt: skip
    closed = free_ports(3)  # nobody listens: the peers do not answer, as if old or down

    def register(node_id: str, i: int) -> None:
        db.conn.execute(
            "INSERT INTO nodes (node_id, api, raft, registered_at_ms) VALUES (?, ?, ?, 0)",
            (node_id, f"http://127.0.0.1:{closed[i]}", f"127.0.0.1:{9701 + i}"),
        )

    try:
        assert probe.tick(0) == UNLISTED_PROBE_EVERY_S
        assert peers.lagging(5) == [MEMBERS_NOT_HEARD] and not peers.members_known()
        register("n2", 1)
        register("n3", 2)
        assert probe.tick(0) == UNLISTED_PROBE_EVERY_S  # a store restored up to before n1 came
        assert peers.lagging(5) == [MEMBERS_NOT_HEARD]
        register("n1", 0)
        assert probe.tick(0) == PROBE_EVERY_S
        assert peers.members_known()
        assert peers.lagging(5) == ["n2", "n3"]  # listed, and not heard from: they may be old
    finally:
        probe.stop(timeout_s=1)
        db.close()
