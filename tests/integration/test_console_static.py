"""The console's static files at /ui/ in process: served without a token, every answer with the
security headers, revalidated by ETag, and nothing outside the shipped files reachable."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer

from schedd.api.app import build_app
from schedd.api.context import ApiContext, Proposing, RaftStatus
from schedd.console.serve import CSP, shipped
from schedd.node import console_beside
from schedd.store.db import Database, ReadPool

ADMIN = "adm_local_token_0123456789"
Scenario = Callable[[TestClient[Any, Any]], Awaitable[None]]


def serve(tmp_path: Path, scenario: Scenario, raft: object = None) -> None:
    """Run `scenario` against the API of a node over an empty store (no Raft: `raft` answers
    the status routes ask for)."""
    db = Database(tmp_path / "state.db")

    async def main() -> None:
        reads = ReadPool(db.path)
        ctx = ApiContext(
            node_id="n1",
            proposer=cast(Proposing, None),
            reads=reads,
            raft=cast(RaftStatus, raft),
            admin_token=ADMIN,
            partitions=16,
            payload_limit=65536,
        )
        try:
            async with TestClient(TestServer(build_app(ctx, beside=[console_beside()]))) as client:
                await scenario(client)
        finally:
            reads.close()

    asyncio.run(main())


def assert_secured(headers: Any) -> None:
    assert headers["Content-Security-Policy"] == CSP
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_index_and_modules_load_without_a_token_with_the_security_headers(
    tmp_path: Path,
) -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        index = await client.get("/ui/")
        assert index.status == 200 and index.content_type == "text/html"
        assert_secured(index.headers)
        assert index.headers["Cache-Control"] == "no-cache" and index.headers["ETag"]
        assert '<script type="module" src="app.js">' in await index.text()
        for name in ("app.js", "console.css"):
            response = await client.get(f"/ui/{name}")
            assert response.status == 200, name
            assert_secured(response.headers)
        module = await client.get("/ui/app.js")
        assert module.content_type == "text/javascript"
        head = await client.head("/ui/index.html")
        assert head.status == 200

    serve(tmp_path, scenario)


def test_bare_ui_redirects_to_the_folder(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        response = await client.get("/ui", allow_redirects=False)
        assert response.status == 308 and response.headers["Location"] == "/ui/"
        assert_secured(response.headers)

    serve(tmp_path, scenario)


def test_an_unchanged_file_answers_304_to_its_etag(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        first = await client.get("/ui/app.js")
        etag = first.headers["ETag"]
        again = await client.get("/ui/app.js", headers={"If-None-Match": etag})
        assert again.status == 304 and again.headers["ETag"] == etag
        assert_secured(again.headers)
        other = await client.get("/ui/app.js", headers={"If-None-Match": '"other"'})
        assert other.status == 200

    serve(tmp_path, scenario)


@pytest.mark.parametrize(
    "path",
    [
        "/ui/../schedd/api/app.py",
        "/ui/%2e%2e/%2e%2e/pyproject.toml",
        "/ui/..%2f..%2fpyproject.toml",
        "/ui/pages/../../serve.py",
        "/ui/%2e%2e%2fserve.py",
        "/ui/serve.py",
        "/ui/__init__.py",
        "/ui/static/index.html",
        "/ui//etc/passwd",
        "/ui/pages/",
        "/ui/pages",
        "/ui/nope.js",
    ],
)
def test_nothing_but_the_shipped_files_is_served(tmp_path: Path, path: str) -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        response = await client.get(path, allow_redirects=False)
        body = await response.text()
        assert response.status in {404, 401}, (path, response.status, body[:200])
        assert "import" not in body and "root:" not in body and "[project]" not in body
        if response.status == 404 and response.url.path.startswith("/ui"):
            assert_secured(response.headers)

    serve(tmp_path, scenario)


def test_the_api_still_needs_a_token_and_console_writes_are_refused(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/v1/jobs")).status == 401
        assert (await client.get("/v1/stats")).status == 401
        posted = await client.post("/ui/app.js", data=b"x")  # no console route: the API's 401
        assert posted.status in {401, 405}
        assert_secured(posted.headers)

    serve(tmp_path, scenario)


def test_every_shipped_file_has_a_known_type_and_no_inline_script_or_style() -> None:
    files = shipped()
    assert "index.html" in files and "app.js" in files
    for name, found in files.items():
        assert found.content_type in {"text/html", "text/javascript", "text/css", "image/svg+xml"}
        text = found.body.decode()
        if name.endswith(".html"):
            assert "<script>" not in text and "style=" not in text and "<style" not in text
        if name.endswith(".js"):
            assert "innerHTML" not in text and "eval(" not in text, name
