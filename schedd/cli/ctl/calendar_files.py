"""Calendar files on the caller's machine: a dates file (one YYYY-MM-DD a line) or an
iCalendar file's all-day days, for `schedctl calendars add` and `schedctl next --calendar`;
and the occurrences a schedule keeps outside such dates. Reads local files only, never the API.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from schedd.calendars import MAX_DATES, check_date, local_date
from schedd.errors import InvalidRequest
from schedd.schedule import Schedule, next_after

if TYPE_CHECKING:
    from icalendar import Event

MAX_FILE_BYTES = 16 * 1024 * 1024
HORIZON_YEARS = 10  # an .ics file's days are kept from today to this many years ahead
# Expanding a rule walks from its first day: a daily rule from the year 1000 is refused.
MAX_RULE_STEPS = 400_000
_DAILY_OR_SLOWER = frozenset({"DAILY", "WEEKLY", "MONTHLY", "YEARLY"})


@dataclass(frozen=True, slots=True, kw_only=True)
class CalendarFile:
    """The dates a file gives (sorted, each once) and what of it was left out."""

    dates: tuple[str, ...]
    timed_events: int = 0  # an .ics file's events at a time of day: not days, ignored


def read_bytes(path: str) -> bytes:
    """The bytes of `path` (`-`: stdin), at most MAX_FILE_BYTES."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        else:
            with Path(path).open("rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidRequest(_source(path), f"cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise InvalidRequest(_source(path), f"is larger than {MAX_FILE_BYTES // 2**20} MiB")
    return data


def read_calendar_file(path: str, *, today: date) -> CalendarFile:
    """A dates file or, when it starts with BEGIN:VCALENDAR, an iCalendar file."""
    data, source = read_bytes(path), _source(path)
    if data.lstrip(b"\xef\xbb\xbf \t\r\n").upper().startswith(b"BEGIN:VCALENDAR"):
        return parse_ics(data, source=source, today=today)
    return CalendarFile(dates=parse_dates_text(_text(data, source), source=source))


def read_dates_file(path: str) -> CalendarFile:
    """A dates file (`-`: stdin)."""
    source = _source(path)
    return CalendarFile(dates=parse_dates_text(_text(read_bytes(path), source), source=source))


def read_ics_file(path: str, *, today: date) -> CalendarFile:
    """An iCalendar file (`-`: stdin)."""
    return parse_ics(read_bytes(path), source=_source(path), today=today)


def _source(path: str) -> str:
    """A file as messages name it."""
    return "stdin" if path == "-" else path


def _text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            source, f"is not UTF-8 text: {exc.reason} at byte {exc.start}"
        ) from None


def parse_dates_text(text: str, *, source: str) -> tuple[str, ...]:
    """One YYYY-MM-DD a line; blank lines and `#` comments allowed; a bad line is named."""
    dates: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        value = line.split("#", 1)[0].strip()
        if not value:
            continue
        dates.add(check_date(value, f"{source} line {number}"))
    return _capped(dates, source)


def _capped(dates: Collection[str], source: str) -> tuple[str, ...]:
    if len(dates) > MAX_DATES:
        raise InvalidRequest(
            source, f"gives {len(dates):,} dates; a calendar holds at most {MAX_DATES:,}"
        )
    return tuple(sorted(dates))


# ---------------------------------------------------------------------------- iCalendar


def parse_ics(data: bytes, *, source: str, today: date) -> CalendarFile:
    """The days of an iCalendar file's all-day events from `today` to HORIZON_YEARS ahead:
    each day of a multi-day event (DTEND exclusive), RRULE and RDATE expanded, EXDATE and
    cancelled events left out, a moved occurrence (RECURRENCE-ID) at its new days."""
    import icalendar  # here: about 45 ms of import that only this command needs

    try:
        calendar = icalendar.Calendar.from_ical(data)
    except ValueError as exc:
        raise InvalidRequest(source, f"is not an iCalendar file: {exc}") from None
    horizon = _years_after(today, HORIZON_YEARS)
    events = calendar.events
    moved = {(str(e.get("UID")), _day(e.get("RECURRENCE-ID").dt)) for e in events if _is_moved(e)}
    dates: set[str] = set()
    timed = 0
    for event in events:
        try:
            if not isinstance(event.start, date) or isinstance(event.start, datetime):
                timed += 1
                continue
            if str(event.get("STATUS", "")).upper() == "CANCELLED":
                continue
            days = list(_event_days(event, moved, today, horizon))
        except (ValueError, icalendar.error.IncompleteComponent) as exc:
            raise InvalidRequest(source, f"event {_name(event)}: {exc}") from None
        dates.update(day.isoformat() for day in days)
    return CalendarFile(dates=_capped(dates, source), timed_events=timed)


def _is_moved(event: Event) -> bool:
    return event.get("RECURRENCE-ID") is not None


def _day(value: date) -> date:
    return value.astimezone(UTC).date() if isinstance(value, datetime) else value


def _name(event: Event) -> str:
    summary = event.get("SUMMARY")
    return repr(str(summary)) if summary else repr(str(event.get("UID", "?")))


def _event_days(
    event: Event, moved: set[tuple[str, date]], today: date, horizon: date
) -> Iterator[date]:
    """Every day of every occurrence of an all-day event within [today, horizon)."""
    start: date = event.start
    length = max((_day(event.end) - start).days, 1)
    uid = str(event.get("UID"))
    excluded = {_day(value) for value in event.exdates}
    if not _is_moved(event):
        excluded |= {day for event_uid, day in moved if event_uid == uid}
    first = today - timedelta(days=length - 1)  # an occurrence that began before today
    for day in _starts(event, first, horizon):
        if day in excluded:
            continue
        span = (day + timedelta(days=k) for k in range(length))
        yield from (d for d in span if today <= d < horizon)


def _starts(event: Event, first: date, horizon: date) -> Iterator[date]:
    """The first days of an event's occurrences in [first, horizon): DTSTART, RRULE, RDATE."""
    starts = {event.start} | {_day(start) for start, _ in event.rdates}
    for rule in event.rrules:
        starts |= set(_expanded(rule, event.start, first, horizon))
    return iter(sorted(day for day in starts if first <= day < horizon))


def _expanded(rule: object, start: date, first: date, horizon: date) -> Iterator[date]:
    """The days of an RRULE from its DTSTART (a day) up to `horizon`, dateutil's rrule walking."""
    from dateutil.rrule import rrulestr
    from icalendar import vRecur

    assert isinstance(rule, vRecur)
    frequency = str(rule.get("FREQ", [""])[0]).upper()
    if frequency not in _DAILY_OR_SLOWER:
        raise ValueError(f"RRULE FREQ={frequency} repeats within a day on an all-day event")
    daily = vRecur(rule)
    if "UNTIL" in daily:  # a day, as the event's start is one (UNTIL may carry a UTC time)
        daily["UNTIL"] = [_day(daily["UNTIL"][0])]
    text = daily.to_ical().decode()  # type: ignore[no-untyped-call]
    dtstart = datetime.combine(start, time())
    for steps, occurrence in enumerate(rrulestr(text, dtstart=dtstart), start=1):
        day = occurrence.date()
        if day >= horizon:
            return
        if steps > MAX_RULE_STEPS:
            raise ValueError(
                f"RRULE {text} from {start} repeats more than {MAX_RULE_STEPS:,} times"
            )
        if day >= first:
            yield day


def _years_after(today: date, years: int) -> date:
    try:
        return today.replace(year=today.year + years)
    except ValueError:  # 29 February
        return today.replace(year=today.year + years, day=28)


# ---------------------------------------------------------------------------- occurrences


def occurrences_outside(
    schedule: Schedule, after_ms: int, count: int, *, dates: Collection[str], zone: str
) -> list[int]:
    """The first `count` runs after `after_ms` whose local date in `zone` (the schedule's:
    schedd.calendars.zone_of) is not in `dates`; each excluded date is skipped whole."""
    kept: list[int] = []
    cursor = after_ms
    while len(kept) < count:
        run = next_after(schedule, cursor)
        if run is None:
            break
        day = local_date(run, zone)
        if day not in dates:
            kept.append(run)
            cursor = run
            continue
        tz = UTC if zone == "UTC" else ZoneInfo(zone)
        midnight = datetime.combine(date.fromisoformat(day) + timedelta(days=1), time(), tz)
        cursor = max(run, int(midnight.timestamp() * 1000) - 1)
    return kept
