"""Field types the contract's structs share: instants, durations, cursors, free-form JSON, and
references to components a field's own (untyped) value must match."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from msgspec import Meta, UnsetType

SCHEMAS = "#/components/schemas/"
DEFAULT_PAYLOAD_LIMIT = 64 * 1024  # bytes of a job's encoded payload (`[api] payload_limit`)
UTC_INSTANT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{3})?Z$"
RFC3339_INPUT = (  # what timeformat.parse_instant reads
    r"^(19[7-9][0-9]|2[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]"
    r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,9})?)?"
    r"([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)

# An answer's constraints are documented, not enforced when it is decoded: a client (schedctl)
# must read a newer server's answers, whose ids, times or states an older release did not know.
Instant = Annotated[
    str,
    Meta(
        description="RFC 3339 in UTC with a Z suffix; milliseconds only when non-zero.",
        examples=["2026-10-12T02:30:00Z"],
        extra_json_schema={"format": "date-time", "pattern": UTC_INSTANT},
    ),
]
InstantInput = Annotated[
    str,
    Meta(
        pattern=RFC3339_INPUT,
        description="RFC 3339 with a UTC offset ('Z' or '+05:30'), from 1970 to 2999. A time "
        "without an offset is refused.",
        examples=["2026-10-12T08:00:00+05:30"],
    ),
]
Duration = Annotated[
    str,
    Meta(
        pattern=r"^[0-9]+(ms|s|m|h|d)$",
        description="A duration as answers give it: the shortest exact unit.",
        examples=["10m"],
    ),
]
NextCursor = Annotated[
    str | None,
    Meta(description="Pass as `cursor` for the next page; null on the last page."),
]
# msgspec cannot describe schedd.jsonbody's recursive JSONValue alias: free-form JSON is Any.
Payload = Annotated[
    Any,
    Meta(
        description=f"Any JSON value, at most the node's payload limit "
        f"({DEFAULT_PAYLOAD_LIMIT // 1024} KiB by default) encoded. No NUL characters, "
        "no lone surrogates, nesting at most 32 levels, integers within 64 bits."
    ),
]
Count = Annotated[int, Meta(ge=0)]


# The structs a schema names only by reference (`ref`): their components must be published too.
REFERENCED: list[type] = []


def ref(kind: type) -> dict[str, str]:
    """A JSON Schema reference to the component of struct `kind` (named as the struct)."""
    if kind not in REFERENCED:
        REFERENCED.append(kind)
    return {"$ref": SCHEMAS + kind.__name__}


def one_of(*kinds: type) -> dict[str, list[dict[str, str]]]:
    """The schema of a value (kept as plain JSON) that is exactly one of these structs."""
    return {"oneOf": [ref(kind) for kind in kinds]}


def one_of_values(kind: type[StrEnum]) -> Meta:
    """An answer's text field documented as one of an enum's values, read as any text."""
    return Meta(extra_json_schema={"enum": [member.value for member in kind]})


# A history page's flag (issue 35 §1): absent while every history segment the page could need
# is on this node; false when one is still being fetched (a new or wiped node).
HistoryComplete = Annotated[
    bool | UnsetType,
    Meta(
        description="false when a history segment this page may need is not on this node "
        "yet (a new node still fetching history): rows of it may be missing; absent "
        "otherwise."
    ),
]
