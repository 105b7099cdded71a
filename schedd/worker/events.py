"""What a worker tells as it goes. The default logs to the `schedd.worker` logger; subclass
Events and override what you want reported elsewhere (schedctl work writes its own lines).

The methods are called from the worker's threads (or its event loop): keep them quick, and let
them not raise (an exception in one is logged and ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum
from typing import ParamSpec

from schedd.worker.protocol import Message

log = logging.getLogger("schedd.worker")
P = ParamSpec("P")


class Outcome(StrEnum):
    """How a message was settled."""

    ACKED = "acked"
    NACKED = "nacked"
    EXPIRED = "expired"  # the receipt had expired: the message was or will be delivered again
    UNSETTLED = "unsettled"  # no node took the ack or nack: it comes back after its visibility


class Events:
    """A worker's events, logged; override any of them."""

    def receiving(self, queue: str, concurrency: int, node: str) -> None:
        log.info("receiving queue=%s concurrency=%d node=%s", queue, concurrency, node)

    def cells(self, nodes: dict[str, str], revision: int) -> None:
        """Several cells (issue 35): one receive each, from `nodes` (cell: the node in use);
        told at the start and when the directory changes, never for one cell."""
        shown = " ".join(f"{cell}={node}" for cell, node in nodes.items())
        log.info("receiving from %d cells revision=%d %s", len(nodes), revision, shown)

    def switched(self, failed: str, reason: str, node: str) -> None:
        log.warning("node %s failed (%s); switching to %s", failed, reason, node)

    def receive_failed(self, reason: str, retry_in_s: float) -> None:
        log.warning("%s; trying again in %gs", reason, retry_in_s)

    def started(self, message: Message) -> None:
        log.debug("started %s scheduled_at=%s", message.facts, message.scheduled_at)

    def duplicate(self, message: Message) -> None:
        """Its idempotency key is recorded already: acked without calling the handler."""
        log.info("already done %s key=%s: acking", message.facts, message.idempotency_key)

    def handled(self, message: Message, error: str | None) -> None:
        """The handler returned (error None; its transaction committed) or raised."""

    def settled(
        self, message: Message, outcome: Outcome, error: str | None, duration_s: float
    ) -> None:
        log.info("finished %s duration=%.2fs %s", message.facts, duration_s, outcome)

    def settle_failed(self, message: Message, action: str, reason: str) -> None:
        log.warning("cannot %s %s: %s", action, message.facts, reason)

    def extend_failed(self, count: int, reason: str) -> None:
        log.warning("cannot extend %d message(s): %s", count, reason)

    def stopping(self, reason: str, running: int, grace_s: float) -> None:
        log.info(
            "%s: receiving no more; waiting up to %gs for %d handler(s)", reason, grace_s, running
        )

    def grace_cut(self, reason: str) -> None:
        log.info("%s again: ending the grace period now", reason)

    def grace_over(self, running: int) -> None:
        log.warning("grace period over: %d handler(s) still running", running)

    def failed(self, error: Exception) -> None:
        log.error("stopping: %s", error)

    def stopped(self) -> None:
        log.info("stopped")


def tell(event: Callable[P, None], *args: P.args, **kwargs: P.kwargs) -> None:
    """Call one event method; an exception in it is logged, never raised into the worker."""
    try:
        event(*args, **kwargs)
    except Exception:
        log.exception("the %s event raised", getattr(event, "__name__", event))
