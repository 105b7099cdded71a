"""Dead-letter routes: list (or grouped by error, or one group's), show, redrive (one new
attempt; one or a batch), delete."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import (
    decode_cursor,
    encode_cursor,
    json_response,
    page,
    principal,
    propose,
    query_limit,
    read_object,
)
from schedd.bodies import convert_body
from schedd.errors import (
    ClusterUnavailable,
    DeadletterNotFound,
    InvalidRequest,
    OutcomeUnknown,
    SchedError,
    StorageLow,
)
from schedd.model import partition_of
from schedd.store import deadletter_groups, queries
from schedd.store.commands import DeleteDeadletter, RedriveDeadletter
from schedd.store.fingerprint import FINGERPRINT
from schedd.wire.deadletters import (
    DeadLetterList,
    NotRedriven,
    RedriveBatch,
    Redriven,
    RedriveQueued,
    RedriveResults,
)
from schedd.wire.errors import ErrorDetail

REDRIVE_BODY_LIMIT = 256 * 1024
REDRIVE_CONCURRENCY = 16  # commands of one batch in flight at once


def _addressed(request: web.Request) -> tuple[ApiContext, str, str]:
    """(context, the caller's tenant, the dead letter's id) of a /v1/deadletters/{id} request."""
    return request.app[CONTEXT], principal(request).tenant(), request.match_info["id"]


async def list_deadletters(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    group_by, wanted = _group_by(request), _fingerprint(request)
    limit, after = query_limit(request), decode_cursor(request) or ""
    if group_by is not None:
        return await _groups(request, tenant_id, limit)
    if wanted is not None:  # a bounded scan: the page may hold fewer than limit
        items, next_after = await ctx.reads.read(
            lambda conn: deadletter_groups.with_fingerprint(
                conn, tenant_id, wanted, after=after, limit=limit
            )
        )
        cursor = None if next_after is None else encode_cursor(next_after)
        return json_response(DeadLetterList(deadletters=items, next_cursor=cursor))
    items = await ctx.reads.read(
        lambda conn: queries.list_deadletters(conn, tenant_id, after=after, limit=limit)
    )
    return json_response(
        DeadLetterList(deadletters=items, next_cursor=page(items, limit, lambda d: d.id))
    )


def _group_by(request: web.Request) -> str | None:
    value = request.query.get("group_by")
    if value is not None and value != "error":
        raise InvalidRequest("group_by", f"must be error, got {value[:40]!r}")
    return value


def _fingerprint(request: web.Request) -> str | None:
    value = request.query.get("fingerprint")
    if value is not None and not FINGERPRINT.fullmatch(value):
        raise InvalidRequest(
            "fingerprint", f"must be 16 hex digits (a group's fingerprint), got {value[:40]!r}"
        )
    return value


async def _groups(request: web.Request, tenant_id: str, limit: int) -> web.Response:
    """GET /v1/deadletters?group_by=error: one answer, no pages (`limit` groups at most)."""
    for field in ("cursor", "fingerprint"):
        if field in request.query:
            raise InvalidRequest(field, "cannot be combined with group_by")
    groups = await request.app[CONTEXT].reads.read(
        lambda conn: deadletter_groups.group_deadletters(conn, tenant_id, limit=limit)
    )
    return json_response(groups)


async def get_deadletter(request: web.Request) -> web.Response:
    ctx, tenant_id, dl_id = _addressed(request)
    item = await ctx.reads.read(lambda conn: queries.get_deadletter(conn, tenant_id, dl_id))
    if item is None:
        raise DeadletterNotFound(f"no dead letter with id {dl_id!r}")
    return json_response(item)


async def _redrive(ctx: ApiContext, tenant_id: str, dl_id: str) -> None:
    """One redrive_deadletter command (its outbox row goes to the job's partition)."""
    partition = partition_of(dl_id.split(":", 1)[0], ctx.partitions)
    await propose(ctx, RedriveDeadletter(tenant_id=tenant_id, id=dl_id, partition=partition))


async def redrive(request: web.Request) -> web.Response:
    ctx, tenant_id, dl_id = _addressed(request)
    await _redrive(ctx, tenant_id, dl_id)
    return json_response(RedriveQueued(id=dl_id, status="redriven"), status=202)


def _redrive_ids(body: object) -> list[str]:
    ids = convert_body(body, RedriveBatch).ids
    if len(set(ids)) != len(ids):
        raise InvalidRequest("ids", "must not name a dead letter twice")
    return ids


def _not_sent(first: SchedError) -> SchedError:
    """The error of an id left unsent after `first` refused an earlier one."""
    cls = StorageLow if isinstance(first, StorageLow) else ClusterUnavailable
    return cls(f"not sent: an earlier id of this request was refused ({first.code})")


async def _known_ids(
    request: web.Request, tenant_id: str, ids: list[str], deadline: float
) -> set[str]:
    """The ids that are the tenant's dead letters, so that no command is proposed for the
    others. One this replica lacks may have been made on the leader a moment ago: the node
    catches up (`ApiContext.catch_up`, by the request's deadline) and looks again, once."""
    ctx = request.app[CONTEXT]
    found = await ctx.reads.read(lambda conn: queries.existing_deadletters(conn, tenant_id, ids))
    missing = [dl_id for dl_id in ids if dl_id not in found]
    if not missing:
        return found
    try:
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            await ctx.catch_up(request.remote)
    except TimeoutError:
        raise ClusterUnavailable("this node is catching up with the leader; retry") from None
    return found | await ctx.reads.read(
        lambda conn: queries.existing_deadletters(conn, tenant_id, missing)
    )


async def _redrive_by(ctx: ApiContext, tenant_id: str, dl_id: str, deadline: float) -> None:
    """`_redrive`, cut off at the request's deadline: a proposal sent may still be applied."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ClusterUnavailable("not sent: this request ran out of its time")
    try:
        await asyncio.wait_for(_redrive(ctx, tenant_id, dl_id), remaining)
    except TimeoutError:
        raise OutcomeUnknown(
            "sent, but not applied by the request's deadline: it may still be; list the "
            "dead letters to see"
        ) from None


def _error(dl_id: str, exc: SchedError) -> NotRedriven:
    return NotRedriven(id=dl_id, error=ErrorDetail(code=exc.code, message=str(exc)))


async def redrive_many(request: web.Request) -> web.Response:
    """One redrive_deadletter command per id the tenant has (the command takes one; a new type
    would need a log level), REDRIVE_CONCURRENCY at a time, all within the request timeout;
    each id answers for itself, in order. Ids it has not are answered without a command."""
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    ids = _redrive_ids(await read_object(request, limit_bytes=REDRIVE_BODY_LIMIT))
    deadline = time.monotonic() + ctx.request_timeout_s
    known = await _known_ids(request, tenant_id, ids, deadline)
    gate = asyncio.Semaphore(REDRIVE_CONCURRENCY)
    refused: list[SchedError] = []  # once the cluster refused one id, the rest are not sent

    async def one(dl_id: str) -> Redriven | NotRedriven:
        if dl_id not in known:
            return _error(dl_id, DeadletterNotFound(f"no dead letter with id {dl_id!r}"))
        async with gate:
            try:
                if refused:
                    raise _not_sent(refused[0])
                await _redrive_by(ctx, tenant_id, dl_id, deadline)
            except SchedError as exc:
                if isinstance(exc, ClusterUnavailable | StorageLow):
                    refused.append(exc)
                return _error(dl_id, exc)
        return Redriven(id=dl_id, redriven=True)

    results = await asyncio.gather(*map(one, ids))
    if refused and not any(isinstance(r, Redriven) for r in results):
        raise refused[0]  # nothing was done: the whole request is a 503 (or 507) to retry
    return json_response(RedriveResults(results=results))


async def delete(request: web.Request) -> web.Response:
    ctx, tenant_id, dl_id = _addressed(request)
    await propose(ctx, DeleteDeadletter(tenant_id=tenant_id, id=dl_id))
    return web.Response(status=204)
