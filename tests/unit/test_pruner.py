"""The leader's pruner (issue 14): when it proposes prune commands, and when it waits (not the
leader, runs overdue, a member too old to apply them); peers' reports from /healthz."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedd.dispatch.clock import peer_report
from schedd.dispatch.pruner import NEXT_PIECE_S, PASS_EVERY_S, SPIKE_PAUSE_S, Pruner
from schedd.peers import MEMBERS_NOT_HEARD, PeerReport, PeerReports
from schedd.retention import Retention
from schedd.storage import DiskWatch, MinFree, StorageGuard
from schedd.store.commands import (
    CancelJob,
    CloseSegment,
    CreateJobs,
    LogCommand,
    MoveHistory,
    R,
    SetRetention,
    answer_of,
)
from schedd.store.db import Database, connect
from tests.conftest import NOW_MS


class Proposals:
    def __init__(self, *answers: dict[str, Any]) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self._answers = list(answers)

    def __call__(self, cmd: LogCommand[R]) -> R:
        self.sent.append((cmd.TYPE, cmd.to_body()))
        return answer_of(cmd, self._answers.pop(0))


def pruner(
    db: Database,
    propose: Proposals,
    *,
    leader: bool = True,
    lagging: list[str] | None = None,
    level: int = 12,
) -> Pruner:
    """A pruner of a cluster whose members apply `level` (12: before segments, it prunes)."""
    return Pruner(
        Retention(runs=60_000),
        lambda: connect(db.path, readonly=True),
        lambda: leader,
        propose,
        partitions=4,
        lagging=lambda at: list(lagging or []) + (["n-old"] if at > level else []),
    )


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return Database(tmp_path / "state.db")


def test_a_pass_goes_on_quickly_then_rests(db: Database) -> None:
    propose = Proposals(
        {"status": "ok", "deleted": {}, "next_after": "t5", "done": False},
        {"status": "ok", "deleted": {}, "next_after": "", "done": True},
    )
    loop = pruner(db, propose)
    assert loop.tick(NOW_MS) == NEXT_PIECE_S
    assert loop.tick(NOW_MS) == PASS_EVERY_S
    [(t1, first), (_, second)] = propose.sent
    assert t1 == "prune" and first["after_tenant"] == "" and second["after_tenant"] == "t5"
    assert first["retention_ms"]["runs"] == 60_000 and first["max_rows"] == 250


def test_a_follower_and_a_cluster_with_an_old_member_propose_nothing(db: Database) -> None:
    propose = Proposals()
    assert pruner(db, propose, leader=False).tick(NOW_MS) > 0
    assert pruner(db, propose, lagging=["n3"]).tick(NOW_MS) == PASS_EVERY_S
    assert propose.sent == []


def test_overdue_runs_come_first(db: Database) -> None:
    db.conn.execute(
        "INSERT INTO due (partition, fire_at_ms, job_id, scheduled_at_ms) VALUES (1, ?, 'j', ?)",
        (NOW_MS - 5_000, NOW_MS - 5_000),
    )
    db.conn.commit()
    propose = Proposals()
    assert pruner(db, propose).tick(NOW_MS) == SPIKE_PAUSE_S and propose.sent == []


def test_peer_reports_and_what_an_old_node_says() -> None:
    assert peer_report({"now_ms": 1}) == PeerReport(disk_low=False, log_level=1)  # old version
    assert peer_report({"disk_low": True, "log_level": 2}) == PeerReport(True, 2)
    assert peer_report({"disk_low": "yes", "log_level": True}) == PeerReport(False, 1)
    peers = PeerReports("n1")
    # Before the first probe round the members are unknown: any may be old (an upgrade chaos
    # round: a node restarted on new code proposed claim_batch at once, old members halted).
    assert peers.lagging(2) == [MEMBERS_NOT_HEARD]
    peers.record({"n2": PeerReport(log_level=2)}, ["n1", "n2", "n3"])
    assert peers.lagging(2) == ["n3"]  # never heard from: it may be old
    peers.record({"n3": PeerReport(log_level=1)}, ["n1", "n2", "n3"])
    assert peers.lagging(2) == ["n3"]
    peers.record({"n3": PeerReport(log_level=2)}, ["n1", "n2", "n3"])
    assert peers.lagging(2) == []
    peers.record({}, ["n1", "n2", "n3"])  # n3 down now: it keeps the level it said
    assert peers.lagging(2) == []


def test_a_node_alone_is_sure_of_its_members_after_the_first_probe_round() -> None:
    peers = PeerReports("n1")
    assert peers.lagging(5) == [MEMBERS_NOT_HEARD]
    peers.record({}, ["n1"])
    assert peers.lagging(5) == []


def test_the_api_waits_for_the_first_probe_round_before_newer_commands(tmp_path: Path) -> None:
    from schedd.api.http import check_level
    from schedd.errors import ClusterUnavailable

    peers = PeerReports("n1")
    guard = StorageGuard(DiskWatch(tmp_path, MinFree(bytes=0)), peers)
    check_level(guard, 1)  # the first version's commands: every node applies them
    with pytest.raises(ClusterUnavailable, match="does not know the cluster's members yet"):
        check_level(guard, 2)
    peers.record({"n2": PeerReport(log_level=2)}, ["n1", "n2"])
    check_level(guard, 2)


def test_writes_are_refused_when_a_majority_of_disks_is_low(tmp_path: Path) -> None:
    peers = PeerReports("n1")
    guard = StorageGuard(DiskWatch(tmp_path, MinFree(bytes=0)), peers)
    peers.record({"n2": PeerReport(disk_low=True)}, ["n1", "n2", "n3"])
    assert guard.problem() is None  # one of three
    peers.record({"n3": PeerReport(disk_low=True)}, ["n1", "n2", "n3"])
    problem = guard.problem()
    assert problem is not None and "n2, n3" in problem
    own = StorageGuard(DiskWatch(tmp_path, MinFree(percent=99.99)), PeerReports("n1"))
    assert "storage.min_free" in (own.problem() or "")


def test_the_api_refuses_a_command_an_old_member_cannot_apply(tmp_path: Path) -> None:
    from schedd.api.http import _check_cluster_can_take
    from schedd.errors import ClusterUnavailable, StorageLow

    peers = PeerReports("n1")
    peers.record({"n2": PeerReport(log_level=2), "n3": PeerReport(log_level=1)}, ["n1", "n2", "n3"])
    guard = StorageGuard(DiskWatch(tmp_path, MinFree(bytes=0)), peers)
    retention = SetRetention(tenant_id="t1", retention_ms={})
    with pytest.raises(ClusterUnavailable, match="n3 must run this schedd version first"):
        _check_cluster_can_take(guard, retention)
    create = CreateJobs(tenant_id="t1", jobs=())
    _check_cluster_can_take(guard, create)  # a level-1 command: fine
    low = StorageGuard(DiskWatch(tmp_path, MinFree(percent=99.99)), peers)
    with pytest.raises(StorageLow):
        _check_cluster_can_take(low, create)
    _check_cluster_can_take(low, CancelJob(tenant_id="t1", job_id="j1"))  # frees space


def test_a_long_overload_slows_pruning_but_never_stops_it(db: Database) -> None:
    from schedd.dispatch.pruner import MAX_SPIKE_PAUSE_S, OVERLOADED_PIECE_S

    db.conn.execute(
        "INSERT INTO due (partition, fire_at_ms, job_id, scheduled_at_ms) VALUES (1, ?, 'j', ?)",
        (NOW_MS - 5_000, NOW_MS - 5_000),
    )
    db.conn.commit()
    propose = Proposals({"status": "ok", "deleted": {}, "next_after": "t1", "done": False})
    loop = pruner(db, propose)
    assert loop.tick(NOW_MS) == SPIKE_PAUSE_S and propose.sent == []
    later = NOW_MS + int(MAX_SPIKE_PAUSE_S * 1000)
    assert loop.tick(later) == OVERLOADED_PIECE_S and len(propose.sent) == 1


def add_finished_runs(db: Database, tenant: str, count: int, *, finished_ms: int) -> None:
    db.conn.execute(
        "INSERT INTO tenants (tenant_id, name, token_hash, signing_secret, max_active_jobs, "
        "dispatch_rate, allowed_hosts, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, 's', 10, 10, '[]', 0, 0)",
        (tenant, tenant, f"hash-{tenant}"),
    )
    db.conn.executemany(
        "INSERT INTO runs (job_id, scheduled_at_ms, tenant_id, fire_at_ms, status, attempt, "
        "finished_at_ms) VALUES (?, ?, ?, ?, 'succeeded', 1, ?)",
        [
            (f"{tenant}-{n:05d}", finished_ms, tenant, finished_ms, finished_ms)
            for n in range(count)
        ],
    )
    db.conn.commit()


def applying_pruner(db: Database, retention: Retention) -> Pruner:
    """A leader's pruner whose commands are applied to `db` as Raft would."""
    from schedd.store.apply import StateMachine
    from tests.conftest import Applier

    apply = Applier(StateMachine(db))
    return Pruner(
        retention,
        lambda: connect(db.path, readonly=True),
        lambda: True,
        lambda cmd: apply.propose(cmd, ts_ms=NOW_MS),
        partitions=4,
        lagging=lambda level: ["n-old"] if level > 12 else [],
    )


def runs_of(db: Database, tenant: str) -> int:
    return int(
        db.conn.execute("SELECT COUNT(*) FROM runs WHERE tenant_id = ?", (tenant,)).fetchone()[0]
    )


def test_a_tenant_with_more_rows_than_a_pass_prunes_takes_its_share_and_the_next_goes_on(
    db: Database,
) -> None:
    from schedd.dispatch.pruner import TENANT_SHARE_ROWS

    old = NOW_MS - 120_000  # past the pruner's 60 s retention
    add_finished_runs(db, "a", 8 * TENANT_SHARE_ROWS, finished_ms=old)  # "a" comes first
    add_finished_runs(db, "b", 3, finished_ms=old)
    add_finished_runs(db, "c", 3, finished_ms=old)
    loop = applying_pruner(db, Retention(runs=60_000))
    assert loop.tick(NOW_MS) == NEXT_PIECE_S  # "a" had its share: 250 rows
    assert runs_of(db, "a") == 7 * TENANT_SHARE_ROWS and runs_of(db, "b") == 3
    assert loop.tick(NOW_MS) == NEXT_PIECE_S  # the pass goes on after "a", to its end...
    assert runs_of(db, "b") == 0 and runs_of(db, "c") == 0
    assert runs_of(db, "a") == 7 * TENANT_SHARE_ROWS
    assert loop.tick(NOW_MS) == NEXT_PIECE_S  # ...and the next pass starts at once, with "a"
    assert runs_of(db, "a") == 6 * TENANT_SHARE_ROWS
    add_finished_runs(db, "d", 3, finished_ms=old)  # a tenant that appears meanwhile
    for _ in range(2):
        loop.tick(NOW_MS)
    assert runs_of(db, "d") == 0  # never more than one share of "a" before it


def test_admin_audit_that_uses_a_command_up_does_not_pass_over_the_first_tenant(
    db: Database,
) -> None:
    from schedd.dispatch.pruner import TENANT_SHARE_ROWS

    old = NOW_MS - 120_000
    add_finished_runs(db, "a", 3, finished_ms=old)
    db.conn.executemany(  # admin actions' audit rows, a command's worth and more, all old
        "INSERT INTO audit (at_ms, tenant_id, actor, action) VALUES (?, NULL, 'admin', 'x')",
        [(old,)] * (TENANT_SHARE_ROWS + 10),
    )
    db.conn.commit()
    loop = applying_pruner(db, Retention(runs=60_000, audit=60_000))
    loop.tick(NOW_MS)  # the admin audit takes the whole command: "a" had nothing yet
    assert runs_of(db, "a") == 3
    loop.tick(NOW_MS)  # the rest of the admin audit, then "a"
    assert runs_of(db, "a") == 0


def test_a_lone_tenant_keeps_the_full_pace(db: Database) -> None:
    from schedd.dispatch.pruner import TENANT_SHARE_ROWS

    add_finished_runs(db, "a", 3 * TENANT_SHARE_ROWS, finished_ms=NOW_MS - 120_000)
    loop = applying_pruner(db, Retention(runs=60_000))
    for left in (2, 1, 0):  # a share each command: no command spent on the tenants after it
        assert loop.tick(NOW_MS) == NEXT_PIECE_S
        assert runs_of(db, "a") == left * TENANT_SHARE_ROWS


@pytest.mark.parametrize(
    ("claimed_ago_ms", "open_runs", "sent"),
    [
        (10_000, 1, 0),  # a queue still draining: the completions wait
        (10_000, 0, None),  # drained: written (the prune's own most)
        (61_000, 1, None),  # waited long enough: written even while draining
        (61_000, 20_000, 0),  # a spike still draining: they wait longer
        (601_000, 20_000, None),  # but not for ever
    ],
)
def test_deferred_completions_wait_while_a_queue_drains_but_not_for_long(
    db: Database, claimed_ago_ms: int, open_runs: int, sent: int | None
) -> None:
    db.conn.execute(
        "INSERT INTO batches (batch_id, tenant_id, queue, claimed_at_ms, runs, slots, times, "
        "open, ready_at_ms) VALUES (1, 't1', 'q', ?, x'90', 'r', x'', ?, ?)",
        (NOW_MS - claimed_ago_ms, open_runs, NOW_MS if open_runs else None),
    )
    db.conn.execute("INSERT INTO completions (batch_id, slot) VALUES (1, 0)")
    db.conn.commit()
    propose = Proposals({"status": "ok", "deleted": {}, "next_after": "", "done": True})
    pruner(db, propose).tick(NOW_MS)
    [(_, body)] = propose.sent
    assert body.get("max_completions") == sent


def test_no_pending_completion_sends_no_limit(db: Database) -> None:
    propose = Proposals({"status": "ok", "deleted": {}, "next_after": "", "done": True})
    pruner(db, propose).tick(NOW_MS)
    assert "max_completions" not in propose.sent[0][1]


def test_at_level_13_passes_move_history_then_segments_close_and_drop(db: Database) -> None:
    from schedd.store import segments
    from schedd.store.apply import StateMachine
    from tests.conftest import Applier
    from tests.unit.test_store_segments import H0, history

    apply = Applier(StateMachine(db))
    history(apply)  # a run and audit records of hour H0
    clock = [H0 + segments.PERIOD_MS + segments.CLOSE_GRACE_MS]
    sent: list[str] = []

    carried: dict[str, str | None] = {}

    def propose(cmd: LogCommand[R]) -> R:
        sent.append(cmd.TYPE)
        if isinstance(cmd, CloseSegment):
            carried[cmd.name] = cmd.content_digest
        return apply.propose(cmd, ts_ms=clock[0])

    day = 24 * 3_600_000
    loop = Pruner(
        Retention(runs=7 * day, audit=30 * day),
        lambda: connect(db.path, readonly=True),
        lambda: True,
        propose,
        partitions=4,
        lagging=lambda level: [],
    )
    assert loop.tick(clock[0]) == PASS_EVERY_S  # a whole move pass, started after the grace
    assert sent == ["move_history"]
    states = "SELECT name, state FROM segments ORDER BY name"
    assert [s for _, s in db.conn.execute(states).fetchall()] == ["open", "open"]
    clock[0] += 5_000
    assert loop.tick(clock[0]) == NEXT_PIECE_S
    assert loop.tick(clock[0]) == NEXT_PIECE_S
    assert sent[1:] == ["close_segment", "close_segment"]
    assert [s for _, s in db.conn.execute(states).fetchall()] == ["closed", "closed"]
    for name, digest in db.conn.execute("SELECT name, content_digest FROM segments"):
        # The Pruner's digest (computed off the apply thread), checked against the file.
        assert digest == segments.content_digest(segments.segment_path(db.path.parent, name))
        assert carried[name] == digest
    clock[0] = H0 + 8 * day  # the runs segment is past its retention, the audit one is not
    assert loop.tick(clock[0]) == NEXT_PIECE_S
    assert sent[-1] == "drop_segment"
    assert db.conn.execute(states).fetchall() == [
        (segments.segment_name("audit", H0), "closed"),
        (segments.segment_name("runs", H0), "dropped"),
    ]


def test_a_segment_waits_for_a_whole_pass_that_started_after_its_grace(db: Database) -> None:
    from schedd.store import segments
    from schedd.store.apply import StateMachine
    from tests.conftest import Applier
    from tests.unit.test_store_segments import H0, history

    apply = Applier(StateMachine(db))
    history(apply)
    sent: list[str] = []
    clock = [H0 + segments.PERIOD_MS + 60_000]  # within the grace

    def propose(cmd: LogCommand[R]) -> R:
        sent.append(cmd.TYPE)
        return apply.propose(cmd, ts_ms=clock[0])

    loop = Pruner(
        Retention(),
        lambda: connect(db.path, readonly=True),
        lambda: True,
        propose,
        partitions=4,
        lagging=lambda level: [],
    )
    loop.tick(clock[0])
    clock[0] = H0 + segments.PERIOD_MS + segments.CLOSE_GRACE_MS + 1
    loop.tick(clock[0])  # the pass before the grace ended does not count: another pass
    assert sent == ["move_history", "move_history"]
    loop.tick(clock[0])
    assert sent[-1] == "close_segment"


@pytest.mark.parametrize(("level", "summarize"), [(13, False), (14, True)])
def test_a_move_asks_for_the_moved_runs_summaries_once_every_member_applies_14(
    db: Database, level: int, summarize: bool
) -> None:
    sent: list[LogCommand[Any]] = []

    def propose(cmd: LogCommand[R]) -> R:
        sent.append(cmd)
        return answer_of(cmd, {"status": "ok", "deleted": {}, "next_after": "", "done": True})

    loop = pruner(db, propose, level=level)
    loop.tick(NOW_MS)
    [move] = [cmd for cmd in sent if isinstance(cmd, MoveHistory)]
    assert move.summarize is summarize
    assert move.needed_level() == level
