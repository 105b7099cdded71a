"""What this node last heard from each peer's /healthz (read by the clock probe every 2 s):
whether its disk is low, and the log level it applies (store/commands.py LOG_LEVEL)."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

DISK_REPORT_TTL_S = 10.0  # a disk report older than this no longer counts
# What `lagging` names until a probe round has read the members from a store that lists this
# node (a node just started, or wiped and not yet restored): any of them may be old, so newer
# commands wait (found by upgrade chaos rounds: a node restarted on new code, or wiped,
# proposed claim_batch and add_jobs at once, and the old members halted).
MEMBERS_NOT_HEARD = "(the members: not heard from yet)"


@dataclass(frozen=True, slots=True)
class PeerReport:
    disk_low: bool = False
    log_level: int = 1  # a node that does not say is of the first version


class PeerReports:
    """Thread-safe: the clock probe's thread writes, the API and the pruner read."""

    def __init__(self, node_id: str) -> None:
        self._node_id = node_id
        self._lock = threading.Lock()
        self._reports: dict[str, tuple[PeerReport, float]] = {}  # node id -> (report, read at)
        self._members: tuple[str, ...] | None = None  # registered node ids, this one included

    def record(self, reports: Mapping[str, PeerReport], members: Collection[str] | None) -> None:
        """One probe round: the peers that answered, and the registered nodes (None: this
        node's store does not list this node yet, so `lagging` names MEMBERS_NOT_HEARD)."""
        now = time.monotonic()
        with self._lock:
            self._reports.update({node: (report, now) for node, report in reports.items()})
            self._members = None if members is None else tuple(members)

    def members_known(self) -> bool:
        """Whether a probe round has listed the members (readiness waits for it)."""
        with self._lock:
            return self._members is not None

    def cluster_size(self) -> int:
        with self._lock:
            return max(len(self._members or ()), 1)

    def low_disk(self) -> list[str]:
        """Peers whose latest report, recent enough, says their disk is low."""
        now = time.monotonic()
        with self._lock:
            return sorted(
                node
                for node, (report, at) in self._reports.items()
                if report.disk_low and now - at < DISK_REPORT_TTL_S
            )

    def lagging(self, level: int) -> list[str]:
        """Members whose last report says (or who have not said yet) that they cannot apply
        commands of `level`: such commands must wait. Reports never expire here: a member that
        is down keeps the level it last said. Until a probe round has listed them:
        MEMBERS_NOT_HEARD."""
        with self._lock:
            if self._members is None:
                return [MEMBERS_NOT_HEARD]
            return sorted(
                node
                for node in self._members
                if node != self._node_id
                and (node not in self._reports or self._reports[node][0].log_level < level)
            )
