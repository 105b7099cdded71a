"""Calendars (issue 33 §1): dates parsed, an occurrence's local date in its schedule's zone,
and the dispatcher's plan of a run a calendar excludes: skipped with reason calendar:NAME, the
schedule going on. DST and window vectors in several zones."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schedd.api.schedules import not_excluded
from schedd.calendars import excluded_by, local_date, parse_dates, parse_exclude, zone_of
from schedd.dispatch.plan import ClaimPlan, PlanJob, plan_run
from schedd.errors import InvalidRequest, InvalidSchedule
from schedd.jobspec import parse_job, spec_to_json
from schedd.model import CronSchedule
from schedd.schedule import fire_time, load_schedule, next_after
from schedd.store.calendars import DatesCache
from schedd.store.db import Database
from schedd.store.dispatch_reads import DueRun
from schedd.stored_spec import load_plan
from schedd.timeformat import parse_instant

JOB = "job-1"
NOW = parse_instant("2026-12-01T00:00:00Z", field="t")
QUEUE = {"type": "queue", "name": "q"}


def ms(text: str) -> int:
    return parse_instant(text, field="t")


def test_dates_are_checked_sorted_and_once_each() -> None:
    assert parse_dates(["2026-12-25", "2026-01-01", "2026-12-25"]) == ("2026-01-01", "2026-12-25")
    for bad, field in [
        ("2026-12-25", "dates"),
        (["2026-02-30"], "dates[0]"),
        (["2026-1-1"], "dates[0]"),
        ([20261225], "dates[0]"),
        (["2026-12-25\n"], "dates[0]"),
    ]:
        with pytest.raises(InvalidRequest) as caught:
            parse_dates(bad)
        assert str(caught.value).startswith(field), caught.value
    with pytest.raises(InvalidRequest, match="at most 10,000"):
        parse_dates(["2026-01-01"] * 10_001)


def test_exclude_names_calendars_of_cron_and_every_schedules_only() -> None:
    assert parse_exclude(["a", "b", "a"]) == ("a", "b")
    for bad in ([], ["x y"], "hols", ["a"] * 11):
        with pytest.raises(InvalidSchedule, match=r"schedule\.exclude"):
            parse_exclude(bad)
    body = {"schedule": {"run_at": "2027-01-01T00:00:00Z", "exclude": ["hols"]}, "target": QUEUE}
    with pytest.raises(InvalidSchedule, match="cron and every schedules only"):
        parse_job(body, now_ms=NOW)
    cron = {"cron": "0 9 * * *", "timezone": "Europe/Paris", "exclude": ["hols", "fr"]}
    stored = spec_to_json(parse_job({"schedule": cron, "target": QUEUE}, now_ms=NOW))
    assert stored["schedule"] == cron  # kept in the schedule as given
    assert load_plan(json.dumps(stored)).exclude == ("hols", "fr")  # the dispatcher reads it


@pytest.mark.parametrize(
    ("instant", "zone", "day"),
    [
        ("2026-12-24T23:30:00Z", "UTC", "2026-12-24"),
        ("2026-12-24T23:30:00Z", "Europe/Berlin", "2026-12-25"),  # already the 25th there
        ("2026-12-25T04:00:00Z", "America/New_York", "2026-12-24"),  # still the 24th there
        ("2026-12-24T13:30:00Z", "Pacific/Kiritimati", "2026-12-25"),  # UTC+14
        ("2027-04-04T14:45:00Z", "Australia/Lord_Howe", "2027-04-05"),  # its 30-minute shift
    ],
)
def test_an_instants_local_date_is_the_zones(instant: str, zone: str, day: str) -> None:
    assert local_date(ms(instant), zone) == day


def plan_job(schedule: dict[str, Any], scheduled_at_ms: int, window: str | None = None) -> PlanJob:
    stored = {"schedule": schedule, "window": window}
    return PlanJob(
        job_id=JOB,
        status="active",
        next_run_at_ms=scheduled_at_ms,
        spec=load_plan(json.dumps(stored)),
    )


def plan(
    schedule: dict[str, Any], at: str, dates: set[str], window: str | None = None, *, fire: str = ""
) -> Any:
    run_ms = ms(at)
    run = DueRun(ms(fire) if fire else run_ms, 0, JOB, run_ms)
    return plan_run(
        plan_job(schedule, run_ms, window),
        run,
        run.fire_at_ms,
        misfire_threshold_ms=60_000,
        run_in_flight=lambda: False,
        dates_of=lambda name: frozenset(dates) if name == "hols" else None,
    )


BERLIN_DAILY_0230 = {"cron": "30 2 * * *", "timezone": "Europe/Berlin", "exclude": ["hols"]}


def test_a_holiday_on_a_dst_change_day_skips_the_moved_run_and_the_schedule_goes_on() -> None:
    # 02:30 does not exist on 28 March 2027 in Berlin: the run moves to 03:00 local (01:00 UTC),
    # still on the 28th, which the calendar holds.
    moved = next_after(load_schedule(BERLIN_DAILY_0230), ms("2027-03-27T02:00:00Z"))
    assert moved == ms("2027-03-28T01:00:00Z")
    planned = plan(BERLIN_DAILY_0230, "2027-03-28T01:00:00Z", {"2027-03-28"})
    following = ms("2027-03-29T00:30:00Z")  # 02:30 CEST
    assert planned == ClaimPlan(
        next_run_at_ms=following, next_fire_at_ms=following, skip="calendar:hols"
    )
    # The autumn fold: 02:30 happens twice on 31 October 2027; the run is once, on the 31st.
    folded = plan(BERLIN_DAILY_0230, "2027-10-31T00:30:00Z", {"2027-10-31"})
    assert isinstance(folded, ClaimPlan) and folded.skip == "calendar:hols"
    assert plan(BERLIN_DAILY_0230, "2027-10-31T00:30:00Z", {"2027-10-30"}).skip is None


def test_the_occurrences_own_date_decides_not_its_fire_time_in_a_window() -> None:
    nightly = {"cron": "50 23 * * *", "timezone": "America/New_York", "exclude": ["hols"]}
    # 23:50 on the 24th in New York, fired 15 minutes into its window: past midnight, on the
    # 25th (a holiday). The occurrence is the 24th's: it runs.
    late = plan(nightly, "2026-12-25T04:50:00Z", {"2026-12-25"}, "20m", fire="2026-12-25T05:05:00Z")
    assert isinstance(late, ClaimPlan) and late.skip is None
    # The 25th's own occurrence is skipped; its next run keeps the window's offset.
    skipped = plan(nightly, "2026-12-26T04:50:00Z", {"2026-12-25"}, "20m")
    following = ms("2026-12-27T04:50:00Z")
    assert skipped == ClaimPlan(
        next_run_at_ms=following,
        next_fire_at_ms=fire_time(JOB, following, 1_200_000),
        skip="calendar:hols",
    )


def test_every_schedules_use_utc_dates_and_a_missing_calendar_excludes_nothing() -> None:
    every = {"every": "6h", "start_at": "2026-12-24T00:00:00Z", "exclude": ["hols", "gone"]}
    assert zone_of(every) == "UTC"
    assert plan(every, "2026-12-25T18:00:00Z", {"2026-12-25"}).skip == "calendar:hols"
    assert plan(every, "2026-12-26T00:00:00Z", {"2026-12-25"}).skip is None
    assert excluded_by(("gone",), ms("2026-12-25T00:00:00Z"), "UTC", lambda name: None) is None


def test_a_trigger_runs_on_a_holiday() -> None:
    run_ms = ms("2026-12-25T12:00:00Z")
    every = {"every": "1h", "start_at": "2026-12-24T00:00:00Z", "exclude": ["hols"]}
    triggered = plan_run(
        plan_job(every, run_ms),
        DueRun(run_ms, 0, JOB, run_ms, True),
        run_ms,
        misfire_threshold_ms=60_000,
        run_in_flight=lambda: False,
        dates_of=lambda name: frozenset({"2026-12-25"}),
    )
    assert triggered == ClaimPlan()


def test_a_preview_passes_over_an_excluded_day_whole() -> None:
    # A minutely job in New York excluding 30 days in a row: 43,200 occurrences skipped, the
    # preview still finds the first one after them (each excluded day costs one look).
    minutely = CronSchedule(expr="* * * * *", timezone="America/New_York")
    days = {f"2026-12-{d:02d}" for d in range(1, 31)}
    runs = not_excluded(
        minutely, ms("2026-12-01T05:00:00Z"), 2, ("hols",), {"hols": frozenset(days)}
    )
    assert runs == [ms("2026-12-31T05:00:00Z"), ms("2026-12-31T05:01:00Z")]  # local midnight


def test_a_late_holiday_run_keeps_its_reason_and_its_next_run_follows_the_misfire_policy() -> None:
    every = {"every": "1h", "start_at": "2026-12-24T00:00:00Z", "exclude": ["hols"]}
    run_ms = ms("2026-12-25T10:00:00Z")
    now = ms("2026-12-25T13:30:00Z")  # 3.5 h late: run_once catches up from now
    late = plan_run(
        plan_job(every, run_ms),
        DueRun(run_ms, 0, JOB, run_ms),
        now,
        misfire_threshold_ms=60_000,
        run_in_flight=lambda: True,  # overlap is not asked about a holiday run
        dates_of=lambda name: frozenset({"2026-12-25"}),
    )
    assert late == ClaimPlan(
        next_run_at_ms=ms("2026-12-25T14:00:00Z"),
        next_fire_at_ms=ms("2026-12-25T14:00:00Z"),
        skip="calendar:hols",
    )


def test_the_dispatchers_cache_reads_a_calendar_again_only_when_it_changed(db: Database) -> None:
    db.conn.execute("INSERT INTO calendars VALUES ('t1', 'hols', '[\"2026-12-25\"]', 1, 1)")
    cache = DatesCache()
    cache.new_batch()
    assert cache.dates_of(db.conn, "t1", "hols") == frozenset({"2026-12-25"})
    db.conn.execute("UPDATE calendars SET dates = '[\"2027-01-01\"]', updated_at_ms = 2")
    assert cache.dates_of(db.conn, "t1", "hols") == frozenset({"2026-12-25"})  # this batch
    cache.new_batch()
    assert cache.dates_of(db.conn, "t1", "hols") == frozenset({"2027-01-01"})
    db.conn.execute("DELETE FROM calendars")
    cache.new_batch()
    assert cache.dates_of(db.conn, "t1", "hols") is None
