"""The leader's look ahead (dispatch/forecast_watch.py) driven by tick(now_ms) against a real
store: a pass exports the next hour's peak second, the overload at a measured capacity, NaN on
a follower; it waits while runs are late."""

from __future__ import annotations

import math

import pytest

from schedd import metrics
from schedd.dispatch.forecast_watch import ForecastWatch
from schedd.drain import DrainMeter
from schedd.store.db import Database, connect
from schedd.timeformat import parse_instant
from tests.conftest import Applier
from tests.unit.test_dispatcher import PARTITIONS, Cluster

HOUR_MS = 3_600_000


def gauges() -> tuple[float, float, float]:
    return (
        metrics.DRAIN_CAPACITY._value.get(),
        metrics.FORECAST_PEAK._value.get(),
        metrics.FORECAST_OVERLOAD._value.get(),
    )


@pytest.fixture
def cluster(apply: Applier, db: Database) -> Cluster:
    cluster = Cluster(apply, db)
    cluster.now = parse_instant("2026-09-21T14:20:00Z", field="t")
    for k in range(3):
        cluster.add_job(f"job_{k}", {"schedule": {"cron": "0 * * * *"}}, cluster.now)
    cluster.add_job("job_m", {"schedule": {"every": "1m"}}, cluster.now)
    return cluster


def test_a_pass_exports_the_peak_second_and_the_overload_at_the_capacity(
    cluster: Cluster, db: Database
) -> None:
    clock = [0.0]
    meter = DrainMeter(sustain_s=10)
    watch = ForecastWatch(
        lambda: connect(db.path, readonly=True),
        lambda: True,
        node_id="n1",
        partitions=PARTITIONS,
        meter=meter,
        monotonic=lambda: clock[0],
    )
    watch.tick(cluster.now)
    capacity, peak, overload = gauges()
    assert peak == 4  # 15:00:00Z: three hourly jobs and the minutely one
    assert math.isnan(capacity) and math.isnan(overload)
    for k in range(12):  # a spike drained at 2 runs/s, the node holding every partition
        meter.sample(float(k), 2.0 * k, is_backlogged=True, share=1.0)
    clock[0] = 12.0
    watch.tick(cluster.now + 1_000)  # the next pass waits a minute: nothing published
    assert math.isnan(gauges()[0])
    watch.tick(cluster.now + 61_000)
    assert gauges() == (2.0, 4.0, 1.0)  # the 4 runs of 15:00:00: the last 1 s late


def test_a_follower_exports_nothing_and_a_backlog_holds_the_pass(
    cluster: Cluster, db: Database
) -> None:
    leader = [True]
    watch = ForecastWatch(
        lambda: connect(db.path, readonly=True),
        lambda: leader[0],
        node_id="n1",
        partitions=PARTITIONS,
    )
    metrics.record_forecast(capacity=None, peak_runs=None, overload_s=None)
    watch.tick(cluster.now + 2 * HOUR_MS)  # every job's next run is past due by then
    assert math.isnan(gauges()[1])  # no pass while the backlog drains
    watch.tick(cluster.now)
    assert gauges()[1] == 4
    leader[0] = False
    watch.tick(cluster.now + 1_000)
    assert all(math.isnan(value) for value in gauges())
