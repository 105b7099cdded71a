"""schedd.cli.ctl.calendar_files: dates files, iCalendar files (all-day days, RRULE, EXDATE,
multi-day events, timed events ignored) and the occurrences a calendar leaves; `schedctl next
--calendar` offline (schedctl's entry point in the test process)."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pytest

from schedd.calendars import local_date
from schedd.cli.ctl.calendar_files import (
    MAX_DATES,
    occurrences_outside,
    parse_dates_text,
    parse_ics,
    read_calendar_file,
)
from schedd.errors import InvalidRequest
from schedd.schedule import occurrences, parse_schedule
from schedd.timeformat import format_instant, parse_instant
from tests.schedctl_inprocess import run_schedctl

TODAY = date(2026, 12, 1)
# A US-holiday-like file: yearly rules (a fixed day, a 4th Thursday, one ending), a day taken
# out of a rule (EXDATE), an occurrence moved (RECURRENCE-ID), a multi-day closure (DTEND
# exclusive), a cancelled event, and an event at a time of day (ignored).
US_ICS = """\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//schedd tests//calendars//EN
BEGIN:VEVENT
UID:christmas@test
SUMMARY:Christmas Day
DTSTART;VALUE=DATE:20201225
DTEND;VALUE=DATE:20201226
RRULE:FREQ=YEARLY
EXDATE;VALUE=DATE:20281225
END:VEVENT
BEGIN:VEVENT
UID:thanksgiving@test
SUMMARY:Thanksgiving
DTSTART;VALUE=DATE:20241128
RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH;UNTIL=20281231T000000Z
END:VEVENT
BEGIN:VEVENT
UID:newyear@test
SUMMARY:New Year's Day
DTSTART;VALUE=DATE:20270101
RRULE:FREQ=YEARLY;COUNT=2
END:VEVENT
BEGIN:VEVENT
UID:newyear@test
SUMMARY:New Year's Day (observed)
RECURRENCE-ID;VALUE=DATE:20280101
DTSTART;VALUE=DATE:20271231
END:VEVENT
BEGIN:VEVENT
UID:shutdown@test
SUMMARY:Year-end shutdown
DTSTART;VALUE=DATE:20261228
DTEND;VALUE=DATE:20261231
END:VEVENT
BEGIN:VEVENT
UID:picnic@test
SUMMARY:Picnic (cancelled)
STATUS:CANCELLED
DTSTART;VALUE=DATE:20270704
END:VEVENT
BEGIN:VEVENT
UID:party@test
SUMMARY:Office party
DTSTART:20261218T170000Z
DTEND:20261218T220000Z
END:VEVENT
END:VCALENDAR
"""


def test_a_dates_file_allows_blank_lines_and_comments_and_answers_sorted_once_each() -> None:
    text = "# US holidays\n2026-12-25\n\n2026-11-26   # Thanksgiving\n2026-12-25\n"
    assert parse_dates_text(text, source="h.txt") == ("2026-11-26", "2026-12-25")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-12-25\n# ok\n12/25/2026\n", "h.txt line 3: must be a date as YYYY-MM-DD"),
        ("2026-12-25\n2026-02-30\n", "h.txt line 2: is not a day of the calendar: '2026-02-30'"),
    ],
)
def test_a_bad_line_is_named_with_its_number(text: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_dates_text(text, source="h.txt")


def test_more_dates_than_a_calendar_holds_are_refused() -> None:
    days = [date.fromordinal(date(2000, 1, 1).toordinal() + k) for k in range(MAX_DATES + 1)]
    with pytest.raises(InvalidRequest, match="gives 10,001 dates; a calendar holds at most 10,000"):
        parse_dates_text("\n".join(day.isoformat() for day in days), source="h.txt")


def test_an_ics_file_gives_its_all_day_days_within_ten_years() -> None:
    found = parse_ics(US_ICS.encode(), source="us.ics", today=TODAY)
    christmases = [f"{year}-12-25" for year in range(2026, 2036) if year != 2028]
    thanksgivings = ["2027-11-25", "2028-11-23"]  # 2026's is before today; the rule ends in 2028
    shutdown = ["2026-12-28", "2026-12-29", "2026-12-30"]  # DTEND 12-31 exclusive
    new_years = ["2027-01-01", "2027-12-31"]  # the 2028 one moved to 2027-12-31
    assert found.dates == tuple(sorted(christmases + thanksgivings + shutdown + new_years))
    assert found.timed_events == 1


def test_an_ics_file_is_told_from_a_dates_file_by_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "holidays"
    path.write_text(US_ICS)
    assert "2026-12-25" in read_calendar_file(str(path), today=TODAY).dates
    path.write_text("2026-12-24\n")
    assert read_calendar_file(str(path), today=TODAY).dates == ("2026-12-24",)


@pytest.mark.parametrize(
    ("ics", "message"),
    [
        ("BEGIN:VCALENDAR\nthis is not\n", "us.ics: is not an iCalendar file"),
        (
            US_ICS.replace("RRULE:FREQ=YEARLY\n", "RRULE:FREQ=HOURLY\n"),
            "event 'Christmas Day': RRULE FREQ=HOURLY repeats within a day",
        ),
    ],
)
def test_a_bad_ics_file_is_refused_naming_what(ics: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_ics(ics.encode(), source="us.ics", today=TODAY)


def runs_outside(spec: dict[str, str], after: str, count: int, dates: set[str]) -> list[str]:
    schedule = parse_schedule(spec, now_ms=0)
    zone = spec.get("timezone", "UTC")
    found = occurrences_outside(
        schedule, parse_instant(after, field="after"), count, dates=dates, zone=zone
    )
    return [format_instant(ms) for ms in found]


def test_the_local_date_in_the_schedules_zone_decides_even_on_a_dst_change_day() -> None:
    # 2027-03-14: New York moves to EDT. Every half hour of that local day is left out, the
    # runs before its local midnight (04:xx UTC on the 14th is still the 13th there) are not.
    spec = {"cron": "*/30 * * * *", "timezone": "America/New_York"}
    runs = runs_outside(spec, "2027-03-14T04:00:00Z", 3, {"2027-03-14"})
    assert runs == ["2027-03-14T04:30:00Z", "2027-03-15T04:00:00Z", "2027-03-15T04:30:00Z"]


def test_an_every_schedule_is_read_in_utc() -> None:
    spec = {"every": "12h", "start_at": "2026-12-24T06:00:00Z"}
    runs = runs_outside(spec, "2026-12-24T00:00:00Z", 3, {"2026-12-25"})
    assert runs == ["2026-12-24T06:00:00Z", "2026-12-24T18:00:00Z", "2026-12-26T06:00:00Z"]


def test_schedctl_next_with_a_calendar_file_offline(tmp_path: Path) -> None:
    holidays = tmp_path / "holidays.txt"
    holidays.write_text("2026-12-25  # Christmas\n2026-12-28\n")
    args = ("next", "50 23 * * *", "--tz", "Europe/Berlin", "--after", "2026-12-23T00:00:00Z")
    result = run_schedctl(
        (*args, "-n", "3", "--calendar", str(holidays), "--json"), env=dict(os.environ)
    )
    assert result.returncode == 0, result.stderr
    # 23:50 in Berlin is 22:50 UTC on the same local date: the 25th's run is left out
    runs = ["2026-12-23T22:50:00Z", "2026-12-24T22:50:00Z", "2026-12-26T22:50:00Z"]
    assert json.loads(result.stdout)["runs"] == runs
    holidays.write_text("2026-12-25\nChristmas\n")
    bad = run_schedctl((*args, "--calendar", str(holidays)), env=dict(os.environ))
    assert bad.returncode == 2 and "holidays.txt line 2: must be a date" in bad.stderr


@pytest.mark.parametrize(
    ("zone", "holiday", "half_hours"),
    [
        ("America/New_York", "2027-03-14", 46),  # spring forward: a 23-hour day
        ("Europe/Berlin", "2027-10-31", 50),  # fall back: 25 hours, the wildcard fires in both
        ("Australia/Lord_Howe", "2027-04-04", 49),  # back by 30 minutes
        ("Asia/Kolkata", "2027-03-14", 48),  # +05:30, no DST
    ],
)
def test_the_filter_agrees_with_the_local_dates_on_dst_days(
    zone: str, holiday: str, half_hours: int
) -> None:
    schedule = parse_schedule({"cron": "*/30 * * * *", "timezone": zone}, now_ms=0)
    after = parse_instant(f"{holiday}T00:00:00Z", field="after") - 2 * 86_400_000
    every = occurrences(schedule, after, 2**62, 5 * 48)
    on_the_day = [ms for ms in every if local_date(ms, zone) == holiday]
    assert len(on_the_day) == half_hours
    expected = [ms for ms in every if ms not in on_the_day][:100]
    assert occurrences_outside(schedule, after, 100, dates={holiday}, zone=zone) == expected
