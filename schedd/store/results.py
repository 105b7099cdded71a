"""What each log command answers its proposer: one struct per result shape (issue 30).

Apply builds a result's fields (`command.ok(**fields)`) and `applied_commands` keeps their
canonical JSON (inside the digest), so these structs only *read* a result; the field names are
the JSON's and never change. A command type names its result as its type parameter
(`class ClaimRuns(LogCommand[Claimed])`), and `answer_of` turns the proposer's JSON answer into
it, raising a rejection as its error class: no caller picks fields by string, and a refused
command never reads as "nothing happened". Every field has a default: a result that an older
version kept (answered again to a retried proposal, after a snapshot install) and that lacks a
field added since reads as that default, not as an error.
"""

from __future__ import annotations

import msgspec

from schedd.wire.queues import Message


class Done(msgspec.Struct, frozen=True, kw_only=True):
    """A command that answers nothing but that it took effect."""


class Deregistered(Done, frozen=True, kw_only=True):
    deregistered: int = 0  # rows removed: 0 when the node was not registered


class TenantSaved(Done, frozen=True, kw_only=True):
    tenant_id: str = ""


class CalendarSaved(Done, frozen=True, kw_only=True):
    created: bool = False  # a new calendar (else its dates were replaced)
    jobs_fenced: int = 0  # jobs excluding it whose versions the change raised


class JobError(msgspec.Struct, frozen=True, kw_only=True):
    code: str  # an error class's code (errors.BY_CODE)
    message: str


class JobOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """One job of a create: its id and whether it was created (False: an Idempotency-Key seen
    before named it), or the error that refused it."""

    job_id: str | None = None
    created: bool = False
    error: JobError | None = None


class JobsCreated(Done, frozen=True, kw_only=True):
    results: list[JobOutcome] = []


class JobsAdded(Done, frozen=True, kw_only=True):
    """add_jobs names only the jobs not created as proposed, by index in the command."""

    created: int = 0
    existing: list[tuple[int, str]] = []  # (index, the job the key named before)
    errors: list[tuple[int, str, str]] = []  # (index, error code, message)


class Triggered(Done, frozen=True, kw_only=True):
    scheduled_at_ms: int | None = None


class Backfilled(Done, frozen=True, kw_only=True):
    """backfill_job: how many runs it added (slots skipped are not counted), and when the
    last of them fires."""

    runs: int = 0
    last_fire_at_ms: int | None = None


class LeasesMoved(Done, frozen=True, kw_only=True):
    moved: int = 0


class Claimed(Done, frozen=True, kw_only=True):
    """claim_runs and claim_batch: claims taken, and the others by refusal (model.ClaimRefusal)."""

    claimed: int = 0
    rejected: dict[str, int] = {}


class Received(Done, frozen=True, kw_only=True):
    """receive_messages: the messages handed out whole (deliveries in the API's form, their
    payloads as apply left them) or, at level 7, the ids of those messages (`taken`), and, at
    level 6, the batch runs taken by reference: [batch_id, slot, ...] lists. The proposing node
    reads what is named by reference from its own store (queue_reads.taken_messages and
    held_messages)."""

    messages: list[Message] = []
    taken: list[str] | None = None
    held: list[list[int]] | None = None


class Acked(Done, frozen=True, kw_only=True):
    acked: int = 0


class Nacked(Done, frozen=True, kw_only=True):
    nacked: int = 0


class Extended(Done, frozen=True, kw_only=True):
    extended: int = 0


class DeadRun(msgspec.Struct, frozen=True, kw_only=True):
    """A run that died with this record: its tenant's alert is sent by the recording node."""

    job_id: str
    scheduled_at_ms: int
    tenant_id: str


class CallbacksRecorded(Done, frozen=True, kw_only=True):
    """record_callbacks: how many runs succeeded, will retry, died, or were stale (a late
    duplicate), and the runs that died."""

    succeeded: int = 0
    retrying: int = 0
    dead: int = 0
    stale: int = 0
    dead_runs: list[DeadRun] = []


class AlertsRecorded(Done, frozen=True, kw_only=True):
    """record_alerts: alerts sent, to retry, given up, and outcomes that changed nothing
    (stale: a retried proposal, an attempt already recorded, an alert done or gone)."""

    sent: int = 0
    retrying: int = 0
    failed: int = 0
    stale: int = 0


class Pruned(Done, frozen=True, kw_only=True):
    deleted: dict[str, int] = {}
    next_after: str = ""  # "" once a round is done
    done: bool = False
    completed: int = 0  # deferred completions written (level 5)
    moved: dict[str, int] = {}  # rows moved into history segments, per kind (move_history)


class SegmentClosed(Done, frozen=True, kw_only=True):
    name: str = ""
    rows: int = 0
    content_digest: str = ""


class RetentionSet(Done, frozen=True, kw_only=True):
    retention_ms: dict[str, int] = {}


class ConnectionCreated(Done, frozen=True, kw_only=True):
    name: str = ""
    kind: str = ""
    host: str = ""
    created_at_ms: int = 0
