"""schedd.worker across cells (issue 35), Worker and AsyncWorker, against scripted nodes: it reads
GET /v1/cells, receives from every cell and settles each receipt at the cell that handed it out;
a cell that is down does not stop the others' messages; a node from before cells (404) or a
directory of one cell is the URLs given, as before cells."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from schedd.worker import AsyncWorker, Events, Message, Outcome, Worker
from tests.cells import Answer, ScriptedNode, Seen, directory, scripted_nodes
from tests.ports import free_ports

QUEUE = "reports"
EMPTY_WAIT_S = 0.05  # an empty receive's long poll, so a worker that runs does not spin


class QueueCell:
    """A scripted node of one cell: hands out its messages once each, acks only its own."""

    def __init__(self, name: str, node: ScriptedNode, count: int) -> None:
        self.name, self.node = name, node
        self.waiting = [f"{name}-r{i}" for i in range(count)]
        self.handed: set[str] = set()
        self.acked: list[list[str]] = []
        self.cells: Answer = Answer(404, {"error": {"code": "not_found", "message": "no"}})
        self.lock = threading.Lock()
        node.script = self.answer

    def answer(self, request: Seen) -> Answer:
        path = request.path
        if path == "/v1/queues":
            return Answer(200, {"queues": []})
        if path == "/v1/cells":
            return self.cells
        verb = path.rsplit("/", 1)[1]
        with self.lock:
            if verb == "receive":
                return self._receive(int(request.body["max"]))
            receipts = list(request.body["receipts"])
            if verb == "ack":
                self.acked.append(receipts)
            known = [receipt for receipt in receipts if receipt in self.handed]
        return Answer(200, {{"ack": "acked", "nack": "nacked"}.get(verb, verb + "ed"): len(known)})

    def _receive(self, count: int) -> Answer:
        given, self.waiting = self.waiting[:count], self.waiting[count:]
        if not given:
            time.sleep(EMPTY_WAIT_S)
        self.handed.update(given)
        return Answer(200, {"messages": [_message(receipt) for receipt in given]})

    def all_acked(self) -> list[str]:
        with self.lock:
            return sorted(receipt for receipts in self.acked for receipt in receipts)


def _message(receipt: str) -> dict[str, Any]:
    job_id = "job_" + receipt.replace("-", "")
    at = "2026-12-05T06:25:00Z"
    return {
        "receipt": receipt,
        "job_id": job_id,
        "scheduled_at": at,
        "attempt": 1,
        "idempotency_key": f"{job_id}:{at}",
        "payload": {"receipt": receipt},
    }


class Told(Events):
    def __init__(self) -> None:
        self.cells_told: list[dict[str, str]] = []
        self.outcomes: list[Outcome] = []
        self.failures: list[str] = []

    def cells(self, nodes: dict[str, str], revision: int) -> None:
        self.cells_told.append(nodes)

    def receive_failed(self, reason: str, retry_in_s: float) -> None:
        self.failures.append(reason)

    def settled(
        self, message: Message, outcome: Outcome, error: str | None, duration_s: float
    ) -> None:
        self.outcomes.append(outcome)


@pytest.fixture
def two_cells() -> Iterator[tuple[QueueCell, QueueCell]]:
    with scripted_nodes(2) as (n1, n2):
        c1, c2 = QueueCell("c1", n1, 2), QueueCell("c2", n2, 1)
        cells = {"c1": [n1.url], "c2": [n2.url]}
        c1.cells = Answer(200, directory(cells, "c1"))
        c2.cells = Answer(200, directory(cells, "c2"))
        yield c1, c2


def consume(url: str, events: Told, *, until: Callable[[], bool] | None, is_async: bool) -> None:
    """Run a worker on `url` that acks every message: one batch, or until `until()` holds."""
    options: dict[str, Any] = {"events": events, "handle_signals": False, "concurrency": 4}
    options["wait_s"] = 0.0
    if is_async:
        asyncio.run(_consume_async(url, options, until))
        return
    worker = Worker(url, "tok", QUEUE, **options)
    worker.handler(lambda message: None)
    if until is None:
        worker.run_batch()
        return
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    _wait(until)
    worker.stop()
    thread.join(10)
    assert not thread.is_alive()


async def _consume_async(
    url: str, options: dict[str, Any], until: Callable[[], bool] | None
) -> None:
    worker = AsyncWorker(url, "tok", QUEUE, **options)

    @worker.handler
    async def handle(message: Message) -> None:
        pass

    if until is None:
        await worker.run_batch()
        return
    running = asyncio.create_task(worker.run())
    await asyncio.to_thread(_wait, until)
    worker.stop()
    await asyncio.wait_for(running, 10)


def _wait(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("is_async", [False, True])
def test_a_worker_receives_from_every_cell_and_acks_each_receipt_at_its_own(
    two_cells: tuple[QueueCell, QueueCell], is_async: bool
) -> None:
    c1, c2 = two_cells
    events = Told()

    consume(c1.node.url, events, until=None, is_async=is_async)

    assert c1.all_acked() == ["c1-r0", "c1-r1"]
    assert c2.all_acked() == ["c2-r0"]
    assert events.outcomes == [Outcome.ACKED] * 3
    assert events.cells_told == [{"c1": c1.node.url, "c2": c2.node.url}]
    assert [seen.path for seen in c2.node.seen if seen.method == "GET"] == []  # asked c1 only


@pytest.mark.parametrize("is_async", [False, True])
def test_a_cell_that_is_down_does_not_stop_the_others(
    two_cells: tuple[QueueCell, QueueCell], is_async: bool
) -> None:
    c1, _ = two_cells
    dead = f"http://127.0.0.1:{free_ports(1)[0]}"
    c1.cells = Answer(200, directory({"c1": [c1.node.url], "c2": [dead]}, "c1"))
    events = Told()

    consume(c1.node.url, events, until=lambda: len(c1.all_acked()) == 2, is_async=is_async)

    assert c1.all_acked() == ["c1-r0", "c1-r1"]
    assert any(f"cannot reach {dead}" in failure for failure in events.failures)


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("cells", ["old node", "one cell"])
def test_a_node_from_before_cells_or_one_cell_is_the_urls_given(
    two_cells: tuple[QueueCell, QueueCell], is_async: bool, cells: str
) -> None:
    c1, _ = two_cells
    if cells == "one cell":  # its URLs are not the ones given: the given ones are used
        c1.cells = Answer(200, directory({"default": ["http://192.0.2.1:8701"]}, "default"))
    else:
        c1.cells = Answer(404, {"error": {"code": "not_found", "message": "no route"}})
    events = Told()

    consume(c1.node.url, events, until=None, is_async=is_async)

    assert c1.all_acked() == ["c1-r0", "c1-r1"]
    assert events.cells_told == [] and events.failures == []
    assert ("GET", "/v1/cells") in [(seen.method, seen.path) for seen in c1.node.seen]
