"""Cluster membership changes with pysyncobj's dynamic membership (`dynamicMembershipChange`,
on in every node): one node added or removed at a time, each change a log entry that takes
effect on each node as soon as it has it (Raft's single-server change). pysyncobj keeps the
membership in its journal and snapshots, so a restarted node knows it whatever its config says.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Literal, Protocol

from pysyncobj import FAIL_REASON

from schedd.errors import Conflict, InvalidRequest, NoLeader, OutcomeUnknown

ADDRESS = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(?P<port>\d{1,5})", re.ASCII)
NOT_APPLIED = frozenset({FAIL_REASON.MISSING_LEADER, FAIL_REASON.QUEUE_FULL})


class MembershipReplica(Protocol):
    """The part of pysyncobj's SyncObj this module uses (tests may supply a fake)."""

    def addNodeToCluster(self, node: str, callback: Any = None) -> None: ...

    def removeNodeFromCluster(self, node: str, callback: Any = None) -> None: ...


def parse_address(value: object, *, field: str = "raft") -> str:
    """A Raft address `host:port` (IPv6 in brackets), as peers will dial it."""
    match = ADDRESS.fullmatch(value) if isinstance(value, str) else None
    if match is None or not 1 <= int(match["port"]) <= 65535:
        raise InvalidRequest(field, f"must be a Raft address like '10.0.0.4:9701', got {value!r}")
    return f"{match['host']}:{int(match['port'])}"


async def change_membership(
    replica: MembershipReplica,
    kind: Literal["add", "remove"],
    address: str,
    *,
    timeout_s: float,
) -> None:
    """Propose one membership change and wait until it is committed."""
    loop = asyncio.get_running_loop()
    settled: asyncio.Future[int] = loop.create_future()

    def settle(error: int) -> None:
        if not settled.done():
            settled.set_result(error)

    def done(_result: object, error: int) -> None:  # pysyncobj's thread
        loop.call_soon_threadsafe(settle, error)

    change = replica.addNodeToCluster if kind == "add" else replica.removeNodeFromCluster
    change(address, callback=done)
    try:
        error = await asyncio.wait_for(settled, timeout_s)
    except TimeoutError:
        raise OutcomeUnknown(
            f"the {kind} of {address} was not committed within {timeout_s:g}s; "
            "check the members with `schedctl status` before trying again"
        ) from None
    if error == FAIL_REASON.SUCCESS:
        return
    if error == FAIL_REASON.REQUEST_DENIED:
        raise Conflict(
            f"the leader refused to {kind} {address}: another membership change is still being "
            "committed, the leader is new, or the change would be a no-op; try again shortly"
        )
    if error in NOT_APPLIED:
        raise NoLeader(f"no leader to {kind} {address}; nothing changed")
    raise OutcomeUnknown(f"the {kind} of {address} may or may not have been committed ({error})")
