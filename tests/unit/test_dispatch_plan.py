"""dispatch/plan.py: what the dispatcher does with one due run, row by row (a pure function of
the job's stored fields, the run and now)."""

from __future__ import annotations

import json

import pytest

from schedd.dispatch import plan as plan_module
from schedd.dispatch.plan import (
    HOLD_RETRY_MS,
    SKIP_MISFIRE,
    SKIP_OVERLAP,
    ClaimPlan,
    Hold,
    Plan,
    PlanJob,
    Stale,
    _claim_by_schedule,
    plan_run,
)
from schedd.model import MisfirePolicy, OverlapPolicy
from schedd.schedule import fire_time
from schedd.store.dispatch_reads import DueRun, JobRow
from schedd.stored_spec import SpecPlan, load_plan, load_spec
from schedd.timeformat import parse_instant

THRESHOLD_MS = 60_000
JOB = "job-1"


def ms(text: str) -> int:
    return parse_instant(text, field="t")


def at(hhmmss: str) -> int:
    """An instant on 2026-06-01 (UTC): no DST anywhere near it."""
    return ms(f"2026-06-01T{hhmmss}Z")


T12 = at("12:00:00")
EVERY_5M = {"cron": "*/5 * * * *", "timezone": "UTC"}
EVERY_10M = {"every": "10m", "start_at": "2026-06-01T12:03:00Z"}
ONE_TIME = {"run_at": "2026-06-01T12:00:00Z"}
BERLIN_0230 = {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}  # fixed time
BERLIN_HOURLY = {"cron": "30 * * * *", "timezone": "Europe/Berlin"}  # wildcard hour


def job(
    schedule: dict[str, str],
    scheduled_at_ms: int = T12,
    *,
    misfire: str = "run_once",
    overlap: str = "allow",
    window: str | None = None,
    status: str = "active",
) -> PlanJob:
    stored = {
        "schedule": schedule,
        "window": window,
        "misfire_policy": misfire,
        "overlap_policy": overlap,
    }
    return PlanJob(
        job_id=JOB,
        status=status,
        next_run_at_ms=scheduled_at_ms,
        spec=load_plan(json.dumps(stored)),  # as the dispatcher reads a stored spec
    )


def due(
    scheduled_at_ms: int = T12, fire_at_ms: int | None = None, *, trigger: bool = False
) -> DueRun:
    fire = scheduled_at_ms if fire_at_ms is None else fire_at_ms
    return DueRun(fire, 0, JOB, scheduled_at_ms, trigger)


def next_at(run_at_ms: int, *, skip: str | None = None) -> ClaimPlan:
    return ClaimPlan(next_run_at_ms=run_at_ms, next_fire_at_ms=run_at_ms, skip=skip)


ROWS: list[tuple[str, PlanJob, DueRun, int, bool, Plan]] = [
    # id, job, due run, now, a run in flight, the plan
    ("cron on time", job(EVERY_5M), due(), T12 + 5, False, next_at(at("12:05:00"))),
    (
        "every on time",
        job(EVERY_10M, at("12:03:00")),
        due(at("12:03:00")),
        at("12:03:00"),
        False,
        next_at(at("12:13:00")),
    ),
    ("one-time on time: no next run", job(ONE_TIME), due(), T12, False, ClaimPlan()),
    # misfire: late means more than the threshold past the fire time
    (
        "run_once at the threshold: not late",
        job(EVERY_5M),
        due(),
        T12 + THRESHOLD_MS,
        False,
        next_at(at("12:05:00")),
    ),
    (
        "skip at the threshold: not late",
        job(EVERY_5M, misfire="skip"),
        due(),
        T12 + THRESHOLD_MS,
        False,
        next_at(at("12:05:00")),
    ),
    (
        "skip 1 ms past the threshold",
        job(EVERY_5M, misfire="skip"),
        due(),
        T12 + THRESHOLD_MS + 1,
        False,
        next_at(at("12:05:00"), skip=SKIP_MISFIRE),
    ),
    (
        "run_once after an outage: next after now",
        job(EVERY_5M),
        due(),
        at("12:31:00"),
        False,
        next_at(at("12:35:00")),
    ),
    (
        "skip after an outage",
        job(EVERY_5M, misfire="skip"),
        due(),
        at("12:31:00"),
        False,
        next_at(at("12:35:00"), skip=SKIP_MISFIRE),
    ),
    (
        "run_all after an outage: every missed run",
        job(EVERY_5M, misfire="run_all"),
        due(),
        at("12:31:00"),
        False,
        next_at(at("12:05:00")),
    ),
    (
        "every, run_once after an outage",
        job(EVERY_10M, at("12:03:00")),
        due(at("12:03:00")),
        at("12:30:30"),
        False,
        next_at(at("12:33:00")),
    ),
    (
        "every, run_all after an outage",
        job(EVERY_10M, at("12:03:00"), misfire="run_all"),
        due(at("12:03:00")),
        at("12:30:30"),
        False,
        next_at(at("12:13:00")),
    ),
    (
        "one-time late with skip: still runs",
        job(ONE_TIME, misfire="skip"),
        due(),
        at("13:00:00"),
        False,
        ClaimPlan(),
    ),
    (
        "late by the fire time, not the scheduled time",
        job(EVERY_5M, misfire="skip"),
        due(T12, at("12:00:30")),
        at("12:01:30"),
        False,
        next_at(at("12:05:00")),
    ),
    # overlap, with and without a run in flight
    ("allow with a run in flight", job(EVERY_5M), due(), T12, True, next_at(at("12:05:00"))),
    (
        "skip with a run in flight",
        job(EVERY_5M, overlap="skip"),
        due(),
        T12,
        True,
        next_at(at("12:05:00"), skip=SKIP_OVERLAP),
    ),
    (
        "skip with none in flight",
        job(EVERY_5M, overlap="skip"),
        due(),
        T12,
        False,
        next_at(at("12:05:00")),
    ),
    (
        "delay with a run in flight: held",
        job(EVERY_5M, overlap="delay"),
        due(),
        T12 + 7,
        True,
        Hold(T12 + 7 + HOLD_RETRY_MS),
    ),
    (
        "delay with none in flight",
        job(EVERY_5M, overlap="delay"),
        due(),
        T12,
        False,
        next_at(at("12:05:00")),
    ),
    (
        "overlap skip and misfire skip: the misfire reason",
        job(EVERY_5M, overlap="skip", misfire="skip"),
        due(),
        at("12:31:00"),
        True,
        next_at(at("12:35:00"), skip=SKIP_MISFIRE),
    ),
    (
        "delay wins over a misfire",
        job(EVERY_5M, overlap="delay", misfire="skip"),
        due(),
        at("12:31:00"),
        True,
        Hold(at("12:31:00") + HOLD_RETRY_MS),
    ),
    # the job changed since its due row was read
    ("paused", job(EVERY_5M, status="paused"), due(), T12, False, Stale()),
    ("next run moved on", job(EVERY_5M, at("12:05:00")), due(), T12, False, Stale()),
    # trigger runs leave the schedule alone and ignore status and overlap
    (
        "trigger",
        job(EVERY_5M, at("12:05:00")),
        due(T12 + 1234, trigger=True),
        T12 + 1234,
        True,
        ClaimPlan(),
    ),
    (
        "trigger of a paused job",
        job(EVERY_5M, status="paused", overlap="delay"),
        due(T12, trigger=True),
        T12,
        True,
        ClaimPlan(),
    ),
    # the schedule's own window: start_at and end_at
    (
        "end_at passed: no next run",
        job(EVERY_5M | {"end_at": "2026-06-01T12:04:59Z"}),
        due(),
        T12,
        False,
        ClaimPlan(),
    ),
    (
        "end_at on the next run: kept",
        job(EVERY_5M | {"end_at": "2026-06-01T12:05:00Z"}),
        due(),
        T12,
        False,
        next_at(at("12:05:00")),
    ),
    (
        "skip after an outage past end_at: no next run",
        job(EVERY_5M | {"end_at": "2026-06-01T12:20:00Z"}, misfire="skip"),
        due(),
        at("12:31:00"),
        False,
        ClaimPlan(skip=SKIP_MISFIRE),
    ),
    # DST (Europe/Berlin springs forward on 2026-03-29, 02:00 CET -> 03:00 CEST)
    (
        "fixed time in the gap fires at the transition",
        job(BERLIN_0230, ms("2026-03-28T01:30:00Z")),
        due(ms("2026-03-28T01:30:00Z")),
        ms("2026-03-28T01:30:00Z"),
        False,
        next_at(ms("2026-03-29T01:00:00Z")),
    ),
    (
        "fixed time after the gap",
        job(BERLIN_0230, ms("2026-03-29T01:00:00Z")),
        due(ms("2026-03-29T01:00:00Z")),
        ms("2026-03-29T01:00:00Z"),
        False,
        next_at(ms("2026-03-30T00:30:00Z")),
    ),
    (
        "wildcard hour skips the missing 02:30",
        job(BERLIN_HOURLY, ms("2026-03-29T00:30:00Z")),
        due(ms("2026-03-29T00:30:00Z")),
        ms("2026-03-29T00:30:00Z"),
        False,
        next_at(ms("2026-03-29T01:30:00Z")),
    ),
]


@pytest.mark.parametrize(
    ("job_", "run", "now_ms", "in_flight", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in ROWS],
)
def test_plan(job_: PlanJob, run: DueRun, now_ms: int, in_flight: bool, expected: Plan) -> None:
    plan = plan_run(
        job_, run, now_ms, misfire_threshold_ms=THRESHOLD_MS, run_in_flight=lambda: in_flight
    )
    assert plan == expected


def test_the_window_offsets_the_next_fire_time_and_not_the_run() -> None:
    plan = plan_run(
        job(EVERY_5M, window="4m"),
        due(),
        T12,
        misfire_threshold_ms=THRESHOLD_MS,
        run_in_flight=lambda: False,
    )
    next_run = at("12:05:00")
    assert plan == ClaimPlan(
        next_run_at_ms=next_run, next_fire_at_ms=fire_time(JOB, next_run, 240_000)
    )
    assert isinstance(plan, ClaimPlan) and plan.next_fire_at_ms is not None
    assert next_run <= plan.next_fire_at_ms < next_run + 240_000
    assert plan.next_fire_at_ms != next_run  # this job's offset in the window is not 0


def test_lateness_counts_from_the_fire_time_in_the_window() -> None:
    # A run fired 3 minutes into its window is not late 30 s after that, though 3.5 min
    # after its scheduled time.
    plan = plan_run(
        job(EVERY_5M, misfire="skip", window="4m"),
        due(T12, at("12:03:00")),
        at("12:03:30"),
        misfire_threshold_ms=THRESHOLD_MS,
        run_in_flight=lambda: False,
    )
    assert isinstance(plan, ClaimPlan) and plan.skip is None
    assert plan.next_run_at_ms == at("12:05:00")


@pytest.mark.parametrize(
    ("job_", "run"),
    [
        pytest.param(job(EVERY_5M), due(), id="allow"),
        pytest.param(job(EVERY_5M, overlap="skip"), due(T12, trigger=True), id="trigger"),
        pytest.param(job(EVERY_5M, overlap="skip", status="paused"), due(), id="stale"),
    ],
)
def test_runs_in_flight_are_looked_up_only_when_the_overlap_policy_needs_them(
    job_: PlanJob, run: DueRun
) -> None:
    def in_flight() -> bool:
        raise AssertionError("looked up")

    plan_run(job_, run, T12, misfire_threshold_ms=THRESHOLD_MS, run_in_flight=in_flight)


def test_a_threshold_of_zero_makes_any_delay_late() -> None:
    plan = plan_run(
        job(EVERY_5M, misfire="skip"),
        due(),
        T12 + 1,
        misfire_threshold_ms=0,
        run_in_flight=lambda: False,
    )
    assert plan == next_at(at("12:05:00"), skip=SKIP_MISFIRE)


def test_a_job_row_becomes_the_plan_input() -> None:
    plan = SpecPlan(schedule=ONE_TIME, window="1m", overlap_policy=OverlapPolicy.DELAY)
    row = JobRow("t1", plan, "paused", 3, None)
    assert PlanJob.from_row(JOB, row) == PlanJob(
        job_id=JOB, status="paused", next_run_at_ms=None, spec=plan
    )


def test_a_stored_spec_plans_with_the_defaults_for_what_it_lacks() -> None:
    assert load_plan("{}") == SpecPlan(
        schedule={},
        window=None,
        overlap_policy=OverlapPolicy.ALLOW,
        misfire_policy=MisfirePolicy.RUN_ONCE,
    )


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        # No release wrote these: a stored value is never refused, its default is taken.
        ({"overlap_policy": "sometimes", "misfire_policy": 5}, SpecPlan()),
        ({"overlap_policy": {"a": 1}, "misfire_policy": ["skip"]}, SpecPlan()),
        ({"window": "soon"}, SpecPlan(window="soon")),  # no window: see window_ms below
        ({"window": [1]}, SpecPlan()),
        ({"window": 1e300}, SpecPlan()),
        ({"schedule": ["run_at"]}, SpecPlan()),
        ({"schedule": {"run_at": 5}}, SpecPlan()),
        # What releases wrote, with values today's API refuses (a window longer than the
        # interval, Unicode digits in a cron step): read as written.
        (
            {"schedule": EVERY_10M, "window": "2h", "misfire_policy": "run_all"},
            SpecPlan(schedule=EVERY_10M, window="2h", misfire_policy=MisfirePolicy.RUN_ALL),
        ),
        (
            {"schedule": {"cron": "*/\u0663 * * * *", "timezone": "UTC"}, "window": 90},
            SpecPlan(schedule={"cron": "*/\u0663 * * * *", "timezone": "UTC"}, window="90s"),
        ),
    ],
)
def test_a_stored_spec_is_planned_never_refused(stored: dict[str, object], read: SpecPlan) -> None:
    text = json.dumps(stored)
    assert load_plan(text) == load_spec(text).plan() == read


@pytest.mark.parametrize(
    ("window", "ms"), [(None, 0), ("4m", 240_000), ("1h30m", 5_400_000), ("soon", 0), ("1e400s", 0)]
)
def test_a_windows_length(window: str | None, ms: int) -> None:
    assert SpecPlan(window=window).window_ms() == ms


ONE_TIME_CASES = [
    # id, job, due run, now, a run in flight
    ("on time", job(ONE_TIME), due(), T12, False),
    ("late, run_once", job(ONE_TIME), due(), T12 + 10 * THRESHOLD_MS, False),
    ("late, skip", job(ONE_TIME, misfire="skip"), due(), T12 + 10 * THRESHOLD_MS, False),
    ("late, run_all", job(ONE_TIME, misfire="run_all"), due(), T12 + 10 * THRESHOLD_MS, False),
    ("overlap skip, in flight", job(ONE_TIME, overlap="skip"), due(), T12, True),
    ("windowed", job(ONE_TIME, window="4m"), due(T12, at("12:03:00")), at("12:03:00"), False),
    ("run after its instant", job(ONE_TIME, at("12:07:00")), due(at("12:07:00")), T12, False),
    ("run before its instant", job(ONE_TIME, at("11:00:00")), due(at("11:00:00")), T12, False),
]


@pytest.mark.parametrize(
    ("job_", "run", "now_ms", "in_flight"),
    [pytest.param(*row[1:], id=row[0]) for row in ONE_TIME_CASES],
)
def test_a_one_time_run_plans_as_its_schedule_would(
    job_: PlanJob, run: DueRun, now_ms: int, in_flight: bool
) -> None:
    # plan_run decides a one-time job's last run without building its schedule: the claim must
    # be the one the schedule's path (_claim_by_schedule) gives.
    plan = plan_run(
        job_, run, now_ms, misfire_threshold_ms=THRESHOLD_MS, run_in_flight=lambda: in_flight
    )
    by_schedule = _claim_by_schedule(
        job_,
        run,
        now_ms,
        now_ms - run.fire_at_ms > THRESHOLD_MS,
        job_.spec.misfire_policy,
        SKIP_OVERLAP if in_flight else None,
    )
    assert plan == by_schedule


def test_a_one_time_run_is_planned_without_building_its_schedule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def load(stored: object) -> object:
        raise AssertionError("schedule built")

    monkeypatch.setattr(plan_module, "load_schedule", load)
    plan = plan_run(
        job(ONE_TIME), due(), T12, misfire_threshold_ms=THRESHOLD_MS, run_in_flight=lambda: False
    )
    assert plan == ClaimPlan()
