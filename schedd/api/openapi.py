"""GET /v1/openapi.json: the API's OpenAPI 3.1 document, shipped as package data.

The document is built by tools/gen_openapi.py and checked in; this module only serves it.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from aiohttp import web

PATH = "/v1/openapi.json"


@cache
def document_bytes() -> bytes:
    """The document as shipped beside this module (read once)."""
    return resources.files("schedd.api").joinpath("openapi.json").read_bytes()


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=document_bytes(), content_type="application/json")
