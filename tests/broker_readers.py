"""Reading back what schedd published to the loopback brokers (tests/brokers.py), as a tenant's
consumer would: a Redis stream with XREAD, a RabbitMQ queue bound to an exchange with a consumer,
a JetStream stream with a pull consumer. Shared by the cluster tests and benchmarks/bench_brokers.

A `Reader` runs the consumers on an event loop of its own thread from `start()` to `close()`,
recording each message with the wall-clock time it was received (the lag a tenant sees). Every
destination is made fresh (`prepare`) and deleted after (`cleanup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aio_pika
import nats
import redis.asyncio
from aio_pika.abc import AbstractIncomingMessage

HOST = "127.0.0.1"
PORTS = {"redis": 6379, "rabbitmq": 5672, "nats": 4222}
AMQP_URL = f"amqp://guest:guest@{HOST}:{PORTS['rabbitmq']}/"
NATS_URL = f"nats://{HOST}:{PORTS['nats']}"
KINDS = ("redis_stream", "rabbitmq", "nats")  # target types


@dataclass(frozen=True, slots=True)
class Received:
    """One message as the broker handed it over: the run it names (`body`, parsed from the
    message's JSON or fields) and what else the broker carried with it (`meta`)."""

    kind: str  # the target type
    at: float  # wall clock (s) when the reader got it
    body: dict[str, Any]  # job_id, scheduled_at, attempt, idempotency_key, payload
    meta: dict[str, Any]

    @property
    def key(self) -> str:
        return str(self.body["idempotency_key"])

    @property
    def job_id(self) -> str:
        return str(self.body["job_id"])


Sink = Callable[[Received], None]


class Destination(Protocol):
    kind: str

    def target(self, connection: str) -> dict[str, Any]: ...

    async def prepare(self) -> None: ...

    async def consume(self, sink: Sink, stop: asyncio.Event) -> None: ...

    async def cleanup(self) -> None: ...


def unique(prefix: str) -> str:
    return f"schedd-e2e-{prefix}-{uuid.uuid4().hex[:10]}"


# ---------------------------------------------------------------------- Redis


@dataclass
class RedisStream:
    """A stream key, read from its start with XREAD."""

    key: str = field(default_factory=lambda: unique("stream"))
    kind: str = "redis_stream"

    def target(self, connection: str) -> dict[str, Any]:
        return {"type": "redis_stream", "connection": connection, "stream": self.key}

    async def prepare(self) -> None:
        return None

    async def consume(self, sink: Sink, stop: asyncio.Event) -> None:
        client = redis.asyncio.Redis(host=HOST, port=PORTS["redis"])
        last = "0-0"
        try:
            while not stop.is_set():
                answer = await client.xread({self.key: last}, count=5000, block=200)
                now = time.time()
                for _, entries in answer:
                    for entry_id, raw in entries:
                        last = entry_id.decode()
                        fields = {k.decode(): v.decode() for k, v in raw.items()}
                        sink(Received(self.kind, now, redis_body(fields), {"fields": fields}))
        finally:
            await client.aclose()

    async def cleanup(self) -> None:
        client = redis.asyncio.Redis(host=HOST, port=PORTS["redis"])
        try:
            await client.delete(self.key)
        finally:
            await client.aclose()


def redis_body(fields: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = dict(fields)
    with contextlib.suppress(KeyError, ValueError):
        body["attempt"] = int(fields["attempt"])
        body["payload"] = json.loads(fields["payload"])
    return body


# ---------------------------------------------------------------------- RabbitMQ


@dataclass
class RabbitQueue:
    """A direct exchange and a queue bound to it with `routing_key`, read by a consumer."""

    exchange: str = field(default_factory=lambda: unique("exchange"))
    queue: str = field(default_factory=lambda: unique("queue"))
    routing_key: str = "runs.due"
    kind: str = "rabbitmq"

    def target(self, connection: str) -> dict[str, Any]:
        return {
            "type": "rabbitmq",
            "connection": connection,
            "exchange": self.exchange,
            "routing_key": self.routing_key,
        }

    async def prepare(self) -> None:
        async with await aio_pika.connect(AMQP_URL) as conn:
            channel = await conn.channel()
            exchange = await channel.declare_exchange(self.exchange, "direct")
            queue = await channel.declare_queue(self.queue)
            await queue.bind(exchange, self.routing_key)

    async def consume(self, sink: Sink, stop: asyncio.Event) -> None:
        async with await aio_pika.connect(AMQP_URL) as conn:
            channel = await conn.channel()
            await channel.set_qos(prefetch_count=2000)
            queue = await channel.declare_queue(self.queue, passive=True)

            async def take(message: AbstractIncomingMessage) -> None:
                meta = {
                    "content_type": message.content_type,
                    "delivery_mode": int(message.delivery_mode or 0),
                    "message_id": message.message_id,
                    "headers": dict(message.headers),
                    "exchange": message.exchange,
                    "routing_key": message.routing_key,
                }
                sink(Received(self.kind, time.time(), json.loads(message.body), meta))

            tag = await queue.consume(take, no_ack=True)
            await stop.wait()
            await queue.cancel(tag)

    async def cleanup(self) -> None:
        async with await aio_pika.connect(AMQP_URL) as conn:
            channel = await conn.channel()
            await channel.queue_delete(self.queue)
            await channel.exchange_delete(self.exchange)


# ---------------------------------------------------------------------- NATS JetStream


@dataclass
class NatsStream:
    """A JetStream stream capturing `<name>.runs` (the default 2-minute duplicate window),
    read by a pull consumer from its first message."""

    name: str = field(default_factory=lambda: unique("stream").replace("-", "_"))
    kind: str = "nats"

    @property
    def subject(self) -> str:
        return f"{self.name}.runs"

    def target(self, connection: str) -> dict[str, Any]:
        return {"type": "nats", "connection": connection, "subject": self.subject}

    async def prepare(self) -> None:
        nc = await nats.connect(NATS_URL)
        try:
            await nc.jetstream().add_stream(name=self.name, subjects=[self.subject])
        finally:
            await nc.close()

    async def consume(self, sink: Sink, stop: asyncio.Event) -> None:
        nc = await nats.connect(NATS_URL)
        try:
            subscription = await nc.jetstream().pull_subscribe(self.subject, stream=self.name)
            while not stop.is_set():
                try:
                    messages = await subscription.fetch(batch=1000, timeout=0.2)
                except TimeoutError:  # nats-py raises its own or asyncio's when none came
                    continue
                now = time.time()
                for message in messages:
                    meta = {"subject": message.subject, "headers": dict(message.headers or {})}
                    sink(Received(self.kind, now, json.loads(message.data), meta))
                    await message.ack()
        finally:
            await nc.close()

    async def stored(self) -> int:
        """How many messages the stream holds (its duplicate window dropped the rest)."""
        nc = await nats.connect(NATS_URL)
        try:
            info = await nc.jetstream().stream_info(self.name)
            return int(info.state.messages)
        finally:
            await nc.close()

    async def cleanup(self) -> None:
        nc = await nats.connect(NATS_URL)
        try:
            await nc.jetstream().delete_stream(self.name)
        finally:
            await nc.close()


def destination(kind: str) -> Destination:
    """A fresh destination of target type `kind`."""
    made: Destination
    if kind == "redis_stream":
        made = RedisStream()
    elif kind == "rabbitmq":
        made = RabbitQueue()
    elif kind == "nats":
        made = NatsStream()
    else:
        raise ValueError(kind)
    return made


# ---------------------------------------------------------------------- the reader


class Reader:
    """Consumes `destinations` on a thread of its own until `close()`, collecting `Received`."""

    def __init__(self, destinations: Sequence[Destination]) -> None:
        self.destinations = list(destinations)
        self._lock = threading.Lock()
        self._received: list[Received] = []
        self._keys: set[str] = set()
        self._errors: list[BaseException] = []
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="broker-reader", daemon=True)

    def start(self) -> Reader:
        self._thread.start()
        if not self._started.wait(30):
            raise RuntimeError("the broker reader did not start")
        self.check()
        return self

    def close(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def __enter__(self) -> Reader:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def check(self) -> None:
        """Raise what a consumer died of, if one did."""
        with self._lock:
            if self._errors:
                raise RuntimeError(f"a broker consumer failed: {self._errors[0]}")

    def received(self, kind: str | None = None) -> list[Received]:
        self.check()
        with self._lock:
            return [r for r in self._received if kind is None or r.kind == kind]

    def count(self) -> int:
        with self._lock:
            return len(self._received)

    def distinct(self) -> int:
        """How many runs (idempotency keys) arrived so far."""
        with self._lock:
            return len(self._keys)

    def keys(self, kind: str | None = None) -> set[str]:
        return {r.key for r in self.received(kind)}

    def _sink(self, message: Received) -> None:
        with self._lock:
            self._received.append(message)
            self._keys.add(message.key)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self._consume(d, self._stop), name=d.kind)
            for d in self.destinations
        ]
        await asyncio.sleep(0.3)  # the consumers subscribe (their start is asynchronous)
        self._started.set()
        await asyncio.gather(*tasks)

    async def _consume(self, dest: Destination, stop: asyncio.Event) -> None:
        try:
            await dest.consume(self._sink, stop)
        except Exception as exc:
            with self._lock:
                self._errors.append(RuntimeError(f"{dest.kind}: {exc!r}"))
                traceback.print_exc()


@contextlib.contextmanager
def reading(destinations: Sequence[Destination]) -> Iterator[Reader]:
    """Prepare the destinations, read them while the block runs, and always delete them."""
    try:
        for dest in destinations:
            asyncio.run(dest.prepare())
        with Reader(destinations) as reader:
            yield reader
    finally:
        for dest in destinations:
            with contextlib.suppress(Exception):
                asyncio.run(dest.cleanup())
