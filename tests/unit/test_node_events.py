"""Apply reports events and the node routes them: due runs reach the dispatcher, a rotation
clears the token cache, a snapshot install makes every subscriber start over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedd.api.context import QueueSignal, TokenCache
from schedd.config import load_config
from schedd.dispatch.service import DispatchService
from schedd.node import Node, subscribe_caches, subscribe_loops
from schedd.store.apply import StateMachine
from schedd.store.db import Database
from schedd.store.events import DeliveriesReady, DueAdded, Event, MessagesReady, StateReplaced
from schedd.subscribers import Subscribers
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_apply import create, job_item, tenant


class FakeDispatcher:
    def __init__(self) -> None:
        self.offers: list[tuple[str, int, int, bool]] = []
        self.forgotten = 0

    def offer(
        self, job_id: str, fire_at_ms: int, scheduled_at_ms: int, *, is_trigger: bool
    ) -> None:
        self.offers.append((job_id, fire_at_ms, scheduled_at_ms, is_trigger))

    def forget(self) -> None:
        self.forgotten += 1


class FakeCaller:
    def __init__(self) -> None:
        self.wakes = 0

    def wake_threadsafe(self) -> None:
        self.wakes += 1


class Routed:
    """A state machine whose events go through the node's routing to fake loops."""

    def __init__(self, db: Database) -> None:
        self.events = Subscribers()
        self.tokens, self.signal = TokenCache(), QueueSignal()
        self.dispatcher, self.caller = FakeDispatcher(), FakeCaller()
        service = DispatchService.__new__(DispatchService)  # only its routing, no threads
        service.dispatcher = self.dispatcher  # type: ignore[assignment]
        subscribe_caches(self.events, self.tokens, self.signal)
        subscribe_loops(self.events, service, self.caller)  # type: ignore[arg-type]
        self.reported: list[Event] = []
        self.events.subscribe(MessagesReady, self.reported.extend)
        self.events.subscribe(DeliveriesReady, self.reported.extend)
        self.apply = Applier(StateMachine(db, on_events=self.events.publish))


@pytest.fixture
def routed(db: Database) -> Routed:
    node = Routed(db)
    tenant(node.apply)
    return node


def test_a_created_job_with_a_due_time_reaches_the_dispatchers_offer(routed: Routed) -> None:
    item = job_item("j1") | {"next_fire_at_ms": NOW_MS + 1_000}  # fires before its run time
    create(routed.apply, item)
    run, fire = item["next_run_at_ms"], item["next_fire_at_ms"]
    assert routed.dispatcher.offers == [("j1", fire, run, False)]


def test_a_job_created_again_by_its_idempotency_key_offers_nothing(routed: Routed) -> None:
    item = job_item("j1") | {"idempotency_key": "k", "request_hash": "h"}
    create(routed.apply, item)
    create(routed.apply, item | {"job_id": "j2"})
    assert [offer[0] for offer in routed.dispatcher.offers] == ["j1"]


def test_trigger_and_resume_offer_their_runs_and_pause_offers_none(routed: Routed) -> None:
    create(routed.apply, job_item("j1"))
    routed.dispatcher.offers.clear()
    ids = {"tenant_id": "t1", "job_id": "j1"}
    routed.apply("pause_job", ids)
    assert routed.dispatcher.offers == []
    routed.apply("trigger_job", ids | {"scheduled_at_ms": NOW_MS + 5})
    resume = {"expected_version": 2, "next_run_at_ms": NOW_MS + 9, "next_fire_at_ms": NOW_MS + 8}
    assert routed.apply("resume_job", ids | resume)["status"] == "ok"
    assert routed.dispatcher.offers == [
        ("j1", NOW_MS + 5, NOW_MS + 5, True),
        ("j1", NOW_MS + 8, NOW_MS + 9, False),
    ]


def test_a_rejected_command_routes_no_event(routed: Routed) -> None:
    create(routed.apply, job_item("j1"))
    routed.dispatcher.offers.clear()
    stale = {"expected_version": 7, "next_run_at_ms": NOW_MS, "next_fire_at_ms": NOW_MS}
    result = routed.apply("update_job", {"tenant_id": "t1", "job_id": "j1", "spec": {}} | stale)
    assert result["code"] == "stale_state"
    assert routed.dispatcher.offers == []


def test_a_rotation_clears_cached_tokens_and_an_update_does_not(routed: Routed) -> None:
    routed.tokens.put("hash", "t1", generation=routed.tokens.generation)
    routed.apply("update_tenant", {"tenant_id": "t1", "changes": {"max_active_jobs": 5}})
    assert routed.tokens.get("hash") == "t1"
    rotate = {"tenant_id": "t1", "token_hash": "h2", "signing_secret": "s2", "overlap_ms": 0}
    routed.apply("rotate_tenant", rotate)
    assert routed.tokens.get("hash") is None


def test_a_redrive_to_http_wakes_the_caller(routed: Routed, db: Database) -> None:
    target = '{"type":"http","url":"https://x.example/h"}'
    db.conn.execute(
        "INSERT INTO deadletters (id, tenant_id, job_id, scheduled_at_ms, attempts, error, "
        "target, payload, created_at_ms) VALUES ('j9:1', 't1', 'j9', 1, 1, 'e', ?, 'null', 0)",
        (target,),
    )
    routed.apply("redrive_deadletter", {"tenant_id": "t1", "id": "j9:1", "partition": 0})
    assert routed.caller.wakes == 1 and routed.reported == [DeliveriesReady()]


def test_state_replaced_makes_every_subscriber_start_over(routed: Routed) -> None:
    routed.tokens.put("hash", "t1", generation=routed.tokens.generation)
    routed.events.publish([StateReplaced()])
    assert routed.tokens.get("hash") is None
    assert routed.dispatcher.forgotten == 1 and routed.caller.wakes == 1


def test_a_failing_subscriber_does_not_stop_the_others() -> None:
    events, seen = Subscribers(), []

    def broken(_: Any) -> None:
        raise RuntimeError("a subscriber's bug")

    events.subscribe(DueAdded, broken)
    events.subscribe(DueAdded, seen.extend)
    events.publish([DueAdded("j", 1, 2, False)])
    assert seen == [DueAdded("j", 1, 2, False)]


def test_a_snapshot_install_publishes_state_replaced_through_the_node(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text(f'[node]\nid = "n1"\ndata_dir = "{tmp_path / "data"}"\n')
    node = Node(load_config(str(path), env={}))
    try:
        seen: list[StateReplaced] = []
        node.events.subscribe(StateReplaced, seen.extend)
        node.tokens.put("hash", "t1", generation=node.tokens.generation)
        node.snapshots._on_restore()  # type: ignore[misc]  # what a completed install calls
        assert seen == [StateReplaced()] and node.tokens.get("hash") is None
    finally:
        node.db.close()
        node.reads.close()
        node._lock.release()
