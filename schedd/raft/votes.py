"""A node that starts without its Raft term and vote votes again only in terms it cannot have
voted in before, and, until its log holds every entry it may have acknowledged before, only
for candidates that hold them (issue 27, chaos seeds 2333 and 2380; the argument is in
raft/DESIGN.md, "A node that lost its vote" and "A node that lost its log").

Pure bookkeeping: `Replica` feeds it the terms it hears and asks it when the node may vote.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from schedd.store.files import sync_dir

log = logging.getLogger(__name__)
# Beside the journal: "this node has not yet learned a safe term". Its name starts like the
# journal's, so whatever removes the journal (a wipe, `schedd restore`) removes it too.
UNSURE_SUFFIX = ".unsure"
META_SUFFIX = ".meta"  # pysyncobj's FileJournal keeps the term and the vote there


class VoteFence:
    """Whether this node may vote yet, from the terms and log positions the others tell it.

    A node is *unsure* when it started without its journal's `.meta` (term and vote: an empty
    data directory, a restore, a brand-new cluster) or with the marker an unsure start left. It
    votes in nothing until it has heard a Raft message carrying a term from every other member:
    the highest term heard is then its fence (it votes only in later terms). It stays unsure,
    across restarts, until its own log holds, committed, the best log position it has heard of
    (`best`: a leader's term and commit index, a candidate's last term and index): until then
    it votes only for candidates whose last entry is at least that position, and never for
    itself (the entries its former self acknowledged may be on the leader alone).
    """

    def __init__(self, journal_file: str | None) -> None:
        self.marker = None if journal_file is None else Path(journal_file + UNSURE_SUFFIX)
        self.heard: dict[str, int] = {}  # member id -> highest term heard from it
        # (term, index): the best log position heard of since this start; an entry its former
        # self acknowledged (and a leader counted to commit) is at or below it.
        self.best = (0, 0)
        self.fence: int | None = None  # set once learned
        if journal_file is None or self.marker is None:  # in memory: nothing is durable anyway
            self.is_unsure = False
            return
        self.is_unsure = self.marker.exists() or not Path(journal_file + META_SUFFIX).exists()
        if self.is_unsure and not self.marker.exists():
            # Before pysyncobj writes a .meta: a crash before the fence is learned must start
            # unsure again, although a .meta then exists.
            fd = os.open(self.marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            sync_dir(self.marker.parent)
        if self.is_unsure:
            log.warning(
                "raft term and vote not found (a new node, or its data was lost): voting in"
                " nothing until every member is heard"
            )

    def hear(self, member: str, term: int, position: tuple[int, int] = (0, 0)) -> None:
        """A Raft message carrying `term` came from `member` (tick thread), naming a log
        `position` (term, index): a leader's term and commit index, a candidate's last entry."""
        if term > self.heard.get(member, -1):
            self.heard[member] = term
        self.best = max(self.best, position)

    def learned(self, others: Iterable[str]) -> int | None:
        """The fence, once every other member has been heard (None until then)."""
        terms = [self.heard.get(member) for member in others]
        if any(term is None for term in terms):
            return None
        return max((term for term in terms if term is not None), default=0)

    def may_vote_for(self, last_entry: tuple[int, int]) -> bool:
        """Whether a candidate whose last entry is `last_entry` (term, index) may have this
        node's vote while it is unsure: only once the fence is learned, and only if that
        entry is at least the best position heard of."""
        return self.fence is not None and last_entry >= self.best

    def settle(self, fence: int) -> None:
        """The node's term and vote for `fence` are on disk: it votes in later terms, for
        candidates that `may_vote_for`, until `caught_up`."""
        self.fence = fence
        log.warning("raft vote fence learned term=%d: voting again in later terms", fence)
        if self.best[1] > 0:
            log.warning(
                "raft: voting only for candidates at or past term=%d index=%d until this"
                " node's log holds it",
                *self.best,
            )

    def caught_up(self, commit_index: int) -> bool:
        """Once the fence is learned and this node's log holds the best position heard of
        (`commit_index`, its own): it is sure from now on, and drops the marker."""
        if self.fence is None or commit_index < self.best[1]:
            return False
        self.is_unsure = False
        if self.marker is not None:
            self.marker.unlink(missing_ok=True)
            sync_dir(self.marker.parent)
        log.warning("raft: this node's log holds index %d: an ordinary voter again", self.best[1])
        return True
