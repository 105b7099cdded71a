"""Planning one due run: the overlap policy, the misfire policy, the job's next run and its fire
time in the window. A pure function of the job's stored fields and `now`; no store, no clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from schedd.calendars import DatesOf, excluded_by, skip_reason, zone_of
from schedd.model import AtSchedule, MisfirePolicy, OverlapPolicy
from schedd.schedule import fire_time, load_schedule, next_after
from schedd.store.dispatch_reads import DueRun, JobRow
from schedd.stored_spec import SpecPlan
from schedd.timeformat import parse_instant

HOLD_RETRY_MS = 1_000  # overlap "delay": a held run looks again this much later


def _no_calendars(name: str) -> frozenset[str] | None:
    return None


SKIP_OVERLAP = "skipped: the previous run was still in flight"
SKIP_MISFIRE = "skipped: missed while dispatch was down (misfire_policy skip)"


# The records below are made once a run or more: as msgspec Structs they cost about a tenth
# of a frozen dataclass (0.1-0.2 us against 1-2 us, whose __init__ sets each field through
# object.__setattr__), a tenth of the dispatcher's planning in a spike (benchmarks/bench_plan.py).


class PlanJob(msgspec.Struct, frozen=True, kw_only=True):
    """The stored fields of a job that plan its runs: its row's, and its spec's (typed once per
    spec text by stored_spec: no policy is converted per run)."""

    job_id: str
    status: str
    next_run_at_ms: int | None
    spec: SpecPlan = SpecPlan()

    @classmethod
    def from_row(cls, job_id: str, row: JobRow) -> PlanJob:
        return cls(
            job_id=job_id, status=row.status, next_run_at_ms=row.next_run_at_ms, spec=row.plan
        )


class ClaimPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Claim the run; `skip` records it as skipped instead of delivering it. The job's next
    run (None: it has none left, or a trigger run leaves the schedule alone) and its fire time."""

    next_run_at_ms: int | None = None
    next_fire_at_ms: int | None = None
    skip: str | None = None


class Stale(msgspec.Struct, frozen=True):
    """Not to be claimed: the job changed since the run was read (its current due row comes)."""


class Hold(msgspec.Struct, frozen=True):
    """Overlap "delay": look at the run again at `retry_at_ms`."""

    retry_at_ms: int


Plan = ClaimPlan | Stale | Hold


def plan_run(
    job: PlanJob,
    run: DueRun,
    now_ms: int,
    *,
    misfire_threshold_ms: int,
    run_in_flight: Callable[[], bool],
    dates_of: DatesOf = _no_calendars,
) -> Plan:
    """What to do with one due run at `now_ms`. `run_in_flight` (whether another run of the job
    is dispatched and unfinished) is asked only when the job's overlap policy needs it;
    `dates_of` (the job's tenant's calendars) only when its schedule excludes some."""
    if run.is_trigger:
        return ClaimPlan()
    if job.status != "active" or job.next_run_at_ms != run.scheduled_at_ms:
        return Stale()
    spec = job.spec
    # A calendar's date: the occurrence is skipped, the schedule goes on (by its misfire policy).
    holiday = (
        excluded_by(spec.exclude, run.scheduled_at_ms, zone_of(spec.schedule), dates_of)
        if spec.exclude
        else None
    )
    skip = None if holiday is None else skip_reason(holiday)
    overlap = spec.overlap_policy
    if holiday is None and overlap is not OverlapPolicy.ALLOW and run_in_flight():
        if overlap is OverlapPolicy.DELAY:
            return Hold(now_ms + HOLD_RETRY_MS)
        skip = SKIP_OVERLAP
    if _is_last_one_time_run(spec.schedule, run.scheduled_at_ms):
        return ClaimPlan(skip=skip)
    is_late = now_ms - run.fire_at_ms > misfire_threshold_ms
    plan = _claim_by_schedule(job, run, now_ms, is_late, spec.misfire_policy, skip)
    # A late holiday run keeps its calendar's reason (its next run still follows the policy).
    return plan if holiday is None else msgspec.structs.replace(plan, skip=skip)


def _is_last_one_time_run(schedule: Mapping[str, Any], scheduled_at_ms: int) -> bool:
    """Whether the schedule is one-time (`run_at` alone, as `schedule_to_json` stores it) and
    its instant is not after this run: the claim has no next run, whatever the misfire policy
    (what `_claim_by_schedule` finds too, without building the schedule: a spike's runs)."""
    run_at = schedule.get("run_at")
    if run_at is None or len(schedule) != 1:
        return False
    return parse_instant(run_at, field="schedule.run_at") <= scheduled_at_ms


def _claim_by_schedule(
    job: PlanJob, run: DueRun, now_ms: int, is_late: bool, policy: MisfirePolicy, skip: str | None
) -> ClaimPlan:
    """The claim of a scheduled run with its job's next run (a late run's by `policy`)."""
    schedule = load_schedule(job.spec.schedule)
    after = run.scheduled_at_ms
    if is_late and policy is not MisfirePolicy.RUN_ALL and not isinstance(schedule, AtSchedule):
        after = now_ms  # one catch-up run (or none, for skip), then the next future one
        if policy is MisfirePolicy.SKIP:
            skip = SKIP_MISFIRE
    next_run = next_after(schedule, after)
    if next_run is None:
        return ClaimPlan(skip=skip)
    return ClaimPlan(
        next_run_at_ms=next_run,
        next_fire_at_ms=fire_time(job.job_id, next_run, job.spec.window_ms()),
        skip=skip,
    )
