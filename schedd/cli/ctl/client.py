"""A small synchronous client of the schedd HTTP API on the stdlib's urllib: JSON in and out.

It maps the API's error bodies to schedd.errors, fails over across node URLs only for
requests that are safe to repeat, and follows a node's wrong_cell answer to the cell that owns
the request (redirects.py). It never imports the store, raft or the node.
"""

from __future__ import annotations

import functools
import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from email.message import Message
from http.client import BadStatusLine, HTTPException
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, TypeVar, Unpack

import msgspec

from schedd import __version__
from schedd.cli.ctl.answers import Answer, JSONObject, parse_json, read_answer
from schedd.cli.ctl.older_nodes import ClusterAnswer, Tenants
from schedd.cli.ctl.redirects import Hops, WrongCell, not_followed, wrong_cell_of
from schedd.errors import (
    BY_CODE,
    BY_STATUS,
    ClusterUnavailable,
    InvalidRequest,
    OutcomeUnknown,
    SchedError,
    Unauthorized,
    error_of_answer,
)
from schedd.jsonbody import JSONValue
from schedd.wire.alerts import AlertList
from schedd.wire.forecast import Forecast
from schedd.wire.jobs import (
    Backfilled,
    JobList,
    JobView,
    KeyedJob,
    KeyedJobPlan,
    PreviewResult,
    RunList,
    Triggered,
    VersionList,
)
from schedd.wire.pauses import QueuePause
from schedd.wire.tenants import TenantCredentials, TenantView
from schedd.worker.client import no_redirect_opener as opener

DEFAULT_URL = "http://127.0.0.1:8701"
DEFAULT_TIMEOUT_S = 10.0
Query = Mapping[str, str | int | Sequence[str] | None]  # a sequence: the parameter repeated
Body = JSONValue | msgspec.Struct  # a request body: JSON, or a wire struct of the contract
T = TypeVar("T")

_UNAVAILABLE = frozenset({502, 503, 504})


class RequestOptions(TypedDict, total=False):
    """What a request may add to its method, path and body."""

    query: Query | None
    headers: Mapping[str, str] | None
    is_safe: bool | None  # may go to another node after a failure (default: GET only)


class Reply(NamedTuple):
    """A node's answer: its body, and who answered what (for messages)."""

    body: bytes
    source: str
    status: int = 200


class _Unreachable(ClusterUnavailable):
    """A node that gave no answer; `is_sent` when the request may have reached it."""

    def __init__(self, message: str, *, is_sent: bool) -> None:
        super().__init__(message)
        self.is_sent = is_sent


def parse_urls(text: str) -> list[str]:
    """The node URLs of a comma-separated list, without trailing slashes."""
    urls = [part.strip().rstrip("/") for part in text.split(",") if part.strip()]
    if not urls:
        raise InvalidRequest("--url", "needs at least one node URL like http://127.0.0.1:8701")
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidRequest("--url", f"must be http(s)://host:port, got {url!r}")
    return urls


class Client:
    """Calls one schedd cluster; the first node URL that answers serves each request."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        tenant: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        cacert: str | None = None,
    ) -> None:
        self.url = url  # parsed on first use, so `schedctl next` never needs a valid one
        self.token = token
        # Where the token came from, for the message when it is refused: "--token" (or a
        # caller's own), "SCHEDCTL_TOKEN" when the environment gave it (set by the CLI).
        self.token_source = "--token"
        self.tenant = tenant
        self.timeout_s = timeout_s
        self.cacert = cacert

    def tls_for(self, url: str) -> ssl.SSLContext | None:
        """The context that verifies an https:// node (the --cacert CAs, else the system's)."""
        return _tls_context(self.cacert) if url.startswith("https://") else None

    def request(
        self,
        method: str,
        path: str,
        body: Body = None,
        *,
        query: Query | None = None,
        headers: Mapping[str, str] | None = None,
        is_safe: bool | None = None,
    ) -> Any:
        """Send one request and return its decoded JSON (None for 204); raise SchedError."""
        return self.request_status(
            method, path, body, query=query, headers=headers, is_safe=is_safe
        )[1]

    def request_status(
        self,
        method: str,
        path: str,
        body: Body = None,
        *,
        query: Query | None = None,
        headers: Mapping[str, str] | None = None,
        is_safe: bool | None = None,
    ) -> tuple[int, Any]:
        """As `request`, with the HTTP status of the answer (201 from 200, say)."""
        reply = self._exchange(method, path, body, query, headers, is_safe)
        decoded = None if not reply.body else parse_json(reply.body, source=reply.source)
        return reply.status, decoded

    def answer(
        self,
        kind: type[T],
        method: str,
        path: str,
        body: Body = None,
        **options: Unpack[RequestOptions],
    ) -> Answer[T]:
        """Send one request whose answer is a `kind` object; raise SchedError (an answer that
        is not one is an UnreadableAnswer)."""
        raw = self.request(method, path, body, **options)
        return read_answer(raw, kind, request=f"{method} {path}")

    def _exchange(
        self,
        method: str,
        path: str,
        body: Body,
        query: Query | None,
        headers: Mapping[str, str] | None,
        is_safe: bool | None,
    ) -> Reply:
        """The first node's reply that answers; fail over only when that is safe. A node of
        another cell's answer (307 wrong_cell: nothing done) sends the request to that cell's
        URLs, with the same method, body and headers."""
        path += _query_string(query or {})
        data = _encoded(body)
        safe = method == "GET" if is_safe is None else is_safe
        urls, hops = parse_urls(self.url), Hops()
        while True:
            try:
                return self._first_reply(urls, method, path, data, headers or {}, safe=safe)
            except WrongCell as moved:
                urls = hops.follow(moved)

    def _first_reply(
        self,
        urls: list[str],
        method: str,
        path: str,
        data: bytes | None,
        headers: Mapping[str, str],
        *,
        safe: bool,
    ) -> Reply:
        """The first of `urls` that answers; the next only when that is safe."""
        failures: list[str] = []
        for url in urls:
            try:
                return self._send(method, url + path, data, headers)
            except _Unreachable as exc:
                if exc.is_sent and not safe:
                    message = f"{exc}; the request may or may not have been applied"
                    raise OutcomeUnknown(message) from None
                failures.append(str(exc))
            except ClusterUnavailable as exc:
                if not safe:
                    raise
                failures.append(str(exc))
        if len(failures) == 1:
            raise ClusterUnavailable(failures[0])
        raise ClusterUnavailable("no schedd node answered: " + "; ".join(failures))

    def _send(self, method: str, url: str, data: bytes | None, extra: Mapping[str, str]) -> Reply:
        request = urllib.request.Request(url, data=data, method=method, headers=self._headers())
        for key, value in extra.items():
            request.add_header(key, value)
        base = _base(url)
        try:
            with opener(self.tls_for(url)).open(request, timeout=self.timeout_s) as response:
                status = response.status
                return Reply(response.read(), f"{base} answered HTTP {status}", status)
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            if 300 <= exc.code < 400:
                raise wrong_cell_of(raw, base) or not_followed(
                    exc.code, exc.headers.get("Location"), base
                ) from None
            error = _http_error(exc.code, raw, exc.headers, base)
            if isinstance(error, Unauthorized):
                error.args = (self._token_hint(error),)
            raise error from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLError):  # the handshake failed: nothing was sent
                raise _Unreachable(_tls_failure(base, exc.reason), is_sent=False) from None
            # Refused or unresolvable: the request never left, so any request may go elsewhere.
            is_unsent = isinstance(exc.reason, ConnectionRefusedError | socket.gaierror)
            message = f"cannot reach {base}: {_reason(exc.reason)}"
            raise _Unreachable(message, is_sent=not is_unsent) from None
        except TimeoutError:
            raise _Unreachable(
                f"no answer from {base} within {self.timeout_s:g}s", is_sent=True
            ) from None
        except (OSError, HTTPException) as exc:
            message = f"connection to {base} failed: {_reason(exc)}"
            if base.startswith("http://") and isinstance(exc, BadStatusLine) and _speaks_tls(base):
                # a TLS-only node closes a plain request without a word, as a dying node does:
                # say so only when the node completes a TLS handshake
                message += " (the node serves HTTPS: use an https:// URL)"
            raise _Unreachable(message, is_sent=True) from None

    def _token_hint(self, error: SchedError) -> str:
        """A refusal of the token, naming where it came from (exit code 4)."""
        if not self.token:
            return f"{error}: give a token with --token or SCHEDCTL_TOKEN"
        return f"{error} (the token from {self.token_source})"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": f"schedctl/{__version__}"}
        headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.tenant:
            headers["X-Tenant"] = self.tenant
        return headers

    # ------------------------------------------------------------ jobs

    def create_job(
        self, body: Mapping[str, JSONValue], *, idempotency_key: str | None
    ) -> Answer[JobView]:
        """POST /v1/jobs; with an Idempotency-Key it is safe to repeat on another node."""
        headers = {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}
        safe = idempotency_key is not None
        return self.answer(JobView, "POST", "/v1/jobs", dict(body), headers=headers, is_safe=safe)

    def get_job(self, job_id: str) -> Answer[JobView]:
        return self.answer(JobView, "GET", _job(job_id))

    def list_jobs(
        self, *, status: str | None, cursor: str | None, limit: int, filters: Query | None = None
    ) -> Answer[JobList]:
        """A page of jobs; `filters` are more GET /v1/jobs parameters (target_type, host...)."""
        query = {**(filters or {}), "status": status, "cursor": cursor, "limit": limit}
        return self.answer(JobList, "GET", "/v1/jobs", query=query)

    def update_job(self, job_id: str, changes: Mapping[str, JSONValue]) -> Answer[JobView]:
        return self.answer(JobView, "PATCH", _job(job_id), dict(changes))

    def cancel_job(self, job_id: str) -> None:
        self.request("DELETE", _job(job_id))

    # Jobs by key (issue 32: schedctl apply): a PUT carries the whole job, so repeating it on
    # another node after a failure is safe; a DELETE repeated answers 404, which apply expects.

    def get_job_by_key(self, key: str) -> Answer[JobView]:
        return self.answer(JobView, "GET", _by_key(key))

    def put_job_by_key(self, key: str, body: Mapping[str, JSONValue]) -> tuple[bool, JSONObject]:
        """PUT /v1/jobs/by-key/{key}: (whether it created the job, the job with "changed")."""
        status, raw = self.request_status("PUT", _by_key(key), dict(body), is_safe=True)
        answer = read_answer(raw, KeyedJob, request=f"PUT {_by_key(key)}")
        return status == 201, answer.raw

    def plan_job_by_key(self, key: str, body: Mapping[str, JSONValue]) -> Answer[KeyedJobPlan]:
        """PUT /v1/jobs/by-key/{key}?dry_run=true: what that PUT would do; changes nothing."""
        query = {"dry_run": "true"}
        path = _by_key(key)
        return self.answer(KeyedJobPlan, "PUT", path, dict(body), query=query, is_safe=True)

    def cancel_job_by_key(self, key: str) -> None:
        self.request("DELETE", _by_key(key), is_safe=True)

    def pause_job(self, job_id: str, *, reason: str | None = None) -> Answer[JobView]:
        return self.answer(JobView, "POST", _job(job_id) + "/pause", _pause_body(reason))

    def resume_job(self, job_id: str) -> Answer[JobView]:
        return self.answer(JobView, "POST", _job(job_id) + "/resume")

    def trigger_job(
        self, job_id: str, *, payload: JSONValue | msgspec.UnsetType = msgspec.UNSET
    ) -> Answer[Triggered]:
        body = None if payload is msgspec.UNSET else {"payload": payload}
        return self.answer(Triggered, "POST", _job(job_id) + "/trigger", body)

    def pause_queue(self, name: str, *, reason: str | None) -> Answer[QueuePause]:
        return self.answer(QueuePause, "POST", _queue(name) + "/pause", _pause_body(reason))

    def resume_queue(self, name: str) -> Answer[QueuePause]:
        return self.answer(QueuePause, "POST", _queue(name) + "/resume")

    def pause_tenant(self, tenant_id: str, *, reason: str | None) -> Answer[TenantView]:
        return self.answer(TenantView, "POST", _tenant(tenant_id) + "/pause", _pause_body(reason))

    def resume_tenant(self, tenant_id: str) -> Answer[TenantView]:
        return self.answer(TenantView, "POST", _tenant(tenant_id) + "/resume")

    def backfill_job(self, job_id: str, *, from_: str, to: str) -> Answer[Backfilled]:
        """POST /v1/jobs/{id}/backfill: runs for the occurrences in [from, to) without one."""
        body: dict[str, JSONValue] = {"from": from_, "to": to}
        return self.answer(Backfilled, "POST", _job(job_id) + "/backfill", body)

    def list_runs(
        self, job_id: str, *, cursor: str | None, limit: int, outputs: bool = False
    ) -> Answer[RunList]:
        query: dict[str, str | int | None] = {"cursor": cursor, "limit": limit}
        if outputs:
            query["outputs"] = "true"
        return self.answer(RunList, "GET", _job(job_id) + "/runs", query=query)

    def list_versions(self, job_id: str, *, cursor: str | None, limit: int) -> Answer[VersionList]:
        query = {"cursor": cursor, "limit": limit}
        return self.answer(VersionList, "GET", _job(job_id) + "/versions", query=query)

    def list_alerts(self, *, cursor: str | None, limit: int) -> Answer[AlertList]:
        query = {"cursor": cursor, "limit": limit}
        return self.answer(AlertList, "GET", "/v1/alerts", query=query)

    def preview_schedule(
        self,
        schedule: Mapping[str, str],
        *,
        after: str | None,
        count: int,
        current: Mapping[str, str] | None = None,
    ) -> Answer[PreviewResult]:
        """POST /v1/schedules:preview: the next `count` runs after `after` (default: the
        node's now), and `current`'s beside them when given (an edit's old schedule). It
        changes nothing, so it may go to another node."""
        body: dict[str, JSONValue] = {"schedule": dict(schedule), "count": count}
        if after is not None:
            body["after"] = after
        if current is not None:
            body["current"] = dict(current)
        return self.answer(PreviewResult, "POST", "/v1/schedules:preview", body, is_safe=True)

    def forecast(self, *, from_: str | None, to: str | None, step: str) -> Answer[Forecast]:
        """GET /v1/forecast: the runs due per step of [from, to) (defaults: now, a day on)."""
        query = {"from": from_, "to": to, "step": step}
        return self.answer(Forecast, "GET", "/v1/forecast", query=query)

    # ------------------------------------------------------------ tenants and cluster

    def create_tenant(self, body: Mapping[str, JSONValue]) -> Answer[TenantCredentials]:
        return self.answer(TenantCredentials, "POST", "/v1/tenants", dict(body))

    def list_tenants(self, *, cursor: str | None, limit: int) -> Answer[Tenants]:
        query = {"cursor": cursor, "limit": limit}
        return self.answer(Tenants, "GET", "/v1/tenants", query=query)

    def cluster(self) -> Answer[ClusterAnswer]:
        return self.answer(ClusterAnswer, "GET", "/v1/cluster")


@functools.cache
def _tls_context(cacert: str | None) -> ssl.SSLContext:
    # Imported here: schedd.tls brings cryptography's x509 (about 30 ms of a start that is
    # ~250 ms), and only an https:// URL needs it.
    from schedd.tls import client_context

    return client_context(None if cacert is None else Path(cacert))


def _tls_failure(base: str, exc: ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"cannot verify the TLS certificate of {base}: {exc.verify_message}; give the CA "
            f"certificate that signed it with --cacert FILE or SCHEDCTL_CACERT"
        )
    if exc.reason == "WRONG_VERSION_NUMBER":
        return f"TLS handshake with {base} failed: it does not speak TLS (use an http:// URL?)"
    return f"TLS handshake with {base} failed: {(exc.reason or str(exc)).lower()}"


def _encoded(body: Body) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, msgspec.Struct):
        return msgspec.json.encode(body)
    return json.dumps(body, ensure_ascii=False).encode()


def _query_string(query: Query) -> str:
    given = {key: value for key, value in query.items() if value is not None}
    return "?" + urllib.parse.urlencode(given, doseq=True) if given else ""


def _job(job_id: str) -> str:
    return "/v1/jobs/" + urllib.parse.quote(job_id, safe="")


def _by_key(key: str) -> str:
    return "/v1/jobs/by-key/" + urllib.parse.quote(key, safe="")


def _queue(name: str) -> str:
    return "/v1/queues/" + urllib.parse.quote(name, safe="")


def _tenant(tenant_id: str) -> str:
    return "/v1/tenants/" + urllib.parse.quote(tenant_id, safe="")


def _pause_body(reason: str | None) -> dict[str, JSONValue] | None:
    """A pause's body: its reason, or none at all."""
    return None if reason is None else {"reason": reason}


TLS_PROBE_S = 1.0  # the handshake that tells a TLS-only node from a dying one


def _speaks_tls(base: str) -> bool:
    """Whether the node at `base` completes a TLS handshake (its certificate unchecked, and
    nothing sent after the handshake): a closed port, a dead node or a plain HTTP server
    does not."""
    parts = urllib.parse.urlsplit(base)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        address = (parts.hostname or "", parts.port or 80)
        with (
            socket.create_connection(address, timeout=TLS_PROBE_S) as sock,
            context.wrap_socket(sock, server_hostname=parts.hostname),
        ):
            return True
    except (OSError, ValueError):  # ssl.SSLError is an OSError
        return False


def _base(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    return str(reason) or type(reason).__name__


def _http_error(status: int, raw: bytes, headers: Message, base: str) -> SchedError:
    """The schedd error for an HTTP error answer, with the server's own message and code."""
    code, message = _error_body(raw)
    if status in _UNAVAILABLE:
        text = f"{base}: {message or f'HTTP {status}'}"
    elif status in BY_STATUS or code in BY_CODE:
        text = message or f"HTTP {status}"
    else:
        text = f"{base} answered HTTP {status}: {message or 'no error message'}"
    exc = error_of_answer(status, code, text)
    retry_after = headers.get("Retry-After")
    if status == 429 and retry_after:
        exc.args = (f"{exc} (retry after {retry_after}s)",)
    return exc


def _error_body(raw: bytes) -> tuple[str | None, str | None]:
    """(code, message) of the contract's {"error": {"code", "message"}}, or Nones."""
    try:
        error = json.loads(raw)["error"]
        return str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        return None, None
