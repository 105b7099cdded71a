"""Built-in queue routes: long-poll receive, ack, nack, extend, and queue counts.

Receive checks this node's replica first and proposes only when a message looks visible, so
idle consumers cost no Raft traffic, and asks only for the visible messages that no other receive
of this node has asked for (context.ReceiveHolds, which also keeps the last count, less what
this node's receives took since, for several receives); receipts are made here and carried in
the command. At log level 6 the command's result names the batch runs it took, at level 7 also
the per-run messages, and their messages are read here from this node's store
(queue_reads.held_messages, taken_messages). Each node
remembers who received (api/consumers.py); GET /v1/queues merges every node's memory, asking
the peers (api/fanout.py) at most once per 2 s per tenant.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import time
from collections import Counter
from typing import Any, TypeVar

import msgspec
from aiohttp import web

from schedd import metrics
from schedd.api.consumers import (
    UNKNOWN,
    consumer_json,
)
from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import json_response, principal, propose, read_object
from schedd.bodies import Body, convert_body, ms_or
from schedd.cells import receipts
from schedd.errors import InvalidRequest
from schedd.jsonbody import JSONValue
from schedd.store import pauses
from schedd.store.command import MAX_COMMAND_BYTES
from schedd.store.commands import (
    BY_REFERENCE_LEVEL,
    OUTPUTS_LEVEL,
    RUNS_BY_REFERENCE_LEVEL,
    AckMessages,
    ExtendMessages,
    NackMessages,
    ReceiveMessages,
)
from schedd.store.pauses import Scope
from schedd.store.queue_reads import (
    held_messages,
    queue_summaries,
    taken_messages,
    visible_count,
)
from schedd.store.views import QueueSummary
from schedd.timeformat import parse_instant
from schedd.wire.queues import (
    DEFAULT_VISIBILITY_MS,
    Acked,
    AckRequest,
    Extended,
    ExtendRequest,
    LocalConsumers,
    Message,
    Messages,
    Nacked,
    NackRequest,
    QueueList,
    QueueView,
    ReceiveRequest,
    SeenConsumer,
    bounded_output,
)
from schedd.wire.queues import QUEUE_NAME as QUEUE_NAME_TEXT

B = TypeVar("B", bound=Body)

QUEUE_NAME = re.compile(QUEUE_NAME_TEXT)
BODY_LIMIT = 256 * 1024
# An ack or nack may carry its attempts' outputs (8 KiB each at most as kept): up to the size of
# one log command (a larger one is 413 there).
SETTLE_BODY_LIMIT = MAX_COMMAND_BYTES
COUNT_AHEAD = 5  # a count of visible messages looks this many receives ahead (ReceiveHolds)
RECHECK_S = 1.0  # retries and expired visibility make messages visible without a pulse
LOCAL_CONSUMERS = "/v1/queues/consumers/local"


def queue_of(request: web.Request) -> str:
    name = request.match_info["name"]
    if not QUEUE_NAME.fullmatch(name):
        raise InvalidRequest("name", "must match [A-Za-z0-9_.-]{1,128}")
    return name


def _consumer(name: str | None, request: web.Request) -> str:
    """The receive's consumer: the name it gives (matched whole by convert_body), else the
    client's address."""
    return (request.remote or UNKNOWN)[:128] if name is None else name


def _nonces(count: int) -> tuple[str, ...]:
    """A receive's receipt nonces: one random token and each message's number (urandom is a
    system call: 100 a receive were about 8% of the event loop thread's time in a spike)."""
    token = secrets.token_urlsafe(18)
    return tuple(f"{token}-{i}" for i in range(count))


def _visible(tenant_id: str, queue: str, now_ms: int, limit: int) -> Any:
    def query(conn: sqlite3.Connection) -> int:
        if pauses.find(conn, Scope.QUEUE, tenant_id, queue) is not None:
            return 0  # paused: the receive waits (apply hands out nothing meanwhile anyway)
        return visible_count(conn, tenant_id, queue, now_ms, limit)

    return query


async def receive(request: web.Request) -> web.Response:
    ctx, tenant_id, queue = request.app[CONTEXT], principal(request).tenant(), queue_of(request)
    asked = convert_body(await read_object(request, limit_bytes=BODY_LIMIT), ReceiveRequest)
    count, wait_ms = asked.max, ms_or(asked.wait, 0)
    visibility_ms = ms_or(asked.visibility_timeout, DEFAULT_VISIBILITY_MS)
    consumer = _consumer(asked.consumer, request)
    if wait_ms == 0:
        ctx.consumers.saw(tenant_id, queue, consumer, ctx.clock_ms())
        return await _poll(request, tenant_id, queue, count, visibility_ms, 0)
    with ctx.long_polls.hold(tenant_id):  # 429 past `[api] long_polls_per_tenant`
        ctx.consumers.saw(tenant_id, queue, consumer, ctx.clock_ms())  # admitted only
        return await _poll(request, tenant_id, queue, count, visibility_ms, wait_ms)


async def _poll(
    request: web.Request, tenant_id: str, queue: str, count: int, visibility_ms: int, wait_ms: int
) -> web.Response:
    ctx = request.app[CONTEXT]
    key = (tenant_id, queue)
    deadline = time.monotonic() + wait_ms / 1000
    holds = ctx.receive_holds
    while True:
        visible = holds.visible(key, time.monotonic())
        if visible is None or visible - holds.held(key) < count:
            limit = COUNT_AHEAD * count + holds.held(key)
            counted: int = await ctx.reads.read(_visible(tenant_id, queue, ctx.clock_ms(), limit))
            holds.counted(key, counted, time.monotonic())
            visible = counted
        asked = min(count, visible - holds.held(key))
        if asked > 0:
            command = ReceiveMessages(
                tenant_id=tenant_id,
                queue=queue,
                max=asked,
                visibility_ms=visibility_ms,
                receipts=_nonces(asked),
                by_reference=_every_node_applies(ctx, BY_REFERENCE_LEVEL),
                runs_by_reference=_every_node_applies(ctx, RUNS_BY_REFERENCE_LEVEL),
            )
            with holds.hold(key, asked):
                messages = await _received(ctx, command)
                holds.took(key, asked, len(messages))
            metrics.RECEIVES.labels("messages" if messages else "empty").inc()
            if messages:
                _record_deliveries(messages, ctx.clock_ms())
                return json_response(Messages(messages=_marked(ctx, _opened(ctx, messages))))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return json_response(Messages(messages=[]))
        await ctx.queue_signal.wait(tenant_id, queue, min(remaining, RECHECK_S))


def _every_node_applies(ctx: ApiContext, level: int) -> bool:
    """Whether a receive may take a form of this log level (every member applies it)."""
    return ctx.storage is None or not ctx.storage.peers.lagging(level)


async def _received(ctx: ApiContext, command: ReceiveMessages) -> list[Message]:
    """The receive's messages: the per-run ones its result gives whole, or names (level 7),
    then the batch runs it took (level 6); what is named is read from this node's store."""
    result = await propose(ctx, command)
    messages, taken, held = result.messages, result.taken or [], result.held or []
    if not taken and not held:
        return messages
    nonces = command.receipts[len(messages) :]
    runs_nonces, batch_nonces = nonces[: len(taken)], nonces[len(taken) :]

    def read(conn: sqlite3.Connection) -> list[Message]:
        named = taken_messages(conn, taken, runs_nonces)
        return named + held_messages(conn, held, batch_nonces) if held else named

    return messages + await ctx.reads.read(read)


def _opened(ctx: ApiContext, messages: list[Message]) -> list[Message]:
    """The messages with their payloads as the job gave them (a sealed or marked one opened)."""
    opened = []
    for message in messages:
        payload = ctx.payload_keys.open(message.payload)
        same = payload is message.payload
        opened.append(message if same else msgspec.structs.replace(message, payload=payload))
    return opened


def _marked(ctx: ApiContext, messages: list[Message]) -> list[Message]:
    """With cells, each receipt as this cell hands it out (`<cell>~<receipt>`): another cell's
    store may know the same receipt for another run (its batch ids are its own)."""
    if ctx.cells is None:
        return messages
    cell = ctx.cells.cell
    return [msgspec.structs.replace(m, receipt=receipts.marked(cell, m.receipt)) for m in messages]


def _record_deliveries(messages: list[Message], received_ms: int) -> None:
    """The delivery metrics of received messages (a spike's share a few attempts and times)."""
    alike = Counter((m.attempt, m.scheduled_at) for m in messages)
    for (attempt, scheduled_at), count in alike.items():
        scheduled_ms = parse_instant(scheduled_at, field="scheduled_at")
        metrics.record_delivery("queue", attempt, scheduled_ms, received_ms, count)


async def _settle(
    request: web.Request, body: type[B], limit_bytes: int = BODY_LIMIT
) -> tuple[str, str, B]:
    """An ack, nack or extend request: its tenant, its queue and its body."""
    tenant_id, queue = principal(request).tenant(), queue_of(request)
    asked = convert_body(await read_object(request, limit_bytes=limit_bytes), body)
    return tenant_id, queue, asked


def _settled_here(ctx: ApiContext, given: list[str]) -> dict[str, str]:
    """The request's receipts this node settles, each to the receipt its store knows: all of
    them without cells; with cells, this cell's only (CellView.own_receipts: a request whose
    receipts all name one other cell is a 307 there)."""
    if ctx.cells is None:
        return {receipt: receipt for receipt in given}
    return ctx.cells.own_receipts(given)


def _outputs(ctx: ApiContext, settled: dict[str, str], outputs: dict[str, str]) -> dict[str, str]:
    """The outputs of the request's own receipts (under the store's receipts), bounded as they
    are kept; none while a member cannot keep them (log level 12: an ack must not wait for a
    rolling upgrade)."""
    if not outputs or not _every_node_applies(ctx, OUTPUTS_LEVEL):
        return {}
    return {settled[r]: bounded_output(text) for r, text in outputs.items() if r in settled}


async def ack(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    tenant_id, queue, asked = await _settle(request, AckRequest, SETTLE_BODY_LIMIT)
    settled = _settled_here(ctx, asked.receipts)
    if not settled:
        return json_response(Acked(acked=0))
    command = AckMessages(
        tenant_id=tenant_id,
        queue=queue,
        receipts=tuple(settled.values()),
        outputs=_outputs(ctx, settled, asked.outputs),
    )
    result = await propose(ctx, command)
    return json_response(Acked(acked=result.acked))


async def nack(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    tenant_id, queue, asked = await _settle(request, NackRequest, SETTLE_BODY_LIMIT)
    settled = _settled_here(ctx, asked.receipts)
    if not settled:
        return json_response(Nacked(nacked=0))
    command = NackMessages(
        tenant_id=tenant_id,
        queue=queue,
        receipts=tuple(settled.values()),
        error=asked.error[:4000],
        outputs=_outputs(ctx, settled, asked.outputs),
        dead=asked.dead,
    )
    result = await propose(ctx, command)
    metrics.QUEUE_NACKS.inc(result.nacked)
    return json_response(Nacked(nacked=result.nacked))


async def extend(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    tenant_id, queue, asked = await _settle(request, ExtendRequest)
    settled = _settled_here(ctx, asked.receipts)
    if not settled:
        return json_response(Extended(extended=0))
    command = ExtendMessages(
        tenant_id=tenant_id,
        queue=queue,
        receipts=tuple(settled.values()),
        visibility_ms=ms_or(asked.visibility_timeout, DEFAULT_VISIBILITY_MS),
    )
    result = await propose(ctx, command)
    return json_response(Extended(extended=result.extended))


async def list_queues(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    now = ctx.clock_ms()

    def query(conn: sqlite3.Connection) -> list[QueueSummary]:
        return queue_summaries(conn, tenant_id, now)

    def paused(conn: sqlite3.Connection) -> dict[str, pauses.Pause]:
        return pauses.in_tenant(conn, Scope.QUEUE, tenant_id)

    queues = {q.name: _queue_view(q) for q in await ctx.reads.read(query)}
    for name, pause in (await ctx.reads.read(paused)).items():
        queue = queues.setdefault(name, _queue_view(QueueSummary(name=name)))
        queue.paused, queue.paused_reason = True, pause.reason
    seen, is_partial = await _cluster_consumers(ctx, tenant_id)
    for consumer in sorted(seen, key=lambda c: (c.consumer, c.node)):
        queue = queues.setdefault(consumer.queue, _queue_view(QueueSummary(name=consumer.queue)))
        queue.consumers.append(consumer.in_queue())
    listed = sorted(queues.values(), key=lambda q: q.name)
    return json_response(QueueList(queues=listed, partial=is_partial))


def _queue_view(summary: QueueSummary) -> QueueView:
    """A queue's counts as the queue object shows them, before its consumers are added."""
    return QueueView(**msgspec.structs.asdict(summary), consumers=[])


async def local_consumers(request: web.Request) -> web.Response:
    """The consumers this node alone saw (admin, X-Tenant): what GET /v1/queues asks peers."""
    principal(request).require_admin()
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    return json_response(LocalConsumers(node_id=ctx.node_id, consumers=_local(ctx, tenant_id)))


def _local(ctx: ApiContext, tenant_id: str) -> list[SeenConsumer]:
    return [
        consumer_json(queue, consumer, at_ms, ctx.node_id)
        for queue, consumer, at_ms in ctx.consumers.recent(tenant_id)
    ]


async def _cluster_consumers(ctx: ApiContext, tenant_id: str) -> tuple[list[SeenConsumer], bool]:
    """Every node's recent consumers of the tenant, and whether a node did not tell; the other
    nodes' as they told them at most ctx.peer_consumers' lifetime (2 s) ago."""
    told, is_partial = await ctx.peer_consumers.get(
        tenant_id, lambda: _peers_consumers(ctx, tenant_id)
    )
    return _local(ctx, tenant_id) + told, is_partial


async def _peers_consumers(ctx: ApiContext, tenant_id: str) -> tuple[list[SeenConsumer], bool]:
    answers = await ctx.ask_peers(LOCAL_CONSUMERS, headers={"X-Tenant": tenant_id})
    seen: list[SeenConsumer] = []
    is_partial = False
    for answer in answers:
        told = _peer_consumers(answer.body, answer.node_id)
        is_partial |= told is None
        seen.extend(told or [])
    return seen, is_partial


def _peer_consumers(body: dict[str, JSONValue] | None, node_id: str) -> list[SeenConsumer] | None:
    """The consumers a peer's answer lists, shown with the node we asked; None when it is no
    such answer. Its bytes are untrusted: an item that is not a consumer is left out."""
    items = None if body is None else body.get("consumers")
    if not isinstance(items, list):
        return None
    told = (_peer_consumer(item, node_id) for item in items if isinstance(item, dict))
    return [consumer for consumer in told if consumer is not None]


def _peer_consumer(item: dict[str, JSONValue], node_id: str) -> SeenConsumer | None:
    queue, consumer = item.get("queue"), item.get("consumer")
    if not (isinstance(queue, str) and QUEUE_NAME.fullmatch(queue)):
        return None
    if not (isinstance(consumer, str) and 0 < len(consumer) <= 128):
        return None
    try:
        at_ms = parse_instant(item.get("last_seen"), field="last_seen")
    except InvalidRequest:
        return None
    return consumer_json(queue, consumer, at_ms, node_id)
