"""The failure-alert sender (delivery/alerts.py) in-process: a real store (commands applied at
once, as a one-node cluster would), alerts queued as the apply side queues them, and a scripted
receiver on 127.0.0.1. It POSTs the alert's body signed with the tenant's secret (checked here
with our own HMAC), retries a failing endpoint with backoff until it answers 2xx, gives a
blocked URL up without a request, sends only while its node leads, and one tenant's endpoint
that hangs holds only that tenant's slots."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd import metrics
from schedd.delivery.alerts import FIRST_RETRY_MS, MAX_ATTEMPTS, AlertSender, retry_delay_ms
from schedd.guard.targets import TargetGuard
from schedd.store import alerts
from schedd.store.apply import StateMachine
from schedd.store.commands import LogCommand, R
from schedd.store.db import Database, ReadPool
from tests.conftest import Applier
from tests.receiver import Answer, Receiver, receiving

BODY = json.dumps({"type": "job.failing", "job_id": "job_a", "runs": 3}, separators=(",", ":"))


def secret_of(tenant_id: str) -> str:
    return "whsec_" + base64.b64encode(tenant_id.encode().ljust(32, b"-")).decode()


class Node:
    """A store, the commands applied to it, and an alert sender on a clock the test moves."""

    def __init__(self, path: Path, *, tenant_concurrency: int = 4) -> None:
        self.db = Database(path / "state.db")
        self.apply = Applier(StateMachine(self.db))
        self.reads = ReadPool(self.db.path)
        self.now_ms = int(time.time() * 1000)
        self.is_leader = True
        self.sender = AlertSender(
            self.reads,
            self.propose,
            TargetGuard(["127.0.0.0/8"]),
            is_leader=lambda: self.is_leader,
            clock_ms=lambda: self.now_ms,
            tenant_concurrency=tenant_concurrency,
            timeout_s=5.0,
        )

    async def propose(self, cmd: LogCommand[R]) -> R:
        return self.apply.propose(cmd, ts_ms=self.now_ms)

    def tenant(self, tenant_id: str, allowed_hosts: tuple[str, ...] = ()) -> None:
        body = {
            "tenant_id": tenant_id,
            "name": tenant_id,
            "token_hash": f"h-{tenant_id}",
            "signing_secret": secret_of(tenant_id),
            "max_active_jobs": 100,
            "dispatch_rate": 100,
            "allowed_hosts": list(allowed_hosts),
        }
        assert self.apply("create_tenant", body, ts_ms=self.now_ms)["status"] == "ok"

    def alert(self, url: str, tenant_id: str = "t1") -> int:
        with self.db.transaction(applied_index=self.db.applied_index) as tx:
            return alerts.add(
                tx, tenant_id=tenant_id, job_id="job_a", url=url, body=BODY, at_ms=self.now_ms
            )

    def row(self, alert_id: int) -> tuple[Any, ...]:
        found = self.db.conn.execute(
            "SELECT attempts, next_at_ms, sent_at_ms, last_error FROM alerts WHERE alert_id = ?",
            (alert_id,),
        )
        return tuple(found.fetchone())

    async def round(self) -> int:
        """One tick at the node's time, its POSTs finished and their outcomes recorded."""
        started = await self.sender.tick(self.now_ms)
        await self.sender.settle()
        return started

    def close(self) -> None:
        self.reads.close()
        self.db.close()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    started = Node(tmp_path)
    started.tenant("t1")
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as started:
        yield started


def run(node: Node, coro: Any) -> Any:
    """Run a test body with the sender's HTTP session open, always closed after."""

    async def main() -> Any:
        node.sender.open()
        try:
            return await coro
        finally:
            await node.sender.stop()

    return asyncio.run(main())


def signed_by(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """Standard Webhooks: v1,base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")), computed
    here and not by schedd's signing module."""
    key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        entry.partition(",")[0] == "v1" and hmac.compare_digest(entry.partition(",")[2], expected)
        for entry in headers["webhook-signature"].split(" ")
    )


def counted(result: str) -> float:
    return metrics.ALERTS.labels(result=result)._value.get()


def test_an_alert_is_posted_once_signed_with_its_body_and_done(
    node: Node, receiver: Receiver
) -> None:
    alert_id = node.alert(receiver.url("alerts"))
    sent_before = counted("sent")
    assert run(node, node.round()) == 1
    [request] = receiver.received("alerts")
    assert request.method == "POST" and request.body == BODY.encode()
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["content-type"] == "application/json"
    assert headers["webhook-id"] == f"alert:{alert_id}:{node.now_ms}"
    assert headers["webhook-timestamp"] == str(node.now_ms // 1000)
    assert signed_by(secret_of("t1"), headers, request.body)
    assert not signed_by(secret_of("t2"), headers, request.body)
    assert node.row(alert_id) == (1, None, node.now_ms, None)
    assert counted("sent") == sent_before + 1
    assert run(node, node.round()) == 0  # done: never posted again
    assert len(receiver.received("alerts")) == 1


def test_a_failing_endpoint_is_retried_with_backoff_until_it_answers(
    node: Node, receiver: Receiver
) -> None:
    receiver.script("a", Answer(500, body="down"), Answer(503, body=""), Answer(200))
    alert_id = node.alert(receiver.url("a"))
    retried_before = counted("retried")

    async def body() -> None:
        first_ms = node.now_ms
        assert await node.round() == 1
        assert node.row(alert_id) == (1, first_ms + FIRST_RETRY_MS, None, "http 500: down")
        node.now_ms = first_ms + FIRST_RETRY_MS - 1
        assert await node.round() == 0  # not due before its retry time
        node.now_ms = first_ms + FIRST_RETRY_MS
        assert await node.round() == 1
        assert node.row(alert_id) == (2, node.now_ms + retry_delay_ms(2), None, "http 503")
        assert retry_delay_ms(2) == 2 * FIRST_RETRY_MS
        node.now_ms += retry_delay_ms(2)
        assert await node.round() == 1
        assert node.row(alert_id) == (3, None, node.now_ms, "http 503")

    run(node, body())
    requests = receiver.received("a")
    assert len(requests) == 3
    assert len({r.headers["webhook-id"] for r in requests}) == 1  # the same id each attempt
    assert all(signed_by(secret_of("t1"), r.headers, r.body) for r in requests)
    assert counted("retried") == retried_before + 2


def test_an_alert_is_given_up_after_its_last_attempt(node: Node, receiver: Receiver) -> None:
    receiver.script("gone", Answer(500, body=""))
    alert_id = node.alert(receiver.url("gone"))
    failed_before = counted("failed")

    async def body() -> None:
        for _ in range(MAX_ATTEMPTS):
            assert await node.round() == 1
            next_at_ms = node.row(alert_id)[1]
            if next_at_ms is not None:
                node.now_ms = next_at_ms

    run(node, body())
    assert node.row(alert_id) == (MAX_ATTEMPTS, None, None, "http 500")
    assert len(receiver.received("gone")) == MAX_ATTEMPTS
    assert counted("failed") == failed_before + 1


def test_a_blocked_url_is_given_up_at_once_without_a_request(
    node: Node, receiver: Receiver
) -> None:
    node.tenant("fenced", allowed_hosts=("hooks.example.com",))
    outside = node.alert(receiver.url("x"), tenant_id="fenced")  # not an allowed host
    metadata = node.alert("http://169.254.169.254/latest/meta-data", tenant_id="t1")
    assert run(node, node.round()) == 2
    assert receiver.received() == []
    attempts, next_at_ms, sent_at_ms, error = node.row(outside)
    assert (attempts, next_at_ms, sent_at_ms) == (1, None, None)
    assert error.startswith("blocked: ") and "allowed_hosts" in error
    attempts, next_at_ms, sent_at_ms, error = node.row(metadata)
    assert (attempts, next_at_ms, sent_at_ms) == (1, None, None)
    assert error.startswith("blocked: ")


def test_only_the_leader_sends(node: Node, receiver: Receiver) -> None:
    alert_id = node.alert(receiver.url("l"))
    node.is_leader = False
    assert run(node, node.round()) == 0
    assert receiver.received() == []
    assert node.row(alert_id)[:2] == (0, node.now_ms)  # still due, for whoever leads
    node.is_leader = True
    assert run(node, node.round()) == 1
    assert len(receiver.received("l")) == 1


def test_nothing_is_sent_while_a_member_cannot_record_outcomes(
    node: Node, receiver: Receiver
) -> None:
    node.alert(receiver.url("old"))
    node.sender._lagging = lambda level: ["n2"] if level >= 8 else []
    assert run(node, node.round()) == 0
    assert receiver.received() == []


def test_a_hanging_endpoint_holds_only_its_tenants_slots(node: Node, receiver: Receiver) -> None:
    node.tenant("slow")
    receiver.script("hang", Answer(200, delay_s=3.0))
    hanging = [node.alert(receiver.url("hang"), tenant_id="slow") for _ in range(6)]
    fast = node.alert(receiver.url("fast"))

    async def body() -> None:
        assert await node.sender.tick(node.now_ms) == 5  # 4 of the slow tenant's, and t1's
        # Answered while the others hang.
        await asyncio.to_thread(receiver.wait_for, 1, "fast", timeout_s=2.0)
        await node.sender.settle()

    run(node, body())
    assert node.row(fast)[2] == node.now_ms
    assert sum(node.row(a)[2] is not None for a in hanging) == 4  # two wait their turn


def test_started_it_sends_what_apply_queued_when_woken_and_records_it(
    node: Node, receiver: Receiver
) -> None:
    async def body() -> None:
        node.sender.start()
        try:
            alert_id = node.alert(receiver.url("woken"))
            node.sender.wake_threadsafe()  # as AlertsDue does (node.subscribe_alerts)
            await asyncio.to_thread(receiver.wait_for, 1, "woken", timeout_s=5.0)
            deadline = time.monotonic() + 5.0
            while node.row(alert_id)[2] is None:
                assert time.monotonic() < deadline, "the outcome was not recorded"
                await asyncio.sleep(0.02)
            assert node.sender.in_flight == 0
        finally:
            await node.sender.stop()

    asyncio.run(body())
