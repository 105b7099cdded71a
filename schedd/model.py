"""The nouns of schedd: schedules, targets, retry policies, jobs and runs, and their enums.

Plain data only: no I/O, no parsing of request bodies (jobspec.py), no time arithmetic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from schedd.timeformat import format_instant

JSONValue = Any  # a decoded JSON value; jsonbody.py checks what may enter


class JobStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    COMPLETED = "completed"


class JobChange(StrEnum):
    """What one version of a job changed (GET /v1/jobs/{id}/versions): its spec or status."""

    CREATE = "create"
    UPDATE = "update"  # a PATCH
    RESCHEDULE = "reschedule"  # a PATCH of the schedule alone
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"


def not_live_message(status: str, done: str) -> str:
    """The 409 for a cancelled or completed job asked to be `done` ("resumed", "changed"):
    one text whether the API's read or the store's apply refuses it (docs/schedctl.md shows it)."""
    return f"a {status} job cannot be {done}; create a new job instead"


class MisfirePolicy(StrEnum):
    RUN_ONCE = "run_once"
    SKIP = "skip"
    RUN_ALL = "run_all"


class OverlapPolicy(StrEnum):
    ALLOW = "allow"
    SKIP = "skip"
    DELAY = "delay"


class Backoff(StrEnum):
    EXPONENTIAL = "exponential"
    LINEAR = "linear"
    FIXED = "fixed"


class Verdict(StrEnum):
    """What one delivery attempt came to: the caller's judgement, recorded by apply."""

    SUCCEEDED = "succeeded"
    RETRY = "retry"  # try again per the job's retry policy, if attempts are left
    FAILED = "failed"  # never retried
    GONE = "gone"  # 410: failed, and the job is cancelled


class ClaimRefusal(StrEnum):
    """Why apply refuses one claim: counted in its result (`rejected`), never an error."""

    STALE_LEASE = "stale_lease"  # the partition's lease is another node's, or another epoch's
    EXPIRED_LEASE = "expired_lease"
    NOT_DUE = "not_due"  # the due row is gone: claimed already, or the job moved on
    CANCELLED = "cancelled"
    STALE_VERSION = "stale_version"  # the job changed (or paused) after the dispatcher read it
    DUPLICATE_RUN = "duplicate_run"  # the job has a run at that instant (a trigger's)
    TENANT_PAUSED = "tenant_paused"  # its tenant was paused (level 8) after the dispatcher read


class HttpMethod(StrEnum):
    """The methods an http target may call with (uppercase: they are sent as they are)."""

    GET = "GET"
    POST = "POST"
    PUT = "PUT"
    PATCH = "PATCH"
    DELETE = "DELETE"


class RunStatus(StrEnum):
    DISPATCHED = "dispatched"
    DELIVERED = "delivered"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRYING = "retrying"
    DEAD = "dead"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True, kw_only=True)
class AtSchedule:
    """One run at a fixed instant (`run_at`, or `delay` resolved against "now")."""

    at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CronSchedule:
    """Runs at the wall-clock times a cron expression matches in a time zone."""

    expr: str
    timezone: str
    start_at_ms: int | None = None
    end_at_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EverySchedule:
    """Runs at start_at + k * interval, k >= 0: pure elapsed time."""

    interval_ms: int
    start_at_ms: int
    end_at_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AfterSchedule:
    """No times of its own: a run each time a run of job `job_id` ends as `on` says (issue 33
    §2, log level 11; store/dependencies.py writes it, with the upstream run's scheduled time)."""

    job_id: str
    on: str = "success"  # one of AFTER_OUTCOMES


AFTER_OUTCOMES = ("success", "failure", "finished")

Schedule = AtSchedule | CronSchedule | EverySchedule | AfterSchedule


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueTarget:
    """Deliver runs as messages on the tenant's built-in queue `name`."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpTarget:
    """Deliver runs by calling the tenant's URL."""

    url: str
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    timeout_ms: int = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerTarget:
    """Deliver runs to the tenant's broker through its named connection `connection`: the base
    of each broker kind's target (`schedd/targets/`: RedisStreamTarget, RabbitMqTarget, ...)."""

    connection: str


Target = QueueTarget | HttpTarget | BrokerTarget


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConnection:
    """A tenant's named broker connection as a deliverer uses it (credentials opened: never log,
    store or answer `url`)."""

    tenant_id: str
    name: str
    kind: str  # "redis" | "rabbitmq" | "nats" (targets.CONNECTION_SCHEMES)
    url: str  # as the tenant gave it, credentials included
    pinned_addresses: tuple[str, ...]  # the IPs the guard checked at create: connect only to these
    created_ms: int  # a connection deleted and created again under its name is a new pool


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How failed attempts are retried before a run becomes a dead letter."""

    max_attempts: int = 3
    backoff: Backoff = Backoff.EXPONENTIAL
    initial_delay_ms: int = 1_000
    max_delay_ms: int = 300_000


def partition_of(job_id: str, partitions: int) -> int:
    """The partition of a job: a stable hash of its id (never Python's salted hash())."""
    digest = hashlib.blake2b(job_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def delivery_id(job_id: str, scheduled_at_ms: int) -> str:
    """The store's name of a run's delivery: its queue message id and its dead letter id."""
    return f"{job_id}:{scheduled_at_ms}"


def idempotency_key(job_id: str, scheduled_at_ms: int) -> str:
    """What a run's consumer or endpoint dedupes on: `job_id:scheduled_at` (RFC 3339)."""
    return f"{job_id}:{format_instant(scheduled_at_ms)}"


RaftRole = Literal["leader", "follower", "candidate", "starting"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RaftView:
    """What this node knows of the Raft group (/v1/cluster, /v1/admin/state, membership)."""

    address: str  # this node's Raft address
    role: RaftRole
    leader: str | None  # the leader's Raft address, None when none is known
    term: int
    applied_index: int  # the last index this node applied to its store
    connected: Mapping[str, bool] = field(default_factory=dict)  # peer Raft address -> linked
    # What the leader knows each follower holds (empty on a follower): peer -> its match index.
    match_index: Mapping[str, int] = field(default_factory=dict)
