"""Job routes by stable key (issue 32): PUT (create or replace, idempotent), GET, DELETE.

A PUT makes the key's job match a full job body: absent, it is created (apply refuses a second
job of one key, so concurrent PUTs create one); present and different, its spec is replaced
with a version check; the same, nothing is proposed. `?dry_run=true` answers what it would do.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.creates import CREATE_GROUPS
from schedd.api.http import json_response, principal, propose, read_object
from schedd.api.jobs import (
    BODY_OVERHEAD,
    UPDATE_ATTEMPTS,
    check_run_limit,
    current_or_new_run,
    guard_targets,
    job_with_downstream,
    new_item,
    opened,
    read_job,
    stored_spec,
)
from schedd.api.versions import versions_recorded
from schedd.errors import (
    Conflict,
    InvalidRequest,
    JobNotFound,
    SchedError,
    StaleState,
    rejection_error,
)
from schedd.jobspec import KEY_MESSAGE, JobSpec, parse_job, spec_to_json
from schedd.jsonbody import JSONValue
from schedd.model import JobStatus
from schedd.store import job_keys
from schedd.store.commands import CancelJob, UpdateJob
from schedd.wire.jobs import JOB_KEY_PATTERN, SPEC_FIELDS, JobView, KeyedJob, KeyedJobPlan

_KEY = re.compile(JOB_KEY_PATTERN[:-1] + r"\Z")
# A spec's fields as the job object shows them, each present (a stored spec leaves out the
# level-8 and level-9 fields it does not use; the job object shows no labels as {}).
_SPEC_DEFAULTS: dict[str, Any] = {**dict.fromkeys(SPEC_FIELDS), "labels": {}}


def _path_key(request: web.Request) -> str:
    key = request.match_info["key"]
    if not _KEY.match(key):
        raise InvalidRequest("key", KEY_MESSAGE.format(value=key[:210]))
    return key


def _not_found(key: str) -> JobNotFound:
    return JobNotFound(key, f"no job with key {key!r} (among the jobs not cancelled)")


async def _job_by_key(ctx: ApiContext, tenant_id: str, key: str) -> JobView | None:
    def read(conn: Any) -> JobView | None:
        job_id = job_keys.holder(conn, tenant_id, key)
        return None if job_id is None else job_with_downstream(conn, tenant_id, job_id)

    job = await ctx.reads.read(read)
    return None if job is None else opened(ctx, job)


def _spec_view(fields: dict[str, Any]) -> dict[str, Any]:
    """Spec fields as plain JSON values (enums as their text), every field present."""
    plain: dict[str, Any] = msgspec.to_builtins({**_SPEC_DEFAULTS, **fields})
    return plain


def _changed_fields(current: JobView, proposed: dict[str, Any]) -> list[str]:
    now = _spec_view(current.spec_fields())
    return sorted(name for name, value in proposed.items() if now.get(name) != value)


def _parse(body: dict[str, JSONValue], current: JobView | None, now: int, limit: int) -> JobSpec:
    """The body as a spec. A schedule equal to the job's own is not judged again against now
    (a one-time job's past run_at stays valid: PUT the same file again and nothing changes);
    an `every` without start_at keeps the job's own start (else each PUT would move it)."""
    if current is None:
        return parse_job(body, now_ms=now, payload_limit=limit)
    body = _with_current_start(body, current)
    spec = parse_job(body, now_ms=now, payload_limit=limit, is_new_schedule=False)
    if _spec_view(spec_to_json(spec))["schedule"] != current.schedule:
        spec = parse_job(body, now_ms=now, payload_limit=limit)
    return spec


def _with_current_start(body: dict[str, JSONValue], current: JobView) -> dict[str, JSONValue]:
    """The body, its `every` schedule given the job's start_at when it has none (a create
    starts the intervals at its own moment; an equal schedule then stays equal)."""
    schedule, stored = body.get("schedule"), current.schedule
    if not (isinstance(schedule, dict) and "every" in schedule and "start_at" not in schedule):
        return body
    if not (isinstance(stored, dict) and "every" in stored and "start_at" in stored):
        return body
    return {**body, "schedule": {**schedule, "start_at": stored["start_at"]}}


async def put_job(request: web.Request) -> web.Response:
    ctx, who = request.app[CONTEXT], principal(request)
    tenant_id, key = who.tenant(), _path_key(request)
    body = await read_object(request, limit_bytes=ctx.payload_limit + BODY_OVERHEAD)
    if body.setdefault("key", key) != key:
        raise InvalidRequest("key", f"must be the key in the path ({key!r}) or left out")
    dry_run = _dry_run(request)
    last: SchedError | None = None
    for _ in range(UPDATE_ATTEMPTS):
        current = await _job_by_key(ctx, tenant_id, key)
        now = ctx.clock_ms()
        spec = _parse(body, current, now, ctx.payload_limit)
        proposed = _spec_view(spec_to_json(spec))
        changed = [] if current is None else _changed_fields(current, proposed)
        if current is None or changed:  # what a create or change checks, a dry run too
            [blocked] = await guard_targets(ctx, tenant_id, [spec], request.remote)
            if blocked is not None:
                raise blocked
            if dry_run:  # apply's own checks, read here: a plan meets no refusal when applied
                await _check_index(ctx, tenant_id, current, spec)
        if dry_run:
            action = "create" if current is None else "update" if changed else "unchanged"
            plan = KeyedJobPlan(action=action, current=current, proposed=proposed)
            return json_response(plan)
        if current is not None and not changed:
            return json_response(_keyed(current, changed=False))
        try:
            if current is None:
                job = await _create(request, ctx, tenant_id, spec, body, now)
                return json_response(_keyed(job, changed=True), status=201)
            job = await _update(ctx, who.actor, current, spec, changed, now)
            return json_response(_keyed(job, changed=True))
        except (Conflict, StaleState) as exc:
            if current is not None and current.status == JobStatus.COMPLETED:
                raise  # a completed job cannot change: cancel it (DELETE) and PUT again
            last = exc  # another request took the key or changed the job: read it again
    raise StaleState(f"the job kept changing; try again ({last})")


async def _check_index(
    ctx: ApiContext, tenant_id: str, current: JobView | None, spec: JobSpec
) -> None:
    """What apply refuses of a spec beyond its key (job_keys.refusal: a missing calendar, an
    upstream that cannot be), asked of this node's store for a dry run. An upstream that does
    not exist yet passes: the plan may create it (schedctl apply's stand-ins)."""
    index = job_keys.Index.of_spec(spec_to_json(spec))
    old = job_keys.NONE if current is None else job_keys.Index.of_spec(current.spec_fields())
    job_id = "" if current is None else current.job_id
    refused = await ctx.reads.read(
        lambda conn: job_keys.refusal(conn, tenant_id, job_id, index, old, planning=True)
    )
    if refused is not None:
        raise rejection_error(*refused)


def _dry_run(request: web.Request) -> bool:
    value = request.query.get("dry_run", "false")
    if value not in ("true", "false"):
        raise InvalidRequest("dry_run", f"must be true or false, got {value[:40]!r}")
    return value == "true"


def _keyed(job: JobView, *, changed: bool) -> KeyedJob:
    return KeyedJob(**msgspec.structs.asdict(job), changed=changed)


async def _create(
    request: web.Request,
    ctx: ApiContext,
    tenant_id: str,
    spec: JobSpec,
    body: dict[str, JSONValue],
    now: int,
) -> JobView:
    """Create the key's job; Conflict if another request created one first."""
    item = new_item(ctx, spec, None, body, now, tenant_id=tenant_id)
    outcome = await request.app[CREATE_GROUPS].create(
        ctx, tenant_id, principal(request).actor, item
    )
    if outcome.error is not None:
        raise rejection_error(outcome.error.code, outcome.error.message)
    return await read_job(ctx, tenant_id, item.job_id)


async def _update(
    ctx: ApiContext, actor: str, current: JobView, spec: JobSpec, changed: list[str], now: int
) -> JobView:
    """Replace the job's spec (StaleState if it changed since it was read)."""
    if current.status == JobStatus.COMPLETED:
        raise Conflict(
            f"job {current.job_id} of key {spec.key!r} is completed: it cannot change; "
            "cancel it (DELETE) and PUT the key again for a new job"
        )
    check_run_limit(spec, current)
    job_id = current.job_id
    run_at, fire_at = current_or_new_run(current, job_id, spec, changed, now)
    update = UpdateJob(
        tenant_id=current.tenant_id,
        job_id=job_id,
        actor=actor,
        expected_version=current.version,
        spec=stored_spec(ctx, spec),
        next_run_at_ms=run_at,
        next_fire_at_ms=fire_at,
        fields=tuple(changed),
        versioned=versions_recorded(ctx),
    )
    await propose(ctx, update)
    return await read_job(ctx, current.tenant_id, job_id)


async def get_job(request: web.Request) -> web.Response:
    ctx, key = request.app[CONTEXT], _path_key(request)
    job = await _job_by_key(ctx, principal(request).tenant(), key)
    if job is None:
        raise _not_found(key)
    return json_response(job)


async def cancel_job(request: web.Request) -> web.Response:
    ctx, who, key = request.app[CONTEXT], principal(request), _path_key(request)
    tenant_id = who.tenant()
    job_id = await ctx.reads.read(lambda conn: job_keys.holder(conn, tenant_id, key))
    if job_id is None:
        raise _not_found(key)
    cmd = CancelJob(
        tenant_id=tenant_id, job_id=job_id, actor=who.actor, versioned=versions_recorded(ctx)
    )
    await propose(ctx, cmd)
    return web.Response(status=204)
