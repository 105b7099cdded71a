"""Partition leases: every node heartbeats; the leader hands partitions of dead nodes to live
ones and evens out the counts. Every change is a committed, compare-and-set command."""

from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from schedd.config import DispatchSettings
from schedd.errors import ClusterUnavailable
from schedd.loop import Loop
from schedd.store.commands import AssignLeases, LeaseMove, LogCommand, NodeHeartbeat, R
from schedd.store.leases import Lease, live_nodes, read_leases

log = logging.getLogger(__name__)
LEASE_TTL_MS = DispatchSettings().lease_ttl_ms  # [dispatch] lease_ttl, declared in config.py
HEARTBEAT_EVERY_S = 1.0
PLAN_EVERY_S = 1.0
MAX_REBALANCE_MOVES = 64  # per round: moving a live lease costs its holder a preload


class Propose(Protocol):
    """Propose a command and wait for its result (raft.proposer.ThreadProposer.propose)."""

    def __call__(self, cmd: LogCommand[R]) -> R: ...


def plan_moves(
    partitions: int | Sequence[int], leases: Mapping[int, Lease], live: list[str], now_ms: int
) -> list[LeaseMove]:
    """Moves that give every partition a live holder and keep counts within one of each other.
    `partitions`: a count (0..count-1), or the partitions themselves (a cell's range)."""
    if not live:
        return []
    leased = range(partitions) if isinstance(partitions, int) else partitions
    held: dict[str, list[int]] = {node: [] for node in live}
    orphans = []
    for partition in leased:
        lease = leases.get(partition)
        if lease is not None and lease.node_id in held and lease.is_valid(now_ms):
            held[lease.node_id].append(partition)
        else:
            orphans.append(partition)
    moves: list[LeaseMove] = []
    for partition in orphans:
        node = min(live, key=lambda n: (len(held[n]), n))
        held[node].append(partition)
        moves.append(_move(partition, node, leases))
    ceiling = math.ceil(len(leased) / len(live))
    for _ in range(MAX_REBALANCE_MOVES):
        busiest = max(live, key=lambda n: (len(held[n]), n))
        idlest = min(live, key=lambda n: (len(held[n]), n))
        if len(held[busiest]) <= ceiling and len(held[busiest]) - len(held[idlest]) <= 1:
            break
        partition = held[busiest].pop()
        held[idlest].append(partition)
        moves.append(_move(partition, idlest, leases))
    return moves


def _move(partition: int, node: str, leases: Mapping[int, Lease]) -> LeaseMove:
    lease = leases.get(partition)
    return LeaseMove(partition=partition, node_id=node, epoch=0 if lease is None else lease.epoch)


class Heartbeat(Loop):
    """Tells the cluster this node is alive; the commit renews every lease it holds."""

    def __init__(self, node_id: str, propose: Propose, *, ttl_ms: int = LEASE_TTL_MS) -> None:
        super().__init__("heartbeat")
        self._node_id = node_id
        self._propose = propose
        self._ttl_ms = ttl_ms

    def tick(self, now_ms: int) -> float:
        try:
            self._propose(NodeHeartbeat(node_id=self._node_id, ttl_ms=self._ttl_ms))
        except ClusterUnavailable as exc:
            log.debug("heartbeat not committed: %s", exc)
        return HEARTBEAT_EVERY_S


class LeaseManager(Loop):
    """On the node that believes it leads: propose lease moves. Being wrong is harmless: moves
    are compare-and-set in apply, and claims are fenced by the lease epoch."""

    def __init__(
        self,
        partitions: int | Sequence[int],
        connect: Callable[[], sqlite3.Connection],
        is_leader: Callable[[], bool],
        propose: Propose,
        *,
        ttl_ms: int = LEASE_TTL_MS,
    ) -> None:
        super().__init__("lease-manager", first_wait_s=PLAN_EVERY_S)
        self._partitions = partitions
        self._ttl_ms = ttl_ms
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._is_leader = is_leader
        self._propose = propose

    def tick(self, now_ms: int) -> float:
        if not self._is_leader():
            return PLAN_EVERY_S
        if self._conn is None:
            self._conn = self._connect()
        live = live_nodes(self._conn, now_ms, self._ttl_ms)
        moves = plan_moves(self._partitions, read_leases(self._conn), live, now_ms)
        if moves:
            try:
                result = self._propose(AssignLeases(ttl_ms=self._ttl_ms, moves=tuple(moves)))
                log.info("leases moved count=%s planned=%d", result.moved, len(moves))
            except ClusterUnavailable as exc:
                log.debug("lease moves not committed: %s", exc)
        return PLAN_EVERY_S
