"""What the broker deliverers (redis_stream.py, rabbitmq.py, nats.py) share: the target parsed from
its JSON, the message every attempt carries, credentials kept out of errors, and one pooled client
per tenant connection with its own backoff. Speaks no broker's protocol itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import random
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar
from urllib.parse import unquote, urlsplit

from prometheus_client import Gauge

from schedd.delivery.outcome import Outcome, Verdict, excerpt
from schedd.delivery.read_limits import ReadBudgets
from schedd.guard.connections import pinned_block
from schedd.guard.ssrf import Network
from schedd.guard.targets import TargetGuard
from schedd.model import BrokerConnection, BrokerTarget, RetryPolicy, idempotency_key
from schedd.sealing import PayloadKeys, PayloadUnreadable
from schedd.store.outbox import DueCall
from schedd.store.queries import Tenant
from schedd.stored_spec import load_target
from schedd.targets import CONNECTION_KIND_OF_TARGET
from schedd.timeformat import format_instant

log = logging.getLogger(__name__)

LINK_STATES = ("up", "down")
BROKER_CONNECTIONS = Gauge(
    "schedd_broker_connections",
    "Tenants' broker connections this node holds, by target kind and state (down: the last "
    "connect failed and attempts fail fast until its backoff ends)",
    ["kind", "state"],
)

CONNECT_TIMEOUT_S = 5.0
PUBLISH_TIMEOUT_S = 10.0
MAX_IN_FLIGHT = 256  # publishes at once on one connection
IDLE_S = 300.0  # a connection unused this long is closed
BACKOFF_INITIAL_S = 0.5  # the wait after a first failed connect; doubles up to BACKOFF_MAX_S
BACKOFF_MAX_S = 30.0
ERROR_CHARS = 200

Lookup = Callable[[str, str], Awaitable[BrokerConnection | None]]
ClientT = TypeVar("ClientT")
TargetT = TypeVar("TargetT", bound=BrokerTarget)
_USERINFO = re.compile(r"([a-z][a-z0-9+.-]*://)[^/@\s]*@", re.IGNORECASE)


# ---------------------------------------------------------------------- targets and messages


def broker_target(text: str) -> BrokerTarget:
    """An outbox row's broker target, read as stored (`stored_spec.load_target`, cached):
    never judged by the API's rules of today. ValueError when it names no broker."""
    target = load_target(text)
    if not isinstance(target, BrokerTarget):
        raise ValueError("not a broker target")
    return target


def message_fields(call: DueCall, payload: str) -> dict[str, str]:
    """The fields of a run's message, as text: `payload` is the payload's JSON text."""
    return {
        "job_id": call.job_id,
        "scheduled_at": format_instant(call.scheduled_at_ms),
        "attempt": str(call.attempt),
        "idempotency_key": idempotency_key(call.job_id, call.scheduled_at_ms),
        "payload": payload,
    }


def message_body(call: DueCall, payload: str) -> bytes:
    """`{job_id, scheduled_at, attempt, idempotency_key, payload}` as JSON, the payload as the
    JSON value it is (as the HTTP body carries it)."""
    head = json.dumps(
        {
            "job_id": call.job_id,
            "scheduled_at": format_instant(call.scheduled_at_ms),
            "attempt": call.attempt,
            "idempotency_key": idempotency_key(call.job_id, call.scheduled_at_ms),
        },
        separators=(",", ":"),
    )
    return f'{head[:-1]},"payload":{payload}}}'.encode()


# ---------------------------------------------------------------------- URLs and credentials


def scrub(text: str, url: str) -> str:
    """`text` without the credentials of `url`: any `scheme://...@` user part, and the URL's
    user name and password wherever they appear, as given or percent-decoded."""
    text = _USERINFO.sub(r"\1***@", text)
    try:
        parts = urlsplit(url)
        secrets = {parts.username, parts.password}
    except ValueError:
        secrets = set()
    secrets |= {unquote(s) for s in secrets if s}
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def url_host(address: str) -> str:
    """An IP address as a URL's host (IPv6 in brackets)."""
    return f"[{address}]" if ":" in address else address


def describe(exc: BaseException, url: str) -> str:
    """A short error text for an exception, credentials removed."""
    text = str(exc) or type(exc).__name__
    if type(exc).__name__ not in text:
        text = f"{type(exc).__name__}: {text}"
    return excerpt(scrub(text, url).encode(), ERROR_CHARS)


def tls_context(tls: ssl.SSLContext | None) -> ssl.SSLContext:
    """The context TLS schemes use: `tls` when given, else the system's CAs with certificate
    and host name verified (one context for the whole node, made at the first TLS connect:
    loading the system's CAs costs about 20 ms)."""
    return tls if tls is not None else _system_tls()


@functools.cache
def _system_tls() -> ssl.SSLContext:
    return ssl.create_default_context()


# ---------------------------------------------------------------------- the pool


class LinkBroken(Exception):
    """The client of a connection is unusable (closed, reset): drop it, reconnect next time."""


class ConnectionDown(Exception):
    """No client for the connection now: the last connect failed and its backoff is running."""


class ConnectionBlocked(Exception):
    """This node's guard refuses the connection's pinned addresses now: nothing is sent."""


@dataclass(frozen=True, slots=True)
class ConnectGate:
    """This node's guard as one tenant's connects must pass it: the operator's `allow_cidrs`
    and the tenant's `allowed_hosts` now (either may have narrowed since the connection was
    made), against the connection's pinned addresses. No DNS."""

    allow: tuple[Network, ...]
    allowed_hosts: tuple[str, ...]

    @classmethod
    def of(cls, guard: TargetGuard | None, allowed_hosts: Iterable[str]) -> ConnectGate | None:
        """The gate of a node's guard (None: no guard, in tests only)."""
        return None if guard is None else cls(guard.allow, tuple(allowed_hosts))

    def refusal(self, connection: BrokerConnection) -> str | None:
        """Why the connection may not be used now; None when it may."""
        return pinned_block(
            connection.url, connection.pinned_addresses, self.allowed_hosts, self.allow
        )


class Connector(Protocol[ClientT]):
    """How one broker kind makes its client for a pinned address, and closes it."""

    async def connect(self, connection: BrokerConnection, address: str) -> ClientT: ...

    async def close(self, client: ClientT) -> None: ...


@dataclass(eq=False, kw_only=True)
class Link(Generic[ClientT]):
    """One tenant connection's client on this node, with its backoff and its publish slots."""

    connection: BrokerConnection
    slots: asyncio.Semaphore
    client: ClientT | None = None
    failures: int = 0  # connects failed in a row
    connects: int = 0  # connects tried, ever
    down_until: float = 0.0  # monotonic: no connect before this
    cause: str = ""
    last_used: float = 0.0
    in_flight: int = 0
    connecting: asyncio.Lock = field(default_factory=asyncio.Lock)


async def connect_pinned(
    connector: Connector[ClientT],
    connection: BrokerConnection,
    timeout_s: float,
    gate: ConnectGate | None,
) -> ClientT:
    """A client connected to the first of the connection's pinned addresses that answers within
    `timeout_s` (each); never to what the URL's name resolves to now. Every connect, a
    delivery's or a probe's, passes `gate` first: ConnectionBlocked when it refuses."""
    if gate is not None and (reason := gate.refusal(connection)) is not None:
        raise ConnectionBlocked(reason)
    if not connection.pinned_addresses:
        raise ConnectionDown("no pinned address for the connection")
    cause = ""
    for address in connection.pinned_addresses:
        try:
            async with asyncio.timeout(timeout_s):
                return await connector.connect(connection, address)
        except TimeoutError:
            cause = f"connect to {address} timed out after {timeout_s:g}s"
        except Exception as exc:  # every library raises its own; each is a failed connect
            cause = f"connect to {address} failed: {describe(exc, connection.url)}"
    raise ConnectionDown(cause)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Timeouts and bounds of a broker deliverer's connections (the defaults suit most)."""

    connect_timeout_s: float = CONNECT_TIMEOUT_S  # each pinned address
    publish_timeout_s: float = PUBLISH_TIMEOUT_S  # a slot, the publish and its confirm
    max_in_flight: int = MAX_IN_FLIGHT  # publishes at once on one connection
    idle_s: float = IDLE_S
    backoff_initial_s: float = BACKOFF_INITIAL_S
    backoff_max_s: float = BACKOFF_MAX_S


class Pool(Generic[ClientT]):
    """One client per (tenant, connection name, created_ms), made on first use, closed when idle
    or at `stop()`. While a connection is down its attempts fail fast until the backoff ends.
    Nothing here is shared across connections but the dict that holds them."""

    def __init__(
        self,
        connector: Connector[ClientT],
        limits: Limits,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connector = connector
        self.limits = limits
        self._clock = clock
        self._links: dict[tuple[str, str, int], Link[ClientT]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_loop())

    def count(self, state: str) -> int:
        """How many of this node's connections are `up` (a client) or `down` (no client: the
        last connect failed)."""
        is_up = state == "up"
        return sum(
            1
            for link in self._links.values()
            if (link.client is not None) == is_up and (is_up or link.failures > 0)
        )

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for link in list(self._links.values()):
            self._drop(link)
        self._links.clear()
        await asyncio.gather(*self._closing, return_exceptions=True)

    def links(self) -> Iterator[Link[ClientT]]:
        return iter(list(self._links.values()))

    async def attempt(
        self,
        connection: BrokerConnection,
        gate: ConnectGate | None,
        publish: Callable[[ClientT], Awaitable[Outcome]],
    ) -> Outcome:
        """One publish on the connection's client (connected through `gate` when it has none);
        every failure is an Outcome (credentials removed from its error)."""
        link = self._link(connection)
        link.in_flight += 1
        link.last_used = self._clock()
        try:
            outcome = await self._attempt(link, gate, publish)
        finally:
            link.in_flight -= 1
            link.last_used = self._clock()
        if outcome.error is None:
            return outcome
        return Outcome(
            verdict=outcome.verdict,
            status=outcome.status,
            error=excerpt(scrub(outcome.error, connection.url).encode(), ERROR_CHARS),
            retry_after_ms=outcome.retry_after_ms,
        )

    async def _attempt(
        self,
        link: Link[ClientT],
        gate: ConnectGate | None,
        publish: Callable[[ClientT], Awaitable[Outcome]],
    ) -> Outcome:
        try:
            client = await self._client(link, gate)
        except ConnectionBlocked as exc:
            return blocked_outcome(str(exc))
        except ConnectionDown as exc:
            return retry_outcome(f"connection down: {exc}")
        try:
            async with asyncio.timeout(self.limits.publish_timeout_s), link.slots:
                return await publish(client)
        except TimeoutError:
            return retry_outcome(f"publish timed out after {self.limits.publish_timeout_s:g}s")
        except (LinkBroken, OSError) as exc:
            cause = str(exc) if isinstance(exc, LinkBroken) else describe(exc, link.connection.url)
            if link.client is client:  # the first publish to see it breaks it for the others
                self._drop(link)
                link.cause = cause
            return retry_outcome(f"connection down: {cause}")

    async def _client(self, link: Link[ClientT], gate: ConnectGate | None) -> ClientT:
        """The link's client, connecting once for all who wait; ConnectionDown in the backoff,
        ConnectionBlocked when `gate` refuses the connect."""
        if link.client is not None:
            return link.client
        async with link.connecting:
            if link.client is not None:
                return link.client
            if self._clock() < link.down_until:
                raise ConnectionDown(link.cause)
            link.connects += 1
            try:
                client = await connect_pinned(
                    self._connector, link.connection, self.limits.connect_timeout_s, gate
                )
            except ConnectionDown as exc:
                link.failures += 1
                link.cause = str(exc)
                delay = min(
                    self.limits.backoff_initial_s * 2 ** (link.failures - 1),
                    self.limits.backoff_max_s,
                )
                link.down_until = self._clock() + random.uniform(delay / 2, delay)
                log.warning(
                    "delivery: broker connection down tenant=%s connection=%s failures=%d: %s",
                    link.connection.tenant_id,
                    link.connection.name,
                    link.failures,
                    link.cause,
                )
                raise
            link.client, link.failures, link.down_until = client, 0, 0.0
            return client

    def _link(self, connection: BrokerConnection) -> Link[ClientT]:
        key = (connection.tenant_id, connection.name, connection.created_ms)
        link = self._links.get(key)
        if link is None:
            self._forget_older(connection)
            link = Link(connection=connection, slots=asyncio.Semaphore(self.limits.max_in_flight))
            self._links[key] = link
        return link

    def _forget_older(self, connection: BrokerConnection) -> None:
        """Close idle clients of a connection deleted and created again under its name."""
        for key, link in list(self._links.items()):
            if key[:2] == (connection.tenant_id, connection.name) and link.in_flight == 0:
                self._drop(link)
                del self._links[key]

    def _drop(self, link: Link[ClientT]) -> None:
        """Forget the link's client and close it in the background."""
        client, link.client = link.client, None
        if client is not None:
            task = asyncio.get_running_loop().create_task(self._close(client))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _close(self, client: ClientT) -> None:
        try:
            async with asyncio.timeout(self.limits.connect_timeout_s):
                await self._connector.close(client)
        except Exception as exc:  # closing a broken client may fail: it is gone either way
            log.debug("delivery: closing a broker client failed: %s", type(exc).__name__)

    def sweep(self, now: float) -> int:
        """Close the connections unused for `idle_s`; how many were closed."""
        idle = [
            key
            for key, link in self._links.items()
            if link.in_flight == 0 and now - link.last_used >= self.limits.idle_s
        ]
        for key in idle:
            self._drop(self._links.pop(key))
        return len(idle)

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(max(self.limits.idle_s / 4, 1.0))
            try:
                self.sweep(self._clock())
            except Exception:  # the sweeper must not die
                log.exception("delivery: sweeping idle broker connections failed")


def retry_outcome(error: str) -> Outcome:
    """A failed attempt to retry per the job's policy, `error` saying why."""
    return Outcome(verdict=Verdict.RETRY, status=None, error=error)


def blocked_outcome(reason: str) -> Outcome:
    """A run this node's guard refuses to deliver: failed, not retried."""
    return Outcome(verdict=Verdict.FAILED, status=None, error=f"blocked: {reason}")


# ---------------------------------------------------------------------- the deliverer


class BrokerDeliverer(Generic[ClientT, TargetT]):
    """The `Deliverer` shape of every broker kind: look the connection up, open the payload,
    publish on the pooled client. A kind supplies `kind`, `target_type`, `connector` and
    `publish`."""

    kind: str
    target_type: type[TargetT]

    def __init__(
        self,
        payload_keys: PayloadKeys,
        lookup: Lookup,
        *,
        tls: ssl.SSLContext | None = None,
        guard: TargetGuard | None = None,
        reads: ReadBudgets | None = None,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        publish_timeout_s: float = PUBLISH_TIMEOUT_S,
        max_in_flight: int = MAX_IN_FLIGHT,
        idle_s: float = IDLE_S,
        backoff_initial_s: float = BACKOFF_INITIAL_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`lookup(tenant_id, name)` gives a tenant's connection with its URL opened (None when
        there is none); `tls` the trust of TLS schemes (the system's CAs by default); `guard`
        this node's rules, checked again against a connection's pinned addresses (the node
        that took its create may have allowed more); `reads` the node's budgets of what
        tenants' brokers may make it hold (shared by every kind and the probe)."""
        self._payload_keys = payload_keys
        self._lookup = lookup
        self._guard = guard
        self.limits = Limits(
            connect_timeout_s=connect_timeout_s,
            publish_timeout_s=publish_timeout_s,
            max_in_flight=max_in_flight,
            idle_s=idle_s,
            backoff_initial_s=backoff_initial_s,
            backoff_max_s=backoff_max_s,
        )
        connector = self.connector(tls, reads or ReadBudgets())
        self.pool: Pool[ClientT] = Pool(connector, self.limits, clock)

    def connector(self, tls: ssl.SSLContext | None, reads: ReadBudgets) -> Connector[ClientT]:
        """The kind's Connector (`tls` None: the system's trust, see tls_context)."""
        raise NotImplementedError

    def start(self) -> None:
        self.pool.start()
        for state in LINK_STATES:  # the last deliverer of a kind started is the one reported
            BROKER_CONNECTIONS.labels(kind=self.kind, state=state).set_function(
                functools.partial(self.pool.count, state)
            )

    async def stop(self) -> None:
        await self.pool.stop()

    async def deliver(
        self, call: DueCall, tenant: Tenant | None, started_ms: int, policy: RetryPolicy
    ) -> Outcome:
        """One attempt: publish the run's message; never raises for a remote failure."""
        if tenant is None:
            return Outcome(verdict=Verdict.FAILED, status=None, error="the tenant is gone")
        try:
            target = broker_target(call.target)
        except ValueError as exc:  # accepted by an earlier release, unreadable by this one
            return Outcome(verdict=Verdict.FAILED, status=None, error=f"invalid target: {exc}")
        if not isinstance(target, self.target_type):
            return Outcome(verdict=Verdict.FAILED, status=None, error="invalid target: not mine")
        try:
            connection = await self._lookup(tenant.tenant_id, target.connection)
        except PayloadUnreadable as exc:  # the URL is sealed with a key this node lacks: fixable
            return retry_outcome(str(exc))
        if connection is None:  # it may be created again under its name
            return retry_outcome(f"unknown connection {target.connection!r}")
        gate = ConnectGate.of(self._guard, tenant.allowed_hosts)
        if gate is not None and (reason := gate.refusal(connection)) is not None:
            return blocked_outcome(reason)  # a pooled client made before the guard narrowed
        wanted = CONNECTION_KIND_OF_TARGET[self.kind]
        if connection.kind != wanted:  # deleted and created again as another kind
            return retry_outcome(
                f"connection {target.connection!r} is {connection.kind}, not {wanted}"
            )
        try:
            payload = self._payload_keys.open_text(call.payload)
        except PayloadUnreadable as exc:  # a key missing from this node's config: fixable
            return retry_outcome(str(exc))
        return await self.pool.attempt(
            connection, gate, lambda client: self.publish(client, target, call, payload)
        )

    async def publish(
        self, client: ClientT, target: TargetT, call: DueCall, payload: str
    ) -> Outcome:
        """Publish one message; an Outcome for what the broker answered, LinkBroken (or OSError)
        when the client is unusable."""
        raise NotImplementedError
