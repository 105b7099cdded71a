"""The objects the store's readers return, as the API answers them: msgspec Structs that
api/http.py's encoder writes as they are, their field order the JSON's key order. Reads only.

A field that is None is written as null (the contract shows every field, null or not); the
free-form values (a job's spec parts, a payload, an audit record's detail) stay JSON values.
"""

from __future__ import annotations

import msgspec

from schedd.jsonbody import JSONValue


class JobView(msgspec.Struct, frozen=True, kw_only=True):
    """The API's job object: the job's identity, its spec's fields (jobspec.spec_to_json, as
    stored, in that order) and its state. `payload` is as stored until the API opens it."""

    job_id: str
    tenant_id: str
    name: str | None
    schedule: dict[str, str]  # schedule.schedule_to_json
    window: str | None
    target: dict[str, JSONValue]
    payload: JSONValue
    retry: dict[str, JSONValue]
    misfire_policy: str
    overlap_policy: str
    status: str
    next_run_at: str | None
    version: int
    created_at: str
    updated_at: str

    def spec_fields(self) -> dict[str, object]:
        """The spec's fields as a job body (what jobspec's parse_job and patch_job read)."""
        return {
            "name": self.name,
            "schedule": self.schedule,
            "window": self.window,
            "target": self.target,
            "payload": self.payload,
            "retry": self.retry,
            "misfire_policy": self.misfire_policy,
            "overlap_policy": self.overlap_policy,
        }


class AttemptView(msgspec.Struct, frozen=True, kw_only=True):
    """One try at delivering a run (a run object's `attempts[]`)."""

    attempt: int
    started_at: str
    finished_at: str | None
    outcome: str | None
    error: str | None


class RunView(msgspec.Struct, frozen=True, kw_only=True):
    """The API's run object: one occurrence of a job, with its attempts."""

    job_id: str
    scheduled_at: str
    fire_at: str
    status: str
    attempt: int
    attempts: list[AttemptView]
    dispatched_at: str | None
    finished_at: str | None
    error: str | None


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The API's audit record; `detail` is the action's own, free-form JSON."""

    seq: int
    at: str
    tenant_id: str | None  # None: a cluster-wide action (the admin's)
    actor: str
    action: str
    job_id: str | None
    detail: JSONValue


class DeadLetterView(msgspec.Struct, frozen=True, kw_only=True):
    """The API's dead letter: a run whose attempts ran out, and where it was going."""

    id: str
    job_id: str
    scheduled_at: str
    attempts: int
    error: str | None
    created_at: str
    target: dict[str, JSONValue]


class QueueSummary(msgspec.Struct, kw_only=True):
    """A built-in queue's counts (queue_reads.queue_summaries adds them up as it reads, hence
    not frozen): messages ready, in flight and delayed, its dead letters, and the age of its
    oldest ready or in-flight message (None without one). A new one is an empty queue."""

    name: str
    ready: int = 0
    in_flight: int = 0
    delayed: int = 0
    dead: int = 0
    oldest_age_s: float | None = None


class TenantView(msgspec.Struct, frozen=True, kw_only=True):
    """The API's tenant object (never its token or signing secret)."""

    tenant_id: str
    name: str
    max_active_jobs: int
    dispatch_rate: int
    allowed_hosts: list[str]
    alert_url: str | None
    active_jobs: int
    retention: dict[str, str]  # its own, shorter, retention: kind -> duration text
    created_at: str
    updated_at: str


class ConnectionView(msgspec.Struct, frozen=True, kw_only=True):
    """The API's connection object: a tenant's named broker connection, never its URL."""

    name: str
    kind: str
    host: str  # host[:port], no credentials
    created_at: str
