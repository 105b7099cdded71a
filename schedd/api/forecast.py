"""GET /v1/forecast: the runs due per step of a span ahead (schedd/forecast.py counts them,
store/forecast_reads.py reads the jobs within a time budget). A tenant's own; the admin
without X-Tenant gets the cluster's and its top tenants."""

from __future__ import annotations

from aiohttp import web

from schedd.api.context import CONTEXT
from schedd.api.http import json_response, principal
from schedd.forecast import Span, Tally, parse_span
from schedd.store.forecast_reads import read_forecast
from schedd.timeformat import format_instant
from schedd.wire.forecast import Forecast, ForecastStep, TenantForecast


async def forecast(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    if not who.is_admin:
        who.tenant()  # a tenant token always names its tenant
    span = parse_span(
        request.query.get("from"),
        request.query.get("to"),
        request.query.get("step"),
        now_ms=ctx.clock_ms(),
    )
    tenant_id, partitions = who.tenant_id, ctx.partitions
    tally = await ctx.reads.read(
        lambda conn: read_forecast(conn, span, tenant_id=tenant_id, partitions=partitions)
    )
    return json_response(forecast_view(tally))


def forecast_view(tally: Tally) -> Forecast:
    """The answer of a counted span."""
    span = tally.span
    tenants = None
    if tally.by_tenant:
        tenants = [
            TenantForecast(tenant_id=tenant, runs=total, peak=_step(span, *peak))
            for tenant, total, peak in tally.top_tenants()
        ]
    return Forecast(
        steps=[_step(span, index, runs) for index, runs in enumerate(tally.runs)],
        peak=_step(span, *tally.peak()),
        step_s=span.step_ms / 1000,
        jobs=tally.jobs,
        partial=tally.is_partial,
        tenants=tenants,
    )


def _step(span: Span, index: int, runs: int) -> ForecastStep:
    return ForecastStep(at=format_instant(span.step_at(index)), runs=runs)
