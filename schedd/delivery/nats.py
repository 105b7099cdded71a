"""The nats deliverer: one JetStream publish per attempt to the target's subject, `Nats-Msg-Id`
the idempotency key (the stream's duplicate window drops a second copy); the publish ack is the
success.

Never raises for a remote failure; knows nothing of the outbox loop (caller.py) or the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import ssl
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.protocol.parser import AWAITING_MSG_PAYLOAD, Parser

from schedd.delivery.brokers import (
    BrokerDeliverer,
    Connector,
    Limits,
    LinkBroken,
    describe,
    message_body,
    retry_outcome,
    tls_context,
    url_host,
)
from schedd.delivery.outcome import Outcome, Verdict
from schedd.delivery.read_limits import (
    FrameGauge,
    ReadBudgets,
    ReadLimitExceeded,
    check_line,
)
from schedd.model import BrokerConnection, idempotency_key
from schedd.store.outbox import DueCall
from schedd.targets.nats import NatsTarget
from schedd.timeformat import format_instant

log = logging.getLogger(__name__)
DEFAULT_PORT = 4222
ABANDON_S = 1.0
CRLF_SIZE = 2


class TlsNotRequired(ConnectionError):
    """A `tls://` server whose INFO does not require TLS: nothing more is sent to it."""


class _BoundedParser(Parser):
    """nats-py's parser, refusing a message over the frame bound or the server's own
    `max_payload`, and a control line over MAX_LINE_BYTES. nats-py buffers a message until all
    of it has arrived, so a refusal comes before its bytes are read, and the publishes waiting on
    the connection fail at once, naming the bound (the connection is then closed)."""

    def __init__(self, nc: Client, gauge: FrameGauge) -> None:
        self._gauge = gauge  # before Parser.__init__, which resets
        super().__init__(nc)

    async def parse(self, data: bytes = b"") -> None:
        try:
            await super().parse(data)
            if self.state == AWAITING_MSG_PAYLOAD:
                if isinstance(server_max := self.nc.max_payload, int):  # the INFO's: any JSON
                    self._gauge.max_bytes = min(self._gauge.max_bytes, max(server_max, 0))
                self._gauge.hold(self.needed + CRLF_SIZE)
            else:
                self._gauge.hold(0)
                check_line(len(self.buf), "a NATS protocol line")
        except ReadLimitExceeded as exc:
            self.buf.clear()
            self._gauge.release()
            for waiting in list(self.nc._resp_map.values()):  # the publishes' replies
                if not waiting.done():
                    waiting.set_exception(ReadLimitExceeded(str(exc)))
            raise  # an OSError: nats-py's read loop closes the connection with it

    def reset(self) -> None:
        super().reset()
        self._gauge.release()


class _GuardedClient(Client):
    """nats-py's Client with its reads bounded (_BoundedParser) and, for `tls://`, no
    plain-text session: nats-py upgrades to TLS only when the server's INFO asks for it, so an
    INFO that does not is refused before CONNECT (and its credentials) is written."""

    def __init__(self, gauge: FrameGauge, *, is_tls: bool) -> None:
        super().__init__()
        self.gauge = gauge  # released when the client is closed: a closed client reads no more
        self._ps = _BoundedParser(self, gauge)
        self._is_tls = is_tls

    async def _process_info(
        self, info: dict[str, object], initial_connection: bool = False
    ) -> None:
        if initial_connection and self._is_tls and info.get("tls_required") is not True:
            raise TlsNotRequired(
                "the server did not require TLS for a tls:// URL: refused before sending "
                "credentials"
            )
        await super()._process_info(info, initial_connection)


@dataclass(frozen=True, slots=True)
class JetStream:
    """One connection's client: the NATS connection and its JetStream context."""

    nc: _GuardedClient
    js: JetStreamContext


class _Events:
    """nats-py's callbacks for one client. While it connects, the first error ends the connect:
    nats-py would otherwise try the server again every 2 s, even with reconnecting off. After,
    events are only logged: the pool sees a lost connection at the next publish."""

    def __init__(self) -> None:
        self.is_connecting = True

    async def error(self, exc: Exception) -> None:
        if self.is_connecting:
            raise exc
        log.debug("delivery: nats connection error %s", type(exc).__name__)

    async def changed(self) -> None:
        log.debug("delivery: nats connection disconnected or closed")


async def _abandon(nc: _GuardedClient) -> None:
    """Close a client whose connect failed. After a failed TLS upgrade nats-py's close() waits
    forever on the transport it replaced, so it gets a moment and no more."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(ABANDON_S):
            await nc.close()
    nc.gauge.release()


class NatsConnector:
    """Clients for `nats://` and `tls://` URLs (user and password, or a token as the user,
    from the URL), connected to a pinned address; nats-py's own reconnecting is off (the pool
    reconnects with its backoff) and servers it learns of are never used."""

    def __init__(self, tls: ssl.SSLContext | None, limits: Limits, reads: ReadBudgets) -> None:
        self._tls = tls
        self._limits = limits
        self._reads = reads

    async def connect(self, connection: BrokerConnection, address: str) -> JetStream:
        parts = urlsplit(connection.url)
        gauge = FrameGauge(self._reads.tenant(connection.tenant_id), "a NATS message")
        nc, events = _GuardedClient(gauge, is_tls=parts.scheme == "tls"), _Events()
        try:
            await self._connect(nc, events, parts, address)
        except BaseException:
            events.is_connecting = False
            await _abandon(nc)
            raise
        events.is_connecting = False
        return JetStream(nc, nc.jetstream(timeout=self._limits.publish_timeout_s))

    async def _connect(self, nc: Client, events: _Events, parts: SplitResult, address: str) -> None:
        user = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        await nc.connect(
            servers=[f"{parts.scheme}://{url_host(address)}:{parts.port or DEFAULT_PORT}"],
            user=user if password is not None else None,
            password=password,
            token=user if password is None else None,
            # nats-py upgrades to TLS when the server's INFO requires it, whatever the scheme
            # (and _GuardedClient refuses a tls:// server that does not): then too the
            # certificate is checked against the URL's name, not the address.
            tls=tls_context(self._tls),
            tls_hostname=parts.hostname,
            allow_reconnect=False,
            max_reconnect_attempts=0,
            connect_timeout=math.ceil(self._limits.connect_timeout_s),
            error_cb=events.error,
            disconnected_cb=events.changed,
            closed_cb=events.changed,
            name="schedd",
        )

    async def close(self, client: JetStream) -> None:
        try:
            await client.nc.close()
        finally:
            client.nc.gauge.release()


class NatsDeliverer(BrokerDeliverer[JetStream, NatsTarget]):
    """Makes nats attempts: a JetStream publish of the run's JSON with schedd's headers; a
    subject no stream captures is a retried attempt."""

    kind = "nats"
    target_type = NatsTarget

    def connector(self, tls: ssl.SSLContext | None, reads: ReadBudgets) -> Connector[JetStream]:
        return NatsConnector(tls, self.limits, reads)

    async def publish(
        self, client: JetStream, target: NatsTarget, call: DueCall, payload: str
    ) -> Outcome:
        if client.nc.is_closed or not client.nc.is_connected:
            lost = client.nc.last_error
            raise LinkBroken(f"the connection was lost: {describe(lost, '') if lost else 'closed'}")
        try:
            await client.js.publish(
                target.subject, message_body(call, payload), headers=message_headers(call)
            )
        except nats.js.errors.NoStreamResponseError:
            return retry_outcome(f"no stream captures subject {target.subject!r}")
        except nats.js.errors.APIError as exc:
            return retry_outcome(f"jetstream: {exc.description or 'error'} (code {exc.err_code})")
        except nats.errors.TimeoutError as exc:
            raise TimeoutError from exc
        except nats.errors.Error as exc:
            if client.nc.is_closed or not client.nc.is_connected:
                raise LinkBroken(describe(exc, "")) from exc
            return retry_outcome(f"nats: {describe(exc, '')}")
        return Outcome(verdict=Verdict.SUCCEEDED, status=None)


def message_headers(call: DueCall) -> dict[str, str]:
    """`Nats-Msg-Id` (JetStream's dedupe key) and the run's `Schedd-*` headers."""
    return {
        "Nats-Msg-Id": idempotency_key(call.job_id, call.scheduled_at_ms),
        "Schedd-Job-Id": call.job_id,
        "Schedd-Scheduled-At": format_instant(call.scheduled_at_ms),
        "Schedd-Attempt": str(call.attempt),
    }


async def server_version(client: JetStream) -> str:
    """ "nats-server 2.10.14": the server's version, as its INFO gave it."""
    return f"nats-server {client.nc._server_info.get('version', 'unknown version')}"


# What schedd.targets.nats (its TargetKind.delivery) names this module's parts by.
DELIVERER = NatsDeliverer
CONNECTOR = NatsConnector
