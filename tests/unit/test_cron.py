"""The strict 5-field cron parser (schedd/cron.py): what it accepts, what each field means,
Vixie's day rule seen through real next-run answers, and rejections that name field and value.
"""

from __future__ import annotations

import pytest

from schedd.cron import CronExpr, parse_cron
from schedd.errors import InvalidSchedule
from schedd.schedule import cron_next_after
from schedd.timeformat import format_instant, parse_instant

JAN_1_2026 = "2026-01-01T00:00:00Z"  # a Thursday


def _next_runs(expr: str, after: str, count: int, timezone: str = "UTC") -> list[str]:
    """The next `count` runs of `expr` strictly after `after`, as UTC RFC 3339 strings."""
    runs: list[str] = []
    cursor = parse_instant(after, field="after")
    for _ in range(count):
        nxt = cron_next_after(expr, timezone, cursor)
        assert nxt is not None, f"{expr!r} ran out of runs after {runs}"
        runs.append(format_instant(nxt))
        cursor = nxt
    return runs


def _fields(expr: CronExpr) -> tuple[object, ...]:
    return (
        expr.minutes,
        expr.hours,
        expr.days,
        expr.months,
        expr.weekdays,
        expr.is_wildcard,
        expr.days_or,
    )


def _rejection(text: object) -> InvalidSchedule:
    with pytest.raises(InvalidSchedule) as info:
        parse_cron(text)
    return info.value


# ---------------------------------------------------------------- what each field accepts


def test_single_values_parse_into_each_field() -> None:
    expr = parse_cron("5 4 3 2 1")
    assert (expr.minutes, expr.hours, expr.days, expr.months, expr.weekdays) == (
        (5,),
        (4,),
        (3,),
        (2,),
        (1,),
    )


def test_star_covers_each_field_range() -> None:
    expr = parse_cron("* * * * *")
    assert expr.minutes == tuple(range(60))
    assert expr.hours == tuple(range(24))
    assert expr.days == tuple(range(1, 32))
    assert expr.months == tuple(range(1, 13))
    assert expr.weekdays == tuple(range(7))


def test_ranges_are_inclusive() -> None:
    expr = parse_cron("10-15 9-17 1-3 6-8 1-5")
    assert expr.minutes == (10, 11, 12, 13, 14, 15)
    assert expr.hours == tuple(range(9, 18))
    assert expr.days == (1, 2, 3)
    assert expr.months == (6, 7, 8)
    assert expr.weekdays == (1, 2, 3, 4, 5)


@pytest.mark.parametrize(
    ("expr", "attribute", "expected"),
    [
        ("*/15 * * * *", "minutes", (0, 15, 30, 45)),
        ("10-40/10 * * * *", "minutes", (10, 20, 30, 40)),
        ("0 */7 * * *", "hours", (0, 7, 14, 21)),
        ("0 0 */10 * *", "days", (1, 11, 21, 31)),
        ("0 0 1 */5 *", "months", (1, 6, 11)),
        ("0 0 * * */2", "weekdays", (0, 2, 4, 6)),
        ("0 0 * * MON-FRI/2", "weekdays", (1, 3, 5)),
        ("0 0 1 jan-dec/4 *", "months", (1, 5, 9)),
        # A step past the field's range selects the range's first value (Vixie, Debian cron).
        ("*/60 * * * *", "minutes", (0,)),
        ("*/1000 * * * *", "minutes", (0,)),
        ("0 */24 * * *", "hours", (0,)),
        ("0 0 */100 * *", "days", (1,)),
        ("0 0 5-20/100 * *", "days", (5,)),
        ("0 0 1 */13 *", "months", (1,)),
        ("0 0 * * */7", "weekdays", (0,)),
        ("0 0 * * 1-5/9", "weekdays", (1,)),
        ("*/0100 * * * *", "minutes", (0,)),
    ],
)
def test_steps_apply_to_star_and_to_ranges(expr: str, attribute: str, expected: tuple[int]) -> None:
    assert getattr(parse_cron(expr), attribute) == expected


def test_lists_combine_values_ranges_and_steps_sorted_without_duplicates() -> None:
    assert parse_cron("1,5-7,20-30/5 * * * *").minutes == (1, 5, 6, 7, 20, 25, 30)
    assert parse_cron("5,1,5,3-5 * * * *").minutes == (1, 3, 4, 5)


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("jan", (1,)),
        ("JAN", (1,)),
        ("Jan", (1,)),
        ("jAn", (1,)),
        ("mar-MAY", (3, 4, 5)),
        ("dec", (12,)),
    ],
)
def test_month_names_are_accepted_in_any_case(field: str, expected: tuple[int, ...]) -> None:
    assert parse_cron(f"0 0 1 {field} *").months == expected


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("sun", (0,)),
        ("SAT", (6,)),
        ("Mon-Fri", (1, 2, 3, 4, 5)),
        ("mon-FRI", (1, 2, 3, 4, 5)),
        ("sUn,wEd", (0, 3)),
    ],
)
def test_weekday_names_are_accepted_in_any_case(field: str, expected: tuple[int, ...]) -> None:
    assert parse_cron(f"0 0 * * {field}").weekdays == expected


@pytest.mark.parametrize(
    ("field", "expected"), [("7", (0,)), ("0,7", (0,)), ("5-7", (0, 5, 6)), ("7-7", (0,))]
)
def test_weekday_7_is_sunday(field: str, expected: tuple[int, ...]) -> None:
    assert parse_cron(f"0 0 * * {field}").weekdays == expected


def test_weekday_7_fires_on_sundays() -> None:
    sundays = ["2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-18T00:00:00Z"]
    assert _next_runs("0 0 * * 7", JAN_1_2026, 3) == sundays
    assert _next_runs("0 0 * * SUN", JAN_1_2026, 3) == sundays


def test_same_value_range_means_just_that_value() -> None:
    assert _fields(parse_cron("5-5 7-7 9-9 3-3 2-2")) == _fields(parse_cron("5 7 9 3 2"))
    assert _next_runs("5-5 * * * *", JAN_1_2026, 3) == [
        "2026-01-01T00:05:00Z",
        "2026-01-01T01:05:00Z",
        "2026-01-01T02:05:00Z",
    ]


def test_whitespace_between_fields_is_normalised() -> None:
    assert parse_cron("  0   8 * *  MON ").text == "0 8 * * MON"
    assert parse_cron("0\t8\t*\t*\tMON").text == "0 8 * * MON"


# ---------------------------------------------------------------- macros


@pytest.mark.parametrize(
    ("macro", "equivalent"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@HOURLY", "0 * * * *"),
        ("@Daily", "0 0 * * *"),
    ],
)
def test_macros_mean_their_five_field_form(macro: str, equivalent: str) -> None:
    assert _fields(parse_cron(macro)) == _fields(parse_cron(equivalent))


@pytest.mark.parametrize(
    ("macro", "expected"),
    [
        ("@hourly", ["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"]),
        ("@daily", ["2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"]),
        ("@midnight", ["2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"]),
        ("@weekly", ["2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"]),
        ("@monthly", ["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"]),
        ("@yearly", ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
        ("@annually", ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
    ],
)
def test_macros_fire_at_their_documented_times(macro: str, expected: list[str]) -> None:
    assert _next_runs(macro, JAN_1_2026, 2) == expected


@pytest.mark.parametrize(
    ("expr", "wildcard"),
    [
        ("*/15 * * * *", True),
        ("0 * * * *", True),
        ("* 2 * * *", True),
        ("0 */2 * * *", True),
        ("@hourly", True),
        ("30 2 * * *", False),
        ("0 9-17 * * MON-FRI", False),
        ("0,30 1,2 * * *", False),
        ("@daily", False),
    ],
)
def test_wildcard_job_is_one_whose_minute_or_hour_starts_with_star(
    expr: str, wildcard: bool
) -> None:
    assert parse_cron(expr).is_wildcard is wildcard


# ---------------------------------------------------------------- Vixie's day rule


def test_both_day_fields_restricted_fire_when_either_matches() -> None:
    # The 1st of each month OR every Monday.
    assert _next_runs("0 0 1 * MON", JAN_1_2026, 6) == [
        "2026-01-05T00:00:00Z",
        "2026-01-12T00:00:00Z",
        "2026-01-19T00:00:00Z",
        "2026-01-26T00:00:00Z",
        "2026-02-01T00:00:00Z",
        "2026-02-02T00:00:00Z",
    ]


def test_friday_the_13th_expression_fires_on_fridays_and_on_13ths() -> None:
    assert _next_runs("0 0 13 * FRI", JAN_1_2026, 4) == [
        "2026-01-02T00:00:00Z",
        "2026-01-09T00:00:00Z",
        "2026-01-13T00:00:00Z",
        "2026-01-16T00:00:00Z",
    ]


def test_day_of_month_starting_with_star_step_is_anded_with_weekday() -> None:
    # '*/2' is unrestricted for the rule: only odd days that are Mondays.
    assert _next_runs("0 0 */2 * MON", JAN_1_2026, 4) == [
        "2026-01-05T00:00:00Z",
        "2026-01-19T00:00:00Z",
        "2026-02-09T00:00:00Z",
        "2026-02-23T00:00:00Z",
    ]


def test_same_days_written_as_a_range_step_are_ored_with_weekday() -> None:
    # '1-31/2' names the same days as '*/2' but does not start with '*': odd days OR Mondays.
    assert _next_runs("0 0 1-31/2 * MON", JAN_1_2026, 6) == [
        "2026-01-03T00:00:00Z",
        "2026-01-05T00:00:00Z",
        "2026-01-07T00:00:00Z",
        "2026-01-09T00:00:00Z",
        "2026-01-11T00:00:00Z",
        "2026-01-12T00:00:00Z",
    ]


def test_weekday_starting_with_star_step_is_anded_with_day_of_month() -> None:
    # The 1st of the month only when it is a Sunday, Tuesday, Thursday or Saturday.
    assert _next_runs("0 0 1 * */2", JAN_1_2026, 3) == [
        "2026-02-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
        "2026-08-01T00:00:00Z",
    ]


def test_only_one_restricted_day_field_is_used_alone() -> None:
    assert _next_runs("0 0 * * MON", JAN_1_2026, 2) == [
        "2026-01-05T00:00:00Z",
        "2026-01-12T00:00:00Z",
    ]
    assert _next_runs("0 0 13 * *", JAN_1_2026, 2) == [
        "2026-01-13T00:00:00Z",
        "2026-02-13T00:00:00Z",
    ]


def test_impossible_day_is_valid_when_ored_with_a_weekday() -> None:
    # Feb 31 never comes, but under OR the Mondays of February still fire.
    assert _next_runs("0 0 31 2 MON", JAN_1_2026, 5) == [
        "2026-02-02T00:00:00Z",
        "2026-02-09T00:00:00Z",
        "2026-02-16T00:00:00Z",
        "2026-02-23T00:00:00Z",
        "2027-02-01T00:00:00Z",
    ]


def test_february_29_is_valid_and_fires_on_leap_days() -> None:
    assert parse_cron("0 0 29 2 *").days == (29,)
    assert _next_runs("0 0 29 2 *", JAN_1_2026, 2) == [
        "2028-02-29T00:00:00Z",
        "2032-02-29T00:00:00Z",
    ]


# ---------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    ("expr", "needles"),
    [
        ("* * * * * *", ["5 fields", "got 6"]),
        ("0 0 0 * * * 2026", ["5 fields", "got 7"]),
        ("* * * *", ["5 fields", "got 4"]),
        ("0 0 L * *", ["day-of-month", "'L'"]),
        ("0 0 15W * *", ["day-of-month", "'15W'"]),
        ("0 0 * * 5#3", ["day-of-week", "'5#3'"]),
        ("0 0 * * 5L", ["day-of-week", "'5L'"]),
        ("0 0 ? * MON", ["day-of-month", "'?'"]),
        ("H * * * *", ["minute", "'H'"]),
        ("0 H(0-7) * * *", ["hour", "'H(0"]),
        ("0 0 * * FRI-MON", ["day-of-week", "'FRI-MON'", "wrap-around"]),
        ("0 22-2 * * *", ["hour", "'22-2'", "wrap-around"]),
        ("0 0 1 NOV-FEB *", ["month", "'NOV-FEB'", "wrap-around"]),
        ("5/15 * * * *", ["minute", "'5/15'", "step"]),
        ("0 3/2 * * *", ["hour", "'3/2'", "step"]),
        ("60 * * * *", ["minute value 60 out of range 0-59"]),
        ("0 24 * * *", ["hour value 24 out of range 0-23"]),
        ("0 0 0 * *", ["day-of-month value 0 out of range 1-31"]),
        ("0 0 32 * *", ["day-of-month value 32 out of range 1-31"]),
        ("0 0 1 0 *", ["month value 0 out of range 1-12"]),
        ("0 0 1 13 *", ["month value 13 out of range 1-12"]),
        ("0 0 * * 8", ["day-of-week value 8 out of range 0-7"]),
        ("1-60 * * * *", ["minute value 60 out of range 0-59"]),
        ("*/0 * * * *", ["minute", "'*/0'", "step"]),
        ("0 0-23/0 * * *", ["hour", "'0-23/0'", "step"]),
        ("*/x * * * *", ["minute", "'*/x'", "step"]),
        ("*/\u00b2 * * * *", ["minute", "'*/\u00b2'", "step"]),
        ("*/\u0663 * * * *", ["minute", "'*/\u0663'", "step"]),
        ("0 */\u0661\u0662 * * *", ["hour", "step"]),
        ("0 0 1-31/\uff15 * *", ["day-of-month", "step"]),
        ("0 0 * * */-1", ["day-of-week", "step"]),
        ("0 0 * * */+1", ["day-of-week", "step"]),
        ("0 0 * * */ 1", ["5 fields"]),
        ("*/ * * * *", ["minute", "step"]),
        ("\u00b9 * * * *", ["minute", "'\u00b9'"]),
        ("0 0 \u0661-5 * *", ["day-of-month", "'\u0661'"]),
        ("1,,2 * * * *", ["minute", "'1,,2'", "empty list item"]),
        (",1 * * * *", ["minute", "empty list item"]),
        ("0 0 * * MON,", ["day-of-week", "'MON,'", "empty list item"]),
        ("@fortnightly", ["unknown macro", "'@fortnightly'"]),
        ("@reboot", ["unknown macro", "'@reboot'"]),
        ("@every 5m", ["unknown macro", "'@every 5m'"]),
        ("@daily 0", ["unknown macro"]),
        ("0 0 * JUNE *", ["month", "'JUNE'"]),
        ("0 0 * * MONDAY", ["day-of-week", "'MONDAY'"]),
        ("0 0 MON * *", ["day-of-month", "'MON'"]),
        ("1-2-3 * * * *", ["minute"]),
        ("-1 * * * *", ["minute"]),
        ("\u0663 * * * *", ["minute", "'\u0663'"]),
        ("0 0 30 2 *", ["can never fire"]),
        ("0 0 30,31 2 *", ["can never fire"]),
        ("0 0 31 4,6,9,11 *", ["can never fire"]),
        ("0 0 30 2 */2", ["can never fire"]),
    ],
)
def test_invalid_expression_is_rejected_naming_the_field_and_value(
    expr: str, needles: list[str]
) -> None:
    error = _rejection(expr)
    assert isinstance(error, ValueError)
    assert error.field == "cron"
    for needle in needles:
        assert needle in str(error)


@pytest.mark.parametrize("text", ["", "   ", None, 5, b"0 0 * * *"])
def test_empty_or_non_string_expression_is_rejected(text: object) -> None:
    error = _rejection(text)
    assert error.field == "cron"
    assert "non-empty cron expression" in str(error)


def test_step_without_range_is_rejected_with_a_suggestion() -> None:
    assert "write '5-59/15'" in str(_rejection("5/15 * * * *"))


def test_never_firing_rejection_names_the_expression() -> None:
    assert "'0 0 31 4,6,9,11 *'" in str(_rejection("0 0 31 4,6,9,11 *"))


@pytest.mark.parametrize("expr", ["0 0 31 */2 *", "0 0 31 1-12 *", "0 0 28-31 2 *", "0 0 30 1,2 *"])
def test_day_that_exists_in_some_listed_month_is_accepted(expr: str) -> None:
    assert parse_cron(expr).text == expr


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("0 0 */100 * *", JAN_1_2026, ["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"]),
        ("*/90 * * * *", JAN_1_2026, ["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"]),
        ("0 0 1 */13 *", JAN_1_2026, ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
    ],
)
def test_step_past_the_range_fires_on_the_first_value_like_cron(
    expr: str, after: str, expected: list[str]
) -> None:
    assert _next_runs(expr, after, len(expected)) == expected
