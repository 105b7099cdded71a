"""Queue consumers: receive from random nodes and mostly ack, but sometimes nack, sometimes work
past the visibility timeout, sometimes drop a message; a doomed job's message (the workload's
payload says so) is always nacked. Every message seen is logged."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from tests.chaos.client import call
from tests.chaos.history import History, QueueDelivery
from tests.chaos.workload import Tenant

VISIBILITY_S = 3
RECEIVE = {"max": 10, "wait": "1s", "visibility_timeout": f"{VISIBILITY_S}s"}


class QueueConsumer(threading.Thread):
    """One consumer of one tenant's queue; runs until `stop` is set."""

    def __init__(
        self, tenant: Tenant, queue: str, urls: dict[str, str], history: History, seed: int
    ) -> None:
        super().__init__(name=f"consumer-{tenant.name}-{queue}", daemon=True)
        self.tenant, self.queue, self.urls, self.history = tenant, queue, urls, history
        self.rng = random.Random(f"consumer-{seed}-{tenant.name}-{queue}")
        self.stop = threading.Event()
        self.errors: list[str] = []
        self._slow: list[tuple[float, list[str]]] = []  # (ack at, receipts), oldest first
        self._outputs: dict[str, str] = {}  # receipt -> the output its settle reports

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self._ack_slow(due_before=time.monotonic())
                node_id = self.rng.choice(sorted(self.urls))
                messages = self._receive(node_id)
                if messages is None:
                    self.stop.wait(0.2)
                    continue
                self._handle(node_id, messages)
            self._ack_slow(due_before=float("inf"))
        except Exception as exc:  # a harness bug: the runner reports it as a violation
            self.errors.append(repr(exc))

    def _post(self, node_id: str, verb: str, body: dict[str, Any]) -> Any:
        path = f"/v1/queues/{self.queue}/{verb}"
        reply = call(self.urls[node_id], "POST", path, body, token=self.tenant.token)
        return reply

    def _receive(self, node_id: str) -> list[dict[str, Any]] | None:
        reply = self._post(node_id, "receive", RECEIVE)
        messages: list[dict[str, Any]] = reply.body["messages"] if reply.status == 200 else []
        if reply.outcome != "ok" or messages:  # empty polls are reads: not worth a line
            keys = [m["idempotency_key"] for m in messages]
            self.history.record(
                self.name,
                "receive",
                self.tenant.name,
                node_id,
                reply,
                {"queue": self.queue},
                {"keys": keys},
            )
        if reply.status != 200:
            return None
        for m in messages:
            self.history.delivered(
                QueueDelivery(
                    at_ms=reply.end_ms,
                    tenant=self.tenant.name,
                    queue=self.queue,
                    node=node_id,
                    job_id=m["job_id"],
                    scheduled_at=m["scheduled_at"],
                    attempt=m["attempt"],
                    idempotency_key=m["idempotency_key"],
                )
            )
        return messages

    def _handle(self, node_id: str, messages: list[dict[str, Any]]) -> None:
        acks, nacks, slow, doomed = [], [], [], []
        for m in messages:
            draw = self.rng.random()
            # A doomed job's every attempt fails: the run dies (at once, half the time).
            if _is_doomed(m) and self.rng.random() < 0.5:
                doomed.append(m["receipt"])
            elif _is_doomed(m) or (draw < 0.08 and m["attempt"] <= 2):
                nacks.append(m["receipt"])
            elif draw < 0.14:
                slow.append(m["receipt"])
            elif draw < 0.17:
                continue  # dropped: it comes back when its visibility timeout ends
            else:
                acks.append(m["receipt"])
        self._outputs |= {m["receipt"]: output_of(m) for m in messages}
        self._settle(node_id, "ack", acks)
        self._settle(node_id, "nack", nacks)
        self._settle(node_id, "nack", doomed, dead=True)
        if slow:  # worked on past the visibility timeout, then acked (maybe too late)
            self._slow.append((time.monotonic() + VISIBILITY_S + 1, slow))

    def _ack_slow(self, due_before: float) -> None:
        while self._slow and self._slow[0][0] <= due_before:
            _, receipts = self._slow.pop(0)
            self._settle(self.rng.choice(sorted(self.urls)), "ack", receipts)

    def _settle(self, node_id: str, verb: str, receipts: list[str], *, dead: bool = False) -> None:
        """Ack or nack, each attempt's output reported (log level 12), and a doomed run's nack
        making it dead at once; a node of an older version refuses those fields (400 naming
        one): settled again without them, as a worker does."""
        if not receipts:
            return
        body: dict[str, Any] = {"receipts": receipts}
        if verb == "nack":
            body["error"] = "chaos consumer said no"
        outputs = {r: self._outputs.pop(r) for r in receipts if r in self._outputs}
        newer = {"outputs": outputs} | ({"dead": True} if dead else {})
        reply = self._post(node_id, verb, body | newer)
        if reply.status == 400:
            reply = self._post(node_id, verb, body)
        self.history.record(
            self.name,
            verb,
            self.tenant.name,
            node_id,
            reply,
            {"queue": self.queue, "count": len(receipts)},
            reply.body if reply.status == 200 else {},
        )


def output_of(message: dict[str, Any]) -> str:
    """What a consumer reports an attempt printed: its run's key and attempt (the checker finds
    each kept output under that attempt, output_misplaced otherwise)."""
    return f"{message['idempotency_key']}#{message['attempt']}"


def _is_doomed(message: dict[str, Any]) -> bool:
    payload = message.get("payload")
    return isinstance(payload, dict) and payload.get("doomed") is True
