"""The rabbitmq deliverer: one persistent, mandatory message per attempt on a channel with
publisher confirms; only the broker's confirm is a success.

Each exchange gets its own channel on the connection, because AMQP closes a channel that
publishes to a missing exchange: that closes only the channel of the missing exchange, and the
next publish to it opens a new one. Never raises for a remote failure; knows nothing of the
outbox loop (caller.py) or the log.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import OrderedDict
from typing import Any

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractChannel
from aiormq.abc import AbstractChannel as UnderlayChannel
from aiormq.connection import TransportFactory
from pamqp.commands import Basic
from yarl import URL

from schedd.delivery.brokers import (
    BrokerDeliverer,
    Connector,
    Limits,
    LinkBroken,
    describe,
    message_body,
    retry_outcome,
    tls_context,
)
from schedd.delivery.outcome import Outcome, Verdict
from schedd.delivery.read_limits import FrameGauge, ReadBudgets
from schedd.model import BrokerConnection, idempotency_key
from schedd.store.outbox import DueCall
from schedd.targets.rabbitmq import RabbitMqTarget
from schedd.timeformat import format_instant

MAX_CHANNELS = 64  # per connection: the least recently used beyond this is closed
PERSISTENT = 2
HEADER_BYTES = 7  # aiormq reads a frame's type, channel and size, then its size + 1 bytes


class _FrameReader(asyncio.StreamReader):
    """The stream aiormq reads frames from, checking the size a frame announces against the
    frame bound and the tenant's budget before waiting for its bytes (aiormq would buffer a
    frame announced as 0x7FFFFFF0 bytes whole)."""

    def __init__(self, gauge: FrameGauge) -> None:
        super().__init__()
        self._gauge = gauge

    async def readexactly(self, n: int) -> bytes:
        if n < HEADER_BYTES:
            return await super().readexactly(n)
        self._gauge.hold(n)
        try:
            return await super().readexactly(n)
        finally:
            self._gauge.hold(0)


class _BoundedTransport(TransportFactory):
    """Opens aiormq's socket to the pinned address in its URL, TLS naming `server_hostname`
    (the URL's host), read through a _FrameReader."""

    def __init__(
        self, gauge: FrameGauge, tls: ssl.SSLContext | None, server_hostname: str | None
    ) -> None:
        self._gauge = gauge
        self._tls = tls
        self._server_hostname = server_hostname

    async def create(
        self, url: URL, **kwargs: Any
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        loop = asyncio.get_running_loop()
        reader = _FrameReader(self._gauge)
        protocol = asyncio.StreamReaderProtocol(reader)
        transport, _ = await loop.create_connection(
            lambda: protocol,
            str(url.host),
            url.port or 0,
            ssl=self._tls,
            server_hostname=self._server_hostname,
        )
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


class _PinnedConnection(aio_pika.Connection):
    """An aio-pika connection opened through a _BoundedTransport (aio-pika keeps only the
    keyword arguments it knows; aiormq takes this one)."""

    def __init__(self, url: URL, *, transport: _BoundedTransport) -> None:
        super().__init__(url)
        self.kwargs["transport_factory"] = transport


class Channels:
    """One connection's client: the AMQP connection and a confirming channel per exchange.

    Until a publish to an exchange has been answered on its channel, publishes to it go one at
    a time: a missing exchange (or one the user may not write to) closes the channel, and
    frames other publishes had already pipelined on it would reach the broker after the close,
    which it punishes by closing the whole connection."""

    def __init__(self, connection: aio_pika.Connection) -> None:
        self.connection = connection
        self._channels: OrderedDict[str, AbstractChannel] = OrderedDict()
        self._proven: set[str] = set()  # exchanges whose channel has answered a publish
        self._first: dict[str, asyncio.Lock] = {}
        self._opening = asyncio.Lock()  # this connection's only: others never wait on it
        self._closing: set[asyncio.Future[None]] = set()

    @property
    def is_open(self) -> bool:
        """False once the connection is lost (aio-pika's own `is_closed` only knows close())."""
        transport = self.connection.transport
        return transport is not None and not transport.connection.is_closed

    async def publish(
        self, exchange: str, routing_key: str, body: bytes, properties: Basic.Properties
    ) -> None:
        """Publish mandatory and wait for the confirm; raises what aiormq raises."""
        if exchange in self._proven:
            return await self._publish(exchange, routing_key, body, properties)
        async with self._first.setdefault(exchange, asyncio.Lock()):
            if exchange not in self._proven:
                try:
                    await self._publish(exchange, routing_key, body, properties)
                except aiormq.exceptions.DeliveryError:
                    self._proven.add(exchange)  # returned or nacked: the channel is open
                    raise
                self._proven.add(exchange)
                return None
        return await self._publish(exchange, routing_key, body, properties)

    async def _publish(
        self, exchange: str, routing_key: str, body: bytes, properties: Basic.Properties
    ) -> None:
        channel = await self._channel(exchange)
        try:
            await channel.basic_publish(
                body,
                exchange=exchange,
                routing_key=routing_key,
                properties=properties,
                mandatory=True,
            )
        except aiormq.exceptions.ChannelClosed:
            self._proven.discard(exchange)  # deleted, or access taken away: prove it again
            raise

    async def _channel(self, exchange: str) -> UnderlayChannel:
        """The open channel for publishing to `exchange`, opened if it is not."""
        channel = self._channels.get(exchange)
        if channel is None or channel.is_closed:
            async with self._opening:
                channel = self._channels.get(exchange)
                if channel is None or channel.is_closed:
                    channel = await self._open(exchange)
        self._channels.move_to_end(exchange)
        return await channel.get_underlay_channel()

    async def _open(self, exchange: str) -> AbstractChannel:
        channel = self.connection.channel(publisher_confirms=True, on_return_raises=True)
        await channel.initialize()
        self._channels[exchange] = channel
        self._proven.discard(exchange)
        while len(self._channels) > MAX_CHANNELS:
            name, oldest = self._channels.popitem(last=False)
            self._proven.discard(name)
            self._first.pop(name, None)
            closing = asyncio.ensure_future(oldest.close())  # its publishes fail: retried
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        return channel

    async def close(self) -> None:
        await self.connection.close()


class AmqpConnector:
    """Clients for `amqp://` and `amqps://` URLs (user, password and vhost from the URL; its
    query options are ignored: TLS trust is schedd's), connected to a pinned address."""

    def __init__(self, tls: ssl.SSLContext | None, limits: Limits, reads: ReadBudgets) -> None:
        self._tls = tls
        self._limits = limits
        self._reads = reads

    async def connect(self, connection: BrokerConnection, address: str) -> Channels:
        url = URL(connection.url)
        is_tls = url.scheme == "amqps"
        pinned = url.with_query(None).with_host(address)
        if url.explicit_port is None:
            pinned = pinned.with_port(5671 if is_tls else 5672)
        gauge = FrameGauge(self._reads.tenant(connection.tenant_id), "an AMQP frame")
        transport = _BoundedTransport(
            gauge, tls_context(self._tls) if is_tls else None, url.host if is_tls else None
        )
        amqp = _PinnedConnection(pinned, transport=transport)
        await amqp.connect(timeout=self._limits.connect_timeout_s)
        return Channels(amqp)

    async def close(self, client: Channels) -> None:
        await client.close()


class RabbitMqDeliverer(BrokerDeliverer[Channels, RabbitMqTarget]):
    """Makes rabbitmq attempts: a persistent JSON message, `message_id` the idempotency key,
    published mandatory with confirms; unroutable, nacked or refused is a retried attempt."""

    kind = "rabbitmq"
    target_type = RabbitMqTarget

    def connector(self, tls: ssl.SSLContext | None, reads: ReadBudgets) -> Connector[Channels]:
        return AmqpConnector(tls, self.limits, reads)

    async def publish(
        self, client: Channels, target: RabbitMqTarget, call: DueCall, payload: str
    ) -> Outcome:
        if not client.is_open:
            raise LinkBroken("the connection was closed")
        try:
            await client.publish(
                target.exchange,
                target.routing_key,
                message_body(call, payload),
                message_properties(call),
            )
        except aiormq.exceptions.PublishError:  # returned: no queue is bound for it
            return retry_outcome(
                f"unroutable: exchange {target.exchange!r} routed routing key "
                f"{target.routing_key!r} to no queue"
            )
        except aiormq.exceptions.DeliveryError:
            return retry_outcome("the broker nacked the message")
        except aiormq.exceptions.ChannelClosed as exc:  # NOT_FOUND, ACCESS_REFUSED, ...: the
            return retry_outcome(f"rabbitmq closed the channel: {exc}")  # next publish reopens it
        except (aiormq.exceptions.AMQPError, RuntimeError) as exc:  # ChannelInvalidStateError
            if not client.is_open:
                raise LinkBroken(describe(exc, "")) from exc
            return retry_outcome(f"rabbitmq: {describe(exc, '')}")
        return Outcome(verdict=Verdict.SUCCEEDED, status=None)


def message_properties(call: DueCall) -> Basic.Properties:
    """Persistent JSON, `message_id` the idempotency key, the run in the headers."""
    return Basic.Properties(
        content_type="application/json",
        delivery_mode=PERSISTENT,
        message_id=idempotency_key(call.job_id, call.scheduled_at_ms),
        headers={
            "job_id": call.job_id,
            "scheduled_at": format_instant(call.scheduled_at_ms),
            "attempt": call.attempt,
        },
    )


async def server_version(client: Channels) -> str:
    """ "RabbitMQ 3.13.1": the server's product and version, from its Connection.Start."""
    transport = client.connection.transport
    properties = {} if transport is None else transport.connection.server_properties
    product, version = (
        _text(properties.get("product"), "AMQP"),
        _text(properties.get("version"), "unknown version"),
    )
    return f"{product} {version}"


def _text(value: object, default: str) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else default


# What schedd.targets.rabbitmq (its TargetKind.delivery) names this module's parts by.
DELIVERER = RabbitMqDeliverer
CONNECTOR = AmqpConnector
