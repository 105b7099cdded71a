"""Retention routes: a tenant's own (shorter) retention, and what the node keeps (admin)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Literal, TypeVar

import msgspec
from aiohttp import web
from msgspec import UNSET, Meta, UnsetType

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import json_response, principal, propose, read_object
from schedd.errors import TenantNotFound
from schedd.retention import parse_tenant_retention, retention_json
from schedd.storage import file_sizes
from schedd.store import queries
from schedd.store.commands import SetRetention
from schedd.store.retained import KINDS_SHOWN, ROW_COUNT_CAP, last_prune_ms, retained
from schedd.timeformat import format_instant
from schedd.wire.fields import Count, Instant
from schedd.wire.tenants import OwnRetention, Retention, TenantRetention

BODY_LIMIT = 4096
R = TypeVar("R", Retention, OwnRetention)


class RetainedKind(msgspec.Struct, frozen=True, kw_only=True):
    """What the store holds of one kind."""

    kind: Annotated[
        str,
        Meta(
            description="jobs: finished (completed or cancelled) jobs, kept as long as runs.",
            extra_json_schema={"enum": list(KINDS_SHOWN)},
        ),
    ]
    rows: Annotated[int, Meta(ge=0, le=ROW_COUNT_CAP)]
    rows_capped: Annotated[
        bool, Meta(description=f"rows is a lower bound: counting stops at {ROW_COUNT_CAP:,}.")
    ]
    oldest: Annotated[
        Instant | None,
        Meta(
            description="Where the oldest row's retention counts from (a run's or job's finish, "
            "a dead letter's creation, a message's visible time, an audit record's time); null "
            "when there is none."
        ),
    ]


class FileSizes(msgspec.Struct, frozen=True, kw_only=True):
    """Bytes in the data directory: the database with its WAL, the Raft journal, the
    snapshot."""

    database: Count
    journal: Count
    snapshot: Count


class DiskState(msgspec.Struct, frozen=True, kw_only=True):
    """The data directory's file system on this node: min_free_bytes is [storage] min_free in
    bytes (a percentage is taken of total_bytes); low when free_bytes is below it."""

    free_bytes: Count
    total_bytes: Count
    min_free_bytes: Count
    low: bool


class RetentionStatus(msgspec.Struct, frozen=True, kw_only=True):
    """This node's [retention], its store per kind, its data files and disk, and whether
    writes are accepted."""

    node_id: str
    retention: Annotated[Retention, Meta(description="This node's [retention].")]
    kinds: Annotated[
        list[RetainedKind],
        Meta(
            min_length=len(KINDS_SHOWN),
            max_length=len(KINDS_SHOWN),
            description="What the store holds, one entry per kind in this order: "
            f"{', '.join(KINDS_SHOWN)}.",
        ),
    ]
    last_prune: Annotated[
        Instant | None,
        Meta(
            description="The time of the last prune command applied (the leader proposes "
            "them, paced); null before the first."
        ),
    ]
    # These four are absent on a node without a storage guard (no data directory to watch).
    files: FileSizes | UnsetType = UNSET
    disk: DiskState | UnsetType = UNSET
    writes: (
        Annotated[
            Literal["accepted", "refused"],
            Meta(
                description="refused while this node is low on disk, or a majority of the nodes "
                "are: writes that add data answer 507 storage_low."
            ),
        ]
        | UnsetType
    ) = UNSET
    reason: (
        Annotated[str | None, Meta(description="Why writes are refused; null when accepted.")]
        | UnsetType
    ) = UNSET


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
