"""Backups of a node's database while it serves, and restoring one to start a cluster over.

A backup is one consistent SQLite file (VACUUM INTO reads a single version of the live WAL
database), and beside it, in `<file>.history/`, the history segments that version lists (log
level 13; store/backup_history.py). Restoring puts them in a stopped node's data directory as
the state of a new Raft log: the node's journal, snapshot and other segment files go, and the
applied index starts again at 0, so the entries of the new log apply on top of the restored
tables.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from schedd.errors import InvalidRequest
from schedd.store.backup_history import SegmentsCopied, copy_segments, history_of, restore_segments
from schedd.store.datadir import DataDirBusy, DataDirLock
from schedd.store.db import connect
from schedd.store.files import durable_replace

STATE_DB = "state.db"
RAFT_FILES = ("raft.journal", "raft.snapshot")  # and whatever pysyncobj puts beside them


@dataclass(frozen=True, slots=True)
class BackupInfo:
    path: Path
    applied_index: int
    jobs: int
    size_bytes: int
    segments: SegmentsCopied


def write_backup(data_dir: Path, out_path: Path) -> BackupInfo:
    """Copy the live database of `data_dir` to `out_path` (written aside, then renamed)."""
    source_path = data_dir / STATE_DB
    if not source_path.exists():
        raise InvalidRequest("--config", f"no database at {source_path}: is data_dir right?")
    partial = out_path.with_name(out_path.name + ".partial")
    partial.unlink(missing_ok=True)
    source = connect(source_path)  # VACUUM INTO writes the copy: not a query_only connection
    try:
        source.execute("VACUUM INTO ?", (str(partial),))
    finally:
        source.close()
    info = _inspect(partial)
    copy = sqlite3.connect(str(partial), isolation_level=None)
    try:
        copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
    finally:
        copy.close()
    history = history_of(out_path)
    history_partial = history.with_name(history.name + ".partial")
    copied = copy_segments(data_dir, partial, history_partial)  # taken after the database
    shutil.rmtree(history, ignore_errors=True)
    history_partial.rename(history)
    durable_replace(partial, out_path)
    return BackupInfo(out_path, info[0], info[1], out_path.stat().st_size, copied)


def restore_backup(backup_path: Path, data_dir: Path) -> BackupInfo:
    """Make `backup_path` the state of the stopped node at `data_dir`, on a fresh Raft log."""
    applied_index, jobs = _inspect(backup_path)
    data_dir.mkdir(parents=True, exist_ok=True)
    target = data_dir / STATE_DB
    _refuse_if_in_use(data_dir)
    partial = data_dir / (STATE_DB + ".restoring")
    partial.unlink(missing_ok=True)
    source = sqlite3.connect(f"file:{backup_path}?mode=ro", uri=True)
    copy = sqlite3.connect(str(partial), isolation_level=None)
    try:
        source.backup(copy)
        copy.execute("UPDATE meta SET value = 0 WHERE key = 'applied_index'")
    finally:
        copy.close()
        source.close()
    for stale in (*_raft_files(data_dir), data_dir / (STATE_DB + "-wal")):
        stale.unlink(missing_ok=True)
    (data_dir / (STATE_DB + "-shm")).unlink(missing_ok=True)
    durable_replace(partial, target)
    restored = restore_segments(backup_path, data_dir)
    return BackupInfo(target, applied_index, jobs, target.stat().st_size, restored)


def _inspect(path: Path) -> tuple[int, int]:
    """(applied index, jobs) of a schedd database file, or InvalidRequest if it is not one."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if conn.execute("PRAGMA quick_check").fetchone() != ("ok",):
                raise InvalidRequest("BACKUP", f"{path} is damaged (quick_check failed)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'applied_index'").fetchone()
            jobs = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise InvalidRequest("BACKUP", f"{path} is not a schedd database: {exc}") from None
    return (0 if row is None else int(row[0])), int(jobs)


def _refuse_if_in_use(data_dir: Path) -> None:
    """A running node holds the data directory's lock (`DataDirLock`): refuse to restore then."""
    try:
        with DataDirLock(data_dir):
            pass
    except DataDirBusy:
        raise InvalidRequest(
            "--config", f"{data_dir} is in use by a running node: stop it before restoring"
        ) from None


def _raft_files(data_dir: Path) -> list[Path]:
    return [path for name in RAFT_FILES for path in data_dir.glob(name + "*")]
