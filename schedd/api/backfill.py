"""The backfill route: runs for a job's past occurrences, paced under its tenant's dispatch rate.

The handler computes the occurrences (the job's schedule: its zone, DST rule, start_at and
end_at) and proposes them in commands of at most SLOTS_PER_COMMAND; apply skips those that
have a run and paces the rest on the tenant's backfill lane.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3

from aiohttp import web

from schedd.admission import DEFAULT_RATE
from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import json_response, principal, propose, read_object
from schedd.bodies import convert_body
from schedd.errors import (
    Conflict,
    HistoryIncomplete,
    InvalidBackfill,
    InvalidRequest,
    JobNotFound,
    StaleState,
)
from schedd.model import AfterSchedule, JobStatus
from schedd.schedule import load_schedule, occurrences_between
from schedd.store import history_reads, queries
from schedd.store.commands import BackfillJob
from schedd.timeformat import format_instant, parse_instant
from schedd.wire.jobs import Backfilled, BackfillRequest

MAX_BACKFILL = 100_000  # occurrences one request may ask for
SLOTS_PER_COMMAND = 2_000  # about 30 KB a log entry, ~20 ms of apply (5,000: 53 ms measured)
BACKFILL_SHARE = 2  # a tenant's backfill runs take at most 1/2 of its dispatch_rate
BODY_LIMIT = 4 * 1024


def backfill_rate(dispatch_rate: int) -> int:
    """Backfill runs a second for a tenant of this dispatch rate (0 or less: no limit, so the
    default rate's share)."""
    rate = dispatch_rate if dispatch_rate > 0 else DEFAULT_RATE
    return max(1, rate // BACKFILL_SHARE)


async def backfill_job(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id, job_id = who.tenant(), request.match_info["job_id"]
    asked = _asked(await read_object(request, limit_bytes=BODY_LIMIT))
    now = ctx.clock_ms()
    from_ms, to_ms = _range(asked, now)
    job = await ctx.reads.read(lambda conn: queries.get_job(conn, tenant_id, job_id))
    if job is None:
        raise JobNotFound(job_id)
    if job.status == JobStatus.CANCELLED:
        raise Conflict("a cancelled job cannot be backfilled")
    schedule = load_schedule(job.schedule)
    if isinstance(schedule, AfterSchedule):
        raise InvalidBackfill(
            "job_id",
            f"an after schedule has no occurrences to backfill: its runs come from job "
            f"{schedule.job_id}'s (backfill that job)",
        )
    slots = await asyncio.to_thread(occurrences_between, schedule, from_ms, to_ms, MAX_BACKFILL + 1)
    if len(slots) > MAX_BACKFILL:
        raise InvalidBackfill(
            "to",
            f"the range holds more than {MAX_BACKFILL:,} occurrences of the job's schedule, "
            f"the most one backfill takes: ask for a shorter range (the first {MAX_BACKFILL:,} "
            f"end at {format_instant(slots[MAX_BACKFILL - 1])})",
        )
    per_s = backfill_rate(await _dispatch_rate(ctx, tenant_id))
    runs = 0
    for start in range(0, len(slots), SLOTS_PER_COMMAND):
        part = slots[start : start + SLOTS_PER_COMMAND]
        for attempt in range(STALE_RETRIES):
            left, closed_through = await ctx.reads.read(
                functools.partial(_not_in_history, ctx, job_id=job_id, slots=part)
            )
            cmd = BackfillJob(
                tenant_id=tenant_id,
                job_id=job_id,
                actor=who.actor,
                slots=tuple(left),
                per_s=per_s,
                closed_through=closed_through,
            )
            try:
                runs += (await propose(ctx, cmd)).runs
                break
            except StaleState:
                if attempt == STALE_RETRIES - 1:
                    raise
    return json_response(Backfilled(runs=runs), status=202)


STALE_RETRIES = 3  # a history segment closed between the read and the apply: read again


def _not_in_history(
    ctx: ApiContext, conn: sqlite3.Connection, *, job_id: str, slots: list[int]
) -> tuple[list[int], int | None]:
    """The slots without a run in a closed history segment (issue 35 §1), and the highest
    closed_index read (None: no segment closed yet, the command needs no level 13): apply reads
    only the live tables and the open segments. HistoryIncomplete when a segment that could
    hold a slot is not on this node yet."""
    closed_through = history_reads.closed_through(conn)
    if closed_through is None:
        return slots, None
    try:
        taken = history_reads.slots_taken(conn, ctx.reads.history, job_id, slots)
    except history_reads.HistoryMissing as exc:
        raise HistoryIncomplete(str(exc)) from None
    return [slot for slot in slots if slot not in taken], closed_through


def _asked(body: object) -> BackfillRequest:
    """The body, or a 422 naming the field."""
    try:
        return convert_body(body, BackfillRequest)
    except InvalidRequest as exc:
        raise InvalidBackfill(exc.field, exc.reason) from None


def _range(asked: BackfillRequest, now_ms: int) -> tuple[int, int]:
    try:
        from_ms = parse_instant(asked.from_, field="from")
        to_ms = parse_instant(asked.to, field="to")
    except InvalidRequest as exc:
        raise InvalidBackfill(exc.field, exc.reason) from None
    if to_ms > now_ms:
        raise InvalidBackfill(
            "to", f"must not be after now ({format_instant(now_ms)}): a backfill runs past slots"
        )
    if from_ms >= to_ms:
        raise InvalidBackfill("from", f"must be before to ({format_instant(to_ms)})")
    return from_ms, to_ms


async def _dispatch_rate(ctx: ApiContext, tenant_id: str) -> int:
    tenant = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    return DEFAULT_RATE if tenant is None else tenant.dispatch_rate
