"""The asyncio worker's requests, on aiohttp: each goes to the node in use, then to each other
one; answers are read up to a bound (client.py is the same on the stdlib)."""

from __future__ import annotations

import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp

from schedd.worker.cells import CELLS_PATH, ONE_CELL, Cells, directory_of, outputs_of
from schedd.worker.errors import Refused, Unavailable, WorkerError
from schedd.worker.nodes import Nodes, Switched
from schedd.worker.protocol import (
    ERROR_ANSWER_BYTES,
    Message,
    NodeFailed,
    Reader,
    WrongCell,
    counted,
    error_of,
    extend_body,
    is_older_node,
    queue_path,
    read_messages,
    receive_body,
    receive_limit,
    settle_body,
)
from schedd.worker.settings import Settings

T = TypeVar("T")
CHUNK_BYTES = 64 * 1024


class AsyncClient:
    """A worker's requests to the cluster over one aiohttp session; raises Unavailable, Busy or
    Refused."""

    def __init__(
        self,
        settings: Settings,
        on_switch: Switched,
        ssl_context: ssl.SSLContext | None,
        session: aiohttp.ClientSession,
    ) -> None:
        self._s = settings
        self._headers = settings.request_headers()
        self._ssl: ssl.SSLContext | bool = True if ssl_context is None else ssl_context
        self._session = session
        self.nodes = Nodes(settings.urls, on_switch)
        self.cells = Cells(self.nodes, on_switch)

    async def check(self) -> None:
        """One request that any node with the queue API answers (Worker.check's twin)."""
        await self.request("GET", "/v1/queues", None, _ignore, limit=0)

    async def read_cells(self) -> list[str]:
        """Client.read_cells's twin."""
        try:
            revision, cells = await self.request("GET", CELLS_PATH, None, directory_of)
        except Refused as exc:
            if exc.status != 404:  # 404: a node from before cells, one cell
                raise
            revision, cells = 0, None
        return self.cells.adopt(revision, cells)

    async def receive(self, count: int, cell: str = ONE_CELL) -> list[Message]:
        """Client.receive's twin."""
        s, nodes = self._s, self.cells.nodes(cell)
        if nodes is None:
            return []
        body = receive_body(count, s.wait_s, s.visibility_timeout_s, s.consumer)
        path, limit = queue_path(s.queue, "receive"), receive_limit(count)
        messages = await self.request(
            "POST", path, body, read_messages, limit=limit, extra_s=s.wait_s, nodes=nodes
        )
        self.cells.hold(nodes, [message.receipt for message in messages])
        return messages

    async def settle(
        self,
        receipts: list[str],
        error: str | None,
        *,
        outputs: dict[str, str] | None = None,
        is_dead: bool = False,
    ) -> int:
        """Client.settle's twin."""
        verb, field = ("ack", "acked") if error is None else ("nack", "nacked")
        path = queue_path(self._s.queue, verb)

        async def settle_at(nodes: Nodes, group: list[str]) -> int:
            body = settle_body(group, error, outputs=outputs_of(outputs, group), is_dead=is_dead)
            try:
                return await self.request("POST", path, body, counted(field), nodes=nodes)
            except Refused as exc:
                if not (outputs or is_dead) or not is_older_node(exc):
                    raise
            body = settle_body(group, error)
            return await self.request("POST", path, body, counted(field), nodes=nodes)

        return await self._per_cell(receipts, settle_at)

    async def extend(self, receipts: list[str], visibility_s: float) -> int:
        path = queue_path(self._s.queue, "extend")

        async def extend_at(nodes: Nodes, group: list[str]) -> int:
            body = extend_body(group, visibility_s)
            return await self.request("POST", path, body, counted("extended"), nodes=nodes)

        return await self._per_cell(receipts, extend_at)

    def forget(self, receipts: list[str]) -> None:
        self.cells.forget(receipts)

    async def _per_cell(
        self, receipts: list[str], call: Callable[[Nodes, list[str]], Awaitable[int]]
    ) -> int:
        """Client._per_cell's twin."""
        total, failure = 0, None
        for nodes, group in self.cells.by_cell(receipts):
            try:
                total += await call(nodes, group)
            except WorkerError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        if total < len(receipts):
            self.cells.want_refresh()
        return total

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        read: Reader[T],
        *,
        limit: int = ERROR_ANSWER_BYTES,
        extra_s: float = 0.0,
        nodes: Nodes | None = None,
    ) -> T:
        """Client.request's twin."""
        nodes = nodes or self.nodes
        failures: list[str] = []
        timeout_s = self._s.request_timeout_s + extra_s
        for index in nodes.order():
            url = nodes.urls[index]
            try:
                return read(*await self._send(method, url + path, body, limit, timeout_s))
            except NodeFailed as exc:
                failures.append(str(exc))
                nodes.failed(index, str(exc))
            except WrongCell as exc:
                self.cells.want_refresh()
                raise Unavailable(f"{exc}; reading the cells again") from None
        raise Unavailable("no schedd node answered: " + "; ".join(failures))

    async def _send(
        self, method: str, url: str, body: bytes | None, limit: int, timeout_s: float
    ) -> tuple[bytes, str]:
        parts = urllib.parse.urlsplit(url)
        base = f"{parts.scheme}://{parts.netloc}"
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        try:
            async with self._session.request(
                method,
                url,
                data=body,
                headers=self._headers,
                timeout=timeout,
                ssl=self._ssl,
                allow_redirects=False,  # only a wrong_cell 307 means something: error_of
            ) as answer:
                if 300 <= answer.status < 400:
                    data = await _read(answer.content, ERROR_ANSWER_BYTES, base, is_cut=True)
                    raise error_of(answer.status, data, base, None)
                if answer.status >= 400:
                    data = await _read(answer.content, ERROR_ANSWER_BYTES, base, is_cut=True)
                    raise error_of(answer.status, data, base, answer.headers.get("Retry-After"))
                return await _read(answer.content, limit, base, is_cut=False), base
        except aiohttp.ClientConnectorCertificateError as exc:
            reason = getattr(exc.certificate_error, "verify_message", None) or exc.certificate_error
            raise NodeFailed(f"cannot verify the TLS certificate of {base}: {reason}") from None
        except aiohttp.ClientConnectorError as exc:
            raise NodeFailed(f"cannot reach {base}: {_reason(exc)}") from None
        except TimeoutError:
            raise NodeFailed(f"no answer from {base} within {timeout_s:g}s") from None
        except aiohttp.ClientError as exc:
            raise NodeFailed(f"connection to {base} failed: {_reason(exc)}") from None


async def _read(content: aiohttp.StreamReader, limit: int, base: str, *, is_cut: bool) -> bytes:
    """The body up to `limit` bytes: cut there (`is_cut`), else more is a NodeFailed; a limit
    of 0 reads nothing (the status said enough)."""
    if limit == 0:
        return b""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await content.read(min(CHUNK_BYTES, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    if is_cut:
        return b"".join(chunks)[:limit]
    raise NodeFailed(f"{base} answered with more than {limit} bytes")


def _ignore(data: bytes, source: str) -> None:
    """A check's answer: its status said enough."""


def _reason(exc: aiohttp.ClientError) -> str:
    cause = exc.os_error if isinstance(exc, aiohttp.ClientConnectorError) else exc
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    return str(exc) or type(exc).__name__
