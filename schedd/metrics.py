"""Prometheus metrics of a node: the event metrics the code observes, and the gauges read at
scrape time from the node's SQLite and Raft state (docs/metrics.md lists them all).

Observing must stay cheap (a counter or histogram update); nothing here writes state, and the
scrape-time store reads (store/gauges.py, handed in: this module sits below the store) are short
read-only queries over indexes, capped where a count could be large.
"""

from __future__ import annotations

import collections
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, get_args

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from schedd.model import ClaimRefusal, RaftRole, RaftView
from schedd.targets import TARGET_TYPES

log = logging.getLogger(__name__)

LAG_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
APPLY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
REQUEST_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
SNAPSHOT_BUCKETS_S = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
CLAIM_RESULTS = ("claimed", *(refusal.value for refusal in ClaimRefusal))
TARGETS = TARGET_TYPES

CLAIM_LAG = Histogram(
    "schedd_claim_lag_seconds",
    "Fire time to claim committed, per claim of this node's dispatcher",
    buckets=LAG_BUCKETS_S,
)
DELIVERY_LAG = Histogram(
    "schedd_delivery_lag_seconds",
    "Scheduled time to the first delivery attempt (queue receive or HTTP call start)",
    ["target"],
    buckets=LAG_BUCKETS_S,
)
CLAIMS = Counter("schedd_claims", "Claims proposed by this node, by apply's verdict", ["result"])
RETRIES = Counter("schedd_retries", "Delivery attempts after the first, by target", ["target"])
PRUNED_ROWS = Counter(
    "schedd_pruned_rows", "Rows deleted from this node's store by retention, by kind", ["kind"]
)
SEGMENT_DIGEST_MISMATCHES = Counter(
    "schedd_segment_digest_mismatches",
    "Closed history segments whose rows on this node differ from the digest the cluster "
    "recorded at their close (a diverged node: rebuild it)",
)
RECEIVES = Counter(
    "schedd_queue_receives",
    "Receive commands proposed by this node's API, by whether they got messages",
    ["result"],
)
QUEUE_NACKS = Counter("schedd_queue_nacks", "Queue messages nacked through this node's API")
APPLY_SECONDS = Histogram(
    "schedd_apply_seconds", "Time to apply one Raft log entry to SQLite", buckets=APPLY_BUCKETS_S
)
SNAPSHOT_SECONDS = Histogram(
    "schedd_snapshot_seconds", "Time to write one Raft snapshot", buckets=SNAPSHOT_BUCKETS_S
)
SNAPSHOT_FAILURES = Counter("schedd_snapshot_failures", "Raft snapshots that failed")
API_SECONDS = Histogram(
    "schedd_api_request_seconds",
    "API request latency by route template, method and status",
    ["route", "method", "status"],
    buckets=REQUEST_BUCKETS_S,
)
ALERTS = Counter(
    "schedd_alerts",
    "Failure alert POSTs this node made as leader, by result (sent, retried, failed: given up)",
    ["result"],
)
# The leader's look ahead (dispatch/forecast_watch.py); NaN on other nodes and until known.
DRAIN_CAPACITY = Gauge(
    "schedd_drain_capacity_runs_per_second",
    "The best claim rate the cluster sustained through a backlog in the last 6 hours' spikes "
    "(measured by the leader: its claims over its share of the partitions; NaN until a spike)",
)
FORECAST_PEAK = Gauge(
    "schedd_forecast_peak_runs",
    "The most runs due in one second of the next hour (the leader's forecast; NaN elsewhere)",
)
FORECAST_OVERLOAD = Gauge(
    "schedd_forecast_overload_seconds",
    "How late the last run of the next hour's worst second would be at the drain capacity "
    "(the leader's; 0 when the cluster keeps up; NaN while the capacity is unknown)",
)
_CLAIMED = CLAIMS.labels(result="claimed")
ALERTS_SENT = ALERTS.labels(result="sent")
ALERTS_RETRIED = ALERTS.labels(result="retried")
ALERTS_FAILED = ALERTS.labels(result="failed")
for _result in CLAIM_RESULTS:
    CLAIMS.labels(result=_result)  # every verdict is exported from the start, at 0
_LAG_BY_TARGET = {target: DELIVERY_LAG.labels(target=target) for target in TARGETS}
_RETRIES_BY_TARGET = {target: RETRIES.labels(target=target) for target in TARGETS}


def record_claims(
    claimed: int, rejected: Mapping[str, int], fire_at_ms: Iterable[int], committed_ms: int
) -> None:
    """Count a committed claim's result (claims taken, and refused by reason) and observe
    each claim's fire-to-commit lag."""
    _CLAIMED.inc(claimed)
    for reason, count in rejected.items():
        CLAIMS.labels(result=reason).inc(count)
    lags = collections.Counter(max(committed_ms - fire_at, 0) for fire_at in fire_at_ms)
    for lag_ms, count in lags.items():
        observe_many(CLAIM_LAG, lag_ms / 1000, count)


def claimed_total() -> float:
    """The runs this process's claims have taken so far (the claims counter)."""
    return sum(
        sample.value
        for family in CLAIMS.collect()
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("result") == "claimed"
    )


def record_forecast(
    *, capacity: float | None, peak_runs: float | None, overload_s: float | None
) -> None:
    """The leader's look ahead (None: unknown, exported as NaN)."""
    for gauge, value in (
        (DRAIN_CAPACITY, capacity),
        (FORECAST_PEAK, peak_runs),
        (FORECAST_OVERLOAD, overload_s),
    ):
        gauge.set(float("nan") if value is None else value)


record_forecast(capacity=None, peak_runs=None, overload_s=None)


def observe_many(histogram: Histogram, amount: float, count: int) -> None:
    """`histogram.observe(amount)` `count` times: in one step through the Histogram's own
    fields where it has them (as prometheus_client 0.26 does; tests/unit/test_metrics_observe.py
    compares), else by calling observe `count` times. A spike's claims and receives share a few
    lags, and one observe a run was about 5 us under cProfile."""
    buckets = getattr(histogram, "_buckets", None)
    bounds = getattr(histogram, "_upper_bounds", None)
    total = getattr(histogram, "_sum", None)
    if count == 1 or buckets is None or bounds is None or total is None:
        for _ in range(count):
            histogram.observe(amount)
        return
    total.inc(amount * count)
    for i, bound in enumerate(bounds):
        if amount <= bound:
            buckets[i].inc(count)
            break


def record_delivery(
    target: str, attempt: int, scheduled_at_ms: int, at_ms: int, count: int = 1
) -> None:
    """Delivery attempts handed out (`count` alike): the first one's lag, or a retry counted (a
    kind this version does not know is not observed)."""
    if target not in _LAG_BY_TARGET:
        return
    if attempt <= 1:
        observe_many(_LAG_BY_TARGET[target], max(at_ms - scheduled_at_ms, 0) / 1000, count)
    else:
        _RETRIES_BY_TARGET[target].inc(count)


def exposition(node_registry: CollectorRegistry | None) -> bytes:
    """The process-wide metrics followed by one node's scrape-time gauges (text format)."""
    text = generate_latest(REGISTRY)
    return text if node_registry is None else text + generate_latest(node_registry)


# ---------------------------------------------------------------------- scrape-time gauges

QUEUE_LABELS = 50  # queue names are tenant-chosen: export the deepest ones, fold the rest
OTHER_QUEUES = "(other)"  # not a valid queue name, so it never collides with a real one
QUEUE_STATES = ("ready", "in_flight", "delayed", "dead")
RAFT_ROLES: tuple[RaftRole, ...] = get_args(RaftRole)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreGauges:
    """What one scrape read from the store."""

    due_backlog: int
    oldest_due_age_s: float
    queues: dict[str, dict[str, int]]  # queue name (summed over tenants) -> state -> count
    outbox: int
    deadletters: int
    partitions_owned: int
    alerts_pending: int = 0
    overdue_by_tenant: Mapping[str, int] = field(default_factory=dict)


def top_queues(
    counts: Mapping[str, Mapping[str, int]], limit: int = QUEUE_LABELS
) -> dict[str, dict[str, int]]:
    """The `limit` deepest queues by name, and the rest summed under OTHER_QUEUES."""
    ranked = sorted(counts.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    top = {name: dict(states) for name, states in ranked[:limit]}
    if len(ranked) > limit:
        other = top[OTHER_QUEUES] = dict.fromkeys(QUEUE_STATES, 0)
        for _, states in ranked[limit:]:
            for state, count in states.items():
                other[state] += count
    return top


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def store_metrics(gauges: StoreGauges, read_s: float) -> list[Metric]:
    queues = GaugeMetricFamily(
        "schedd_queue_messages",
        f"Messages per queue and state (the {QUEUE_LABELS} deepest queues, the rest as "
        f"{OTHER_QUEUES})",
        labels=["queue", "state"],
    )
    for name, states in top_queues(gauges.queues).items():
        for state in QUEUE_STATES:
            queues.add_metric([name, state], states[state])
    overdue = GaugeMetricFamily(
        "schedd_jobs_overdue",
        "Recurring jobs with no successful run within twice their schedule's gap, per tenant "
        "(as the leader's overdue scanner last found them; tenants with none are left out)",
        labels=["tenant"],
    )
    for tenant_id, count in sorted(gauges.overdue_by_tenant.items()):
        overdue.add_metric([tenant_id], count)
    return [
        overdue,
        _gauge(
            "schedd_due_backlog",
            "Runs whose fire time has passed, not yet claimed (capped)",
            gauges.due_backlog,
        ),
        _gauge(
            "schedd_due_oldest_age_seconds",
            "Age of the oldest unclaimed due run past its fire time (0 when none is late)",
            gauges.oldest_due_age_s,
        ),
        queues,
        _gauge(
            "schedd_queues",
            "Distinct queue names holding messages or dead letters",
            len(gauges.queues),
        ),
        _gauge("schedd_outbox_depth", "HTTP calls due or waiting for a retry", gauges.outbox),
        _gauge("schedd_deadletters", "Dead letters held (queue and HTTP)", gauges.deadletters),
        _gauge(
            "schedd_alerts_pending",
            "Failure alerts not yet sent or given up (due, or waiting for a retry)",
            gauges.alerts_pending,
        ),
        _gauge(
            "schedd_partitions_owned",
            "Partitions this node holds an unexpired lease on",
            gauges.partitions_owned,
        ),
        _gauge(
            "schedd_metrics_store_read_seconds", "Time this scrape spent reading the store", read_s
        ),
    ]


def clock_metrics(trusted: bool, offset_ms: float | None) -> list[Metric]:
    gauges: list[Metric] = [
        _gauge(
            "schedd_clock_trusted",
            "1 while this node's wall clock agrees with its peers' (0: it dispatches nothing)",
            1 if trusted else 0,
        )
    ]
    if offset_ms is not None:
        gauges.append(
            _gauge(
                "schedd_clock_offset_seconds",
                "Median of the peers' clocks minus this node's, at the last probe",
                offset_ms / 1000,
            )
        )
    return gauges


def raft_metrics(status: RaftView, commit_index: int) -> list[Metric]:
    roles = GaugeMetricFamily(
        "schedd_raft_role", "This node's Raft role (1 for the current one)", labels=["role"]
    )
    for role in RAFT_ROLES:
        roles.add_metric([role], 1 if status.role == role else 0)
    return [
        roles,
        _gauge("schedd_raft_term", "Current Raft term", status.term),
        _gauge("schedd_raft_commit_index", "Highest log index known committed", commit_index),
        _gauge(
            "schedd_raft_applied_index",
            "Highest log index applied to SQLite",
            status.applied_index,
        ),
        _gauge(
            "schedd_raft_leader_known",
            "1 when this node knows a leader",
            1 if status.leader else 0,
        ),
    ]


def snapshot_metrics(path: Path) -> list[Metric]:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return []  # no snapshot yet
    return [
        _gauge("schedd_snapshot_bytes", "Size of the latest Raft snapshot", stat.st_size),
        _gauge(
            "schedd_snapshot_timestamp_seconds",
            "When the latest Raft snapshot was installed (unix time)",
            stat.st_mtime,
        ),
    ]


class StoreReader(Protocol):
    """store/gauges.py `read_store`: the store gauges of one scrape."""

    def __call__(
        self, conn: sqlite3.Connection, *, node_id: str, partitions: int, now_ms: int
    ) -> StoreGauges: ...


class NodeCollector(Collector):
    """Gauges computed at each scrape from this node's replica and Raft status; the store's
    are read by `read_store` (store/gauges.py: this module sits below the store)."""

    def __init__(
        self,
        *,
        node_id: str,
        partitions: int,
        connect: Callable[[], sqlite3.Connection],
        read_store: StoreReader,
        status: Callable[[], RaftView],
        commit_index: Callable[[], int],
        snapshot_path: Path,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        clock_state: Callable[[], tuple[bool, float | None]] = lambda: (True, None),
    ) -> None:
        self._clock_state = clock_state  # (trusted, median peer offset ms) from dispatch/clock.py
        self._node_id = node_id
        self._partitions = partitions
        self._connect = connect
        self._read_store = read_store
        self._status = status
        self._commit_index = commit_index
        self._snapshot_path = snapshot_path
        self._clock_ms = clock_ms

    def collect(self) -> Iterator[Metric]:
        yield from raft_metrics(self._status(), self._commit_index())
        yield from snapshot_metrics(self._snapshot_path)
        yield from clock_metrics(*self._clock_state())
        started = time.perf_counter()
        try:
            conn = self._connect()
            try:
                gauges = self._read_store(
                    conn,
                    node_id=self._node_id,
                    partitions=self._partitions,
                    now_ms=self._clock_ms(),
                )
            finally:
                conn.close()
        except sqlite3.Error as exc:  # a scrape never fails the node; the gauges are left out
            log.warning("metrics: cannot read the store: %s", exc)
            return
        yield from store_metrics(gauges, time.perf_counter() - started)
