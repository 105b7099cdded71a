"""GET /v1/forecast's answer: the runs due per step of a span, its peak, and (the admin's
cluster-wide view) the tenants with the most runs."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from schedd.wire.fields import Count, Instant


class ForecastStep(msgspec.Struct, frozen=True, kw_only=True):
    """One step: the runs due to fire from `at` until the next step."""

    at: Annotated[Instant, Meta(description="The step's start.")]
    runs: Count


class TenantForecast(msgspec.Struct, frozen=True, kw_only=True):
    """One tenant's share of a cluster-wide forecast."""

    tenant_id: str
    runs: Annotated[Count, Meta(description="Its runs in the whole span.")]
    peak: ForecastStep


class Forecast(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The runs due per step, from each active job's next run and its schedule's occurrences
    after it (window offsets, start/end, max_runs, excluded calendars), pending triggers and
    paced backfills."""

    steps: list[ForecastStep]
    peak: Annotated[ForecastStep, Meta(description="The busiest step (the earliest of equals).")]
    step_s: Annotated[float, Meta(description="The steps' length in seconds.")]
    jobs: Annotated[Count, Meta(description="Active jobs counted.")]
    partial: Annotated[
        bool,
        Meta(
            description="True when the forecast stopped at its time budget before every "
            "active job was counted (or a job had more runs in the span than one forecast "
            "expands): the steps are then a lower bound."
        ),
    ]
    tenants: Annotated[
        list[TenantForecast] | None,
        Meta(
            description="The admin without X-Tenant only: the 10 tenants with the most runs, "
            "most first."
        ),
    ] = None
