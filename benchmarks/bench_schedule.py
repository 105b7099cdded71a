"""Benchmark: next_after/s on one core for a realistic mix of schedules, cold and cached.

Targets (issue 2): >= 5,000/s cold and >= 200,000/s cached.
"""

from __future__ import annotations

import random
import time

from schedd.schedule import CronSchedule, EverySchedule, Schedule, cron_next_after, next_after

EXPRESSIONS = [
    "*/5 * * * *",
    "0 * * * *",
    "0 8 * * MON-FRI",
    "30 2 * * *",
    "0 */2 * * *",
    "15 9 1 * *",
    "0 0 * * SUN",
    "*/15 9-17 * * 1-5",
    "0 12 1,15 * *",
    "45 23 28-31 * *",
    "0 9 1-7 * MON",
]
ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Sydney"]
BASE_MS = 1_790_000_000_000  # 2026-09-21
CALLS = 50_000


def workload(seed: int) -> list[tuple[Schedule, int]]:
    """Random (schedule, instant) pairs over a year: 90% cron, 10% every."""
    rng = random.Random(seed)
    schedules: list[Schedule] = [
        CronSchedule(expr=e, timezone=z) for e in EXPRESSIONS for z in ZONES
    ]
    schedules += [
        EverySchedule(interval_ms=rng.choice([60, 300, 3600]) * 1000, start_at_ms=BASE_MS)
    ]
    return [
        (rng.choice(schedules), BASE_MS + rng.randrange(0, 365 * 86_400) * 1000)
        for _ in range(CALLS)
    ]


def rate(calls: list[tuple[Schedule, int]]) -> float:
    """Calls per second of next_after over `calls`."""
    started = time.perf_counter()
    for schedule, after_ms in calls:
        next_after(schedule, after_ms)
    return len(calls) / (time.perf_counter() - started)


def main() -> None:
    """Print cold (distinct instants, empty memo) and cached (peak: shared instants) rates."""
    calls = workload(seed=1)
    cron_next_after.cache_clear()
    cold = rate(calls)
    # At the top of the hour many jobs share a schedule and the instant they ask about.
    peak = [(s, BASE_MS) for s, _ in calls]
    rate(peak[:1000])
    cached = rate(peak)
    print(f"next_after cold:   {cold:>12,.0f}/s  (target >= 5,000/s)")
    print(f"next_after cached: {cached:>12,.0f}/s  (target >= 200,000/s)")


if __name__ == "__main__":
    main()
