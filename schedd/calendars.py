"""Calendars (issue 33 §1): named sets of local dates a cron or every schedule may exclude.

A schedule's `"exclude": ["us-holidays", ...]` skips each occurrence whose local date, in the
schedule's zone (a cron's timezone; UTC for `every`), is in a named calendar: its run is recorded
skipped with reason `calendar:<name>`. The occurrence's own date decides, not its fire time in a
window. Pure: the calendars' dates come from the caller (the store, a file).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from schedd.errors import InvalidRequest, InvalidSchedule

NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
MAX_DATES = 10_000
MAX_EXCLUDE = 10
SKIP_PREFIX = "calendar:"
_NAME = re.compile(NAME_PATTERN[:-1] + r"\Z")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")

DatesOf = Callable[[str], frozenset[str] | None]  # a calendar's dates by name (None: no such)


def check_name(value: object, field: str = "name") -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidRequest(field, f"must be 1-64 characters of A-Z a-z 0-9 _ . -, got {value!r}")
    return value


def parse_dates(value: object, field: str = "dates") -> tuple[str, ...]:
    """A calendar's dates: YYYY-MM-DD texts of real days, at most MAX_DATES; sorted, once each."""
    if not isinstance(value, list):
        raise InvalidRequest(field, "must be a list of dates (YYYY-MM-DD)")
    if len(value) > MAX_DATES:
        raise InvalidRequest(field, f"may hold at most {MAX_DATES:,} dates, got {len(value):,}")
    for k, text in enumerate(value):
        check_date(text, f"{field}[{k}]")
    return tuple(sorted(set(value)))


def check_date(text: object, field: str) -> str:
    """A YYYY-MM-DD text of a real day; InvalidRequest naming `field` otherwise."""
    if not isinstance(text, str) or not _DATE.match(text):
        raise InvalidRequest(field, f"must be a date as YYYY-MM-DD, got {text!r}")
    try:
        date.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(field, f"is not a day of the calendar: {text!r}") from None
    return text


def parse_exclude(value: object) -> tuple[str, ...]:
    """A schedule's `exclude`: 1-MAX_EXCLUDE calendar names (once each, in the given order)."""
    field = "schedule.exclude"
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_EXCLUDE:
        raise InvalidSchedule(field, f"must be a list of 1-{MAX_EXCLUDE} calendar names")
    for name in value:
        if not isinstance(name, str) or not _NAME.match(name):
            raise InvalidSchedule(field, f"names calendars of 1-64 A-Z a-z 0-9 _ . -, got {name!r}")
    return tuple(dict.fromkeys(value))


def split_exclude(schedule: object) -> tuple[object, tuple[str, ...]]:
    """A schedule object without its `exclude`, and the names it gave (none: ())."""
    if not isinstance(schedule, Mapping) or "exclude" not in schedule:
        return schedule, ()
    rest = {key: value for key, value in schedule.items() if key != "exclude"}
    return rest, parse_exclude(schedule["exclude"])


def stored_exclude(schedule: Mapping[str, object]) -> tuple[str, ...]:
    """The names a stored schedule excludes (leniently: what is not a list of texts, none)."""
    names = schedule.get("exclude")
    if not isinstance(names, list):
        return ()
    return tuple(name for name in names if isinstance(name, str))


def zone_of(schedule: Mapping[str, object]) -> str:
    """The zone a stored schedule's local dates are in: a cron's timezone, else UTC."""
    zone = schedule.get("timezone") if "cron" in schedule else None
    return zone if isinstance(zone, str) else "UTC"


def local_date(ms: int, zone: str) -> str:
    """The date (YYYY-MM-DD) of an instant in a zone."""
    tz = UTC if zone == "UTC" else ZoneInfo(zone)
    return datetime.fromtimestamp(ms / 1000, tz).date().isoformat()


def next_local_midnight(ms: int, zone: str) -> int:
    """The instant (epoch ms) the local day after the instant's starts in the zone."""
    tz = UTC if zone == "UTC" else ZoneInfo(zone)
    day = datetime.fromtimestamp(ms / 1000, tz).date() + timedelta(days=1)
    return int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp() * 1000)


def excluded_by(names: Sequence[str], ms: int, zone: str, dates_of: DatesOf) -> str | None:
    """The first calendar among `names` holding the instant's local date (a calendar that does
    not exist excludes nothing), or None."""
    if not names:
        return None
    day = local_date(ms, zone)
    for name in names:
        dates = dates_of(name)
        if dates is not None and day in dates:
            return name
    return None


def skip_reason(name: str) -> str:
    return SKIP_PREFIX + name
