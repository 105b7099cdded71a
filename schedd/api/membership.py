"""Membership routes (admin): add a node to the Raft group, remove one, hand leadership over.
`schedctl cluster add-node|remove-node|step-down` call them; docs/operations.md has the steps."""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import json_response, principal, propose, read_object
from schedd.bodies import convert_body
from schedd.errors import Conflict, NoLeader, NotFound
from schedd.raft.membership import parse_address
from schedd.store import queries
from schedd.store.commands import DeregisterNode
from schedd.wire.cluster import NodeAdded, NodeRemoved, NodeToAdd, SteppedDown

log = logging.getLogger(__name__)
BODY_LIMIT = 4 * 1024
HANDOVER_TIMEOUT_S = 10.0


async def add_node(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    asked = convert_body(await read_object(request, limit_bytes=BODY_LIMIT), NodeToAdd)
    address = parse_address(asked.raft)
    if address in ctx.raft.members():
        raise Conflict(f"{address} is already a member")
    await ctx.raft.change_membership("add", address)
    log.warning("cluster membership: added %s", address)
    return json_response(NodeAdded(added=address, members=ctx.raft.members()))


async def remove_node(request: web.Request) -> web.Response:
    """Remove a member named by node id or Raft address, through another member: a removed node
    hears nothing more, not even that its removal committed. The leader steps down first."""
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    node_id, address = await _resolve(ctx, request.match_info["node"])
    status = ctx.raft.status()
    if address == status.address:
        raise Conflict(f"{address} is this node: send the removal to another member")
    if address == status.leader:
        raise Conflict(
            f"{address} leads the cluster: POST /v1/cluster/leader/step-down to it first "
            "(schedctl cluster remove-node does)"
        )
    await ctx.raft.change_membership("remove", address)
    log.warning("cluster membership: removed %s (%s)", address, node_id or "never registered")
    if node_id is not None:
        await propose(ctx, DeregisterNode(node_id=node_id))
    return json_response(NodeRemoved(removed=address, node_id=node_id, members=ctx.raft.members()))


async def step_down(request: web.Request) -> web.Response:
    """Sent to the leader: leadership passes to a caught-up follower (maintenance, removal)."""
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    leader = await _hand_over(ctx)
    return json_response(SteppedDown(leader=leader))


async def _resolve(ctx: ApiContext, name: str) -> tuple[str | None, str]:
    """(node_id if registered, Raft address) of a member named either way."""
    registered = await ctx.reads.read(queries.list_nodes)
    by_id = {node_id: raft for node_id, _, raft in registered}
    by_raft = {raft: node_id for node_id, _, raft in registered}
    address = by_id.get(name) or (parse_address(name, field="node") if ":" in name else None)
    if address is None or address not in ctx.raft.members():
        raise NotFound(f"no member {name!r} (members: {', '.join(ctx.raft.members())})")
    return by_raft.get(address), address


async def _hand_over(ctx: ApiContext) -> str:
    """Ask this node, the leader, to hand leadership over; the new leader's Raft address."""
    status = ctx.raft.status()
    if status.leader != status.address:
        raise Conflict(f"this node does not lead; the leader is {status.leader}")
    if len(ctx.raft.members()) < 2:
        raise Conflict("this node is the only member: nobody to hand leadership to")
    deadline = time.monotonic() + HANDOVER_TIMEOUT_S
    while time.monotonic() < deadline:
        ctx.raft.step_down()  # refused while no follower has caught up: asked again
        await asyncio.sleep(0.5)
        leader = ctx.raft.status().leader
        if leader is not None and leader != status.address:
            return str(leader)
    raise NoLeader(f"no follower took over within {HANDOVER_TIMEOUT_S:g}s; nothing changed")
