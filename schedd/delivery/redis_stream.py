"""The redis_stream deliverer: one XADD per attempt to the target's stream on the tenant's Redis;
the XADDs of attempts made at the same moment on one connection go out as one pipeline.

Never raises for a remote failure; knows nothing of the outbox loop (caller.py) or the log.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import redis.asyncio
import redis.exceptions
from redis._parsers.resp2 import _AsyncRESP2Parser
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.typing import EncodableT, FieldT

from schedd.delivery.brokers import (
    BrokerDeliverer,
    Connector,
    Limits,
    LinkBroken,
    describe,
    message_fields,
    tls_context,
)
from schedd.delivery.outcome import Outcome, Verdict
from schedd.delivery.read_limits import FrameGauge, ReadBudgets, TenantReads
from schedd.model import BrokerConnection
from schedd.store.outbox import DueCall
from schedd.targets.redis_stream import RedisStreamTarget

DEFAULT_PORT = 6379
PIPELINES = 4  # in flight at once on one connection
Fields = dict[str, str]
Pending = tuple[str, Fields, int | None, "asyncio.Future[bytes]"]  # stream, fields, maxlen, id


class StreamWriter:
    """One connection's Redis client. XADDs asked for in one turn of the event loop go out as
    one pipeline (one round trip) on the next turn; at most PIPELINES pipelines are in flight,
    and what is asked for meanwhile waits for the next one (so a slow server never needs more
    connections than PIPELINES)."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self._batch: list[Pending] = []
        self._is_flush_due = False
        self._sending: set[asyncio.Task[None]] = set()

    async def xadd(self, stream: str, fields: Fields, maxlen: int | None) -> bytes:
        """The id of the entry added to `stream` (trimmed to about `maxlen` entries)."""
        added: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._batch.append((stream, fields, maxlen, added))
        self._schedule()
        return await added

    def _schedule(self) -> None:
        if self._batch and not self._is_flush_due and len(self._sending) < PIPELINES:
            self._is_flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._is_flush_due = False
        batch = [pending for pending in self._batch if not pending[3].done()]  # not timed out
        self._batch = []
        if batch:
            task = asyncio.get_running_loop().create_task(self._send(batch))
            self._sending.add(task)
            task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        self._schedule()

    async def _send(self, batch: list[Pending]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for stream, fields, maxlen, _ in batch:
            pipe.xadd(
                stream, cast("dict[FieldT, EncodableT]", fields), maxlen=maxlen, approximate=True
            )
        try:
            answers = await pipe.execute(raise_on_error=False)
        except Exception as exc:  # handed to every waiter, which judges it
            answers = [exc] * len(batch)
        for (_, _, _, added), answer in zip(batch, answers, strict=True):
            if added.done():  # its attempt timed out meanwhile
                continue
            if isinstance(answer, BaseException):
                added.set_exception(answer)
            else:
                added.set_result(answer)

    async def aclose(self) -> None:
        await asyncio.gather(*self._sending, return_exceptions=True)
        await self.client.aclose()


class _BoundedParser(_AsyncRESP2Parser):
    """redis-py's RESP2 parser, counting the bytes of each reply (nested arrays included)
    against the frame bound and the tenant's budget before it reads them: a bulk string
    announced as `$1073741824` is refused before any of it is buffered."""

    def __init__(self, reads: TenantReads, socket_read_size: int) -> None:
        super().__init__(socket_read_size)
        self._gauge = FrameGauge(reads, "a redis reply")

    async def read_response(self, disable_decoding: bool = False) -> Any:
        try:
            return await super().read_response(disable_decoding)
        finally:
            self._gauge.hold(0)

    async def _readline(self) -> bytes:  # a line is bounded by the StreamReader's 64 KiB
        line: bytes = await super()._readline()
        self._gauge.hold(self._gauge.held + len(line) + 2)
        return line

    async def _read(self, length: int) -> bytes:
        self._gauge.hold(self._gauge.held + max(length, 0) + 2)
        data: bytes = await super()._read(length)
        return data

    def on_disconnect(self) -> None:
        super().on_disconnect()  # type: ignore[no-untyped-call]
        self._gauge.release()


class _PinnedTlsConnection(redis.asyncio.Connection):
    """TLS to a pinned address, the certificate verified against the URL's host name."""

    def __init__(self, *, tls: ssl.SSLContext, server_hostname: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tls = tls
        self._server_hostname = server_hostname

    def _connection_arguments(self) -> Mapping[str, Any]:
        return {
            **super()._connection_arguments(),
            "ssl": self._tls,
            "server_hostname": self._server_hostname,
        }


class RedisConnector:
    """Clients for `redis://` and `rediss://` URLs (user, password and database number from the
    URL; its query options are ignored), connected to a pinned address."""

    def __init__(self, tls: ssl.SSLContext | None, limits: Limits, reads: ReadBudgets) -> None:
        self._tls = tls
        self._limits = limits
        self._reads = reads

    async def connect(self, connection: BrokerConnection, address: str) -> StreamWriter:
        parts = urlsplit(connection.url)
        options: dict[str, Any] = {
            "host": address,
            "port": parts.port or DEFAULT_PORT,
            "username": unquote(parts.username) if parts.username else None,
            "password": unquote(parts.password) if parts.password else None,
            "db": int(parts.path.strip("/") or 0),
            "socket_connect_timeout": self._limits.connect_timeout_s,
            "socket_timeout": self._limits.publish_timeout_s,
            "retry": Retry(NoBackoff(), 0),  # the pool's backoff decides when to try again
            "max_connections": PIPELINES + 1,  # and one for a probe's INFO
            "protocol": 2,  # RESP2 (redis-py 8 speaks RESP3 by default): what _BoundedParser reads
            "parser_class": functools.partial(
                _BoundedParser, self._reads.tenant(connection.tenant_id)
            ),
        }
        if parts.scheme == "rediss":
            options |= {
                "connection_class": _PinnedTlsConnection,
                "tls": tls_context(self._tls),
                "server_hostname": parts.hostname,
            }
        client = redis.asyncio.Redis.from_pool(redis.asyncio.ConnectionPool(**options))
        try:
            await client.ping()
        except BaseException:
            await client.aclose()
            raise
        return StreamWriter(client)

    async def close(self, client: StreamWriter) -> None:
        await client.aclose()


class RedisStreamDeliverer(BrokerDeliverer[StreamWriter, RedisStreamTarget]):
    """Makes redis_stream attempts: `XADD stream [MAXLEN ~ n] * job_id .. scheduled_at ..
    attempt .. idempotency_key .. payload ..`; the entry id is the success."""

    kind = "redis_stream"
    target_type = RedisStreamTarget

    def connector(self, tls: ssl.SSLContext | None, reads: ReadBudgets) -> Connector[StreamWriter]:
        return RedisConnector(tls, self.limits, reads)

    async def publish(
        self, client: StreamWriter, target: RedisStreamTarget, call: DueCall, payload: str
    ) -> Outcome:
        try:
            await client.xadd(target.stream, message_fields(call, payload), target.maxlen)
        except redis.exceptions.ResponseError as exc:  # WRONGTYPE, OOM, NOPERM, READONLY, ...
            return Outcome(verdict=Verdict.RETRY, status=None, error=f"redis: {exc}")
        except redis.exceptions.TimeoutError as exc:
            raise TimeoutError from exc
        except redis.exceptions.ConnectionError as exc:
            raise LinkBroken(describe(exc, "")) from exc
        return Outcome(verdict=Verdict.SUCCEEDED, status=None)


async def server_version(writer: StreamWriter) -> str:
    """ "redis 7.2.4": the server's version, from its INFO."""
    info = await writer.client.info("server")
    return f"redis {info.get('redis_version', 'unknown version')}"


# What schedd.targets.redis_stream (its TargetKind.delivery) names this module's parts by.
DELIVERER = RedisStreamDeliverer
CONNECTOR = RedisConnector
