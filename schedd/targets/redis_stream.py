"""The redis_stream target kind: XADD to a stream on the tenant's Redis (its deliverer:
schedd/delivery/redis_stream.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from msgspec import Meta

from schedd.bodies import excerpt
from schedd.errors import InvalidRequest
from schedd.jsonbody import as_integer
from schedd.model import BrokerTarget
from schedd.targets.kind import BrokerInput, CliFlag, CliOption, TargetKind, stored_text

MAX_STREAM_BYTES = 256
MAX_MAXLEN = 1_000_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisStreamTarget(BrokerTarget):
    """Deliver runs with XADD to `stream` on the tenant's Redis connection `connection`."""

    stream: str
    maxlen: int | None = None  # approximate MAXLEN trimming when given


Stream = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_STREAM_BYTES,
        pattern=r"^[^\s\u0000-\u001f\u007f]+$",
        description=f"At most {MAX_STREAM_BYTES} bytes (UTF-8), no whitespace or control "
        "characters.",
    ),
]
MaxLen = Annotated[
    Annotated[int, Meta(ge=1, le=MAX_MAXLEN)] | None,
    Meta(description="XADD MAXLEN ~ (approximate trimming); none when absent or null."),
]
_STREAM = (
    f"must be 1-{MAX_STREAM_BYTES} bytes without spaces or control characters, got {{value!r}}"
)


class RedisStreamInput(BrokerInput, tag="redis_stream", kw_only=True):
    """A redis_stream target: runs added with XADD to a stream through a connection."""

    stream: Stream
    maxlen: MaxLen = None

    field_messages: ClassVar[Mapping[str, str]] = {
        **BrokerInput.field_messages,
        "stream": _STREAM,
        "maxlen": f"must be an integer 1-{MAX_MAXLEN:,}, got {{value!r}}",
    }

    def target(self) -> RedisStreamTarget:
        if len(self.stream.encode()) > MAX_STREAM_BYTES:
            raise InvalidRequest(
                "target.stream", _STREAM.replace("{value!r}", excerpt(self.stream))
            )
        return RedisStreamTarget(connection=self.connection, stream=self.stream, maxlen=self.maxlen)


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
    input=RedisStreamInput,
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
)
