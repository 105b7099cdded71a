"""SSRF guard for HTTP callbacks: which URLs, hosts and addresses schedd may call.

Static URL checks plus one injectable DNS lookup; it never opens a connection itself.
"""

from __future__ import annotations

import asyncio
import socket
import string
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from urllib.parse import SplitResult, urlsplit

from schedd.errors import InvalidRequest

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""An async lookup: (host, port) -> the addresses it resolves to, as text."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_CHARS = frozenset(string.ascii_lowercase + string.digits + "-._")
_DIGITS = {8: frozenset("01234567"), 10: frozenset(string.digits), 16: frozenset(string.hexdigits)}

# First match wins: broadcast sits before the 240/4 block that contains it.
_V4_BLOCKS = tuple(
    (IPv4Network(net), reason)
    for net, reason in (
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "cgnat"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.168.0.0/16", "private"),
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255/32", "broadcast"),
        ("240.0.0.0/4", "reserved"),
    )
)
_V6_BLOCKS = tuple(
    (IPv6Network(net), reason)
    for net, reason in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("fc00::/7", "private"),
        ("fec0::/10", "private"),  # deprecated site-local
        ("64:ff9b:1::/48", "private"),  # local-use NAT64 (RFC 8215)
        ("fe80::/10", "link-local"),
        ("ff00::/8", "multicast"),
    )
)
# IPv6 forms that carry an IPv4 address in their low 32 bits: judged by that address.
_V4_IN_LOW_BITS = (IPv6Network("::ffff:0:0/96"), IPv6Network("64:ff9b::/96"))
_V4_COMPATIBLE = IPv6Network("::/96")
_SIX_TO_FOUR = IPv6Network("2002::/16")


# Blocks an operator may lift for a network of theirs (configuration.md), and how.
ALLOWABLE = frozenset({"private", "loopback"})
ALLOW_HINT = " (an operator allows such networks with [delivery] allow_cidrs)"


class BlockedTarget(InvalidRequest):
    """A callback URL or address the SSRF guard refuses; `reason` is a short code."""

    code = "blocked_target"
    http_status = 422  # API.md: an SSRF-blocked target url

    def __init__(
        self,
        reason: str,
        *,
        host: str = "",
        address: str = "",
        field: str = "target.url",
        message: str | None = None,
    ) -> None:
        where = f"host {host!r}" if host else "url"
        via = f" resolves to {address} which" if address else ""
        hint = ALLOW_HINT if reason in ALLOWABLE else ""
        super().__init__(field, message or f"{where}{via} is not allowed: {reason}{hint}")
        self.reason = reason
        self.host = host


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedTarget:
    """A URL that passed the static checks; `address` is set when the host is a literal IP."""

    scheme: str
    host: str  # normalised: lowercase ASCII, no brackets or trailing dot
    port: int
    address: Address | None
    has_explicit_port: bool = False

    @property
    def host_header(self) -> str:
        """The Host header (and TLS server name, without the port) for this target."""
        name = f"[{self.host}]" if isinstance(self.address, IPv6Address) else self.host
        return f"{name}:{self.port}" if self.has_explicit_port else name


def check_url(
    url: str,
    *,
    allowed_ports_extra: Sequence[int] = (),
    allowed_hosts: Sequence[str] = (),
    allow: Sequence[Network] = (),
) -> ParsedTarget:
    """Check `url` without DNS: scheme, userinfo, host, port, tenant host patterns, literal IPs."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise BlockedTarget("not a valid URL (host or port)") from None
    if parts.scheme not in _DEFAULT_PORTS:
        raise BlockedTarget(f"scheme {parts.scheme!r} is not http or https")
    if "@" in parts.netloc:
        raise BlockedTarget("userinfo in the URL is not allowed")
    host, address = _normalise_host(parts)
    if port is None:
        port = _DEFAULT_PORTS[parts.scheme]
    elif not (port in (80, 443) or 1024 <= port <= 65535 or port in allowed_ports_extra):
        raise BlockedTarget(
            f"port {port} is not allowed",
            host=host,
            message=f"port {port} is not allowed: a target listens on 80, 443 or 1024-65535",
        )
    if allowed_hosts and not host_matches(host, allowed_hosts):
        raise BlockedTarget("host is not in the tenant's allowed_hosts", host=host)
    if address is not None and (reason := is_blocked(address, allow)) is not None:
        raise BlockedTarget(reason, host=host)
    return ParsedTarget(
        scheme=parts.scheme,
        host=host,
        port=port,
        address=address,
        has_explicit_port=parts.port is not None,
    )


def host_matches(host: str, patterns: Sequence[str]) -> bool:
    """True if `host` matches a pattern: `api.x` exactly, or `*.x` for any subdomain of x."""
    host = host.lower().rstrip(".")
    for pattern in patterns:
        pattern = pattern.lower().rstrip(".")
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]):
                return True
        elif host == pattern:
            return True
    return False


def is_blocked(addr: Address, allow: Sequence[Network] = ()) -> str | None:
    """Why schedd must not call `addr` ("loopback", "private", ...), or None if it may."""
    if any(addr.version == net.version and addr in net for net in allow):
        return None
    if isinstance(addr, IPv4Address):
        return _first_match(addr, _V4_BLOCKS) or _not_global(addr)
    reason = _first_match(addr, _V6_BLOCKS)
    if reason is not None:
        return reason
    embedded = _embedded_ipv4(addr)
    if embedded is not None:
        return is_blocked(embedded, allow)
    if addr in _V4_COMPATIBLE:  # deprecated form: judged by its IPv4 part, never allowed
        return is_blocked(IPv4Address(int(addr) & 0xFFFFFFFF), allow) or "reserved"
    return _not_global(addr)


def parse_ipv4(host: str) -> IPv4Address | None:
    """Read `host` as inet_aton does (1-4 parts: decimal, 0-octal or 0x-hex), or None."""
    values = [_parse_number(part) for part in host.split(".")]
    if not 1 <= len(values) <= 4:
        return None
    *head, last = values
    if last is None or any(v is None or v > 255 for v in head):
        return None
    if last >= 1 << (8 * (5 - len(values))):
        return None
    value = last
    for i, part in enumerate(head):
        value |= (part or 0) << (24 - 8 * i)
    return IPv4Address(value)


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve `host` with the event loop's getaddrinfo (all families, TCP)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def resolve_and_check(
    target: ParsedTarget, allow: Sequence[Network] = (), resolver: Resolver = system_resolver
) -> Address:
    """Resolve the target's host; refuse if ANY address is blocked; return the one to pin.

    Lookup failures propagate as OSError (a connection error for the caller).
    """
    if target.address is not None:
        reason = is_blocked(target.address, allow)
        if reason is not None:
            raise BlockedTarget(reason, host=target.host)
        return target.address
    texts = await resolver(target.host, target.port)
    if not texts:
        raise OSError(f"host {target.host!r} resolved to no addresses")
    addresses = []
    for text in texts:
        try:
            addr = ip_address(text)
        except ValueError:
            raise BlockedTarget("resolver returned a non-address", host=target.host) from None
        reason = is_blocked(addr, allow)
        if reason is not None:
            raise BlockedTarget(reason, host=target.host, address=str(addr))
        addresses.append(addr)
    return addresses[0]


def _normalise_host(parts: SplitResult) -> tuple[str, Address | None]:
    raw = parts.hostname
    if not raw:
        raise BlockedTarget("the URL has no host")
    if "[" in parts.netloc:
        try:
            if "%" in raw:
                raise ValueError("zone ids are not allowed")
            address = IPv6Address(raw)
        except ValueError:
            raise BlockedTarget("invalid IPv6 literal") from None
        return str(address), address
    host = _ascii_host(raw)
    v4 = parse_ipv4(host)
    if v4 is not None:
        return str(v4), v4
    last = host.rsplit(".", 1)[-1]
    if last.isdigit() or last.startswith("0x"):  # WHATWG: a number-like last label is an IP
        raise BlockedTarget("invalid numeric host", host=host)
    return host, None


def _ascii_host(raw: str) -> str:
    """Lowercase ASCII host via NFKC + IDNA, so fullwidth digits and dots become ASCII ones."""
    host = raw
    if not raw.isascii():
        try:
            host = unicodedata.normalize("NFKC", raw).encode("idna").decode("ascii")
        except UnicodeError:
            raise BlockedTarget("invalid international host name") from None
    host = host.lower()
    host = host.removesuffix(".")
    if not host or not set(host) <= _HOST_CHARS or ".." in host or host.startswith("."):
        raise BlockedTarget("invalid host name")
    if len(host) > 253 or any(len(label) > 63 for label in host.split(".")):
        raise BlockedTarget("invalid host name (a label over 63 or a name over 253 characters)")
    return host


def _parse_number(part: str) -> int | None:
    if part[:2] in ("0x", "0X"):
        digits, base = part[2:], 16
    elif len(part) > 1 and part.startswith("0"):
        digits, base = part[1:], 8
    else:
        digits, base = part, 10
    if not part or not set(digits) <= _DIGITS[base]:
        return None
    return int(digits, base) if digits else 0  # inet_aton reads a bare "0x" as 0


def _first_match(addr: Address, table: Sequence[tuple[Network, str]]) -> str | None:
    return next((reason for net, reason in table if addr in net), None)


def _embedded_ipv4(addr: IPv6Address) -> IPv4Address | None:
    if any(addr in net for net in _V4_IN_LOW_BITS):
        return IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr in _SIX_TO_FOUR:
        return addr.sixtofour
    return None


def _not_global(addr: Address) -> str | None:
    """Catch-all for IANA special-purpose blocks (documentation, benchmarking, ...)."""
    return "reserved" if addr.is_reserved or not addr.is_global else None
