"""Tenant, cluster and node routes: tenants (admin), cluster and state, audit, preview, health."""

from __future__ import annotations

import asyncio
import base64
import hmac
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from schedd import metrics as node_metrics
from schedd.api.context import CONTEXT, ApiContext, token_hash
from schedd.api.http import (
    decode_cursor,
    int_cursor,
    json_response,
    page,
    principal,
    propose,
    query_limit,
    read_object,
    require,
)
from schedd.errors import InvalidRequest, TenantNotFound, Unauthorized
from schedd.guard.ssrf import BlockedTarget, host_matches
from schedd.guard.targets import TargetGuard
from schedd.jsonbody import JSONValue, as_integer
from schedd.schedule import occurrences, parse_schedule
from schedd.store import queries
from schedd.store.commands import LOG_LEVEL, CreateTenant, RotateTenant, UpdateTenant
from schedd.store.digest import state_digest
from schedd.timeformat import format_instant, parse_instant

DEFAULT_MAX_ACTIVE_JOBS = 1_000_000
DEFAULT_DISPATCH_RATE = 5_000
TENANT_BODY_LIMIT = 64 * 1024
MAX_PREVIEW = 1_000
routes = web.RouteTableDef()
NODE_METRICS = web.AppKey("node_metrics", CollectorRegistry)


async def _tenant_fields(
    body: dict[str, JSONValue],
    *,
    creating: bool,
    guard: TargetGuard,
    stored_hosts: list[str] | None = None,
) -> dict[str, Any]:
    """Validated tenant settings from a create or PATCH body (`stored_hosts`: the tenant's
    allowed_hosts now, which a PATCH that does not change them holds its alert_url to)."""
    require(body, {"name", "max_active_jobs", "dispatch_rate", "allowed_hosts", "alert_url"})
    fields: dict[str, Any] = {}
    if "name" in body or creating:
        name = body.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise InvalidRequest("name", "must be a non-empty string of at most 200 characters")
        fields["name"] = name
    for key, default in (
        ("max_active_jobs", DEFAULT_MAX_ACTIVE_JOBS),
        ("dispatch_rate", DEFAULT_DISPATCH_RATE),
    ):
        if key in body or creating:
            value = as_integer(body.get(key, default), 0, 10**12)
            if value is None:
                raise InvalidRequest(key, f"must be a non-negative integer, got {body[key]!r}")
            fields[key] = value
    if "allowed_hosts" in body or creating:
        hosts = body.get("allowed_hosts", [])
        if (
            not isinstance(hosts, list)
            or len(hosts) > 100
            or not all(isinstance(h, str) and 0 < len(h) <= 253 for h in hosts)
        ):
            raise InvalidRequest("allowed_hosts", "must be a list of at most 100 host patterns")
        fields["allowed_hosts"] = hosts
    if "alert_url" in body:
        url = body["alert_url"]
        if url is not None and (not isinstance(url, str) or not 0 < len(url) <= 2048):
            raise InvalidRequest("alert_url", "must be an http(s) URL or null")
        if url is not None:
            hosts = fields.get("allowed_hosts", stored_hosts or [])
            await _check_alert_url(url, hosts, guard)
        fields["alert_url"] = url
    return fields


async def _check_alert_url(url: str, allowed_hosts: list[str], guard: TargetGuard) -> None:
    """The alert webhook obeys the rules of the tenant's targets: SSRF (422), the tenant's
    allowed_hosts (400), DNS; every alert checks again before it is sent."""
    try:
        host = guard.parse(url).host
        if allowed_hosts and not host_matches(host, allowed_hosts):
            raise InvalidRequest(
                "alert_url", f"host {host!r} is not in the tenant's allowed_hosts {allowed_hosts}"
            )
        await guard.check(url)
    except BlockedTarget as exc:
        raise BlockedTarget(exc.reason, host=exc.host, field="alert_url") from None


def _credentials(tenant_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """New credentials for a tenant: (command body fields, the answer that shows them once).

    Only the token's hash enters the log and the store."""
    token = "sk_" + secrets.token_urlsafe(32)
    signing_secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    fields = {
        "tenant_id": tenant_id,
        "token_hash": token_hash(token),
        "signing_secret": signing_secret,
        "actor": "admin",
    }
    return fields, {"tenant_id": tenant_id, "token": token, "signing_secret": signing_secret}


@routes.post("/v1/tenants")
async def create_tenant(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    body = await read_object(request, limit_bytes=TENANT_BODY_LIMIT)
    fields = await _tenant_fields(body, creating=True, guard=ctx.guard)
    credentials, shown_once = _credentials("tnt_" + uuid.uuid4().hex[:16])
    await propose(ctx, CreateTenant.from_body(credentials | fields))
    return json_response(shown_once, status=201)


async def _tenant_json(ctx: ApiContext, tenant_id: str) -> dict[str, Any]:
    tenant = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    if tenant is None:
        raise TenantNotFound(tenant_id)
    return tenant.to_json()


@routes.get("/v1/tenants")
async def list_tenants(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    limit = query_limit(request)
    after = decode_cursor(request) or ""
    tenants = await ctx.reads.read(
        lambda conn: queries.list_tenants(conn, after=after, limit=limit)
    )
    items = [t.to_json() for t in tenants]
    return json_response(
        {"tenants": items, "next_cursor": page(items, limit, lambda t: t["tenant_id"])}
    )


@routes.get("/v1/tenants/{tenant_id}")
async def get_tenant(request: web.Request) -> web.Response:
    principal(request).require_admin()
    return json_response(await _tenant_json(request.app[CONTEXT], request.match_info["tenant_id"]))


@routes.patch("/v1/tenants/{tenant_id}")
async def update_tenant(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], request.match_info["tenant_id"]
    principal(request).require_admin()
    body = await read_object(request, limit_bytes=TENANT_BODY_LIMIT)
    stored = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    hosts = [] if stored is None else stored.allowed_hosts
    changes = await _tenant_fields(body, creating=False, guard=ctx.guard, stored_hosts=hosts)
    await propose(ctx, UpdateTenant(tenant_id=tenant_id, changes=changes, actor="admin"))
    return json_response(await _tenant_json(ctx, tenant_id))


@routes.post("/v1/tenants/{tenant_id}/rotate")
async def rotate_tenant(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], request.match_info["tenant_id"]
    principal(request).require_admin()
    credentials, shown_once = _credentials(tenant_id)
    # The old signing secret keeps signing callbacks (beside the new one) for the overlap.
    cmd = RotateTenant.from_body(credentials | {"overlap_ms": ctx.secret_overlap_ms})
    await propose(ctx, cmd)
    return json_response(shown_once)


@routes.get("/v1/cluster")
async def cluster(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    status = ctx.raft.status()
    registered = await ctx.reads.read(queries.list_nodes)
    leases = await ctx.reads.read(lambda conn: queries.partitions_by_node(conn, ctx.clock_ms()))
    names = {raft: node_id for node_id, _, raft in registered}
    nodes = [
        _node_json(status, node_id, api, raft) | {"partitions": leases.get(node_id, [])}
        for node_id, api, raft in registered
    ]
    if status["self"] not in names:  # not registered yet: show this node anyway
        nodes.append(_node_json(status, ctx.node_id, None, status["self"]))
    leader = status["leader"]
    members = ctx.raft.members()  # Raft addresses, as this node's journal has them
    return json_response({"leader": names.get(leader, leader), "members": members, "nodes": nodes})


def _node_json(status: dict[str, Any], node_id: str, api: str | None, raft: str) -> dict[str, Any]:
    is_self = raft == status["self"]
    return {
        "node_id": node_id,
        "api": api,
        "raft": raft,
        "role": "leader" if raft == status["leader"] else "follower",
        "healthy": is_self or bool(status["connected"].get(raft)),
        "partitions": [],
        "applied_index": status["applied_index"] if is_self else status["match_index"].get(raft),
    }


@routes.get("/v1/admin/state")
async def admin_state(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    status = ctx.raft.status()
    index, digest = await ctx.reads.read(state_digest)
    names = {raft: node_id for node_id, _, raft in await ctx.reads.read(queries.list_nodes)}
    return json_response(
        {
            "node_id": ctx.node_id,
            "role": status["role"],
            "leader": names.get(status["leader"], status["leader"]),
            "term": status["term"],
            "applied_index": index,
            "digest": digest,
        }
    )


@routes.get("/v1/audit")
async def audit(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id = None if who.is_admin and who.tenant_id is None else who.tenant()
    limit, after = query_limit(request), int_cursor(request) or 0
    records = await ctx.reads.read(
        lambda conn: queries.list_audit(conn, tenant_id, after=after, limit=limit)
    )
    return json_response(
        {"audit": records, "next_cursor": page(records, limit, lambda r: r["seq"])}
    )


@routes.post("/v1/schedules:preview")
async def preview(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    body = await read_object(request, limit_bytes=TENANT_BODY_LIMIT)
    require(body, {"schedule", "after", "count"})
    now = ctx.clock_ms()
    after = now if body.get("after") is None else parse_instant(body["after"], field="after")
    count = as_integer(body.get("count", 10), 1, MAX_PREVIEW)
    if count is None:
        raise InvalidRequest("count", f"must be an integer from 1 to {MAX_PREVIEW}")
    schedule = parse_schedule(body.get("schedule"), now_ms=min(now, after))
    runs = occurrences(schedule, after, 2**62, count)
    return json_response({"runs": [format_instant(ms) for ms in runs]})


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]  # now_ms, disk_low: peers read them (dispatch/clock.py)
    disk_low = ctx.storage is not None and ctx.storage.disk.problem() is not None
    return json_response(
        {
            "status": "ok",
            "node_id": ctx.node_id,
            "now_ms": ctx.clock_ms(),
            "disk_low": disk_low,
            "log_level": LOG_LEVEL,
        }
    )


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    problem = None if ctx.raft.is_ready() else "no leader, or catching up"
    problem = problem or ctx.raft.clock_problem()
    if problem is not None:
        body = {"status": "not ready", "node_id": ctx.node_id, "reason": problem}
        response = json_response(body, status=503)
        response.headers["Retry-After"] = "1"
        return response
    storage = None if ctx.storage is None else ctx.storage.problem()
    if storage is not None:  # still ready: dispatch, receives and acks go on
        return json_response(
            {"status": "ready", "node_id": ctx.node_id, "writes": "refused", "reason": storage}
        )
    return json_response({"status": "ready", "node_id": ctx.node_id})


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsAccess:
    """Who may read /metrics on one listener. The API port serves it to the admin token and
    `tokens` (the `[metrics] token`), or not at all when `[metrics] listen` is set; that
    listener serves it to `tokens`, or to anyone (`is_open`) on loopback without a token."""

    tokens: tuple[str, ...] = ()
    is_served: bool = True
    is_open: bool = False


METRICS_ACCESS = web.AppKey("metrics_access", MetricsAccess)


def _check_metrics_access(request: web.Request) -> None:
    access = request.app.get(METRICS_ACCESS) or MetricsAccess()
    if not access.is_served:
        raise web.HTTPNotFound(reason="/metrics is served on [metrics] listen")
    if access.is_open:
        return
    ctx = request.app.get(CONTEXT)
    tokens = [*access.tokens, *([] if ctx is None else [ctx.admin_token])]
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    given = presented.strip().encode("utf-8", "surrogateescape")
    if scheme.lower() != "bearer" or not any(
        hmac.compare_digest(given, token.encode()) for token in tokens
    ):
        raise Unauthorized("/metrics needs 'Authorization: Bearer <admin or metrics token>'")


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    _check_metrics_access(request)
    # The node's gauges read SQLite: off the event loop.
    body = await asyncio.to_thread(node_metrics.exposition, request.app.get(NODE_METRICS))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
