"""The answers of the tenant, connection and retention routes."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, UnsetType

from schedd.targets import CONNECTION_NAME, CONNECTION_SCHEMES
from schedd.wire.fields import Count, Duration, Instant, NextCursor, ref

MAX_DETAIL_CHARS = 512  # a connection test's detail
CONNECTION_KINDS = sorted(set(CONNECTION_SCHEMES.values()))


class OwnRetention(msgspec.Struct, frozen=True, kw_only=True):
    """A tenant's own retention: only the kinds it set (an empty object when none). It only
    shortens the node's: a longer value is kept but has no effect."""

    runs: Duration | UnsetType = UNSET
    deadletters: Duration | UnsetType = UNSET
    messages: Duration | UnsetType = UNSET


class Retention(msgspec.Struct, frozen=True, kw_only=True):
    """How long finished data is kept, per kind (runs: finished runs with their attempts, and
    finished (completed or cancelled) jobs, counted from when they finished; audit: audit
    records, from when they were written; deadletters: dead letters, from when the run died;
    messages: queue messages nobody received for this long: they become dead letters (their
    runs dead), never vanish unseen)."""

    runs: Duration
    audit: Duration
    deadletters: Duration
    messages: Duration


class TenantView(msgspec.Struct, frozen=True, kw_only=True):
    """A tenant (never its token or signing secret)."""

    tenant_id: str
    name: str
    max_active_jobs: int
    dispatch_rate: int
    allowed_hosts: list[str]
    alert_url: str | None
    active_jobs: Count
    retention: Annotated[dict[str, str], Meta(extra_json_schema=ref(OwnRetention))]
    created_at: Instant
    updated_at: Instant


class TenantList(msgspec.Struct, frozen=True, kw_only=True):
    """A page of tenants."""

    tenants: list[TenantView]
    next_cursor: NextCursor


class TenantCredentials(msgspec.Struct, frozen=True, kw_only=True):
    """Shown only in this answer: the store keeps the token's hash."""

    tenant_id: str
    token: Annotated[str, Meta(description="The tenant's bearer token.")]
    signing_secret: Annotated[
        str, Meta(pattern="^whsec_", description="Signs callbacks (Standard Webhooks).")
    ]


class TenantRetention(msgspec.Struct, frozen=True, kw_only=True):
    """How long the tenant's finished data is kept."""

    tenant_id: str
    retention: Annotated[
        Retention,
        Meta(description="What applies to the tenant: the node's, shortened by its own."),
    ]
    own: OwnRetention
    node: Annotated[
        Retention,
        Meta(
            description="The answering node's [retention] (the leader's is the one that "
            "prunes: give every node the same)."
        ),
    ]


class ConnectionView(msgspec.Struct, frozen=True, kw_only=True):
    """A tenant's named broker connection, never its URL."""

    name: Annotated[str, Meta(pattern=f"^{CONNECTION_NAME.pattern}$")]
    kind: Annotated[str, Meta(extra_json_schema={"enum": CONNECTION_KINDS})]
    host: Annotated[str, Meta(description="host:port of the URL, never its credentials.")]
    created_at: Instant


class ConnectionList(msgspec.Struct, frozen=True, kw_only=True):
    """Every connection, by name."""

    connections: list[ConnectionView]


class ConnectionTest(msgspec.Struct, frozen=True, kw_only=True):
    """Whether a connection test connected; a detail without secrets."""

    ok: bool
    detail: Annotated[str, Meta(max_length=MAX_DETAIL_CHARS)]
