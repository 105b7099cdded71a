"""The HTTP deliverer: one signed request per attempt to the run's URL, behind the SSRF guard.

Never raises for a remote failure: every answer, timeout or refusal is an `Outcome`. Knows nothing
of the outbox loop, tenants' slots or the log (caller.py); it is the "http" kind of sender.py.
"""

from __future__ import annotations

import functools
import json
import time
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from schedd import __version__
from schedd.delivery.outcome import Outcome, Verdict, classify, excerpt
from schedd.delivery.signing import webhook_headers
from schedd.guard.ssrf import BlockedTarget, ParsedTarget
from schedd.guard.targets import TargetGuard
from schedd.model import HttpTarget, RetryPolicy, idempotency_key
from schedd.sealing import PayloadKeys, PayloadUnreadable
from schedd.store.outbox import DueCall
from schedd.store.queries import Tenant
from schedd.stored_spec import load_target
from schedd.timeformat import format_instant

USER_AGENT = f"schedd/{__version__} (+https://github.com/schedd/schedd)"
RESPONSE_CAP_BYTES = 2048  # read at most this much of a response; never stored beyond an excerpt
RESPONSE_LINE_BYTES = 4096  # the status line, and each response header (name and value)
RESPONSE_MAX_HEADERS = 64


class HttpDeliverer:
    """Makes HTTP attempts on one pooled session; `start()` on the node's loop, then `deliver`."""

    kind = "http"

    def __init__(self, guard: TargetGuard, payload_keys: PayloadKeys, *, concurrency: int) -> None:
        self._guard = guard
        self._payload_keys = payload_keys
        self._concurrency = concurrency
        # The static URL check of a (url, allowed hosts) pair, once: DNS is checked per connection.
        self._checked = functools.lru_cache(maxsize=4096)(guard.parse)
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        connector = aiohttp.TCPConnector(
            resolver=self._guard.aiohttp_resolver(),
            use_dns_cache=False,  # every new connection is resolved and checked again
            limit=self._concurrency,
            limit_per_host=0,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            max_line_size=RESPONSE_LINE_BYTES,  # a longer header is a failed attempt
            max_field_size=RESPONSE_LINE_BYTES,
            max_headers=RESPONSE_MAX_HEADERS,
        )

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def deliver(
        self, call: DueCall, tenant: Tenant | None, started_ms: int, policy: RetryPolicy
    ) -> Outcome:
        """Make one call; never raises for a remote failure (every one is an outcome)."""
        if tenant is None:
            return Outcome(verdict=Verdict.FAILED, status=None, error="the tenant is gone")
        try:
            target = http_target(call.target)
        except ValueError as exc:  # accepted by an earlier release, unreadable by this one
            return Outcome(verdict=Verdict.FAILED, status=None, error=f"invalid target: {exc}")
        try:
            checked = self._checked(target.url, tuple(tenant.allowed_hosts))
        except BlockedTarget as exc:
            return Outcome(verdict=Verdict.FAILED, status=None, error=f"blocked: {exc.reason}")
        key = idempotency_key(call.job_id, call.scheduled_at_ms)
        try:
            body = _body(call, self._payload_keys.open_text(call.payload)).encode()
        except PayloadUnreadable as exc:  # a key missing from this node's config: fixable
            return Outcome(verdict=Verdict.RETRY, status=None, error=str(exc))
        headers = {
            **target.headers,
            "Idempotency-Key": key,
            **signed(tenant, key, started_ms, body),
        }
        timeout_s = target.timeout_ms / 1000
        try:
            status, head, retry_after = await self.send(
                target.method, request_url(target.url, checked), body, headers, timeout_s
            )
        except BlockedTarget as exc:  # from the resolver: the name now points somewhere blocked
            return Outcome(verdict=Verdict.FAILED, status=None, error=f"blocked: {exc.reason}")
        except TimeoutError:
            return classify(
                None,
                error=f"timed out after {timeout_s:g}s",
                retry_after=None,
                now_s=time.time(),
                max_delay_ms=policy.max_delay_ms,
            )
        except aiohttp.ClientResponseError as exc:  # e.g. a header over RESPONSE_LINE_BYTES
            error = f"invalid response: {excerpt(str(exc.message).encode(), 200)}"
            return classify(None, error=error, retry_after=None, now_s=time.time(), max_delay_ms=0)
        except (aiohttp.ClientError, OSError) as exc:
            error = f"connection failed: {type(exc).__name__}: {excerpt(str(exc).encode(), 200)}"
            return classify(None, error=error, retry_after=None, now_s=time.time(), max_delay_ms=0)
        return classify(
            status,
            error=None if 200 <= status <= 299 else (excerpt(head) or None),
            retry_after=retry_after,
            now_s=time.time(),
            max_delay_ms=policy.max_delay_ms,
        )

    async def send(
        self, method: str, url: str, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> tuple[int, bytes, str | None]:
        """(status, the first bytes of the response, Retry-After); redirects are not followed."""
        assert self._session is not None, "start() first"
        async with self._session.request(
            method,
            url,
            data=body,
            headers=headers,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        ) as response:
            head = await response.content.read(RESPONSE_CAP_BYTES)
            return response.status, head, response.headers.get("Retry-After")


def http_target(text: str) -> HttpTarget:
    """An outbox row's HTTP target, read as stored (`stored_spec.load_target`, cached): never
    judged by the API's rules of today. ValueError when it names no URL."""
    target = load_target(text)
    if not isinstance(target, HttpTarget):
        raise ValueError("target: not an HTTP target")
    return target


def signed(tenant: Tenant, msg_id: str, now_ms: int, body: bytes) -> dict[str, str]:
    """schedd's own headers: JSON, who calls, and the Standard Webhooks signature(s)."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        **webhook_headers(tenant.signing_secrets(now_ms), msg_id, now_ms // 1000, body),
    }


def _body(call: DueCall, payload: str) -> str:
    """`{job_id, scheduled_at, attempt, payload}`, with the payload's JSON text."""
    head = json.dumps(
        {"job_id": call.job_id, "scheduled_at": format_instant(call.scheduled_at_ms)},
        separators=(",", ":"),
    )
    return f'{head[:-1]},"attempt":{call.attempt},"payload":{payload}}}'


def request_url(url: str, checked: ParsedTarget) -> str:
    """The URL to request: a numeric host in the form that was checked (0x7f.1 -> 127.0.0.1)."""
    if checked.address is None:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=checked.host_header))
