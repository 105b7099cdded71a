"""The forecast's route (issue 33 §3)."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from schedd.api import forecast
from schedd.api.operation import Answer, Operation, Parameter
from schedd.api.operations.parameters import ANY_TOKEN
from schedd.wire.fields import InstantInput
from schedd.wire.forecast import Forecast

FORECAST_FROM = Parameter(
    component="ForecastFrom",
    name="from",
    where="query",
    kind=InstantInput,
    description="The span's start (default: now).",
)
FORECAST_TO = Parameter(
    component="ForecastTo",
    name="to",
    where="query",
    kind=InstantInput,
    description="The span's end, exclusive (default: a day after from).",
)
FORECAST_STEP = Parameter(
    component="ForecastStep",
    name="step",
    where="query",
    kind=Annotated[
        str,
        Meta(pattern=r"^[0-9]+(ms|s|m|h)$", extra_json_schema={"default": "1m"}),
    ],
    description="A step's length, from 1s to 1h; at most 10,000 steps from `from` to `to`.",
)

OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/forecast",
        handler=forecast.forecast,
        operation_id="getForecast",
        tag="jobs",
        summary="The runs due per step of a span ahead",
        description="Counted from each active job's next run and its schedule's own "
        "occurrences after it (time zones and DST, the window's offset, start_at/end_at, "
        "max_runs, the calendars a schedule excludes), and from the due index's pending "
        "triggers and paced backfills. A tenant's "
        "own jobs (the admin with X-Tenant: that tenant's); the admin without X-Tenant: the "
        "whole cluster and its 10 busiest tenants. Counting stops after about a second "
        "(`partial`: the steps are then a lower bound). A run already late is not ahead: see "
        "the backlog in /v1/stats.",
        access=ANY_TOKEN,
        parameters=(FORECAST_FROM, FORECAST_TO, FORECAST_STEP),
        answers={
            200: Answer("The steps, their peak and what was counted.", body=Forecast),
        },
    ),
)
