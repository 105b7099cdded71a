"""The API's route table: every operation, the app registers and tools/gen_openapi.py
documents, in the document's order."""

from __future__ import annotations

from schedd.api.operation import Operation
from schedd.api.operations import alerts, cluster, forecast, jobs, pauses, queues, tenants

OPERATIONS: tuple[Operation, ...] = (
    *jobs.OPERATIONS,
    *alerts.OPERATIONS,
    *forecast.OPERATIONS,
    *queues.OPERATIONS,
    *tenants.OPERATIONS,
    *pauses.OPERATIONS,
    *cluster.OPERATIONS,
)
