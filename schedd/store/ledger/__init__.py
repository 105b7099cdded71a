"""The delivery ledger: the one place that writes delivery state (runs, queue messages, outbox
rows, attempts, dead letters, and the batches of queue runs: `batches.py`) for the claim, the
queue, HTTP outcomes, redrive and retention.

Functions take the apply transaction and typed rows (`rows.py`); they decide nothing (no clock,
no policy: the caller passes the times `retry.retry_delay_ms` chose) and keep the statements,
their order and their edge cases as replicas' digests expect. Target kinds: "queue" is pulled by
consumers from `messages`; every other kind (http, and the brokers to come) is an `outbox` row
pushed by that kind's node-side sender (docs/delivery.md, "Adding a target kind").
The apply handlers (`store/apply/` dispatch, queue, deadletters, delivery; retention through
`queue.expire_message`) write delivery state only through these functions;
tests/unit/test_store_ledger_paths.py pins the rows each delivery path leaves.
"""

from __future__ import annotations

from schedd.store.ledger.deliveries import (
    JobDelivery,
    bury,
    claimed_delivery,
    enqueue,
    extend,
    hand_out,
    job_delivery,
    queue_name,
    queue_target,
    remove,
    reported_rows,
    schedule_retry,
    unbury,
)
from schedd.store.ledger.rows import (
    KEEP,
    PULLED_KINDS,
    Attempt,
    DeadLetter,
    Delivery,
    Keep,
    NewRun,
    OutboxDelivery,
    OutboxRow,
    QueueDelivery,
    Reported,
    RunChange,
)
from schedd.store.ledger.runs import (
    finish_attempts,
    mark_runs,
    open_runs,
    record_attempts,
    set_runs,
    start_attempts,
)

__all__ = [
    "KEEP",
    "PULLED_KINDS",
    "Attempt",
    "DeadLetter",
    "Delivery",
    "JobDelivery",
    "Keep",
    "NewRun",
    "OutboxDelivery",
    "OutboxRow",
    "QueueDelivery",
    "Reported",
    "RunChange",
    "bury",
    "claimed_delivery",
    "enqueue",
    "extend",
    "finish_attempts",
    "hand_out",
    "job_delivery",
    "mark_runs",
    "open_runs",
    "queue_name",
    "queue_target",
    "record_attempts",
    "remove",
    "reported_rows",
    "schedule_retry",
    "set_runs",
    "start_attempts",
    "unbury",
]
