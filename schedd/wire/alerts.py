"""The answer of GET /v1/alerts (issue 31 §5): the tenant's failure alerts and how their
delivery went."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from schedd.wire.fields import Count, Instant, NextCursor


class AlertView(msgspec.Struct, frozen=True, kw_only=True):
    """One failure alert: where it goes, what it says, and its delivery so far."""

    alert_id: Annotated[int, Meta(ge=1)]
    job_id: str
    url: Annotated[str, Meta(description="The alert_url it is POSTed to.")]
    created_at: Instant
    attempts: Annotated[Count, Meta(description="POSTs made so far (at most 10).")]
    sent_at: Annotated[
        Instant | None, Meta(description="When an attempt was answered 2xx; null until then.")
    ]
    next_at: Annotated[
        Instant | None,
        Meta(
            description="When the next attempt is due; null once the alert is done (sent, or "
            "given up: then `sent_at` is null and `last_error` says why)."
        ),
    ]
    last_error: Annotated[str | None, Meta(description="The last failed attempt's error.")]
    body: Annotated[Any, Meta(description="The JSON the alert POSTs, as it is sent.")]


class AlertList(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the tenant's alerts, newest first."""

    alerts: list[AlertView]
    next_cursor: NextCursor
