"""The proposer's promise about failures: `no_leader` only for a write that never left this
node (safe to retry), `outcome_unknown` for one that may still be applied."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pysyncobj import FAIL_REASON

from schedd.errors import NoLeader, OutcomeUnknown, PayloadTooLarge
from schedd.raft.proposer import Proposer
from schedd.store.command import MAX_COMMAND_BYTES
from schedd.store.commands import Barrier, UpdateTenant


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
        callback({"status": "replayed"}, FAIL_REASON.SUCCESS)


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
