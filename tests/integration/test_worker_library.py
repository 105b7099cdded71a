"""schedd.worker (Worker on threads, AsyncWorker on asyncio) against a real node: a handler that
returns acks, one that raises nacks with its text, a dead node is skipped, stop() drains and
nacks what runs past the grace period, a refused token or URL is a clear error, and an
effectively-once handler whose key is recorded is acked without being called, and the output
an Ack or Nack carries is kept with the attempt (a dead Nack ends the run at once). Each wait is
bounded; jobs are due at once."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.worker import (
    Ack,
    AsyncWorker,
    Events,
    Message,
    Nack,
    Outcome,
    Refused,
    SQLiteOnce,
    Unavailable,
    Worker,
)
from tests.servers import NodeProcess, free_ports, http, wait_for

NO_RETRY = {"max_attempts": 1}
RETRIES = {"max_attempts": 3, "backoff": "fixed", "initial_delay": "1h", "max_delay": "1h"}
LONG = "s" * 5_000 + "m" * 20_000 + "e" * 5_000


class Recorded(Events):
    """The events a test looks at, kept in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def switched(self, failed: str, reason: str, node: str) -> None:
        self.seen.append(("switched", (failed, node)))

    def duplicate(self, message: Message) -> None:
        self.seen.append(("duplicate", message.job_id))

    def settled(
        self, message: Message, outcome: Outcome, error: str | None, duration_s: float
    ) -> None:
        self.seen.append(("settled", (message.job_id, outcome, error)))

    def grace_over(self, running: int) -> None:
        self.seen.append(("grace_over", running))

    def of(self, kind: str) -> list[Any]:
        return [facts for seen, facts in list(self.seen) if seen == kind]


class Tenant:
    def __init__(self, node: NodeProcess) -> None:
        status, created, _ = http("POST", f"{node.url}/v1/tenants", {"name": "worker-lib"})
        assert status == 201, created
        self.node, self.token = node, str(created["token"])

    def job(self, queue: str, payload: Any = None, retry: dict[str, Any] = NO_RETRY) -> str:
        body = {
            "schedule": {"delay": "0s"},
            "target": {"type": "queue", "name": queue},
            "payload": payload,
            "retry": retry,
        }
        status, job, _ = http("POST", f"{self.node.url}/v1/jobs", body, token=self.token)
        assert status == 201, job
        return str(job["job_id"])

    def run_of(self, job_id: str) -> dict[str, Any]:
        """The job's one run ({} before it fires)."""
        url = f"{self.node.url}/v1/jobs/{job_id}/runs?outputs=true"
        status, page, _ = http("GET", url, token=self.token)
        assert status == 200, page
        return dict(page["runs"][0]) if page["runs"] else {}

    def ready(self, queue: str, count: int) -> None:
        def counted() -> bool:
            _, page, _ = http("GET", f"{self.node.url}/v1/queues", token=self.token)
            return any(q["name"] == queue and q["ready"] == count for q in page["queues"])

        wait_for(counted, 15, f"{count} ready messages in {queue}")

    def worker(self, queue: str, **options: Any) -> Worker:
        options = {"wait_s": 5.0, "events": Recorded(), "handle_signals": False, **options}
        return Worker(options.pop("urls", self.node.url), self.token, queue, **options)


@pytest.fixture(scope="module")
def tenant(node: NodeProcess) -> Tenant:
    return Tenant(node)


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


def recorded(worker: Worker | AsyncWorker) -> Recorded:
    assert isinstance(worker.events, Recorded)
    return worker.events


def test_return_acks_raise_nacks_with_the_text_and_a_dead_node_is_skipped(
    tenant: Tenant, queue: str
) -> None:
    jobs = {tenant.job(queue, {"do": do}): do for do in ("ok", "raise", "nack")}
    tenant.ready(queue, 3)
    dead = f"http://127.0.0.1:{free_ports(1)[0]}"
    worker = tenant.worker(queue, urls=[dead, tenant.node.url], concurrency=3)

    @worker.handler
    def handle(message: Message) -> None:
        if message.payload["do"] == "raise":
            raise KeyError("user_id")
        if message.payload["do"] == "nack":
            raise Nack("exactly this")

    worker.run_batch()
    assert recorded(worker).of("switched") == [(dead, tenant.node.url)]
    assert worker.node == tenant.node.url
    settled = {job: (outcome, error) for job, outcome, error in recorded(worker).of("settled")}
    assert settled == {
        job: {
            "ok": (Outcome.ACKED, None),
            "raise": (Outcome.NACKED, "KeyError: 'user_id'"),
            "nack": (Outcome.NACKED, "exactly this"),
        }[do]
        for job, do in jobs.items()
    }
    runs = {job: tenant.run_of(job) for job in jobs}
    assert {job: (run["status"], run["error"]) for job, run in runs.items()} == {
        job: ("succeeded", None) if error is None else ("dead", error)
        for job, (_, error) in settled.items()
    }


def test_stop_lets_a_handler_finish_and_nacks_one_past_the_grace_period(
    tenant: Tenant, queue: str
) -> None:
    quick, stuck = tenant.job(queue, "quick"), tenant.job(queue, "stuck")
    tenant.ready(queue, 2)
    worker = tenant.worker(queue, concurrency=2, grace_s=1.0)
    started, release, unstick = threading.Barrier(3), threading.Event(), threading.Event()

    @worker.handler
    def handle(message: Message) -> None:
        started.wait(10)
        (release if message.payload == "quick" else unstick).wait(20)

    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        started.wait(10)
        worker.stop()
        release.set()  # the quick one finishes within the grace period; the stuck one never
        began = time.monotonic()
        runner.join(10)
        assert not runner.is_alive() and time.monotonic() - began < 5
        assert worker.grace_over.is_set() and recorded(worker).of("grace_over") == [1]
        assert tenant.run_of(quick)["status"] == "succeeded"
        run = tenant.run_of(stuck)
        assert (run["status"], run["error"]) == (
            "dead",
            "worker stopped: the 1s grace period passed",
        )
    finally:
        unstick.set()
        runner.join(10)


def test_a_refused_token_or_url_and_no_node_at_all_are_clear_errors(
    tenant: Tenant, queue: str
) -> None:
    unknown = Worker(tenant.node.url, "sk_nobody", queue, handle_signals=False)
    unknown.handler(print)
    with pytest.raises(Refused, match=r"HTTP 401 unauthorized\): unknown token; check") as refused:
        unknown.run_batch()
    assert refused.value.status == 401
    elsewhere = tenant.worker(queue, urls=f"{tenant.node.url}/not-schedd")
    elsewhere.handler(print)
    with pytest.raises(Refused, match=r"HTTP 404.*check the node URLs") as missing:
        elsewhere.run_batch()
    assert missing.value.status == 404
    nowhere = tenant.worker(queue, urls=f"http://127.0.0.1:{free_ports(1)[0]}")
    nowhere.handler(print)
    with pytest.raises(Unavailable, match=r"no schedd node answered: cannot reach .*refused"):
        nowhere.run_batch()


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "tenant.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE effects (job_id TEXT, attempt INT)")
    yield path


def recorded_already(tenant: Tenant, once: SQLiteOnce, job_id: str) -> None:
    """Record the run's key as a worker that died before its ack would have."""
    run = wait_for(lambda: tenant.run_of(job_id), 15, "the run")
    with once.transaction(f"{job_id}:{run['scheduled_at']}") as tx:
        assert tx is not None


def effects(database: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(database) as db:
        return sorted(db.execute("SELECT job_id, attempt FROM effects").fetchall())


def test_an_effectively_once_handler_writes_once_and_skips_a_recorded_key(
    tenant: Tenant, queue: str, database: Path
) -> None:
    once = SQLiteOnce(database)
    fresh, failing, done = (tenant.job(queue, do) for do in ("write", "fail", "write"))
    recorded_already(tenant, once, done)
    tenant.ready(queue, 3)
    worker = tenant.worker(queue, concurrency=3)
    called: list[str] = []

    @worker.handler(once=once)
    def handle(message: Message, tx: sqlite3.Connection) -> None:
        called.append(message.job_id)
        tx.execute("INSERT INTO effects VALUES (?, ?)", (message.job_id, message.attempt))
        if message.payload == "fail":
            raise RuntimeError("the write is rolled back")

    worker.run_batch()
    assert sorted(called) == sorted([fresh, failing])
    assert effects(database) == [(fresh, 1)]
    assert recorded(worker).of("duplicate") == [done]
    assert [tenant.run_of(job)["status"] for job in (fresh, failing, done)] == [
        "succeeded",
        "dead",
        "succeeded",
    ]


def test_the_asyncio_worker_acks_nacks_skips_and_cancels_past_the_grace_period(
    tenant: Tenant, queue: str, database: Path
) -> None:
    once = SQLiteOnce(database)
    fresh, failing, done = (tenant.job(queue, do) for do in ("write", "fail", "write"))
    recorded_already(tenant, once, done)
    tenant.ready(queue, 3)
    events = Recorded()
    worker = AsyncWorker(
        tenant.node.url, tenant.token, queue, concurrency=3, wait_s=5.0, events=events
    )

    @worker.handler(once=once)
    async def handle(message: Message, tx: sqlite3.Connection) -> None:
        await asyncio.sleep(0)
        tx.execute("INSERT INTO effects VALUES (?, ?)", (message.job_id, message.attempt))
        if message.payload == "fail":
            raise RuntimeError("rolled back")

    asyncio.run(worker.run_batch())
    assert effects(database) == [(fresh, 1)] and events.of("duplicate") == [done]
    assert tenant.run_of(failing)["error"] == "RuntimeError: rolled back"

    stuck = tenant.job(queue, "stuck")
    tenant.ready(queue, 1)
    slow = AsyncWorker(
        tenant.node.url, tenant.token, queue, grace_s=0.5, wait_s=5.0, events=Recorded()
    )
    began: asyncio.Event

    @slow.handler
    async def hang(message: Message) -> None:
        began.set()
        await asyncio.sleep(60)

    async def stop_when_running() -> None:
        nonlocal began
        began = asyncio.Event()
        consuming = asyncio.create_task(slow.run())
        await asyncio.wait_for(began.wait(), 10)
        slow.stop()
        await asyncio.wait_for(consuming, 10)

    asyncio.run(stop_when_running())
    run = tenant.run_of(stuck)
    assert (run["status"], run["error"]) == ("dead", "worker stopped: the 0.5s grace period passed")


def handle_by_payload(message: Message) -> Ack:
    """Ack with output, nack with output (retried), nack dead at once, or ack a long output."""
    do = message.payload
    if do == "nack":
        raise Nack("exit code 1", output="half done\n")
    if do == "dead":
        raise Nack("job runs as 'ghost': no such user on here", is_dead=True)
    return Ack(LONG if do == "long" else "all done\n")


def check_outputs(tenant: Tenant, jobs: dict[str, str]) -> None:
    runs = {do: tenant.run_of(job) for job, do in jobs.items()}
    assert (runs["ack"]["status"], runs["ack"]["attempts"][0]["output"]) == (
        "succeeded",
        "all done\n",
    )
    nacked = runs["nack"]
    assert (nacked["status"], nacked["error"]) == ("retrying", "exit code 1"), nacked
    assert nacked["attempts"][0]["output"] == "half done\n"
    dead = runs["dead"]
    assert (dead["status"], dead["attempt"]) == ("dead", 1), dead  # two attempts were left
    assert dead["error"] == "job runs as 'ghost': no such user on here"
    assert dead["attempts"][0]["output"] is None
    kept = runs["long"]["attempts"][0]["output"]
    assert kept == "s" * 4_096 + "\n[... 21,808 characters left out ...]\n" + "e" * 4_096


@pytest.mark.parametrize("is_async", [False, True])
def test_ack_and_nack_keep_their_output_and_a_dead_nack_ends_the_run(
    tenant: Tenant, queue: str, is_async: bool
) -> None:
    jobs = {tenant.job(queue, do, retry=RETRIES): do for do in ("ack", "nack", "dead", "long")}
    tenant.ready(queue, 4)
    if not is_async:
        worker = tenant.worker(queue, concurrency=4)
        worker.handler(handle_by_payload)
        worker.run_batch()
    else:
        aworker = AsyncWorker(
            tenant.node.url, tenant.token, queue, concurrency=4, wait_s=5.0, events=Recorded()
        )

        @aworker.handler
        async def handle(message: Message) -> Ack:
            return handle_by_payload(message)

        asyncio.run(aworker.run_batch())
    check_outputs(tenant, jobs)
