"""Durable file swaps (store/files.py) and the places that swap files: snapshots and backups.

`os.fsync` and `os.replace` are wrapped to record, in order, which path each one touched.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from schedd.raft.snapshots import SUCCESS, SnapshotHooks
from schedd.store.backup import restore_backup, write_backup
from schedd.store.db import Database
from schedd.store.files import durable_replace
from tests.conftest import Applier

Events = list[tuple[str, ...]]


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Events:
    """Every os.fsync (by the path of its descriptor) and os.replace, in order."""
    seen: Events = []
    real_fsync: Callable[[int], None] = os.fsync
    real_replace: Callable[..., None] = os.replace

    def fsync(fd: int) -> None:
        seen.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(source: Any, target: Any, **kwargs: Any) -> None:
        seen.append(("replace", str(source), str(target)))
        real_replace(source, target, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return seen


def assert_durably_replaced(events: Events, source: Path, target: Path) -> None:
    """`source` was fsynced, then renamed onto `target`, then the directory was fsynced."""
    rename = ("replace", str(source), str(target))
    assert rename in events, events
    at = events.index(rename)
    assert ("fsync", str(source)) in events[:at], events
    assert ("fsync", str(target.parent)) in events[at + 1 :], events


def test_durable_replace_syncs_the_file_then_renames_then_syncs_the_directory(
    tmp_path: Path, events: Events
) -> None:
    source, target = tmp_path / "new.tmp", tmp_path / "file"
    target.write_text("old")
    source.write_text("new")
    durable_replace(source, target)
    assert events == [
        ("fsync", str(source)),
        ("replace", str(source), str(target)),
        ("fsync", str(tmp_path)),
    ]
    assert target.read_text() == "new" and not source.exists()


def test_durable_replace_of_a_synced_file_only_syncs_the_directory(
    tmp_path: Path, events: Events
) -> None:
    source, target = tmp_path / "new.tmp", tmp_path / "file"
    source.write_text("new")
    durable_replace(source, target, is_source_synced=True)
    assert events == [("replace", str(source), str(target)), ("fsync", str(tmp_path))]


def _wait_check(hooks: SnapshotHooks, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while (state := hooks.check()) != SUCCESS:
        assert time.monotonic() < deadline, f"snapshot not done: state {state}"
        time.sleep(0.01)
    return state


def test_a_snapshot_is_synced_before_it_is_renamed_into_place(
    db: Database, apply: Applier, tmp_path: Path, events: Events
) -> None:
    apply("create_tenant", _tenant("acme"))
    dump = tmp_path / "raft.snapshot"
    hooks = SnapshotHooks(db, dump)
    hooks.serialize(str(tmp_path / "raft.snapshot.tmp"), {"raft": 1})
    _wait_check(hooks)
    assert_durably_replaced(events, dump.with_name("raft.snapshot.building"), dump)
    assert dump.stat().st_size > 0


def test_a_backup_and_its_restore_are_synced_before_their_renames(
    db: Database, apply: Applier, tmp_path: Path, events: Events
) -> None:
    apply("create_tenant", _tenant("acme"))
    out = tmp_path / "backups" / "backup.db"
    out.parent.mkdir()
    write_backup(tmp_path, out)
    assert_durably_replaced(events, out.with_name("backup.db.partial"), out)
    events.clear()
    fresh = tmp_path / "fresh"
    restore_backup(out, fresh)
    assert_durably_replaced(events, fresh / "state.db.restoring", fresh / "state.db")


def _tenant(name: str) -> dict[str, Any]:
    return {
        "tenant_id": f"t-{name}",
        "name": name,
        "token_hash": f"hash-{name}",
        "signing_secret": "whsec_x",
        "max_active_jobs": 10,
        "dispatch_rate": 100,
        "allowed_hosts": [],
    }
