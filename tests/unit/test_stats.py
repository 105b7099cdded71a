"""The stats ring of GET /v1/stats: rates from two counter readings, quantiles from histogram
bucket deltas, a bounded number of samples, taken on wall-clock multiples of 5 s."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace
from typing import Any, cast

import pytest

from schedd.api import stats
from schedd.api.context import ApiContext
from schedd.api.stats import (
    Counters,
    StatsRing,
    nearest_tick_ms,
    quantile,
    read_counters,
    until_next_tick_s,
)
from schedd.timeformat import parse_instant

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
    assert sample.claims_per_s == 10.0
    assert sample.deliveries_per_s == {"queue": 0.0, "http": 5.0}
    assert sample.claim_lag_p50_s == pytest.approx(0.0556, abs=1e-3)
    assert sample.claim_lag_p99_s == pytest.approx(0.91)
    assert sample.backlog == 3 and sample.at.endswith("Z")


def test_an_interval_without_claims_has_no_lag_and_the_ring_keeps_the_newest() -> None:
    ring = StatsRing(size=3)
    for step in range(6):
        ring.tick(step * 5_000, step * 5.0, counters(step * 10.0), backlog=step)
    assert [s.backlog for s in ring.samples] == [3, 4, 5]
    assert all(s.claim_lag_p50_s is None for s in ring.samples)
    assert all(s.claims_per_s == 2.0 for s in ring.samples)


def test_read_counters_reads_every_target_kind_and_the_lag_buckets_in_order() -> None:
    read = read_counters()
    assert set(read.deliveries) >= {"queue", "http"}
    bounds = [bound for bound, _ in read.lag_buckets]
    assert bounds == sorted(bounds) and bounds[-1] == INF


def test_the_wait_is_to_the_next_multiple_of_the_interval_never_over_it_never_negative() -> None:
    t0 = 1_796_000_000_000  # a multiple of 5 s
    assert until_next_tick_s(t0 + 1_250) == 3.75
    assert until_next_tick_s(t0) == 5.0
    assert until_next_tick_s(t0 - 1) == 0.001
    assert nearest_tick_ms(t0 - 1) == nearest_tick_ms(t0 + 2_499) == t0
    assert nearest_tick_ms(t0 + 2_500) == t0 + 5_000
    for now_ms in range(t0 - 7_000, t0 + 7_000, 37):
        assert 0 < until_next_tick_s(now_ms) <= 5.0


def test_samples_fall_on_wall_clock_ticks_through_early_wakes_and_clock_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t0 = 1_796_000_000_000
    wall = [t0 + 1_234]
    # What the wall clock does during each sleep, besides the time slept: a wake 1 ms early,
    # a step back of 3 s, a step forward of 7.5 s.
    surprises = iter([0, 0, -1, 0, -3_000, 0, 0, 7_500, 0, 0])
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        wall[0] += round(seconds * 1000) + next(surprises, 0)
        if len(slept) > 10:
            raise asyncio.CancelledError
        await real_sleep(0)

    async def read(query: Any) -> int:
        return 0

    ctx = SimpleNamespace(clock_ms=lambda: wall[0], reads=SimpleNamespace(read=read), partitions=1)
    ring = StatsRing()
    monkeypatch.setattr(stats.asyncio, "sleep", sleep)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(stats._sample_forever(cast(ApiContext, ctx), ring))
    assert all(0 < s <= 5.0 for s in slept), slept
    ats = [s.at for s in ring.samples]
    assert len(ats) == len(set(ats))  # the early wake did not give a tick twice
    ticks = [parse_instant(at, field="at") for at in ats]
    assert all(tick % 5_000 == 0 for tick in ticks), ats
    assert ticks[:3] == [t0 + 5_000, t0 + 10_000, t0 + 15_000]
