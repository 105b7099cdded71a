"""The stats ring of GET /v1/stats: rates from two counter readings, quantiles from histogram
bucket deltas, a bounded number of samples."""

from __future__ import annotations

import math

import pytest

from schedd.api.stats import Counters, StatsRing, quantile, read_counters

INF = math.inf


def counters(
    claimed: float, http: float = 0.0, lag: list[tuple[float, float]] | None = None
) -> Counters:
    return Counters(
        claimed=claimed,
        deliveries={"queue": 0.0, "http": http},
        lag_buckets=lag or [(0.1, 0.0), (1.0, 0.0), (INF, 0.0)],
    )


def test_quantile_interpolates_inside_the_bucket_and_caps_at_the_last_finite_bound() -> None:
    buckets = [(0.1, 50.0), (1.0, 100.0), (INF, 100.0)]
    assert quantile(0.5, buckets) == pytest.approx(0.1)
    assert quantile(0.75, buckets) == pytest.approx(0.55)
    assert quantile(0.99, [(0.1, 0.0), (1.0, 0.0), (INF, 10.0)]) == 1.0
    assert quantile(0.5, [(0.1, 0.0), (INF, 0.0)]) is None


def test_the_first_tick_is_a_baseline_then_each_tick_is_one_sample_of_rates() -> None:
    ring = StatsRing(size=3)
    ring.tick(1_000, 10.0, counters(100, http=5), backlog=7)
    assert list(ring.samples) == []
    lag = [(0.1, 90.0), (1.0, 100.0), (INF, 100.0)]
    ring.tick(6_000, 15.0, counters(150, http=30, lag=lag), backlog=3)
    (sample,) = ring.samples
    assert sample["claims_per_s"] == 10.0
    assert sample["deliveries_per_s"] == {"queue": 0.0, "http": 5.0}
    assert sample["claim_lag_p50_s"] == pytest.approx(0.0556, abs=1e-3)
    assert sample["claim_lag_p99_s"] == pytest.approx(0.91)
    assert sample["backlog"] == 3 and sample["at"].endswith("Z")


def test_an_interval_without_claims_has_no_lag_and_the_ring_keeps_the_newest() -> None:
    ring = StatsRing(size=3)
    for step in range(6):
        ring.tick(step * 5_000, step * 5.0, counters(step * 10.0), backlog=step)
    assert [s["backlog"] for s in ring.samples] == [3, 4, 5]
    assert all(s["claim_lag_p50_s"] is None for s in ring.samples)
    assert all(s["claims_per_s"] == 2.0 for s in ring.samples)


def test_read_counters_reads_every_target_kind_and_the_lag_buckets_in_order() -> None:
    read = read_counters()
    assert set(read.deliveries) >= {"queue", "http"}
    bounds = [bound for bound, _ in read.lag_buckets]
    assert bounds == sorted(bounds) and bounds[-1] == INF
