"""Pausing a job, a queue or a tenant with a reason (issue 31): the request and the answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

import msgspec
from msgspec import UNSET, Meta, UnsetType

from schedd.bodies import Body
from schedd.wire.fields import Payload

MAX_REASON = 500
REASON_MESSAGE = f"must be a string of 1-{MAX_REASON} printable characters"


class PauseRequest(Body):
    """An optional body: why (kept, shown as paused_reason, and in the audit record)."""

    reason: (
        Annotated[
            str, Meta(min_length=1, max_length=MAX_REASON, pattern=r"^[^\u0000-\u001f\u007f]*$")
        ]
        | None
    ) = None

    field_messages: ClassVar[Mapping[str, str]] = {"reason": REASON_MESSAGE}


class QueuePause(msgspec.Struct, frozen=True, kw_only=True):
    """A queue's pause: while paused, receives on it hand out nothing."""

    name: str
    paused: bool
    paused_reason: str | None


class TriggerRequest(Body):
    """An optional body: this run's own payload, in place of the job's (same size limit)."""

    payload: Payload | UnsetType = UNSET
