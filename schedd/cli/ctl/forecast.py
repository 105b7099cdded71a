"""`schedctl forecast`: the runs due per step of the hours ahead (GET /v1/forecast), drawn as a
bar per step with the peak named, or --json."""

from __future__ import annotations

import sys
import time

import click
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option
from schedd.timeformat import format_duration, format_instant, parse_duration, parse_instant
from schedd.wire.forecast import Forecast, ForecastStep

BAR_WIDTH = 40
MOST_BARS = 48  # the default step is the first of NICE_STEPS_S that draws at most this many
NICE_STEPS_S = (60, 300, 600, 900, 1800, 3600)
EIGHTHS = " ▏▎▍▌▋▊▉"


@click.command(
    epilog="""\b
Examples:
  schedctl forecast                      # the next 24 hours in 30-minute steps
  schedctl forecast --hours 1 --step 1m
  schedctl forecast --from 2026-12-24T00:00:00Z --hours 48 --json""",
)
@click.option(
    "--hours",
    type=click.IntRange(1, 10_000),
    default=24,
    show_default=True,
    metavar="N",
    help="How far ahead from --from.",
)
@click.option(
    "--step",
    metavar="DURATION",
    help="A bar's length, 1s to 1h (default: the shortest of 1m, 5m, 10m, 15m, 30m, 1h "
    f"that draws at most {MOST_BARS} bars).",
)
@click.option(
    "--from",
    "from_",
    metavar="INSTANT",
    help="Start (RFC 3339; default: the start of the step now is in).",
)
@json_option("the API's answer: {steps: [{at, runs}], peak: {at, runs}, ...}")
@click.pass_obj
def forecast(
    client: Client, hours: int, step: str | None, from_: str | None, as_json: bool
) -> None:
    """Show the runs due per step of the hours ahead: your tenant's, or with the admin token
    and no --tenant, the cluster's and its busiest tenants."""
    step = step or default_step(hours)
    if from_ is None:  # the current step's start: bars on whole minutes, hours
        step_ms = parse_duration(step, field="--step")
        start = format_instant(int(time.time() * 1000) // max(step_ms, 1) * max(step_ms, 1))
    else:
        start = from_
    end = format_instant(parse_instant(start, field="--from") + hours * 3_600_000)
    answer = client.forecast(from_=start, to=end, step=step)
    if as_json:
        render.print_json(answer.raw)
        return
    show_forecast(answer.view)


def default_step(hours: int) -> str:
    """The shortest nice step that draws at most MOST_BARS bars over `hours`."""
    for step_s in NICE_STEPS_S:
        if hours * 3600 / step_s <= MOST_BARS:
            return format_duration(step_s * 1000)
    return "1h"


def show_forecast(found: Forecast) -> None:
    """A bar per step, scaled to the peak; the peak named; the busiest tenants (admin)."""
    most = max(found.peak.runs, 1)
    width = len(f"{found.peak.runs:,}")
    is_tty = sys.stdout.isatty()
    out = render.console()
    for step in found.steps:
        line = _line(step, most, width, is_peak=step.at == found.peak.at and step.runs > 0)
        if is_tty:
            out.print(line)
        else:
            click.echo(line.plain.rstrip())
    click.echo(
        f"peak: {found.peak.runs:,} runs in the step from {found.peak.at} "
        f"({format_duration(int(found.step_s * 1000))} steps, {found.jobs:,} jobs)"
    )
    if found.tenants:
        render.print_table(
            ("TENANT", "RUNS", "PEAK", "PEAK AT"),
            [(t.tenant_id, f"{t.runs:,}", f"{t.peak.runs:,}", t.peak.at) for t in found.tenants],
        )
    if found.partial:
        render.note(
            "partial: the node stopped counting at its time budget; the steps are a lower bound"
        )


def _line(step: ForecastStep, most: int, width: int, *, is_peak: bool) -> Text:
    eighths = round(step.runs * BAR_WIDTH * 8 / most)
    bar = "█" * (eighths // 8) + (EIGHTHS[eighths % 8] if eighths % 8 else "")
    line = Text(f"{_when(step.at)}  ")
    line.append(bar.ljust(BAR_WIDTH), style="bold red" if is_peak else "cyan")
    line.append(f"  {step.runs:>{width},}")
    if is_peak:
        line.append("  ◀ peak", style="bold red")
    return line


def _when(at: str) -> str:
    """2026-12-04T23:30:00Z as 2026-12-04 23:30Z (seconds only when not zero)."""
    day, clock = at.rstrip("Z").split("T")
    return f"{day} {clock[:5] if clock.endswith(':00') else clock}Z"
