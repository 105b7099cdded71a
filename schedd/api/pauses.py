"""Pausing a queue (its receives hand out nothing) or a tenant (admin: none of its runs is
claimed), with a reason kept beside who did it (log level 8). A job's pause is api/jobs.py."""

from __future__ import annotations

from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import json_response, principal, propose, read_optional_object
from schedd.api.queues import BODY_LIMIT, queue_of
from schedd.api.tenants import tenant_json
from schedd.bodies import convert_body
from schedd.store import pauses
from schedd.store.commands import PauseQueue, PauseTenant, ResumeQueue, ResumeTenant
from schedd.store.pauses import Scope
from schedd.wire.pauses import PauseRequest, QueuePause


async def pause_queue(request: web.Request) -> web.Response:
    """Receives on the queue hand out nothing until it is resumed (runs are still claimed and
    wait in it). A queue not seen yet can be paused ahead of its first message."""
    ctx, who, queue = request.app[CONTEXT], principal(request), queue_of(request)
    asked = convert_body(await read_optional_object(request, limit_bytes=BODY_LIMIT), PauseRequest)
    tenant_id = who.tenant()
    await propose(
        ctx, PauseQueue(tenant_id=tenant_id, queue=queue, reason=asked.reason, actor=who.actor)
    )
    return json_response(await _queue_pause(ctx, tenant_id, queue))


async def resume_queue(request: web.Request) -> web.Response:
    """Receives on the queue hand out its messages again (waiting long polls at once)."""
    ctx, who, queue = request.app[CONTEXT], principal(request), queue_of(request)
    tenant_id = who.tenant()
    await propose(ctx, ResumeQueue(tenant_id=tenant_id, queue=queue, actor=who.actor))
    return json_response(await _queue_pause(ctx, tenant_id, queue))


async def _queue_pause(ctx: ApiContext, tenant_id: str, queue: str) -> QueuePause:
    found = await ctx.reads.read(lambda conn: pauses.find(conn, Scope.QUEUE, tenant_id, queue))
    return QueuePause(
        name=queue, paused=found is not None, paused_reason=None if found is None else found.reason
    )


async def pause_tenant(request: web.Request) -> web.Response:
    """No run of the tenant is claimed until it is resumed: its due runs wait in the store."""
    ctx, tenant_id = request.app[CONTEXT], request.match_info["tenant_id"]
    principal(request).require_admin()
    asked = convert_body(await read_optional_object(request, limit_bytes=BODY_LIMIT), PauseRequest)
    await propose(ctx, PauseTenant(tenant_id=tenant_id, reason=asked.reason, actor="admin"))
    return json_response(await tenant_json(ctx, tenant_id))


async def resume_tenant(request: web.Request) -> web.Response:
    """The tenant's runs are claimed again; each job's misfire policy decides on the runs it
    missed meanwhile (as after an outage), under the tenant's dispatch rate."""
    ctx, tenant_id = request.app[CONTEXT], request.match_info["tenant_id"]
    principal(request).require_admin()
    await propose(ctx, ResumeTenant(tenant_id=tenant_id, actor="admin"))
    return json_response(await tenant_json(ctx, tenant_id))
