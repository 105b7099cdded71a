"""The shared half of every broker deliverer (schedd/delivery/brokers.py), with a scripted
connector and a manual clock: what is judged before any connection, the backoff of a connection
that is down, publish slots and timeouts, lost and idle clients, connections kept apart."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from schedd.delivery.brokers import BrokerDeliverer, Connector, LinkBroken
from schedd.delivery.outcome import Outcome, Verdict
from schedd.guard.targets import TargetGuard
from schedd.model import BrokerConnection, RetryPolicy
from schedd.sealing import PayloadKeys
from schedd.store.outbox import DueCall
from schedd.store.queries import Tenant
from schedd.targets.redis_stream import RedisStreamTarget
from tests.brokers import found

T = TypeVar("T")
SUCCEEDED = Outcome(verdict=Verdict.SUCCEEDED, status=None)
TENANT = Tenant(
    tenant_id="t1",
    name="acme",
    signing_secret="whsec_" + "A" * 44,
    max_active_jobs=10,
    dispatch_rate=10,
    allowed_hosts=[],
    live_jobs=0,
    created_at_ms=0,
    updated_at_ms=0,
)
URL = "redis://alice:s3cr3t@broker.example:6379/0"


def conn(name: str = "main", *, created_ms: int = 1, kind: str = "redis") -> BrokerConnection:
    return BrokerConnection(
        tenant_id="t1",
        name=name,
        kind=kind,
        url=URL,
        pinned_addresses=("192.0.2.10", "192.0.2.11"),
        created_ms=created_ms,
    )


def call(connection: str = "main", payload: str = "{}") -> DueCall:
    target = {"type": "redis_stream", "connection": connection, "stream": "s"}
    return DueCall(1, 0, "t1", "job", 1_790_000_000_000, 1, json.dumps(target), payload, "{}")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Client:
    def __init__(self, name: str, address: str) -> None:
        self.name, self.address, self.is_closed = name, address, False


class Script:
    """A connector: `refuse` names connections whose connect fails, `hang` those whose connect
    never ends; remembers every connect and close."""

    def __init__(self) -> None:
        self.refuse: set[str] = set()
        self.hang: set[str] = set()
        self.connects: list[tuple[str, str]] = []
        self.closed: list[Client] = []

    async def connect(self, connection: BrokerConnection, address: str) -> Client:
        self.connects.append((connection.name, address))
        if connection.name in self.hang:
            await asyncio.Event().wait()
        if connection.name in self.refuse:
            raise ConnectionRefusedError(111, f"refused: {connection.url}")
        return Client(connection.name, address)

    async def close(self, client: Client) -> None:
        client.is_closed = True
        self.closed.append(client)


Publish = Callable[[Client], Awaitable[Outcome]]


class Fake(BrokerDeliverer[Client, RedisStreamTarget]):
    kind = "redis_stream"
    target_type = RedisStreamTarget

    def __init__(self, script: Script, connections: list[BrokerConnection], **options: Any) -> None:
        self.script = script
        self.publisher: Publish = self._ok
        named = {c.name: c for c in connections}
        super().__init__(PayloadKeys(), lambda t, n: found(named.get(n)), **options)

    def connector(self, tls: object, reads: object) -> Connector[Client]:
        return self.script

    async def publish(
        self, client: Client, target: RedisStreamTarget, call: DueCall, payload: str
    ) -> Outcome:
        return await self.publisher(client)

    async def _ok(self, client: Client) -> Outcome:
        return SUCCEEDED


def run(fake: Fake, scenario: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        fake.start()
        try:
            return await scenario()
        finally:
            await fake.stop()

    return asyncio.run(main())


async def deliver(fake: Fake, due: DueCall, tenant: Tenant | None = TENANT) -> Outcome:
    return await fake.deliver(due, tenant, 0, RetryPolicy())


def retry(error: str) -> Outcome:
    return Outcome(verdict=Verdict.RETRY, status=None, error=error)


def test_judged_before_any_connection() -> None:
    keys = PayloadKeys([("k1", os.urandom(32))])
    sealed = json.dumps(keys.seal({"a": 1}))
    fake = Fake(Script(), [conn(), conn("q", kind="rabbitmq")])

    async def scenario() -> list[Outcome]:
        return [
            await deliver(fake, call(), tenant=None),
            await deliver(fake, call("gone")),
            await deliver(fake, call("q")),
            await deliver(fake, call(payload=sealed)),
            await deliver(fake, call()._replace(target='{"type": "nats", "connection": "main"}')),
        ]

    *judged, unreadable = run(fake, scenario)
    assert judged == [
        Outcome(verdict=Verdict.FAILED, status=None, error="the tenant is gone"),
        retry("unknown connection 'gone'"),
        retry("connection 'q' is rabbitmq, not redis"),
        retry("the payload was sealed with key 'k1', not configured"),
    ]
    assert unreadable.verdict is Verdict.FAILED
    assert unreadable.error == "invalid target: target.subject: missing or not text"
    assert fake.script.connects == []


def test_down_connection_fails_fast_until_its_backoff_ends() -> None:
    script, clock = Script(), Clock()
    script.refuse.add("main")
    fake = Fake(script, [conn()], clock=clock, backoff_initial_s=1, backoff_max_s=4)

    async def scenario() -> list[Outcome]:
        outcomes = [await deliver(fake, call()), await deliver(fake, call())]
        assert len(script.connects) == 2  # both pinned addresses, once
        for _ in range(5):  # each wait at most doubles, up to the maximum
            [link] = fake.pool.links()
            wait = link.down_until - clock.now
            assert 0 < wait <= min(2 ** (link.failures - 1), 4)
            clock.now += wait
            outcomes.append(await deliver(fake, call()))
        script.refuse.clear()
        clock.now += 4
        outcomes.append(await deliver(fake, call()))
        [link] = fake.pool.links()
        assert link.failures == 0 and link.connects == 7
        return outcomes

    outcomes = run(fake, scenario)
    cause = (
        "connect to 192.0.2.11 failed: ConnectionRefusedError: [Errno 111] refused: redis://***@"
    )
    assert outcomes[0] == outcomes[1]
    assert {o.verdict for o in outcomes[:-1]} == {Verdict.RETRY}
    assert all((o.error or "").startswith(f"connection down: {cause}") for o in outcomes[:-1])
    assert all("s3cr3t" not in (o.error or "") and "alice" not in (o.error or "") for o in outcomes)
    assert outcomes[-1] == SUCCEEDED


def test_second_pinned_address_is_tried_when_the_first_fails() -> None:
    script = Script()
    fake = Fake(script, [conn()])

    async def refuse_first(connection: BrokerConnection, address: str) -> Client:
        script.connects.append((connection.name, address))
        if address == "192.0.2.10":
            raise OSError("unreachable")
        return Client(connection.name, address)

    script.connect = refuse_first  # type: ignore[method-assign]
    assert run(fake, lambda: deliver(fake, call())) == SUCCEEDED
    assert script.connects == [("main", "192.0.2.10"), ("main", "192.0.2.11")]


def test_hanging_connect_holds_up_no_other_connection() -> None:
    script = Script()
    script.hang.add("slow")
    fake = Fake(script, [conn(), conn("slow")], connect_timeout_s=0.2)

    async def scenario() -> tuple[list[Outcome], Outcome]:
        slow = asyncio.ensure_future(deliver(fake, call("slow")))
        await asyncio.sleep(0.01)
        fast = await asyncio.gather(*(deliver(fake, call()) for _ in range(50)))
        assert not slow.done()  # the other connection went on while this one hung
        return fast, await slow

    fast, slow = run(fake, scenario)
    assert fast == [SUCCEEDED] * 50
    assert slow == retry("connection down: connect to 192.0.2.11 timed out after 0.2s")


def test_publishes_in_flight_are_bounded_and_timed_out() -> None:
    fake = Fake(Script(), [conn()], max_in_flight=3, publish_timeout_s=0.3)
    counts = {"now": 0, "most": 0}
    release = asyncio.Event()

    async def held(client: Client) -> Outcome:
        counts["now"] += 1
        counts["most"] = max(counts["most"], counts["now"])
        try:
            await release.wait()
        finally:
            counts["now"] -= 1
        return SUCCEEDED

    fake.publisher = held

    async def scenario() -> list[Outcome]:
        return await asyncio.gather(*(deliver(fake, call()) for _ in range(10)))

    outcomes = run(fake, scenario)
    assert counts["most"] == 3
    assert outcomes == [retry("publish timed out after 0.3s")] * 10


def test_broken_client_is_closed_once_and_made_again() -> None:
    script = Script()
    fake = Fake(script, [conn()])
    clients: list[Client] = []

    async def breaks_on_the_first_client(client: Client) -> Outcome:
        if not clients:
            clients.append(client)
            return SUCCEEDED
        if client is clients[0]:
            await asyncio.sleep(0.01)  # all three are in flight on it when it breaks
            raise LinkBroken("the connection was closed")
        return SUCCEEDED

    fake.publisher = breaks_on_the_first_client

    async def scenario() -> list[Outcome]:
        first = await deliver(fake, call())
        broken = await asyncio.gather(*(deliver(fake, call()) for _ in range(3)))
        await asyncio.sleep(0)  # the close runs in the background
        return [first, *broken, await deliver(fake, call())]

    outcomes = run(fake, scenario)
    lost = retry("connection down: the connection was closed")
    assert outcomes == [SUCCEEDED, lost, lost, lost, SUCCEEDED]
    assert len(script.connects) == 2
    assert script.closed[0] is clients[0]
    assert script.closed.count(clients[0]) == 1


def test_idle_recreated_and_stopped_clients_are_closed() -> None:
    script, clock = Script(), Clock()
    old, new, other = conn(created_ms=1), conn(created_ms=2), conn("other")
    connections = [old, other]
    fake = Fake(script, connections, clock=clock, idle_s=60)

    async def scenario() -> None:
        await deliver(fake, call())
        await deliver(fake, call("other"))
        connections[0] = new  # deleted and created again under its name
        fake._lookup = lambda t, n: found({c.name: c for c in connections}.get(n))
        clock.now += 30
        await deliver(fake, call())
        await asyncio.sleep(0)
        assert [c.name for c in script.closed] == ["main"]  # the old one
        clock.now += 40
        assert fake.pool.sweep(clock.now) == 1  # "other": unused for 70 s
        await asyncio.sleep(0)
        assert [c.name for c in script.closed] == ["main", "other"]

    run(fake, scenario)
    assert [c.name for c in script.closed] == ["main", "other", "main"]
    assert all(c.is_closed for c in script.closed)


@pytest.mark.parametrize("error", [OSError("reset by peer"), ConnectionResetError()])
def test_socket_errors_in_a_publish_are_a_lost_connection(error: OSError) -> None:
    fake = Fake(Script(), [conn()])

    async def raises(client: Client) -> Outcome:
        raise error

    fake.publisher = raises
    outcome = run(fake, lambda: deliver(fake, call()))
    assert outcome.verdict is Verdict.RETRY
    assert (outcome.error or "").startswith("connection down: ")


def test_the_delivering_node_checks_the_pinned_addresses_against_its_own_rules() -> None:
    """A connection was checked by the node that took its create; the node that delivers
    (another node's allow_cidrs, rules narrowed since, the tenant's allowed_hosts now) checks
    the pinned addresses again, without DNS, before any connect."""
    private = BrokerConnection(
        tenant_id="t1",
        name="main",
        kind="redis",
        url=URL,
        pinned_addresses=("93.184.216.34", "10.1.2.3"),  # a global one and a private one
        created_ms=1,
    )
    narrowed = dataclasses.replace(TENANT, allowed_hosts=["*.acme.example"])

    def outcomes(guard: TargetGuard, tenant: Tenant) -> tuple[Outcome, int]:
        fake = Fake(Script(), [private], guard=guard)

        async def scenario() -> Outcome:
            return await deliver(fake, call(), tenant=tenant)

        return run(fake, scenario), len(fake.script.connects)

    blocked, connects = outcomes(TargetGuard([]), TENANT)
    assert blocked.verdict is Verdict.FAILED
    assert (blocked.error or "").startswith("blocked: ") and connects == 0
    allowed, connects = outcomes(TargetGuard(["10.0.0.0/8"]), TENANT)
    assert allowed == SUCCEEDED and connects == 1
    hosts, connects = outcomes(TargetGuard(["10.0.0.0/8"]), narrowed)
    assert hosts == Outcome(
        verdict=Verdict.FAILED,
        status=None,
        error="blocked: host is not in the tenant's allowed_hosts",
    )
    assert connects == 0
