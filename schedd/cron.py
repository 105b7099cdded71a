"""Strict parsing of 5-field cron expressions into value sets, with Vixie cron's day rule.

It only validates and describes an expression; matching wall times and DST live in schedule.py.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from functools import lru_cache

from schedd.errors import InvalidSchedule

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {name.upper(): i for i, name in enumerate(calendar.month_abbr) if name}
_WEEKDAYS = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
# The most days a month can have (February in a leap year), for the "can never fire" check.
_MAX_DAYS = {m: (29 if m == 2 else calendar.monthrange(2001, m)[1]) for m in range(1, 13)}
_UNSUPPORTED = "L W # ? H"


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 0, 7, _WEEKDAYS),
)


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A valid cron expression: the value of each field and how its days combine."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]  # 0 = Sunday; 7 is folded into 0
    is_wildcard: bool  # minute or hour field starts with '*': follows real elapsed time
    days_or: bool  # both day fields restricted: a day matches if either matches (Vixie)

    @property
    def matcher_text(self) -> str:
        """The same expression with explicit value lists, for croniter."""
        days_full = len(self.days) == 31 or (self.days_or and len(self.weekdays) == 7)
        weekdays_full = len(self.weekdays) == 7 or (self.days_or and len(self.days) == 31)
        parts = [
            _join(self.minutes),
            _join(self.hours),
            "*" if days_full else _join(self.days),
            _join(self.months),
            "*" if weekdays_full else _join(self.weekdays),
        ]
        return " ".join(parts)


def _join(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def parse_cron(text: object) -> CronExpr:
    """Parse a cron expression, raising InvalidSchedule that names the field and value."""
    if not isinstance(text, str) or not text.strip() or len(text) > 1000:
        raise InvalidSchedule("cron", "must be a non-empty cron expression like '0 8 * * MON'")
    return _parse_cron(text)


@lru_cache(maxsize=4096)
def _parse_cron(text: str) -> CronExpr:
    normalized = " ".join(text.split())
    expanded = normalized
    if normalized.startswith("@"):
        expanded = MACROS.get(normalized.lower(), "")
        if not expanded:
            raise InvalidSchedule(
                "cron", f"unknown macro {normalized!r}; use one of {', '.join(MACROS)}"
            )
    fields = expanded.split(" ")
    if len(fields) != 5:
        raise InvalidSchedule(
            "cron",
            f"needs 5 fields (minute hour day-of-month month day-of-week), got {len(fields)} "
            f"in {normalized!r}",
        )
    values = [_parse_field(part, spec) for part, spec in zip(fields, _FIELDS, strict=True)]
    weekdays = tuple(sorted({0 if d == 7 else d for d in values[4]}))
    days_star, weekdays_star = fields[2].startswith("*"), fields[4].startswith("*")
    expr = CronExpr(
        text=normalized,
        minutes=values[0],
        hours=values[1],
        days=values[2],
        months=values[3],
        weekdays=weekdays,
        is_wildcard=fields[0].startswith("*") or fields[1].startswith("*"),
        days_or=not (days_star or weekdays_star),
    )
    _check_can_fire(expr)
    return expr


def _check_can_fire(expr: CronExpr) -> None:
    # Under OR every weekday occurs in every month. Under AND, any real (month, day) pair falls
    # on every weekday over the years, so only the calendar can make an expression impossible.
    if expr.days_or:
        return
    if not any(day <= _MAX_DAYS[month] for month in expr.months for day in expr.days):
        raise InvalidSchedule(
            "cron", f"{expr.text!r} can never fire: no month in it has such a day"
        )


def _parse_field(text: str, spec: _Field) -> tuple[int, ...]:
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise InvalidSchedule("cron", f"{spec.name} field {text!r} has an empty list item")
        values.update(_parse_item(item, spec))
    return tuple(sorted(values))


def _parse_item(item: str, spec: _Field) -> range:
    base, has_step, step_text = item.partition("/")
    step = _parse_step(step_text, item, spec) if has_step else 1
    if base == "*":
        high = 6 if spec.name == "day-of-week" else spec.high
        return range(spec.low, high + 1, step)
    low_text, is_range, high_text = base.partition("-")
    low = _parse_value(low_text, spec)
    if not is_range:
        if has_step:
            raise InvalidSchedule(
                "cron",
                f"{spec.name} item {item!r}: a step needs a range or '*' "
                f"(write '{low_text}-{spec.high}/{step_text}')",
            )
        return range(low, low + 1)
    high = _parse_value(high_text, spec)
    if low > high:
        raise InvalidSchedule(
            "cron",
            f"{spec.name} range {base!r} runs backwards; wrap-around ranges are not supported",
        )
    return range(low, high + 1, step)


def _parse_step(text: str, item: str, spec: _Field) -> int:
    # A step past the field's range is what Vixie and Debian cron accept: it selects the
    # range's first value. Only ASCII digits: int() would also read '٣' or '²'.
    if not _is_ascii_number(text) or int(text) < 1:
        raise InvalidSchedule(
            "cron", f"{spec.name} step in {item!r} must be a whole number from 1 up"
        )
    return int(text)


def _is_ascii_number(text: str) -> bool:
    """Plain ASCII digits (the whole expression is at most 1,000 characters: int() is cheap)."""
    return text.isascii() and text.isdigit()


def _parse_value(text: str, spec: _Field) -> int:
    if _is_ascii_number(text):
        value = int(text)
        if not spec.low <= value <= spec.high:
            raise InvalidSchedule(
                "cron", f"{spec.name} value {value} out of range {spec.low}-{spec.high}"
            )
        return value
    if spec.names is not None and text.upper() in spec.names:
        return spec.names[text.upper()]
    kind = "a number or a name" if spec.names else "a number"
    raise InvalidSchedule(
        "cron",
        f"{spec.name} value {text!r} is not {kind} ({_UNSUPPORTED} and other extensions "
        f"are not supported)",
    )
