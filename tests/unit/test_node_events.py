"""Apply reports events and the node routes them: due runs reach the dispatcher, a rotation
clears the token cache, a connection created or deleted drops the deliverers' look-up of it, a
snapshot install makes every subscriber start over."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from schedd.api.context import QueueSignal, TokenCache
from schedd.config import load_config
from schedd.delivery.connection_cache import ConnectionCache
from schedd.dispatch.service import DispatchService
from schedd.model import BrokerConnection
from schedd.node import Node, subscribe_alerts, subscribe_caches, subscribe_loops
from schedd.sealing import PayloadKeys
from schedd.store.apply import StateMachine
from schedd.store.commands import CreateConnection, DeleteConnection
from schedd.store.db import Database, ReadPool
from schedd.store.events import (
    AlertsDue,
    ConnectionChanged,
    DeliveriesReady,
    DueAdded,
    Event,
    MessagesReady,
    StateReplaced,
)
from schedd.subscribers import Subscribers
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_apply import create, job_item, tenant


class FakeDispatcher:
    def __init__(self) -> None:
        self.offers: list[tuple[str, int, int, bool]] = []
        self.wakes = 0  # calls: one per committed entry, however many rows it offers
        self.forgotten = 0

    def offer_many(self, rows: Iterable[tuple[str, int, int, bool]]) -> None:
        self.offers.extend(rows)
        self.wakes += 1

    def forget(self) -> None:
        self.forgotten += 1


class FakeCaller:
    def __init__(self) -> None:
        self.wakes = 0

    def wake_threadsafe(self) -> None:
        self.wakes += 1


T = TypeVar("T")


class CountedReads:
    """The store's readers, counting reads; `then` runs after a read, before it answers."""

    def __init__(self, reads: ReadPool) -> None:
        self.reads, self.count = reads, 0
        self.then: Callable[[], None] = lambda: None

    async def read(self, fn: Callable[[Any], T]) -> T:
        self.count += 1
        found = await self.reads.read(fn)
        self.then()
        return found


class Routed:
    """A state machine whose events go through the node's routing to fake loops (and the
    deliverers' real connection look-ups)."""

    def __init__(self, db: Database) -> None:
        self.events = Subscribers()
        self.tokens, self.signal = TokenCache(), QueueSignal()
        self.dispatcher, self.caller = FakeDispatcher(), FakeCaller()
        self.reads = CountedReads(ReadPool(db.path))
        self.connections = ConnectionCache(self.reads, PayloadKeys())  # type: ignore[arg-type]
        service = DispatchService.__new__(DispatchService)  # only its routing, no threads
        service.dispatcher = self.dispatcher  # type: ignore[assignment]
        subscribe_caches(self.events, self.tokens, self.signal)
        subscribe_loops(self.events, service, self.caller, self.connections)  # type: ignore[arg-type]
        self.reported: list[Event] = []
        self.events.subscribe(MessagesReady, self.reported.extend)
        self.events.subscribe(DeliveriesReady, self.reported.extend)
        self.apply = Applier(StateMachine(db, on_events=self.events.publish))


@pytest.fixture
def routed(db: Database) -> Iterator[Routed]:
    node = Routed(db)
    tenant(node.apply)
    try:
        yield node
    finally:
        node.reads.reads.close()


def connect(routed: Routed, url: str) -> dict[str, Any]:
    cmd = CreateConnection(
        tenant_id="t1",
        name="r",
        kind="redis",
        url=url,
        host="broker.example:6379",
        addresses=("203.0.113.7",),
        actor="tenant:t1",
    )
    return routed.apply.typed(cmd)


def looked_up(routed: Routed) -> BrokerConnection | None:
    return asyncio.run(routed.connections.lookup("t1", "r"))


def test_a_created_job_with_a_due_time_reaches_the_dispatchers_offer(routed: Routed) -> None:
    item = job_item("j1") | {"next_fire_at_ms": NOW_MS + 1_000}  # fires before its run time
    create(routed.apply, item)
    run, fire = item["next_run_at_ms"], item["next_fire_at_ms"]
    assert routed.dispatcher.offers == [("j1", fire, run, False)]


def test_an_entrys_due_rows_are_offered_together_with_one_wake(routed: Routed) -> None:
    create(routed.apply, *(job_item(f"j{i}") for i in range(3)))
    assert [offer[0] for offer in routed.dispatcher.offers] == ["j0", "j1", "j2"]
    assert routed.dispatcher.wakes == 1


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


def test_a_connection_deleted_and_made_again_is_looked_up_afresh(routed: Routed) -> None:
    """A broker that was down: the tenant makes the connection again under its name, and the
    next attempt (a redrive at once) uses the new one, not the look-up kept for 5 s."""
    assert looked_up(routed) is None
    assert connect(routed, "redis://127.0.0.1:1/0")["status"] == "ok"
    first = looked_up(routed)
    assert first is not None and first.url == "redis://127.0.0.1:1/0"
    assert looked_up(routed) == first and routed.reads.count == 2  # kept
    deleted = routed.apply.typed(DeleteConnection(tenant_id="t1", name="r", actor="tenant:t1"))
    assert deleted["status"] == "ok"
    assert looked_up(routed) is None
    connect(routed, "redis://127.0.0.1:6379/0")
    again = looked_up(routed)
    assert again is not None and again.url == "redis://127.0.0.1:6379/0"
    assert looked_up(routed) == again and routed.reads.count == 4


def test_a_look_up_that_raced_a_change_is_not_kept(routed: Routed) -> None:
    connect(routed, "redis://127.0.0.1:1/0")
    routed.reads.then = lambda: routed.events.publish([ConnectionChanged("t1", "other")])
    assert looked_up(routed) is not None
    routed.reads.then = lambda: None
    looked_up(routed)
    assert routed.reads.count == 2  # read again: what the first read saw may be stale


def test_state_replaced_makes_every_subscriber_start_over(routed: Routed) -> None:
    routed.tokens.put("hash", "t1", generation=routed.tokens.generation)
    connect(routed, "redis://127.0.0.1:1/0")
    looked_up(routed)
    routed.events.publish([StateReplaced()])
    assert routed.tokens.get("hash") is None
    assert routed.dispatcher.forgotten == 1 and routed.caller.wakes == 1
    looked_up(routed)
    assert routed.reads.count == 2


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


def test_queued_alerts_and_a_snapshot_install_wake_the_alert_sender() -> None:
    events, sender = Subscribers(), FakeCaller()
    subscribe_alerts(events, sender)  # type: ignore[arg-type]
    events.publish([AlertsDue(), AlertsDue()])
    assert sender.wakes == 1  # once per committed entry
    events.publish([StateReplaced()])
    assert sender.wakes == 2
