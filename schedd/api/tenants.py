"""Tenant routes (admin): create, list, show, update, rotate credentials (shown once)."""

from __future__ import annotations

import base64
import secrets
import sqlite3
import uuid

import msgspec
from aiohttp import web
from msgspec import UNSET

from schedd.api.context import CONTEXT, ApiContext, token_hash
from schedd.api.http import (
    decode_cursor,
    json_response,
    page,
    principal,
    propose,
    query_limit,
    read_object,
)
from schedd.bodies import convert_body
from schedd.errors import InvalidRequest, TenantExists, TenantNotFound
from schedd.guard.ssrf import BlockedTarget, host_matches
from schedd.guard.targets import TargetGuard
from schedd.jsonbody import JSONObject
from schedd.store import failures, pauses, queries
from schedd.store.commands import CreateTenant, RotateTenant, UpdateTenant
from schedd.store.pauses import Scope
from schedd.wire.failures import OnFailure
from schedd.wire.failures import as_json as failure_policy_json
from schedd.wire.tenants import (
    TenantCreate,
    TenantCredentials,
    TenantList,
    TenantPatch,
    TenantView,
)

TENANT_BODY_LIMIT = 64 * 1024


async def _tenant_fields(
    settings: TenantCreate | TenantPatch, guard: TargetGuard, stored_hosts: list[str]
) -> JSONObject:
    """The settings a create or PATCH body names, its alert_url checked against the tenant's
    allowed_hosts (those it sets, else `stored_hosts`: a PATCH that does not change them holds
    its alert_url to the tenant's)."""
    if isinstance(settings.alert_url, str):
        hosts = settings.allowed_hosts
        await check_alert_url(settings.alert_url, stored_hosts if hosts is UNSET else hosts, guard)
    fields = {k: v for k, v in msgspec.structs.asdict(settings).items() if v is not UNSET}
    policy = fields.get("on_failure")  # a PATCH's: the tenant's default failure policy
    if isinstance(policy, OnFailure):
        if policy.alert_url is not None:
            hosts = settings.allowed_hosts
            allowed = stored_hosts if hosts is UNSET else hosts
            await check_alert_url(policy.alert_url, allowed, guard, "on_failure.alert_url")
        fields["on_failure"] = failure_policy_json(policy)
    return fields


async def check_alert_url(
    url: str, allowed_hosts: list[str], guard: TargetGuard, field: str = "alert_url"
) -> None:
    """An alert webhook obeys the rules of the tenant's targets: SSRF (422), the tenant's
    allowed_hosts (400), DNS; every alert checks again before it is sent."""
    try:
        host = guard.parse(url).host
        if allowed_hosts and not host_matches(host, allowed_hosts):
            raise InvalidRequest(
                field, f"host {host!r} is not in the tenant's allowed_hosts {allowed_hosts}"
            )
        await guard.check(url)
    except BlockedTarget as exc:
        raise BlockedTarget(exc.reason, host=exc.host, field=field) from None


def _credentials(
    tenant_id: str, given: TenantCreate | None = None
) -> tuple[dict[str, str], TenantCredentials]:
    """New credentials for a tenant, or those `given` (a cell adopting another's tenant):
    (command body fields, the answer that shows them once).

    Only the token's hash enters the log and the store."""
    token = "sk_" + secrets.token_urlsafe(32)
    signing_secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    if given is not None:
        assert isinstance(given.token, str) and isinstance(given.signing_secret, str)
        token, signing_secret = given.token, given.signing_secret
    fields = {
        "tenant_id": tenant_id,
        "token_hash": token_hash(token),
        "signing_secret": signing_secret,
        "actor": "admin",
    }
    shown = TenantCredentials(tenant_id=tenant_id, token=token, signing_secret=signing_secret)
    return fields, shown


CELL_CREDENTIALS = ("tenant_id", "token", "signing_secret")


async def create_tenant(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    body = convert_body(await read_object(request, limit_bytes=TENANT_BODY_LIMIT), TenantCreate)
    adopted = _adopted(body, is_cell=ctx.cells is not None)
    fields = await _tenant_fields(body, ctx.guard, stored_hosts=[])
    for name in CELL_CREDENTIALS:  # the token never enters the log: only its hash
        fields.pop(name, None)
    tenant_id = (
        body.tenant_id if isinstance(body.tenant_id, str) else "tnt_" + uuid.uuid4().hex[:16]
    )
    credentials, shown_once = _credentials(tenant_id, body if adopted else None)
    if adopted and await _adopted_already(ctx, body, credentials):
        return json_response(shown_once, status=200)
    await propose(ctx, CreateTenant.from_body({**credentials, **fields}))
    return json_response(shown_once, status=201)


async def _adopted_already(
    ctx: ApiContext, body: TenantCreate, credentials: dict[str, str]
) -> bool:
    """True when this cell has adopted the tenant already with the same name and credentials
    (a retry: answered 200); TenantExists when it has the tenant id with anything else."""
    tenant_id, hashed = credentials["tenant_id"], credentials["token_hash"]

    def read(conn: sqlite3.Connection) -> tuple[queries.Tenant | None, bool]:
        by_token = queries.tenant_by_token_hash(conn, hashed)
        is_token = by_token is not None and by_token.tenant_id == tenant_id
        return queries.get_tenant(conn, tenant_id), is_token

    stored, is_same_token = await ctx.reads.read(read)
    if stored is None:
        return False
    if is_same_token and (stored.name, stored.signing_secret) == (
        body.name,
        credentials["signing_secret"],
    ):
        return True
    raise TenantExists(
        f"tenant {tenant_id} exists already in this cell with another name, token or signing "
        "secret (a retry of the same adoption answers 200)"
    )


def _adopted(body: TenantCreate, *, is_cell: bool) -> bool:
    """True when the body carries another cell's tenant credentials (all three, on a cell)."""
    given = [name for name in CELL_CREDENTIALS if getattr(body, name) is not UNSET]
    if not given:
        return False
    if not is_cell:
        raise InvalidRequest(given[0], "is for a cell ([cells] etcd): leave it out")
    if len(given) != len(CELL_CREDENTIALS):
        missing = next(name for name in CELL_CREDENTIALS if name not in given)
        raise InvalidRequest(missing, "is required with tenant_id, token and signing_secret")
    return True


async def tenant_json(ctx: ApiContext, tenant_id: str) -> TenantView:
    def read(conn: sqlite3.Connection) -> TenantView | None:
        tenant = queries.get_tenant(conn, tenant_id)
        if tenant is None:
            return None
        pause = pauses.find(conn, Scope.TENANT, tenant_id, "")
        return tenant.view(pause, failures.default_of(conn, tenant_id))

    view = await ctx.reads.read(read)
    if view is None:
        raise TenantNotFound(tenant_id)
    return view


async def list_tenants(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    limit = query_limit(request)
    after = decode_cursor(request) or ""

    def read(conn: sqlite3.Connection) -> list[TenantView]:
        paused = pauses.tenants_paused(conn)
        return [
            t.view(paused.get(t.tenant_id), failures.default_of(conn, t.tenant_id))
            for t in queries.list_tenants(conn, after=after, limit=limit)
        ]

    items = await ctx.reads.read(read)
    return json_response(
        TenantList(tenants=items, next_cursor=page(items, limit, lambda t: t.tenant_id))
    )


async def get_tenant(request: web.Request) -> web.Response:
    principal(request).require_admin()
    return json_response(await tenant_json(request.app[CONTEXT], request.match_info["tenant_id"]))


async def update_tenant(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], request.match_info["tenant_id"]
    principal(request).require_admin()
    body = convert_body(await read_object(request, limit_bytes=TENANT_BODY_LIMIT), TenantPatch)
    stored = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    hosts = [] if stored is None else stored.allowed_hosts
    changes = await _tenant_fields(body, ctx.guard, stored_hosts=hosts)
    await propose(ctx, UpdateTenant(tenant_id=tenant_id, changes=changes, actor="admin"))
    return json_response(await tenant_json(ctx, tenant_id))


async def rotate_tenant(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], request.match_info["tenant_id"]
    principal(request).require_admin()
    credentials, shown_once = _credentials(tenant_id)
    # The old signing secret keeps signing callbacks (beside the new one) for the overlap.
    cmd = RotateTenant.from_body({**credentials, "overlap_ms": ctx.secret_overlap_ms})
    await propose(ctx, cmd)
    return json_response(shown_once)
