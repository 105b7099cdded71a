"""The answers of the built-in queue routes: received messages, settle counts, queue counts
and the consumers seen receiving."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from schedd.wire.fields import Count, Instant, Payload

QUEUE_NAME = r"[A-Za-z0-9_.-]{1,128}"
CONSUMER_NAME = r"[A-Za-z0-9_.:@-]{1,128}"

QueueName = Annotated[str, Meta(pattern=f"^{QUEUE_NAME}$")]


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """A received message: its run, its attempt, and the receipt that settles it."""

    receipt: str
    job_id: str
    scheduled_at: Instant
    attempt: Annotated[int, Meta(ge=1)]
    idempotency_key: Annotated[str, Meta(description="<job_id>:<scheduled_at>")]
    payload: Payload


class Messages(msgspec.Struct, frozen=True, kw_only=True):
    """Up to max messages; empty when none came within wait."""

    messages: list[Message]


class Acked(msgspec.Struct, frozen=True, kw_only=True):
    acked: Count


class Nacked(msgspec.Struct, frozen=True, kw_only=True):
    nacked: Count


class Extended(msgspec.Struct, frozen=True, kw_only=True):
    extended: Count


ConsumerName = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=128,
        description="The receive's consumer field, else the client's address.",
    ),
]
NodeName = Annotated[str, Meta(description="The node it received through.")]


class ConsumerView(msgspec.Struct, frozen=True, kw_only=True):
    """One of a queue's consumers: it received through `node` lately."""

    consumer: ConsumerName
    last_seen: Instant
    node: NodeName


class SeenConsumer(msgspec.Struct, frozen=True, kw_only=True):
    """A consumer a node saw receive from one of the tenant's queues (what a node answers the
    peer that asks for its consumers)."""

    queue: QueueName
    consumer: ConsumerName
    last_seen: Instant
    node: NodeName

    def in_queue(self) -> ConsumerView:
        """The consumer as its queue object lists it."""
        return ConsumerView(consumer=self.consumer, last_seen=self.last_seen, node=self.node)


class QueueView(msgspec.Struct, kw_only=True):
    """A built-in queue's counts, and the consumers that received from it lately."""

    name: str
    ready: Count
    in_flight: Count
    delayed: Count
    dead: Count
    oldest_age_s: Annotated[
        Annotated[float, Meta(ge=0)] | None,
        Meta(
            description="Seconds since the run of the oldest ready or in-flight message was "
            "scheduled; null without one."
        ),
    ]
    consumers: Annotated[
        list[ConsumerView],
        Meta(
            description="Consumers that received from it in the last 5 minutes through any "
            "node: one item per consumer and node."
        ),
    ]


class QueueList(msgspec.Struct, frozen=True, kw_only=True):
    """Every queue with messages or dead letters, or a consumer in the last 5 minutes."""

    queues: list[QueueView]
    partial: Annotated[
        bool, Meta(description="A node did not answer: the consumers it saw are missing.")
    ]


class LocalConsumers(msgspec.Struct, frozen=True, kw_only=True):
    """The consumers this node alone saw receiving."""

    node_id: str
    consumers: list[SeenConsumer]
