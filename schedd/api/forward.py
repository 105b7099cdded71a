"""The web console's requests for another cell's partitions, sent on by the node that serves
the console (docs/scaling.md §4). A browser cannot follow a wrong_cell 307 itself: the owner
is another origin, which the console's `connect-src 'self'` refuses and where its token would
not go. So a request marked `X-Schedd-Console: 1` is sent to the owner's URLs (from this
cell's directory) and the owner's answer returned as it is.

One hop only: a forwarded request carries `X-Schedd-Forwarded`, and a node never sends such a
request on again; if the owner answers it with a 307 of its own, the cells' directories
disagree (a range move in flight) and the console gets a 503 to retry. The owner's answer is
untrusted bytes: a timeout, a capped read, no redirects followed."""

from __future__ import annotations

import ssl
from collections.abc import Mapping

import aiohttp
from aiohttp import web

from schedd.errors import ClusterUnavailable, OutcomeUnknown, WrongCell

CONSOLE_HEADER = "X-Schedd-Console"
FORWARDED_HEADER = "X-Schedd-Forwarded"
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # a runs page with outputs is at most ~4 MB of JSON
_SENT_ON = ("Authorization", "X-Tenant", "Content-Type", "Accept", "Idempotency-Key")
_RETURNED = ("Content-Type", "Retry-After")
_SAFE = frozenset({"GET", "HEAD"})


def is_forwardable(request: web.Request) -> bool:
    """A console request that no node has sent on yet."""
    return request.headers.get(CONSOLE_HEADER) == "1" and FORWARDED_HEADER not in request.headers


class Forwarder:
    """One HTTP session to other cells' nodes, made on the event loop at first use."""

    def __init__(self, *, tls: ssl.SSLContext | None, timeout_s: float) -> None:
        self._tls, self._timeout_s = tls, timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def forward(self, request: web.Request, moved: WrongCell, own_cell: str) -> web.Response:
        """The owner's answer to `request`, from the first of its URLs that answers."""
        body = await request.read()  # bounded by the app's client_max_size; cached if read
        headers = {h: request.headers[h] for h in _SENT_ON if h in request.headers}
        headers[FORWARDED_HEADER] = own_cell
        headers["Accept-Encoding"] = "identity"  # a compressed answer could pass the cap
        is_safe = request.method in _SAFE
        failures = []
        urls = [u for u in moved.urls if u.startswith("https://") or not request.secure]
        for url in urls:  # never the token from a TLS node to a plain-text one
            try:
                return await self._send(
                    request.method, url.rstrip("/") + request.raw_path, headers, body, moved.cell
                )
            except aiohttp.ClientConnectorError as exc:  # nothing was sent: the next URL
                failures.append(f"{url}: {exc}")
            except (aiohttp.ClientError, TimeoutError) as exc:
                if not is_safe:
                    raise OutcomeUnknown(
                        f"cell {moved.cell} ({url}) did not answer ({exc or type(exc).__name__})"
                        "; the change may or may not have been applied: look before retrying"
                    ) from None
                failures.append(f"{url}: {exc or type(exc).__name__}")
        raise ClusterUnavailable(
            f"no node of cell {moved.cell}, which serves this, answered: "
            + ("; ".join(failures) or "the directory names no https:// URL for it")
        )

    async def _send(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes, cell: str
    ) -> web.Response:
        session = self._session_now()
        async with session.request(
            method,
            url,
            headers=headers,
            data=body or None,
            allow_redirects=False,
            ssl=self._tls or True,
        ) as answer:
            if answer.status == 307:
                raise ClusterUnavailable(
                    f"cell {cell} sent this request on again: the cells' directories disagree "
                    "(a range move in flight); retry in a moment"
                )
            data = await answer.content.read(MAX_ANSWER_BYTES + 1)
            if len(data) > MAX_ANSWER_BYTES:
                raise ClusterUnavailable(f"cell {cell}'s answer is over {MAX_ANSWER_BYTES:,} bytes")
            returned = {h: answer.headers[h] for h in _RETURNED if h in answer.headers}
            return web.Response(body=data, status=answer.status, headers=returned)

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session
