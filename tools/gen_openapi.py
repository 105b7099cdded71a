"""Build schedd's OpenAPI 3.1 document: schedd/api/openapi.json (served) and docs/openapi.json.

Bounds, patterns and enums come from the modules that enforce them, so a changed limit shows up
as a stale document. Run `.venv/bin/python tools/gen_openapi.py` after changing a route;
`--check` exits 1 when the checked-in files differ (tests/integration/test_openapi.py runs it).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from pathlib import Path
from typing import Any

import msgspec

from schedd import __version__
from schedd.api import (
    connections,
    deadletters,
    job_filters,
    jobs,
    queues,
    retention,
    schedules,
    stats,
    tenants,
)
from schedd.api.audit import MAX_JOB_ID_CHARS
from schedd.bodies import DurationMs
from schedd.jobspec import DEFAULT_PAYLOAD_LIMIT, HTTP_METHODS, MAX_WINDOW_MS
from schedd.model import (
    Backoff,
    JobStatus,
    MisfirePolicy,
    OverlapPolicy,
)
from schedd.retention import RetentionUpdate
from schedd.schedule import MAX_AHEAD_MS, MIN_EVERY_MS
from schedd.targets import CONNECTION_NAME, TARGET_TYPES, TargetKind
from schedd.targets import KINDS as TARGET_KINDS
from schedd.wire import cluster as wire_cluster
from schedd.wire import deadletters as wire_deadletters
from schedd.wire import jobs as wire_jobs
from schedd.wire import queues as wire_queues
from schedd.wire import tenants as wire_tenants
from schedd.wire.cluster import NodeToAdd

ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = (ROOT / "schedd" / "api" / "openapi.json", ROOT / "docs" / "openapi.json")
Schema = dict[str, Any]

# --------------------------------------------------------------------------- small builders


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def obj(properties: dict[str, Schema], required: list[str] | None = None, **extra: Any) -> Schema:
    """An object schema; `required` defaults to every property."""
    needed = list(properties) if required is None else required
    schema: Schema = {"type": "object", "properties": properties}
    if needed:
        schema["required"] = needed
    return schema | extra


def closed(properties: dict[str, Schema], required: list[str], **extra: Any) -> Schema:
    """A request body object that refuses unknown fields (the handlers answer 400)."""
    return obj(properties, required, additionalProperties=False, **extra)


def values(enum: Any) -> list[str]:
    return [member.value for member in enum]


def page_of(key: str, item: str) -> Schema:
    return obj({key: {"type": "array", "items": ref(item)}, "next_cursor": ref("NextCursor")})


def duration(low_s: float, high_s: float, what: str) -> Schema:
    """A duration field: text like "90s" or a number of seconds, within [low_s, high_s]."""
    return {
        "description": f'{what} A duration: "250ms", "90s", "10m", "2h", "1d", "1h30m" '
        f"or a number of seconds; from {_seconds(low_s)} to {_seconds(high_s)}.",
        "anyOf": [
            ref("DurationText"),
            {"type": "number", "minimum": low_s, "maximum": high_s},
        ],
    }


def _seconds(value: float) -> str:
    return f"{int(value):,} s" if value == int(value) else f"{value:g} s"


def struct_schemas(*bodies: type) -> dict[str, Schema]:
    """Request bodies decoded as msgspec structs (schedd/bodies.py): their schemas come from the
    structs themselves, so each rule is written once. A struct's name is its component's."""
    _, components = msgspec.json.schema_components(
        bodies, schema_hook=_checked_schema, ref_template="#/components/schemas/{name}"
    )
    return {name: _tidied(schema) for name, schema in components.items()}


def _checked_schema(kind: type) -> Schema:
    """The schema of a field type msgspec cannot check itself (bodies.Checked)."""
    if isinstance(kind, type) and issubclass(kind, DurationMs):
        what = (kind.__doc__ or "").strip()
        return duration(kind.minimum_ms // 1000, kind.maximum_ms // 1000, what)
    raise NotImplementedError(f"no schema for {kind!r}")


def _tidied(schema: Schema) -> Schema:
    """Without msgspec's title (the component's name says it) and empty `required`; the
    docstring's line breaks joined."""
    tidied = {k: v for k, v in schema.items() if k != "title" and (k != "required" or v)}
    if "description" in tidied:
        tidied["description"] = " ".join(tidied["description"].split())
    return tidied


# --------------------------------------------------------------------------- shared schemas

RFC3339_INPUT = (
    r"^(19[7-9][0-9]|2[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]"
    r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,9})?)?"
    r"([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
UTC_INSTANT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{3})?Z$"
SECONDS_TEXT = r"^\s*[0-9]{1,15}(\.[0-9]{1,9})?\s*$"  # timeformat: surrounding spaces allowed
UNITS_TEXT = r"^([0-9]{1,15}(\.[0-9]{1,9})?(ms|s|m|h|d))+$"
CRON_TEXT = r"^\s*(@[A-Za-z]+|\S+(\s+\S+){4})\s*$"
ZONE_NAME = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$"  # as schedule.check_timezone
QUEUE_NAME = f"^{queues.QUEUE_NAME.pattern}$"
PRINTABLE = r"^[^\u0000-\u001f\u007f]*$"
SNAKE_CASE = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"
CONNECTION_NAME_TEXT = f"^{CONNECTION_NAME.pattern}$"


def basic_schemas() -> dict[str, Schema]:
    return {
        "InstantInput": {
            "type": "string",
            "pattern": RFC3339_INPUT,
            "description": "RFC 3339 with a UTC offset ('Z' or '+05:30'), from 1970 to 2999. "
            "A time without an offset is refused.",
            "examples": ["2026-10-12T08:00:00+05:30"],
        },
        "DurationText": {
            "anyOf": [
                {"type": "string", "pattern": SECONDS_TEXT},
                {"type": "string", "maxLength": 64, "pattern": UNITS_TEXT},
            ],
            "examples": ["90s", "10m", "1h30m"],
        },
        "Payload": {
            "description": f"Any JSON value, at most the node's payload limit "
            f"({DEFAULT_PAYLOAD_LIMIT // 1024} KiB by default) encoded. No NUL characters, "
            "no lone surrogates, nesting at most 32 levels, integers within 64 bits."
        },
    }


# --------------------------------------------------------------------------- job bodies


def schedule_input() -> Schema:
    bound = nullable(ref("InstantInput"))
    ahead_s = MAX_AHEAD_MS // 1000
    return {
        "description": "Exactly one of run_at, delay, cron or every.",
        "oneOf": [
            closed({"run_at": ref("InstantInput")}, ["run_at"], title="run_at"),
            closed(
                {"delay": duration(0, ahead_s, "From the server's now.")}, ["delay"], title="delay"
            ),
            closed(
                {
                    "cron": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 1000,
                        "pattern": CRON_TEXT,
                        "description": "5 fields (minute hour day-of-month month day-of-week) "
                        "or a macro like @daily; names like MON and JAN are allowed.",
                        "examples": ["0 8 * * MON"],
                    },
                    "timezone": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 64,
                        "pattern": ZONE_NAME,
                        "description": "IANA zone name; default UTC.",
                        "examples": ["Asia/Kolkata"],
                    },
                    "start_at": bound,
                    "end_at": bound,
                },
                ["cron"],
                title="cron",
            ),
            closed(
                {
                    "every": duration(MIN_EVERY_MS / 1000, 100 * 365 * 86400, "The interval."),
                    "start_at": bound,
                    "end_at": bound,
                },
                ["every"],
                title="every",
            ),
        ],
    }


def target_input() -> Schema:
    queue = closed(
        {"type": {"const": "queue"}, "name": {"type": "string", "pattern": QUEUE_NAME}},
        ["type", "name"],
        title="queue",
    )
    http = closed(
        {
            "type": {"const": "http"},
            "url": {
                "type": "string",
                "maxLength": 2048,
                "pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://[^\u0000-\u0020\u007f]+$",
                "description": "http(s) URL with a host and no credentials. The SSRF guard "
                "refuses private, loopback and link-local addresses and hosts outside the "
                "tenant's allowed_hosts (422).",
            },
            "method": {"enum": list(HTTP_METHODS), "default": "POST"},
            "headers": {
                "type": "object",
                "maxProperties": 32,
                "propertyNames": {"pattern": r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"},
                "additionalProperties": {"type": "string", "maxLength": 4096, "pattern": PRINTABLE},
                "description": "Sent as given. Host, Content-Length, Content-Type, "
                "Transfer-Encoding, Connection, Idempotency-Key and webhook-* are refused.",
            },
            "timeout": duration(1, 60, "Per attempt; default 10s."),
        },
        ["type", "url"],
        title="http",
    )
    return {"oneOf": [queue, http, *broker_targets()]}


def broker_targets() -> list[Schema]:
    """The broker targets (request bodies, targets.KINDS); each names one of the tenant's
    connections."""
    connection = {
        "type": "string",
        "pattern": CONNECTION_NAME_TEXT,
        "description": "A connection of the tenant (POST /v1/connections) of this target's "
        f"kind ({', '.join(kind.connection for kind in TARGET_KINDS)}); else 400 naming "
        "target.connection.",
    }
    return [
        closed(
            {"type": {"const": kind.name}, "connection": connection, **kind.schema},
            ["type", "connection", *kind.required],
            title=kind.name,
        )
        for kind in TARGET_KINDS
    ]


def broker_target_output(kind: TargetKind) -> Schema:
    """A broker target as a job shows it: its struct's fields, the optional ones (None: left
    out) not required."""
    properties: dict[str, Schema] = {"type": {"const": kind.name}}
    required = ["type"]
    hints = typing.get_type_hints(kind.struct)
    for field in dataclasses.fields(kind.struct):
        hint = hints[field.name]
        properties[field.name] = {
            "type": "integer" if int in (hint, *typing.get_args(hint)) else "string"
        }
        if field.default is dataclasses.MISSING:
            required.append(field.name)
    return obj(properties, required)


def retry_input() -> Schema:
    return closed(
        {
            "max_attempts": {"type": "integer", "minimum": 1, "maximum": 100, "default": 3},
            "backoff": {"enum": values(Backoff), "default": "exponential"},
            "initial_delay": duration(0, 86400, "Default 1s."),
            "max_delay": duration(0, 86400, "Default 5m; at least initial_delay."),
        },
        [],
    )


def job_fields(*, creating: bool) -> dict[str, Schema]:
    window = duration(0, MAX_WINDOW_MS / 1000, "Runs fire at an offset in [0, window).")
    fields: dict[str, Schema] = {
        "name": {"type": ["string", "null"], "maxLength": 200, "pattern": PRINTABLE},
        "schedule": ref("ScheduleInput"),
        "window": nullable(window),
        "target": ref("TargetInput"),
        "payload": ref("Payload"),
        "retry": nullable(ref("RetryInput")),
        "misfire_policy": {"enum": [*values(MisfirePolicy), None], "default": "run_once"},
        "overlap_policy": {
            "enum": [*values(OverlapPolicy), None],
            "default": "allow",
            "description": "Recurring schedules only: a one-time job accepts only allow.",
        },
    }
    if not creating:
        fields["name"]["description"] = "null clears the name."
    return fields


JOB_EXAMPLE = {
    "name": "weekly-digest",
    "schedule": {"cron": "0 8 * * MON", "timezone": "Asia/Kolkata"},
    "window": "5m",
    "target": {"type": "queue", "name": "digest-jobs"},
    "payload": {"user_id": 42, "week": "2026-W41"},
    "retry": {"max_attempts": 5, "backoff": "exponential", "initial_delay": "1s"},
}


def job_schemas() -> dict[str, Schema]:
    batch_item = job_fields(creating=True) | {
        "idempotency_key": {
            "type": "string",
            "pattern": r"^[\x21-\x7e]{1,255}$",
            "description": "This item's Idempotency-Key.",
        }
    }
    return {
        "ScheduleInput": schedule_input(),
        "TargetInput": target_input(),
        "RetryInput": retry_input(),
        "JobCreate": closed(
            job_fields(creating=True), ["schedule", "target"], examples=[JOB_EXAMPLE]
        ),
        "JobPatch": closed(
            job_fields(creating=False),
            [],
            description="Only the fields given change; a new schedule or window recomputes "
            "next_run_at. The result is validated as a whole.",
        ),
        "BatchCreate": closed(
            {
                "jobs": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": jobs.MAX_BATCH,
                    "items": closed(batch_item, ["schedule", "target"]),
                }
            },
            ["jobs"],
        ),
    }


def preview_schemas() -> dict[str, Schema]:
    return {
        "PreviewRequest": closed(
            {
                "schedule": ref("ScheduleInput"),
                "after": nullable(ref("InstantInput")),
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": schedules.MAX_PREVIEW,
                    "default": 10,
                },
            },
            ["schedule"],
        ),
    }


def request_schemas() -> dict[str, Schema]:
    return struct_schemas(
        queues.ReceiveRequest,
        queues.AckRequest,
        queues.NackRequest,
        queues.ExtendRequest,
        deadletters.RedriveBatch,
        connections.ConnectionInput,
        tenants.TenantCreate,
        tenants.TenantPatch,
        RetentionUpdate,
        NodeToAdd,
    )


ANSWERS = (
    *wire_jobs.REFERENCED,
    *wire_deadletters.REFERENCED,
    wire_jobs.JobView,
    wire_jobs.JobList,
    wire_jobs.RunList,
    wire_jobs.Triggered,
    wire_jobs.BatchResults,
    wire_jobs.PreviewResult,
    wire_queues.Messages,
    wire_queues.Acked,
    wire_queues.Nacked,
    wire_queues.Extended,
    wire_queues.QueueList,
    wire_queues.LocalConsumers,
    wire_deadletters.DeadLetterView,
    wire_deadletters.DeadLetterList,
    wire_deadletters.RedriveQueued,
    wire_deadletters.RedriveResults,
    wire_tenants.ConnectionView,
    wire_tenants.ConnectionList,
    wire_tenants.ConnectionTest,
    wire_tenants.TenantView,
    wire_tenants.TenantList,
    wire_tenants.TenantCredentials,
    wire_tenants.TenantRetention,
    wire_tenants.OwnRetention,
    retention.RetentionStatus,
    wire_cluster.Cluster,
    wire_cluster.NodeAdded,
    wire_cluster.NodeRemoved,
    wire_cluster.SteppedDown,
    wire_cluster.AdminState,
    wire_cluster.AuditList,
    wire_cluster.Health,
    wire_cluster.Readiness,
    stats.NodeStats,
    stats.ClusterStats,
    stats.PeerStats,
    stats.PeerFailed,
)


def answer_schemas() -> dict[str, Schema]:
    return struct_schemas(*ANSWERS) | {
        "StatsAnswer": {"anyOf": [ref("NodeStats"), ref("ClusterStats")]}
    }


# --------------------------------------------------------------------------- parameters


def parameters() -> dict[str, Schema]:
    def path(name: str, schema: Schema, description: str) -> Schema:
        return {
            "name": name,
            "in": "path",
            "required": True,
            "schema": schema,
            "description": description,
        }

    return {
        "NodeName": path(
            "node",
            {"type": "string", "minLength": 1},
            "A member's node id (n3) or Raft address (10.0.0.3:9701).",
        ),
        "XTenant": {
            "name": "X-Tenant",
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
            "description": "With the admin token: the tenant_id to act for (1-64 ASCII "
            "characters, else 400; required on tenant routes; an unknown tenant is 404). "
            "Ignored with a tenant token.",
        },
        "IdempotencyKey": {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "schema": {"type": "string", "pattern": r"^[\x21-\x7e]{1,255}$"},
            "description": "Scoped per tenant, kept at least 24 h. The same key and body "
            "answer the first job again (201, same job_id); the same key with another body "
            "is 422 idempotency_mismatch.",
        },
        "Limit": {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
        },
        "Cursor": {
            "name": "cursor",
            "in": "query",
            "required": False,
            "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{0,400}$"},
            "description": "Opaque: the next_cursor of the previous page, absent or empty "
            "for the first page. A malformed cursor is 400.",
        },
        "ConsoleFile": path(
            "path",
            {"type": "string", "pattern": "^[A-Za-z0-9_./-]*$"},
            "A file of the console (app.js, pages/jobs.js); empty for index.html.",
        ),
        "JobId": path("job_id", {"type": "string", "minLength": 1}, "A job_id (job_...)."),
        "TenantId": path("tenant_id", {"type": "string", "minLength": 1}, "A tenant_id."),
        "QueueName": path("name", {"type": "string", "pattern": QUEUE_NAME}, "A queue name."),
        "DeadLetterId": path("id", {"type": "string", "minLength": 1}, "A dead letter's id."),
        "ConnectionName": path(
            "name", {"type": "string", "pattern": CONNECTION_NAME_TEXT}, "A connection's name."
        ),
    }


# --------------------------------------------------------------------------- responses

ERRORS = {
    "400": ("BadRequest", "Malformed JSON, an unknown field, a wrong type or an invalid value."),
    "401": ("Unauthorized", "Missing or unknown bearer token."),
    "403": (
        "Forbidden",
        "Valid token, not allowed here (a tenant on an admin route, or the "
        "admin without X-Tenant on a tenant route).",
    ),
    "404": (
        "NotFound",
        "No such object for this tenant (another tenant's id looks the same), "
        "or X-Tenant names no tenant.",
    ),
    "409": (
        "Conflict",
        "State conflict (e.g. resume a cancelled job, a tenant name in use, a connection "
        "that live jobs use).",
    ),
    "408": (
        "RequestTimeout",
        "The request body did not arrive within [api] body_timeout (30 s by default).",
    ),
    "413": (
        "PayloadTooLarge",
        "Body or payload over its limit, or a write over the 1 MiB limit of one Raft command.",
    ),
    "422": (
        "Unprocessable",
        "Idempotency-Key reused with a different body, a target url or connection host the "
        "SSRF guard refuses, or a connection host that does not resolve.",
    ),
    "429": (
        "TooManyRequests",
        "Tenant quota (max_active_jobs) reached, or the tenant's long polls on this node at "
        "[api] long_polls_per_tenant.",
    ),
    "503": (
        "Unavailable",
        "No Raft leader reachable, or the write's outcome is unknown, or the node reads "
        "[api] max_body_reads bodies already; retry later. Never hangs past the request "
        "timeout (5 s by default).",
    ),
    "507": (
        "InsufficientStorage",
        "storage_low: free disk space is below [storage] min_free on this node or on a "
        "majority of the nodes. Writes that add data are refused before they enter the log "
        "(cancel, pause, delete, retention, dispatch and queue consumers go on); retry later.",
    ),
}
RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer", "minimum": 0},
    }
}


def responses() -> dict[str, Schema]:
    out = {}
    for status, (name, description) in ERRORS.items():
        response: Schema = {
            "description": description,
            "content": {"application/json": {"schema": ref("Failure")}},
        }
        if status in ("429", "503", "507"):
            response["headers"] = RETRY_AFTER
        out[name] = response
    return out


def ok(status: str, schema: str | None, description: str, **extra: Any) -> dict[str, Schema]:
    answer: Schema = {"description": description}
    if schema is not None:
        answer["content"] = {"application/json": {"schema": ref(schema)}}
    return {status: answer | extra}


def errors(*statuses: int) -> dict[str, Schema]:
    return {
        str(s): {"$ref": f"#/components/responses/{ERRORS[str(s)][0]}"} for s in sorted(statuses)
    }


# --------------------------------------------------------------------------- operations

TENANT: list[Schema] = [{"tenantToken": []}, {"adminToken": []}]
ADMIN: list[Schema] = [{"adminToken": []}]
TENANT_ERRORS = (400, 401, 403, 404, 503)  # X-Tenant alone can give 400 and 404
ADMIN_ERRORS = (401, 403, 503)


def param(name: str) -> Schema:
    return {"$ref": f"#/components/parameters/{name}"}


def operation(
    op_id: str,
    tag: str,
    summary: str,
    answers: dict[str, Schema],
    *,
    security: list[Schema],
    params: tuple[str, ...] | list[str] = (),
    body: str | None = None,
    description: str | None = None,
) -> Schema:
    op: Schema = {"operationId": op_id, "tags": [tag], "summary": summary}
    if description:
        op["description"] = description
    op["security"] = security
    if security == TENANT:
        params = [*params, "XTenant"]
    if params:
        op["parameters"] = [param(p) for p in params]
    if body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": ref(body)}},
        }
        answers = answers | errors(408, 503)  # a slow body; too many bodies read at once
    op["responses"] = answers
    return op


def tenant_op(
    op_id: str, tag: str, summary: str, answers: dict[str, Schema], *more: int, **kwargs: Any
) -> Schema:
    return operation(
        op_id, tag, summary, answers | errors(*TENANT_ERRORS, *more), security=TENANT, **kwargs
    )


def admin_op(
    op_id: str,
    summary: str,
    answers: dict[str, Schema],
    *more: int,
    tag: str = "tenants",
    **kwargs: Any,
) -> Schema:
    return operation(
        op_id, tag, summary, answers | errors(*ADMIN_ERRORS, *more), security=ADMIN, **kwargs
    )


JOB_LINKS = {
    "GetJob": {"operationId": "getJob", "parameters": {"job_id": "$response.body#/job_id"}},
    "UpdateJob": {"operationId": "updateJob", "parameters": {"job_id": "$response.body#/job_id"}},
    "PauseJob": {"operationId": "pauseJob", "parameters": {"job_id": "$response.body#/job_id"}},
    "ResumeJob": {"operationId": "resumeJob", "parameters": {"job_id": "$response.body#/job_id"}},
    "TriggerJob": {
        "operationId": "triggerJob",
        "parameters": {"job_id": "$response.body#/job_id"},
    },
    "ListRuns": {"operationId": "listRuns", "parameters": {"job_id": "$response.body#/job_id"}},
    "CancelJob": {"operationId": "cancelJob", "parameters": {"job_id": "$response.body#/job_id"}},
}


def job_filter_parameters() -> dict[str, Schema]:
    """The filters of GET /v1/jobs (api/job_filters.py)."""

    def query(name: str, schema: Schema, description: str) -> Schema:
        return {
            "name": name,
            "in": "query",
            "required": False,
            "schema": schema,
            "description": description,
        }

    return {
        "JobTargetType": query(
            "target_type", {"enum": list(TARGET_TYPES)}, "Only jobs with this target type."
        ),
        "JobQueue": query(
            "queue",
            {"type": "string", "pattern": QUEUE_NAME},
            "Only jobs delivering to this built-in queue (exact name).",
        ),
        "JobHost": query(
            "host",
            {"type": "string", "minLength": 1, "maxLength": job_filters.MAX_HOST_CHARS},
            "Only jobs with an http target whose URL's host is this one, compared without "
            "case; no port (an IPv6 address with or without brackets).",
        ),
        "JobName": query(
            "name",
            {"type": "string", "minLength": 1, "maxLength": job_filters.MAX_NAME_CHARS},
            "Only jobs whose name contains this text, compared without case.",
        ),
        "JobNextRunAfter": query(
            "next_run_after",
            ref("InstantInput"),
            "Only jobs whose next_run_at is at or after this instant (a job without a next "
            "run never matches).",
        ),
        "JobNextRunBefore": query(
            "next_run_before",
            ref("InstantInput"),
            "Only jobs whose next_run_at is before this instant, which must be later than "
            "next_run_after (a job without a next run never matches).",
        ),
        "AuditJobId": query(
            "job_id",
            {"type": "string", "pattern": rf"^[\x21-\x7e]{{1,{MAX_JOB_ID_CHARS}}}$"},
            "Only this job's records (another tenant's job has none for a tenant token).",
        ),
    }


JOB_FILTERS = [
    "JobTargetType",
    "JobQueue",
    "JobHost",
    "JobName",
    "JobNextRunAfter",
    "JobNextRunBefore",
]


def job_paths() -> dict[str, Schema]:
    job = ["JobId"]
    return {
        "/v1/jobs": {
            "post": tenant_op(
                "createJob",
                "jobs",
                "Create a job",
                ok(
                    "201",
                    "JobView",
                    "The job (or, for a replayed Idempotency-Key, the first one as it is now).",
                    links=JOB_LINKS,
                ),
                413,
                422,
                429,
                507,
                params=["IdempotencyKey"],
                body="JobCreate",
                description="A run_at in the past runs at once; one more than 10 years ahead "
                "is 400.",
            ),
            "get": tenant_op(
                "listJobs",
                "jobs",
                "List the tenant's jobs (job_id order)",
                ok("200", "JobList", "A page of jobs."),
                params=["JobStatus", *JOB_FILTERS, "Cursor", "Limit"],
                description="Every filter given must match. With any filter but status, a "
                "request examines at most 10,000 jobs after the cursor: a filtered page may hold "
                "fewer than limit jobs (even none); follow next_cursor until it is null.",
            ),
        },
        "/v1/jobs:batch": {
            "post": tenant_op(
                "createJobsBatch",
                "jobs",
                "Create up to 1,000 jobs",
                ok(
                    "200",
                    "BatchResults",
                    "One result per item, in order: the valid items "
                    "are created even if others fail.",
                ),
                413,
                507,
                body="BatchCreate",
            ),
        },
        "/v1/jobs/{job_id}": {
            "get": tenant_op(
                "getJob", "jobs", "Get a job", ok("200", "JobView", "The job."), params=job
            ),
            "patch": tenant_op(
                "updateJob",
                "jobs",
                "Change a job",
                ok("200", "JobView", "The job as changed."),
                409,
                413,
                422,
                507,
                params=job,
                body="JobPatch",
            ),
            "delete": tenant_op(
                "cancelJob",
                "jobs",
                "Cancel a job's future runs",
                ok("204", None, "Cancelled (again: still 204)."),
                params=job,
            ),
        },
        "/v1/jobs/{job_id}/pause": {
            "post": tenant_op(
                "pauseJob", "jobs", "Pause a job", ok("200", "JobView", "The job."), 409, params=job
            ),
        },
        "/v1/jobs/{job_id}/resume": {
            "post": tenant_op(
                "resumeJob",
                "jobs",
                "Resume a paused job",
                ok("200", "JobView", "The job, with its next run from now."),
                409,
                507,
                params=job,
            ),
        },
        "/v1/jobs/{job_id}/trigger": {
            "post": tenant_op(
                "triggerJob",
                "jobs",
                "Add one extra run now",
                ok("202", "Triggered", "The extra run is due now."),
                409,
                507,
                params=job,
            ),
        },
        "/v1/jobs/{job_id}/runs": {
            "get": tenant_op(
                "listRuns",
                "jobs",
                "A job's runs, newest first",
                ok("200", "RunList", "A page of runs."),
                params=[*job, "Cursor", "Limit"],
            ),
        },
        "/v1/schedules:preview": {
            "post": operation(
                "previewSchedule",
                "jobs",
                "The next runs of a schedule",
                ok("200", "PreviewResult", "Up to count instants after `after` (default now).")
                | errors(400, 401, 404, 413, 503),
                security=TENANT,
                body="PreviewRequest",
                description="Any valid token (the admin needs no X-Tenant); the same engine "
                "as dispatch.",
            ),
        },
    }


def queue_paths() -> dict[str, Schema]:
    name = ["QueueName"]

    def settle(op_id: str, summary: str, body: str, answer: str) -> Schema:
        return tenant_op(
            op_id,
            "queues",
            summary,
            ok("200", answer, "How many receipts matched a message still held."),
            413,
            params=name,
            body=body,
        )

    return {
        "/v1/queues": {
            "get": tenant_op(
                "listQueues",
                "queues",
                "The tenant's queues and their counts",
                ok(
                    "200",
                    "QueueList",
                    "Every queue with messages or dead letters, or a consumer in the last "
                    "5 minutes.",
                ),
            ),
        },
        "/v1/queues/consumers/local": {
            "get": admin_op(
                "listLocalConsumers",
                "The consumers this node alone saw receiving (what GET /v1/queues asks peers)",
                ok("200", "LocalConsumers", "This node's memory of the X-Tenant tenant."),
                400,
                404,
                tag="queues",
                params=["XTenant"],
            ),
        },
        "/v1/queues/{name}/receive": {
            "post": tenant_op(
                "receiveMessages",
                "queues",
                "Receive messages (long poll)",
                ok(
                    "200",
                    "Messages",
                    "Up to max messages, hidden for visibility_timeout; "
                    "empty when none came within wait.",
                ),
                413,
                429,
                params=name,
                body="ReceiveRequest",
            ),
        },
        "/v1/queues/{name}/ack": {
            "post": settle(
                "ackMessages", "Acknowledge messages: their runs succeeded", "AckRequest", "Acked"
            ),
        },
        "/v1/queues/{name}/nack": {
            "post": settle(
                "nackMessages",
                "Fail messages: retried per the job's policy, then dead",
                "NackRequest",
                "Nacked",
            ),
        },
        "/v1/queues/{name}/extend": {
            "post": settle(
                "extendMessages", "Extend messages' visibility timeout", "ExtendRequest", "Extended"
            ),
        },
    }


def deadletter_paths() -> dict[str, Schema]:
    dl = ["DeadLetterId"]
    return {
        "/v1/deadletters": {
            "get": tenant_op(
                "listDeadLetters",
                "deadletters",
                "List dead letters",
                ok("200", "DeadLetterList", "A page of dead letters."),
                params=["Cursor", "Limit"],
            ),
        },
        "/v1/deadletters/{id}": {
            "get": tenant_op(
                "getDeadLetter",
                "deadletters",
                "Get a dead letter",
                ok("200", "DeadLetterView", "The dead letter."),
                params=dl,
            ),
            "delete": tenant_op(
                "deleteDeadLetter",
                "deadletters",
                "Delete a dead letter",
                ok("204", None, "Deleted."),
                params=dl,
            ),
        },
        "/v1/deadletters:redrive": {
            "post": tenant_op(
                "redriveDeadLetters",
                "deadletters",
                f"Give up to {deadletters.MAX_REDRIVE} dead runs one more attempt each",
                ok(
                    "200",
                    "RedriveResults",
                    "One result per id, in order: an unknown id (or another tenant's) answers "
                    "deadletter_not_found in its place, the others are redriven.",
                ),
                413,
                507,
                body="RedriveBatch",
                description="One redrive_deadletter command per id, not atomic. Once the "
                "cluster refuses one, the ids not yet sent answer cluster_unavailable or "
                "storage_low; when none was redriven, the whole request answers 503 or 507.",
            ),
        },
        "/v1/deadletters/{id}/redrive": {
            "post": tenant_op(
                "redriveDeadLetter",
                "deadletters",
                "Give a dead run one more attempt",
                ok("202", "RedriveQueued", "One new attempt is queued."),
                507,
                params=dl,
            ),
        },
    }


def connection_paths() -> dict[str, Schema]:
    name = ["ConnectionName"]
    return {
        "/v1/connections": {
            "get": tenant_op(
                "listConnections",
                "connections",
                "List the tenant's broker connections",
                ok("200", "ConnectionList", "Every connection, by name (never a URL)."),
            ),
            "post": tenant_op(
                "createConnection",
                "connections",
                "Create a named broker connection",
                ok("201", "ConnectionView", "Created; the URL is never shown again."),
                409,
                413,
                422,
                429,
                507,
                body="ConnectionInput",
                description="409 connection_exists when the name is taken; 429 past "
                "100 connections; 422 when the SSRF guard refuses an address of the host or "
                "the host does not resolve.",
            ),
        },
        "/v1/connections/{name}": {
            "get": tenant_op(
                "getConnection",
                "connections",
                "Get a connection",
                ok("200", "ConnectionView", "The connection (never its URL)."),
                params=name,
            ),
            "delete": tenant_op(
                "deleteConnection",
                "connections",
                "Delete a connection",
                ok("204", None, "Deleted."),
                409,
                params=name,
                description="409 connection_in_use while a live (active or paused) job "
                "names it; cancel those jobs or change their targets first.",
            ),
        },
        "/v1/connections/{name}/test": {
            "post": tenant_op(
                "testConnection",
                "connections",
                "Connect to the broker as a deliverer would",
                ok("200", "ConnectionTest", "Whether it connected; a detail without secrets."),
                params=name,
                description="503 no_broker_probe on a node without one.",
            ),
        },
    }


def retention_paths() -> dict[str, Schema]:
    return {
        "/v1/retention": {
            "get": tenant_op(
                "getRetention",
                "retention",
                "The tenant's retention: effective, its own, the node's",
                ok("200", "TenantRetention", "How long the tenant's finished data is kept."),
            ),
            "put": tenant_op(
                "setRetention",
                "retention",
                "Replace the tenant's own (shorter) retention",
                ok("200", "TenantRetention", "The tenant's retention as changed."),
                413,
                body="RetentionUpdate",
                description="Replaces the tenant's own values: kinds it does not name follow "
                "the node's [retention] again. A value can only shorten the node's: a longer "
                "one is stored but has no effect. The leader's pruner deletes what is past the "
                "cutoffs in paced passes (a pass starts every few seconds).",
            ),
        },
    }


def admin_paths() -> dict[str, Schema]:
    tid = ["TenantId"]
    tenant_links = {
        "GetTenant": {
            "operationId": "getTenant",
            "parameters": {"tenant_id": "$response.body#/tenant_id"},
        },
    }
    return {
        "/v1/tenants": {
            "post": admin_op(
                "createTenant",
                "Create a tenant",
                ok("201", "TenantCredentials", "The new tenant's credentials.", links=tenant_links),
                400,
                409,
                413,
                422,
                507,
                body="TenantCreate",
            ),
            "get": admin_op(
                "listTenants",
                "List tenants (tenant_id order)",
                ok("200", "TenantList", "A page of tenants."),
                400,
                params=["Cursor", "Limit"],
            ),
        },
        "/v1/tenants/{tenant_id}": {
            "get": admin_op(
                "getTenant", "Get a tenant", ok("200", "TenantView", "The tenant."), 404, params=tid
            ),
            "patch": admin_op(
                "updateTenant",
                "Change a tenant's settings",
                ok("200", "TenantView", "The tenant as changed."),
                400,
                404,
                409,
                413,
                422,
                507,
                params=tid,
                body="TenantPatch",
            ),
        },
        "/v1/tenants/{tenant_id}/rotate": {
            "post": admin_op(
                "rotateTenant",
                "New token and signing secret",
                ok(
                    "200",
                    "TenantCredentials",
                    "The new credentials; the old token stops "
                    "working, the old secret keeps signing beside the new one for the overlap.",
                ),
                404,
                params=tid,
            ),
        },
        "/v1/cluster": {
            "get": admin_op(
                "getCluster",
                "The cluster's nodes as this node sees them",
                ok("200", "Cluster", "Leader and nodes."),
                tag="cluster",
            ),
        },
        "/v1/cluster/nodes": {
            "post": admin_op(
                "addNode",
                "Add a node to the Raft group (one change at a time)",
                ok("200", "NodeAdded", "Committed: the node is a member and catches up."),
                400,
                409,
                tag="cluster",
                body="NodeToAdd",
            ),
        },
        "/v1/cluster/nodes/{node}": {
            "delete": admin_op(
                "removeNode",
                "Remove a member (not this node, not the leader: step it down first)",
                ok("200", "NodeRemoved", "Committed: the node is no longer a member."),
                404,
                409,
                tag="cluster",
                params=["NodeName"],
            ),
        },
        "/v1/cluster/leader/step-down": {
            "post": admin_op(
                "stepDown",
                "Sent to the leader: hand leadership to a caught-up follower",
                ok("200", "SteppedDown", "Another node leads (its Raft address)."),
                409,
                tag="cluster",
            ),
        },
        "/v1/admin/state": {
            "get": admin_op(
                "getAdminState",
                "This node's Raft state and state digest",
                ok("200", "AdminState", "Equal digests at equal applied_index on every replica."),
                tag="cluster",
            ),
        },
        "/v1/stats": {
            "get": admin_op(
                "getStats",
                "This node's last 15 minutes in 5-second samples, and its Raft state now",
                ok(
                    "200",
                    "StatsAnswer",
                    "Claims/s, first deliveries/s by target kind, claim lag p50/p99 and the "
                    "due backlog, from this node's own metrics (the web console's overview); "
                    "with scope=cluster, every node's, asked by this one.",
                ),
                400,
                tag="cluster",
            )
            | {
                "parameters": [
                    {
                        "name": "scope",
                        "in": "query",
                        "required": False,
                        "schema": {"enum": ["node", "cluster"], "default": "node"},
                        "description": "node: this node's Stats; cluster: ClusterStats.",
                    }
                ]
            },
        },
        "/v1/admin/retention": {
            "get": admin_op(
                "getRetentionStatus",
                "What this node keeps: rows and the oldest per kind, file sizes, free disk",
                ok(
                    "200",
                    "RetentionStatus",
                    "This node's [retention], its store per kind, its data files and disk, "
                    "and whether writes are accepted.",
                ),
                tag="cluster",
            ),
        },
        "/v1/audit": {
            "get": operation(
                "listAudit",
                "cluster",
                "Audit records (sequence order)",
                ok("200", "AuditList", "A page of audit records.") | errors(400, 401, 404, 503),
                security=TENANT,
                params=["AuditJobId", "Cursor", "Limit"],
                description="The admin sees every tenant's records (or one tenant's with "
                "X-Tenant); a tenant sees its own. With job_id, only that job's.",
            ),
        },
    }


def node_paths() -> dict[str, Schema]:
    text = {"text/plain": {"schema": {"type": "string"}}}
    unavailable = {
        "description": "Not ready: no leader, still catching up, or its clock disagrees "
        "with its peers' (it dispatches nothing meanwhile).",
        "headers": RETRY_AFTER,
        "content": {"application/json": {"schema": ref("Readiness")}},
    }
    return {
        "/healthz": {
            "get": operation(
                "healthz", "node", "The process is up", ok("200", "Health", "Up."), security=[]
            ),
        },
        "/readyz": {
            "get": operation(
                "readyz",
                "node",
                "Has a leader and has caught up",
                ok("200", "Readiness", "Ready.") | {"503": unavailable},
                security=[],
            ),
        },
        "/metrics": {
            "get": operation(
                "metrics",
                "node",
                "Prometheus metrics (text format)",
                {"200": {"description": "docs/metrics.md lists them.", "content": text}}
                | errors(401, 404),
                security=ADMIN,
                description="The admin token or the `[metrics] token`; never a tenant's. "
                "404 when `[metrics] listen` serves it on its own address instead.",
            ),
        },
        "/ui": {
            "get": operation(
                "consoleRedirect",
                "node",
                "The web console: redirects to /ui/",
                {"308": {"description": "Location: /ui/."}},
                security=[],
            ),
        },
        "/ui/{path}": {
            "get": operation(
                "consoleFile",
                "node",
                "The web console's static files (docs/console.md)",
                {
                    "200": {
                        "description": "A shipped file (the empty path is index.html).",
                        "content": {
                            kind: {"schema": {"type": "string"}}
                            for kind in ("text/html", "text/javascript", "text/css")
                        },
                    },
                    "304": {"description": "Unchanged since the ETag sent in If-None-Match."},
                    "404": {"description": "No such file.", "content": text},
                },
                security=[],
                params=["ConsoleFile"],
                description="No token: the pages call this API with the user's token. Every "
                "answer carries a strict Content-Security-Policy, X-Frame-Options: DENY and "
                "X-Content-Type-Options: nosniff.",
            ),
        },
        "/v1/openapi.json": {
            "get": operation(
                "getOpenApi",
                "node",
                "This document",
                {
                    "200": {
                        "description": "OpenAPI 3.1.",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
                security=[],
            ),
        },
    }


# --------------------------------------------------------------------------- the document

DESCRIPTION = """\
The HTTP API of a schedd node (any node of the cluster answers; writes go through the Raft
leader). JSON everywhere, UTF-8; instants are RFC 3339, answered in UTC with a `Z`.

**Auth**: `Authorization: Bearer <token>`. The admin token (node config) manages tenants and
reads cluster state; on tenant routes it must name a tenant with `X-Tenant: <tenant_id>`. A
tenant token (returned once by `POST /v1/tenants`) sees only its own jobs, runs, queues and dead
letters: another tenant's id answers 404, exactly like an id that does not exist.

**Errors**: every error is `{"error": {"code": "<snake_case>", "message": "..."}}`; a failed
request changes nothing. 429, 503 and 507 carry `Retry-After`.

**Paging**: list routes take `limit` (1-1000, default 100) and `cursor`, and answer
`next_cursor` (null on the last page).
"""


def document() -> Schema:
    schemas: dict[str, Schema] = {}
    for part in (
        basic_schemas,
        job_schemas,
        preview_schemas,
        request_schemas,
        answer_schemas,
    ):
        schemas |= part()
    params = (
        parameters()
        | job_filter_parameters()
        | {
            "JobStatus": {
                "name": "status",
                "in": "query",
                "required": False,
                "schema": {"enum": values(JobStatus)},
            }
        }
    )
    paths: dict[str, Schema] = {}
    for group in (
        job_paths,
        queue_paths,
        deadletter_paths,
        connection_paths,
        retention_paths,
        admin_paths,
        node_paths,
    ):
        paths |= group()
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "schedd",
            "version": __version__,
            "description": DESCRIPTION,
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": [
            {"name": "jobs", "description": "Jobs, their runs, schedule preview."},
            {"name": "queues", "description": "The built-in queue (target type queue)."},
            {"name": "deadletters", "description": "Runs whose last attempt failed."},
            {"name": "connections", "description": "A tenant's broker connections."},
            {"name": "retention", "description": "How long a tenant's finished data is kept."},
            {"name": "tenants", "description": "Tenants (admin token)."},
            {"name": "cluster", "description": "Cluster state (admin token) and audit."},
            {"name": "node", "description": "Health, readiness, metrics, this document."},
        ],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "parameters": params,
            "responses": responses(),
            "securitySchemes": {
                "adminToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The node's admin token ([auth] admin_token).",
                },
                "tenantToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A tenant token from POST /v1/tenants or its rotate.",
                },
            },
        },
    }


def rendered() -> str:
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = rendered()
    if "--check" in argv:
        stale = [p for p in OUTPUTS if not p.exists() or p.read_text() != text]
        for path in stale:
            sys.stderr.write(f"{path.relative_to(ROOT)} is stale: run tools/gen_openapi.py\n")
        return 1 if stale else 0
    for path in OUTPUTS:
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
