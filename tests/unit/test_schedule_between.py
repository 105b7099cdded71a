"""occurrences_between: a backfill's slots, the same runs as next_after repeated (DST included)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schedd.schedule import occurrences, occurrences_between, parse_schedule
from schedd.timeformat import parse_instant

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
EXPRS = ["*/15 * * * *", "30 2 * * *", "0 * * * *", "0,30 1-3 * * *", "*/7 2 * * SUN", "@daily"]
# A span around both of 2026's DST changes in Europe and America (and Lord Howe's in April).
LOW = parse_instant("2026-03-01T00:00:00Z", field="t")
HIGH = parse_instant("2026-11-15T00:00:00Z", field="t")
DAY = 86_400_000


def slow(schedule_json: dict[str, str], from_ms: int, to_ms: int, limit: int) -> list[int]:
    schedule = parse_schedule(schedule_json, now_ms=0, needs_a_run_left=False)
    return occurrences(schedule, from_ms - 1, to_ms - 1, limit)


@settings(max_examples=60, deadline=None)
@given(
    expr=st.sampled_from(EXPRS),
    zone=st.sampled_from(ZONES),
    from_ms=st.integers(LOW, HIGH),
    span_ms=st.integers(0, 10 * DAY),
    limit=st.integers(1, 400),
)
def test_cron_slots_in_one_pass_equal_next_after_repeated(
    expr: str, zone: str, from_ms: int, span_ms: int, limit: int
) -> None:
    schedule_json = {"cron": expr, "timezone": zone}
    schedule = parse_schedule(schedule_json, now_ms=0, needs_a_run_left=False)
    fast = occurrences_between(schedule, from_ms, from_ms + span_ms, limit)
    assert fast == slow(schedule_json, from_ms, from_ms + span_ms, limit)


def test_the_nights_clocks_change_keep_the_dst_rule() -> None:
    # Berlin 2026: 29 March 02:00 -> 03:00, 25 October 03:00 -> 02:00.
    fixed = parse_schedule({"cron": "30 2 * * *", "timezone": "Europe/Berlin"}, now_ms=0)
    spring = occurrences_between(fixed, parse_instant("2026-03-28T12:00:00Z", field="t"), HIGH, 2)
    assert spring == [
        parse_instant("2026-03-29T01:00:00Z", field="t"),  # 02:30 does not exist: at 03:00
        parse_instant("2026-03-30T00:30:00Z", field="t"),
    ]
    hourly = parse_schedule({"cron": "0 * * * *", "timezone": "Europe/Berlin"}, now_ms=0)
    autumn_from = parse_instant("2026-10-25T00:00:00Z", field="t")  # 02:00 CEST
    autumn = occurrences_between(hourly, autumn_from, autumn_from + 3 * 3_600_000, 10)
    assert autumn == [autumn_from + k * 3_600_000 for k in range(3)]  # every real hour


def test_from_is_inclusive_to_exclusive_and_start_and_end_bound_the_slots() -> None:
    start = parse_instant("2026-06-01T00:00:00Z", field="t")
    every = parse_schedule(
        {"every": "1h", "start_at": "2026-06-01T00:00:00Z", "end_at": "2026-06-01T05:00:00Z"},
        now_ms=0,
        needs_a_run_left=False,
    )
    hour = 3_600_000
    assert occurrences_between(every, start, start + 3 * hour, 100) == [
        start,
        start + hour,
        start + 2 * hour,
    ]
    assert occurrences_between(every, start - 9 * hour, start + 9 * hour, 100) == [
        start + k * hour for k in range(6)
    ]
    cron = parse_schedule(
        {
            "cron": "0 * * * *",
            "timezone": "UTC",
            "start_at": "2026-06-01T01:00:00Z",
            "end_at": "2026-06-01T03:00:00Z",
        },
        now_ms=0,
        needs_a_run_left=False,
    )
    assert occurrences_between(cron, start - 9 * hour, start + 9 * hour, 100) == [
        start + hour,
        start + 2 * hour,
        start + 3 * hour,
    ]
    one = parse_schedule({"run_at": "2026-06-01T00:00:00Z"}, now_ms=start)
    assert occurrences_between(one, start, start + 1, 5) == [start]
    assert occurrences_between(one, start + 1, start + hour, 5) == []


def test_ranges_starting_all_around_a_dst_change_give_the_same_slots() -> None:
    changes = ["2026-03-29T01:00:00Z", "2026-10-25T01:00:00Z"]  # Europe/Berlin
    for expr in ("*/15 * * * *", "30 2 * * *", "0,30 1-3 * * *", "* 2 * * *"):
        for change in changes:
            around = parse_instant(change, field="t")
            for k in range(-12, 12):
                from_ms = around + k * 7 * 60_000
                to_ms = from_ms + 4 * 3_600_000
                fast = occurrences_between(
                    parse_schedule({"cron": expr, "timezone": "Europe/Berlin"}, now_ms=0),
                    from_ms,
                    to_ms,
                    60,
                )
                assert fast == slow({"cron": expr, "timezone": "Europe/Berlin"}, from_ms, to_ms, 60)
