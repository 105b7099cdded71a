"""The rabbitmq target kind: a message published to an exchange of the tenant's RabbitMQ (its
deliverer: schedd/delivery/rabbitmq.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schedd.errors import InvalidRequest
from schedd.model import BrokerTarget
from schedd.targets.kind import (
    CliFlag,
    TargetKind,
    connection_name,
    excerpt,
    reject_unknown,
    stored_optional_text,
    stored_text,
)

_EXCHANGE = re.compile(r"[A-Za-z0-9_.:-]{0,255}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RabbitMqTarget(BrokerTarget):
    """Publish runs (persistent, mandatory, confirmed) to `exchange` with `routing_key`."""

    exchange: str
    routing_key: str


def parse(value: Mapping[str, Any]) -> RabbitMqTarget:
    reject_unknown(value, {"type", "connection", "exchange", "routing_key"}, prefix="target.")
    connection = connection_name(value)
    exchange = value.get("exchange", "")
    if not isinstance(exchange, str) or not _EXCHANGE.fullmatch(exchange):
        raise InvalidRequest(
            "target.exchange",
            f"must be 0-255 of [A-Za-z0-9_.:-] ('' is the default exchange), "
            f"got {excerpt(exchange)}",
        )
    key = value.get("routing_key")
    if not isinstance(key, str) or len(key.encode()) > 255 or not key.isprintable():
        raise InvalidRequest(
            "target.routing_key",
            f"must be at most 255 bytes of printable characters, got {excerpt(key)}",
        )
    if not exchange and not key:
        raise InvalidRequest(
            "target.routing_key", "must name a queue when the exchange is the default one ('')"
        )
    return RabbitMqTarget(connection=connection, exchange=exchange, routing_key=key)


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
    parse=parse,
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
    schema={
        "exchange": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9_.:-]{0,255}$",
            "default": "",
            "description": "'' is the default exchange (routing_key then names a queue).",
        },
        "routing_key": {
            "type": "string",
            "maxLength": 255,
            "pattern": r"^[^\u0000-\u001f\u007f]*$",
            "description": "At most 255 bytes (UTF-8) of printable characters.",
        },
    },
    required=("routing_key",),
)
