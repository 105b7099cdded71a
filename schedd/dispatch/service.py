"""One node's dispatch machinery: heartbeat, lease manager, dispatcher and pruner, started and
stopped together, and told about committed due runs (DueAdded) and snapshot installs."""

from __future__ import annotations

import sqlite3
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path

from schedd.dispatch.clock import ClockGuard, ClockProbe
from schedd.dispatch.dispatcher import Dispatcher
from schedd.dispatch.forecast_watch import ForecastWatch
from schedd.dispatch.leases import Heartbeat, LeaseManager
from schedd.dispatch.overdue import OverdueScanner
from schedd.dispatch.pruner import Pruner
from schedd.peers import PeerReports
from schedd.raft.proposer import ThreadProposer
from schedd.retention import Retention
from schedd.store.db import connect
from schedd.store.events import DueAdded

STOP_WAIT_S = 1.0


class DispatchService:
    """Owns the dispatch threads of a node."""

    def __init__(
        self,
        node_id: str,
        partitions: int,
        db_path: Path,
        is_leader: Callable[[], bool],
        leader_address: Callable[[], str | None],
        step_down: Callable[[], None],
        proposer: ThreadProposer,
        clock: ClockGuard,
        *,
        lease_ttl_ms: int,
        misfire_threshold_ms: int,
        retention: Retention,
        peer_tls: ssl.SSLContext | None = None,
        peers: PeerReports | None = None,
        owned: Sequence[int] | None = None,
    ) -> None:
        """`owned`: the partitions leased out (a cell's range); None: all of `partitions`."""

        def reader() -> sqlite3.Connection:
            return connect(db_path, readonly=True)

        def lagging(level: int) -> list[str]:
            return peers.lagging(level) if peers else []

        self.dispatcher = Dispatcher(
            node_id,
            partitions,
            reader,
            proposer.submit,
            misfire_threshold_ms=misfire_threshold_ms,
            is_clock_trusted=clock.is_trusted,
            lagging=lagging,
        )
        self._loops = [
            ClockProbe(
                node_id,
                clock,
                reader,
                leader_address,
                step_down,
                tls=peer_tls,
                peers=peers,
            ),
            # Their proposals are refused while the clock is distrusted (Proposer's refusal):
            # no heartbeat, so this node's leases expire and move; no lease moves.
            Heartbeat(node_id, proposer.propose, ttl_ms=lease_ttl_ms),
            LeaseManager(
                partitions if owned is None else owned,
                reader,
                is_leader,
                proposer.propose,
                ttl_ms=lease_ttl_ms,
            ),
            self.dispatcher,
            Pruner(
                retention,
                reader,
                is_leader,
                proposer.propose,
                partitions=partitions,
                lagging=lagging,
            ),
            OverdueScanner(
                reader, is_leader, proposer.propose, partitions=partitions, lagging=lagging
            ),
            ForecastWatch(reader, is_leader, node_id=node_id, partitions=partitions),
        ]

    def start(self) -> None:
        for loop in self._loops:
            loop.start()

    def stop(self) -> None:
        """Stop all loops; one blocked in a proposal that cannot commit (no quorum) is not
        waited for long: its thread is a daemon and the node is going away."""
        for loop in reversed(self._loops):
            loop.stop(timeout_s=STOP_WAIT_S)

    def on_restored(self) -> None:
        """A snapshot replaced the store's content (tick thread): the dispatcher reads it anew."""
        self.dispatcher.forget()

    def on_due(self, events: list[DueAdded]) -> None:
        """Due rows were committed (tick thread): the dispatcher fires them without a preload."""
        self.dispatcher.offer_many(
            (due.job_id, due.fire_at_ms, due.scheduled_at_ms, due.is_trigger) for due in events
        )
