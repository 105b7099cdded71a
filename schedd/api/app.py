"""Build the aiohttp application: middlewares, routes, body limits."""

from __future__ import annotations

from aiohttp import web

from schedd.api import admin, deadletters, jobs, queues
from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import auth_middleware, errors_middleware


def build_app(ctx: ApiContext) -> web.Application:
    """The API of one node; `ctx` carries everything handlers share."""
    app = web.Application(
        middlewares=[errors_middleware, auth_middleware],
        client_max_size=jobs.BATCH_BODY_LIMIT,
    )
    app[CONTEXT] = ctx
    app.add_routes(jobs.routes)
    app.add_routes(admin.routes)
    app.add_routes(queues.routes)
    app.add_routes(deadletters.routes)
    return app
