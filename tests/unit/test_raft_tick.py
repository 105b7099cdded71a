"""The Raft tick's poll wait (raft/replica.py Replica._tick_wait): pysyncobj's 5 ms while the
log moves and IDLE_AFTER_S after, IDLE_TICK_S once it stands still, so an idle node costs a
fraction of the CPU; and at once fast again when an entry comes."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from pysyncobj import SyncObjConf

from schedd.raft.replica import IDLE_AFTER_S, IDLE_TICK_S, Replica
from schedd.store.apply import StateMachine
from schedd.store.command import Command, encode
from schedd.store.db import Database

BUSY_S = 0.005  # node.raft_conf's autoTickPeriod


class Log(SimpleNamespace):
    """What _tick_wait reads of pysyncobj, with its private names."""

    def __init__(self) -> None:
        super().__init__(
            _moved=(), _busy_until=0.0, _is_held=False, _SyncObj__raftCommitIndex=1,
            _SyncObj__raftLastApplied=1, _SyncObj__raftCurrentTerm=1, _SyncObj__raftState=2,
        )  # fmt: skip
        self.last_index = 1

    def _SyncObj__getCurrentLogIndex(self) -> int:  # pysyncobj's name
        return self.last_index


def test_the_wait_is_long_only_after_the_log_stood_still(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])  # the module Replica reads
    log = Log()

    def wait() -> float:
        return float(Replica._tick_wait(log, BUSY_S))  # type: ignore[arg-type]

    assert wait() == BUSY_S  # the first tick: something moved (nothing was seen before)
    now[0] += IDLE_AFTER_S - 0.01
    assert wait() == BUSY_S
    now[0] += 0.02
    assert wait() == IDLE_TICK_S
    for field in ("last_index", "_SyncObj__raftCommitIndex", "_SyncObj__raftLastApplied",
                  "_SyncObj__raftCurrentTerm", "_SyncObj__raftState"):  # fmt: skip
        setattr(log, field, getattr(log, field) + 1)
        assert wait() == BUSY_S, field
        now[0] += IDLE_AFTER_S + 0.01
        assert wait() == IDLE_TICK_S, field
    log._is_held = True  # a snapshot's copy runs: its end is seen at the next tick
    now[0] += 10
    assert wait() == BUSY_S
    assert Replica._tick_wait(log, 0.2) == 0.2  # type: ignore[arg-type]  # never shorter


@pytest.fixture
def solo(tmp_path: Path, free_port: Callable[[], int]) -> Iterator[tuple[Replica, list[float]]]:
    """One replica alone (no peer wakes its poll): leader, and the times of its ticks."""
    db = Database(tmp_path / "state.db")
    conf = SyncObjConf(
        journalFile=str(tmp_path / "raft.journal"),
        appendEntriesUseBatch=False,
        autoTickPeriod=BUSY_S,
        appendEntriesPeriod=0.05,
        raftMinTimeout=0.3,
        raftMaxTimeout=0.6,
    )
    node = Replica(f"127.0.0.1:{free_port()}", [], conf, StateMachine(db), _halt)
    ticks: list[float] = []
    node.addOnTickCallback(lambda: ticks.append(time.monotonic()))
    try:
        deadline = time.monotonic() + 10
        while not node.is_leader():
            assert time.monotonic() < deadline, "a single replica never led"
            time.sleep(0.02)
        yield node, ticks
    finally:
        node.destroy_synchronous()
        db.close()


def _halt(reason: str) -> None:
    raise AssertionError(reason)


def _gaps(ticks: list[float], start: float, end: float) -> list[float]:
    inside = [t for t in ticks if start <= t <= end]
    return [b - a for a, b in itertools.pairwise(inside)]


def test_an_idle_replica_ticks_slowly_and_an_entry_makes_it_tick_fast_at_once(
    solo: tuple[Replica, list[float]],
) -> None:
    node, ticks = solo
    time.sleep(IDLE_AFTER_S + 0.6)  # a measured stretch of standing still, not a readiness wait
    now = time.monotonic()
    idle = _gaps(ticks, now - 0.5, now)
    assert statistics.median(idle) >= IDLE_TICK_S * 0.9, idle

    applied = threading.Event()
    proposed = time.monotonic()
    blob = encode(Command(type="barrier", id="tick-1", ts_ms=1, body={}))
    node.apply_entry(blob, callback=lambda result, error: applied.set())
    assert applied.wait(5), "the entry was not applied"
    took = time.monotonic() - proposed
    assert took < IDLE_TICK_S, f"an entry on an idle replica waited {took * 1000:.0f} ms"
    time.sleep(IDLE_AFTER_S / 2)  # a measured stretch after the entry
    busy = _gaps(ticks, proposed, proposed + IDLE_AFTER_S / 2)
    assert statistics.median(busy) < IDLE_TICK_S / 2, busy
