"""One tenant cannot stop delivery for others (issue 12 §2), with a real Caller in-process.

The caller runs on this test's event loop against a real store (commands applied at once, as a
one-node cluster would) and calls a scripted receiver on 127.0.0.1. A response that breaks
parsing, a bug met by one call, a name server that never answers, and a redriven run of the
maximum 100 attempts: each ends as a recorded attempt of that run, the node's call slots all
come back, and another tenant's callbacks go on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.delivery import http as http_module
from schedd.delivery.caller import Caller
from schedd.guard.dns import BoundedResolver
from schedd.guard.targets import TargetGuard
from schedd.sealing import PayloadKeys
from schedd.store.apply import StateMachine
from schedd.store.commands import LogCommand, R, RedriveDeadletter
from schedd.store.db import Database, ReadPool
from schedd.store.results import Done
from tests.conftest import Applier
from tests.receiver import Answer, Receiver, receiving

PARTITION = 3
WAIT_S = 15.0
NO_WAIT = {"max_attempts": 3, "backoff": "fixed", "initial_delay": "0s", "max_delay": "0s"}


def wall_ms() -> int:
    return int(time.time() * 1000)


class Node:
    """A store, the commands applied to it, and a Caller for node n1, which leases PARTITION."""

    def __init__(self, path: Path, guard: TargetGuard, tenant_concurrency: int = 8) -> None:
        self.db = Database(path / "state.db")
        self.apply = Applier(StateMachine(self.db))
        self.reads = ReadPool(self.db.path)
        self.caller = Caller(
            "n1",
            self.reads,
            self.propose,
            guard,
            PayloadKeys(),
            concurrency=32,
            tenant_concurrency=tenant_concurrency,
        )
        self._jobs = 0
        self.apply("register_node", {"node_id": "n1", "api": "a", "raft": "r1"}, ts_ms=wall_ms())
        moves = [{"partition": PARTITION, "node_id": "n1", "epoch": 0}]
        self.apply("assign_leases", {"ttl_ms": 600_000, "moves": moves}, ts_ms=wall_ms())

    async def propose(self, cmd: LogCommand[R]) -> R:
        return self.apply.propose(cmd, ts_ms=wall_ms())

    def tenant(self, tenant_id: str) -> None:
        secret = "whsec_" + base64.b64encode(tenant_id.encode().ljust(32, b"-")).decode()
        body = {
            "tenant_id": tenant_id,
            "name": tenant_id,
            "token_hash": f"h-{tenant_id}",
            "signing_secret": secret,
            "max_active_jobs": 1_000,
            "dispatch_rate": 10_000,
            "allowed_hosts": [],
        }
        assert self.apply("create_tenant", body, ts_ms=wall_ms())["status"] == "ok"

    def http_jobs(
        self, tenant_id: str, url: str, count: int, retry: dict[str, Any] = NO_WAIT
    ) -> list[str]:
        """`count` jobs of the tenant calling `url`, due and claimed now."""
        now = wall_ms()
        ids = [f"{tenant_id}-job{self._jobs + i}" for i in range(count)]
        self._jobs += count
        target = {"type": "http", "url": url, "method": "POST", "headers": {}, "timeout": "10s"}
        items = [_job_item(job_id, now, target, retry) for job_id in ids]
        created = self.apply("create_jobs", {"tenant_id": tenant_id, "jobs": items}, ts_ms=now)
        assert all(r.get("created") for r in created["results"]), created
        claims = [_claim(job_id, now) for job_id in ids]
        claimed = self.apply("claim_runs", {"node_id": "n1", "claims": claims}, ts_ms=now)
        assert claimed["claimed"] == count, claimed
        self.caller.wake_threadsafe()
        return ids

    def runs(self, job_ids: list[str]) -> dict[str, tuple[str, int]]:
        marks = ",".join("?" * len(job_ids))
        rows = self.db.conn.execute(
            f"SELECT job_id, status, attempt FROM runs WHERE job_id IN ({marks})", job_ids
        )
        return {job_id: (status, attempt) for job_id, status, attempt in rows}

    def attempts(self, job_id: str) -> list[tuple[int, str, str | None]]:
        rows = self.db.conn.execute(
            "SELECT attempt, outcome, error FROM attempts WHERE job_id = ? ORDER BY attempt",
            (job_id,),
        )
        return [tuple(row) for row in rows]

    def close(self) -> None:
        self.reads.close()
        self.db.close()


def _job_item(job_id: str, now: int, target: dict[str, Any], retry: dict[str, Any]) -> Any:
    spec = {
        "name": None,
        "schedule": {"run_at": "2026-09-21T14:13:20Z"},
        "window": None,
        "target": target,
        "payload": {"n": 1},
        "retry": retry,
        "misfire_policy": "run_once",
        "overlap_policy": "allow",
    }
    return {
        "job_id": job_id,
        "partition": PARTITION,
        "spec": spec,
        "next_run_at_ms": now,
        "next_fire_at_ms": now,
        "idempotency_key": None,
        "request_hash": None,
    }


def _claim(job_id: str, now: int) -> dict[str, Any]:
    return {
        "partition": PARTITION,
        "epoch": 1,
        "job_id": job_id,
        "scheduled_at_ms": now,
        "fire_at_ms": now,
        "is_trigger": False,
        "version": 1,
        "next_run_at_ms": None,
        "next_fire_at_ms": None,
    }


async def until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> float:
    """Wait (on the loop, so the caller runs) until `condition()`; the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s}s: {what}")
        await asyncio.sleep(0.01)
    return time.monotonic() - started


def run_with(node: Node, scenario: Callable[[], Awaitable[None]]) -> None:
    """Start the caller on a fresh loop, play `scenario`, stop the caller."""

    async def main() -> None:
        node.caller.start()
        try:
            await scenario()
        finally:
            await node.caller.stop()

    asyncio.run(main())


def all_free(node: Node) -> bool:
    """Every call slot of the node is free again: nothing in flight, no tenant counted busy."""
    return node.caller.calls_in_flight == 0 and not node.caller._busy


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as started:
        yield started


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    started = Node(tmp_path, TargetGuard(["127.0.0.0/8"]))
    try:
        yield started
    finally:
        started.close()


# ------------------------------------------------------------------ responses that break parsing


def test_a_retry_after_of_thousands_of_digits_is_a_retried_attempt_and_frees_its_slot(
    node: Node, receiver: Receiver
) -> None:
    receiver.script("huge", Answer(503, {"Retry-After": "9" * 5_000}), Answer(200))
    receiver.script("garbage", Answer(503, {"Retry-After": "soon, maybe " * 300}), Answer(200))
    many = {f"X-Header-{i}": "x" for i in range(100)}
    receiver.script("many", Answer(503, many), Answer(200))
    node.tenant("bad")
    node.tenant("good")

    async def scenario() -> None:
        [huge] = node.http_jobs("bad", receiver.url("huge"), 1)
        [garbage] = node.http_jobs("bad", receiver.url("garbage"), 1)
        [headers] = node.http_jobs("bad", receiver.url("many"), 1)
        await until(
            lambda: set(node.runs([huge, garbage, headers]).values()) == {("succeeded", 2)},
            "the bad tenant's runs retried and succeeded",
        )
        errors = {}
        for job_id in (huge, garbage, headers):
            failed, succeeded = node.attempts(job_id)
            assert failed[:2] == (1, "failed") and succeeded == (2, "succeeded", None)
            errors[job_id] = str(failed[2])
            assert len(errors[job_id]) <= 512, errors
        assert errors[huge].startswith("invalid response: Got more than 4096 bytes"), errors
        assert errors[garbage] == "http 503: ok", errors
        assert errors[headers].startswith("invalid response: "), errors
        await until(lambda: all_free(node), "every slot free")
        later = node.http_jobs("good", receiver.url("ok"), 10)
        await until(
            lambda: set(node.runs(later).values()) == {("succeeded", 1)}, "the good tenant's runs"
        )
        await until(lambda: all_free(node), "every slot free at the end")

    run_with(node, scenario)
    assert len(receiver.received("ok")) == 10


def test_an_exception_inside_one_call_is_recorded_and_frees_its_slot(
    node: Node, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_classify = http_module.classify

    def classify(status: int | None, **kwargs: Any) -> Any:
        if status == 503:
            raise RuntimeError("a bug met by this response")
        return real_classify(status, **kwargs)

    monkeypatch.setattr(http_module, "classify", classify)
    receiver.script("buggy", Answer(503), Answer(200))
    node.tenant("bad")
    node.tenant("good")

    async def scenario() -> None:
        [buggy] = node.http_jobs("bad", receiver.url("buggy"), 1)
        await until(lambda: node.runs([buggy])[buggy] == ("succeeded", 2), "the retried run")
        assert node.attempts(buggy) == [
            (1, "failed", "internal error: RuntimeError: a bug met by this response"),
            (2, "succeeded", None),
        ]
        later = node.http_jobs("good", receiver.url("ok"), 10)
        await until(
            lambda: set(node.runs(later).values()) == {("succeeded", 1)}, "the good tenant's runs"
        )
        await until(lambda: all_free(node), "every slot free")

    run_with(node, scenario)


# ------------------------------------------------------------------ DNS that never answers


class HangingDns:
    """A blocking lookup: hang.test never answers (until the test ends); fast.test is
    127.0.0.1 at once. It counts how many hang.test lookups run at the same time."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.running: Counter[str] = Counter()
        self.most: Counter[str] = Counter()

    def __call__(self, host: str, port: int) -> list[str]:
        with self._lock:
            self.running[host] += 1
            self.most[host] = max(self.most[host], self.running[host])
        try:
            if host == "hang.test":
                self.release.wait(30)
            return ["127.0.0.1"]
        finally:
            with self._lock:
                self.running[host] -= 1


def test_a_tenant_whose_name_server_never_answers_does_not_slow_another(
    tmp_path: Path, receiver: Receiver
) -> None:
    dns = HangingDns()
    resolver = BoundedResolver(dns, threads=8, per_key=2, timeout_s=1.0)
    node = Node(tmp_path, TargetGuard(["127.0.0.0/8"], resolver), tenant_concurrency=16)
    node.tenant("stuck")
    node.tenant("fast")
    no_retry = {**NO_WAIT, "max_attempts": 1}

    async def scenario() -> None:
        stuck = node.http_jobs("stuck", f"http://hang.test:{receiver.port}/never", 16, no_retry)
        await until(lambda: dns.running["hang.test"] == 2, "the stuck tenant's lookups")
        for round_ in range(3):  # while the stuck tenant's lookups hang and time out
            fast = node.http_jobs("fast", f"http://fast.test:{receiver.port}/ok", 10)
            took = await until(
                lambda fast=fast: set(node.runs(fast).values()) == {("succeeded", 1)},
                f"round {round_} of the fast tenant's runs",
            )
            assert took < 0.8, (round_, took)
        await until(
            lambda: set(node.runs(stuck).values()) == {("dead", 1)}, "the stuck tenant's runs"
        )
        for job_id in stuck:
            [(attempt, outcome, error)] = node.attempts(job_id)
            assert (attempt, outcome) == (1, "failed")
            assert "dns lookup of 'hang.test' timed out after 1s" in str(error), error
        await until(lambda: all_free(node), "every slot free")

    try:
        run_with(node, scenario)
        assert dns.most["hang.test"] == 2, dns.most  # its cap, never more
        assert resolver.held("stuck") == 2  # still waiting on the name server
        assert len(receiver.received("ok")) == 30 and receiver.received("never") == []
    finally:
        dns.release.set()
        resolver.close()
        node.close()


# ------------------------------------------------------------------ redrive at the maximum


def test_a_redriven_run_of_100_attempts_is_called_again_and_recorded(
    node: Node, receiver: Receiver
) -> None:
    receiver.script("down", Answer(500, body="still down"))
    node.tenant("t1")
    most = {**NO_WAIT, "max_attempts": 100}

    async def scenario() -> None:
        [job_id] = node.http_jobs("t1", receiver.url("down"), 1, most)
        await until(lambda: node.runs([job_id])[job_id] == ("dead", 100), "100 failed attempts")
        [(dl_id, attempts)] = node.db.conn.execute("SELECT id, attempts FROM deadletters")
        assert attempts == 100
        redrive = RedriveDeadletter(tenant_id="t1", id=dl_id, partition=PARTITION)
        assert await node.propose(redrive) == Done()
        node.caller.wake_threadsafe()
        await until(lambda: node.runs([job_id])[job_id] == ("dead", 101), "the redriven attempt")
        assert node.attempts(job_id)[-1] == (101, "failed", "http 500: still down")
        assert [row[0] for row in node.db.conn.execute("SELECT attempts FROM deadletters")] == [101]
        await until(lambda: all_free(node), "every slot free")

    run_with(node, scenario)
    assert len(receiver.received("down")) == 101
    assert [json.loads(r.body)["attempt"] for r in receiver.received("down")][-2:] == [100, 101]
