"""`schedctl top`: a live view of the cluster from every node's /metrics, refreshed until ^C.

Rates (runs claimed, callbacks) are the change of the nodes' counters between two refreshes,
summed over the nodes; the claim lag p99 is taken from the histogram buckets that changed in
that interval. Gauges of the replicated state (backlog, queues) come from the leader.
"""

from __future__ import annotations

import math
import ssl
import time
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import click
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from schedd.cli.ctl.client import Client

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


def frame(
    cluster: dict[str, Any],
    before: dict[str, Sample],
    after: dict[str, Sample],
    tenants: list[dict[str, Any]],
    *,
    is_live: bool = True,
) -> Group:
    leader = cluster.get("leader")
    leader_sample = next(
        (
            after[n["node_id"]]
            for n in cluster["nodes"]
            if n["node_id"] == leader and n["node_id"] in after
        ),
        None,
    )
    healthy = sum(1 for n in cluster["nodes"] if n["healthy"] and n["node_id"] in after)
    p99 = window_p99(before, after, "schedd_claim_lag_seconds")
    claimed = rate(before, after, "schedd_claims_total", result="claimed")
    head = Table.grid(padding=(0, 3))
    head.add_row(
        f"leader [bold]{leader or 'none'}[/]",
        f"nodes {healthy}/{len(cluster['nodes'])} healthy",
        f"runs claimed/s [bold]{claimed:,.0f}[/]",
        f"claim lag p99 {'-' if p99 is None else f'<= {p99:g}s'}",
        f"backlog {int(leader_sample.get('schedd_due_backlog')) if leader_sample else '-'}",
    )
    callbacks = Table(
        "callbacks/s", "succeeded", "retry", "failed", "gone", "outbox", "dead letters"
    )
    callbacks.add_row(
        "",
        *(
            f"{rate(before, after, 'schedd_callbacks_total', outcome=o):,.1f}"
            for o in ("succeeded", "retry", "failed", "gone")
        ),
        str(int(leader_sample.get("schedd_outbox_depth"))) if leader_sample else "-",
        str(int(leader_sample.get("schedd_deadletters"))) if leader_sample else "-",
    )
    queues = Table("queue", "ready", "in flight", "delayed", "dead")
    if leader_sample is not None:
        by_queue: dict[str, dict[str, float]] = defaultdict(dict)
        for labels, value in leader_sample.matching("schedd_queue_messages").items():
            named = dict(labels)
            by_queue[named["queue"]][named["state"]] = value
        deepest = sorted(by_queue.items(), key=lambda item: -item[1].get("ready", 0))[:10]
        for name, states in deepest:
            queues.add_row(
                name,
                *(f"{int(states.get(s, 0)):,}" for s in ("ready", "in_flight", "delayed", "dead")),
            )
    top_tenants = Table("tenant", "active jobs", "dispatch rate")
    for tenant in tenants[:5]:
        top_tenants.add_row(
            tenant["name"], f"{tenant['active_jobs']:,}", f"{tenant['dispatch_rate']:,}/s"
        )
    parts = [head, callbacks, queues, top_tenants]
    return Group(*parts, Text("^C to quit", style="dim")) if is_live else Group(*parts)


def _tenants(client: Client) -> list[dict[str, Any]]:
    answer = client.list_tenants(cursor=None, limit=1000)
    return sorted(answer["tenants"], key=lambda t: -t["active_jobs"])


@click.command(
    epilog="""\b
Examples:
  SCHEDCTL_TOKEN=$(cat var/admin.token) schedctl top
  schedctl top --interval 5s --once      # one frame after one interval, then exit""",
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
@click.pass_obj
def top(client: Client, interval: float, is_once: bool) -> None:
    """A live view: runs/s, lag, backlog, callbacks, queues and top tenants (admin token)."""
    before = _scrape_all(client.cluster(), client)
    console = Console()
    if is_once:
        time.sleep(interval)
        cluster = client.cluster()
        after = _scrape_all(cluster, client)
        console.print(frame(cluster, before, after, _tenants(client), is_live=False))
        return
    with Live(console=console, auto_refresh=False, screen=False) as live:
        try:
            while True:
                time.sleep(interval)
                cluster = client.cluster()
                after = _scrape_all(cluster, client)
                live.update(frame(cluster, before, after, _tenants(client)), refresh=True)
                before = after
        except KeyboardInterrupt:
            return


def _scrape_all(cluster: dict[str, Any], client: Client) -> dict[str, Sample]:
    samples = {}
    for node in cluster["nodes"]:
        api = node.get("api")
        sample = scrape(api, client.timeout_s, client.token, client.tls_for(api)) if api else None
        if sample is not None:
            samples[node["node_id"]] = sample
    return samples
