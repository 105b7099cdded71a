"""Queue runs in batches (issue 29, claim_batch): what the batch form writes, and that every
path a user can see gives what the per-run form (claim_runs) gives for the same commands.

The equivalence tests run one scenario twice, on two fresh stores, once claimed per run and
once into a batch: the runs listing (what `GET /v1/jobs/{id}/runs` shows) and every delivery
handed out (receipts aside) must be equal, and once a run has failed a delivery (spilled from
its batch) its per-run rows must be equal too, column for column.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedd.store.apply.machine import StateMachine
from schedd.store.command import canonical_json
from schedd.store.commands import ClaimRow
from schedd.store.db import Database
from schedd.store.dispatch_reads import has_run_in_flight
from schedd.store.ledger import batches
from schedd.store.queries import list_runs
from schedd.store.queue_reads import (
    held_messages,
    queue_summaries,
    taken_messages,
    visible_count,
)
from schedd.wire.jobs import RunView
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_dispatch import claim_item, setup, spec
from tests.unit.test_store_retention import prune

BOX = {"tenant_id": "t1", "queue": "q"}
PER_RUN_TABLES = ("runs", "messages", "attempts", "deadletters")


def claim(
    apply: Applier, form: str, *, ts_ms: int = NOW_MS, jobs: tuple[str, ...] = ("j1",)
) -> dict[str, Any]:
    items = [claim_item(next_ms=None) | {"job_id": job} for job in jobs]
    if form == "claim_batch":  # the compact wire form: each claim an array
        fields = ClaimRow.__struct_fields__[:-1]  # skip: absent
        claims: list[Any] = [[item[f] for f in fields] for item in items]
    else:
        claims = items
    result = apply(form, {"node_id": "n1", "claims": claims}, ts_ms=ts_ms)
    assert result["claimed"] == len(jobs), result
    return result


def add_job(apply: Applier, job_id: str, queue: str = "q") -> None:
    item = {
        "job_id": job_id,
        "partition": 3,
        "spec": spec({"run_at": "2026-09-21T14:13:20Z"}, target={"type": "queue", "name": queue}),
        "next_run_at_ms": NOW_MS,
        "next_fire_at_ms": NOW_MS,
        "idempotency_key": None,
        "request_hash": None,
    }
    assert apply("create_jobs", {"tenant_id": "t1", "jobs": [item]})["results"][0]["created"]


def one_time(apply: Applier) -> None:
    setup(apply, schedule={"run_at": "2026-09-21T14:13:20Z"})


class Store:
    """One fresh store, its applier, and the last deliveries handed out."""

    def __init__(self, path: Path) -> None:
        self.db = Database(path)
        self.apply = Applier(StateMachine(self.db))
        self.handed: list[dict[str, Any]] = []

    def receive(self, ts_ms: int, visibility_ms: int = 30_000) -> list[dict[str, Any]]:
        body = BOX | {"max": 10, "visibility_ms": visibility_ms, "receipts": ["n1", "n2"]}
        self.handed = list(self.apply("receive_messages", body, ts_ms=ts_ms)["messages"])
        return [{k: v for k, v in m.items() if k != "receipt"} for m in self.handed]

    def settle(self, type_: str, ts_ms: int, **extra: Any) -> dict[str, Any]:
        receipts = [m["receipt"] for m in self.handed]
        return self.apply(type_, BOX | {"receipts": receipts} | extra, ts_ms=ts_ms)

    def runs(self) -> list[RunView]:
        return list_runs(self.db.conn, "j1", before_ms=2**62, limit=100)

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        return self.db.conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()


Scenario = Callable[[Store], list[Any]]


def both(tmp_path: Path, scenario: Scenario) -> tuple[Store, Store, list[Any], list[Any]]:
    stores = []
    seen = []
    for form in ("claim_runs", "claim_batch"):
        store = Store(tmp_path / f"{form}.db")
        one_time(store.apply)
        claim(store.apply, form)
        seen.append(scenario(store))
        stores.append(store)
    return stores[0], stores[1], seen[0], seen[1]


def acked(s: Store) -> list[Any]:
    return [s.runs(), s.receive(NOW_MS), s.runs(), s.settle("ack_messages", NOW_MS + 5), s.runs()]


def nacked_twice_redriven_acked(s: Store) -> list[Any]:
    seen: list[Any] = [s.receive(NOW_MS), s.settle("nack_messages", NOW_MS + 1, error="boom")]
    seen += [s.runs(), s.receive(NOW_MS + 20_000)]
    seen += [s.settle("nack_messages", NOW_MS + 20_001, error="boom"), s.runs()]
    redrive = {"tenant_id": "t1", "id": f"j1:{NOW_MS}"}
    seen += [s.apply("redrive_deadletter", redrive, ts_ms=NOW_MS + 20_002)]
    seen += [s.receive(NOW_MS + 20_003), s.settle("ack_messages", NOW_MS + 20_004), s.runs()]
    return seen


def timed_out_then_acked(s: Store) -> list[Any]:
    first = s.receive(NOW_MS)
    again = s.receive(NOW_MS + 31_000)  # past the visibility timeout: attempt 2
    return [first, again, s.runs(), s.settle("ack_messages", NOW_MS + 31_001), s.runs()]


def extended(s: Store) -> list[Any]:
    seen: list[Any] = [s.receive(NOW_MS)]
    seen += [s.settle("extend_messages", NOW_MS + 10_000, visibility_ms=60_000)]
    seen += [s.receive(NOW_MS + 31_000), s.receive(NOW_MS + 71_000), s.runs()]
    return seen


def expired_unreceived(s: Store) -> list[Any]:
    return [prune(s.apply, NOW_MS + 3_600_001)["deleted"], s.runs()]


@pytest.mark.parametrize(
    "scenario",
    [acked, nacked_twice_redriven_acked, timed_out_then_acked, extended, expired_unreceived],
)
def test_a_user_sees_the_same_runs_and_deliveries_in_either_form(
    tmp_path: Path, scenario: Scenario
) -> None:
    per_run, batched, seen_per_run, seen_batched = both(tmp_path, scenario)
    assert seen_batched == seen_per_run
    assert any(seen_per_run)  # the scenario saw something
    assert batched.rows("batches") and batched.rows("run_keys")
    assert per_run.rows("batches") == [] and per_run.rows("run_keys") == []
    slot = batched.rows("batches")[0][5]
    if slot == b"s":  # spilled: from then on the per-run rows are today's, column for column
        for table in PER_RUN_TABLES:
            assert batched.rows(table) == per_run.rows(table), table
    else:
        assert slot == b"d"  # acked in its batch: no per-run row was ever written
        assert [batched.rows(t) for t in PER_RUN_TABLES] == [[], [], [], []]


def test_a_batch_claim_writes_one_row_per_queue_and_a_key_per_run(
    apply: Applier, db: Database
) -> None:
    one_time(apply)
    for job_id, queue in (("j2", "q"), ("j3", "other"), ("j4", "q")):
        add_job(apply, job_id, queue)
    claim(apply, "claim_batch", jobs=("j1", "j2", "j3", "j4"))
    rows = db.conn.execute(
        "SELECT batch_id, tenant_id, queue, slots, open, ready_at_ms FROM batches ORDER BY 1"
    ).fetchall()
    assert rows == [(1, "t1", "q", b"rrr", 3, NOW_MS), (2, "t1", "other", b"r", 1, NOW_MS)]
    keys = db.conn.execute("SELECT job_id, batch_id, slot FROM run_keys ORDER BY 1").fetchall()
    assert keys == [("j1", 1, 0), ("j2", 1, 1), ("j3", 2, 0), ("j4", 1, 2)]
    for table in ("runs", "messages", "due"):
        assert db.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table
    statuses = db.conn.execute("SELECT DISTINCT status FROM jobs").fetchall()
    assert statuses == [("completed",)]  # fence 5 and the job's own end stay per run


def test_receipts_of_other_queues_tenants_or_forms_are_not_counted(
    apply: Applier, db: Database
) -> None:
    one_time(apply)
    add_job(apply, "j2")
    claim(apply, "claim_batch", jobs=("j1", "j2"))
    body = BOX | {"max": 1, "visibility_ms": 30_000, "receipts": ["a"]}
    [message] = apply("receive_messages", body)["messages"]
    assert message["receipt"] == "a.~1.0" and message["job_id"] == "j1"
    assert batches.parse_receipt(message["receipt"]) == (1, 0)
    assert batches.parse_receipt(f"a.j1:{NOW_MS}") is None
    forged = ["a.~1.1", "a.~1.9", "a.~2.0", "a.~x.0", "a.~1.0.0", "~1.0", ""]
    for box in (BOX, {"tenant_id": "t2", "queue": "q"}, {"tenant_id": "t1", "queue": "p"}):
        ack = box | {"receipts": forged if box is BOX else [message["receipt"]]}
        assert apply("ack_messages", ack, ts_ms=NOW_MS + 1)["acked"] == 0
    twice = BOX | {"receipts": [message["receipt"], "b.~1.0"]}  # one slot, named twice
    assert apply("ack_messages", twice, ts_ms=NOW_MS + 2)["acked"] == 1
    assert apply("ack_messages", twice, ts_ms=NOW_MS + 3)["acked"] == 0  # done already
    assert db.conn.execute("SELECT slots, open FROM batches").fetchone() == (b"dr", 1)


def test_reads_count_batch_runs_as_they_count_messages(apply: Applier, db: Database) -> None:
    one_time(apply)
    add_job(apply, "j2")
    claim(apply, "claim_batch", jobs=("j1", "j2"))
    conn = db.conn
    assert visible_count(conn, "t1", "q", NOW_MS, 10) == 2
    assert visible_count(conn, "t1", "q", NOW_MS, 1) == 1
    assert has_run_in_flight(conn, "j1") and has_run_in_flight(conn, "j2")
    body = BOX | {"max": 1, "visibility_ms": 30_000, "receipts": ["a"]}
    [message] = apply("receive_messages", body, ts_ms=NOW_MS + 1_000)["messages"]
    [queue] = queue_summaries(conn, "t1", NOW_MS + 2_000)
    assert (queue.ready, queue.in_flight, queue.delayed) == (1, 1, 0)
    assert queue.oldest_age_s == 2.0
    assert visible_count(conn, "t1", "q", NOW_MS + 2_000, 10) == 1
    assert visible_count(conn, "t1", "q", NOW_MS + 31_000, 10) == 2  # its timeout passed
    apply("ack_messages", BOX | {"receipts": [message["receipt"]]}, ts_ms=NOW_MS + 3_000)
    assert not has_run_in_flight(conn, "j1") and has_run_in_flight(conn, "j2")


def test_a_finished_batch_is_pruned_whole_once_past_the_runs_retention(
    apply: Applier, db: Database
) -> None:
    one_time(apply)
    add_job(apply, "j2")
    claim(apply, "claim_batch", jobs=("j1", "j2"))
    body = BOX | {"max": 2, "visibility_ms": 30_000, "receipts": ["a", "b"]}
    handed = apply("receive_messages", body)["messages"]
    receipts = [m["receipt"] for m in handed]
    apply("ack_messages", BOX | {"receipts": receipts[:1]}, ts_ms=NOW_MS + 1)
    apply("ack_messages", BOX | {"receipts": receipts[1:]}, ts_ms=NOW_MS + 2)
    finished = db.conn.execute("SELECT open, ready_at_ms, finished_at_ms FROM batches").fetchone()
    assert finished == (0, None, NOW_MS + 2)
    prune(apply, NOW_MS + 2 + 3_600_000)  # not past the hour yet: kept
    assert db.conn.execute("SELECT COUNT(*) FROM run_keys").fetchone()[0] == 2
    pruned = prune(apply, NOW_MS + 3 + 3_600_000)["deleted"]
    assert pruned["runs"] >= 2
    for table in ("batches", "run_keys"):
        assert db.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table
    assert list_runs(db.conn, "j1", before_ms=2**62, limit=10) == []


def test_a_trigger_run_in_a_batch_is_never_claimed_again(apply: Applier, db: Database) -> None:
    """Fence 6 (`duplicate_run`) for a run that lives in a batch: its run_keys row. The same
    trigger asked twice puts the due row back, so only the run key refuses the second claim."""
    setup(apply)  # recurring every minute: a trigger's claim is checked by neither version
    trigger = {"tenant_id": "t1", "job_id": "j1", "scheduled_at_ms": NOW_MS + 7}
    item = claim_item(trigger=True, next_ms=None, run_ms=NOW_MS + 7)
    body = {"node_id": "n1", "claims": [[item[f] for f in ClaimRow.__struct_fields__[:-1]]]}
    apply("trigger_job", trigger)
    assert apply("claim_batch", body)["claimed"] == 1
    apply("trigger_job", trigger)  # the due row again, for a run that exists
    assert apply("claim_batch", body)["rejected"] == {"duplicate_run": 1}
    assert apply("claim_runs", {"node_id": "n1", "claims": [item]})["rejected"] == {
        "duplicate_run": 1
    }
    assert len(list_runs(db.conn, "j1", before_ms=2**62, limit=10)) == 1


def _batch_of(slots: bytes, times: list[int], claimed_at_ms: int) -> batches.Batch:
    """A batch held in memory only (its runs column is never read here)."""
    blob = array("q", times + [0] * (2 * len(slots))).tobytes()
    return batches.Batch(1, "t1", "q", claimed_at_ms, slots, blob, 0, conn=None)  # type: ignore[arg-type]


SlotState = tuple[bytes, list[int], int, int]  # slots, their times, claimed at, now


@st.composite
def slot_states(draw: st.DrawFn) -> SlotState:
    """A batch as claims and receives leave it: ready slots visible from the claim's time, held
    ones with their deadlines (a receive's run of adjacent slots shares one), done and spilled
    ones; and a moment to look at it."""
    claimed = draw(st.integers(0, 100))
    n = draw(st.integers(0, 40))
    states = draw(st.lists(st.sampled_from(b"rhds"), min_size=n, max_size=n))
    deadlines = draw(st.lists(st.integers(0, 200), min_size=n, max_size=n))
    times = [claimed if s == batches.READY else d for s, d in zip(states, deadlines, strict=True)]
    return bytes(states), times, claimed, draw(st.integers(0, 200))


@given(slot_states())
def test_slot_scans_agree_with_looking_at_every_slot(state: SlotState) -> None:
    slots, times, claimed, now = state
    batch = _batch_of(slots, times, claimed)
    open_ = [i for i, s in enumerate(slots) if s in (batches.READY, batches.HELD)]
    eligible = [i for i in open_ if times[i] <= now]
    held = [i for i in open_ if slots[i] == batches.HELD]
    assert batch.eligible(now) == eligible
    assert batch.open_slots() == open_
    in_flight = sum(1 for i in held if times[i] > now)
    assert batch.counts(now) == (len(eligible), in_flight, len(open_) - len(eligible) - in_flight)
    assert batch.ready_at_ms() == min((times[i] for i in open_), default=None)


def test_recent_runs_decode_a_column_once_and_never_answer_another_store_s_batch() -> None:
    recent = batches._RecentRuns()
    ours = msgspec.msgpack.encode([batches.BatchRun("j1", 1, 1, "null", "{}")])
    theirs = msgspec.msgpack.encode([batches.BatchRun("j2", 2, 2, "null", "{}")])
    first = recent.decode(7, ours)
    assert recent.decode(7, bytes(ours)) is first  # the same column again: decoded once
    assert [r.job_id for r in recent.decode(7, theirs)] == ["j2"]  # batch 7 of another store
    for batch_id in range(100, 100 + batches._RecentRuns.KEEP):
        recent.decode(batch_id, ours)
    assert 7 not in recent._decoded and len(recent._decoded) == recent.KEEP  # the oldest left


ODD_PAYLOAD = {"big": 1e16, "small": 1e-05, "n": 2**70, "é😀": ["\u2028", 0.1, -0.0], "": None}


@pytest.mark.parametrize("form", ["claim_runs", "claim_batch"])
def test_a_receive_keeps_canonical_json_text_and_answers_the_payload_as_sent(
    tmp_path: Path, form: str
) -> None:
    store = Store(tmp_path / "s.db")
    setup(store.apply, schedule={"run_at": "2026-09-21T14:13:20Z"}, payload=ODD_PAYLOAD)
    claim(store.apply, form, jobs=("j1",))
    store.receive(NOW_MS)
    assert [m["payload"] for m in store.handed] == [ODD_PAYLOAD]
    (kept,) = store.db.conn.execute(
        "SELECT result FROM applied_commands ORDER BY applied_index DESC LIMIT 1"
    ).fetchone()
    assert kept == canonical_json({"status": "ok", "messages": store.handed})
    assert "1e+16" in kept and "1e-05" in kept  # the stdlib's float text, not msgspec's


def test_a_receive_by_reference_hands_out_what_the_whole_answer_did(tmp_path: Path) -> None:
    """Level 6: the batch runs taken come back as [batch_id, slot, ...] references, and at
    level 7 the per-run messages as their ids, which the receiving node reads from its store
    into the very messages a level-5 receive answers; a redelivery (spilled from its batch)
    still comes first. The kept answer then holds no payload."""
    answers = []
    for level in (5, 6, 7):
        store = Store(tmp_path / f"{level}.db")
        setup(store.apply, schedule={"run_at": "2026-09-21T14:13:20Z"}, payload=ODD_PAYLOAD)
        add_job(store.apply, "j2")
        claim(store.apply, "claim_batch", jobs=("j1", "j2"))
        seen = []
        for ts_ms, most in ((NOW_MS, 1), (NOW_MS + 31_000, 10)):  # j1 again: timed out
            body = BOX | {"max": most, "visibility_ms": 30_000, "receipts": ["n1", "n2", "n3"]}
            body |= {"by_reference": True} if level >= 6 else {}
            body |= {"runs_by_reference": True} if level >= 7 else {}
            result = store.apply("receive_messages", body, ts_ms=ts_ms)
            (kept,) = store.db.conn.execute(
                "SELECT result FROM applied_commands ORDER BY applied_index DESC LIMIT 1"
            ).fetchone()
            nonces = body["receipts"][len(result["messages"]) :]
            if level >= 7:
                taken = result.pop("taken")
                assert f'"taken":{json.dumps(taken)}'.replace(" ", "") in kept
                assert result["messages"] == [] and "payload" not in kept
                result["messages"] += taken_messages(store.db.conn, taken, nonces)
                nonces = nonces[len(taken) :]
            if level >= 6:
                held = result.pop("held")
                result["messages"] += held_messages(store.db.conn, held, nonces)
                assert f'"held":{held}'.replace(" ", "") in kept
            seen.append(msgspec.to_builtins(result["messages"]))  # read: wire.queues.Message
        answers.append(seen)
    assert answers[2] == answers[1] == answers[0]
    first, second = answers[2]
    assert [(m["job_id"], m["attempt"]) for m in first] == [("j1", 1)]
    assert [(m["job_id"], m["attempt"]) for m in second] == [("j1", 2), ("j2", 1)]
    assert [m["payload"] for m in second] == [ODD_PAYLOAD, {"n": 1}]
    assert second[1]["receipt"].startswith("n2.~")  # the nonce after the redelivery's


def test_a_run_taken_by_id_and_handed_out_again_before_the_read_is_not_answered_twice(
    tmp_path: Path,
) -> None:
    """Level 7: the node reads a taken message by its receipt; if the message was handed out
    again meanwhile (its visibility timeout passed), the old receipt reads nothing and only
    the new receiver gets it."""
    store = Store(tmp_path / "s.db")
    one_time(store.apply)
    claim(store.apply, "claim_runs")
    names: list[tuple[list[str], list[str]]] = []
    for ts_ms, nonces in ((NOW_MS, ["a1"]), (NOW_MS + 2_000, ["b1"])):
        body = BOX | {"max": 1, "visibility_ms": 1_000, "receipts": nonces}
        result = store.apply("receive_messages", body | {"runs_by_reference": True}, ts_ms=ts_ms)
        names.append((result["taken"], nonces))
    (first, first_nonces), (second, second_nonces) = names
    assert first == second and len(first) == 1  # the same message, handed out twice
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    assert taken_messages(store.db.conn, first, first_nonces) == []
    store.db.conn.set_trace_callback(None)
    (read,) = [sql for sql in statements if "FROM messages" in sql]
    plan = store.db.conn.execute(f"EXPLAIN QUERY PLAN {read}").fetchall()
    assert "PRIMARY KEY" in str(plan) and "SCAN" not in str(plan)  # by key, never a scan
    (message,) = taken_messages(store.db.conn, second, second_nonces)
    assert (message.job_id, message.attempt) == ("j1", 2)
    assert message.receipt == f"b1.{second[0]}"
