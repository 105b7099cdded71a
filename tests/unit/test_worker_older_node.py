"""schedd.worker against a node of a version before outputs and dead nacks (a scripted HTTP
server answering as such a node does: 400 `outputs: is not a known field`): the ack or nack is
sent again without them, so the message is still settled. Worker and AsyncWorker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest

from schedd.worker import Ack, AsyncWorker, Events, Message, Nack, Outcome, Worker
from tests.servers import serving

MESSAGE = {
    "receipt": "r-1",
    "job_id": "job_1",
    "scheduled_at": "2026-12-05T06:25:00Z",
    "attempt": 1,
    "idempotency_key": "job_1:2026-12-05T06:25:00Z",
    "payload": None,
}


class OlderNode(BaseHTTPRequestHandler):
    """Hands out one message, then answers settles as a node from before log level 12."""

    bodies: ClassVar[list[tuple[str, dict[str, Any]]]]

    def do_GET(self) -> None:
        self.answer(200, {"queues": []})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        verb = self.path.rsplit("/", 1)[1]
        if verb == "receive":
            given = not any(v == "receive" for v, _ in self.bodies)
            self.bodies.append((verb, body))
            self.answer(200, {"messages": [MESSAGE] if given else []})
            return
        self.bodies.append((verb, body))
        unknown = next((key for key in ("outputs", "dead") if key in body), None)
        if unknown is not None:
            error = {"code": "invalid_request", "message": f"{unknown}: is not a known field"}
            self.answer(400, {"error": error})
            return
        self.answer(200, {"acked" if verb == "ack" else "nacked": 1})

    def answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Settled(Events):
    def __init__(self) -> None:
        self.outcomes: list[tuple[Outcome, str | None]] = []

    def settled(
        self, message: Message, outcome: Outcome, error: str | None, duration_s: float
    ) -> None:
        self.outcomes.append((outcome, error))


@pytest.fixture
def older_node() -> Iterator[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    bodies: list[tuple[str, dict[str, Any]]] = []
    with serving(type("Handler", (OlderNode,), {"bodies": bodies})) as url:
        yield url, bodies


def settles(bodies: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    return [(verb, body) for verb, body in bodies if verb != "receive"]


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("is_nack", [False, True])
def test_an_older_node_gets_the_settle_again_without_outputs_or_dead(
    older_node: tuple[str, list[tuple[str, dict[str, Any]]]], is_async: bool, is_nack: bool
) -> None:
    url, bodies = older_node
    events = Settled()

    def handle(message: Message) -> Ack:
        if is_nack:
            raise Nack("no such user", output="half\n", is_dead=True)
        return Ack("done\n")

    options: dict[str, Any] = {"wait_s": 0.0, "events": events, "handle_signals": False}
    if is_async:
        aworker = AsyncWorker(url, "tok", "cron", **options)

        @aworker.handler
        async def ahandle(message: Message) -> Ack:
            return handle(message)

        asyncio.run(aworker.run_batch())
    else:
        worker = Worker(url, "tok", "cron", **options)
        worker.handler(handle)
        worker.run_batch()

    if is_nack:
        new = {
            "receipts": ["r-1"],
            "error": "no such user",
            "dead": True,
            "outputs": {"r-1": "half\n"},
        }
        assert settles(bodies) == [
            ("nack", new),
            ("nack", {"receipts": ["r-1"], "error": "no such user"}),
        ]
        assert events.outcomes == [(Outcome.NACKED, "no such user")]
    else:
        assert settles(bodies) == [
            ("ack", {"receipts": ["r-1"], "outputs": {"r-1": "done\n"}}),
            ("ack", {"receipts": ["r-1"]}),
        ]
        assert events.outcomes == [(Outcome.ACKED, None)]
