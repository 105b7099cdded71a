"""The payload limit counts the bytes the store keeps and delivers: the stdlib's compact JSON,
where some floats take more room than in msgspec's shortest form (1e+16 against 1e16)."""

from __future__ import annotations

import json

import pytest

from schedd.errors import InvalidRequest, PayloadTooLarge, SchedError
from schedd.jobspec import parse_job

NOW_MS = 1_790_000_000_000
BODY = {"schedule": {"run_at": "2030-01-01T00:00:00Z"}, "target": {"type": "queue", "name": "q"}}


def test_a_payload_is_measured_as_the_store_keeps_it() -> None:
    payload = [1e16] * 100  # stored as "1e+16" each: 6 bytes, where msgspec writes 4
    stored = len(json.dumps(payload, separators=(",", ":")).encode())
    spec = parse_job(BODY | {"payload": payload}, now_ms=NOW_MS, payload_limit=stored)
    assert spec.payload == payload
    with pytest.raises(PayloadTooLarge, match=f"is {stored} bytes"):
        parse_job(BODY | {"payload": payload}, now_ms=NOW_MS, payload_limit=stored - 1)


EVERY = BODY | {"schedule": {"every": "1m"}}


def test_a_window_longer_than_the_every_interval_is_refused_naming_both() -> None:
    """`--every 1m --window 2m` was accepted silently (issue 30's newcomer trial): a run could
    then fire after the next one's."""
    with pytest.raises(InvalidRequest) as raised:
        parse_job(EVERY | {"window": "2m"}, now_ms=NOW_MS)
    assert str(raised.value) == "window: must be at most schedule.every (1m), got 2m"
    assert parse_job(EVERY | {"window": "1m"}, now_ms=NOW_MS).window_ms == 60_000
    cron = BODY | {"schedule": {"cron": "* * * * *", "timezone": "UTC"}}
    assert parse_job(cron | {"window": "2m"}, now_ms=NOW_MS).window_ms == 120_000


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"window": "2d"}, "window: must be at most 1d, got '2d'"),
        ({"retry": {"max_delay": "25h"}}, "retry.max_delay: must be at most 1d, got '25h'"),
        (
            {"retry": {"initial_delay": 90_000}},
            "retry.initial_delay: must be at most 1d, got 90000",
        ),
    ],
)
def test_a_duration_over_its_bound_names_the_bound_in_its_shortest_unit(
    extra: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_job(BODY | extra, now_ms=NOW_MS)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "also_bad",
    [{"overlap_policy": "nope"}, {"name": 5}, {"window": "forever"}, {"misfire_policy": 1}],
)
def test_a_bad_schedule_is_named_first_whatever_else_is_wrong(also_bad: dict[str, object]) -> None:
    """The order the checks had before the body was a struct: a client that branches on
    invalid_schedule sees it when the schedule is bad, whatever other field is."""
    body = {"schedule": {"cron": "bad"}, "target": {"type": "queue", "name": "q"}} | also_bad
    with pytest.raises(SchedError) as refused:
        parse_job(body, now_ms=NOW_MS)
    assert refused.value.code == "invalid_schedule"


@pytest.mark.parametrize("name", ["x" * 201, "tab\there", 5])
def test_a_name_too_long_not_text_or_with_a_control_character_is_refused(name: object) -> None:
    body = {"schedule": {"every": "1m"}, "target": {"type": "queue", "name": "q"}, "name": name}
    with pytest.raises(InvalidRequest) as refused:
        parse_job(body, now_ms=NOW_MS)
    assert refused.value.field == "name"
    assert parse_job(body | {"name": "x" * 200}, now_ms=NOW_MS).name == "x" * 200
