"""The run check: a job's run rows against the occurrences its schedule produces, segment by
segment (before and after a reschedule, up to a cancel), with the documented policies that may
leave an occurrence out or mark it skipped. Pure functions over data the checker collected.

What the policies allow (docs/dispatch.md):
- misfire: a run claimed more than `misfire_threshold` after its fire time may be followed by
  the first occurrence after its claim instead of the next one (`run_once`, and `skip`, whose
  late run is recorded `skipped`); `run_all` never leaves one out;
- overlap `skip`: the run is recorded `skipped` (still a row); overlap `delay`: claimed late;
- cancel, reschedule or pause: the runs not yet claimed when it committed never happen.
  Occurrences that fired more than LATE_BOUND before it and were never claimed are still
  reported missing: dispatch lagging that far behind is itself a failure. A resume starts again
  at the schedule's first occurrence after it (like a reschedule to the same schedule);
- trigger: one extra run at the instant the trigger answered, fired then (no window), outside
  the schedule; it happens unless the job was cancelled before it fired.
- backfill: its runs (marked `backfill`) are outside the schedule's walk, fire paced (no window
  offset), each at an occurrence of the schedule inside the range of a backfill that was
  answered 2xx or whose outcome is unknown; an acknowledged backfill ran every occurrence of
  its range before the job's creation (which the schedule itself never runs), unless a cancel
  came within LATE_BOUND of its answer.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from schedd.calendars import local_date
from schedd.model import AfterSchedule, AtSchedule, CronSchedule, Schedule
from schedd.schedule import fire_time, first_run_at, next_after, occurrences_between
from schedd.timeformat import format_instant

LATE_BOUND_MS = 30_000  # the published late-claim bound during failovers
EARLY_TOLERANCE_MS = 100  # nothing is claimed or delivered earlier than fire time minus this
APPLY_LAG_MS = 6_000  # a change's command may be proposed this long after its request began
MAX_LISTED = 5
# Run B after A: commands are stamped with their proposer's clock when proposed, and applied in
# log order, up to a request timeout later (a proposal is resubmitted with its stamp): an end of
# A's run and a change of B (create, patch, pause, cancel) this close may have committed in
# either order, so either outcome is allowed.
AFTER_SLACK_MS = 10_000
AFTER_GRACE_MS = 30_000  # an end of A's run this close to the collection may not show B's run
ENDS_OF = {  # an after schedule's `on` -> the ends of A's run that give B a run
    "success": frozenset({"succeeded"}),
    "failure": frozenset({"dead"}),
    "finished": frozenset({"succeeded", "dead"}),
}


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    job_id: str | None
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JobTimeline:
    """What the checker knows about one job: its final object and runs, its schedules, and when
    (audit clock) a reschedule or cancel was applied and (client clock) acknowledged."""

    job_id: str
    job: dict[str, Any]
    runs: list[dict[str, Any]]
    created_ms: int
    first_schedule: Schedule
    final_schedule: Schedule
    update_ms: int | None
    cancel_ms: int | None
    pause_ms: int | None
    resume_ms: int | None
    triggers: frozenset[int]  # scheduled_at of the trigger runs (from the audit trail)
    update_acked_ms: int | None
    cancel_acked_ms: int | None
    pause_acked_ms: int | None
    window_ms: int
    misfire: str
    overlap: str
    threshold_ms: int
    # The job's backfills: (from, to, outcome, when the client got the answer), ms.
    backfills: tuple[tuple[int, int, str, int], ...] = ()
    # Issue 33: its tenant's calendar's dates, and whether its first schedule excluded it.
    calendar: frozenset[str] = frozenset()
    excludes: bool = False


@dataclass(frozen=True, slots=True)
class Segment:
    """Runs that must follow one schedule from a first occurrence in [first_lo, first_hi] until
    `stop_ms` (None: until the schedule ran out)."""

    schedule: Schedule
    first_lo: int | None
    first_hi: int | None
    stop_ms: int | None


def ms_of(run: dict[str, Any], key: str) -> int:
    value: int = run[f"{key}_ms"]
    return value


def check_job(t: JobTimeline) -> list[Violation]:
    """Every violation of the run rules for one job (the runs another job's ends made are
    `check_after`'s)."""
    scheduled = [
        r
        for r in t.runs
        if r["scheduled_at_ms"] not in t.triggers
        and not r.get("backfill")
        and not r.get("triggered_by")
    ]
    found = _run_rows(t) + _claims_after_acks(t, scheduled) + _triggered(t) + _backfilled(t)
    if isinstance(t.first_schedule, AfterSchedule) and isinstance(t.final_schedule, AfterSchedule):
        # No times of its own, ever: every run came from a run of its upstream, or a trigger.
        found += [
            Violation("after_run_unexplained", t.job_id, f"{r['scheduled_at']}: no triggered_by")
            for r in scheduled
        ]
        if t.job["status"] == "active":  # it never completes
            return found
        scheduled = []
    is_left_paused = t.pause_ms is not None and t.resume_ms is None
    if t.job["status"] == "active" or (t.job["status"] == "paused" and not is_left_paused):
        return [*found, Violation("not_quiescent", t.job_id, f"still {t.job['status']}")]
    stop = t.cancel_ms
    change_ms = t.update_ms if t.update_ms is not None else t.pause_ms
    if change_ms is None:
        first = first_run_at(t.final_schedule, t.created_ms)
        return found + _walk(t, scheduled, Segment(t.final_schedule, first, first, stop))
    first0 = first_run_at(t.first_schedule, t.created_ms)
    before = Segment(t.first_schedule, first0, first0, change_ms)
    restart_ms = t.update_ms if t.update_ms is not None else t.resume_ms
    if restart_ms is None:  # paused for good: every run belongs before the pause
        return found + _walk(t, scheduled, before)
    lo = first_run_at(t.final_schedule, restart_ms - APPLY_LAG_MS)
    hi = first_run_at(t.final_schedule, restart_ms)
    after = Segment(t.final_schedule, lo, hi, stop)
    # Which runs come before the change is decided by commit order, which the rows do not
    # show: accept any split that explains both parts; else report the natural split.
    for k in range(len(scheduled), -1, -1):
        if not _walk(t, scheduled[:k], before) and not _walk(t, scheduled[k:], after):
            return found
    k = sum(1 for r in scheduled if lo is None or r["scheduled_at_ms"] < lo)
    return found + _walk(t, scheduled[:k], before) + _walk(t, scheduled[k:], after)


def _triggered(t: JobTimeline) -> list[Violation]:
    """A committed trigger's run exists, unless a cancel committed before it could fire."""
    have = {r["scheduled_at_ms"] for r in t.runs}
    return [
        Violation("missing_trigger_run", t.job_id, f"trigger at {_fmt(at)} never claimed")
        for at in sorted(t.triggers)
        if at not in have and (t.cancel_ms is None or t.cancel_ms > at + LATE_BOUND_MS)
    ]


@dataclass(frozen=True, slots=True)
class Link:
    """Job B ran after `upstream` (on `on`) from `start_ms` until `end_ms` (audit clock; None:
    still), unless paused meanwhile."""

    upstream: str
    on: str
    start_ms: int
    end_ms: int | None
    ended_by_cancel: bool


def links_of(t: JobTimeline) -> list[Link]:
    """The upstreams a job ran after, in order: its first schedule's from its creation until a
    reschedule or cancel, and its final schedule's from a reschedule until a cancel."""
    links = []
    first, final = t.first_schedule, t.final_schedule
    if isinstance(first, AfterSchedule):
        end = t.update_ms if t.update_ms is not None else t.cancel_ms
        by_cancel = t.update_ms is None and t.cancel_ms is not None
        links.append(Link(first.job_id, first.on, t.created_ms, end, by_cancel))
    if t.update_ms is not None and isinstance(final, AfterSchedule):
        links.append(
            Link(final.job_id, final.on, t.update_ms, t.cancel_ms, t.cancel_ms is not None)
        )
    return links


def check_after(timelines: dict[str, JobTimeline], end_ms: int) -> list[Violation]:
    """Runs of B after A (issue 33 §2). Each run of B marked `triggered_by` came from a run of A
    at its slot that ended so (its final status) while B ran after A on that status (active,
    not paused), and no earlier than that end; a run of an after job that is neither marked nor
    a trigger is `check_job`'s. Conversely, each run of A that ended matching B's `on` while
    that link was surely in force (AFTER_SLACK_MS from its start; from its end as well, plus
    how late A's end may be recorded and, before a cancel, claimed), and AFTER_GRACE_MS before
    `end_ms` (the collection), gave B exactly one run at its slot (a run already there counts:
    apply adds none twice)."""
    found: list[Violation] = []
    for t in timelines.values():
        found += _after_runs_explained(t, timelines)
        for link in links_of(t):
            upstream = timelines.get(link.upstream)
            if upstream is not None:
                found += _after_runs_made(t, link, upstream, end_ms)
    return found


def _after_runs_explained(t: JobTimeline, timelines: dict[str, JobTimeline]) -> list[Violation]:
    found = []
    links = links_of(t)
    for run in t.runs:
        by = run.get("triggered_by")
        if not by:
            continue
        why = _unexplained(t, run, by, links, timelines)
        if why is not None:
            detail = f"{run['scheduled_at']} triggered by {by['job_id']} ({by['status']}): {why}"
            found.append(Violation("after_run_unexplained", t.job_id, detail))
    return found


def _unexplained(
    t: JobTimeline,
    run: dict[str, Any],
    by: dict[str, Any],
    links: list[Link],
    timelines: dict[str, JobTimeline],
) -> str | None:
    """Why this run of B cannot have come from the run of A it names (None: it can)."""
    at, fired = run["scheduled_at_ms"], ms_of(run, "fire_at")  # fired: when A's end applied
    if by.get("scheduled_at") != run["scheduled_at"]:
        return f"names A's run at {by.get('scheduled_at')}"
    linked = [link for link in links if link.upstream == by["job_id"]]
    if not linked:
        return "the job never ran after that job"
    in_force = [link for link in linked if _maybe_in_force(t, link, fired)]
    if not in_force:
        return f"it fired {_fmt(fired)}, when the job did not run after that job (or was paused)"
    if not any(by["status"] in ENDS_OF[link.on] for link in in_force):
        return f"the job ran after it on {'/'.join(sorted({k.on for k in in_force}))} then"
    upstream = timelines.get(by["job_id"])
    theirs = [r for r in (upstream.runs if upstream else []) if r["scheduled_at_ms"] == at]
    if not theirs:
        return "that job has no run at this slot"
    if theirs[0]["status"] != by["status"]:
        return f"that job's run ended {theirs[0]['status']}"
    ended = theirs[0].get("finished_at_ms")
    if ended is not None and ended > fired + AFTER_SLACK_MS:
        return f"it fired {_fmt(fired)}, before that run ended ({_fmt(ended)})"
    return None


def _maybe_in_force(t: JobTimeline, link: Link, at_ms: int) -> bool:
    """B may have run after A at `at_ms` (commit order unknown within AFTER_SLACK_MS)."""
    if at_ms < link.start_ms - AFTER_SLACK_MS:
        return False
    if link.end_ms is not None and at_ms > link.end_ms + AFTER_SLACK_MS:
        return False
    if t.pause_ms is None:
        return True
    paused_from = t.pause_ms + AFTER_SLACK_MS
    paused_until = None if t.resume_ms is None else t.resume_ms - AFTER_SLACK_MS
    return not (paused_from <= at_ms and (paused_until is None or at_ms <= paused_until))


def _surely_in_force(t: JobTimeline, link: Link, ended_ms: int, record_lag_ms: int) -> bool:
    """A run of A that ended at `ended_ms` (recorded up to `record_lag_ms` later) ended while
    B surely ran after A: B's run was added, and claimed before any cancel of B dropped it."""
    if ended_ms < link.start_ms + AFTER_SLACK_MS:
        return False
    if link.end_ms is not None:
        # A cancel drops B's run if it was not claimed yet (LATE_BOUND_MS under faults).
        margin = AFTER_SLACK_MS + record_lag_ms + (LATE_BOUND_MS if link.ended_by_cancel else 0)
        if ended_ms > link.end_ms - margin:
            return False
    if t.pause_ms is None:
        return True
    paused_from = t.pause_ms - AFTER_SLACK_MS - record_lag_ms
    paused_until = None if t.resume_ms is None else t.resume_ms + AFTER_SLACK_MS
    return not (paused_from <= ended_ms and (paused_until is None or ended_ms <= paused_until))


def owed_after_runs(timelines: dict[str, JobTimeline], end_ms: int) -> int:
    """How many ends of upstream runs `check_after` required a run of B for (a figure)."""
    return sum(
        len(_owed(t, link, timelines[link.upstream], end_ms))
        for t in timelines.values()
        for link in links_of(t)
        if link.upstream in timelines
    )


def _owed(t: JobTimeline, link: Link, upstream: JobTimeline, end_ms: int) -> list[dict[str, Any]]:
    """The runs of A whose ends this link surely had to follow."""
    # An HTTP outcome carries its caller's clock and is recorded when reported (after a
    # failover, up to the late bound); a queue's ack, nack or expiry is stamped as it applies.
    http = upstream.job.get("target", {}).get("type") == "http"
    record_lag = LATE_BOUND_MS if http else 0
    return [
        run
        for run in upstream.runs
        if run["status"] in ENDS_OF[link.on]
        and (ended := run.get("finished_at_ms")) is not None
        and ended + AFTER_GRACE_MS <= end_ms
        and _surely_in_force(t, link, ended, record_lag)
    ]


def _after_runs_made(
    t: JobTimeline, link: Link, upstream: JobTimeline, end_ms: int
) -> list[Violation]:
    """The runs of A this link must have given B: one each."""
    have: dict[int, int] = {}
    for run in t.runs:
        have[run["scheduled_at_ms"]] = have.get(run["scheduled_at_ms"], 0) + 1
    found = []
    for run in _owed(t, link, upstream, end_ms):
        ended = run["finished_at_ms"]
        count = have.get(run["scheduled_at_ms"], 0)
        what = f"{link.upstream}@{run['scheduled_at']} ended {run['status']} {_fmt(ended)}"
        if count == 0:
            detail = f"{what}, the job running after it on {link.on}: no run at that slot"
            found.append(Violation("after_run_missing", t.job_id, detail))
        elif count > 1:
            found.append(Violation("after_run_twice", t.job_id, f"{what}: {count} runs"))
    return found


def _backfilled(t: JobTimeline) -> list[Violation]:
    """Backfill runs only at asked occurrences; an acknowledged backfill ran the occurrences of
    its range before the job existed (unless a cancel came soon after its answer)."""
    found: list[Violation] = []
    asked = [(lo, hi) for lo, hi, outcome, _ in t.backfills if outcome != "failed"]
    for run in t.runs:
        at = run["scheduled_at_ms"]
        if not run.get("backfill"):
            continue
        if not any(lo <= at < hi for lo, hi in asked):
            found.append(Violation("unasked_backfill_run", t.job_id, run["scheduled_at"]))
        elif not (_is_occurrence(t.first_schedule, at) or _is_occurrence(t.final_schedule, at)):
            found.append(Violation("backfill_run_not_due", t.job_id, run["scheduled_at"]))
    have = {r["scheduled_at_ms"] for r in t.runs}
    for lo, hi, outcome, answered_ms in t.backfills:
        if outcome != "ok" or (
            t.cancel_ms is not None and t.cancel_ms < answered_ms + LATE_BOUND_MS
        ):
            continue
        before = occurrences_between(t.first_schedule, lo, min(hi, t.created_ms), 1_000)
        lost = [_fmt(at) for at in before if at not in have]
        if lost:
            detail = f"{len(lost)} occurrence(s) of an acknowledged backfill: {lost[:MAX_LISTED]}"
            found.append(Violation("missing_backfill_run", t.job_id, detail))
    return found


def _is_occurrence(schedule: Schedule, at_ms: int) -> bool:
    return next_after(schedule, at_ms - 1) == at_ms


def _late(t: JobTimeline, run: dict[str, Any]) -> bool:
    """Claimed past the misfire threshold (the claimer's clock is read just before it)."""
    return ms_of(run, "dispatched_at") - ms_of(run, "fire_at") > t.threshold_ms


def _may_skip_after(t: JobTimeline, schedule: Schedule, run: dict[str, Any]) -> bool:
    return t.misfire != "run_all" and not isinstance(schedule, AtSchedule) and _late(t, run)


def _walk(t: JobTimeline, runs: list[dict[str, Any]], seg: Segment) -> list[Violation]:
    found: list[Violation] = []
    s = seg.schedule
    if not runs:
        return _missing_tail(t, seg, seg.first_hi, "first run")
    first = runs[0]["scheduled_at_ms"]
    if seg.first_lo is None or not (seg.first_lo <= first <= (seg.first_hi or first)):
        found.append(
            Violation(
                "extra_run",
                t.job_id,
                f"first run {runs[0]['scheduled_at']} is not "
                f"the schedule's first ({_fmt(seg.first_lo)}..{_fmt(seg.first_hi)})",
            )
        )
    for a, b in itertools.pairwise(runs):
        sa, sb = a["scheduled_at_ms"], b["scheduled_at_ms"]
        expected = next_after(s, sa)
        if sb == expected:
            continue
        if sb == sa:
            found.append(Violation("duplicate_run", t.job_id, f"two runs at {b['scheduled_at']}"))
        elif not _is_occurrence(s, sb) or expected is None:
            found.append(Violation("extra_run", t.job_id, f"{b['scheduled_at']} is not due"))
        elif _may_skip_after(t, s, a) and sb <= (next_after(s, ms_of(a, "dispatched_at")) or sb):
            continue  # misfire policy: one catch-up run, then the next future occurrence
        else:
            gap = _between(s, sa, sb)
            found.append(
                Violation(
                    "missing_run",
                    t.job_id,
                    f"{len(gap)} occurrence(s) between "
                    f"{a['scheduled_at']} and {b['scheduled_at']}: {gap[:MAX_LISTED]}",
                )
            )
    last = runs[-1]
    after = (
        ms_of(last, "dispatched_at") if _may_skip_after(t, s, last) else ms_of(last, "scheduled_at")
    )
    return found + _missing_tail(t, seg, next_after(s, after), "next run")


def _missing_tail(t: JobTimeline, seg: Segment, nxt: int | None, what: str) -> list[Violation]:
    """The occurrence after the last run: fine if none is left, or if the segment was stopped
    (cancel, reschedule) before it was due plus LATE_BOUND."""
    if nxt is None:
        return []
    fire = fire_time(t.job_id, nxt, t.window_ms)
    if seg.stop_ms is None:
        detail = f"{what} {_fmt(nxt)} never claimed, job {t.job['status']}"
        return [Violation("missing_run", t.job_id, detail)]
    if fire < seg.stop_ms - LATE_BOUND_MS and not _held_by_overlap(t, seg.stop_ms):
        detail = (
            f"{what} {_fmt(nxt)} (fires {_fmt(fire)}) never claimed, and the job was only "
            f"stopped at {_fmt(seg.stop_ms)}"
        )
        return [Violation("missing_run", t.job_id, detail)]
    return []


def _held_by_overlap(t: JobTimeline, stop_ms: int) -> bool:
    """Overlap `delay`: the next run waits while any run of the job is in flight, so it may
    rightly stay unclaimed up to the stop when a run finished late (or never) before it."""
    return t.overlap == "delay" and any(
        r.get("finished_at_ms") is None or r["finished_at_ms"] > stop_ms - LATE_BOUND_MS
        for r in t.runs
    )


def _between(schedule: Schedule, after_ms: int, before_ms: int) -> list[str]:
    gap: list[str] = []
    cursor = after_ms
    while len(gap) < 1000:
        nxt = next_after(schedule, cursor)
        if nxt is None or nxt >= before_ms:
            return gap
        gap.append(_fmt(nxt))
        cursor = nxt
    return gap


def _run_rows(t: JobTimeline) -> list[Violation]:
    """Each row on its own: fire time, claim time, and a skip with a documented reason."""
    found: list[Violation] = []
    for run in t.runs:
        key = f"{t.job_id}@{run['scheduled_at']}"
        scheduled, fired = run["scheduled_at_ms"], ms_of(run, "fire_at")
        window = 0 if scheduled in t.triggers else t.window_ms  # a trigger fires at once
        # A backfill run fires paced on its tenant's lane, not at its scheduled time; an after
        # run when its upstream's run ended (check_after).
        is_paced = run.get("backfill") or run.get("triggered_by")
        if not is_paced and fired != fire_time(t.job_id, scheduled, window):
            found.append(Violation("wrong_fire_time", t.job_id, f"{key} fires {run['fire_at']}"))
        claimed = ms_of(run, "dispatched_at")
        if claimed < fired - EARLY_TOLERANCE_MS:
            found.append(
                Violation(
                    "early_claim",
                    t.job_id,
                    f"{key} claimed {fired - claimed} ms before its fire time",
                )
            )
        if claimed - fired > LATE_BOUND_MS and t.overlap != "delay":
            found.append(
                Violation(
                    "late_claim", t.job_id, f"{key} claimed {(claimed - fired) / 1000:.1f}s late"
                )
            )
        if run["status"] == "skipped":
            found += _skip_reason(t, run, key)
        elif _on_a_holiday(t, run) and not run.get("backfill") and scheduled not in t.triggers:
            found.append(Violation("calendar_not_honoured", t.job_id, f"{key} {run['status']}"))
    return found


def _on_a_holiday(t: JobTimeline, run: dict[str, Any]) -> bool:
    """A run of a job that excluded its tenant's calendar from its creation, never rescheduled
    (a reschedule drops the exclude), on one of the calendar's dates (in the schedule's zone)."""
    if not t.excludes or t.update_ms is not None:
        return False
    return _local_day(t, run) in t.calendar


def _local_day(t: JobTimeline, run: dict[str, Any]) -> str:
    schedule = t.first_schedule
    zone = schedule.timezone if isinstance(schedule, CronSchedule) else "UTC"
    return local_date(run["scheduled_at_ms"], zone)


def _skip_reason(t: JobTimeline, run: dict[str, Any], key: str) -> list[Violation]:
    error = run.get("error") or ""
    if error.startswith("calendar:") and t.excludes and _local_day(t, run) in t.calendar:
        return []
    if "misfire_policy skip" in error and t.misfire == "skip" and _late(t, run):
        return []
    if "still in flight" in error and t.overlap == "skip":
        return []
    return [Violation("unexplained_skip", t.job_id, f"{key} skipped: {error!r}")]


def _claims_after_acks(t: JobTimeline, scheduled: list[dict[str, Any]]) -> list[Violation]:
    """No run claimed after a cancel returned 2xx; no run of the old schedule claimed after a
    reschedule returned 2xx; no scheduled run claimed while paused, from the pause's 2xx to the
    resume (a claim's dispatched_at is its proposer's clock, before commit)."""
    found = []
    for run in t.runs:
        claimed = ms_of(run, "dispatched_at")
        key = f"{t.job_id}@{run['scheduled_at']}"
        if (
            run in scheduled
            and t.pause_acked_ms is not None
            and t.pause_acked_ms < claimed < (t.resume_ms or claimed + 1)
        ):
            detail = f"{key} claimed at {_fmt(claimed)}, paused {_fmt(t.pause_acked_ms)}"
            found.append(Violation("claimed_while_paused", t.job_id, detail))
        if t.cancel_acked_ms is not None and claimed > t.cancel_acked_ms:
            detail = (
                f"{key} claimed at {_fmt(claimed)}, cancel acknowledged {_fmt(t.cancel_acked_ms)}"
            )
            found.append(Violation("claimed_after_cancel", t.job_id, detail))
        if (
            t.update_acked_ms is not None
            and claimed > t.update_acked_ms
            and _is_occurrence(t.first_schedule, run["scheduled_at_ms"])
            and not _is_occurrence(t.final_schedule, run["scheduled_at_ms"])
        ):
            detail = f"{key} (old schedule) claimed after the reschedule was acknowledged"
            found.append(Violation("claimed_after_reschedule", t.job_id, detail))
    return found


def _fmt(ms: int | None) -> str:
    return "none" if ms is None else format_instant(ms)
