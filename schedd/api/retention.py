"""Retention routes: a tenant's own (shorter) retention, and what the node keeps (admin)."""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import json_response, principal, propose, read_object
from schedd.errors import TenantNotFound
from schedd.retention import parse_tenant_retention, retention_json
from schedd.storage import file_sizes
from schedd.store import queries
from schedd.store.commands import SetRetention
from schedd.store.retained import last_prune_ms, retained
from schedd.timeformat import format_instant

routes = web.RouteTableDef()
BODY_LIMIT = 4096


async def _tenant_retention(ctx: ApiContext, tenant_id: str) -> dict[str, Any]:
    tenant = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    if tenant is None:
        raise TenantNotFound(tenant_id)
    node = ctx.retention
    return {
        "tenant_id": tenant_id,
        "retention": retention_json(node.shortened_by(tenant.retention).as_ms()),
        "own": retention_json(tenant.retention),
        "node": retention_json(node.as_ms()),
    }


@routes.get("/v1/retention")
async def get_retention(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    return json_response(await _tenant_retention(ctx, principal(request).tenant()))


@routes.put("/v1/retention")
async def set_retention(request: web.Request) -> web.Response:
    """Replace the tenant's own values: kinds it does not name follow the node's again."""
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    own = parse_tenant_retention(await read_object(request, limit_bytes=BODY_LIMIT), field="body")
    await propose(ctx, SetRetention(tenant_id=tenant_id, retention_ms=own))
    return json_response(await _tenant_retention(ctx, tenant_id))


@routes.get("/v1/admin/retention")
async def retention_status(request: web.Request) -> web.Response:
    """Rows and the oldest kept per kind, file sizes, free disk and the last prune (admin)."""
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    kinds = await ctx.reads.read(retained)
    last = await ctx.reads.read(last_prune_ms)
    answer: dict[str, Any] = {
        "node_id": ctx.node_id,
        "retention": retention_json(ctx.retention.as_ms()),
        "kinds": [
            {
                "kind": k.kind,
                "rows": k.rows,
                "rows_capped": k.is_capped,
                "oldest": None if k.oldest_ms is None else format_instant(k.oldest_ms),
            }
            for k in kinds
        ],
        "last_prune": None if last is None else format_instant(last),
    }
    if ctx.storage is not None:
        reading = ctx.storage.disk.reading()
        problem = ctx.storage.problem()
        answer["files"] = file_sizes(ctx.storage.disk.directory)
        answer["disk"] = dataclasses.asdict(reading) | {"low": reading.is_low}
        answer["writes"] = "accepted" if problem is None else "refused"
        answer["reason"] = problem
    return json_response(answer)
