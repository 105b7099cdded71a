"""A single node started from config/single.toml (no Raft secret in it) withstands strangers
on its Raft port: it listens on raft.listen only, never unpickles their frames, bounds what it
buffers, and keeps the Raft secret it generated across restarts."""

from __future__ import annotations

import itertools
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.raftprobe import MiB, Touch, listening_hosts, rss_kib, send_pickle, stream_huge_frame
from tests.servers import NodeProcess, free_ports, http, running

NAMES = itertools.count()
SINGLE_TOML = Path(__file__).resolve().parents[2] / "config" / "single.toml"


def _swap(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"config/single.toml no longer has exactly one {old!r}"
    return text.replace(old, new)


def single_node(base: Path) -> NodeProcess:
    """config/single.toml as shipped, with data_dir and ports moved to tmp and free ones."""
    api_port, raft_port = free_ports(2)
    node = NodeProcess(
        node_id="single",
        config_path=base / "single.toml",
        data_dir=base / "data",
        api_port=api_port,
        raft_port=raft_port,
        log_path=base / "single.log",
        extra_env={"SCHEDD_RAFT_SECRET": ""},  # empty counts as unset: the file's (none) holds
    )
    text = SINGLE_TOML.read_text()
    text = _swap(text, 'data_dir = "../var/single"', f'data_dir = "{node.data_dir}"')
    text = _swap(text, 'listen = "127.0.0.1:8701"', f'listen = "127.0.0.1:{api_port}"')
    text = _swap(text, 'listen = "127.0.0.1:9701"', f'listen = "127.0.0.1:{raft_port}"')
    raft = tomllib.loads(text)["raft"]
    assert "secret" not in raft and "secret_file" not in raft, "the test needs a secret-less file"
    node.config_path.write_text(text)
    return node


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with running([single_node(tmp_path_factory.mktemp("single"))]) as nodes:
        yield nodes[0]


def assert_serving(node: NodeProcess) -> None:
    """/readyz answers 200 and a write (a new tenant) goes through Raft."""
    status, _, _ = http("GET", f"{node.url}/readyz", token=None)
    assert status == 200
    status, body, _ = http("POST", f"{node.url}/v1/tenants", {"name": f"t{next(NAMES)}"})
    assert status == 201, body


def test_raft_listens_on_the_configured_address_only(node: NodeProcess) -> None:
    assert listening_hosts(node.raft_port) == {"127.0.0.1"}


def test_a_pickle_without_the_secret_is_never_unpickled(node: NodeProcess, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    is_closed = send_pickle(node.raft_port, Touch(marker))
    assert not marker.exists(), "the node unpickled a stranger's frame"
    assert is_closed, "the node kept a stranger's connection open"
    assert_serving(node)


def test_a_huge_frame_is_refused_before_it_is_buffered(node: NodeProcess) -> None:
    assert node.process is not None
    before = rss_kib(node.process.pid)
    assert stream_huge_frame(node.raft_port, 16 * MiB), "no disconnect within 5 s"
    assert rss_kib(node.process.pid) - before < 8 * 1024
    assert_serving(node)


@pytest.mark.slow
def test_the_generated_raft_secret_is_private_and_kept_across_restarts(tmp_path: Path) -> None:
    node = single_node(tmp_path)
    secret_path = node.data_dir / "raft.secret"
    with running([node]):
        secret = secret_path.read_text()
        assert stat.S_IMODE(secret_path.stat().st_mode) == 0o600
        assert len(secret.strip()) >= 32
    with running([node]):
        assert secret_path.read_text() == secret
        assert "generated one in" in node.log_tail(200)  # once, at the first start only
        assert node.log_tail(200).count("no raft secret configured") == 1
        assert_serving(node)
        assert listening_hosts(node.raft_port) == {"127.0.0.1"}
