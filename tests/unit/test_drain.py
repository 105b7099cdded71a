"""The drain meter (schedd/drain.py): a rate counts only once a backlog has lasted, is scaled
from the node's share of the partitions, the best is remembered and forgotten in time; and how
late a forecast's peak would run at a capacity."""

from __future__ import annotations

import pytest

from schedd.drain import DrainMeter, overload_s


def feed(
    meter: DrainMeter,
    start_s: float,
    seconds: int,
    per_s: float,
    *,
    is_backlogged: bool,
    share: float,
) -> None:
    """One reading a second for `seconds`, the counter rising per_s a second."""
    for k in range(seconds + 1):
        meter.sample(start_s + k, k * per_s, is_backlogged=is_backlogged, share=share)


def test_a_sustained_backlog_measures_the_cluster_rate_from_the_node_share() -> None:
    meter = DrainMeter(sustain_s=10)
    feed(meter, 0, 9, 100, is_backlogged=True, share=0.5)
    assert meter.capacity(9) is None  # not sustained yet
    feed(meter, 100, 30, 100, is_backlogged=True, share=0.5)
    assert meter.capacity(130) == pytest.approx(200)


def test_claims_without_a_backlog_or_without_partitions_measure_nothing() -> None:
    meter = DrainMeter(sustain_s=10)
    feed(meter, 0, 30, 5_000, is_backlogged=False, share=1.0)
    feed(meter, 100, 30, 5_000, is_backlogged=True, share=0.0)
    assert meter.capacity(200) is None


def test_the_best_spike_is_remembered_then_forgotten() -> None:
    meter = DrainMeter(sustain_s=10, remember_s=3_600)
    feed(meter, 0, 20, 900, is_backlogged=True, share=1.0)
    feed(meter, 600, 20, 300, is_backlogged=True, share=1.0)
    assert meter.capacity(700) == pytest.approx(900)
    assert meter.capacity(3_650) == pytest.approx(300)
    assert meter.capacity(4_300) is None


def test_overload_is_how_late_the_worst_seconds_last_run_would_be() -> None:
    assert overload_s([0, 1_000, 0, 0], 100) == pytest.approx(9)
    assert overload_s([300, 300, 0], 100) == pytest.approx(4)  # the backlog piles up
    assert overload_s([100, 50, 100], 100) == 0
