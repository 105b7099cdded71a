"""The brokers the broker deliverers are tested against (Redis, RabbitMQ, NATS with JetStream on
loopback), and the calls, tenants and connections those tests hand them.

A service that does not answer skips its tests, except under CI=true, where it fails them with
the service and the port named. Every stream, queue and JetStream stream made here is deleted
by the fixture that made it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aio_pika
import nats
import pytest
import redis.asyncio

from schedd.model import BrokerConnection
from schedd.store.outbox import DueCall
from schedd.store.queries import Tenant
from tests.ports import free_port

HOST = "127.0.0.1"
PORTS = {"redis": 6379, "rabbitmq": 5672, "nats": 4222, "postgres": 5432}
URLS = {  # the host name never resolves: a delivery that works went to the pinned address
    "redis": "redis://broker.invalid:6379/0",
    "rabbitmq": "amqp://guest:guest@broker.invalid:5672/",
    "nats": "nats://broker.invalid:4222",
}
SCHEDULED_AT_MS = 1_790_000_000_000  # 2026-09-21T14:13:20Z
TENANT = Tenant(
    tenant_id="t-brokers",
    name="brokers",
    signing_secret="whsec_" + "A" * 44,
    max_active_jobs=1000,
    dispatch_rate=1000,
    allowed_hosts=[],
    live_jobs=0,
    created_at_ms=0,
    updated_at_ms=0,
)
_seqs = itertools.count(1)


def require(service: str) -> None:
    """Skip (or under CI=true fail) unless `service` answers on its loopback port."""
    port = PORTS[service]
    try:
        with socket.create_connection((HOST, port), timeout=2):
            return
    except OSError as exc:
        message = f"{service} is not reachable at {HOST}:{port} ({exc})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}: CI must run it", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def redis_service() -> None:
    require("redis")


@pytest.fixture(scope="session")
def rabbitmq_service() -> None:
    require("rabbitmq")


@pytest.fixture(scope="session")
def nats_service() -> None:
    require("nats")


def unique(prefix: str) -> str:
    return f"schedd-test-{prefix}-{uuid.uuid4().hex[:12]}"


def connection(
    kind: str, *, name: str = "main", url: str | None = None, port: int | None = None
) -> BrokerConnection:
    """The tenant's connection `name` to the local `kind` broker (or to `port` on loopback)."""
    text = url or URLS[kind]
    if port is not None:
        text = text.replace(f":{PORTS[kind]}", f":{port}")
    return BrokerConnection(
        tenant_id=TENANT.tenant_id,
        name=name,
        kind=kind,
        url=text,
        pinned_addresses=(HOST,),
        created_ms=1,
    )


def due_call(
    target: dict[str, Any], *, job_id: str | None = None, attempt: int = 1, payload: Any = None
) -> DueCall:
    """An outbox row's attempt as the caller hands it to a deliverer."""
    return DueCall(
        seq=next(_seqs),
        partition=0,
        tenant_id=TENANT.tenant_id,
        job_id=job_id or f"job-{uuid.uuid4().hex[:12]}",
        scheduled_at_ms=SCHEDULED_AT_MS,
        attempt=attempt,
        target=json.dumps(target),
        payload=json.dumps({"report": "daily"} if payload is None else payload),
        retry="{}",
    )


@dataclass(frozen=True)
class Stream:
    """A Redis stream key for one test (deleted after it)."""

    key: str


@pytest.fixture
def redis_stream(redis_service: None) -> Iterator[Stream]:
    stream = Stream(unique("stream"))
    yield stream

    async def delete() -> None:
        client = redis.asyncio.Redis(host=HOST, port=PORTS["redis"])
        try:
            await client.delete(stream.key)
        finally:
            await client.aclose()

    asyncio.run(delete())


@dataclass(frozen=True)
class Queue:
    """A RabbitMQ queue, and an exchange bound to it with `routing_key`, for one test."""

    name: str
    exchange: str
    routing_key: str


@pytest.fixture
def rabbitmq_queue(rabbitmq_service: None) -> Iterator[Queue]:
    queue = Queue(unique("queue"), unique("exchange"), "runs.due")

    async def declare() -> None:
        conn = await aio_pika.connect(f"amqp://guest:guest@{HOST}:{PORTS['rabbitmq']}/")
        async with conn:
            channel = await conn.channel()
            exchange = await channel.declare_exchange(queue.exchange, "direct")
            declared = await channel.declare_queue(queue.name)
            await declared.bind(exchange, queue.routing_key)

    async def delete() -> None:
        conn = await aio_pika.connect(f"amqp://guest:guest@{HOST}:{PORTS['rabbitmq']}/")
        async with conn:
            channel = await conn.channel()
            await channel.queue_delete(queue.name)
            await channel.exchange_delete(queue.exchange)

    asyncio.run(declare())
    yield queue
    asyncio.run(delete())


@dataclass(frozen=True)
class JetStream:
    """A JetStream stream capturing `subject`, for one test."""

    name: str
    subject: str


@pytest.fixture
def nats_stream(nats_service: None) -> Iterator[JetStream]:
    name = unique("stream").replace("-", "_")
    stream = JetStream(name, f"{name}.runs")

    async def create() -> None:
        nc = await nats.connect(f"nats://{HOST}:{PORTS['nats']}")
        try:
            await nc.jetstream().add_stream(name=stream.name, subjects=[stream.subject])
        finally:
            await nc.close()

    async def delete() -> None:
        nc = await nats.connect(f"nats://{HOST}:{PORTS['nats']}")
        try:
            await nc.jetstream().delete_stream(stream.name)
        finally:
            await nc.close()

    asyncio.run(create())
    yield stream
    asyncio.run(delete())


def closed_port() -> int:
    """A loopback port nobody listens on (free in this worker's range: tests/ports.py)."""
    return free_port()


async def found(connection: BrokerConnection | None) -> BrokerConnection | None:
    """A deliverer's `lookup` answers asynchronously (the node reads the store off its loop)."""
    return connection
