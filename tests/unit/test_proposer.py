"""The proposer's promise about failures: `no_leader` only for a write that never left this
node (safe to retry), `outcome_unknown` for one that may still be applied."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pysyncobj import FAIL_REASON

from schedd.errors import NoLeader, OutcomeUnknown, PayloadTooLarge
from schedd.raft.answers import Answer
from schedd.raft.proposer import SMALL_COMMAND_BYTES, Proposer
from schedd.store.command import MAX_COMMAND_BYTES, decode, typed, unbatch
from schedd.store.commands import Barrier, UpdateTenant
from schedd.store.results import TenantSaved


class Silent:
    """A replica that takes every entry and never answers (a node cut off from its leader)."""

    def apply_entry(self, blob: bytes, *, callback: Any) -> None:
        pass


class HandedOver(Proposer):
    """Groups are taken from the queue, but their send never gets going (a busy event loop
    between the hand-over and the send task's first step)."""

    async def _send(self, group: list[Any]) -> None:
        await asyncio.Event().wait()


def test_a_proposal_taken_into_a_group_times_out_as_unknown_not_no_leader() -> None:
    # seed 1040: a create answered no_leader was applied; it had left the queue for a group
    # whose send started just after its deadline
    async def main() -> None:
        proposer = HandedOver(Silent(), timeout_s=0.05)
        with pytest.raises(OutcomeUnknown):
            await proposer.propose(Barrier())

    asyncio.run(main())


def test_a_proposal_still_queued_behind_another_times_out_as_no_leader() -> None:
    async def main() -> None:
        proposer = HandedOver(Silent(), timeout_s=0.05)
        first = asyncio.ensure_future(proposer.propose(Barrier()))
        await asyncio.sleep(0)  # the first takes the only in-flight slot
        with pytest.raises(NoLeader):
            await proposer.propose(Barrier())
        with pytest.raises(OutcomeUnknown):
            await first

    asyncio.run(main())


def test_a_silent_cluster_is_unknown_once_sent() -> None:
    async def main() -> None:
        proposer = Proposer(Silent(), timeout_s=0.05)
        with pytest.raises(OutcomeUnknown):
            await proposer.propose(Barrier())

    asyncio.run(main())


class Answering:
    """A replica that answers every entry at once with one failure reason."""

    def __init__(self, reason: int) -> None:
        self.reason = reason

    def apply_entry(self, blob: bytes, *, callback: Any) -> None:
        callback(None, self.reason)


@pytest.mark.parametrize(
    ("reason", "error"),
    [
        (FAIL_REASON.QUEUE_FULL, NoLeader),  # never left this node
        (FAIL_REASON.NOT_LEADER, NoLeader),  # refused by a node that does not lead
        (FAIL_REASON.DISCARDED, OutcomeUnknown),  # this node's log said so: not proof
        (FAIL_REASON.LEADER_CHANGED, OutcomeUnknown),
        (FAIL_REASON.UNKNOWN_OUTCOME, OutcomeUnknown),
    ],
)
def test_only_certain_failures_answer_no_leader(reason: int, error: type[Exception]) -> None:
    """What a group's submit concludes when every attempt failed alike until its deadline
    (chaos seed 1040: a create answered no_leader, through this path, had been applied)."""

    async def main() -> None:
        with pytest.raises(error):
            await Proposer(Answering(reason), timeout_s=0.2).submit(b"{}")

    asyncio.run(main())


class Replayed:
    """A replica whose node applied the entry as part of an installed snapshot, its result
    no longer kept."""

    def apply_entry(self, blob: bytes, *, callback: Any) -> None:
        callback(Answer(blob, {"status": "replayed"}), FAIL_REASON.SUCCESS)


def test_a_single_proposal_answered_replayed_is_unknown_not_a_result() -> None:
    async def main() -> None:
        with pytest.raises(OutcomeUnknown):
            await Proposer(Replayed(), timeout_s=0.2).propose(Barrier())

    asyncio.run(main())


class Recording:
    """A replica that records what it is given and applies nothing."""

    def __init__(self) -> None:
        self.blobs: list[bytes] = []

    def apply_entry(self, blob: bytes, *, callback: Any) -> None:
        self.blobs.append(blob)


def test_an_oversized_command_is_refused_and_never_proposed() -> None:
    async def main() -> None:
        replica = Recording()
        proposer = Proposer(replica, timeout_s=1.0)
        with pytest.raises(PayloadTooLarge) as refused:
            await proposer.propose(padded(MAX_COMMAND_BYTES))
        assert refused.value.http_status == 413
        assert f"{MAX_COMMAND_BYTES}-byte limit" in str(refused.value)
        with pytest.raises(PayloadTooLarge):
            await proposer.submit(b"x" * (MAX_COMMAND_BYTES + 1))
        assert replica.blobs == []

    asyncio.run(main())


def test_a_command_just_under_the_cap_is_proposed() -> None:
    async def main() -> None:
        replica = Recording()
        proposer = Proposer(replica, timeout_s=0.05)
        with pytest.raises(OutcomeUnknown):  # the recording replica never answers
            await proposer.propose(padded(MAX_COMMAND_BYTES - 200))
        assert len(replica.blobs) >= 1 and len(replica.blobs[0]) <= MAX_COMMAND_BYTES

    asyncio.run(main())


def padded(size: int) -> UpdateTenant:
    """A command whose body holds `size` bytes of padding."""
    return UpdateTenant(tenant_id="t1", changes={"pad": "x" * size})


class Held:
    """A replica that records each entry and answers it when the test says so."""

    def __init__(self) -> None:
        self.blobs: list[bytes] = []
        self.callbacks: list[Any] = []

    def apply_entry(self, blob: bytes, *, callback: Any) -> None:
        self.blobs.append(blob)
        self.callbacks.append(callback)


def test_small_commands_join_the_next_entry_ahead_of_claim_sized_ones() -> None:
    """A receive or an ack proposed while claim batches wait goes into the next entry before
    them (issue 16: a receive must not queue behind claims); the oldest proposal still goes
    first, and large ones keep their order."""

    async def main() -> None:
        replica = Held()
        proposer = Proposer(replica, timeout_s=5.0)
        big = 2 * SMALL_COMMAND_BYTES

        def propose(tenant_id: str, size: int) -> asyncio.Future[TenantSaved]:
            cmd = UpdateTenant(tenant_id=tenant_id, changes={"pad": "x" * size})
            return asyncio.ensure_future(proposer.propose(cmd))

        first = propose("big1", big)
        await until(lambda: len(replica.blobs) == 1)  # big1 is the entry in flight
        waiting = [propose("big2", big), propose("small1", 10), propose("big3", big)]
        waiting.append(propose("small2", 10))
        await until(lambda: len(proposer._pending) == 4)  # they wait for big1's answer
        answer = {"status": "ok", "tenant_id": "big1"}
        replica.callbacks[0](Answer(replica.blobs[0], answer), FAIL_REASON.SUCCESS)
        assert await first == TenantSaved(tenant_id="big1")
        await until(lambda: len(replica.blobs) == 2)
        entry = replica.blobs[1]
        subs = unbatch(decode(entry, index=2), index=2)
        bodies = [typed(sub, index=2).body for sub in subs]
        order = [b.tenant_id for b in bodies if isinstance(b, UpdateTenant)]
        assert order == ["big2", "small1", "small2", "big3"]
        results = {"status": "ok", "results": [{"tenant_id": f"r{i}"} for i in range(4)]}
        replica.callbacks[1](Answer(entry, results), FAIL_REASON.SUCCESS)
        # each caller gets its own command's result, whatever the order in the entry
        assert [(await w).tenant_id for w in waiting] == ["r0", "r1", "r3", "r2"]

    asyncio.run(main())


async def until(condition: Any, timeout_s: float = 5.0) -> None:
    """Let the event loop run until `condition()` holds (bounded)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.001)


def test_a_result_for_another_entry_is_not_taken_as_this_ones() -> None:
    """A result pysyncobj hands over for another entry (suspected in chaos seed 2203: a create
    answered 201 whose command was applied nowhere) answers unknown, not success."""

    class Misdelivering:
        def apply_entry(self, blob: bytes, *, callback: Any) -> None:
            other = blob.replace(b"t1", b"t2")
            assert other != blob
            callback(Answer(other, {"status": "ok", "results": []}), FAIL_REASON.SUCCESS)

    async def main() -> None:
        with pytest.raises(OutcomeUnknown):
            await Proposer(Misdelivering(), timeout_s=0.5).propose(padded(10))
        untagged = Answering(FAIL_REASON.SUCCESS)  # a bare result, as pysyncobj's is untyped
        with pytest.raises(OutcomeUnknown):
            await Proposer(untagged, timeout_s=0.5).propose(padded(10))

    asyncio.run(main())
