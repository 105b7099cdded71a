"""A local HTTP endpoint for delivery tests: an aiohttp server on 127.0.0.1 in its own thread.

It records every request and answers each path with a script of responses (status, headers,
delay); the last response of a script repeats. Only loopback, never anything else.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: str = "ok"


@dataclass(frozen=True)
class Received:
    at: float  # time.time() when the request arrived
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """Start with `with receiving() as receiver:`; URLs via `receiver.url(path)`."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host  # the chaos suite's namespaced nodes reach it on a host address
        self.requests: list[Received] = []
        self._scripts: dict[str, list[Answer]] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, name="receiver", daemon=True)
        self.port = 0

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}/{path.lstrip('/')}"

    def script(self, path: str, *answers: Answer) -> None:
        """Answer requests to `path` with these, in order; the last one repeats."""
        with self._lock:
            self._scripts["/" + path.lstrip("/")] = list(answers)

    def received(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == "/" + path.lstrip("/")]

    def wait_for(
        self, count: int, path: str | None = None, *, timeout_s: float = 20.0
    ) -> list[Received]:
        """At least `count` requests (to `path`), or AssertionError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.received(path)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{len(self.received(path))} of {count} requests to {path!r} came")

    def start(self) -> Receiver:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the receiver did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _answer_for(self, path: str) -> Answer:
        with self._lock:
            script = self._scripts.get(path)
            if not script:
                return Answer()
            return script.pop(0) if len(script) > 1 else script[0]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        with self._lock:
            self.requests.append(
                Received(time.time(), request.method, request.path, dict(request.headers), body)
            )
        answer = self._answer_for(request.path)
        if answer.delay_s:
            await asyncio.sleep(answer.delay_s)
        return web.Response(status=answer.status, headers=answer.headers, text=answer.body)

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, 0)
        await site.start()
        server: Any = site._server  # the bound port (0 asked the OS for a free one)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()


@contextmanager
def receiving(setup: Callable[[Receiver], None] | None = None) -> Iterator[Receiver]:
    """A started receiver, always stopped afterwards."""
    receiver = Receiver().start()
    try:
        if setup is not None:
            setup(receiver)
        yield receiver
    finally:
        receiver.stop()
