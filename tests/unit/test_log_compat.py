"""Old log entries still apply: journals written by a real node, kept as fixtures (level 2,
issue 15; level 3, issue 17).

tests/fixtures/make_journal_fixture.py wrote the entries, the results the state machine of its
day returned for each, and the state digest after them. Today's state machine must agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schedd.sealing import PREFIX
from schedd.store import segments
from schedd.store.apply import StateMachine
from schedd.store.commands import BROKER_TARGET_TYPES, CATALOGUE
from schedd.store.db import Database
from schedd.store.digest import state_digest

FIXTURES = Path(__file__).parent.parent / "fixtures"
# Every wire type of log level <= 2: the fixture must hold each one (a wire name never goes).
LEVEL_2_TYPES = frozenset(
    {
        "register_node",
        "deregister_node",
        "barrier",
        "create_tenant",
        "update_tenant",
        "rotate_tenant",
        "create_jobs",
        "cancel_job",
        "update_job",
        "pause_job",
        "resume_job",
        "trigger_job",
        "node_heartbeat",
        "assign_leases",
        "claim_runs",
        "receive_messages",
        "ack_messages",
        "nack_messages",
        "extend_messages",
        "redrive_deadletter",
        "delete_deadletter",
        "record_callbacks",
        "set_retention",
        "prune",
    }
)


# Level 3 (issue 17): tenants' broker connections.
LEVEL_3_TYPES = LEVEL_2_TYPES | {"create_connection", "delete_connection"}
# The credentials of every connection URL the level-3 journal was recorded with (the
# generator's USER and SECRET): no entry or result may hold them.
CREDENTIALS = ("fixture-user", "fixture-c0nn-s3cret")


def _lines(level: int = 2) -> list[dict[str, Any]]:
    text = (FIXTURES / f"journal-level{level}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _types(entry: str) -> list[str]:
    cmd = json.loads(entry)
    if cmd["type"] == "batch":
        return [str(sub["type"]) for sub in cmd["body"]["commands"]]
    return [str(cmd["type"])]


def test_the_fixture_holds_every_level_2_wire_type() -> None:
    seen = {t for line in _lines() for t in _types(line["entry"])}
    assert LEVEL_2_TYPES - seen == set()
    assert seen - LEVEL_2_TYPES == set()  # a new type is a new level: a new fixture


def test_todays_state_machine_applies_the_old_entries_alike(db: Database) -> None:
    machine = StateMachine(db)
    lines = _lines()
    for line in lines:
        result = machine.apply(line["entry"].encode(), index=line["index"])
        assert result == line["result"], line["index"]
    expected = json.loads((FIXTURES / "journal-level2.expected.json").read_text())
    assert state_digest(db.conn) == (expected["applied_index"], expected["digest"])


@pytest.mark.parametrize("status", ["ok", "rejected"])
def test_the_fixture_holds_results_of_each_status(status: str) -> None:
    def statuses(line: dict[str, Any]) -> list[str]:
        result = line["result"]
        if json.loads(line["entry"])["type"] == "batch":
            return [r["status"] for r in result["results"]]
        return [result["status"]]

    assert any(status in statuses(line) for line in _lines())


def _commands(level: int) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(type, body, result) of each command of a fixture, a batch's one by one."""
    found = []
    for line in _lines(level):
        cmd, result = json.loads(line["entry"]), line["result"]
        if cmd["type"] == "batch":
            pairs = zip(cmd["body"]["commands"], result["results"], strict=True)
            found += [(sub["type"], sub["body"], r) for sub, r in pairs]
        else:
            found.append((cmd["type"], cmd["body"], result))
    return found


def test_the_level_3_types_are_todays_catalogue() -> None:
    assert {t for t, cls in CATALOGUE.items() if cls.LEVEL <= 3} == LEVEL_3_TYPES


def test_the_level_3_fixture_holds_every_level_3_wire_type() -> None:
    seen = {t for line in _lines(3) for t in _types(line["entry"])}
    assert LEVEL_3_TYPES - seen == set()
    assert seen - LEVEL_3_TYPES == set()  # a new type is a new level: a new fixture


def test_todays_state_machine_applies_the_level_3_entries_alike(db: Database) -> None:
    machine = StateMachine(db)
    for line in _lines(3):
        result = machine.apply(line["entry"].encode(), index=line["index"])
        assert result == line["result"], line["index"]
    expected = json.loads((FIXTURES / "journal-level3.expected.json").read_text())
    assert state_digest(db.conn) == (expected["applied_index"], expected["digest"])
    rows = [
        db.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("connections", "connection_uses")
    ]
    assert rows == [3, 1]  # the later tables hold rows: they are in the digest


@pytest.mark.parametrize("status", ["ok", "rejected"])
def test_the_level_3_fixture_holds_connection_results_of_each_status(status: str) -> None:
    for kind in ("create_connection", "delete_connection"):
        assert any(t == kind and r["status"] == status for t, _, r in _commands(3)), kind


def test_the_level_3_fixture_holds_jobs_of_each_broker_target() -> None:
    created, updated = set(), set()
    for t, body, _ in _commands(3):
        if t == "create_jobs":
            created |= {job["spec"]["target"]["type"] for job in body["jobs"]}
        elif t == "update_job":
            updated.add(body["spec"]["target"]["type"])
    assert created & BROKER_TARGET_TYPES == BROKER_TARGET_TYPES
    assert updated & BROKER_TARGET_TYPES == BROKER_TARGET_TYPES


def test_the_level_3_fixture_holds_the_refusals_of_a_connection_in_use_or_missing() -> None:
    codes = {(t, r.get("code")) for t, _, r in _commands(3)}
    assert ("delete_connection", "connection_in_use") in codes
    assert ("delete_connection", "connection_not_found") in codes
    assert ("create_connection", "connection_exists") in codes
    items = [item for t, _, r in _commands(3) if t == "create_jobs" for item in r["results"]]
    errors = [item["error"]["message"] for item in items if "error" in item]
    assert any(m.startswith("target.connection: no connection named") for m in errors)


def test_the_level_3_fixture_holds_no_url_or_credentials_in_results() -> None:
    for line in _lines(3):
        entry, result = line["entry"], json.dumps(line["result"])
        assert "://" not in result, line["index"]
        for secret in CREDENTIALS:
            assert secret not in entry and secret not in result, line["index"]
    urls = [body["url"] for t, body, _ in _commands(3) if t == "create_connection"]
    assert urls and all(url.startswith(f"{PREFIX}fixture:") for url in urls)  # sealed


LEVEL_4_TYPES = LEVEL_3_TYPES | {"claim_batch"}


def test_the_level_4_types_are_todays_catalogue() -> None:
    assert {t for t, cls in CATALOGUE.items() if cls.LEVEL <= 4} == LEVEL_4_TYPES


LEVEL_5_TYPES = LEVEL_4_TYPES | {"add_jobs"}


def test_the_level_5_types_are_the_catalogue_up_to_level_7() -> None:
    assert {t for t, cls in CATALOGUE.items() if cls.LEVEL <= 7} == LEVEL_5_TYPES


LEVEL_8_TYPES = LEVEL_5_TYPES | {
    "backfill_job",
    "pause_queue",
    "resume_queue",
    "pause_tenant",
    "resume_tenant",
    "record_alerts",
    "mark_overdue",
}


LEVEL_10_TYPES = LEVEL_8_TYPES | {"put_calendar", "delete_calendar"}


LEVEL_13_TYPES = LEVEL_10_TYPES | {"move_history", "close_segment", "drop_segment"}


def test_the_level_13_types_are_todays_catalogue() -> None:
    assert {t for t, cls in CATALOGUE.items() if cls.LEVEL <= 12} == LEVEL_10_TYPES
    assert set(CATALOGUE) == LEVEL_13_TYPES


def test_the_level_4_fixture_claims_only_in_batches() -> None:
    seen = {t for line in _lines(4) for t in _types(line["entry"])}
    assert seen == LEVEL_4_TYPES - {"claim_runs"}  # every member at 4: no per-run claim


def test_todays_state_machine_applies_the_level_4_entries_alike(db: Database) -> None:
    machine = StateMachine(db)
    most = 0  # batches held at once: the fixture's retention prunes them before its end
    for line in _lines(4):
        result = machine.apply(line["entry"].encode(), index=line["index"])
        assert result == line["result"], line["index"]
        most = max(most, db.conn.execute("SELECT count(*) FROM batches").fetchone()[0])
    expected = json.loads((FIXTURES / "journal-level4.expected.json").read_text())
    assert state_digest(db.conn) == (expected["applied_index"], expected["digest"])
    assert most >= 1


def test_the_level_4_fixture_settles_batch_receipts() -> None:
    settled = {
        t: r
        for t, body, r in _commands(4)
        if t.endswith("_messages") and any(".~" in rc for rc in body.get("receipts", ()))
    }
    assert settled.keys() == {"ack_messages", "nack_messages", "extend_messages"}


# Level 5 (issue 29): add_jobs, and a claim_batch may defer its one-time jobs' completion.
def test_the_level_5_fixture_creates_by_add_jobs_and_defers_completions(db: Database) -> None:
    assert any(t == "add_jobs" for t, _, _ in _commands(5))
    claims = [body for t, body, _ in _commands(5) if t == "claim_batch"]
    assert claims and all(body.get("defer_completion") is True for body in claims)
    assert any(r.get("completed") for t, _, r in _commands(5) if t == "prune")
    machine = StateMachine(db)
    most = 0  # completions pending at once
    for line in _lines(5):
        result = machine.apply(line["entry"].encode(), index=line["index"])
        assert result == line["result"], line["index"]
        most = max(most, db.conn.execute("SELECT count(*) FROM completions").fetchone()[0])
    expected = json.loads((FIXTURES / "journal-level5.expected.json").read_text())
    assert state_digest(db.conn) == (expected["applied_index"], expected["digest"])
    assert most >= 1


# Level 6 (issue 29): a receive_messages may answer its batch runs by reference.
def test_the_level_6_fixture_receives_by_reference(db: Database) -> None:
    receives = [(body, r) for t, body, r in _commands(6) if t == "receive_messages"]
    assert receives and all(body.get("by_reference") is True for body, _ in receives)
    held = [r["held"] for _, r in receives if r.get("held")]
    assert held and all(isinstance(ref[0], int) and len(ref) >= 2 for h in held for ref in h)
    machine = StateMachine(db)
    for line in _lines(6):
        result = machine.apply(line["entry"].encode(), index=line["index"])
        assert result == line["result"], line["index"]
    expected = json.loads((FIXTURES / "journal-level6.expected.json").read_text())
    assert state_digest(db.conn) == (expected["applied_index"], expected["digest"])


# Level 7 (issue 30): a receive_messages may also name its per-run messages by id.
def test_the_level_7_fixture_names_the_runs_it_receives(db: Database) -> None:
    receives = [(body, r) for t, body, r in _commands(7) if t == "receive_messages"]
    assert receives and all(body.get("runs_by_reference") is True for body, _ in receives)
    taken = [r["taken"] for _, r in receives if r.get("taken")]
    assert taken and all(isinstance(msg_id, str) for t in taken for msg_id in t)
    assert not any(r.get("messages") for _, r in receives)
    machine = StateMachine(db)
    for line in _lines(7):
        result = machine.apply(line["entry"].encode(), index=line["index"])
        assert result == line["result"], line["index"]
    expected = json.loads((FIXTURES / "journal-level7.expected.json").read_text())
    assert state_digest(db.conn) == (expected["applied_index"], expected["digest"])


def replay_counting(db: Database, level: int, tables: tuple[str, ...]) -> dict[str, int]:
    """Apply a level's fixture entry by entry, each result as recorded, to the recorded digest;
    the most rows each of `tables` held at once."""
    most = dict.fromkeys(tables, 0)
    machine = StateMachine(db)
    for line in _lines(level):
        result = machine.apply(line["entry"].encode(), index=line["index"])
        assert result == line["result"], line["index"]
        for table in tables:
            rows = db.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            most[table] = max(most[table], rows)
    expected = json.loads((FIXTURES / f"journal-level{level}.expected.json").read_text())
    assert state_digest(db.conn) == (expected["applied_index"], expected["digest"])
    return most


# Level 8 (issue 31): schedule control.
def test_the_level_8_fixture_holds_every_type_and_applies_alike(db: Database) -> None:
    seen = {t for line in _lines(8) for t in _types(line["entry"])}
    # Every member at 8: no per-run claim.
    assert LEVEL_8_TYPES - {"claim_runs"} <= seen
    found = _commands(8)
    assert any(t == "pause_job" and body.get("reason") for t, body, _ in found)
    assert any(t == "trigger_job" and body.get("payload") for t, body, _ in found)
    assert any(t == "update_job" and body.get("versioned") for t, body, _ in found)
    later = (
        "job_versions",
        "run_counts",
        "run_payloads",
        "pauses",
        "backfills",
        "backfill_lanes",
        "failure_policies",
        "alerts",
        "overdue_jobs",
    )
    most = replay_counting(db, 8, later)  # rows each new table held at once (retention prunes some)
    assert all(most.values()), most


# Level 9 (issue 32): job specs with a stable key and labels, indexed in new tables.
def test_the_level_9_fixture_indexes_keys_and_labels_and_applies_alike(db: Database) -> None:
    found = _commands(9)
    refused = [e for t, _, r in found if t == "add_jobs" for e in r.get("errors", ())]
    assert [e[1] for e in refused] == ["conflict", "conflict"]  # a POST and a batch's second
    assert any(t == "update_job" and body["spec"].get("key") for t, body, _ in found)
    most = replay_counting(db, 9, ("job_keys", "job_labels"))
    assert all(most.values()), most
    # The renamed key and the re-created "pair" name their jobs; the cancelled one holds none,
    # and retention took its labels with it.
    keys = dict(db.conn.execute("SELECT key, job_id FROM job_keys").fetchall())
    assert set(keys) == {"fixture/renamed", "pair"}, keys
    orphans = db.conn.execute(
        "SELECT count(*) FROM job_labels WHERE job_id NOT IN (SELECT job_id FROM jobs)"
    ).fetchone()[0]
    assert orphans == 0


# Level 10 (issue 33): calendars, and schedules that exclude them.
def test_the_level_10_fixture_holds_calendars_and_applies_alike(db: Database) -> None:
    found = _commands(10)
    assert {"put_calendar", "delete_calendar"} <= {t for t, _, _ in found}
    assert any(t == "put_calendar" and r.get("jobs_fenced") for t, _, r in found)
    skipped = [
        row for t, body, _ in found if t == "claim_batch" for row in body["claims"] if row[-1]
    ]
    assert any(row[-1] == "calendar:hols" for row in skipped), skipped
    most = replay_counting(db, 10, ("calendars", "calendar_uses"))
    assert all(most.values()), most
    # The calendar was deleted once its job was cancelled: nothing of it is left.
    assert db.conn.execute("SELECT count(*) FROM calendars").fetchone()[0] == 0
    assert db.conn.execute("SELECT count(*) FROM calendar_uses").fetchone()[0] == 0


# Level 11 (issue 33): jobs that run after others; no new type.
def test_the_level_11_fixture_runs_jobs_after_others_and_applies_alike(db: Database) -> None:
    found = _commands(11)
    assert {t for t, _, _ in found} <= LEVEL_10_TYPES
    refused = [r for t, _, r in found if t == "update_job" and r.get("status") == "rejected"]
    assert [r["code"] for r in refused] == ["invalid_dependency"]
    most = replay_counting(db, 11, ("dependencies", "run_upstreams"))
    # Five links; five runs made by others' ends: B after A's ack, C after B's death, E after
    # C's ack, D after A's death, H after an HTTP success (retention took them by the end).
    assert most == {"dependencies": 5, "run_upstreams": 5}, most


# Level 12 (issue 34): acks and nacks with outputs, a nack that kills; no new type.
def test_the_level_12_fixture_keeps_outputs_and_applies_alike(db: Database) -> None:
    found = _commands(12)
    assert {t for t, _, _ in found} <= LEVEL_10_TYPES
    assert any(t == "nack_messages" and body.get("dead") for t, body, _ in found)
    most = replay_counting(db, 12, ("run_outputs",))
    assert most == {"run_outputs": 2}, most  # the ack's and the failed nack's


# Level 13 (issue 35 §1): history segments.
def test_the_level_13_fixture_moves_history_into_segments_and_applies_alike(
    db: Database,
) -> None:
    found = _commands(13)
    kinds = {t for t, _, _ in found}
    assert kinds <= LEVEL_13_TYPES
    assert "prune" not in kinds  # every member at 13: the leader's passes are moves
    assert {"move_history", "close_segment", "drop_segment"} <= kinds
    most = replay_counting(db, 13, ("segments",))
    assert most["segments"] >= 2, most  # at least the audit and runs segments of an hour
    # The drop took one (its row kept as dropped; its file unlinked on a thread of its own);
    # the others are closed, their files on this node with their digests.
    rows = db.conn.execute("SELECT name, state, content_digest FROM segments").fetchall()
    assert sorted(state for _, state, _ in rows) == ["closed"] * (len(rows) - 1) + ["dropped"]
    for name, state, digest in rows:
        if state == "dropped":
            continue
        assert segments.content_digest(segments.segment_path(db.path.parent, name)) == digest


# Level 14: moves that keep each job's moved runs' summary.
def test_the_level_14_fixture_keeps_moved_runs_summaries_and_applies_alike(
    db: Database,
) -> None:
    found = _commands(14)
    assert {t for t, _, _ in found} <= LEVEL_13_TYPES  # no new type: a body field
    moves = [body for t, body, _ in found if t == "move_history"]
    assert moves and any(body.get("summarize") for body in moves)
    most = replay_counting(db, 14, ("moved_run_summaries",))
    assert most["moved_run_summaries"] >= 1, most


def test_the_level_13_fixture_keeps_no_summary(db: Database) -> None:
    """Its moves carry no `summarize`: the new table stays empty, so its digest is as recorded."""
    assert replay_counting(db, 13, ("moved_run_summaries",)) == {"moved_run_summaries": 0}
