"""Job routes: create (one or a batch), read, list (filtered), change, pause, resume, cancel,
trigger, runs.

Handlers validate, decide ids, "now" and next runs, then propose; apply decides the rest.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
import sqlite3
import time
from collections.abc import Collection
from typing import Any

import msgspec
from aiohttp import web
from msgspec import UNSET

from schedd.api.connections import connection_verdicts
from schedd.api.context import CONTEXT, ApiContext
from schedd.api.creates import CREATE_GROUPS, NewItem, encoded_bytes, propose_creates
from schedd.api.http import (
    check_level,
    decode_cursor,
    encode_cursor,
    int_cursor,
    json_response,
    page,
    principal,
    propose,
    query_limit,
    read_object,
    read_optional_object,
)
from schedd.api.job_cells import cell_job_id, check_key_partition, check_upstream_cell
from schedd.api.job_filters import job_filter
from schedd.api.tenants import check_alert_url
from schedd.api.versions import versions_recorded
from schedd.bodies import convert_body
from schedd.errors import (
    ClusterUnavailable,
    Conflict,
    InvalidRequest,
    JobNotFound,
    NoLeader,
    SchedError,
    StaleState,
    WrongCell,
    rejection_error,
)
from schedd.guard.dns import lookups_for
from schedd.guard.ssrf import BlockedTarget
from schedd.jobspec import MAX_BATCH as MAX_BATCH  # the route table's
from schedd.jobspec import (
    BatchCreate,
    JobSpec,
    check_payload,
    parse_job,
    patch_job,
    spec_to_json,
)
from schedd.jsonbody import JSONObject, JSONValue
from schedd.model import HttpTarget, JobStatus, not_live_message, partition_of
from schedd.schedule import fire_time, first_run_at, load_schedule, trigger_time
from schedd.store import dependencies, history_reads, queries, run_outputs
from schedd.store.command import MAX_COMMAND_BYTES, compact_json
from schedd.store.commands import (
    CALENDARS_LEVEL,
    DEPENDENCIES_LEVEL,
    JOB_KEYS_LEVEL,
    SCHEDULE_CONTROL_LEVEL,
    CancelJob,
    PauseJob,
    ResumeJob,
    TriggerJob,
    UpdateJob,
)
from schedd.store.job_search import labelled_jobs, search_jobs
from schedd.store.results import JobError, JobOutcome
from schedd.timeformat import format_instant, parse_instant
from schedd.wire.errors import Failure
from schedd.wire.jobs import (
    BatchResults,
    Created,
    Downstream,
    JobList,
    JobView,
    RunList,
    RunView,
    Triggered,
    UpstreamRun,
)
from schedd.wire.pauses import PauseRequest, TriggerRequest

BODY_OVERHEAD = 64 * 1024  # room around the payload for the rest of a job body
BATCH_BODY_LIMIT = 32 * 1024 * 1024
CHUNK_BYTES = MAX_COMMAND_BYTES - 64 * 1024  # a batch's items per command; room for the rest
UPDATE_ATTEMPTS = 5  # a PATCH/resume that meets a concurrent change re-reads and retries
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")


def new_job_id(now_ms: int) -> str:
    """job_ + 12 hex digits of the creation time in ms + 12 random: ids sort by creation time,
    and new rows land at the end of the jobs index instead of all over it."""
    return f"job_{now_ms:012x}{secrets.token_hex(6)}"


def _request_hash(body: dict[str, JSONValue]) -> str:
    """What "the same body" means for Idempotency-Key: equal JSON, whatever the key order."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _idempotency_key(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _IDEMPOTENCY_KEY.fullmatch(value):
        raise InvalidRequest(field, "must be 1-255 printable ASCII characters without spaces")
    return value


def _next_runs(job_id: str, spec: JobSpec, now_ms: int) -> tuple[int | None, int | None]:
    run_at = first_run_at(spec.schedule, now_ms)
    if run_at is None:
        return None, None
    return run_at, fire_time(job_id, run_at, spec.window_ms or 0)


def new_item(
    ctx: ApiContext,
    spec: JobSpec,
    key: str | None,
    body: dict[str, JSONValue],
    now: int,
    *,
    tenant_id: str,
) -> NewItem:
    if spec.upstream is not None:  # recorded in dependencies by apply at level 11
        check_level(ctx.storage, DEPENDENCIES_LEVEL)
    elif spec.exclude:  # calendar uses recorded by apply at level 10
        check_level(ctx.storage, CALENDARS_LEVEL)
    elif spec.key is not None or spec.labels:  # indexed by apply at level 9
        check_level(ctx.storage, JOB_KEYS_LEVEL)
    elif spec.max_runs is not None:  # counted by apply at level 8
        check_level(ctx.storage, SCHEDULE_CONTROL_LEVEL)
    job_id = cell_job_id(ctx, tenant_id, spec, lambda: new_job_id(now), key)
    run_at, fire_at = _next_runs(job_id, spec, now)
    stored = stored_spec(ctx, spec)
    return NewItem(
        job_id=job_id,
        partition=partition_of(job_id, ctx.partitions),
        spec=spec,
        stored=stored,
        spec_text=compact_json(stored),
        next_run_at_ms=run_at,
        next_fire_at_ms=fire_at,
        idempotency_key=key,
        request_hash=None if key is None else _request_hash(body),
        created_at_ms=now,
    )


async def guard_targets(
    ctx: ApiContext, tenant_id: str, specs: list[JobSpec], address: str | None
) -> list[SchedError | None]:
    """The SSRF guard on each spec's HTTP target and failure alert URL, and a broker target's
    connection (api/connections.py; `address` is the client's, for a catch-up); None: allowed,
    or none of those."""
    verdicts = await _target_verdicts(ctx, tenant_id, specs, address)
    alerting = [k for k, s in enumerate(specs) if s.on_failure and s.on_failure.alert_url]
    if not alerting:
        return verdicts
    tenant = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    hosts = tenant.allowed_hosts if tenant is not None else []
    for k in alerting:
        policy = specs[k].on_failure
        assert policy is not None and policy.alert_url is not None
        try:
            with lookups_for(tenant_id):
                await check_alert_url(policy.alert_url, hosts, ctx.guard, "on_failure.alert_url")
        except SchedError as exc:
            verdicts[k] = verdicts[k] or exc
    return verdicts


async def _target_verdicts(
    ctx: ApiContext, tenant_id: str, specs: list[JobSpec], address: str | None
) -> list[SchedError | None]:
    targets = [spec.target for spec in specs]
    brokers = await connection_verdicts(ctx, tenant_id, targets, address)
    urls = {t.url for t in targets if isinstance(t, HttpTarget)}
    if not urls:
        return brokers
    tenant = await ctx.reads.read(lambda conn: queries.get_tenant(conn, tenant_id))
    hosts = tenant.allowed_hosts if tenant is not None else []

    async def verdict(url: str) -> SchedError | None:
        try:
            with lookups_for(tenant_id):  # a tenant's slow names hold only its own lookups
                await ctx.guard.check(url, hosts)
        except BlockedTarget as exc:
            return exc
        return None

    ordered = sorted(urls)
    verdicts = dict(zip(ordered, await asyncio.gather(*map(verdict, ordered)), strict=True))
    return [
        (verdicts[t.url] if isinstance(t, HttpTarget) else None) or broker
        for t, broker in zip(targets, brokers, strict=True)
    ]


def stored_spec(ctx: ApiContext, spec: JobSpec) -> JSONObject:
    """A spec as the log and the store keep it: its payload sealed if keys are configured."""
    stored = spec_to_json(spec)
    stored["payload"] = ctx.payload_keys.seal(stored.get("payload"))
    return stored


def opened(ctx: ApiContext, job: JobView) -> JobView:
    """A job as the tenant sees it: its payload opened."""
    return msgspec.structs.replace(job, payload=ctx.payload_keys.open(job.payload))


def _live(job: JobView, done: str) -> JobView:
    """The job, if it can still change: a cancelled or completed job is a 409, whatever else
    the request holds (checked before its schedule is validated against now). `done` is what
    the request would have done to it ("resumed", "changed"): the message the store gives too."""
    if job.status in (JobStatus.CANCELLED, JobStatus.COMPLETED):
        raise Conflict(not_live_message(job.status, done))
    return job


async def read_job(ctx: ApiContext, tenant_id: str, job_id: str) -> JobView:
    job = await ctx.reads.read(lambda conn: job_with_downstream(conn, tenant_id, job_id))
    if job is None:
        raise JobNotFound(job_id)
    return opened(ctx, job)


def job_with_downstream(conn: sqlite3.Connection, tenant_id: str, job_id: str) -> JobView | None:
    """One job, with the jobs that run after it when there are some (GET of one job: lists
    leave them out)."""
    job = queries.get_job(conn, tenant_id, job_id)
    if job is None:
        return None
    after = [
        Downstream(job_id=b, on=on) for b, on in dependencies.downstream(conn, tenant_id, job_id)
    ]
    return msgspec.structs.replace(job, downstream=after) if after else job


async def _create(
    ctx: ApiContext, tenant_id: str, actor: str, items: list[NewItem], now: int
) -> list[JobOutcome]:
    return await propose_creates(ctx, tenant_id, actor, items, now)


async def create_job(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id = who.tenant()
    key = _idempotency_key(request.headers.get("Idempotency-Key"), "Idempotency-Key")
    body = await read_object(request, limit_bytes=ctx.payload_limit + BODY_OVERHEAD)
    now = ctx.clock_ms()
    spec = parse_job(body, now_ms=now, payload_limit=ctx.payload_limit)
    item = new_item(ctx, spec, key, body, now, tenant_id=tenant_id)
    [blocked] = await guard_targets(ctx, tenant_id, [spec], request.remote)
    if blocked is not None:
        raise blocked
    # Concurrent single creates of a tenant share one command (api/creates.py).
    groups = request.app[CREATE_GROUPS]
    outcome = await groups.create(ctx, tenant_id, who.actor, item)
    if outcome.error is not None:
        raise rejection_error(outcome.error.code, outcome.error.message)
    if not outcome.created and outcome.job_id:  # an Idempotency-Key replay: the job as it is
        return json_response(await read_job(ctx, tenant_id, outcome.job_id), status=201)
    job = queries.job_json(
        item.job_id,
        tenant_id,
        item.stored,
        "active",
        item.next_run_at_ms,
        1,
        item.created_at_ms,
        item.created_at_ms,
    )
    job = opened(ctx, job)
    return json_response(job, status=201)


async def create_jobs(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id = who.tenant()
    jobs = convert_body(await read_object(request, limit_bytes=BATCH_BODY_LIMIT), BatchCreate).jobs
    now = ctx.clock_ms()
    results: list[Created | Failure | None] = [None] * len(jobs)
    items, positions = [], []
    for i, raw in enumerate(jobs):
        try:
            items.append(_batch_item(ctx, tenant_id, i, raw, now))
            positions.append(i)
        except WrongCell as exc:  # a keyed item of another cell's: sent there by the client
            urls = ", ".join(exc.urls)
            results[i] = Failure.of(exc.code, f"jobs[{i}].key: {exc} (create it at {urls})")
        except SchedError as exc:
            results[i] = Failure.of(exc.code, f"jobs[{i}].{exc}")
    specs = [item.spec for item in items]
    verdicts = await guard_targets(ctx, tenant_id, specs, request.remote)
    for i, blocked in zip(list(positions), verdicts, strict=True):
        if blocked is not None:
            results[i] = Failure.of(blocked.code, f"jobs[{i}].{blocked}")
    items = [item for item, blocked in zip(items, verdicts, strict=True) if blocked is None]
    positions = [i for i, blocked in zip(positions, verdicts, strict=True) if blocked is None]
    if items:
        outcomes = await _create_in_chunks(ctx, tenant_id, who.actor, items, now)
        for i, item, outcome in zip(positions, items, outcomes, strict=True):
            results[i] = _batch_result(item, outcome)
    return json_response(BatchResults(results=results))


def _chunks(items: list[NewItem]) -> list[list[int]]:
    """Indexes of `items` in order, grouped so each group's command stays under the cap."""
    chunks: list[list[int]] = []
    size = 0
    for k, item in enumerate(items):
        item_bytes = encoded_bytes(item)  # at most its bytes in either form
        if not chunks or size + item_bytes > CHUNK_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(k)
        size += item_bytes
    return chunks


async def _create_in_chunks(
    ctx: ApiContext, tenant_id: str, actor: str, items: list[NewItem], now: int
) -> list[JobOutcome]:
    """Create a batch as one create_jobs command per chunk, in order (docs/api.md: each chunk
    is atomic, the batch is not). A chunk that fails gives its items the error; once one found
    no leader, or the request's time is up, the rest are not proposed (no_leader: a retry
    cannot duplicate them). When every chunk failed, the request fails with the first error."""
    outcomes: list[JobOutcome] = [JobOutcome() for _ in items]
    chunks, errors = _chunks(items), []
    deadline = time.monotonic() + ctx.request_timeout_s
    unwritten: SchedError | None = None
    for chunk in chunks:
        try:
            if unwritten is not None or time.monotonic() > deadline:
                raise unwritten or NoLeader("not written: this batch ran out of its request time")
            done = await _create(ctx, tenant_id, actor, [items[k] for k in chunk], now)
        except SchedError as exc:  # 503 (outcome unknown: retry with the idempotency_key), 413
            if isinstance(exc, ClusterUnavailable) and unwritten is None:
                unwritten = NoLeader("not written: an earlier part of this batch found no leader")
            errors.append(exc)
            done = [JobOutcome(error=JobError(code=exc.code, message=str(exc))) for _ in chunk]
        for k, outcome in zip(chunk, done, strict=True):
            outcomes[k] = outcome
    if len(errors) == len(chunks):
        raise errors[0]
    return outcomes


def _batch_item(ctx: ApiContext, tenant_id: str, i: int, raw: Any, now: int) -> NewItem:
    if not isinstance(raw, dict):
        raise InvalidRequest("body", "must be a JSON object")
    body = dict(raw)
    key = _idempotency_key(body.pop("idempotency_key", None), "idempotency_key")
    spec = parse_job(body, now_ms=now, payload_limit=ctx.payload_limit)
    return new_item(ctx, spec, key, body, now, tenant_id=tenant_id)


def _batch_result(item: NewItem, outcome: JobOutcome) -> Created | Failure:
    if outcome.error is not None:
        return Failure.of(outcome.error.code, outcome.error.message)
    if outcome.job_id is None or outcome.job_id == item.job_id:  # None: never without error
        run_at = item.next_run_at_ms
        return Created(
            job_id=item.job_id,
            next_run_at=None if run_at is None else format_instant(run_at),
        )
    return Created(job_id=outcome.job_id, next_run_at=None)  # an idempotent replay


async def get_job(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    job = await read_job(ctx, principal(request).tenant(), request.match_info["job_id"])
    return json_response(job)


async def list_jobs(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    where = job_filter(request.query)
    limit, after = query_limit(request), decode_cursor(request) or ""
    if where.is_scanning:  # a bounded scan: the page may hold fewer than limit jobs
        # A scan holds one of the node's few reader threads for up to its budget: a tenant may
        # run only JOB_SCANS_PER_TENANT at once here (429 beyond), so others' reads go on.
        with ctx.job_scans.hold(tenant_id):
            stored, next_after = await ctx.reads.read(
                lambda conn: search_jobs(conn, tenant_id, where, after=after, limit=limit)
            )
        cursor = None if next_after is None else encode_cursor(next_after)
    elif where.labels:  # read through the labels' index
        stored = await ctx.reads.read(
            lambda conn: labelled_jobs(conn, tenant_id, where, after=after, limit=limit)
        )
        cursor = page(stored, limit, lambda j: j.job_id)
    else:
        stored = await ctx.reads.read(
            lambda conn: queries.list_jobs(
                conn, tenant_id, status=where.status, after=after, limit=limit
            )
        )
        cursor = page(stored, limit, lambda j: j.job_id)
    jobs = [opened(ctx, job) for job in stored]
    return json_response(JobList(jobs=jobs, next_cursor=cursor))


async def cancel_job(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    job_id = request.match_info["job_id"]
    cmd = CancelJob(
        tenant_id=who.tenant(), job_id=job_id, actor=who.actor, versioned=versions_recorded(ctx)
    )
    await propose(ctx, cmd)
    return web.Response(status=204)


async def pause_job(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id, job_id = who.tenant(), request.match_info["job_id"]
    asked = convert_body(await read_optional_object(request, limit_bytes=4096), PauseRequest)
    cmd = PauseJob(
        tenant_id=tenant_id,
        job_id=job_id,
        actor=who.actor,
        reason=asked.reason,
        versioned=versions_recorded(ctx),
    )
    await propose(ctx, cmd)
    return json_response(await read_job(ctx, tenant_id, job_id))


async def resume_job(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id, job_id = who.tenant(), request.match_info["job_id"]
    for _ in range(UPDATE_ATTEMPTS):
        job = _live(await read_job(ctx, tenant_id, job_id), "resumed")
        now = ctx.clock_ms()
        spec = parse_job(job.spec_fields(), now_ms=now, payload_limit=2**62)
        run_at, fire_at = _next_runs(job_id, spec, now)
        cmd = ResumeJob(
            tenant_id=tenant_id,
            job_id=job_id,
            actor=who.actor,
            expected_version=job.version,
            next_run_at_ms=run_at,
            next_fire_at_ms=fire_at,
            versioned=versions_recorded(ctx),
        )
        try:
            await propose(ctx, cmd)
        except StaleState:
            continue
        return json_response(await read_job(ctx, tenant_id, job_id))
    raise StaleState("the job kept changing; try again")


async def update_job(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id, job_id = who.tenant(), request.match_info["job_id"]
    changes = await read_object(request, limit_bytes=ctx.payload_limit + BODY_OVERHEAD)
    for _ in range(UPDATE_ATTEMPTS):
        job = _live(await read_job(ctx, tenant_id, job_id), "changed")
        now = ctx.clock_ms()
        spec = patch_job(job.spec_fields(), changes, now_ms=now, payload_limit=ctx.payload_limit)
        check_run_limit(spec, job)
        check_key_partition(ctx, tenant_id, job_id, spec)
        check_upstream_cell(ctx, job_id, spec)
        [blocked] = await guard_targets(ctx, tenant_id, [spec], request.remote)
        if blocked is not None:
            raise blocked
        run_at, fire_at = current_or_new_run(job, job_id, spec, changes, now)
        update = UpdateJob(
            tenant_id=tenant_id,
            job_id=job_id,
            actor=who.actor,
            expected_version=job.version,
            spec=stored_spec(ctx, spec),
            next_run_at_ms=run_at,
            next_fire_at_ms=fire_at,
            fields=tuple(sorted(changes)),
            versioned=versions_recorded(ctx),
        )
        try:
            await propose(ctx, update)
        except StaleState:
            continue
        return json_response(await read_job(ctx, tenant_id, job_id))
    raise StaleState("the job kept changing; try again")


def current_or_new_run(
    job: JobView, job_id: str, spec: JobSpec, changed: Collection[str], now: int
) -> tuple[int | None, int | None]:
    """A new schedule or window moves the next run; other changes keep it."""
    if "schedule" in changed or "window" in changed or job.next_run_at is None:
        return _next_runs(job_id, spec, now)
    run_at = parse_instant(job.next_run_at, field="next_run_at")
    return run_at, fire_time(job_id, run_at, spec.window_ms or 0)


def check_run_limit(spec: JobSpec, job: JobView) -> None:
    """A run limit must leave a run to start (a job that reached it has completed)."""
    started = job.runs_started or 0
    if spec.max_runs is not None and spec.max_runs <= started:
        raise InvalidRequest(
            "max_runs", f"must be more than the {started} runs this job has started already"
        )


async def trigger_job(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id, job_id = who.tenant(), request.match_info["job_id"]
    body = await read_optional_object(request, limit_bytes=ctx.payload_limit + BODY_OVERHEAD)
    asked = convert_body(body, TriggerRequest)
    own = None  # this run's own payload, as a spec stores one (sealed when keys are set)
    if asked.payload is not UNSET:
        payload = check_payload(asked.payload, ctx.payload_limit)
        own = compact_json(ctx.payload_keys.seal(payload))
    job = await read_job(ctx, tenant_id, job_id)
    at = trigger_time(load_schedule(job.schedule), ctx.clock_ms())
    cmd = TriggerJob(
        tenant_id=tenant_id, job_id=job_id, actor=who.actor, scheduled_at_ms=at, payload=own
    )
    await propose(ctx, cmd)
    return json_response(Triggered(job_id=job_id, scheduled_at=format_instant(at)), status=202)


async def list_runs(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    job_id = request.match_info["job_id"]
    job = await read_job(ctx, tenant_id, job_id)
    limit, before = query_limit(request), int_cursor(request)
    before_ms = 2**62 if before is None else before
    outputs = _flag(request, "outputs")
    now_ms = ctx.clock_ms()
    runs, cut, is_complete = await ctx.reads.read(
        lambda conn: _runs_page(
            conn,
            ctx.reads.history,
            job_id,
            before_ms,
            limit,
            with_outputs=outputs,
            not_before_ms=history_reads.cutoff_ms(conn, tenant_id, ctx.retention, "runs", now_ms),
            since_ms=_ms(job.created_at),
        )
    )
    cursor = encode_cursor(_ms(runs[-1].scheduled_at)) if cut else None
    listing = RunList(runs=runs, next_cursor=cursor or page(runs, limit, _run_ms))
    if not is_complete:
        listing = msgspec.structs.replace(listing, history_complete=False)
    return json_response(listing)


MAX_PAGE_OUTPUT_CHARS = 1_000_000  # of outputs in a runs page (?outputs=true)


def _run_ms(run: RunView) -> int:
    return _ms(run.scheduled_at)


def _flag(request: web.Request, name: str) -> bool:
    value = request.query.get(name, "false")
    if value not in ("true", "false"):
        raise InvalidRequest(name, f"must be true or false, got {value[:40]!r}")
    return value == "true"


def _runs_page(
    conn: sqlite3.Connection,
    history: history_reads.SegmentReaders,
    job_id: str,
    before_ms: int,
    limit: int,
    *,
    with_outputs: bool,
    not_before_ms: int,
    since_ms: int,
) -> tuple[list[RunView], bool, bool]:
    """A page of the job's runs (the live ones and those moved into history segments), each
    run another job's run made with its `triggered_by`; with `with_outputs`, its attempts'
    outputs, the page cut before the run whose outputs would pass MAX_PAGE_OUTPUT_CHARS (one
    run at least). Whether it was cut so, and whether every segment it needs was read."""
    runs, is_complete = history_reads.job_runs(
        conn,
        history,
        job_id,
        before_ms=before_ms,
        limit=limit,
        not_before_ms=not_before_ms,
        since_ms=since_ms,
        read=lambda source, found: _marked_runs(source, job_id, found, with_outputs),
    )
    if not with_outputs:
        return runs, False, is_complete
    kept: list[RunView] = []
    chars = 0
    for run in runs:
        chars += sum(len(a.output or "") for a in run.attempts)
        if kept and chars > MAX_PAGE_OUTPUT_CHARS:
            return kept, True, is_complete
        kept.append(run)
    return kept, False, is_complete


def _marked_runs(
    conn: sqlite3.Connection, job_id: str, runs: list[RunView], with_outputs: bool
) -> list[RunView]:
    """Runs read from one source (live or a segment) with what that source keeps beside them:
    the upstream run that made each, and (`with_outputs`) its attempts' outputs."""
    low, high = _run_ms(runs[-1]), _run_ms(runs[0])
    made = dependencies.upstream_runs(conn, job_id, low, high)
    printed = run_outputs.of_runs(conn, job_id, low, high) if with_outputs else {}
    if not made and not printed:
        return runs
    return [_marked_run(run, made, printed) for run in runs]


def _marked_run(
    run: RunView, made: dict[int, tuple[str, str]], printed: dict[tuple[int, int], str]
) -> RunView:
    """A run with the upstream run that made it and its attempts' outputs, where it has them."""
    at = _ms(run.scheduled_at)
    by = made.get(at)
    if by is not None:
        upstream = UpstreamRun(job_id=by[0], scheduled_at=run.scheduled_at, status=by[1])
        run = msgspec.structs.replace(run, triggered_by=upstream)
    if any((at, a.attempt) in printed for a in run.attempts):
        attempts = [
            msgspec.structs.replace(a, output=printed.get((at, a.attempt))) for a in run.attempts
        ]
        run = msgspec.structs.replace(run, attempts=attempts)
    return run


def _ms(instant: str) -> int:
    return parse_instant(instant, field="cursor")
