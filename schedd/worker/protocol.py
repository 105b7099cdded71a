"""The queue API as a worker speaks it, without I/O: request bodies, the received message, answers
read with bounded sizes, and what an error answer means (try another node, wait, or stop).

Every answer is a node's bytes, so hostile: a field that is not the API's fails the decode.
"""

from __future__ import annotations

import traceback
import urllib.parse
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import Meta

from schedd.worker.errors import Busy, Nack, Refused
from schedd.worker.output import bound_output

MAX_RECEIVE = 100  # the server's largest `max`
MAX_RECEIPT_CHARS = 140  # the server's: a store's receipt and a cell's `<cell>~` before it
MAX_WAIT_S = 20.0  # the server's longest long poll
MIN_VISIBILITY_S = 1.0
MAX_VISIBILITY_S = 12 * 3600.0
ERROR_CHARS = 4_000  # what a nack's error keeps
ERROR_ANSWER_BYTES = 64 * 1024  # an error body, an ack's or an extend's answer
MESSAGE_BYTES = 1024 * 1024  # a message's share of a receive's answer (payloads are <= 512 KiB)
UNAVAILABLE = frozenset({502, 503, 504})
T = TypeVar("T")
Reader = Callable[[bytes, str], T]  # (an answer's body, who answered) -> its meaning; NodeFailed


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One received message: the run it delivers, which attempt, and the receipt that settles
    it. `idempotency_key` (`<job_id>:<scheduled_at>`) is the same on every attempt of a run."""

    receipt: Annotated[str, Meta(min_length=1, max_length=MAX_RECEIPT_CHARS)]
    job_id: Annotated[str, Meta(min_length=1, max_length=200)]
    scheduled_at: Annotated[str, Meta(min_length=1, max_length=64)]
    attempt: Annotated[int, Meta(ge=1)]
    idempotency_key: Annotated[str, Meta(min_length=1, max_length=300)]
    payload: Any = None

    @property
    def facts(self) -> str:
        """The message for a log line: `job=... attempt=...`."""
        return f"job={self.job_id} attempt={self.attempt}"


class _Messages(msgspec.Struct, frozen=True):
    messages: Annotated[list[Message], Meta(max_length=MAX_RECEIVE)]


class _ErrorDetail(msgspec.Struct, frozen=True):
    code: Annotated[str, Meta(max_length=200)]
    message: Annotated[str, Meta(max_length=ERROR_ANSWER_BYTES)]


class _ErrorBody(msgspec.Struct, frozen=True):
    error: _ErrorDetail


class NodeFailed(Exception):
    """One node gave no usable answer (unreachable, timed out, 502/503/504, not the API's
    bytes): the request goes to the next node."""


class WrongCell(Exception):
    """A node answered 307 wrong_cell: what was asked is another cell's, and nothing was done;
    the worker reads the cells again (cells.py)."""


def queue_path(queue: str, verb: str) -> str:
    return f"/v1/queues/{urllib.parse.quote(queue, safe='')}/{verb}"


def duration(seconds: float) -> str:
    """A duration as the API reads it: whole milliseconds ("20000ms")."""
    return f"{round(seconds * 1000)}ms"


def receive_body(count: int, wait_s: float, visibility_s: float, consumer: str | None) -> bytes:
    body: dict[str, Any] = {
        "max": count,
        "wait": duration(wait_s),
        "visibility_timeout": duration(visibility_s),
    }
    if consumer is not None:
        body["consumer"] = consumer
    return msgspec.json.encode(body)


def settle_body(
    receipts: list[str],
    error: str | None,
    *,
    outputs: dict[str, str] | None = None,
    is_dead: bool = False,
) -> bytes:
    """An ack's body (error None) or a nack's; `outputs` (receipt: its attempt's output) and
    `is_dead` (a nack's run is dead at once) only when given, so older nodes read the rest."""
    body: dict[str, Any] = {"receipts": receipts}
    if error is not None:
        body["error"] = error[:ERROR_CHARS]
        if is_dead:
            body["dead"] = True
    if outputs:
        body["outputs"] = {receipt: bound_output(text) for receipt, text in outputs.items()}
    return msgspec.json.encode(body)


def is_older_node(exc: Refused) -> bool:
    """A node from before a settle's `outputs` and `dead` refused the body for naming them."""
    named = exc.detail.partition(":")[0]
    return exc.status == 400 and named in ("outputs", "dead") and "not a known field" in exc.detail


def extend_body(receipts: list[str], visibility_s: float) -> bytes:
    return msgspec.json.encode({"receipts": receipts, "visibility_timeout": duration(visibility_s)})


def receive_limit(count: int) -> int:
    """The most bytes a receive of `count` messages may answer with."""
    return count * MESSAGE_BYTES + ERROR_ANSWER_BYTES


def read_messages(data: bytes, source: str) -> list[Message]:
    try:
        return msgspec.json.decode(data, type=_Messages).messages
    except msgspec.DecodeError as exc:
        raise NodeFailed(f"{source} answered a receive with a body not the API's: {exc}") from None


def counted(field: str) -> Reader[int]:
    """The reader of an ack's, nack's or extend's answer: its count ({"acked": n})."""

    def read(data: bytes, source: str) -> int:
        try:
            count = msgspec.json.decode(data, type=dict[str, Any]).get(field)
        except msgspec.DecodeError as exc:
            raise NodeFailed(f"{source} answered with a body that is not JSON: {exc}") from None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise NodeFailed(f"{source} answered without a count {field!r}")
        return count

    return read


def error_of(status: int, data: bytes, base: str, retry_after: str | None) -> Exception:
    """What an error answer means: NodeFailed (another node may do), Busy (429), WrongCell
    (another cell's: 307 wrong_cell) or Refused (any other 3xx too: never followed)."""
    code, message = _error_body(data)
    if 300 <= status < 400 and code == "wrong_cell":
        return WrongCell(f"{base}: {message}")
    if status in UNAVAILABLE:
        return NodeFailed(f"{base}: {message or f'HTTP {status}'}")
    if status == 429:
        wait_s = _seconds(retry_after)
        return Busy(
            f"{message or 'too many requests'} (retry after {wait_s:g}s)", retry_after_s=wait_s
        )
    detail = message or f"HTTP {status}"
    return Refused(_refusal(status, code, detail, base), status=status, code=code, detail=detail)


def nack_text(exc: BaseException) -> str:
    """The error a failed handler's message is nacked with."""
    if isinstance(exc, Nack):
        text = str(exc)
    else:
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[:ERROR_CHARS] or type(exc).__name__


def _refusal(status: int, code: str | None, detail: str, base: str) -> str:
    named = f"{base} refused it (HTTP {status}{f' {code}' if code else ''}): {detail}"
    if status == 401:
        return f"{named}; check the token"
    if status == 403:
        return f"{named}; an admin token needs the tenant's X-Tenant header"
    if status == 404:
        return f"{named}; check the node URLs and the tenant"
    if 300 <= status < 400:
        return f"{named}; a redirect, not followed: check the node URLs"
    return named


def _error_body(data: bytes) -> tuple[str | None, str | None]:
    try:
        body = msgspec.json.decode(data, type=_ErrorBody)
    except msgspec.DecodeError:
        return None, None
    return body.error.code, body.error.message


def _seconds(retry_after: str | None) -> float:
    try:
        return min(max(float(retry_after or 1), 0.1), 60.0)
    except ValueError:
        return 1.0
