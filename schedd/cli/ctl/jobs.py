"""Job commands of schedctl: add, get, ls, cancel, reschedule, pause, resume, trigger, runs.

Each builds an API request from flags and prints the answer; bad input fails before any request.
"""

from __future__ import annotations

import functools
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from schedd.calendars import split_exclude
from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer, all_pages, filled_page
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.connections import (
    BROKER_FLAG_NAMES,
    BROKER_FLAGS,
    BROKER_OPTIONS,
    broker_target,
    param_of,
)
from schedd.cli.ctl.jobfile import label_pair
from schedd.cli.ctl.preview import preview_change
from schedd.cli.ctl.render import json_option, page_options
from schedd.errors import InvalidRequest
from schedd.jobspec import HTTP_METHODS, parse_job
from schedd.jsonbody import JSONValue
from schedd.model import AFTER_OUTCOMES, Backoff, JobStatus, MisfirePolicy, OverlapPolicy
from schedd.schedule import parse_schedule
from schedd.targets import KINDS, TARGET_TYPES
from schedd.timeformat import parse_instant
from schedd.wire.failures import DEFAULT_AFTER, MAX_AFTER
from schedd.wire.jobs import MAX_RUNS, JobList, RunList

NO_PAYLOAD_LIMIT = 2**62  # the server knows its own limit; the client checks the rest
JOB_JSON = "the API's job object"
Command = Callable[..., None]


def _choices(kind: type[JobStatus | Backoff | MisfirePolicy | OverlapPolicy]) -> click.Choice[str]:
    return click.Choice([member.value for member in kind])


_SCHEDULE_OPTIONS = (
    click.option("--at", metavar="INSTANT", help="Run once at INSTANT (RFC 3339 with offset)."),
    click.option(
        "--in",
        "delay",
        metavar="DURATION",
        help="Run once after DURATION: 90s, 10m (a bare number is seconds).",
    ),
    click.option("--cron", metavar="EXPR", help="Run on a cron EXPR in the --tz zone."),
    click.option(
        "--tz",
        "--timezone",
        "tz",
        metavar="ZONE",
        help="With --cron: IANA time zone [default: UTC].",
    ),
    click.option(
        "--every",
        metavar="DURATION",
        help="Run every DURATION: 30s, 5m, 1d (a bare number is seconds).",
    ),
    click.option(
        "--start", metavar="INSTANT", help="With --cron or --every: no run before INSTANT."
    ),
    click.option("--end", metavar="INSTANT", help="With --cron or --every: no run after INSTANT."),
    click.option(
        "--exclude",
        metavar="CALENDAR",
        multiple=True,
        help="With --cron or --every: skip the runs whose local date is in CALENDAR (repeat "
        "for more; schedctl calendars).",
    ),
    click.option(
        "--after",
        "after_job",
        metavar="JOB_ID",
        help="Run each time a run of JOB_ID ends (see --on), at once, with that run's "
        "scheduled time: no times of its own.",
    ),
    click.option(
        "--on",
        "on",
        type=click.Choice(AFTER_OUTCOMES),
        metavar="OUTCOME",
        help="With --after: the ends that start a run: success (default), failure (the run "
        "died) or finished (either).",
    ),
)
_SCHEDULE_FLAGS = (
    "at",
    "delay",
    "cron",
    "tz",
    "every",
    "start",
    "end",
    "exclude",
    "after_job",
    "on",
)
_TARGET_OPTIONS = (
    click.option("--queue", metavar="NAME", help="Deliver runs to the built-in queue NAME."),
    click.option("--http", "url", metavar="URL", help="Deliver runs by calling URL."),
    click.option(
        "--method",
        type=click.Choice(HTTP_METHODS, case_sensitive=False),
        metavar="METHOD",
        help="With --http: POST (default), GET, PUT, PATCH or DELETE.",
    ),
    click.option(
        "--header",
        "headers",
        metavar="K=V",
        multiple=True,
        help="With --http: a request header; repeat for more.",
    ),
    click.option(
        "--http-timeout", metavar="DURATION", help="With --http: per-call limit [default: 10s]."
    ),
    *BROKER_OPTIONS,
)
_TARGET_FLAGS = ("queue", "url", "method", "headers", "http_timeout", *BROKER_FLAG_NAMES)
_ONE_TARGET = "give exactly one of --queue, --http, " + ", ".join(BROKER_FLAGS)


def _stacked(options: tuple[Callable[[Command], Command], ...], command: Command) -> Command:
    for option in reversed(options):  # click lists options in the order they are written
        command = option(command)
    return command


def schedule_options(command: Command) -> Command:
    """The schedule flags, passed to the command as one `schedule` object."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        flags = {name: kwargs.pop(name) for name in _SCHEDULE_FLAGS}
        command(*args, schedule=schedule_from(**flags), **kwargs)

    return _stacked(_SCHEDULE_OPTIONS, wrapper)


def target_options(command: Command) -> Command:
    """The target flags, passed to the command as one `target` object."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        flags = {name: kwargs.pop(name) for name in _TARGET_FLAGS}
        command(*args, target=target_from(**flags), **kwargs)

    return _stacked(_TARGET_OPTIONS, wrapper)


def schedule_from(
    *,
    at: str | None,
    delay: str | None,
    cron: str | None,
    tz: str | None,
    every: str | None,
    start: str | None,
    end: str | None,
    exclude: tuple[str, ...] = (),
    after_job: str | None = None,
    on: str | None = None,
) -> dict[str, Any]:
    """The API's schedule object for exactly one of --at, --in, --cron, --every or --after."""
    forms = {"--at": at, "--in": delay, "--cron": cron, "--every": every, "--after": after_job}
    given = [flag for flag, value in forms.items() if value is not None]
    if len(given) != 1:
        found = f", got {' and '.join(given)}" if given else ""
        raise InvalidRequest(
            "schedule", f"give exactly one of --at, --in, --cron, --every or --after{found}"
        )
    if tz is not None and cron is None:
        raise InvalidRequest("--tz", "applies to --cron only")
    if on is not None and after_job is None:
        raise InvalidRequest("--on", "applies to --after only")
    if cron is None and every is None:
        if start is not None or end is not None:
            raise InvalidRequest("--start/--end", "apply to --cron and --every only")
        if exclude:
            raise InvalidRequest("--exclude", "applies to --cron and --every only")
        if after_job is not None:
            return {"after": {"job_id": after_job, "on": on or "success"}}
        return {"run_at": at} if at is not None else {"delay": str(delay)}
    spec = {"cron": cron, "timezone": tz or "UTC"} if cron is not None else {"every": str(every)}
    bounds = {"start_at": start, "end_at": end, "exclude": list(exclude) or None}
    return {key: value for key, value in (spec | bounds).items() if value is not None}


def target_from(
    *,
    queue: str | None,
    url: str | None,
    method: str | None,
    headers: tuple[str, ...],
    http_timeout: str | None,
    **brokers: str | int | None,
) -> dict[str, JSONValue]:
    """The API's target object for exactly one of --queue, --http or a broker's flag."""
    kinds = (queue, url, *(brokers[param_of(flag)] for flag in BROKER_FLAGS))
    if sum(kind is not None for kind in kinds) != 1:
        raise InvalidRequest("target", _ONE_TARGET)
    if url is None and (method or headers or http_timeout):
        raise InvalidRequest("--method/--header/--http-timeout", "apply to --http only")
    broker = broker_target(**brokers)  # --maxlen without --redis-stream is refused here
    if queue is not None:
        return {"type": "queue", "name": queue}
    if broker is not None:
        return broker
    target: dict[str, JSONValue] = {
        "type": "http",
        "url": url,
        "method": (method or "POST").upper(),
    }
    if headers:
        target["headers"] = dict(_header(text) for text in headers)
    if http_timeout is not None:
        target["timeout"] = http_timeout
    return target


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise InvalidRequest("--header", f"must be NAME=VALUE, got {text!r}")
    return name.strip(), value


def read_payload(source: str) -> JSONValue:
    """The payload of --payload: JSON text, @FILE, or - for stdin."""
    if source == "-":
        text = sys.stdin.read()
    elif source.startswith("@"):
        try:
            text = Path(source[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise InvalidRequest("--payload", f"cannot read {source[1:]!r}: {reason}") from None
    else:
        text = source
    try:
        value: JSONValue = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise InvalidRequest("--payload", f"is not valid JSON: {exc}") from None
    return value


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


# The API's field names, as the flags of `add` and `reschedule` spell them in messages.
FLAG_OF_FIELD = {
    "schedule.delay": "--in",
    "schedule.run_at": "--at",
    "schedule.every": "--every",
    "schedule.cron": "--cron",
    "cron": "--cron",
    "schedule.timezone": "--tz",
    "timezone": "--tz",
    "schedule.start_at": "--start",
    "schedule.end_at": "--end",
    "schedule.exclude": "--exclude",
    "schedule.after": "--after",
    "schedule.after.job_id": "--after",
    "schedule.after.on": "--on",
    "target.url": "--http",
    "target.name": "--queue",
    "target.method": "--method",
    "target.headers": "--header",
    "target.timeout": "--http-timeout",
    "target.connection": "CONN",
    **{f"target.{field}": kind.flag.flag for kind in KINDS for field in kind.flag.fields},
    **{f"target.{extra.field}": extra.flag for kind in KINDS for extra in kind.flag.options},
    "window": "--window",
    "name": "--name",
    "payload": "--payload",
    "retry.max_attempts": "--max-attempts",
    "retry.backoff": "--backoff",
    "misfire_policy": "--misfire",
    "overlap_policy": "--overlap",
    "max_runs": "--max-runs",
    "on_failure.alert_url": "--alert-url",
    "on_failure.after": "--alert-after",
}


def _on_failure(url: str | None, after: int | None, pause: bool) -> dict[str, JSONValue] | None:
    """The job's failure policy from add's flags; None when none of them is given."""
    if url is None and not pause:
        if after is not None:
            raise InvalidRequest("--alert-after", "needs --alert-url or --pause-on-failure")
        return None
    return {"alert_url": url, "after": after or DEFAULT_AFTER, "pause": pause}


def _check_locally(check: Callable[[], object]) -> None:
    """Run the server's own validation here, so bad input exits 2 before any request; the
    message names the flag the user typed, not the API's field."""
    try:
        check()
    except InvalidRequest as exc:
        flag = FLAG_OF_FIELD.get(exc.field)
        if flag is None:
            raise
        raise InvalidRequest(flag, exc.reason) from None
    except (ValueError, OverflowError) as exc:  # a validator tripping on odd input is bad input too
        raise InvalidRequest("", f"invalid input: {exc}") from exc


def _now_ms() -> int:
    return int(time.time() * 1000)


@click.command(
    epilog="""\b
Examples:
  schedctl add --at 2026-10-12T08:00:00+05:30 --queue digests --payload '{"user": 42}'
  schedctl add --in 10m --http https://hooks.example/release --header X-Env=prod
  schedctl add --cron '0 8 * * MON' --tz Asia/Kolkata --queue digests --name weekly
  schedctl add --every 5m --queue pings --payload @ping.json --json
  schedctl add --cron '0 8 * * MON' --redis-stream r/digests --maxlen 100000
  schedctl add --cron '0 9 * * MON-FRI' --tz America/New_York --exclude us-holidays --queue daily
  schedctl add --in 1h --rabbitmq mq//digests   # the default exchange, queue digests
  schedctl add --after job_0123abcd --on failure --queue cleanup""",
)
@schedule_options
@target_options
@click.option(
    "--payload",
    metavar="JSON|@FILE|-",
    help="The JSON each run carries: text, @FILE, or - (stdin).",
)
@click.option(
    "--max-attempts",
    type=click.IntRange(1, 100),
    metavar="N",
    help="Tries per run [default: 3].",
)
@click.option(
    "--backoff",
    type=_choices(Backoff),
    metavar="KIND",
    help="Delay between tries: exponential (default), linear or fixed.",
)
@click.option(
    "--misfire",
    type=_choices(MisfirePolicy),
    metavar="POLICY",
    help="Runs missed while down: run_once (default), skip or run_all.",
)
@click.option(
    "--overlap",
    type=_choices(OverlapPolicy),
    metavar="POLICY",
    help="Recurring: a run due while one is live: allow (default), skip or delay.",
)
@click.option("--window", metavar="DURATION", help="Spread each run over [0, DURATION).")
@click.option(
    "--max-runs",
    type=click.IntRange(1, MAX_RUNS),
    metavar="N",
    help="Recurring: complete the job after N scheduled runs (triggers not counted).",
)
@click.option(
    "--alert-url",
    metavar="URL",
    help="On failure: POST a signed alert here after --alert-after dead runs in a row.",
)
@click.option(
    "--alert-after",
    type=click.IntRange(1, MAX_AFTER),
    metavar="N",
    help=f"On failure: act after N dead runs in a row [default: {DEFAULT_AFTER}].",
)
@click.option(
    "--pause-on-failure",
    is_flag=True,
    help="On failure: pause the job after --alert-after dead runs in a row.",
)
@click.option("--name", metavar="TEXT", help="A name for people (at most 200 chars).")
@click.option(
    "--key",
    "job_key",
    metavar="KEY",
    help="The job's stable key, unique among the tenant's live jobs (schedctl apply's).",
)
@click.option(
    "--label",
    "labels",
    metavar="NAME=VALUE",
    multiple=True,
    help="A label (repeat for more): schedctl ls --label and apply --prune filter by them.",
)
@click.option(
    "--idempotency-key", metavar="KEY", help="Create at most one job per KEY; default: random."
)
@json_option(JOB_JSON)
@click.pass_obj
def add(
    client: Client,
    schedule: dict[str, Any],
    target: dict[str, JSONValue],
    payload: str | None,
    max_attempts: int | None,
    backoff: str | None,
    misfire: str | None,
    overlap: str | None,
    window: str | None,
    max_runs: int | None,
    alert_url: str | None,
    alert_after: int | None,
    pause_on_failure: bool,
    name: str | None,
    job_key: str | None,
    labels: tuple[str, ...],
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    """Create a job: one schedule (--at, --in, --cron, --every or --after) and one target."""
    retry: dict[str, JSONValue] = {"max_attempts": max_attempts, "backoff": backoff}
    fields: dict[str, JSONValue] = {
        "name": name,
        "schedule": dict(schedule),
        "window": window,
        "target": target,
        "retry": {key: value for key, value in retry.items() if value is not None} or None,
        "misfire_policy": misfire,
        "overlap_policy": overlap,
        "max_runs": max_runs,
        "on_failure": _on_failure(alert_url, alert_after, pause_on_failure),
        "key": job_key,
        "labels": dict(map(label_pair, labels)) or None,
    }
    body: dict[str, JSONValue] = {k: v for k, v in fields.items() if v is not None}
    if payload is not None:
        body["payload"] = read_payload(payload)
    _check_locally(lambda: parse_job(body, now_ms=_now_ms(), payload_limit=NO_PAYLOAD_LIMIT))
    # A key on every create makes a retry on another node safe: it can never make two jobs.
    key = idempotency_key or f"schedctl-{uuid.uuid4().hex}"
    render.show_job(client.create_job(body, idempotency_key=key), as_json=as_json)


@click.command(
    epilog="\b\nExamples:\n  schedctl get job_0123abcd\n  schedctl get job_0123abcd --json"
)
@click.argument("job_id")
@json_option(JOB_JSON)
@click.pass_obj
def get(client: Client, job_id: str, as_json: bool) -> None:
    """Show JOB_ID: its schedule, target, status and next run."""
    render.show_job(client.get_job(job_id), as_json=as_json)


_FILTER_OPTIONS = (
    click.option(
        "--target-type", type=click.Choice(TARGET_TYPES), help="Only jobs with this target type."
    ),
    click.option("--queue", metavar="NAME", help="Only jobs delivering to the queue NAME."),
    click.option("--host", metavar="HOST", help="Only jobs calling a URL on HOST (any case)."),
    click.option("--name", metavar="TEXT", help="Only jobs whose name contains TEXT (any case)."),
    click.option(
        "--label",
        "label",
        metavar="NAME=VALUE",
        multiple=True,
        help="Only jobs with this label; repeat for more (a job must have them all).",
    ),
    click.option("--next-run-after", metavar="INSTANT", help="Only jobs next running at/after."),
    click.option("--next-run-before", metavar="INSTANT", help="Only jobs next running before."),
    click.option(
        "--failing",
        is_flag=True,
        help="Only jobs whose newest finished run died (consecutive failures > 0); the table "
        "then shows their failures in a row and last failure and success.",
    ),
)
_FILTER_FLAGS = (
    "target_type",
    "queue",
    "host",
    "name",
    "label",
    "next_run_after",
    "next_run_before",
    "failing",
)


def filter_options(command: Command) -> Command:
    """The job filter flags, passed to the command as one `filters` mapping of GET /v1/jobs
    parameters; a bad instant fails here, before any request."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        filters = {name: kwargs.pop(name) for name in _FILTER_FLAGS}
        filters["failing"] = "true" if filters["failing"] else None
        filters["label"] = [f"{n}={v}" for n, v in map(label_pair, filters["label"])] or None
        for name in ("next_run_after", "next_run_before"):
            if filters[name] is not None:
                parse_instant(filters[name], field="--" + name.replace("_", "-"))
        command(*args, filters=filters, **kwargs)

    return _stacked(_FILTER_OPTIONS, wrapper)


@click.command(
    "ls",
    epilog="""\b
Examples:
  schedctl ls
  schedctl ls --status paused --all --json
  schedctl ls --host hooks.example.com --name digest
  schedctl ls --queue emails --next-run-before 2026-12-24T00:00:00Z
  schedctl ls --failing --all
  schedctl ls --label team=payments --label env=prod

\b
Filters combine (all must match). Except --status and --label, each makes the server read at
most 10,000 jobs per request: ls asks again until it has --limit jobs or none are left.""",
)
@click.option("--status", type=_choices(JobStatus), help="Only jobs with this status.")
@filter_options
@page_options
@json_option('{"jobs": [...], "next_cursor": ...}')
@click.pass_obj
def list_jobs(
    client: Client,
    status: str | None,
    filters: dict[str, str | None],
    limit: int,
    cursor: str | None,
    is_all: bool,
    as_json: bool,
) -> None:
    """List jobs in id order, a page at a time (or --all), optionally filtered."""

    def fetch(after: str | None, count: int = limit) -> Answer[JobList]:
        return client.list_jobs(status=status, cursor=after, limit=count, filters=filters)

    page = all_pages(fetch, "jobs", cursor) if is_all else filled_page(fetch, "jobs", cursor, limit)
    if filters["failing"]:
        render.show_failing_jobs(page, as_json=as_json)
    else:
        render.show_jobs(page, as_json=as_json)


@click.command(epilog="\b\nExamples:\n  schedctl cancel job_0123abcd")
@click.argument("job_id")
@json_option('{"job_id": ..., "status": "cancelled"}')
@click.pass_obj
def cancel(client: Client, job_id: str, as_json: bool) -> None:
    """Cancel JOB_ID: no future runs; prints nothing unless --json."""
    client.cancel_job(job_id)
    if as_json:
        render.print_json({"job_id": job_id, "status": "cancelled"})


@click.command(
    epilog="""\b
Examples:
  schedctl reschedule job_0123abcd --cron '30 9 * * MON-FRI' --tz Europe/Berlin --preview
  schedctl reschedule job_0123abcd --cron '30 9 * * MON-FRI' --tz Europe/Berlin
  schedctl reschedule job_0123abcd --at 2026-12-24T18:00:00+01:00
  schedctl reschedule job_0123abcd --cron '0 9 * * *' --exclude us-holidays
  schedctl reschedule job_0123abcd --after job_4567cdef --on finished""",
)
@click.argument("job_id")
@schedule_options
@click.option(
    "--preview",
    is_flag=True,
    help="Change nothing: show the current and the new schedule's next 10 runs side by side"
    " (--json: the preview answer).",
)
@json_option(JOB_JSON)
@click.pass_obj
def reschedule(
    client: Client, job_id: str, schedule: dict[str, Any], preview: bool, as_json: bool
) -> None:
    """Give JOB_ID a new schedule; its next run is computed again (--preview compares the two
    schedules' next runs first and changes nothing). The schedule is replaced whole: give
    --exclude again to keep its calendars."""
    _check_locally(lambda: parse_schedule(split_exclude(schedule)[0], now_ms=_now_ms()))
    if preview:
        preview_change(client, job_id, schedule, as_json=as_json)
        return
    render.show_job(client.update_job(job_id, {"schedule": dict(schedule)}), as_json=as_json)


@click.command(
    epilog="""\b
Examples:
  schedctl trigger job_0123abcd
  schedctl trigger job_0123abcd --payload '{"user": 42, "resend": true}'"""
)
@click.argument("job_id")
@click.option(
    "--payload",
    metavar="JSON|@FILE|-",
    help="This run's own payload, in place of the job's (the job keeps its own).",
)
@json_option('{"job_id": ..., "scheduled_at": ...}')
@click.pass_obj
def trigger(client: Client, job_id: str, payload: str | None, as_json: bool) -> None:
    """Run JOB_ID once now, outside its schedule (triggers do not count toward max_runs)."""
    if payload is None:
        render.show_trigger(client.trigger_job(job_id), as_json=as_json)
        return
    own = read_payload(payload)
    render.show_trigger(client.trigger_job(job_id, payload=own), as_json=as_json)


@click.command(
    epilog="""\b
Examples:
  schedctl runs job_0123abcd
  schedctl runs job_0123abcd --attempts
  schedctl runs job_0123abcd --output --limit 1
  schedctl runs job_0123abcd --all --json""",
)
@click.argument("job_id")
@click.option(
    "--attempts",
    "has_attempts",
    is_flag=True,
    help="Under each run, one row per attempt: started, outcome, finished, error.",
)
@click.option(
    "--output",
    "has_output",
    is_flag=True,
    help="Under each run its attempts, and under each attempt what it printed (as its worker"
    " reported it: schedctl work keeps a command's stdout and stderr).",
)
@page_options
@json_option('{"runs": [...], "next_cursor": ...}')
@click.pass_obj
def runs(
    client: Client,
    job_id: str,
    has_attempts: bool,
    has_output: bool,
    limit: int,
    cursor: str | None,
    is_all: bool,
    as_json: bool,
) -> None:
    """List the runs of JOB_ID, newest first (with --attempts, each attempt too; with --output,
    what each attempt printed)."""

    def fetch(after: str | None) -> Answer[RunList]:
        return client.list_runs(job_id, cursor=after, limit=limit, outputs=has_output)

    page = all_pages(fetch, "runs", cursor) if is_all else fetch(cursor)
    if has_output and not as_json:
        render.show_run_outputs(page)
        return
    render.show_runs(page, as_json=as_json, has_attempts=has_attempts)


COMMANDS = (add, get, list_jobs, cancel, reschedule, trigger, runs)
