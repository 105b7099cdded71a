"""Three Raft replicas in one process, built as a node builds its own (`node.raft_conf`, the
node's snapshot hooks), for tests and benchmarks of Raft itself: snapshot shipping, installs.

No HTTP, no dispatch: commands are proposed straight to a replica.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from schedd.config import load_config
from schedd.node import raft_conf
from schedd.raft.replica import Replica
from schedd.raft.snapshots import SnapshotHooks
from schedd.store.apply import StateMachine
from schedd.store.db import Database
from tests.servers import ADMIN_TOKEN, RAFT_SECRET, make_nodes, wait_for

PAD_ROW_BYTES = 64 * 1024


class Member:
    """One replica with its store; `conf` overrides pysyncobj settings after raft_conf's."""

    def __init__(self, config_path: Path, **conf: Any) -> None:
        env = {"SCHEDD_ADMIN_TOKEN": ADMIN_TOKEN, "SCHEDD_RAFT_SECRET": RAFT_SECRET}
        config = load_config(config_path, env=env)
        self.halted: list[str] = []
        self.db = Database(config.data_dir / "state.db")
        self.hooks = SnapshotHooks(self.db, config.data_dir / "raft.snapshot")
        sync_conf = raft_conf(config, self.hooks)
        for key, value in conf.items():
            setattr(sync_conf, key, value)
        self.replica = Replica(
            config.raft_listen,
            list(config.raft_peers),
            sync_conf,
            StateMachine(self.db),
            self._halt,
            restores=self.hooks,
        )
        self.ticks: list[float] = []
        self.replica.addOnTickCallback(lambda: self.ticks.append(time.monotonic()))

    def _halt(self, reason: str) -> None:
        self.halted.append(reason)
        raise RuntimeError(f"halted: {reason}")

    def stop(self) -> None:
        self.replica.destroy_synchronous()
        self.hooks.close()
        self.db.close()


def write_configs(base: Path) -> list[Path]:
    """Configs of three nodes n1..n3 under `base` (data in base/nN), as the cluster tests'."""
    return [node.config_path for node in make_nodes(base, 3)]


def pad(db_path: Path, megabytes: float) -> None:
    """A fresh store grown to about `megabytes` with incompressible rows outside schedd's tables:
    a snapshot copies pages, whatever they hold."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    db = Database(db_path)
    try:
        db.conn.execute("CREATE TABLE padding (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
        db.conn.execute("BEGIN")
        for _ in range(int(megabytes * 2**20) // PAD_ROW_BYTES):
            db.conn.execute("INSERT INTO padding (data) VALUES (?)", (os.urandom(PAD_ROW_BYTES),))
        db.conn.execute("COMMIT")
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def leader_of(members: list[Member]) -> Member | None:
    return next((m for m in members if m.replica.is_leader()), None)


def two_of_three(paths: list[Path], **conf: Any) -> list[Member]:
    """The first two members of a new three-node cluster, running, with the third stopped and
    its data directory deleted (a replaced disk: start it later with `Member(paths[2])` and it
    catches up from them). A new cluster elects no one until each member has heard the others
    (raft/votes.py), so all three run until then."""
    members = [Member(path, **conf) for path in paths]
    try:
        wait_for(
            lambda: leader_of(members) and not any(m.replica.is_vote_unsure() for m in members),
            30,
            "a new cluster's leader",
        )
    except BaseException:
        for member in members:
            member.stop()
        raise
    third = members.pop()
    third.stop()
    shutil.rmtree(third.db.path.parent)
    return members
