"""A job's versions (issue 31): GET /v1/jobs/{id}/versions, and whether the job routes may ask
apply to record a change in them (every member applies log level 8; until then they propose
the older forms, which record nothing)."""

from __future__ import annotations

import msgspec
from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import int_cursor, json_response, page, principal, query_limit
from schedd.errors import JobNotFound
from schedd.store.commands import SCHEDULE_CONTROL_LEVEL
from schedd.store.versions import job_versions, version_view
from schedd.wire.jobs import JobVersionView, VersionList


def versions_recorded(ctx: ApiContext) -> bool:
    """Whether a job change may take its level-8 form (`versioned`)."""
    return ctx.storage is None or not ctx.storage.peers.lagging(SCHEDULE_CONTROL_LEVEL)


async def list_versions(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    job_id = request.match_info["job_id"]
    limit, before = query_limit(request), int_cursor(request)
    below = 2**62 if before is None else before
    found = await ctx.reads.read(
        lambda conn: job_versions(conn, tenant_id, job_id, before=below, limit=limit)
    )
    if found is None:
        raise JobNotFound(job_id)
    shown = [_opened(ctx, version_view(job_id, tenant_id, version)) for version in found]
    cursor = page(found, limit, lambda version: version.version)
    return json_response(VersionList(versions=shown, next_cursor=cursor))


def _opened(ctx: ApiContext, version: JobVersionView) -> JobVersionView:
    """A version as the tenant sees it: its spec's payload opened (as GET /v1/jobs/{id})."""
    if version.spec is None:
        return version
    spec = version.spec | {"payload": ctx.payload_keys.open(version.spec.get("payload"))}
    return msgspec.structs.replace(version, spec=spec)
