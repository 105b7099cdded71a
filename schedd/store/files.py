"""Durable file swaps: a file is fsynced before it is renamed into place, its directory after.

Without both, a power loss can leave the new name pointing at an empty or partial file, or the
old name back. Only whole-file swaps live here; SQLite and pysyncobj sync their own writes.
"""

from __future__ import annotations

import os
from pathlib import Path


def sync_file(path: Path) -> None:
    """fsync the content of the file at `path`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(path: Path) -> None:
    """fsync a directory, so that the names created, renamed or removed in it persist."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_replace(source: Path, target: Path, *, is_source_synced: bool = False) -> None:
    """Rename `source` onto `target` so that after a crash or a power loss `target` is either
    the old file or the complete new one. `is_source_synced`: its content was fsynced already
    (by whoever wrote it, off a latency-sensitive thread)."""
    if not is_source_synced:
        sync_file(source)
    os.replace(source, target)
    sync_dir(target.parent)
