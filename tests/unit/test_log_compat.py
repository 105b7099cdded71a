"""Old log entries still apply: a journal written by a real node (issue 15), kept as a fixture.

tests/fixtures/make_journal_fixture.py wrote the entries, the results the state machine of its
day returned for each, and the state digest after them. Today's state machine must agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schedd.store.apply import StateMachine
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


def _lines() -> list[dict[str, Any]]:
    text = (FIXTURES / "journal-level2.jsonl").read_text()
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
