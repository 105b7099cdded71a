"""Hypothesis properties of cron next runs over generated expressions, DST zones and 2026-2030:
order, resolution, wall-time match under the DST rule, no double fires, a brute-force reference.
"""

from __future__ import annotations

import calendar
import itertools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from schedd import schedule as schedule_module
from schedd.cron import parse_cron
from schedd.errors import InvalidSchedule
from schedd.schedule import CronSchedule, next_after, occurrences

ZONES = (
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "UTC",
)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
RUNS_PER_CASE = 30
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)
_MONTH_NAMES = {m: calendar.month_abbr[m].upper() for m in range(1, 13)}
_DAY_NAMES = {0: "SUN", 1: "MON", 2: "TUE", 3: "WED", 4: "THU", 5: "FRI", 6: "SAT"}
# A match can be years away (Feb 29 on a given weekday): the reference looks this far ahead.
_REFERENCE_HORIZON_DAYS = 60 * 366


def _ms(moment: datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000 + delta.microseconds // 1_000


def _instant(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def _offset(zone: ZoneInfo, ms: int) -> timedelta:
    offset = _instant(ms).astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def _wall(zone: ZoneInfo, ms: int) -> datetime:
    """The naive local wall-clock time of an instant."""
    return _instant(ms).astimezone(zone).replace(tzinfo=None, fold=0)


def _naive_utc_ms(naive: datetime) -> int:
    return _ms(naive.replace(tzinfo=UTC))


_LEAD_MINUTES = (-1, -2, -7, -29, -31, -45, -59, -61, -89, -121, -179, -720, -1439, 1, 16, 31)
START_MS = _ms(datetime(2026, 1, 1, tzinfo=UTC))
END_MS = _ms(datetime(2031, 1, 1, tzinfo=UTC))


def _transitions(zone_name: str) -> list[int]:
    """Instants in 2026-2030 where the zone's UTC offset changes."""
    zone = ZoneInfo(zone_name)
    found: list[int] = []
    cursor, step = START_MS, 6 * HOUR_MS
    while cursor < END_MS:
        if _offset(zone, cursor) != _offset(zone, cursor + step):
            low, high = cursor, cursor + step
            while high - low > 1:
                mid = (low + high) // 2
                if _offset(zone, mid) == _offset(zone, low):
                    low = mid
                else:
                    high = mid
            found.append(high)
        cursor += step
    return found


TRANSITIONS = {name: _transitions(name) for name in ZONES}


# ---------------------------------------------------------------- generated expressions


@dataclass(frozen=True)
class Field:
    """One generated cron field: its text and the values it must mean."""

    text: str
    values: frozenset[int]

    @property
    def starts_with_star(self) -> bool:
        return self.text.startswith("*")


@dataclass(frozen=True)
class Cron:
    """A generated expression with its meaning worked out independently of the parser."""

    minute: Field
    hour: Field
    day: Field
    month: Field
    weekday: Field  # values folded: 7 -> 0

    @property
    def text(self) -> str:
        return " ".join(
            f.text for f in (self.minute, self.hour, self.day, self.month, self.weekday)
        )

    @property
    def fixed_time(self) -> bool:
        """DESIGN.md: both the minute and the hour field are not starting with '*'."""
        return not (self.minute.starts_with_star or self.hour.starts_with_star)

    @property
    def days_or(self) -> bool:
        return not (self.day.starts_with_star or self.weekday.starts_with_star)

    def day_matches(self, day: date) -> bool:
        if day.month not in self.month.values:
            return False
        by_day = day.day in self.day.values
        by_weekday = day.isoweekday() % 7 in self.weekday.values
        return by_day or by_weekday if self.days_or else by_day and by_weekday

    def wall_matches(self, wall: datetime) -> bool:
        return (
            wall.minute in self.minute.values
            and wall.hour in self.hour.values
            and self.day_matches(wall.date())
        )

    def can_fire(self) -> bool:
        if self.days_or:
            return True
        leap_days = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}
        return any(d <= leap_days.get(m, 31) for m in self.month.values for d in self.day.values)


def _value_text(draw: st.DrawFn, value: int, names: dict[int, str] | None) -> str:
    if names is not None and value in names and draw(st.booleans()):
        name = names[value]
        return draw(st.sampled_from([name, name.lower(), name.capitalize()]))
    return str(value)


@st.composite
def _field(
    draw: st.DrawFn,
    low: int,
    high: int,
    *,
    star_high: int | None = None,
    names: dict[int, str] | None = None,
    likely: tuple[int, ...] = (),
    star_weight: int = 3,
    force_likely: bool = False,
    star_steps: bool = True,
) -> Field:
    """A field: '*', '*/s', or a list of values, ranges 'a-b' and stepped ranges 'a-b/s'.

    A list often (with `force_likely` always) also names one of the `likely` values.
    """
    span = high - low + 1
    star_high = high if star_high is None else star_high
    if draw(st.integers(0, 9)) < star_weight:
        step = draw(st.one_of(st.just(1), st.just(1), st.integers(2, span))) if star_steps else 1
        text = "*" if step == 1 and draw(st.booleans()) else f"*/{step}"
        return Field(text, frozenset(range(low, star_high + 1, step)))
    values_strategy = st.integers(low, high)
    if likely:
        values_strategy = st.one_of(st.sampled_from(likely), values_strategy)
    texts: list[str] = []
    values: set[int] = set()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "value", "range", "step"]))
        first = draw(values_strategy)
        if kind == "value":
            texts.append(_value_text(draw, first, names))
            values.add(first)
            continue
        last = draw(st.integers(first, high))
        step = draw(st.integers(1, span)) if kind == "step" else 1
        text = f"{_value_text(draw, first, names)}-{_value_text(draw, last, names)}"
        texts.append(f"{text}/{step}" if kind == "step" else text)
        values.update(range(first, last + 1, step))
    if likely and (force_likely or draw(st.integers(0, 3)) > 0):
        value = draw(st.sampled_from(likely))
        texts.append(_value_text(draw, value, names))
        values.add(value)
    return Field(",".join(texts), frozenset(values))


def _fold_sunday(field: Field) -> Field:
    return Field(field.text, frozenset(0 if v == 7 else v for v in field.values))


def _crons(
    hours: tuple[int, ...],
    minutes: tuple[int, ...],
    on: date | None = None,
) -> st.SearchStrategy[Cron]:
    """Expressions whose fields often name the given hours and minutes; with `on`, lists always
    name one of them and the date `on`, so the expression fires around that day's DST change.
    """
    days: tuple[int, ...] = ()
    months: tuple[int, ...] = ()
    weekdays: tuple[int, ...] = ()
    if on is not None:
        days, months, weekdays = (on.day,), (on.month,), (on.isoweekday() % 7,)
    focus = on is not None
    time_stars, day_stars, steps = (2, 8, False) if focus else (3, 6, True)
    return st.builds(
        Cron,
        minute=_field(0, 59, likely=minutes, star_weight=time_stars, force_likely=focus),
        hour=_field(0, 23, likely=hours, star_weight=time_stars, force_likely=focus),
        day=_field(1, 31, likely=days, star_weight=day_stars, force_likely=focus, star_steps=steps),
        month=_field(
            1,
            12,
            names=_MONTH_NAMES,
            likely=months,
            star_weight=day_stars,
            force_likely=focus,
            star_steps=steps,
        ),
        weekday=_field(
            0,
            7,
            star_high=6,
            names=_DAY_NAMES,
            likely=weekdays,
            star_weight=day_stars,
            force_likely=focus,
            star_steps=steps,
        ).map(_fold_sunday),
    ).filter(Cron.can_fire)


# Away from transitions, hours and minutes where the tested zones change clocks come up often.
crons = _crons(hours=(0, 1, 2, 3, 23), minutes=(0, 15, 30, 45, 59))


def _changed_walls(
    zone: ZoneInfo, transition: int
) -> tuple[tuple[int, ...], tuple[int, ...], date]:
    """Hours, minutes and date of the wall times a transition skips or repeats, and of the
    minutes on either side; the changed hours are listed twice to come up more often.
    """
    before, after = _offset(zone, transition - 1), _offset(zone, transition)
    low, high = sorted((before, after))
    first = _instant(transition).replace(tzinfo=None) + low
    last = _instant(transition).replace(tzinfo=None) + high - timedelta(minutes=1)
    outside = (first - timedelta(minutes=1), last + timedelta(minutes=1))
    changed = sorted({first.hour, last.hour, (first + (last - first) / 2).hour})
    hours = (*changed, *changed, *sorted({w.hour for w in outside}))
    minutes = sorted({w.minute for w in (*outside, first, last)} | {0, 30})
    return hours, tuple(minutes), first.date()


@st.composite
def _cases(draw: st.DrawFn) -> tuple[Cron, str, int]:
    """An expression, a zone and an instant in 2026-2030: mostly shortly before a DST change,
    with fields that often name the wall times and the date the change skips or repeats.
    """
    zone = draw(st.sampled_from(ZONES))
    if TRANSITIONS[zone] and draw(st.integers(0, 3)) > 0:
        near = draw(st.sampled_from(TRANSITIONS[zone]))
        cron = draw(_crons(*_changed_walls(ZoneInfo(zone), near)))
        # Shortly or up to a day before the change, or inside a repeated hour's second pass.
        lead_minutes = draw(st.sampled_from(_LEAD_MINUTES))
        after = near + lead_minutes * MINUTE_MS - draw(st.integers(0, MINUTE_MS - 1))
    else:
        cron = draw(crons)
        after = draw(st.integers(START_MS, END_MS))
    if draw(st.booleans()):
        after -= after % MINUTE_MS
    return cron, zone, after


def _runs(cron: Cron, zone: str, after: int, count: int = RUNS_PER_CASE) -> list[int]:
    schedule = CronSchedule(expr=cron.text, timezone=zone)
    runs: list[int] = []
    cursor = after
    for _ in range(count):
        nxt = next_after(schedule, cursor)
        assert nxt is not None, f"{cron.text!r} in {zone} stopped after {runs}"
        runs.append(nxt)
        cursor = nxt
    return runs


def _gap_walls(zone: ZoneInfo, run: int) -> list[datetime]:
    """The wall times (whole minutes) that clocks skipped at `run`, if `run` ends a gap."""
    before, after = _offset(zone, run - 1), _offset(zone, run)
    if after <= before:
        return []
    gap_start = _instant(run).replace(tzinfo=None) + before
    return [
        gap_start + timedelta(minutes=k) for k in range((after - before) // timedelta(minutes=1))
    ]


def _stands_in_for_a_gap_time(cron: Cron, zone: ZoneInfo, run: int) -> bool:
    """`run` is a gap's transition instant and the job asked for a wall time inside that gap."""
    return any(cron.wall_matches(wall) for wall in _gap_walls(zone, run))


# ---------------------------------------------------------------- properties


@PROPERTY_SETTINGS
@given(crons)
def test_parser_reads_each_generated_field_as_generated(cron: Cron) -> None:
    expr = parse_cron(cron.text)
    assert expr.minutes == tuple(sorted(cron.minute.values))
    assert expr.hours == tuple(sorted(cron.hour.values))
    assert expr.days == tuple(sorted(cron.day.values))
    assert expr.months == tuple(sorted(cron.month.values))
    assert expr.weekdays == tuple(sorted(cron.weekday.values))
    assert expr.is_wildcard is not cron.fixed_time
    assert expr.days_or is cron.days_or


@PROPERTY_SETTINGS
@given(
    st.builds(
        Cron,
        minute=st.just(Field("0", frozenset({0}))),
        hour=st.just(Field("0", frozenset({0}))),
        day=_field(1, 31, likely=(29, 30, 31), star_weight=3),
        month=_field(1, 12, likely=(2, 4, 6, 9, 11), star_weight=1),
        weekday=_field(0, 7, star_high=6, star_weight=8).map(_fold_sunday),
    )
)
def test_expression_is_rejected_exactly_when_it_can_never_fire(cron: Cron) -> None:
    try:
        parse_cron(cron.text)
    except InvalidSchedule as error:
        assert not cron.can_fire(), f"{cron.text!r} was rejected: {error}"
        assert "can never fire" in str(error)
    else:
        assert cron.can_fire(), f"{cron.text!r} can never fire but was accepted"


@PROPERTY_SETTINGS
@given(_cases())
def test_next_runs_are_strictly_increasing_and_after_the_instant_asked(
    case: tuple[Cron, str, int],
) -> None:
    cron, zone, after = case
    runs = _runs(cron, zone, after)
    assert runs[0] > after
    assert all(a < b for a, b in itertools.pairwise(runs))
    schedule = CronSchedule(expr=cron.text, timezone=zone)
    assert occurrences(schedule, after, runs[-1], limit=len(runs) + 5) == runs


@PROPERTY_SETTINGS
@given(_cases())
def test_next_runs_fall_on_whole_minutes(case: tuple[Cron, str, int]) -> None:
    cron, zone, after = case
    for run in _runs(cron, zone, after):
        assert run % MINUTE_MS == 0, run


@PROPERTY_SETTINGS
@given(_cases())
def test_each_run_matches_the_fields_in_local_wall_time(case: tuple[Cron, str, int]) -> None:
    cron, zone_name, after = case
    zone = ZoneInfo(zone_name)
    for run in _runs(cron, zone_name, after):
        if cron.wall_matches(_wall(zone, run)):
            continue
        # The one exception: a fixed-time job whose wall time was skipped fires at the
        # transition instant, the first valid instant after the gap.
        assert cron.fixed_time, f"{cron.text!r} ran at {_wall(zone, run)} in {zone_name}"
        assert _stands_in_for_a_gap_time(cron, zone, run), (
            f"{cron.text!r} ran at {_wall(zone, run)} in {zone_name}"
        )


@PROPERTY_SETTINGS
@given(_cases())
def test_no_run_falls_inside_a_dst_gap(case: tuple[Cron, str, int]) -> None:
    cron, zone_name, after = case
    zone = ZoneInfo(zone_name)
    runs = _runs(cron, zone_name, after)
    # A run standing in for a skipped wall time is a fixed-time job's, at the gap's end.
    for run in runs:
        if not cron.wall_matches(_wall(zone, run)):
            assert cron.fixed_time and _stands_in_for_a_gap_time(cron, zone, run)
    # And a fixed-time job asking for a skipped wall time is not dropped: it fires at the end
    # of every gap inside the span of runs seen.
    if not cron.fixed_time:
        return
    for transition in TRANSITIONS[zone_name]:
        if after < transition <= runs[-1] and _stands_in_for_a_gap_time(cron, zone, transition):
            assert transition in runs, (cron.text, zone_name, transition)


@PROPERTY_SETTINGS
@given(_cases())
def test_fixed_time_job_never_fires_twice_for_the_same_local_wall_time(
    case: tuple[Cron, str, int],
) -> None:
    cron, zone_name, after = case
    assume(cron.fixed_time)
    zone = ZoneInfo(zone_name)
    walls = [_wall(zone, run) for run in _runs(cron, zone_name, after)]
    assert len(set(walls)) == len(walls), walls


# ---------------------------------------------------------------- a brute-force reference


def _reference_instants(cron: Cron, zone: ZoneInfo, wall: datetime) -> list[int]:
    """The instants the DST rule gives one matching wall time."""
    offset0 = wall.replace(tzinfo=zone, fold=0).utcoffset()
    offset1 = wall.replace(tzinfo=zone, fold=1).utcoffset()
    assert offset0 is not None and offset1 is not None
    first, second = _naive_utc_ms(wall - offset0), _naive_utc_ms(wall - offset1)
    if offset0 == offset1:
        return [first]
    if offset0 > offset1:  # repeated wall time: both passes for wildcard jobs
        return [first] if cron.fixed_time else [first, second]
    if not cron.fixed_time:  # skipped wall time
        return []
    low, high = second, first  # offset(low) is the old offset, offset(high) the new one
    old = _offset(zone, low)
    while high - low > 1:
        mid = (low + high) // 2
        if _offset(zone, mid) == old:
            low = mid
        else:
            high = mid
    return [high]


def _reference_next(cron: Cron, zone: ZoneInfo, after: int) -> int | None:
    """Walk matching wall times in order from a little before `after`; keep the earliest instant
    after it. Offsets differ by at most an hour here, so walls 3 hours on either side of the
    answer's cannot beat it.
    """
    margin = timedelta(hours=3)
    floor = _wall(zone, after) - margin
    day = floor.date()
    hours, minutes = sorted(cron.hour.values), sorted(cron.minute.values)
    best: int | None = None
    stop: datetime | None = None
    for _ in range(_REFERENCE_HORIZON_DAYS):
        if stop is not None and datetime(day.year, day.month, day.day) > stop:
            break
        if cron.day_matches(day):
            for hour, minute in itertools.product(hours, minutes):
                wall = datetime(day.year, day.month, day.day, hour, minute)
                if wall < floor or (stop is not None and wall > stop):
                    continue
                for instant in _reference_instants(cron, zone, wall):
                    if instant > after and (best is None or instant < best):
                        best = instant
                        stop = stop or wall + margin
        day += timedelta(days=1)
    return best


@PROPERTY_SETTINGS
@given(_cases())
def test_next_run_is_the_earliest_instant_the_dst_rule_allows(
    case: tuple[Cron, str, int],
) -> None:
    cron, zone_name, after = case
    zone = ZoneInfo(zone_name)
    cursor = after
    for _ in range(6):
        expected = _reference_next(cron, zone, cursor)
        got = next_after(CronSchedule(expr=cron.text, timezone=zone_name), cursor)
        assert got == expected, (cron.text, zone_name, cursor)
        if got is None:
            break
        cursor = got


# ---------------------------------------------------------------- caching and bounds


@settings(max_examples=100, deadline=None)
@given(_cases())
def test_next_after_is_the_same_twice_and_after_the_cache_is_cleared(
    case: tuple[Cron, str, int],
) -> None:
    cron, zone, after = case
    schedule = CronSchedule(expr=cron.text, timezone=zone)
    first = next_after(schedule, after)
    assert next_after(schedule, after) == first
    schedule_module.cron_next_after.cache_clear()
    assert next_after(schedule, after) == first


@settings(max_examples=100, deadline=None)
@given(
    _cases(),
    st.integers(0, RUNS_PER_CASE - 1),
    st.integers(0, RUNS_PER_CASE - 1),
    st.sampled_from([-1, 0, 1]),
    st.sampled_from([-1, 0, 1]),
)
def test_start_at_and_end_at_only_cut_runs_and_are_inclusive(
    case: tuple[Cron, str, int], first: int, last: int, start_nudge: int, end_nudge: int
) -> None:
    cron, zone, after = case
    unbounded = _runs(cron, zone, after)
    first, last = min(first, last), max(first, last)
    start_at = unbounded[first] + start_nudge
    end_at = max(unbounded[last] + end_nudge, start_at + 1)
    bounded = CronSchedule(expr=cron.text, timezone=zone, start_at_ms=start_at, end_at_ms=end_at)
    runs = occurrences(bounded, after, END_MS * 2, limit=RUNS_PER_CASE)
    assert runs == [run for run in unbounded if start_at <= run <= end_at]
    assert next_after(bounded, end_at) is None
