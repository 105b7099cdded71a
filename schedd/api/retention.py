"""Retention routes: a tenant's own (shorter) retention, and what the node keeps (admin)."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

import msgspec
from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import json_response, principal, propose, read_object
from schedd.errors import TenantNotFound
from schedd.retention import parse_tenant_retention, retention_json
from schedd.storage import file_sizes
from schedd.store import queries, segments
from schedd.store.commands import SetRetention
from schedd.store.retained import last_prune_ms, retained
from schedd.timeformat import format_instant
from schedd.wire.retention_status import (
    DiskState,
    FileSizes,
    RetainedKind,
    RetentionStatus,
    SegmentView,
)
from schedd.wire.tenants import OwnRetention, Retention, TenantRetention

BODY_LIMIT = 4096
R = TypeVar("R", Retention, OwnRetention)


async def _tenant_retention(ctx: ApiContext, tenant_id: str) -> TenantRetention:
    tenant = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    if tenant is None:
        raise TenantNotFound(tenant_id)
    node = ctx.retention
    return TenantRetention(
        tenant_id=tenant_id,
        retention=_durations(node.shortened_by(tenant.retention).as_ms(), Retention),
        own=_durations(tenant.retention, OwnRetention),
        node=_durations(node.as_ms(), Retention),
    )


def _durations(ms: Mapping[str, int], kind: type[R]) -> R:
    """Milliseconds per kind as a retention answer's durations."""
    return msgspec.convert(retention_json(ms), kind)


async def get_retention(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    return json_response(await _tenant_retention(ctx, principal(request).tenant()))


async def set_retention(request: web.Request) -> web.Response:
    """Replace the tenant's own values: kinds it does not name follow the node's again."""
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    own = parse_tenant_retention(await read_object(request, limit_bytes=BODY_LIMIT), field="body")
    await propose(ctx, SetRetention(tenant_id=tenant_id, retention_ms=own))
    return json_response(await _tenant_retention(ctx, tenant_id))


async def retention_status(request: web.Request) -> web.Response:
    """Rows and the oldest kept per kind, file sizes, free disk and the last prune (admin)."""
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    kinds = await ctx.reads.read(retained)
    last = await ctx.reads.read(last_prune_ms)
    status = RetentionStatus(
        node_id=ctx.node_id,
        retention=_durations(ctx.retention.as_ms(), Retention),
        kinds=[
            RetainedKind(
                kind=k.kind,
                rows=k.rows,
                rows_capped=k.is_capped,
                oldest=None if k.oldest_ms is None else format_instant(k.oldest_ms),
            )
            for k in kinds
        ],
        last_prune=None if last is None else format_instant(last),
    )
    listed = await ctx.reads.read(_segments)
    if listed:
        history = ctx.reads.history.data_dir
        status = msgspec.structs.replace(
            status,
            segments=[
                SegmentView(
                    name=name,
                    family=family,
                    period_start=format_instant(period),
                    state=state,
                    rows=rows,
                    bytes=_size(segments.segment_path(history, name)),
                )
                for name, family, period, state, rows in listed
            ],
        )
    if ctx.storage is not None:
        reading = ctx.storage.disk.reading()
        problem = ctx.storage.problem()
        status = msgspec.structs.replace(
            status,
            files=FileSizes(**file_sizes(ctx.storage.disk.directory)),
            disk=DiskState(**dataclasses.asdict(reading), low=reading.is_low),
            writes="accepted" if problem is None else "refused",
            reason=problem,
        )
    return json_response(status)


def _segments(conn: sqlite3.Connection) -> list[tuple[str, str, int, str, int]]:
    rows = conn.execute(
        "SELECT name, family, period_start_ms, state, rows FROM segments "
        "WHERE state != 'dropped' ORDER BY period_start_ms, name"
    )
    return [(str(n), str(f), int(p), str(s), int(r)) for n, f, p, s, r in rows]


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None
