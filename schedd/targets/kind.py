"""What a target kind is (`TargetKind`: one entry of the registry in `__init__.py`) and the helpers
its module shares with the others (and with `jobspec.py` and `stored_spec.py`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from msgspec import Meta

from schedd.bodies import Body
from schedd.model import BrokerTarget

CONNECTION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
ConnectionName = Annotated[
    str,
    Meta(
        pattern=f"^{CONNECTION_NAME.pattern}$",
        description="A connection of the tenant (POST /v1/connections) of this target's kind; "
        "else 400 naming target.connection.",
    ),
]


class BrokerInput(Body, tag_field="type", kw_only=True):
    """A broker target as a request body gives it: one struct per kind, tagged by its `type`
    (the kind's name), its fields after `connection` in the kind's JSON order. msgspec checks
    what a schema can say; `target` checks the rest (bytes, tokens) and builds the kind's
    model target."""

    connection: ConnectionName

    field_messages: ClassVar[Mapping[str, str]] = {
        "connection": "must name a connection: [A-Za-z0-9_.-]{1,64}, got {value!r}",
    }

    def target(self) -> BrokerTarget:
        raise NotImplementedError


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
    input: type[BrokerInput]  # a request body's form of it (its struct's fields, checked)
    load: Callable[[Mapping[str, object]], BrokerTarget]  # a stored one, leniently: ValueError
    describe: Callable[[Mapping[str, Any]], str]  # one line of schedctl for its JSON
    flag: CliFlag
    # Its deliverer's module, imported at the kind's first run or probe (delivery/kinds.py,
    # delivery/probe.py): it defines DELIVERER (a BrokerDeliverer class), CONNECTOR (a
    # Connector class) and `async server_version(client) -> str`.
    delivery: str


def stored_text(value: Mapping[str, object], name: str) -> str:
    found = value.get(name)
    if not isinstance(found, str) or not found:
        raise ValueError(f"target.{name}: missing or not text")
    return found


def stored_optional_text(value: Mapping[str, object], name: str, default: str) -> str:
    found = value.get(name, default)
    return found if isinstance(found, str) else default
