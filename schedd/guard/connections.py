"""The SSRF guard for tenants' broker connections (Redis, RabbitMQ, NATS URLs): the URL's
static checks, then every address its host resolves to, which the connection pins.

Messages name the host at most, never the URL: it carries the tenant's credentials.
"""

from __future__ import annotations

import asyncio
import functools
import string
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv6Address, ip_address
from urllib.parse import urlsplit

from schedd.errors import InvalidRequest
from schedd.guard.ssrf import (
    Address,
    BlockedTarget,
    Network,
    _normalise_host,  # one host normalisation for every guarded URL
    host_matches,
    is_blocked,
)
from schedd.guard.targets import TargetGuard
from schedd.targets import CONNECTION_SCHEMES, DEFAULT_PORTS

MAX_URL_CHARS = 2048
MAX_PINNED = 16  # addresses kept per connection (a name with more answers is pinned to these)
_SCHEMES = ", ".join(f"{scheme}://" for scheme in CONNECTION_SCHEMES)
_PRINTABLE = frozenset(string.printable) - frozenset(string.whitespace)
MIN_PORT = 1024  # every broker listens above it by default (6379, 5672, 5671, 4222)


class UnresolvedHost(InvalidRequest):
    """A connection's host gave no address in time: a connection pins the addresses that were
    checked when it was created, so it cannot be created without them."""

    code = "unresolved_host"
    http_status = 422


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionUrl:
    """A broker URL that passed the static checks (the URL itself stays with the caller)."""

    scheme: str
    kind: str  # "redis" | "rabbitmq" | "nats"
    host: str  # normalised: lowercase ASCII, no brackets
    port: int
    address: Address | None  # set when the host is a literal IP

    @property
    def display(self) -> str:
        """host:port, what a tenant sees of the connection (never its credentials)."""
        name = f"[{self.host}]" if isinstance(self.address, IPv6Address) else self.host
        return f"{name}:{self.port}"


def parse_connection_url(url: object, *, field: str = "url") -> ConnectionUrl:
    """Scheme (CONNECTION_SCHEMES), a host, a port MIN_PORT-65535, at most MAX_URL_CHARS printable
    characters; InvalidRequest names `field` and never repeats the URL."""
    if not isinstance(url, str) or not 1 <= len(url) <= MAX_URL_CHARS:
        raise InvalidRequest(field, f"must be a URL string of 1-{MAX_URL_CHARS} characters")
    if not set(url) <= _PRINTABLE:
        raise InvalidRequest(field, "must be printable ASCII without spaces (percent-encode)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidRequest(field, "is not a valid URL (a host, and a port 1-65535)") from None
    scheme = parts.scheme.lower()
    if scheme not in CONNECTION_SCHEMES:
        raise InvalidRequest(field, f"must start with one of {_SCHEMES}, got {scheme!r}")
    if port is not None and not MIN_PORT <= port <= 65535:
        # As for HTTP targets: a tenant's bytes (stream names, payloads) must not reach a
        # privileged service (SMTP on 25...) through a broker's protocol.
        raise InvalidRequest(field, f"port must be {MIN_PORT}-65535 (a broker's port)")
    try:
        host, address = _normalise_host(parts)
    except BlockedTarget as exc:
        raise InvalidRequest(field, exc.reason) from None
    return ConnectionUrl(
        scheme=scheme,
        kind=CONNECTION_SCHEMES[scheme],
        host=host,
        port=DEFAULT_PORTS[scheme] if port is None else port,
        address=address,
    )


async def pin_addresses(
    guard: TargetGuard, url: ConnectionUrl, allowed_hosts: Sequence[str] = ()
) -> tuple[str, ...]:
    """The addresses a new connection may use: the host must match the tenant's
    `allowed_hosts`, and every address it resolves to (within the guard's check time) must be
    allowed (`[delivery] allow_cidrs` opens private ranges). BlockedTarget (422) otherwise;
    UnresolvedHost (422) when no address came back in time."""
    if allowed_hosts and not host_matches(url.host, allowed_hosts):
        raise BlockedTarget("host is not in the tenant's allowed_hosts", host=url.host, field="url")
    if url.address is not None:
        return (str(_allowed(guard, url, url.address)),)
    try:
        async with asyncio.timeout(guard.check_timeout_s):
            texts = await guard.resolver(url.host, url.port)
    except (OSError, TimeoutError) as exc:
        raise UnresolvedHost(
            "url", f"host {url.host!r} did not resolve: {_why(exc, guard.check_timeout_s)}"
        ) from None
    pinned: list[str] = []
    for text in texts:
        try:
            found = ip_address(text)
        except ValueError:
            raise BlockedTarget(
                "resolver returned a non-address", host=url.host, field="url"
            ) from None
        address = str(_allowed(guard, url, found))
        if address not in pinned:
            pinned.append(address)
    if not pinned:
        raise UnresolvedHost("url", f"host {url.host!r} resolved to no addresses")
    return tuple(pinned[:MAX_PINNED])


def _allowed(guard: TargetGuard, url: ConnectionUrl, address: Address) -> Address:
    reason = is_blocked(address, guard.allow)
    if reason is not None:
        shown = "" if address == url.address else str(address)
        raise BlockedTarget(reason, host=url.host, address=shown, field="url")
    return address


def _why(exc: OSError, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g}s"
    return exc.strerror or type(exc).__name__


@functools.lru_cache(maxsize=4096)
def pinned_block(
    url: str,
    addresses: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    allow: tuple[Network, ...],
) -> str | None:
    """Why a stored connection may not be used from this node now (None when it may): the
    rules of the node that took the create may have been wider, or the operator's
    `allow_cidrs` or the tenant's `allowed_hosts` narrower since. No DNS: the pinned
    addresses are the ones a deliverer connects to."""
    try:
        host, _ = _normalise_host(urlsplit(url))
    except BlockedTarget as exc:  # checked at create: a stored URL this version refuses
        return exc.reason
    if allowed_hosts and not host_matches(host, allowed_hosts):
        return "host is not in the tenant's allowed_hosts"
    for address in addresses:
        if (reason := is_blocked(ip_address(address), allow)) is not None:
            return reason
    return None
