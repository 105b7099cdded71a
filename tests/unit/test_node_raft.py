"""node.raft_conf and raft_secret_for: every node has a Raft secret and binds raft.listen only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from schedd.cli.devcluster import write_configs
from schedd.config import NodeConfig, load_config
from schedd.errors import ConfigError
from schedd.node import admin_token_for, payload_keys_for, raft_conf, raft_secret_for
from schedd.raft.snapshots import SnapshotHooks

SECRET = "raft_unit_secret_0123456789abcdef"


def hooks() -> SnapshotHooks:
    return SnapshotHooks.__new__(SnapshotHooks)  # raft_conf only takes its bound methods


def single(tmp_path: Path, **fields: object) -> NodeConfig:
    return NodeConfig(path=tmp_path / "n.toml", node_id="n1", data_dir=tmp_path / "d", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("listen", "bind"),
    [
        ("127.0.0.1:9701", "127.0.0.1:9701"),
        ("[::1]:9701", "::1:9701"),
        ("10.0.0.5:1", "10.0.0.5:1"),
    ],
)
def test_raft_binds_exactly_its_listen_address(tmp_path: Path, listen: str, bind: str) -> None:
    conf = raft_conf(single(tmp_path, raft_listen=listen, raft_secret=SECRET), hooks())
    # pysyncobj splits bindAddress at its last ':' and binds that host (no brackets).
    assert conf.bindAddress == bind


def test_a_configured_secret_is_the_raft_password(tmp_path: Path) -> None:
    assert raft_conf(single(tmp_path, raft_secret=SECRET), hooks()).password == SECRET
    assert not (tmp_path / "d" / "raft.secret").exists()


def test_a_single_node_without_a_secret_generates_one_once(tmp_path: Path) -> None:
    first = raft_conf(single(tmp_path), hooks()).password
    path = tmp_path / "d" / "raft.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert isinstance(first, str) and len(first) >= 32
    assert raft_secret_for(single(tmp_path)) == first


def test_the_environment_overrides_a_generated_secret(tmp_path: Path) -> None:
    raft_secret_for(single(tmp_path))
    config = tmp_path / "n.toml"
    config.write_text(f'[node]\nid = "n1"\ndata_dir = "{tmp_path / "d"}"\n')
    loaded = load_config(config, env={"SCHEDD_RAFT_SECRET": SECRET})
    assert raft_conf(loaded, hooks()).password == SECRET


def test_a_cluster_without_a_secret_still_refuses_to_start(tmp_path: Path) -> None:
    config = tmp_path / "n.toml"
    config.write_text(
        f'[node]\nid = "n1"\ndata_dir = "{tmp_path}"\n'
        '[raft]\nlisten = "127.0.0.1:9701"\npeers = ["127.0.0.1:9702"]\n'
    )
    with pytest.raises(ConfigError, match=r"no raft\.secret"):
        load_config(config, env={})


@pytest.mark.parametrize("nodes", [1, 3])
def test_schedd_dev_gives_every_node_a_raft_secret(tmp_path: Path, nodes: int) -> None:
    for path in write_configs(tmp_path, nodes, api_port=18701, raft_port=19701):
        assert load_config(path, env={}).raft_secret is not None
    assert stat.S_IMODE((tmp_path / "cluster.secret").stat().st_mode) == 0o600


def test_a_damaged_generated_secret_is_refused_not_used(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "raft.secret").write_text("\n")
    with pytest.raises(ConfigError, match="fewer than 16"):
        raft_secret_for(single(tmp_path))


def test_generated_secrets_are_durable_before_the_node_uses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A power loss must not bring back a data directory without the secret it generated (the
    # node would make another one, and its peers or clients would no longer match).
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    data = tmp_path / "d"
    raft_secret_for(single(tmp_path))
    assert synced == [str(data / "raft.secret.tmp"), str(data)]
    synced.clear()
    admin_token_for(single(tmp_path))
    assert synced == [str(data / "admin.token.tmp"), str(data)]
    assert stat.S_IMODE((data / "admin.token").stat().st_mode) == 0o600


def test_a_single_node_asked_to_generate_its_payload_key_once(tmp_path: Path) -> None:
    assert not payload_keys_for(single(tmp_path)).enabled  # no [encryption]: as before
    assert not (tmp_path / "d" / "payload.keys").exists()
    keys = payload_keys_for(single(tmp_path, generate_payload_key=True))
    path = tmp_path / "d" / "payload.keys"
    assert keys.enabled and stat.S_IMODE(path.stat().st_mode) == 0o600
    sealed = keys.seal({"url": "redis://u:pw@h"})
    assert "u:pw@h" not in str(sealed)  # ':' and '@' are not base64: a bare "pw" can occur
    again = payload_keys_for(single(tmp_path, generate_payload_key=True))
    assert again.open(sealed) == {"url": "redis://u:pw@h"}  # the same key, kept


@pytest.mark.parametrize("nodes", [1, 3])
def test_schedd_dev_gives_every_node_the_same_payload_key(tmp_path: Path, nodes: int) -> None:
    configs = [load_config(p, env={}) for p in write_configs(tmp_path, nodes, 18701, 19701)]
    assert {cfg.payload_keys_file for cfg in configs} == {tmp_path / "payload.keys"}
    assert stat.S_IMODE((tmp_path / "payload.keys").stat().st_mode) == 0o600
    sealed = payload_keys_for(configs[0]).seal("x")
    assert payload_keys_for(configs[-1]).open(sealed) == "x"
    key = (tmp_path / "payload.keys").read_text()
    write_configs(tmp_path, nodes, 18701, 19701)
    assert (tmp_path / "payload.keys").read_text() == key  # kept across runs
