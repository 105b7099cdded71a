"""Serve the console's static files at /ui/ (and redirect /ui there), every response with the
console's security headers. Only the files shipped in static/ exist: they are read once into
memory by name, so no request path can reach anything else (no listing, no traversal)."""

from __future__ import annotations

import hashlib
import json
import mimetypes
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from aiohttp import web

from schedd.targets import TARGET_TYPES

PREFIX = "/ui"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# No file name carries a version (no build step), so browsers revalidate every file: a 304 costs
# a round trip but an upgraded node never runs yesterday's modules against today's API.
CACHE_CONTROL = "no-cache"
_TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".html": "text/html",
    ".svg": "image/svg+xml",
}
_MAX_FILES = 200  # the package ships a few dozen; more means something is wrong

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
routes = web.RouteTableDef()


@dataclass(frozen=True, slots=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str


@cache
def shipped() -> dict[str, StaticFile]:
    """Every file under static/, by its path relative to it ("index.html", "pages/jobs.js"),
    and the modules made from the code (`generated`)."""
    files: dict[str, StaticFile] = {}
    _walk(resources.files(__package__ or "schedd.console") / "static", "", files)
    for name, text in generated().items():
        body = text.encode()
        files[name] = StaticFile(body, _content_type(name), _etag(body))
    return files


def generated() -> dict[str, str]:
    """The console's modules written from the code, not shipped: the target kinds from the
    registry (schedd.targets), so a new kind appears in the jobs filter without an edit here."""
    kinds = json.dumps(list(TARGET_TYPES))
    return {
        "kinds.js": f"// Made by schedd/console/serve.py.\nexport const TARGET_TYPES = {kinds};\n"
    }


def _walk(folder: Traversable, prefix: str, files: dict[str, StaticFile]) -> None:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        name = prefix + entry.name
        if entry.is_dir():
            _walk(entry, name + "/", files)
        elif not entry.name.startswith(".") and len(files) < _MAX_FILES:
            body = entry.read_bytes()
            files[name] = StaticFile(body, _content_type(name), _etag(body))


def _content_type(name: str) -> str:
    suffix = name[name.rfind(".") :] if "." in name else ""
    return _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


@routes.get(PREFIX)
async def bare(request: web.Request) -> web.Response:
    return web.Response(status=308, headers={"Location": PREFIX + "/"})


@routes.get(PREFIX + "/{path:.*}")
async def static(request: web.Request) -> web.Response:
    """One shipped file; the console's pages are hash routes, so /ui/ is index.html."""
    name = request.match_info["path"] or "index.html"
    found = shipped().get(name)
    if found is None:
        return web.Response(status=404, text="not found\n", content_type="text/plain")
    headers = {"ETag": found.etag, "Cache-Control": CACHE_CONTROL}
    if found.etag in _etags(request.headers.get("If-None-Match", "")):
        return web.Response(status=304, headers=headers)
    return web.Response(
        body=found.body, content_type=found.content_type, charset="utf-8", headers=headers
    )


def _etags(header: str) -> set[str]:
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}


def is_console(request: web.Request) -> bool:
    """Whether the router matched this request to a console route (its template, not the raw
    path: an API route is never let through by a path that merely starts with /ui)."""
    return request.match_info.handler in (bare, static)


def _is_console_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


@web.middleware
async def headers_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Put the security headers on every answer under /ui, errors and 405s included."""
    if not _is_console_path(request.path):
        return await handler(request)
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers.update(SECURITY_HEADERS)
        raise
    response.headers.update(SECURITY_HEADERS)
    return response
