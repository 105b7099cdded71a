"""Previewing a schedule: the next occurrences of a schedule, without creating a job."""

from __future__ import annotations

from aiohttp import web

from schedd.api.context import CONTEXT
from schedd.api.http import (
    json_response,
    read_object,
    require,
)
from schedd.errors import InvalidRequest
from schedd.jsonbody import as_integer
from schedd.schedule import occurrences, parse_schedule
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
    schedule = parse_schedule(body.get("schedule"), now_ms=min(now, after))
    runs = occurrences(schedule, after, 2**62, count)
    return json_response(PreviewResult(runs=[format_instant(ms) for ms in runs]))
