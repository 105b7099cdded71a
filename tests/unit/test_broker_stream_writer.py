"""The redis_stream deliverer's batching (StreamWriter): XADDs asked for together go out as one
pipeline, a slow server never has more than PIPELINES of them in flight, an XADD whose attempt
timed out before it was sent is never sent, and each waiter gets its own answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.exceptions

from schedd.delivery.redis_stream import PIPELINES, StreamWriter


class Pipe:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.streams: list[str] = []

    def xadd(self, stream: str, fields: dict[str, str], **options: Any) -> None:
        self.streams.append(stream)

    async def execute(self, raise_on_error: bool) -> list[Any]:
        self.server.sent.append(self.streams)
        self.server.in_flight += 1
        self.server.most = max(self.server.most, self.server.in_flight)
        try:
            await self.server.release.wait()
        finally:
            self.server.in_flight -= 1
        return [
            redis.exceptions.ResponseError("WRONGTYPE") if s == "bad" else b"1-%d" % i
            for i, s in enumerate(self.streams)
        ]


class Server:
    """A Redis client whose pipelines wait until `release` is set."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []
        self.in_flight = self.most = 0
        self.release = asyncio.Event()

    def pipeline(self, transaction: bool) -> Pipe:
        return Pipe(self)


async def turns() -> None:
    """Let the loop run until an XADD asked for now is in its pipeline."""
    for _ in range(4):
        await asyncio.sleep(0)


def writer(server: Server) -> StreamWriter:
    return StreamWriter(server)  # type: ignore[arg-type]


def test_xadds_asked_together_are_one_pipeline_with_their_own_answers() -> None:
    async def scenario() -> tuple[list[Any], Server]:
        server = Server()
        server.release.set()
        batch = writer(server)
        answers = await asyncio.gather(
            batch.xadd("a", {}, None),
            batch.xadd("bad", {}, None),
            batch.xadd("c", {}, 10),
            return_exceptions=True,
        )
        return answers, server

    answers, server = asyncio.run(scenario())
    assert server.sent == [["a", "bad", "c"]]
    assert answers[0] == b"1-0" and answers[2] == b"1-2"
    assert isinstance(answers[1], redis.exceptions.ResponseError)


def test_slow_server_has_at_most_pipelines_in_flight() -> None:
    async def scenario() -> Server:
        server = Server()
        batch = writer(server)
        waiting = []
        for n in range(PIPELINES + 3):  # one XADD per turn of the loop: a pipeline each
            waiting.append(asyncio.ensure_future(batch.xadd(f"s{n}", {}, None)))
            await turns()
        assert server.in_flight == PIPELINES
        server.release.set()
        await asyncio.gather(*waiting)
        return server

    server = asyncio.run(scenario())
    assert server.most == PIPELINES
    assert server.sent[:PIPELINES] == [[f"s{n}"] for n in range(PIPELINES)]
    assert server.sent[PIPELINES:] == [[f"s{n}" for n in range(PIPELINES, PIPELINES + 3)]]


def test_xadd_whose_attempt_timed_out_before_sending_is_not_sent() -> None:
    async def scenario() -> Server:
        server = Server()
        batch = writer(server)
        busy = []
        for n in range(PIPELINES):  # each in its own turn: PIPELINES pipelines, all held
            busy.append(asyncio.ensure_future(batch.xadd(f"s{n}", {}, None)))
            await turns()
        assert server.in_flight == PIPELINES
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await batch.xadd("late", {}, None)
        server.release.set()
        await asyncio.gather(*busy)
        await asyncio.sleep(0.01)
        return server

    server = asyncio.run(scenario())
    assert "late" not in [s for sent in server.sent for s in sent]
