"""`schedctl next`: show a schedule's next runs offline, with the same engine dispatch uses, or
an existing job's through the API's preview endpoint (the job's own schedule, as stored; a job
that runs after another has no times of its own, and is said so without a preview); and
`schedctl reschedule --preview`'s comparison of a job's schedule with a new one."""

from __future__ import annotations

import time
from datetime import date, datetime
from typing import Any

import click
import msgspec
from click.core import ParameterSource
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.calendar_files import occurrences_outside, read_calendar_file
from schedd.cli.ctl.client import Client
from schedd.errors import InvalidRequest
from schedd.occurrence import describe
from schedd.schedule import occurrences, parse_schedule
from schedd.timeformat import format_instant, parse_instant
from schedd.wire.jobs import OccurrenceView, PreviewResult

MAX_COUNT = 1000
JOB_ID_PREFIX = "job_"  # no cron expression starts so: the argument is a job id


@click.command(
    "next",
    epilog="""\b
Examples:
  schedctl next '0 8 * * MON-FRI' --tz America/New_York
  schedctl next '30 2 * * *' --tz Europe/Berlin --after 2027-03-27T00:00:00Z -n 3
  schedctl next --every 90m --start 2026-12-01T09:00:00Z
  schedctl next --at 2026-12-24T18:00:00+01:00 --json
  schedctl next '0 9 * * *' --tz America/New_York --calendar us-holidays.ics
  schedctl next job_0123abcd -n 3    # a job's own schedule, through the API""",
)
@click.argument("expr", metavar="[EXPR|JOB_ID]", required=False)
@click.option(
    "--tz",
    "--timezone",
    "timezone",
    metavar="ZONE",
    default="UTC",
    show_default=True,
    help="IANA time zone.",
)
@click.option(
    "--every",
    metavar="DURATION",
    help="Interval instead of EXPR: 90s, 10m, 2h, 1d (a bare number is seconds).",
)
@click.option(
    "--start", metavar="INSTANT", help="With --every: the first run (RFC 3339); default now."
)
@click.option(
    "--at", "run_at", metavar="INSTANT", help="One-time run instead of EXPR (RFC 3339 with offset)."
)
@click.option(
    "--after",
    metavar="INSTANT",
    help="Show runs strictly after this instant (RFC 3339); default now.",
)
@click.option(
    "-n", "--count", metavar="N", default=5, show_default=True, help="How many runs to show."
)
@click.option(
    "--calendar",
    "calendar_file",
    metavar="FILE",
    help="Leave out runs whose local date (in --tz; UTC for --every) is in FILE: one "
    "YYYY-MM-DD a line, or an .ics file's all-day days.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print {"runs": ["...Z", ...], "occurrences": [{"at", "local", "zone", "abbreviation",'
    ' "note"}, ...]}.',
)
@click.pass_context
def next_runs(
    ctx: click.Context,
    expr: str | None,
    timezone: str,
    every: str | None,
    start: str | None,
    run_at: str | None,
    after: str | None,
    count: int,
    calendar_file: str | None,
    as_json: bool,
) -> None:
    """Show the next runs of a cron EXPR (or --every, or --at) offline, or of JOB_ID's
    schedule through the API: in UTC and in the schedule's zone, with a note where daylight
    saving time moves or collapses a run."""
    if after is not None and after.startswith(JOB_ID_PREFIX):
        raise InvalidRequest(
            "--after",
            "is an instant here (the runs after it are shown), not a job: a job that runs after "
            f"another has no times of its own to preview (schedctl next {JOB_ID_PREFIX}... "
            "says which job it follows)",
        )
    if sum(x is not None for x in (expr, every, run_at)) != 1:
        raise InvalidRequest("schedule", "give exactly one of EXPR, JOB_ID, --every or --at")
    if not 1 <= count <= MAX_COUNT:
        raise InvalidRequest("count", f"must be from 1 to {MAX_COUNT}, got {count}")
    if expr is not None and expr.startswith(JOB_ID_PREFIX):
        _show_job_runs(ctx, expr, after=after, count=count, as_json=as_json)
        return
    now_ms = int(time.time() * 1000)
    after_ms = now_ms if after is None else parse_instant(after, field="after")
    spec: dict[str, str]
    if expr is not None:
        spec = {"cron": expr, "timezone": timezone}
    elif every is not None:
        spec = {"every": every} | ({"start_at": start} if start else {})
    else:
        spec = {"run_at": str(run_at)}
    schedule = parse_schedule(spec, now_ms=min(now_ms, after_ms))
    if calendar_file is None:
        runs = occurrences(schedule, after_ms, 2**62, count)
    elif run_at is not None:
        raise InvalidRequest("--calendar", "applies to EXPR and --every only")
    else:
        dates = set(read_calendar_file(calendar_file, today=date.today()).dates)
        zone_name = timezone if expr is not None else "UTC"
        runs = occurrences_outside(schedule, after_ms, count, dates=dates, zone=zone_name)
    answer = PreviewResult(
        runs=[format_instant(ms) for ms in runs],
        occurrences=[OccurrenceView.of(o) for o in describe(schedule, runs, after_ms)],
    )
    if as_json:
        click.echo(msgspec.json.encode(answer).decode())
    else:
        print_runs(answer)


def _show_job_runs(
    ctx: click.Context, job_id: str, *, after: str | None, count: int, as_json: bool
) -> None:
    """GET the job, then preview its schedule (start and end included) through the API."""
    for name, flag in (("timezone", "--tz"), ("start", "--start"), ("calendar_file", "--calendar")):
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT):
            raise InvalidRequest(flag, "does not go with JOB_ID: the job's own schedule is used")
    if after is not None:
        parse_instant(after, field="after")  # bad input fails before any request
    client: Client = ctx.obj
    job = client.get_job(job_id).view
    follows = render.after_text(job.schedule)
    if follows is not None:  # no times of its own: the node's preview refuses it
        if as_json:
            render.print_json({"runs": [], "occurrences": [], "after": job.schedule["after"]})
        else:
            render.console().print(Text(f"{job_id} has no times of its own: {follows}"))
        return
    answer = client.preview_schedule(job.schedule, after=after, count=count)
    if as_json:
        render.print_json(answer.raw)
        return
    if job.status != "active":
        render.note(f"{job_id} is {job.status}: it fires none of these runs while it is")
    print_runs(answer.view)


def print_runs(answer: PreviewResult) -> None:
    """The runs in UTC and, as the node (or this process offline) described them, in the
    schedule's zone with its DST notes: no conversion here. A zone column only when it is not
    UTC, a note column only when a run has one."""
    if not answer.runs:
        render.console().print("no runs left: the schedule has ended", style="yellow")
        return
    shown = answer.occurrences if len(answer.occurrences) == len(answer.runs) else []
    zone = shown[0].zone if shown and shown[0].zone != "UTC" else None
    has_notes = any(o.note for o in shown)
    headers = [
        "#",
        *([f"local ({zone})"] if zone else []),
        "UTC",
        *(["note"] if has_notes else []),
    ]
    rows = []
    for i, at in enumerate(answer.runs, start=1):
        local = [_local_text(shown[i - 1])] if zone else []
        note = [shown[i - 1].note or ""] if has_notes else []
        rows.append([str(i), *local, at, *note])
    render.print_table(headers, rows)


def _local_text(occurrence: OccurrenceView) -> str:
    """'Sun 2027-03-28 03:00 CEST (+0200)': the node's wall time and offset, as given."""
    local = datetime.fromisoformat(occurrence.local)
    return f"{local:%a %Y-%m-%d %H:%M} {occurrence.abbreviation} ({local:%z})"


def preview_change(client: Client, job_id: str, schedule: dict[str, Any], *, as_json: bool) -> None:
    """`reschedule --preview`: the current and the new schedule's next 10 runs side by side;
    an `after` schedule has no times to show (the node's preview refuses it), so its side is
    said in a sentence instead."""
    current = client.get_job(job_id).view.schedule
    new_after, current_after = render.after_text(schedule), render.after_text(current)
    if new_after is None and current_after is None:
        answer = client.preview_schedule(schedule, after=None, count=10, current=current)
        if as_json:
            render.print_json(answer.raw)
        else:
            print_side_by_side(answer.view)
        return
    if new_after is not None:  # nothing of the node's to show for the new side
        if as_json:
            render.print_json({"runs": [], "occurrences": [], "after": schedule["after"]})
        else:
            render.console().print(Text(f"{job_id} would have no times of its own: {new_after}"))
        return
    render.note(f"{job_id} has no times of its own now: {current_after}")
    answer = client.preview_schedule(schedule, after=None, count=10)
    if as_json:
        render.print_json(answer.raw)
    else:
        print_runs(answer.view)


def print_side_by_side(answer: PreviewResult) -> None:
    """An edit's runs: the current schedule's and the new one's, row by row, each as the node
    described it (its zone, the wall time and offset, the DST note)."""
    current = answer.current_occurrences if isinstance(answer.current_occurrences, list) else []
    proposed = answer.occurrences
    if not current and not proposed:
        render.console().print("no runs left in either schedule", style="yellow")
        return
    headers = ["#", *_side_headers("current", current), *_side_headers("new", proposed)]
    rows = [
        [str(i + 1), *_side_cells(current, i), *_side_cells(proposed, i)]
        for i in range(max(len(current), len(proposed)))
    ]
    render.print_table(headers, rows)


def _side_headers(name: str, shown: list[OccurrenceView]) -> list[str]:
    return [f"{name} ({shown[0].zone})" if shown else name, "note"]


def _side_cells(shown: list[OccurrenceView], i: int) -> list[str]:
    if i >= len(shown):
        return ["-" if i == len(shown) else "", ""]  # "-": the schedule ends here
    return [_local_text(shown[i]), shown[i].note or ""]
