"""The redis_stream target kind: XADD to a stream on the tenant's Redis (its deliverer:
schedd/delivery/redis_stream.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schedd.errors import InvalidRequest
from schedd.jsonbody import as_integer
from schedd.model import BrokerTarget
from schedd.targets.kind import (
    CliFlag,
    CliOption,
    TargetKind,
    connection_name,
    excerpt,
    reject_unknown,
    stored_text,
)

MAX_STREAM_BYTES = 256
MAX_MAXLEN = 1_000_000_000
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisStreamTarget(BrokerTarget):
    """Deliver runs with XADD to `stream` on the tenant's Redis connection `connection`."""

    stream: str
    maxlen: int | None = None  # approximate MAXLEN trimming when given


def parse(value: Mapping[str, Any]) -> RedisStreamTarget:
    reject_unknown(value, {"type", "connection", "stream", "maxlen"}, prefix="target.")
    connection = connection_name(value)
    stream = value.get("stream")
    if (
        not isinstance(stream, str)
        or not stream
        or len(stream.encode()) > MAX_STREAM_BYTES
        or _CONTROL_OR_SPACE.search(stream)
        or any(c.isspace() for c in stream)
    ):
        raise InvalidRequest(
            "target.stream",
            f"must be 1-{MAX_STREAM_BYTES} bytes without spaces or control characters, "
            f"got {excerpt(stream)}",
        )
    maxlen = value.get("maxlen")
    if maxlen is not None and as_integer(maxlen, 1, MAX_MAXLEN) is None:
        raise InvalidRequest(
            "target.maxlen", f"must be an integer 1-{MAX_MAXLEN:,}, got {excerpt(maxlen)}"
        )
    return RedisStreamTarget(
        connection=connection,
        stream=stream,
        maxlen=None if maxlen is None else as_integer(maxlen, 1, MAX_MAXLEN),
    )


def load(value: Mapping[str, object]) -> RedisStreamTarget:
    return RedisStreamTarget(
        connection=stored_text(value, "connection"),
        stream=stored_text(value, "stream"),
        maxlen=as_integer(value.get("maxlen"), 1, 2**63 - 1),
    )


def describe(target: Mapping[str, Any]) -> str:
    trim = f" (maxlen ~{target['maxlen']})" if target.get("maxlen") else ""
    return f"redis_stream {target['connection']} {target['stream']}{trim}"


KIND = TargetKind(
    name="redis_stream",
    struct=RedisStreamTarget,
    log_level=3,
    connection="redis",
    schemes={"redis": 6379, "rediss": 6379},
    parse=parse,
    load=load,
    describe=describe,
    flag=CliFlag(
        flag="--redis-stream",
        metavar="CONN/STREAM",
        help="Deliver runs with XADD to STREAM through connection CONN.",
        fields=("stream",),
        options=(
            CliOption(
                flag="--maxlen",
                field="maxlen",
                metavar="N",
                help="With --redis-stream: trim the stream to about N entries.",
                low=1,
                high=MAX_MAXLEN,
            ),
        ),
    ),
    delivery="schedd.delivery.redis_stream",
    schema={
        "stream": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_STREAM_BYTES,
            "pattern": r"^[^\s\u0000-\u001f\u007f]+$",
            "description": f"At most {MAX_STREAM_BYTES} bytes (UTF-8), no whitespace or "
            "control characters.",
        },
        "maxlen": {
            "anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_MAXLEN}, {"type": "null"}],
            "description": "XADD MAXLEN ~ (approximate trimming); none when absent or null.",
        },
    },
    required=("stream",),
)
