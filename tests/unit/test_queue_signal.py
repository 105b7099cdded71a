"""Long-poll wake-ups: apply reports the (tenant, queue) pairs it fed; only their receives wake."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from schedd.api.context import QueueSignal, TokenCache
from schedd.node import subscribe_caches
from schedd.store.apply import StateMachine
from schedd.store.db import Database
from schedd.store.events import Event, MessagesReady
from schedd.subscribers import Subscribers
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_dispatch import spec

WAKE_BOUND_S = 1.0  # "promptly": well under the receive loop's 1 s re-check


def _setup(apply: Applier) -> None:
    tenant = {"name": "t1", "token_hash": "h", "signing_secret": "s", "allowed_hosts": []}
    limits = {"max_active_jobs": 100, "dispatch_rate": 100}
    apply("create_tenant", {"tenant_id": "t1", **tenant, **limits})
    apply("register_node", {"node_id": "n1", "api": "a", "raft": "r1"})
    moves = [{"partition": 3, "node_id": "n1", "epoch": 0}]
    apply("assign_leases", {"ttl_ms": 10_000, "moves": moves})
    items = [
        {
            "job_id": job_id,
            "partition": 3,
            "spec": spec({"run_at": "2026-09-21T14:13:20Z"}, target={"type": "queue", "name": q}),
            "next_run_at_ms": NOW_MS,
            "next_fire_at_ms": NOW_MS,
            "idempotency_key": None,
            "request_hash": None,
        }
        for job_id, q in (("ja", "A"), ("jb", "B"))
    ]
    apply("create_jobs", {"tenant_id": "t1", "jobs": items})


def _claim(apply: Applier, job_id: str) -> dict[str, Any]:
    item = {
        "partition": 3,
        "epoch": 1,
        "job_id": job_id,
        "scheduled_at_ms": NOW_MS,
        "fire_at_ms": NOW_MS,
        "is_trigger": False,
        "version": 1,
        "next_run_at_ms": None,
        "next_fire_at_ms": None,
    }
    return apply("claim_runs", {"node_id": "n1", "claims": [item]})


def test_a_long_poll_wakes_for_its_own_queue_only(db: Database) -> None:
    signal = QueueSignal()
    events = Subscribers()
    subscribe_caches(events, TokenCache(), signal)  # as the node routes MessagesReady
    apply = Applier(StateMachine(db, on_events=events.publish))
    _setup(apply)

    async def scenario() -> None:
        signal.bind(asyncio.get_running_loop())
        waiter = asyncio.create_task(signal.wait("t1", "A", 30.0))
        await asyncio.sleep(0)  # the waiter is registered
        result = await asyncio.to_thread(_claim, apply, "jb")  # queue B gets a message
        assert result == {"status": "ok", "claimed": 1, "rejected": {}}  # no event in it
        done, _ = await asyncio.wait({waiter}, timeout=0.3)
        assert not done and signal.wakeups == 0  # B's message left A's receive asleep
        started = asyncio.get_running_loop().time()
        await asyncio.to_thread(_claim, apply, "ja")  # now queue A
        assert await asyncio.wait_for(waiter, WAKE_BOUND_S) is True
        assert asyncio.get_running_loop().time() - started < WAKE_BOUND_S
        assert signal.wakeups == 1

    asyncio.run(scenario())


def test_events_are_reported_after_commit_and_never_stored_in_results(db: Database) -> None:
    reported: list[list[Event]] = []
    apply = Applier(StateMachine(db, on_events=reported.append))
    _setup(apply)
    reported.clear()
    _claim(apply, "ja")
    assert reported == [[MessagesReady("t1", "A")]]
    stored = [json.loads(r) for (r,) in db.conn.execute("SELECT result FROM applied_commands")]
    assert stored[-1] == {"status": "ok", "claimed": 1, "rejected": {}}


def test_a_timed_out_wait_leaves_nothing_behind() -> None:
    signal = QueueSignal()

    async def scenario() -> None:
        signal.bind(asyncio.get_running_loop())
        assert await signal.wait("t1", "A", 0.01) is False
        assert not signal._events

    asyncio.run(scenario())
