"""The routes that pause and resume a queue or a tenant (a job's are with the job routes)."""

from __future__ import annotations

from schedd.api import pauses
from schedd.api.operation import Answer, Operation
from schedd.api.operations.parameters import ADMIN, QUEUE_NAME, TENANT, TENANT_ID
from schedd.wire.pauses import PauseRequest, QueuePause
from schedd.wire.tenants import TenantView

OPERATIONS = (
    Operation(
        method="POST",
        path="/v1/queues/{name}/pause",
        handler=pauses.pause_queue,
        operation_id="pauseQueue",
        tag="queues",
        summary="Pause a queue's receives",
        description="While paused, receives on the queue hand out nothing (long polls wait); "
        "runs are still claimed into it. The body is optional: the reason is kept and audited. "
        "A queue can be paused before its first message.",
        access=TENANT,
        parameters=(QUEUE_NAME,),
        body=PauseRequest,
        body_required=False,
        answers={200: Answer("The queue's pause.", body=QueuePause)},
        errors=(400, 413, 422, 503),
    ),
    Operation(
        method="POST",
        path="/v1/queues/{name}/resume",
        handler=pauses.resume_queue,
        operation_id="resumeQueue",
        tag="queues",
        summary="Resume a paused queue",
        description="Its messages are receivable at once (waiting long polls wake).",
        access=TENANT,
        parameters=(QUEUE_NAME,),
        answers={200: Answer("The queue, no longer paused.", body=QueuePause)},
        errors=(503,),
    ),
    Operation(
        method="POST",
        path="/v1/tenants/{tenant_id}/pause",
        handler=pauses.pause_tenant,
        operation_id="pauseTenant",
        tag="tenants",
        summary="Pause every run of a tenant",
        description="No run of the tenant is claimed while it is paused (its due runs wait); "
        "its API still works. The body is optional: the reason is kept and audited.",
        access=ADMIN,
        parameters=(TENANT_ID,),
        body=PauseRequest,
        body_required=False,
        answers={200: Answer("The tenant, paused.", body=TenantView)},
        errors=(400, 404, 413, 422, 503),
    ),
    Operation(
        method="POST",
        path="/v1/tenants/{tenant_id}/resume",
        handler=pauses.resume_tenant,
        operation_id="resumeTenant",
        tag="tenants",
        summary="Resume a paused tenant",
        description="Its runs are claimed again; each job's misfire policy decides on the runs "
        "it missed (as after an outage), under the tenant's dispatch rate.",
        access=ADMIN,
        parameters=(TENANT_ID,),
        answers={200: Answer("The tenant, no longer paused.", body=TenantView)},
        errors=(404, 503),
    ),
)
