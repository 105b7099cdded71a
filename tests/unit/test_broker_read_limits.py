"""What a node reads from a tenant's broker is bounded (schedd/delivery/read_limits.py): hostile
servers on loopback announce a Redis reply of 1 GiB, a NATS message of 2 GB and an AMQP frame of
2 GiB and stream zeros after; the probe and a delivery fail naming the bound, this process's peak
RSS grows by less than 32 MiB, and what a tenant holds returns to zero after."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from schedd.delivery.brokers import BrokerDeliverer
from schedd.delivery.nats import NatsDeliverer
from schedd.delivery.outcome import Outcome, Verdict
from schedd.delivery.probe import probe
from schedd.delivery.rabbitmq import RabbitMqDeliverer
from schedd.delivery.read_limits import (
    MAX_FRAME_BYTES,
    FrameGauge,
    ReadBudgets,
    ReadLimitExceeded,
    TenantReads,
)
from schedd.delivery.redis_stream import RedisStreamDeliverer
from schedd.model import BrokerConnection, RetryPolicy
from schedd.sealing import PayloadKeys
from schedd.store.outbox import DueCall
from tests.brokers import found
from tests.hostile_brokers import (
    HOSTILE,
    hostile,
    read_resp_command,
    simple_answer,
)
from tests.unit.test_broker_pool import TENANT

T = TypeVar("T")
MIB = 1 << 20
BOUND = re.compile(r"of \d+ bytes is over the 1 MiB limit")
DELIVERERS = {"redis": RedisStreamDeliverer, "nats": NatsDeliverer, "rabbitmq": RabbitMqDeliverer}
TARGETS = {
    "redis": {"type": "redis_stream", "connection": "c", "stream": "s"},
    "nats": {"type": "nats", "connection": "c", "subject": "s.x"},
    "rabbitmq": {"type": "rabbitmq", "connection": "c", "exchange": "e", "routing_key": "k"},
}


def connection(kind: str, url: str) -> BrokerConnection:
    return BrokerConnection(
        tenant_id="t1", name="c", kind=kind, url=url, pinned_addresses=("127.0.0.1",), created_ms=1
    )


def peak_rss_growth(scenario: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """The scenario's result and how far this process's peak RSS rose above its RSS before."""
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (the peak) to the RSS now
    before = _status_kib("VmRSS")
    result = asyncio.run(scenario())
    return result, (_status_kib("VmHWM") - before) * 1024


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


@pytest.mark.parametrize("kind", ["redis", "rabbitmq"])
def test_the_probe_refuses_a_huge_reply_naming_the_bound(kind: str) -> None:
    handler, url = HOSTILE[kind]
    reads = ReadBudgets()
    with hostile(handler) as port:
        (ok, detail), growth = peak_rss_growth(
            lambda: probe(connection(kind, url.format(port=port)), 10, reads=reads)
        )
    assert not ok
    assert BOUND.search(detail), detail
    assert growth < 32 * MIB, f"peak RSS grew {growth / MIB:.0f} MiB"
    assert reads.held("t1") == 0


def call(kind: str) -> DueCall:
    return DueCall(1, 0, "t1", "job", 1_790_000_000_000, 1, json.dumps(TARGETS[kind]), "{}", "{}")


@pytest.mark.parametrize("kind", ["redis", "nats", "rabbitmq"])
def test_a_delivery_fails_fast_on_a_huge_reply_naming_the_bound(kind: str) -> None:
    (handler, url), deliverer_class = HOSTILE[kind], DELIVERERS[kind]
    reads = ReadBudgets()
    stored = connection(kind, url.format(port=0))

    async def scenario() -> Outcome:
        deliverer: BrokerDeliverer[object, object] = deliverer_class(  # type: ignore[assignment]
            PayloadKeys(), lambda t, n: found(stored), reads=reads, publish_timeout_s=20
        )
        deliverer.start()
        try:
            async with asyncio.timeout(15):  # well within the publish timeout: it failed fast
                return await deliverer.deliver(call(kind), TENANT, 0, RetryPolicy())
        finally:
            await deliverer.stop()

    with hostile(handler) as port:
        stored = connection(kind, url.format(port=port))
        outcome, growth = peak_rss_growth(scenario)
    assert outcome.verdict == Verdict.RETRY
    assert outcome.error is not None and BOUND.search(outcome.error), outcome.error
    assert growth < 32 * MIB, f"peak RSS grew {growth / MIB:.0f} MiB"
    assert reads.held("t1") == 0


def test_a_tenant_holds_at_most_its_budget_across_readers() -> None:
    tenant = TenantReads("t1", limit_bytes=2 * MIB + MIB // 2)
    first, second, third = (FrameGauge(tenant, "a frame") for _ in range(3))
    first.hold(MIB)
    second.hold(MIB // 2)
    second.hold(MIB)  # a frame's size grows as more of it is announced (nested replies)
    assert tenant.held == 2 * MIB
    with pytest.raises(ReadLimitExceeded, match="over the 2560 KiB a node allows a tenant"):
        third.hold(MIB)
    assert (third.held, tenant.held) == (0, 2 * MIB)  # a refused reader holds nothing
    with pytest.raises(ReadLimitExceeded, match="a frame of 1048577 bytes is over the 1 MiB"):
        first.hold(MAX_FRAME_BYTES + 1)
    assert tenant.held == MIB
    second.hold(0)
    third.hold(MIB)
    assert tenant.held == MIB
    budgets = ReadBudgets()
    assert budgets.tenant("t1") is budgets.tenant("t1")
    assert budgets.tenant("t2") is not budgets.tenant("t1")


async def redis_stalled_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """INFO gets a reply announced as 1,000,000 bytes that never comes."""
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ValueError):
        while True:
            name = (await read_resp_command(reader))[0].upper()
            if name == b"INFO":
                writer.write(b"$1000000\r\n")
                await writer.drain()
                await reader.read()  # until the client goes
                break
            writer.write(simple_answer(name))
            await writer.drain()


def test_one_tenants_replies_in_progress_are_bounded_across_its_connections() -> None:
    """Five probes of one tenant each wait on a reply of 1,000,000 bytes: four fit the tenant's
    4 MiB, the fifth is refused naming it, and another tenant is not held up by the first's."""
    reads = ReadBudgets()

    async def scenario(port: int) -> list[tuple[bool, str]]:
        url = f"redis://127.0.0.1:{port}/0"
        mine = [probe(connection("redis", url), 2, reads=reads) for _ in range(5)]
        other = dataclasses.replace(connection("redis", url), tenant_id="t2")
        answers = await asyncio.gather(*mine, probe(other, 2, reads=reads))
        return list(answers)

    with hostile(redis_stalled_reply) as port:
        answers = asyncio.run(scenario(port))
    refused = [detail for ok, detail in answers[:5] if "a node allows a tenant" in detail]
    assert len(refused) == 1, answers
    assert "over the 4 MiB a node allows a tenant" in refused[0]
    assert answers[5] == (False, "timed out after 2s")  # t2's own reply never came either
    assert (reads.held("t1"), reads.held("t2")) == (0, 0)
