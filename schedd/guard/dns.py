"""Bounded DNS lookups for the SSRF guard: threads of its own, a cap per tenant, a timeout, so
a name server that never answers holds a few of one tenant's lookups and never the event loop's
default executor. Nothing here decides what may be called (that is `ssrf.py`)."""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from contextvars import ContextVar

Lookup = Callable[[str, int], list[str]]
"""A blocking lookup: (host, port) -> addresses as text. It runs on the pool's threads."""

LOOKUP_THREADS = 64
LOOKUPS_PER_KEY = 4  # one tenant's lookups running (or queued) at once, timed-out ones included
SHARED_LOOKUPS = 16  # lookups made for no tenant in particular (the API's create-time checks)
LOOKUP_TIMEOUT_S = 5.0
SHARED_KEY = "shared"

_KEY: ContextVar[str] = ContextVar("schedd_dns_key", default=SHARED_KEY)


@contextmanager
def lookups_for(key: str) -> Iterator[None]:
    """Count the lookups made inside this block (in this task) against `key` (a tenant)."""
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)


class LookupTimedOut(OSError):
    """No answer in time: a connection error for the caller, a retried attempt."""

    def __init__(self, host: str, timeout_s: float) -> None:
        super().__init__(errno.ETIMEDOUT, f"dns lookup of {host!r} timed out after {timeout_s:g}s")
        self.host = host


def getaddrinfo_lookup(host: str, port: int) -> list[str]:
    """The system resolver (hosts file, DNS), TCP addresses of every family."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class BoundedResolver:
    """An async resolver (`await resolver(host, port)`) that runs `lookup` on its own threads.

    Each key (the tenant named by `lookups_for`) holds at most `per_key` threads (the lookups
    made outside `lookups_for`, together, `shared`) and at most an equal share of the pool that
    leaves room for one more key. A lookup still running after its timeout keeps its thread,
    and its key's count, until it really ends."""

    def __init__(
        self,
        lookup: Lookup = getaddrinfo_lookup,
        *,
        threads: int = LOOKUP_THREADS,
        per_key: int = LOOKUPS_PER_KEY,
        shared: int = SHARED_LOOKUPS,
        timeout_s: float = LOOKUP_TIMEOUT_S,
    ) -> None:
        self._lookup = lookup
        self.threads = threads
        self.per_key = per_key
        self.shared = shared
        self.timeout_s = timeout_s
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dns")
        self._lock = threading.Lock()  # lookups end on the pool's threads
        self._held: Counter[str] = Counter()
        self._waiters: list[asyncio.Future[None]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        try:
            async with asyncio.timeout(self.timeout_s):  # not wait_for: see Caller._call_loop
                return await self._resolve(_KEY.get(), host, port)
        except TimeoutError:
            raise LookupTimedOut(host, self.timeout_s) from None

    def held(self, key: str) -> int:
        """Lookups of `key` running or queued now (for tests and metrics)."""
        with self._lock:
            return self._held[key]

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _resolve(self, key: str, host: str, port: int) -> list[str]:
        await self._acquire(key)
        try:
            running = self._executor.submit(self._lookup, host, port)
        except BaseException:
            self._release(key)
            raise
        running.add_done_callback(lambda _: self._release(key))
        return await asyncio.wrap_future(running)

    def _limit(self, key: str) -> int:
        keys = len(self._held) + (key not in self._held)
        cap = self.shared if key == SHARED_KEY else self.per_key
        return min(cap, max(1, self.threads // (keys + 1)))

    async def _acquire(self, key: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._held[key] < self._limit(key):
                    self._held[key] += 1
                    return
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append(waiter)
            try:
                await waiter  # some lookup ended: look again
            finally:
                with self._lock:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)

    def _release(self, key: str) -> None:
        with self._lock:
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _wake(waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    def resolve() -> None:
        if not waiter.done():
            waiter.set_result(None)

    with suppress(RuntimeError):  # its loop is closed: nobody waits any more
        waiter.get_loop().call_soon_threadsafe(resolve)
