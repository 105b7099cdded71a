"""The built-in queue and dead-letter routes."""

from __future__ import annotations

from schedd.api import deadletters, queues
from schedd.api.operation import Answer, Operation
from schedd.api.operations.parameters import (
    ADMIN,
    CURSOR,
    DEADLETTER_FINGERPRINT,
    DEADLETTER_GROUP_BY,
    DEADLETTER_ID,
    LIMIT,
    QUEUE_NAME,
    TENANT,
    X_TENANT,
)
from schedd.wire.deadletters import (
    GROUPED,
    MAX_REDRIVE,
    DeadLetterList,
    DeadLetterView,
    ErrorGroups,
    RedriveBatch,
    RedriveQueued,
    RedriveResults,
)
from schedd.wire.queues import (
    Acked,
    AckRequest,
    Extended,
    ExtendRequest,
    LocalConsumers,
    Messages,
    Nacked,
    NackRequest,
    QueueList,
    ReceiveRequest,
)

SETTLES = {
    "ack": (queues.ack, AckRequest),
    "nack": (queues.nack, NackRequest),
    "extend": (queues.extend, ExtendRequest),
}


def _settle(verb: str, operation_id: str, summary: str, answer: type) -> Operation:
    """An ack, nack or extend: receipts in, how many matched out."""
    handler, body = SETTLES[verb]
    return Operation(
        method="POST",
        path=f"/v1/queues/{{name}}/{verb}",
        handler=handler,
        operation_id=operation_id,
        tag="queues",
        summary=summary,
        access=TENANT,
        parameters=(QUEUE_NAME,),
        body=body,
        answers={200: Answer("How many receipts matched a message still held.", body=answer)},
        errors=(413,),
    )


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/queues",
        handler=queues.list_queues,
        operation_id="listQueues",
        tag="queues",
        summary="The tenant's queues and their counts",
        access=TENANT,
        answers={
            200: Answer(
                "Every queue with messages or dead letters, or a consumer in the last 5 minutes.",
                body=QueueList,
            ),
        },
    ),
    Operation(
        method="GET",
        path=queues.LOCAL_CONSUMERS,
        handler=queues.local_consumers,
        operation_id="listLocalConsumers",
        tag="queues",
        summary="The consumers this node alone saw receiving (what GET /v1/queues asks peers)",
        access=ADMIN,
        parameters=(X_TENANT,),
        answers={
            200: Answer("This node's memory of the X-Tenant tenant.", body=LocalConsumers),
        },
        errors=(400, 404),
    ),
    Operation(
        method="POST",
        path="/v1/queues/{name}/receive",
        handler=queues.receive,
        operation_id="receiveMessages",
        tag="queues",
        summary="Receive messages (long poll)",
        access=TENANT,
        parameters=(QUEUE_NAME,),
        body=ReceiveRequest,
        answers={
            200: Answer(
                "Up to max messages, hidden for visibility_timeout; empty when none "
                "came within wait.",
                body=Messages,
            ),
        },
        errors=(413, 429),
    ),
    _settle("ack", "ackMessages", "Acknowledge messages: their runs succeeded", Acked),
    _settle(
        "nack", "nackMessages", "Fail messages: retried per the job's policy, then dead", Nacked
    ),
    _settle("extend", "extendMessages", "Extend messages' visibility timeout", Extended),
    Operation(
        method="GET",
        path="/v1/deadletters",
        handler=deadletters.list_deadletters,
        operation_id="listDeadLetters",
        tag="deadletters",
        summary="List dead letters, or group them by error",
        description="In id order. group_by=error answers the groups instead (the newest "
        f"{GROUPED:,} dead letters grouped by error fingerprint, the limit largest, no pages). "
        f"fingerprint=F keeps one group's: a request then examines at most {GROUPED:,} dead "
        "letters after the cursor, so a page may hold fewer than limit (even none); follow "
        "next_cursor until it is null.",
        access=TENANT,
        parameters=(DEADLETTER_GROUP_BY, DEADLETTER_FINGERPRINT, CURSOR, LIMIT),
        answers={
            200: Answer(
                "A page of dead letters (with group_by=error: the groups).",
                body=(DeadLetterList, ErrorGroups),
            ),
        },
    ),
    Operation(
        method="GET",
        path="/v1/deadletters/{id}",
        handler=deadletters.get_deadletter,
        operation_id="getDeadLetter",
        tag="deadletters",
        summary="Get a dead letter",
        access=TENANT,
        parameters=(DEADLETTER_ID,),
        answers={
            200: Answer("The dead letter.", body=DeadLetterView),
        },
    ),
    Operation(
        method="DELETE",
        path="/v1/deadletters/{id}",
        handler=deadletters.delete,
        operation_id="deleteDeadLetter",
        tag="deadletters",
        summary="Delete a dead letter",
        access=TENANT,
        parameters=(DEADLETTER_ID,),
        answers={
            204: Answer("Deleted."),
        },
    ),
    Operation(
        method="POST",
        path="/v1/deadletters:redrive",
        handler=deadletters.redrive_many,
        operation_id="redriveDeadLetters",
        tag="deadletters",
        summary=f"Give up to {MAX_REDRIVE} dead runs one more attempt each",
        description="One redrive_deadletter command per id, not atomic. Once the cluster refuses "
        "one, the ids not yet sent answer cluster_unavailable or storage_low; when none"
        " was redriven, the whole request answers 503 or 507.",
        access=TENANT,
        body=RedriveBatch,
        answers={
            200: Answer(
                "One result per id, in order: an unknown id (or another tenant's) "
                "answers deadletter_not_found in its place, the others are redriven.",
                body=RedriveResults,
            ),
        },
        errors=(413, 507),
    ),
    Operation(
        method="POST",
        path="/v1/deadletters/{id}/redrive",
        handler=deadletters.redrive,
        operation_id="redriveDeadLetter",
        tag="deadletters",
        summary="Give a dead run one more attempt",
        access=TENANT,
        parameters=(DEADLETTER_ID,),
        answers={
            202: Answer("One new attempt is queued.", body=RedriveQueued),
        },
        errors=(507,),
    ),
)
