"""The target kinds a run may be delivered to besides the built-in `queue` and `http`: the
tenant's brokers, each reached through one of its named connections. `KINDS` is the one list
of them: the API's parser (`jobspec.py`), the stored reader (`stored_spec.py`), the connection
URL check (`guard/connections.py`), the metrics' labels, the deliverers and `/test` probes of a
node (`delivery/kinds.py`, `delivery/probe.py`), schedctl's flags and lines, and the OpenAPI
generator (`tools/gen_openapi.py`) all iterate it.

A new kind (MQTT, Kafka) is a module here (its target's struct, strict and lenient parsers,
schedctl flag and schema: `TargetKind` in kind.py), one entry in `KINDS`, and its deliverer in
`schedd/delivery/<kind>.py`, imported only at the kind's first run or probe (docs/delivery.md
"Adding a target kind").
"""

from __future__ import annotations

from dataclasses import fields

from schedd.jsonbody import JSONObject
from schedd.model import BrokerTarget
from schedd.targets import nats, rabbitmq, redis_stream
from schedd.targets.kind import CONNECTION_NAME, CliFlag, CliOption, TargetKind

__all__ = [
    "BY_CONNECTION",
    "BY_NAME",
    "CONNECTION_KIND_OF_TARGET",
    "CONNECTION_NAME",
    "CONNECTION_SCHEMES",
    "DEFAULT_PORTS",
    "KINDS",
    "TARGET_TYPES",
    "CliFlag",
    "CliOption",
    "TargetKind",
    "kind_of",
    "target_to_json",
]

KINDS: tuple[TargetKind, ...] = (redis_stream.KIND, rabbitmq.KIND, nats.KIND)

BY_NAME = {kind.name: kind for kind in KINDS}
BY_CONNECTION = {kind.connection: kind for kind in KINDS}
_BY_STRUCT = {kind.struct: kind for kind in KINDS}
# Every target type, the built-in ones first (the API's and schedctl's order).
TARGET_TYPES = ("queue", "http", *BY_NAME)
# A broker target's type -> the kind of connection it needs; a connection URL's scheme -> its
# kind and its default port.
CONNECTION_KIND_OF_TARGET = {kind.name: kind.connection for kind in KINDS}
CONNECTION_SCHEMES = {scheme: kind.connection for kind in KINDS for scheme in kind.schemes}
DEFAULT_PORTS = {scheme: port for kind in KINDS for scheme, port in kind.schemes.items()}


def kind_of(target: BrokerTarget) -> TargetKind:
    return _BY_STRUCT[type(target)]


def target_to_json(target: BrokerTarget) -> JSONObject:
    """The API form of a broker target: its type, then its fields in their order (the store's
    canonical JSON); a field that is None (a Redis stream's maxlen) is left out."""
    found: JSONObject = {"type": kind_of(target).name}
    for field in fields(target):
        value = getattr(target, field.name)
        if value is not None:
            found[field.name] = value
    return found
