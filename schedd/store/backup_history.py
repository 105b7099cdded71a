"""The history segments of a backup (store/backup.py, log level 13): copied beside the database
file into `<backup>.history/`, and put back into a restored node's `data_dir/history/`, so that
a restore keeps the history its `segments` table lists.

What is copied is what the database copy's `segments` table lists: a closed segment's file as it
is (immutable), an open one as a consistent copy (`VACUUM INTO`) taken after the database's and
then trimmed to it: rows a move took out of the live tables after the database copy are still
live in it, and are deleted from the segment copy, so the pair agrees as one version would.
Never writes a live node's files but the restored node's history directory.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from schedd.store import segments
from schedd.store.files import sync_dir

SUFFIX = ".history"


@dataclass(frozen=True, slots=True)
class SegmentsCopied:
    copied: int  # segment files copied (or restored)
    missing: tuple[str, ...]  # listed segments whose file this node lacked


def history_of(backup_path: Path) -> Path:
    """The directory of a backup's segments, beside its database file."""
    return backup_path.with_name(backup_path.name + SUFFIX)


def listed(db_path: Path) -> list[tuple[str, str]]:
    """(name, state) of the segments a database file lists (none before migration 17)."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        has = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'segments'"
        ).fetchone()
        if has is None:
            return []
        rows = conn.execute(
            "SELECT name, state FROM segments WHERE state != 'dropped' ORDER BY name"
        ).fetchall()
        return [(str(name), str(state)) for name, state in rows]
    finally:
        conn.close()


def copy_segments(data_dir: Path, db_copy: Path, out_dir: Path) -> SegmentsCopied:
    """Copy the segments `db_copy` lists from `data_dir` into `out_dir` (made anew)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    missing: list[str] = []
    copied = 0
    for name, state in listed(db_copy):
        source = segments.segment_path(data_dir, name)
        target = out_dir / source.name
        if not source.exists():
            missing.append(name)  # a closed one still being fetched: the others' backups have it
            continue
        if state == segments.CLOSED:
            shutil.copyfile(source, target)
        else:
            _copy_open(source, target, db_copy, segments.parse_name(name)[0])
        copied += 1
    sync_dir(out_dir)
    return SegmentsCopied(copied, tuple(missing))


def _copy_open(source: Path, target: Path, db_copy: Path, family: str) -> None:
    """A consistent copy of an open segment, without the rows that are still live in the
    database copy (moved after it was taken), in rollback-journal mode."""
    conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        conn.execute("VACUUM INTO ?", (str(target),))
    finally:
        conn.close()
    copy = sqlite3.connect(str(target), isolation_level=None)
    try:
        copy.execute("ATTACH DATABASE ? AS live", (f"file:{db_copy}?mode=ro",))
        copy.execute("BEGIN")
        for table, key in segments.FAMILY_TABLES[family]:
            # Table names and keys are constants of segments.py, never input.
            copy.execute(
                f"DELETE FROM main.{table} WHERE ({key}) IN (SELECT {key} FROM live.{table})"
            )
        copy.execute("COMMIT")
        copy.execute("DETACH DATABASE live")
        copy.execute("PRAGMA journal_mode = DELETE")
    finally:
        copy.close()


def restore_segments(backup_path: Path, data_dir: Path) -> SegmentsCopied:
    """Make `data_dir/history/` hold the backup's segments and nothing else: every segment file
    there before is removed (its applied index belongs to the old log: a stale file would make
    the new log's replay skip its parts). An open segment's applied index starts again at 0,
    as the restored database's does."""
    history = segments.history_dir(data_dir)
    shutil.rmtree(history, ignore_errors=True)
    history.mkdir(parents=True)
    source_dir = history_of(backup_path)
    missing: list[str] = []
    copied = 0
    for name, state in listed(backup_path):
        source = source_dir / f"{name}.db"
        if not source.exists():
            missing.append(name)
            continue
        target = segments.segment_path(data_dir, name)
        shutil.copyfile(source, target)
        if state != segments.CLOSED:
            conn = sqlite3.connect(str(target), isolation_level=None)
            try:
                conn.execute("UPDATE meta SET value = 0 WHERE key = 'applied_index'")
            finally:
                conn.close()
        with target.open("rb") as f:
            os.fsync(f.fileno())
        copied += 1
    sync_dir(history)
    return SegmentsCopied(copied, tuple(missing))
