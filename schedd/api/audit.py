"""The audit trail: a tenant's own records, or every record for the admin token."""

from __future__ import annotations

from aiohttp import web

from schedd.api.context import CONTEXT
from schedd.api.http import (
    int_cursor,
    json_response,
    page,
    principal,
    query_limit,
)
from schedd.store import queries

routes = web.RouteTableDef()


@routes.get("/v1/audit")
async def audit(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id = None if who.is_admin and who.tenant_id is None else who.tenant()
    limit, after = query_limit(request), int_cursor(request) or 0
    records = await ctx.reads.read(
        lambda conn: queries.list_audit(conn, tenant_id, after=after, limit=limit)
    )
    return json_response(
        {"audit": records, "next_cursor": page(records, limit, lambda r: r["seq"])}
    )
