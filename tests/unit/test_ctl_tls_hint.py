"""schedctl hints at https:// only when the node speaks TLS (issue 30's newcomer trial: a killed
node closing the connection printed "if the node serves HTTPS, use an https:// URL")."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from schedd.cli.ctl.client import Client
from schedd.errors import ClusterUnavailable
from tests.servers import serving


class _ClosesAtOnce(BaseHTTPRequestHandler):
    """Reads the request line and closes without a word, as a dying node does."""

    def handle(self) -> None:
        self.rfile.readline()


@pytest.fixture
def closes_at_once() -> Iterator[str]:
    with serving(_ClosesAtOnce) as url:
        yield url


def test_a_node_that_closes_without_a_word_gets_no_https_hint(closes_at_once: str) -> None:
    with pytest.raises(ClusterUnavailable) as raised:
        Client(closes_at_once, token="t", timeout_s=2).request("GET", "/v1/jobs")
    assert "connection to" in str(raised.value) and "https" not in str(raised.value)
