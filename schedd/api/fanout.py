"""Ask the other Raft members the same GET, with the admin token, and gather the answers.

For routes whose answer is the whole cluster's (`/v1/stats?scope=cluster`, the consumers of
`/v1/queues`): the web console may ask only the node it is served from. Peers' answers are
untrusted bytes: a short timeout, a capped read, no redirects, JSON objects only; a node that
fails costs only its own answer. Owns no route and reads no store (api/context.py picks the
peers). Event loop thread only."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import aiohttp
import msgspec

from schedd.jsonbody import JSONValue

log = logging.getLogger(__name__)
TIMEOUT_S = 2.0
QUIET_S = 10.0  # a peer that timed out is not asked again for this long
MAX_IN_FLIGHT = 8  # fan-outs of one node at once; more wait their turn
MAX_ANSWER_BYTES = 1024 * 1024  # a stats ring is ~60 KB, a tenant's consumers ~250 KB
TIMED_OUT = "no answer within the timeout"
QUIET = "no answer within the timeout less than {quiet_s:g} s ago: not asked again until then"
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerAnswer:
    """One node's answer: its JSON object, or why there is none."""

    node_id: str
    body: dict[str, JSONValue] | None = None  # untrusted: the reader checks each value
    error: str | None = None


class Fanout:
    """How this node asks its peers: one long-lived HTTP session (made on the event loop at the
    first fan-out, closed by `close`), at most `max_in_flight` fan-outs at once, and a quiet
    period for a peer that timed out, answered meanwhile without being asked."""

    def __init__(
        self,
        *,
        admin_token: str,
        tls: ssl.SSLContext | None,
        timeout_s: float = TIMEOUT_S,
        quiet_s: float = QUIET_S,
        max_in_flight: int = MAX_IN_FLIGHT,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._admin_token, self._tls = admin_token, tls
        self._timeout_s, self._quiet_s, self._monotonic = timeout_s, quiet_s, monotonic
        self._session: aiohttp.ClientSession | None = None
        self._in_flight = asyncio.Semaphore(max_in_flight)
        self._timed_out: dict[tuple[str, str], float] = {}  # (node_id, url) -> when (monotonic)

    async def ask(
        self,
        peers: Sequence[tuple[str, str]],
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> list[PeerAnswer]:
        """GET `path` (with its query) from every (node_id, API base URL) of `peers`,
        concurrently; answers in the peers' order."""
        sent = {
            **(headers or {}),
            "Authorization": f"Bearer {self._admin_token}",  # per request: never session state
            "Accept-Encoding": "identity",  # a compressed answer could expand past the cap
        }
        async with self._in_flight:
            session = self._session_now()
            return list(
                await asyncio.gather(
                    *(self._ask(session, node_id, api + path, sent) for node_id, api in peers)
                )
            )

    async def close(self) -> None:
        """Close the session (the app's cleanup); a later `ask` would open another."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),  # a peer's cookies are never sent back
            )
        return self._session

    async def _ask(
        self, session: aiohttp.ClientSession, node_id: str, url: str, headers: Mapping[str, str]
    ) -> PeerAnswer:
        key, now_s = (node_id, url), self._monotonic()
        self._timed_out = {k: at for k, at in self._timed_out.items() if now_s - at < self._quiet_s}
        if key in self._timed_out:
            return PeerAnswer(node_id=node_id, error=QUIET.format(quiet_s=self._quiet_s))
        answer = await _get(session, node_id, url, headers, self._tls)
        if answer.error == TIMED_OUT:
            self._timed_out[key] = self._monotonic()
        return answer


async def _get(
    session: aiohttp.ClientSession,
    node_id: str,
    url: str,
    headers: Mapping[str, str],
    tls: ssl.SSLContext | None,
) -> PeerAnswer:
    try:
        async with session.get(
            url, headers=headers, allow_redirects=False, ssl=tls or True
        ) as response:
            if response.status != 200:
                return PeerAnswer(node_id=node_id, error=f"answered HTTP {response.status}")
            data = await _read_capped(response)
    except TimeoutError:
        return PeerAnswer(node_id=node_id, error=TIMED_OUT)
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        log.debug("fan-out: no answer node=%s error=%s", node_id, exc)  # the answer says it
        return PeerAnswer(node_id=node_id, error=_failure(exc))
    try:
        body = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return PeerAnswer(node_id=node_id, error="its answer is not JSON")
    if not isinstance(body, dict):
        return PeerAnswer(node_id=node_id, error="its answer is not a JSON object")
    return PeerAnswer(node_id=node_id, body=body)


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    if (response.content_length or 0) > MAX_ANSWER_BYTES:
        raise ValueError(f"answer over {MAX_ANSWER_BYTES} bytes")
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ValueError(f"answer over {MAX_ANSWER_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _failure(exc: Exception) -> str:
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "its certificate cannot be verified (set [api] tls_ca)"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connection refused or unreachable"
    if isinstance(exc, ValueError):
        return str(exc)
    return f"request failed ({type(exc).__name__})"


class AnswerCache(Generic[T]):
    """Key -> one gathered answer, reused for `ttl_s` after its fan-out started (callers at
    the same time share the fan-out in flight); at most `max_keys`, least recently used
    forgotten first."""

    def __init__(
        self,
        *,
        ttl_s: float = TIMEOUT_S,
        max_keys: int = 1_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s, self._max_keys, self._monotonic = ttl_s, max_keys, monotonic
        self._entries: OrderedDict[str, tuple[float, asyncio.Future[T]]] = OrderedDict()

    async def get(self, key: str, gather: Callable[[], Awaitable[T]]) -> T:
        """The cached answer for `key`, else the one `gather()` gives (then cached)."""
        now_s = self._monotonic()
        entry = self._entries.get(key)
        if entry is None or not _usable(entry[1], now_s - entry[0] < self._ttl_s):
            entry = (now_s, asyncio.ensure_future(gather()))
            self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_keys:
            self._entries.popitem(last=False)
        return await asyncio.shield(entry[1])  # a caller that goes away leaves it to the others


def _usable(future: asyncio.Future[Any], is_fresh: bool) -> bool:
    if not future.done():
        return True
    return is_fresh and not future.cancelled() and future.exception() is None
