"""How long finished data is kept, per kind: the node's `[retention]` and a tenant's own
(shorter) values. Pure values; the pruning itself is `store/apply/retention.py`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from schedd.errors import InvalidRequest
from schedd.timeformat import format_duration, parse_duration

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
# What a tenant may shorten for its own data; the audit trail is the operator's record.
TENANT_KINDS = ("runs", "deadletters", "messages")
MIN_RETENTION_MS = 1_000  # seconds-long retention is for tests and benchmarks


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
    if not isinstance(body, dict):
        raise InvalidRequest(field, 'must be an object like {"runs": "1d"}')

    def name(kind: str) -> str:
        return f"{field}.{kind}" if field else kind

    unknown = sorted(set(body) - set(TENANT_KINDS))
    if unknown:
        raise InvalidRequest(
            name(unknown[0]), f"is not a kind a tenant sets; kinds: {', '.join(TENANT_KINDS)}"
        )
    return {
        kind: parse_duration(value, field=name(kind), minimum_ms=MIN_RETENTION_MS)
        for kind, value in body.items()
        if value is not None
    }


def retention_json(ms: Mapping[str, int]) -> dict[str, str]:
    """Milliseconds per kind -> the API's duration texts."""
    return {kind: format_duration(int(ms[kind])) for kind in KINDS if kind in ms}
