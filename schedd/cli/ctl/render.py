"""What schedctl prints: the API's JSON for scripts (`--json`), tables for people.

One table style everywhere (`print_table`): on a terminal a rich table that never splits a
header word; piped, plain columns aligned with spaces, never wrapped nor cut (like
`kubectl get`), so `schedctl ls | grep` and `awk` see one row per line.

Also the output and paging options every command shares. Data goes to stdout, messages to
stderr; text from the server is never read as rich markup.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from schedd.targets import BY_NAME

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


def print_json(data: Any) -> None:
    """One line of JSON on stdout: the stable contract for scripts."""
    click.echo(json.dumps(data, ensure_ascii=False))


def note(message: str) -> None:
    """A message for people, on stderr (never mixed into the data on stdout)."""
    console(stderr=True).print(Text(message, style="yellow"))


def show_job(job: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print_json(job)
        return
    rows = [
        ("job_id", job["job_id"]),
        ("name", job.get("name") or "-"),
        ("status", _status(job["status"])),
        ("schedule", describe_schedule(job["schedule"])),
        ("next run", _next_run(job)),
        ("window", job.get("window") or "-"),
        ("target", describe_target(job["target"])),
        ("payload", _payload(job.get("payload"))),
        ("retry", _retry(job["retry"])),
        ("misfire", job["misfire_policy"]),
        ("overlap", job["overlap_policy"]),
        ("version", str(job["version"])),
        ("created", job["created_at"]),
        ("updated", job["updated_at"]),
    ]
    print_fields(rows)


def show_jobs(page: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print_json(page)
        return
    headers = ("JOB ID", "NAME", "STATUS", "SCHEDULE", "TARGET", "NEXT RUN (UTC)")
    rows = [
        (
            job["job_id"],
            job.get("name") or "-",
            _status(job["status"]),
            describe_schedule(job["schedule"]),
            describe_target(job["target"]),
            job.get("next_run_at") or "-",
        )
        for job in page["jobs"]
    ]
    _print_page(headers, rows, page, "jobs")


def show_runs(page: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print_json(page)
        return
    headers = ("SCHEDULED (UTC)", "FIRES AT", "STATUS", "ATTEMPT", "FINISHED", "ERROR")
    rows = [
        (
            run["scheduled_at"],
            run["fire_at"],
            _status(run["status"]),
            str(run["attempt"]),
            run.get("finished_at") or "-",
            run.get("error") or "",
        )
        for run in page["runs"]
    ]
    _print_page(headers, rows, page, "runs")


def show_tenants(page: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print_json(page)
        return
    headers = ("TENANT ID", "NAME", "ACTIVE JOBS", "MAX ACTIVE", "RATE/S", "ALLOWED HOSTS")
    rows = [
        (
            tenant["tenant_id"],
            tenant["name"],
            str(tenant["active_jobs"]),
            str(tenant["max_active_jobs"]),
            str(tenant["dispatch_rate"]),
            ", ".join(tenant["allowed_hosts"]) or "-",
        )
        for tenant in page["tenants"]
    ]
    _print_page(headers, rows, page, "tenants")


def show_credentials(answer: dict[str, Any], *, as_json: bool) -> None:
    note("the token and signing secret are shown only this once: store them now")
    if as_json:
        print_json(answer)
        return
    print_fields([(key, str(value)) for key, value in answer.items()])


def show_trigger(answer: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print_json(answer)
        return
    console().print(
        Text(f"{answer['job_id']}: one extra run scheduled at {answer['scheduled_at']}")
    )


def describe_schedule(schedule: dict[str, Any]) -> str:
    """One line for a schedule object: `at ...`, `cron '...' ZONE`, `every 5m from ...`."""
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
    return text


def describe_target(target: dict[str, Any]) -> str:
    """One line for a target object: `queue NAME`, `METHOD URL`, or the broker kind, the
    connection and where in the broker (`nats CONN SUBJECT`)."""
    kind = target.get("type")
    if kind == "queue":
        return f"queue {target['name']}"
    if isinstance(kind, str) and kind in BY_NAME:
        return BY_NAME[kind].describe(target)
    return f"{target.get('method', 'POST')} {target.get('url')}"


def _retry(retry: dict[str, Any]) -> str:
    return (
        f"{retry['max_attempts']} attempts, {retry['backoff']} "
        f"from {retry['initial_delay']} up to {retry['max_delay']}"
    )


def _payload(payload: Any) -> str:
    text = json.dumps(payload, ensure_ascii=False)
    return text if len(text) <= MAX_PAYLOAD_CHARS else text[: MAX_PAYLOAD_CHARS - 3] + "..."


def _status(status: str) -> Text:
    return Text(status, style=_STATUS_STYLES.get(status, ""))


def _next_run(job: dict[str, Any]) -> str:
    if job.get("next_run_at"):
        return str(job["next_run_at"])
    return "paused" if job["status"] == "paused" else "none left"


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


def _print_page(
    headers: Sequence[str], rows: Sequence[Sequence[Cell]], page: dict[str, Any], key: str
) -> None:
    if rows:
        print_table(headers, rows)
    else:
        note(f"no {key}")
    if page.get("next_cursor"):
        note(f"more {key}: add --cursor {page['next_cursor']} for the next page, or --all")
