"""The answer of `POST /v1/connections/{name}/test`: connect to a tenant's broker as its deliverer
would (the guard's check at connect, the pinned address, the same TLS rules and read bounds) and
name the server, or the error."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from schedd.delivery.brokers import (
    CONNECT_TIMEOUT_S,
    ERROR_CHARS,
    ConnectGate,
    ConnectionBlocked,
    ConnectionDown,
    Connector,
    Limits,
    connect_pinned,
    describe,
    scrub,
)
from schedd.delivery.outcome import excerpt
from schedd.delivery.read_limits import ReadBudgets
from schedd.guard.targets import TargetGuard
from schedd.model import BrokerConnection
from schedd.targets import BY_CONNECTION

ConnectorMaker = Callable[[ssl.SSLContext | None, Limits, ReadBudgets], Connector[Any]]
VersionOf = Callable[[Any], Awaitable[str]]


def probe_kind(kind: str) -> tuple[ConnectorMaker, VersionOf] | None:
    """The connector and server-version reader of a connection kind (None: unknown kind),
    its module and client library imported at the kind's first probe (kinds.py)."""
    target_kind = BY_CONNECTION.get(kind)
    if target_kind is None:
        return None
    module = importlib.import_module(target_kind.delivery)
    return module.CONNECTOR, module.server_version


async def probe(
    connection: BrokerConnection,
    timeout_s: float = CONNECT_TIMEOUT_S,
    *,
    allowed_hosts: Iterable[str] = (),
    tls: ssl.SSLContext | None = None,
    guard: TargetGuard | None = None,
    reads: ReadBudgets | None = None,
) -> tuple[bool, str]:
    """Connect to the connection's pinned address and name the server ("redis 7.2.4"), or the
    error (without credentials): the answer of `POST /v1/connections/{name}/test`. `guard` and
    the tenant's `allowed_hosts` are checked as at a delivery's connect; `reads` are the node's
    read budgets (a probe's replies count towards its tenant's)."""
    kind = probe_kind(connection.kind)
    if kind is None:
        return False, f"unknown connection kind {connection.kind!r}"
    make_connector, server_version = kind
    limits = Limits(connect_timeout_s=timeout_s, publish_timeout_s=timeout_s)
    connector = make_connector(tls, limits, reads or ReadBudgets())
    try:
        client = await connect_pinned(
            connector, connection, timeout_s, ConnectGate.of(guard, allowed_hosts)
        )
        try:
            async with asyncio.timeout(timeout_s):
                return True, await server_version(client)
        finally:
            with contextlib.suppress(Exception):  # a broken client may fail to close: gone
                async with asyncio.timeout(timeout_s):
                    await connector.close(client)
    except ConnectionBlocked as exc:
        return False, f"blocked: {exc}"
    except ConnectionDown as exc:
        return False, excerpt(scrub(str(exc), connection.url).encode(), ERROR_CHARS)
    except TimeoutError:
        return False, f"timed out after {timeout_s:g}s"
    except Exception as exc:  # the probe answers with any failure, it never raises
        return False, describe(exc, connection.url)
