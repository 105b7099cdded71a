"""The synchronous worker's requests, on the stdlib's urllib: each goes to the node in use of its
cell (cells.py), then to each other one; answers are read up to a bound. Every worker request
is safe to repeat: a lost receive delays its messages by one visibility timeout, a repeated ack
finds none to ack.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.client import HTTPException
from typing import Any, TypeVar

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


class Client:
    """A worker's requests to the cluster; raises Unavailable, Busy or Refused."""

    def __init__(
        self, settings: Settings, on_switch: Switched, ssl_context: ssl.SSLContext | None
    ) -> None:
        self._s = settings
        self._headers = settings.request_headers()
        self._ssl = ssl_context
        self.nodes = Nodes(settings.urls, on_switch)
        self.cells = Cells(self.nodes, on_switch)

    def check(self) -> None:
        """One request that any node with the queue API answers: fail before receiving
        when no node answers or the token is refused."""
        self.request("GET", "/v1/queues", None, _ignore, limit=0)

    def read_cells(self) -> list[str]:
        """Read the cells (GET /v1/cells) and use them: the names of the new ones."""
        try:
            revision, cells = self.request("GET", CELLS_PATH, None, directory_of)
        except Refused as exc:
            if exc.status != 404:  # 404: a node from before cells, one cell
                raise
            revision, cells = 0, None
        return self.cells.adopt(revision, cells)

    def receive(self, count: int, cell: str = ONE_CELL) -> list[Message]:
        """Receive from `cell`'s nodes (none once it left the directory)."""
        s, nodes = self._s, self.cells.nodes(cell)
        if nodes is None:
            return []
        body = receive_body(count, s.wait_s, s.visibility_timeout_s, s.consumer)
        path, limit = queue_path(s.queue, "receive"), receive_limit(count)
        messages = self.request(
            "POST", path, body, read_messages, limit=limit, extra_s=s.wait_s, nodes=nodes
        )
        self.cells.hold(nodes, [message.receipt for message in messages])
        return messages

    def settle(
        self,
        receipts: list[str],
        error: str | None,
        *,
        outputs: dict[str, str] | None = None,
        is_dead: bool = False,
    ) -> int:
        """Ack (error None) or nack, each receipt at the cell that handed it out: how many of
        the receipts it settled. `outputs` and `is_dead` are left out for a node from before
        them (that one retries a dead nack)."""
        verb, field = ("ack", "acked") if error is None else ("nack", "nacked")
        path = queue_path(self._s.queue, verb)

        def settle_at(nodes: Nodes, group: list[str]) -> int:
            body = settle_body(group, error, outputs=outputs_of(outputs, group), is_dead=is_dead)
            try:
                return self.request("POST", path, body, counted(field), nodes=nodes)
            except Refused as exc:
                if not (outputs or is_dead) or not is_older_node(exc):
                    raise
            body = settle_body(group, error)
            return self.request("POST", path, body, counted(field), nodes=nodes)

        return self._per_cell(receipts, settle_at)

    def extend(self, receipts: list[str], visibility_s: float) -> int:
        path = queue_path(self._s.queue, "extend")

        def extend_at(nodes: Nodes, group: list[str]) -> int:
            body = extend_body(group, visibility_s)
            return self.request("POST", path, body, counted("extended"), nodes=nodes)

        return self._per_cell(receipts, extend_at)

    def forget(self, receipts: list[str]) -> None:
        """The receipts are settled or given up: no cell to remember them by."""
        self.cells.forget(receipts)

    def _per_cell(self, receipts: list[str], call: Callable[[Nodes, list[str]], int]) -> int:
        """`call` for each cell's receipts, every cell tried: the counts summed, or the first
        cell's failure raised after the others were tried."""
        total, failure = 0, None
        for nodes, group in self.cells.by_cell(receipts):
            try:
                total += call(nodes, group)
            except WorkerError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        if total < len(receipts):
            self.cells.want_refresh()  # a receipt not known: expired, or its cell moved
        return total

    def request(
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
        """The answer of the first node (of `nodes`, default the URLs given) that gives one
        `read` accepts."""
        nodes = nodes or self.nodes
        failures: list[str] = []
        timeout_s = self._s.request_timeout_s + extra_s
        for index in nodes.order():
            url = nodes.urls[index]
            try:
                return read(*self._send(method, url + path, body, limit, timeout_s))
            except NodeFailed as exc:
                failures.append(str(exc))
                nodes.failed(index, str(exc))
            except WrongCell as exc:
                self.cells.want_refresh()
                raise Unavailable(f"{exc}; reading the cells again") from None
        raise Unavailable("no schedd node answered: " + "; ".join(failures))

    def _send(
        self, method: str, url: str, body: bytes | None, limit: int, timeout_s: float
    ) -> tuple[bytes, str]:
        base = _base(url)
        request = urllib.request.Request(url, data=body, method=method, headers=self._headers)
        context = self._ssl if url.startswith("https://") else None
        try:
            with no_redirect_opener(context).open(request, timeout=timeout_s) as answer:
                data = answer.read(limit + 1) if limit else b""
        except urllib.error.HTTPError as exc:
            with exc:
                data = exc.read(ERROR_ANSWER_BYTES)
                raise error_of(exc.code, data, base, exc.headers.get("Retry-After")) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLCertVerificationError):
                reason = exc.reason.verify_message or exc.reason.reason
                raise NodeFailed(f"cannot verify the TLS certificate of {base}: {reason}") from None
            raise NodeFailed(f"cannot reach {base}: {_reason(exc.reason)}") from None
        except TimeoutError:
            raise NodeFailed(f"no answer from {base} within {timeout_s:g}s") from None
        except (OSError, HTTPException) as exc:
            raise NodeFailed(f"connection to {base} failed: {_reason(exc)}") from None
        if len(data) > limit:
            raise NodeFailed(f"{base} answered with more than {limit} bytes")
        return data, base


def _ignore(data: bytes, source: str) -> None:
    """A check's answer: its status said enough."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx comes back as the HTTPError it is: only a wrong_cell one means something."""

    def redirect_request(self, *args: Any) -> None:
        return None


def no_redirect_opener(context: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    """urlopen's opener (proxies from the environment included), without redirects; `context`
    verifies https:// nodes (None: the system's CAs). schedctl and the node's segment fetch use
    it too."""
    handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def _base(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, ssl.SSLError):
        return f"TLS: {reason.reason or reason}"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    return str(reason) or type(reason).__name__
