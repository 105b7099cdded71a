"""Build the aiohttp application: middlewares, routes, body limits."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CollectorRegistry

from schedd.api import health, jobs, stats
from schedd.api.cells import cells_middleware
from schedd.api.context import CONTEXT, ApiContext
from schedd.api.creates import CREATE_GROUPS, CreateGroups
from schedd.api.http import Handler, auth_middleware, errors_middleware, metrics_middleware
from schedd.api.operation import register
from schedd.api.operations import OPERATIONS


@dataclass(frozen=True, slots=True)
class Beside:
    """Routes served on the API's port without its token: the web console's static files,
    mounted by node.py (the api imports nothing of the console). `middleware` wraps every
    request before the API's own; `serves` tells the requests the router matched to `routes`."""

    routes: web.RouteTableDef
    middleware: Middleware
    serves: Callable[[web.Request], bool]


def build_app(
    ctx: ApiContext,
    *,
    node_metrics: CollectorRegistry | None = None,
    metrics_access: health.MetricsAccess | None = None,
    beside: Sequence[Beside] = (),
) -> web.Application:
    """The API of one node; `ctx` carries everything handlers share, `node_metrics` the
    node's scrape-time gauges for /metrics, `metrics_access` who may read them here, `beside`
    what else the port serves."""

    @web.middleware
    async def auth_unless_beside(request: web.Request, handler: Handler) -> web.StreamResponse:
        """The API's bearer-token check, except for the routes served beside it (the console's
        pages need no token to load; what they show comes from the API with the user's)."""
        if any(part.serves(request) for part in beside):
            return await handler(request)
        return await auth_middleware(request, handler)

    app = web.Application(
        middlewares=[
            metrics_middleware,
            *(part.middleware for part in beside),
            errors_middleware,
            auth_unless_beside,
            cells_middleware,
        ],
        client_max_size=jobs.BATCH_BODY_LIMIT,
    )
    app[CONTEXT] = ctx
    app[CREATE_GROUPS] = CreateGroups()
    if node_metrics is not None:
        app[health.NODE_METRICS] = node_metrics
    if metrics_access is not None:
        app[health.METRICS_ACCESS] = metrics_access
    register(app, OPERATIONS)
    app[stats.STATS] = stats.StatsRing()
    if ctx is not None:  # None: a route listing (tools/gen_openapi.py), never started
        app.cleanup_ctx.append(stats.sampling)
        app.on_cleanup.append(_close_context)
    for part in beside:
        app.add_routes(part.routes)
    return app


async def _close_context(app: web.Application) -> None:
    await app[CONTEXT].close()


async def start_metrics_site(
    node_metrics: CollectorRegistry,
    access: health.MetricsAccess,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None = None,
) -> web.AppRunner:
    """Serve GET /metrics alone on its own address (`[metrics] listen`), over HTTPS when the
    API has a certificate (its token must not cross the network in clear); cleanup() stops it."""
    app = web.Application(middlewares=[errors_middleware])
    app[health.NODE_METRICS] = node_metrics
    app[health.METRICS_ACCESS] = access
    app.router.add_get("/metrics", health.metrics)
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=15.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
    except BaseException:  # the address is taken: nothing of this runner outlives the error
        await runner.cleanup()
        raise
    return runner
