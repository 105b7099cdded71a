"""pysyncobj's Raft journal, made durable: term and vote fsynced, appends synced before any ack.

Subclasses pysyncobj's FileJournal and TCPTransport; installed before a SyncObj starts.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pysyncobj.syncobj
from pysyncobj.journal import FileJournal, MemoryJournal, MetaStorer
from pysyncobj.pickle import dumps
from pysyncobj.transport import TCPTransport

from schedd.store.files import sync_dir

log = logging.getLogger(__name__)
# A leader's messages that promise nothing about its own disk: its entries going out, and the
# index it gave a follower's forwarded command. Every other message waits for the sync.
SEND_THEN_SYNC = frozenset({"append_entries", "apply_command_response"})
# pysyncobj holds every entry since the last compaction in memory and in the mapped file: past
# this many bytes of entries the node compacts at once (issue 14: RSS at 1,000,000 jobs), and
# after a compaction the file and its mapping shrink back (they only ever grew before).
MAX_JOURNAL_BYTES = 64 * 1024 * 1024
MIN_MAPPING_BYTES = 1024 * 1024
RECORD_OVERHEAD_BYTES = 24  # a record's two length fields, index and term


class DurableMetaStorer(MetaStorer):  # type: ignore[misc]  # pysyncobj ships no types
    """Writes the journal's .meta (term, vote, commit index) to disk before returning."""

    def storeMeta(self, meta: Mapping[str, object]) -> None:  # pysyncobj's name
        path = self.getPath()
        with open(path + ".tmp", "wb") as out:
            out.write(dumps(meta))
            out.flush()
            os.fsync(out.fileno())
        os.replace(path + ".tmp", path)
        sync_dir(Path(path).parent)


class DurableJournal(FileJournal):  # type: ignore[misc]
    """A FileJournal whose appends reach the disk (msync) at `sync()`, before any ack."""

    def __init__(self, journal_file: str) -> None:
        super().__init__(journal_file)
        sync_dir(Path(journal_file).parent)  # a new journal's name must outlive a power loss
        # FileJournal only reads its meta in __init__: swap the writer before any store.
        self._FileJournal__metaStorer = DurableMetaStorer(journal_file + ".meta")
        self._is_dirty = False
        self._syncs = 0
        self._sync_s = 0.0
        self.bytes_held = sum(len(e[0]) + RECORD_OVERHEAD_BYTES for e in self)  # replayed ones
        self.on_full: Callable[[], None] | None = None  # asks pysyncobj to compact now

    def add(self, command: bytes, idx: int, term: int) -> None:
        super().add(command, idx, term)
        self._is_dirty = True
        self.bytes_held += len(command) + RECORD_OVERHEAD_BYTES
        if self.bytes_held > MAX_JOURNAL_BYTES and self.on_full is not None:
            self.on_full()

    def clear(self) -> None:
        super().clear()
        self._is_dirty = True
        self.bytes_held = 0

    def deleteEntriesTo(self, entryTo: int) -> None:  # pysyncobj's names: compaction
        super().deleteEntriesTo(entryTo)  # clear(), then add() of the entries kept
        self._shrink()

    def _shrink(self) -> None:
        """Give back the file and mapping space a compaction freed (to twice what is used)."""
        mapped = self._FileJournal__journalFile._ResizableFile__mm
        used = self._FileJournal__currentOffset
        target = max(2 * used, MIN_MAPPING_BYTES)
        if mapped.size() >= 2 * target:
            self.sync()  # the kept entries reach the disk before the file is cut
            mapped.resize(target)  # truncates the file too

    def deleteEntriesFrom(self, entryFrom: int) -> None:  # pysyncobj's names
        super().deleteEntriesFrom(entryFrom)
        self._is_dirty = True

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        self.sync()  # a leader alone (one node) commits without sending: sync first
        super().setRaftCommitIndex(raftCommitIndex)

    def sync(self) -> None:
        """Flush the mapped journal to disk if anything changed since the last sync."""
        if self._is_dirty:
            started = time.perf_counter()
            # fdatasync of the mapped file writes the pages dirtied through the mapping, as
            # msync(MS_SYNC) does, but lets go of the GIL while the disk works: mmap.flush()
            # holds it, which stalled every thread of the node for each Raft round's sync.
            os.fdatasync(self._FileJournal__journalFile._ResizableFile__f.fileno())
            self._is_dirty = False
            self._syncs += 1
            self._sync_s += time.perf_counter() - started

    def _destroy(self) -> None:
        log.info("raft journal closed syncs=%d sync_seconds=%.3f", self._syncs, self._sync_s)
        super()._destroy()


class JournalSyncedTransport(TCPTransport):  # type: ignore[misc]
    """pysyncobj's TCP transport, syncing the journal around the messages that leave.

    Everything a node says after storing entries (a follower's ack above all) goes through
    `send`, so no peer can count an entry as stored before it is on this node's disk. A leader
    may send its entries first and sync while the followers store them (Raft allows it: the
    leader counts itself only at commit, and `setRaftCommitIndex` syncs first): SEND_THEN_SYNC.
    """

    def send(self, node: Any, message: Any) -> bool:
        journal = getattr(self._syncObj, "_SyncObj__raftLog", None)  # set before any send
        if not isinstance(journal, DurableJournal):
            return bool(super().send(node, message))
        if isinstance(message, dict) and message.get("type") in SEND_THEN_SYNC:
            is_sent = bool(super().send(node, message))
            journal.sync()
            return is_sent
        journal.sync()
        return bool(super().send(node, message))


def create_journal(journal_file: str | None = None) -> FileJournal | MemoryJournal:
    """pysyncobj's createJournal, with the durable file journal."""
    return MemoryJournal() if journal_file is None else DurableJournal(journal_file)


def install() -> None:
    """Make pysyncobj build DurableJournal for every SyncObj (idempotent)."""
    pysyncobj.syncobj.createJournal = create_journal
