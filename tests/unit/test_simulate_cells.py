"""benchmarks/simulate_cells.py's arithmetic on tiny cases: drain time, cells, storage, events."""

from __future__ import annotations

import pytest

from benchmarks.simulate_cells import Inputs, Simulation, simulate_day, storage_per_node

# 100,000 runs in 10 s = 10,000 runs/s a cell; no creates, no background, a linear rate.
TINY = Inputs(
    drain_100k_s=10.0,
    linear=True,
    creates_per_day=0.0,
    runs_per_s=20_000 / 3_600,  # exactly the spike: nothing due between spikes
    spike=20_000,
)


def test_a_spike_of_n_runs_at_rate_r_drains_in_n_over_r_seconds() -> None:
    assert simulate_day(TINY, 1).spike_lag() == pytest.approx(2.0)  # 20,000 / 10,000


def test_doubling_the_cells_halves_the_spike_lag() -> None:
    lags = [simulate_day(TINY, n).spike_lag() for n in (1, 2, 4)]
    assert lags == pytest.approx([2.0, 1.0, 0.5])


def test_storage_per_node_divides_by_the_cells() -> None:
    one = storage_per_node(Inputs(), 1)
    assert one == pytest.approx(7 * (100e6 * 1_230 + (1_700 * 86_400 - 100e6) * 430))
    assert storage_per_node(Inputs(), 4) == pytest.approx(one / 4)


def test_creates_take_their_share_of_the_cell() -> None:
    half = Inputs(**{**TINY.__dict__, "creates_per_day": 86_400 * 5_000.0, "create_rate": 10_000})
    assert simulate_day(half, 1).spike_lag() == pytest.approx(4.0)


def test_a_cell_down_for_e_seconds_mid_spike_ends_e_seconds_later() -> None:
    sim = Simulation(TINY, 2, 0.0, 3_600.0 * 2)

    def fail(t: float) -> None:
        sim.cells[0].down_until = t + 5.0

    sim.control(3_600.0 + 0.5, fail)
    sim.run()
    assert sim.spike_lag({0}) == pytest.approx(1.0 + 5.0, abs=0.11)  # a claim in flight ends
    assert sim.spike_lag({1}) == pytest.approx(1.0)
