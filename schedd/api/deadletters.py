"""Dead-letter routes: list (or grouped by error, or one group's), show, redrive (one new
attempt; one or a batch), delete."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import msgspec
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
    HistoryIncomplete,
    InvalidRequest,
    OutcomeUnknown,
    SchedError,
    StorageLow,
)
from schedd.model import partition_of
from schedd.store import deadletter_groups, history_reads, queries
from schedd.store.commands import Cell, DeleteDeadletter, MovedDeadletter, RedriveDeadletter
from schedd.store.fingerprint import FINGERPRINT
from schedd.wire.deadletters import (
    DeadLetterList,
    DeadLetterView,
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
    now_ms = ctx.clock_ms()
    items, is_complete = await ctx.reads.read(
        lambda conn: history_reads.deadletters(
            conn,
            ctx.reads.history,
            tenant_id,
            after=after,
            limit=limit,
            not_before_ms=_cutoff(ctx, conn, tenant_id, now_ms),
        )
    )
    listing = DeadLetterList(deadletters=items, next_cursor=page(items, limit, lambda d: d.id))
    if not is_complete:
        listing = msgspec.structs.replace(listing, history_complete=False)
    return json_response(listing)


def _cutoff(ctx: ApiContext, conn: sqlite3.Connection, tenant_id: str, now_ms: int) -> int:
    return history_reads.cutoff_ms(conn, tenant_id, ctx.retention, "deadletters", now_ms)


def _find(
    ctx: ApiContext, conn: sqlite3.Connection, tenant_id: str, dl_id: str, now_ms: int
) -> tuple[DeadLetterView, str | None] | None:
    """The dead letter (live or in a history segment, with the segment's name), or None;
    HistoryIncomplete when a segment that could hold it is not on this node yet."""
    try:
        return history_reads.deadletter(
            conn,
            ctx.reads.history,
            tenant_id,
            dl_id,
            not_before_ms=_cutoff(ctx, conn, tenant_id, now_ms),
        )
    except history_reads.HistoryMissing as exc:
        raise HistoryIncomplete(str(exc)) from None


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
    ctx = request.app[CONTEXT]
    now_ms = ctx.clock_ms()
    groups = await ctx.reads.read(
        lambda conn: deadletter_groups.group_deadletters(
            conn,
            tenant_id,
            limit=limit,
            readers=ctx.reads.history,
            not_before_ms=_cutoff(ctx, conn, tenant_id, now_ms),
        )
    )
    return json_response(groups)


async def get_deadletter(request: web.Request) -> web.Response:
    ctx, tenant_id, dl_id = _addressed(request)
    now_ms = ctx.clock_ms()
    found = await ctx.reads.read(lambda conn: _find(ctx, conn, tenant_id, dl_id, now_ms))
    if found is None:
        raise DeadletterNotFound(f"no dead letter with id {dl_id!r}")
    return json_response(found[0])


async def _redrive(ctx: ApiContext, tenant_id: str, dl_id: str) -> None:
    """One redrive_deadletter command (its outbox row goes to the job's partition). A dead
    letter that moved into a history segment goes with the command, with its run (apply never
    reads a closed segment)."""
    partition = partition_of(dl_id.split(":", 1)[0], ctx.partitions)
    moved = await ctx.reads.read(lambda conn: _moved(ctx, conn, tenant_id, dl_id))
    await propose(
        ctx, RedriveDeadletter(tenant_id=tenant_id, id=dl_id, partition=partition, moved=moved)
    )


def _moved(
    ctx: ApiContext, conn: sqlite3.Connection, tenant_id: str, dl_id: str
) -> MovedDeadletter | None:
    """What a redrive of a moved dead letter carries (None: live, or not found: apply says)."""
    found = _find(ctx, conn, tenant_id, dl_id, ctx.clock_ms())
    if found is None or found[1] is None:
        return None
    segment = found[1]
    readers = ctx.reads.history
    row = history_reads.moved_deadletter(readers, _listed(conn, segment), dl_id)
    job_id, scheduled_at = str(row[2]), int(str(row[3]))
    try:
        run = history_reads.moved_run(conn, readers, job_id, scheduled_at)
    except history_reads.HistoryMissing as exc:
        raise HistoryIncomplete(str(exc)) from None
    cells = [_cells(row)]
    if run is None:
        return MovedDeadletter(segment=segment, row=cells[0])
    return MovedDeadletter(
        segment=segment,
        row=cells[0],
        run=_cells(run[0]),
        attempts=tuple(_cells(a) for a in run[1]),
    )


def _listed(conn: sqlite3.Connection, name: str) -> history_reads.Listed:
    for segment in history_reads.listed(conn, name.split("-", 1)[0]):
        if segment.name == name:
            return segment
    raise HistoryIncomplete(f"history segment {name} is gone")


def _cells(row: tuple[object, ...]) -> tuple[Cell, ...]:
    return tuple(v if v is None or isinstance(v, int | str) else str(v) for v in row)


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
    now_ms = ctx.clock_ms()
    found |= await ctx.reads.read(  # moved into history segments (a redrive carries them)
        lambda conn: {i for i in missing if _find(ctx, conn, tenant_id, i, now_ms) is not None}
    )
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
    now_ms = ctx.clock_ms()
    found = await ctx.reads.read(lambda conn: _find(ctx, conn, tenant_id, dl_id, now_ms))
    segment = None if found is None else found[1]
    await propose(ctx, DeleteDeadletter(tenant_id=tenant_id, id=dl_id, segment=segment))
    return web.Response(status=204)
