"""The calendar routes' bodies and answers (issue 33 §1): named sets of local dates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import msgspec
from msgspec import Meta

from schedd.bodies import Body
from schedd.calendars import MAX_DATES, NAME_PATTERN
from schedd.wire.fields import Instant

CalendarName = Annotated[str, Meta(pattern=NAME_PATTERN, description="1-64 of A-Z a-z 0-9 _ . -")]
Dates = Annotated[
    list[Any],
    Meta(
        max_length=MAX_DATES,
        description=f"Local dates (YYYY-MM-DD, no zone), at most {MAX_DATES:,}: a schedule that "
        "excludes the calendar skips each occurrence whose date in its own zone is one of them.",
        extra_json_schema={"items": {"type": "string", "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
    ),
]


class CalendarInput(Body, kw_only=True):
    """A new calendar (POST /v1/calendars)."""

    name: CalendarName
    dates: Dates

    field_messages: ClassVar[Mapping[str, str]] = {
        "name": "must be 1-64 characters of A-Z a-z 0-9 _ . -, got {value!r}",
        "dates": f"must be a list of at most {MAX_DATES:,} dates (YYYY-MM-DD)",
    }


class CalendarDates(Body, kw_only=True):
    """A calendar's dates, replacing them all (PUT /v1/calendars/{name})."""

    dates: Dates

    field_messages: ClassVar[Mapping[str, str]] = {
        "dates": f"must be a list of at most {MAX_DATES:,} dates (YYYY-MM-DD)",
    }


class CalendarSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A calendar in a list: its name and the span of its dates."""

    name: str
    dates_count: int
    first: str | None
    last: str | None
    created_at: Instant
    updated_at: Instant


class CalendarView(CalendarSummary, frozen=True, kw_only=True):
    """One calendar, with its dates (sorted) and how many jobs not cancelled exclude it."""

    dates: list[str]
    used_by: Annotated[int, Meta(ge=0, description="Jobs (not cancelled) that exclude it.")]


class CalendarList(msgspec.Struct, frozen=True, kw_only=True):
    calendars: list[CalendarSummary]
