"""On the leader: the warning ahead of a spike. A paced pass counts the cluster's runs per second
of the next two hours (store/forecast_reads.py, schedd/forecast.py); its end exports the next
hour's peak second and how late that peak's last run would be at the cluster's measured drain
rate (schedd/drain.py, fed every tick from this node's claims while a backlog lasts).

Never in a spike's way: the pass reads PASS_JOBS jobs a second at most and waits while runs are
late or a queue drains (as the overdue scanner does); the drain meter's reading is a counter and
the due index's first row per partition. Proposes nothing."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from schedd import metrics
from schedd.dispatch.pruner import SPIKE_OPEN_RUNS, SPIKE_SCAN_BATCHES
from schedd.drain import DrainMeter, overload_s
from schedd.forecast import Span, Tally
from schedd.loop import Loop
from schedd.store.forecast_reads import calendar_filter, count_extra_due, count_jobs
from schedd.store.gauges import oldest_due_ms, open_batch_runs
from schedd.store.leases import held_partitions

AHEAD_MS = 3_600_000  # the hour the warning looks at
SPAN_MS = 2 * AHEAD_MS  # a pass counts two, so the hour after its end is inside
PASS_EVERY_S = 60.0  # a pass starts this long after the last one ended
PASS_JOBS = 1_000  # jobs counted a tick (a tick a second): a pass over 1,000,000 takes 17 min
NEXT_S = 1.0
IDLE_S = 1.0
SPIKE_LAG_MS = 1_000  # runs due this long ago and not claimed: a backlog (a spike draining)


class ForecastWatch(Loop):
    """One tick a second: a drain reading, then (outside spikes) one step of the pass."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        is_leader: Callable[[], bool],
        *,
        node_id: str,
        partitions: int,
        meter: DrainMeter | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__("forecast", first_wait_s=IDLE_S)
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._is_leader = is_leader
        self._node_id = node_id
        self._partitions = partitions
        self.meter = meter or DrainMeter()
        self._monotonic = monotonic
        self._tally: Tally | None = None  # the pass under way
        self._after = ""
        self._next_pass_ms = 0

    def tick(self, now_ms: int) -> float:
        if not self._is_leader():
            if self._tally is not None or self._next_pass_ms:
                metrics.record_forecast(capacity=None, peak_runs=None, overload_s=None)
            self._tally, self._after, self._next_pass_ms = None, "", 0
            return IDLE_S
        if self._conn is None:
            self._conn = self._connect()
        is_spike = self._measure(self._conn, now_ms)
        if is_spike:
            return NEXT_S  # claims and receives first
        if self._tally is None:
            if now_ms < self._next_pass_ms:
                return NEXT_S
            span = Span(from_ms=now_ms // 1000 * 1000, to_ms=now_ms + SPAN_MS, step_ms=1000)
            self._tally = Tally(span, run_filter=calendar_filter(self._conn))
            self._after = ""  # its calendars are read once a pass
            count_extra_due(self._conn, self._tally, None, self._partitions)
        after = count_jobs(self._conn, self._tally, None, self._after, most=PASS_JOBS)
        if after is not None:
            self._after = after
            return NEXT_S
        self.publish(self._tally, now_ms)
        self._tally, self._next_pass_ms = None, now_ms + int(PASS_EVERY_S * 1000)
        return NEXT_S

    def _measure(self, conn: sqlite3.Connection, now_ms: int) -> bool:
        """Feed the drain meter; whether a spike is draining (runs late, or queues full)."""
        oldest = oldest_due_ms(conn, self._partitions)
        is_late = oldest is not None and oldest < now_ms - SPIKE_LAG_MS
        share = (  # the meter reads it only while a backlog lasts
            len(held_partitions(conn, self._node_id, now_ms, margin_ms=0)) / self._partitions
            if is_late
            else 0.0
        )
        self.meter.sample(
            self._monotonic(), metrics.claimed_total(), is_backlogged=is_late, share=share
        )
        return is_late or open_batch_runs(conn, SPIKE_SCAN_BATCHES) >= SPIKE_OPEN_RUNS

    def publish(self, tally: Tally, now_ms: int) -> None:
        """Export the hour after now_ms of a finished pass: its peak second and overload."""
        first = max((now_ms - tally.span.from_ms) // 1000, 0)
        ahead = tally.runs[first : first + AHEAD_MS // 1000]
        capacity = self.meter.capacity(self._monotonic())
        metrics.record_forecast(
            capacity=capacity,
            peak_runs=max(ahead, default=0),
            overload_s=None if capacity is None else overload_s(ahead, capacity),
        )
