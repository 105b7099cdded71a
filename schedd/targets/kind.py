"""What a target kind is (`TargetKind`: one entry of the registry in `__init__.py`) and the helpers
its module shares with the others (and with `jobspec.py` and `stored_spec.py`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from schedd.errors import InvalidRequest
from schedd.model import BrokerTarget

CONNECTION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True, slots=True, kw_only=True)
class CliOption:
    """An option of `schedctl add` that refines one kind's flag (--maxlen of --redis-stream): an
    integer `low`-`high`, the target's field `field`."""

    flag: str
    field: str
    metavar: str
    help: str
    low: int
    high: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CliFlag:
    """The kind's flag of `schedctl add`: its value is CONN/..., the connection and then `fields`,
    cut at the first slashes (names of connections and exchanges hold no slash; streams, routing
    keys and subjects may)."""

    flag: str
    metavar: str
    help: str
    fields: tuple[str, ...]
    options: tuple[CliOption, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)  # one object per kind: by identity
class TargetKind:
    """A broker target kind: every place that lists kinds iterates the registry of these."""

    name: str  # the target's `type`: a wire name (stored, in the log, in metrics), never renamed
    struct: type[BrokerTarget]  # its fields, after `connection`, in their JSON order
    # The log level from which every node delivers it: a job spec of this kind needs it
    # (store/commands.py `spec_level`), so an older node never takes a run it cannot deliver.
    log_level: int
    connection: str  # the kind of connection it names (`BrokerConnection.kind`)
    schemes: Mapping[str, int]  # that connection's URL schemes -> their default ports
    parse: Callable[[Mapping[str, Any]], BrokerTarget]  # the API's strict rules: InvalidRequest
    load: Callable[[Mapping[str, object]], BrokerTarget]  # a stored one, leniently: ValueError
    describe: Callable[[Mapping[str, Any]], str]  # one line of schedctl for its JSON
    flag: CliFlag
    # Its deliverer's module, imported at the kind's first run or probe (delivery/kinds.py,
    # delivery/probe.py): it defines DELIVERER (a BrokerDeliverer class), CONNECTOR (a
    # Connector class) and `async server_version(client) -> str`.
    delivery: str
    # The OpenAPI schema of its fields after `type` and `connection` (tools/gen_openapi.py).
    schema: Mapping[str, Any]
    required: tuple[str, ...]  # of those fields, the ones a request body must give


def reject_unknown(obj: Mapping[str, Any], allowed: frozenset[str] | set[str], prefix: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise InvalidRequest(f"{prefix}{unknown[0]}", "is not a known field")


def excerpt(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def connection_name(value: Mapping[str, Any]) -> str:
    name = value.get("connection")
    if not isinstance(name, str) or not CONNECTION_NAME.fullmatch(name):
        raise InvalidRequest(
            "target.connection",
            f"must name a connection: [A-Za-z0-9_.-]{{1,64}}, got {excerpt(name)}",
        )
    return name


def stored_text(value: Mapping[str, object], name: str) -> str:
    found = value.get(name)
    if not isinstance(found, str) or not found:
        raise ValueError(f"target.{name}: missing or not text")
    return found


def stored_optional_text(value: Mapping[str, object], name: str, default: str) -> str:
    found = value.get(name, default)
    return found if isinstance(found, str) else default
