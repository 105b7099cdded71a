"""History segments in apply (issue 35 §1, log level 13): move_history moves finished history
into per-hour segment files, close_segment makes one immutable with its rows' digest,
drop_segment forgets it and unlinks the file; a crash between a segment's commit and
state.db's neither loses nor duplicates rows; two stores applying the same commands agree."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from schedd.retention import Retention
from schedd.store import segments
from schedd.store.apply import StateMachine
from schedd.store.apply import history as apply_history
from schedd.store.command import Command, encode
from schedd.store.db import Database
from schedd.store.digest import state_digest
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_dispatch import claim, count, receive, setup

SEC = 1_000
HOUR = 3_600_000
DAY = 24 * HOUR
RETENTION = Retention(runs=7 * DAY, audit=30 * DAY, deadletters=14 * DAY, messages=HOUR)
H0 = segments.period_start(NOW_MS)


def move(apply: Applier, ts_ms: int, **changes: int) -> dict[str, Any]:
    body = {"retention_ms": RETENTION.as_ms() | changes, "after_tenant": "", "max_rows": 1_000}
    result = apply("move_history", body, ts_ms=ts_ms)
    assert result["status"] == "ok", result
    return result


def history(apply: Applier) -> None:
    """j1 runs once at NOW_MS, acked a second later (hour H0); a second job's message is never
    received and becomes a dead letter at H0 + 1 h + 1 s (hour H0 + 1)."""
    setup(apply, schedule={"run_at": "2026-09-21T14:13:20Z"})
    claim(apply, next_ms=None)
    [message] = receive(apply, NOW_MS, "r1")
    body = {"tenant_id": "t1", "queue": "q", "receipts": [message["receipt"]]}
    assert apply("ack_messages", body, ts_ms=NOW_MS + SEC)["acked"] == 1


def seg(db: Database, name: str) -> sqlite3.Connection:
    return sqlite3.connect(segments.segment_path(db.path.parent, name))


def test_names_paths_and_periods() -> None:
    name = segments.segment_name("runs", NOW_MS)
    assert name == "runs-2026092114"
    assert segments.parse_name(name) == ("runs", H0)
    assert segments.segment_path(Path("/d"), name) == Path("/d/history/runs-2026092114.db")
    with pytest.raises(segments.SegmentName):
        segments.segment_path(Path("/d"), "../state")


def test_finished_history_moves_into_its_hours_segment(apply: Applier, db: Database) -> None:
    history(apply)
    records = count(db, "SELECT COUNT(*) FROM audit")  # the tenant's and the job's creation
    same_hour = move(apply, NOW_MS + 2 * SEC)  # the run ended in the current hour: it stays
    assert same_hour["moved"] == {"runs": 0, "deadletters": 0, "audit": 0}
    moved = move(apply, NOW_MS + HOUR)
    # The newest audit record stays live: the next one is numbered after it, not from 1.
    assert moved["moved"] == {"runs": 1, "deadletters": 0, "audit": records - 1}
    assert moved["done"]
    assert count(db, "SELECT COUNT(*) FROM runs") == 0
    assert count(db, "SELECT COUNT(*) FROM attempts") == 0
    assert count(db, "SELECT COUNT(*) FROM audit") == 1
    runs_name = segments.segment_name("runs", NOW_MS)
    rows = db.conn.execute("SELECT name, family, state, rows, content_digest FROM segments")
    assert sorted(rows.fetchall()) == [
        (segments.segment_name("audit", NOW_MS), "audit", "open", records - 1, None),
        (runs_name, "runs", "open", 1, None),
    ]
    part = seg(db, runs_name)
    assert part.execute("SELECT job_id, status FROM runs").fetchall() == [("j1", "succeeded")]
    assert part.execute("SELECT attempt, outcome FROM attempts").fetchall() == [(1, "succeeded")]
    assert segments.applied_index(part) == apply.index - 0  # the last move wrote it
    assert db.conn.execute("SELECT status FROM jobs").fetchone() == ("completed",)  # stays live


def test_a_dead_letter_moves_into_the_hour_it_was_made(apply: Applier, db: Database) -> None:
    setup(apply)
    claim(apply)  # a message never received
    move(apply, NOW_MS + HOUR + SEC)  # expired into a dead letter (hour H0 + 1)
    assert count(db, "SELECT COUNT(*) FROM deadletters") == 1
    moved = move(apply, NOW_MS + 2 * HOUR + SEC)
    assert moved["moved"]["deadletters"] == 1 and moved["moved"]["runs"] == 1
    name = segments.segment_name("deadletters", NOW_MS + HOUR + SEC)
    assert seg(db, name).execute("SELECT COUNT(*) FROM deadletters").fetchone() == (1,)
    assert count(db, "SELECT COUNT(*) FROM deadletters") == 0


def test_close_records_the_digest_and_leaves_an_immutable_file(
    apply: Applier, db: Database
) -> None:
    history(apply)
    move(apply, NOW_MS + HOUR)
    name = segments.segment_name("runs", NOW_MS)
    early = apply("close_segment", {"name": name}, ts_ms=H0 + HOUR + 60 * SEC)
    assert early["status"] == "rejected" and early["code"] == "conflict"  # within the grace
    closed = apply("close_segment", {"name": name}, ts_ms=H0 + HOUR + segments.CLOSE_GRACE_MS)
    assert closed["status"] == "ok" and closed["rows"] == 1
    path = segments.segment_path(db.path.parent, name)
    assert closed["content_digest"] == segments.content_digest(path)
    row = db.conn.execute(
        "SELECT state, content_digest, closed_index FROM segments WHERE name = ?", (name,)
    ).fetchone()
    assert row == ("closed", closed["content_digest"], apply.index)
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()
    assert mode == ("delete",)
    again = apply("close_segment", {"name": name}, ts_ms=H0 + 2 * HOUR)
    assert again["status"] == "rejected"


def test_a_move_never_writes_into_a_closed_segment(apply: Applier, db: Database) -> None:
    history(apply)
    move(apply, NOW_MS + HOUR)
    name = segments.segment_name("runs", NOW_MS)
    apply("close_segment", {"name": name}, ts_ms=H0 + 2 * HOUR)
    before = segments.content_digest(segments.segment_path(db.path.parent, name))
    # A late run of hour H0 (its end written in H0, applied after the close): the next hour's.
    late = {"tenant_id": "t1", "job_id": "j2", "scheduled_at_ms": NOW_MS, "status": "succeeded"}
    db.conn.execute(
        "INSERT INTO runs (job_id, scheduled_at_ms, tenant_id, fire_at_ms, status, attempt, "
        "finished_at_ms) VALUES (:job_id, :scheduled_at_ms, :tenant_id, :scheduled_at_ms, "
        ":status, 1, :scheduled_at_ms)",
        late,
    )
    move(apply, NOW_MS + 3 * HOUR)
    assert segments.content_digest(segments.segment_path(db.path.parent, name)) == before
    later = segments.segment_name("runs", H0 + HOUR)
    assert seg(db, later).execute("SELECT job_id FROM runs").fetchall() == [("j2",)]


def test_drop_marks_a_closed_segment_dropped_and_unlinks_its_file(
    apply: Applier, db: Database
) -> None:
    history(apply)
    move(apply, NOW_MS + HOUR)
    name = segments.segment_name("runs", NOW_MS)
    refused = apply("drop_segment", {"name": name}, ts_ms=NOW_MS + 8 * DAY)
    assert refused["status"] == "rejected"  # still open
    apply("close_segment", {"name": name}, ts_ms=H0 + 2 * HOUR)
    assert apply("drop_segment", {"name": name}, ts_ms=NOW_MS + 8 * DAY)["status"] == "ok"
    dropped = f"SELECT COUNT(*) FROM segments WHERE name = '{name}' AND state = 'dropped'"
    assert count(db, dropped) == 1  # kept as dropped: the name is never reopened
    path = segments.segment_path(db.path.parent, name)
    deadline = time.monotonic() + 5
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # unlinked off the apply thread
    assert not path.exists()


def test_a_crash_between_the_two_commits_neither_loses_nor_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashed, steady = Database(tmp_path / "a" / "state.db"), Database(tmp_path / "b" / "state.db")
    first, second = Applier(StateMachine(crashed)), Applier(StateMachine(steady))
    for apply in (first, second):
        history(apply)
    body = {"retention_ms": RETENTION.as_ms(), "after_tenant": "", "max_rows": 1_000}
    entry = encode(Command(type="move_history", id="m1", ts_ms=NOW_MS + HOUR, body=body))
    index = first.index + 1
    commit = crashed.segments.commit

    def commit_then_crash() -> None:
        commit()
        raise OSError("killed between the segment's commit and state.db's")

    monkeypatch.setattr(crashed.segments, "commit", commit_then_crash)
    with pytest.raises(OSError):
        first.machine.apply(entry, index=index)
    monkeypatch.undo()
    runs_name = segments.segment_name("runs", NOW_MS)
    assert count(crashed, "SELECT COUNT(*) FROM runs") == 1  # state.db rolled back
    assert seg(crashed, runs_name).execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)
    replayed = first.machine.apply(entry, index=index)  # the restart's replay of the entry
    second.machine.apply(entry, index=index)
    assert replayed["moved"]["runs"] == 1
    assert count(crashed, "SELECT COUNT(*) FROM runs") == 0
    assert seg(crashed, runs_name).execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)
    assert state_digest(crashed.conn) == state_digest(steady.conn)
    names = [name for (name,) in steady.conn.execute("SELECT name FROM segments")]
    assert len(names) == 2
    for name in names:
        assert segments.content_digest(
            segments.segment_path(crashed.path.parent, name)
        ) == segments.content_digest(segments.segment_path(steady.path.parent, name))
    crashed.close()
    steady.close()


def test_two_stores_applying_the_same_commands_agree(tmp_path: Path) -> None:
    stores = [Database(tmp_path / n / "state.db") for n in ("a", "b")]
    for db in stores:
        apply = Applier(StateMachine(db))
        history(apply)
        move(apply, NOW_MS + HOUR)
        for name in ("runs", "audit"):
            closing = {"name": segments.segment_name(name, NOW_MS)}
            assert apply("close_segment", closing, ts_ms=H0 + 2 * HOUR)["status"] == "ok"
    a, b = stores
    assert state_digest(a.conn) == state_digest(b.conn)
    digests = a.conn.execute("SELECT name, content_digest FROM segments ORDER BY name")
    for name, digest in digests.fetchall():
        for db in stores:
            assert segments.content_digest(segments.segment_path(db.path.parent, name)) == digest
    for db in stores:
        db.close()


def test_a_snapshot_carries_the_open_segments_not_the_closed_ones(tmp_path: Path) -> None:
    from schedd.store.snapshot import restore_snapshot, write_snapshot

    leader = Database(tmp_path / "leader" / "state.db")
    apply = Applier(StateMachine(leader))
    history(apply)
    move(apply, NOW_MS + HOUR)
    apply("close_segment", {"name": segments.segment_name("audit", NOW_MS)}, ts_ms=H0 + 2 * HOUR)
    snapshot = tmp_path / "snapshot"
    assert write_snapshot(leader.path, snapshot, b"raft") == apply.index
    follower = Database(tmp_path / "follower" / "state.db")
    stale = segments.segment_path(follower.path.parent, segments.segment_name("runs", NOW_MS))
    stale.parent.mkdir(parents=True)
    segments.open_writer(stale, "runs").execute(  # this node's older state: ahead, wrong rows
        "INSERT INTO meta (key, value) VALUES ('applied_index', 10000)"
    )
    restore_snapshot(follower, snapshot)
    assert state_digest(follower.conn) == state_digest(leader.conn)
    runs_name = segments.segment_name("runs", NOW_MS)
    assert segments.content_digest(
        segments.segment_path(follower.path.parent, runs_name)
    ) == segments.content_digest(segments.segment_path(leader.path.parent, runs_name))
    audit_path = segments.segment_path(follower.path.parent, segments.segment_name("audit", NOW_MS))
    assert not audit_path.exists()  # closed: fetched apart
    # Both go on alike from the snapshot's index.
    body = {"retention_ms": RETENTION.as_ms(), "after_tenant": "", "max_rows": 1_000}
    entry = encode(Command(type="move_history", id="after", ts_ms=H0 + 3 * HOUR, body=body))
    for db in (leader, follower):
        assert StateMachine(db).apply(entry, index=apply.index + 1)["status"] == "ok"
        closing = Command(
            type="close_segment", id="close", ts_ms=H0 + 3 * HOUR, body={"name": runs_name}
        )
        assert StateMachine(db).apply(encode(closing), index=apply.index + 2)["status"] == "ok"
    assert state_digest(follower.conn) == state_digest(leader.conn)
    leader.close()
    follower.close()


def test_a_backfill_sees_the_runs_of_the_open_segments(apply: Applier, db: Database) -> None:
    history(apply)
    move(apply, NOW_MS + HOUR)  # j1's run at NOW_MS is in an open segment now
    body = {"tenant_id": "t1", "job_id": "j1", "slots": [NOW_MS - HOUR, NOW_MS], "per_s": 10}
    result = apply("backfill_job", body, ts_ms=NOW_MS + HOUR)
    assert result["runs"] == 1  # only the slot without a run
    assert db.conn.execute("SELECT scheduled_at_ms FROM backfills").fetchall() == [(NOW_MS - HOUR,)]


def test_a_backfill_planned_before_a_segment_closed_is_refused_as_stale(
    apply: Applier, db: Database
) -> None:
    history(apply)
    move(apply, NOW_MS + HOUR)
    name = segments.segment_name("runs", NOW_MS)
    apply("close_segment", {"name": name}, ts_ms=H0 + 2 * HOUR)
    closed_index = apply.index
    body = {"tenant_id": "t1", "job_id": "j1", "slots": [NOW_MS - HOUR], "per_s": 10}
    stale = apply("backfill_job", body | {"closed_through": closed_index - 1}, ts_ms=H0 + 2 * HOUR)
    assert stale["status"] == "rejected" and stale["code"] == "stale_state"
    fresh = apply("backfill_job", body | {"closed_through": closed_index}, ts_ms=H0 + 2 * HOUR)
    assert fresh["runs"] == 1


def test_a_carried_digest_closes_only_at_the_row_count_it_was_computed_at(
    apply: Applier, db: Database
) -> None:
    history(apply)
    move(apply, NOW_MS + HOUR)
    name = segments.segment_name("runs", NOW_MS)
    digest = segments.content_digest(segments.segment_path(db.path.parent, name))
    at = H0 + 2 * HOUR
    stale = apply("close_segment", {"name": name, "rows": 2, "content_digest": digest}, ts_ms=at)
    assert stale["status"] == "rejected" and stale["code"] == "stale_state"
    closed = apply("close_segment", {"name": name, "rows": 1, "content_digest": digest}, ts_ms=at)
    assert closed["status"] == "ok" and closed["content_digest"] == digest


def test_a_row_that_ended_in_a_dropped_hour_goes_to_a_later_hour_never_reopening_it(
    apply: Applier, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A late move (a leader whose clock is behind the one that dropped the hour) must not
    reopen the dropped name while nodes still unlink its file (found in review)."""
    pending: list[Path] = []
    monkeypatch.setattr(apply_history, "unlink_later", pending.append)  # not run yet
    history(apply)
    move(apply, NOW_MS + HOUR)
    name = segments.segment_name("runs", NOW_MS)
    apply("close_segment", {"name": name}, ts_ms=H0 + 2 * HOUR)
    assert apply("drop_segment", {"name": name}, ts_ms=H0 + 2 * HOUR)["status"] == "ok"
    assert [p.name for p in pending] == [f"{name}.db"]
    db.conn.execute(
        "INSERT INTO runs (job_id, scheduled_at_ms, tenant_id, fire_at_ms, status, attempt, "
        "finished_at_ms) VALUES ('j2', ?, 't1', ?, 'succeeded', 1, ?)",
        (NOW_MS, NOW_MS, NOW_MS),
    )
    move(apply, NOW_MS + 3 * HOUR)
    state = db.conn.execute("SELECT state, rows FROM segments WHERE name = ?", (name,)).fetchone()
    assert state == (segments.DROPPED, 0)
    later = segments.segment_name("runs", NOW_MS + HOUR)
    assert seg(db, later).execute("SELECT job_id FROM runs").fetchall() == [("j2",)]
    assert apply("drop_segment", {"name": name}, ts_ms=H0 + 3 * HOUR)["status"] == "rejected"
