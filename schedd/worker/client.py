"""The synchronous worker's requests, on the stdlib's urllib: each goes to the node in use, then
to each other one; answers are read up to a bound. Every worker request is safe to repeat: a lost
receive delays its messages by one visibility timeout, a repeated ack finds none to ack.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException
from typing import TypeVar

from schedd.worker.errors import Refused, Unavailable
from schedd.worker.nodes import Nodes, Switched
from schedd.worker.protocol import (
    ERROR_ANSWER_BYTES,
    Message,
    NodeFailed,
    Reader,
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

    def check(self) -> None:
        """One request that any node with the queue API answers: fail before receiving
        when no node answers or the token is refused."""
        self.request("GET", "/v1/queues", None, _ignore, limit=0)

    def receive(self, count: int) -> list[Message]:
        s = self._s
        body = receive_body(count, s.wait_s, s.visibility_timeout_s, s.consumer)
        path = queue_path(s.queue, "receive")
        return self.request(
            "POST", path, body, read_messages, limit=receive_limit(count), extra_s=s.wait_s
        )

    def settle(
        self,
        receipts: list[str],
        error: str | None,
        *,
        outputs: dict[str, str] | None = None,
        is_dead: bool = False,
    ) -> int:
        """Ack (error None) or nack: how many of the receipts it settled. `outputs` and
        `is_dead` are left out for a node from before them (that one retries a dead nack)."""
        verb, field = ("ack", "acked") if error is None else ("nack", "nacked")
        path = queue_path(self._s.queue, verb)
        body = settle_body(receipts, error, outputs=outputs, is_dead=is_dead)
        try:
            return self.request("POST", path, body, counted(field))
        except Refused as exc:
            if not (outputs or is_dead) or not is_older_node(exc):
                raise
        return self.request("POST", path, settle_body(receipts, error), counted(field))

    def extend(self, receipts: list[str], visibility_s: float) -> int:
        path, body = queue_path(self._s.queue, "extend"), extend_body(receipts, visibility_s)
        return self.request("POST", path, body, counted("extended"))

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        read: Reader[T],
        *,
        limit: int = ERROR_ANSWER_BYTES,
        extra_s: float = 0.0,
    ) -> T:
        """The answer of the first node that gives one `read` accepts."""
        failures: list[str] = []
        timeout_s = self._s.request_timeout_s + extra_s
        for index in self.nodes.order():
            url = self.nodes.urls[index]
            try:
                return read(*self._send(method, url + path, body, limit, timeout_s))
            except NodeFailed as exc:
                failures.append(str(exc))
                self.nodes.failed(index, str(exc))
        raise Unavailable("no schedd node answered: " + "; ".join(failures))

    def _send(
        self, method: str, url: str, body: bytes | None, limit: int, timeout_s: float
    ) -> tuple[bytes, str]:
        base = _base(url)
        request = urllib.request.Request(url, data=body, method=method, headers=self._headers)
        context = self._ssl if url.startswith("https://") else None
        try:
            with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
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
