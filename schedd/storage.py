"""Free space in a node's data directory, against `[storage] min_free`: a full disk is answered
(writes refused with 507 before they enter the log) instead of halting every node at once."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from schedd.peers import PeerReports

CHECK_EVERY_S = 1.0  # statvfs is cheap; a write burst cannot fill many MB in a second unseen


@dataclass(frozen=True, slots=True, kw_only=True)
class MinFree:
    """The least free space a node keeps: bytes, or a percentage of the file system."""

    bytes: int = 0
    percent: float = 0.0

    def threshold(self, total_bytes: int) -> int:
        return max(self.bytes, int(total_bytes * self.percent / 100))


@dataclass(frozen=True, slots=True)
class DiskReading:
    free_bytes: int
    total_bytes: int
    min_free_bytes: int

    @property
    def is_low(self) -> bool:
        return self.free_bytes < self.min_free_bytes


class DiskWatch:
    """Reads the data directory's file system at most once a second (callers may be hot)."""

    def __init__(self, data_dir: Path, min_free: MinFree) -> None:
        self.directory = data_dir
        self.min_free = min_free
        self._reading: DiskReading | None = None
        self._read_at = 0.0

    def reading(self) -> DiskReading:
        now = time.monotonic()
        if self._reading is None or now - self._read_at >= CHECK_EVERY_S:
            stat = os.statvfs(self.directory)
            total = stat.f_blocks * stat.f_frsize
            self._reading = DiskReading(
                free_bytes=stat.f_bavail * stat.f_frsize,
                total_bytes=total,
                min_free_bytes=self.min_free.threshold(total),
            )
            self._read_at = now
        return self._reading

    def problem(self) -> str | None:
        """Why this node refuses writes, or None."""
        reading = self.reading()
        if not reading.is_low:
            return None
        return (
            f"free disk space in the data directory is {format_size(reading.free_bytes)}, "
            f"below storage.min_free ({format_size(reading.min_free_bytes)})"
        )


class StorageGuard:
    """This node's disk and its peers' (their reports, `peers.PeerReports`): writes that add
    data are refused when this node is low or when a majority of the cluster is."""

    def __init__(self, disk: DiskWatch, peers: PeerReports) -> None:
        self.disk = disk
        self.peers = peers

    def problem(self) -> str | None:
        """Why writes that add data are refused now, or None."""
        own = self.disk.problem()
        if own is not None:
            return own
        low = self.peers.low_disk()
        if len(low) > self.peers.cluster_size() // 2:
            return (
                f"a majority of the nodes are low on disk space ({', '.join(low)} below their "
                "storage.min_free)"
            )
        return None


def format_size(size: int) -> str:
    """Bytes for people: 1.5 GiB, 512.0 MiB, 27.9 KiB, 0 B."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} B"


def file_sizes(data_dir: Path) -> dict[str, int]:
    """Bytes on disk of the database (with its WAL), the Raft journal and the snapshot."""
    groups = {"database": "state.db*", "journal": "raft.journal*", "snapshot": "raft.snapshot*"}
    sizes = {}
    for name, pattern in groups.items():
        total = 0
        for path in data_dir.glob(pattern):
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                continue  # replaced while we looked
        sizes[name] = total
    return sizes
