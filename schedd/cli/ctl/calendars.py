"""`schedctl calendars add|ls|show|rm`: the tenant's calendars, named sets of local dates that
cron and every schedules may exclude (`schedctl add --exclude NAME`). Files are read and
checked here (calendar_files) before any request.
"""

from __future__ import annotations

import urllib.parse
from datetime import date
from itertools import groupby

import click

from schedd.calendars import check_name
from schedd.cli.ctl import render
from schedd.cli.ctl.calendar_files import CalendarFile, read_dates_file, read_ics_file
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option
from schedd.errors import InvalidRequest
from schedd.jsonbody import JSONValue
from schedd.wire.calendars import CalendarList, CalendarSummary, CalendarView

SUMMARY_JSON = '{"name", "dates_count", "first", "last", "created_at", "updated_at"}'


def calendar_path(name: str) -> str:
    return "/v1/calendars/" + urllib.parse.quote(name, safe="")


@click.group()
def calendars() -> None:
    """Manage the tenant's calendars: dates (holidays, closures) that jobs skip."""


@calendars.command(
    "add",
    epilog="""\b
Examples:
  schedctl calendars add us-holidays --dates holidays.txt
  schedctl calendars add us-holidays --ics us-holidays.ics --replace
  printf '2026-12-24\\n2026-12-31\\n' | schedctl calendars add year-end --dates -

\b
A dates file holds one YYYY-MM-DD a line (blank lines and # comments allowed). From an .ics
file, every day of its all-day events from today to 10 years ahead is taken (RRULE and RDATE
expanded, EXDATE and cancelled events left out); events at a time of day are ignored.""",
)
@click.argument("name")
@click.option("--dates", "dates_file", metavar="FILE", help="One YYYY-MM-DD a line (- for stdin).")
@click.option("--ics", "ics_file", metavar="FILE", help="An iCalendar file (- for stdin).")
@click.option(
    "--replace", is_flag=True, help="Create NAME or replace its dates (PUT) instead of failing."
)
@json_option("the API's calendar object")
@click.pass_obj
def add_calendar(
    client: Client,
    name: str,
    dates_file: str | None,
    ics_file: str | None,
    replace: bool,
    as_json: bool,
) -> None:
    """Create calendar NAME from a dates file or an iCalendar file.

    Exit 1 when NAME exists, unless --replace."""
    check_name(name, "NAME")  # bad input exits 2 before any request
    loaded = _load(dates_file, ics_file)
    if loaded.timed_events:
        events = "event" if loaded.timed_events == 1 else "events"
        render.note(f"ignored {loaded.timed_events} timed {events} (only all-day events are days)")
    dates: list[JSONValue] = list(loaded.dates)
    if replace:
        answer = client.answer(CalendarView, "PUT", calendar_path(name), {"dates": dates})
    else:
        body: JSONValue = {"name": name, "dates": dates}
        answer = client.answer(CalendarView, "POST", "/v1/calendars", body)
    if as_json:
        render.print_json(answer.raw)
    else:
        _show_list([answer.view])


def _load(dates_file: str | None, ics_file: str | None) -> CalendarFile:
    if (dates_file is None) == (ics_file is None):
        raise InvalidRequest("--dates/--ics", "give exactly one of --dates FILE or --ics FILE")
    if dates_file is not None:
        return read_dates_file(dates_file)
    assert ics_file is not None
    return read_ics_file(ics_file, today=date.today())


@calendars.command(
    "ls",
    epilog="""\b
Examples:
  schedctl calendars ls
  schedctl calendars ls --json | jq -r '.calendars[].name'""",
)
@json_option(f'{{"calendars": [{SUMMARY_JSON}, ...]}}')
@click.pass_obj
def list_calendars(client: Client, as_json: bool) -> None:
    """List the tenant's calendars: how many dates, the first and the last."""
    answer = client.answer(CalendarList, "GET", "/v1/calendars")
    if as_json:
        render.print_json(answer.raw)
    elif answer.view.calendars:
        _show_list(answer.view.calendars)
    else:
        render.note("no calendars")


def _show_list(items: list[CalendarSummary] | list[CalendarView]) -> None:
    rows = [
        (c.name, str(c.dates_count), c.first or "-", c.last or "-", c.updated_at) for c in items
    ]
    render.print_table(("NAME", "DATES", "FIRST", "LAST", "UPDATED (UTC)"), rows)


@calendars.command(
    "show",
    epilog="""\b
Examples:
  schedctl calendars show us-holidays
  schedctl calendars show us-holidays --json | jq -r '.dates[]'""",
)
@click.argument("name")
@json_option('{"name", "dates": [...], "dates_count", "first", "last", ..., "used_by"}')
@click.pass_obj
def show_calendar(client: Client, name: str, as_json: bool) -> None:
    """Show calendar NAME: its dates and how many jobs exclude it."""
    answer = client.answer(CalendarView, "GET", calendar_path(name))
    if as_json:
        render.print_json(answer.raw)
        return
    view = answer.view
    render.print_fields(
        [
            ("name", view.name),
            ("dates", f"{view.dates_count} from {view.first or '-'} to {view.last or '-'}"),
            ("used by", f"{view.used_by} job{'' if view.used_by == 1 else 's'}"),
            ("created", view.created_at),
            ("updated", view.updated_at),
        ]
    )
    years = groupby(sorted(view.dates), key=lambda day: day[:4])
    rows = [(year, " ".join(day[5:] for day in days)) for year, days in years]
    if rows:
        click.echo()
        render.print_table(("YEAR", "DAYS (MM-DD)"), rows)


@calendars.command(
    "rm",
    epilog="\b\nExamples:\n  schedctl calendars rm us-holidays",
)
@click.argument("name")
@json_option('{"name": ..., "status": "deleted"}')
@click.pass_obj
def remove_calendar(client: Client, name: str, as_json: bool) -> None:
    """Delete calendar NAME; refused (exit 1) while a job excludes it."""
    client.request("DELETE", calendar_path(name))
    if as_json:
        render.print_json({"name": name, "status": "deleted"})
