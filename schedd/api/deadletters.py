"""Dead-letter routes: list, show, redrive (one new attempt), delete."""

from __future__ import annotations

from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import decode_cursor, json_response, page, principal, propose, query_limit
from schedd.errors import NotFound
from schedd.model import partition_of
from schedd.store import queries
from schedd.store.commands import DeleteDeadletter, RedriveDeadletter

routes = web.RouteTableDef()


class DeadLetterNotFound(NotFound):
    code = "deadletter_not_found"

    def __init__(self, dl_id: str) -> None:
        super().__init__(f"no dead letter with id {dl_id!r}")


def _addressed(request: web.Request) -> tuple[ApiContext, str, str]:
    """(context, the caller's tenant, the dead letter's id) of a /v1/deadletters/{id} request."""
    return request.app[CONTEXT], principal(request).tenant(), request.match_info["id"]


@routes.get("/v1/deadletters")
async def list_deadletters(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    limit, after = query_limit(request), decode_cursor(request) or ""
    items = await ctx.reads.read(
        lambda conn: queries.list_deadletters(conn, tenant_id, after=after, limit=limit)
    )
    return json_response(
        {"deadletters": items, "next_cursor": page(items, limit, lambda d: d["id"])}
    )


@routes.get("/v1/deadletters/{id}")
async def get_deadletter(request: web.Request) -> web.Response:
    ctx, tenant_id, dl_id = _addressed(request)
    item = await ctx.reads.read(lambda conn: queries.get_deadletter(conn, tenant_id, dl_id))
    if item is None:
        raise DeadLetterNotFound(dl_id)
    return json_response(item)


@routes.post("/v1/deadletters/{id}/redrive")
async def redrive(request: web.Request) -> web.Response:
    ctx, tenant_id, dl_id = _addressed(request)
    job_id = dl_id.split(":", 1)[0]
    partition = partition_of(job_id, ctx.partitions)
    await propose(ctx, RedriveDeadletter(tenant_id=tenant_id, id=dl_id, partition=partition))
    return json_response({"id": dl_id, "status": "redriven"}, status=202)


@routes.delete("/v1/deadletters/{id}")
async def delete(request: web.Request) -> web.Response:
    ctx, tenant_id, dl_id = _addressed(request)
    await propose(ctx, DeleteDeadletter(tenant_id=tenant_id, id=dl_id))
    return web.Response(status=204)
