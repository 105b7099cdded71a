"""Calendar routes (issue 33 §1): create, list, read, replace, delete a tenant's calendars.

Handlers validate the dates and propose; apply decides the rest (a name taken, a calendar in
use). Reads come from this node's store.
"""

from __future__ import annotations

import sqlite3

from aiohttp import web

from schedd.api.context import CONTEXT
from schedd.api.http import check_level, json_response, principal, propose, read_object
from schedd.bodies import convert_body
from schedd.calendars import check_name, parse_dates
from schedd.errors import CalendarNotFound
from schedd.store import calendars as stored
from schedd.store.commands import CALENDARS_LEVEL, DeleteCalendar, PutCalendar
from schedd.timeformat import format_instant
from schedd.wire.calendars import (
    CalendarDates,
    CalendarInput,
    CalendarList,
    CalendarSummary,
    CalendarView,
)

BODY_LIMIT = 512 * 1024  # 10,000 dates are about 140 KB of JSON


def _summary(calendar: stored.StoredCalendar) -> CalendarSummary:
    dates = calendar.dates
    return CalendarSummary(
        name=calendar.name,
        dates_count=len(dates),
        first=dates[0] if dates else None,
        last=dates[-1] if dates else None,
        created_at=format_instant(calendar.created_at_ms),
        updated_at=format_instant(calendar.updated_at_ms),
    )


async def _view(request: web.Request, tenant_id: str, name: str) -> CalendarView:
    ctx = request.app[CONTEXT]

    def read(conn: sqlite3.Connection) -> tuple[stored.StoredCalendar | None, int]:
        found = stored.get(conn, tenant_id, name)
        return found, 0 if found is None else stored.used_by(conn, tenant_id, name)

    found, used = await ctx.reads.read(read)
    if found is None:
        raise CalendarNotFound(name)
    summary = _summary(found)
    return CalendarView(
        **{f: getattr(summary, f) for f in CalendarSummary.__struct_fields__},
        dates=list(found.dates),
        used_by=used,
    )


async def create_calendar(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id = who.tenant()
    body = convert_body(await read_object(request, limit_bytes=BODY_LIMIT), CalendarInput)
    name, dates = check_name(body.name), parse_dates(body.dates)
    check_level(ctx.storage, CALENDARS_LEVEL)
    cmd = PutCalendar(
        tenant_id=tenant_id, name=name, dates=dates, create_only=True, actor=who.actor
    )
    await propose(ctx, cmd)
    return json_response(await _view(request, tenant_id, name), status=201)


async def put_calendar(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id, name = who.tenant(), check_name(request.match_info["name"])
    body = convert_body(await read_object(request, limit_bytes=BODY_LIMIT), CalendarDates)
    dates = parse_dates(body.dates)
    check_level(ctx.storage, CALENDARS_LEVEL)
    await propose(ctx, PutCalendar(tenant_id=tenant_id, name=name, dates=dates, actor=who.actor))
    return json_response(await _view(request, tenant_id, name))


async def list_calendars(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    found = await ctx.reads.read(lambda conn: stored.list_all(conn, tenant_id))
    return json_response(CalendarList(calendars=[_summary(c) for c in found]))


async def get_calendar(request: web.Request) -> web.Response:
    tenant_id, name = principal(request).tenant(), check_name(request.match_info["name"])
    return json_response(await _view(request, tenant_id, name))


async def delete_calendar(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id, name = who.tenant(), check_name(request.match_info["name"])
    check_level(ctx.storage, CALENDARS_LEVEL)
    await propose(ctx, DeleteCalendar(tenant_id=tenant_id, name=name, actor=who.actor))
    return web.Response(status=204)
