"""On the leader: propose `prune` commands, paced, so history is kept for its retention and no
longer. Apply does the deleting (store/apply/retention.py); this loop only decides when, and
where the next command starts: round-robin over tenants, a share of rows for each per pass.

Once every member applies log level 13 (history segments, issue 35 §1), the same passes are
`move_history` commands (finished history moves into per-hour segment files instead of being
deleted row by row: store/apply/history.py), and between passes the loop closes a segment
whose period ended (plus the grace) once a whole pass that started after that moved everything
before it, and drops a closed segment older than its family's retention."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import msgspec

from schedd.dispatch.leases import Propose
from schedd.errors import SchedError
from schedd.loop import Loop
from schedd.retention import Retention
from schedd.store import segments
from schedd.store.apply.retention import MAX_ROWS_PER_PRUNE
from schedd.store.commands import (
    RUN_SUMMARIES_LEVEL,
    CloseSegment,
    DropSegment,
    MoveHistory,
    Prune,
)
from schedd.store.gauges import oldest_due_ms, open_batch_runs
from schedd.store.results import Pruned

PASS_EVERY_S = 5.0  # a pass over every tenant starts this often when the last one finished
# A tenant's share per pass: the rows of one prune command at most. A command that spends its
# whole budget stopped inside a tenant; the next one starts after that tenant, not with it again,
# so a tenant that keeps more prunable rows than the pace (a 1 s retention allows it) takes its
# share and the others get theirs. A pass in which some tenant used up its share is followed at
# once by the next (the leftovers wait one pass, not PASS_EVERY_S).
TENANT_SHARE_ROWS = MAX_ROWS_PER_PRUNE
NEXT_PIECE_S = 0.05  # within a pass: at most 20 prune commands (5,000 rows) a second
SPIKE_PAUSE_S = 1.0  # runs overdue by more than this: claims first, pruning waits
SPIKE_LAG_MS = 1_000
# A spike drains in seconds; overdue runs for longer than this mean the cluster is overloaded,
# and a pruner that kept waiting would let the disk fill: it goes on, at most 2 commands a second.
MAX_SPIKE_PAUSE_S = 60.0
OVERLOADED_PIECE_S = 0.5
IDLE_S = 1.0  # a follower checks this often whether it became the leader
# Results kept to answer a retried command: a proposer retries within its request timeout
# (seconds), so two minutes is plenty (apply/machine.py's own clean-up keeps them an hour; a
# receive's result holds its messages: 280 MB in ten minutes at 1,500 runs/s, measured).
COMMANDS_KEEP_MS = 120_000
# One-time jobs completed by their claim are written by prunes (log level 5). While a queue is
# still draining (a batch has runs not yet done) a prune writes none, so a spike's completions
# wait for its drain instead of competing with it; but none waits longer than this (under a
# steady flow of one-time queue jobs some batch is always open: then about this long of them
# stay pending, and a listing of completed jobs reads their batches).
COMPLETIONS_HOLD_MS = 60_000
REFUSED_WAIT_MS = 600_000  # a refused close or drop of a segment is proposed again after this
# A spike (this many runs or more still open in batches) holds them longer: written meanwhile,
# a 620,000-run spike's completions were 11-13% of every node's CPU through the drain (py-spy,
# 2026-12-04), its drain outlasting the short hold. A steady flow has far fewer open runs.
SPIKE_OPEN_RUNS = 20_000
SPIKE_HOLD_MS = 600_000
SPIKE_SCAN_BATCHES = 200  # open runs are counted over at most this many batches (oldest first)

log = logging.getLogger(__name__)


class Pruner(Loop):
    """One prune step per `tick`; the leader's pass position is kept in memory only (a new
    leader starts a pass from the first tenant, which costs at most one pass). The position is
    proposer state: apply prunes the tenants after the one a command names, as it always did."""

    def __init__(
        self,
        retention: Retention,
        connect: Callable[[], sqlite3.Connection],
        is_leader: Callable[[], bool],
        propose: Propose,
        *,
        partitions: int,
        lagging: Callable[[int], list[str]],
    ) -> None:
        super().__init__("pruner", first_wait_s=IDLE_S)
        self._lagging = lagging  # members that cannot apply a command level yet
        self._retention = retention
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._is_leader = is_leader
        self._propose = propose
        self._partitions = partitions
        self._after = ""
        self._is_behind = False  # a tenant in this pass had more rows than its share
        self._warned: list[str] = []
        self._overdue_since_ms: int | None = None  # when runs became overdue (leader's clock)
        # Segments (level 13): when the current move pass started and whether no tenant was
        # cut short in it; the start of the last pass that moved everything (0: none yet).
        self._pass_started_ms = 0
        self._pass_is_whole = True
        self._moved_through_ms = 0
        # Segments whose close or drop was refused, and when: left alone for REFUSED_WAIT_MS (a
        # close refused as too early, by a leader whose clock is behind, may be due later).
        self._refused: dict[str, int] = {}

    def _wait_s(self, now_ms: int) -> float | None:
        """How long to wait instead of pruning now, or None to prune."""
        if not self._is_leader():
            self._after, self._is_behind = "", False
            return IDLE_S
        old = self._lagging(Prune.LEVEL)
        if old:
            if old != self._warned:
                log.warning(
                    "pruning waits: nodes %s have not reported a version that applies "
                    "prune commands (a rolling upgrade in progress?)",
                    ", ".join(old),
                )
                self._warned = old
            return PASS_EVERY_S
        self._warned = []
        if self._conn is None:
            self._conn = self._connect()
        oldest = oldest_due_ms(self._conn, self._partitions)
        if oldest is None or now_ms - oldest <= SPIKE_LAG_MS:
            self._overdue_since_ms = None
            return None
        if self._overdue_since_ms is None:
            self._overdue_since_ms = now_ms
        if now_ms - self._overdue_since_ms < MAX_SPIKE_PAUSE_S * 1000:
            return SPIKE_PAUSE_S  # a spike being claimed: claims first
        return None  # overloaded for a while: prune anyway, slowly

    def tick(self, now_ms: int) -> float:
        wait_s = self._wait_s(now_ms)
        if wait_s is not None:
            return wait_s
        moves = not self._lagging(MoveHistory.LEVEL)  # every member applies segments
        if moves and self._after == "" and self._segment_step(now_ms):
            return NEXT_PIECE_S
        if self._after == "":
            self._pass_started_ms, self._pass_is_whole = now_ms, True
        kind = MoveHistory if moves else Prune
        cmd = kind(
            retention_ms=self._retention.as_ms(),
            after_tenant=self._after,
            max_rows=TENANT_SHARE_ROWS,
            commands_ms=COMMANDS_KEEP_MS,
            max_completions=0 if self._completions_wait(now_ms) else None,
        )
        if isinstance(cmd, MoveHistory) and not self._lagging(RUN_SUMMARIES_LEVEL):
            cmd = msgspec.structs.replace(cmd, summarize=True)  # level 14: moved runs' summaries
        try:
            result = self._propose(cmd)
        except SchedError as exc:
            log.debug("%s not committed: %s", cmd.TYPE, exc)
            self._after = ""  # the pass starts again (a move pass must be whole to count)
            return IDLE_S
        piece_s = NEXT_PIECE_S if self._overdue_since_ms is None else OVERLOADED_PIECE_S
        if result.done:  # the budget was not spent: no tenant was cut short
            self._after = ""
            if moves and self._pass_is_whole:
                self._moved_through_ms = self._pass_started_ms
            if self._is_behind:
                self._is_behind = False
                return piece_s  # some tenant still has rows: the next pass at once
            return PASS_EVERY_S
        self._after = result.next_after
        if _rows(result) >= TENANT_SHARE_ROWS:
            self._pass_is_whole = False
            self._move_past_cut_tenant(now_ms)
        return piece_s

    def _close(self, name: str) -> CloseSegment | None:
        """The close of a segment with its rows' digest, computed here from this node's file
        (off the apply thread: an hour of a busy cluster's runs takes seconds to hash), at the
        row count read before and after it (None when a move changed it meanwhile). Every
        replica's apply checks the count and records the digest; each checks its own file
        after the commit, in the background."""
        assert self._conn is not None
        count = "SELECT rows FROM segments WHERE name = ?"
        before = self._conn.execute(count, (name,)).fetchone()
        store = self._conn.execute("PRAGMA database_list").fetchone()[2]  # state.db's path
        path = segments.segment_path(Path(store).parent, name)
        try:
            digest = segments.content_digest(path)
        except (OSError, sqlite3.Error, ValueError) as exc:
            log.warning("segment %s not digested here (%s): apply digests it", name, exc)
            return CloseSegment(name=name)
        after = self._conn.execute(count, (name,)).fetchone()
        if before is None or before != after:
            return None
        return CloseSegment(name=name, rows=int(before[0]), content_digest=digest)

    def _segment_step(self, now_ms: int) -> bool:
        """Between passes: propose one close or drop that is due (read from this node's
        store); whether one was proposed."""
        assert self._conn is not None
        cmd: CloseSegment | DropSegment | None = None
        for name, family, period, state in self._conn.execute(
            "SELECT name, family, period_start_ms, state FROM segments "
            "WHERE state != 'dropped' ORDER BY period_start_ms, name"
        ).fetchall():
            ends = int(period) + segments.PERIOD_MS
            if now_ms - self._refused.get(name, now_ms - REFUSED_WAIT_MS) < REFUSED_WAIT_MS:
                continue
            if state == segments.OPEN and ends + segments.CLOSE_GRACE_MS <= min(
                now_ms, self._moved_through_ms
            ):
                cmd = self._close(name)
                if cmd is None:
                    return False  # moved into while read: the next pass
                break
            keep_ms = int(getattr(self._retention, str(family)))
            if state == segments.CLOSED and ends < now_ms - keep_ms:
                cmd = DropSegment(name=name)
                break
        if cmd is None:
            return False
        try:
            if isinstance(cmd, CloseSegment):
                self._propose(cmd)
            else:
                self._propose(cmd)
        except SchedError as exc:
            log.warning("%s %s not applied: %s", cmd.TYPE, cmd.name, exc)
            if exc.code in ("conflict", "not_found"):
                self._refused[cmd.name] = now_ms
        return True

    def _completions_wait(self, now_ms: int) -> bool:
        """Whether deferred completions wait: some are pending and a queue is still draining,
        none pending for COMPLETIONS_HOLD_MS yet, or for SPIKE_HOLD_MS while a spike drains
        (read from this node's store)."""
        assert self._conn is not None
        oldest = self._conn.execute(
            "SELECT b.claimed_at_ms FROM completions c JOIN batches b ON b.batch_id = c.batch_id "
            "ORDER BY c.batch_id LIMIT 1"
        ).fetchone()
        if oldest is None or now_ms - int(oldest[0]) > SPIKE_HOLD_MS:
            return False
        open_runs = open_batch_runs(self._conn, SPIKE_SCAN_BATCHES)
        if not open_runs:
            return False  # drained
        return now_ms - int(oldest[0]) <= COMPLETIONS_HOLD_MS or open_runs >= SPIKE_OPEN_RUNS

    def _move_past_cut_tenant(self, now_ms: int) -> None:
        """The budget ran out inside the tenant after `_after` (apply would start the next
        command with it again): it had its share for this pass, the next command starts after
        it. It is read here, from this node's store, where the command was just applied. A
        pass's first command prunes the admin actions' audit first: when they are what used
        the budget up, the first tenant had nothing yet and is not passed over."""
        assert self._conn is not None
        if self._after == "" and self._admin_audit_left(now_ms):
            return
        found = self._conn.execute(
            "SELECT tenant_id FROM tenants WHERE tenant_id > ? ORDER BY tenant_id LIMIT 2",
            (self._after,),
        ).fetchall()
        if not found:
            return
        cut, rest = str(found[0][0]), found[1:]
        if rest:
            self._after, self._is_behind = cut, True
        else:  # the last tenant: the next pass starts now (a lone tenant keeps the full pace)
            self._after, self._is_behind = "", False

    def _admin_audit_left(self, now_ms: int) -> bool:
        """Whether admin actions' audit rows older than their retention are left."""
        assert self._conn is not None
        first = self._conn.execute(
            "SELECT at_ms FROM audit INDEXED BY audit_by_tenant WHERE tenant_id IS NULL "
            "ORDER BY seq LIMIT 1"
        ).fetchone()
        return first is not None and int(first[0]) < now_ms - self._retention.audit


def _rows(result: Pruned) -> int:
    """Rows a prune command deleted or dead-lettered (its row budget; kept command results
    have their own)."""
    return sum(n for kind, n in result.deleted.items() if kind != "commands")
