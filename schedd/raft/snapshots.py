"""pysyncobj's snapshot hooks: write the store's snapshot in the background, restore it.

Writing or restoring a snapshot of a large database takes seconds; on pysyncobj's tick thread
that would stall heartbeats and cause elections, so both copies run on threads of their own
(see raft/DESIGN.md).
"""

from __future__ import annotations

import logging
import os
import pickle
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pysyncobj import SERIALIZER_STATE

from schedd import metrics
from schedd.store.db import Database
from schedd.store.files import durable_replace, sync_dir, sync_file
from schedd.store.snapshot import (
    SnapshotError,
    open_snapshot,
    read_snapshot,
    restore_snapshot,
    write_snapshot,
)

log = logging.getLogger(__name__)
NOT_SERIALIZING: int = SERIALIZER_STATE.NOT_SERIALIZING
SERIALIZING: int = SERIALIZER_STATE.SERIALIZING
SUCCESS: int = SERIALIZER_STATE.SUCCESS
FAILED: int = SERIALIZER_STATE.FAILED


class SnapshotHooks:
    """serializer / deserializer / serializeChecker for SyncObjConf, around the store."""

    def __init__(
        self, db: Database, dump_path: Path, *, on_restore: Callable[[], None] | None = None
    ) -> None:
        self._db = db
        self._dump_path = dump_path
        self._scratch_path = dump_path.with_name(dump_path.name + ".building")
        self._on_restore = on_restore
        self._state = NOT_SERIALIZING
        self._worker: threading.Thread | None = None
        self._failed = False
        self.last_duration_s: float | None = None
        self._restore: threading.Thread | None = None
        self._restore_index = 0
        self._restore_error: Exception | None = None

    def serialize(self, tmp_path: str, raft_data: Any) -> None:
        """Start a snapshot (tick thread). pysyncobj renames `tmp_path` onto the dump file
        as soon as this returns, so `tmp_path` gets the previous dump's content (a hard link)
        and the new one is swapped in by `check()` once it is complete."""
        Path(tmp_path).unlink(missing_ok=True)
        if self._dump_path.exists():
            os.link(self._dump_path, tmp_path)
        else:
            Path(tmp_path).write_bytes(b"")  # no snapshot yet: the journal still holds all
        raft_state = pickle.dumps(raft_data, protocol=pickle.HIGHEST_PROTOCOL)
        self._failed = False
        self._state = SERIALIZING
        self._worker = threading.Thread(
            target=self._build, args=(raft_state,), name="raft-snapshot", daemon=True
        )
        self._worker.start()

    def _build(self, raft_state: bytes) -> None:
        started = time.monotonic()
        try:
            index = write_snapshot(self._db.path, self._scratch_path, raft_state)
        except Exception:
            log.exception("snapshot failed")
            metrics.SNAPSHOT_FAILURES.inc()
            self._failed = True
            return
        self.last_duration_s = time.monotonic() - started
        metrics.SNAPSHOT_SECONDS.observe(self.last_duration_s)
        log.info("snapshot written index=%d seconds=%.2f", index, self.last_duration_s)

    def check(self) -> int:
        """serializeChecker (tick thread): swap a finished snapshot in, then report once."""
        if self._state != SERIALIZING:
            return NOT_SERIALIZING
        if self._worker is not None and self._worker.is_alive():
            return SERIALIZING
        self._state = NOT_SERIALIZING
        if self._failed:
            return FAILED
        # write_snapshot fsynced the file on the worker: only the rename and its directory here.
        durable_replace(self._scratch_path, self._dump_path, is_source_synced=True)
        return SUCCESS

    def deserialize(self, path: str) -> Any:
        """Load a snapshot (tick thread): at start-up, or one shipped by the leader.

        A snapshot older than the live database (a restart) keeps the live database. A newer
        one (this node lagged behind) replaces its content on a thread of its own: the copy
        takes seconds for a big database (3.5 s at 1 GB), and meanwhile the tick thread must
        go on answering the leader. The replica applies nothing until `settled()`."""
        self.settled()  # raises if a copy failed: nothing may be loaded over that
        snapshot_index, raft_state = read_snapshot(Path(path))
        if snapshot_index > max(self._db.applied_index, self._restore_index):
            self.wait_restored()  # one copy at a time (a second install during one: rare)
            log.info(
                "restoring snapshot index=%d over live index=%d",
                snapshot_index,
                self._db.applied_index,
            )
            self._failed = True  # a snapshot of the old state still being built is void
            # pysyncobj clears its journal once this returns: the received file must survive
            # a power loss before the copy is done, or the node keeps neither (most of it was
            # written back while it arrived).
            sync_file(Path(path))
            sync_dir(Path(path).parent)
            source = open_snapshot(Path(path))  # this file, even if the path is replaced
            self._restore_index = snapshot_index
            self._restore = threading.Thread(
                target=self._copy, args=(source,), name="raft-restore", daemon=True
            )
            self._restore.start()
        return pickle.loads(raft_state)

    def _copy(self, source: sqlite3.Connection) -> None:
        started = time.monotonic()
        try:
            restore_snapshot(self._db, source)
        except Exception as exc:
            self._restore_error = exc
            return
        seconds = time.monotonic() - started
        log.info("snapshot restored index=%d seconds=%.2f", self._restore_index, seconds)

    def settled(self) -> bool:
        """(tick thread) Whether no restore is pending. A restore whose copy has just finished
        is completed here: the node hears of it through `on_restore`. Raises SnapshotError,
        at every call from then on, if a copy failed: the node cannot apply anything after it."""
        if self._restore is not None:
            if self._restore.is_alive():
                return False
            self._restore = None
            if self._restore_error is None and self._on_restore is not None:
                self._on_restore()
        if self._restore_error is not None:
            error = self._restore_error
            raise SnapshotError(f"restoring the snapshot failed: {error}") from error
        return True

    def wait_restored(self) -> None:
        """(tick thread) Wait for a pending restore's copy, then complete it."""
        if self._restore is not None:
            self._restore.join()
        self.settled()

    def close(self) -> None:
        """Wait for a copy in progress (before the store's writer connection is closed)."""
        if self._restore is not None:
            self._restore.join()


__all__ = ["SnapshotError", "SnapshotHooks"]
