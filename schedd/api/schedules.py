"""Previewing a schedule: the next occurrences of a schedule, without creating a job."""

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
from schedd.model import AtSchedule, CronSchedule, Schedule
from schedd.schedule import next_after, occurrences, parse_schedule
from schedd.store import calendars as stored_calendars
from schedd.timeformat import format_instant, parse_instant
from schedd.wire.jobs import PreviewResult

PREVIEW_BODY_LIMIT = 64 * 1024
MAX_PREVIEW = 1_000


async def preview(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    body = await read_object(request, limit_bytes=PREVIEW_BODY_LIMIT)
    require(body, {"schedule", "after", "count"})
    now = ctx.clock_ms()
    after = now if body.get("after") is None else parse_instant(body["after"], field="after")
    count = as_integer(body.get("count", 10), 1, MAX_PREVIEW)
    if count is None:
        raise InvalidRequest("count", f"must be an integer from 1 to {MAX_PREVIEW}")
    asked, exclude = split_exclude(body.get("schedule"))
    schedule = parse_schedule(asked, now_ms=min(now, after))
    if exclude and isinstance(schedule, AtSchedule):
        raise InvalidSchedule("schedule.exclude", "applies to cron and every schedules only")
    if not exclude:
        runs = occurrences(schedule, after, 2**62, count)
    else:  # the caller tenant's calendars, as dispatch reads them
        tenant_id = principal(request).tenant()
        dates = await ctx.reads.read(
            lambda conn: {
                name: stored_calendars.dates_of(conn, tenant_id, name) for name in exclude
            }
        )
        runs = not_excluded(schedule, after, count, exclude, dates)
    return json_response(PreviewResult(runs=[format_instant(ms) for ms in runs]))


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
