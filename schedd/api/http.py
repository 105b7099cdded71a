"""HTTP plumbing shared by the routes: error mapping, auth middleware, bodies, paging.

Errors are translated here once: a SchedError class becomes its status and JSON body.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web

from schedd import metrics
from schedd.api.context import CONTEXT, ApiContext, Principal, authenticate
from schedd.errors import (
    ClusterUnavailable,
    InvalidRequest,
    PayloadTooLarge,
    RequestTimeout,
    SchedError,
    StorageLow,
    WrongCell,
)
from schedd.jsonbody import JSONValue, loads_object
from schedd.peers import MEMBERS_NOT_HEARD
from schedd.storage import StorageGuard
from schedd.store.commands import (
    AddJobs,
    BackfillJob,
    CreateConnection,
    CreateJobs,
    CreateTenant,
    LogCommand,
    R,
    RedriveDeadletter,
    ResumeJob,
    TriggerJob,
    UpdateJob,
    UpdateTenant,
)
from schedd.wire.errors import Failure, WrongCellDetail, WrongCellFailure

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PRINCIPAL = web.RequestKey("principal", Principal)
# /metrics checks its own tokens (admin or [metrics] token; never a tenant's): api/health.py
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/v1/openapi.json"})
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
_CURSOR = re.compile(r"[A-Za-z0-9_-]{1,400}")
_INT_CURSOR = re.compile(r"-?[0-9]{1,18}")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
CLIENT_GONE = 499  # the status label of a request cancelled because its client went away


def json_response(data: Any, *, status: int = 200) -> web.Response:
    """A JSON response; `data` is built by handlers from JSON-safe values. Encoded by msgspec
    (faster than the stdlib encoder: a receive answers with 100 messages); UTF-8 text, numbers
    in their shortest form."""
    return web.Response(
        body=_RESPONSE.encode(data),
        status=status,
        content_type="application/json",
        charset="utf-8",
    )


_RESPONSE = msgspec.json.Encoder()


def error_response(
    status: int, code: str, message: str, *, retry_after_s: int | None = None
) -> web.Response:
    response = json_response(Failure.of(code, message), status=status)
    if retry_after_s is not None:
        response.headers["Retry-After"] = str(retry_after_s)
    return response


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Observe each request's latency by route template (never the raw path), method, status."""
    started, status = time.perf_counter(), 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    except asyncio.CancelledError:
        status = CLIENT_GONE
        raise
    finally:
        method = request.method if request.method in _METHODS else "other"
        metrics.API_SECONDS.labels(route_label(request), method, str(status)).observe(
            time.perf_counter() - started
        )


def route_label(request: web.Request) -> str:
    """The matched route's template (`/v1/jobs/{job_id}`), or "(unmatched)": bounded labels."""
    resource = request.match_info.route.resource
    return "(unmatched)" if resource is None else resource.canonical


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Map every failure to the contract's error body; never leak a traceback."""
    try:
        return await handler(request)
    except WrongCell as exc:
        return wrong_cell_response(request, exc)
    except SchedError as exc:
        retry_after: int | None = getattr(exc, "retry_after_s", None)  # 429 and 503
        return error_response(exc.http_status, exc.code, str(exc), retry_after_s=retry_after)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, "http_error")
        response = error_response(exc.status, code, exc.reason or code)
        if "Allow" in exc.headers:  # a 405 says which methods the resource has (RFC 9110)
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except Exception:
        log.exception("request failed method=%s path=%s", request.method, request.path)
        return error_response(500, "internal", "internal error; it has been logged")


def wrong_cell_response(request: web.Request, exc: WrongCell) -> web.Response:
    """307 to the owner's first URL with the same path and query; the body names every URL."""
    detail = WrongCellDetail(
        code=exc.code,
        message=str(exc),
        cell=exc.cell,
        urls=list(exc.urls),
        directory_revision=exc.directory_revision,
    )
    response = json_response(WrongCellFailure(error=detail), status=307)
    if exc.urls:
        response.headers["Location"] = exc.urls[0].rstrip("/") + request.raw_path
    return response


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Resolve the bearer token of every /v1 request into request[PRINCIPAL]."""
    if request.path not in PUBLIC_PATHS:
        request[PRINCIPAL] = await authenticate(request, request.app[CONTEXT])
    return await handler(request)


def principal(request: web.Request) -> Principal:
    found: Principal = request[PRINCIPAL]
    return found


async def read_object(request: web.Request, *, limit_bytes: int) -> dict[str, JSONValue]:
    """The request's JSON object body; 413 before reading anything past `limit_bytes`, 408 if
    it takes longer than `[api] body_timeout`, 503 if the node reads too many bodies at once.
    A body received whole before the handler runs takes no slot and no timer (issue 29: the
    slot, the timeout and the read loop were about a sixth of a single create's event-loop
    time): the slots bound buffers still filling, and this one is full."""
    if request.content_length is not None and request.content_length > limit_bytes:
        raise PayloadTooLarge("body", f"is {request.content_length} bytes, over {limit_bytes}")
    if request.content.is_eof():  # all of it arrived already (most small bodies): no waiting
        raw = request.content.read_nowait()
        if len(raw) > limit_bytes:
            raise PayloadTooLarge("body", f"is over {limit_bytes} bytes")
        return loads_object(raw)
    ctx = request.app[CONTEXT]
    async with ctx.body_gate.slot():
        try:
            async with asyncio.timeout(ctx.limits.body_timeout_s):
                return loads_object(await _read_body(request, limit_bytes))
        except TimeoutError:
            timeout_s = ctx.limits.body_timeout_s
            raise RequestTimeout(
                "body", f"was not received within {timeout_s:g}s (api.body_timeout)"
            ) from None


async def read_optional_object(request: web.Request, *, limit_bytes: int) -> dict[str, JSONValue]:
    """read_object for a route whose body may be left out: none (or an empty one) is {}."""
    if not request.body_exists:
        return {}
    return await read_object(request, limit_bytes=limit_bytes)


async def _read_body(request: web.Request, limit_bytes: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.content.iter_any():  # stop reading as soon as it is too big
        size += len(chunk)
        if size > limit_bytes:
            raise PayloadTooLarge("body", f"is over {limit_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def query_limit(request: web.Request, *, default: int = 100, maximum: int = 1000) -> int:
    text = request.query.get("limit")
    if text is None:
        return default
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= maximum:
        raise InvalidRequest("limit", f"must be an integer from 1 to {maximum}, got {text[:40]!r}")
    return int(text)


def encode_cursor(value: str | int) -> str:
    return base64.urlsafe_b64encode(str(value).encode()).decode().rstrip("=")


def decode_cursor(request: web.Request) -> str | None:
    """The decoded `cursor` query parameter, or None on the first page."""
    text = request.query.get("cursor")
    if text is None or text == "":
        return None
    try:
        if not _CURSOR.fullmatch(text):
            raise ValueError(text)
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest("cursor", "is not a cursor this API returned") from None


def int_cursor(request: web.Request) -> int | None:
    text = decode_cursor(request)
    if text is None:
        return None
    if not _INT_CURSOR.fullmatch(text):  # ASCII digits that fit SQLite's 64-bit integers
        raise InvalidRequest("cursor", "is not a cursor this API returned")
    return int(text)


def page(items: list[Any], limit: int, cursor_of: Callable[[Any], str | int]) -> str | None:
    """The next cursor: set when the page is full (there may be more)."""
    return encode_cursor(cursor_of(items[-1])) if len(items) == limit else None


def require(body: dict[str, JSONValue], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidRequest(unknown[0], "is not a known field")


# Commands refused while disk space is low: they add jobs, runs or messages. Deleting,
# cancelling, pausing, retention and everything dispatch and consumers do go on.
GROWING_COMMANDS: tuple[type[LogCommand[Any]], ...] = (
    CreateJobs,
    AddJobs,
    UpdateJob,
    ResumeJob,
    TriggerJob,
    BackfillJob,
    CreateTenant,
    UpdateTenant,
    RedriveDeadletter,
    CreateConnection,
)


def _check_cluster_can_take(storage: StorageGuard, cmd: LogCommand[Any]) -> None:
    """Refuse, before it enters the log, a command that adds data while disk space is low, or
    one that a member of the cluster runs too old a version to apply (it would halt on it)."""
    if isinstance(cmd, GROWING_COMMANDS):
        problem = storage.problem()
        if problem is not None:
            raise StorageLow(f"writes are refused: {problem}")
    check_level(storage, cmd.needed_level())


def check_level(storage: StorageGuard | None, level: int) -> None:
    """503 unless every member reports that it applies commands of `level` (store/commands.py
    LOG_LEVEL: an older node would halt on a newer type, or apply a newer body differently)."""
    lagging = [] if level == 1 or storage is None else storage.peers.lagging(level)
    if lagging == [MEMBERS_NOT_HEARD]:
        raise ClusterUnavailable(
            "this node does not know the cluster's members yet (it is starting, or restoring "
            "a snapshot): try again in a moment"
        )
    if lagging:
        raise ClusterUnavailable(
            f"not every node can apply this yet: {', '.join(lagging)} must run this schedd "
            "version first (finish the rolling upgrade)"
        )


async def propose(ctx: ApiContext, cmd: LogCommand[R], *, now_ms: int | None = None) -> R:
    """Replicate a command; returns its result (store/results.py), and a rejection is raised
    as its error class (errors.py BY_CODE). A command that adds data is refused (507) before
    it enters the log while disk space is low."""
    if ctx.storage is not None:
        _check_cluster_can_take(ctx.storage, cmd)
    return await ctx.proposer.propose(cmd, now_ms=now_ms)
