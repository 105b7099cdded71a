"""How long finished data is kept, per kind: the node's `[retention]` and a tenant's own
(shorter) values. Pure values; the pruning itself is `store/apply/retention.py`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, ClassVar

import msgspec

from schedd.bodies import Body, DurationMs, convert_body
from schedd.timeformat import format_duration

DAY_MS = 86_400_000
# runs: finished runs with their attempts, and finished (completed or cancelled) jobs with them;
# messages: queue messages nobody received for this long (they become dead letters first).
KINDS = ("runs", "audit", "deadletters", "messages")
DEFAULTS_MS: Mapping[str, int] = {
    "runs": 7 * DAY_MS,
    "audit": 30 * DAY_MS,
    "deadletters": 14 * DAY_MS,
    "messages": 7 * DAY_MS,
}
MIN_RETENTION_MS = 1_000  # seconds-long retention is for tests and benchmarks


class RetentionMs(DurationMs):
    """How long to keep a kind."""

    minimum_ms = MIN_RETENTION_MS


OwnValue = Annotated[
    RetentionMs | None,
    msgspec.Meta(
        description="How long to keep this kind; null clears the tenant's value (the node's "
        "applies again)."
    ),
]


class RetentionUpdate(Body):
    """Replaces the tenant's own retention: kinds not named (or null) follow the node's
    [retention] again; {} clears them all. Another key is 400."""

    # What a tenant may shorten for its own data; the audit trail is the operator's record.
    runs: OwnValue = None
    deadletters: OwnValue = None
    messages: OwnValue = None

    unknown_field: ClassVar[str] = "is not a kind a tenant sets; kinds: {fields}"


TENANT_KINDS: tuple[str, ...] = RetentionUpdate.__struct_fields__


@dataclass(frozen=True, slots=True)
class Retention:
    """Milliseconds to keep each kind for; a tenant's values only ever shorten the node's."""

    runs: int = DEFAULTS_MS["runs"]
    audit: int = DEFAULTS_MS["audit"]
    deadletters: int = DEFAULTS_MS["deadletters"]
    messages: int = DEFAULTS_MS["messages"]

    def as_ms(self) -> dict[str, int]:
        return {kind: int(getattr(self, kind)) for kind in KINDS}

    def shortened_by(self, tenant_ms: Mapping[str, int]) -> Retention:
        """This retention with a tenant's shorter values applied (longer ones are ignored)."""
        mine = self.as_ms()
        return Retention(**{k: min(mine[k], int(tenant_ms.get(k, mine[k]))) for k in KINDS})


def parse_tenant_retention(body: object, *, field: str = "retention") -> dict[str, int]:
    """A tenant's request body `{"runs": "1d", ...}` -> milliseconds per kind it names.

    `null` for a kind clears the tenant's own value (the node's applies again). Errors name
    `field.kind`, or just the kind when `field` is empty."""
    own = convert_body(body, RetentionUpdate, field=field)
    return {kind: int(ms) for kind in TENANT_KINDS if (ms := getattr(own, kind)) is not None}


def retention_json(ms: Mapping[str, int]) -> dict[str, str]:
    """Milliseconds per kind -> the API's duration texts."""
    return {kind: format_duration(int(ms[kind])) for kind in KINDS if kind in ms}
