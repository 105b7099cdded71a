"""The plan of `schedctl apply`: what each job of a file needs (asked of the API with dry-run
PUTs by key, so the server's defaults and normal forms decide it), the set's jobs the file no
longer names (--prune), and carrying the plan out. It never writes anything while planning.

A job that runs after another named by key gets that job's id: planned, the id it has (or,
for a job this apply creates, a stand-in `<KEY>`); applied, the id it has by then.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from schedd.cli.ctl.answers import Answer, JSONObject, all_pages, raw_items
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.jobfile import FileJob, JobFile, with_upstream
from schedd.errors import Conflict, InvalidRequest, NotFound, SchedError
from schedd.jsonbody import JSONValue
from schedd.wire.jobs import SET_LABEL, SPEC_FIELDS, JobList  # SPEC_FIELDS: what a plan compares

LIVE_STATUSES = ("active", "paused")  # what --prune deletes and export writes
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    DELETE = "delete"


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One field that differs: its path (`schedule.cron`) and both values (null: absent)."""

    field: str
    current: JSONValue
    proposed: JSONValue


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """What the plan does to one job; once applied, `is_done` and the job's id."""

    action: Action
    key: str | None
    job_id: str | None
    name: str | None = None
    changes: tuple[Change, ...] = ()
    body: JSONObject | None = None  # what a create or update PUTs
    upstream_key: str | None = None  # the body's `after` names this job by key: its id goes in
    proposed: JSONObject | None = None  # a create's spec as the server would store it
    is_done: bool = False

    def as_json(self) -> JSONObject:
        return {
            "action": self.action.value,
            "key": self.key,
            "job_id": self.job_id,
            "name": self.name,
            "changes": [
                {"field": c.field, "current": c.current, "proposed": c.proposed}
                for c in self.changes
            ],
        }


@dataclass(slots=True, kw_only=True)
class Plan:
    """The steps for one file, in its order, then the deletes."""

    file: JobFile
    is_pruning: bool
    steps: list[Step] = field(default_factory=list)
    # The ids of the keys `after` names (None: this apply creates the job), more as it applies.
    ids: dict[str, str | None] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        """Nothing to create, update or delete."""
        return all(step.action is Action.UNCHANGED for step in self.steps)


def make_plan(client: Client, job_file: JobFile, *, prune: bool) -> Plan:
    """Ask the API what each job of the file needs; with `prune`, add the set's jobs the file
    does not name. A job the API refuses fails the whole plan (exit 1), naming the job."""
    if prune and job_file.set is None:
        raise job_file.fail('--prune needs a top-level set = "..." (the jobs the file owns)')
    plan = Plan(file=job_file, is_pruning=prune)
    for job in job_file.jobs:  # a job the file names by key is planned before the job after it
        upstream = _upstream_id(client, job_file, job, plan.ids)
        body = job.body if upstream is None else with_upstream(job.body, upstream)
        step = _planned(client, job_file, job, body)
        plan.ids[job.key] = step.job_id
        plan.steps.append(step)
    if prune:
        assert job_file.set is not None
        named = {job.key for job in job_file.jobs}
        plan.steps.extend(
            Step(
                action=Action.DELETE,
                key=text_of(job, "key"),
                job_id=text_of(job, "job_id"),
                name=text_of(job, "name"),
            )
            for job in set_jobs(client, job_file.set)
            if job.get("key") not in named
        )
    return plan


def _upstream_id(
    client: Client, job_file: JobFile, job: FileJob, ids: dict[str, str | None]
) -> str | None:
    """The id of the job `job` names by key (None: none named, or this apply creates it):
    a job of the file planned before, else the node's job with that key."""
    key = job.upstream_key
    if key is None:
        return None
    if key not in ids:
        try:
            ids[key] = client.get_job_by_key(key).view.job_id
        except NotFound:
            raise job_file.fail(
                f'job "{job.key}": schedule.after.key: no job has the key {key!r} (in this '
                "file or on the node)"
            ) from None
    return ids[key]


def _planned(client: Client, job_file: JobFile, job: FileJob, body: JSONObject) -> Step:
    try:
        answer = client.plan_job_by_key(job.key, body)
    except InvalidRequest as exc:  # the server judged the body: the file is at fault
        raise job_file.fail(f'job "{job.key}": {exc}') from None
    except Conflict as exc:
        raise Conflict(f'{job_file.name}: job "{job.key}": {exc}') from None
    current, proposed = _object(answer.raw.get("current")), answer.view.proposed
    action = Action(answer.view.action)
    job_id = None if current is None else text_of(current, "job_id")
    changes = tuple(diff(spec_of(current), proposed)) if current is not None else ()
    if action is Action.UPDATE and current is not None and current.get("status") == "completed":
        raise Conflict(
            f'{job_file.name}: job "{job.key}": {job_id} is completed and cannot change; '
            f"cancel it (schedctl cancel {job_id}) to free its key, then apply again"
        )
    return Step(
        action=action,
        key=job.key,
        job_id=job_id,
        name=text_of(proposed, "name"),
        changes=changes if action is Action.UPDATE else (),
        body=job.body,
        upstream_key=job.upstream_key,
        proposed=proposed if action is Action.CREATE else None,
    )


def set_jobs(client: Client, set_name: str) -> Iterator[JSONObject]:
    """The live (active or paused) jobs carrying the set's label. Each job's labels are read
    again here: a node that ignored the label filter must not make --prune delete others."""
    for job in live_jobs(client, [f"{SET_LABEL}={set_name}"]):
        labels = job.get("labels")
        if isinstance(labels, dict) and labels.get(SET_LABEL) == set_name:
            yield job


def live_jobs(client: Client, labels: list[str]) -> Iterator[JSONObject]:
    """Every active or paused job with all of `labels` (NAME=VALUE) as the API lists them."""
    for status in LIVE_STATUSES:

        def fetch(cursor: str | None, status: str = status) -> Answer[JobList]:
            filters = {"label": labels}
            return client.list_jobs(status=status, cursor=cursor, limit=1000, filters=filters)

        for item in raw_items(all_pages(fetch, "jobs"), "jobs"):
            if isinstance(item, dict) and item.get("status") == status:
                yield item


def spec_of(job: Mapping[str, JSONValue]) -> JSONObject:
    """A job object's spec fields (those a plan compares)."""
    return {name: job.get(name) for name in SPEC_FIELDS}


def diff(current: Mapping[str, JSONValue], proposed: Mapping[str, JSONValue]) -> Iterator[Change]:
    """The fields that differ, objects compared member by member (`schedule.cron`, `labels.team`);
    a member one side lacks is null there."""
    for name in [*current, *(k for k in proposed if k not in current)]:
        yield from _changes(_path("", name), current.get(name), proposed.get(name))


def _changes(path: str, old: JSONValue, new: JSONValue) -> Iterator[Change]:
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for name in [*old, *(k for k in new if k not in old)]:
            yield from _changes(_path(path, name), old.get(name), new.get(name))
        return
    yield Change(field=path, current=old, proposed=new)


def _path(prefix: str, name: str) -> str:
    part = name if _PLAIN_NAME.fullmatch(name) else json.dumps(name, ensure_ascii=False)
    return f"{prefix}.{part}" if prefix else part


def _object(value: JSONValue) -> JSONObject | None:
    return value if isinstance(value, dict) else None


def text_of(job: Mapping[str, JSONValue], name: str) -> str | None:
    """A job object's string field (None when it is null or not a string)."""
    value = job.get(name)
    return value if isinstance(value, str) else None


# ---------------------------------------------------------------- applying


def apply_plan(client: Client, plan: Plan, *, on_step: Callable[[Step], None]) -> None:
    """Carry the plan out: PUT each create and update, then DELETE each prune, in order;
    `on_step` hears of each step done (a failure stops there, raising its error, which names
    the file and the job). What another apply did meanwhile is reported as found: an update
    it already made is unchanged here, a job it already deleted is deleted."""
    for i, step in enumerate(plan.steps):
        try:
            done = _applied(client, step, plan.ids)
        except InvalidRequest as exc:  # refused by a check the dry run does not make
            raise plan.file.fail(f"{_named(step)}: {exc}") from None
        except SchedError as exc:
            exc.args = (f"{plan.file.name}: {_named(step)}: {exc}",)
            raise
        plan.steps[i] = done
        if done.key is not None:
            plan.ids[done.key] = done.job_id
        on_step(done)


def _named(step: Step) -> str:
    return f'job "{step.key}"' if step.key is not None else f"job {step.job_id}"


def _applied(client: Client, step: Step, ids: Mapping[str, str | None]) -> Step:
    if step.action is Action.UNCHANGED:
        return replace(step, is_done=True)
    if step.action is Action.DELETE:
        try:
            if step.key is not None:
                client.cancel_job_by_key(step.key)
            else:
                assert step.job_id is not None
                client.cancel_job(step.job_id)
        except NotFound:
            pass  # deleted by another apply meanwhile: what this one would have done
        return replace(step, is_done=True)
    assert step.key is not None and step.body is not None
    body = step.body
    if step.upstream_key is not None:
        upstream = ids.get(step.upstream_key)
        assert upstream is not None  # planned: known then, or made by an earlier step
        body = with_upstream(body, upstream)
    created, job = client.put_job_by_key(step.key, body)
    action = Action.CREATE if created else Action.UPDATE if job.get("changed") else Action.UNCHANGED
    return replace(
        step,
        action=action,
        job_id=text_of(job, "job_id") or step.job_id,
        changes=step.changes if action is Action.UPDATE else (),
        is_done=True,
    )
