"""Cluster routes (admin): the members and their partitions, one node's state digest."""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web
from msgspec import UNSET

from schedd.api.context import CONTEXT
from schedd.api.http import (
    json_response,
    principal,
)
from schedd.model import RaftView
from schedd.store import queries
from schedd.store.digest import state_digest
from schedd.wire.cluster import AdminState, Cluster, ClusterNode


async def cluster(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    status = ctx.raft.status()
    registered = await ctx.reads.read(queries.list_nodes)
    leases = await ctx.reads.read(lambda conn: queries.partitions_by_node(conn, ctx.clock_ms()))
    names = {raft: node_id for node_id, _, raft in registered}
    nodes = [
        _node_json(status, node_id, api, raft, leases.get(node_id, []))
        for node_id, api, raft in registered
    ]
    if status.address not in names:  # not registered yet: show this node anyway
        nodes.append(_node_json(status, ctx.node_id, None, status.address, []))
    members = ctx.raft.members()  # Raft addresses, as this node's journal has them
    cell = UNSET if ctx.cells is None else ctx.cells.cell
    leader = _named(names, status.leader)
    return json_response(Cluster(leader=leader, members=members, nodes=nodes, cell=cell))


def _named(names: Mapping[str, str], raft: str | None) -> str | None:
    """A member's node id when registered, else its Raft address (None: no leader known)."""
    return raft if raft is None else names.get(raft, raft)


def _node_json(
    status: RaftView, node_id: str, api: str | None, raft: str, partitions: list[int]
) -> ClusterNode:
    """The member from this node's view of the Raft group."""
    is_self = raft == status.address
    return ClusterNode(
        node_id=node_id,
        api=api,
        raft=raft,
        role="leader" if raft == status.leader else "follower",
        healthy=is_self or bool(status.connected.get(raft)),
        partitions=partitions,
        applied_index=status.applied_index if is_self else status.match_index.get(raft),
    )


async def admin_state(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    status = ctx.raft.status()
    index, digest = await ctx.reads.read(state_digest)
    names = {raft: node_id for node_id, _, raft in await ctx.reads.read(queries.list_nodes)}
    return json_response(
        AdminState(
            node_id=ctx.node_id,
            role=status.role,
            leader=_named(names, status.leader),
            term=status.term,
            applied_index=index,
            digest=digest,
        )
    )
