"""`schedctl status`: the cluster as the leader sees it, and each node as it sees itself.

`GET /v1/cluster` (from any node) names the nodes, the leader and the partitions; each node's
own `GET /metrics` adds its term, applied index, due backlog and claim lag. Exit 1 when there
is no leader or a node is unhealthy or unreachable, so scripts and monitors can use it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import click
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option
from schedd.cli.ctl.top import scrape, window_p99
from schedd.jsonbody import JSONValue
from schedd.wire.cluster import Cluster, ClusterNode


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeFigures:
    """What `status` shows from one node's own /metrics."""

    term: int
    applied_index: int
    backlog: int
    claim_lag_p99_s: float | None
    broker_connections: dict[str, int]  # tenants' broker connections, "up" and "down"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeStatus:
    """A member as GET /v1/cluster names it, with its own figures (None: unreachable)."""

    node: ClusterNode
    raw: JSONValue
    figures: NodeFigures | None
    applied_index: int | None
    lag: int | None = None

    @property
    def is_reachable(self) -> bool:
        return self.figures is not None

    def as_json(self) -> dict[str, JSONValue]:
        """The member's object with `status`'s figures (null where unreachable)."""
        figures = self.figures
        shown: dict[str, JSONValue] = {
            "partitions": len(self.node.partitions),
            "reachable": self.is_reachable,
            "term": None if figures is None else figures.term,
            "backlog": None if figures is None else figures.backlog,
            "claim_lag_p99_s": None if figures is None else figures.claim_lag_p99_s,
            "broker_connections": None if figures is None else dict(figures.broker_connections),
            "applied_index": self.applied_index,
            "lag": self.lag,
        }
        return (self.raw if isinstance(self.raw, dict) else {}) | shown


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """GET /v1/cluster's answer and each member's status."""

    cluster: Answer[Cluster]
    nodes: list[NodeStatus]

    @property
    def is_ok(self) -> bool:
        """A leader, and every node healthy and reachable."""
        healthy = all(node.node.healthy and node.is_reachable for node in self.nodes)
        return bool(self.cluster.view.leader) and healthy

    def as_json(self) -> dict[str, JSONValue]:
        nodes: list[JSONValue] = [node.as_json() for node in self.nodes]
        return self.cluster.raw | {"nodes": nodes, "ok": self.is_ok}


def node_metrics(api: str, client: Client) -> NodeFigures | None:
    """The figures `status` shows from one node's /metrics (None if it cannot be read)."""
    sample = scrape(api, client.timeout_s, client.token, client.tls_for(api))
    if sample is None:
        return None
    return NodeFigures(
        term=int(sample.get("schedd_raft_term")),
        applied_index=int(sample.get("schedd_raft_applied_index")),
        backlog=int(sample.get("schedd_due_backlog")),
        # Since the node started: the window from an empty "before" to now.
        claim_lag_p99_s=window_p99({}, {api: sample}, "schedd_claim_lag_seconds"),
        broker_connections={
            state: int(
                sum(
                    value
                    for labels, value in sample.matching("schedd_broker_connections").items()
                    if dict(labels).get("state") == state
                )
            )
            for state in ("up", "down")
        },
    )


def gather(client: Client) -> ClusterStatus:
    """GET /v1/cluster, each node's own metrics, and whether all is well."""
    cluster = client.cluster()
    raw_nodes = cluster.raw.get("nodes")
    raws = raw_nodes if isinstance(raw_nodes, list) else []
    nodes = [
        _node_status(node, raw, client) for node, raw in zip(cluster.view.nodes, raws, strict=True)
    ]
    leader = next((n.applied_index or 0 for n in nodes if n.node.role == "leader"), 0)
    return ClusterStatus(cluster, [replace(n, lag=_lag(n.applied_index, leader)) for n in nodes])


def _lag(index: int | None, leader_index: int) -> int | None:
    return None if index is None or not leader_index else max(0, leader_index - index)


def _node_status(node: ClusterNode, raw: JSONValue, client: Client) -> NodeStatus:
    figures = node_metrics(node.api, client) if node.api else None
    # The node's own applied index; else the leader's view of it (0: a new leader knows
    # nothing of it yet, shown as unknown).
    index = figures.applied_index if figures is not None else node.applied_index or None
    return NodeStatus(node=node, raw=raw, figures=figures, applied_index=index)


@click.command(
    epilog="""\b
Examples:
  SCHEDCTL_TOKEN=$(cat var/dev/admin.token) schedctl status   # a dev cluster's admin token
  schedctl --url http://10.0.0.1:8701,http://10.0.0.2:8701 status --json
  schedctl status >/dev/null || alert "schedd cluster degraded"

\b
Exit 0 when there is a leader and every node is healthy and reachable; 1 otherwise.""",
)
@json_option(
    "GET /v1/cluster's object, each node with term, lag, backlog, claim_lag_p99_s,"
    ' broker_connections (up, down) and "ok"'
)
@click.pass_obj
def status(client: Client, as_json: bool) -> None:
    """Show the cluster: each node's role, health, applied index, lag and backlog."""
    cluster = gather(client)
    if as_json:
        render.print_json(cluster.as_json())
    else:
        show(cluster)
    if not cluster.is_ok:
        sys.exit(1)


HEADERS = (
    "NODE",
    "ROLE",
    "HEALTHY",
    "TERM",
    "APPLIED",
    "LAG",
    "PARTITIONS",
    "BACKLOG",
    "CLAIM LAG P99",
    "BROKERS UP/DOWN",
    "API",
)


def show(cluster: ClusterStatus) -> None:
    """The nodes as a table (a node `status` could not reach is `unreachable`), then the leader."""
    render.print_table(HEADERS, [_row(node) for node in cluster.nodes])
    leader = cluster.cluster.view.leader
    render.console().print(
        Text(f"leader: {leader}" if leader else "leader: none", style="" if leader else "red")
    )


def _row(status: NodeStatus) -> tuple[render.Cell, ...]:
    node, figures = status.node, status.figures
    role = node.role if figures is not None else "unreachable"
    healthy = node.healthy and figures is not None
    p99 = None if figures is None else figures.claim_lag_p99_s
    return (
        node.node_id,
        Text(role, style="bold" if role == "leader" else ("red" if role == "unreachable" else "")),
        Text("yes", style="green") if healthy else Text("no", style="red"),
        _cell(None if figures is None else figures.term),
        _cell(status.applied_index),
        _cell(status.lag),
        str(len(node.partitions)),
        _cell(None if figures is None else figures.backlog),
        "-" if p99 is None else f"<= {p99:g}s",
        _brokers(None if figures is None else figures.broker_connections),
        node.api or "-",
    )


def _brokers(connections: dict[str, int] | None) -> Text | str:
    """Tenants' broker connections the node holds, up/down (red when one is down)."""
    if connections is None:
        return "-"
    text = f"{connections['up']}/{connections['down']}"
    return Text(text, style="red") if connections["down"] else text


def _cell(value: object) -> str:
    return "-" if value is None else str(value)
