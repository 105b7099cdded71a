"""The answer of `POST /v1/connections/{name}/test`: connect to a tenant's broker as its deliverer
would (the pinned address, the same TLS rules) and name the server, or the error."""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable

from schedd.delivery import nats, rabbitmq, redis_stream
from schedd.delivery.brokers import (
    CONNECT_TIMEOUT_S,
    ERROR_CHARS,
    ConnectionDown,
    describe,
    scrub,
    tls_context,
)
from schedd.delivery.outcome import excerpt
from schedd.model import BrokerConnection

SERVER_VERSIONS: dict[str, Callable[[BrokerConnection, float, ssl.SSLContext], Awaitable[str]]] = {
    "redis": redis_stream.server_version,
    "rabbitmq": rabbitmq.server_version,
    "nats": nats.server_version,
}


async def probe(
    connection: BrokerConnection,
    timeout_s: float = CONNECT_TIMEOUT_S,
    *,
    tls: ssl.SSLContext | None = None,
) -> tuple[bool, str]:
    """Connect to the connection's pinned address and name the server ("redis 7.2.4"), or the
    error (without credentials): the answer of `POST /v1/connections/{name}/test`."""
    server_version = SERVER_VERSIONS.get(connection.kind)
    if server_version is None:
        return False, f"unknown connection kind {connection.kind!r}"
    try:
        return True, await server_version(connection, timeout_s, tls_context(tls))
    except ConnectionDown as exc:
        return False, excerpt(scrub(str(exc), connection.url).encode(), ERROR_CHARS)
    except TimeoutError:
        return False, f"timed out after {timeout_s:g}s"
    except Exception as exc:  # the probe answers with any failure, it never raises
        return False, describe(exc, connection.url)
