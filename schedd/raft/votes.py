"""A node that starts without its Raft term and vote votes again only in terms it cannot have
voted in before, and only once its log holds every entry it may have acknowledged before
(issue 27 and chaos seed 2333; the argument is in raft/DESIGN.md, "A node that lost its vote"
and "A node that lost its log").

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
    """Whether this node may vote yet, from the terms it has heard from the other members.

    A node is *unsure* when it started without its journal's `.meta` (term and vote: an empty
    data directory, a restore, a brand-new cluster) or with the marker an unsure start left. It
    stays unsure, across restarts, until it has heard a Raft message carrying a term from every
    other member and its log holds the highest index it has heard of (a leader's commit index,
    a candidate's last index): the highest term heard is then its fence (it votes only in
    later terms).
    """

    def __init__(self, journal_file: str | None) -> None:
        self.marker = None if journal_file is None else Path(journal_file + UNSURE_SUFFIX)
        self.heard: dict[str, int] = {}  # member id -> highest term heard from it
        # The highest log index heard of: the entries its former self may have acknowledged
        # (and a leader counted to commit) are at or below it.
        self.floor = 0
        self._is_floor_logged = False
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

    def hear(self, member: str, term: int, index: int = 0) -> None:
        """A Raft message carrying `term` came from `member` (tick thread), naming log `index`
        (a leader's commit index, a candidate's last index; 0 for other messages)."""
        if term > self.heard.get(member, -1):
            self.heard[member] = term
        self.floor = max(self.floor, index)

    def learned(self, others: Iterable[str], commit_index: int) -> int | None:
        """The fence, once every other member has been heard and this node's log holds the
        highest index heard of, committed (`commit_index`, its own); None until then."""
        terms = [self.heard.get(member) for member in others]
        if any(term is None for term in terms):
            return None
        if commit_index < self.floor:
            if not self._is_floor_logged:
                self._is_floor_logged = True
                log.warning(
                    "raft: every member heard; voting once this node's log holds index %d"
                    " (committed here: %d)",
                    self.floor,
                    commit_index,
                )
            return None
        return max((term for term in terms if term is not None), default=0)

    def settle(self, fence: int) -> None:
        """The node's term and vote for `fence` are on disk: it is sure from now on."""
        self.is_unsure = False
        self.fence = fence
        if self.marker is not None:
            self.marker.unlink(missing_ok=True)
            sync_dir(self.marker.parent)
        log.warning("raft vote fence learned term=%d: voting again in later terms", fence)
