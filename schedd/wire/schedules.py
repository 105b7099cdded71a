"""A job's schedule as a request gives it: one struct per form (run_at, delay, cron, every,
after), the OpenAPI schema of each. schedule.parse_schedule reads a body's schedule (its own errors:
invalid_schedule, a form told by its key); tests/unit/test_schedule_forms.py holds its keys to
these structs' fields."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from schedd.bodies import Body, DurationMs
from schedd.schedule import MAX_AHEAD_MS, MIN_EVERY_MS
from schedd.wire.fields import InstantInput, one_of

CRON_TEXT = r"^\s*(@[A-Za-z]+|\S+(\s+\S+){4})\s*$"
ZONE_NAME = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$"  # as schedule.check_timezone

Bound = InstantInput | None


class Delay(DurationMs):
    """From the server's now."""

    maximum_ms = MAX_AHEAD_MS


class Interval(DurationMs):
    """The interval."""

    minimum_ms = MIN_EVERY_MS


class RunAtSchedule(Body):
    """One run at an instant."""

    run_at: InstantInput


class DelaySchedule(Body):
    """One run a delay after the server's now."""

    delay: Delay


class CronSchedule(Body, kw_only=True):
    """Runs at the times a cron expression names, in a time zone."""

    cron: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=1000,
            pattern=CRON_TEXT,
            description="5 fields (minute hour day-of-month month day-of-week) or a macro like "
            "@daily; names like MON and JAN are allowed.",
            examples=["0 8 * * MON"],
        ),
    ]
    timezone: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=64,
            pattern=ZONE_NAME,
            description="IANA zone name; default UTC.",
            examples=["Asia/Kolkata"],
        ),
    ] = "UTC"
    start_at: Bound = None
    end_at: Bound = None


class EverySchedule(Body, kw_only=True):
    """Runs an interval apart, from start_at (default: the server's now)."""

    every: Interval
    start_at: Bound = None
    end_at: Bound = None


AFTER_JOB_ID = r"^[\x21-\x7e]{1,128}$"  # as schedule.parse_after
AfterOutcome = Literal["success", "failure", "finished"]  # model.AFTER_OUTCOMES


class After(Body, kw_only=True):
    """The upstream job (the same tenant's) and which of its run endings start a run."""

    job_id: Annotated[str, Meta(pattern=AFTER_JOB_ID, examples=["job_0190a1b2c3d4e5f6"])]
    on: Annotated[
        AfterOutcome,
        Meta(description="success (default), failure (the run ended dead) or finished (either)."),
    ] = "success"


class AfterSchedule(Body):
    """No times of its own: a run each time a run of another job ends as `on` says, at once,
    with that run's scheduled_at."""

    after: After


SCHEDULE_FORMS: tuple[type[Body], ...] = (
    RunAtSchedule,
    DelaySchedule,
    CronSchedule,
    EverySchedule,
    AfterSchedule,
)
SCHEDULE_INPUT = {"description": "Exactly one of run_at, delay, cron, every or after."} | one_of(
    *SCHEDULE_FORMS
)
