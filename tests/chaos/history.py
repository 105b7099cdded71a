"""The recorded history of a round: client operations, deliveries seen by the consumers and the
receiver, and the faults the nemesis injected. Thread-safe appends; plain JSON out."""

from __future__ import annotations

import itertools
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.chaos.client import Outcome, Reply


@dataclass(slots=True)
class Op:
    """One client operation with its interval and what it meant to do and got back."""

    op_id: int
    process: str  # the worker that made it
    kind: str  # create, batch, cancel, reschedule, receive, ack, nack
    tenant: str
    node: str
    start_ms: int
    end_ms: int
    outcome: Outcome
    status: int | None
    request: dict[str, Any] = field(default_factory=dict)
    response: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class QueueDelivery:
    """A message a consumer received (the receive answered 200)."""

    at_ms: int
    tenant: str
    queue: str
    node: str
    job_id: str
    scheduled_at: str
    attempt: int
    idempotency_key: str


@dataclass(slots=True)
class FaultEvent:
    """One injected fault: what, on which node (by id and role), when it began and healed."""

    kind: str
    target: str
    role: str
    start_ms: int
    end_ms: int = 0
    facts: dict[str, Any] = field(default_factory=dict)


class History:
    """Everything a round records; the checker reads it after the cluster is quiet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.ops: list[Op] = []
        self.queue_deliveries: list[QueueDelivery] = []
        self.faults: list[FaultEvent] = []

    def record(
        self,
        process: str,
        kind: str,
        tenant: str,
        node: str,
        reply: Reply,
        request: dict[str, Any],
        response: dict[str, Any] | None = None,
    ) -> Op:
        with self._lock:
            op = Op(
                op_id=next(self._ids),
                process=process,
                kind=kind,
                tenant=tenant,
                node=node,
                start_ms=reply.start_ms,
                end_ms=reply.end_ms,
                outcome=reply.outcome,
                status=reply.status,
                request=request,
                response=response or {},
                error=reply.error or _error_text(reply),
            )
            self.ops.append(op)
            return op

    def delivered(self, delivery: QueueDelivery) -> None:
        with self._lock:
            self.queue_deliveries.append(delivery)

    def fault(self, event: FaultEvent) -> FaultEvent:
        with self._lock:
            self.faults.append(event)
        return event

    def ops_of(self, *kinds: str) -> list[Op]:
        with self._lock:
            return [op for op in self.ops if op.kind in kinds]

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "ops": [asdict(op) for op in self.ops],
                "faults": [asdict(f) for f in self.faults],
                "queue_deliveries": len(self.queue_deliveries),
            }


def _error_text(reply: Reply) -> str | None:
    if reply.outcome == "ok" or not isinstance(reply.body, dict):
        return None
    error = reply.body.get("error")
    return f"{error.get('code')}: {error.get('message')}" if isinstance(error, dict) else None
