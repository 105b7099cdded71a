"""One schedd node: config -> store, Raft replica, proposer, HTTP API; start-up and shutdown.

The only module that knows every part; it owns their lifecycles and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Awaitable
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Literal

from aiohttp import web
from prometheus_client import CollectorRegistry
from pysyncobj import SyncObjConf

from schedd.addresses import reachable_api_url
from schedd.api.app import Beside, build_app, start_metrics_site
from schedd.api.context import (
    ApiContext,
    BrokerProbe,
    CommitView,
    QueueSignal,
    TokenCache,
)
from schedd.api.health import MetricsAccess
from schedd.api.limits import ServerLimits
from schedd.cells.directory import BadValue, Directory, parse_local_copy
from schedd.cells.etcd import Etcd
from schedd.cells.sync import ETCD_TIMEOUT_S, DirectorySync
from schedd.cells.view import CellSettings, CellView
from schedd.config import MIN_SECRET_CHARS, NodeConfig, parse_listen
from schedd.console import serve as console
from schedd.delivery.alerts import AlertSender
from schedd.delivery.caller import Caller
from schedd.delivery.connection_cache import ConnectionCache
from schedd.delivery.kinds import broker_deliverers
from schedd.delivery.probe import probe
from schedd.delivery.read_limits import ReadBudgets
from schedd.dispatch.clock import ClockGuard
from schedd.dispatch.service import DispatchService
from schedd.errors import ClusterUnavailable, ConfigError, SchedError
from schedd.guard.targets import TargetGuard
from schedd.history.fetcher import Peer, SegmentFetcher
from schedd.history.metrics import HistoryCollector
from schedd.history.verify import checked_digest
from schedd.metrics import NodeCollector
from schedd.model import BrokerConnection, RaftView
from schedd.peers import PeerReports
from schedd.raft.membership import change_membership
from schedd.raft.proposer import Proposer, ThreadProposer
from schedd.raft.replica import Replica
from schedd.raft.snapshots import SnapshotHooks
from schedd.sealing import PayloadKeys, new_key_line
from schedd.storage import DiskWatch, StorageGuard
from schedd.store import queries, segments
from schedd.store.apply import StateMachine
from schedd.store.commands import RegisterNode
from schedd.store.datadir import DataDirBusy, DataDirLock
from schedd.store.db import Checkpointer, Database, ReadPool, connect
from schedd.store.events import (
    AlertsDue,
    ConnectionChanged,
    CredentialsChanged,
    DeliveriesReady,
    DueAdded,
    MessagesReady,
    StateReplaced,
    TenantResumed,
)
from schedd.store.files import durable_replace
from schedd.store.gauges import read_store
from schedd.store.retained import RetainedCollector
from schedd.store.segment_reads import closed_segments
from schedd.subscribers import Subscribers
from schedd.tls import etcd_context, node_contexts

log = logging.getLogger(__name__)
HALT_EXIT_CODE = 70
PAYLOAD_KEYS_FILE = "payload.keys"  # in data_dir, with `[encryption] generate_payload_key`
GENERATED_KEY_ID = "generated-1"
REGISTER_RETRY_S = 0.25
DIRECTORY_COPY_FILE = "cells.directory.json"  # in data_dir: the directory last read from etcd


def halt_process(reason: str) -> None:
    """Stop this node at once: applying past an entry it cannot apply would diverge."""
    log.critical("halting: %s", reason)
    logging.shutdown()
    os._exit(HALT_EXIT_CODE)


def admin_token_for(config: NodeConfig) -> str:
    """The configured admin token, or one generated once into data_dir/admin.token (0600)."""
    if config.admin_token:
        return config.admin_token
    path = config.data_dir / "admin.token"
    if not path.exists():
        write_generated_secret(path, "adm_" + secrets.token_urlsafe(32), what="admin token")
    return path.read_text().strip()


def raft_secret_for(config: NodeConfig) -> str:
    """The configured Raft secret, or (single node) one generated once into data_dir/raft.secret."""
    if config.raft_secret:
        return config.raft_secret
    if config.raft_peers:  # config.py refuses this already: never run a cluster unauthenticated
        raise ConfigError(f"{config.path}: raft.peers is set but there is no raft.secret")
    path = config.data_dir / "raft.secret"
    if not path.exists():
        write_generated_secret(path, secrets.token_urlsafe(32), what="raft secret")
    secret = path.read_text().strip()
    if len(secret) < MIN_SECRET_CHARS:
        raise ConfigError(f"{path} holds {len(secret)} characters, fewer than {MIN_SECRET_CHARS}")
    return secret


def payload_keys_for(config: NodeConfig) -> PayloadKeys:
    """The configured payload keys, or (`generate_payload_key`, a single node) a key generated
    once into data_dir/payload.keys (0600); none (payloads stored as sent) otherwise."""
    path = config.payload_keys_file
    if path is None and config.generate_payload_key:
        path = config.data_dir / PAYLOAD_KEYS_FILE
        if not path.exists():
            write_generated_secret(path, new_key_line(GENERATED_KEY_ID), what="payload key")
    return PayloadKeys() if path is None else PayloadKeys.from_file(path)


def write_generated_secret(path: Path, value: str, *, what: str) -> None:
    """Write a secret the node made (mode 0600) whole or not at all, and durably: a power loss
    must not bring back a node with no secret, which would make another one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(path.name + ".tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(value + "\n")
    durable_replace(scratch, path)
    log.warning("no %s configured: generated one in %s", what, path)


def raft_conf(config: NodeConfig, snapshots: SnapshotHooks) -> SyncObjConf:
    """pysyncobj settings (see ../shared/docs/RAFT-NOTES.md for why each is set)."""
    data = config.data_dir
    host, port = parse_listen(config.raft_listen, field="raft.listen")
    return SyncObjConf(
        password=raft_secret_for(config),  # Fernet: a frame that fails it is never unpickled
        bindAddress=f"{host}:{port}",  # else pysyncobj binds 0.0.0.0 (or ::) whatever listen says
        journalFile=str(data / "raft.journal"),
        fullDumpFile=str(data / "raft.snapshot"),
        serializer=snapshots.serialize,
        deserializer=snapshots.deserialize,
        serializeChecker=snapshots.check,
        appendEntriesUseBatch=False,
        appendEntriesBatchSizeBytes=4 * 1024 * 1024,
        raftMinTimeout=config.election_timeout_min_s,
        raftMaxTimeout=config.election_timeout_max_s,
        appendEntriesPeriod=min(0.1, config.election_timeout_min_s / 4),
        connectionTimeout=5.0,
        leaderFallbackTimeout=max(config.election_timeout_max_s * 2, 1.0),
        connectionRetryTime=1.0,
        commandsQueueSize=2000,
        autoTickPeriod=0.005,  # the tick after an append commits it: a long wait is latency
        logCompactionMinEntries=config.compaction_min_entries,
        logCompactionMinTime=config.compaction_min_time_s,
        logCompactionSplit=True,
        dynamicMembershipChange=True,  # schedctl cluster add-node / remove-node
    )


def cell_view_for(config: NodeConfig) -> CellView | None:
    """This node's cell (a range and [cells]), with the directory it last kept in data_dir;
    None for a cluster that owns every partition."""
    if config.partition_range is None or config.cells.cell is None:
        return None
    first, last = config.partition_range
    settings = CellSettings(
        cell=config.cells.cell,
        first=first,
        last=last,
        partitions=config.partitions,
        deployment=config.cells.deployment,
        etcd=config.cells.etcd,
    )
    directory = None
    path = config.data_dir / DIRECTORY_COPY_FILE
    try:
        directory = parse_local_copy(path.read_bytes())
    except FileNotFoundError:
        pass
    except (OSError, BadValue) as exc:
        log.warning("cells: local directory copy unusable path=%s error=%s", path, exc)
    return CellView(settings, directory)


def keep_directory_copy(config: NodeConfig, directory: Directory) -> None:
    """Write the directory just read into data_dir, whole or not at all."""
    path = config.data_dir / DIRECTORY_COPY_FILE
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(json.dumps(directory.to_json(), separators=(",", ":")))
    durable_replace(scratch, path)


def console_beside() -> Beside:
    """The web console at /ui/ (schedd/console), served on the API's port without its token."""
    return Beside(console.routes, console.headers_middleware, console.is_console)


class Node:
    """A running node. `start()` then `stop()`; `status()` and `is_ready()` serve the API."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.tls_server, self.tls_peers = node_contexts(config)  # a bad certificate stops here
        # What this node holds from here on, let go in the reverse order (the lock last): by
        # stop(), or at once if the rest of __init__ fails (a partitions mismatch, a missing
        # payload key: ConfigError), so a refused node leaves the data directory unlocked.
        held = ExitStack()
        try:
            self._open(config, held)
        except BaseException:
            held.close()
            raise
        # start() pushes each part it starts (register, caller, dispatch, runners, Raft), so
        # those come off before what __init__ took.
        self._stack = AsyncExitStack()
        self._stack.callback(held.pop_all().close)

    def _open(self, config: NodeConfig, held: ExitStack) -> None:
        """Take the data directory and build the node's parts; each resource it opens goes on
        `held` as soon as it is open."""
        try:  # two processes on one data directory would corrupt it: refuse the second
            self._lock = DataDirLock(config.data_dir).acquire()
        except DataDirBusy as exc:
            raise ConfigError(f"{config.path}: node.data_dir {exc}") from None
        held.callback(self._lock.release)
        self.admin_token = admin_token_for(config)
        self.db = Database(config.data_dir / "state.db")
        held.callback(self.db.close)
        self._check_partitions()
        self.cells = cell_view_for(config)
        self.tokens = TokenCache()
        self.queue_signal = QueueSignal()
        self.events = Subscribers()  # apply's events, routed after each entry committed
        subscribe_caches(self.events, self.tokens, self.queue_signal)
        self.machine = StateMachine(self.db, on_events=self.events.publish)
        self.snapshots = SnapshotHooks(
            self.db,
            config.data_dir / "raft.snapshot",
            on_restore=lambda: self.events.publish([StateReplaced()]),
        )
        held.callback(self.snapshots.close)  # a copy in progress uses the writer connection
        self.replica: Replica | None = None
        self.reads = ReadPool(self.db.path)
        held.callback(self.reads.close)
        self.checkpointer = Checkpointer(self.db.path)
        held.callback(self.checkpointer.stop)
        self._runner: web.AppRunner | None = None
        self._metrics_runner: web.AppRunner | None = None
        self._register_task: asyncio.Task[None] | None = None
        self._is_registered = False  # this start's RegisterNode applied: peers find its API
        self.dispatch: DispatchService | None = None
        self.caller: Caller | None = None
        self.alert_sender: AlertSender | None = None
        self.guard = TargetGuard(config.delivery.allow_cidrs)
        held.callback(self.guard.close)  # after the caller and the API, its users
        self.reads_from_brokers = ReadBudgets()  # what tenants' brokers may make this node hold
        self.clock = ClockGuard(config.dispatch.max_clock_offset_ms)
        self.peers = PeerReports(config.node_id)
        self.storage = StorageGuard(DiskWatch(config.data_dir, config.min_free), self.peers)
        self.payload_keys = payload_keys_for(config)
        self.metrics = CollectorRegistry(auto_describe=False)  # this node's scrape-time gauges
        self.metrics.register(
            NodeCollector(
                node_id=config.node_id,
                partitions=config.partitions,
                connect=lambda: connect(self.db.path, readonly=True, cache_kib=1024),
                read_store=read_store,
                status=self.status,
                commit_index=lambda: 0 if self.replica is None else self.replica.commit_index(),
                snapshot_path=config.data_dir / "raft.snapshot",
                clock_state=lambda: (self.clock.is_trusted(), self.clock.offset_ms),
            )
        )
        self.history_fetch = SegmentFetcher(
            directory=segments.history_dir(config.data_dir),
            path_of=lambda name: segments.segment_path(config.data_dir, name),
            wanted=lambda: self.reads.run(closed_segments),
            peers=self._history_peers,
            digest_of=checked_digest,
            token=self.admin_token,
            tls=self.tls_peers,
            keep_free_bytes=self.storage.disk.reading().min_free_bytes,
            digest_in_processes=True,
        )
        self.metrics.register(HistoryCollector(self.history_fetch))
        self.metrics.register(
            RetainedCollector(
                lambda: connect(self.db.path, readonly=True, cache_kib=1024), self.storage.disk
            )
        )

    def _check_partitions(self) -> None:
        stored = self.db.get_meta("partitions", 0)
        if stored == 0:
            self.db.set_meta("partitions", self.config.partitions)
        elif stored != self.config.partitions:
            raise ConfigError(
                f"{self.config.path}: cluster.partitions is {self.config.partitions} but this "
                f"node's data was created with {stored}; partitions are fixed for a cluster"
            )

    async def start(self) -> None:
        """Start Raft (it replays the journal at once) and then the HTTP API.

        A start that fails part-way (the API's port taken: OSError) stops what it started and
        closes the node, as stop() does, before the error propagates: Raft's threads would
        otherwise outlive it, and the data dir's lock refuse the next Node on it."""
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise

    async def _start(self) -> None:
        """Each part pushes its stop onto `_stack` once it has started."""
        self.checkpointer.start()
        peers = list(self.config.raft_peers)
        conf = raft_conf(self.config, self.snapshots)
        self.replica = Replica(
            self.config.raft_listen,
            peers,
            conf,
            self.machine,
            halt_process,
            restores=self.snapshots,
        )
        self._stack.push_async_callback(asyncio.to_thread, self.replica.destroy_synchronous)
        proposer = Proposer(
            self.replica, timeout_s=self.config.request_timeout_s, refusal=self.clock_problem
        )
        ctx = ApiContext(
            node_id=self.config.node_id,
            proposer=proposer,
            reads=self.reads,
            raft=self,
            admin_token=self.admin_token,
            partitions=self.config.partitions,
            payload_limit=self.config.delivery.payload_limit_bytes,
            request_timeout_s=self.config.request_timeout_s,
            tokens=self.tokens,
            queue_signal=self.queue_signal,
            guard=self.guard,
            secret_overlap_ms=self.config.delivery.secret_overlap_ms,
            payload_keys=self.payload_keys,
            limits=self._limits(),
            storage=self.storage,
            retention=self.config.retention,
            broker_probe=self._broker_probe(),
            peer_tls=self.tls_peers,
            cells=self.cells,
        )
        self._runner = web.AppRunner(
            build_app(
                ctx,
                node_metrics=self.metrics,
                metrics_access=self._metrics_access(),
                beside=[console_beside()],
            ),
            access_log=None,
            handler_cancellation=True,
            **ctx.limits.runner_options(),
        )
        await self._runner.setup()
        self._stack.push_async_callback(self._runner.cleanup)
        site = web.TCPSite(
            self._runner, self.config.api_host, self.config.api_port, ssl_context=self.tls_server
        )
        await site.start()
        if self.config.metrics_listen is not None:
            host, port = parse_listen(self.config.metrics_listen, field="metrics.listen")
            access = MetricsAccess(
                tokens=self._metrics_access().tokens, is_open=self.config.metrics_token is None
            )
            self._metrics_runner = await start_metrics_site(
                self.metrics, access, host, port, ssl_context=self.tls_server
            )
            self._stack.push_async_callback(self._metrics_runner.cleanup)
        loop = asyncio.get_running_loop()
        self.queue_signal.bind(loop)
        self.dispatch = DispatchService(
            self.config.node_id,
            self.config.partitions,
            self.db.path,
            self.replica.is_leader,
            self.replica.leader_address,
            self.replica.step_down,
            ThreadProposer(proposer, loop),
            self.clock,
            lease_ttl_ms=self.config.dispatch.lease_ttl_ms,
            misfire_threshold_ms=self.config.dispatch.misfire_threshold_ms,
            retention=self.config.retention,
            peer_tls=self.tls_peers,
            peers=self.peers,
            owned=None if self.cells is None else self.cells.owned_partitions(),
        )
        connections = ConnectionCache(self.reads, self.payload_keys)
        self.caller = Caller(
            self.config.node_id,
            self.reads,
            proposer.propose,
            self.guard,
            self.payload_keys,
            concurrency=self.config.delivery.concurrency,
            tenant_concurrency=self.config.delivery.tenant_concurrency,
            deliverers=broker_deliverers(
                self.payload_keys, connections.lookup, self.guard, self.reads_from_brokers
            ),
            lagging=self.peers.lagging,
        )
        # Subscribed before they start: a due run committed while the dispatcher's first
        # preload runs is offered, not left for the next preload.
        subscribe_loops(self.events, self.dispatch, self.caller, connections)
        self.alert_sender = AlertSender(
            self.reads,
            proposer.propose,
            self.guard,
            is_leader=self.replica.is_leader,
            lagging=self.peers.lagging,
        )
        subscribe_alerts(self.events, self.alert_sender)
        # Their stops first: each is safe on a part only half started, which a failing start
        # (a thread that cannot be made) would otherwise leave running.
        self._stack.push_async_callback(asyncio.to_thread, self.dispatch.stop)
        self.dispatch.start()
        self._stack.push_async_callback(self.caller.stop)
        self.caller.start()
        self._stack.push_async_callback(self.alert_sender.stop)
        self.alert_sender.start()  # it sends only while this node leads
        self._stack.push_async_callback(asyncio.to_thread, self.history_fetch.stop)
        self.history_fetch.start()
        # Created last, with no await after it: it first runs once start() has returned, as
        # before; stop() cancels it first.
        self._register_task = asyncio.create_task(self._register(proposer))
        self._stack.callback(self._register_task.cancel)
        if self.cells is not None:
            self._start_directory_sync(self.cells)

    def _start_directory_sync(self, cells: CellView) -> None:
        """Register this cell's range and URL in etcd and keep reading the directory."""
        config = self.config
        etcd = Etcd(
            config.cells.etcd, timeout_s=ETCD_TIMEOUT_S, ssl_context=etcd_context(config.cells)
        )
        sync = DirectorySync(
            cells, config.api_url, lambda d: keep_directory_copy(config, d), etcd=etcd
        )
        task = asyncio.create_task(sync.run())
        self._stack.push_async_callback(_cancelled, task)

    def _broker_probe(self) -> BrokerProbe:
        """The probe of `POST /v1/connections/{name}/test`, with the deliverers' guard and
        read budgets."""

        def broker_probe(
            connection: BrokerConnection, allowed_hosts: tuple[str, ...]
        ) -> Awaitable[tuple[bool, str]]:
            return probe(
                connection,
                allowed_hosts=allowed_hosts,
                guard=self.guard,
                reads=self.reads_from_brokers,
            )

        return broker_probe

    def _limits(self) -> ServerLimits:
        return ServerLimits.configured(self.config.api_limits)

    def _metrics_access(self) -> MetricsAccess:
        """On the API port: the admin token or the metrics token; nobody if it has its own."""
        token = self.config.metrics_token
        return MetricsAccess(
            tokens=() if token is None else (token,),
            is_served=self.config.metrics_listen is None,
        )

    async def _register(self, proposer: Proposer) -> None:
        """Publish this node's addresses through the log once a leader exists."""
        cmd = RegisterNode(
            node_id=self.config.node_id, api=self.config.api_url, raft=self.config.raft_listen
        )
        while True:
            try:
                await proposer.propose(cmd)
                self._is_registered = True
                return
            except SchedError as exc:
                log.debug("node registration deferred: %s", exc)
                await asyncio.sleep(REGISTER_RETRY_S)

    async def wait_ready(self, poll_s: float = 0.05) -> None:
        # pysyncobj signals nothing we can await: poll its state.
        while not self.is_ready():  # noqa: ASYNC110
            await asyncio.sleep(poll_s)

    def is_ready(self) -> bool:
        """Has a leader, has applied what it knew committed at start-up, its own address is
        registered (until then `/v1/cluster` and the other nodes' fan-out do not know its API:
        a test that read it as soon as `/readyz` said ready found none), and it knows the
        members it must ask before newer commands (peers.py)."""
        replica = self.replica
        return bool(
            self._is_registered
            and self.peers.members_known()
            and replica is not None
            and replica.isReady()
            and replica.leader_address()
            and not replica.is_restoring()
        )

    def _history_peers(self) -> list[Peer]:
        """The other Raft members' API URLs (a registered node removed from Raft is not sent
        the admin token), for the fetch of closed history segments."""
        members = set(self.members())
        return [
            Peer(node_id=node_id, api_url=reachable_api_url(api, raft))
            for node_id, api, raft in self.reads.run(queries.list_nodes)
            if raft in members and node_id != self.config.node_id
        ]

    def members(self) -> list[str]:
        """Raft addresses of the group's members as this node knows them."""
        return [self.config.raft_listen] if self.replica is None else self.replica.members()

    async def change_membership(self, kind: Literal["add", "remove"], address: str) -> None:
        if self.replica is None:
            raise ClusterUnavailable("the node is starting")
        await change_membership(
            self.replica, kind, address, timeout_s=self.config.request_timeout_s
        )

    def commit_view(self) -> CommitView | None:
        """This node's CommitView (api/context.py), or None without a leader. A follower
        learns the leader's commit index with each append-entries message, so it may be one
        heartbeat old."""
        replica = self.replica
        if replica is None or not replica.leader_address():
            return None
        raw = replica.getStatus()
        is_leader = replica.is_leader()
        commit = raw.get("commit_idx") if is_leader else raw.get("leader_commit_idx")
        if commit is None:
            return None
        applied = int(raw.get("last_applied") or 0)
        if replica.is_restoring():  # pysyncobj counts the snapshot applied; the store is older
            applied = min(applied, self.db.applied_index)
        return CommitView(int(commit), applied, is_leader)

    def step_down(self) -> None:
        if self.replica is not None:
            self.replica.step_down()

    def clock_problem(self) -> str | None:
        """Why this node's clock is not trusted to fire runs, or None (dispatch/clock.py)."""
        return None if self.clock.is_trusted() else self.clock.reason

    def status(self) -> RaftView:
        """This node's view of the Raft group (for /v1/cluster and /v1/admin/state)."""
        replica = self.replica
        address, applied = self.config.raft_listen, self.db.applied_index
        if replica is None:
            return RaftView(
                address=address, role="starting", leader=None, term=0, applied_index=applied
            )
        raw = replica.getStatus()
        leader = replica.leader_address()
        prefix_conn, prefix_match = "partner_node_status_server_", "match_idx_server_"
        return RaftView(
            address=address,
            role="leader" if replica.is_leader() else ("follower" if leader else "candidate"),
            leader=leader,
            term=raw.get("raft_term", 0),
            applied_index=applied,
            connected={
                k[len(prefix_conn) :]: v == 2 for k, v in raw.items() if k.startswith(prefix_conn)
            },
            match_index={
                k[len(prefix_match) :]: v for k, v in raw.items() if k.startswith(prefix_match)
            },
        )

    async def stop(self) -> None:
        """Stop serving, stop Raft (finishing the apply in progress), close SQLite: what start()
        and __init__ pushed onto `_stack`, the last first. Once stopped, stop() does nothing."""
        await self._stack.aclose()


def subscribe_caches(events: Subscribers, tokens: TokenCache, signal: QueueSignal) -> None:
    """The token cache and the queues' long polls follow apply from the start. After a snapshot
    install (StateReplaced) every subscriber starts over: no command told it what changed."""
    events.subscribe(CredentialsChanged, lambda _: tokens.clear())
    events.subscribe(StateReplaced, lambda _: tokens.clear())
    events.subscribe(MessagesReady, lambda ready: signal.pulse_threadsafe(_queues(ready)))
    events.subscribe(StateReplaced, lambda _: signal.pulse_all_threadsafe())


def subscribe_loops(
    events: Subscribers,
    dispatch: DispatchService,
    caller: Caller,
    connections: ConnectionCache,
) -> None:
    """The dispatcher, the outbox caller and its deliverers' connection look-ups follow apply
    once they run (the look-ups from the first: none is kept before it)."""
    events.subscribe(DueAdded, dispatch.on_due)
    events.subscribe(StateReplaced, lambda _: dispatch.on_restored())
    # A resumed tenant's due rows were left out of memory: read everything anew, as after a
    # snapshot install (rare: an operator's action).
    events.subscribe(TenantResumed, lambda _: dispatch.on_restored())
    events.subscribe(DeliveriesReady, lambda _: caller.wake_threadsafe())
    events.subscribe(StateReplaced, lambda _: caller.wake_threadsafe())
    events.subscribe(ConnectionChanged, connections.forget)
    events.subscribe(StateReplaced, lambda _: connections.clear())


def subscribe_alerts(events: Subscribers, sender: AlertSender) -> None:
    """The failure-alert sender looks at once when apply queued alerts (or a snapshot install
    replaced them), not at its next poll."""
    events.subscribe(AlertsDue, lambda _: sender.wake_threadsafe())
    events.subscribe(StateReplaced, lambda _: sender.wake_threadsafe())


def _queues(ready: list[MessagesReady]) -> set[tuple[str, str]]:
    return {(event.tenant_id, event.queue) for event in ready}


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def serve(config: NodeConfig, *, stop_event: asyncio.Event) -> None:
    """Run one node until `stop_event` is set; log one `ready` line once it serves."""
    node = Node(config)
    started = time.monotonic()
    await node.start()
    try:
        ready = asyncio.create_task(node.wait_ready())
        stopping = asyncio.create_task(stop_event.wait())
        await asyncio.wait({ready, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if ready.done():
            role = node.status().role
            log.info(
                "ready node=%s api=%s raft=%s role=%s seconds=%.2f",
                config.node_id,
                config.api_url,
                config.raft_listen,
                role,
                time.monotonic() - started,
            )
        await stopping
    finally:
        log.info("stopping node=%s", config.node_id)
        await node.stop()
        log.info("stopped node=%s", config.node_id)
