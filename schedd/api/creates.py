"""Proposing job creates: the command's form by the cluster's log level, each job's outcome,
and single creates that arrive together grouped into one command.

Handlers build the items (api/jobs.py); this module only turns them into commands and back.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import msgspec
from aiohttp import web

from schedd.api.context import ApiContext
from schedd.api.http import propose
from schedd.errors import NoLeader, OutcomeUnknown, SchedError
from schedd.jobspec import JobSpec
from schedd.jsonbody import JSONObject
from schedd.raft.proposer import settle_future
from schedd.store.command import MAX_COMMAND_BYTES
from schedd.store.commands import AddJobs, CreateJobs, NewJob, NewJobRow
from schedd.store.results import JobError, JobOutcome, JobsAdded

log = logging.getLogger(__name__)

# A group of single creates is one command: at most this many jobs, and this many bytes as
# encoded, counted at most (a command stays under MAX_COMMAND_BYTES, store/command.py).
MAX_GROUP_JOBS = 1_000
MAX_GROUP_BYTES = MAX_COMMAND_BYTES - 64 * 1024
ITEM_BYTES = 512  # an item's bytes besides its spec, at most: ids, key, hash, field names


@dataclass(frozen=True, slots=True, kw_only=True)
class NewItem:
    """A job the API decided to create (api/jobs.py): its id, partition and first run, and its
    spec both parsed (what the guards read) and as the log and the store keep it."""

    job_id: str
    partition: int
    spec: JobSpec
    stored: JSONObject  # jobspec.spec_to_json, payload sealed: create_jobs carries it
    spec_text: str  # compact_json(stored): add_jobs carries it, the store keeps it
    next_run_at_ms: int | None
    next_fire_at_ms: int | None
    idempotency_key: str | None
    request_hash: str | None
    created_at_ms: int  # the API's time: its next run was computed from it


def create_command(
    ctx: ApiContext, tenant_id: str, actor: str, items: list[NewItem]
) -> CreateJobs | AddJobs:
    """add_jobs once every member applies log level 5, else create_jobs (a rolling upgrade:
    an older node would halt on add_jobs; it writes the command's time as created_at)."""
    if _lags_add_jobs(ctx):
        jobs = tuple(
            NewJob(
                job_id=item.job_id,
                partition=item.partition,
                spec=item.stored,
                next_run_at_ms=item.next_run_at_ms,
                next_fire_at_ms=item.next_fire_at_ms,
                idempotency_key=item.idempotency_key,
                request_hash=item.request_hash,
            )
            for item in items
        )
        return CreateJobs(tenant_id=tenant_id, actor=actor, jobs=jobs)
    return AddJobs(tenant_id=tenant_id, actor=actor, jobs=tuple(map(job_row, items)))


def _lags_add_jobs(ctx: ApiContext) -> bool:
    return ctx.storage is not None and bool(ctx.storage.peers.lagging(AddJobs.LEVEL))


def encoded_bytes(item: NewItem) -> int:
    """An item's bytes in either form of the command, at most: add_jobs carries the spec's
    text as a JSON string, escaped (a quote takes two bytes), create_jobs as an object no
    longer than that text."""
    return len(_ENCODER.encode(item.spec_text)) + ITEM_BYTES


_ENCODER = msgspec.json.Encoder()


def job_row(item: NewItem) -> NewJobRow:
    """An item as add_jobs carries it: the spec as the text the store keeps."""
    return NewJobRow(
        item.job_id,
        item.partition,
        item.spec_text,
        item.next_run_at_ms,
        item.next_fire_at_ms,
        item.idempotency_key,
        item.request_hash,
        item.created_at_ms,
    )


async def propose_creates(
    ctx: ApiContext, tenant_id: str, actor: str, items: list[NewItem], now_ms: int
) -> list[JobOutcome]:
    """Create the items in one command; each item's outcome, in order."""
    cmd = create_command(ctx, tenant_id, actor, items)
    if isinstance(cmd, AddJobs):
        return outcomes(cmd, await propose(ctx, cmd, now_ms=now_ms))
    return (await propose(ctx, cmd, now_ms=now_ms)).results


def outcomes(cmd: AddJobs, result: JobsAdded) -> list[JobOutcome]:
    """Each job's outcome from add_jobs's result, which names only the jobs not created as
    proposed (an Idempotency-Key seen before, or an error)."""
    found = [JobOutcome(job_id=job.job_id, created=True) for job in cmd.jobs]
    for i, job_id in result.existing:
        found[i] = JobOutcome(job_id=job_id)
    for i, code, message in result.errors:
        found[i] = JobOutcome(error=JobError(code=code, message=message))
    return found


@dataclass(eq=False)
class _Waiting:
    item: NewItem
    future: asyncio.Future[JobOutcome]


@dataclass(eq=False)
class CreateGroups:
    """Group commit of single creates: while a tenant's (and actor's) command is in flight,
    the creates that arrive wait and then go out together as one command (one log entry, one
    transaction, one kept result), each caller getting its own job's outcome. A caller that
    gives up does not take its job out: like a request that timed out, it may be created."""

    _waiting: dict[tuple[str, str], list[_Waiting]] = field(default_factory=dict)

    async def create(
        self, ctx: ApiContext, tenant_id: str, actor: str, item: NewItem
    ) -> JobOutcome:
        """The job's outcome. Grouped only in add_jobs, which carries each job's own creation
        time; create_jobs writes its command's time, so until every member applies level 5
        each create goes alone, at the time its next run was computed from."""
        if _lags_add_jobs(ctx):
            [outcome] = await propose_creates(ctx, tenant_id, actor, [item], item.created_at_ms)
            return outcome
        future: asyncio.Future[JobOutcome] = asyncio.get_running_loop().create_future()
        key = (tenant_id, actor)
        waiting = self._waiting.get(key)
        if waiting is None:
            self._waiting[key] = waiting = []
            asyncio.get_running_loop().create_task(self._send(ctx, key))
        waiting.append(_Waiting(item, future))
        return await asyncio.shield(future)

    async def _send(self, ctx: ApiContext, key: tuple[str, str]) -> None:
        """Send the key's waiting creates, a group at a time, until none wait."""
        try:
            await asyncio.sleep(0)  # the creates of this turn of the loop join the first group
            while group := self._take(key):
                await _send_group(ctx, key, group)
        finally:
            left = self._waiting.pop(key, [])
            for waiting in left:  # only if sending itself failed: never leave a caller hanging
                settle_future(waiting.future, NoLeader("not written: the node stopped first"))

    def _take(self, key: tuple[str, str]) -> list[_Waiting]:
        waiting = self._waiting.get(key, [])
        group: list[_Waiting] = []
        size = 0
        for entry in waiting:
            size += encoded_bytes(entry.item)
            if group and (len(group) == MAX_GROUP_JOBS or size > MAX_GROUP_BYTES):
                break
            group.append(entry)
        del waiting[: len(group)]
        return group


async def _send_group(ctx: ApiContext, key: tuple[str, str], group: list[_Waiting]) -> None:
    now_ms = ctx.clock_ms()
    try:
        found = await propose_creates(ctx, *key, [w.item for w in group], now_ms)
    except SchedError as exc:  # every caller of the group gets the command's error
        for waiting in group:
            settle_future(waiting.future, exc)
    except Exception as exc:  # a boundary: each caller's request answers 500, logged there
        log.warning("a group of creates failed jobs=%d", len(group), exc_info=True)
        for waiting in group:
            settle_future(waiting.future, exc)
    else:
        for waiting, outcome in zip(group, found, strict=True):
            settle_future(waiting.future, outcome)
    finally:  # cancelled (the node stops): the outcome is unknown to whoever still waits
        for waiting in group:
            settle_future(waiting.future, OutcomeUnknown("the node stopped while creating the job"))


CREATE_GROUPS = web.AppKey("create_groups", CreateGroups)
