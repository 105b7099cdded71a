"""A job's spec as the store holds it, read back: never judged by the API's rules.

`jobspec.py` is the API's strict decoding: it refuses, naming the field, whatever a tenant may
not ask for today. What the store already holds was accepted by some release, perhaps with rules
that were looser than today's (a redrive even stores one attempt more than the API allows). So a
stored reader never calls the strict parser: if a later release tightened a pattern, its jobs
would end FAILED and never be delivered again (issue 30). The readers here take what they can
use and clamp what is out of range; they refuse (ValueError) only a value that names nothing
deliverable (no URL, no connection, an unknown type).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping

from schedd.errors import InvalidRequest
from schedd.jsonbody import as_integer
from schedd.model import Backoff, HttpTarget, QueueTarget, RetryPolicy, Target
from schedd.targets import BY_NAME
from schedd.targets.kind import stored_optional_text, stored_text
from schedd.timeformat import parse_duration

MAX_STORED_ATTEMPTS = 1_000_000
MAX_DELAY_MS = 86_400_000
# An HTTP call's timeout, as the API bounds it: a stored one outside is clamped, not refused.
TIMEOUT_BOUNDS_MS = (1_000, 60_000)
DEFAULT_TIMEOUT_MS = HttpTarget(url="").timeout_ms
# Headers schedd sets itself (and the transport's own): a stored target never sends its own.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection", "idempotency-key"}
)
_BACKOFFS = frozenset(b.value for b in Backoff)


@functools.lru_cache(maxsize=4096)  # an outbox row's text: a tenant's jobs share a few targets
def load_target(text: str) -> Target:
    """The target of a stored spec (its JSON text), read leniently; ValueError (naming
    `target`) only when it names nothing deliverable."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError("target: not JSON") from None
    if not isinstance(value, Mapping):
        raise ValueError("target: not an object")
    kind = value.get("type")
    if kind == "queue":
        return QueueTarget(name=stored_text(value, "name"))
    if kind == "http":
        return HttpTarget(
            url=stored_text(value, "url"),
            method=stored_optional_text(value, "method", "POST"),
            headers=_headers(value.get("headers")),
            timeout_ms=_timeout_ms(value.get("timeout")),
        )
    if isinstance(kind, str) and kind in BY_NAME:
        return BY_NAME[kind].load(value)
    raise ValueError(f"target.type: {kind!r} is not a kind this version delivers")


def stored_retry(value: object) -> RetryPolicy:
    """A retry policy the store already holds (an outbox row's, a message's): never refused.
    Out-of-range values are clamped, unreadable ones take the default."""
    default = RetryPolicy()
    if not isinstance(value, Mapping):
        return default
    attempts = as_integer(value.get("max_attempts"), -(2**63), 2**63)
    backoff = str(value.get("backoff"))
    initial = _stored_duration(value.get("initial_delay"), default.initial_delay_ms, MAX_DELAY_MS)
    maximum = _stored_duration(value.get("max_delay"), default.max_delay_ms, MAX_DELAY_MS)
    return RetryPolicy(
        max_attempts=default.max_attempts
        if attempts is None
        else min(max(attempts, 1), MAX_STORED_ATTEMPTS),
        backoff=Backoff(backoff) if backoff in _BACKOFFS else default.backoff,
        initial_delay_ms=initial,
        max_delay_ms=max(initial, maximum),
    )


@functools.lru_cache(maxsize=4096)
def load_retry(text: str) -> RetryPolicy:
    """An outbox row's retry policy (its JSON text), read as `stored_retry` reads it."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return stored_retry(value)


def _headers(value: object) -> dict[str, str]:
    """The text headers of a stored map; schedd's own and the transport's are left out."""
    if not isinstance(value, Mapping):
        return {}
    return {
        name: text
        for name, text in value.items()
        if isinstance(name, str)
        and isinstance(text, str)
        and name.lower() not in RESERVED_HEADERS
        and not name.lower().startswith("webhook-")
    }


def _timeout_ms(value: object) -> int:
    low, high = TIMEOUT_BOUNDS_MS
    return min(max(_stored_duration(value, DEFAULT_TIMEOUT_MS, high), low), high)


def _stored_duration(value: object, default_ms: int, high_ms: int) -> int:
    try:
        ms = parse_duration(value, field="stored")
    except InvalidRequest:
        return default_ms
    return min(ms, high_ms)
