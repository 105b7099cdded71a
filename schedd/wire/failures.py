"""A failure policy (issue 31): what schedd does when a job's runs keep ending dead. A job's
own (spec field "on_failure") or its tenant's default (PATCH /v1/tenants/{id} "on_failure")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

import msgspec
from msgspec import Meta

from schedd.bodies import Body

MAX_AFTER = 100
DEFAULT_AFTER = 3
URL_PATTERN = r"^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]"


class OnFailure(Body, kw_only=True):
    """After `after` consecutive runs of a job ended dead (retries exhausted), POST one signed
    alert to `alert_url` and/or pause the job; a run that succeeds starts the count again."""

    alert_url: (
        Annotated[
            str, Meta(min_length=1, max_length=2048, extra_json_schema={"pattern": URL_PATTERN})
        ]
        | None
    ) = None
    after: Annotated[int, Meta(ge=1, le=MAX_AFTER)] = DEFAULT_AFTER
    pause: bool = False

    field_messages: ClassVar[Mapping[str, str]] = {
        "alert_url": "must be an http(s) URL or null",
        "after": f"must be an integer from 1 to {MAX_AFTER}, got {{value!r}}",
        "pause": "must be true or false",
    }


class OnFailureView(msgspec.Struct, frozen=True, kw_only=True):
    """A failure policy as the job or tenant object shows it."""

    alert_url: str | None
    after: int
    pause: bool


def as_json(policy: OnFailure) -> dict[str, object]:
    """The stored form (canonical: every field)."""
    return {"alert_url": policy.alert_url, "after": policy.after, "pause": policy.pause}
