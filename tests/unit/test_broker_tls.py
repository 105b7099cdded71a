"""TLS to a pinned address: the socket goes to the address the guard checked (127.0.0.1 here)
while the certificate is verified against the URL's host name, for every broker kind.

The certificate names only `broker.test` (no IP): a handshake that passes verified the name,
and a URL naming another host fails verification. Tiny fake Redis and NATS servers answer
enough for the probe to name their version; the AMQP one only completes the handshake.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from schedd.delivery.probe import probe
from schedd.model import BrokerConnection
from tests.certs import CertificateAuthority
from tests.hostile_brokers import (
    NATS_CONNECTS,
    closing_writer,
    nats_huge_message,
    read_resp_command,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
def tls_pair(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(the server's context for broker.test, a client context trusting only the test CA)."""
    ca = CertificateAuthority(tmp_path)
    cert = ca.issue("broker", ips=(), dns=("broker.test",))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert.cert, cert.key)
    client = ssl.create_default_context(cafile=str(ca.path))
    return server, client


@contextlib.asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None) -> AsyncIterator[int]:
    server = await asyncio.start_server(closing_writer(handler), "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def connection(kind: str, url: str) -> BrokerConnection:
    return BrokerConnection(
        tenant_id="t1",
        name="c",
        kind=kind,
        url=url,
        pinned_addresses=("127.0.0.1",),
        created_ms=1,
    )


async def fake_redis(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ValueError):
        while True:
            name = (await read_resp_command(reader))[0].upper()
            if name == b"PING":
                writer.write(b"+PONG\r\n")
            elif name == b"INFO":
                info = b"# Server\r\nredis_version:7.9.9\r\n"
                writer.write(b"$%d\r\n%s\r\n" % (len(info), info))
            else:
                writer.write(b"+OK\r\n")
            await writer.drain()


def fake_nats(tls: ssl.SSLContext) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        info = b'{"server_id":"fake","version":"2.99.0","tls_required":true,"headers":true}'
        writer.write(b"INFO " + info + b"\r\n")
        await writer.drain()
        with contextlib.suppress(ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
            await writer.start_tls(tls)
            while line := await reader.readline():
                if line.startswith(b"PING"):
                    writer.write(b"PONG\r\n")
                    await writer.drain()

    return handler


async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        await reader.read(8)


def test_redis_tls_verifies_the_url_host_name_at_the_pinned_address(
    tls_pair: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    server_tls, client_tls = tls_pair

    async def scenario() -> tuple[tuple[bool, str], tuple[bool, str]]:
        async with serving(fake_redis, server_tls) as port:
            good = connection("redis", f"rediss://broker.test:{port}/0")
            bad = connection("redis", f"rediss://other.test:{port}/0")
            return await probe(good, 3, tls=client_tls), await probe(bad, 3, tls=client_tls)

    good, bad = asyncio.run(scenario())
    assert good == (True, "redis 7.9.9")
    assert not bad[0]
    assert "certificate verify failed" in bad[1]


@pytest.mark.parametrize("scheme", ["tls", "nats"])  # a server that requires TLS gets it
def test_nats_tls_verifies_the_url_host_name_at_the_pinned_address(
    tls_pair: tuple[ssl.SSLContext, ssl.SSLContext], scheme: str
) -> None:
    server_tls, client_tls = tls_pair

    async def scenario() -> tuple[tuple[bool, str], tuple[bool, str]]:
        async with serving(fake_nats(server_tls), None) as port:
            good = connection("nats", f"{scheme}://broker.test:{port}")
            bad = connection("nats", f"{scheme}://other.test:{port}")
            return await probe(good, 3, tls=client_tls), await probe(bad, 3, tls=client_tls)

    good, bad = asyncio.run(scenario())
    assert good == (True, "nats-server 2.99.0")
    assert not bad[0]
    assert "certificate verify failed" in bad[1]


def test_amqps_verifies_the_url_host_name_at_the_pinned_address(
    tls_pair: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    server_tls, client_tls = tls_pair

    async def scenario() -> tuple[tuple[bool, str], tuple[bool, str]]:
        async with serving(closing, server_tls) as port:
            good = connection("rabbitmq", f"amqps://guest:guest@broker.test:{port}/")
            bad = connection("rabbitmq", f"amqps://guest:guest@other.test:{port}/")
            return await probe(good, 3, tls=client_tls), await probe(bad, 3, tls=client_tls)

    good, bad = asyncio.run(scenario())
    assert not good[0]  # the fake server speaks no AMQP: the handshake passed, then it closed
    assert "certificate" not in good[1]
    assert not bad[0]
    assert "certificate verify failed" in bad[1]


def test_a_tls_nats_url_never_sends_credentials_to_a_server_not_requiring_tls() -> None:
    """A server (or anything in the path) whose INFO says TLS is not required gets no CONNECT:
    nats-py alone would send the user and password in clear."""
    NATS_CONNECTS.clear()

    async def scenario() -> tuple[bool, str]:
        async with serving(nats_huge_message(tls_required=False), None) as port:
            url = f"tls://alice:pa55word@127.0.0.1:{port}"
            return await probe(connection("nats", url), 3)

    ok, detail = asyncio.run(scenario())
    assert not ok
    assert "did not require TLS for a tls:// URL" in detail
    assert "pa55word" not in detail
    assert NATS_CONNECTS == []
