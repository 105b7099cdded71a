"""Bounded DNS lookups: a name server that never answers holds a few of one tenant's lookups,
never the event loop's executor nor another tenant's, and the create-time check gives up."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from schedd.guard.dns import BoundedResolver, LookupTimedOut, lookups_for
from schedd.guard.targets import TargetGuard

HANG = "hang.test"  # its name server never answers (until the test ends)


class FakeDns:
    """A blocking lookup: HANG blocks until released, any other name is 93.184.215.14 at once.
    It counts the lookups of each name running at the same time."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.running: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    def __call__(self, host: str, port: int) -> list[str]:
        with self._lock:
            self.calls[host] += 1
            self.running[host] += 1
            self.most[host] = max(self.most[host], self.running[host])
        try:
            if host == HANG:
                self.release.wait(30)
            return ["93.184.215.14"]
        finally:
            with self._lock:
                self.running[host] -= 1


@pytest.fixture
def dns() -> Iterator[FakeDns]:
    fake = FakeDns()
    try:
        yield fake
    finally:
        fake.release.set()  # the pool's threads end with the test


async def _lookup(resolver: BoundedResolver, tenant: str, host: str) -> list[str] | Exception:
    with lookups_for(tenant):
        try:
            return await resolver(host, 443)
        except LookupTimedOut as exc:
            return exc


def test_a_hanging_name_server_holds_at_most_its_tenants_cap(dns: FakeDns) -> None:
    resolver = BoundedResolver(dns, threads=8, per_key=2, timeout_s=0.5)

    async def main() -> tuple[list[list[str] | Exception], float, list[str] | Exception]:
        slow = [asyncio.create_task(_lookup(resolver, "slow", HANG)) for _ in range(20)]
        await asyncio.sleep(0)  # every slow lookup has asked for a thread
        started = time.monotonic()
        fast = await _lookup(resolver, "fast", "fast.test")
        took = time.monotonic() - started
        return await asyncio.gather(*slow), took, fast

    slow, took, fast = asyncio.run(main())
    assert fast == ["93.184.215.14"] and took < 0.3, took
    assert all(isinstance(r, LookupTimedOut) for r in slow), slow
    assert "dns lookup of 'hang.test' timed out after 0.5s" in str(slow[0])
    assert dns.most[HANG] <= 2 and dns.calls[HANG] <= 2, (dns.most, dns.calls)
    assert resolver.held("slow") == 2  # timed out, but their threads still wait on the server
    dns.release.set()
    deadline = time.monotonic() + 5
    while resolver.held("slow") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert resolver.held("slow") == 0
    resolver.close()


def test_several_hanging_tenants_leave_threads_for_another(dns: FakeDns) -> None:
    resolver = BoundedResolver(dns, threads=8, per_key=2, timeout_s=0.3)

    async def main() -> tuple[float, list[str] | Exception]:
        tenants = [f"t{i}" for i in range(3) for _ in range(4)]
        hanging = [asyncio.create_task(_lookup(resolver, t, HANG)) for t in tenants]
        await asyncio.sleep(0.05)
        started = time.monotonic()
        fast = await _lookup(resolver, "fast", "fast.test")
        took = time.monotonic() - started
        await asyncio.gather(*hanging)
        return took, fast

    took, fast = asyncio.run(main())
    assert fast == ["93.184.215.14"] and took < 0.2, took
    assert dns.running[HANG] == 6, dns.running  # two per tenant, however many they asked for
    resolver.close()


def test_the_create_time_check_is_bounded_and_accepts_an_unanswered_name(dns: FakeDns) -> None:
    guard = TargetGuard(resolver=BoundedResolver(dns, timeout_s=30), check_timeout_s=0.3)
    started = time.monotonic()
    asyncio.run(guard.check(f"https://{HANG}/hook"))  # no answer: accepted, delivery checks again
    assert time.monotonic() - started < 2.0
    assert dns.calls[HANG] == 1


def test_lookups_outside_any_tenant_share_one_key(dns: FakeDns) -> None:
    resolver = BoundedResolver(dns, threads=8, per_key=1, shared=1, timeout_s=0.2)

    async def main() -> list[list[str] | Exception]:
        first = asyncio.create_task(resolver(HANG, 443))
        await asyncio.sleep(0.05)
        with lookups_for("t1"):
            mine = await resolver("fast.test", 443)
        with pytest.raises(LookupTimedOut):
            await first
        return [mine]

    assert asyncio.run(main()) == [["93.184.215.14"]]
    resolver.close()
