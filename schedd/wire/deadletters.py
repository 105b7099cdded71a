"""The answers of the dead-letter routes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from schedd.wire.errors import ErrorDetail
from schedd.wire.fields import Count, Instant, NextCursor, one_of
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
