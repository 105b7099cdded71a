"""Issue 35 §3: a discrete-event simulation of the seed's day on 1-16 cells, measured inputs.

Stdlib only (matplotlib for the plot when installed: `make bench` installs it). It starts no server
and measures nothing itself: every per-cell input below was measured on the 2-core development
machine (three nodes sharing its two cores, docs/benchmarks.md), and every other number is an
assumption named in ASSUMPTIONS and printed with the table.

Measured inputs (date, command, where written down):

input | value | measured on, code | command | written down in
- drain of 100,000 due at once, three nodes | 7.47 s (7.40-8.55 s) | 2026-12-05, `b9e4c69` |
  `make bench-compare` | docs/benchmarks.md "Run B after A beside the spike", runs 1, 3, 5
- drain of 620,000 / of 100,000, one sitting | 8.26x (91.8 s / 11.12 s) | 2026-12-04, `3f9c397` |
  `compare.py --n 100000`; `compare.py --n 620000 --systems bullmq,schedd3` |
  docs/benchmarks.md "Every target of issue 29 in one sitting, again"
- batched creates, three nodes | 12,587/s (mean of 5) | 2026-12-04, `ad63a17` |
  `bench_api.py --nodes 3 --seconds 10` | docs/benchmarks.md "Typed boundaries"
- snapshot shipped and installed | 1,032 MB in 75.5 s (13.7 MB/s); 101.3 s (10.2 MB/s) after the
  review's fsync | 2026-12-02, `fc7acec` / `2e9201a` | `bench_snapshot_install.py --mb 1024` |
  docs/benchmarks.md; docs/operations.md "Replacing a dead node"
- bytes per one-time job / per finished run with its attempt | 800 B / 430 B | 2026-12-01 |
  the real apply path, SQLite `dbstat` | docs/operations.md "Sizing"
- closed history segments fetched by a new node | 10.83 GB in 167.6 s (65 MB/s), two files in
  flight, rows checked | 2026-12-05, `17022b6` | `bench_segment_fetch.py --gigabytes 10
  --file-mb 1024` | docs/scaling.md §1 "The fetch of closed segments"
- a dead leader's partitions served elsewhere | p50 4.6-4.8 s, max 6.8 s (lease_ttl 2 s) |
  campaigns 1000-1140 | `make chaos` | docs/reliability.md

The model: a cell is one server draining its ranges' due runs in due order, in claims of 1,000,
at a rate that depends on its backlog (the measured drain time of N runs: linear up to 100,000, then
a power law through the 620,000 point, or linear throughout with `--linear`), less the share of
its time its creates take. Runs due outside a backlog are served as they fall due (a fluid: the
sustained 2,000 runs/s of docs/benchmarks.md ran at p99 0.51 s).
"""

from __future__ import annotations

import argparse
import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
DOCS_PNG = Path(__file__).parent.parent / "docs" / "scaling-simulation.png"
CELLS = (1, 2, 4, 8, 16)
BATCH = 1_000
HOUR = 3_600.0
GB = 1e9


@dataclass(frozen=True)
class Inputs:
    """Measured per-cell figures (the module docstring cites each) and the seed's load."""

    drain_100k_s: float = 7.47
    superlinear_620k: float = 91.8 / 11.12
    create_rate: float = 12_587.0
    snapshot_mb_s: float = 1_032 / 75.5
    snapshot_mb_s_reviewed: float = 1_032 / 101.3
    job_bytes: float = 800.0
    run_bytes: float = 430.0
    failover_s: float = 6.8 + 3.0
    # the seed's day
    runs_per_s: float = 1_700.0
    spike: int = 620_000
    creates_per_day: float = 100e6
    retention_days: float = 7.0
    # assumptions (ASSUMPTIONS says why)
    switch_s: float = 6.0
    segment_mb_s: float = 10_830 / 167.6
    live_lead_h: float = 1.0
    linear: bool = False

    @property
    def background_rate(self) -> float:
        """Runs/s due outside the spike: the 1,700/s average includes the 620,000 of each hour."""
        return (self.runs_per_s * HOUR - self.spike) / (HOUR - 1)


ASSUMPTIONS = (
    "The 1,700 runs/s average includes each hour's 620,000: the rest of the hour is"
    " (1,700 x 3,600 - 620,000) / 3,599 = 1,528 runs/s, due evenly; every hour is alike.",
    "The spike's runs are all due at the hour's first instant; the lag of a run is its claim-and-"
    "delivery end minus that instant (as `compare.py`'s drain: last first delivery - T).",
    "Partitions and the spike are spread evenly over the cells (a hash); a cell drains its own"
    " backlog only, at the three-node rate of 2026-12-05 on this machine (one cell = one such"
    " cluster; cells do not share machines).",
    "Drain time of N runs: N / 13,387 per s up to 100,000; beyond, a power law through the"
    " same-sitting ratio 620,000 / 100,000 = 8.26x (exponent 1.16); --linear keeps 13,387/s.",
    "Creates (100 million a day, batched) take the share of a cell's time they take of its"
    " measured batched create rate (1,157/s over 12,587/s = 9.2% on one cell), spikes included.",
    "Storage: 800 B per one-time job + 430 B per finished run (runs of recurring jobs: the"
    " 1,700/s minus the one-time 1,157/s), kept 7 days; the Raft journal and a snapshot double it"
    " on disk (docs/operations.md). Every node of a cell holds its cell's share.",
    "Rebuild, whole history: the database shipped as one Raft snapshot at the measured 13.7 MB/s"
    " (10.2 MB/s after the review's fsync). Live state + segments: the node serves once the live"
    " state (one-time jobs created 1 h ahead on average: 800 B each) is in, and fetches the closed"
    " segments at the measured 65 MB/s (one peer, two files in flight); finished jobs are assumed"
    " to be in segments too, which is not built (docs/scaling.md §1).",
    "Cell failure: one cell's leader is lost half way through its spike; the cell claims nothing"
    " for 9.8 s (a dead leader's partitions elsewhere: max 6.8 s in the chaos campaigns with a"
    " 2 s lease_ttl, + 3 s for the default 5 s), then drains at the same rate on two nodes.",
    "Range move: half of cell 0's partitions move to a new, empty cell half way through the spike"
    " (copy and catch-up done before the spike); the range claims nothing for 6 s (the switch in"
    " etcd, fencing by revision, the new owner's lease: today's lease_ttl 5 s + 1 s), then drains"
    " on the new cell.",
)


def drain_seconds(n: float, inputs: Inputs) -> float:
    """Measured-curve time for one three-node cell to drain n runs due at once (no creates)."""
    rate0 = 100_000 / inputs.drain_100k_s
    if inputs.linear or n <= 100_000:
        return n / rate0
    exponent = math.log(inputs.superlinear_620k) / math.log(6.2)
    return inputs.drain_100k_s * (n / 100_000) ** exponent


def drain_rate(backlog: float, inputs: Inputs) -> float:
    """Runs/s at this backlog: 1 / d(drain_seconds)/dN."""
    rate0 = 100_000 / inputs.drain_100k_s
    if inputs.linear or backlog <= 100_000:
        return rate0
    exponent = math.log(inputs.superlinear_620k) / math.log(6.2)
    slope = exponent * inputs.drain_100k_s / 100_000 * (backlog / 100_000) ** (exponent - 1)
    return 1 / slope


@dataclass
class Range:
    """A set of partitions: its background rate, its spike lumps [due, left], and its owner."""

    owner: int | None
    bg_rate: float
    bg_upto: float
    lumps: list[list[float]] = field(default_factory=list)
    spike_done: dict[float, float] = field(default_factory=dict)  # lump due -> last run's end


@dataclass
class Cell:
    free_rate_share: float
    down_until: float = 0.0


class Simulation:
    """Cells draining ranges; control events (failures, moves) scheduled ahead of time."""

    def __init__(self, inputs: Inputs, n_cells: int, start: float, end: float) -> None:
        self.inputs, self.end = inputs, end
        share = 1 - inputs.creates_per_day / 86_400 / n_cells / inputs.create_rate
        self.cells = [Cell(share) for _ in range(n_cells)]
        per_range = inputs.background_rate / (2 * n_cells)
        self.ranges = [Range(i // 2, per_range, start) for i in range(2 * n_cells)]
        hour = math.ceil(start / HOUR) * HOUR
        while hour < end:
            for r in self.ranges:
                r.lumps.append([hour, inputs.spike / (2 * n_cells)])
            hour += HOUR
        self.events: list[tuple[float, int, int, Callable[[float], None] | None]] = []
        self.controls: list[float] = []
        self.seq = 0
        self.max_bg_lag = 0.0

    def push(self, t: float, cell: int, action: Callable[[float], None] | None = None) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, cell, action))

    def control(self, t: float, action: Callable[[float], None]) -> None:
        self.controls.append(t)
        self.push(t, -1, action)

    def add_cell(self) -> int:
        self.cells.append(Cell(self.cells[0].free_rate_share))
        return len(self.cells) - 1

    def run(self) -> None:
        for c in range(len(self.cells)):
            self.push(self.ranges[0].bg_upto, c)
        busy_until = [0.0] * len(self.cells)
        while self.events:
            t, _, c, action = heapq.heappop(self.events)
            if t >= self.end:
                break
            if action is not None:
                action(t)
                continue
            if t < busy_until[c] - 1e-9:
                continue  # a duplicate wake-up of a busy cell
            busy_until[c] = self.step(c, t)

    def step(self, c: int, t: float) -> float:
        cell = self.cells[c]
        if t < cell.down_until:
            self.push(cell.down_until, c)
            return cell.down_until
        owned = [r for r in self.ranges if r.owner == c]
        backlog = sum(self._available(r, t) for r in owned)
        if backlog < 1:
            return self._idle(c, t, owned)
        rate = drain_rate(backlog, self.inputs) * cell.free_rate_share
        taken = self._take(owned, t, min(BATCH, backlog))
        finish = t + taken[0] / rate
        for r, due, kind in taken[1]:
            if kind == "spike done":
                r.spike_done[due] = finish
            elif kind == "background":
                self.max_bg_lag = max(self.max_bg_lag, finish - due)
        self.push(finish, c)
        return finish

    def _available(self, r: Range, t: float) -> float:
        lumps = sum(left for due, left in r.lumps if due <= t)
        return lumps + max(0.0, t - r.bg_upto) * r.bg_rate

    def _idle(self, c: int, t: float, owned: list[Range]) -> float:
        """Nothing backed up: serve the background as it falls due, up to the next event."""
        later = [due for r in owned for due, left in r.lumps if due > t and left > 0]
        later += [x for x in self.controls if x > t]
        wake = min(later, default=self.end)
        for r in owned:
            r.bg_upto = max(r.bg_upto, wake)
        self.push(wake, c)
        return t

    def _take(
        self, owned: list[Range], t: float, want: float
    ) -> tuple[float, list[tuple[Range, float, str]]]:
        """Claim up to want runs in due order: lumps first (due earlier), then background."""
        got, pieces = 0.0, []  # (range, due, "spike" | "spike done" | "background")
        for r in sorted(owned, key=lambda r: min((d for d, n in r.lumps if n > 0), default=t)):
            for lump in r.lumps:
                if lump[0] <= t and lump[1] > 0 and got < want:
                    k = min(lump[1], want - got)
                    lump[1] -= k
                    got += k
                    pieces.append((r, lump[0], "spike done" if lump[1] <= 0 else "spike"))
        for r in owned:
            if got < want and r.bg_upto < t:
                k = min((t - r.bg_upto) * r.bg_rate, want - got)
                r.bg_upto += k / r.bg_rate
                got += k
                pieces.append((r, r.bg_upto, "background"))
        return got, pieces

    def spike_lag(self, cells: set[int] | None = None) -> float:
        """The worst lag of a spike's last run, over the hours and the ranges (of these cells)."""
        lags = [
            end - due
            for i, r in enumerate(self.ranges)
            if cells is None or i // 2 in cells
            for due, end in r.spike_done.items()
        ]
        return max(lags)


# --- scenarios -----------------------------------------------------------------------------------


def simulate_day(inputs: Inputs, n_cells: int) -> Simulation:
    """The seed's whole day on n cells, nothing failing."""
    sim = Simulation(inputs, n_cells, 0.0, 24 * HOUR)
    sim.run()
    return sim


def simulate_failure(inputs: Inputs, n_cells: int, base_lag: float) -> float:
    """Cell 0's leader lost half way through the 12:00 spike: its last spike run's lag."""
    sim = Simulation(inputs, n_cells, 11.5 * HOUR, 12.5 * HOUR)

    def fail(t: float) -> None:
        sim.cells[0].down_until = t + inputs.failover_s

    sim.control(12 * HOUR + base_lag / 2, fail)
    sim.run()
    return sim.spike_lag({0})


def simulate_move(inputs: Inputs, n_cells: int, base_lag: float) -> float:
    """Half of cell 0's partitions move to a new cell half way through the 12:00 spike."""
    sim = Simulation(inputs, n_cells, 11.5 * HOUR, 12.5 * HOUR)
    target = sim.add_cell()
    moving = sim.ranges[1]  # cell 0 owns ranges 0 and 1

    def pause(t: float) -> None:
        moving.owner = None

    def switch(t: float) -> None:
        moving.owner = target

    middle = 12 * HOUR + base_lag / 2
    sim.control(middle, pause)
    sim.control(middle + inputs.switch_s, switch)
    sim.run()
    return sim.spike_lag({0})


def storage_per_node(inputs: Inputs, n_cells: int) -> float:
    """Bytes of one node's database (7 days of history and the jobs), before the 2x for Raft."""
    one_time = inputs.creates_per_day
    recurring_runs = inputs.runs_per_s * 86_400 - one_time
    per_day = one_time * (inputs.job_bytes + inputs.run_bytes) + recurring_runs * inputs.run_bytes
    return per_day * inputs.retention_days / n_cells


def rebuild_seconds(inputs: Inputs, n_cells: int) -> dict[str, float]:
    """A wiped node's rebuild: whole history as one snapshot, or live state then segments."""
    db = storage_per_node(inputs, n_cells)
    rate = inputs.snapshot_mb_s * 1e6
    live = inputs.creates_per_day * inputs.live_lead_h / 24 * inputs.job_bytes / n_cells
    return {
        "whole": db / rate,
        "whole_reviewed": db / (inputs.snapshot_mb_s_reviewed * 1e6),
        "live": live / rate,
        "segments": live / rate + (db - live) / (inputs.segment_mb_s * 1e6),
    }


@dataclass(frozen=True)
class Row:
    cells: int
    spike_per_cell: float
    lag_s: float
    lag_linear_s: float
    background_lag_s: float
    failure_lag_s: float
    move_lag_s: float
    storage_bytes: float
    rebuild: dict[str, float]


def row(inputs: Inputs, n_cells: int) -> Row:
    day = simulate_day(inputs, n_cells)
    lag = day.spike_lag()
    linear = simulate_day(Inputs(**{**inputs.__dict__, "linear": True}), n_cells).spike_lag()
    return Row(
        cells=n_cells,
        spike_per_cell=inputs.spike / n_cells,
        lag_s=lag,
        lag_linear_s=linear,
        background_lag_s=day.max_bg_lag,
        failure_lag_s=simulate_failure(inputs, n_cells, lag),
        move_lag_s=simulate_move(inputs, n_cells, lag),
        storage_bytes=storage_per_node(inputs, n_cells),
        rebuild=rebuild_seconds(inputs, n_cells),
    )


# --- output -------------------------------------------------------------------------------------


def hours(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def table(rows: list[Row]) -> str:
    lines = [
        "| cells (nodes) | spike per cell | last spike run's lag (linear rate) | worst background"
        " lag | cell failure: that cell's last spike run | range move: source cell's last spike"
        " run | database per node (disk: 2x) | rebuild, whole history at 13.7 MB/s (10.2) |"
        " rebuild, live state + segments at 65 MB/s: serving / full |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        db = r.storage_bytes / GB
        lines.append(
            f"| {r.cells} ({3 * r.cells}) | {r.spike_per_cell:,.0f} | {r.lag_s:.1f} s"
            f" ({r.lag_linear_s:.1f} s) | {r.background_lag_s:.1f} s | {r.failure_lag_s:.1f} s"
            f" | {r.move_lag_s:.1f} s | {db:,.0f} GB ({2 * db:,.0f} GB)"
            f" | {hours(r.rebuild['whole'])} ({hours(r.rebuild['whole_reviewed'])})"
            f" | {hours(r.rebuild['live'])} / {hours(r.rebuild['segments'])} |"
        )
    return "\n".join(lines)


def plot(rows: list[Row], paths: list[Path]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no plot; `make bench` installs it)")
        return
    cells = [r.cells for r in rows]
    fig, (lag, disk) = plt.subplots(1, 2, figsize=(11, 4.5))
    lag.plot(cells, [r.lag_s for r in rows], "o-", label="measured drain curve")
    lag.plot(cells, [r.lag_linear_s for r in rows], "s--", label="linear (13,387 runs/s a cell)")
    lag.plot(cells, [r.failure_lag_s for r in rows], "^:", label="a cell's leader lost mid-spike")
    lag.set(xscale="log", yscale="log", xlabel="cells (three nodes each)")
    lag.set(ylabel="lag of the spike's last run (s)", title="620,000 runs due at the hour")
    disk.plot(cells, [r.storage_bytes / GB for r in rows], "o-", label="database per node")
    disk.plot(cells, [2 * r.storage_bytes / GB for r in rows], "s--", label="disk per node (2x)")
    disk.set(xscale="log", yscale="log", xlabel="cells (three nodes each)", ylabel="GB")
    disk.set(title="100 million one-time jobs a day, kept 7 days")
    for ax in (lag, disk):
        ax.set_xticks(cells, [str(c) for c in cells])
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.tight_layout()
    for path in paths:
        path.parent.mkdir(exist_ok=True)
        fig.savefig(path, dpi=110)
        print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default=",".join(map(str, CELLS)), help="cell counts")
    parser.add_argument("--switch-s", type=float, default=Inputs.switch_s, help="range move pause")
    parser.add_argument("--live-lead-h", type=float, default=Inputs.live_lead_h)
    parser.add_argument("--segment-mb-s", type=float, default=Inputs.segment_mb_s)
    parser.add_argument("--no-docs-png", action="store_true", help="only benchmarks/results/")
    args = parser.parse_args()
    inputs = Inputs(
        switch_s=args.switch_s,
        live_lead_h=args.live_lead_h,
        segment_mb_s=args.segment_mb_s,
    )
    started = time.monotonic()
    rows = [row(inputs, int(c)) for c in args.cells.split(",")]
    print("Measured inputs (" + __doc__.split("Measured inputs (", 1)[1].split("The model:")[0])
    print("\nAssumptions:")
    for i, text in enumerate(ASSUMPTIONS, 1):
        print(f"{i}. {text}")
    print()
    print(table(rows))
    print(f"\n(simulated in {time.monotonic() - started:.1f} s)")
    plot(rows, [RESULTS / "scaling-simulation.png"] + ([] if args.no_docs_png else [DOCS_PNG]))


if __name__ == "__main__":
    main()
