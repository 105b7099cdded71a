"""A run's time as its schedule's zone shows it, with a note when the DST rule moved, dropped or
collapsed a wall time (schedule.py's rule, read back). Pure: it computes no runs of its own."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from schedd.cron import CronExpr, parse_cron
from schedd.schedule import CronSchedule, Schedule, _transition_ms, _utcoffset
from schedd.timeformat import EPOCH, from_ms

_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_DAY_MS = 86_400_000
_LOOKBACK_MS = 5 * 366 * _DAY_MS  # a wildcard job's walls skipped longer ago go unsaid
_MAX_GAP_MINUTES = 2 * 24 * 60  # the longest gaps on record skip one day (Samoa, 2011)


@dataclass(frozen=True, slots=True, kw_only=True)
class Occurrence:
    """One run: its instant, its wall time in `zone` (RFC 3339 with the offset) and a note
    saying how daylight saving time shaped it (None when it did not)."""

    at_ms: int
    local: str
    zone: str
    abbreviation: str  # the zone's name for the offset then: "CEST", "EST", "+1030"
    note: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Gap:
    """A forward change of a zone's clock: wall times in [start, end) do not exist."""

    at_ms: int  # the instant of the change
    start: datetime  # naive wall times
    end: datetime


def describe(schedule: Schedule, runs: Sequence[int], after_ms: int) -> list[Occurrence]:
    """The occurrences of `runs`, the schedule's runs after `after_ms` in order (as `occurrences`
    gives them). A cron schedule's are in its zone with DST notes; the others' in UTC (or their
    zone, if they have one), without notes: they follow elapsed time."""
    # Only cron schedules have a zone today; another form that gains one is shown in it.
    zone = ZoneInfo(str(getattr(schedule, "timezone", None) or "UTC"))
    if not isinstance(schedule, CronSchedule):
        return [_occurrence(ms, zone, None) for ms in runs]
    expr = parse_cron(schedule.expr)
    previous = after_ms
    if schedule.start_at_ms is not None:
        previous = max(previous, schedule.start_at_ms - 1)
    described = []
    for at_ms in runs:
        described.append(_occurrence(at_ms, zone, note(expr, zone, previous, at_ms)))
        previous = at_ms
    return described


def note(expr: CronExpr, zone: ZoneInfo, previous_ms: int, at_ms: int) -> str | None:
    """What DST did to the run at `at_ms` of `expr` in `zone`, the run before it (or the instant
    the listing starts after) being at `previous_ms`; None when nothing."""
    local = from_ms(at_ms).astimezone(zone)
    return _fold_note(expr, zone, local) or _gap_note(expr, zone, previous_ms, at_ms)


def _occurrence(at_ms: int, zone: ZoneInfo, text: str | None) -> Occurrence:
    local = from_ms(at_ms).astimezone(zone)
    return Occurrence(
        at_ms=at_ms,
        local=local.isoformat(timespec="seconds"),
        zone=zone.key,
        abbreviation=local.tzname() or "",
        note=text,
    )


# ---------------------------------------------------------------- folds (clocks go back)


def _fold_note(expr: CronExpr, zone: ZoneInfo, local: datetime) -> str | None:
    """A run at a wall time that happens twice: a fixed-time job runs in the first pass only,
    a wildcard job in both (say which this is)."""
    wall = local.replace(tzinfo=None)
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    offset0, offset1 = first.utcoffset(), second.utcoffset()
    if offset0 is None or offset1 is None or offset0 <= offset1:
        return None
    names = (first.tzname() or "", second.tzname() or "")
    said = f"{_hm(wall)} happens twice on {_day(wall)} ({names[0]}, then {names[1]})"
    if not expr.is_wildcard:
        return f"{said}: runs once, in the first ({names[0]})"
    which = ("first", "second")[local.fold]
    return f"{said}: runs in both; this is the {which} ({names[local.fold]})"


# ---------------------------------------------------------------- gaps (clocks go forward)


def _gap_note(expr: CronExpr, zone: ZoneInfo, previous_ms: int, at_ms: int) -> str | None:
    """A fixed-time run at a gap's end stands for the wall times in the gap it matched; a
    wildcard job's wall times in a gap since its previous run did not run at all."""
    if not expr.is_wildcard:
        gap = _gap_ending_at(zone, at_ms)  # a gap on a day the job did not run is not its own
        walls = [] if gap is None else list(_matching_walls(expr, gap.start, gap.end))
        if gap is None or not walls:
            return None
        runs = "runs" if len(walls) == 1 else "runs once,"
        return f"{_named(walls)} on {_day(walls[0])}: {runs} at {_hm(gap.end)}"
    for gap in _gaps(zone, max(previous_ms, at_ms - _LOOKBACK_MS), at_ms):
        walls = list(_matching_walls(expr, gap.start, gap.end))
        if walls:
            return (
                f"{_named(walls)} on {_day(walls[0])}: the clock jumps from {_hm(gap.start)}"
                f" to {_hm(gap.end)}, so no run then"
            )
    return None


def _named(walls: list[datetime]) -> str:
    if len(walls) == 1:
        return f"{_hm(walls[0])} does not exist"
    if len(walls) == 2:
        return f"{_hm(walls[0])} and {_hm(walls[1])} do not exist"
    return f"{_hm(walls[0])} to {_hm(walls[-1])} do not exist"


def _gap_ending_at(zone: ZoneInfo, at_ms: int) -> _Gap | None:
    """The gap whose end is the instant `at_ms`, if it is one."""
    before, after = _utcoffset(zone, at_ms - 1), _utcoffset(zone, at_ms)
    if before is None or after is None or after <= before:
        return None
    naive_utc = from_ms(at_ms).replace(tzinfo=None)
    return _Gap(at_ms=at_ms, start=naive_utc + before, end=naive_utc + after)


def _gaps(zone: ZoneInfo, after_ms: int, until_ms: int) -> Iterator[_Gap]:
    """The zone's forward changes in (after_ms, until_ms], in order."""
    first_year = from_ms(after_ms).year
    for year in range(first_year, from_ms(until_ms).year + 1):
        for gap in _gaps_in_year(zone, year):
            if after_ms < gap.at_ms <= until_ms:
                yield gap


@lru_cache(maxsize=1024)
def _gaps_in_year(zone: ZoneInfo, year: int) -> tuple[_Gap, ...]:
    """The zone's forward changes in a UTC year, found a day at a time (zones change their
    offset at most once in a day) and then to the second."""
    start_ms = _year_ms(year)
    end_ms = _year_ms(year + 1)
    gaps = []
    before, offset_before = start_ms, _utcoffset(zone, start_ms)
    while before < end_ms:
        after = min(before + _DAY_MS, end_ms)
        offset_after = _utcoffset(zone, after)
        if offset_before is not None and offset_after is not None and offset_after > offset_before:
            gap = _gap_ending_at(zone, _transition_ms(zone, before, after))
            if gap is not None:
                gaps.append(gap)
        before, offset_before = after, offset_after
    return tuple(gaps)


def _year_ms(year: int) -> int:
    return (datetime(year, 1, 1, tzinfo=EPOCH.tzinfo) - EPOCH) // timedelta(milliseconds=1)


def _matching_walls(expr: CronExpr, start: datetime, end: datetime) -> Iterator[datetime]:
    """The wall times in [start, end) on the minute that `expr` matches."""
    wall = start.replace(second=0, microsecond=0)
    if wall < start:
        wall += timedelta(minutes=1)
    for _ in range(_MAX_GAP_MINUTES):
        if wall >= end:
            return
        if _matches(expr, wall):
            yield wall
        wall += timedelta(minutes=1)


def _matches(expr: CronExpr, wall: datetime) -> bool:
    if wall.minute not in expr.minutes or wall.hour not in expr.hours:
        return False
    if wall.month not in expr.months:
        return False
    day = wall.day in expr.days
    weekday = (wall.weekday() + 1) % 7 in expr.weekdays
    return (day or weekday) if expr.days_or else (day and weekday)


def _hm(wall: datetime) -> str:
    return wall.strftime("%H:%M")


def _day(wall: datetime) -> str:
    return f"{wall.day} {_MONTHS[wall.month - 1]}"
