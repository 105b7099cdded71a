"""What schedctl prints: the API's JSON for scripts (`--json`), tables for people.

One table style everywhere (`print_table`): on a terminal a rich table that never splits a
header word; piped, plain columns aligned with spaces, never wrapped nor cut (like
`kubectl get`), so `schedctl ls | grep` and `awk` see one row per line.

Also the output and paging options every command shares. Data goes to stdout, messages to
stderr; text from the server is never read as rich markup.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from schedd.cli.ctl.answers import Answer
from schedd.cli.ctl.older_nodes import Tenants
from schedd.jsonbody import JSONValue
from schedd.targets import BY_NAME
from schedd.wire.jobs import (
    RECENT_RUNS,
    AttemptView,
    Downstream,
    JobList,
    JobView,
    RunList,
    RunView,
    Triggered,
)
from schedd.wire.tenants import TenantCredentials

F = TypeVar("F", bound=Callable[..., Any])
Cell = str | Text
_STATUS_STYLES = {
    "active": "green",
    "paused": "yellow",
    "cancelled": "dim",
    "completed": "blue",
    "succeeded": "green",
    "failed": "red",
    "dead": "red",
    "retrying": "yellow",
}
MAX_PAYLOAD_CHARS = 200
PLAIN_GAP = "   "


def console(*, stderr: bool = False) -> Console:
    """A rich console; writing to a pipe or a file it never wraps a line (scripts and
    copy-paste get whole lines, as from the plain tables)."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, soft_wrap=not stream.isatty())


def json_option(shape: str) -> Callable[[F], F]:
    """The `--json` flag every command has; `shape` names what it prints."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {shape}.")


def page_options(command: F) -> F:
    """--limit, --cursor and --all: how a listing pages through the API."""
    options = (
        click.option(
            "--limit",
            type=click.IntRange(1, 1000),
            default=100,
            show_default=True,
            metavar="N",
            help="Items per page.",
        ),
        click.option("--cursor", metavar="CURSOR", help="Start at a next_cursor printed before."),
        click.option("--all", "is_all", is_flag=True, help="Follow next_cursor to the last page."),
    )
    for option in reversed(options):
        command = option(command)
    return command


def print_json(data: object) -> None:
    """One line of JSON on stdout: the stable contract for scripts."""
    click.echo(json.dumps(data, ensure_ascii=False))


def note(message: str) -> None:
    """A message for people, on stderr (never mixed into the data on stdout)."""
    console(stderr=True).print(Text(message, style="yellow"))


def show_job(job: Answer[JobView], *, as_json: bool) -> None:
    if as_json:
        print_json(job.raw)
        return
    view = job.view
    rows: list[tuple[str, Cell]] = [
        ("job_id", view.job_id),
        ("name", view.name or "-"),
        ("status", _status(view.status)),
        *([("paused because", view.paused_reason)] if view.paused_reason else []),
        ("schedule", describe_schedule(view.schedule)),
        ("next run", _next_run(view)),
        *([("downstream", _downstream(view.downstream))] if view.downstream else []),
        *([("runs", f"{view.runs_started or 0} of max {view.max_runs}")] if view.max_runs else []),
        *([("on failure", _on_failure(view.on_failure))] if view.on_failure else []),
        ("window", view.window or "-"),
        ("target", describe_target(view.target)),
        ("payload", _payload(view.payload)),
        ("retry", _retry(view.retry)),
        ("misfire", view.misfire_policy),
        ("overlap", view.overlap_policy),
        ("version", str(view.version)),
        ("created", view.created_at),
        ("updated", view.updated_at),
        ("last success", view.last_success_at or "-"),
        ("last failure", view.last_failure_at or "-"),
        ("failed in a row", _in_a_row(view.consecutive_failures)),
    ]
    print_fields(rows)


def _downstream(jobs: Sequence[Downstream]) -> str:
    """The jobs that run after this one: `job_B (on success), job_C (on failure)`."""
    return ", ".join(f"{job.job_id} (on {job.on})" for job in jobs)


def _on_failure(policy: Mapping[str, object]) -> str:
    """A failure policy in one line: what happens after how many dead runs in a row."""
    acts = [f"alert {policy.get('alert_url')}"] if policy.get("alert_url") else []
    acts += ["pause"] if policy.get("pause") else []
    return f"after {policy.get('after')} dead runs in a row: {' and '.join(acts)}"


def show_jobs(page: Answer[JobList], *, as_json: bool) -> None:
    if as_json:
        print_json(page.raw)
        return
    headers = ("JOB ID", "NAME", "STATUS", "SCHEDULE", "TARGET", "NEXT RUN (UTC)")
    rows = [
        (
            job.job_id,
            job.name or "-",
            _status(job.status),
            describe_schedule(job.schedule),
            describe_target(job.target),
            job.next_run_at or "-",
        )
        for job in page.view.jobs
    ]
    print_page(headers, rows, page.view.next_cursor, "jobs")


def show_failing_jobs(page: Answer[JobList], *, as_json: bool) -> None:
    """Jobs with what their newest runs say: failures in a row, the last failure and success."""
    if as_json:
        print_json(page.raw)
        return
    headers = (
        "JOB ID",
        "NAME",
        "STATUS",
        "FAILED IN A ROW",
        "LAST FAILURE (UTC)",
        "LAST SUCCESS (UTC)",
        "TARGET",
    )
    rows = [
        (
            job.job_id,
            job.name or "-",
            _status(job.status),
            _in_a_row(job.consecutive_failures),
            job.last_failure_at or "-",
            job.last_success_at or "-",
            describe_target(job.target),
        )
        for job in page.view.jobs
    ]
    print_page(headers, rows, page.view.next_cursor, "jobs")


def _in_a_row(count: int) -> str:
    """consecutive_failures as shown: at the API's bound, "or more"."""
    return f"{count}+" if count >= RECENT_RUNS else str(count)


def show_runs(page: Answer[RunList], *, as_json: bool, has_attempts: bool = False) -> None:
    """The runs, one row each; `has_attempts` adds one indented row per attempt under each
    (the columns then also name what an attempt row holds). A TRIGGERED BY column (the job
    whose run's end made the run, and how that run ended) only when a run of the page has one."""
    if as_json:
        print_json(page.raw)
        return
    is_triggered = any(run.triggered_by is not None for run in page.view.runs)
    headers: tuple[str, ...] = ("SCHEDULED (UTC)", "FIRES AT", "STATUS", "ATTEMPT", "FINISHED")
    if has_attempts:
        headers = ("SCHEDULED (UTC)", "FIRES/STARTED", "STATUS/OUTCOME", *headers[3:])
    headers += ("TRIGGERED BY", "ERROR") if is_triggered else ("ERROR",)
    rows: list[tuple[Cell, ...]] = []
    for run in page.view.runs:
        by = (_triggered_by(run),) if is_triggered else ()
        rows.append(
            (
                run.scheduled_at,
                run.fire_at,
                _status(run.status),
                str(run.attempt),
                run.finished_at or "-",
                *by,
                run.error or "",
            )
        )
        if has_attempts:
            rows.extend(_attempt_row(attempt, is_triggered) for attempt in run.attempts)
    print_page(headers, rows, page.view.next_cursor, "runs")


def show_run_outputs(page: Answer[RunList]) -> None:
    """`runs --output`: each run on a line, each of its attempts under it, and under each
    attempt what it printed (as its worker reported it), every line behind a `| ` gutter."""
    for run in page.view.runs:
        click.echo(f"{run.scheduled_at}{PLAIN_GAP}{run.status}{PLAIN_GAP}attempt {run.attempt}")
        for attempt in run.attempts:
            span = f"{attempt.started_at} - {attempt.finished_at or '-'}"
            reason = (attempt.error or "").partition("\n")[0]
            facts = (f"attempt {attempt.attempt}", attempt.outcome or "-", span, reason)
            click.echo(f"  {PLAIN_GAP.join(facts)}".rstrip())
            lines = attempt.output.splitlines() if attempt.output else []
            for line in lines:  # another's bytes: no escape sequence reaches the terminal
                click.echo(f"    | {_UNPRINTABLE.sub(_escaped, line)}".rstrip())
            if not lines:
                click.echo("    (no output)")
    if not page.view.runs:
        note("no runs")
    if page.view.next_cursor:
        note(f"more runs: add --cursor {page.view.next_cursor} for the next page, or --all")


_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # tab passes


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def _triggered_by(run: RunView) -> str:
    """`job_A succeeded`: the run of job_A at this run's scheduled time, and how it ended."""
    by = run.triggered_by
    return "-" if by is None else f"{by.job_id} {by.status}"


def _attempt_row(attempt: AttemptView, is_triggered: bool) -> tuple[Cell, ...]:
    return (
        f"  attempt {attempt.attempt}",
        attempt.started_at,
        _status(attempt.outcome) if attempt.outcome else "-",
        str(attempt.attempt),
        attempt.finished_at or "-",
        *(("",) if is_triggered else ()),
        attempt.error or "",
    )


def show_tenants(page: Answer[Tenants], *, as_json: bool) -> None:
    if as_json:
        print_json(page.raw)
        return
    headers = ("TENANT ID", "NAME", "ACTIVE JOBS", "MAX ACTIVE", "RATE/S", "ALLOWED HOSTS")
    rows = [
        (
            tenant.tenant_id,
            tenant.name,
            str(tenant.active_jobs),
            str(tenant.max_active_jobs),
            str(tenant.dispatch_rate),
            ", ".join(tenant.allowed_hosts) or "-",
        )
        for tenant in page.view.tenants
    ]
    print_page(headers, rows, page.view.next_cursor, "tenants")


def show_credentials(answer: Answer[TenantCredentials], *, as_json: bool) -> None:
    note("the token and signing secret are shown only this once: store them now")
    if as_json:
        print_json(answer.raw)
        return
    print_fields([(key, str(value)) for key, value in answer.raw.items()])


def show_trigger(answer: Answer[Triggered], *, as_json: bool) -> None:
    if as_json:
        print_json(answer.raw)
        return
    run = answer.view
    console().print(Text(f"{run.job_id}: one extra run scheduled at {run.scheduled_at}"))


def describe_schedule(schedule: Mapping[str, Any]) -> str:
    """One line for a schedule object: `at ...`, `cron '...' ZONE`, `every 5m from ...`,
    and the calendars whose days it skips; `after job_X (on success)`."""
    after = schedule.get("after")
    if isinstance(after, Mapping):
        return f"after {after.get('job_id')} (on {after.get('on') or 'success'})"
    if "run_at" in schedule:
        return f"at {schedule['run_at']}"
    if "delay" in schedule:
        return f"in {schedule['delay']}"
    if "cron" in schedule:
        text = f"cron '{schedule['cron']}' {schedule.get('timezone') or 'UTC'}"
    else:
        text = f"every {schedule['every']}"
    if schedule.get("start_at"):
        text += f" from {schedule['start_at']}"
    if schedule.get("end_at"):
        text += f" until {schedule['end_at']}"
    if schedule.get("exclude"):
        text += f" except on {', '.join(map(str, schedule['exclude']))}"
    return text


def after_text(schedule: Mapping[str, Any]) -> str | None:
    """For an `after` schedule, when its job runs: `it runs when job_X ends (success)`; None
    for a schedule with times of its own."""
    after = schedule.get("after")
    if not isinstance(after, Mapping):
        return None
    return f"it runs when {after.get('job_id')} ends ({after.get('on') or 'success'})"


def describe_target(target: Mapping[str, JSONValue]) -> str:
    """One line for a target object: `queue NAME`, `METHOD URL`, or the broker kind, the
    connection and where in the broker (`nats CONN SUBJECT`)."""
    kind = target.get("type")
    if kind == "queue":
        return f"queue {target['name']}"
    if isinstance(kind, str) and kind in BY_NAME:
        return BY_NAME[kind].describe(target)
    return f"{target.get('method', 'POST')} {target.get('url')}"


def _retry(retry: Mapping[str, JSONValue]) -> str:
    return (
        f"{retry['max_attempts']} attempts, {retry['backoff']} "
        f"from {retry['initial_delay']} up to {retry['max_delay']}"
    )


def _payload(payload: Any) -> str:
    text = json.dumps(payload, ensure_ascii=False)
    return text if len(text) <= MAX_PAYLOAD_CHARS else text[: MAX_PAYLOAD_CHARS - 3] + "..."


def _status(status: str) -> Text:
    return Text(status, style=_STATUS_STYLES.get(status, ""))


def _next_run(job: JobView) -> str:
    if job.next_run_at:
        return job.next_run_at
    if job.status == "paused":
        return "paused"
    after = job.schedule.get("after")
    if isinstance(after, Mapping) and job.status == "active":
        return f"when {after.get('job_id')} ends ({after.get('on') or 'success'})"
    return "none left"


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Cell]]) -> None:
    """The one table style: rich on a terminal, plain aligned columns when piped."""
    if sys.stdout.isatty():
        console().print(rich_table(headers, rows))
    else:
        for line in plain_lines(headers, rows):
            click.echo(line)


def rich_table(headers: Sequence[str], rows: Iterable[Sequence[Cell]]) -> Table:
    """A borderless table whose columns are never narrower than their header."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for header in headers:
        table.add_column(header, min_width=len(header), overflow="fold")
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    return table


def plain_lines(headers: Sequence[str], rows: Iterable[Sequence[Cell]]) -> list[str]:
    """Header and rows as lines of columns padded to the widest cell, three spaces apart."""
    grid = [list(headers)] + [[_plain(cell) for cell in row] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(headers))]
    return [
        PLAIN_GAP.join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in grid
    ]


def _plain(cell: Cell) -> str:
    text = cell.plain if isinstance(cell, Text) else cell
    return " ".join(text.splitlines())


def print_fields(rows: Iterable[tuple[str, Cell]]) -> None:
    """One object as `key  value` lines: rich on a terminal, plain when piped."""
    rows = list(rows)
    if not sys.stdout.isatty():
        width = max((len(key) for key, _ in rows), default=0)
        for key, value in rows:
            click.echo(f"{key.ljust(width)}{PLAIN_GAP}{_plain(value)}".rstrip())
        return
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(Text(key), value if isinstance(value, Text) else Text(value))
    console().print(table)


def print_page(
    headers: Sequence[str], rows: Sequence[Sequence[Cell]], cursor: str | None, key: str
) -> None:
    """A page of `key` as a table (or a note that there are none), then how to get the next."""
    if rows:
        print_table(headers, rows)
    else:
        note(f"no {key}")
    if cursor:
        note(f"more {key}: add --cursor {cursor} for the next page, or --all")
