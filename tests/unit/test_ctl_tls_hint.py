"""schedctl hints at https:// only when the node speaks TLS (issue 30's newcomer trial: a killed
node closing the connection printed "if the node serves HTTPS, use an https:// URL")."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from schedd.cli.ctl.client import Client
from schedd.errors import ClusterUnavailable


@pytest.fixture
def closes_at_once() -> Iterator[str]:
    """A loopback server that reads a request and closes without a word, as a dying node does."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(0.2)
                with contextlib.suppress(OSError):
                    conn.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        server.close()
        thread.join(timeout=5)


def test_a_node_that_closes_without_a_word_gets_no_https_hint(closes_at_once: str) -> None:
    with pytest.raises(ClusterUnavailable) as raised:
        Client(closes_at_once, token="t", timeout_s=2).request("GET", "/v1/jobs")
    assert "connection to" in str(raised.value) and "https" not in str(raised.value)
