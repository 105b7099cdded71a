"""Runs shown in their schedule's zone with DST notes (schedd/occurrence.py): gaps and folds in
several zones, 30-minute and midnight changes, wildcard and fixed-time jobs, UTC for the rest."""

from __future__ import annotations

import pytest

from schedd.occurrence import Occurrence, describe
from schedd.schedule import occurrences, parse_schedule
from schedd.timeformat import parse_instant


def _described(schedule: dict[str, str], after: str, count: int) -> list[Occurrence]:
    after_ms = parse_instant(after, field="after")
    parsed = parse_schedule(schedule, now_ms=after_ms)
    return describe(parsed, occurrences(parsed, after_ms, 2**62, count), after_ms)


VECTORS = [
    # Europe/Berlin: forward at 02:00 on 28 March 2027, back at 03:00 on 31 October 2027.
    ("30 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z", [
        ("2027-03-28T03:00:00+02:00", "02:30 does not exist on 28 March: runs at 03:00"),
        ("2027-03-29T02:30:00+02:00", None),
    ]),
    ("0,30 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z", [
        ("2027-03-28T03:00:00+02:00",
         "02:00 and 02:30 do not exist on 28 March: runs once, at 03:00"),
    ]),
    ("30 2 * * *", "Europe/Berlin", "2027-10-30T12:00:00Z", [
        ("2027-10-31T02:30:00+02:00",
         "02:30 happens twice on 31 October (CEST, then CET): runs once, in the first (CEST)"),
        ("2027-11-01T02:30:00+01:00", None),
    ]),
    ("*/30 * * * *", "Europe/Berlin", "2027-10-31T00:15:00Z", [
        ("2027-10-31T02:30:00+02:00", "02:30 happens twice on 31 October (CEST, then CET):"
         " runs in both; this is the first (CEST)"),
        ("2027-10-31T02:00:00+01:00", "02:00 happens twice on 31 October (CEST, then CET):"
         " runs in both; this is the second (CET)"),
    ]),
    ("*/30 * * * *", "Europe/Berlin", "2027-03-28T00:15:00Z", [
        ("2027-03-28T01:30:00+01:00", None),
        ("2027-03-28T03:00:00+02:00", "02:00 and 02:30 do not exist on 28 March: the clock"
         " jumps from 02:00 to 03:00, so no run then"),
    ]),
    # America/New_York: forward at 02:00 on 14 March 2027.
    ("30 2 * * *", "America/New_York", "2027-03-13T12:00:00Z", [
        ("2027-03-14T03:00:00-04:00", "02:30 does not exist on 14 March: runs at 03:00"),
    ]),
    ("*/20 2 * * *", "America/New_York", "2027-03-13T07:50:00Z", [
        ("2027-03-15T02:00:00-04:00", "02:00 to 02:40 do not exist on 14 March: the clock"
         " jumps from 02:00 to 03:00, so no run then"),
    ]),
    # Australia/Lord_Howe moves by 30 minutes: forward at 02:00, back at 02:00 to 01:30.
    ("15 2 * * *", "Australia/Lord_Howe", "2027-10-02T12:00:00Z", [
        ("2027-10-03T02:30:00+11:00", "02:15 does not exist on 3 October: runs at 02:30"),
        ("2027-10-04T02:15:00+11:00", None),
    ]),
    ("45 1 * * *", "Australia/Lord_Howe", "2027-04-03T12:00:00Z", [
        ("2027-04-04T01:45:00+11:00",
         "01:45 happens twice on 4 April (+11, then +1030): runs once, in the first (+11)"),
        ("2027-04-05T01:45:00+10:30", None),
    ]),
    # America/Santiago skips midnight (00:00 -> 01:00) on 5 September 2027.
    ("0 0 * * *", "America/Santiago", "2027-09-04T12:00:00Z", [
        ("2027-09-05T01:00:00-03:00", "00:00 does not exist on 5 September: runs at 01:00"),
        ("2027-09-06T00:00:00-03:00", None),
    ]),
    # Asia/Beirut goes back at midnight: 23:00-24:00 on 30 October 2027 happens twice.
    ("30 23 * * *", "Asia/Beirut", "2027-10-30T12:00:00Z", [
        ("2027-10-30T23:30:00+03:00",
         "23:30 happens twice on 30 October (EEST, then EET): runs once, in the first (EEST)"),
    ]),
    # A day the job does not run on: the gap on Sunday is not its business.
    ("30 2 * * MON", "Europe/Berlin", "2027-03-27T12:00:00Z", [
        ("2027-03-29T02:30:00+02:00", None),
    ]),
]  # fmt: skip


@pytest.mark.parametrize(("expr", "zone", "after", "expected"), VECTORS)
def test_dst_notes_in_several_zones(
    expr: str, zone: str, after: str, expected: list[tuple[str, str | None]]
) -> None:
    shown = _described({"cron": expr, "timezone": zone}, after, len(expected))
    assert [(o.local, o.note) for o in shown] == expected
    assert {o.zone for o in shown} == {zone}
    assert all(parse_instant(o.local, field="local") == o.at_ms for o in shown)


def test_every_and_run_at_are_shown_in_utc_without_notes() -> None:
    every = _described(
        {"every": "1h", "start_at": "2027-03-28T00:30:00Z"}, "2027-03-28T00:00:00Z", 2
    )
    assert [(o.local, o.zone, o.abbreviation, o.note) for o in every] == [
        ("2027-03-28T00:30:00+00:00", "UTC", "UTC", None),
        ("2027-03-28T01:30:00+00:00", "UTC", "UTC", None),
    ]
    once = _described({"run_at": "2027-03-28T02:30:00+01:00"}, "2027-03-27T00:00:00Z", 5)
    assert [o.local for o in once] == ["2027-03-28T01:30:00+00:00"]


def test_a_start_after_the_gap_gives_no_note() -> None:
    shown = _described(
        {"cron": "*/30 * * * *", "timezone": "Europe/Berlin", "start_at": "2027-03-28T01:30:00Z"},
        "2027-03-27T00:00:00Z",
        1,
    )
    assert [(o.local, o.note) for o in shown] == [("2027-03-28T03:30:00+02:00", None)]
