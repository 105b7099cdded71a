"""The load ahead (GET /v1/forecast): a span cut into steps and the runs due in each, counted
from a job's next run and its schedule's own occurrences after it (zones and DST as dispatch
follows them, the window's offset, start/end, max_runs). Pure: the store hands it the rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from schedd.calendars import excluded_by, zone_of
from schedd.errors import InvalidRequest
from schedd.schedule import AtSchedule, Schedule, fire_time, load_schedule, occurrences_between
from schedd.stored_spec import SpecPlan, load_plan
from schedd.timeformat import parse_duration, parse_instant

MAX_STEPS = 10_000
MIN_STEP_MS = 1_000
MAX_STEP_MS = 3_600_000
DEFAULT_SPAN_MS = 86_400_000
DEFAULT_STEP_MS = 60_000
# One job's runs expanded in one forecast at most (an `every 1s` job over a day is 86,400):
# past it the forecast says it is partial.
MAX_JOB_RUNS = 100_000
TOP_TENANTS = 10
MAX_KEPT = 1_000_000  # occurrences a forecast keeps for the jobs that share a schedule

# Whether a scheduled occurrence of a job runs, given the job's tenant, its planning fields
# and the occurrence: the one place that decides it. Triggers and backfills always run.
RunFilter = Callable[[str, SpecPlan, int], bool]
# A tenant's calendar's dates by (tenant_id, name); None: no such calendar.
CalendarDates = Callable[[str, str], frozenset[str] | None]


def runs_every_occurrence(tenant_id: str, plan: SpecPlan, scheduled_at_ms: int) -> bool:
    """The run filter without calendars: every occurrence of the schedule runs."""
    return True


def outside_calendars(dates_of: CalendarDates) -> RunFilter:
    """The run filter dispatch follows: an occurrence whose local date (in the schedule's zone)
    is in a calendar its schedule excludes does not run (it is recorded skipped, and does not
    count toward max_runs)."""

    def runs(tenant_id: str, plan: SpecPlan, scheduled_at_ms: int) -> bool:
        names = plan.exclude
        if not names:
            return True
        zone = zone_of(plan.schedule)
        return excluded_by(names, scheduled_at_ms, zone, lambda n: dates_of(tenant_id, n)) is None

    return runs


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """[from_ms, to_ms) cut into steps of step_ms (the last one shorter when it does not
    divide)."""

    from_ms: int
    to_ms: int
    step_ms: int

    @property
    def steps(self) -> int:
        return -(-(self.to_ms - self.from_ms) // self.step_ms)

    def index(self, at_ms: int) -> int | None:
        """The step holding at_ms, None outside the span."""
        if not self.from_ms <= at_ms < self.to_ms:
            return None
        return (at_ms - self.from_ms) // self.step_ms

    def step_at(self, index: int) -> int:
        return self.from_ms + index * self.step_ms


def parse_span(from_: str | None, to: str | None, step: str | None, *, now_ms: int) -> Span:
    """The span a request names (from: default now; to: default a day after from; step:
    default 1m, from 1s to 1h, at most MAX_STEPS of them), or InvalidRequest naming the field."""
    from_ms = now_ms if from_ is None else parse_instant(from_, field="from")
    to_ms = from_ms + DEFAULT_SPAN_MS if to is None else parse_instant(to, field="to")
    step_ms = DEFAULT_STEP_MS if step is None else parse_duration(step, field="step")
    if not MIN_STEP_MS <= step_ms <= MAX_STEP_MS:
        raise InvalidRequest("step", f"must be from 1s to 1h, got {step!r}")
    if to_ms <= from_ms:
        raise InvalidRequest("to", "must be after from")
    span = Span(from_ms=from_ms, to_ms=to_ms, step_ms=step_ms)
    if span.steps > MAX_STEPS:
        raise InvalidRequest(
            "step", f"gives {span.steps:,} steps from 'from' to 'to', more than {MAX_STEPS:,}"
        )
    return span


@dataclass(frozen=True, slots=True, kw_only=True)
class ForecastJob:
    """An active job as the forecast reads it: its planning fields (`plan`: a JSON object of
    the stored spec's schedule and window, what stored_spec.load_plan reads), its run limit as
    stored, its next scheduled run (None when it has none) and the runs it has started."""

    job_id: str
    tenant_id: str
    plan: str | bytes
    max_runs: object = None
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    runs_started: int = 0

    @property
    def run_limit(self) -> int | None:
        """max_runs as stored: a positive integer, else none (StoredSpec.run_limit's rule)."""
        limit = self.max_runs
        return limit if type(limit) is int and limit > 0 else None


@dataclass(slots=True)
class _Shared:
    """Jobs of one tenant with one schedule, no window and no run limit, whose runs after the
    same instant are the same: expanded once, counted `jobs` times."""

    plan: SpecPlan
    low_ms: int
    jobs: int = 0


@dataclass(slots=True)
class Tally:
    """Runs per step of a span, the whole's and (when `by_tenant`) each tenant's."""

    span: Span
    by_tenant: bool = False
    # Whether an occurrence runs: it may decide on the tenant, the schedule and the occurrence
    # only (the jobs of a schedule share its answers).
    run_filter: RunFilter = runs_every_occurrence
    tenants: dict[str, Counter[int]] = field(default_factory=dict, init=False)
    jobs: int = field(default=0, init=False)
    _is_partial: bool = field(default=False, init=False)
    _runs: list[int] = field(default_factory=list, init=False)
    _shared: dict[tuple[str, str, int], _Shared] = field(default_factory=dict, init=False)
    _occurrences: dict[tuple[str, int, int], list[int]] = field(default_factory=dict, init=False)
    _kept: int = field(default=0, init=False)  # occurrences held in _occurrences

    def __post_init__(self) -> None:
        self._runs = [0] * self.span.steps

    @property
    def runs(self) -> list[int]:
        """The runs per step (the shared schedules' counted first)."""
        self._settle()
        return self._runs

    @property
    def is_partial(self) -> bool:
        """Whether some runs were left out: a job had more in the span than one forecast
        expands, or the reader stopped before every job was counted (`mark_partial`)."""
        self._settle()
        return self._is_partial

    def mark_partial(self) -> None:
        """The reader stopped before every job was counted."""
        self._is_partial = True

    def add_run(self, tenant_id: str, fire_at_ms: int, times: int = 1) -> None:
        """Count `times` runs firing at fire_at_ms (outside the span: nothing)."""
        index = self.span.index(fire_at_ms)
        if index is None:
            return
        self._runs[index] += times
        if self.by_tenant:
            self.tenants.setdefault(tenant_id, Counter())[index] += times

    def add_job(self, job: ForecastJob) -> None:
        """Count a job's scheduled runs: its next one and its schedule's after it."""
        self.jobs += 1
        runs = self.run_filter
        if job.next_run_at_ms is None or job.next_fire_at_ms is None:
            return
        plan = load_plan(job.plan)
        limit = job.run_limit
        # runs the job has left to start; without a limit, more than one forecast counts
        left = MAX_JOB_RUNS + 2 if limit is None else max(limit - job.runs_started, 0)
        if left and runs(job.tenant_id, plan, job.next_run_at_ms):
            self.add_run(job.tenant_id, job.next_fire_at_ms)
            left -= 1
        if not left or not plan.schedule:
            return
        window_ms = plan.window_ms()
        if window_ms == 0 and limit is None:
            self._share(job.tenant_id, plan, job.next_run_at_ms)
            return
        after = self._after(plan.schedule, job.next_run_at_ms, window_ms, limit)
        for scheduled in after[:MAX_JOB_RUNS]:
            if not runs(job.tenant_id, plan, scheduled):
                continue
            self.add_run(job.tenant_id, self._fire_at(job.job_id, scheduled, window_ms))
            left -= 1
            if not left:
                return
        if len(after) > MAX_JOB_RUNS:  # runs left beyond what one forecast expands
            self._is_partial = True

    def _fire_at(self, job_id: str, scheduled_ms: int, window_ms: int) -> int:
        """The run's fire time, or its scheduled time when its whole window falls in one step
        (the offset, a hash, would not move it to another)."""
        first = self.span.index(scheduled_ms)
        if first is not None and first == self.span.index(scheduled_ms + window_ms - 1):
            return scheduled_ms
        return fire_time(job_id, scheduled_ms, window_ms)

    def _share(self, tenant_id: str, plan: SpecPlan, next_ms: int) -> None:
        low = max(next_ms + 1, self.span.from_ms)
        key = (tenant_id, repr(sorted(plan.schedule.items())), low)
        shared = self._shared.get(key)
        if shared is None:
            shared = self._shared[key] = _Shared(plan=plan, low_ms=low)
        shared.jobs += 1

    def _settle(self) -> None:
        """Count the shared schedules' runs: each one's occurrences once, times its jobs."""
        for (tenant_id, _, _), shared in self._shared.items():
            after = self._after(shared.plan.schedule, shared.low_ms - 1, 0, None)
            for scheduled in after[:MAX_JOB_RUNS]:
                if self.run_filter(tenant_id, shared.plan, scheduled):
                    self.add_run(tenant_id, scheduled, shared.jobs)
            if len(after) > MAX_JOB_RUNS:
                self._is_partial = True
        self._shared.clear()

    def _after(
        self, stored: Mapping[str, Any], next_ms: int, window_ms: int, limit: int | None
    ) -> list[int]:
        """The schedule's occurrences after next_ms whose run can fire in the span: the first
        MAX_JOB_RUNS + 1 (more than one forecast counts for a job); with a run limit, from
        next_ms on, so the limit counts them. Kept by schedule: jobs share a few."""
        low = next_ms + 1
        if limit is None:  # occurrences before from - window fire before the span
            low = max(low, self.span.from_ms - window_ms + 1)
        key = (repr(sorted(stored.items())), low, window_ms)
        found = self._occurrences.get(key)
        if found is None:
            schedule = _schedule(stored)
            found = []
            if schedule is not None and not isinstance(schedule, AtSchedule):
                found = occurrences_between(schedule, low, self.span.to_ms, MAX_JOB_RUNS + 1)
            self._kept += len(found)
            if self._kept > MAX_KEPT:
                self._occurrences.clear()
                self._kept = len(found)
            self._occurrences[key] = found
        return found

    def peak(self, runs: Iterable[tuple[int, int]] | None = None) -> tuple[int, int]:
        """(step index, runs) of the busiest step, the earliest of equals; of the whole, or of
        the (index, runs) pairs given."""
        pairs = enumerate(self.runs) if runs is None else runs
        best = (0, 0)
        for index, count in pairs:
            if count > best[1]:  # pairs come in index order: the earliest of equals stays
                best = (index, count)
        return best

    def top_tenants(self) -> list[tuple[str, int, tuple[int, int]]]:
        """The TOP_TENANTS tenants with the most runs: (tenant_id, runs, peak)."""
        self._settle()
        totals = sorted(
            ((sum(c.values()), tenant) for tenant, c in self.tenants.items()),
            key=lambda pair: (-pair[0], pair[1]),
        )
        return [
            (tenant, total, self.peak(sorted(self.tenants[tenant].items())))
            for total, tenant in totals[:TOP_TENANTS]
        ]


def _schedule(stored: Mapping[str, Any]) -> Schedule | None:
    try:
        return load_schedule(stored)
    except (ValueError, KeyError):  # a stored schedule no release wrote: none of its runs
        return None
