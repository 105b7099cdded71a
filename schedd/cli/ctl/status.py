"""`schedctl status`: the cluster as the leader sees it, and each node as it sees itself.

`GET /v1/cluster` (from any node) names the nodes, the leader and the partitions; each node's
own `GET /metrics` adds its term, applied index, due backlog and claim lag. Exit 1 when there
is no leader or a node is unhealthy or unreachable, so scripts and monitors can use it.
"""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option
from schedd.cli.ctl.top import scrape, window_p99


def node_metrics(api: str, client: Client) -> dict[str, Any]:
    """The figures `status` shows from one node's /metrics (empty if it cannot be read)."""
    sample = scrape(api, client.timeout_s, client.token, client.tls_for(api))
    if sample is None:
        return {}
    return {
        "term": int(sample.get("schedd_raft_term")),
        "applied_index": int(sample.get("schedd_raft_applied_index")),
        "backlog": int(sample.get("schedd_due_backlog")),
        # Since the node started: the window from an empty "before" to now.
        "claim_lag_p99_s": window_p99({}, {api: sample}, "schedd_claim_lag_seconds"),
        "broker_connections": {
            state: int(
                sum(
                    value
                    for labels, value in sample.matching("schedd_broker_connections").items()
                    if dict(labels).get("state") == state
                )
            )
            for state in ("up", "down")
        },
    }


def gather(client: Client) -> dict[str, Any]:
    """GET /v1/cluster, each node's own metrics, and whether all is well."""
    cluster: dict[str, Any] = client.cluster()
    leader_index = 0
    for node in cluster["nodes"]:
        node["partitions"] = len(node.get("partitions") or [])
        seen = node_metrics(node["api"], client) if node.get("api") else {}
        node["reachable"] = bool(seen)
        shown = ("term", "backlog", "claim_lag_p99_s", "broker_connections")
        node.update({key: seen.get(key) for key in shown})
        if seen.get("applied_index") is not None:
            node["applied_index"] = seen["applied_index"]
        elif not node.get("applied_index"):
            node["applied_index"] = None  # a new leader knows nothing of it yet: not "0"
        if node["role"] == "leader":
            leader_index = node.get("applied_index") or 0
    for node in cluster["nodes"]:
        index = node.get("applied_index")
        node["lag"] = None if index is None or not leader_index else max(0, leader_index - index)
    cluster["ok"] = bool(cluster.get("leader")) and all(
        node["healthy"] and node["reachable"] for node in cluster["nodes"]
    )
    return cluster


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
        render.print_json(cluster)
    else:
        show(cluster)
    if not cluster["ok"]:
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


def show(cluster: dict[str, Any]) -> None:
    """The nodes as a table (a node `status` could not reach is `unreachable`), then the leader."""
    render.print_table(HEADERS, [_row(node) for node in cluster["nodes"]])
    leader = cluster.get("leader")
    render.console().print(
        Text(f"leader: {leader}" if leader else "leader: none", style="" if leader else "red")
    )


def _row(node: dict[str, Any]) -> tuple[render.Cell, ...]:
    role = node["role"] if node["reachable"] else "unreachable"
    healthy = node["healthy"] and node["reachable"]
    return (
        node["node_id"],
        Text(role, style="bold" if role == "leader" else ("red" if role == "unreachable" else "")),
        Text("yes", style="green") if healthy else Text("no", style="red"),
        _cell(node.get("term")),
        _cell(node.get("applied_index")),
        _cell(node.get("lag")),
        str(node["partitions"]),
        _cell(node.get("backlog")),
        "-" if node.get("claim_lag_p99_s") is None else f"<= {node['claim_lag_p99_s']:g}s",
        _brokers(node.get("broker_connections")),
        node.get("api") or "-",
    )


def _brokers(connections: dict[str, int] | None) -> Text | str:
    """Tenants' broker connections the node holds, up/down (red when one is down)."""
    if connections is None:
        return "-"
    text = f"{connections['up']}/{connections['down']}"
    return Text(text, style="red") if connections["down"] else text


def _cell(value: object) -> str:
    return "-" if value is None else str(value)
