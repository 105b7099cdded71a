"""Submit commands to Raft from asyncio, with a deadline and safe retries.

pysyncobj's own timeouts do not work for callbacks, so every submit keeps its own deadline.
A retry re-submits the same bytes (same command id): apply acts on an id once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from pysyncobj import FAIL_REASON

from schedd.errors import NoLeader, OutcomeUnknown
from schedd.store.command import Command, encode

log = logging.getLogger(__name__)

# Not applied: safe to send again. Anything else but SUCCESS may or may not have been applied.
NOT_APPLIED = frozenset(
    {
        FAIL_REASON.QUEUE_FULL,
        FAIL_REASON.MISSING_LEADER,
        FAIL_REASON.NOT_LEADER,
        FAIL_REASON.DISCARDED,
    }
)
RETRY_PAUSE_S = 0.05


class Submitter(Protocol):
    """What the proposer needs of the replica (tests may supply a fake)."""

    def apply_entry(self, blob: bytes, *, callback: Any) -> None: ...

    def leader_address(self) -> str | None: ...


class Proposer:
    """Turns pysyncobj's callback API into awaitable, deadline-bound proposals."""

    def __init__(self, replica: Submitter, *, timeout_s: float) -> None:
        self._replica = replica
        self.timeout_s = timeout_s

    async def propose(
        self, type_: str, body: Mapping[str, Any], *, now_ms: int | None = None
    ) -> dict[str, Any]:
        """Replicate one command; returns apply's result on this node (read-your-writes).

        Raises NoLeader when nothing was applied within the deadline, OutcomeUnknown when the
        command may have been applied; both are 503s that the client may retry.
        """
        cmd = Command(
            type=type_,
            id=uuid.uuid4().hex,
            ts_ms=int(time.time() * 1000) if now_ms is None else now_ms,
            body=body,
        )
        return await self.submit(encode(cmd))

    async def submit(self, blob: bytes) -> dict[str, Any]:
        """Submit an encoded command until it is applied here or the deadline passes."""
        deadline = time.monotonic() + self.timeout_s
        maybe_applied = False
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _gave_up(maybe_applied)
            try:
                result, reason = await asyncio.wait_for(self._submit_once(blob), remaining)
            except TimeoutError:
                raise _gave_up(True) from None
            if reason == FAIL_REASON.SUCCESS:
                return dict(result)
            maybe_applied = maybe_applied or reason not in NOT_APPLIED
            log.debug("proposal not applied reason=%s; retrying", reason)
            await asyncio.sleep(min(RETRY_PAUSE_S, max(0.0, deadline - time.monotonic())))

    async def _submit_once(self, blob: bytes) -> tuple[Any, int]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[Any, int]] = loop.create_future()

        def done(result: Any, reason: int) -> None:  # runs on pysyncobj's tick thread
            loop.call_soon_threadsafe(_resolve, future, (result, reason))

        self._replica.apply_entry(blob, callback=done)
        return await future


def _resolve(future: asyncio.Future[tuple[Any, int]], value: tuple[Any, int]) -> None:
    if not future.done():
        future.set_result(value)


def _gave_up(maybe_applied: bool) -> Exception:
    if maybe_applied:
        return OutcomeUnknown("the write may or may not have been applied; retry it")
    return NoLeader("no Raft leader reachable; retry later")
