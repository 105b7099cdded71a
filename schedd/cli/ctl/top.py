"""`schedctl top`: a live view of the cluster from every node's /metrics, refreshed until ^C.

Rates (runs claimed, callbacks) are the change of the nodes' counters between two refreshes,
summed over the nodes; the claim lag p99 is taken from the histogram buckets that changed in
that interval. Gauges of the replicated state (backlog, queues) come from the leader.
"""

from __future__ import annotations

import math
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import click
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from schedd.cli.ctl.client import Client
from schedd.cli.ctl.older_nodes import TenantRow
from schedd.cli.ctl.render import json_option, print_fields, print_json, print_table, rich_table
from schedd.jsonbody import JSONValue
from schedd.wire.cluster import Cluster
from schedd.wire.tenants import TenantView

Labels = tuple[tuple[str, str], ...]


@dataclass
class Sample:
    """One node's metrics at one moment: every sample by (name, labels)."""

    at_s: float
    values: dict[tuple[str, Labels], float] = field(default_factory=dict)

    def get(self, name: str, **labels: str) -> float:
        return self.values.get((name, tuple(sorted(labels.items()))), 0.0)

    def matching(self, name: str) -> dict[Labels, float]:
        return {labels: v for (n, labels), v in self.values.items() if n == name}


def scrape(
    api: str, timeout_s: float, token: str | None = None, context: ssl.SSLContext | None = None
) -> Sample | None:
    """One node's /metrics (the admin token opens it on the API port), or None."""
    request = urllib.request.Request(f"{api.rstrip('/')}/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
            text = answer.read().decode()
    except (urllib.error.URLError, OSError, ValueError):
        return None
    # Imported here: only top and status scrape, and the parser costs every other command
    # about 20 ms of its start.
    from prometheus_client.parser import text_string_to_metric_families

    sample = Sample(time.monotonic())
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            sample.values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return sample


def rate(before: dict[str, Sample], after: dict[str, Sample], name: str, **labels: str) -> float:
    """Per second, summed over the nodes seen both times (a restarted node counts from 0)."""
    total = 0.0
    for node, now in after.items():
        then = before.get(node)
        if then is None or now.at_s <= then.at_s:
            continue
        delta = now.get(name, **labels) - then.get(name, **labels)
        total += max(0.0, delta) / (now.at_s - then.at_s)
    return total


def connections(after: dict[str, Sample], kind: str) -> tuple[str, str]:
    """A broker kind's tenant connections the nodes hold, up and down ("-" for http)."""
    if kind == "http":
        return "-", "-"
    up, down = (
        sum(s.get("schedd_broker_connections", kind=kind, state=state) for s in after.values())
        for state in ("up", "down")
    )
    return f"{int(up)}", f"{int(down)}"


def window_p99(before: dict[str, Sample], after: dict[str, Sample], name: str) -> float | None:
    """p99 (bucket bound) of the observations made between the two scrapes, all nodes."""
    counts: dict[float, float] = defaultdict(float)
    for node, now in after.items():
        then = before.get(node)
        for labels, value in now.matching(name + "_bucket").items():
            le = float(dict(labels)["le"])
            counts[le] += value - (then.values.get((name + "_bucket", labels), 0.0) if then else 0)
    if not counts:
        return None
    bounds = sorted(counts)
    total = counts[bounds[-1]]
    if total <= 0:
        return None
    bound = next(le for le in bounds if counts[le] >= 0.99 * total)
    return None if math.isinf(bound) else bound


@dataclass
class Frame:
    """One refresh of `top`: summary figures, then named tables of plain cells."""

    summary: list[tuple[str, str]]
    tables: list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]]

    def as_json(self) -> dict[str, JSONValue]:
        """Summary keys and every table as a list of objects keyed by column (for `--json`)."""
        answer: dict[str, JSONValue] = {key.replace(" ", "_"): value for key, value in self.summary}
        for name, headers, rows in self.tables:
            keys = [h.lower().replace(" ", "_").replace("/", "_per_") for h in headers]
            answer[name] = [dict[str, JSONValue](zip(keys, row, strict=True)) for row in rows]
        return answer


def frame(
    cluster: Cluster,
    before: dict[str, Sample],
    after: dict[str, Sample],
    tenants: Sequence[TenantView],
) -> Frame:
    leader = cluster.leader
    leader_sample = next(
        (after[n.node_id] for n in cluster.nodes if n.node_id == leader and n.node_id in after),
        None,
    )

    def gauge(name: str) -> str:
        return f"{int(leader_sample.get(name)):,}" if leader_sample else "-"

    healthy = sum(1 for n in cluster.nodes if n.healthy and n.node_id in after)
    p99 = window_p99(before, after, "schedd_claim_lag_seconds")
    summary = [
        ("leader", leader or "none"),
        ("nodes healthy", f"{healthy}/{len(cluster.nodes)}"),
        ("runs claimed/s", f"{rate(before, after, 'schedd_claims_total', result='claimed'):,.0f}"),
        ("claim lag p99", "-" if p99 is None else f"<= {p99:g}s"),
        ("backlog", gauge("schedd_due_backlog")),
        ("outbox", gauge("schedd_outbox_depth")),
        ("dead letters", gauge("schedd_deadletters")),
    ]
    outcomes = ("succeeded", "retry", "failed", "gone")
    kinds = {"http"} | {
        dict(labels).get("kind", "http")
        for sample in after.values()
        for labels in sample.matching("schedd_callbacks_total")
    }
    callbacks: list[tuple[str, ...]] = [
        (
            kind,
            *(
                f"{rate(before, after, 'schedd_callbacks_total', kind=kind, outcome=o):,.1f}"
                for o in outcomes
            ),
            *connections(after, kind),
        )
        for kind in sorted(kinds)
    ]
    by_queue: dict[str, dict[str, float]] = defaultdict(dict)
    if leader_sample is not None:
        for labels, value in leader_sample.matching("schedd_queue_messages").items():
            named = dict(labels)
            by_queue[named["queue"]][named["state"]] = value
    deepest = sorted(by_queue.items(), key=lambda item: -item[1].get("ready", 0))[:10]
    queues: list[tuple[str, ...]] = [
        (name, *(f"{int(states.get(s, 0)):,}" for s in ("ready", "in_flight", "delayed", "dead")))
        for name, states in deepest
    ]
    top_tenants: list[tuple[str, ...]] = [
        (t.name, f"{t.active_jobs:,}", f"{t.dispatch_rate:,}/s") for t in tenants[:5]
    ]
    return Frame(
        summary,
        [
            (
                "callbacks",
                ("KIND", "SUCCEEDED/S", "RETRY/S", "FAILED/S", "GONE/S", "CONNECTIONS UP", "DOWN"),
                callbacks,
            ),
            ("queues", ("QUEUE", "READY", "IN FLIGHT", "DELAYED", "DEAD"), queues),
            ("tenants", ("TENANT", "ACTIVE JOBS", "DISPATCH RATE"), top_tenants),
        ],
    )


def live_view(shown: Frame) -> Group:
    """The frame as rich renderables for the live screen, in the tables' one style."""
    head = Table.grid(padding=(0, 3))
    head.add_row(*(f"{key} [bold]{escape(value)}[/]" for key, value in shown.summary))
    tables = [rich_table(headers, rows) for _, headers, rows in shown.tables]
    return Group(head, *tables, Text("^C to quit", style="dim"))


def print_frame(shown: Frame) -> None:
    """One frame for `--once`: summary fields, then each table (plain columns when piped)."""
    print_fields(shown.summary)
    for _, headers, rows in shown.tables:
        click.echo()
        print_table(headers, rows)


def _tenants(client: Client) -> list[TenantRow]:
    answer = client.list_tenants(cursor=None, limit=1000)
    return sorted(answer.view.tenants, key=lambda t: -t.active_jobs)


@click.command(
    epilog="""\b
Examples:
  SCHEDCTL_TOKEN=$(cat var/dev/admin.token) schedctl top   # a dev cluster's admin token
  schedctl top --interval 5 --once       # one frame after one interval, then exit
  schedctl top --once | grep READY -A10  # piped: plain columns, like ls and runs""",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.5),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Refresh every SECONDS (rates are over that interval).",
)
@click.option("--once", "is_once", is_flag=True, help="Print one frame and exit.")
@json_option("one frame's figures as JSON (with --once)")
@click.pass_obj
def top(client: Client, interval: float, is_once: bool, as_json: bool) -> None:
    """A live view: runs/s, lag, backlog, callbacks, queues and top tenants (admin token)."""
    if as_json and not is_once:
        raise click.UsageError("--json prints one frame: add --once")
    before = _scrape_all(client.cluster().view, client)
    if is_once:
        time.sleep(interval)
        cluster = client.cluster().view
        shown = frame(cluster, before, _scrape_all(cluster, client), _tenants(client))
        if as_json:
            print_json(shown.as_json())
        else:
            print_frame(shown)
        return
    if not sys.stdout.isatty():  # piped: one plain frame per interval, like vmstat
        try:
            while True:
                time.sleep(interval)
                cluster = client.cluster().view
                after = _scrape_all(cluster, client)
                print_frame(frame(cluster, before, after, _tenants(client)))
                click.echo()
                sys.stdout.flush()
                before = after
        except KeyboardInterrupt:
            return
    from rich.live import Live  # a terminal only

    with Live(console=Console(), auto_refresh=False, screen=False) as live:
        try:
            while True:
                time.sleep(interval)
                cluster = client.cluster().view
                after = _scrape_all(cluster, client)
                live.update(
                    live_view(frame(cluster, before, after, _tenants(client))), refresh=True
                )
                before = after
        except KeyboardInterrupt:
            return


def _scrape_all(cluster: Cluster, client: Client) -> dict[str, Sample]:
    samples = {}
    for node in cluster.nodes:
        api = node.api
        sample = scrape(api, client.timeout_s, client.token, client.tls_for(api)) if api else None
        if sample is not None:
            samples[node.node_id] = sample
    return samples
