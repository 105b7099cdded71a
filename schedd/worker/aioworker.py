"""AsyncWorker: consume one queue with an `async def` handler, on asyncio and aiohttp.

The same behaviour as worker.Worker with tasks for threads: a poll task, a task per message, an
extend task; on SIGTERM/SIGINT or stop() no more receives (a long poll in progress is dropped),
running handlers get `grace_s`, then are cancelled and nacked.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import ssl
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, overload

import aiohttp

from schedd.worker.aioclient import AsyncClient
from schedd.worker.cells import REFRESH_S, share
from schedd.worker.errors import Busy, Unavailable, WorkerError
from schedd.worker.events import Events, Outcome, tell
from schedd.worker.nodes import Backoff, parse_urls
from schedd.worker.once import Once
from schedd.worker.protocol import MIN_VISIBILITY_S, Message
from schedd.worker.settings import Settings
from schedd.worker.settlement import Settlement
from schedd.worker.worker import SETTLE_BACKOFF_S, SETTLE_BUDGET_S, TICK_S

log = logging.getLogger("schedd.worker")
H = TypeVar("H", bound=Callable[..., Awaitable[object]])


@dataclass(slots=True, eq=False)
class _Task:
    """One received message, the task handling it and the one running its handler."""

    message: Message
    started_s: float
    runner: asyncio.Task[None] | None = None
    handler: asyncio.Task[Settlement] | None = None
    is_handled: bool = field(default=False)


class AsyncWorker:
    """Worker's asyncio twin (see worker.Worker for the arguments): `@worker.handler` takes an
    `async def fn(message)`, or with `once` `fn(message, tx)` (tx: a sqlite3.Connection for
    SQLiteOnce, a psycopg AsyncConnection for PostgresOnce); `await worker.run()`."""

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
        self._ssl = ssl_context
        self._handle_signals = handle_signals
        self._fn: Callable[..., Awaitable[object]] | None = None
        self._once: Once | None = None
        self._tasks: set[_Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: AsyncClient | None = None
        self._stopping = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._grace_ends_s = float("inf")
        self._fatal: WorkerError | None = None
        self._pollers: dict[str, asyncio.Task[None]] = {}  # one receive loop per cell
        self._reserved = 0  # handler slots a receive in progress asked for
        self._batch_failures = 0  # run_batch: cells whose receive failed

    @overload
    def handler(self, fn: H) -> H: ...

    @overload
    def handler(self, *, once: Once | None = None) -> Callable[[H], H]: ...

    def handler(self, fn: H | None = None, *, once: Once | None = None) -> H | Callable[[H], H]:
        """Register the worker's `async def` handler."""

        def register(fn: H) -> H:
            if not _is_async(fn):
                raise TypeError(f"AsyncWorker handlers are `async def`, got {fn!r} (use Worker)")
            if self._fn is not None:
                raise ValueError(f"this worker has a handler already: {self._fn!r}")
            self._fn, self._once = fn, once
            return fn

        return register if fn is None else register(fn)

    async def run(self) -> None:
        """Consume until SIGTERM/SIGINT or stop(), then drain."""
        await self._serve(is_batch=False)

    async def run_batch(self) -> None:
        """Receive once (waiting up to `wait_s`), handle those messages to the end."""
        await self._serve(is_batch=True)

    def stop(self) -> None:
        """Receive no more; running handlers get `grace_s` (from any thread)."""
        loop = self._loop
        if loop is None:
            return
        if _running_loop() is loop:
            self._ask_stop("stop()")
        else:
            loop.call_soon_threadsafe(self._ask_stop, "stop()")

    def _switched(self, failed: str, reason: str, node: str) -> None:
        tell(self.events.switched, failed, reason, node)

    async def _serve(self, *, is_batch: bool) -> None:
        if self._fn is None:
            raise WorkerError("no handler: register one with @worker.handler")
        self._reset()
        async with aiohttp.ClientSession() as session:
            self._client = client = AsyncClient(self.settings, self._switched, self._ssl, session)
            await client.check()
            await self._read_cells()
            s = self.settings
            tell(self.events.receiving, s.queue, s.concurrency, client.nodes.current)
            with self._signals():
                await self._consume(is_batch)
        if self._fatal is not None:
            raise self._fatal
        tell(self.events.stopped)

    def _reset(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping, self._slot_freed = asyncio.Event(), asyncio.Event()
        self._grace_ends_s, self._fatal = float("inf"), None
        self._pollers, self._reserved, self._batch_failures = {}, 0, 0

    async def _read_cells(self) -> list[str]:
        """Worker._read_cells's twin."""
        assert self._client is not None
        cells, revision = self._client.cells, self._client.cells.revision
        try:
            added = await self._client.read_cells()
        except (Unavailable, Busy) as exc:
            tell(self.events.receive_failed, f"cannot read the cells: {exc}", REFRESH_S)
            return []
        if cells.is_several and (added or cells.revision != revision):
            tell(self.events.cells, cells.urls(), cells.revision)
        return added

    async def _cells_loop(self) -> None:
        assert self._client is not None
        while True:
            await asyncio.sleep(TICK_S * 5)
            if self._client.cells.take_refresh():
                for cell in await self._read_cells():
                    self._start_poller(cell, is_batch=False)

    def _start_poller(self, cell: str, is_batch: bool) -> None:
        known = self._pollers.get(cell)
        if (known is None or known.done()) and not self._stopping.is_set():
            self._pollers[cell] = asyncio.create_task(self._poll_loop(cell, is_batch))

    async def _consume(self, is_batch: bool) -> None:
        assert self._client is not None
        for cell in self._client.cells.names:
            self._start_poller(cell, is_batch)
        extender = asyncio.create_task(self._extend_loop())
        directory = asyncio.create_task(self._cells_loop() if not is_batch else _idle())
        stopped = asyncio.create_task(self._stopping.wait())
        try:
            # run(): a cell's loop ends when the cell leaves the directory, and a new cell's
            # starts; run_batch(): each ends after its one receive
            while not self._stopping.is_set():
                polling = {poller for poller in self._pollers.values() if not poller.done()}
                if is_batch and not polling:
                    break
                await asyncio.wait({stopped, *polling}, return_when=asyncio.FIRST_COMPLETED)
            for poller in self._pollers.values():
                poller.cancel()
            await self._drain()
        finally:
            others = (extender, directory, stopped, *self._pollers.values())
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

    async def _poll_loop(self, cell: str, is_batch: bool) -> None:
        """Receive from one cell until stopped, or the cell leaves the directory."""
        assert self._client is not None
        backoff = Backoff()
        while not self._stopping.is_set() and self._client.cells.nodes(cell) is not None:
            count = await self._reserve()
            try:
                messages = await self._receive(count, cell)
            except (Unavailable, Busy) as exc:
                if is_batch:
                    self._batch_failed(exc)
                    return
                wait_s = max(backoff.next(), exc.retry_after_s if isinstance(exc, Busy) else 0.0)
                tell(self.events.receive_failed, str(exc), wait_s)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), wait_s)
                continue
            except Exception as exc:  # the top of the poll task: stop, and run() raises it
                self._fail(exc if isinstance(exc, WorkerError) else WorkerError(repr(exc)))
                return
            backoff.reset()
            if self._stopping.is_set():
                await self._release(messages)
                return
            for message in messages:
                self._start(message)
            if is_batch:
                return

    async def _receive(self, count: int, cell: str) -> list[Message]:
        """Receive from `cell` with `count` reserved slots, given back when it answers."""
        assert self._client is not None
        try:
            return await self._client.receive(count, cell)
        finally:
            self._reserved -= count
            self._slot_freed.set()

    async def _reserve(self) -> int:
        """Wait for free handler slots: how many this cell's receive may ask for."""
        assert self._client is not None
        while True:
            cells = len(self._client.cells.names)
            count = share(self.settings.concurrency, len(self._tasks), self._reserved, cells)
            if count:
                self._reserved += count
                return count
            self._slot_freed.clear()
            await self._slot_freed.wait()

    def _batch_failed(self, exc: Unavailable | Busy) -> None:
        """Worker._batch_failed's twin."""
        assert self._client is not None
        self._batch_failures += 1
        if self._batch_failures >= len(self._client.cells.names):
            self._fail(exc)
        else:
            tell(self.events.receive_failed, str(exc), 0.0)

    def _start(self, message: Message) -> None:
        assert self._loop is not None
        task = _Task(message=message, started_s=self._loop.time())
        task.runner = asyncio.create_task(self._run(task))
        self._tasks.add(task)

    async def _release(self, messages: list[Message]) -> None:
        assert self._client is not None
        receipts = [m.receipt for m in messages]
        if receipts:
            try:
                await self._client.extend(receipts, MIN_VISIBILITY_S)
            except WorkerError as exc:
                tell(self.events.extend_failed, len(receipts), str(exc))
            self._client.forget(receipts)

    async def _run(self, task: _Task) -> None:
        message = task.message
        tell(self.events.started, message)
        task.handler = asyncio.create_task(self._call(message))
        try:
            settlement = await task.handler
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this task itself is cancelled (shutdown past every bound)
            grace = f"worker stopped: the {self.settings.grace_s:g}s grace period passed"
            settlement = Settlement(error=grace)
        task.is_handled = True
        tell(self.events.handled, message, settlement.error)
        outcome = await self._settle(message, settlement)
        await self._finish(task, outcome, settlement.error)

    async def _call(self, message: Message) -> Settlement:
        """Run the handler: how its message is to be settled (cancelled past the grace)."""
        assert self._fn is not None
        try:
            if self._once is None:
                return Settlement.of_return(await self._fn(message))
            async with self._once.atransaction(message.idempotency_key) as tx:
                if tx is None:
                    tell(self.events.duplicate, message)
                    return Settlement()
                value = await self._fn(message, tx)
            return Settlement.of_return(value)
        except Exception as exc:  # the handler's failure is the nack's error
            return Settlement.of_exception(exc)

    async def _settle(self, message: Message, settlement: Settlement) -> Outcome:
        assert self._client is not None
        action, error = settlement.action, settlement.error
        outputs = None if settlement.output is None else {message.receipt: settlement.output}
        for wait_s in (*SETTLE_BACKOFF_S, None):
            try:
                count = await self._client.settle(
                    [message.receipt], error, outputs=outputs, is_dead=settlement.is_dead
                )
            except (Unavailable, Busy) as exc:
                if wait_s is None:
                    tell(self.events.settle_failed, message, action, str(exc))
                    return Outcome.UNSETTLED
                await asyncio.sleep(wait_s)
                continue
            except WorkerError as exc:
                tell(self.events.settle_failed, message, action, str(exc))
                return Outcome.UNSETTLED
            if not count:
                return Outcome.EXPIRED
            return Outcome.ACKED if error is None else Outcome.NACKED
        return Outcome.UNSETTLED

    async def _finish(self, task: _Task, outcome: Outcome, error: str | None) -> None:
        assert self._loop is not None
        duration_s = self._loop.time() - task.started_s
        tell(self.events.settled, task.message, outcome, error, duration_s)
        assert self._client is not None
        self._client.forget([task.message.receipt])
        self._tasks.discard(task)
        self._slot_freed.set()
        if self._once is not None:
            try:
                await self._once.aprune_if_due()
            except Exception:
                log.warning("cannot prune the idempotency keys", exc_info=True)

    async def _extend_loop(self) -> None:
        assert self._client is not None
        s = self.settings
        while True:
            await asyncio.sleep(s.extend_every_s)
            receipts = [task.message.receipt for task in self._tasks]
            if not receipts:
                continue
            try:
                await self._client.extend(receipts, s.visibility_timeout_s)
            except WorkerError as exc:
                tell(self.events.extend_failed, len(receipts), str(exc))

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        loop = self._loop
        signals = (signal.SIGTERM, signal.SIGINT)
        is_main = threading.current_thread() is threading.main_thread()
        if loop is None or not self._handle_signals or not is_main:
            yield
            return
        for sig in signals:
            loop.add_signal_handler(sig, self._ask_stop, sig.name)
        try:
            yield
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    def _ask_stop(self, reason: str) -> None:
        assert self._loop is not None
        if self._stopping.is_set():
            self._grace_ends_s = 0.0
            tell(self.events.grace_cut, reason)
            return
        self._grace_ends_s = self._loop.time() + self.settings.grace_s
        self._stopping.set()
        tell(self.events.stopping, reason, len(self._tasks), self.settings.grace_s)

    def _fail(self, exc: WorkerError) -> None:
        assert self._loop is not None
        self._fatal = exc
        tell(self.events.failed, exc)
        self._grace_ends_s = self._loop.time() + self.settings.grace_s
        self._stopping.set()

    async def _drain(self) -> None:
        """Wait for running handlers up to the grace period; cancel and nack the ones past it."""
        assert self._loop is not None
        loop = self._loop
        while _runners(self._tasks) and loop.time() < self._grace_ends_s:
            remaining_s = min(self._grace_ends_s - loop.time(), TICK_S)
            await asyncio.wait(_runners(self._tasks), timeout=max(remaining_s, 0.0))
        late = [task for task in self._tasks if not task.is_handled]
        if late:
            tell(self.events.grace_over, len(late))
            for task in late:
                if task.handler is not None:
                    task.handler.cancel()
        runners = _runners(self._tasks)
        if runners:
            bound_s = self.settings.stop_wait_s + SETTLE_BUDGET_S
            _, pending = await asyncio.wait(runners, timeout=bound_s)
            for runner in pending:  # their messages come back after their visibility timeout
                runner.cancel()

    def __repr__(self) -> str:
        node = None if self._client is None else self._client.nodes.current
        return f"AsyncWorker(queue={self.settings.queue!r}, node={node!r})"


async def _idle() -> None:
    """run_batch reads the cells once, at the start."""


def _is_async(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn)


def _runners(tasks: set[_Task]) -> set[asyncio.Task[None]]:
    return {task.runner for task in tasks if task.runner is not None}


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
