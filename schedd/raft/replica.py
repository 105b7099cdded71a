"""The replicated object: pysyncobj's SyncObj with one entry point that applies our commands.

pysyncobj numbers @replicated methods by sorted name, so there is exactly one, forever.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pysyncobj import SyncObj, SyncObjConf, replicated

from schedd.errors import CorruptLog
from schedd.raft import answers, journal, votes, wire
from schedd.store.apply import StateMachine

log = logging.getLogger(__name__)
# pysyncobj's tick steps that must wait while a snapshot's copy runs (its private names).
HELD_STEPS = ("_SyncObj__applyLogEntries", "_SyncObj__tryLogCompaction")
# How often a follower receiving a snapshot tells the leader it is alive (under the connection
# timeout, 5 s in node.raft_conf, with room to spare).
SNAPSHOT_ACK_EVERY_S = 1.0
# How long the tick thread sleeps in poll when nothing has moved for IDLE_AFTER_S (no entry
# appended, committed or applied, no term or role change, no snapshot copy): a message or a
# proposal wakes poll at once whatever the wait, so only timers (heartbeats every 100 ms,
# elections after 1 s or more) see it, and an idle node ticks 20 times a second, not 200.
IDLE_TICK_S = 0.05
IDLE_AFTER_S = 0.2


class Restores(Protocol):
    """A snapshot restore that may still be copying (raft/snapshots.py's SnapshotHooks)."""

    def settled(self) -> bool: ...

    def wait_restored(self) -> None: ...


def _apply_nothing() -> bool:
    return False  # pysyncobj's "append entries now?" answer


def _compact_nothing() -> None:
    return None


class Replica(SyncObj):  # type: ignore[misc]  # pysyncobj ships no types
    """A node's Raft replica; `halt` is called when an entry cannot be applied at all."""

    _SyncObj__raftElectionDeadline: float  # pysyncobj's, set here while the vote is unsure

    def __init__(
        self,
        self_address: str,
        peers: list[str],
        conf: SyncObjConf,
        state_machine: StateMachine,
        halt: Callable[[str], None],
        restores: Restores | None = None,
    ) -> None:
        # State must be ready before SyncObj.__init__: it starts replaying almost at once.
        self._state_machine = state_machine
        self._halt = halt
        self._restores = restores
        self._is_held = False
        self._next_snapshot_ack = 0.0
        self._is_step_down_asked = False
        self._is_compaction_asked = False  # compact_soon(): honoured whatever the journal holds
        self._is_full_asked = False  # the journal passed its cap
        # Before SyncObj.__init__: its tick thread may hear from peers at once.
        self._votes = votes.VoteFence(conf.journalFile)
        self._led_term = -1  # the last term this node logged as its leader's
        self._moved: tuple[Any, ...] = ()  # what the last tick saw of the log (_tick_wait)
        self._busy_until = 0.0
        wire.install()  # bounded frames on every Raft connection
        journal.install()  # term, vote and appends on disk before pysyncobj acts on them
        super().__init__(self_address, peers, conf, transportClass=journal.JournalSyncedTransport)
        raft_log = getattr(self, "_SyncObj__raftLog", None)
        if isinstance(raft_log, journal.DurableJournal):
            raft_log.on_full = self._compact_full_journal  # a big journal compacts at once

    @replicated  # type: ignore[untyped-decorator]
    def apply_entry(self, blob: bytes) -> answers.Answer:
        """Apply one committed command (the only replicated method: never rename it)."""
        # Inside apply, pysyncobj's last-applied counter is one behind this entry's index
        # (pinned by tests/unit/test_raft_replica.py).
        index = self.raftLastApplied + 1
        if not self._is_restore_settled():  # _onTick holds apply during a copy: never expected
            log.error("entry %d came to apply while a snapshot was restoring: waiting", index)
            self._wait_restored()
        try:
            return answers.Answer(blob, self._state_machine.apply(blob, index=index))
        except (CorruptLog, sqlite3.DatabaseError) as exc:
            # Retrying would wedge every tick and applying past it would diverge: stop loudly.
            self._halt(f"cannot apply log entry {index}: {exc}")
            raise

    def leader_address(self) -> str | None:
        """The leader this node last heard of (may be stale: never use it as a lock)."""
        leader = self._getLeader()
        return None if leader is None else str(leader.id)

    def members(self) -> list[str]:
        """Raft addresses of every member, this node included, as this node knows them."""
        return sorted([self.selfNode.address, *(node.address for node in self.otherNodes)])

    def commit_index(self) -> int:
        """The highest log index this node knows to be committed."""
        return int(self.raftCommitIndex)

    def step_down(self) -> None:
        """Ask (from any thread) that leadership pass to the most caught-up connected follower;
        done on pysyncobj's own thread at its next tick, best effort (a follower that lags is
        refused: ask again later)."""
        self._is_step_down_asked = True

    def compact_soon(self) -> None:
        """Compact at the next tick, whatever the time slot and the journal's size (any
        thread)."""
        self._is_compaction_asked = True

    def _compact_full_journal(self) -> None:
        """The journal passed its byte cap (tick thread, from an append): compact at once,
        unless a compaction under way has made room by the next tick."""
        self._is_full_asked = True

    def is_restoring(self) -> bool:
        """Whether a snapshot's copy is under way: pysyncobj's applied index is the snapshot's
        already, the store's is not yet (any thread; may be a tick stale)."""
        return self._is_held

    def _is_restore_settled(self) -> bool:
        try:
            return self._restores is None or self._restores.settled()
        except Exception as exc:  # the copy failed: the state is not the snapshot's
            self._halt(f"cannot install the snapshot: {exc}")
            return False

    def _wait_restored(self) -> None:
        if self._restores is not None:
            self._restores.wait_restored()

    def _hold_apply(self, hold: bool) -> None:
        """While a snapshot's copy runs (raft/snapshots.py), pysyncobj's tick must apply and
        compact nothing; the rest of it (answering the leader, appending to the journal, the
        election timer) goes on. Instance attributes shadow its private methods for that
        (pinned by tests/unit/test_raft_replica.py)."""
        if hold == self._is_held:
            return
        self._is_held = hold
        for name, stand_in in zip(HELD_STEPS, (_apply_nothing, _compact_nothing), strict=True):
            if hold:
                self.__dict__[name] = stand_in
            else:
                del self.__dict__[name]

    def _ack_snapshot_chunks(self) -> None:
        """pysyncobj's follower answers a shipped snapshot only after its last chunk, and the
        leader drops a connection it has read nothing from for connectionTimeout: a snapshot
        that takes longer than that to ship started over, forever (100 MB never arrived, found
        by benchmarks/bench_snapshot_install.py). So while chunks arrive, answer as pysyncobj
        does for each chunk of a big entry: a next_node_idx with neither success nor reset
        changes nothing at the leader but the time it last heard from this node."""
        serializer = self._SyncObj__serializer
        if serializer._Serializer__incomingTransmissionFile is None:
            return
        leader, now = self._SyncObj__raftLeader, time.monotonic()
        if leader is None or now < self._next_snapshot_ack:
            return
        self._next_snapshot_ack = now + SNAPSHOT_ACK_EVERY_S
        self._SyncObj__sendNextNodeIdx(leader, success=False, reset=False)

    def is_vote_unsure(self) -> bool:
        """Whether this node, started without its Raft term and vote, is still unsure: it votes
        in nothing until every member is heard, then only for candidates at or past the best
        log position heard of until its log holds it (raft/votes.py; any thread; may be a tick
        stale)."""
        return self._votes.is_unsure

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        """Shadows pysyncobj's private message handler (SyncObj.__onMessageReceived, which
        SyncObj.__init__ hands to the transport as `self.__onMessageReceived`, so this override
        is what the transport calls; pinned by tests/unit/test_raft_votes.py). While unsure
        (raft/votes.py), note the term of every message from another member and the log index
        it names (INDEX_NAMED_BY), and drop a vote
        request unanswered: pysyncobj sends no refusal either, so to the candidate it is a vote
        not granted. Everything else goes to pysyncobj unchanged."""
        if self._votes.is_unsure and isinstance(message, dict):
            term = message.get("term")
            if isinstance(term, int) and node in self._SyncObj__otherNodes:
                self._votes.hear(str(node.id), term, _position(message))
            if message.get("type") == "request_vote" and not self._votes.may_vote_for(
                _last_entry(message)
            ):
                return
        SyncObj._SyncObj__onMessageReceived(self, node, message)

    def _tick_unsure(self) -> None:
        """While unsure: once every other member is heard, store the highest term heard as this
        node's term with a vote for itself (pysyncobj's own fsynced .meta: it then refuses any
        vote in that term and grants votes only in later ones, as after any vote); once its log
        also holds the best position heard of (VoteFence.caught_up), drop the marker. Until
        then, pysyncobj's election (a vote for itself) must never run: when its
        election timer fires (or the leader hands over to it: `timeout_now` zeroes the timer),
        send a probe instead, the vote request pysyncobj would send in a new term, counting no
        vote: unsure nodes (a brand-new cluster) hear one another, and a sure node in a lower
        term takes the new one and answers. Runs before pysyncobj's tick, which checks the timer
        before reading messages."""
        fence = self._votes
        if not fence.is_unsure:
            return
        if fence.fence is None:
            learned = fence.learned(str(node.id) for node in self._SyncObj__otherNodes)
            if learned is not None:
                term = max(int(self._SyncObj__raftCurrentTerm), learned)
                self._SyncObj__setCurrentTerm(term, self.selfNode.id)
                fence.settle(term)
        if fence.caught_up(int(self._SyncObj__raftCommitIndex)):
            return
        now = time.monotonic()  # pysyncobj's monotonicTime is time.monotonic on Python 3
        if self._SyncObj__raftElectionDeadline >= now:
            return
        self._SyncObj__raftElectionDeadline = now + self._SyncObj__generateRaftTimeout()
        term = int(self._SyncObj__raftCurrentTerm) + 1  # as pysyncobj's candidate: stored first
        self._SyncObj__setCurrentTerm(term, self.selfNode.id)  # a vote nobody counts
        probe = {
            "type": "request_vote",
            "term": term,
            "last_log_index": self._SyncObj__getCurrentLogIndex(),
            "last_log_term": self._SyncObj__getCurrentLogTerm(),
        }
        for node in self._SyncObj__otherNodes:
            self._SyncObj__transport.send(node, probe)

    def _onTick(self, timeToWait: float = 0.0) -> None:  # pysyncobj's tick hook, its names
        self._tick_unsure()
        self._tick(self._tick_wait(timeToWait))
        self._note_leadership()

    def _applyCommand(  # pysyncobj's names
        self, command: Any, callback: Any, commandType: Any = None
    ) -> None:
        # Any thread proposing: the tick that appends it, and those after, wait the short time
        # (a lone leader commits at the tick after the append, woken by nothing else).
        self._busy_until = time.monotonic() + IDLE_AFTER_S
        super()._applyCommand(command, callback, commandType)

    def _tick_wait(self, busy_wait: float) -> float:
        """pysyncobj's autoTickPeriod while the log moves and IDLE_AFTER_S after; IDLE_TICK_S
        once it has stood still that long."""
        moved = (
            self._SyncObj__getCurrentLogIndex(),
            self._SyncObj__raftCommitIndex,
            self._SyncObj__raftLastApplied,
            self._SyncObj__raftCurrentTerm,
            self._SyncObj__raftState,
        )
        now = time.monotonic()
        if moved != self._moved or self._is_held:
            self._moved = moved
            self._busy_until = now + IDLE_AFTER_S
        return busy_wait if now < self._busy_until else max(busy_wait, IDLE_TICK_S)

    def _note_leadership(self) -> None:
        """Log each term this node leads, once, on the tick thread (where pysyncobj changes
        both): the chaos checker reads these lines to find two leaders of one term."""
        if not self._isLeader():
            return
        term = int(self._getTerm())
        if term != self._led_term:
            self._led_term = term
            log.info("raft leader term=%d", term)

    def _tick(self, timeToWait: float) -> None:
        self._ack_snapshot_chunks()
        # At start-up the snapshot file is loaded inside the tick, just before it applies.
        self._hold_apply(not self._is_restore_settled() or bool(self._SyncObj__needLoadDumpFile))
        if self._is_step_down_asked:
            self._is_step_down_asked = False
            if self._isLeader():
                self.transferLeadership()
        if self._is_full_asked and not self._is_journal_full():
            # The journal asked while the last compaction was being written (it only shrinks
            # when that is done): that one made room, and a second in a row would copy the
            # store for nothing (a 300,000-run spike wrote every snapshot twice, 1-2 s each).
            self._is_full_asked = False
            if not self._is_compaction_asked:
                self._SyncObj__forceLogCompaction = False
        if not (self._is_compaction_asked or self._is_full_asked):
            super()._onTick(timeToWait)
            return
        # pysyncobj's forced compaction still waits for this node's time slot (logCompaction-
        # Split, up to compaction_min_time away): lift the split for this one tick. The force
        # flag is cleared by pysyncobj once a compaction starts; until then, ask again.
        conf = self._SyncObj__conf
        conf.logCompactionSplit = False
        self.forceLogCompaction()
        try:
            super()._onTick(timeToWait)
        finally:
            conf.logCompactionSplit = True
        is_still_asked = bool(self._SyncObj__forceLogCompaction)
        self._is_compaction_asked = self._is_compaction_asked and is_still_asked
        self._is_full_asked = self._is_full_asked and is_still_asked

    def _is_journal_full(self) -> bool:
        raft_log = getattr(self, "_SyncObj__raftLog", None)
        return not isinstance(raft_log, journal.DurableJournal) or (
            raft_log.bytes_held > journal.MAX_JOURNAL_BYTES
        )

    def is_leader(self) -> bool:
        """Whether pysyncobj thinks this node leads (may be stale: never use it as a lock)."""
        return bool(self._isLeader())


def _position(message: Mapping[str, object]) -> tuple[int, int]:
    """The log position (term, index) a Raft message names (pysyncobj's field names): a
    leader's term and commit index (the committed entries' terms are at most its term), a
    candidate's last entry; (0, 0) for any other message."""
    kind = message.get("type")
    if kind == "append_entries":
        return _ints(message.get("term"), message.get("commit_index"))
    if kind == "request_vote":
        return _last_entry(message)
    return (0, 0)


def _last_entry(message: Mapping[str, object]) -> tuple[int, int]:
    return _ints(message.get("last_log_term"), message.get("last_log_index"))


def _ints(term: object, index: object) -> tuple[int, int]:
    if isinstance(term, int) and isinstance(index, int):
        return (term, index)
    return (0, 0)
