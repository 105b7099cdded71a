"""Submit commands to Raft from asyncio: group commit, a deadline, and safe retries.

Proposals that arrive while earlier ones are in flight are sent together as one `batch` entry
(one Raft round and one SQLite transaction for all). pysyncobj's own timeouts do not work with
callbacks, so every submit keeps its own deadline; a retry re-sends the same bytes, and apply
acts on each command id once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pysyncobj import FAIL_REASON

from schedd.errors import ClusterUnavailable, CommandTooLarge, NoLeader, OutcomeUnknown, SchedError
from schedd.jsonbody import JSONObject
from schedd.raft import answers
from schedd.store.command import MAX_COMMAND_BYTES, encode_batch, encode_command
from schedd.store.commands import LogCommand, R, answer_of

log = logging.getLogger(__name__)

# Not applied: it never left this node, or a node that does not lead refused it. Anything else
# but SUCCESS may or may not have been applied: `no_leader` promises a client that retrying
# cannot duplicate, so it is kept for these. DISCARDED (another entry at the index this node
# waited on) is a verdict from this node's own log, which pysyncobj's followers sometimes
# rewrite after applying it ("truncating already-applied log entries"): not proof enough.
NOT_APPLIED = frozenset(
    {
        FAIL_REASON.QUEUE_FULL,
        FAIL_REASON.MISSING_LEADER,
        FAIL_REASON.NOT_LEADER,
    }
)
RETRY_PAUSE_S = 0.05
# Log entries this node has in flight; later proposals wait and join one batch. One is best:
# pysyncobj re-sends entries when several are in flight to a follower (bench_api.py: 1,900
# creates/s with one, 1,700-1,800 with two or four).
MAX_IN_FLIGHT = 1
MAX_BATCH_COMMANDS = 512
# Small entries interleave commands: a receive waits behind one entry of claims, not megabytes.
MAX_BATCH_BYTES = 256 * 1024  # and under appendEntriesBatchSizeBytes (4 MiB)
# Commands up to this size join a group ahead of larger ones (claim batches: about 100 KB).
SMALL_COMMAND_BYTES = 16 * 1024


class Submitter(Protocol):
    """What the proposer needs of the replica (tests may supply a fake)."""

    def apply_entry(self, blob: bytes, *, callback: Any) -> None: ...


@dataclass(eq=False)
class _Proposal:
    blob: bytes
    future: asyncio.Future[JSONObject]


class Proposer:
    """Turns pysyncobj's callback API into awaitable, deadline-bound, batched proposals."""

    def __init__(
        self,
        replica: Submitter,
        *,
        timeout_s: float,
        refusal: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._replica = replica
        self.timeout_s = timeout_s
        self._refusal = refusal  # why this node must not propose now (its clock), or None
        self._pending: list[_Proposal] = []
        self._in_flight = 0

    async def propose(self, cmd: LogCommand[R], *, now_ms: int | None = None) -> R:
        """Replicate one command; returns apply's result on this node (read-your-writes) as the
        command's result type (store/results.py), and raises a rejection as its error class.

        Raises NoLeader when nothing was applied within the deadline, OutcomeUnknown when the
        command may have been applied; both are 503s that the client may retry. A command
        encoded over MAX_COMMAND_BYTES is a CommandTooLarge (413), never proposed.
        """
        refusal = self._refusal()
        if refusal is not None:  # every command carries this node's clock as its time
            raise ClusterUnavailable(f"this node takes no writes now ({refusal}); use another")
        ts_ms = int(time.time() * 1000) if now_ms is None else now_ms
        blob = encode_command(cmd, id=uuid.uuid4().hex, ts_ms=ts_ms)
        if len(blob) > MAX_COMMAND_BYTES:
            raise CommandTooLarge(cmd.TYPE, len(blob), MAX_COMMAND_BYTES)
        proposal = _Proposal(blob, asyncio.get_running_loop().create_future())
        self._pending.append(proposal)
        self._flush()
        try:
            answer = await asyncio.wait_for(asyncio.shield(proposal.future), self.timeout_s)
        except TimeoutError:
            is_sent = proposal not in self._pending  # taken into a group: it goes out anyway
            if not is_sent:
                self._pending.remove(proposal)
            proposal.future.cancel()  # nobody waits for its outcome any more
            raise _gave_up(is_sent) from None
        return answer_of(cmd, answer)

    def _flush(self) -> None:
        while self._pending and self._in_flight < MAX_IN_FLIGHT:
            group = self._next_group()
            self._in_flight += 1
            asyncio.get_running_loop().create_task(self._send(group))

    def _next_group(self) -> list[_Proposal]:
        """Take the next entry's proposals: the oldest first (so nothing waits for ever), then
        the small ones in order (a receive, an ack or a create does not wait for the next Raft
        round behind a dispatcher's claim batches), then the rest in order; up to
        MAX_BATCH_COMMANDS and MAX_BATCH_BYTES. Pending proposals were made concurrently, so
        any order of them is one their callers could have seen."""
        oldest, *others = self._pending
        others.sort(key=lambda p: len(p.blob) > SMALL_COMMAND_BYTES)  # stable: small ones first
        group, size = [oldest], len(oldest.blob)
        for proposal in others:
            size += len(proposal.blob)
            if len(group) == MAX_BATCH_COMMANDS or size > MAX_BATCH_BYTES:
                break
            group.append(proposal)
        taken = {id(p) for p in group}
        self._pending = [p for p in self._pending if id(p) not in taken]
        return group

    async def _send(self, group: list[_Proposal]) -> None:
        try:
            results: list[JSONObject | Exception]
            if len(group) == 1:
                results = [_one(await self.submit(group[0].blob))]
            else:
                blob = encode_batch(
                    [p.blob for p in group], id=uuid.uuid4().hex, ts_ms=int(time.time() * 1000)
                )
                results = _unpack(await self.submit(blob), len(group))
        except SchedError as exc:  # ClusterUnavailable; CommandTooLarge cannot happen here
            for proposal in group:
                settle_future(proposal.future, exc)
        else:
            for proposal, result in zip(group, results, strict=True):
                settle_future(proposal.future, result)
        finally:
            self._in_flight -= 1
            self._flush()

    async def submit(self, blob: bytes) -> JSONObject:
        """Submit an encoded entry until it is applied here or the deadline passes."""
        if len(blob) > MAX_COMMAND_BYTES:  # a group is one command or <= MAX_BATCH_BYTES
            raise CommandTooLarge("log entry", len(blob), MAX_COMMAND_BYTES)
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
                own = answers.result_for(blob, result)
                if own is None:  # another entry's result: ours may or may not be applied
                    log.error("a proposal got the result of another log entry: answered unknown")
                    raise OutcomeUnknown("the write may or may not have been applied; retry it")
                return dict(own)
            maybe_applied = maybe_applied or reason not in NOT_APPLIED
            log.debug("proposal not applied reason=%s; retrying", reason)
            await asyncio.sleep(min(RETRY_PAUSE_S, max(0.0, deadline - time.monotonic())))

    async def _submit_once(self, blob: bytes) -> tuple[Any, int]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[Any, int]] = loop.create_future()

        def done(result: Any, reason: int) -> None:  # runs on pysyncobj's tick thread
            loop.call_soon_threadsafe(settle_future, future, (result, reason))

        self._replica.apply_entry(blob, callback=done)
        return await future


def _one(result: JSONObject) -> JSONObject | Exception:
    """A single command's result; "replayed" (its kept result was gone) is no answer."""
    if result.get("status") == "replayed":
        return _not_kept()
    return result


def _unpack(result: JSONObject, count: int) -> list[JSONObject | Exception]:
    """Each command's result from a batch's result."""
    results = result.get("results")
    if result.get("status") == "ok" and isinstance(results, list) and len(results) == count:
        return [r if isinstance(r, dict) else _not_kept() for r in results]
    # "replayed": a snapshot installed meanwhile already held the entry; its results are gone.
    return [_not_kept()] * count


def _not_kept() -> OutcomeUnknown:
    return OutcomeUnknown("the write was applied, but its result was not kept")


def settle_future(future: asyncio.Future[Any], outcome: Any) -> None:
    """Give a future its outcome (an exception is raised to its awaiter), unless it has one."""
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _gave_up(maybe_applied: bool) -> ClusterUnavailable:
    if maybe_applied:
        return OutcomeUnknown("the write may or may not have been applied; retry it")
    return NoLeader("no Raft leader reachable; retry later")


class ThreadProposer:
    """Proposals from background threads (dispatchers, lease manager), through the same
    group-committing Proposer on the event loop."""

    def __init__(self, proposer: Proposer, loop: asyncio.AbstractEventLoop) -> None:
        self._proposer = proposer
        self._loop = loop

    def submit(self, cmd: LogCommand[R]) -> concurrent.futures.Future[R]:
        """Start a proposal; the future ends with apply's result, or its rejection or a
        ClusterUnavailable raised."""
        return asyncio.run_coroutine_threadsafe(self._proposer.propose(cmd), self._loop)

    def propose(self, cmd: LogCommand[R]) -> R:
        """Propose and wait (a little longer than the proposer's own deadline)."""
        return self.submit(cmd).result(self._proposer.timeout_s + 1.0)
