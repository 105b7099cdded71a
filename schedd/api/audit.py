"""The audit trail: a tenant's own records, or every record for the admin token; or one job's."""

from __future__ import annotations

import re

import msgspec
from aiohttp import web

from schedd.api.context import CONTEXT
from schedd.api.http import (
    int_cursor,
    json_response,
    page,
    principal,
    query_limit,
)
from schedd.errors import InvalidRequest
from schedd.store import history_reads
from schedd.wire.cluster import AuditList

MAX_JOB_ID_CHARS = 128
_JOB_ID = re.compile(rf"[\x21-\x7e]{{1,{MAX_JOB_ID_CHARS}}}")


def _job_id(value: str | None) -> str | None:
    """The job whose records are asked for (any id: another tenant's just has none here)."""
    if value is not None and not _JOB_ID.fullmatch(value):
        raise InvalidRequest("job_id", f"must be a job id like job_0123..., got {value[:40]!r}")
    return value


async def audit(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id = None if who.is_admin and who.tenant_id is None else who.tenant()
    limit, after = query_limit(request), int_cursor(request) or 0
    job_id = _job_id(request.query.get("job_id"))
    records, is_complete = await ctx.reads.read(
        lambda conn: history_reads.audit(
            conn, ctx.reads.history, tenant_id, after=after, limit=limit, job_id=job_id
        )
    )
    listing = AuditList(audit=records, next_cursor=page(records, limit, lambda r: r.seq))
    if not is_complete:
        listing = msgspec.structs.replace(listing, history_complete=False)
    return json_response(listing)
