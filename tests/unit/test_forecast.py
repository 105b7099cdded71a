"""The forecast (schedd/forecast.py, store/forecast_reads.py): spans, the counting of a job's
runs (window offsets, max_runs, the run filter, DST), and a Hypothesis property: the forecast
of an hour equals, step by step, the runs the dispatcher then claims in that hour."""

from __future__ import annotations

import tempfile
from collections import Counter
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedd.errors import InvalidRequest
from schedd.forecast import (
    MAX_JOB_RUNS,
    MAX_STEPS,
    ForecastJob,
    Span,
    Tally,
    outside_calendars,
    parse_span,
)
from schedd.jobspec import parse_job, spec_to_json
from schedd.schedule import fire_time, first_run_at
from schedd.store import forecast_reads
from schedd.store.apply import StateMachine
from schedd.store.command import compact_json
from schedd.store.db import Database, connect
from schedd.store.forecast_reads import read_forecast
from schedd.store.queries import list_runs
from schedd.stored_spec import SpecPlan
from schedd.timeformat import format_instant, parse_instant
from tests.conftest import Applier
from tests.unit.test_dispatcher import PARTITIONS, Cluster

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS


def ms(text: str) -> int:
    return parse_instant(text, field="t")


def job(job_id: str, body: dict[str, Any], now: int, **fields: Any) -> ForecastJob:
    """A stored job as the forecast reads it, its next run the schedule's first after now."""
    spec = parse_job(body | {"target": {"type": "queue", "name": "q"}}, now_ms=now)
    run_at = first_run_at(spec.schedule, now)
    assert run_at is not None
    fire_at = fire_time(job_id, run_at, spec.window_ms or 0)
    stored = spec_to_json(spec)
    values: dict[str, Any] = {
        "job_id": job_id,
        "tenant_id": "t1",
        "plan": compact_json({"schedule": stored["schedule"], "window": stored["window"]}),
        "max_runs": stored.get("max_runs"),
        "next_run_at_ms": run_at,
        "next_fire_at_ms": fire_at,
    }
    return ForecastJob(**(values | fields))


def test_span_defaults_to_a_day_of_minutes_from_now() -> None:
    span = parse_span(None, None, None, now_ms=1_000)
    assert (span.from_ms, span.to_ms, span.step_ms, span.steps) == (1_000, 86_401_000, 60_000, 1440)


@pytest.mark.parametrize(
    ("to", "step", "field"),
    [
        ("2026-01-01T01:00:00Z", "500ms", "step"),
        ("2026-01-01T01:00:00Z", "2h", "step"),
        ("2026-01-01T00:00:00Z", "1m", "to"),
        ("2026-01-01T02:46:41Z", "1s", "step"),  # 10,001 steps
    ],
)
def test_a_span_out_of_bounds_is_refused_naming_the_field(to: str, step: str, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_span("2026-01-01T00:00:00Z", to, step, now_ms=0)
    assert caught.value.field == field


def test_a_span_may_hold_exactly_the_most_steps_and_a_short_last_one() -> None:
    assert parse_span("2026-01-01T00:00:00Z", "2026-01-01T02:46:40Z", "1s", now_ms=0).steps == (
        MAX_STEPS
    )
    span = Span(from_ms=0, to_ms=150_000, step_ms=MINUTE_MS)
    assert (span.steps, span.index(149_999), span.index(150_000)) == (3, 2, None)


def test_every_job_with_a_window_counts_each_run_at_its_fire_time() -> None:
    now = ms("2026-06-01T00:00:00Z")
    span = Span(from_ms=now, to_ms=now + HOUR_MS, step_ms=MINUTE_MS)
    tally = Tally(span)
    tally.add_job(job("job_w", {"schedule": {"every": "10m"}, "window": "5m"}, now))
    expected = Counter(
        (fire_time("job_w", now + k * 10 * MINUTE_MS, 300_000) - now) // MINUTE_MS
        for k in range(1, 6)
    )
    assert {i: n for i, n in enumerate(tally.runs) if n} == dict(expected)
    assert tally.peak()[1] == 1


def test_max_runs_counts_only_the_runs_left() -> None:
    now = ms("2026-06-01T00:00:00Z")
    tally = Tally(Span(from_ms=now, to_ms=now + HOUR_MS, step_ms=MINUTE_MS))
    tally.add_job(job("job_m", {"schedule": {"every": "1m"}, "max_runs": 5}, now, runs_started=2))
    assert sum(tally.runs) == 3
    assert tally.runs[1:4] == [1, 1, 1]


def test_the_run_filter_decides_each_occurrence_of_jobs_alike_and_apart() -> None:
    now = ms("2026-06-01T00:00:00Z")

    def odd_minutes(tenant_id: str, plan: SpecPlan, scheduled_at_ms: int) -> bool:
        return (scheduled_at_ms // MINUTE_MS) % 2 == 1

    span = Span(from_ms=now, to_ms=now + HOUR_MS, step_ms=MINUTE_MS)
    tally = Tally(span, by_tenant=True, run_filter=odd_minutes)
    for k in range(3):  # one schedule, no window: expanded once, counted three times
        tally.add_job(job(f"job_{k}", {"schedule": {"every": "1m"}}, now))
    tally.add_job(job("job_w", {"schedule": {"every": "1m"}, "window": "30s"}, now))
    assert tally.runs[:4] == [0, 4, 0, 4]
    assert sum(tally.runs) == 4 * 30 and tally.jobs == 4
    assert tally.top_tenants() == [("t1", 120, (1, 4))]


def test_a_calendar_holiday_on_a_dst_change_day_removes_that_local_days_runs() -> None:
    now = ms("2026-10-31T04:00:00Z")  # 00:00 EDT; New York falls back on 1 November
    span = Span(from_ms=now, to_ms=now + 72 * HOUR_MS, step_ms=HOUR_MS)
    hols = {("t1", "hols"): frozenset({"2026-11-01"})}
    tally = Tally(span, run_filter=outside_calendars(lambda tenant, name: hols.get((tenant, name))))
    zone = "America/New_York"
    hourly = {"cron": "0 * * * *", "timezone": zone, "exclude": ["hols", "missing"]}
    tally.add_job(job("job_h", {"schedule": hourly}, now))
    # 71 hourly runs after now but the 25 of 1 November's local hours, 04:00Z to 05:00Z next day
    assert tally.runs == [0] + [1] * 23 + [0] * 25 + [1] * 23


def test_an_hourly_job_runs_twice_in_the_repeated_hour_and_a_fixed_one_once() -> None:
    now = ms("2026-11-01T04:00:00Z")  # New York falls back at 06:00Z
    tally = Tally(Span(from_ms=now, to_ms=now + 4 * HOUR_MS, step_ms=HOUR_MS), by_tenant=True)
    zone = "America/New_York"
    tally.add_job(job("job_h", {"schedule": {"cron": "0 * * * *", "timezone": zone}}, now))
    tally.add_job(job("job_x", {"schedule": {"cron": "30 1 * * *", "timezone": zone}}, now))
    # 01:00 and 01:30 EDT (05:00Z, 05:30Z); 01:00 EST (06:00Z) but not 01:30 EST again; 07:00Z
    assert tally.runs == [0, 2, 1, 1]
    assert tally.top_tenants() == [("t1", 4, (1, 2))]


# ---------------------------------------------------------------- against the dispatcher

START = st.sampled_from(
    [
        ms("2026-03-08T06:35:00Z"),  # New York springs forward at 07:00Z
        ms("2026-11-01T05:40:00Z"),  # New York falls back at 06:00Z
        ms("2026-10-25T00:20:00Z"),  # London falls back at 01:00Z
        ms("2026-04-05T14:50:00Z"),  # Lord Howe falls back half an hour at 15:00Z
        ms("2026-09-21T14:13:20Z"),
    ]
)
ZONE = st.sampled_from(
    ["America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
)
CRON = st.sampled_from(
    ["*/5 * * * *", "0 * * * *", "30 * * * *", "0 2 * * *", "*/10 1-2 * * *", "* * * * *"]
)


@st.composite
def job_bodies(draw: st.DrawFn, start: int) -> dict[str, Any]:
    form = draw(st.sampled_from(["cron", "every", "run_at"]))
    body: dict[str, Any]
    if form == "run_at":
        at = start + draw(st.integers(1, HOUR_MS + MINUTE_MS)) // 1000 * 1000
        return {"schedule": {"run_at": _text(at)}}
    if form == "cron":
        body = {"schedule": {"cron": draw(CRON), "timezone": draw(ZONE)}}
    else:
        body = {"schedule": {"every": draw(st.sampled_from(["90s", "7m", "20m"]))}}
    if draw(st.booleans()):
        body["window"] = draw(st.sampled_from(["20s", "45s"]))
    if draw(st.booleans()):
        body["max_runs"] = draw(st.integers(1, 6))
    if draw(st.booleans()):
        body["schedule"]["end_at"] = _text(start + draw(st.integers(10, 60)) * MINUTE_MS)
    if draw(st.booleans()):
        body["schedule"]["exclude"] = ["hols"]
    return body


def _text(at_ms: int) -> str:
    return format_instant(at_ms)


@st.composite
def hours(draw: st.DrawFn) -> tuple[int, list[dict[str, Any]], str]:
    """A start, the jobs created then, and the one date of the calendar `hols` (the UTC date
    of the start, or the day before or after: local dates cross midnight within the hour)."""
    start = draw(START)
    day = date.fromisoformat(format_instant(start)[:10]) + timedelta(days=draw(st.integers(-1, 1)))
    return start, draw(st.lists(job_bodies(start), min_size=1, max_size=5)), day.isoformat()


@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(hours())
def test_the_forecast_of_an_hour_is_what_dispatch_then_claims(
    hour: tuple[int, list[dict[str, Any]], str],
) -> None:
    """Runs skipped by the calendar are claimed (recorded skipped) but do not run: the forecast
    leaves them out."""
    start, bodies, holiday = hour
    span = Span(from_ms=start, to_ms=start + HOUR_MS, step_ms=MINUTE_MS)
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "state.db")
        try:
            cluster = Cluster(Applier(StateMachine(db)), db)
            cluster.now = start
            calendar = {"tenant_id": "t1", "name": "hols", "dates": [holiday]}
            assert "error" not in cluster.apply("put_calendar", calendar, ts_ms=start)
            ids = [f"job_{i}" for i in range(len(bodies))]
            for job_id, body in zip(ids, bodies, strict=True):
                try:
                    cluster.add_job(job_id, body, start)
                except InvalidRequest:  # no run left after start (end_at): no such job
                    continue
            reader = connect(db.path, readonly=True)
            try:
                forecast = read_forecast(reader, span, tenant_id="t1", partitions=PARTITIONS)
            finally:
                reader.close()
            cluster.run_until(span.to_ms, step_ms=10_000)
            claimed = [0] * span.steps
            for job_id in ids:
                for run in list_runs(db.conn, job_id, before_ms=2**62, limit=10_000):
                    index = span.index(ms(run.fire_at))
                    if index is not None and run.status != "skipped":
                        claimed[index] += 1
        finally:
            db.close()
    assert forecast.runs == claimed
    assert not forecast.is_partial


def test_a_forecast_out_of_budget_is_partial(
    apply: Applier, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = Cluster(apply, db)
    start = ms("2026-09-21T14:00:00Z")
    for k in range(5):
        cluster.add_job(f"job_{k}", {"schedule": {"every": "1m"}}, start)
    span = Span(from_ms=start, to_ms=start + HOUR_MS, step_ms=MINUTE_MS)
    monkeypatch.setattr(forecast_reads, "CHUNK", 2)
    reader = connect(db.path, readonly=True)
    try:
        whole = read_forecast(reader, span, tenant_id=None, partitions=PARTITIONS)
        cut = read_forecast(reader, span, tenant_id=None, partitions=PARTITIONS, budget_s=0)
    finally:
        reader.close()
    assert (whole.jobs, whole.is_partial, sum(whole.runs)) == (5, False, 5 * 59)
    assert (cut.jobs, cut.is_partial, sum(cut.runs)) == (2, True, 2 * 59)
    assert whole.top_tenants() == [("t1", 5 * 59, (1, 5))]


def test_a_job_with_more_runs_in_the_span_than_one_forecast_expands_makes_it_partial() -> None:
    now = ms("2026-06-01T00:00:00Z")
    span = Span(from_ms=now, to_ms=now + 30 * HOUR_MS, step_ms=HOUR_MS)
    tally = Tally(span)
    tally.add_job(job("job_s", {"schedule": {"every": "1s"}}, now))
    assert tally.is_partial and sum(tally.runs) == 1 + MAX_JOB_RUNS
    limited = Tally(span)  # far fewer left than the span holds: all of them, not partial
    limited.add_job(job("job_l", {"schedule": {"every": "1s"}, "max_runs": 500}, now))
    assert not limited.is_partial and sum(limited.runs) == 500


def test_a_stored_spec_no_release_wrote_counts_its_next_run_only(
    apply: Applier, db: Database
) -> None:
    cluster = Cluster(apply, db)
    start = ms("2026-09-21T14:00:00Z")
    cluster.add_job("job_ok", {"schedule": {"every": "10m"}}, start)
    cluster.add_job("job_odd", {"schedule": {"every": "10m"}}, start)
    db.conn.execute(  # a schedule as text, a window as a number of seconds
        "UPDATE jobs SET spec = json_set(spec, '$.schedule', 'every 10m', '$.window', 30) "
        "WHERE job_id = 'job_odd'"
    )
    span = Span(from_ms=start, to_ms=start + HOUR_MS, step_ms=10 * MINUTE_MS)
    reader = connect(db.path, readonly=True)
    try:
        tally = read_forecast(reader, span, tenant_id="t1", partitions=PARTITIONS)
    finally:
        reader.close()
    assert tally.runs == [0, 2, 1, 1, 1, 1] and tally.jobs == 2
