"""`schedctl cluster add-node|remove-node|step-down`: Raft membership, one node at a time
(admin token; docs/operations.md walks through adding, removing and replacing a node)."""

from __future__ import annotations

import time

import click

from schedd.addresses import reachable_api_url
from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option
from schedd.errors import ClusterUnavailable, NotFound
from schedd.wire.cluster import ClusterNode, NodeAdded, NodeRemoved, NodeToAdd, SteppedDown

HANDOVER_TIMEOUT_S = 15.0


@click.group()
def cluster() -> None:
    """Change the cluster's members (admin token), one node at a time."""


@cluster.command(
    "add-node",
    epilog="""\b
Start the new node first, its [raft] peers listing the current members, with the same
raft secret and [cluster] partitions. Then:
  schedctl cluster add-node 10.0.0.4:9701
It catches up from the leader; `schedctl status` shows its lag. Add the next one only after.""",
)
@click.argument("raft_address")
@json_option('{"added": ..., "members": [...]}')
@click.pass_obj
def add_node(client: Client, raft_address: str, as_json: bool) -> None:
    """Add the node listening for Raft on RAFT_ADDRESS (host:port) to the cluster."""
    answer = client.answer(NodeAdded, "POST", "/v1/cluster/nodes", NodeToAdd(raft_address))
    if as_json:
        render.print_json(answer.raw)
        return
    added = answer.view
    click.echo(f"added {added.added}; members now: {', '.join(added.members)}")
    click.echo("it catches up from the leader now: watch its lag with `schedctl status`")


@cluster.command(
    "remove-node",
    epilog="""\b
NODE is a node id (n3) or a Raft address (10.0.0.3:9701); a dead node can be removed.
A leader is first asked to hand leadership over. Afterwards stop the node and drop it
from the other nodes' [raft] peers (their journals already know the change).""",
)
@click.argument("node")
@json_option('{"removed": ..., "node_id": ..., "members": [...]}')
@click.pass_obj
def remove_node(client: Client, node: str, as_json: bool) -> None:
    """Remove NODE from the cluster, through one of the other members."""
    nodes = client.cluster().view.nodes
    target = next((n for n in nodes if node in (n.node_id, n.raft)), None)
    others = [n for n in nodes if n is not target and n.api]
    if target is not None and target.role == "leader":
        _hand_over(client, target, others)
    through = _client_for(client, others) if others else client
    answer = through.answer(NodeRemoved, "DELETE", f"/v1/cluster/nodes/{node}")
    if as_json:
        render.print_json(answer.raw)
        return
    removed = answer.view
    name = removed.node_id or removed.removed
    members = ", ".join(removed.members)
    click.echo(f"removed {name} ({removed.removed}); members now: {members}")
    click.echo(f"stop {name} now, and drop it from the other nodes' [raft] peers")


@cluster.command("step-down")
@json_option('{"leader": ...}')
@click.pass_obj
def step_down(client: Client, as_json: bool) -> None:
    """Ask the leader to hand leadership to a caught-up follower (before maintenance)."""
    nodes = client.cluster().view.nodes
    leader = next((n for n in nodes if n.role == "leader" and n.api), None)
    if leader is None:
        raise ClusterUnavailable("no leader known: nothing to step down")
    answer = _step_down(_client_for(client, [leader]))
    if as_json:
        render.print_json(answer.raw)
    else:
        click.echo(f"{leader.node_id} stepped down; the leader is now {answer.view.leader}")


def _step_down(leader: Client) -> Answer[SteppedDown]:
    return leader.answer(SteppedDown, "POST", "/v1/cluster/leader/step-down")


def _client_for(client: Client, nodes: list[ClusterNode]) -> Client:
    """The same credentials, aimed at these nodes' APIs."""
    urls = ",".join(reachable_api_url(n.api or "", n.raft) for n in nodes)
    return Client(
        urls,
        token=client.token,
        tenant=client.tenant,
        timeout_s=client.timeout_s,
        cacert=client.cacert,
    )


def _hand_over(client: Client, leader: ClusterNode, others: list[ClusterNode]) -> None:
    """Make the leader step down and wait until another node leads."""
    _step_down(_client_for(client, [leader]))
    if not others:
        raise NotFound("no other member with an API to send the removal to")
    deadline = time.monotonic() + HANDOVER_TIMEOUT_S
    while time.monotonic() < deadline:
        now_leader = _client_for(client, others).cluster().view.leader
        if now_leader not in (None, leader.node_id, leader.raft):
            return
        time.sleep(0.3)
    raise ClusterUnavailable(f"no other node took over within {HANDOVER_TIMEOUT_S:g}s")
