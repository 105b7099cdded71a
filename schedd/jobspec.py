"""Job bodies: validate the API's job JSON into a JobSpec, and write a JobSpec back as JSON.

The canonical JSON written here is what commands carry and the store keeps; it parses back
to the same JobSpec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, NoReturn

from msgspec import UNSET, Meta, UnsetType

from schedd.bodies import Body, DurationMs, convert_body, ms_or
from schedd.calendars import split_exclude
from schedd.errors import InvalidRequest, InvalidSchedule, PayloadTooLarge
from schedd.jsonbody import JSONObject, dumps
from schedd.model import (
    AfterSchedule,
    AtSchedule,
    Backoff,
    JSONValue,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    Schedule,
    Target,
)
from schedd.schedule import EverySchedule, parse_schedule, schedule_to_json
from schedd.stored_spec import MAX_DELAY_MS
from schedd.targetspec import HTTP_METHODS as HTTP_METHODS  # schedctl's
from schedd.targetspec import PRINTABLE, TargetUnion, checked_target, parse_target, target_to_json
from schedd.targetspec import QUEUE_NAME as QUEUE_NAME  # schedctl's
from schedd.timeformat import format_duration
from schedd.wire.failures import OnFailure
from schedd.wire.failures import as_json as failure_policy_json
from schedd.wire.fields import DEFAULT_PAYLOAD_LIMIT, SCHEMAS, Payload, ref
from schedd.wire.jobs import (
    LABEL_NAME_PATTERN,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_RUNS,
    SPEC_FIELDS,
    JobKey,
    Labels,
)

JOB_FIELDS = frozenset(SPEC_FIELDS)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_WINDOW_MS = 86_400_000
MAX_ATTEMPTS = 100  # what a tenant may ask for; a redrive may store one more


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """Everything a tenant says about a job: what runs when, where it goes, how it retries."""

    name: str | None
    schedule: Schedule
    window_ms: int | None
    target: Target
    payload: JSONValue
    retry: RetryPolicy
    misfire_policy: MisfirePolicy
    overlap_policy: OverlapPolicy
    max_runs: int | None = None  # level 8: complete after this many scheduled runs
    on_failure: OnFailure | None = None  # level 8: alert and/or pause after dead runs
    key: str | None = None  # level 9: the job's stable key (PUT /v1/jobs/by-key/{key})
    exclude: tuple[str, ...] = ()  # level 10: calendars whose local dates the schedule skips
    labels: dict[str, str] = field(default_factory=dict)  # level 9

    @property
    def is_recurring(self) -> bool:
        """Runs at times of its own, more than once (an `after` schedule's runs are its
        upstream's: like a one-time job's, they ignore overlap, misfire and run limits)."""
        return not isinstance(self.schedule, AtSchedule | AfterSchedule)

    @property
    def upstream(self) -> AfterSchedule | None:
        """The job this one runs after (level 11), if its schedule is `after`."""
        return self.schedule if isinstance(self.schedule, AfterSchedule) else None


SCHEDULE_INPUT = {"$ref": SCHEMAS + "ScheduleInput"}  # tools/gen_openapi.py writes these two
TARGET_INPUT = {"$ref": SCHEMAS + "TargetInput"}


class Window(DurationMs):
    """Runs fire at an offset in [0, window)."""

    maximum_ms = MAX_WINDOW_MS


KEY_MESSAGE = "must be 1-200 characters of A-Z a-z 0-9 _ . : / -, got {value!r}"
LABELS_MESSAGE = (
    f"must be an object of at most {MAX_LABELS} labels, each name 1-63 characters of "
    f"a-z 0-9 _ . / - (pattern {LABEL_NAME_PATTERN}) and each value a string of at most "
    f"{MAX_LABEL_VALUE_CHARS} characters"
)


def _policy_message(kind: type[MisfirePolicy | OverlapPolicy]) -> str:
    return f"must be one of {', '.join(repr(m.value) for m in kind)}, got {{value!r}}"


class JobCreate(Body, kw_only=True):
    """A job: when it runs (schedule), where each run goes (target), what it carries
    (payload) and how a failed attempt is retried. The schedule, the target, the payload and
    the retry object are checked by their own validators (schedule.parse_schedule,
    parse_target, the payload limit, RetryInput)."""

    name: Annotated[str, Meta(max_length=200, extra_json_schema={"pattern": PRINTABLE})] | None = (
        None
    )
    schedule: Annotated[Any, Meta(extra_json_schema=SCHEDULE_INPUT)]
    window: Window | None = None
    target: Annotated[Any, Meta(extra_json_schema=TARGET_INPUT)]
    payload: Payload = None
    retry: Annotated[
        Any, Meta(extra_json_schema={"anyOf": [ref(RetryInput), {"type": "null"}]})
    ] = None
    misfire_policy: Annotated[
        MisfirePolicy | None, Meta(description=f"Default {MisfirePolicy.RUN_ONCE.value}.")
    ] = None
    overlap_policy: Annotated[
        OverlapPolicy | None,
        Meta(
            description=f"Default {OverlapPolicy.ALLOW.value}. Recurring schedules only: a "
            "one-time job accepts only allow."
        ),
    ] = None
    max_runs: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_RUNS,
                description="Recurring schedules only: after this many scheduled runs are claimed "
                "the job completes (triggers and backfills are not counted).",
            ),
        ]
        | None
    ) = None
    on_failure: Annotated[
        OnFailure | None,
        Meta(
            description="After `after` consecutive runs ended dead: POST a signed alert to "
            "alert_url and/or pause the job (the tenant's default applies when this is null)."
        ),
    ] = None

    key: JobKey | None = None
    labels: Labels | None = None

    field_messages: ClassVar[Mapping[str, str]] = {
        "name": "must be a string of at most 200 printable characters",
        "key": KEY_MESSAGE,
        "labels": LABELS_MESSAGE,
        "max_runs": f"must be an integer from 1 to {MAX_RUNS:,}, got {{value!r}}",
        "misfire_policy": _policy_message(MisfirePolicy),
        "overlap_policy": _policy_message(OverlapPolicy),
    }


MAX_BATCH = 1_000  # jobs of one POST /v1/jobs:batch
BATCH_MESSAGE = f"must be the only field: a list of 1-{MAX_BATCH} job bodies"


class BatchItem(JobCreate, kw_only=True):
    """A job of a batch, with its own Idempotency-Key."""

    idempotency_key: (
        Annotated[
            str,
            Meta(pattern=r"^[\x21-\x7e]{1,255}$", description="This item's Idempotency-Key."),
        ]
        | None
    ) = None


class BatchCreate(Body):
    """Jobs created in one request: each item is checked on its own, so the valid ones are
    created even if others fail."""

    jobs: Annotated[
        list[Annotated[Any, Meta(extra_json_schema=ref(BatchItem))]],
        Meta(min_length=1, max_length=MAX_BATCH),
    ]

    field_messages: ClassVar[Mapping[str, str]] = {"jobs": BATCH_MESSAGE}
    unknown_field: ClassVar[str] = BATCH_MESSAGE
    unknown_field_at: ClassVar[str | None] = "jobs"


class OnePassJobCreate(JobCreate, kw_only=True):
    """JobCreate with its target and retry object converted in the same msgspec pass (a
    target's own struct converted alone costs a create about 1 us more). A body it refuses is
    read again step by step (`_refused`) for the error those steps name first."""

    target: TargetUnion
    retry: RetryInput | None = None


def parse_job(
    body: Mapping[str, Any],
    *,
    now_ms: int,
    payload_limit: int = DEFAULT_PAYLOAD_LIMIT,
    is_new_schedule: bool = True,
) -> JobSpec:
    """Validate a job body (POST /v1/jobs); every error names the field and the bad value."""
    try:
        asked = convert_body(body, OnePassJobCreate)
    except InvalidRequest as refused:
        _refused(
            body,
            refused,
            now_ms=now_ms,
            payload_limit=payload_limit,
            is_new_schedule=is_new_schedule,
        )
    asked_schedule, exclude = split_exclude(asked.schedule)
    schedule = parse_schedule(asked_schedule, now_ms=now_ms, needs_a_run_left=is_new_schedule)
    if exclude and isinstance(schedule, AtSchedule | AfterSchedule):
        raise InvalidSchedule("schedule.exclude", "applies to cron and every schedules only")
    if isinstance(schedule, AfterSchedule) and asked.window is not None:
        raise InvalidRequest("window", "does not apply to after schedules: they run at once")
    spec = JobSpec(
        name=_parse_name(asked.name),
        schedule=schedule,
        window_ms=int(asked.window) or None if asked.window is not None else None,
        target=checked_target(asked.target, body["target"]),
        payload=check_payload(asked.payload, payload_limit),
        retry=DEFAULT_RETRY if asked.retry is None else _retry_policy(asked.retry),
        misfire_policy=asked.misfire_policy or MisfirePolicy.RUN_ONCE,
        overlap_policy=asked.overlap_policy or OverlapPolicy.ALLOW,
        max_runs=asked.max_runs,
        on_failure=asked.on_failure,
        key=asked.key,
        labels=_parse_labels(asked.labels),
        exclude=exclude,
    )
    if not spec.is_recurring and spec.overlap_policy is not OverlapPolicy.ALLOW:
        raise InvalidRequest("overlap_policy", "applies to recurring schedules only")
    if not spec.is_recurring and spec.max_runs is not None:
        raise InvalidRequest("max_runs", "applies to recurring schedules only")
    policy = spec.on_failure
    if policy is not None and policy.alert_url is None and not policy.pause:
        raise InvalidRequest("on_failure", "must give an alert_url, pause: true, or both")
    _check_window_fits(spec)
    return spec


def _refused(
    body: Mapping[str, Any],
    refused: InvalidRequest,
    *,
    now_ms: int,
    payload_limit: int,
    is_new_schedule: bool,
) -> NoReturn:
    """Raise the error the checks name first, in the order they had before the body was a
    struct: unknown fields, a missing schedule or target, the schedule (so a bad schedule is
    `invalid_schedule` whatever else is wrong), the job's own fields, the target, the payload's
    size, the retry object (`refused`: msgspec's first in the body's key order, perhaps
    another field's)."""
    if isinstance(body, Mapping) and {"schedule", "target"} <= body.keys() <= JOB_FIELDS:
        schedule = split_exclude(body["schedule"])[0]
        parse_schedule(schedule, now_ms=now_ms, needs_a_run_left=is_new_schedule)
    asked = convert_body(body, JobCreate)
    schedule = split_exclude(asked.schedule)[0]
    parse_schedule(schedule, now_ms=now_ms, needs_a_run_left=is_new_schedule)
    parse_target(asked.target)
    check_payload(asked.payload, payload_limit)
    parse_retry(asked.retry)
    raise refused


def patch_job(
    current: Mapping[str, Any],
    changes: Mapping[str, Any],
    *,
    now_ms: int,
    payload_limit: int = DEFAULT_PAYLOAD_LIMIT,
) -> JobSpec:
    """Apply a PATCH body to a job's canonical JSON and validate the result as a whole."""
    if not isinstance(changes, Mapping):
        raise InvalidRequest("body", "must be a JSON object")
    merged = {**current, **changes}  # a stored spec has no unknown field: parse_job refuses them
    # An unchanged schedule is not judged again: a paused job whose schedule has ended can
    # still get a new payload or target (and then a new schedule, before it is resumed).
    return parse_job(
        merged, now_ms=now_ms, payload_limit=payload_limit, is_new_schedule="schedule" in changes
    )


def spec_to_json(spec: JobSpec) -> JSONObject:
    """The canonical JSON of a JobSpec (the API's job fields, instants in UTC)."""
    schedule: dict[str, JSONValue] = {**schedule_to_json(spec.schedule)}
    if spec.exclude:  # level 10, absent otherwise
        schedule["exclude"] = list(spec.exclude)
    stored: dict[str, JSONValue] = {
        "name": spec.name,
        "schedule": schedule,
        "window": None if spec.window_ms is None else format_duration(spec.window_ms),
        "target": target_to_json(spec.target),
        "payload": spec.payload,
        "retry": {
            "max_attempts": spec.retry.max_attempts,
            "backoff": spec.retry.backoff.value,
            "initial_delay": format_duration(spec.retry.initial_delay_ms),
            "max_delay": format_duration(spec.retry.max_delay_ms),
        },
        "misfire_policy": spec.misfire_policy.value,
        "overlap_policy": spec.overlap_policy.value,
    }
    # Absent otherwise: a spec as every release before level 8 wrote it.
    if spec.max_runs is not None:
        stored["max_runs"] = spec.max_runs
    if spec.on_failure is not None:
        stored["on_failure"] = failure_policy_json(spec.on_failure)
    # Level 9, absent otherwise: a spec as every release before it wrote it.
    if spec.key is not None:
        stored["key"] = spec.key
    if spec.labels:
        stored["labels"] = dict(sorted(spec.labels.items()))
    return stored


DEFAULT_RETRY = RetryPolicy()


class InitialDelay(DurationMs):
    """Default 1s."""

    maximum_ms = MAX_DELAY_MS


class MaxDelay(DurationMs):
    """Default 5m; at least initial_delay."""

    maximum_ms = MAX_DELAY_MS


class RetryInput(Body):
    """How a job's failed attempts are retried; a field not given takes its default."""

    max_attempts: Annotated[int, Meta(ge=1, le=MAX_ATTEMPTS)] = DEFAULT_RETRY.max_attempts
    backoff: Annotated[
        Backoff | None, Meta(description=f"Default {DEFAULT_RETRY.backoff.value}.")
    ] = None
    initial_delay: InitialDelay | UnsetType = UNSET
    max_delay: MaxDelay | UnsetType = UNSET

    field_messages: ClassVar[Mapping[str, str]] = {
        "max_attempts": f"must be an integer 1-{MAX_ATTEMPTS}, got {{value!r}}",
        "backoff": f"must be one of {', '.join(repr(b.value) for b in Backoff)}, got {{value!r}}",
    }


def parse_retry(value: object) -> RetryPolicy:
    """Validate a retry object; missing fields take the defaults (3, exponential, 1s, 5m)."""
    if value is None:
        return DEFAULT_RETRY
    return _retry_policy(convert_body(value, RetryInput, field="retry"))


def _retry_policy(asked: RetryInput) -> RetryPolicy:
    initial = ms_or(asked.initial_delay, DEFAULT_RETRY.initial_delay_ms)
    maximum = ms_or(asked.max_delay, DEFAULT_RETRY.max_delay_ms)
    if maximum < initial:
        raise InvalidRequest("retry.max_delay", "must be at least retry.initial_delay")
    return RetryPolicy(
        max_attempts=asked.max_attempts,
        backoff=asked.backoff or DEFAULT_RETRY.backoff,
        initial_delay_ms=initial,
        max_delay_ms=maximum,
    )


def _parse_name(value: str | None) -> str | None:
    """The name JobCreate read (a string of at most 200 characters), without control
    characters: what its published pattern says and msgspec does not check (PRINTABLE)."""
    if value is not None and _CONTROL.search(value):
        raise InvalidRequest("name", "must be a string of at most 200 printable characters")
    return value


_LABEL_NAME = re.compile(LABEL_NAME_PATTERN[:-1] + r"\Z")


def _parse_labels(labels: dict[str, str] | None) -> dict[str, str]:
    """The labels JobCreate read (at most MAX_LABELS strings), each name and value checked
    whole, control characters refused."""
    for name, value in (labels or {}).items():
        if not _LABEL_NAME.match(name):
            raise InvalidRequest("labels", f"name {name[:70]!r}: must match {LABEL_NAME_PATTERN}")
        if len(value) > MAX_LABEL_VALUE_CHARS or _CONTROL.search(value):
            raise InvalidRequest(
                "labels",
                f"{name}: must be a string of at most {MAX_LABEL_VALUE_CHARS} printable characters",
            )
    return labels or {}


def _check_window_fits(spec: JobSpec) -> None:
    """A window longer than an `every` interval would let a run fire after the next one's: the
    API refuses it (a cron schedule's gaps vary: docs/schedules.md says what a window does)."""
    schedule = spec.schedule
    if isinstance(schedule, EverySchedule) and (spec.window_ms or 0) > schedule.interval_ms:
        every = format_duration(schedule.interval_ms)
        raise InvalidRequest(
            "window",
            f"must be at most schedule.every ({every}), got {format_duration(spec.window_ms or 0)}",
        )


def check_payload(payload: object, limit: int) -> JSONValue:
    # The stdlib's compact text, as the store keeps and delivers it (msgspec writes some
    # floats shorter: 1e16 for 1e+16, and would let such payloads past the limit).
    size = len(dumps(payload).encode())  # type: ignore[arg-type]
    if size > limit:
        raise PayloadTooLarge("payload", f"is {size} bytes, over the limit of {limit} bytes")
    return payload
