"""Small hostile brokers on loopback, standing in for a tenant's public broker that answers with
more than any reply needs: a Redis reply announced as `$1073741824`, a NATS `MSG` of 2,000,000,000
bytes, an AMQP frame header announcing 0x7FFFFFF0 bytes, each followed by up to STREAM_BYTES of
zeros for as long as the client reads. Each runs on its own event loop in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
from collections.abc import Awaitable, Callable, Iterator

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
STREAM_BYTES = 300 << 20
CHUNK = b"\0" * (64 << 10)


async def stream_zeros(writer: asyncio.StreamWriter, total: int = STREAM_BYTES) -> None:
    """Up to `total` bytes of zeros, as fast as the client reads them."""
    with contextlib.suppress(ConnectionError, OSError):
        sent = 0
        while sent < total and not writer.is_closing():
            writer.write(CHUNK)
            await writer.drain()
            sent += len(CHUNK)


async def read_resp_command(reader: asyncio.StreamReader) -> list[bytes]:
    count = int((await reader.readline())[1:])
    parts = []
    for _ in range(count):
        size = int((await reader.readline())[1:])
        parts.append((await reader.readexactly(size + 2))[:-2])
    return parts


def simple_answer(command: bytes) -> bytes:
    """PONG to PING, a RESP3 map to HELLO (a client speaking RESP3 asks it first), else OK."""
    if command == b"HELLO":
        return b"%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n"
    return b"+PONG\r\n" if command == b"PING" else b"+OK\r\n"


async def redis_huge_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers PING and the client's set-up; INFO or XADD gets `$1073741824` and the bytes."""
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ValueError):
        while True:
            name = (await read_resp_command(reader))[0].upper()
            if name in (b"INFO", b"XADD"):
                writer.write(b"$1073741824\r\n")
                await stream_zeros(writer)
                break
            writer.write(simple_answer(name))
            await writer.drain()


def nats_huge_message(*, tls_required: bool = False) -> Handler:
    """INFO (saying `tls_required` as asked), PONG to PING; a publish with a reply subject gets
    `MSG <reply> 1 2000000000` and the bytes. Every CONNECT line it receives is kept."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        info = {"server_id": "hostile", "version": "2.10.99", "headers": True}
        info |= {"tls_required": tls_required, "max_payload": 1 << 20}
        writer.write(b"INFO " + json.dumps(info).encode() + b"\r\n")
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ValueError):
            await writer.drain()
            while line := await reader.readline():
                verb, *args = line.split()
                if verb == b"CONNECT":
                    NATS_CONNECTS.append(line)
                elif verb == b"PING":
                    writer.write(b"PONG\r\n")
                    await writer.drain()
                elif verb in (b"PUB", b"HPUB"):
                    await reader.readexactly(int(args[-1]) + 2)
                    writer.write(b"MSG %s 1 2000000000\r\n" % args[1])
                    await stream_zeros(writer)
                    break

    return handler


NATS_CONNECTS: list[bytes] = []


async def amqp_huge_frame(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After the client's protocol header: a method frame header announcing 0x7FFFFFF0 bytes."""
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        await reader.readexactly(8)
        writer.write(b"\x01\x00\x00" + (0x7FFFFFF0).to_bytes(4, "big"))
        await stream_zeros(writer)


HOSTILE: dict[str, tuple[Handler, str]] = {  # kind -> (the server, its URL with {port})
    "redis": (redis_huge_reply, "redis://alice:pw@127.0.0.1:{port}/0"),
    "nats": (nats_huge_message(), "nats://alice:pw@127.0.0.1:{port}"),
    "rabbitmq": (amqp_huge_frame, "amqp://alice:pw@127.0.0.1:{port}/"),
}


def closing_writer(handler: Handler) -> Handler:
    """`handler`, closing its connection however it ends (cancelled at shutdown included), so no
    transport outlives its event loop."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    return handle


@contextlib.contextmanager
def hostile(handler: Handler) -> Iterator[int]:
    """Serves `handler` on a free 127.0.0.1 port, in a thread of its own; yields the port. On
    exit the server stops accepting, and asyncio.run cancels the connections still served and
    runs them to their end before it closes the loop."""
    started: queue.Queue[tuple[asyncio.AbstractEventLoop, asyncio.Event, int]] = queue.Queue()

    async def serve() -> None:
        stop = asyncio.Event()
        server = await asyncio.start_server(closing_writer(handler), "127.0.0.1", 0)
        started.put((asyncio.get_running_loop(), stop, server.sockets[0].getsockname()[1]))
        await stop.wait()
        server.close()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    loop, stop, port = started.get(timeout=10)
    try:
        yield port
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        assert not thread.is_alive(), "the hostile server did not stop within 10 s"
