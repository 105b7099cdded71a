"""The bodies of creating and changing a tenant, and the answers of the tenant, connection and
retention routes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

import msgspec
from msgspec import UNSET, Meta, UnsetType

from schedd.bodies import Body
from schedd.targets import CONNECTION_NAME, CONNECTION_SCHEMES
from schedd.wire.failures import OnFailure, OnFailureView
from schedd.wire.fields import Count, Duration, Instant, NextCursor, ref

MAX_DETAIL_CHARS = 512  # a connection test's detail
CONNECTION_KINDS = sorted(set(CONNECTION_SCHEMES.values()))
DEFAULT_MAX_ACTIVE_JOBS = 1_000_000
DEFAULT_DISPATCH_RATE = 5_000
MAX_LIMIT = 10**12


Name = Annotated[str, Meta(min_length=1, max_length=200, pattern=r"\S")]
Limit = Annotated[int, Meta(ge=0, le=MAX_LIMIT)]
DispatchRate = Annotated[Limit, Meta(description="Runs per second on each node; 0 = no limit.")]
AllowedHosts = Annotated[
    list[Annotated[str, Meta(min_length=1, max_length=253)]],
    Meta(
        max_length=100,
        description="Host patterns (api.x or *.x) HTTP targets must match; empty = any.",
    ),
]
# The scheme and host are the SSRF guard's to refuse (422, `_check_alert_url`): the pattern is
# published, not checked here, so that a refused URL keeps the guard's status and reason.
AlertUrl = Annotated[
    Annotated[
        str,
        Meta(
            min_length=1,
            max_length=2048,
            extra_json_schema={"pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]"},
        ),
    ]
    | None,
    Meta(description="Where run.dead alerts are POSTed (signed); checked by the SSRF guard (422)."),
]
TENANT_MESSAGES = {
    "name": "must be a non-empty string of at most 200 characters",
    "max_active_jobs": f"must be a non-negative integer, at most {MAX_LIMIT:,}",
    "dispatch_rate": f"must be a non-negative integer, at most {MAX_LIMIT:,}",
    "allowed_hosts": "must be a list of at most 100 host patterns",
    "alert_url": "must be an http(s) URL or null",
}


class TenantCreate(Body):
    name: Name
    max_active_jobs: Limit = DEFAULT_MAX_ACTIVE_JOBS
    dispatch_rate: DispatchRate = DEFAULT_DISPATCH_RATE
    allowed_hosts: AllowedHosts = msgspec.field(default_factory=list)
    alert_url: AlertUrl | UnsetType = UNSET
    # Cells only (docs/scaling.md §4): the same tenant in another cell, its credentials as
    # the first cell's create answered them. All three or none.
    tenant_id: (
        Annotated[
            str,
            Meta(
                pattern=r"^tnt_[0-9a-f]{16}$",
                description="Cells only, with token and signing_secret: create in this cell "
                "the tenant another cell created (its answer's three values).",
            ),
        ]
        | UnsetType
    ) = UNSET
    token: Annotated[str, Meta(pattern=r"^sk_[A-Za-z0-9_-]{43}$")] | UnsetType = UNSET
    signing_secret: Annotated[str, Meta(pattern=r"^whsec_[A-Za-z0-9+/]{43}=$")] | UnsetType = UNSET

    field_messages: ClassVar[Mapping[str, str]] = TENANT_MESSAGES


class TenantPatch(Body):
    """Changes only the fields it names."""

    name: Name | UnsetType = UNSET
    max_active_jobs: Limit | UnsetType = UNSET
    dispatch_rate: DispatchRate | UnsetType = UNSET
    allowed_hosts: AllowedHosts | UnsetType = UNSET
    alert_url: AlertUrl | UnsetType = UNSET
    on_failure: (
        Annotated[
            OnFailure | None,
            Meta(
                description="The default failure policy of the tenant's jobs that have none of "
                "their own; null removes it."
            ),
        ]
        | UnsetType
    ) = UNSET

    field_messages: ClassVar[Mapping[str, str]] = TENANT_MESSAGES


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
    on_failure: Annotated[
        OnFailureView | None, Meta(description="Its jobs' default failure policy.")
    ] = None
    paused: Annotated[bool, Meta(description="None of its runs is claimed while paused.")] = False
    paused_reason: str | None = None
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
