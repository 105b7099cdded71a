"""GET /v1/stats (admin): this node's last 15 minutes in 5-second samples (claims/s, first
deliveries/s by target kind, claim lag p50/p99, due backlog), taken on wall-clock multiples
of INTERVAL_S so every node's fall on the same ticks, and its Raft state now; with
`scope=cluster`, every Raft member's, asked from here (api/fanout.py) and checked.

The samples come from the node's own metric objects (schedd/metrics.py: counters and histogram
buckets read in process, never the text exposition) and one capped backlog read; the ring holds
at most WINDOW_S / INTERVAL_S of them, so its memory is bounded whatever the load."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
from aiohttp import web
from msgspec import Meta

from schedd import metrics
from schedd.api.context import CONTEXT, ApiContext
from schedd.api.fanout import PeerAnswer
from schedd.api.http import json_response, principal
from schedd.errors import InvalidRequest
from schedd.jsonbody import JSONObject, JSONValue
from schedd.store.gauges import BACKLOG_CAP, due_backlog
from schedd.store.leases import held_partitions
from schedd.timeformat import format_instant, parse_instant
from schedd.wire.cluster import Role
from schedd.wire.fields import Count, one_of

log = logging.getLogger(__name__)
INTERVAL_S = 5.0
WINDOW_S = 900.0
SAMPLES = int(WINDOW_S / INTERVAL_S)  # 180
INTERVAL_MS = int(INTERVAL_S * 1000)


@dataclass(frozen=True, slots=True, kw_only=True)
class Counters:
    """Cumulative figures read from the metric objects at one instant."""

    claimed: float
    deliveries: Mapping[str, float]  # target kind -> first attempts handed out
    lag_buckets: Sequence[tuple[float, float]]  # (upper bound s, cumulative count), +Inf last


def read_counters() -> Counters:
    """The process's claim and delivery counters now (metric objects, no text parsing)."""
    claimed = sum(
        s.value
        for family in metrics.CLAIMS.collect()
        for s in family.samples
        if s.name.endswith("_total") and s.labels.get("result") == "claimed"
    )
    deliveries = dict.fromkeys(metrics.TARGETS, 0.0)
    lag: list[tuple[float, float]] = []
    for family in metrics.DELIVERY_LAG.collect():
        for s in family.samples:
            if s.name.endswith("_count") and s.labels.get("target") in deliveries:
                deliveries[s.labels["target"]] = s.value
    for family in metrics.CLAIM_LAG.collect():
        lag.extend((float(s.labels["le"]), s.value) for s in family.samples if "le" in s.labels)
    return Counters(claimed=claimed, deliveries=deliveries, lag_buckets=sorted(lag))


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The q-quantile of cumulative histogram buckets, interpolated inside its bucket (as
    Prometheus's histogram_quantile); None without observations; the +Inf bucket answers the
    highest finite bound."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, count
    return lower


def _delta_buckets(
    now: Sequence[tuple[float, float]], before: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    earlier = dict(before)
    return [(bound, count - earlier.get(bound, 0.0)) for bound, count in now]


Rate = Annotated[float, Meta(ge=0)]


class Sample(msgspec.Struct, frozen=True, kw_only=True):
    """One interval's rates, labelled with the tick it ends on (this node's; a peer's are passed
    on as `_peer_sample` checked them)."""

    at: Annotated[
        str, Meta(description="End of the interval.", extra_json_schema={"format": "date-time"})
    ]
    claims_per_s: Annotated[Rate, Meta(description="Runs this node's dispatchers claimed.")]
    deliveries_per_s: Annotated[
        dict[str, Rate],
        Meta(
            description="First delivery attempts this node handed out, by target kind (a queue "
            "receive or an outbox call start)."
        ),
    ]
    claim_lag_p50_s: Annotated[
        float | None,
        Meta(
            description="From the claim-lag histogram's buckets of the interval (null without "
            "claims)."
        ),
    ]
    claim_lag_p99_s: float | None
    backlog: Annotated[
        int,
        Meta(
            ge=0,
            description="Runs past their fire time not claimed yet, in this replica "
            f"(cluster-wide), capped at {BACKLOG_CAP:,}.",
        ),
    ]


class StatsRing:
    """The last SAMPLES samples; `tick` turns two counter readings into one sample of rates.
    Event loop thread only."""

    def __init__(self, size: int = SAMPLES) -> None:
        self.samples: deque[Sample] = deque(maxlen=size)
        self._last: tuple[float, Counters] | None = None

    def tick(self, now_ms: int, monotonic_s: float, counters: Counters, backlog: int) -> None:
        """Record the sample ending now (the first call only sets the baseline)."""
        last, self._last = self._last, (monotonic_s, counters)
        if last is None or monotonic_s <= last[0]:
            return
        elapsed, before = monotonic_s - last[0], last[1]
        lag = _delta_buckets(counters.lag_buckets, before.lag_buckets)
        self.samples.append(
            Sample(
                at=format_instant(now_ms),
                claims_per_s=_rate(counters.claimed - before.claimed, elapsed),
                deliveries_per_s={
                    kind: _rate(count - before.deliveries.get(kind, 0.0), elapsed)
                    for kind, count in counters.deliveries.items()
                },
                claim_lag_p50_s=_rounded(quantile(0.5, lag)),
                claim_lag_p99_s=_rounded(quantile(0.99, lag)),
                backlog=backlog,
            )
        )


def _rate(delta: float, elapsed_s: float) -> float:
    return round(max(delta, 0.0) / elapsed_s, 3)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


STATS = web.AppKey("stats", StatsRing)


async def sampling(app: web.Application) -> AsyncIterator[None]:
    """aiohttp cleanup context: sample every INTERVAL_S while the app runs."""
    ring = app[STATS]
    task = asyncio.create_task(_sample_forever(app[CONTEXT], ring))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _sample_forever(ctx: ApiContext, ring: StatsRing) -> None:
    ring.tick(ctx.clock_ms(), time.monotonic(), read_counters(), 0)
    last_tick_ms: int | None = None
    while True:
        await asyncio.sleep(until_next_tick_s(ctx.clock_ms()))
        now_ms = ctx.clock_ms()
        tick_ms = nearest_tick_ms(now_ms)
        if tick_ms == last_tick_ms:  # woke a hair before the tick: it is still ahead
            continue
        last_tick_ms = tick_ms
        try:
            backlog = await ctx.reads.read(_backlog_at(ctx.partitions, now_ms))
            ring.tick(tick_ms, time.monotonic(), read_counters(), backlog)
        except Exception:  # a sample is never worth the node: try again next time
            log.warning("stats: cannot take a sample", exc_info=True)


def until_next_tick_s(now_ms: int) -> float:
    """Seconds from `now_ms` to the next wall-clock multiple of INTERVAL_S: more than 0, at most
    INTERVAL_S, whatever the clock did (so every node samples on the same ticks)."""
    return (INTERVAL_MS - now_ms % INTERVAL_MS) / 1000


def nearest_tick_ms(now_ms: int) -> int:
    """The multiple of INTERVAL_S nearest `now_ms`: what a sample taken now is labelled."""
    return (now_ms + INTERVAL_MS // 2) // INTERVAL_MS * INTERVAL_MS


def _backlog_at(partitions: int, now_ms: int) -> Callable[[sqlite3.Connection], int]:
    return lambda conn: due_backlog(conn, partitions, now_ms)


async def stats(request: web.Request) -> web.Response:
    principal(request).require_admin()
    scope = request.query.get("scope", "node")
    if scope not in ("node", "cluster"):
        raise InvalidRequest("scope", f"must be 'node' or 'cluster', got {scope[:40]!r}")
    ctx = request.app[CONTEXT]
    own = await _node_stats(ctx, request.app[STATS])
    if scope == "node":
        return json_response(own)
    answers = await ctx.ask_peers("/v1/stats?scope=node")  # never cluster: no fan-out again
    nodes = [_peer_stats(answer) for answer in answers]
    own_json = msgspec.to_builtins(own)  # as its peers' answers read: plain JSON
    nodes.append({key: own_json[key] for key in ("node_id", "node", "samples")})
    return json_response(
        {
            "nodes": sorted(nodes, key=lambda n: str(n["node_id"])),
            "interval_s": INTERVAL_S,
            "window_s": WINDOW_S,
        }
    )


class NodeState(msgspec.Struct, frozen=True, kw_only=True):
    """A node's Raft and readiness figures (the console's nodes table); NODE_FIELDS, in order,
    is what a peer's must hold."""

    role: Role | None
    term: Count
    applied_index: Count
    commit_index: Annotated[
        int | None,
        Meta(description="The leader's commit index as this node knows it; null without a leader."),
    ]
    lag: Annotated[int | None, Meta(description="commit_index minus applied_index.")]
    partitions: Annotated[
        Count, Meta(description="Partitions this node holds an unexpired lease on.")
    ]
    clock_trusted: bool
    ready: Annotated[bool, Meta(description="What /readyz answers.")]


class NodeStats(msgspec.Struct, frozen=True, kw_only=True):
    """GET /v1/stats?scope=node: this node's figures now and its samples, oldest first."""

    node_id: str
    interval_s: Annotated[float, Meta(description="Seconds between samples.")]
    window_s: Annotated[float, Meta(description="Seconds the ring covers.")]
    node: NodeState
    samples: Annotated[
        list[Sample],
        Meta(
            max_length=SAMPLES,
            description="Oldest first; empty for the first interval after a start.",
        ),
    ]


class PeerStats(msgspec.Struct, frozen=True, kw_only=True):
    """A node's figures and samples, as it answered the node that asked."""

    node_id: str
    node: NodeState
    samples: Annotated[list[Sample], Meta(max_length=SAMPLES)]


class PeerFailed(msgspec.Struct, frozen=True, kw_only=True):
    """A node that gave no stats."""

    node_id: str
    error: Annotated[str, Meta(description="Why the node gave no stats.")]


class ClusterStats(msgspec.Struct, frozen=True, kw_only=True):
    """GET /v1/stats?scope=cluster: every node's figures and samples."""

    # Each a PeerStats or a PeerFailed (msgspec types no union of two untagged structs).
    nodes: Annotated[
        list[Annotated[Any, Meta(extra_json_schema=one_of(PeerStats, PeerFailed))]],
        Meta(
            description="Every registered node in node_id order, asked by this one (2 s each, "
            "at once)."
        ),
    ]
    interval_s: float
    window_s: float


async def _node_stats(ctx: ApiContext, ring: StatsRing) -> NodeStats:
    now_ms = ctx.clock_ms()
    held = await ctx.reads.read(lambda c: held_partitions(c, ctx.node_id, now_ms, margin_ms=0))
    return NodeStats(
        node_id=ctx.node_id,
        interval_s=INTERVAL_S,
        window_s=WINDOW_S,
        node=node_state(ctx, len(held)),
        samples=list(ring.samples),
    )


def _peer_stats(answer: PeerAnswer) -> JSONObject:
    """A peer's entry: its node figures and samples, or why there are none. Its answer's bytes
    are untrusted (a buggy, hostile or older node): only known fields of the right type are
    passed on (a node figure of another type as null), and a sample that is not one is left
    out."""
    body = answer.body or {}
    node, samples = body.get("node"), body.get("samples")
    if isinstance(node, dict) and isinstance(samples, list) and len(samples) <= SAMPLES:
        valid = (_peer_sample(sample) for sample in samples)
        return {
            "node_id": answer.node_id,
            "node": {key: _typed(node.get(key), kind) for key, kind in NODE_FIELDS.items()},
            "samples": [sample for sample in valid if sample is not None],
        }
    return {"node_id": answer.node_id, "error": answer.error or "its answer is not a stats answer"}


NODE_FIELDS = {
    "role": str,
    "term": int,
    "applied_index": int,
    "commit_index": int,
    "lag": int,
    "partitions": int,
    "clock_trusted": bool,
    "ready": bool,
}
SAMPLE_NUMBERS = ("claims_per_s", "claim_lag_p50_s", "claim_lag_p99_s", "backlog")
TARGET_KIND = re.compile(r"[a-z0-9_]{1,32}")
MAX_TARGET_KINDS = 16
MAX_NUMBER = 2**53  # what the console's JavaScript holds exactly


def _peer_sample(sample: JSONValue) -> JSONObject | None:
    if not isinstance(sample, dict):
        return None
    try:
        at_ms = parse_instant(sample.get("at"), field="at")
    except InvalidRequest:
        return None
    numbers = {key: sample.get(key) for key in SAMPLE_NUMBERS}
    deliveries = sample.get("deliveries_per_s")
    if not all(value is None or _is_number(value) for value in numbers.values()):
        return None
    if not (isinstance(deliveries, dict) and len(deliveries) <= MAX_TARGET_KINDS):
        return None
    if not all(TARGET_KIND.fullmatch(k) and _is_number(v) for k, v in deliveries.items()):
        return None
    return {"at": format_instant(at_ms), "deliveries_per_s": deliveries, **numbers}


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and -MAX_NUMBER <= value <= MAX_NUMBER
    )


def _typed(value: Any, kind: type) -> Any:
    """`value` if it is a `kind` (a bool is no number; a string at most 32 characters), else
    None."""
    if kind is str:
        return value if isinstance(value, str) and len(value) <= 32 else None
    if kind is int:
        return value if _is_number(value) and isinstance(value, int) else None
    return value if isinstance(value, kind) else None


def node_state(ctx: ApiContext, partitions: int) -> NodeState:
    """This node's Raft and readiness figures now (the console's nodes table)."""
    status = ctx.raft.status()
    view = ctx.raft.commit_view()
    applied = status.applied_index
    return NodeState(
        role=status.role,
        term=status.term,
        applied_index=applied,
        commit_index=None if view is None else view.commit_index,
        lag=None if view is None else max(view.commit_index - applied, 0),
        partitions=partitions,
        clock_trusted=ctx.raft.clock_problem() is None,
        ready=ctx.raft.is_ready(),
    )
