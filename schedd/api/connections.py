"""Connection routes: a tenant's named broker connections (create, list, show, delete, test), and
the check of jobs' broker targets against them.

A connection's URL carries credentials: it is sealed before it is proposed and never answered,
logged or put in an error message again. Only `test` opens it, to hand it to the node's probe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Annotated, ClassVar
from urllib.parse import unquote

from aiohttp import web
from msgspec import Meta

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import check_level, json_response, principal, propose, read_object
from schedd.bodies import Body, convert_body
from schedd.errors import ClusterUnavailable, ConnectionNotFound, InvalidRequest, SchedError
from schedd.guard.connections import MAX_URL_CHARS, parse_connection_url, pin_addresses
from schedd.guard.dns import lookups_for
from schedd.model import BrokerConnection, BrokerTarget, Target
from schedd.store import connections as reads
from schedd.store import queries
from schedd.store.commands import BROKER_TARGET_LEVEL, CreateConnection, DeleteConnection
from schedd.targets import CONNECTION_NAME, CONNECTION_SCHEMES, kind_of
from schedd.wire.tenants import MAX_DETAIL_CHARS, ConnectionList, ConnectionTest

BODY_LIMIT = 8 * 1024  # a name and a URL of at most 2,048 characters


class NoBrokerProbe(ClusterUnavailable):
    """This node was started without a broker probe (POST /v1/connections/{name}/test)."""

    code = "no_broker_probe"


NAME_MESSAGE = "must match [A-Za-z0-9_.-]{1,64}"


class ConnectionInput(Body):
    """A named broker connection of the tenant: its URL is checked (scheme, host, port, the
    SSRF guard), sealed and never answered or repeated in an error message."""

    name: Annotated[str, Meta(pattern=f"^{CONNECTION_NAME.pattern}$")]
    url: Annotated[
        str,
        Meta(
            max_length=MAX_URL_CHARS,
            pattern=r"^[A-Za-z]+://[\x21-\x7e]+$",
            description=f"A broker URL ({'|'.join(CONNECTION_SCHEMES)}), credentials included: "
            "they are sealed at rest with the payload keys (when configured) and never shown "
            "again. A host and a port 1-65535 (default by scheme). The host's addresses pass "
            "the SSRF guard (422 blocked_target) and are pinned: the deliverers connect only to "
            "them. A host that does not resolve within 2 s is 422 unresolved_host.",
            examples=["redis://user:password@redis.acme.example:6379/0"],
        ),
    ]

    field_messages: ClassVar[Mapping[str, str]] = {
        "name": NAME_MESSAGE,
        "url": f"must be a URL of 1-{MAX_URL_CHARS} printable ASCII characters without spaces "
        "(percent-encode), like redis://host:6379",
    }


def _name(value: str) -> str:
    """`value` if it is a connection's name (a path's: a body's is checked by its struct)."""
    if not CONNECTION_NAME.fullmatch(value):
        raise InvalidRequest("name", f"{NAME_MESSAGE}, got {value[:80]!r}")
    return value


def _addressed(request: web.Request) -> tuple[ApiContext, str, str]:
    """(context, the caller's tenant, the connection's name) of a /v1/connections/{name} call."""
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    return ctx, tenant_id, _name(request.match_info["name"])


async def create_connection(request: web.Request) -> web.Response:
    """Check the URL (scheme, host, port; the SSRF guard on every address the host resolves
    to), pin those addresses, seal the URL and propose it. 201 without the URL."""
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id = who.tenant()
    body = convert_body(await read_object(request, limit_bytes=BODY_LIMIT), ConnectionInput)
    name, url = body.name, body.url
    parsed = parse_connection_url(url)
    check_level(ctx.storage, CreateConnection.LEVEL)  # before any lookup
    tenant = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    hosts = tenant.allowed_hosts if tenant is not None else []
    with lookups_for(tenant_id):
        addresses = await pin_addresses(ctx.guard, parsed, hosts)
    cmd = CreateConnection(
        tenant_id=tenant_id,
        name=name,
        kind=parsed.kind,
        url=str(ctx.payload_keys.seal(url)),
        host=parsed.display,
        addresses=addresses,
        actor=who.actor,
    )
    made = await propose(ctx, cmd)
    shown = reads.ConnectionInfo(
        name=made.name, kind=made.kind, host=made.host, created_at_ms=made.created_at_ms
    )
    return json_response(shown.view(), status=201)


async def list_connections(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    found = await ctx.reads.read(lambda conn: reads.list_connections(conn, tenant_id))
    return json_response(ConnectionList(connections=[c.view() for c in found]))


async def get_connection(request: web.Request) -> web.Response:
    ctx, tenant_id, name = _addressed(request)
    found = await ctx.reads.read(lambda conn: reads.get_connection(conn, tenant_id, name))
    if found is None:
        raise ConnectionNotFound(name)
    return json_response(found.view())


async def delete_connection(request: web.Request) -> web.Response:
    """204; 409 while a live job uses it (apply decides, in log order); 404 if there is none."""
    ctx, tenant_id, name = _addressed(request)
    actor = principal(request).actor
    await propose(ctx, DeleteConnection(tenant_id=tenant_id, name=name, actor=actor))
    return web.Response(status=204)


async def test_connection(request: web.Request) -> web.Response:
    """Connect as a deliverer would (the node's probe: the guard's check at connect, with the
    tenant's allowed_hosts as they are now), within the request timeout. A
    connection this node does not know yet may have been made through another node a moment
    ago (the usual next step after a create): it catches up with the leader and looks again."""
    ctx, tenant_id, name = _addressed(request)

    def lookup() -> Awaitable[BrokerConnection | None]:
        return ctx.reads.read(
            lambda conn: reads.broker_connection(conn, ctx.payload_keys, tenant_id, name)
        )

    found = await lookup()
    if found is None:
        await ctx.catch_up(request.remote)
        found = await lookup()
    if found is None:
        raise ConnectionNotFound(name)
    if ctx.broker_probe is None:
        raise NoBrokerProbe("no broker probe on this node")
    tenant = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    hosts = tuple(tenant.allowed_hosts) if tenant is not None else ()
    try:
        with ctx.connection_tests.hold(tenant_id):  # 429 past CONNECTION_TESTS_PER_TENANT
            async with asyncio.timeout(ctx.request_timeout_s):
                is_ok, detail = await ctx.broker_probe(found, hosts)
    except TimeoutError:
        is_ok, detail = False, f"no answer within {ctx.request_timeout_s:g}s"
    return json_response(ConnectionTest(ok=bool(is_ok), detail=scrubbed(str(detail), found)))


def scrubbed(detail: str, connection: BrokerConnection) -> str:
    """A probe's detail as the tenant sees it: the URL and its credentials cut out, whatever
    the broker's client library put in its message."""
    userinfo, has_userinfo, _ = connection.url.partition("://")[2].rpartition("@")
    secrets = [connection.url]
    if has_userinfo:
        user, _, password = userinfo.partition(":")
        secrets += [userinfo, password, user, unquote(password), unquote(user)]
    for secret in sorted({s for s in secrets if len(s) >= 3}, key=len, reverse=True):
        detail = detail.replace(secret, "***")
    return detail[:MAX_DETAIL_CHARS]


async def connection_verdicts(
    ctx: ApiContext, tenant_id: str, targets: list[Target], address: str | None = None
) -> list[SchedError | None]:
    """Per target: a broker target must name a connection of the tenant of its kind, and
    every node must apply level-3 commands; None for the others. Apply checks the
    connection again in log order; this answers the common case before anything is proposed.

    A connection this node lacks (or knows as another kind) may have been made through another
    node a moment ago: the node catches up with the leader (`ApiContext.catch_up`, as for an
    unknown token; `address` is the client's) and looks again before it refuses."""
    wanted = [
        (t.connection, kind_of(t).connection) if isinstance(t, BrokerTarget) else None
        for t in targets
    ]
    if not any(wanted):
        return [None] * len(targets)
    try:
        check_level(ctx.storage, BROKER_TARGET_LEVEL)
    except ClusterUnavailable as exc:
        return [None if w is None else exc for w in wanted]
    names = {w[0] for w in wanted if w is not None}
    kinds = await ctx.reads.read(lambda conn: reads.connection_kinds(conn, tenant_id, names))
    problems = _connection_problems(wanted, kinds)
    if any(problems):
        await ctx.catch_up(address)
        kinds = await ctx.reads.read(lambda conn: reads.connection_kinds(conn, tenant_id, names))
        problems = _connection_problems(wanted, kinds)
    return [None if p is None else InvalidRequest("target.connection", p) for p in problems]


def _connection_problems(
    wanted: list[tuple[str, str] | None], kinds: dict[str, str]
) -> list[str | None]:
    return [
        None if w is None else reads.connection_problem(w[0], w[1], kinds.get(w[0])) for w in wanted
    ]
