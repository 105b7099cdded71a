"""Tenant routes (admin): create, list, show, update, rotate credentials (shown once)."""

from __future__ import annotations

import base64
import secrets
import uuid
from typing import Any

from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext, token_hash
from schedd.api.http import (
    decode_cursor,
    json_response,
    page,
    principal,
    propose,
    query_limit,
    read_object,
    require,
)
from schedd.errors import InvalidRequest, TenantNotFound
from schedd.guard.ssrf import BlockedTarget, host_matches
from schedd.guard.targets import TargetGuard
from schedd.jsonbody import JSONValue, as_integer
from schedd.store import queries
from schedd.store.commands import CreateTenant, RotateTenant, UpdateTenant

DEFAULT_MAX_ACTIVE_JOBS = 1_000_000
DEFAULT_DISPATCH_RATE = 5_000
TENANT_BODY_LIMIT = 64 * 1024

routes = web.RouteTableDef()


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
