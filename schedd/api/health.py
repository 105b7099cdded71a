"""Health and metrics routes: /healthz (peers read its clock and log level), /readyz, and
/metrics with its own access rule (the admin or [metrics] token, never a tenant's)."""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from schedd import metrics as node_metrics
from schedd.api.context import CONTEXT
from schedd.api.http import (
    json_response,
)
from schedd.errors import Unauthorized
from schedd.store.commands import LOG_LEVEL
from schedd.wire.cluster import Health, Readiness

NODE_METRICS = web.AppKey("node_metrics", CollectorRegistry)


async def healthz(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]  # now_ms, disk_low: peers read them (dispatch/clock.py)
    disk_low = ctx.storage is not None and ctx.storage.disk.problem() is not None
    return json_response(
        Health(
            status="ok",
            node_id=ctx.node_id,
            now_ms=ctx.clock_ms(),
            disk_low=disk_low,
            log_level=LOG_LEVEL,
        )
    )


async def readyz(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    problem = None if ctx.raft.is_ready() else "no leader, or catching up"
    problem = problem or ctx.raft.clock_problem()
    cell: dict[str, Any] = {}
    if ctx.cells is not None:  # a cell serves once the directory gives it its range
        problem = problem or ctx.cells.not_serving_reason()
        directory = ctx.cells.directory
        revision = 0 if directory is None else directory.revision
        cell = {"cell": ctx.cells.cell, "directory_revision": revision}
    if problem is not None:
        body = Readiness(status="not ready", node_id=ctx.node_id, reason=problem, **cell)
        response = json_response(body, status=503)
        response.headers["Retry-After"] = "1"
        return response
    storage = None if ctx.storage is None else ctx.storage.problem()
    if storage is not None:  # still ready: dispatch, receives and acks go on
        return json_response(
            Readiness(status="ready", node_id=ctx.node_id, writes="refused", reason=storage, **cell)
        )
    return json_response(Readiness(status="ready", node_id=ctx.node_id, **cell))


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


async def metrics(request: web.Request) -> web.Response:
    _check_metrics_access(request)
    # The node's gauges read SQLite: off the event loop.
    body = await asyncio.to_thread(node_metrics.exposition, request.app.get(NODE_METRICS))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
