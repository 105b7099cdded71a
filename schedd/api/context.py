"""What the API's handlers share: the proposer, the readers, the node's settings, the caller.

Also the one place a bearer token becomes a Principal (admin, or a tenant).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

from aiohttp import web

from schedd.addresses import reachable_api_url
from schedd.api.consumers import RecentConsumers
from schedd.api.fanout import AnswerCache, Fanout, PeerAnswer
from schedd.api.forward import Forwarder
from schedd.api.limits import AddressBudget, BodyGate, ServerLimits, TenantSlots
from schedd.cells.view import CellView
from schedd.errors import (
    ClusterUnavailable,
    Forbidden,
    InvalidRequest,
    TenantNotFound,
    Unauthorized,
)
from schedd.guard.targets import TargetGuard
from schedd.model import BrokerConnection, RaftView
from schedd.retention import Retention
from schedd.sealing import PayloadKeys
from schedd.storage import StorageGuard
from schedd.store import queries
from schedd.store.commands import Barrier, LogCommand, R
from schedd.store.db import READER_THREADS, ReadPool
from schedd.store.results import Done
from schedd.wire.queues import SeenConsumer


class Proposing(Protocol):
    """Replicates commands (raft.proposer.Proposer)."""

    async def propose(self, cmd: LogCommand[R], *, now_ms: int | None = None) -> R: ...


BrokerProbe = Callable[[BrokerConnection, tuple[str, ...]], Awaitable[tuple[bool, str]]]
"""Connect to a tenant's broker as a deliverer would, the tenant's allowed_hosts given: (reachable
and authenticated, a detail without credentials). Set by the node (delivery/probe.py): the API
cannot import delivery."""


class CommitView(NamedTuple):
    """How far this node is behind its leader: read-your-writes waits until `applied_index`
    reaches the `commit_index` seen when the request came."""

    commit_index: int  # the leader's, as this node knows it (a follower's: a heartbeat old)
    applied_index: int  # the last index this node applied to its store
    is_leader: bool


class RaftStatus(Protocol):
    """The node's view of the Raft group."""

    def status(self) -> RaftView: ...

    def is_ready(self) -> bool: ...

    def clock_problem(self) -> str | None: ...

    def members(self) -> list[str]: ...

    def commit_view(self) -> CommitView | None:
        """This node's CommitView, or None without a leader."""
        ...

    async def change_membership(self, kind: Literal["add", "remove"], address: str) -> None: ...

    def step_down(self) -> None: ...


class TokenCache:
    """Token hash -> tenant id, so most requests authenticate without touching SQLite.

    Cleared when a tenant's credentials change on this node (the node wires `clear` to apply).
    Only hits are kept; the generation stops a lookup that raced a clear from caching a
    revoked token.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self._tenants: dict[str, str] = {}
        self._max_entries = max_entries
        self.generation = 0

    def get(self, hashed: str) -> str | None:
        return self._tenants.get(hashed)

    def put(self, hashed: str, tenant_id: str, *, generation: int) -> None:
        if generation != self.generation:
            return
        if len(self._tenants) >= self._max_entries:
            self._tenants.clear()
        self._tenants[hashed] = tenant_id

    def clear(self) -> None:
        self.generation += 1
        self._tenants.clear()


class QueueSignal:
    """Wakes the long-polling receives of one (tenant, queue) when apply put messages in it.

    Keyed, so a claim that feeds one queue wakes only that queue's receives, not every one."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._events: dict[tuple[str, str], tuple[asyncio.Event, int]] = {}  # event, waiters
        self.wakeups = 0  # receives woken by a pulse (tests count them)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def pulse_threadsafe(self, queues: Iterable[tuple[str, str]]) -> None:
        """Wake the receives waiting on these (tenant_id, queue) pairs (any thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._pulse, frozenset(queues))

    def pulse_all_threadsafe(self) -> None:
        """Wake every waiting receive (any thread): the whole state was replaced."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(lambda: self._pulse(frozenset(self._events)))

    def pulse(self, queues: Iterable[tuple[str, str]]) -> None:
        """Wake the receives waiting on these queues (event loop thread)."""
        self._pulse(frozenset(queues))

    def _pulse(self, queues: frozenset[tuple[str, str]]) -> None:
        for key in queues:
            entry = self._events.pop(key, None)
            if entry is not None:
                entry[0].set()
                self.wakeups += entry[1]

    async def wait(self, tenant_id: str, queue: str, timeout_s: float) -> bool:
        """Until this queue's next pulse (True) or the timeout (False)."""
        key = (tenant_id, queue)
        event, waiters = self._events.get(key, (asyncio.Event(), 0))
        self._events[key] = (event, waiters + 1)
        try:
            async with asyncio.timeout(timeout_s):
                await event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            current = self._events.get(key)
            if current is not None and current[0] is event:  # not pulsed: leave the count
                if current[1] <= 1:
                    del self._events[key]
                else:
                    self._events[key] = (event, current[1] - 1)


VISIBLE_FOR_S = 0.5  # a count of visible messages is trusted this long (ReceiveHolds.visible)


class ReceiveHolds:
    """Messages that this node's receives in flight have asked for, per (tenant_id, queue).

    A message wakes every long poll of its queue; each used to propose a receive of `max`
    messages, and all but the first came back empty (a third of all receives at 1,500 runs/s,
    each carrying `max` receipts into the log). A woken poll now asks only for the visible
    messages that no receive of this node has asked for yet. Event loop thread only."""

    def __init__(self, signal: QueueSignal) -> None:
        self._signal = signal
        self._held: dict[tuple[str, str], int] = {}
        # The visible messages this node last counted, less what its receives took since, and
        # when it counted (monotonic s): the end of each receive wakes every poll of its queue,
        # and each counted again (in a spike, 16 long polls made the read threads a sixth of a
        # node's CPU). A receive that came back short forgets it.
        self._visible: dict[tuple[str, str], tuple[int, float]] = {}

    def held(self, key: tuple[str, str]) -> int:
        return self._held.get(key, 0)

    def visible(self, key: tuple[str, str], now_s: float) -> int | None:
        """The queue's visible messages as this node last counted them, less those its
        receives took since; None when never counted, counted over VISIBLE_FOR_S ago, or a
        receive found fewer than counted."""
        seen = self._visible.get(key)
        if seen is None or now_s - seen[1] > VISIBLE_FOR_S:
            return None
        return seen[0]

    def counted(self, key: tuple[str, str], visible: int, now_s: float) -> None:
        self._visible[key] = (visible, now_s)

    def took(self, key: tuple[str, str], asked: int, got: int) -> None:
        """A receive of this node asked for `asked` messages and got `got`."""
        seen = self._visible.get(key)
        if seen is not None:
            if got < asked:  # another node's consumers took some, or the count was too old
                del self._visible[key]
            else:
                self._visible[key] = (seen[0] - got, seen[1])

    @contextmanager
    def hold(self, key: tuple[str, str], count: int) -> Iterator[None]:
        """While a receive of `count` is in the log; its end wakes the polls that held back
        (they see what it left, if anything)."""
        self._held[key] = self.held(key) + count
        try:
            yield
        finally:
            left = self._held[key] - count
            if left:
                self._held[key] = left
            else:
                del self._held[key]
            self._signal.pulse([key])


BARRIERS_PER_S = 2.0  # barrier entries one client address may cause, a second...
BARRIER_BURST = 4  # ...and at once
BARRIERS_NODE_PER_S = 20.0  # barrier entries all clients together may cause, a second...
BARRIERS_NODE_BURST = 40  # ...and at once
HEARTBEAT_WAIT_S = 0.25  # over 2 append-entries periods (0.1 s, node.py): a fresh commit index
CATCH_UP_POLL_S = 0.01
CONNECTION_TESTS_PER_TENANT = 2  # each holds sockets for up to the request timeout
JOB_SCANS_PER_TENANT = 2  # filtered job pages (a reader thread for up to 0.1 s each)
# ...and all tenants together, on this node: below the reader threads (store/db.py
# READER_THREADS), so a reader is always free for every other read.
JOB_SCANS_PER_NODE = READER_THREADS - 1


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(kw_only=True)
class ApiContext:
    """Shared by every handler; stored on the aiohttp app under CONTEXT."""

    node_id: str
    proposer: Proposing
    reads: ReadPool
    raft: RaftStatus
    admin_token: str
    partitions: int
    payload_limit: int
    request_timeout_s: float = 5.0
    tokens: TokenCache = field(default_factory=TokenCache)
    queue_signal: QueueSignal = field(default_factory=QueueSignal)
    clock_ms: Callable[[], int] = field(default=wall_clock_ms)
    guard: TargetGuard = field(default_factory=TargetGuard)
    secret_overlap_ms: int = 86_400_000
    payload_keys: PayloadKeys = field(default_factory=PayloadKeys)
    limits: ServerLimits = field(default_factory=ServerLimits)
    storage: StorageGuard | None = None  # None: writes are never refused for disk space
    retention: Retention = field(default_factory=Retention)  # this node's [retention]
    broker_probe: BrokerProbe | None = None  # None: POST /v1/connections/{name}/test is a 503
    peer_tls: ssl.SSLContext | None = None  # verifies https peers (api/fanout.py)
    cells: CellView | None = None  # this node's cell; None: no [cells], it owns every partition
    consumers: RecentConsumers = field(default_factory=RecentConsumers)
    fanout: Fanout = field(init=False)
    forwarder: Forwarder = field(init=False)  # the console's requests for other cells
    peer_consumers: AnswerCache[tuple[list[SeenConsumer], bool]] = field(
        default_factory=AnswerCache
    )  # tenant id -> the other nodes' consumers of its queues, and whether one did not tell
    body_gate: BodyGate = field(init=False)
    long_polls: TenantSlots = field(init=False)
    connection_tests: TenantSlots = field(init=False)
    job_scans: TenantSlots = field(init=False)
    receive_holds: ReceiveHolds = field(init=False)
    barriers: AddressBudget = field(
        default_factory=lambda: AddressBudget(
            BARRIERS_PER_S, BARRIER_BURST, BARRIERS_NODE_PER_S, BARRIERS_NODE_BURST
        )
    )
    _barrier: asyncio.Task[Done] | None = None

    def __post_init__(self) -> None:
        self.body_gate = BodyGate(self.limits.max_body_reads, self.limits.body_wait_s)
        per_tenant = self.limits.long_polls_per_tenant
        self.long_polls = TenantSlots(
            per_tenant,
            lambda held: (
                f"this tenant already has {held} long polls in progress on this node "
                f"(api.long_polls_per_tenant = {per_tenant}); retry, or receive with "
                "fewer consumers"
            ),
        )
        self.connection_tests = TenantSlots(
            CONNECTION_TESTS_PER_TENANT,
            lambda held: (
                f"this tenant already has {held} connection tests in progress on this "
                "node; retry when they are done"
            ),
        )
        self.job_scans = TenantSlots(
            JOB_SCANS_PER_TENANT,
            lambda held: (
                f"this tenant already has {held} filtered job lists in progress on this node; "
                "retry when they are done"
            ),
            per_node=JOB_SCANS_PER_NODE,
            node_refusal=lambda held: (
                f"this node already runs {held} filtered job lists, its limit "
                f"({JOB_SCANS_PER_NODE} at once, so a reader thread stays free for other "
                "requests); retry shortly"
            ),
        )
        self.receive_holds = ReceiveHolds(self.queue_signal)
        self.fanout = Fanout(admin_token=self.admin_token, tls=self.peer_tls)
        self.forwarder = Forwarder(tls=self.peer_tls, timeout_s=self.request_timeout_s + 5.0)

    async def close(self) -> None:
        """Release what outlives a request (the app's cleanup)."""
        await self.fanout.close()
        await self.forwarder.close()

    async def ask_peers(self, path: str, headers: dict[str, str] | None = None) -> list[PeerAnswer]:
        """GET `path` from every other node that is a Raft member as this node knows them (a
        registered node removed from Raft is not sent the admin token), in node id order."""
        members = set(self.raft.members())
        peers = [
            (node_id, reachable_api_url(api, raft))
            for node_id, api, raft in await self.reads.read(queries.list_nodes)
            if raft in members and node_id != self.node_id
        ]
        return await self.fanout.ask(peers, path, headers=headers)

    async def catch_up(self, address: str | None = None) -> None:
        """Wait until this node has applied everything committed before now.

        A committed no-op (a barrier) proposed from here is applied here after all earlier
        entries: exact, but a log entry. Each client address gets a few of those a second;
        past that, this node waits for the leader's commit index as it knows it (one heartbeat
        later on a follower) to be applied: no entry, so unknown tokens cannot fill the log."""
        if self.barriers.allow(address or "", time.monotonic()):
            await self._barrier_entry()
        else:
            await self._applied_leader_commit()

    async def _barrier_entry(self) -> None:
        # Callers share one barrier in flight.
        if self._barrier is None or self._barrier.done():
            self._barrier = asyncio.ensure_future(self.proposer.propose(Barrier()))
        await asyncio.shield(self._barrier)

    async def _applied_leader_commit(self) -> None:
        view = self.raft.commit_view()
        if view is None:
            return await self._barrier_entry()  # no leader: the barrier answers 503 as before
        if not view.is_leader:  # a follower: let a heartbeat sent after this request arrive first
            await asyncio.sleep(HEARTBEAT_WAIT_S)
            view = self.raft.commit_view() or view
        deadline = time.monotonic() + self.request_timeout_s
        while (now := self.raft.commit_view()) is None or now.applied_index < view.commit_index:
            if time.monotonic() > deadline:
                raise ClusterUnavailable("this node is catching up with the leader; retry")
            await asyncio.sleep(CATCH_UP_POLL_S)
        return None


CONTEXT = web.AppKey("context", ApiContext)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the admin, or a tenant. `tenant_id` is the tenant acted for, if any."""

    is_admin: bool
    tenant_id: str | None

    @property
    def actor(self) -> str:
        return "admin" if self.is_admin else f"tenant:{self.tenant_id}"

    def tenant(self) -> str:
        """The tenant this request acts for; the admin must name one with X-Tenant."""
        if self.tenant_id is None:
            raise Forbidden(
                "the admin token acts for a tenant here: "
                "send 'X-Tenant: <tenant_id>' (schedctl: --tenant)"
            )
        return self.tenant_id

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden(
                "this route needs the admin token (a dev cluster keeps it in "
                "var/dev/admin.token; schedctl: --token or SCHEDCTL_TOKEN)"
            )


def token_hash(token: str) -> str:
    """How tenant tokens are stored: only their SHA-256."""
    return hashlib.sha256(token.encode()).hexdigest()


async def authenticate(request: web.Request, ctx: ApiContext) -> Principal:
    """The caller behind the request's bearer token (401 when there is none or it is unknown)."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing 'Authorization: Bearer <token>' header")
    try:
        presented = token.encode()
    except UnicodeEncodeError:  # bytes that are not UTF-8 (aiohttp keeps them as surrogates)
        raise Unauthorized("unknown token") from None
    if hmac.compare_digest(presented, ctx.admin_token.encode()):
        return Principal(is_admin=True, tenant_id=await _named_tenant(request, ctx))
    hashed = token_hash(token)
    tenant_id = ctx.tokens.get(hashed)
    if tenant_id is None:
        generation = ctx.tokens.generation
        tenant = await ctx.reads.read(lambda conn: queries.tenant_by_token_hash(conn, hashed))
        if tenant is None:  # maybe created on another node a moment ago: catch up, look again
            await ctx.catch_up(request.remote)
            tenant = await ctx.reads.read(lambda conn: queries.tenant_by_token_hash(conn, hashed))
        if tenant is None:
            raise Unauthorized("unknown token")
        tenant_id = tenant.tenant_id
        ctx.tokens.put(hashed, tenant_id, generation=generation)
    return Principal(is_admin=False, tenant_id=tenant_id)


async def _named_tenant(request: web.Request, ctx: ApiContext) -> str | None:
    tenant_id = request.headers.get("X-Tenant")
    if tenant_id is None:
        return None
    if not 1 <= len(tenant_id) <= 64 or not tenant_id.isascii():
        raise InvalidRequest("X-Tenant", "must be a tenant id")
    if await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id)) is None:
        await ctx.catch_up(request.remote)  # it may have been created on another node just now
        if await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id)) is None:
            raise TenantNotFound(tenant_id)
    return tenant_id
