"""The broker deliverers against real brokers on loopback (tests/brokers.py): each attempt's
message read back with the broker's own client library, exact; the broker's refusals as retried
attempts; a connection that is down failing fast; 500 attempts at once all arriving; the probe;
and runs claimed into the outbox, delivered by the Caller through each deliverer and recorded.

Every connection URL names a host that never resolves (broker.invalid): a delivery that arrives
went to the connection's pinned address.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aio_pika
import nats
import pytest
import redis.asyncio
from prometheus_client import REGISTRY

from schedd.delivery.brokers import MAX_IN_FLIGHT, BrokerDeliverer
from schedd.delivery.nats import NatsDeliverer
from schedd.delivery.outcome import Outcome, Verdict
from schedd.delivery.probe import probe
from schedd.delivery.rabbitmq import RabbitMqDeliverer
from schedd.delivery.redis_stream import RedisStreamDeliverer
from schedd.guard.targets import TargetGuard
from schedd.model import BrokerConnection, RetryPolicy, idempotency_key
from schedd.sealing import PayloadKeys
from schedd.store.outbox import DueCall
from tests.brokers import (
    HOST,
    PORTS,
    TENANT,
    JetStream,
    Queue,
    Stream,
    closed_port,
    connection,
    due_call,
    found,
    nats_service,
    nats_stream,
    rabbitmq_queue,
    rabbitmq_service,
    redis_service,
    redis_stream,
    require,
    unique,
)
from tests.integration.test_delivery_isolation import (
    NO_WAIT,
    Node,
    _claim,
    _job_item,
    run_with,
    until,
    wall_ms,
)
from tests.integration.test_delivery_seam import with_deliverers

FIXTURES = (
    nats_service,
    nats_stream,
    rabbitmq_queue,
    rabbitmq_service,
    redis_service,
    redis_stream,
)

SCHEDULED_AT = "2026-09-21T14:13:20Z"
POLICY = RetryPolicy()
KEYS = PayloadKeys()
SUCCEEDED = Outcome(verdict=Verdict.SUCCEEDED, status=None)
T = TypeVar("T")
KINDS = {
    "redis": RedisStreamDeliverer,
    "rabbitmq": RabbitMqDeliverer,
    "nats": NatsDeliverer,
}


def make(
    kind: str, *connections: BrokerConnection, keys: PayloadKeys = KEYS, **options: Any
) -> BrokerDeliverer[Any, Any]:
    """A deliverer of `kind` whose tenant has `connections` (the local broker's by default)."""
    named = {c.name: c for c in connections or (connection(kind),)}
    deliverer: BrokerDeliverer[Any, Any] = KINDS[kind](
        keys, lambda tenant_id, name: found(named.get(name)), **options
    )
    return deliverer


def run(deliverer: BrokerDeliverer[Any, Any], scenario: Callable[[], Awaitable[T]]) -> T:
    """Start the deliverer on a fresh loop, play `scenario`, stop the deliverer."""

    async def main() -> T:
        deliverer.start()
        try:
            return await scenario()
        finally:
            await deliverer.stop()

    return asyncio.run(main())


async def deliver(deliverer: BrokerDeliverer[Any, Any], call: DueCall) -> Outcome:
    return await deliverer.deliver(call, TENANT, 0, POLICY)


def key_of(call: DueCall) -> str:
    return f"{call.job_id}:{SCHEDULED_AT}"


# ---------------------------------------------------------------------- redis_stream


async def stream_entries(key: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    client = redis.asyncio.Redis(host=HOST, port=PORTS["redis"])
    try:
        return list(await client.xrange(key))
    finally:
        await client.aclose()


def redis_target(stream: Stream, **extra: Any) -> dict[str, Any]:
    return {"type": "redis_stream", "connection": "main", "stream": stream.key, **extra}


def test_redis_run_arrives_once_with_its_fields(redis_stream: Stream) -> None:
    call = due_call(redis_target(redis_stream), attempt=2, payload={"n": 1, "s": "é"})
    deliverer = make("redis")
    outcome = run(deliverer, lambda: deliver(deliverer, call))
    entries = asyncio.run(stream_entries(redis_stream.key))
    assert outcome == SUCCEEDED
    assert [fields for _, fields in entries] == [
        {
            b"job_id": call.job_id.encode(),
            b"scheduled_at": SCHEDULED_AT.encode(),
            b"attempt": b"2",
            b"idempotency_key": key_of(call).encode(),
            b"payload": b'{"n": 1, "s": "\\u00e9"}',
        }
    ]


def test_redis_sealed_payload_arrives_opened(redis_stream: Stream) -> None:
    keys = PayloadKeys([("k1", os.urandom(32))])
    call = due_call(redis_target(redis_stream), payload=keys.seal({"secret": "opened"}))
    deliverer = make("redis", keys=keys)
    assert run(deliverer, lambda: deliver(deliverer, call)) == SUCCEEDED
    [(_, fields)] = asyncio.run(stream_entries(redis_stream.key))
    assert json.loads(fields[b"payload"]) == {"secret": "opened"}


def test_redis_maxlen_trims_the_stream_approximately(redis_stream: Stream) -> None:
    deliverer = make("redis")
    calls = [due_call(redis_target(redis_stream, maxlen=10)) for _ in range(1000)]
    outcomes = run(deliverer, lambda: asyncio.gather(*(deliver(deliverer, c) for c in calls)))
    entries = asyncio.run(stream_entries(redis_stream.key))
    assert set(outcomes) == {SUCCEEDED}
    assert 10 <= len(entries) <= 200  # "~": whole nodes (100 entries) are dropped, never fewer
    # The newest are kept. 1,000 publishes at once go out MAX_IN_FLIGHT at a time, in no fixed
    # order within a window (the CI of 2026-12-04 16:18 saw another of the last ones last).
    last_window = {c.job_id.encode() for c in calls[-MAX_IN_FLIGHT:]}
    assert entries[-1][1][b"job_id"] in last_window


def test_redis_key_of_another_type_is_a_retried_attempt(redis_stream: Stream) -> None:
    async def scenario() -> Outcome:
        client = redis.asyncio.Redis(host=HOST, port=PORTS["redis"])
        await client.set(redis_stream.key, "not a stream")
        await client.aclose()
        return await deliver(deliverer, due_call(redis_target(redis_stream)))

    deliverer = make("redis")
    outcome = run(deliverer, scenario)
    assert outcome.verdict is Verdict.RETRY
    assert outcome.error is not None and outcome.error.startswith("redis: WRONGTYPE")


def test_redis_wrong_password_is_connection_down_without_credentials(redis_stream: Stream) -> None:
    url = "redis://someone:s3cr3t-pw@broker.invalid:6379/0"
    deliverer = make("redis", connection("redis", url=url))
    outcome = run(deliverer, lambda: deliver(deliverer, due_call(redis_target(redis_stream))))
    assert outcome.verdict is Verdict.RETRY
    assert outcome.error is not None and outcome.error.startswith("connection down: connect to")
    assert "s3cr3t" not in outcome.error and "someone" not in outcome.error


def test_redis_idle_connection_is_closed_and_made_again(redis_stream: Stream) -> None:
    deliverer = make("redis", idle_s=60)

    async def scenario() -> list[Outcome]:
        first = await deliver(deliverer, due_call(redis_target(redis_stream)))
        assert deliverer.pool.sweep(time.monotonic()) == 0  # used just now
        assert deliverer.pool.sweep(time.monotonic() + 61) == 1
        assert list(deliverer.pool.links()) == []
        return [first, await deliver(deliverer, due_call(redis_target(redis_stream)))]

    assert run(deliverer, scenario) == [SUCCEEDED, SUCCEEDED]
    assert len(asyncio.run(stream_entries(redis_stream.key))) == 2


# ---------------------------------------------------------------------- rabbitmq


def rabbit_target(exchange: str, routing_key: str) -> dict[str, Any]:
    return {
        "type": "rabbitmq",
        "connection": "main",
        "exchange": exchange,
        "routing_key": routing_key,
    }


async def queued(queue: Queue) -> list[aio_pika.abc.AbstractIncomingMessage]:
    """Every message in the queue, taken off it."""
    conn = await aio_pika.connect(f"amqp://guest:guest@{HOST}:{PORTS['rabbitmq']}/")
    async with conn:
        channel = await conn.channel()
        declared = await channel.declare_queue(queue.name, passive=True)
        messages = []
        while (message := await declared.get(no_ack=True, fail=False)) is not None:
            messages.append(message)
        return messages


def test_rabbitmq_run_arrives_once_persistent_with_its_properties(rabbitmq_queue: Queue) -> None:
    call = due_call(rabbit_target(rabbitmq_queue.exchange, rabbitmq_queue.routing_key), attempt=3)
    deliverer = make("rabbitmq")
    outcome = run(deliverer, lambda: deliver(deliverer, call))
    [message] = asyncio.run(queued(rabbitmq_queue))
    assert outcome == SUCCEEDED
    assert (
        message.body
        == (
            f'{{"job_id":"{call.job_id}","scheduled_at":"{SCHEDULED_AT}","attempt":3,'
            f'"idempotency_key":"{key_of(call)}","payload":{{"report": "daily"}}}}'
        ).encode()
    )
    assert message.content_type == "application/json"
    assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert message.message_id == key_of(call)
    assert message.headers == {"job_id": call.job_id, "scheduled_at": SCHEDULED_AT, "attempt": 3}


def test_rabbitmq_unroutable_message_is_a_retried_attempt(rabbitmq_queue: Queue) -> None:
    call = due_call(rabbit_target(rabbitmq_queue.exchange, "nobody.listens"))
    deliverer = make("rabbitmq")
    outcome = run(deliverer, lambda: deliver(deliverer, call))
    assert outcome.verdict is Verdict.RETRY
    assert outcome.error is not None and outcome.error.startswith("unroutable:")
    assert asyncio.run(queued(rabbitmq_queue)) == []


def test_rabbitmq_missing_exchange_harms_no_other_publish(rabbitmq_queue: Queue) -> None:
    missing = unique("missing")
    good = rabbit_target(rabbitmq_queue.exchange, rabbitmq_queue.routing_key)
    deliverer = make("rabbitmq")

    async def scenario() -> tuple[Outcome, list[Outcome], list[Outcome], Outcome]:
        alone = await deliver(deliverer, due_call(rabbit_target(missing, "x")))
        together = await asyncio.gather(
            *(deliver(deliverer, due_call(rabbit_target(missing, "x"))) for _ in range(20)),
            *(deliver(deliverer, due_call(good)) for _ in range(20)),
        )
        after = await deliver(deliverer, due_call(good))
        return alone, together[:20], together[20:], after

    alone, bad, fine, after = run(deliverer, scenario)
    assert alone.verdict is Verdict.RETRY
    assert alone.error == (
        f"rabbitmq closed the channel: NOT_FOUND - no exchange '{missing}' in vhost '/'"
    )
    assert {o.verdict for o in bad} == {Verdict.RETRY}
    assert fine == [SUCCEEDED] * 20
    assert after == SUCCEEDED
    assert len(asyncio.run(queued(rabbitmq_queue))) == 21


def test_rabbitmq_wrong_password_is_connection_down_without_it(rabbitmq_queue: Queue) -> None:
    url = "amqp://guest:wr0ng-pa55@broker.invalid:5672/"
    deliverer = make("rabbitmq", connection("rabbitmq", url=url))
    call = due_call(rabbit_target(rabbitmq_queue.exchange, rabbitmq_queue.routing_key))
    outcome = run(deliverer, lambda: deliver(deliverer, call))
    assert outcome.verdict is Verdict.RETRY
    assert outcome.error is not None and outcome.error.startswith("connection down: connect to")
    assert "wr0ng-pa55" not in outcome.error


def test_rabbitmq_lost_connection_is_made_again(rabbitmq_queue: Queue) -> None:
    target = rabbit_target(rabbitmq_queue.exchange, rabbitmq_queue.routing_key)
    deliverer = make("rabbitmq")

    async def scenario() -> list[Outcome]:
        first = await deliver(deliverer, due_call(target))
        [link] = deliverer.pool.links()
        transport = link.client.connection.transport
        await transport.connection.close()  # as if the broker had gone away
        lost = await deliver(deliverer, due_call(target))
        return [first, lost, await deliver(deliverer, due_call(target))]

    first, lost, again = run(deliverer, scenario)
    assert first == again == SUCCEEDED
    assert lost.verdict is Verdict.RETRY
    assert lost.error is not None and lost.error.startswith("connection down:")
    assert len(asyncio.run(queued(rabbitmq_queue))) == 2


# ---------------------------------------------------------------------- nats


def nats_target(subject: str) -> dict[str, Any]:
    return {"type": "nats", "connection": "main", "subject": subject}


async def stream_messages(stream: JetStream) -> list[Any]:
    nc = await nats.connect(f"nats://{HOST}:{PORTS['nats']}")
    try:
        js = nc.jetstream()
        info = await js.stream_info(stream.name)
        first, count = info.state.first_seq, info.state.messages
        return [await js.get_msg(stream.name, seq) for seq in range(first, first + count)]
    finally:
        await nc.close()


def test_nats_run_arrives_once_with_its_headers(nats_stream: JetStream) -> None:
    call = due_call(nats_target(nats_stream.subject), payload=["a", 1])
    deliverer = make("nats")
    outcome = run(deliverer, lambda: deliver(deliverer, call))
    [message] = asyncio.run(stream_messages(nats_stream))
    assert outcome == SUCCEEDED
    assert message.subject == nats_stream.subject
    assert (
        message.data
        == (
            f'{{"job_id":"{call.job_id}","scheduled_at":"{SCHEDULED_AT}","attempt":1,'
            f'"idempotency_key":"{key_of(call)}","payload":["a", 1]}}'
        ).encode()
    )
    assert message.headers == {
        "Nats-Msg-Id": key_of(call),
        "Schedd-Job-Id": call.job_id,
        "Schedd-Scheduled-At": SCHEDULED_AT,
        "Schedd-Attempt": "1",
    }


def test_nats_same_idempotency_key_is_stored_once(nats_stream: JetStream) -> None:
    call = due_call(nats_target(nats_stream.subject))
    again = call._replace(attempt=2)  # the same run: the same key
    deliverer = make("nats")

    async def scenario() -> list[Outcome]:
        return [await deliver(deliverer, call), await deliver(deliverer, again)]

    assert run(deliverer, scenario) == [SUCCEEDED, SUCCEEDED]
    [message] = asyncio.run(stream_messages(nats_stream))
    assert message.headers["Schedd-Attempt"] == "1"


def test_nats_subject_without_a_stream_is_a_retried_attempt(nats_service: None) -> None:
    subject = unique("nostream").replace("-", "_") + ".runs"
    deliverer = make("nats")
    outcome = run(deliverer, lambda: deliver(deliverer, due_call(nats_target(subject))))
    assert outcome == Outcome(
        verdict=Verdict.RETRY, status=None, error=f"no stream captures subject {subject!r}"
    )


def test_nats_lost_connection_is_made_again(nats_stream: JetStream) -> None:
    deliverer = make("nats")

    async def scenario() -> list[Outcome]:
        first = await deliver(deliverer, due_call(nats_target(nats_stream.subject)))
        [link] = deliverer.pool.links()
        await link.client.nc.close()
        lost = await deliver(deliverer, due_call(nats_target(nats_stream.subject)))
        return [first, lost, await deliver(deliverer, due_call(nats_target(nats_stream.subject)))]

    first, lost, again = run(deliverer, scenario)
    assert first == again == SUCCEEDED
    assert lost.verdict is Verdict.RETRY
    assert lost.error is not None and lost.error.startswith("connection down:")
    assert len(asyncio.run(stream_messages(nats_stream))) == 2


# ---------------------------------------------------------------------- every kind


def target_of(kind: str, name: str) -> dict[str, Any]:
    if kind == "redis":
        return {"type": "redis_stream", "connection": "main", "stream": name}
    if kind == "rabbitmq":
        return rabbit_target("", name)
    return nats_target(name)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_closed_port_fails_fast_and_is_not_hammered(kind: str) -> None:
    deliverer = make(kind, connection(kind, port=closed_port()), backoff_initial_s=30)
    call = due_call(target_of(kind, "nowhere"))

    async def scenario() -> tuple[Outcome, Outcome, float, int]:
        started = time.monotonic()
        first = await deliver(deliverer, call)
        second = await deliver(deliverer, call)
        [link] = deliverer.pool.links()
        states = {
            state: counted("schedd_broker_connections", kind=kind_of[kind], state=state)
            for state in ("up", "down")
        }
        assert states == {"up": 0, "down": 1}  # the gauge reports this deliverer's pool
        return first, second, time.monotonic() - started, link.connects

    kind_of = {"redis": "redis_stream", "rabbitmq": "rabbitmq", "nats": "nats"}
    first, second, elapsed_s, connects = run(deliverer, scenario)
    assert elapsed_s < 2
    assert first.verdict is second.verdict is Verdict.RETRY
    assert first.error is not None and first.error.startswith(f"connection down: connect to {HOST}")
    assert second.error == first.error  # the same cause, without trying again
    assert connects == 1


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_500_concurrent_deliveries_on_one_connection_all_arrive(kind: str) -> None:
    require(kind)
    name = unique("burst").replace("-", "_")
    deliverer = make(kind)
    calls = [
        due_call(target_of(kind, name + ".runs" if kind == "nats" else name)) for _ in range(500)
    ]
    asyncio.run(_prepare(kind, name))

    async def scenario() -> tuple[list[Outcome], int]:
        outcomes = await asyncio.gather(*(deliver(deliverer, c) for c in calls))
        [link] = deliverer.pool.links()
        return outcomes, link.connects

    try:
        outcomes, connects = run(deliverer, scenario)
        arrived = asyncio.run(_arrived(kind, name))
    finally:
        asyncio.run(_cleanup(kind, name))
    assert outcomes == [SUCCEEDED] * 500
    assert sorted(arrived) == sorted(key_of(c) for c in calls)
    assert connects == 1


async def _prepare(kind: str, name: str) -> None:
    if kind == "rabbitmq":
        conn = await aio_pika.connect(f"amqp://guest:guest@{HOST}:{PORTS['rabbitmq']}/")
        async with conn:
            await (await conn.channel()).declare_queue(name)
    elif kind == "nats":
        nc = await nats.connect(f"nats://{HOST}:{PORTS['nats']}")
        await nc.jetstream().add_stream(name=name, subjects=[name + ".runs"])
        await nc.close()


async def _arrived(kind: str, name: str) -> list[str]:
    """The idempotency keys of what arrived."""
    if kind == "redis":
        return [f[b"idempotency_key"].decode() for _, f in await stream_entries(name)]
    if kind == "rabbitmq":
        messages = await queued(Queue(name, "", name))
        return [m.message_id or "" for m in messages]
    messages = await stream_messages(JetStream(name, name + ".runs"))
    return [m.headers["Nats-Msg-Id"] for m in messages]


async def _cleanup(kind: str, name: str) -> None:
    if kind == "redis":
        client = redis.asyncio.Redis(host=HOST, port=PORTS["redis"])
        await client.delete(name)
        await client.aclose()
    elif kind == "rabbitmq":
        conn = await aio_pika.connect(f"amqp://guest:guest@{HOST}:{PORTS['rabbitmq']}/")
        async with conn:
            await (await conn.channel()).queue_delete(name)
    else:
        nc = await nats.connect(f"nats://{HOST}:{PORTS['nats']}")
        await nc.jetstream().delete_stream(name)
        await nc.close()


@pytest.mark.parametrize(
    ("kind", "version"),
    [
        ("redis", r"redis \d+\.\d+\.\d+"),
        ("rabbitmq", r"RabbitMQ \d+\.\d+\.\d+"),
        ("nats", r"nats-server \d+\.\d+\.\d+"),
    ],
)
def test_probe_names_the_server_version(kind: str, version: str) -> None:
    require(kind)
    ok, detail = asyncio.run(probe(connection(kind)))
    assert ok, detail
    assert re.fullmatch(version, detail)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_probe_of_a_closed_port_is_an_error(kind: str) -> None:
    ok, detail = asyncio.run(probe(connection(kind, port=closed_port()), 2.0))
    assert not ok
    assert detail.startswith(f"connect to {HOST} failed:")


def test_probe_error_never_holds_the_password(rabbitmq_service: None) -> None:
    url = "amqp://guest:wr0ng-pa55@broker.invalid:5672/"
    ok, detail = asyncio.run(probe(connection("rabbitmq", url=url)))
    assert not ok
    assert "wr0ng-pa55" not in detail


# ---------------------------------------------------------------------- through the caller


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    started = Node(tmp_path, TargetGuard(["127.0.0.0/8"]))
    try:
        yield started
    finally:
        started.close()


def through_caller(
    node: Node, kind: str, target: dict[str, Any], until_runs: tuple[str, int]
) -> int:
    """Claim a run of a job with `target` and let a Caller holding the real deliverer of `kind`
    deliver it until its run is `until_runs`; the run's scheduled_at_ms."""
    local = connection(kind)
    lookup = {("t", "main"): local}
    deliverer = KINDS[kind](KEYS, lambda tenant_id, name: found(lookup.get((tenant_id, name))))
    with_deliverers(node, deliverer)
    node.tenant("t")
    scheduled_at_ms = wall_ms()
    stored = {
        "tenant_id": "t",
        "name": "main",
        "kind": local.kind,
        "url": local.url,
        "host": "broker.invalid",
        "addresses": list(local.pinned_addresses),
    }
    assert node.apply("create_connection", stored, ts_ms=scheduled_at_ms)["status"] == "ok"
    item = _job_item("j-broker", scheduled_at_ms, target, NO_WAIT)
    assert node.apply("create_jobs", {"tenant_id": "t", "jobs": [item]}, ts_ms=scheduled_at_ms)
    claims = {"node_id": "n1", "claims": [_claim("j-broker", scheduled_at_ms)]}
    assert node.apply("claim_runs", claims, ts_ms=scheduled_at_ms)["claimed"] == 1

    async def scenario() -> None:
        node.caller.wake_threadsafe()
        await until(lambda: node.runs(["j-broker"])["j-broker"] == until_runs, str(until_runs))

    run_with(node, scenario)
    return scheduled_at_ms


def counted(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_the_caller_delivers_a_redis_stream_run(node: Node, redis_stream: Stream) -> None:
    succeeded = {"kind": "redis_stream", "outcome": "succeeded"}
    before = counted("schedd_callbacks_total", **succeeded)
    lagged = counted("schedd_delivery_lag_seconds_count", target="redis_stream")
    at_ms = through_caller(node, "redis", redis_target(redis_stream), ("succeeded", 1))
    [(_, fields)] = asyncio.run(stream_entries(redis_stream.key))
    assert fields[b"idempotency_key"] == idempotency_key("j-broker", at_ms).encode()
    assert node.attempts("j-broker") == [(1, "succeeded", None)]
    # Metrics by kind: the attempt, its lag, and the connection the deliverer held.
    assert counted("schedd_callbacks_total", **succeeded) == before + 1
    assert counted("schedd_delivery_lag_seconds_count", target="redis_stream") == lagged + 1
    assert counted("schedd_callback_seconds_count", kind="redis_stream", status_class="ok") >= 1


def test_the_caller_delivers_a_rabbitmq_run(node: Node, rabbitmq_queue: Queue) -> None:
    target = rabbit_target(rabbitmq_queue.exchange, rabbitmq_queue.routing_key)
    at_ms = through_caller(node, "rabbitmq", target, ("succeeded", 1))
    [message] = asyncio.run(queued(rabbitmq_queue))
    assert message.message_id == idempotency_key("j-broker", at_ms)


def test_the_caller_retries_a_nats_run_no_stream_captures(node: Node, nats_service: None) -> None:
    subject = unique("nostream").replace("-", "_") + ".runs"
    through_caller(node, "nats", nats_target(subject), ("dead", 3))
    error = f"no stream captures subject {subject!r}"
    assert node.attempts("j-broker") == [(n, "failed", error) for n in (1, 2, 3)]
