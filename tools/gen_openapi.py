"""Build schedd's OpenAPI 3.1 document: schedd/api/openapi.json (served) and docs/openapi.json.

The paths are the API's route table (schedd/api/operations: the routes the app registers) and
the schemas come from msgspec structs (msgspec.json.schema_components), but for DurationText,
JobPatch (JobCreate's fields, none required) and PreviewRequest (written here: a preview
without a schedule answers invalid_schedule, from schedule.parse_schedule), so a changed route,
limit or field shows up as a stale document. Run
`.venv/bin/python tools/gen_openapi.py` after changing one; `--check` exits 1 when the checked-in
files differ (tests/integration/test_openapi.py checks the same).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from schedd import __version__
from schedd.api import schedules
from schedd.api.operation import JSON, RETRY_AFTER, Answer, Operation, Parameter
from schedd.api.operations import OPERATIONS
from schedd.bodies import DURATION_TEXT, Checked
from schedd.targetspec import TargetUnion
from schedd.wire import fields
from schedd.wire.errors import Failure
from schedd.wire.schedules import SCHEDULE_INPUT

ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = (ROOT / "schedd" / "api" / "openapi.json", ROOT / "docs" / "openapi.json")
Schema = dict[str, Any]
SchemaOf = Callable[[Any], Schema]

# --------------------------------------------------------------------------- small builders


def ref(name: str) -> Schema:
    return {"$ref": fields.SCHEMAS + name}


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


def struct_schemas(kinds: list[Any]) -> tuple[SchemaOf, dict[str, Schema]]:
    """The schemas of `kinds` (structs, annotated types) and the components they name: a
    struct's component is named as the struct. What a field's own type cannot say (a duration's
    text: bodies.Checked) comes from `_checked_schema`."""
    while True:  # a struct's annotations are read here: they name more by reference (fields.ref)
        schemas, components = msgspec.json.schema_components(
            kinds, schema_hook=_checked_schema, ref_template=fields.SCHEMAS + "{name}"
        )
        named = [kind for kind in fields.REFERENCED if kind not in kinds]
        if not named:
            break
        kinds = [*kinds, *named]
    by_kind = {id(kind): _tidied(schema) for kind, schema in zip(kinds, schemas, strict=True)}
    return (lambda kind: by_kind[id(kind)]), {k: _tidied(v) for k, v in components.items()}


def _checked_schema(kind: type) -> Schema:
    """The schema of a field type msgspec cannot check itself (bodies.Checked): its own."""
    if isinstance(kind, type) and issubclass(kind, Checked):
        return kind.json_schema()
    raise NotImplementedError(f"no schema for {kind!r}")


def _tidied(schema: Schema) -> Schema:
    """Without msgspec's title (the component's name says it) and empty `required`; the
    docstring's line breaks joined."""
    tidied = {k: v for k, v in schema.items() if k != "title" and (k != "required" or v)}
    if "description" in tidied:
        tidied["description"] = " ".join(tidied["description"].split())
    return tidied


# --------------------------------------------------------------------------- shared schemas

# Components that are a union of structs rather than one struct: the schema of each is msgspec's.
UNIONS: dict[str, Any] = {
    "TargetInput": TargetUnion,
}


def input_schemas() -> dict[str, Schema]:
    """The field types the body structs refer to by name (a duration's text is two patterns:
    no one msgspec type)."""
    return {
        "InstantInput": _tidied(msgspec.json.schema(fields.InstantInput)),
        "DurationText": dict(DURATION_TEXT),
        "Payload": _tidied(msgspec.json.schema(fields.Payload)),
    }


# --------------------------------------------------------------------------- job bodies


def job_schemas(create: Schema, target: Schema) -> dict[str, Schema]:
    """The job bodies' own parts, and the PATCH body as JobCreate's fields."""
    fields = create["properties"]
    patched = fields | {"name": fields["name"] | {"description": "null clears the name."}}
    return {
        "ScheduleInput": SCHEDULE_INPUT,
        "TargetInput": target,
        "JobPatch": closed(
            patched,
            [],
            description="Only the fields given change; a new schedule or window recomputes "
            "next_run_at. The result is validated as a whole.",
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
                "current": {
                    **nullable(ref("ScheduleInput")),
                    "description": "The schedule an edit would replace (a job's, as stored): "
                    "its runs are answered as current_runs and current_occurrences, beside "
                    "the new ones.",
                },
            },
            ["schedule"],
        ),
    }


# --------------------------------------------------------------------------- error answers

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


# --------------------------------------------------------------------------- the route table


def operation(op: Operation, schema_of: SchemaOf) -> Schema:
    """The OpenAPI operation of a route of the table."""
    out: Schema = {"operationId": op.operation_id, "tags": [op.tag], "summary": op.summary}
    if op.description:
        out["description"] = op.description
    out["security"] = [{scheme: []} for scheme in op.access.schemes]
    parameters = (*op.parameters, *op.access.parameters)
    if parameters:
        out["parameters"] = [{"$ref": f"#/components/parameters/{p.component}"} for p in parameters]
    statuses = {*op.access.errors, *op.errors}
    if op.body is not None:
        body = ref(op.body) if isinstance(op.body, str) else schema_of(op.body)
        out["requestBody"] = {"required": op.body_required, "content": {JSON: {"schema": body}}}
        statuses |= {408, 503}  # a slow body; too many bodies read at once
    answers = {str(status): answer(a, schema_of) for status, a in op.answers.items()}
    out["responses"] = answers | {
        str(s): {"$ref": f"#/components/responses/{ERRORS[str(s)][0]}"} for s in sorted(statuses)
    }
    return out | dict(op.extra)


def answer(given: Answer, schema_of: SchemaOf) -> Schema:
    out: Schema = {"description": given.description}
    if given.headers:
        out["headers"] = dict(given.headers)
    body = given.body
    if isinstance(body, tuple):
        out["content"] = {JSON: {"schema": {"anyOf": [schema_of(kind) for kind in body]}}}
    elif isinstance(body, type):
        out["content"] = {JSON: {"schema": schema_of(body)}}
    elif body is not None:
        out["content"] = {media: {"schema": schema} for media, schema in body.items()}
    if given.links:
        out["links"] = dict(given.links)
    return out


def parameter(given: Parameter, schema_of: SchemaOf) -> Schema:
    out: Schema = {"name": given.name, "in": given.where, "required": given.is_required}
    out["schema"] = schema_of(given.kind)
    if given.description:
        out["description"] = given.description
    return out


def table_types() -> list[Any]:
    """Every struct and parameter type the route table names, Failure (errors) first."""
    kinds: list[Any] = [Failure, *UNIONS.values()]
    for op in OPERATIONS:
        bodies = [a.body for a in op.answers.values()]
        answers = [k for b in bodies for k in (b if isinstance(b, tuple) else (b,))]
        named = [op.body, *answers, *(p.kind for p in (*op.parameters, *op.access.parameters))]
        kinds += [k for k in named if k is not None and not isinstance(k, str | dict)]
    return list({id(kind): kind for kind in kinds}.values())


def route_table() -> tuple[Schema, Schema, Schema]:
    """The document's paths, and the schema and parameter components they name."""
    schema_of, components = struct_schemas(table_types())
    components |= {name: schema_of(kind) for name, kind in UNIONS.items()}
    paths: dict[str, Schema] = {}
    parameters: dict[str, Schema] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = operation(op, schema_of)
        for p in (*op.parameters, *op.access.parameters):
            parameters[p.component] = parameter(p, schema_of)
    return paths, components, parameters


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
    paths, schemas, parameters = route_table()
    jobs = job_schemas(schemas["JobCreate"], schemas.pop("TargetInput"))
    schemas = input_schemas() | jobs | preview_schemas() | schemas
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
            {"name": "calendars", "description": "A tenant's calendars of dates schedules skip."},
            {"name": "retention", "description": "How long a tenant's finished data is kept."},
            {"name": "tenants", "description": "Tenants (admin token)."},
            {"name": "cluster", "description": "Cluster state (admin token) and audit."},
            {"name": "node", "description": "Health, readiness, metrics, this document."},
        ],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "parameters": parameters,
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
