"""Worker: consume one queue with a handler function, on threads (stdlib HTTP).

A poll thread long-polls for as many messages as there are free handler slots, each message's
handler runs on a thread of its own, an extend thread keeps running messages invisible, and the
calling thread waits, then drains: on SIGTERM/SIGINT or stop() no more receives, running
handlers get `grace_s`, then `grace_over` is set and, `stop_wait_s` later, the ones still
running are nacked. The asyncio form is aioworker.AsyncWorker.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TypeVar, overload

from schedd.worker.cells import REFRESH_S, share
from schedd.worker.client import Client
from schedd.worker.errors import Busy, Unavailable, WorkerError
from schedd.worker.events import Events, Outcome, tell
from schedd.worker.nodes import Backoff, parse_urls
from schedd.worker.once import Once
from schedd.worker.protocol import MIN_VISIBILITY_S, Message
from schedd.worker.settings import Settings
from schedd.worker.settlement import Settlement

log = logging.getLogger("schedd.worker")
H = TypeVar("H", bound=Callable[..., object])
TICK_S = 0.2  # the calling thread waits in short steps so signal handlers run promptly
SETTLE_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # the waits between an ack's or nack's 6 tries
SETTLE_BUDGET_S = 2 * sum(SETTLE_BACKOFF_S)


@dataclass(slots=True, eq=False)
class _Task:
    """One received message and how far its handling got."""

    message: Message
    started_s: float = field(default_factory=time.monotonic)
    is_handled: bool = False  # the handler returned or raised
    is_settling: bool = False  # its thread or the drain settles it (whoever came first)


class Worker:
    """Consume `queue` of the cluster at `urls` (a list, or comma-separated) with one handler.

    `@worker.handler` registers `fn(message)`; `@worker.handler(once=SQLiteOnce(path))`
    registers `fn(message, tx)`, effectively once (once.py). A handler that returns acks the
    message (returning `Ack(output)` keeps its output with the attempt); one that raises nacks
    it with the exception's text (`Nack(text, output=..., is_dead=...)` says more). `run()`
    consumes until SIGTERM/SIGINT (when called on the main thread) or `stop()`; `run_batch()`
    handles one receive's messages to the end. Both raise WorkerError: Unavailable when no node
    answers at the start, Refused for a token or tenant the nodes refuse.
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        token: str | None,
        queue: str,
        *,
        concurrency: int = 1,
        visibility_timeout_s: float = 30.0,
        wait_s: float = 20.0,
        grace_s: float = 30.0,
        stop_wait_s: float = 0.0,
        request_timeout_s: float = 10.0,
        headers: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        consumer: str | None = None,
        events: Events | None = None,
        handle_signals: bool = True,
    ) -> None:
        self.settings = Settings(
            urls=parse_urls(urls),
            token=token,
            queue=queue,
            concurrency=concurrency,
            visibility_timeout_s=visibility_timeout_s,
            wait_s=wait_s,
            grace_s=grace_s,
            stop_wait_s=stop_wait_s,
            request_timeout_s=request_timeout_s,
            consumer=consumer,
            headers=dict(headers or {}),
        )
        self.events = events or Events()
        self.grace_over = threading.Event()  # a handler that can stop early may watch it
        self._client = Client(self.settings, self._switched, ssl_context)
        self._handle_signals = handle_signals
        self._fn: Callable[..., object] | None = None
        self._once: Once | None = None
        self._tasks: set[_Task] = set()
        self._cond = threading.Condition()  # an RLock: a signal handler may take it again
        self._stopping = threading.Event()
        self._done = threading.Event()
        self._grace_ends_s = float("inf")
        self._fatal: WorkerError | None = None
        self._pollers: dict[str, threading.Thread] = {}  # one receive loop per cell
        self._reserved = 0  # handler slots a receive in progress asked for
        self._batch_failures = 0  # run_batch: cells whose receive failed

    @property
    def node(self) -> str:
        """The node URL in use."""
        return self._client.nodes.current

    @overload
    def handler(self, fn: H) -> H: ...

    @overload
    def handler(self, *, once: Once | None = None) -> Callable[[H], H]: ...

    def handler(self, fn: H | None = None, *, once: Once | None = None) -> H | Callable[[H], H]:
        """Register the worker's handler: `fn(message)`, or with `once` `fn(message, tx)`."""

        def register(fn: H) -> H:
            if self._fn is not None:
                raise ValueError(f"this worker has a handler already: {self._fn!r}")
            self._fn, self._once = fn, once
            return fn

        return register if fn is None else register(fn)

    def run(self) -> None:
        """Consume until SIGTERM/SIGINT or stop(), then drain."""
        self._serve(is_batch=False)

    def run_batch(self) -> None:
        """Receive once (waiting up to `wait_s`), handle those messages to the end."""
        self._serve(is_batch=True)

    def stop(self) -> None:
        """Receive no more; running handlers get `grace_s` (thread-safe; again: no grace)."""
        self._ask_stop("stop()")

    def _switched(self, failed: str, reason: str, node: str) -> None:
        tell(self.events.switched, failed, reason, node)

    def _serve(self, *, is_batch: bool) -> None:
        if self._fn is None:
            raise WorkerError("no handler: register one with @worker.handler")
        self._reset()
        self._client.check()
        self._read_cells()
        s = self.settings
        tell(self.events.receiving, s.queue, s.concurrency, self.node)
        with self._signals():
            extender = threading.Thread(target=self._extend_loop, daemon=True)
            try:
                for cell in self._client.cells.names:
                    self._start_poller(cell, is_batch)
                extender.start()
                if not is_batch:
                    threading.Thread(target=self._cells_loop, daemon=True).start()
                # run(): a cell's loop ends when the cell leaves the directory, and a new
                # cell's starts; run_batch(): each ends after its one receive
                while not self._stopping.is_set() and (not is_batch or self._is_polling()):
                    self._stopping.wait(TICK_S)
                self._drain()
            finally:
                self._done.set()
        if self._fatal is not None:
            raise self._fatal
        tell(self.events.stopped)

    def _reset(self) -> None:
        # New events, not cleared ones: a poll thread of an earlier run, still in its long
        # poll, keeps the stopped ones and gives back what it receives.
        self._stopping, self._done = threading.Event(), threading.Event()
        self.grace_over.clear()
        self._grace_ends_s, self._fatal = float("inf"), None
        self._pollers, self._reserved, self._batch_failures = {}, 0, 0

    def _read_cells(self) -> list[str]:
        """Read the cells (cells.py): the new ones; on a failure, the ones in use stay."""
        cells, revision = self._client.cells, self._client.cells.revision
        try:
            added = self._client.read_cells()
        except (Unavailable, Busy) as exc:
            tell(self.events.receive_failed, f"cannot read the cells: {exc}", REFRESH_S)
            return []
        if cells.is_several and (added or cells.revision != revision):
            tell(self.events.cells, cells.urls(), cells.revision)
        return added

    def _cells_loop(self) -> None:
        """Read the cells every so often (at once after a hint) and receive from new ones."""
        stopping = self._stopping
        while not stopping.wait(TICK_S * 5):
            if self._client.cells.take_refresh():
                for cell in self._read_cells():
                    self._start_poller(cell, is_batch=False)

    def _start_poller(self, cell: str, is_batch: bool) -> None:
        with self._cond:
            known = self._pollers.get(cell)
            if (known is not None and known.is_alive()) or self._stopping.is_set():
                return
            poller = threading.Thread(target=self._poll_loop, args=(cell, is_batch), daemon=True)
            self._pollers[cell] = poller
        poller.start()

    def _is_polling(self) -> bool:
        with self._cond:
            return any(poller.is_alive() for poller in self._pollers.values())

    def _poll_loop(self, cell: str, is_batch: bool) -> None:
        """Receive from one cell until stopped, or the cell leaves the directory."""
        stopping, backoff = self._stopping, Backoff()
        while not stopping.is_set() and self._client.cells.nodes(cell) is not None:
            count = self._reserve(stopping)
            if count == 0:
                continue
            try:
                messages = self._client.receive(count, cell)
            except (Unavailable, Busy) as exc:
                self._start([], stopping, count)
                if is_batch:
                    self._batch_failed(exc)
                    return
                wait_s = max(backoff.next(), exc.retry_after_s if isinstance(exc, Busy) else 0.0)
                tell(self.events.receive_failed, str(exc), wait_s)
                stopping.wait(wait_s)
                continue
            except Exception as exc:  # the top of a thread: stop, and run() raises it
                self._start([], stopping, count)
                self._fail(exc if isinstance(exc, WorkerError) else WorkerError(repr(exc)))
                return
            backoff.reset()
            self._start(messages, stopping, count)
            if is_batch:
                return

    def _reserve(self, stopping: threading.Event) -> int:
        """Wait for free handler slots: how many this cell's receive may ask for (0: stop)."""
        with self._cond:
            while not stopping.is_set():
                count = share(
                    self.settings.concurrency,
                    len(self._tasks),
                    self._reserved,
                    len(self._client.cells.names),
                )
                if count:
                    self._reserved += count
                    return count
                self._cond.wait(0.5)
            return 0

    def _batch_failed(self, exc: Unavailable | Busy) -> None:
        """run_batch: one cell's receive failed; the batch fails when every cell's did."""
        with self._cond:
            self._batch_failures += 1
            is_all = self._batch_failures >= len(self._client.cells.names)
        if is_all:
            self._fail(exc)
        else:
            tell(self.events.receive_failed, str(exc), 0.0)

    def _start(self, messages: list[Message], stopping: threading.Event, reserved: int) -> None:
        """Run a handler for each message received with `reserved` slots."""
        with self._cond:
            self._reserved -= reserved
            self._cond.notify_all()
            is_late = stopping.is_set()  # the long poll ended after a stop
            tasks = [] if is_late else [_Task(message=m) for m in messages]
            self._tasks.update(tasks)
        for task in tasks:
            threading.Thread(target=self._run, args=(task,), daemon=True).start()
        if is_late and messages:
            self._release(messages)

    def _release(self, messages: list[Message]) -> None:
        """Give back messages received too late to handle: visible again in a second."""
        receipts = [m.receipt for m in messages]
        try:
            self._client.extend(receipts, MIN_VISIBILITY_S)
        except WorkerError as exc:
            tell(self.events.extend_failed, len(receipts), str(exc))
        self._client.forget(receipts)

    def _run(self, task: _Task) -> None:
        message = task.message
        tell(self.events.started, message)
        settlement = self._call(message)
        tell(self.events.handled, message, settlement.error)
        with self._cond:
            task.is_handled = True
            self._cond.notify_all()
            if task.is_settling:  # nacked by the drain meanwhile
                return
            task.is_settling = True
        self._finish(task, self._settle(message, settlement), settlement.error)

    def _call(self, message: Message) -> Settlement:
        """Run the handler: how its message is to be settled."""
        assert self._fn is not None
        try:
            if self._once is None:
                return Settlement.of_return(self._fn(message))
            with self._once.transaction(message.idempotency_key) as tx:
                if tx is None:
                    tell(self.events.duplicate, message)
                    return Settlement()
                value = self._fn(message, tx)
            return Settlement.of_return(value)
        except BaseException as exc:  # the top of a handler thread: its message is settled
            return Settlement.of_exception(exc)

    def _settle(self, message: Message, settlement: Settlement) -> Outcome:
        """Ack or nack, tried 6 times (SETTLE_BACKOFF_S apart) while no node answers."""
        action, error = settlement.action, settlement.error
        outputs = None if settlement.output is None else {message.receipt: settlement.output}
        for wait_s in (*SETTLE_BACKOFF_S, None):
            try:
                count = self._client.settle(
                    [message.receipt], error, outputs=outputs, is_dead=settlement.is_dead
                )
            except (Unavailable, Busy) as exc:
                if wait_s is None:
                    tell(self.events.settle_failed, message, action, str(exc))
                    return Outcome.UNSETTLED
                time.sleep(wait_s)
                continue
            except WorkerError as exc:
                tell(self.events.settle_failed, message, action, str(exc))
                return Outcome.UNSETTLED
            if not count:
                return Outcome.EXPIRED
            return Outcome.ACKED if error is None else Outcome.NACKED
        return Outcome.UNSETTLED

    def _finish(self, task: _Task, outcome: Outcome, error: str | None) -> None:
        duration_s = time.monotonic() - task.started_s
        tell(self.events.settled, task.message, outcome, error, duration_s)
        self._client.forget([task.message.receipt])
        with self._cond:
            self._tasks.discard(task)
            self._cond.notify_all()
        if self._once is not None:
            try:
                self._once.prune_if_due()
            except Exception:
                log.warning("cannot prune the idempotency keys", exc_info=True)

    def _extend_loop(self) -> None:
        s, done = self.settings, self._done
        while not done.wait(s.extend_every_s):
            with self._cond:
                receipts = [task.message.receipt for task in self._tasks]
            if not receipts:
                continue
            try:
                self._client.extend(receipts, s.visibility_timeout_s)
            except WorkerError as exc:
                tell(self.events.extend_failed, len(receipts), str(exc))

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        if not self._handle_signals or threading.current_thread() is not threading.main_thread():
            yield
            return
        signals = (signal.SIGTERM, signal.SIGINT)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in signals}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._ask_stop(signal.Signals(signum).name)

    def _ask_stop(self, reason: str) -> None:
        with self._cond:
            if self._stopping.is_set():
                self._grace_ends_s = 0.0
                self._cond.notify_all()
                tell(self.events.grace_cut, reason)
                return
            self._begin_stop()
            running = len(self._tasks)
        tell(self.events.stopping, reason, running, self.settings.grace_s)

    def _begin_stop(self) -> None:
        with self._cond:
            self._grace_ends_s = time.monotonic() + self.settings.grace_s
            self._stopping.set()
            self._cond.notify_all()

    def _fail(self, exc: WorkerError) -> None:
        self._fatal = exc
        tell(self.events.failed, exc)
        self._begin_stop()

    def _drain(self) -> None:
        """Wait for running handlers up to the grace period; nack the ones past it."""
        with self._cond:
            while self._tasks and time.monotonic() < self._grace_ends_s:
                self._cond.wait(TICK_S)
            late = [task for task in self._tasks if not task.is_handled]
        if late:
            tell(self.events.grace_over, len(late))
            self.grace_over.set()
            self._abandon(late)
        deadline_s = time.monotonic() + SETTLE_BUDGET_S
        with self._cond:
            while self._tasks and time.monotonic() < deadline_s:
                self._cond.wait(TICK_S)

    def _abandon(self, late: list[_Task]) -> None:
        """Give `late` handlers `stop_wait_s` to return, then nack the rest ourselves."""
        deadline_s = time.monotonic() + self.settings.stop_wait_s
        with self._cond:
            while any(not t.is_handled for t in late) and time.monotonic() < deadline_s:
                self._cond.wait(TICK_S)
            abandoned = [task for task in late if not task.is_settling]
            for task in abandoned:
                task.is_settling = True
        error = f"worker stopped: the {self.settings.grace_s:g}s grace period passed"
        for task in abandoned:
            args = (task, error)
            threading.Thread(target=self._settle_abandoned, args=args, daemon=True).start()

    def _settle_abandoned(self, task: _Task, error: str) -> None:
        self._finish(task, self._settle(task.message, Settlement(error=error)), error)

    def __repr__(self) -> str:
        return f"Worker(queue={self.settings.queue!r}, node={self.node!r})"
