"""The rabbitmq target kind: a message published to an exchange of the tenant's RabbitMQ (its
deliverer: schedd/delivery/rabbitmq.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from msgspec import Meta

from schedd.bodies import excerpt
from schedd.errors import InvalidRequest
from schedd.model import BrokerTarget
from schedd.targets.kind import (
    BrokerInput,
    CliFlag,
    TargetKind,
    stored_optional_text,
    stored_text,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RabbitMqTarget(BrokerTarget):
    """Publish runs (persistent, mandatory, confirmed) to `exchange` with `routing_key`."""

    exchange: str
    routing_key: str


Exchange = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9_.:-]{0,255}$",
        description="'' is the default exchange (routing_key then names a queue).",
    ),
]
RoutingKey = Annotated[
    str,
    Meta(
        max_length=255,
        pattern=r"^[^\u0000-\u001f\u007f]*$",
        description="At most 255 bytes (UTF-8) of printable characters.",
    ),
]
_ROUTING_KEY = "must be at most 255 bytes of printable characters, got {value!r}"


class RabbitMqInput(BrokerInput, tag="rabbitmq", kw_only=True):
    """A rabbitmq target: runs published to an exchange with a routing key through a
    connection."""

    exchange: Exchange = ""
    routing_key: RoutingKey

    field_messages: ClassVar[Mapping[str, str]] = {
        **BrokerInput.field_messages,
        "exchange": "must be 0-255 of [A-Za-z0-9_.:-] ('' is the default exchange), got {value!r}",
        "routing_key": _ROUTING_KEY,
    }

    def target(self) -> RabbitMqTarget:
        key = self.routing_key
        if len(key.encode()) > 255 or not key.isprintable():
            raise InvalidRequest(
                "target.routing_key", _ROUTING_KEY.replace("{value!r}", excerpt(key))
            )
        if not self.exchange and not key:
            raise InvalidRequest(
                "target.routing_key", "must name a queue when the exchange is the default one ('')"
            )
        return RabbitMqTarget(connection=self.connection, exchange=self.exchange, routing_key=key)


def load(value: Mapping[str, object]) -> RabbitMqTarget:
    exchange = stored_optional_text(value, "exchange", "")
    key = stored_optional_text(value, "routing_key", "")
    if not exchange and not key:
        raise ValueError("target.routing_key: names no queue on the default exchange")
    return RabbitMqTarget(
        connection=stored_text(value, "connection"), exchange=exchange, routing_key=key
    )


def describe(target: Mapping[str, Any]) -> str:
    exchange = target["exchange"] or "(default exchange)"
    return f"rabbitmq {target['connection']} {exchange} {target['routing_key']}"


KIND = TargetKind(
    name="rabbitmq",
    struct=RabbitMqTarget,
    log_level=3,
    connection="rabbitmq",
    schemes={"amqp": 5672, "amqps": 5671},
    input=RabbitMqInput,
    load=load,
    describe=describe,
    flag=CliFlag(
        flag="--rabbitmq",
        metavar="CONN/EXCHANGE/KEY",
        help="Publish runs to EXCHANGE with routing KEY through CONN (CONN//KEY: the default "
        "exchange, KEY a queue).",
        fields=("exchange", "routing_key"),
    ),
    delivery="schedd.delivery.rabbitmq",
)
