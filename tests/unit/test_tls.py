"""`schedd.tls`: the API's server context, the verifying client contexts, their errors; and the
clock probe reading a peer over HTTPS (schedd/dispatch/clock.py)."""

from __future__ import annotations

import json
import logging
import socket
import sqlite3
import ssl
import threading
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from schedd.config import NodeConfig
from schedd.dispatch.clock import ClockGuard, ClockProbe, read_peer_clock
from schedd.errors import ConfigError
from schedd.tls import client_context, etcd_context, node_contexts, peer_context, server_context
from tests.certs import CertificateAuthority, NodeCert


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority(tmp_path / "pki")


@pytest.fixture
def node_cert(ca: CertificateAuthority) -> NodeCert:
    return ca.issue("n1")


class _Healthz(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"status": "ok", "now_ms": 1_790_000_000_000}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def https_peer(node_cert: NodeCert) -> Iterator[str]:
    """A stand-in peer answering /healthz over HTTPS with `node_cert` (127.0.0.1)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Healthz)
    context = server_context(node_cert.cert, node_cert.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    # A short poll: shutdown() waits for the loop to notice (0.5 s by default, per server).
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# -- the server context -------------------------------------------------------------------------


def test_server_context_needs_tls_1_2_at_least(node_cert: NodeCert) -> None:
    context = server_context(node_cert.cert, node_cert.key)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.protocol == ssl.PROTOCOL_TLS_SERVER


def test_missing_files_name_the_key_and_the_path(node_cert: NodeCert, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"api\.tls_cert '.*nope\.crt' does not exist"):
        server_context(tmp_path / "nope.crt", node_cert.key)
    with pytest.raises(ConfigError, match=r"api\.tls_key '.*nope\.key' does not exist"):
        server_context(node_cert.cert, tmp_path / "nope.key")
    with pytest.raises(ConfigError, match=r"api\.tls_cert '.*' is a directory"):
        server_context(tmp_path, node_cert.key)


def test_a_cert_file_without_a_certificate_is_an_error(node_cert: NodeCert) -> None:
    with pytest.raises(ConfigError, match=r"api\.tls_cert '.*n1\.key' holds no PEM certificate"):
        server_context(node_cert.key, node_cert.key)


def test_a_key_that_does_not_match_the_certificate_is_an_error(
    ca: CertificateAuthority, node_cert: NodeCert
) -> None:
    other = ca.issue("n2")
    with pytest.raises(ConfigError) as info:
        server_context(node_cert.cert, other.key)
    assert "api.tls_key" in str(info.value) and "n2.key" in str(info.value)
    assert "key values mismatch" in str(info.value)
    with pytest.raises(ConfigError, match="not a PEM key"):
        server_context(node_cert.cert, node_cert.cert)


def test_an_encrypted_key_is_an_error_not_a_passphrase_prompt(
    node_cert: NodeCert, tmp_path: Path
) -> None:
    key = serialization.load_pem_private_key(node_cert.key.read_bytes(), None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        )
    )
    with pytest.raises(ConfigError, match=r"api\.tls_key is encrypted"):
        server_context(node_cert.cert, encrypted)


def test_an_expired_certificate_is_refused_at_start_up(node_cert: NodeCert) -> None:
    later = datetime.now(UTC) + timedelta(days=365)
    with pytest.raises(ConfigError, match=r"api\.tls_cert '.*n1\.crt' expired on \d{4}-"):
        server_context(node_cert.cert, node_cert.key, now=later)


def test_a_world_readable_key_is_warned_about(
    node_cert: NodeCert, caplog: pytest.LogCaptureFixture
) -> None:
    node_cert.key.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="schedd.tls"):
        server_context(node_cert.cert, node_cert.key)
    assert "api.tls_key is readable by every user" in caplog.text


# -- client contexts ----------------------------------------------------------------------------


def test_client_context_verifies_names_and_needs_tls_1_2(node_cert: NodeCert) -> None:
    for context in (client_context(), client_context(node_cert.ca)):
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_cacert_trusts_only_that_ca(node_cert: NodeCert) -> None:
    stats = client_context(node_cert.ca).cert_store_stats()
    assert stats["x509_ca"] == 1


def test_a_cacert_without_certificates_names_the_option(node_cert: NodeCert) -> None:
    with pytest.raises(ConfigError, match=r"--cacert '.*n1\.key' holds no PEM certificate"):
        client_context(node_cert.key)
    with pytest.raises(ConfigError, match=r"api\.tls_ca '.*' does not exist"):
        peer_context(node_cert.ca.with_name("missing.crt"), None)


def test_peer_context_reaches_a_peer_through_a_chain_file_or_tls_ca(
    ca: CertificateAuthority, https_peer: str, tmp_path: Path
) -> None:
    other = ca.issue("n2")
    chain = tmp_path / "n2-chain.crt"  # the node's certificate, then the CA's
    chain.write_bytes(other.cert.read_bytes() + ca.path.read_bytes())
    assert read_peer_clock(https_peer, context=peer_context(None, chain)) is not None
    assert read_peer_clock(https_peer, context=peer_context(ca.path, other.cert)) is not None


def test_node_contexts_follow_the_config(node_cert: NodeCert, tmp_path: Path) -> None:
    plain = NodeConfig(path=tmp_path / "n1.toml", node_id="n1", data_dir=tmp_path)
    server, peers = node_contexts(plain)
    assert server is None and peers.verify_mode == ssl.CERT_REQUIRED
    tls = NodeConfig(
        path=tmp_path / "n1.toml",
        node_id="n1",
        data_dir=tmp_path,
        tls_cert=node_cert.cert,
        tls_key=node_cert.key,
    )
    server, _ = node_contexts(tls)
    assert server is not None and tls.api_url == "https://127.0.0.1:8701"
    broken = NodeConfig(
        path=tmp_path / "n1.toml",
        node_id="n1",
        data_dir=tmp_path,
        tls_cert=node_cert.cert,
        tls_key=tmp_path / "gone.key",
    )
    with pytest.raises(ConfigError, match=r"^.*n1\.toml: api\.tls_key '.*gone\.key' does not"):
        node_contexts(broken)


# -- the clock probe over HTTPS -----------------------------------------------------------------


def test_clock_probe_reads_an_https_peer_it_trusts(node_cert: NodeCert, https_peer: str) -> None:
    reading = read_peer_clock(https_peer, context=client_context(node_cert.ca))
    assert reading is not None and reading.error_ms >= 0


def test_clock_probe_raises_for_a_certificate_it_cannot_trust(https_peer: str) -> None:
    other_ca = client_context(None)  # the system's CAs never signed the test CA
    with pytest.raises(ssl.SSLCertVerificationError):
        read_peer_clock(https_peer, context=other_ca)


def test_clock_probe_warns_once_and_abstains_while_a_peer_is_untrusted(
    node_cert: NodeCert, https_peer: str, caplog: pytest.LogCaptureFixture
) -> None:
    def no_db() -> sqlite3.Connection:
        raise AssertionError("not used")

    probe = ClockProbe(
        "n1", ClockGuard(500), no_db, lambda: None, lambda: None, tls=client_context(None)
    )
    try:
        with caplog.at_level(logging.WARNING, logger="schedd.dispatch.clock"):
            assert probe._read(https_peer) is None
            assert probe._read(https_peer) is None
        warnings = [r for r in caplog.records if "cannot verify peer" in r.getMessage()]
        assert len(warnings) == 1 and "tls_ca" in warnings[0].getMessage()
    finally:
        probe.stop(timeout_s=1)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_the_server_context_refuses_tls_1_1_and_below(
    https_peer: str, node_cert: NodeCert, version: ssl.TLSVersion
) -> None:
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(node_cert.ca)
    with warnings.catch_warnings():  # TLS 1.0/1.1 are deprecated: that is the point
        warnings.simplefilter("ignore", DeprecationWarning)
        client.minimum_version = client.maximum_version = version
    client.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer them at all
    port = int(https_peer.rsplit(":", 1)[1])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        pytest.raises(ssl.SSLError) as info,
    ):
        client.wrap_socket(raw, server_hostname="127.0.0.1")
    if info.value.reason == "NO_PROTOCOLS_AVAILABLE":
        pytest.skip(f"this OpenSSL cannot offer {version.name} at all")
    assert info.value.reason == "TLSV1_ALERT_PROTOCOL_VERSION"


def cells_config(tmp_path: Path, **files: Path) -> NodeConfig:
    from schedd.config import CellsSettings

    cells = CellsSettings(etcd=("https://127.0.0.1:2379",), cell="c1", **files)
    return NodeConfig(
        path=tmp_path / "n.toml",
        node_id="n1",
        data_dir=tmp_path,
        partitions=1024,
        partition_range=(0, 511),
        cells=cells,
    )


def test_the_etcd_context_trusts_its_ca_and_presents_the_client_certificate(
    tmp_path: Path, ca: CertificateAuthority, node_cert: NodeCert
) -> None:
    assert etcd_context(cells_config(tmp_path).cells) is None  # aiohttp's default: verified
    files = {"etcd_cacert": ca.path, "etcd_cert": node_cert.cert, "etcd_key": node_cert.key}
    context = etcd_context(cells_config(tmp_path, **files).cells)
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [
        ((("commonName", "schedd test CA"),),)
    ]


def test_etcd_tls_files_that_cannot_be_used_are_errors_naming_the_field(
    tmp_path: Path, ca: CertificateAuthority, node_cert: NodeCert
) -> None:
    missing = tmp_path / "nope.crt"
    with pytest.raises(ConfigError, match=r"cells\.etcd_cacert .* does not exist"):
        etcd_context(cells_config(tmp_path, etcd_cacert=missing).cells)
    other = ca.issue("n2")
    with pytest.raises(
        ConfigError, match=r"cells\.etcd_key .* is not the PEM private key of cells"
    ):
        etcd_context(cells_config(tmp_path, etcd_cert=node_cert.cert, etcd_key=other.key).cells)
