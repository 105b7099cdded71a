"""Target bodies: each target type's request struct (TargetInput's members, tagged by `type`),
parse_target, which validates a target into the model's Target, and target_to_json, its API
form (part of the canonical JSON jobspec writes). Nothing here reaches a network: the SSRF guard
runs at the API."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, ClassVar, Union
from urllib.parse import urlsplit

import msgspec
from msgspec import UNSET, Meta, UnsetType

from schedd.bodies import Body, DurationMs, check_whole_patterns, convert_body, ms_or
from schedd.errors import InvalidRequest
from schedd.jsonbody import JSONObject
from schedd.model import HttpMethod, HttpTarget, QueueTarget, Target
from schedd.stored_spec import RESERVED_HEADERS
from schedd.targets import KINDS, TARGET_TYPES
from schedd.targets import target_to_json as broker_target_to_json
from schedd.targets.kind import BrokerInput
from schedd.timeformat import format_duration
from schedd.wire.queues import QueueName

QUEUE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
HTTP_METHODS = tuple(method.value for method in HttpMethod)
PRINTABLE = r"^[^\u0000-\u001f\u007f]*$"
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")


def target_to_json(target: Target) -> JSONObject:
    """The API form of a target."""
    if isinstance(target, QueueTarget):
        return {"type": "queue", "name": target.name}
    if not isinstance(target, HttpTarget):
        return broker_target_to_json(target)
    return {
        "type": "http",
        "url": target.url,
        "method": target.method,
        "headers": dict(target.headers),
        "timeout": format_duration(target.timeout_ms),
    }


class QueueInput(Body, tag_field="type", tag="queue"):
    """A queue target: runs become messages of the tenant's built-in queue `name`."""

    name: QueueName

    field_messages: ClassVar[Mapping[str, str]] = {
        "name": f"must match {QUEUE_NAME.pattern}, got {{value!r}}",
    }

    def target(self) -> QueueTarget:
        return QueueTarget(name=self.name)


class HttpTimeout(DurationMs):
    """Per attempt; default 10s."""

    minimum_ms = 1_000
    maximum_ms = 60_000


# Published, checked by _parse_headers (whose messages name the header).
HeaderValue = Annotated[str, Meta(extra_json_schema={"maxLength": 4096, "pattern": PRINTABLE})]
_URL = "must be an http:// or https:// URL of at most 2048 chars, no spaces"
_HEADERS = "must be an object of at most 32 string headers"


class HttpInput(Body, tag_field="type", tag="http", kw_only=True):
    """An http target: each run is a signed request to the tenant's URL."""

    url: Annotated[
        str,
        Meta(
            max_length=2048,
            description="http(s) URL with a host and no credentials. The SSRF guard refuses "
            "private, loopback and link-local addresses and hosts outside the tenant's "
            "allowed_hosts (422).",
            extra_json_schema={"pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://[^\u0000-\u0020\u007f]+$"},
        ),
    ]
    method: HttpMethod = HttpMethod.POST
    headers: Annotated[
        dict[str, HeaderValue],
        Meta(
            description="Sent as given. Host, Content-Length, Content-Type, Transfer-Encoding, "
            "Connection, Idempotency-Key and webhook-* are refused.",
            extra_json_schema={
                "maxProperties": 32,
                "propertyNames": {"pattern": r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"},
            },
        ),
    ] = msgspec.field(default_factory=dict)
    timeout: HttpTimeout | UnsetType = UNSET

    field_messages: ClassVar[Mapping[str, str]] = {
        "url": _URL,
        "method": f"must be one of {', '.join(HTTP_METHODS)}",
        "headers": _HEADERS,
    }

    def target(self) -> HttpTarget:
        return HttpTarget(
            url=_parse_url(self.url),
            method=self.method.value,
            headers=_parse_headers(self.headers),
            timeout_ms=ms_or(self.timeout, 10_000),
        )


TargetInput = QueueInput | HttpInput | BrokerInput
# Each target type's request struct, built in first.
TARGET_INPUTS: Mapping[str, type[TargetInput]] = {
    "queue": QueueInput,
    "http": HttpInput,
    **{kind.name: kind.input for kind in KINDS},
}
if TYPE_CHECKING:
    TargetUnion = TargetInput
else:  # every member, tagged by `type`, for msgspec (a job body's target; OpenAPI's TargetInput)
    TargetUnion = Union[tuple(TARGET_INPUTS.values())]  # noqa: UP007 (built at run time)


def parse_target(value: object) -> Target:
    """Validate a target object: a queue name, an http(s) URL with method and headers, or a
    tenant's broker (Redis stream, RabbitMQ exchange, NATS subject) through a named connection.
    Converted by the member its `type` names, whose messages name the field: msgspec's own pick
    of a union's member is no faster outside a struct (a union is no class it can cache on)."""
    if not isinstance(value, Mapping):
        raise InvalidRequest("target", "must be an object with a 'type'")
    kind = value.get("type")
    asked = TARGET_INPUTS.get(kind) if isinstance(kind, str) else None
    if asked is None:
        raise InvalidRequest("target.type", f"must be one of {_TARGET_TYPES}, got {kind!r}")
    return convert_body(value, asked, field="target").target()


def checked_target(asked: TargetInput, value: object) -> Target:
    """A target msgspec converted as part of a job body (`value` as the body gave it): the
    checks convert_body adds to msgspec's, then the type's own."""
    check_whole_patterns(asked, type(asked), "target", value)
    return asked.target()


_TARGET_TYPES = ", ".join(repr(t) for t in TARGET_TYPES)


def _parse_url(value: str) -> str:
    if len(value) > 2048 or _CONTROL_OR_SPACE.search(value):
        raise InvalidRequest("target.url", _URL)
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. an unclosed IPv6 bracket: 'http://[::1/'
        raise InvalidRequest("target.url", f"is not a valid URL, got {value!r}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidRequest("target.url", f"must be http:// or https://, got {value!r}")
    try:
        port_ok = parts.hostname is not None and (parts.port is None or parts.port > 0)
    except ValueError:
        port_ok = False
    if not port_ok or parts.username is not None or parts.password is not None:
        raise InvalidRequest("target.url", f"needs a host (and no credentials), got {value!r}")
    return value


def _parse_headers(value: dict[str, str]) -> dict[str, str]:
    """The headers msgspec read (a dict of its own, names and values strings), checked."""
    if len(value) > 32:
        raise InvalidRequest("target.headers", _HEADERS)
    for name, text in value.items():
        lowered = name.lower()
        if not _HEADER_NAME.fullmatch(name) or lowered in RESERVED_HEADERS:
            raise InvalidRequest("target.headers", f"header name {name!r} is not allowed")
        if lowered.startswith("webhook-"):
            raise InvalidRequest("target.headers", f"{name!r}: webhook-* headers are set by schedd")
        if len(text) > 4096 or _CONTROL.search(text):
            raise InvalidRequest("target.headers", f"value of {name!r} must be printable text")
    return value
