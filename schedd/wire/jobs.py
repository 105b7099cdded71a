"""The answers of the job routes: jobs, runs, pages of them, batch results, schedule previews.

A job's schedule, target and retry are kept as the JSON stored with it (jobspec.spec_to_json);
their schemas name the structs below they match."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from schedd.bodies import Body
from schedd.calendars import MAX_EXCLUDE
from schedd.model import (
    AFTER_OUTCOMES,
    Backoff,
    HttpMethod,
    JobChange,
    JobStatus,
    MisfirePolicy,
    OverlapPolicy,
    RunStatus,
)
from schedd.occurrence import Occurrence
from schedd.targets import KINDS as BROKER_KINDS
from schedd.targets import TargetKind
from schedd.timeformat import format_instant
from schedd.wire.calendars import CalendarName
from schedd.wire.errors import Failure
from schedd.wire.failures import OnFailureView
from schedd.wire.fields import (
    Count,
    Duration,
    HistoryComplete,
    Instant,
    InstantInput,
    NextCursor,
    Payload,
    one_of,
    one_of_values,
    ref,
)

Attempt = Annotated[int, Meta(ge=1)]
RECENT_RUNS = 50  # a job's newest runs its last results are read from (store/recent_runs.py)

MAX_RUNS = 1_000_000  # a job's run limit: max_runs from 1 to this

# A job's spec fields, in the job object's order (the fields of a job body, jobspec.JOB_FIELDS).
SPEC_FIELDS = (
    "name",
    "schedule",
    "window",
    "target",
    "payload",
    "retry",
    "misfire_policy",
    "overlap_policy",
    "max_runs",
    "on_failure",
    "key",
    "labels",
)

# Issue 32 (schedules as code): a job's stable key, unique among its tenant's jobs that are not
# cancelled, and its labels (filters of GET /v1/jobs, the sets of `schedctl apply --prune`).
JOB_KEY_PATTERN = r"^[A-Za-z0-9_.:/-]{1,200}$"
LABEL_NAME_PATTERN = r"^[a-z0-9_./-]{1,63}$"
MAX_LABELS = 16
MAX_LABEL_VALUE_CHARS = 200
SET_LABEL = "schedd.set"  # the label `schedctl apply` gives each job of a file's `set`
JobKey = Annotated[
    str,
    Meta(
        pattern=JOB_KEY_PATTERN,
        description="The job's stable key: unique among its tenant's jobs that are not cancelled "
        "(PUT /v1/jobs/by-key/{key}).",
    ),
]
# msgspec checks a label's count and types; jobspec's parse checks each name and value whole
# (a pattern's `$` also matches before a final newline), naming the field `labels`.
Labels = Annotated[
    dict[str, str],
    Meta(
        max_length=MAX_LABELS,
        description=f"Up to {MAX_LABELS} name/value pairs (GET /v1/jobs?label=NAME=VALUE).",
        extra_json_schema={
            "propertyNames": {"pattern": LABEL_NAME_PATTERN},
            "additionalProperties": {"type": "string", "maxLength": MAX_LABEL_VALUE_CHARS},
        },
    ),
]


class RunAtScheduleView(msgspec.Struct, forbid_unknown_fields=True):
    """One run at an instant (a `delay` is answered as the `run_at` it came to)."""

    run_at: Instant


Exclude = Annotated[
    list[CalendarName],
    Meta(
        min_length=1,
        max_length=MAX_EXCLUDE,
        description="Calendars whose local dates (in the schedule's zone; UTC for every) it skips.",
    ),
]


class CronScheduleView(msgspec.Struct, forbid_unknown_fields=True):
    """Runs at a cron expression's times in a zone, between optional bounds."""

    cron: str
    timezone: str
    start_at: Instant | UnsetType = UNSET
    end_at: Instant | UnsetType = UNSET
    exclude: Exclude | UnsetType = UNSET


class EveryScheduleView(msgspec.Struct, forbid_unknown_fields=True):
    """Runs every interval from start_at, until an optional end."""

    every: Duration
    start_at: Instant
    end_at: Instant | UnsetType = UNSET
    exclude: Exclude | UnsetType = UNSET


class AfterView(msgspec.Struct, forbid_unknown_fields=True):
    """The upstream job and which of its run endings start a run."""

    job_id: str
    on: Literal["success", "failure", "finished"]


class AfterScheduleView(msgspec.Struct, forbid_unknown_fields=True):
    """A run each time a run of job `after.job_id` ends as `after.on` says."""

    after: AfterView


class QueueTargetView(msgspec.Struct, tag_field="type", tag="queue"):
    """Messages on the tenant's built-in queue `name`."""

    name: str


class HttpTargetView(msgspec.Struct, tag_field="type", tag="http"):
    """Calls of the tenant's URL."""

    url: str
    method: HttpMethod
    headers: dict[str, str]
    timeout: Duration


def _broker_target_view(kind: TargetKind) -> type[msgspec.Struct]:
    """A broker target as a job shows it: its kind's fields (model's dataclass), the optional
    ones (None: left out) not required."""
    hints = typing.get_type_hints(kind.struct)
    fields = [
        (f.name, hints[f.name])
        if f.default is dataclasses.MISSING
        else (f.name, _shown(hints[f.name]) | UnsetType, UNSET)
        for f in dataclasses.fields(kind.struct)
    ]
    name = f"{kind.struct.__name__}View"
    return msgspec.defstruct(name, fields, tag_field="type", tag=kind.name, module=__name__)


def _shown(hint: Any) -> Any:
    """An optional field's type as shown: never null (a None is left out)."""
    shown = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return typing.Union[tuple(shown)] if shown else hint  # noqa: UP007


BROKER_TARGET_VIEWS = tuple(_broker_target_view(kind) for kind in BROKER_KINDS)


class RetryView(msgspec.Struct):
    """A job's retry policy, every field given."""

    max_attempts: Attempt
    backoff: Backoff
    initial_delay: Duration
    max_delay: Duration


ScheduleJSON = Annotated[
    dict[str, Any],  # texts, and a cron or every schedule's `exclude`: a list of calendar names
    Meta(
        description="The normalised schedule: delay becomes run_at, instants are UTC.",
        extra_json_schema=one_of(
            RunAtScheduleView, CronScheduleView, EveryScheduleView, AfterScheduleView
        ),
    ),
]
TargetJSON = Annotated[
    dict[str, Any],
    Meta(extra_json_schema=one_of(QueueTargetView, HttpTargetView, *BROKER_TARGET_VIEWS)),
]


class Downstream(msgspec.Struct, frozen=True, kw_only=True):
    """A job that runs after another: its id, and which of the other's run endings start it."""

    job_id: str
    on: Annotated[str, Meta(extra_json_schema={"enum": list(AFTER_OUTCOMES)})]


class JobView(msgspec.Struct, frozen=True, kw_only=True):
    """A job: its identity, its spec's fields (as stored, in that order) and its state."""

    job_id: Annotated[str, Meta(extra_json_schema={"pattern": "^job_[0-9a-f]+$"})]
    tenant_id: str
    name: str | None
    schedule: ScheduleJSON
    window: Duration | None
    target: TargetJSON
    payload: Payload
    retry: Annotated[dict[str, Any], Meta(extra_json_schema=ref(RetryView))]
    misfire_policy: Annotated[str, one_of_values(MisfirePolicy)]
    overlap_policy: Annotated[str, one_of_values(OverlapPolicy)]
    max_runs: Annotated[int, Meta(ge=1, le=MAX_RUNS)] | None = None
    on_failure: Annotated[
        dict[str, Any] | None,
        Meta(
            description="Its own failure policy (null: its tenant's default, if any).",
            extra_json_schema={"anyOf": [ref(OnFailureView), {"type": "null"}]},
        ),
    ] = None
    key: JobKey | None = None  # issue 32
    labels: Labels = {}  # msgspec copies a mutable default for each instance
    status: Annotated[str, one_of_values(JobStatus)]
    paused_reason: Annotated[
        str | None, Meta(description="Why it was paused, when a reason was given.")
    ] = None
    next_run_at: Instant | None
    runs_started: Annotated[
        int | None,
        Meta(
            description="Scheduled runs claimed since max_runs was set (triggers and backfills "
            "not counted); null for a job without max_runs."
        ),
    ] = None
    version: Annotated[
        int,
        Meta(
            ge=1,
            description="Rises with every change and every claim of a scheduled run: the "
            "fence a claim is checked against.",
        ),
    ]
    created_at: Instant
    updated_at: Instant
    # Issue 31: what the job's newest runs say (store/recent_runs.py). Defaults: an older
    # node's answer lacks them.
    last_success_at: Annotated[
        Instant | None,
        Meta(
            description=f"When the newest run (by scheduled_at) that succeeded finished, among "
            f"the job's newest {RECENT_RUNS} runs; null when none of them succeeded."
        ),
    ] = None
    last_failure_at: Annotated[
        Instant | None,
        Meta(
            description="When the newest run that died (its attempts ran out, or it expired "
            f"unreceived) died, among the job's newest {RECENT_RUNS} runs; null when none did."
        ),
    ] = None
    consecutive_failures: Annotated[
        int,
        Meta(
            ge=0,
            le=RECENT_RUNS,
            description=f"Of the job's newest {RECENT_RUNS} runs, those that died scheduled after "
            f"the newest success (all that died, without one); {RECENT_RUNS} means that many or "
            "more. Runs in flight, retrying or skipped count as neither.",
        ),
    ] = 0
    overdue: Annotated[
        bool,
        Meta(
            description="A recurring job whose schedule had two occurrences since its last "
            "success (or its creation), the second given its gap, at most a minute, to finish; "
            "as the leader's overdue scanner last found it (a pass starts 10 s after the last "
            "one ended)."
        ),
    ] = False

    downstream: Annotated[
        list[Downstream] | UnsetType,
        Meta(
            description="The jobs, not cancelled, that run after this one (schedule `after`), "
            "in job_id order, at most 1,000; shown by GET of one job when there is one, not "
            "in lists."
        ),
    ] = UNSET

    def spec_fields(self) -> dict[str, object]:
        """The spec's fields as a job body (what jobspec's parse_job and patch_job read)."""
        return {name: getattr(self, name) for name in SPEC_FIELDS}


class KeyedJob(JobView, frozen=True, kw_only=True):
    """The answer of PUT /v1/jobs/by-key/{key}: the job, and whether this request changed it."""

    changed: Annotated[
        bool,
        Meta(
            description="True when the job was created or its spec changed (version raised); "
            "false when it already matched the body."
        ),
    ]


class KeyedJobPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The answer of PUT /v1/jobs/by-key/{key}?dry_run=true: what the PUT would do."""

    action: Annotated[str, Meta(extra_json_schema={"enum": ["create", "update", "unchanged"]})]
    current: Annotated[JobView | None, Meta(description="The key's job now (null: none).")]
    proposed: Annotated[
        dict[str, Any],
        Meta(
            description="The job's spec fields as the PUT would store them (name, schedule, "
            "window, target, payload, retry, misfire_policy, overlap_policy, max_runs, "
            "on_failure, key, labels), in the job object's shapes."
        ),
    ]


class JobList(msgspec.Struct, frozen=True, kw_only=True):
    """A page of jobs."""

    jobs: list[JobView]
    next_cursor: NextCursor


class JobVersionView(msgspec.Struct, frozen=True, kw_only=True):
    """One change of a job's spec or status, with the spec as it was after it."""

    version: Annotated[
        int,
        Meta(
            ge=1,
            description="Counts the job's spec and status changes (1: created); not the job "
            "object's `version`, which every claimed run raises too.",
        ),
    ]
    changed_at: Instant
    changed_by: Annotated[
        str | None,
        Meta(description="Who made it, as the audit trail names them; null when not known."),
    ]
    change: Annotated[str, one_of_values(JobChange)]
    fields: Annotated[
        list[str] | None,
        Meta(description="The fields an update or reschedule named (its PATCH body's keys)."),
    ]
    spec: Annotated[
        dict[str, Any] | None,
        Meta(
            description="The job's spec after the change: its fields as GET /v1/jobs/{id} "
            "shows them (name, schedule, window, target, payload, retry, misfire_policy, "
            "overlap_policy); null when not recorded (changed before every node recorded "
            "versions)."
        ),
    ]


class VersionList(msgspec.Struct, frozen=True, kw_only=True):
    """A page of a job's versions, newest first."""

    versions: list[JobVersionView]
    next_cursor: NextCursor


class AttemptView(msgspec.Struct, frozen=True, kw_only=True):
    """One try at delivering a run."""

    attempt: Attempt
    started_at: Instant
    finished_at: Instant | None
    outcome: str | None
    error: str | None
    output: Annotated[
        str | None,
        Meta(
            description="What the attempt printed, as its consumer reported it with the ack or "
            "nack (`outputs`): at most 4,096 characters from the start and 4,096 from the end; "
            "null when none was reported."
        ),
    ] = None


class RunView(msgspec.Struct, frozen=True, kw_only=True):
    """One logical run of a job, identified by (job_id, scheduled_at)."""

    job_id: str
    scheduled_at: Instant
    fire_at: Instant
    status: Annotated[str, one_of_values(RunStatus)]
    attempt: Count
    attempts: list[AttemptView]
    dispatched_at: Instant | None
    finished_at: Instant | None
    error: Annotated[
        str | None,
        Meta(
            description="The failure that left the run retrying, failed or dead; null once it "
            "is delivered or succeeded (each failed attempt keeps its own error)."
        ),
    ]
    payload_overridden: Annotated[
        bool, Meta(description="A trigger gave this run its own payload, in place of the job's.")
    ] = False
    backfill: Annotated[
        bool,
        Meta(description="Whether a backfill (POST /v1/jobs/{id}/backfill) added this run."),
    ] = False
    triggered_by: Annotated[
        UpstreamRun | None,
        Meta(
            description="For a job whose schedule is `after`: the run of the upstream job whose "
            "end made this run (the same scheduled_at); null for others, and for a manual trigger."
        ),
    ] = None


class UpstreamRun(msgspec.Struct, frozen=True, kw_only=True):
    """The run of another job whose end made a run: (job_id, scheduled_at) and how it ended."""

    job_id: str
    scheduled_at: Instant
    status: Annotated[str, Meta(extra_json_schema={"enum": ["succeeded", "dead"]})]


class RunList(msgspec.Struct, frozen=True, kw_only=True):
    """A page of runs, newest first."""

    runs: list[RunView]
    next_cursor: NextCursor
    history_complete: HistoryComplete = msgspec.UNSET


class Triggered(msgspec.Struct, frozen=True, kw_only=True):
    """The extra run a trigger added, due now."""

    job_id: str
    scheduled_at: Instant


_INSTANT_MESSAGE = (
    "must be an RFC 3339 instant with a UTC offset like '2026-10-12T08:00:00+05:30', got {value!r}"
)


class BackfillRequest(Body):
    """The range to backfill: from inclusive, to exclusive, both in the past."""

    from_: Annotated[
        InstantInput, Meta(description="The first instant of the range (inclusive).")
    ] = msgspec.field(name="from")
    to: Annotated[
        InstantInput,
        Meta(description="The end of the range (exclusive); not after the server's now."),
    ]

    field_messages: ClassVar[Mapping[str, str]] = {
        "from": _INSTANT_MESSAGE,
        "to": _INSTANT_MESSAGE,
    }


class Backfilled(msgspec.Struct, frozen=True, kw_only=True):
    """The runs a backfill added: one per occurrence in the range that had no run."""

    runs: Count


class Created(msgspec.Struct, frozen=True, kw_only=True):
    """Created; an idempotent replay gives the first job_id and next_run_at null."""

    job_id: str
    next_run_at: Instant | None


class BatchResults(msgspec.Struct, frozen=True, kw_only=True):
    """One result per item, in order."""

    # Each a Created or a Failure (msgspec types no union of two untagged structs).
    results: list[Annotated[Any, Meta(extra_json_schema=one_of(Created, Failure))]]


class OccurrenceView(msgspec.Struct, frozen=True, kw_only=True):
    """One run as its schedule's zone shows it (computed by the server from the zone's rules,
    so no client converts times itself)."""

    at: Instant
    local: Annotated[
        str, Meta(description="The wall time in `zone`, RFC 3339 with the offset then.")
    ]
    zone: Annotated[str, Meta(description="The schedule's IANA zone (UTC for every, run_at).")]
    abbreviation: Annotated[str, Meta(description="The zone's name for the offset: CEST, EST.")]
    note: Annotated[
        str | None,
        Meta(
            description="How daylight saving time shaped this run: a wall time that does not "
            "exist (moved, or not run) or that happens twice (which pass); null when it did not."
        ),
    ]

    @classmethod
    def of(cls, occurrence: Occurrence) -> OccurrenceView:
        """The answer's form of a described run."""
        return cls(
            at=format_instant(occurrence.at_ms),
            local=occurrence.local,
            zone=occurrence.zone,
            abbreviation=occurrence.abbreviation,
            note=occurrence.note,
        )


class PreviewResult(msgspec.Struct, frozen=True, kw_only=True):
    """The next runs of a schedule; with `current` asked, the current schedule's beside them."""

    runs: list[Instant]
    # The runs again, in the schedule's zone (absent from answers of nodes before issue 33).
    occurrences: list[OccurrenceView] = msgspec.field(default_factory=list)
    current_runs: list[Instant] | UnsetType = UNSET
    current_occurrences: list[OccurrenceView] | UnsetType = UNSET
