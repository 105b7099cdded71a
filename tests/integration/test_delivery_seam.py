"""The sender seam (schedd/delivery/sender.py): a target kind added as a Deliverer alone.

A job whose target is a kind the claim and apply have never heard of is claimed into the outbox,
handed to the Deliverer registered for its kind, and its outcomes (a retry, then a success) are
recorded through the log like HTTP's; a kind with no Deliverer on this node is a retried attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.delivery.caller import Caller
from schedd.delivery.http import HttpDeliverer
from schedd.delivery.outcome import Outcome, Verdict
from schedd.delivery.sender import Deliverer, Sender, target_kind
from schedd.guard.targets import TargetGuard
from schedd.model import RetryPolicy
from schedd.sealing import PayloadKeys
from schedd.store.outbox import DueCall
from schedd.store.queries import Tenant
from tests.integration.test_delivery_isolation import (
    NO_WAIT,
    Node,
    _claim,
    _job_item,
    run_with,
    until,
    wall_ms,
)

STREAM = {"type": "fakebroker", "stream": "orders"}


class FakeBroker:
    """A broker kind's deliverer: answers from a script, remembers what it was handed."""

    kind = "fakebroker"

    def __init__(self, *answers: Outcome) -> None:
        self.answers = list(answers)
        self.handed: list[tuple[str, int, dict[str, Any], str | None]] = []
        self.is_started = self.is_stopped = False

    def start(self) -> None:
        self.is_started = True

    async def stop(self) -> None:
        self.is_stopped = True

    async def deliver(
        self, call: DueCall, tenant: Tenant | None, started_ms: int, policy: RetryPolicy
    ) -> Outcome:
        tenant_id = None if tenant is None else tenant.tenant_id
        self.handed.append((call.job_id, call.attempt, json.loads(call.target), tenant_id))
        return self.answers.pop(0)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    started = Node(tmp_path, TargetGuard(["127.0.0.0/8"]))
    try:
        yield started
    finally:
        started.close()


def with_deliverers(node: Node, *deliverers: Deliverer) -> None:
    node.caller = Caller(
        "n1",
        node.reads,
        node.propose,
        TargetGuard(["127.0.0.0/8"]),
        PayloadKeys(),
        concurrency=8,
        tenant_concurrency=8,
        deliverers=deliverers,
    )


def claimed(node: Node, job_id: str, target: dict[str, Any]) -> None:
    now = wall_ms()
    item = _job_item(job_id, now, target, NO_WAIT)
    assert node.apply("create_jobs", {"tenant_id": "t", "jobs": [item]}, ts_ms=now)["results"]
    claims = {"node_id": "n1", "claims": [_claim(job_id, now)]}
    assert node.apply("claim_runs", claims, ts_ms=now)["claimed"] == 1


def test_a_new_kind_is_delivered_by_its_deliverer_and_recorded_like_http(node: Node) -> None:
    nack = Outcome(verdict=Verdict.RETRY, status=None, error="broker: not confirmed")
    broker = FakeBroker(nack, Outcome(verdict=Verdict.SUCCEEDED, status=None))
    with_deliverers(node, broker)
    node.tenant("t")
    claimed(node, "j-stream", STREAM)

    async def scenario() -> None:
        assert broker.is_started
        node.caller.wake_threadsafe()
        await until(lambda: node.runs(["j-stream"])["j-stream"] == ("succeeded", 2), "success")

    run_with(node, scenario)
    assert broker.is_stopped
    assert broker.handed == [("j-stream", 1, STREAM, "t"), ("j-stream", 2, STREAM, "t")]
    assert node.attempts("j-stream") == [
        (1, "failed", "broker: not confirmed"),
        (2, "succeeded", None),
    ]


def test_a_kind_with_no_deliverer_on_this_node_is_a_retried_attempt(node: Node) -> None:
    node.tenant("t")
    claimed(node, "j-nats", {"type": "nats", "subject": "x"})

    async def scenario() -> None:
        node.caller.wake_threadsafe()
        await until(lambda: node.runs(["j-nats"])["j-nats"] == ("dead", 3), "out of attempts")

    run_with(node, scenario)
    error = "no sender for target kind 'nats' on this node"
    assert node.attempts("j-nats") == [(n, "failed", error) for n in (1, 2, 3)]


def test_the_caller_and_the_http_deliverer_fill_the_seam() -> None:
    http = HttpDeliverer(TargetGuard(), PayloadKeys(), concurrency=1)
    assert isinstance(http, Deliverer) and http.kind == "http"
    assert isinstance(FakeBroker(), Deliverer)
    caller = Caller(
        "n1",
        reads=None,  # type: ignore[arg-type]
        propose=None,  # type: ignore[arg-type]
        guard=TargetGuard(),
        payload_keys=PayloadKeys(),
        concurrency=1,
        tenant_concurrency=1,
    )
    assert isinstance(caller, Sender)


def test_a_rows_kind_is_its_targets_type() -> None:
    assert target_kind(json.dumps(STREAM)) == "fakebroker"
    assert target_kind('{"type":"http","url":"https://x"}') == "http"
    assert target_kind("not json") == target_kind("[1]") == target_kind('{"type":1}') == ""
