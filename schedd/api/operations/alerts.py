"""The route that lists a tenant's failure alerts (issue 31 §5)."""

from __future__ import annotations

from schedd.api import alerts
from schedd.api.operation import Answer, Operation
from schedd.api.operations.parameters import CURSOR, LIMIT, TENANT
from schedd.wire.alerts import AlertList

OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/alerts",
        handler=alerts.list_tenant_alerts,
        operation_id="listAlerts",
        tag="jobs",
        summary="The tenant's failure alerts, newest first",
        description="Every alert a job's `on_failure` queued: its body, where it is POSTed, "
        "and its delivery (attempts, sent_at, next_at, last_error). Kept as long as "
        "[retention] audit once sent or given up.",
        access=TENANT,
        parameters=(CURSOR, LIMIT),
        answers={200: Answer("A page of alerts.", body=AlertList)},
    ),
)
