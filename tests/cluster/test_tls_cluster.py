"""Three real nodes serving HTTPS only, each with its own certificate from one private CA: the
cluster lists https API URLs, each node's clock probe reads its peers over verified HTTPS, and
`schedctl --cacert status` sees every node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.tls import client_context
from tests.certs import CertificateAuthority
from tests.servers import (
    ADMIN_TOKEN,
    NodeProcess,
    http,
    make_nodes,
    running,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.cluster
SCHEDCTL = str(Path(sys.executable).with_name("schedctl"))


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def nodes(
    tmp_path_factory: pytest.TempPathFactory, ca: CertificateAuthority
) -> Iterator[list[NodeProcess]]:
    made = make_nodes(tmp_path_factory.mktemp("tls-cluster"), 3)
    for node in made:
        cert = ca.issue(node.node_id)
        # Each node trusts the cluster's CA through api.tls_ca, as docs/operations.md has it.
        api = f'tls_cert = "{cert.cert}"\ntls_key = "{cert.key}"\ntls_ca = "{ca.path}"\n'
        write_config(node, [n.raft for n in made if n is not node], api_extra=api)
        node.tls = client_context(ca.path)
    with running(made) as started:
        yield started


def metric(node: NodeProcess, name: str) -> float | None:
    """One unlabelled sample of the node's /metrics (read over HTTPS), or None."""
    request = urllib.request.Request(f"{node.url}/metrics")
    request.add_header("Authorization", f"Bearer {ADMIN_TOKEN}")
    with urllib.request.urlopen(request, timeout=10, context=node.tls) as answer:
        text = answer.read().decode()
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


def test_the_cluster_lists_https_api_urls(nodes: list[NodeProcess]) -> None:
    def listed() -> dict[str, str] | None:
        _, cluster, _ = http("GET", f"{nodes[0].url}/v1/cluster", context=nodes[0].tls)
        apis = {n["node_id"]: n["api"] for n in cluster["nodes"]}
        return apis if len(apis) == 3 else None

    apis = wait_for(listed, 30, "three registered nodes")
    assert apis == {n.node_id: n.url for n in nodes}
    assert all(url.startswith("https://127.0.0.1:") for url in apis.values())


def test_every_node_measures_its_peers_clocks_over_https(nodes: list[NodeProcess]) -> None:
    # schedd_clock_offset_seconds appears once a probe round has read at least one peer.
    for node in nodes:
        wait_for(
            lambda node=node: metric(node, "schedd_clock_offset_seconds") is not None,
            30,
            f"{node.node_id}'s clock probe to read a peer",
        )
        assert metric(node, "schedd_clock_trusted") == 1
        offset = metric(node, "schedd_clock_offset_seconds")
        assert offset is not None and abs(offset) < 0.5  # the same host: the same clock
        assert "cannot verify peer" not in node.log_path.read_text()


def schedctl_status(nodes: list[NodeProcess], ca: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {"SCHEDCTL_TOKEN": ADMIN_TOKEN, "SCHEDCTL_CACERT": str(ca), "COLUMNS": "200"}
    urls = ",".join(n.url for n in nodes)
    return subprocess.run(
        [SCHEDCTL, "--url", urls, "--timeout", "3", "status", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_schedctl_status_with_the_ca_sees_every_node(
    nodes: list[NodeProcess], ca: CertificateAuthority
) -> None:
    def healthy() -> dict[str, Any] | None:
        result = schedctl_status(nodes, ca.path)
        return json.loads(result.stdout) if result.returncode == 0 else None

    cluster = wait_for(healthy, 30, "schedctl status to exit 0")
    assert all(n["reachable"] and n["api"].startswith("https://") for n in cluster["nodes"])


def test_nodes_that_cannot_verify_their_peers_say_so_and_measure_nothing(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    made = make_nodes(tmp_path, 3)
    for node in made:
        cert = ca.issue(f"{node.node_id}-leaf-only")  # no tls_ca, no CA in the chain file
        api = f'tls_cert = "{cert.cert}"\ntls_key = "{cert.key}"\n'
        write_config(node, [n.raft for n in made if n is not node], api_extra=api)
        node.tls = client_context(ca.path)
    with running(made):
        for node in made:
            wait_for(
                lambda node=node: "cannot verify peer" in node.log_path.read_text(),
                30,
                f"{node.node_id} to warn that it cannot verify its peers",
            )
            assert metric(node, "schedd_clock_offset_seconds") is None
            assert node.log_path.read_text().count("cannot verify peer api=") <= 2  # once each
