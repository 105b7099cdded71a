"""One route of the API and what the OpenAPI document says of it: method, path, handler,
who may call it, its parameters, its request body and answers (msgspec structs), its errors.

The app registers handlers from these entries (api/operations/) and tools/gen_openapi.py
documents the same entries, so the served routes and the document cannot drift."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from schedd.api.http import Handler

JSON = "application/json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Parameter:
    """A query, path or header parameter; `kind` is a type msgspec describes (its schema)."""

    component: str  # its name under components/parameters
    name: str
    where: str  # "query", "path" or "header"
    kind: Any
    description: str | None = None

    @property
    def is_required(self) -> bool:
        return self.where == "path"


@dataclass(frozen=True, slots=True, kw_only=True)
class Access:
    """Who may call a route: its security schemes (none: no token), the error statuses any
    call can get, and the parameters every such route takes (X-Tenant)."""

    schemes: tuple[str, ...]
    errors: tuple[int, ...]
    parameters: tuple[Parameter, ...] = ()


@dataclass(frozen=True, slots=True)
class Answer:
    """One status of a route: its description and body. `body` is a struct (JSON), a tuple of
    structs (any of them), or a raw schema per media type (text, a file); None: no body."""

    description: str
    body: type | tuple[type, ...] | Mapping[str, Any] | None = None
    links: Mapping[str, Any] | None = None
    headers: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """A route: served by `handler` (None: served beside the API, by the console)."""

    method: str
    path: str
    handler: Handler | None
    # The path as aiohttp matches it, when it differs from OpenAPI's (a parameter with slashes).
    route: str | None = None
    operation_id: str
    tag: str
    summary: str
    description: str | None = None
    access: Access
    parameters: tuple[Parameter, ...] = ()
    # The request body's struct (or an Annotated one, with examples), or the name of a schema
    # tools/gen_openapi.py writes (the batch and preview bodies, until they are structs).
    body: Any = None
    body_required: bool = True  # False: the body may be left out (its fields are optional)
    answers: Mapping[int, Answer]
    errors: tuple[int, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # further OpenAPI operation keys


def register(app: web.Application, operations: tuple[Operation, ...]) -> None:
    """Serve every operation that has a handler (a GET also answers HEAD, as aiohttp's)."""
    for op in operations:
        if op.handler is not None:
            getattr(app.router, f"add_{op.method.lower()}")(op.route or op.path, op.handler)


RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer", "minimum": 0},
    }
}
