"""One HTTP call to a node, classified the way the history needs it: ok, failed (certainly not
applied) or unknown (may have been applied). Never raises for network trouble."""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any, Literal

Outcome = Literal["ok", "failed", "unknown"]
CLIENT_TIMEOUT_S = 8.0  # the API answers within its 5 s request timeout, unless it is paused
_NOT_APPLIED_503 = {"no_leader", "cluster_unavailable"}


@dataclass(frozen=True, slots=True)
class Reply:
    """What came back: the outcome, the status (None when no answer came) and the JSON body."""

    outcome: Outcome
    status: int | None
    body: Any
    error: str | None
    start_ms: int
    end_ms: int

    @property
    def error_code(self) -> str | None:
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            code = self.body["error"].get("code")
            return code if isinstance(code, str) else None
        return None


def classify(status: int, body: Any) -> Outcome:
    """2xx ok; 4xx and a 503 saying nothing was applied failed; other 5xx unknown."""
    if 200 <= status < 300:
        return "ok"
    if 400 <= status < 500:
        return "failed"  # the contract: "a failed request changes nothing"
    code = body.get("error", {}).get("code") if isinstance(body, dict) else None
    if status == 503 and code in _NOT_APPLIED_503:
        return "failed"
    return "unknown"  # outcome_unknown, a 500, or an answer we cannot read


def now_ms() -> int:
    return int(time.time() * 1000)


def call(
    base_url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str,
    headers: dict[str, str] | None = None,
    timeout_s: float = CLIENT_TIMEOUT_S,
) -> Reply:
    """One request. A connection that cannot be made is `failed` (nothing was sent); a request
    sent without an answer (timeout, reset) is `unknown`."""
    host, _, port = base_url.removeprefix("http://").partition(":")
    start = now_ms()
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout_s)
    try:
        try:
            conn.connect()
        except OSError as exc:
            return Reply("failed", None, None, f"connect: {exc!r}", start, now_ms())
        data = None if body is None else json.dumps(body).encode()
        all_headers = {"Authorization": f"Bearer {token}", **(headers or {})}
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=all_headers)
            response = conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            return Reply("unknown", None, None, f"no answer: {exc!r}", start, now_ms())
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = None
        status = response.status
        return Reply(classify(status, decoded), status, decoded, None, start, now_ms())
    finally:
        conn.close()


def read_json(base_url: str, path: str, *, token: str, timeout_s: float = 10.0) -> Any:
    """GET that must answer 200 (checker and nemesis reads); None on any failure."""
    reply = call(base_url, "GET", path, token=token, timeout_s=timeout_s)
    return reply.body if reply.status == 200 else None
