"""The answers of the dead-letter routes, and the body of a redrive of several."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from schedd.bodies import Body
from schedd.wire.errors import ErrorDetail
from schedd.wire.fields import Count, HistoryComplete, Instant, NextCursor, one_of
from schedd.wire.jobs import TargetJSON


class DeadLetterView(msgspec.Struct, frozen=True, kw_only=True):
    """A run whose attempts ran out, and where it was going."""

    id: str
    job_id: str
    scheduled_at: Instant
    attempts: Count
    error: str | None
    created_at: Instant
    target: TargetJSON


class DeadLetterList(msgspec.Struct, frozen=True, kw_only=True):
    """A page of dead letters."""

    deadletters: list[DeadLetterView]
    next_cursor: NextCursor
    history_complete: HistoryComplete = msgspec.UNSET


Fingerprint = Annotated[str, Meta(pattern="^[0-9a-f]{16}$")]
GROUPED = 10_000  # the newest dead letters GET /v1/deadletters?group_by=error groups


class ErrorGroup(msgspec.Struct, frozen=True, kw_only=True):
    """Dead letters whose errors are alike: the same text once URLs, UUIDs, IP addresses,
    host:port, hex ids and numbers (but an HTTP status) are masked."""

    fingerprint: Annotated[
        Fingerprint,
        Meta(description="The masked error's hash: GET /v1/deadletters?fingerprint= lists them."),
    ]
    example: Annotated[str | None, Meta(description="The newest one's error, as it was.")]
    count: Count
    first_at: Annotated[Instant, Meta(description="When the oldest one's run died.")]
    last_at: Annotated[Instant, Meta(description="When the newest one's run died.")]


class ErrorGroups(msgspec.Struct, frozen=True, kw_only=True):
    """The tenant's newest dead letters grouped by error, largest group first."""

    groups: list[ErrorGroup]
    partial: Annotated[
        bool,
        Meta(description=f"The tenant has more dead letters than the newest {GROUPED:,} grouped."),
    ]


class RedriveQueued(msgspec.Struct, frozen=True, kw_only=True):
    """One new attempt is queued."""

    id: str
    status: Literal["redriven"]


class Redriven(msgspec.Struct, frozen=True, kw_only=True):
    """An id of POST /v1/deadletters:redrive whose dead letter was redriven."""

    id: str
    redriven: Annotated[bool, Meta(extra_json_schema={"const": True})]


class NotRedriven(msgspec.Struct, frozen=True, kw_only=True):
    """An id of POST /v1/deadletters:redrive left as it was, and why."""

    id: str
    error: ErrorDetail


class RedriveResults(msgspec.Struct, frozen=True, kw_only=True):
    """One result per id, in order."""

    # Each a Redriven or a NotRedriven (msgspec types no union of two untagged structs).
    results: list[Annotated[Any, Meta(extra_json_schema=one_of(Redriven, NotRedriven))]]


MAX_REDRIVE = 500  # ids per POST /v1/deadletters:redrive
MAX_ID_CHARS = 300  # a dead letter id is "<job_id>:<scheduled ms>"
IDS_MESSAGE = f"must be the only field: a list of 1-{MAX_REDRIVE} dead letter ids"


class RedriveBatch(Body):
    ids: Annotated[
        list[Annotated[str, Meta(min_length=1, max_length=MAX_ID_CHARS)]],
        Meta(
            min_length=1,
            max_length=MAX_REDRIVE,
            extra_json_schema={"uniqueItems": True},  # checked after: api/deadletters.py
        ),
    ]

    field_messages: ClassVar[Mapping[str, str]] = {"ids": IDS_MESSAGE}
    unknown_field: ClassVar[str] = IDS_MESSAGE
    unknown_field_at: ClassVar[str | None] = "ids"
