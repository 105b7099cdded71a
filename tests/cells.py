"""Scripted nodes of several cells (issue 35), for the clients' tests: each is an HTTP server on a
free loopback port that records what it was asked and answers what its test scripts, such as a
node of another cell's 307 wrong_cell or GET /v1/cells. Every server stops with its context."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

from tests.servers import serving


@dataclass(frozen=True, slots=True)
class Seen:
    """One request a scripted node received."""

    method: str
    path: str
    body: Any
    authorization: str | None


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Script = Callable[[Seen], Answer]


class _Scripted(BaseHTTPRequestHandler):
    script: ClassVar[Script]
    seen: ClassVar[list[Seen]]
    lock: ClassVar[threading.Lock]

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        request = Seen(
            self.command,
            self.path,
            json.loads(raw) if raw else None,
            self.headers.get("Authorization"),
        )
        with self.lock:
            self.seen.append(request)
        answer = self.script(request)
        data = b"" if answer.body is None else json.dumps(answer.body).encode()
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class ScriptedNode:
    """A running scripted node: its URL, what it saw; `script` may be replaced at any time."""

    url: str
    seen: list[Seen]
    holder: dict[str, Script]

    @property
    def script(self) -> Script:
        return self.holder["script"]

    @script.setter
    def script(self, script: Script) -> None:
        self.holder["script"] = script


@contextlib.contextmanager
def scripted_nodes(count: int) -> Iterator[list[ScriptedNode]]:
    """`count` scripted nodes, each answering 500 until its test gives it a script."""
    with contextlib.ExitStack() as stack:
        nodes = []
        for _ in range(count):
            seen: list[Seen] = []
            holder: dict[str, Script] = {"script": lambda seen: Answer(500, _error("unscripted"))}
            handler = type(
                "Handler",
                (_Scripted,),
                {
                    "script": staticmethod(lambda request, h=holder: h["script"](request)),
                    "seen": seen,
                    "lock": threading.Lock(),
                },
            )
            url = stack.enter_context(serving(handler))
            nodes.append(ScriptedNode(url, seen, holder))
        yield nodes


def wrong_cell(cell: str, urls: list[str], request: Seen, revision: int = 4182) -> Answer:
    """A node's answer for a request another cell owns (the server's contract)."""
    error = _error(f"partition 733 is served by cell {cell}", "wrong_cell")
    error["error"] |= {"cell": cell, "urls": urls, "directory_revision": revision}
    return Answer(307, error, {"Location": urls[0] + request.path})


def directory(cells: dict[str, list[str]], this: str, revision: int = 7) -> dict[str, Any]:
    """GET /v1/cells's answer: `cells` (name: URLs) splitting 1,024 partitions in order."""
    share = 1024 // len(cells)
    listed = [
        {"cell": name, "ranges": [[i * share, (i + 1) * share - 1]], "urls": urls}
        for i, (name, urls) in enumerate(cells.items())
    ]
    return {"directory_revision": revision, "partitions": 1024, "self": this, "cells": listed}


def _error(message: str, code: str = "internal") -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
