"""One broker deliverer alone in a loop: N attempts with 256 in flight on one connection into the
loopback Redis, RabbitMQ and NATS (the machine's own services), and the attempts a second.

    .venv/bin/python benchmarks/bench_deliverer.py [--n 20000] [--kinds redis,rabbitmq,nats]

Prints one line per kind. For a before/after figure, run it twice in the same minute, once with
PYTHONPATH pointing at a checkout of the older commit.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import aio_pika
import nats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.brokers

from schedd.delivery.brokers import BrokerDeliverer
from schedd.delivery.nats import NatsDeliverer
from schedd.delivery.outcome import Verdict
from schedd.delivery.rabbitmq import RabbitMqDeliverer
from schedd.delivery.redis_stream import RedisStreamDeliverer
from schedd.model import BrokerConnection, RetryPolicy
from schedd.sealing import PayloadKeys
from tests import brokers

IN_FLIGHT = 256
RUN = uuid.uuid4().hex[:8]
KINDS: dict[str, tuple[type[BrokerDeliverer], dict[str, object]]] = {  # type: ignore[type-arg]
    "redis": (
        RedisStreamDeliverer,
        {"type": "redis_stream", "connection": "c", "stream": f"bench-{RUN}", "maxlen": 1000},
    ),
    "rabbitmq": (
        RabbitMqDeliverer,
        {"type": "rabbitmq", "connection": "c", "exchange": "amq.direct", "routing_key": RUN},
    ),
    "nats": (NatsDeliverer, {"type": "nats", "connection": "c", "subject": f"bench.{RUN}"}),
}


async def make_room(kind: str) -> Callable[[], Awaitable[None]]:
    """Create where the kind's messages go (a queue bound to amq.direct, a JetStream stream);
    returns what removes it."""
    if kind == "rabbitmq":
        amqp = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
        channel = await amqp.channel()
        queue = await channel.declare_queue(f"bench-{RUN}", auto_delete=True)
        await queue.bind("amq.direct", routing_key=RUN)

        async def remove_queue() -> None:
            await queue.delete(if_unused=False, if_empty=False)
            await amqp.close()

        return remove_queue
    if kind == "nats":
        nc = await nats.connect("nats://127.0.0.1:4222")
        js = nc.jetstream()
        await js.add_stream(name=f"BENCH_{RUN}", subjects=[f"bench.{RUN}"])

        async def remove_stream() -> None:
            await js.delete_stream(f"BENCH_{RUN}")
            await nc.close()

        return remove_stream

    async def nothing() -> None:
        return None

    return nothing


async def measure(kind: str, n: int) -> tuple[float, int]:
    remove = await make_room(kind)
    try:
        return await _measure(kind, n)
    finally:
        await remove()


async def _measure(kind: str, n: int) -> tuple[float, int]:
    deliverer_class, target = KINDS[kind]
    connection = brokers.connection(kind, name="c")

    async def lookup(tenant_id: str, name: str) -> BrokerConnection:
        return connection

    deliverer = deliverer_class(PayloadKeys(), lookup)
    deliverer.start()
    slots = asyncio.Semaphore(IN_FLIGHT)
    succeeded = 0

    async def one(i: int) -> None:
        nonlocal succeeded
        call = brokers.due_call(target, job_id=f"job-{i}", payload={})
        async with slots:
            outcome = await deliverer.deliver(call, brokers.TENANT, 0, RetryPolicy())
        succeeded += outcome.verdict == Verdict.SUCCEEDED

    try:
        await asyncio.gather(*(one(i) for i in range(200)))  # connect, warm up
        succeeded = 0
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        elapsed = time.perf_counter() - started
    finally:
        await deliverer.stop()
    return elapsed, succeeded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--kinds", default="redis,rabbitmq,nats")
    args = parser.parse_args()
    for kind in args.kinds.split(","):
        elapsed, succeeded = asyncio.run(measure(kind, args.n))
        print(
            f"{kind:9} {args.n} attempts in {elapsed:.2f} s: {args.n / elapsed:,.0f}/s "
            f"({succeeded} succeeded)"
        )


if __name__ == "__main__":
    main()
