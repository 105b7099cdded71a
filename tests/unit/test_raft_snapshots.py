"""pysyncobj's snapshot hooks (raft/snapshots.py): restoring a newer snapshot replaces the store
and tells the node, which forgets what it cached of the old state (its tenant tokens)."""

from __future__ import annotations

import asyncio
import pickle
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.api.context import token_hash
from schedd.config import load_config
from schedd.node import Node
from schedd.raft import snapshots
from schedd.raft.snapshots import SnapshotHooks
from schedd.store.apply import StateMachine
from schedd.store.db import Database
from schedd.store.snapshot import SnapshotError, read_snapshot, write_snapshot
from tests.conftest import Applier

OLD_TOKEN, NEW_TOKEN = "sk_old_token", "sk_new_token"


def _create_tenant(apply: Applier) -> None:
    assert apply("create_tenant", _tenant_body())["status"] == "ok"


def _rotate(apply: Applier) -> None:
    body = {"tenant_id": "t1", "token_hash": token_hash(NEW_TOKEN), "signing_secret": "whsec_y"}
    assert apply("rotate_tenant", body)["status"] == "ok"


@pytest.fixture
def leader_snapshot(tmp_path: Path) -> Iterator[Path]:
    """A snapshot of a store where the tenant was created, then its token rotated."""
    leader = Database(tmp_path / "leader" / "state.db")
    try:
        apply = Applier(StateMachine(leader))
        _create_tenant(apply)
        _rotate(apply)
        path = tmp_path / "leader.snapshot"
        write_snapshot(leader.path, path, pickle.dumps({"raft": "state"}))
        yield path
    finally:
        leader.close()


def _token_hash_in(db: Database) -> str:
    row = db.conn.execute("SELECT token_hash FROM tenants WHERE tenant_id = 't1'").fetchone()
    return str(row[0])


def test_a_newer_snapshot_replaces_the_store_and_calls_on_restore(
    db: Database, apply: Applier, leader_snapshot: Path, tmp_path: Path
) -> None:
    _create_tenant(apply)  # this node lagged: it never applied the rotation
    restored: list[bool] = []
    hooks = SnapshotHooks(db, tmp_path / "raft.snapshot", on_restore=lambda: restored.append(True))
    assert hooks.deserialize(str(leader_snapshot)) == {"raft": "state"}
    assert restored == []  # the copy runs on its own thread; the tick thread completes it
    hooks.wait_restored()
    assert restored == [True]
    assert hooks.settled()
    assert _token_hash_in(db) == token_hash(NEW_TOKEN)
    hooks.deserialize(str(leader_snapshot))  # not newer than the live store any more: kept
    assert hooks.settled()
    assert restored == [True]


def test_a_copy_that_fails_is_reported_when_the_tick_thread_settles_it(
    db: Database,
    apply: Applier,
    leader_snapshot: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken_copy(db: Database, source: Any) -> None:
        source.close()
        raise OSError("disk full")

    monkeypatch.setattr(snapshots, "restore_snapshot", broken_copy)
    restored: list[bool] = []
    hooks = SnapshotHooks(db, tmp_path / "raft.snapshot", on_restore=lambda: restored.append(True))
    hooks.deserialize(str(leader_snapshot))
    with pytest.raises(SnapshotError, match="disk full"):
        hooks.wait_restored()
    with pytest.raises(SnapshotError, match="disk full"):  # at every tick, not once
        hooks.settled()
    with pytest.raises(SnapshotError, match="disk full"):  # nor forgotten by a newer install
        hooks.deserialize(str(leader_snapshot))
    assert restored == []


def test_a_snapshot_can_be_written_of_a_store_a_cut_short_restore_left_its_table_in(
    db: Database, tmp_path: Path
) -> None:
    db.conn.execute("CREATE TABLE snapshot_raft (state BLOB NOT NULL)")
    write_snapshot(db.path, tmp_path / "snap", b"state")
    assert read_snapshot(tmp_path / "snap")[1] == b"state"


def test_a_snapshot_being_built_when_one_is_installed_is_void(
    db: Database, apply: Applier, leader_snapshot: Path, tmp_path: Path
) -> None:
    """The build copies the old state: swapped in after the install, it would replace the
    installed snapshot on disk with an older one."""
    _create_tenant(apply)
    hooks = SnapshotHooks(db, tmp_path / "raft.snapshot")
    hooks.serialize(str(tmp_path / "raft.snapshot.tmp"), {"raft": "old"})
    hooks.deserialize(str(leader_snapshot))
    hooks.wait_restored()
    deadline = time.monotonic() + 10
    while (state := hooks.check()) == snapshots.SERIALIZING:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert state == snapshots.FAILED


def test_a_node_forgets_its_cached_tokens_when_it_installs_a_snapshot(
    tmp_path: Path, leader_snapshot: Path
) -> None:
    config_path = tmp_path / "node.toml"
    config_path.write_text(f'[node]\nid = "n1"\ndata_dir = "{tmp_path / "n1"}"\n')
    node = Node(load_config(config_path, env={"SCHEDD_ADMIN_TOKEN": "adm_" + "x" * 24}))
    try:
        _create_tenant(Applier(node.machine))
        node.tokens.put(token_hash(OLD_TOKEN), "t1", generation=node.tokens.generation)
        node.snapshots.deserialize(str(leader_snapshot))
        node.snapshots.wait_restored()
        assert node.tokens.get(token_hash(OLD_TOKEN)) is None
    finally:
        asyncio.run(node.stop())


def _tenant_body() -> dict[str, Any]:
    return {
        "tenant_id": "t1",
        "name": "acme",
        "token_hash": token_hash(OLD_TOKEN),
        "signing_secret": "whsec_x",
        "max_active_jobs": 10,
        "dispatch_rate": 100,
        "allowed_hosts": [],
    }


def _padded_snapshot(tmp_path: Path) -> Path:
    db = Database(tmp_path / "padded" / "state.db")
    try:
        db.conn.execute("CREATE TABLE padding (data BLOB NOT NULL)")
        for _ in range(8):
            db.conn.execute("INSERT INTO padding (data) VALUES (randomblob(65536))")
        path = tmp_path / "padded.snapshot"
        write_snapshot(db.path, path, pickle.dumps({"raft": "state"}))
        return path
    finally:
        db.close()


@pytest.mark.parametrize("damage", ["chunk lost", "chunk twice", "cut short"])
def test_a_snapshot_file_not_as_long_as_its_header_says_is_refused(
    tmp_path: Path, db: Database, damage: str
) -> None:
    """Snapshots reach a follower in 64 KiB chunks; around a reconnect pysyncobj may go on with
    the next chunk. SQLite would read such a file without complaint (only the pages it
    touches), so the hooks check its length before anything is restored."""
    path = _padded_snapshot(tmp_path)
    data = path.read_bytes()
    chunk = 65536
    assert read_snapshot(path)[1] == pickle.dumps({"raft": "state"})  # whole: accepted
    damaged = {
        "chunk lost": data[:chunk] + data[2 * chunk :],
        "chunk twice": data[: 2 * chunk] + data[chunk:],
        "cut short": data[: len(data) - 4096],
    }[damage]
    path.write_bytes(damaged)
    with pytest.raises(SnapshotError, match="not a whole snapshot"):
        read_snapshot(path)
    hooks = SnapshotHooks(db, tmp_path / "raft.snapshot")
    with pytest.raises(SnapshotError):
        hooks.deserialize(str(path))  # pysyncobj logs it; the leader ships the snapshot again
    assert hooks.settled()
