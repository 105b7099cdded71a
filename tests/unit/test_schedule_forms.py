"""The schedule forms OpenAPI publishes (wire/schedules.py structs) are the ones
schedule.parse_schedule reads: the same keys per form, and what one accepts the other does."""

from __future__ import annotations

import pytest

from schedd import schedule
from schedd.bodies import convert_body
from schedd.errors import InvalidRequest
from schedd.wire.schedules import SCHEDULE_FORMS

NOW_MS = 1_790_000_000_000


def test_each_form_has_its_struct_s_fields() -> None:
    assert len(SCHEDULE_FORMS) == len(schedule._FORMS)
    for form, struct in zip(schedule._FORMS, SCHEDULE_FORMS, strict=True):
        assert struct.__struct_fields__[0] == form
        assert set(struct.__struct_fields__) == schedule._KEYS[form]


@pytest.mark.parametrize(
    ("body", "accepted"),
    [
        ({"run_at": "2030-01-01T00:00:00+05:30"}, True),
        ({"run_at": "2030-01-01T00:00:00"}, False),
        ({"delay": "10m"}, True),
        ({"delay": 90}, True),
        ({"delay": "11y"}, False),
        ({"cron": "0 8 * * MON", "timezone": "Asia/Kolkata"}, True),
        ({"cron": "0 8 * * MON", "start_at": None, "end_at": "2031-01-01T00:00:00Z"}, True),
        ({"cron": "0 8 * * MON", "timezone": "Not a zone"}, False),
        ({"cron": "0 8 * * MON", "every": "1m"}, False),
        ({"every": "5m", "start_at": "2030-01-01T00:00:00Z"}, True),
        ({"every": "0.5s"}, False),
        ({"every": "5m", "timezone": "UTC"}, False),
        ({"after": {"job_id": "job_0190a1b2c3d4e5f6"}}, True),
        ({"after": {"job_id": "job_1", "on": "finished"}}, True),
        ({"after": {"job_id": "job_1", "on": "done"}}, False),
        ({"after": {"job_id": "job 1"}}, False),
        ({"after": {"job_id": "job_1", "when": "now"}}, False),
        ({"after": "job_1"}, False),
        ({"after": {"job_id": "job_1"}, "timezone": "UTC"}, False),
    ],
)
def test_a_form_the_struct_takes_the_parser_takes(body: dict[str, object], accepted: bool) -> None:
    form = next(f for f in schedule._FORMS if f in body)
    struct = SCHEDULE_FORMS[schedule._FORMS.index(form)]
    outcomes = []
    for check in (
        lambda: convert_body(body, struct),
        lambda: schedule.parse_schedule(body, now_ms=NOW_MS),
    ):
        try:
            check()
            outcomes.append(True)
        except InvalidRequest:
            outcomes.append(False)
    assert outcomes == [accepted, accepted]
