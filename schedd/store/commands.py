"""The catalogue of log commands: one frozen struct (msgspec) per wire type, and the log levels.

A wire name (`TYPE`) is never renamed or reused; bump a type's `VERSION` (and carry it in the
body) before changing what a body means. `to_body()` gives the JSON object of today's log
(same field names and shapes); `from_body()` reads one back and raises ValueError when it does
not fit (apply turns that into a CorruptLog). Only the encoding lives here, never behaviour.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

import msgspec

from schedd.errors import rejection_error
from schedd.jsonbody import JSONValue
from schedd.store.results import (
    Acked,
    AlertsRecorded,
    Backfilled,
    CalendarSaved,
    CallbacksRecorded,
    Claimed,
    ConnectionCreated,
    Deregistered,
    Done,
    Extended,
    JobsAdded,
    JobsCreated,
    LeasesMoved,
    Nacked,
    Pruned,
    Received,
    RetentionSet,
    SegmentClosed,
    TenantSaved,
    Triggered,
)
from schedd.stored_spec import target_type
from schedd.targets import BY_NAME, CONNECTION_KIND_OF_TARGET

JSONObject = Mapping[str, Any]  # kept as the proposer built it (a job spec, tenant changes)

# The command types this version applies, as a level: a node halts on a type it does not know,
# so a type added at level N is proposed only once every member reports N or more (/healthz
# `log_level`; a rolling upgrade runs old and new nodes side by side). Level 2: prune and
# set_retention (issue 14). Level 3 (issue 17): create_connection, delete_connection, and a
# create_jobs or update_job whose spec has a broker target (`needed_level`: an older node would
# apply it without checking or recording the job's use of its connection, and its state would
# differ). Level 4 (issue 29): claim_batch, whose queue runs apply into `batches` rows
# (store/batches.py), and receipts of batch runs in ack, nack and extend. Level 5 (issue 29):
# add_jobs, job creates as arrays with each stored spec's text, written row set by row set; and
# a claim_batch with `defer_completion`, whose one-time jobs are completed by a later prune
# (store/ledger/completions.py; `needed_level`). Level 6 (issue 29): a receive_messages
# `by_reference`, whose batch runs are answered as (batch, slots) references that the receiving
# node reads from its own store, not as deliveries every replica builds and keeps. Level 7
# (issue 30): a receive_messages `runs_by_reference`, whose per-run messages (retries and
# redeliveries) are answered as their ids, read the same way: no receive's answer holds a payload.
# Level 8 (issue 31): operators' control of schedules (backfill, trigger overrides, run limits,
# pause reasons, queue and tenant pauses, a job's versions, failure alerts' outcomes
# (record_alerts)): new types, and new body fields
# whose `needed_level` is 8. Their state lives in new tables (schema.LATER_TABLES), so a log
# that never uses them digests as before.
# Level 9 (issue 32): job specs with a stable `key` or `labels`, which apply indexes in new
# tables (job_keys, job_labels): an older node would store such a spec without them.
# Level 10 (issue 33): calendars (put_calendar, delete_calendar) and schedules that exclude them
# (a spec whose schedule has `exclude`: apply records its uses in calendar_uses).
# Level 11 (issue 33): "run B after A", a spec whose schedule is `after` (apply records it in
# `dependencies`, and the end of a run of A adds B's run: store/dependencies.py). No new type:
# commands that end runs do more only where a level-11 spec left a `dependencies` row.
# Level 12 (issue 34): an ack or nack that carries its attempts' outputs (kept in
# run_outputs), and a nack that makes its runs dead at once (`dead`).
# Level 13 (issue 35 §1): history segments: move_history (the prune of history kinds as moves
# into per-hour segment files), close_segment and drop_segment (store/segments.py).
# Level 14: a move_history with `summarize`, whose apply also keeps what each job's moved runs
# say (store/moved_runs.py) for its last success, failure streak and failure policy.
# LEVEL_OF_TYPE names the types above level 1.
LOG_LEVEL = 14
SEGMENTS_LEVEL = 13
RUN_SUMMARIES_LEVEL = 14
SCHEDULE_CONTROL_LEVEL = 8
JOB_KEYS_LEVEL = 9
CALENDARS_LEVEL = 10
DEPENDENCIES_LEVEL = 11
OUTPUTS_LEVEL = 12
DEFERRED_COMPLETION_LEVEL = 5
BY_REFERENCE_LEVEL = 6
RUNS_BY_REFERENCE_LEVEL = 7
BROKER_TARGET_LEVEL = 3
BROKER_TARGET_TYPES = frozenset(CONNECTION_KIND_OF_TARGET)


class Body(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A body (or a nested item of one) encoded as a JSON object, field by field: msgspec
    structs, so a log entry is read from its bytes into these types in one strict pass (an int
    field takes no bool or float; a missing field without default is an error). A field whose
    default is None is absent from the body when None; unknown keys are ignored."""

    def to_body(self) -> dict[str, JSONValue]:
        """The JSON object of today's log for this value (as the log's bytes read back)."""
        body: dict[str, JSONValue] = msgspec.json.decode(msgspec.json.encode(self))
        return body

    @classmethod
    def from_body(cls, body: Any) -> Self:
        """Read a JSON object back; ValueError when it does not fit this type."""
        try:
            return msgspec.convert(body, cls)
        except msgspec.ValidationError as exc:
            raise ValueError(f"{cls.__name__}: {exc}") from None


R = TypeVar("R", bound=Done)


class LogCommand(Body, Generic[R], frozen=True, kw_only=True, omit_defaults=True):
    """One command type of the log. Subclasses set TYPE (the wire name) and VERSION, and name
    their result type as the parameter (`LogCommand[Claimed]`; none: `Done`)."""

    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1  # the log level that introduced the type
    RESULT: ClassVar[type[Done]] = Done  # set from the type parameter

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is LogCommand:
                (cls.RESULT,) = typing.get_args(base)

    def needed_level(self) -> int:
        """The log level a node must apply for this command (LEVEL, or more for a body that
        uses something newer than its type)."""
        return self.LEVEL


def answer_of(cmd: LogCommand[R], answer: Mapping[str, Any]) -> R:
    """The proposer's answer to `cmd` (its JSON, as applied_commands keeps it) read as the
    command's result type; a rejection is raised as its error class (errors.BY_CODE)."""
    if answer.get("status") == "rejected":
        raise rejection_error(str(answer.get("code")), str(answer.get("message")))
    # "status" is no field of a result: ignored.
    return cast(R, msgspec.convert(answer, type(cmd).RESULT))


B = TypeVar("B", bound=type[LogCommand[Any]])
DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}


def body_type(cls: B) -> B:
    """Register a command type: its JSON decoder is built (and its field types checked) once,
    at import, so a typo fails loudly."""
    DECODERS[cls.TYPE] = msgspec.json.Decoder(cls)
    return cls


# ---------------------------------------------------------------------------- cluster


class RegisterNode(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """A node's API and Raft addresses, so any node can list them."""

    TYPE = "register_node"
    node_id: str
    api: str
    raft: str


class DeregisterNode(LogCommand[Deregistered], frozen=True, kw_only=True, omit_defaults=True):
    """Forget a node removed from the Raft group."""

    TYPE = "deregister_node"
    node_id: str


class Barrier(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """A no-op: once applied on a node, it holds everything committed before."""

    TYPE = "barrier"


# ---------------------------------------------------------------------------- tenants


class CreateTenant(LogCommand[TenantSaved], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "create_tenant"
    tenant_id: str
    token_hash: str
    signing_secret: str
    actor: str | None = None
    name: str
    max_active_jobs: int
    dispatch_rate: int
    allowed_hosts: tuple[str, ...]
    alert_url: str | None = None


class UpdateTenant(LogCommand[TenantSaved], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "update_tenant"
    tenant_id: str
    changes: JSONObject  # only the fields named change (alert_url may be set to null)
    actor: str | None = None

    def needed_level(self) -> int:
        """Level 8: the tenant's default failure policy (`on_failure`)."""
        return SCHEDULE_CONTROL_LEVEL if "on_failure" in self.changes else self.LEVEL


class RotateTenant(LogCommand[TenantSaved], frozen=True, kw_only=True, omit_defaults=True):
    """New token and signing secret; the old secret still signs for `overlap_ms`."""

    TYPE = "rotate_tenant"
    tenant_id: str
    token_hash: str
    signing_secret: str
    actor: str | None = None
    overlap_ms: int | None = None


# ---------------------------------------------------------------------------- jobs


class NewJob(Body, frozen=True, kw_only=True, omit_defaults=True):
    """One job of a create_jobs command, with its id, partition and first run decided."""

    job_id: str
    partition: int
    spec: JSONObject
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    idempotency_key: str | None
    request_hash: str | None


class CreateJobs(LogCommand[JobsCreated], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "create_jobs"
    tenant_id: str
    actor: str | None = None
    jobs: tuple[NewJob, ...]

    def needed_level(self) -> int:
        return max((spec_level(job.spec) for job in self.jobs), default=self.LEVEL)


class NewJobRow(msgspec.Struct, frozen=True, array_like=True):
    """One job of an add_jobs command, as an array: NewJob's fields, with the spec as the text
    the store keeps (the proposer's compact_json of it), so no replica parses or re-encodes
    it."""

    job_id: str
    partition: int
    spec: str
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    idempotency_key: str | None
    request_hash: str | None
    # The API's time when it made the job and computed its next run from it: the job's
    # created_at. Grouped single creates share a command whose time is later than theirs.
    created_at_ms: int


class AddJobs(LogCommand[JobsAdded], frozen=True, kw_only=True, omit_defaults=True):
    """create_jobs in a compact form: the same rows (audit records under the action
    "create_jobs"), a result that names only the jobs not created as proposed."""

    TYPE = "add_jobs"
    LEVEL = 5
    tenant_id: str
    actor: str | None = None
    jobs: tuple[NewJobRow, ...]


class CancelJob(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "cancel_job"
    tenant_id: str
    job_id: str
    actor: str | None = None
    # Level 8: the change is recorded in the job's versions (store/apply/versions.py).
    versioned: bool = False

    def needed_level(self) -> int:
        return versioned_level(self.versioned, self.LEVEL)


class UpdateJob(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """Replace a job's spec and next run; the proposer read `expected_version`."""

    TYPE = "update_job"
    tenant_id: str
    job_id: str
    actor: str | None = None
    expected_version: int
    spec: JSONObject
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    fields: tuple[str, ...] | None = None
    # Level 8: the change is recorded in the job's versions (store/apply/versions.py).
    versioned: bool = False

    def needed_level(self) -> int:
        return max(versioned_level(self.versioned, self.LEVEL), spec_level(self.spec))


def spec_level(spec: JSONObject) -> int:
    """The log level a job spec needs: its broker target kind's (`TargetKind.log_level`), 11
    with an `after` schedule, 10 with excluded calendars, 9
    with a key or labels (indexed by apply), 8 with a run limit (`max_runs`, counted by apply)
    or a failure policy, else 1."""
    found = BY_NAME.get(target_type(spec.get("target")) or "")
    level = 1 if found is None else found.log_level
    schedule = spec.get("schedule")
    if isinstance(schedule, Mapping) and "after" in schedule:
        return max(level, DEPENDENCIES_LEVEL)
    if isinstance(schedule, Mapping) and schedule.get("exclude"):
        return max(level, CALENDARS_LEVEL)
    if spec.get("key") is not None or spec.get("labels"):
        return max(level, JOB_KEYS_LEVEL)
    if spec.get("max_runs") is not None or spec.get("on_failure") is not None:
        return max(level, SCHEDULE_CONTROL_LEVEL)
    return level


class PauseJob(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "pause_job"
    tenant_id: str
    job_id: str
    actor: str | None = None
    reason: str | None = None  # level 8: kept in `pauses`, shown as the job's paused_reason
    # Level 8: the change is recorded in the job's versions (store/apply/versions.py).
    versioned: bool = False

    def needed_level(self) -> int:
        level = versioned_level(self.versioned, self.LEVEL)
        return level if self.reason is None else SCHEDULE_CONTROL_LEVEL


class ResumeJob(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "resume_job"
    tenant_id: str
    job_id: str
    actor: str | None = None
    expected_version: int
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    # Level 8: the change is recorded in the job's versions (store/apply/versions.py).
    versioned: bool = False

    def needed_level(self) -> int:
        return versioned_level(self.versioned, self.LEVEL)


def versioned_level(versioned: bool, level: int) -> int:
    """The level of a job command that records its change in the job's versions, or not."""
    return SCHEDULE_CONTROL_LEVEL if versioned else level


class TriggerJob(LogCommand[Triggered], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "trigger_job"
    tenant_id: str
    job_id: str
    actor: str | None = None
    scheduled_at_ms: int
    # Level 8: this run's own payload (JSON text as a spec stores it, sealed when keys are
    # configured), in place of the job's.
    payload: str | None = None

    def needed_level(self) -> int:
        return self.LEVEL if self.payload is None else SCHEDULE_CONTROL_LEVEL


class PauseQueue(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """Receives on the queue hand out nothing until it is resumed (runs are still claimed)."""

    TYPE = "pause_queue"
    LEVEL = 8
    tenant_id: str
    queue: str
    reason: str | None = None
    actor: str | None = None


class ResumeQueue(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "resume_queue"
    LEVEL = 8
    tenant_id: str
    queue: str
    actor: str | None = None


class PauseTenant(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """No run of the tenant is claimed until it is resumed (its due rows wait)."""

    TYPE = "pause_tenant"
    LEVEL = 8
    tenant_id: str
    reason: str | None = None
    actor: str | None = None


class ResumeTenant(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "resume_tenant"
    LEVEL = 8
    tenant_id: str
    actor: str | None = None


class BackfillJob(LogCommand[Backfilled], frozen=True, kw_only=True, omit_defaults=True):
    """Runs for past occurrences of a job's schedule (`slots`, ascending, computed by the
    proposer), except those that have a run, a pending backfill, or are at or after the job's
    next run (the schedule's own). Each added run fires paced on the tenant's backfill lane:
    `per_s` runs a second from max(ts_ms, where the lane's last backfill ended). A large
    backfill is several commands; each applies idempotently."""

    TYPE = "backfill_job"
    LEVEL = SCHEDULE_CONTROL_LEVEL
    tenant_id: str
    job_id: str
    actor: str | None = None
    slots: tuple[int, ...]
    per_s: int
    # Level 13 (history segments): the proposer left out the slots taken in the closed
    # segments it read; the highest closed_index it saw. Apply refuses the command as stale
    # when a segment closed since (its rows left the open segments apply reads).
    closed_through: int | None = None

    def needed_level(self) -> int:
        return self.LEVEL if self.closed_through is None else SEGMENTS_LEVEL


# ---------------------------------------------------------------------------- dispatch


class NodeHeartbeat(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """A node is alive: every lease it holds lasts `ttl_ms` more."""

    TYPE = "node_heartbeat"
    node_id: str
    ttl_ms: int


class LeaseMove(Body, frozen=True, kw_only=True, omit_defaults=True):
    """Give `partition` to `node_id`, replacing the lease at `epoch` (compare-and-set)."""

    partition: int
    node_id: str
    epoch: int


class AssignLeases(LogCommand[LeasesMoved], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "assign_leases"
    ttl_ms: int
    moves: tuple[LeaseMove, ...]


class Claim(Body, frozen=True, kw_only=True, omit_defaults=True):
    """One due run a claimer takes, with what it read (lease epoch, job version) and the job's
    next run it computed; `skip` (a reason) records the run as skipped instead."""

    job_id: str
    scheduled_at_ms: int
    fire_at_ms: int
    partition: int
    epoch: int
    version: int | None
    is_trigger: bool
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    skip: str | None = None


class ClaimRuns(LogCommand[Claimed], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "claim_runs"
    node_id: str
    claims: tuple[Claim, ...]


class ClaimRow(msgspec.Struct, frozen=True, array_like=True):
    """A Claim on the wire as an array (claim_batch): 89 bytes a one-time run, not 202. The
    dispatcher plans in this form; the fields are Claim's, in its order (a test holds them
    equal: the dispatcher converts by name while a member lags level 4)."""

    job_id: str
    scheduled_at_ms: int
    fire_at_ms: int
    partition: int
    epoch: int
    version: int | None
    is_trigger: bool
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    skip: str | None = None


class ClaimBatch(LogCommand[Claimed], frozen=True, kw_only=True, omit_defaults=True):
    """claim_runs whose queue runs apply into one `batches` row per (tenant, queue)."""

    TYPE = "claim_batch"
    LEVEL = 4
    node_id: str
    claims: tuple[ClaimRow, ...]
    # Level 5: a one-time job whose run goes into a batch stays `active` in its row until a
    # prune writes its completion (store/ledger/completions.py); readers show it completed.
    defer_completion: bool = False

    def needed_level(self) -> int:
        return DEFERRED_COMPLETION_LEVEL if self.defer_completion else self.LEVEL


# ---------------------------------------------------------------------------- queues


class ReceiveMessages(LogCommand[Received], frozen=True, kw_only=True, omit_defaults=True):
    """Hand out up to `max` visible messages, one fresh receipt each."""

    TYPE = "receive_messages"
    tenant_id: str
    queue: str
    max: int
    visibility_ms: int
    receipts: tuple[str, ...]
    # Level 6: the batch runs handed out are answered as `held`, [batch_id, slot, ...] lists
    # in the order taken (their receipts: the nonces after the per-run messages'), not as
    # deliveries; per-run messages (retries, redeliveries) are answered whole as before.
    by_reference: bool = False
    # Level 7: the per-run messages handed out are answered as `taken`, their msg_ids in the
    # order taken (their receipts: "<nonce>.<msg_id>" with the first nonces), not as deliveries.
    runs_by_reference: bool = False

    def needed_level(self) -> int:
        if self.runs_by_reference:
            return RUNS_BY_REFERENCE_LEVEL
        return BY_REFERENCE_LEVEL if self.by_reference else self.LEVEL


class AckMessages(LogCommand[Acked], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "ack_messages"
    tenant_id: str
    queue: str
    receipts: tuple[str, ...]
    # Level 12: the output of a receipt's attempt (a command's stdout and stderr, bounded by
    # the API), kept with the attempt (store/run_outputs.py).
    outputs: dict[str, str] = {}

    def needed_level(self) -> int:
        return OUTPUTS_LEVEL if self.outputs else self.LEVEL


class NackMessages(LogCommand[Nacked], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "nack_messages"
    tenant_id: str
    queue: str
    receipts: tuple[str, ...]
    error: str | None = None
    outputs: dict[str, str] = {}  # level 12, as AckMessages'
    dead: bool = False  # level 12: the runs are dead at once, whatever attempts they have left

    def needed_level(self) -> int:
        return OUTPUTS_LEVEL if self.outputs or self.dead else self.LEVEL


class ExtendMessages(LogCommand[Extended], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "extend_messages"
    tenant_id: str
    queue: str
    receipts: tuple[str, ...]
    visibility_ms: int


# ---------------------------------------------------------------------------- dead letters


Cell = str | int | None  # a column's value of a row a command carries (SQLite's types here)


class MovedDeadletter(Body, frozen=True, kw_only=True, omit_defaults=True):
    """A dead letter that moved into a history segment, as the proposer read it (level 13):
    apply never reads a closed segment, so the redrive carries the row (the deadletters
    table's columns in order), and its run's row and attempts when they moved too."""

    segment: str
    row: tuple[Cell, ...]
    run: tuple[Cell, ...] | None = None
    attempts: tuple[tuple[Cell, ...], ...] = ()


class RedriveDeadletter(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "redrive_deadletter"
    tenant_id: str
    id: str
    partition: int | None = None
    moved: MovedDeadletter | None = None

    def needed_level(self) -> int:
        return self.LEVEL if self.moved is None else SEGMENTS_LEVEL


class DeleteDeadletter(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "delete_deadletter"
    tenant_id: str
    id: str
    segment: str | None = None  # the history segment it moved into (level 13)

    def needed_level(self) -> int:
        return self.LEVEL if self.segment is None else SEGMENTS_LEVEL


# ---------------------------------------------------------------------------- HTTP delivery


class CallbackOutcome(Body, frozen=True, kw_only=True, omit_defaults=True):
    """How one HTTP attempt ended (delivery/outcome.py verdicts)."""

    seq: int
    job_id: str | None = None
    scheduled_at_ms: int | None = None
    attempt: int
    started_at_ms: int
    finished_at_ms: int
    verdict: str
    error: str | None
    retry_at_ms: int | None


class RecordCallbacks(LogCommand[CallbacksRecorded], frozen=True, kw_only=True, omit_defaults=True):
    TYPE = "record_callbacks"
    node_id: str
    outcomes: tuple[CallbackOutcome, ...]
    # Level 8: a job an outcome cancels (410 Gone) records the cancel in its versions.
    versioned: bool = False

    def needed_level(self) -> int:
        return versioned_level(self.versioned, self.LEVEL)


# ---------------------------------------------------------------------------- failure alerts


class AlertOutcome(Body, frozen=True, kw_only=True, omit_defaults=True):
    """How one POST of a failure alert ended: `attempt` is the attempt made (the row's
    `attempts` plus one when it was read); `retry_at_ms` None on a failure gives the alert up."""

    alert_id: int
    attempt: int
    sent: bool
    error: str | None = None
    retry_at_ms: int | None = None


class RecordAlerts(LogCommand[AlertsRecorded], frozen=True, kw_only=True, omit_defaults=True):
    """The outcomes of the leader's alert sender (delivery/alerts.py); an outcome for an
    attempt that is not the alert's next one, or for an alert done, changes nothing."""

    TYPE = "record_alerts"
    LEVEL = SCHEDULE_CONTROL_LEVEL
    outcomes: tuple[AlertOutcome, ...]


class OverdueMark(Body, frozen=True, kw_only=True, omit_defaults=True):
    """A job the overdue scanner found with no success since `since_ms` (its last success, or
    its creation) for more than twice its schedule's longest gap (`gap_ms`)."""

    job_id: str
    since_ms: int
    gap_ms: int


class MarkOverdue(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """The leader's overdue scanner's findings for a stretch of jobs: newly overdue ones (each
    alerted once where its failure policy has an alert_url) and ones no longer overdue."""

    TYPE = "mark_overdue"
    LEVEL = SCHEDULE_CONTROL_LEVEL
    marked: tuple[OverdueMark, ...] = ()
    cleared: tuple[str, ...] = ()


# ---------------------------------------------------------------------------- retention


class Prune(LogCommand[Pruned], frozen=True, kw_only=True, omit_defaults=True):
    """Delete finished data past its retention, tenants after `after_tenant`, within budgets."""

    TYPE = "prune"
    LEVEL = 2
    retention_ms: Mapping[str, int]
    after_tenant: str | None = None
    max_rows: int | None = None
    max_tenants: int | None = None
    commands_ms: int | None = None
    # Deferred completions of one-time jobs to write (level 5; absent: the most a prune
    # writes). The leader's pruner sends 0 while a queue is still draining.
    max_completions: int | None = None


class MoveHistory(LogCommand[Pruned], frozen=True, kw_only=True, omit_defaults=True):
    """`prune` (same fields, budgets and tenant walk) with the history kinds moved instead of
    deleted: runs, batches, dead letters and audit records that ended before the period of
    `ts_ms` go into their period's open segment (rows past retention are deleted as before)."""

    TYPE = "move_history"
    LEVEL = SEGMENTS_LEVEL
    retention_ms: Mapping[str, int]
    after_tenant: str | None = None
    max_rows: int | None = None
    max_tenants: int | None = None
    commands_ms: int | None = None
    max_completions: int | None = None
    # Level 14: keep what the moved runs say per job (store/moved_runs.py); absent at level 13.
    summarize: bool = False

    def needed_level(self) -> int:
        return RUN_SUMMARIES_LEVEL if self.summarize else self.LEVEL


class CloseSegment(LogCommand[SegmentClosed], frozen=True, kw_only=True, omit_defaults=True):
    """An open segment whose period ended (plus the grace) and whose moves are done: every
    replica records its rows' digest and makes its file immutable. The leader's Pruner carries
    the digest it computed off the apply thread from its own file at `rows` rows (apply refuses
    the close if the segment holds another count, and each node checks its own file after the
    commit, in the background); without them apply computes the digest itself."""

    TYPE = "close_segment"
    LEVEL = SEGMENTS_LEVEL
    name: str
    rows: int | None = None
    content_digest: str | None = None


class DropSegment(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """A closed segment older than its family's retention: its row goes; every node unlinks the
    file after the commit."""

    TYPE = "drop_segment"
    LEVEL = SEGMENTS_LEVEL
    name: str


class SetRetention(LogCommand[RetentionSet], frozen=True, kw_only=True, omit_defaults=True):
    """A tenant's own retention per kind (milliseconds); kinds not named are cleared."""

    TYPE = "set_retention"
    LEVEL = 2
    tenant_id: str
    retention_ms: Mapping[str, int]


# ---------------------------------------------------------------------------- connections


class CreateConnection(
    LogCommand[ConnectionCreated], frozen=True, kw_only=True, omit_defaults=True
):
    """A tenant's named broker connection; `url` (credentials included) is sealed with the
    payload keys when they are configured, and no result, audit record or log line holds it."""

    TYPE = "create_connection"
    LEVEL = 3
    tenant_id: str
    name: str
    kind: str  # targets.CONNECTION_SCHEMES
    url: str
    host: str  # host[:port] without credentials: what GET shows
    addresses: tuple[str, ...]  # the addresses the guard checked: deliverers connect to these
    actor: str | None = None


class DeleteConnection(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """Forget a connection; refused while a live (active or paused) job uses it."""

    TYPE = "delete_connection"
    LEVEL = 3
    tenant_id: str
    name: str
    actor: str | None = None


class PutCalendar(LogCommand[CalendarSaved], frozen=True, kw_only=True, omit_defaults=True):
    """Create a tenant's calendar (`create_only`: refused if it exists) or replace its dates; a
    replace raises the versions of the jobs that exclude it (their planned claims are stale)."""

    TYPE = "put_calendar"
    LEVEL = CALENDARS_LEVEL
    tenant_id: str
    name: str
    dates: tuple[str, ...]  # sorted, once each (calendars.parse_dates)
    create_only: bool = False
    actor: str | None = None


class DeleteCalendar(LogCommand[Done], frozen=True, kw_only=True, omit_defaults=True):
    """Forget a calendar; refused while a job not cancelled excludes it."""

    TYPE = "delete_calendar"
    LEVEL = CALENDARS_LEVEL
    tenant_id: str
    name: str
    actor: str | None = None


CATALOGUE: Mapping[str, type[LogCommand[Any]]] = {
    cls.TYPE: body_type(cls)
    for cls in (
        RegisterNode,
        DeregisterNode,
        Barrier,
        CreateTenant,
        UpdateTenant,
        RotateTenant,
        CreateJobs,
        AddJobs,
        CancelJob,
        UpdateJob,
        PauseJob,
        ResumeJob,
        TriggerJob,
        NodeHeartbeat,
        AssignLeases,
        ClaimRuns,
        ClaimBatch,
        ReceiveMessages,
        AckMessages,
        NackMessages,
        ExtendMessages,
        RedriveDeadletter,
        DeleteDeadletter,
        RecordCallbacks,
        Prune,
        MoveHistory,
        CloseSegment,
        DropSegment,
        SetRetention,
        CreateConnection,
        DeleteConnection,
        PauseQueue,
        ResumeQueue,
        PauseTenant,
        ResumeTenant,
        BackfillJob,
        RecordAlerts,
        MarkOverdue,
        PutCalendar,
        DeleteCalendar,
    )
}
LEVEL_OF_TYPE: Mapping[str, int] = {t: c.LEVEL for t, c in CATALOGUE.items() if c.LEVEL > 1}
