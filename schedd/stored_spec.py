"""A job's spec as the store holds it, read back: never judged by the API's rules.

`jobspec.py` is the API's strict decoding: it refuses, naming the field, whatever a tenant may
not ask for today. What the store already holds was accepted by some release, perhaps with rules
that were looser than today's (a redrive even stores one attempt more than the API allows). So a
stored reader never calls the strict parser: if a later release tightened a pattern, its jobs
would end FAILED and never be delivered again (issue 30). The readers here take what they can
use and clamp what is out of range; they refuse (ValueError) only a value that names nothing
deliverable (no URL, no connection, an unknown type).

`load_spec` is the one reader of a job's stored spec (the dispatcher's planning, apply's claims
and connection checks): typed where a reader decides on a value, the spec's own JSON text where
apply copies it. Apply gives exactly what it gave before for any spec a release could store, and
a malformed one (none was ever stored) fails with the error it failed with before.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import msgspec

from schedd.calendars import stored_exclude
from schedd.errors import InvalidRequest
from schedd.jsonbody import as_integer
from schedd.model import (
    Backoff,
    HttpTarget,
    MisfirePolicy,
    OverlapPolicy,
    QueueTarget,
    RetryPolicy,
    Target,
)
from schedd.targets import BY_NAME, CONNECTION_KIND_OF_TARGET
from schedd.targets.kind import stored_optional_text, stored_text
from schedd.timeformat import format_duration, parse_duration

MAX_STORED_ATTEMPTS = 1_000_000
MAX_DELAY_MS = 86_400_000
# An HTTP call's timeout, as the API bounds it: a stored one outside is clamped, not refused.
TIMEOUT_BOUNDS_MS = (1_000, 60_000)
DEFAULT_TIMEOUT_MS = HttpTarget(url="").timeout_ms
# Headers schedd sets itself (and the transport's own): a stored target never sends its own.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection", "idempotency-key"}
)
_BACKOFFS = frozenset(b.value for b in Backoff)
# By stored value: building an enum from its value costs about 1 us (a spike plans 100,000).
_OVERLAP = {policy.value: policy for policy in OverlapPolicy}
_MISFIRE = {policy.value: policy for policy in MisfirePolicy}
_ABSENT = msgspec.Raw(b"")  # a key the spec does not have (a present value is never empty)


class TargetFields(msgspec.Struct, frozen=True):
    """A stored target's kind and queue name exactly as stored (any JSON value: apply has
    copied them into rows as they are since v1, so each version writes the same rows); UNSET
    when the target has no such key."""

    type: Any = msgspec.UNSET
    name: Any = msgspec.UNSET


def queue_name(name: Any) -> Any:
    """A queue target's name as stored (TargetFields.name); KeyError as target["name"] raised
    when it has none (a queue target always has one)."""
    if name is msgspec.UNSET:
        raise KeyError("name")
    return name


_TARGET_FIELDS = msgspec.json.Decoder(TargetFields)


def load_target_fields(text: str | bytes) -> TargetFields:
    """A stored target's kind and queue name (a dead letter's or outbox row's target text)."""
    return _TARGET_FIELDS.decode(text)


def stored_upstream(schedule: Mapping[str, Any]) -> tuple[str, str] | None:
    """(job_id, on) of a stored `after` schedule (schedule_to_json's form), else None."""
    after = schedule.get("after")
    if not isinstance(after, Mapping):
        return None
    job_id, on = after.get("job_id"), after.get("on", "success")
    return (job_id, on) if isinstance(job_id, str) and isinstance(on, str) else None


class SpecPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of a stored spec that plan its runs, typed (`load_plan`)."""

    # As jobspec stored it (schedule.load_schedule): schedule_to_json's texts, and a list of
    # calendar names under "exclude" (level 10). An `after` schedule (level 11) plans as none
    # (`StoredSpec.plan`): its job only ever has trigger-like runs, which are not planned.
    schedule: Mapping[str, str | list[str]] = {}
    window: str | None = None  # as format_duration wrote it
    overlap_policy: OverlapPolicy = OverlapPolicy.ALLOW
    misfire_policy: MisfirePolicy = MisfirePolicy.RUN_ONCE

    @property
    def exclude(self) -> tuple[str, ...]:
        """The calendars the schedule excludes (calendars.py), none for most."""
        return stored_exclude(self.schedule) if "exclude" in self.schedule else ()

    def window_ms(self) -> int:
        """The window's length (0: none, or a text that does not parse)."""
        return 0 if self.window is None else _window_text_ms(self.window) or 0


_SPEC_PLAN = msgspec.json.Decoder(SpecPlan)


def load_plan(text: str | bytes) -> SpecPlan:
    """The planning fields of a stored spec (its JSON text): one typed pass as fast as an
    untyped one; a value no release wrote (a policy it does not know, a schedule that is not
    text) sends it through the lenient `StoredSpec.plan`, never to an error. Only a text that
    is not a JSON object raises (msgspec's error)."""
    try:
        return _SPEC_PLAN.decode(text)
    except msgspec.ValidationError:
        return load_spec(text).plan()


class StoredSpec(msgspec.Struct, frozen=True):
    """A job's stored spec in one pass over its text, nothing judged: the target, payload and
    retry as the spec's own JSON text (slices: compact_json wrote the spec, so each is exactly
    the text compact_json gives its value, copied, never re-encoded), the planning fields as
    stored until `plan()` types them (a claim on every replica reads none of them)."""

    schedule: msgspec.Raw = msgspec.Raw(b"{}")
    window: Any = None
    target: msgspec.Raw = _ABSENT
    payload: msgspec.Raw = msgspec.Raw(b"null")  # absent: null, as spec.get("payload") was
    retry: msgspec.Raw = _ABSENT
    misfire_policy: Any = "run_once"
    overlap_policy: Any = "allow"
    max_runs: Any = None  # level 8; absent from specs without a limit
    on_failure: Any = None  # level 8; absent from specs without a failure policy
    key: Any = None  # level 9; absent from specs without a key
    labels: Any = None  # level 9; absent from specs without labels

    def excluded_calendars(self) -> tuple[str, ...]:
        """The calendars the stored schedule excludes (level 10); the schedule is decoded only
        when its text names `exclude`."""
        if b'"exclude"' not in bytes(self.schedule):
            return ()
        schedule = msgspec.json.decode(self.schedule)
        return stored_exclude(schedule) if isinstance(schedule, dict) else ()

    def upstream(self) -> tuple[str, str] | None:
        """(job_id, on) of the job the stored schedule runs after (level 11), else None; the
        schedule is decoded only when its text names `after`."""
        if b'"after"' not in bytes(self.schedule):
            return None
        schedule = msgspec.json.decode(self.schedule)
        return stored_upstream(schedule) if isinstance(schedule, Mapping) else None

    def run_limit(self) -> int | None:
        """The run limit as stored: a positive integer, else none."""
        limit = self.max_runs
        return limit if type(limit) is int and limit > 0 else None

    def plan(self) -> SpecPlan:
        """The planning fields, typed leniently: a value no release wrote reads as its default
        (a schedule that is not an object of texts as none: its runs are not planned)."""
        schedule = msgspec.json.decode(self.schedule)
        is_text = isinstance(schedule, Mapping) and all(
            isinstance(v, str) or (k == "exclude" and isinstance(v, list))
            for k, v in schedule.items()
        )
        overlap, misfire = self.overlap_policy, self.misfire_policy
        return SpecPlan(
            schedule=schedule if is_text else {},
            window=_window_text(self.window),
            overlap_policy=_OVERLAP.get(overlap, OverlapPolicy.ALLOW)
            if isinstance(overlap, str)
            else OverlapPolicy.ALLOW,
            misfire_policy=_MISFIRE.get(misfire, MisfirePolicy.RUN_ONCE)
            if isinstance(misfire, str)
            else MisfirePolicy.RUN_ONCE,
        )

    def target_fields(self) -> TargetFields:
        """The target's kind and queue name; msgspec.ValidationError, with the text apply has
        recorded since v1, when the spec has no target object with a type."""
        if not self.target:
            raise msgspec.ValidationError("Object missing required field `target`")
        fields = _TARGET_FIELDS.decode(self.target)
        if fields.type is msgspec.UNSET:
            raise msgspec.ValidationError("Object missing required field `type`")
        return fields

    def connection(self) -> tuple[str, str] | None:
        """(connection name, connection kind) of a broker target, None for any other."""
        return None if not self.target else connection_of(msgspec.json.decode(self.target))


_STORED_SPEC = msgspec.json.Decoder(StoredSpec)


def load_spec(text: str | bytes) -> StoredSpec:
    """A job's stored spec (its JSON text), read leniently: only a text that is not a JSON
    object raises (msgspec's error, as every reader's decode did). Uncached: each reader keeps
    the specs of its batch by text (a spike's jobs often share one)."""
    return _STORED_SPEC.decode(text)


def connection_of(target: object) -> tuple[str, str] | None:
    """(connection name, connection kind) of a spec's target (any JSON value), or None for a
    queue or HTTP one."""
    kind = CONNECTION_KIND_OF_TARGET.get(target_type(target) or "")
    name = target.get("connection") if isinstance(target, Mapping) else None
    if kind is None or not isinstance(name, str):
        return None
    return name, kind


def target_type(target: object) -> str | None:
    """The kind a spec's target (any JSON value) names, if it names one as text."""
    kind = target.get("type") if isinstance(target, Mapping) else None
    return kind if isinstance(kind, str) else None


def _window_text(value: object) -> str | None:
    """A stored window as text: a number of seconds (parse_duration's other form) written as
    format_duration writes it; None for none, or for a value that is not a duration."""
    if value is None or isinstance(value, str):
        return value
    ms = _window_ms(value)
    return None if ms is None else format_duration(ms)


@functools.lru_cache(maxsize=256)  # a few distinct windows; a regex parse is about 1 us
def _window_text_ms(text: str) -> int | None:
    return _window_ms(text)


def _window_ms(value: object) -> int | None:
    try:
        return parse_duration(value, field="window")
    except (ValueError, ArithmeticError):  # InvalidRequest, or a number too large to round
        return None


@functools.lru_cache(maxsize=4096)  # an outbox row's text: a tenant's jobs share a few targets
def load_target(text: str) -> Target:
    """The target of a stored spec (its JSON text), read leniently; ValueError (naming
    `target`) only when it names nothing deliverable."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError("target: not JSON") from None
    if not isinstance(value, Mapping):
        raise ValueError("target: not an object")
    kind = value.get("type")
    if kind == "queue":
        return QueueTarget(name=stored_text(value, "name"))
    if kind == "http":
        return HttpTarget(
            url=stored_text(value, "url"),
            method=stored_optional_text(value, "method", "POST"),
            headers=_headers(value.get("headers")),
            timeout_ms=_timeout_ms(value.get("timeout")),
        )
    if isinstance(kind, str) and kind in BY_NAME:
        return BY_NAME[kind].load(value)
    raise ValueError(f"target.type: {kind!r} is not a kind this version delivers")


def stored_retry(value: object) -> RetryPolicy:
    """A retry policy the store already holds (an outbox row's, a message's): never refused.
    Out-of-range values are clamped, unreadable ones take the default."""
    default = RetryPolicy()
    if not isinstance(value, Mapping):
        return default
    attempts = as_integer(value.get("max_attempts"), -(2**63), 2**63)
    backoff = str(value.get("backoff"))
    initial = _stored_duration(value.get("initial_delay"), default.initial_delay_ms, MAX_DELAY_MS)
    maximum = _stored_duration(value.get("max_delay"), default.max_delay_ms, MAX_DELAY_MS)
    return RetryPolicy(
        max_attempts=default.max_attempts
        if attempts is None
        else min(max(attempts, 1), MAX_STORED_ATTEMPTS),
        backoff=Backoff(backoff) if backoff in _BACKOFFS else default.backoff,
        initial_delay_ms=initial,
        max_delay_ms=max(initial, maximum),
    )


@functools.lru_cache(maxsize=4096)
def load_retry(text: str) -> RetryPolicy:
    """A stored retry policy (an outbox row's or a message's JSON text), read as `stored_retry`
    reads it; text that is not JSON (no release wrote any) reads as the default policy, where
    apply's readers before issue 30 raised."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return stored_retry(value)


def _headers(value: object) -> dict[str, str]:
    """The text headers of a stored map; schedd's own and the transport's are left out."""
    if not isinstance(value, Mapping):
        return {}
    return {
        name: text
        for name, text in value.items()
        if isinstance(name, str)
        and isinstance(text, str)
        and name.lower() not in RESERVED_HEADERS
        and not name.lower().startswith("webhook-")
    }


def _timeout_ms(value: object) -> int:
    low, high = TIMEOUT_BOUNDS_MS
    return min(max(_stored_duration(value, DEFAULT_TIMEOUT_MS, high), low), high)


def _stored_duration(value: object, default_ms: int, high_ms: int) -> int:
    try:
        ms = parse_duration(value, field="stored")
    except InvalidRequest:
        return default_ms
    return min(ms, high_ms)
