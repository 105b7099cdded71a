"""The catalogue of log commands: one frozen dataclass per wire type, and the log levels.

A wire name (`TYPE`) is never renamed or reused; bump a type's `VERSION` (and carry it in the
body) before changing what a body means. `to_body()` gives the JSON object of today's log
(same field names and shapes); `from_body()` reads one back and raises ValueError when it does
not fit (apply turns that into a CorruptLog). Only the encoding lives here, never behaviour.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Self, TypeVar, Union, get_args, get_origin, get_type_hints

JSONObject = Mapping[str, Any]  # kept as the proposer built it (a job spec, tenant changes)

# The command types this version applies, as a level: a node halts on a type it does not know,
# so a type added at level N is proposed only once every member reports N or more (/healthz
# `log_level`; a rolling upgrade runs old and new nodes side by side). Level 2: prune and
# set_retention (issue 14). LEVEL_OF_TYPE names the types above level 1.
LOG_LEVEL = 2

_OMIT = {"omit_none": True}  # an optional key: absent from the body when None


def optional(default: Any = None) -> Any:
    """A field whose key may be absent from the body (absent when None)."""
    return field(default=default, metadata=_OMIT)


Decoder = Callable[[Any], Any]
_CODECS: dict[type, list[tuple[str, Decoder, Any, bool]]] = {}


class Body:
    """A body (or a nested item of one) encoded as a JSON object, field by field."""

    __slots__ = ()

    def to_body(self) -> dict[str, Any]:
        """The JSON object of today's log for this value."""
        out: dict[str, Any] = {}
        for name, _decode, _default, omit_none in _codec(type(self)):
            value = getattr(self, name)
            if value is None and omit_none:
                continue
            out[name] = _encode(value)
        return out

    @classmethod
    def from_body(cls, body: Any) -> Self:
        """Read a JSON object back; ValueError when it does not fit this type."""
        if not isinstance(body, dict):
            raise ValueError(f"{cls.__name__}: not a JSON object")
        values = {}
        for name, decode, default, _omit in _codec(cls):
            if name in body:
                try:
                    values[name] = decode(body[name])
                except ValueError as exc:
                    raise ValueError(f"{cls.__name__}.{name}: {exc}") from None
            elif default is MISSING:
                raise ValueError(f"{cls.__name__}: no {name!r}")
        return cls(**values)


class LogCommand(Body):
    """One command type of the log. Subclasses set TYPE (the wire name) and VERSION."""

    __slots__ = ()
    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1
    LEVEL: ClassVar[int] = 1  # the log level that introduced the type


def _encode(value: Any) -> Any:
    if isinstance(value, Body):
        return value.to_body()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _codec(cls: type) -> list[tuple[str, Decoder, Any, bool]]:
    codec = _CODECS.get(cls)
    if codec is None:
        hints = get_type_hints(cls)
        codec = [
            (f.name, _decoder(hints[f.name]), f.default, bool(f.metadata.get("omit_none")))
            for f in fields(cls)
        ]
        _CODECS[cls] = codec
    return codec


def _decoder(tp: Any) -> Decoder:  # one case per JSON shape
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return lambda v: v
    if origin in (Union, types.UnionType):
        inner = _decoder(next(a for a in args if a is not type(None)))
        return lambda v: None if v is None else inner(v)
    if tp in (str, int, bool):
        return _scalar(tp)
    if origin is tuple:
        item = _decoder(args[0])
        return lambda v: tuple(item(x) for x in _typed(v, list))
    if origin in (Mapping, dict):
        value = _decoder(args[1])
        return lambda v: {_typed(k, str): value(x) for k, x in _typed(v, dict).items()}
    if isinstance(tp, type) and is_dataclass(tp) and issubclass(tp, Body):
        return tp.from_body
    raise TypeError(f"no decoder for {tp!r}")


def _scalar(tp: type) -> Decoder:
    def decode(v: Any) -> Any:
        if type(v) is not tp:  # exact: a bool is no int here, an int no bool
            raise ValueError(f"{v!r} is not a {tp.__name__}")
        return v

    return decode


def _typed(v: Any, tp: type) -> Any:
    if not isinstance(v, tp):
        raise ValueError(f"{type(v).__name__} is not a {tp.__name__}")
    return v


B = TypeVar("B", bound=type[Body])


def body_type(cls: B) -> B:
    """Check a Body dataclass's field types once, at import (a typo fails loudly)."""
    _codec(cls)
    return cls


# ---------------------------------------------------------------------------- cluster


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterNode(LogCommand):
    """A node's API and Raft addresses, so any node can list them."""

    TYPE = "register_node"
    node_id: str
    api: str
    raft: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeregisterNode(LogCommand):
    """Forget a node removed from the Raft group."""

    TYPE = "deregister_node"
    node_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Barrier(LogCommand):
    """A no-op: once applied on a node, it holds everything committed before."""

    TYPE = "barrier"


# ---------------------------------------------------------------------------- tenants


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTenant(LogCommand):
    TYPE = "create_tenant"
    tenant_id: str
    token_hash: str
    signing_secret: str
    actor: str | None = optional()
    name: str
    max_active_jobs: int
    dispatch_rate: int
    allowed_hosts: tuple[str, ...]
    alert_url: str | None = optional()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateTenant(LogCommand):
    TYPE = "update_tenant"
    tenant_id: str
    changes: JSONObject  # only the fields named change (alert_url may be set to null)
    actor: str | None = optional()


@dataclass(frozen=True, slots=True, kw_only=True)
class RotateTenant(LogCommand):
    """New token and signing secret; the old secret still signs for `overlap_ms`."""

    TYPE = "rotate_tenant"
    tenant_id: str
    token_hash: str
    signing_secret: str
    actor: str | None = optional()
    overlap_ms: int | None = optional()


# ---------------------------------------------------------------------------- jobs


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob(Body):
    """One job of a create_jobs command, with its id, partition and first run decided."""

    job_id: str
    partition: int
    spec: JSONObject
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    idempotency_key: str | None
    request_hash: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateJobs(LogCommand):
    TYPE = "create_jobs"
    tenant_id: str
    actor: str | None = optional()
    jobs: tuple[NewJob, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelJob(LogCommand):
    TYPE = "cancel_job"
    tenant_id: str
    job_id: str
    actor: str | None = optional()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateJob(LogCommand):
    """Replace a job's spec and next run; the proposer read `expected_version`."""

    TYPE = "update_job"
    tenant_id: str
    job_id: str
    actor: str | None = optional()
    expected_version: int
    spec: JSONObject
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    fields: tuple[str, ...] | None = optional()


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseJob(LogCommand):
    TYPE = "pause_job"
    tenant_id: str
    job_id: str
    actor: str | None = optional()


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeJob(LogCommand):
    TYPE = "resume_job"
    tenant_id: str
    job_id: str
    actor: str | None = optional()
    expected_version: int
    next_run_at_ms: int | None
    next_fire_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerJob(LogCommand):
    TYPE = "trigger_job"
    tenant_id: str
    job_id: str
    actor: str | None = optional()
    scheduled_at_ms: int


# ---------------------------------------------------------------------------- dispatch


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeHeartbeat(LogCommand):
    """A node is alive: every lease it holds lasts `ttl_ms` more."""

    TYPE = "node_heartbeat"
    node_id: str
    ttl_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseMove(Body):
    """Give `partition` to `node_id`, replacing the lease at `epoch` (compare-and-set)."""

    partition: int
    node_id: str
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignLeases(LogCommand):
    TYPE = "assign_leases"
    ttl_ms: int
    moves: tuple[LeaseMove, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim(Body):
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
    skip: str | None = optional()


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRuns(LogCommand):
    TYPE = "claim_runs"
    node_id: str
    claims: tuple[Claim, ...]


# ---------------------------------------------------------------------------- queues


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiveMessages(LogCommand):
    """Hand out up to `max` visible messages, one fresh receipt each."""

    TYPE = "receive_messages"
    tenant_id: str
    queue: str
    max: int
    visibility_ms: int
    receipts: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AckMessages(LogCommand):
    TYPE = "ack_messages"
    tenant_id: str
    queue: str
    receipts: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class NackMessages(LogCommand):
    TYPE = "nack_messages"
    tenant_id: str
    queue: str
    receipts: tuple[str, ...]
    error: str | None = optional()


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtendMessages(LogCommand):
    TYPE = "extend_messages"
    tenant_id: str
    queue: str
    receipts: tuple[str, ...]
    visibility_ms: int


# ---------------------------------------------------------------------------- dead letters


@dataclass(frozen=True, slots=True, kw_only=True)
class RedriveDeadletter(LogCommand):
    TYPE = "redrive_deadletter"
    tenant_id: str
    id: str
    partition: int | None = optional()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteDeadletter(LogCommand):
    TYPE = "delete_deadletter"
    tenant_id: str
    id: str


# ---------------------------------------------------------------------------- HTTP delivery


@dataclass(frozen=True, slots=True, kw_only=True)
class CallbackOutcome(Body):
    """How one HTTP attempt ended (delivery/outcome.py verdicts)."""

    seq: int
    job_id: str | None = optional()
    scheduled_at_ms: int | None = optional()
    attempt: int
    started_at_ms: int
    finished_at_ms: int
    verdict: str
    error: str | None
    retry_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordCallbacks(LogCommand):
    TYPE = "record_callbacks"
    node_id: str
    outcomes: tuple[CallbackOutcome, ...]


# ---------------------------------------------------------------------------- retention


@dataclass(frozen=True, slots=True, kw_only=True)
class Prune(LogCommand):
    """Delete finished data past its retention, tenants after `after_tenant`, within budgets."""

    TYPE = "prune"
    LEVEL = 2
    retention_ms: Mapping[str, int]
    after_tenant: str | None = optional()
    max_rows: int | None = optional()
    max_tenants: int | None = optional()
    commands_ms: int | None = optional()


@dataclass(frozen=True, slots=True, kw_only=True)
class SetRetention(LogCommand):
    """A tenant's own retention per kind (milliseconds); kinds not named are cleared."""

    TYPE = "set_retention"
    LEVEL = 2
    tenant_id: str
    retention_ms: Mapping[str, int]


CATALOGUE: Mapping[str, type[LogCommand]] = {
    cls.TYPE: body_type(cls)
    for cls in (
        RegisterNode,
        DeregisterNode,
        Barrier,
        CreateTenant,
        UpdateTenant,
        RotateTenant,
        CreateJobs,
        CancelJob,
        UpdateJob,
        PauseJob,
        ResumeJob,
        TriggerJob,
        NodeHeartbeat,
        AssignLeases,
        ClaimRuns,
        ReceiveMessages,
        AckMessages,
        NackMessages,
        ExtendMessages,
        RedriveDeadletter,
        DeleteDeadletter,
        RecordCallbacks,
        Prune,
        SetRetention,
    )
}
LEVEL_OF_TYPE: Mapping[str, int] = {t: c.LEVEL for t, c in CATALOGUE.items() if c.LEVEL > 1}
