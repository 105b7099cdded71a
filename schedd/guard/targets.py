"""The SSRF guard as the API and the callers use it: a URL check, and an aiohttp resolver that
connects only to addresses it has checked (so DNS rebinding cannot swap them after the check).
Lookups go through a bounded resolver (`dns.py`), never the event loop's default executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Sequence
from ipaddress import IPv6Address, ip_network

from aiohttp.abc import AbstractResolver, ResolveResult

from schedd.guard.dns import BoundedResolver
from schedd.guard.ssrf import (
    Network,
    ParsedTarget,
    Resolver,
    check_url,
    resolve_and_check,
)

CHECK_TIMEOUT_S = 2.0  # create-time lookups: an unanswered one is accepted, delivery checks again


class TargetGuard:
    """Checks callback URLs against the SSRF rules, the operator's `allow_cidrs` and a tenant's
    `allowed_hosts`. Raises `BlockedTarget` (HTTP 422) with the reason."""

    def __init__(
        self,
        allow_cidrs: Sequence[str] = (),
        resolver: Resolver | None = None,
        *,
        check_timeout_s: float = CHECK_TIMEOUT_S,
    ) -> None:
        self.allow: tuple[Network, ...] = tuple(ip_network(c, strict=False) for c in allow_cidrs)
        self._own_resolver: BoundedResolver | None = None  # closed by close()
        if resolver is None:
            self._own_resolver = resolver = BoundedResolver()
        self.resolver: Resolver = resolver
        self.check_timeout_s = check_timeout_s

    def close(self) -> None:
        """Stop the lookup threads this guard started (queued lookups are cancelled)."""
        if self._own_resolver is not None:
            self._own_resolver.close()

    def parse(self, url: str, allowed_hosts: Sequence[str] = ()) -> ParsedTarget:
        """The checks that need no DNS: scheme, userinfo, port, host patterns, literal IPs."""
        return check_url(url, allowed_hosts=allowed_hosts, allow=self.allow)

    async def check(self, url: str, allowed_hosts: Sequence[str] = ()) -> None:
        """Create- and update-time check: also resolve the host and refuse a blocked address.

        A host that does not resolve now, or not within `check_timeout_s`, is accepted: DNS
        may be down, and every delivery checks again before it connects."""
        target = self.parse(url, allowed_hosts)
        with contextlib.suppress(OSError):  # TimeoutError is one
            async with asyncio.timeout(self.check_timeout_s):
                await resolve_and_check(target, self.allow, self.resolver)

    def aiohttp_resolver(self) -> AbstractResolver:
        return GuardedResolver(self)


class GuardedResolver(AbstractResolver):
    """aiohttp asks this for a host's addresses at connect time; it answers only with the one
    address that passed the guard, so the connection goes where the check looked. (aiohttp does
    not resolve literal IPs: `TargetGuard.parse` has checked those.)"""

    def __init__(self, guard: TargetGuard) -> None:
        self._guard = guard

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        target = ParsedTarget(scheme="http", host=host, port=port, address=None)
        address = await resolve_and_check(target, self._guard.allow, self._guard.resolver)
        return [
            {
                "hostname": host,  # TLS server name and certificate check use the name
                "host": str(address),
                "port": port,
                "family": socket.AF_INET6 if isinstance(address, IPv6Address) else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        return None
