"""One real node serving its API over HTTPS only, with a certificate from a CA made at test time:
what it answers, what it refuses, and `schedctl --cacert`."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import warnings
from collections.abc import Iterator
from http.client import HTTPConnection, HTTPException
from pathlib import Path

import pytest

from schedd.tls import client_context
from tests.certs import CertificateAuthority, NodeCert
from tests.servers import (
    ADMIN_TOKEN,
    NodeProcess,
    free_ports,
    http,
    make_nodes,
    metrics_text,
    running,
)

BIN = Path(sys.executable).parent
REFUSALS = ("TLSV1_ALERT_PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL", "UNEXPECTED_EOF_WHILE_READING")
Result = subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> NodeCert:
    return CertificateAuthority(tmp_path_factory.mktemp("pki")).issue("n1", dns=("localhost",))


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory, pki: NodeCert) -> Iterator[NodeProcess]:
    api = f'tls_cert = "{pki.cert}"\ntls_key = "{pki.key}"\n'
    (node,) = make_nodes(tmp_path_factory.mktemp("tls-node"), 1, api_extra=api)
    node.tls = client_context(pki.ca)
    with running([node]):
        yield node


def schedctl(*args: str, env: dict[str, str] | None = None) -> Result:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    clean |= {"SCHEDCTL_TOKEN": ADMIN_TOKEN, "COLUMNS": "200"} | (env or {})
    return subprocess.run(
        [str(BIN / "schedctl"), "--timeout", "5", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean,
    )


def one_error_line(result: Result, code: int) -> str:
    """The single `error:` line of a failed command (no traceback, nothing on stdout)."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# -- the node -----------------------------------------------------------------------------------


def test_the_node_answers_over_https_and_registers_an_https_url(tls_node: NodeProcess) -> None:
    status, health, _ = http("GET", f"{tls_node.url}/healthz", token=None, context=tls_node.tls)
    assert status == 200 and health["status"] == "ok"
    status, cluster, _ = http("GET", f"{tls_node.url}/v1/cluster", context=tls_node.tls)
    assert status == 200
    assert [n["api"] for n in cluster["nodes"]] == [tls_node.url]
    assert tls_node.url.startswith("https://127.0.0.1:")


def test_plain_http_gets_no_api_answer(tls_node: NodeProcess) -> None:
    conn = HTTPConnection("127.0.0.1", tls_node.api_port, timeout=5)
    try:
        with pytest.raises((HTTPException, OSError)):
            conn.request("GET", "/healthz")
            conn.getresponse()
    finally:
        conn.close()


def test_an_unknown_ca_is_refused_by_the_client(tls_node: NodeProcess) -> None:
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        http("GET", f"{tls_node.url}/healthz", token=None, context=client_context(None))


def handshake(port: int, version: ssl.TLSVersion, cafile: Path) -> str | None:
    """The version a client limited to `version` agrees with the node (TLS errors raise)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile)
    with warnings.catch_warnings():  # TLS 1.0/1.1 are deprecated: that is the point
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = context.maximum_version = version
    if version < ssl.TLSVersion.TLSv1_2:
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer them at all
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        return tls.version()


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_tls_1_2_and_1_3_are_accepted(
    tls_node: NodeProcess, pki: NodeCert, version: ssl.TLSVersion
) -> None:
    expected = "TLSv1.2" if version == ssl.TLSVersion.TLSv1_2 else "TLSv1.3"
    assert handshake(tls_node.api_port, version, pki.ca) == expected


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_tls_1_1_and_below_are_refused(
    tls_node: NodeProcess, pki: NodeCert, version: ssl.TLSVersion
) -> None:
    try:
        agreed = handshake(tls_node.api_port, version, pki.ca)
    except ssl.SSLError as exc:
        if exc.reason == "NO_PROTOCOLS_AVAILABLE":
            pytest.skip(f"this OpenSSL cannot offer {version.name} at all")
        # asyncio closes the connection without flushing OpenSSL's protocol_version alert
        assert exc.reason in REFUSALS, exc
    else:
        raise AssertionError(f"the node agreed to {agreed}")


# -- schedctl -----------------------------------------------------------------------------------


def test_schedctl_with_cacert_works_for_requests_and_metrics(
    tls_node: NodeProcess, pki: NodeCert
) -> None:
    result = schedctl("--url", tls_node.url, "--cacert", str(pki.ca), "status", "--json")
    assert result.returncode == 0, result.stderr
    (node,) = json.loads(result.stdout)["nodes"]
    assert node["api"] == tls_node.url
    assert node["reachable"] is True and node["term"] is not None  # /metrics over HTTPS too


def test_schedctl_takes_url_and_cacert_after_the_command(
    tls_node: NodeProcess, pki: NodeCert
) -> None:
    result = schedctl("status", "--json", "--url", tls_node.url, "--cacert", str(pki.ca))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["nodes"][0]["reachable"] is True


def test_schedctl_top_reads_metrics_over_https(tls_node: NodeProcess, pki: NodeCert) -> None:
    env = {"SCHEDCTL_URL": tls_node.url, "SCHEDCTL_CACERT": str(pki.ca)}
    result = schedctl("top", "--once", "--interval", "0.5", env=env)
    assert result.returncode == 0, result.stderr
    assert "nodes healthy    1/1" in result.stdout.splitlines()  # its /metrics was read


def test_schedctl_reads_the_ca_from_schedctl_cacert(tls_node: NodeProcess, pki: NodeCert) -> None:
    env = {"SCHEDCTL_URL": tls_node.url, "SCHEDCTL_CACERT": str(pki.ca)}
    result = schedctl("tenants", "ls", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert "tenants" in json.loads(result.stdout)


def test_schedctl_fails_over_to_an_https_node_with_the_same_ca(
    tls_node: NodeProcess, pki: NodeCert
) -> None:
    (dead_port,) = free_ports(1)
    urls = f"https://127.0.0.1:{dead_port},{tls_node.url}"
    result = schedctl("--url", urls, "--cacert", str(pki.ca), "tenants", "ls", "--json")
    assert result.returncode == 0, result.stderr


def test_schedctl_without_the_ca_says_so_and_exits_3(tls_node: NodeProcess) -> None:
    line = one_error_line(schedctl("--url", tls_node.url, "tenants", "ls"), 3)
    assert f"cannot verify the TLS certificate of {tls_node.url}" in line
    assert "--cacert" in line and "SCHEDCTL_CACERT" in line


def test_schedctl_work_needs_the_ca_too(tls_node: NodeProcess, pki: NodeCert) -> None:
    """`work` makes its requests through schedd.worker, which takes the --cacert CAs too."""
    url = f"{tls_node.url}/v1/tenants"
    status, tenant, _ = http("POST", url, {"name": "tls-work"}, context=tls_node.tls)
    assert status == 201, tenant
    env = {"SCHEDCTL_URL": tls_node.url, "SCHEDCTL_TOKEN": tenant["token"]}
    work = ("work", "q", "--once", "--wait", "0s", "--", "true")
    trusted = schedctl(*work, env=env | {"SCHEDCTL_CACERT": str(pki.ca)})
    assert trusted.returncode == 0 and "stopped" in trusted.stderr, trusted.stderr
    line = one_error_line(schedctl(*work, env=env), 3)
    assert f"cannot verify the TLS certificate of {tls_node.url}" in line
    assert "--cacert" in line and "SCHEDCTL_CACERT" in line


def test_schedctl_with_another_ca_exits_3(
    tls_node: NodeProcess, tmp_path: Path, pki: NodeCert
) -> None:
    other = CertificateAuthority(tmp_path / "other")
    line = one_error_line(schedctl("--url", tls_node.url, "--cacert", str(other.path), "ls"), 3)
    assert "cannot verify the TLS certificate" in line


def test_schedctl_status_without_the_ca_exits_3(tls_node: NodeProcess) -> None:
    line = one_error_line(schedctl("--url", tls_node.url, "status"), 3)
    assert "cannot verify the TLS certificate" in line


def test_schedctl_with_an_http_url_hints_at_https(tls_node: NodeProcess, pki: NodeCert) -> None:
    plain = tls_node.url.replace("https://", "http://")
    line = one_error_line(schedctl("--url", plain, "--cacert", str(pki.ca), "ls"), 3)
    assert "the node serves HTTPS: use an https:// URL" in line


def test_schedctl_cacert_must_exist(tmp_path: Path) -> None:
    result = schedctl("--cacert", str(tmp_path / "missing.crt"), "ls")
    assert result.returncode == 2
    assert "--cacert" in result.stderr and "does not exist" in result.stderr


def test_schedctl_cacert_without_a_certificate_exits_2(
    tls_node: NodeProcess, pki: NodeCert
) -> None:
    line = one_error_line(schedctl("--url", tls_node.url, "--cacert", str(pki.key), "ls"), 2)
    assert "--cacert" in line and "holds no PEM certificate" in line


# -- start-up errors ----------------------------------------------------------------------------


def serve(tmp_path: Path, api_lines: str) -> Result:
    (node,) = make_nodes(tmp_path, 1, api_extra=api_lines)
    return subprocess.run(
        [str(BIN / "schedd"), "serve", "--config", str(node.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_cert_without_a_key_stops_the_node(tmp_path: Path, pki: NodeCert) -> None:
    result = serve(tmp_path, f'tls_cert = "{pki.cert}"\n')
    assert result.returncode == 2
    assert f"{tmp_path / 'n1.toml'}: api.tls_cert" in result.stderr
    assert "api.tls_key is not" in result.stderr


def test_a_key_that_does_not_match_stops_the_node(tmp_path: Path, pki: NodeCert) -> None:
    other = CertificateAuthority(tmp_path / "other").issue("x")
    result = serve(tmp_path, f'tls_cert = "{pki.cert}"\ntls_key = "{other.key}"\n')
    assert result.returncode == 2, result.stderr
    assert f"{tmp_path / 'n1.toml'}: api.tls_key '{other.key}'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_metrics_listener_serves_https_too(tmp_path: Path, pki: NodeCert) -> None:
    # Off loopback it needs a token, which must not cross the network in clear text.
    (port,) = free_ports(1)
    api = f'tls_cert = "{pki.cert}"\ntls_key = "{pki.key}"\n'
    metrics = f'[metrics]\nlisten = "127.0.0.1:{port}"\ntoken = "metrics-token-0123456789"\n'
    (node,) = make_nodes(tmp_path, 1, api_extra=api, extra_sections=metrics)
    node.tls = client_context(pki.ca)
    with running([node]):
        url = f"https://127.0.0.1:{port}"
        text = metrics_text(url, token="metrics-token-0123456789", context=node.tls)
        assert "schedd_raft_applied_index" in text
        with pytest.raises(OSError):  # plain HTTP gets no answer there
            metrics_text(f"http://127.0.0.1:{port}", token="metrics-token-0123456789")
