"""Previewing a schedule: the next occurrences of a schedule, without creating a job, each also
in the schedule's zone with its DST note; beside a current schedule's when an edit is previewed."""

from __future__ import annotations

from aiohttp import web

from schedd.api.context import CONTEXT
from schedd.api.http import (
    json_response,
    principal,
    read_object,
    require,
)
from schedd.calendars import excluded_by, next_local_midnight, split_exclude
from schedd.errors import InvalidRequest, InvalidSchedule
from schedd.jsonbody import as_integer
from schedd.model import AfterSchedule, AtSchedule, CronSchedule, Schedule
from schedd.occurrence import describe
from schedd.schedule import next_after, occurrences, parse_schedule
from schedd.store import calendars as stored_calendars
from schedd.timeformat import format_instant, parse_instant
from schedd.wire.jobs import OccurrenceView, PreviewResult

PREVIEW_BODY_LIMIT = 64 * 1024
MAX_PREVIEW = 1_000


async def preview(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    body = await read_object(request, limit_bytes=PREVIEW_BODY_LIMIT)
    require(body, {"schedule", "after", "count", "current"})
    now = ctx.clock_ms()
    after = now if body.get("after") is None else parse_instant(body["after"], field="after")
    count = as_integer(body.get("count", 10), 1, MAX_PREVIEW)
    if count is None:
        raise InvalidRequest("count", f"must be an integer from 1 to {MAX_PREVIEW}")
    schedule, exclude = _parsed(body.get("schedule"), now_ms=min(now, after))
    runs, shown = _described(schedule, after, await _runs(request, schedule, exclude, after, count))
    if body.get("current") is None:
        return json_response(PreviewResult(runs=runs, occurrences=shown))
    try:  # the schedule an edit replaces (a job's, as stored: it may have ended)
        current, current_exclude = _parsed(body["current"], now_ms=min(now, after), is_new=False)
    except InvalidRequest as exc:
        field = exc.field.removeprefix("schedule").removeprefix(".")
        raise type(exc)(f"current.{field}" if field else "current", exc.reason) from None
    current_ms = await _runs(request, current, current_exclude, after, count)
    current_runs, current_shown = _described(current, after, current_ms)
    return json_response(
        PreviewResult(
            runs=runs,
            occurrences=shown,
            current_runs=current_runs,
            current_occurrences=current_shown,
        )
    )


def _parsed(spec: object, *, now_ms: int, is_new: bool = True) -> tuple[Schedule, tuple[str, ...]]:
    """A schedule of the body and the calendars it excludes."""
    asked, exclude = split_exclude(spec)
    schedule = parse_schedule(asked, now_ms=now_ms, needs_a_run_left=is_new)
    if isinstance(schedule, AfterSchedule):
        raise InvalidSchedule(
            "schedule.after",
            f"has no times of its own: it runs when job {schedule.job_id} ends ({schedule.on})",
        )
    if exclude and isinstance(schedule, AtSchedule):
        raise InvalidSchedule("schedule.exclude", "applies to cron and every schedules only")
    return schedule, exclude


async def _runs(
    request: web.Request, schedule: Schedule, exclude: tuple[str, ...], after: int, count: int
) -> list[int]:
    if not exclude:
        return occurrences(schedule, after, 2**62, count)
    # the caller tenant's calendars, as dispatch reads them
    tenant_id = principal(request).tenant()
    dates = await request.app[CONTEXT].reads.read(
        lambda conn: {name: stored_calendars.dates_of(conn, tenant_id, name) for name in exclude}
    )
    return not_excluded(schedule, after, count, exclude, dates)


def _described(
    schedule: Schedule, after_ms: int, runs: list[int]
) -> tuple[list[str], list[OccurrenceView]]:
    shown = [OccurrenceView.of(o) for o in describe(schedule, runs, after_ms)]
    return [format_instant(ms) for ms in runs], shown


PREVIEW_SCAN = 20_000  # occurrences a preview with calendars looks at, at most


def not_excluded(
    schedule: Schedule,
    after: int,
    count: int,
    exclude: tuple[str, ...],
    dates: dict[str, frozenset[str] | None],
) -> list[int]:
    """The first `count` occurrences after `after` that no calendar of `exclude` skips; an
    excluded day is passed over whole (a minutely job's holiday costs one look, not 1,440)."""
    zone = schedule.timezone if isinstance(schedule, CronSchedule) else "UTC"
    found: list[int] = []
    cursor = after
    for _ in range(PREVIEW_SCAN):
        if len(found) == count:
            break
        run = next_after(schedule, cursor)
        if run is None:
            break
        if excluded_by(exclude, run, zone, dates.get) is None:
            found.append(run)
            cursor = run
        else:
            cursor = max(run, next_local_midnight(run, zone) - 1)
    return found
