"""The bodies of the built-in queue routes (receive, ack, nack, extend) and their answers:
received messages, settle counts, queue counts and the consumers seen receiving."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

import msgspec
from msgspec import UNSET, Meta, UnsetType

from schedd.bodies import Body, DurationMs
from schedd.wire.fields import Count, Instant, Payload
from schedd.worker.output import OUTPUT_EDGE_CHARS, bound_output

QUEUE_NAME = r"[A-Za-z0-9_.-]{1,128}"
CONSUMER_NAME = r"[A-Za-z0-9_.:@-]{1,128}"

QueueName = Annotated[str, Meta(pattern=f"^{QUEUE_NAME}$")]
MAX_RECEIVE = 100
MAX_WAIT_MS = 20_000
MAX_VISIBILITY_MS = 12 * 3_600_000
MAX_RECEIPTS = 1_000
DEFAULT_VISIBILITY_MS = 30_000
RECEIPT_CHARS = 140  # a store's receipt (at most about 70) and a cell's `<cell>~` (at most 33)

Receipts = Annotated[
    list[Annotated[str, Meta(min_length=1, max_length=RECEIPT_CHARS)]],
    Meta(min_length=1, max_length=MAX_RECEIPTS),
]
RECEIPTS_MESSAGE = f"must be a list of 1-{MAX_RECEIPTS} receipt strings"


class Visibility(DurationMs):
    """How long the messages stay hidden; default 30s."""

    minimum_ms = 1_000
    maximum_ms = MAX_VISIBILITY_MS


class Wait(DurationMs):
    """Long-poll up to this long; default 0s."""

    maximum_ms = MAX_WAIT_MS


class ReceiveRequest(Body):
    max: Annotated[int, Meta(ge=1, le=MAX_RECEIVE)] = 10
    wait: Wait | UnsetType = UNSET  # 0
    visibility_timeout: Visibility | UnsetType = UNSET  # DEFAULT_VISIBILITY_MS
    consumer: (
        Annotated[
            str,
            Meta(
                pattern=f"^{CONSUMER_NAME}$",
                description="Who receives, as GET /v1/queues shows it for 5 minutes; default: "
                "the client's address.",
            ),
        ]
        | None
    ) = None

    field_messages: ClassVar[Mapping[str, str]] = {
        "max": f"must be an integer from 1 to {MAX_RECEIVE}",
        "consumer": f"must match {CONSUMER_NAME}",
    }


OUTPUT_HEAD = OUTPUT_TAIL = OUTPUT_EDGE_CHARS  # characters of an output kept from each end
Outputs = Annotated[
    dict[Annotated[str, Meta(min_length=1, max_length=RECEIPT_CHARS)], str],
    Meta(
        max_length=MAX_RECEIPTS,
        description="The output of each receipt's attempt (a command's stdout and stderr), kept "
        f"with the attempt: at most {OUTPUT_HEAD:,} characters from the start and "
        f"{OUTPUT_TAIL:,} from the end. A receipt the request does not settle is ignored.",
    ),
]
OUTPUTS_MESSAGE = f"must be an object of at most {MAX_RECEIPTS:,} receipts to output strings"


bounded_output = bound_output  # the worker library's: worker and server keep the same text


class AckRequest(Body):
    receipts: Receipts
    outputs: Outputs = msgspec.field(default_factory=dict)

    field_messages: ClassVar[Mapping[str, str]] = {
        "receipts": RECEIPTS_MESSAGE,
        "outputs": OUTPUTS_MESSAGE,
    }


class NackRequest(Body):
    receipts: Receipts
    error: Annotated[str, Meta(description="Kept (first 4,000 characters).")] = ""
    outputs: Outputs = msgspec.field(default_factory=dict)
    dead: Annotated[
        bool,
        Meta(
            description="The runs are dead at once (dead letters), whatever attempts their "
            "retry policy leaves: for a failure no retry can mend (the error says why)."
        ),
    ] = False

    field_messages: ClassVar[Mapping[str, str]] = {
        "receipts": RECEIPTS_MESSAGE,
        "error": "must be a string",
        "outputs": OUTPUTS_MESSAGE,
        "dead": "must be true or false",
    }


class ExtendRequest(Body):
    receipts: Receipts
    visibility_timeout: Visibility | UnsetType = UNSET  # DEFAULT_VISIBILITY_MS

    field_messages: ClassVar[Mapping[str, str]] = {"receipts": RECEIPTS_MESSAGE}


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """A received message: its run, its attempt, and the receipt that settles it."""

    receipt: str
    job_id: str
    scheduled_at: Instant
    attempt: Annotated[int, Meta(extra_json_schema={"minimum": 1})]  # documented, not enforced
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
    paused: Annotated[
        bool, Meta(description="Receives hand out nothing while paused (runs still arrive).")
    ] = False
    paused_reason: str | None = None
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
